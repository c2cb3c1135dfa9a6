/* SPDX-License-Identifier: Apache-2.0 */
/* Unique ids: who holds a message-id, judged from claims in stream order. */
#include <criterion/criterion.h>
#include <string.h>

#include "requests.h"

static amqp_bytes_t
b(const char *s)
{
	return amqp_cstring_bytes(s);
}

/* Forget what lapsed; how many claims are left. */
static size_t
prune(struct requests *c, int64_t now)
{
	(void)requests_prune(c, now);
	return c->n[REQUESTS_CLAIM];
}

static struct claim_verdict
claim(struct requests *c, const char *mid, const char *id, int replace,
      int64_t at, int64_t due, const char *scope)
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
	cr_assert_eq(requests_claim(c, &e, b(scope), &v), 0);
	return v;
}

Test(claims, keep_the_first_claim_wins_while_it_waits)
{
	struct requests c;
	struct claim_verdict v;

	requests_init(&c);
	v = claim(&c, "r-1", "aaaa", 0, 100, 5000, "");
	cr_assert(v.won);
	v = claim(&c, "r-1", "bbbb", 0, 200, 6000, "");
	cr_assert_not(v.won, "a duplicate while the first waits");
	cr_assert_not(v.replaced);
	cr_assert_str_eq(requests_holder(&c, b(""), b("r-1"), 4999)->id,
	                 "aaaa");
	cr_assert_null(requests_holder(&c, b(""), b("r-1"), 5000), "due: gone");
	/* Claimed after the holder's due time: a new holder. */
	v = claim(&c, "r-1", "cccc", 0, 5001, 9000, "");
	cr_assert(v.won);
	/* The same claim written twice holds on. */
	v = claim(&c, "r-1", "cccc", 0, 5002, 9000, "");
	cr_assert(v.won);
	requests_free(&c);
}

Test(claims, replace_takes_the_id_from_the_holder_of_its_own_scope)
{
	struct requests c;
	struct claim_verdict v;

	requests_init(&c);
	claim(&c, "r-1", "aaaa", 1, 100, 5000, "alice");
	v = claim(&c, "r-1", "bbbb", 1, 200, 3000, "alice");
	cr_assert(v.won);
	cr_assert(v.replaced);
	cr_assert_str_eq(v.old_id, "aaaa");
	cr_assert_eq(v.old_due, 5000);
	cr_assert_str_eq(requests_holder(&c, b("alice"), b("r-1"), 250)->id,
	                 "bbbb");
	/* Another publisher's "r-1" is another id: it replaces nothing of
	 * alice's, and holds its own. */
	v = claim(&c, "r-1", "cccc", 1, 300, 3000, "bob");
	cr_assert(v.won);
	cr_assert_not(v.replaced, "bob took nothing from alice");
	cr_assert_str_eq(requests_holder(&c, b("alice"), b("r-1"), 350)->id,
	                 "bbbb");
	cr_assert_str_eq(requests_holder(&c, b("bob"), b("r-1"), 350)->id,
	                 "cccc");
	requests_free(&c);
}

Test(claims, the_same_message_id_of_two_users_is_two_ids)
{
	struct requests c;
	struct claim_verdict v;

	requests_init(&c);
	v = claim(&c, "inv-1", "aaaa", 0, 100, 5000, "alice");
	cr_assert(v.won);
	v = claim(&c, "inv-1", "bbbb", 0, 200, 5000, "bob");
	cr_assert(v.won, "bob's keep inv-1 is no duplicate of alice's");
	cr_assert_not(v.lost);
	v = claim(&c, "inv-1", "cccc", 0, 300, 5000, "");
	cr_assert(v.won, "the anonymous scope is a third one");
	cr_assert_eq(c.n[REQUESTS_CLAIM], 3);
	/* Within one scope keep still keeps the first. */
	v = claim(&c, "inv-1", "dddd", 0, 400, 5000, "bob");
	cr_assert(v.lost);
	v = claim(&c, "inv-1", "eeee", 0, 500, 5000, "");
	cr_assert(v.lost, "anonymous publishers share one scope");
	cr_assert_null(requests_holder(&c, b("carol"), b("inv-1"), 600));
	cr_assert_str_eq(requests_holder(&c, b(""), b("inv-1"), 600)->id,
	                 "cccc");
	cr_assert_eq(c.n[REQUESTS_CLAIM], 3);
	requests_free(&c);
}

Test(claims, a_scope_is_not_run_together_with_the_message_id)
{
	struct requests c;
	struct claim_verdict v;

	requests_init(&c);
	/* "ab" + "c" and "a" + "bc" would be one string run together. */
	v = claim(&c, "c", "aaaa", 0, 100, 5000, "ab");
	cr_assert(v.won);
	v = claim(&c, "bc", "bbbb", 0, 100, 5000, "a");
	cr_assert(v.won);
	cr_assert_null(requests_holder(&c, b("a"), b("c"), 200));
	cr_assert_null(requests_holder(&c, b("ab"), b("bc"), 200));
	cr_assert_str_eq(requests_holder(&c, b("ab"), b("c"), 200)->id, "aaaa");
	cr_assert_str_eq(requests_holder(&c, b("a"), b("bc"), 200)->id, "bbbb");
	requests_free(&c);
}

Test(claims, a_claim_without_a_daemon_s_cascade_id_is_ignored)
{
	struct requests c;
	struct claim_verdict v;

	requests_init(&c);
	v = claim(&c, "r-1", "", 0, 100, 5000, "alice");
	cr_assert_not(v.won);
	cr_assert_not(v.lost);
	v = claim(&c, "r-1", "0123456789abcdef0", 0, 100, 5000, "alice");
	cr_assert_not(v.won || v.lost, "17 digits: no daemon's");
	cr_assert_eq(c.n[REQUESTS_CLAIM], 0);
	v = claim(&c, "r-1", "0123456789abcdef", 0, 100, 5000, "alice");
	cr_assert(v.won);
	cr_assert_str_eq(requests_holder(&c, b("alice"), b("r-1"), 200)->id,
	                 "0123456789abcdef");
	requests_free(&c);
}

Test(claims, cancel_and_reschedule_move_the_holder_s_end)
{
	struct requests c;
	struct claim_verdict v;

	requests_init(&c);
	claim(&c, "r-1", "aaaa", 0, 100, 5000, "alice");
	requests_claims_rescheduled(&c, b("r-1"), 8000, b("alice"), 0);
	cr_assert_not_null(requests_holder(&c, b("alice"), b("r-1"), 7000));
	/* bob may not change alice's message: neither request counts. */
	requests_claims_cancelled(&c, b("r-1"), 7500, b("bob"), 0);
	requests_claims_rescheduled(&c, b("r-1"), 1000, b("bob"), 0);
	cr_assert_not_null(requests_holder(&c, b("alice"), b("r-1"), 7600));
	/* A control user may. */
	requests_claims_cancelled(&c, b("r-1"), 7500, b("ops"), 1);
	cr_assert_null(requests_holder(&c, b("alice"), b("r-1"), 7600));
	v = claim(&c, "r-1", "bbbb", 0, 7600, 9000, "alice");
	cr_assert(v.won, "the id is free once its holder was cancelled");
	cr_assert_eq(prune(&c, 9000 + 86399999), 1);
	cr_assert_eq(prune(&c, 9000 + 86400000), 0);
	requests_free(&c);
}

Test(claims, a_cancel_reaches_the_scopes_its_requester_may_change)
{
	struct requests c;

	requests_init(&c);
	claim(&c, "r-1", "aaaa", 0, 100, 5000, "alice");
	claim(&c, "r-1", "bbbb", 0, 100, 5000, "bob");
	claim(&c, "r-1", "cccc", 0, 100, 5000, "");
	/* bob's cancel: his own and the anonymous one, not alice's. */
	requests_claims_cancelled(&c, b("r-1"), 200, b("bob"), 0);
	cr_assert_not_null(requests_holder(&c, b("alice"), b("r-1"), 300));
	cr_assert_null(requests_holder(&c, b("bob"), b("r-1"), 300));
	cr_assert_null(requests_holder(&c, b(""), b("r-1"), 300));
	requests_claims_cancelled(&c, b("r-1"), 400, b("ops"), 1);
	cr_assert_null(requests_holder(&c, b("alice"), b("r-1"), 500));
	requests_free(&c);
}

Test(claims, prune_drops_each_scope_at_its_own_time)
{
	struct requests c;

	requests_init(&c);
	/* until = due + 1 day: the head of the list goes first. */
	claim(&c, "r-1", "aaaa", 0, 100, 5000, "alice");
	claim(&c, "r-1", "bbbb", 0, 100, 9000, "bob");
	claim(&c, "r-1", "cccc", 0, 100, 7000, "carol");
	claim(&c, "r-2", "dddd", 0, 100, 6000, "alice");
	cr_assert_eq(prune(&c, 86400000 + 6500), 2);
	cr_assert_null(requests_holder(&c, b("alice"), b("r-1"), 0));
	cr_assert_null(requests_holder(&c, b("alice"), b("r-2"), 0));
	cr_assert_not_null(requests_holder(&c, b("bob"), b("r-1"), 0));
	cr_assert_not_null(requests_holder(&c, b("carol"), b("r-1"), 0));
	cr_assert_eq(prune(&c, 86400000 + 7000), 1);
	cr_assert_str_eq(requests_holder(&c, b("bob"), b("r-1"), 0)->id,
	                 "bbbb");
	cr_assert_eq(prune(&c, 86400000 + 9000), 0);
	cr_assert_eq(c.map.n, 0);
	requests_free(&c);
}

/* The cancellation a lost claim of scope makes for cascade id id, as
 * requests_read makes it. */
static void
lose(struct requests *k, const char *id, const char *scope)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = EVENT_CANCEL;
	e.cancel = b(id);
	e.at = 100;
	e.until = 10000;
	e.cancel_reason = CANCEL_DUPLICATE;
	cr_assert_eq(requests_add(k, &e, b(scope), 0), 0);
}

Test(claims, a_loser_is_cancelled_by_its_cascade_id_only)
{
	struct requests k;
	struct cancel_match m;

	requests_init(&k);
	/* A forged second claim whose x-cascade-id is alice's plain
	 * message-id "order-42": its loss names "order-42". */
	lose(&k, "order-42", "mallory");
	cr_assert_eq(requests_match(&k, b("order-42"), b("1111222233334444"),
	                            b("alice"), 0, 200, &m),
	             0, "a message-id is never a loser's");
	cr_assert_null(m.refused, "nor a request to refuse and park");
	/* Anonymous messages too: a message-id is not a cascade id. */
	cr_assert_eq(requests_match(&k, b("order-42"), b("1111222233334444"),
	                            b(""), 0, 200, &m),
	             0);
	/* By cascade id, only within the claim's scope. */
	lose(&k, "aaaabbbbccccdddd", "mallory");
	cr_assert_eq(requests_match(&k, b("x"), b("aaaabbbbccccdddd"),
	                            b("alice"), 0, 200, &m),
	             0, "mallory's claim takes nothing from alice");
	cr_assert_null(m.refused);
	cr_assert_eq(requests_match(&k, b("x"), b("aaaabbbbccccdddd"),
	                            b("mallory"), 0, 200, &m),
	             1);
	cr_assert_not_null(m.cancel);
	cr_assert_eq(m.cancel->reason, CANCEL_DUPLICATE);
	/* A message-id equal to its own cascade id is matched as the
	 * cascade id. */
	cr_assert_eq(requests_match(&k, b("aaaabbbbccccdddd"),
	                            b("aaaabbbbccccdddd"), b("mallory"), 0, 200,
	                            &m),
	             1);
	requests_free(&k);
}

Test(claims, an_asked_cancel_and_a_loser_for_one_id_are_held_apart)
{
	struct requests k;
	struct cancel_match m;
	struct event e;

	requests_init(&k);
	lose(&k, "aaaabbbbccccdddd", "alice");
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_CANCEL;
	e.cancel = b("aaaabbbbccccdddd");
	e.at = 150;
	e.until = 10000;
	e.park = 1;
	cr_assert_eq(requests_add(&k, &e, b("alice"), 0), 0);
	requests_match(&k, b(""), b("aaaabbbbccccdddd"), b("alice"), 0, 200,
	               &m);
	cr_assert_not_null(m.cancel);
	cr_assert_eq(m.cancel->reason, CANCEL_ASKED,
	             "the asked one, with park, wins");
	cr_assert_eq(m.cancel->park, 1);
	cr_assert_eq(requests_prune(&k, 9999), 1);
	cr_assert_eq(requests_prune(&k, 10000), 0);
	requests_free(&k);
}
