/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The request state (requests.h): the requests held and who may make
 * them, and what the one map does for every kind: keys apart by kind, one
 * prune, one count per kind, one reading of a record.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "events.h"
#include "headers.h"
#include "requests.h"

static amqp_bytes_t
b(const char *s)
{
	return amqp_cstring_bytes(s);
}

static int
same(amqp_bytes_t a, const char *s)
{
	return headers_key_is(a, s);
}

/* Hold a request for id, as daemon_record does. */
static int
add(struct requests *c, const char *id, enum event_kind kind, int park,
    int64_t due, int64_t at, int64_t until, const char *by, int control)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = kind;
	e.cancel = b(id);
	e.park = park;
	e.due = due;
	e.at = at;
	e.until = until;
	return requests_add(c, &e, b(by), control);
}

static int
cancel(struct requests *c, const char *id, int park, int64_t until)
{
	return add(c, id, EVENT_CANCEL, park, 0, 0, until, "", 1);
}

/* The cancellation in force for a message nobody owns, or NULL. */
static const struct cancel *
find(struct requests *c, const char *mid, const char *cid, int64_t now)
{
	struct cancel_match m;

	requests_match(c, b(mid), b(cid), b(""), 0, now, &m);
	return m.cancel;
}

Test(requests, found_by_message_id_or_cascade_id_until_they_lapse)
{
	struct requests c;
	const struct cancel *k;

	requests_init(&c);
	cr_assert_null(find(&c, "order-1", "id-1", 0));
	cr_assert_eq(cancel(&c, "order-1", 0, 1000), 0);
	cr_assert_eq(cancel(&c, "id-2", 1, 2000), 0);
	k = find(&c, "order-1", "id-1", 999);
	cr_assert_not_null(k);
	cr_assert_eq(k->park, 0);
	cr_assert_null(find(&c, "order-1", "id-1", 1000), "lapsed");
	k = find(&c, "", "id-2", 10);
	cr_assert_not_null(k, "a message without message-id, by cascade id");
	cr_assert_eq(k->park, 1);
	k = find(&c, "order-9", "id-2", 10);
	cr_assert_not_null(k, "by cascade id when the message-id is not");
	cr_assert_null(find(&c, "id-2", "", 3000));
	requests_free(&c);
}

Test(requests, a_later_request_wins_and_the_longer_life_stays)
{
	struct requests c;
	const struct cancel *k;

	requests_init(&c);
	add(&c, "order-1", EVENT_CANCEL, 0, 0, 10, 5000, "", 1);
	add(&c, "order-1", EVENT_CANCEL, 1, 0, 20, 3000, "", 1);
	k = find(&c, "order-1", "", 4000);
	cr_assert_not_null(k);
	cr_assert_eq(k->park, 1);
	cr_assert_eq(k->until, 5000);
	requests_free(&c);
}

Test(requests, prune_forgets_lapsed_requests_only)
{
	struct requests c;
	char id[16];

	requests_init(&c);
	for (int i = 0; i < 100; i++) {
		snprintf(id, sizeof(id), "m%d", i);
		cancel(&c, id, 0, i < 60 ? 100 : 10000);
	}
	/* Two requests for one id, one lapsing: the other stays. */
	add(&c, "m99", EVENT_RESCHEDULE, 0, 7, 1, 100, "", 1);
	cr_assert_eq(requests_prune(&c, 100), 40);
	cr_assert_null(find(&c, "m0", "", 50));
	cr_assert_not_null(find(&c, "m99", "", 50));
	requests_free(&c);
}

Test(requests, a_requester_changes_only_its_own_or_unowned_messages)
{
	struct requests c;
	struct cancel_match m;

	requests_init(&c);
	add(&c, "order-1", EVENT_CANCEL, 0, 0, 10, 5000, "bob", 0);
	/* alice's message: bob may not, and his request is refused. */
	cr_assert_eq(
	    requests_match(&c, b("order-1"), b(""), b("alice"), 0, 100, &m), 1);
	cr_assert_null(m.cancel);
	cr_assert_not_null(m.refused);
	cr_assert_eq(m.refused->by_len, 3);
	cr_assert_eq(memcmp(m.refused->by, "bob", 3), 0);
	/* Once parked, not reported again. */
	m.refused->refusal_parked = 1;
	cr_assert_eq(
	    requests_match(&c, b("order-1"), b(""), b("alice"), 0, 100, &m), 0);
	/* His own, and one published without a user-id: yes. */
	requests_match(&c, b("order-1"), b(""), b("bob"), 0, 100, &m);
	cr_assert_not_null(m.cancel);
	requests_match(&c, b("order-1"), b(""), b(""), 0, 100, &m);
	cr_assert_not_null(m.cancel);
	/* A control user's request: any message; bob's stays held too. */
	add(&c, "order-1", EVENT_CANCEL, 1, 0, 20, 5000, "cascade", 1);
	requests_match(&c, b("order-1"), b(""), b("alice"), 0, 100, &m);
	cr_assert_not_null(m.cancel);
	cr_assert_eq(m.cancel->park, 1);
	cr_assert_null(m.refused);
	requests_free(&c);
}

Test(requests, a_reschedule_moves_messages_first_seen_before_it)
{
	struct requests c;
	struct cancel_match m;

	requests_init(&c);
	add(&c, "r-1", EVENT_RESCHEDULE, 0, 9000, 1000, 50000, "", 1);
	requests_match(&c, b("r-1"), b(""), b(""), 999, 1500, &m);
	cr_assert_not_null(m.reschedule);
	cr_assert_eq(m.reschedule->due, 9000);
	cr_assert_null(m.cancel);
	/* First seen after the request: not for it. */
	cr_assert_eq(requests_match(&c, b("r-1"), b(""), b(""), 1001, 1500, &m),
	             0);
	/* The later of two reschedules wins. */
	add(&c, "r-1", EVENT_RESCHEDULE, 0, 4000, 1200, 50000, "x", 0);
	requests_match(&c, b("r-1"), b(""), b(""), 999, 1500, &m);
	cr_assert_eq(m.reschedule->due, 4000);
	/* A cancel in force wins over both. */
	add(&c, "r-1", EVENT_CANCEL, 0, 0, 1100, 50000, "", 1);
	requests_match(&c, b("r-1"), b(""), b(""), 999, 1500, &m);
	cr_assert_not_null(m.cancel);
	requests_free(&c);
}

/* A reschedule by `by` at `at` that published copies of ids (a, b). */
static int
add_copies(struct requests *c, const char *id, int64_t at, const char *by,
           int control, const char *ids)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = EVENT_RESCHEDULE;
	e.cancel = b(id);
	e.due = at + 100;
	e.at = at;
	e.until = 1000000;
	e.superseded = b(ids);
	return requests_add(c, &e, b(by), control);
}

Test(requests, a_copy_supersedes_the_instances_copied_before_it)
{
	struct requests c;

	requests_init(&c);
	cr_assert_eq(add_copies(&c, "order-1", 1000, "ctl", 1, "c1"), 0);
	/* The original (never copied) is superseded, the copy is not. */
	cr_assert(
	    requests_superseded(&c, b("order-1"), b("c1"), b(""), 0, 5000));
	cr_assert_not(
	    requests_superseded(&c, b("order-1"), b("c1"), b(""), 1000, 5000));
	/* Another cascade id under the same message-id: not copied. */
	cr_assert_not(
	    requests_superseded(&c, b("order-1"), b("c2"), b(""), 0, 5000));
	/* Named by its cascade id alone too. */
	cr_assert(requests_superseded(&c, b(""), b("c1"), b(""), 0, 5000) == 0,
	          "held under order-1: a message without it is not named");
	cr_assert(
	    requests_superseded(&c, b("order-1"), b("c1"), b(""), 999, 5000));
	/* A later request without copies keeps what the first said. */
	add(&c, "order-1", EVENT_RESCHEDULE, 0, 9000, 2000, 1000000, "ctl", 1);
	cr_assert_not(
	    requests_superseded(&c, b("order-1"), b("c1"), b(""), 1000, 5000));
	cr_assert(
	    requests_superseded(&c, b("order-1"), b("c1"), b(""), 0, 5000));
	/* A later copy supersedes the first copy, and not itself. */
	cr_assert_eq(add_copies(&c, "order-1", 3000, "ctl", 1, "c1,,c2,"), 0);
	cr_assert(
	    requests_superseded(&c, b("order-1"), b("c1"), b(""), 1000, 5000));
	cr_assert_not(
	    requests_superseded(&c, b("order-1"), b("c1"), b(""), 3000, 5000));
	cr_assert(
	    requests_superseded(&c, b("order-1"), b("c2"), b(""), 0, 5000));
	/* Lapsed: nothing is superseded any more. */
	cr_assert_not(
	    requests_superseded(&c, b("order-1"), b("c1"), b(""), 0, 1000000));
	requests_free(&c);
}

Test(requests, copies_supersede_what_their_requester_may_change)
{
	struct requests c;

	requests_init(&c);
	cr_assert_eq(add_copies(&c, "order-1", 1000, "bob", 0, "c1"), 0);
	cr_assert(
	    requests_superseded(&c, b("order-1"), b("c1"), b("bob"), 0, 5000));
	cr_assert_not(requests_superseded(&c, b("order-1"), b("c1"), b("alice"),
	                                  0, 5000));
	requests_free(&c);
}

Test(requests, a_relayed_requester_is_believed_from_a_trusted_writer_only)
{
	struct config cfg;
	struct event e;
	amqp_bytes_t by;
	int control;

	config_defaults(&cfg);
	snprintf(cfg.broker_url, sizeof(cfg.broker_url),
	         "amqp://cascade:pw@127.0.0.1:5672/%%2f");
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_CANCEL;
	e.writer = b("cascade");
	e.requester = b("bob");
	e.has_requester = 1;
	requests_requester(&cfg, &e, b("cascade"), &by, &control);
	cr_assert(same(by, "bob"));
	cr_assert_eq(control, 0);
	/* Written by bob himself, claiming to relay alice: he is bob. */
	e.writer = b("bob");
	e.requester = b("cascade");
	requests_requester(&cfg, &e, b("cascade"), &by, &control);
	cr_assert(same(by, "bob"));
	cr_assert_eq(control, 0);
	/* ctl, as the broker user: a control user by default. */
	e.writer = b("cascade");
	e.has_requester = 0;
	requests_requester(&cfg, &e, b("cascade"), &by, &control);
	cr_assert(same(by, "cascade"));
	cr_assert_eq(control, 1);
	/* control_users names others. */
	snprintf(cfg.events_control_users, sizeof(cfg.events_control_users),
	         "ops, admin");
	e.writer = b("admin");
	requests_requester(&cfg, &e, b("cascade"), &by, &control);
	cr_assert_eq(control, 1);
	e.writer = b("cascade");
	requests_requester(&cfg, &e, b("cascade"), &by, &control);
	cr_assert_eq(control, 0);
}

/* A claim of message-id mid by cascade id id, due at due, as read. */
static struct event
claim_event(const char *mid, const char *id, int64_t at, int64_t due,
            int replace)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = EVENT_CLAIM;
	e.cancel = b(mid);
	e.id = b(id);
	e.at = at;
	e.due = due;
	e.until = due + 86400000LL;
	e.replace = replace;
	return e;
}

Test(requests, a_cancel_a_claim_and_a_series_with_the_same_id_are_apart)
{
	struct requests r;
	struct claim_verdict v;
	struct event e = claim_event("x", "aaaa", 100, 5000, 0);

	requests_init(&r);
	cr_assert_eq(cancel(&r, "x", 0, 1000), 0);
	cr_assert_eq(requests_claim(&r, &e, b("alice"), &v), 0);
	cr_assert(v.won);
	cr_assert_eq(requests_series_add(&r, b("x"), 3, b("t3"), 2000, 0), 0);
	/* Three entries, one of each kind, each under its own key. */
	cr_assert_eq(r.map.n, 3);
	cr_assert_eq(r.n[REQUESTS_CANCEL], 1);
	cr_assert_eq(r.n[REQUESTS_CLAIM], 1);
	cr_assert_eq(r.n[REQUESTS_SERIES], 1);
	cr_assert_eq(requests_held(&r), 3);
	cr_assert_not_null(find(&r, "x", "", 500));
	cr_assert_str_eq(requests_holder(&r, b("alice"), b("x"), 500)->id,
	                 "aaaa");
	cr_assert_eq(requests_series_head(&r, b("x"))->occurrence, 3);
	cr_assert(requests_series_stale(&r, b("x"), 2, b("t2")));
	/* Each kind knows only its own: nothing of another id. */
	cr_assert_null(find(&r, "y", "", 500));
	cr_assert_null(requests_holder(&r, b("alice"), b("y"), 500));
	cr_assert_null(requests_series_head(&r, b("y")));
	/* A key is the kind's byte and the id: an id that starts with
	 * another kind's byte is not that kind's entry. */
	{
		char k[3] = {(char)REQUESTS_SERIES, 'x', '\0'};
		cr_assert_null(find(&r, k, "", 500));
	}
	/* Which are new, by kind. */
	e = claim_event("x", "bbbb", 100, 5000, 0);
	cr_assert_not(requests_new(&r, &e, b("alice")));
	cr_assert(requests_new(&r, &e, b("bob")), "another scope");
	e.kind = EVENT_CANCEL;
	cr_assert_not(requests_new(&r, &e, b("")));
	e.cancel = b("y");
	cr_assert(requests_new(&r, &e, b("")));
	e.kind = EVENT_SERIES;
	e.id = b("x");
	cr_assert_not(requests_new(&r, &e, b("")));
	e.kind = EVENT_MARKER;
	cr_assert_not(requests_new(&r, &e, b("")), "not a kind held");
	requests_free(&r);
}

Test(requests, one_prune_forgets_every_kind_s_lapsed_entries)
{
	struct requests r;
	struct claim_verdict v;
	struct event e;
	char id[16];

	requests_init(&r);
	for (int i = 0; i < 30; i++) {
		snprintf(id, sizeof(id), "m%d", i);
		/* Lapsing at 100 for the even ones, later for the odd. */
		int64_t until = i % 2 ? 100000000 : 100;
		cancel(&r, id, 0, until);
		e = claim_event(id, "aaaa", 0, until - 86400000LL, 0);
		cr_assert_eq(requests_claim(&r, &e, b("alice"), &v), 0);
		e = claim_event(id, "bbbb", 0, 50000, 0);
		cr_assert_eq(requests_claim(&r, &e, b("bob"), &v), 0);
		cr_assert_eq(
		    requests_series_add(&r, b(id), 2, b("t"), until, 0), 0);
	}
	cr_assert_eq(r.n[REQUESTS_CANCEL], 30);
	cr_assert_eq(r.n[REQUESTS_CLAIM], 60, "pairs, not message-ids");
	cr_assert_eq(r.n[REQUESTS_SERIES], 30);
	cr_assert_eq(r.map.n, 90);
	cr_assert_eq(requests_held(&r), 120);
	/* Bob's claims last; of the rest, the odd ones. */
	cr_assert_eq(requests_prune(&r, 100), 60,
	             "every message-id keeps bob's");
	cr_assert_eq(r.n[REQUESTS_CANCEL], 15);
	cr_assert_eq(r.n[REQUESTS_CLAIM], 45);
	cr_assert_eq(r.n[REQUESTS_SERIES], 15);
	cr_assert_null(find(&r, "m0", "", 50));
	cr_assert_not_null(find(&r, "m1", "", 50));
	cr_assert_null(requests_holder(&r, b("alice"), b("m0"), 50));
	cr_assert_not_null(requests_holder(&r, b("bob"), b("m0"), 50));
	cr_assert_not_null(requests_holder(&r, b("alice"), b("m1"), 50));
	cr_assert_null(requests_series_head(&r, b("m0")));
	cr_assert_not_null(requests_series_head(&r, b("m1")));
	/* Past bob's too: only the odd ones' cancel, claim and series. */
	cr_assert_eq(requests_prune(&r, 50000 + 86400000LL), 45);
	cr_assert_eq(requests_held(&r), 45);
	requests_free(&r);
}

/*
 * One reading of a record, whatever its kind: a request moves its
 * message-id's claims and is held (or not, past the cap); a claim that
 * loses is a cancellation of its cascade id in its scope; a series record
 * from a clock ahead is taken as written now.
 */
Test(requests, a_record_read_does_what_its_kind_says)
{
	struct requests r;
	struct cancel_match m;
	struct event e;

	requests_init(&r);
	cr_assert_eq(requests_kind(EVENT_CANCEL), REQUESTS_CANCEL);
	cr_assert_eq(requests_kind(EVENT_RESCHEDULE), REQUESTS_CANCEL);
	cr_assert_eq(requests_kind(EVENT_CLAIM), REQUESTS_CLAIM);
	cr_assert_eq(requests_kind(EVENT_SERIES), REQUESTS_SERIES);
	cr_assert_eq(requests_kind(EVENT_MARKER), -1);
	cr_assert_eq(requests_kind(EVENT_SCHEDULED), -1);
	/* alice's "inv-1" held by aaaa; a second claim (keep) loses. */
	e = claim_event("inv-1", "aaaa", 100, 5000, 0);
	cr_assert_eq(requests_read(&r, &e, b("alice"), 0, 1, 200), 0);
	e = claim_event("inv-1", "bbbb", 200, 6000, 0);
	cr_assert_eq(requests_read(&r, &e, b("alice"), 0, 1, 300), 0);
	cr_assert_str_eq(requests_holder(&r, b("alice"), b("inv-1"), 300)->id,
	                 "aaaa");
	/* The loser is cancelled by cascade id, in alice's scope only. */
	cr_assert(requests_match(&r, b(""), b("bbbb"), b("alice"), 0, 300, &m));
	cr_assert_not_null(m.cancel);
	cr_assert_eq(m.cancel->reason, CANCEL_DUPLICATE);
	cr_assert_not(
	    requests_match(&r, b(""), b("bbbb"), b("bob"), 0, 300, &m));
	cr_assert_not(
	    requests_match(&r, b("bbbb"), b(""), b("alice"), 0, 300, &m),
	    "never by message-id");
	/* Alice cancels inv-1: its holder holds it no more; not held past
	 * the cap, the claim moves all the same. */
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_CANCEL;
	e.cancel = b("inv-1");
	e.at = 400;
	e.until = 10000;
	cr_assert_eq(requests_read(&r, &e, b("alice"), 0, 0, 400), 0);
	cr_assert_null(requests_holder(&r, b("alice"), b("inv-1"), 450));
	cr_assert_eq(r.n[REQUESTS_CANCEL], 1, "bbbb's only: not held");
	cr_assert_eq(requests_read(&r, &e, b("alice"), 0, 1, 400), 0);
	cr_assert_eq(r.n[REQUESTS_CANCEL], 2);
	cr_assert_not_null(find(&r, "inv-1", "", 450));
	/* A series record written ahead of our clock: written now. */
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_SERIES;
	e.id = b("S");
	e.occurrence = 4;
	e.token = b("t4");
	e.at = 9000;
	e.until = 20000;
	cr_assert_eq(requests_read(&r, &e, b("cascade"), 1, 1, 1000), 0);
	cr_assert_eq(requests_series_head(&r, b("S"))->written, 1000);
	e.occurrence = 5;
	e.at = 900;
	cr_assert_eq(requests_read(&r, &e, b("cascade"), 1, 1, 1000), 0);
	cr_assert_eq(requests_series_head(&r, b("S"))->written, 900);
	/* Kinds not held: nothing. */
	e.kind = EVENT_MARKER;
	cr_assert_eq(requests_read(&r, &e, b("cascade"), 1, 1, 1000), 0);
	cr_assert_eq(requests_held(&r), 4);
	requests_free(&r);
}

Test(requests, an_id_longer_than_any_record_s_is_never_held)
{
	struct requests r;
	char id[REQUESTS_ID_MAX + 2];
	struct event e;

	memset(id, 'i', sizeof(id) - 1);
	id[sizeof(id) - 1] = '\0';
	requests_init(&r);
	cr_assert_eq(cancel(&r, id, 0, 1000), -1);
	cr_assert_eq(requests_series_add(&r, b(id), 1, b("t"), 1000, 0), -1);
	id[REQUESTS_ID_MAX] = '\0'; /* the longest a record holds */
	cr_assert_eq(cancel(&r, id, 0, 1000), 0);
	cr_assert_not_null(find(&r, id, "", 10));
	id[REQUESTS_ID_MAX] = 'i';
	cr_assert_null(find(&r, id, "", 10), "looked up, not found");
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_CANCEL;
	e.cancel = b(id);
	cr_assert(requests_new(&r, &e, b("")));
	requests_free(&r);
}

/* A pause or resume record of name (a target when target), as read. */
static int
pause_rec(struct requests *r, enum event_kind kind, const char *name,
          int target, const char *by, int control, int64_t until)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = kind;
	e.cancel = b(name);
	e.target = target;
	e.at = 10;
	e.until = until;
	return requests_pause_read(r, &e, b(by), control, 1);
}

/*
 * Each requester's pause is its own: another user's pause neither
 * replaces nor lifts it, a resume lifts its requester's own, a control
 * user's every one; a series' pause holds what its requester may change.
 */
Test(requests, a_pause_is_its_requester_s_and_only_they_or_control_lift_it)
{
	struct requests r;

	requests_init(&r);
	cr_assert_eq(pause_rec(&r, EVENT_PAUSE, "x", 0, "ops", 1, 1000), 0);
	cr_assert(requests_series_paused(&r, b("s1"), b("x"), b("alice"), 50));
	/* Alice pauses and resumes it too: the control user's pause stays. */
	cr_assert_eq(pause_rec(&r, EVENT_PAUSE, "x", 0, "alice", 0, 1000), 0);
	cr_assert_eq(r.n[REQUESTS_PAUSE], 2);
	cr_assert_eq(pause_rec(&r, EVENT_RESUME, "x", 0, "alice", 0, 1000), 0);
	cr_assert(requests_series_paused(&r, b("s1"), b("x"), b("alice"), 50),
	          "still the control user's");
	/* Eve holds no pause of it: her resume is refused. */
	cr_assert_eq(pause_rec(&r, EVENT_RESUME, "x", 0, "eve", 0, 1000), 1);
	cr_assert(requests_series_paused(&r, b("s1"), b("x"), b("alice"), 50));
	/* Eve's own pause does not hold alice's messages. */
	cr_assert_eq(pause_rec(&r, EVENT_PAUSE, "y", 0, "eve", 0, 1000), 0);
	cr_assert_not(
	    requests_series_paused(&r, b("s2"), b("y"), b("alice"), 50));
	cr_assert(requests_series_paused(&r, b("s2"), b("y"), b("eve"), 50));
	cr_assert(requests_series_paused(&r, b("s2"), b("y"), b(""), 50),
	          "an unowned message: anyone's");
	/* A control user's resume lifts every pause of the name. */
	cr_assert_eq(pause_rec(&r, EVENT_PAUSE, "x", 0, "alice", 0, 1000), 0);
	cr_assert_eq(pause_rec(&r, EVENT_RESUME, "x", 0, "ops", 1, 1000), 0);
	cr_assert_not(
	    requests_series_paused(&r, b("s1"), b("x"), b("alice"), 50));
	cr_assert_eq(r.n[REQUESTS_PAUSE], 1, "eve's of y");
	/* Renewed by the same requester: still one. */
	cr_assert_eq(pause_rec(&r, EVENT_PAUSE, "y", 0, "eve", 0, 2000), 0);
	cr_assert_eq(r.n[REQUESTS_PAUSE], 1);
	/* It lapses. */
	cr_assert_eq(requests_prune(&r, 2000), 0);
	cr_assert_eq(r.n[REQUESTS_PAUSE], 0);
	requests_free(&r);
}

Test(requests, a_target_s_pause_is_a_control_user_s_and_names_it_either_way)
{
	struct requests r;

	requests_init(&r);
	cr_assert_eq(pause_rec(&r, EVENT_PAUSE, "/jobs", 1, "eve", 0, 1000), 1,
	             "not a control user");
	cr_assert_eq(r.n[REQUESTS_PAUSE], 0);
	cr_assert_eq(
	    pause_rec(&r, EVENT_PAUSE, "amq.default/jobs", 1, "ops", 1, 1000),
	    0);
	cr_assert_eq(pause_rec(&r, EVENT_PAUSE, "billing", 1, "ops", 1, 1000),
	             0);
	/* The default exchange by either name; one key, or every key. */
	cr_assert(requests_target_paused(&r, b(""), b("jobs"), 50));
	cr_assert(requests_target_paused(&r, b("amq.default"), b("jobs"), 50));
	cr_assert_not(requests_target_paused(&r, b(""), b("other"), 50));
	cr_assert(requests_target_paused(&r, b("billing"), b("any.key"), 50));
	cr_assert_not(requests_target_paused(&r, b("billing2"), b("k"), 50));
	cr_assert_eq(pause_rec(&r, EVENT_RESUME, "/jobs", 1, "ops", 1, 1000),
	             0);
	cr_assert_not(requests_target_paused(&r, b(""), b("jobs"), 50));
	requests_free(&r);
}

/*
 * The names a series is paused under, for a resume that lifts what the
 * console's Series page shows (issue: a pause made by message-id could
 * not be lifted by the cascade id the page names): each name with a pause
 * in force, and whether one of them is a pause the requester may not
 * lift.
 */
Test(requests, a_series_pauses_names_each_name_it_is_paused_under)
{
	struct requests r;
	int others = -1;

	requests_init(&r);
	cr_assert_eq(requests_series_pauses(&r, b("s1"), b("x"), b("alice"),
	                                    b("alice"), 0, 50, &others),
	             0);
	cr_assert_eq(others, 0);
	/* Paused by message-id, by its owner. */
	cr_assert_eq(pause_rec(&r, EVENT_PAUSE, "x", 0, "alice", 0, 1000), 0);
	cr_assert_eq(requests_series_pauses(&r, b("s1"), b("x"), b("alice"),
	                                    b("alice"), 0, 50, &others),
	             REQUESTS_BY_MESSAGE_ID);
	cr_assert_eq(others, 0);
	/* And by cascade id, by a control user: alice cannot lift that. */
	cr_assert_eq(pause_rec(&r, EVENT_PAUSE, "s1", 0, "ops", 1, 1000), 0);
	cr_assert_eq(requests_series_pauses(&r, b("s1"), b("x"), b("alice"),
	                                    b("alice"), 0, 50, &others),
	             REQUESTS_BY_ID | REQUESTS_BY_MESSAGE_ID);
	cr_assert_eq(others, 1);
	cr_assert_eq(requests_series_pauses(&r, b("s1"), b("x"), b("alice"),
	                                    b("ops"), 1, 50, &others),
	             REQUESTS_BY_ID | REQUESTS_BY_MESSAGE_ID);
	cr_assert_eq(others, 0, "a control user lifts every pause");
	/* Eve's pause of her own message-id "x" does not hold alice's
	 * series, and is not counted. */
	cr_assert_eq(pause_rec(&r, EVENT_RESUME, "s1", 0, "ops", 1, 1000), 0);
	cr_assert_eq(pause_rec(&r, EVENT_PAUSE, "x", 0, "eve", 0, 1000), 0);
	cr_assert_eq(requests_series_pauses(&r, b("s1"), b("x"), b("alice"),
	                                    b("alice"), 0, 50, &others),
	             REQUESTS_BY_MESSAGE_ID);
	cr_assert_eq(others, 0);
	/* Lapsed pauses are not counted. */
	cr_assert_eq(requests_series_pauses(&r, b("s1"), b("x"), b("alice"),
	                                    b("alice"), 0, 1000, &others),
	             0);
	requests_free(&r);
}

Test(requests, a_target_held_is_the_name_as_a_pause_names_it)
{
	struct requests r;

	requests_init(&r);
	cr_assert_not(requests_target_held(&r, b("/jobs"), 50));
	cr_assert_eq(pause_rec(&r, EVENT_PAUSE, "/jobs", 1, "ops", 1, 1000), 0);
	cr_assert(requests_target_held(&r, b("/jobs"), 50));
	cr_assert(requests_target_held(&r, b("amq.default/jobs"), 50));
	cr_assert_not(requests_target_held(&r, b("/other"), 50));
	cr_assert_not(requests_target_held(&r, b(""), 50),
	              "the exchange alone is another pause");
	cr_assert_not(requests_target_held(&r, b("/jobs"), 1000), "lapsed");
	requests_free(&r);
}
