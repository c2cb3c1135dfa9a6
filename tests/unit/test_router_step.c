/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router_step: hops along the ladder, holding the tail (with its margin),
 * native waiting in the holding queue; and router_park.
 */
#include "amqp_compat.h"
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "headers.h"
#include "ladder.h"
#include "router.h"

#include "helpers.h"

/* The former default ladder (2s x 4, 12 levels), router settings, round-up. */
ROUTER_FIXTURE(router);

/* ---- router_step ---- */

Test(router, step_walks_the_worked_example)
{
	struct route r;
	int64_t now = NOW;
	static const int want[] = {3, 2, 2, 2, 1, 1, 1, 0, 0, 0, 0};
	size_t hops = 0;

	memset(&r, 0, sizeof(r));
	r.due = NOW + 255000;
	for (;;) {
		router_step(&params, &r, now);
		if (r.action == ROUTE_DELIVER)
			break;
		cr_assert_eq(r.action, ROUTE_HOP);
		cr_assert_lt(hops, 11, "more than 11 hops");
		cr_assert_eq(r.level, want[hops], "hop %zu: level %d", hops,
		             r.level);
		/* The broker expires it exactly after the TTL. */
		now += ladder.ttl[r.level];
		hops++;
	}
	cr_assert_eq(hops, 11);
	cr_assert_eq(now, NOW + 256000, "round-up: delivered 1 s late");
	cr_assert_geq(now, r.due, "delivered early");
}

Test(router, step_with_hold)
{
	struct route r;

	params.hold_tail = 1;
	memset(&r, 0, sizeof(r));
	r.due = NOW + 255000;
	router_step(&params, &r, NOW + 254000);
	cr_assert_eq(r.action, ROUTE_HOLD);
	cr_assert_eq(r.left, 1000);
	router_step(&params, &r, NOW + 255000);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	cr_assert_eq(r.due, NOW + 255000, "step keeps the due time");
}

Test(router, park_sets_reason)
{
	struct route r;

	memset(&r, 0, sizeof(r));
	r.action = ROUTE_DELIVER;
	router_park(&r, PARK_no_exchange, "exchange %s not found", "shop");
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_str_eq(r.reason, "exchange shop not found");
}

/* tail = hold with a margin: the last hop comes back early, then is held. */
Test(router, tail_margin_holds_the_last_stretch)
{
	struct route r;

	params.hold_tail = 1;
	params.tail_margin = 250;
	memset(&r, 0, sizeof(r));
	/* 2.1 s: a 2 s hop would come back with 100 ms, under the margin. */
	r.due = NOW + 2100;
	router_step(&params, &r, NOW);
	cr_assert_eq(r.action, ROUTE_HOLD);
	cr_assert_eq(r.left, 2100);
	/* 2.25 s: exactly margin to spare after the 2 s hop. */
	r.due = NOW + 2250;
	router_step(&params, &r, NOW);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 0);
	cr_assert_eq(r.left, 250);
	/* 8.1 s: 8 s does not leave the margin, so 2 s and a return trip. */
	r.due = NOW + 8100;
	router_step(&params, &r, NOW);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 0);
	cr_assert_eq(r.left, 6100);
	/* Nothing left: deliver, margin or not. */
	r.due = NOW;
	router_step(&params, &r, NOW);
	cr_assert_eq(r.action, ROUTE_DELIVER);
}

Test(router, tail_margin_ignored_when_rounding_up)
{
	struct route r;

	params.hold_tail = 0;
	params.tail_margin = 250;
	memset(&r, 0, sizeof(r));
	r.due = NOW + 2100;
	router_step(&params, &r, NOW);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 0);
	cr_assert_eq(r.left, 100);
}
/* ---- native waiting ---- */

/* A route due at NOW + left, stepped at NOW. */
static void
step_left(int64_t left, struct route *r)
{
	memset(r, 0, sizeof(*r));
	r->due = NOW + left;
	router_step(&params, r, NOW);
}

Test(router, native_window_and_below_waits_in_the_holding_queue)
{
	struct route r;

	params.native_window = 64000;
	params.hold_tail = 1;
	params.tail_margin = 250;
	step_left(64000, &r);
	cr_assert_eq(r.action, ROUTE_WAIT, "the window itself waits");
	step_left(1500, &r);
	cr_assert_eq(r.action, ROUTE_WAIT, "below one resolution: no tail");
	step_left(ROUTER_NATIVE_HOLD_MS + 1, &r);
	cr_assert_eq(r.action, ROUTE_WAIT);
	step_left(ROUTER_NATIVE_HOLD_MS, &r);
	cr_assert_eq(r.action, ROUTE_HOLD, "the last few ms in memory");
	cr_assert_eq(r.left, ROUTER_NATIVE_HOLD_MS);
	step_left(0, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
}

Test(router, native_above_the_window_takes_the_ladder)
{
	struct route r;

	params.native_window = 64000;
	/* 2 s x 4: 200 s takes level 3 (128 s), 72 s left. */
	step_left(200000, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 3);
	cr_assert_eq(r.left, 72000);
}

Test(router, native_round_up_gives_even_the_last_ms_to_the_queue)
{
	struct route r;

	params.native_window = 64000;
	params.hold_tail = 0; /* tail = round-up: nothing held in memory */
	step_left(5, &r);
	cr_assert_eq(r.action, ROUTE_WAIT);
}

Test(router, ladder_step_ignores_the_window)
{
	struct route r;

	params.native_window = 64000;
	memset(&r, 0, sizeof(r));
	r.due = NOW + 9000;
	router_ladder_step(&params, &r, NOW);
	cr_assert_eq(r.action, ROUTE_HOP, "a refusing holding queue");
	cr_assert_eq(r.level, 1, "8 s");
}

Test(router, a_wait_carries_the_state_of_a_hop)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p, out;
	struct route r;

	params.native_window = 64000;
	tb_i64(&t, "x-delay", 30000);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_WAIT);
	cr_assert_eq(router_props(&p, &r, &pool, &out), 0);
	cr_assert_not_null(headers_find(&out.headers, "x-cascade-due"));
	cr_assert_not_null(headers_find(&out.headers, "x-cascade-routing-key"));
	cr_assert_null(headers_find(&out.headers, "x-delay"));
	/* The holding queue gives it back at its due time. */
	cr_assert_eq(r.back, NOW + 30000);
}

/* x-cascade-back, read when it comes back: kept when in range, else 0
 * (its due time is what it is late against then). */
Test(router, a_return_reads_its_planned_return)
{
	static const struct {
		int64_t v;
		int64_t want;
	} cases[] = {{NOW - 5000, NOW - 5000}, {0, 0}, {-7, 0}, {INT64_MAX, 0}};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tb t = {.n = 0};
		amqp_basic_properties_t p;
		struct route r;

		tb_i64(&t, "x-cascade-due", NOW - 1000);
		tb_str(&t, "x-cascade-exchange", "");
		tb_str(&t, "x-cascade-routing-key", "orders");
		tb_i64(&t, "x-cascade-back", cases[i].v);
		p = props_of(&t);
		props_fill(&p, "cascade");
		decide(ROUTE_FROM_RETURN, &p, "cascade.return", NOW, &r);
		cr_assert_eq(r.action, ROUTE_DELIVER, "case %zu", i);
		cr_assert_eq(r.back, cases[i].want, "case %zu: %lld", i,
		             (long long)r.back);
	}
}
