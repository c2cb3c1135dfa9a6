/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Native waiting: the last stretch in a holding queue over AMQP 1.0,
 * what comes back early or after a restart, and the guard on its
 * redeliveries (daemon_fixture.c).
 */
#include <criterion/criterion.h>
#include <ev.h>
#include <stdio.h>
#include <string.h>

#include "daemon_fixture.h"
#include "duration.h"
#include "helpers.h"

TestSuite(daemon_native, .init = daemon_fixture_setup,
          .fini = daemon_fixture_teardown);

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

Test(daemon_native, native_the_last_stretch_waits_in_the_holding_queue)
{
	const struct route *r;

	native();
	daemon_message_done(&d, delayed("orders", 900));
	r = published(0);
	cr_assert_eq(r->action, ROUTE_WAIT, "no hop, no tail held");
	cr_assert_eq(message_count(&d.held), 0);
	cr_assert_eq(scheduled(), 1);
}

Test(daemon_native, native_a_longer_delay_rides_the_ladder_first)
{
	const struct route *r;

	native();
	/* 5000 ms: level 5 (3200 ms) first, the ladder as before. */
	daemon_message_done(&d, delayed("orders", 5000));
	r = published(0);
	cr_assert_eq(r->action, ROUTE_HOP);
	cr_assert_eq(r->level, 5);
}

Test(daemon_native, native_not_due_goes_back_to_its_holding_queue_unpublished)
{
	native();
	daemon_message_done(&d, held_delivery(800));
	cr_assert_eq(calls.unwrapped, 1, "the envelope is opened");
	cr_assert_eq(d.m.native_returns, 1);
	cr_assert_eq(calls.npublished, 0);
	cr_assert_eq(scheduled(), 0, "not a first sight");
	cr_assert_eq(d.m.received[3], 1);
}

Test(daemon_native, native_due_is_delivered_from_the_holding_queue)
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
Test(daemon_native, native_one_given_back_first_after_a_restart_keeps_due_order)
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
Test(daemon_native, native_a_release_that_comes_back_early_waits_backing_off)
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

Test(daemon_native, native_a_refusing_holding_queue_sends_it_round_the_ladder)
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

Test(daemon_native, native_redelivered_too_often_from_a_holding_queue_is_parked)
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
Test(daemon_native, native_a_delivery_between_frames_leaves_the_assembly_alone)
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
