/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reorder window (CONTRACT.md section 2): what comes back overdue
 * after a disruption the daemon saw leaves in due order, and nothing on
 * time is held (daemon_fixture.c).
 */
#include <criterion/criterion.h>
#include <ev.h>
#include <stdio.h>
#include <string.h>

#include "daemon_fixture.h"
#include "duration.h"
#include "helpers.h"

TestSuite(daemon_window, .init = daemon_fixture_setup,
          .fini = daemon_fixture_teardown);

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

/* Back from the ladder overdue, in any order: they leave in due order
 * once the window is over. */
Test(daemon_window, overdue_returns_leave_in_due_order)
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
Test(daemon_window, one_on_time_goes_at_once_after_its_targets_overdue)
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
Test(daemon_window, a_wait_on_purpose_is_not_overdue)
{
	reorder_window(60000);
	daemon_message_done(&d, back_planned("orders", 200));
	cr_assert_eq(calls.npublished, 1, "not held");
	cr_assert_eq(d.m.overdue_returns, 0);
	cr_assert_eq(d.reorder.n, 0);
}

/* Late against its hop too (the broker held it): overdue, and held. */
Test(daemon_window, late_against_its_hop_is_overdue)
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
Test(daemon_window, a_redelivered_overdue_ingress_leaves_in_due_order)
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
Test(daemon_window, a_first_delivery_for_a_past_time_goes_at_once)
{
	reorder_window(60000);
	daemon_message_done(&d, ingress_past("orders", 5000, 0));
	settle();
	cr_assert_eq(calls.npublished, 1);
	cr_assert_eq(d.reorder.n, 0);
}

/* A burst due together, late behind its own backlog, with nothing
 * disrupted: counted overdue, and gone at once, as with no window. */
Test(daemon_window, a_backlog_with_no_disruption_is_not_held)
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
Test(daemon_window, a_redelivery_opens_the_window)
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
Test(daemon_window, a_paced_target_gets_no_burst_out_of_the_window)
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
Test(daemon_window, a_zero_window_holds_nothing)
{
	reorder_window(0);
	daemon_message_done(&d, back("orders", 5000));
	daemon_message_done(&d, back("orders", 9000));
	cr_assert_eq(calls.npublished, 2);
	cr_assert_eq(d.m.overdue_returns, 2);
}
