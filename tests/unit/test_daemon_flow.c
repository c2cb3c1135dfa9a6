/* SPDX-License-Identifier: Apache-2.0 */
/*
 * daemon_sort.c and daemon_flow.c linked alone: the real sorting of a
 * delivery done, route, shard, verdict, dispatch and hold, with stubs for
 * what they call in the other daemon files.  The stub publisher records
 * each message it is handed and when, so the tests assert where a message
 * would have gone.
 */
#include <criterion/criterion.h>
#include <ev.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/cascade/daemon_int.h"
#include "duration.h"
#include "helpers.h"

#define MAX_CALLS 16

/* What the stubs were asked to do. */
static struct {
	struct message *published[MAX_CALLS];
	int64_t published_at[MAX_CALLS]; /* wall ms */
	unsigned npublished;
	unsigned parks; /* of the published, through daemon_park */
	unsigned retries, waits, records, matched;
	unsigned cancelled, requests;
	unsigned unwrapped;
	unsigned opened, taken; /* from P.requests */
} calls;

static struct daemon d;
static struct config cfg;
static struct retry_table no_retries;
static char queue_names[3 * 8][32];
static const char *const hold_names[3] = {"P.hold.s0", "P.hold.s1",
                                          "P.hold.s2"};

static void
record_publish(struct message *m)
{
	cr_assert_lt(calls.npublished, MAX_CALLS);
	calls.published_at[calls.npublished] = duration_wall_ms();
	calls.published[calls.npublished++] = m;
}

/* First sights counted as scheduled (cascade_scheduled_total). */
static uint64_t
scheduled(void)
{
	uint64_t n = 0;

	for (unsigned w = 0; w < METRICS_NWINDOWS; w++)
		n += d.m.scheduled[w];
	return n;
}

void
daemon_publish(struct daemon *dd, struct message *m)
{
	(void)dd;
	record_publish(m);
}

void
daemon_park(struct daemon *dd, struct message *m, enum park_kind kind,
            const char *fmt, ...)
{
	va_list ap;

	(void)dd;
	va_start(ap, fmt);
	router_vpark(&m->route, kind, fmt, ap);
	va_end(ap);
	calls.parks++;
	record_publish(m);
}

void
daemon_retry_later(struct daemon *dd, struct message *m, const char *why)
{
	(void)dd;
	(void)why;
	calls.retries++;
	message_free(m);
}

void
daemon_wait_exchange(struct daemon *dd, struct message *m)
{
	(void)dd;
	calls.waits++;
	message_free(m);
}

/*
 * What is known of a message: where it came from, and for one routed to
 * "cancel-me" a cancellation in force, whatever its route (a parked one
 * must not be dropped for it: the verdict's rule).  No repeats, no unique
 * ids here (test_verdict.c, test_requests.c test them).
 */
void
daemon_request_facts(struct daemon *dd, struct message *m, int last_look,
                     struct verdict_facts *f)
{
	(void)dd;
	(void)last_look;
	memset(f, 0, sizeof(*f));
	f->first_sight =
	    m->src != ROUTE_FROM_RETURN && m->src != ROUTE_FROM_HOLD;
	f->in_holding = message_in_holding(m);
	if (headers_bytes_eq(m->routing_key, amqp_cstring_bytes("cancel-me")))
		f->cancel = VERDICT_CANCEL_ASKED;
}

void
daemon_dropped(struct daemon *dd, struct message *m, enum verdict_drop why)
{
	(void)dd;
	if (why == VERDICT_DROP_CANCELLED)
		calls.cancelled++;
	message_free(m);
}

/* Messages routed to "request" are cancellation requests: to record. */
int
daemon_cancel_request(struct daemon *dd, struct message *m)
{
	(void)dd;
	if (!headers_bytes_eq(m->routing_key, amqp_cstring_bytes("request")))
		return 0;
	calls.requests++;
	memset(&m->route, 0, sizeof(m->route));
	m->route.action = ROUTE_RECORD;
	m->route.level = -1;
	m->routed = 1;
	return 1;
}

/* Every hop the stub sees was a daemon's. */
int
daemon_forged(struct daemon *dd, struct message *m)
{
	(void)dd;
	(void)m;
	return 0;
}

/* A holding queue's envelope: the stub leaves the message as it is. */
int
daemon_unwrap(struct daemon *dd, struct message *m)
{
	(void)dd;
	(void)m;
	calls.unwrapped++;
	return 0;
}

/* P.requests' envelope: the stub leaves the message as it is, and gives
 * a redelivered one the outer x-delivery-count 3 (the limit in setup). */
int
daemon_scan_open(struct daemon *dd, struct message *m)
{
	(void)dd;
	calls.opened++;
	if (m->redelivered)
		m->delivery_count = 3;
	return 0;
}

void
daemon_scan_take(struct daemon *dd, struct message *m)
{
	(void)dd;
	calls.taken++;
	message_free(m);
}

void
daemon_record(struct daemon *dd, struct message *m)
{
	(void)dd;
	calls.records++;
	message_free(m);
}

void
daemon_scan_message(struct daemon *dd, struct message *m)
{
	(void)dd;
	calls.records++;
	message_free(m);
}

void
daemon_match_return(struct daemon *dd, const struct message *r)
{
	(void)dd;
	(void)r;
	calls.matched++;
}

/*
 * A 100 ms ladder of factor 2 (100, 200, 400 ... 12800 ms), three shards,
 * tail = hold with a 50 ms margin; consumers: ingress, retry, and the
 * return queue of shard 2.
 */
static void
setup(void)
{
	const char *why = NULL;

	memset(&calls, 0, sizeof(calls));
	memset(&d, 0, sizeof(d));
	memset(&cfg, 0, sizeof(cfg));
	cfg.router_max_redeliveries = 3;
	d.cfg = &cfg;
	d.loop = ev_default_loop(0);
	cr_assert_eq(ladder_init(&d.ladder, 100, 2, 8, &why), 0, "%s",
	             why ? why : "");
	d.topo.shards = 3;
	d.rp.ladder = &d.ladder;
	d.rp.max_delay = 365 * DAY;
	d.rp.default_exchange = amqp_empty_bytes;
	d.rp.hold_tail = 1;
	d.rp.tail_margin = 50;
	d.rp.retry = &no_retries;
	outbox_init(&d.out);
	xcheck_init(&d.xc);
	targets_init(&d.targets, d.ladder.ttl[0], 60000);
	d.plan.rp = &d.rp;
	d.plan.ladder = &d.ladder;
	d.plan.targets = &d.targets;
	d.plan.level_queues = d.level_queues;
	for (unsigned k = 0; k < 3 * d.ladder.levels; k++) {
		snprintf(queue_names[k], sizeof(queue_names[k]),
		         "P.delay.s%u.%u", k / d.ladder.levels,
		         k % d.ladder.levels);
		d.level_queues[k] = queue_names[k];
	}
	TAILQ_INIT(&d.held);
	d.consumers[0] = (struct consumer){
	    "ingress", "P.ingress", ROUTE_FROM_INGRESS, -1, 0, 0};
	d.consumers[1] =
	    (struct consumer){"retry", "P.retry", ROUTE_FROM_RETRY, -1, 0, 0};
	d.consumers[2] = (struct consumer){
	    "return.s2", "P.return.s2", ROUTE_FROM_RETURN, 2, 0, 0};
	d.consumers[3] =
	    (struct consumer){"hold.s1", "P.hold.s1", ROUTE_FROM_HOLD, 1, 1, 0};
	d.consumers[4] = (struct consumer){
	    "requests", "P.requests", ROUTE_FROM_REQUESTS, -1, 0, 0};
	d.nconsumers = 5;
	for (unsigned s = 0; s < 3; s++)
		d.hold_queues[s] = hold_names[s];
}

static void
teardown(void)
{
	struct message *m;

	for (unsigned i = 0; i < calls.npublished; i++)
		message_free(calls.published[i]);
	while ((m = TAILQ_FIRST(&d.held)) != NULL) {
		ev_timer_stop(d.loop, &m->hold);
		TAILQ_REMOVE(&d.held, m, link);
		message_free(m);
	}
	while ((m = reorder_drain(&d.reorder)) != NULL)
		message_free(m);
	reorder_free(&d.reorder);
	outbox_drop(&d.out, message_free_item, NULL);
	xcheck_drop(&d.xc, message_free_item, NULL);
	targets_free(&d.targets);
	message_spare_free();
}

void
daemon_give_back(struct outbox_item *it, void *ctx)
{
	(void)ctx;
	message_free(MESSAGE_OF(it));
}

TestSuite(daemon_flow, .init = setup, .fini = teardown);

/* A delivery from consumer `consumer`, with the headers in t. */
static struct message *
delivery(unsigned consumer, const char *routing_key, struct tb *t)
{
	struct message *m = message_new();
	amqp_basic_properties_t p = props_of(t);

	cr_assert_not_null(m);
	m->consumer = consumer;
	m->src = d.consumers[consumer].src;
	m->routing_key = message_dup(m, amqp_cstring_bytes(routing_key));
	cr_assert_eq(message_set_props(m, &p), 0);
	return m;
}

/* An ingress delivery asking for `delay` ms. */
static struct message *
delayed(const char *routing_key, int64_t delay)
{
	struct tb t = {.n = 0};

	tb_i64(&t, "x-delay", delay);
	return delivery(0, routing_key, &t);
}

/*
 * Due now is due at most a millisecond ahead (the due time is stamped from
 * the clock rounded up): held that long.  Run the loop until no hold is
 * left.
 */
static void
settle(void)
{
	ev_run(d.loop, 0);
	cr_assert_eq(message_count(&d.held), 0);
}

static const struct route *
published(unsigned i)
{
	cr_assert_gt(calls.npublished, i, "%u published, want #%u",
	             calls.npublished, i);
	return &calls.published[i]->route;
}

Test(daemon_flow, delay_takes_the_largest_level_that_fits)
{
	const struct route *r;

	/* 1000 ms, aiming 50 ms early: 950 ms, so level 3 (800 ms). */
	daemon_message_done(&d, delayed("orders", 1000));
	r = published(0);
	cr_assert_eq(r->action, ROUTE_HOP);
	cr_assert_eq(r->level, 3);
	/* The rest, 200 ms, plus up to 1 ms the due time was rounded up. */
	cr_assert_leq(r->left, 201);
	cr_assert_geq(r->left, 190);
	cr_assert_eq(scheduled(), 1, "first sight is scheduled");
	cr_assert_eq(d.m.received[0], 1);
	cr_assert(calls.published[0]->routed);
}

Test(daemon_flow, due_now_is_delivered_at_once)
{
	const struct route *r;

	daemon_message_done(&d, delayed("orders", 0));
	settle();
	r = published(0);
	cr_assert_eq(r->action, ROUTE_DELIVER);
	expect_bytes(r->exchange, "");
	expect_bytes(r->routing_key, "orders");
	cr_assert_eq(calls.waits, 0, "the default exchange needs no check");
	cr_assert_leq(r->due, calls.published_at[0], "never early");
}

Test(daemon_flow, tail_inside_the_margin_is_held_then_delivered_on_time)
{
	const struct route *r;

	/* 120 ms: 70 ms after the margin, under the 100 ms level 0. */
	daemon_message_done(&d, delayed("orders", 120));
	cr_assert_eq(calls.npublished, 0, "held, not published");
	cr_assert_eq(message_count(&d.held), 1);
	cr_assert_eq(d.m.held_total, 1);
	ev_run(d.loop, 0); /* until the hold timer has fired */
	cr_assert_eq(message_count(&d.held), 0);
	r = published(0);
	cr_assert_eq(r->action, ROUTE_DELIVER);
	cr_assert_leq(r->due, calls.published_at[0], "never early");
}

Test(daemon_flow, first_sight_takes_the_shards_round_robin)
{
	for (int i = 0; i < 4; i++)
		daemon_message_done(&d, delayed("orders", 5000));
	cr_assert_eq(calls.npublished, 4);
	cr_assert_eq(published(0)->shard, 0);
	cr_assert_eq(published(1)->shard, 1);
	cr_assert_eq(published(2)->shard, 2);
	cr_assert_eq(published(3)->shard, 0);
}

Test(daemon_flow, a_shards_return_keeps_its_shard)
{
	struct tb t = {.n = 0};
	const struct route *r;

	tb_i64(&t, "x-cascade-due", duration_wall_ms() + 5000);
	tb_str(&t, "x-cascade-exchange", "");
	tb_str(&t, "x-cascade-routing-key", "orders");
	daemon_message_done(&d, delivery(2, "P.delay.3", &t));
	r = published(0);
	cr_assert_eq(r->action, ROUTE_HOP, "action %d", r->action);
	cr_assert_eq(r->shard, 2);
	cr_assert_eq(scheduled(), 0, "scheduled at first sight only");
	cr_assert_eq(d.next_shard, 0, "the round robin did not move");
}

/* A return of the shard 2 due `ago` ms ago, for the queue `key`. */
static struct message *
back(const char *key, int64_t ago)
{
	struct tb t = {.n = 0};

	tb_i64(&t, "x-cascade-due", duration_wall_ms() - ago);
	tb_str(&t, "x-cascade-exchange", "");
	tb_str(&t, "x-cascade-routing-key", key);
	return delivery(2, "P.delay.s2.3", &t);
}

/* The window, as it is when nothing was disrupted. */
static void
reorder_window_closed(int64_t ms)
{
	cfg.router_reorder_window = ms;
	cfg.router_prefetch = 1000;
	daemon_reorder_init(&d);
}

/* The window, open as it is after the daemon connected. */
static void
reorder_window(int64_t ms)
{
	reorder_window_closed(ms);
	daemon_reorder_disrupted(&d);
}

/* Back from the ladder overdue, in any order: they leave in due order
 * once the window is over. */
Test(daemon_flow, overdue_returns_leave_in_due_order)
{
	static const int64_t ago[] = {5000, 2000, 4000, 3000};

	reorder_window(300);
	for (size_t i = 0; i < 4; i++)
		daemon_message_done(&d, back("orders", ago[i]));
	cr_assert_eq(calls.npublished, 0, "they wait for the window");
	cr_assert_eq(d.m.overdue_returns, 4);
	cr_assert_eq(d.reorder.n, 4);
	settle();
	cr_assert_eq(calls.npublished, 4);
	for (unsigned i = 1; i < 4; i++)
		cr_assert_lt(published(i - 1)->due, published(i)->due,
		             "#%u leaves after #%u, due first", i, i - 1);
	cr_assert_eq(published(0)->action, ROUTE_DELIVER);
	cr_assert_eq(d.reorder.n, 0);
}

/* One on time is not held, and lets out first its target's overdue ones
 * due before it; another target's keep their window. */
Test(daemon_flow, one_on_time_goes_at_once_after_its_targets_overdue)
{
	reorder_window(60000);
	daemon_message_done(&d, back("orders", 3000));
	daemon_message_done(&d, back("billing", 4000));
	daemon_message_done(&d, back("orders", 5000));
	cr_assert_eq(calls.npublished, 0);
	daemon_message_done(&d, back("orders", 0));
	cr_assert_eq(calls.npublished, 3, "at once, the window is 60 s");
	cr_assert_lt(published(0)->due, published(1)->due);
	cr_assert_lt(published(1)->due, published(2)->due);
	cr_assert(headers_bytes_eq(published(2)->routing_key,
	                           amqp_cstring_bytes("orders")));
	cr_assert_eq(d.reorder.n, 1, "billing's keeps waiting");
	cr_assert_eq(d.m.overdue_returns, 3, "on time is not overdue");
}

/* Due 20 s ago, on a hop planned to come back `planned_ago` ms ago
 * (x-cascade-back): a wait for a pace's slot, or a paused target's. */
static struct message *
back_planned(const char *key, int64_t planned_ago)
{
	struct tb t = {.n = 0};
	int64_t now = duration_wall_ms();

	tb_i64(&t, "x-cascade-due", now - 20000);
	tb_str(&t, "x-cascade-exchange", "");
	tb_str(&t, "x-cascade-routing-key", key);
	tb_i64(&t, "x-cascade-back", now - planned_ago);
	return delivery(2, "P.delay.s2.3", &t);
}

/* Late against its due time on purpose, on time against its hop: it goes
 * at once, and is not counted overdue. */
Test(daemon_flow, a_wait_on_purpose_is_not_overdue)
{
	reorder_window(60000);
	daemon_message_done(&d, back_planned("orders", 200));
	cr_assert_eq(calls.npublished, 1, "not held");
	cr_assert_eq(d.m.overdue_returns, 0);
	cr_assert_eq(d.reorder.n, 0);
}

/* Late against its hop too (the broker held it): overdue, and held. */
Test(daemon_flow, late_against_its_hop_is_overdue)
{
	reorder_window(60000);
	daemon_message_done(&d, back_planned("orders", 3000));
	cr_assert_eq(calls.npublished, 0, "held in the window");
	cr_assert_eq(d.m.overdue_returns, 1);
	cr_assert_eq(d.reorder.n, 1);
}

/* From P.ingress asking for a time `ago` ms past, handed out before
 * (redelivered) or not. */
static struct message *
ingress_past(const char *key, int64_t ago, int redelivered)
{
	struct tb t = {.n = 0};
	struct message *m;

	tb_i64(&t, "x-deliver-at", duration_wall_ms() - ago);
	m = delivery(0, key, &t);
	m->redelivered = redelivered;
	return m;
}

/* After a broker's restart P.ingress hands out again what a daemon was
 * moving when it went: overdue, it waits in the window with the ladder's
 * overdue returns, and they all leave in due order. */
Test(daemon_flow, a_redelivered_overdue_ingress_leaves_in_due_order)
{
	reorder_window(60000);
	daemon_message_done(&d, ingress_past("orders", 3000, 1));
	cr_assert_eq(calls.npublished, 0, "held in the window");
	cr_assert_eq(d.reorder.n, 1);
	cr_assert_eq(d.m.overdue_returns, 0, "not a return from the ladder");
	daemon_message_done(&d, back("orders", 4000));
	cr_assert_eq(d.reorder.n, 2);
	daemon_message_done(&d, back("orders", 0));
	cr_assert_eq(calls.npublished, 3);
	cr_assert_lt(published(0)->due, published(1)->due);
	cr_assert_lt(published(1)->due, published(2)->due);
	cr_assert_eq(d.reorder.n, 0);
}

/* A first delivery that asks for a time already past is not a
 * disruption's: it goes at once. */
Test(daemon_flow, a_first_delivery_for_a_past_time_goes_at_once)
{
	reorder_window(60000);
	daemon_message_done(&d, ingress_past("orders", 5000, 0));
	settle();
	cr_assert_eq(calls.npublished, 1);
	cr_assert_eq(d.reorder.n, 0);
}

/* A burst due together, late behind its own backlog, with nothing
 * disrupted: counted overdue, and gone at once, as with no window. */
Test(daemon_flow, a_backlog_with_no_disruption_is_not_held)
{
	reorder_window_closed(60000);
	daemon_message_done(&d, back("orders", 3000));
	daemon_message_done(&d, back("orders", 5000));
	daemon_message_done(&d, back("orders", 4000));
	cr_assert_eq(calls.npublished, 3, "not held");
	cr_assert_eq(d.reorder.n, 0);
	cr_assert_eq(d.m.overdue_returns, 3);
}

/* A return handed out before (another daemon had it when it stopped) is
 * a disruption: the window opens, for it and for what comes after it. */
Test(daemon_flow, a_redelivery_opens_the_window)
{
	struct message *m;

	reorder_window_closed(60000);
	m = back("orders", 5000);
	m->redelivered = 1;
	daemon_message_done(&d, m);
	cr_assert_eq(d.reorder.n, 1, "held: a disruption");
	daemon_message_done(&d, back("orders", 4000));
	cr_assert_eq(d.reorder.n, 2, "the window is open");
	cr_assert_eq(calls.npublished, 0);
}

/* A return due `ago` ms ago, for a paced target, holding the slot that
 * this daemon reserved for it at `slot_ago` ms ago. */
static struct message *
back_slotted(const char *key, int64_t ago, int64_t slot_ago)
{
	struct tb t = {.n = 0};
	int64_t now = duration_wall_ms();

	tb_i64(&t, "x-cascade-due", now - ago);
	tb_str(&t, "x-cascade-exchange", "");
	tb_str(&t, "x-cascade-routing-key", key);
	tb_i64(&t, "x-cascade-slot", now - slot_ago);
	tb_str(&t, "x-cascade-slot-by", "daemon-test");
	return delivery(2, "P.delay.s2.3", &t);
}

/* A paced target's overdue delivery took its slot, then waited in the
 * window.  An on-time one with its own slot lets it out: it takes its
 * turn at the pace again instead of going beside it. */
Test(daemon_flow, a_paced_target_gets_no_burst_out_of_the_window)
{
	static struct pace pace;
	const char *why = NULL;

	pace_init(&pace);
	cr_assert_eq(pace_add(&pace, "/orders", 7, 1.0, &why), 0);
	d.plan.pace = &pace;
	d.plan.own = amqp_cstring_bytes("daemon-test");
	reorder_window(60000);
	daemon_message_done(&d, back("orders", 5000));
	cr_assert_eq(d.reorder.n, 1, "its slot now, then held");
	daemon_message_done(&d, back_slotted("orders", 0, 0));
	cr_assert_eq(d.reorder.n, 0);
	cr_assert_eq(calls.npublished, 2);
	cr_assert_eq(published(0)->action, ROUTE_HOP,
	             "the one let out waits for a slot of its own");
	cr_assert_eq(published(1)->action, ROUTE_DELIVER,
	             "the one on time, in its slot, goes");
	cr_assert_gt(published(0)->slot, published(1)->slot);
	d.plan.pace = NULL;
}

/* Without a window, overdue returns are counted and go at once. */
Test(daemon_flow, a_zero_window_holds_nothing)
{
	reorder_window(0);
	daemon_message_done(&d, back("orders", 5000));
	daemon_message_done(&d, back("orders", 9000));
	cr_assert_eq(calls.npublished, 2);
	cr_assert_eq(d.m.overdue_returns, 2);
}

Test(daemon_flow, cancelled_is_dropped_unpublished)
{
	daemon_message_done(&d, delayed("cancel-me", 5000));
	cr_assert_eq(calls.cancelled, 1);
	cr_assert_eq(calls.npublished, 0);
	cr_assert_eq(scheduled(), 0);
}

Test(daemon_flow, a_parked_message_is_not_looked_up_for_cancellations)
{
	struct tb t = {.n = 0};
	const struct route *r;

	tb_str(&t, "x-delay", "soon");
	daemon_message_done(&d, delivery(0, "cancel-me", &t));
	r = published(0);
	cr_assert_eq(r->action, ROUTE_PARK);
	cr_assert_eq(r->park, PARK_bad_header);
	cr_assert_eq(calls.cancelled, 0);
}

Test(daemon_flow, a_cancellation_request_is_not_routed)
{
	daemon_message_done(&d, delayed("request", 5000));
	cr_assert_eq(calls.requests, 1);
	cr_assert_eq(published(0)->action, ROUTE_RECORD, "recorded");
	cr_assert_eq(calls.npublished, 1);
	cr_assert_eq(scheduled(), 0);
}

/* From P.requests: opened, then taken by the scan, never routed. */
Test(daemon_flow, a_request_from_p_requests_waits_for_a_reading)
{
	struct tb t = {.n = 0};

	tb_str(&t, "x-cascade-reschedule", "inv-1");
	tb_i64(&t, "x-delay", 5000);
	daemon_message_done(&d, delivery(4, "P.requests", &t));
	cr_assert_eq(calls.opened, 1);
	cr_assert_eq(calls.taken, 1);
	cr_assert_eq(calls.requests, 0, "not judged as from ingress");
	cr_assert_eq(calls.npublished, 0);
	cr_assert_eq(scheduled(), 0);
	cr_assert_eq(d.m.received[4], 1);
}

/* The guard counts P.requests' own deliveries, not the publisher's
 * headers inside the envelope. */
Test(daemon_flow, a_request_redelivered_too_often_from_p_requests_is_parked)
{
	struct tb t = {.n = 0};
	struct message *m;

	tb_str(&t, "x-cascade-reschedule", "inv-1");
	m = delivery(4, "P.requests", &t);
	m->redelivered = 1;
	daemon_message_done(&d, m);
	cr_assert_eq(calls.taken, 0);
	cr_assert_eq(published(0)->action, ROUTE_PARK);
	cr_assert_eq(published(0)->park, PARK_redelivered);
	cr_assert(published(0)->fresh, "the publisher's, as on ingress");
}

Test(daemon_flow, a_named_exchange_is_checked_first)
{
	struct tb t = {.n = 0};

	tb_i64(&t, "x-delay", 0);
	tb_str(&t, "x-target-exchange", "billing");
	daemon_message_done(&d, delivery(0, "orders", &t));
	settle();
	cr_assert_eq(calls.waits, 1);
	cr_assert_eq(calls.npublished, 0);

	/* Known to exist: published at once. */
	xcheck_add(&d.xc, amqp_cstring_bytes("billing"), NULL,
	           duration_mono_ms());
	daemon_message_done(&d, delivery(0, "orders", &t));
	settle();
	cr_assert_eq(calls.waits, 1);
	cr_assert_eq(published(0)->action, ROUTE_DELIVER);
	expect_bytes(published(0)->exchange, "billing");
}

Test(daemon_flow, a_refused_exchange_parks)
{
	struct tb t = {.n = 0};

	tb_i64(&t, "x-delay", 0);
	tb_str(&t, "x-target-exchange", "secret");
	xcheck_add(&d.xc, amqp_cstring_bytes("secret"), "403 ACCESS_REFUSED",
	           duration_mono_ms());
	daemon_message_done(&d, delivery(0, "orders", &t));
	settle();
	cr_assert_eq(calls.parks, 1);
	cr_assert_eq(published(0)->action, ROUTE_PARK);
	cr_assert_eq(published(0)->park, PARK_broker_refused);
}

Test(daemon_flow, redelivered_too_often_is_parked_unrouted)
{
	struct tb t = {.n = 0};
	struct message *m;

	tb_i64(&t, "x-delay", 5000);
	tb_i64(&t, "x-delivery-count", 3);
	m = delivery(0, "orders", &t);
	m->redelivered = 1;
	daemon_message_done(&d, m);
	cr_assert_eq(published(0)->action, ROUTE_PARK);
	cr_assert_eq(published(0)->park, PARK_redelivered);
	cr_assert_eq(scheduled(), 0);
}

Test(daemon_flow, blocked_connection_pauses_unrouted)
{
	struct message *m = delayed("orders", 5000);

	d.out.blocked = 1;
	daemon_message_done(&d, m);
	cr_assert_eq(calls.npublished, 0);
	cr_assert_eq(outbox_count(&d.out.paused), 1);
	cr_assert_not(m->routed);
}

Test(daemon_flow, returns_records_and_discards_are_not_routed)
{
	struct tb t = {.n = 0};
	struct message *m;

	m = delivery(0, "orders", &t);
	m->kind = MESSAGE_RETURN;
	daemon_message_done(&d, m);
	cr_assert_eq(calls.matched, 1);
	cr_assert_eq(d.m.returns, 1);
	cr_assert_eq(d.m.received[0], 0, "a return is not received");

	m = delivery(0, "orders", &t);
	m->kind = MESSAGE_RECORD;
	m->stream = 1;
	daemon_message_done(&d, m);
	cr_assert_eq(calls.records, 1);

	m = delayed("orders", 5000);
	m->discard = 1;
	daemon_message_done(&d, m);
	cr_assert_eq(d.m.received[0], 1, "a discarded delivery counts");
	cr_assert_eq(calls.npublished, 0);
	cr_assert_eq(scheduled(), 0);
	cr_assert_null(d.assembling);
}

/*
 * Native waiting: a 1000 ms window in front of the same ladder.
 */

static void
native(void)
{
	d.rp.native_window = 1000;
	d.plan.hold_queues = d.hold_queues;
}

/* A delivery from shard 1's holding queue over AMQP 1.0, due in `left`. */
static struct message *
held_delivery(int64_t left)
{
	struct tb t = {.n = 0};
	struct message *m;

	tb_i64(&t, "x-cascade-due", duration_wall_ms() + left);
	tb_str(&t, "x-cascade-routing-key", "orders");
	m = delivery(3, "P.hold.s1", &t);
	m->kind = MESSAGE_HELD;
	return m;
}

Test(daemon_flow, native_the_last_stretch_waits_in_the_holding_queue)
{
	const struct route *r;

	native();
	daemon_message_done(&d, delayed("orders", 900));
	r = published(0);
	cr_assert_eq(r->action, ROUTE_WAIT, "no hop, no tail held");
	cr_assert_eq(message_count(&d.held), 0);
	cr_assert_eq(scheduled(), 1);
}

Test(daemon_flow, native_a_longer_delay_rides_the_ladder_first)
{
	const struct route *r;

	native();
	/* 5000 ms: level 5 (3200 ms) first, the ladder as before. */
	daemon_message_done(&d, delayed("orders", 5000));
	r = published(0);
	cr_assert_eq(r->action, ROUTE_HOP);
	cr_assert_eq(r->level, 5);
}

Test(daemon_flow, native_not_due_goes_back_to_its_holding_queue_unpublished)
{
	native();
	daemon_message_done(&d, held_delivery(800));
	cr_assert_eq(calls.unwrapped, 1, "the envelope is opened");
	cr_assert_eq(d.m.native_returns, 1);
	cr_assert_eq(calls.npublished, 0);
	cr_assert_eq(scheduled(), 0, "not a first sight");
	cr_assert_eq(d.m.received[3], 1);
}

Test(daemon_flow, native_due_is_delivered_from_the_holding_queue)
{
	const struct route *r;

	native();
	daemon_message_done(&d, held_delivery(-5));
	r = published(0);
	cr_assert_eq(r->action, ROUTE_DELIVER);
	cr_assert_eq(d.m.native_returns, 0);
	cr_assert(
	    headers_bytes_eq(r->routing_key, amqp_cstring_bytes("orders")));
}

/* From the holding queue `ago` ms overdue: held there until its time
 * (given back with x-opt-delivery-time = its due time) or not. */
static struct message *
held_overdue(int64_t ago, int timed)
{
	struct message *m = held_delivery(-ago);

	m->delivery_time = timed ? duration_wall_ms() - ago : 0;
	return m;
}

/* After a broker's restart RabbitMQ 4.3 gives back first what a daemon
 * had taken and not yet given back with its time, then the rest in due
 * order: the first waits for those due before it. */
Test(daemon_flow, native_one_given_back_first_after_a_restart_keeps_due_order)
{
	native();
	reorder_window(60000);
	daemon_message_done(&d, held_overdue(4000, 0));
	cr_assert_eq(calls.npublished, 0, "never held by the queue: waits");
	cr_assert_eq(d.reorder.n, 1);
	daemon_message_done(&d, held_overdue(5000, 1));
	cr_assert_eq(calls.npublished, 1, "held by the queue: goes at once");
	cr_assert_eq(d.reorder.n, 1);
	daemon_message_done(&d, held_overdue(3000, 1));
	cr_assert_eq(calls.npublished, 3);
	cr_assert_lt(published(0)->due, published(1)->due);
	cr_assert_lt(published(1)->due, published(2)->due);
	cr_assert_eq(d.reorder.n, 0);
	cr_assert_eq(d.m.overdue_returns, 0, "not the ladder's");
}

/* Given back with its due time, and released `left` ms before it (a
 * queue that ignores the time, a broker's clock ahead). */
static struct message *
held_early(int64_t left)
{
	struct message *m = held_delivery(left);

	m->delivery_time = duration_wall_ms() + left;
	return m;
}

/* Released early, it is not given back at once (it would come straight
 * back, at round-trip speed) but waits in memory, backing off: twice as
 * long at each early release; then it goes back with its time, counted
 * once. */
Test(daemon_flow, native_a_release_that_comes_back_early_waits_backing_off)
{
	native();
	daemon_message_done(&d, held_early(800));
	cr_assert_eq(d.m.native_early, 1);
	cr_assert_eq(d.m.native_returns, 0, "not given back at once");
	cr_assert_eq(message_count(&d.held), 1, "it waits here");
	cr_assert_eq(d.early_backoff, 100);
	daemon_message_done(&d, held_early(700));
	cr_assert_eq(d.early_backoff, 200, "twice as long");
	settle();
	cr_assert_eq(d.m.native_returns, 2, "then back with their time");
	cr_assert_eq(d.m.native_early, 2, "counted once each");
	/* Due before the wait is over: it waits until due, and goes. */
	d.early_backoff = 10000;
	daemon_message_done(&d, held_early(300));
	settle();
	cr_assert_eq(calls.npublished, 1);
	cr_assert_eq(published(0)->action, ROUTE_DELIVER);
	cr_assert_eq(d.m.native_returns, 2);
}

Test(daemon_flow, native_a_refusing_holding_queue_sends_it_round_the_ladder)
{
	const struct route *r;

	native();
	targets_refused(&d.targets, amqp_empty_bytes,
	                amqp_cstring_bytes(d.hold_queues[0]),
	                duration_mono_ms());
	targets_refused(&d.targets, amqp_empty_bytes,
	                amqp_cstring_bytes(d.hold_queues[1]),
	                duration_mono_ms());
	targets_refused(&d.targets, amqp_empty_bytes,
	                amqp_cstring_bytes(d.hold_queues[2]),
	                duration_mono_ms());
	daemon_message_done(&d, delayed("orders", 900));
	r = published(0);
	cr_assert_eq(r->action, ROUTE_HOP, "the ladder takes it instead");
	cr_assert_eq(r->level, 3, "850 ms: level 3 (800 ms)");
}

Test(daemon_flow, native_redelivered_too_often_from_a_holding_queue_is_parked)
{
	struct message *m;

	native();
	m = held_delivery(800);
	m->redelivered = 1;
	m->delivery_count = 3;
	daemon_message_done(&d, m);
	cr_assert_eq(published(0)->action, ROUTE_PARK);
	cr_assert_eq(published(0)->park, PARK_redelivered);
}

/* A holding queue's delivery arrives between the frames of a 0-9-1 one:
 * the half-assembled delivery stays where the wire left it. */
Test(daemon_flow, native_a_delivery_between_frames_leaves_the_assembly_alone)
{
	struct message *half = message_new();

	native();
	d.assembling = half;
	daemon_message_done(&d, held_delivery(800));
	cr_assert_eq(d.assembling, half);
	cr_assert_eq(d.m.native_returns, 1);
	d.assembling = NULL;
	message_free(half);
}
