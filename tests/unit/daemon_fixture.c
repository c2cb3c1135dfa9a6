/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon's sorting of a delivery, linked alone for the daemon_* unit
 * tests (test_daemon_flow.c, test_daemon_window.c, test_daemon_native.c):
 * daemon_sort.c and daemon_flow.c are real, and what they call in the
 * other daemon files is stubbed here.  The stub publisher records each
 * message it is handed and when, so the tests assert where a message
 * would have gone.
 */
#include <criterion/criterion.h>
#include <ev.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_fixture.h"
#include "duration.h"
#include "helpers.h"

/* What the stubs were asked to do. */
struct daemon_calls calls;

struct daemon d;
struct config fixture_cfg;
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
uint64_t
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
void
daemon_fixture_setup(void)
{
	const char *why = NULL;

	memset(&calls, 0, sizeof(calls));
	memset(&d, 0, sizeof(d));
	memset(&fixture_cfg, 0, sizeof(fixture_cfg));
	fixture_cfg.router_max_redeliveries = 3;
	d.cfg = &fixture_cfg;
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

void
daemon_fixture_teardown(void)
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

/* A delivery from consumer `consumer`, with the headers in t. */
struct message *
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
struct message *
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
void
settle(void)
{
	ev_run(d.loop, 0);
	cr_assert_eq(message_count(&d.held), 0);
}

const struct route *
published(unsigned i)
{
	cr_assert_gt(calls.npublished, i, "%u published, want #%u",
	             calls.npublished, i);
	return &calls.published[i]->route;
}

/* The window, as it is when nothing was disrupted. */
void
reorder_window_closed(int64_t ms)
{
	fixture_cfg.router_reorder_window = ms;
	fixture_cfg.router_prefetch = 1000;
	daemon_reorder_init(&d);
}

/* The window, open as it is after the daemon connected. */
void
reorder_window(int64_t ms)
{
	reorder_window_closed(ms);
	daemon_reorder_disrupted(&d);
}
