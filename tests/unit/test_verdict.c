/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verdict (verdict.h): one table, a row per rule, in the order of the
 * rules in verdict.h and of the sections of docs/CONTRACT.md they cite.
 * Ladder 2 s x 4 (tests/unit/helpers.h), round-up unless a row holds the
 * tail; native rows wait the last minute in a holding queue.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>

#include "helpers.h"
#include "plan.h"
#include "targets.h"
#include "verdict.h"

#define MONO INT64_C(5000000)
#define MIN INT64_C(60000)

/* The plan, over a ladder and targets (helpers.h), with a holding
 * queue for the native rows. */
static struct plan_fixture fx;
static const char *holds[1] = {"cascade.hold.0"};

static void
setup(void)
{
	plan_fixture_init(&fx);
	fx.p.hold_queues = holds;
}

static void
teardown(void)
{
	targets_free(&fx.targets);
}

TestSuite(verdict, .init = setup, .fini = teardown);

/* The message as router_decide read it. */
struct given {
	int64_t in; /* due in this many ms */
	int fresh;  /* its publisher's own headers */
	int parked; /* its headers park it */
	enum route_unique unique;
	int64_t every;  /* a repeat */
	int64_t times;  /* its x-cascade-times */
	const char *id; /* its cascade id; NULL: none yet */
	const char *exchange;
	int tail;    /* [router] tail = hold */
	int native;  /* [topology] mode = native */
	int refused; /* every delay level refuses */
};

/* What must come of it. */
struct want {
	enum verdict_kind kind;
	enum verdict_drop drop;
	enum route_action action;
	enum park_kind park; /* action ROUTE_PARK */
	int scheduled;
	enum verdict_id id;
	int cancelled, retimed;
	int64_t due_in; /* the due time after, from NOW; -1: unchanged */
};

struct row {
	const char *rule;
	struct given g;
	struct verdict_facts f;
	struct want w;
};

/* First sight from ingress, [events] on, a message-id, room to hold. */
#define SEEN .first_sight = 1, .events = 1, .has_message_id = 1
/* Back from a return queue. */
#define BACK .events = 1, .has_message_id = 1

static const struct row rows[] = {
    {"headers that park it: parked, whatever the requests say",
     {.in = 10000, .fresh = 1, .parked = 1},
     {SEEN, .cancel = VERDICT_CANCEL_ASKED, .superseded = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_PARK, PARK_bad_header, 0,
      VERDICT_ID_NONE, 0, 0, -1}},
    {"1. superseded by a reschedule's copy: dropped first",
     {.in = 10000, .id = "a1"},
     {BACK, .superseded = 1, .cancel = VERDICT_CANCEL_ASKED},
     {VERDICT_DROP, VERDICT_DROP_SUPERSEDED, ROUTE_DELIVER, 0, 0,
      VERDICT_ID_NONE, 0, 0, -1}},
    {"2. its claim lost to a keep: a duplicate",
     {.in = 10000, .id = "a1"},
     {BACK, .cancel = VERDICT_CANCEL_DUPLICATE},
     {VERDICT_DROP, VERDICT_DROP_DUPLICATE, ROUTE_DELIVER, 0, 0,
      VERDICT_ID_NONE, 0, 0, -1}},
    {"2. its claim lost to a replace: replaced",
     {.in = 10000, .id = "a1"},
     {BACK, .cancel = VERDICT_CANCEL_REPLACED},
     {VERDICT_DROP, VERDICT_DROP_REPLACED, ROUTE_DELIVER, 0, 0, VERDICT_ID_NONE,
      0, 0, -1}},
    {"3. cancelled: dropped, counted as a cancel",
     {.in = 10000, .id = "a1"},
     {BACK, .cancel = VERDICT_CANCEL_ASKED, .rescheduled = 1, .new_due = NOW},
     {VERDICT_DROP, VERDICT_DROP_CANCELLED, ROUTE_DELIVER, 0, 0,
      VERDICT_ID_NONE, 1, 0, -1}},
    {"3. cancelled with --park: parked as cancelled",
     {.in = 10000, .id = "a1"},
     {BACK, .cancel = VERDICT_CANCEL_PARK},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_PARK, PARK_cancelled, 0,
      VERDICT_ID_NONE, 1, 0, -1}},
    {"4. rescheduled to now: retimed, delivered",
     {.in = 600000, .id = "a1"},
     {BACK, .rescheduled = 1, .new_due = NOW},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_DELIVER, 0, 0, VERDICT_ID_NONE,
      0, 1, 0}},
    {"4. rescheduled to the time it has: not retimed",
     {.in = 10000, .id = "a1"},
     {BACK, .rescheduled = 1, .new_due = NOW + 10000},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_HOP, 0, 0, VERDICT_ID_NONE, 0,
      0, 10000}},
    {"5. a stale copy of a repeat: dropped, after a reschedule is noted",
     {.in = 10000, .every = 1000, .id = "s1"},
     {BACK, .stale = 1, .rescheduled = 1, .new_due = NOW + 20000},
     {VERDICT_DROP, VERDICT_DROP_STALE, ROUTE_DELIVER, 0, 0, VERDICT_ID_NONE, 0,
      1, 20000}},
    {"5. stale without a series id is not a repeat's copy: it goes on",
     {.in = 10000, .every = 1000},
     {BACK, .stale = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_HOP, 0, 0, VERDICT_ID_NONE, 0,
      0, 10000}},
    {"6. a due copy of a paused series: waits for its next occurrence",
     {.in = 0, .every = 1000, .id = "s1"},
     {BACK, .series_paused = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_HOP, 0, 0, VERDICT_ID_NONE, 0,
      0, 1000}},
    {"6. a paused series not due yet: goes on waiting as it was",
     {.in = 10000, .every = 1000, .id = "s1"},
     {BACK, .series_paused = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_HOP, 0, 0, VERDICT_ID_NONE, 0,
      0, 10000}},
    {"6. a paused series that ends before its next occurrence: dropped",
     {.in = 0, .every = 1000, .times = 1, .id = "s1"},
     {BACK, .series_paused = 1},
     {VERDICT_DROP, VERDICT_DROP_ENDED, ROUTE_DELIVER, 0, 0, VERDICT_ID_NONE, 0,
      0, 0}},
    {"7. due, to a paused target: round the ladder, its due time kept",
     {.in = 0, .id = "a1"},
     {BACK, .target_paused = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_HOP, 0, 0, VERDICT_ID_NONE, 0,
      0, 0}},
    {"7. not due, to a paused target: waits as it would",
     {.in = 10000, .id = "a1"},
     {BACK, .target_paused = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_HOP, 0, 0, VERDICT_ID_NONE, 0,
      0, 10000}},
    {"8. a repeat first seen with max_held_ids reached: parked",
     {.in = 10000, .fresh = 1, .every = 1000},
     {SEEN, .full = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_PARK, PARK_too_many_ids, 0,
      VERDICT_ID_NONE, 0, 0, 10000}},
    {"8. a new unique id that will wait, no room: parked",
     {.in = 10000, .fresh = 1, .unique = UNIQUE_KEEP},
     {SEEN, .claim_new = 1, .full = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_PARK, PARK_too_many_ids, 0,
      VERDICT_ID_NONE, 0, 0, 10000}},
    {"8. a unique id delivered at once holds nothing: no room needed",
     {.in = 0, .fresh = 1, .unique = UNIQUE_KEEP},
     {SEEN, .claim_new = 1, .full = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_DELIVER, 0, 0, VERDICT_ID_NONE,
      0, 0, 0}},
    {"8. back from a return queue: the cap was checked at first sight",
     {.in = 10000, .every = 1000, .id = "s1"},
     {BACK, .full = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_HOP, 0, 0, VERDICT_ID_NONE, 0,
      0, 10000}},
    {"9. first sight of one that waits: scheduled, an id of its own",
     {.in = 10000, .fresh = 1},
     {SEEN},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_HOP, 0, 1, VERDICT_ID_WAIT, 0,
      0, 10000}},
    {"9. a repeat due at once: its series' id, not scheduled",
     {.in = 0, .fresh = 1, .every = 1000},
     {SEEN},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_DELIVER, 0, 0,
      VERDICT_ID_SERIES, 0, 0, 0}},
    {"9. a tail held in memory: scheduled, nothing to list",
     {.in = 500, .fresh = 1, .tail = 1},
     {SEEN},
     {VERDICT_HOLD, VERDICT_DROP_NONE, ROUTE_HOLD, 0, 1, VERDICT_ID_NONE, 0, 0,
      500}},
    {"9. [events] off: scheduled, no id",
     {.in = 10000, .fresh = 1},
     {.first_sight = 1, .has_message_id = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_HOP, 0, 1, VERDICT_ID_NONE, 0,
      0, 10000}},
    {"10. x-cascade-unique with [events] off: parked",
     {.in = 10000, .fresh = 1, .unique = UNIQUE_KEEP},
     {.first_sight = 1, .has_message_id = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_PARK, PARK_bad_header, 1,
      VERDICT_ID_NONE, 0, 0, 10000}},
    {"11. keep, its id held in its scope: a duplicate, its id noted",
     {.in = 10000, .fresh = 1, .unique = UNIQUE_KEEP},
     {SEEN, .claim_held = 1},
     {VERDICT_DROP, VERDICT_DROP_DUPLICATE, ROUTE_HOP, 0, 1, VERDICT_ID_WAIT, 0,
      0, 10000}},
    {"11. replace, its id held: it claims the id",
     {.in = 10000, .fresh = 1, .unique = UNIQUE_REPLACE},
     {SEEN, .claim_held = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_CLAIM, 0, 1, VERDICT_ID_WAIT, 0,
      0, 10000}},
    {"12. unique and it will wait: its claim is recorded first",
     {.in = 10000, .fresh = 1, .unique = UNIQUE_KEEP},
     {SEEN, .claim_new = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_CLAIM, 0, 1, VERDICT_ID_WAIT, 0,
      0, 10000}},
    {"12. unique without a message-id: nothing to claim",
     {.in = 10000, .fresh = 1, .unique = UNIQUE_KEEP},
     {.first_sight = 1, .events = 1},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_HOP, 0, 1, VERDICT_ID_WAIT, 0,
      0, 10000}},
    {"13. back from its holding queue, not due: back there",
     {.in = 10000, .id = "a1", .native = 1},
     {BACK, .in_holding = 1},
     {VERDICT_WAIT_AGAIN, VERDICT_DROP_NONE, ROUTE_WAIT, 0, 0, VERDICT_ID_NONE,
      0, 0, 10000}},
    {"13. native, from a return queue: into the holding queue",
     {.in = 10000, .id = "a1", .native = 1},
     {BACK},
     {VERDICT_PUBLISH, VERDICT_DROP_NONE, ROUTE_WAIT, 0, 0, VERDICT_ID_NONE, 0,
      0, 10000}},
    {"14. due, to a named exchange: looked up first",
     {.in = 0, .id = "a1", .exchange = "orders"},
     {BACK},
     {VERDICT_LOOKUP, VERDICT_DROP_NONE, ROUTE_DELIVER, 0, 0, VERDICT_ID_NONE,
      0, 0, 0}},
    {"14. every level it could take refuses: retried later",
     {.in = 10000, .id = "a1", .refused = 1},
     {BACK},
     {VERDICT_RETRY, VERDICT_DROP_NONE, ROUTE_HOP, 0, 0, VERDICT_ID_NONE, 0, 0,
      10000}},
};

static void
judge_row(const struct row *row)
{
	const struct given *g = &row->g;
	const struct want *w = &row->w;
	struct route r;
	struct verdict v;
	int64_t due;

	fx.rp.hold_tail = g->tail;
	fx.rp.native_window = g->native ? MIN : 0;
	for (unsigned k = 0; g->refused && k < fx.ladder.levels; k++)
		targets_refused(&fx.targets, amqp_empty_bytes,
		                amqp_cstring_bytes(fx.queues[k]), MONO);
	memset(&r, 0, sizeof(r));
	r.action = ROUTE_DELIVER;
	r.level = -1;
	r.due = NOW + g->in;
	r.fresh = g->fresh;
	r.unique = g->unique;
	r.every = g->every;
	r.repeat = g->every > 0;
	r.times = g->times;
	if (g->every > 0)
		r.first = r.due, r.occurrence = 1;
	if (g->id != NULL)
		r.id = amqp_cstring_bytes(g->id);
	if (g->exchange != NULL)
		r.exchange = amqp_cstring_bytes(g->exchange);
	if (g->parked)
		router_park(&r, PARK_bad_header, "x-delay: not a number");
	due = r.due;
	v = verdict_judge(&row->f, &fx.p, &r, NOW, MONO);
	cr_expect_eq(v.kind, w->kind, "%s: kind %d, want %d", row->rule, v.kind,
	             w->kind);
	cr_expect_eq(v.drop, w->drop, "%s: drop %d, want %d", row->rule, v.drop,
	             w->drop);
	if (w->kind != VERDICT_DROP)
		cr_expect_eq(r.action, w->action, "%s: action %d, want %d",
		             row->rule, r.action, w->action);
	if (w->action == ROUTE_PARK)
		cr_expect_eq(r.park, w->park, "%s: park %s, want %s", row->rule,
		             router_park_name(r.park),
		             router_park_name(w->park));
	cr_expect_eq(v.scheduled, w->scheduled, "%s: scheduled", row->rule);
	cr_expect_eq(v.id, w->id, "%s: id %d, want %d", row->rule, v.id, w->id);
	cr_expect_eq(v.cancelled, w->cancelled, "%s: cancelled", row->rule);
	cr_expect_eq(v.retimed, w->retimed, "%s: retimed", row->rule);
	if (v.retimed)
		cr_expect_eq(v.was_due, due, "%s: was due", row->rule);
	cr_expect_eq(r.due, w->due_in < 0 ? due : NOW + w->due_in,
	             "%s: due in %" PRId64 ", want %" PRId64, row->rule,
	             r.due - NOW, w->due_in);
}

Test(verdict, each_rule_in_its_order)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		targets_free(&fx.targets);
		targets_init(&fx.targets, fx.ladder.ttl[0], 60000);
		judge_row(&rows[i]);
	}
}

/* The cap is asked only for what would hold an id past it (rule 8). */
Test(verdict, room_is_asked_only_when_it_matters)
{
	struct verdict_facts f = {SEEN};
	struct route r;

	memset(&r, 0, sizeof(r));
	r.fresh = 1;
	r.action = ROUTE_DELIVER;
	cr_expect_not(verdict_needs_room(&f, &r), "a plain message");
	r.every = 1000;
	r.repeat = 1;
	cr_expect(verdict_needs_room(&f, &r), "a repeat");
	r.every = 0;
	r.repeat = 0;
	r.unique = UNIQUE_KEEP;
	cr_expect_not(verdict_needs_room(&f, &r), "its id held already");
	f.claim_new = 1;
	cr_expect(verdict_needs_room(&f, &r), "a new unique id");
	f.events = 0;
	cr_expect_not(verdict_needs_room(&f, &r), "[events] off");
	f.events = 1;
	f.first_sight = 0;
	cr_expect_not(verdict_needs_room(&f, &r), "back from the fx.ladder");
	f.first_sight = 1;
	router_park(&r, PARK_bad_header, "x");
	cr_expect_not(verdict_needs_room(&f, &r), "parked");
}

/* A route decided before goes out by rules 13 and 14 alone. */
Test(verdict, dispatch_alone)
{
	struct route r;
	struct verdict v;

	memset(&r, 0, sizeof(r));
	r.due = NOW;
	r.exchange = amqp_cstring_bytes("orders");
	router_step(&fx.rp, &r, NOW);
	v = verdict_dispatch(0, &fx.p, &r, NOW, MONO);
	cr_expect_eq(v.kind, VERDICT_LOOKUP);
	r.action = ROUTE_WAIT;
	v = verdict_dispatch(1, &fx.p, &r, NOW, MONO);
	cr_expect_eq(v.kind, VERDICT_WAIT_AGAIN);
	r.action = ROUTE_HOLD;
	v = verdict_dispatch(0, &fx.p, &r, NOW, MONO);
	cr_expect_eq(v.kind, VERDICT_HOLD);
}
