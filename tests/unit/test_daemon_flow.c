/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A delivery's way through the daemon (daemon_fixture.c): the level it
 * takes, its shard, a cancellation, a request, a refused exchange, the
 * redelivery guard and parking.
 */
#include <criterion/criterion.h>
#include <ev.h>
#include <stdio.h>
#include <string.h>

#include "daemon_fixture.h"
#include "duration.h"
#include "helpers.h"

TestSuite(daemon_flow, .init = daemon_fixture_setup,
          .fini = daemon_fixture_teardown);

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
