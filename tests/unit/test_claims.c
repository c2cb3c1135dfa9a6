/* Unique ids: who holds a message-id, judged from claims in stream order. */
#include <criterion/criterion.h>
#include <string.h>

#include "claims.h"

static amqp_bytes_t
b(const char *s)
{
	return amqp_cstring_bytes(s);
}

static struct claim_verdict
claim(struct claims *c, const char *mid, const char *id, int replace,
      int64_t at, int64_t due, const char *owner, int control)
{
	struct claim_verdict v;
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = EVENT_CLAIM;
	e.cancel = b(mid);
	e.id = b(id);
	e.replace = replace;
	e.at = at;
	e.due = due;
	e.until = due + 1000;
	cr_assert_eq(claims_add(c, &e, b(owner), control, &v), 0);
	return v;
}

Test(claims, keep_the_first_claim_wins_while_it_waits)
{
	struct claims c;
	struct claim_verdict v;

	claims_init(&c);
	v = claim(&c, "r-1", "aaaa", 0, 100, 5000, "", 0);
	cr_assert(v.won);
	v = claim(&c, "r-1", "bbbb", 0, 200, 6000, "", 0);
	cr_assert_not(v.won, "a duplicate while the first waits");
	cr_assert_not(v.replaced);
	cr_assert_str_eq(claims_holder(&c, b("r-1"), 4999)->id, "aaaa");
	cr_assert_null(claims_holder(&c, b("r-1"), 5000), "due: gone");
	/* Claimed after the holder's due time: a new holder. */
	v = claim(&c, "r-1", "cccc", 0, 5001, 9000, "", 0);
	cr_assert(v.won);
	/* The same claim written twice holds on. */
	v = claim(&c, "r-1", "cccc", 0, 5002, 9000, "", 0);
	cr_assert(v.won);
	claims_free(&c);
}

Test(claims, replace_takes_the_id_from_the_holder)
{
	struct claims c;
	struct claim_verdict v;

	claims_init(&c);
	claim(&c, "r-1", "aaaa", 1, 100, 5000, "alice", 0);
	v = claim(&c, "r-1", "bbbb", 1, 200, 3000, "alice", 0);
	cr_assert(v.won);
	cr_assert(v.replaced);
	cr_assert_str_eq(v.old_id, "aaaa");
	cr_assert_eq(v.old_due, 5000);
	cr_assert_str_eq(claims_holder(&c, b("r-1"), 250)->id, "bbbb");
	/* Another publisher may not; a control user may. */
	v = claim(&c, "r-1", "cccc", 1, 300, 3000, "bob", 0);
	cr_assert_not(v.won);
	cr_assert(v.refused);
	v = claim(&c, "r-1", "dddd", 1, 400, 3000, "ops", 1);
	cr_assert(v.replaced);
	claims_free(&c);
}

Test(claims, cancel_and_reschedule_move_the_holder_s_end)
{
	struct claims c;
	struct claim_verdict v;

	claims_init(&c);
	claim(&c, "r-1", "aaaa", 0, 100, 5000, "alice", 0);
	claims_rescheduled(&c, b("r-1"), 8000, b("alice"), 0);
	cr_assert_not_null(claims_holder(&c, b("r-1"), 7000));
	/* bob may not change alice's message: neither request counts. */
	claims_cancelled(&c, b("r-1"), 7500, b("bob"), 0);
	claims_rescheduled(&c, b("r-1"), 1000, b("bob"), 0);
	cr_assert_not_null(claims_holder(&c, b("r-1"), 7600));
	/* A control user may. */
	claims_cancelled(&c, b("r-1"), 7500, b("ops"), 1);
	cr_assert_null(claims_holder(&c, b("r-1"), 7600));
	v = claim(&c, "r-1", "bbbb", 0, 7600, 9000, "", 0);
	cr_assert(v.won, "the id is free once its holder was cancelled");
	cr_assert_eq(claims_prune(&c, 9000 + 86399999), 1);
	cr_assert_eq(claims_prune(&c, 9000 + 86400000), 0);
	claims_free(&c);
}
