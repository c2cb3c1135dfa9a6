/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plan: what happens to a routed message when its target or its delay
 * level refuses publishes.  Ladder 2 s x 4 (2, 8, 32, 128 s ...), no hold.
 */
#include <criterion/criterion.h>
#include <stdio.h>

#include "helpers.h"
#include "plan.h"

#define MONO INT64_C(5000000)

/* The plan, over a ladder and targets (helpers.h). */
static struct plan_fixture fx;

static void
setup(void)
{
	plan_fixture_init(&fx);
}

static void
teardown(void)
{
	targets_free(&fx.targets);
}

TestSuite(plan, .init = setup, .fini = teardown);

/* A message due in `in` ms for exchange/key, stepped at NOW. */
static struct route
routed(int64_t in, const char *exchange, const char *key)
{
	struct route r;

	memset(&r, 0, sizeof(r));
	r.due = NOW + in;
	r.exchange = amqp_cstring_bytes(exchange);
	r.routing_key = amqp_cstring_bytes(key);
	router_step(&fx.rp, &r, NOW);
	return r;
}

static void
refuse_level(int level)
{
	targets_refused(&fx.targets, amqp_empty_bytes,
	                amqp_cstring_bytes(fx.queues[level]), MONO);
}

Test(plan, nothing_refused_publishes_as_routed)
{
	struct route r = routed(0, "", "jobs");
	const char *why;

	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO, &why), PLAN_PUBLISH,
	             "the default exchange always exists");
	r = routed(0, "orders", "new");
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO, &why), PLAN_CHECK,
	             "a named exchange is checked first");
	cr_assert_eq(r.action, ROUTE_DELIVER);
	r = routed(100000, "orders", "new");
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO, &why), PLAN_PUBLISH);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 2, "32 s is the largest level in 100 s");
	cr_assert_null(why);
	r.action = ROUTE_HOLD;
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO, &why), PLAN_HOLD);
}

Test(plan, refusing_target_sends_its_delivery_round_the_ladder)
{
	struct route r = routed(0, "orders", "new");
	const char *why;

	/* Refused three times in a row, each probe after the last backoff:
	 * it backs off 2, 4, then 8 s. */
	targets_refused(&fx.targets, r.exchange, r.routing_key, MONO - 6000);
	targets_refused(&fx.targets, r.exchange, r.routing_key, MONO - 4000);
	cr_assert_eq(
	    targets_refused(&fx.targets, r.exchange, r.routing_key, MONO),
	    8000);
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO, &why), PLAN_PUBLISH);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 1, "the 8 s level for an 8 s backoff");
	cr_assert_eq(r.due, NOW, "its due time is kept: late, never early");
	cr_assert_eq(r.refused, 1);
	cr_assert_eq(r.refused_since, NOW);
	cr_assert_eq(fx.targets.t[0].diverted_total, 1);
	/* Once the backoff is over the next delivery probes the target. */
	r = routed(0, "orders", "new");
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO + 8000, &why),
	             PLAN_CHECK);
}

Test(plan, delivery_refused_long_enough_is_parked_with_the_reason)
{
	struct route r = routed(0, "orders", "new");
	const char *why;

	fx.p.refused_park_after = 3600000;
	targets_refused(&fx.targets, r.exchange, r.routing_key, MONO);
	r.refused = 40;
	r.refused_since = NOW - 3599999;
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO, &why), PLAN_PUBLISH);
	cr_assert_eq(r.action, ROUTE_HOP, "not yet: one ms short");
	cr_assert_eq(r.refused, 41);
	r.action = ROUTE_DELIVER;
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW + 1, MONO, &why),
	             PLAN_PUBLISH);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_eq(r.park, PARK_refused);
	cr_assert_str_eq(r.reason,
	                 "target exchange 'orders' routing key 'new' refused "
	                 "it for 1h ([router] refused_park_after)");
}

Test(plan, without_refused_park_after_a_refused_delivery_is_never_parked)
{
	struct route r = routed(0, "orders", "new");
	const char *why;

	targets_refused(&fx.targets, r.exchange, r.routing_key, MONO);
	r.refused = 1000;
	r.refused_since = NOW - 365 * DAY;
	plan_dispatch(&fx.p, &r, NOW, MONO, &why);
	cr_assert_eq(r.action, ROUTE_HOP);
}

Test(plan, refusing_level_makes_the_hop_take_the_largest_lower_one)
{
	struct route r = routed(100000, "orders", "new");
	const char *why;

	refuse_level(2);
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO, &why), PLAN_PUBLISH);
	cr_assert_eq(r.level, 1);
	cr_assert_eq(r.left, 100000 - 8000);
	refuse_level(1);
	r = routed(100000, "orders", "new");
	plan_dispatch(&fx.p, &r, NOW, MONO, &why);
	cr_assert_eq(r.level, 0);
}

Test(plan, every_level_refusing_retries_from_memory)
{
	struct route r = routed(10000, "orders", "new");
	const char *why;

	cr_assert_eq(r.level, 1);
	refuse_level(0);
	refuse_level(1);
	refuse_level(3); /* above: irrelevant */
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO, &why), PLAN_RETRY);
	cr_assert_str_eq(why,
	                 "every delay level it could take refuses publishes");
}

Test(plan, nacked_delivery_backs_off_its_target_and_diverts)
{
	struct route r = routed(0, "orders", "new");
	const char *refusal, *why;
	int64_t wait;

	cr_assert_eq(plan_nacked(&fx.p, &r, r.routing_key, NOW, MONO, &refusal,
	                         &wait, &why),
	             PLAN_PUBLISH);
	cr_assert_str_eq(refusal, "target refused the delivery "
	                          "(queue full or unavailable)");
	cr_assert_eq(wait, 2000, "the first backoff is one resolution step");
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 0);
	cr_assert_gt(targets_wait(&fx.targets, r.exchange, r.routing_key, MONO),
	             0);
	/* Other fx.targets are not slowed down. */
	cr_assert_eq(targets_wait(&fx.targets, amqp_cstring_bytes("orders"),
	                          amqp_cstring_bytes("other"), MONO),
	             0);
}

Test(plan, nacked_hop_backs_off_its_level_and_steps_afresh)
{
	struct route r = routed(100000, "orders", "new");
	const char *refusal, *why;
	int64_t wait;

	cr_assert_eq(r.level, 2);
	/* Published to level 2; nacked 1 s later. */
	cr_assert_eq(plan_nacked(&fx.p, &r, amqp_cstring_bytes(fx.queues[2]),
	                         NOW + 1000, MONO, &refusal, &wait, &why),
	             PLAN_PUBLISH);
	cr_assert_str_eq(refusal,
	                 "delay queue refused the hop (full or unavailable)");
	cr_assert_eq(wait, 2000);
	cr_assert_eq(r.level, 1, "level 2 backs off: the next lower one");
	cr_assert_eq(r.left, 99000 - 8000, "stepped from the clock");
	/* Nacked when already due: delivered now. */
	r = routed(1000, "", "jobs");
	cr_assert_eq(plan_nacked(&fx.p, &r, amqp_cstring_bytes(fx.queues[0]),
	                         NOW + 1000, MONO, &refusal, &wait, &why),
	             PLAN_PUBLISH);
	cr_assert_eq(r.action, ROUTE_DELIVER);
}

Test(plan, nacked_parked_copy_is_retried_and_nothing_backs_off)
{
	struct route r = routed(0, "orders", "new");
	const char *refusal, *why;
	int64_t wait;

	router_park(&r, PARK_bad_header, "bad");
	cr_assert_eq(plan_nacked(&fx.p, &r, amqp_cstring_bytes("cascade.error"),
	                         NOW, MONO, &refusal, &wait, &why),
	             PLAN_RETRY);
	cr_assert_null(refusal);
	cr_assert_str_eq(
	    why, "broker nacked the publish (queue full or unavailable)");
	cr_assert_eq(targets_backing_off(&fx.targets, MONO), 0);
}

Test(plan, an_accepted_publish_clears_the_backoff)
{
	struct route r = routed(0, "orders", "new");
	struct route h = routed(100000, "orders", "new");
	const char *why;

	targets_refused(&fx.targets, r.exchange, r.routing_key, MONO);
	refuse_level(2);
	cr_assert_eq(targets_backing_off(&fx.targets, MONO), 2);
	plan_accepted(&fx.p, &r, r.routing_key);
	plan_accepted(&fx.p, &h, amqp_cstring_bytes(fx.queues[2]));
	cr_assert_eq(targets_backing_off(&fx.targets, MONO), 0);
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO, &why), PLAN_CHECK);
	cr_assert_eq(plan_dispatch(&fx.p, &h, NOW, MONO, &why), PLAN_PUBLISH);
	cr_assert_eq(h.level, 2);
}

/* Native waiting: the holding queue refused; the fx.ladder takes it until
 * the queue's backoff is over, and then the queue again. */
Test(plan, a_refused_wait_goes_round_the_ladder_meanwhile)
{
	static const char *const holds[1] = {"cascade.hold"};
	const char *refusal, *why;
	int64_t wait;
	struct route r;

	fx.rp.native_window = 64000;
	fx.p.hold_queues = holds;
	r = routed(40000, "", "jobs");
	cr_assert_eq(r.action, ROUTE_WAIT);
	cr_assert_eq(plan_nacked(&fx.p, &r, amqp_cstring_bytes(holds[0]), NOW,
	                         MONO, &refusal, &wait, &why),
	             PLAN_PUBLISH);
	cr_assert_not_null(refusal);
	cr_assert_gt(wait, 0);
	cr_assert_eq(r.action, ROUTE_HOP, "32 s on the fx.ladder instead");
	cr_assert_eq(r.level, 2);
	/* Another one while the queue backs off: the fx.ladder too. */
	r = routed(40000, "", "jobs");
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO + 1, &why),
	             PLAN_PUBLISH);
	cr_assert_eq(r.action, ROUTE_HOP);
	/* The backoff over: the holding queue again. */
	r = routed(40000, "", "jobs");
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO + wait, &why),
	             PLAN_PUBLISH);
	cr_assert_eq(r.action, ROUTE_WAIT);
}

/* ---- pacing (pace.h): slots held, sent round, kept or taken afresh ---- */

static struct pace pace;

static void
pace_on(const char *target, double per_s)
{
	const char *why;

	pace_init(&pace);
	cr_assert_eq(pace_add(&pace, target, strlen(target), per_s, &why), 0);
	fx.p.pace = &pace;
	fx.p.own = amqp_cstring_bytes("daemon-1-a");
}

Test(plan, a_paced_target_spaces_its_deliveries_in_memory_or_round_the_ladder)
{
	struct route r;
	const char *why;

	pace_on("/orders", 0.25); /* a slot every 4 s; the shortest level 2 s */
	r = routed(0, "", "orders");
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO, &why), PLAN_PUBLISH);
	cr_assert_eq(r.action, ROUTE_DELIVER, "the first: at once");
	r = routed(0, "", "orders");
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO, &why), PLAN_PUBLISH);
	cr_assert_eq(r.slot, NOW + 4000);
	cr_assert_eq(r.action, ROUTE_HOP, "the second: round the ladder");
	cr_assert_eq(r.due, NOW, "its due time kept");
	/* Back within the shortest level of its slot: held for the rest,
	 * its slot kept. */
	r.action = ROUTE_DELIVER;
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW + 2500, MONO, &why),
	             PLAN_HOLD);
	cr_assert_eq(r.slot, NOW + 4000);
	cr_assert_eq(r.left, 1500);
	/* At its slot: out. */
	r.action = ROUTE_DELIVER;
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW + 4000, MONO, &why),
	             PLAN_PUBLISH);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	/* Another target is not paced. */
	r = routed(0, "", "invoices");
	cr_assert_eq(plan_dispatch(&fx.p, &r, NOW, MONO, &why), PLAN_PUBLISH);
	cr_assert_eq(r.slot, 0);
}

Test(plan, a_slot_another_process_reserved_or_long_past_is_taken_afresh)
{
	struct route r;
	const char *why;

	pace_on("/orders", 0.25);
	/* Another daemon, heard from a minute ago: each takes half. */
	pace_peer_seen(&pace, amqp_cstring_bytes("daemon-2-b"), NOW - 60000);
	r = routed(0, "", "orders");
	(void)plan_dispatch(&fx.p, &r, NOW, MONO, &why); /* slot NOW */
	/* A slot of a daemon still heard from: its line, kept. */
	r = routed(0, "", "orders");
	r.slot = NOW + 3000;
	r.slot_by = amqp_cstring_bytes("daemon-2-b");
	(void)plan_dispatch(&fx.p, &r, NOW, MONO, &why);
	cr_assert_eq(r.slot, NOW + 3000);
	/* A slot of a daemon gone (or this one before a restart). */
	r = routed(0, "", "orders");
	r.slot = NOW;
	r.slot_by = amqp_cstring_bytes("daemon-3-c");
	(void)plan_dispatch(&fx.p, &r, NOW, MONO, &why);
	cr_assert_eq(r.slot, NOW + 8000, "in this one's line (two share it)");
	cr_assert_eq(r.action, ROUTE_HOP);
	/* Ours, but kept out long past it (a pause, a backoff). */
	r = routed(0, "", "orders");
	r.slot = NOW - 60000;
	r.slot_by = fx.p.own;
	(void)plan_dispatch(&fx.p, &r, NOW, MONO, &why);
	cr_assert_eq(r.slot, NOW + 16000, "behind the others: no burst");
	/* A pause takes the slot away. */
	r = routed(0, "", "orders");
	r.slot = NOW + 5000;
	r.slot_by = fx.p.own;
	plan_pause(&fx.p, &r, NOW);
	cr_assert_eq(r.slot, 0);
	cr_assert_eq(r.action, ROUTE_HOP);
}
