/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Routing decisions: router_decide on a message from ingress and from the
 * return queue (delays, times, targets, what is parked), and the names of
 * the sources.
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

/* Ingress with one delay header of the given value. */
static void
ingress_delay(const char *key, const char *value, struct route *r)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;

	tb_str(&t, key, value);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, r);
}

/* ---- router_decide from ingress ---- */

Test(router, zero_delay_delivers_now)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 0);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	expect_bytes(r.exchange, "");
	expect_bytes(r.routing_key, "orders");
	cr_assert_eq(r.due, NOW);
	cr_assert_eq(r.has_expiration, 0);
}

Test(router, negative_delay_delivers_now)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-remaining-delay", -5000);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	cr_assert_leq(r.due, NOW);
	ingress_delay("x-remaining-delay", "-5s", &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	ingress_delay("x-remaining-delay", "0", &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
}

Test(router, worked_example_first_hop)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 255000);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 3);
	cr_assert_eq(r.left, 255000 - 128000);
	cr_assert_eq(r.due, NOW + 255000);
	expect_bytes(r.exchange, "");
	expect_bytes(r.routing_key, "orders");
}

Test(router, delay_as_string_with_unit)
{
	struct route r;

	ingress_delay("x-remaining-delay", "255s", &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 3);
	cr_assert_eq(r.due, NOW + 255000);
	ingress_delay("x-remaining-delay", "255000", &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.due, NOW + 255000, "a bare string is milliseconds");
}

Test(router, any_integer_width)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;
	amqp_field_value_t *v;

	v = tb_add(&t, "x-remaining-delay", AMQP_FIELD_KIND_U16);
	v->value.u16 = 9000;
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 1);
	cr_assert_eq(r.left, 1000);
	cr_assert_eq(r.due, NOW + 9000);
}

Test(router, one_ms_rounds_up_to_level_zero)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 1);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 0);
	cr_assert_eq(r.left, 0);
	cr_assert_eq(r.due, NOW + 1);
}

Test(router, sub_resolution_held_when_asked)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	params.hold_tail = 1;
	tb_i64(&t, "x-remaining-delay", 1500);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOLD);
	cr_assert_eq(r.left, 1500);
	cr_assert_eq(r.due, NOW + 1500);
}

Test(router, exact_level)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 2000);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 0);
	cr_assert_eq(r.left, 0);
	t.e[0].value.value.i64 = 8000;
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.level, 1);
	cr_assert_eq(r.left, 0);
	t.e[0].value.value.i64 = 7999;
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.level, 0);
	cr_assert_eq(r.left, 5999);
}

Test(router, deliver_at_wins)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 5000);
	tb_i64(&t, "x-deliver-at", NOW + 90000);
	tb_i64(&t, "x-delay", 1000);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.due, NOW + 90000);
	cr_assert_eq(r.level, 2); /* 32 s <= 90 s < 128 s */
	cr_assert_eq(r.left, 90000 - 32000);
}

Test(router, deliver_at_as_digit_string)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;
	char when[32];

	snprintf(when, sizeof(when), "%lld", (long long)(NOW + 9000));
	tb_str(&t, "x-deliver-at", when);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.due, NOW + 9000);
}

Test(router, deliver_at_in_the_past_delivers)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-deliver-at", NOW - 1);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	t.e[0].value.value.i64 = NOW;
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	t.e[0].value.value.i64 = 0;
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
}

Test(router, deliver_at_malformed_parks)
{
	struct route r;

	ingress_delay("x-deliver-at", "tomorrow", &r);
	expect_park(&r, "x-deliver-at");
	ingress_delay("x-deliver-at", "90s", &r);
	expect_park(&r, "x-deliver-at");
}

Test(router, deliver_at_beyond_max_delay_parks)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-deliver-at", NOW + 366 * DAY);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "max_delay");
}

Test(router, x_delay_alias)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-delay", 90000);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.due, NOW + 90000);
	cr_assert_eq(r.level, 2);
}

Test(router, remaining_delay_wins_over_x_delay)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-delay", 90000);
	tb_i64(&t, "x-remaining-delay", 9000);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.due, NOW + 9000);
}

Test(router, missing_delay_parks)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_str(&t, "trace-id", "abc");
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "missing");
	/* No headers property at all. */
	p = props_of(NULL);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "missing");
	/* A headers table, but the flag says there is none. */
	t.n = 0;
	tb_i64(&t, "x-remaining-delay", 5000);
	p = props_of(&t);
	p._flags &= ~AMQP_BASIC_HEADERS_FLAG;
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "missing");
}

Test(router, malformed_delay_parks)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;
	amqp_field_value_t *v;

	ingress_delay("x-remaining-delay", "soon", &r);
	expect_park(&r, "x-remaining-delay");
	ingress_delay("x-remaining-delay", "1.5s", &r);
	expect_park(&r, "x-remaining-delay");
	ingress_delay("x-remaining-delay", "", &r);
	expect_park(&r, "x-remaining-delay");
	ingress_delay("x-delay", "later", &r);
	expect_park(&r, "x-delay");

	/* A double is a delay now (a_double_delay_is_truncated...); a
	 * decimal is not. */
	v = tb_add(&t, "x-remaining-delay", AMQP_FIELD_KIND_DECIMAL);
	v->value.decimal.value = 5000;
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "x-remaining-delay");

	t.n = 0;
	v = tb_add(&t, "x-remaining-delay", AMQP_FIELD_KIND_U64);
	v->value.u64 = UINT64_MAX;
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "x-remaining-delay");
}

/* A refusal names the value refused, escaped and bounded, so that an
 * operator reading P.error can tell whose typo it was. */
Test(router, a_refusal_names_the_value_it_refused)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;
	amqp_field_value_t *v;
	char long_value[200];

	ingress_delay("x-remaining-delay", "soon\x1b[31m\"", &r);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_str_eq(r.reason,
	                 "x-remaining-delay \"soon\\x1b[31m\\\"\": "
	                 "duration must start with a number",
	                 "%s", r.reason);
	memset(long_value, 'a', sizeof(long_value) - 1);
	long_value[sizeof(long_value) - 1] = '\0';
	ingress_delay("x-deliver-at", long_value, &r);
	cr_assert(strstr(r.reason,
	                 "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	                 "...\": ") != NULL,
	          "%s", r.reason);
	v = tb_add(&t, "x-remaining-delay", AMQP_FIELD_KIND_DECIMAL);
	v->value.decimal.value = 5000;
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert(strncmp(r.reason,
	                  "x-remaining-delay (a field of kind 'D'): ", 41) == 0,
	          "%s", r.reason);
}

Test(router, beyond_max_delay_parks)
{
	struct route r;

	ingress_delay("x-remaining-delay", "366d", &r);
	expect_park(&r, "max_delay");
	cr_assert(strstr(r.reason, "366d") != NULL, "%s", r.reason);
	cr_assert(strstr(r.reason, "365d") != NULL, "%s", r.reason);
	ingress_delay("x-remaining-delay", "9999999999999", &r);
	expect_park(&r, "max_delay");
}

Test(router, exactly_max_delay_is_fine)
{
	struct route r;

	ingress_delay("x-remaining-delay", "365d", &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 11);
	cr_assert_eq(r.due, NOW + 365 * DAY);
	cr_assert_eq(r.left, 365 * DAY - ladder.ttl[11]);
}

Test(router, smaller_max_delay)
{
	struct route r;

	params.max_delay = 60000;
	ingress_delay("x-remaining-delay", "1m", &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	ingress_delay("x-remaining-delay", "60001", &r);
	expect_park(&r, "max_delay");
}

Test(router, target_overrides)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 5000);
	tb_str(&t, "x-target-exchange", "shop");
	tb_str(&t, "x-target-routing-key", "order.paid");
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	expect_bytes(r.exchange, "shop");
	expect_bytes(r.routing_key, "order.paid");
}

Test(router, default_exchange_when_absent)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	params.default_exchange = amqp_cstring_bytes("fallback");
	tb_i64(&t, "x-remaining-delay", 0);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	expect_bytes(r.exchange, "fallback");
	expect_bytes(r.routing_key, "orders");
	/* An explicit empty x-target-exchange means the default exchange. */
	tb_str(&t, "x-target-exchange", "");
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	expect_bytes(r.exchange, "");
}

Test(router, non_string_target_parks)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 5000);
	tb_i64(&t, "x-target-exchange", 42);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "x-target-exchange");

	t.n = 1;
	tb_i32(&t, "x-target-routing-key", 7);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "x-target-routing-key");
}

Test(router, overlong_target_parks)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;
	char name[300];

	memset(name, 'e', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	tb_i64(&t, "x-remaining-delay", 5000);
	tb_str(&t, "x-target-exchange", name);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "x-target-exchange");
	name[255] = '\0';
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "x-target-exchange"); /* the entry still holds 299 */
	t.e[1].value.value.bytes = amqp_cstring_bytes(name);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP, "255 bytes is the AMQP limit");
}

Test(router, expiration_held_on_ingress)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 5000);
	p = props_of(&t);
	p._flags |= AMQP_BASIC_EXPIRATION_FLAG;
	p.expiration = amqp_cstring_bytes("60000");
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.has_expiration, 1);
	expect_bytes(r.expiration, "60000");
}

/* ---- router_decide from the return queue ---- */

Test(router, from_return_reads_own_state)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-cascade-due", NOW + 100000);
	tb_str(&t, "x-cascade-exchange", "shop");
	tb_str(&t, "x-cascade-routing-key", "order.paid");
	tb_str(&t, "x-cascade-expiration", "60000");
	/* Stale: x-remaining-delay is not read on return. */
	tb_i64(&t, "x-remaining-delay", 999999999);
	p = props_of(&t);
	decide(ROUTE_FROM_RETURN, &p, "cascade.return", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.due, NOW + 100000);
	cr_assert_eq(r.level, 2);
	cr_assert_eq(r.left, 100000 - 32000);
	expect_bytes(r.exchange, "shop");
	expect_bytes(r.routing_key, "order.paid");
	cr_assert_eq(r.has_expiration, 1);
	expect_bytes(r.expiration, "60000");
}

Test(router, from_return_due_delivers)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-cascade-due", NOW);
	tb_str(&t, "x-cascade-exchange", "");
	tb_str(&t, "x-cascade-routing-key", "orders");
	p = props_of(&t);
	decide(ROUTE_FROM_RETURN, &p, "cascade.return", NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	expect_bytes(r.exchange, "");
	expect_bytes(r.routing_key, "orders");
	cr_assert_eq(r.has_expiration, 0);
	/* Late (the broker was slow) still delivers. */
	decide(ROUTE_FROM_RETURN, &p, "cascade.return", NOW + 60000, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
}

Test(router, from_return_sub_resolution)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-cascade-due", NOW + 1000);
	tb_str(&t, "x-cascade-exchange", "");
	tb_str(&t, "x-cascade-routing-key", "orders");
	p = props_of(&t);
	decide(ROUTE_FROM_RETURN, &p, "cascade.return", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.level, 0);
	params.hold_tail = 1;
	decide(ROUTE_FROM_RETURN, &p, "cascade.return", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOLD);
	cr_assert_eq(r.left, 1000);
}

Test(router, from_return_missing_due_parks)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 5000);
	tb_str(&t, "x-cascade-exchange", "");
	p = props_of(&t);
	decide(ROUTE_FROM_RETURN, &p, "cascade.return", NOW, &r);
	expect_park(&r, "x-cascade-due");
	p = props_of(NULL);
	decide(ROUTE_FROM_RETURN, &p, "cascade.return", NOW, &r);
	expect_park(&r, "x-cascade-due");
}

Test(router, from_return_malformed_due_parks)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_str(&t, "x-cascade-due", "soon");
	p = props_of(&t);
	decide(ROUTE_FROM_RETURN, &p, "cascade.return", NOW, &r);
	expect_park(&r, "x-cascade-due");
}

Test(router, every_source_has_the_name_its_metrics_label_carries)
{
	cr_assert_str_eq(router_source_name(ROUTE_FROM_INGRESS), "ingress");
	cr_assert_str_eq(router_source_name(ROUTE_FROM_RETURN), "return");
	cr_assert_str_eq(router_source_name(ROUTE_FROM_RETRY), "retry");
	cr_assert_str_eq(router_source_name(ROUTE_SOURCES), "unknown");
}

/* ---- the other publishers' delay headers (docs/CONTRACT.md section 1) ---- */

/* Which of the five decides when they are all present, one left out at a
 * time from the front: the order is x-deliver-at, x-opt-delivery-time,
 * x-remaining-delay, x-opt-delivery-delay, x-delay. */
Test(router, delay_headers_in_their_order)
{
	static const char *const names[] = {
	    "x-deliver-at", "x-opt-delivery-time", "x-remaining-delay",
	    "x-opt-delivery-delay", "x-delay"};
	/* each header's value: distinct due times, NOW + 10 s ... 50 s */
	static const int64_t want[] = {10000, 20000, 30000, 40000, 50000};

	for (size_t first = 0; first < 5; first++) {
		struct tb t = {.n = 0};
		amqp_basic_properties_t p;
		struct route r;

		/* in reverse, so that table order is not what decides */
		for (size_t k = 5; k-- > first;)
			tb_i64(&t, names[k], k < 2 ? NOW + want[k] : want[k]);
		p = props_of(&t);
		decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
		cr_assert_eq(r.due, NOW + want[first], "%s should decide",
		             names[first]);
	}
}

Test(router, opt_delivery_time_as_a_tanzu_or_amqp10_publisher_sends_it)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;
	char when[32];

	/* a long (Unix ms), as RabbitMQ hands an AMQP 1.0 long annotation */
	tb_i64(&t, "x-opt-delivery-time", NOW + 9000);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.due, NOW + 9000);
	/* digits, as a string */
	t.n = 0;
	snprintf(when, sizeof(when), "%lld", (long long)(NOW + 7000));
	tb_str(&t, "x-opt-delivery-time", when);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.due, NOW + 7000);
	/* a duration is not a time */
	ingress_delay("x-opt-delivery-time", "90s", &r);
	expect_park(&r, "x-opt-delivery-time");
}

Test(router, opt_delivery_delay_is_a_delay)
{
	struct route r;

	ingress_delay("x-opt-delivery-delay", "90s", &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.due, NOW + 90000);
	ingress_delay("x-opt-delivery-delay", "soon", &r);
	expect_park(&r, "x-opt-delivery-delay");
	/* an unreadable one parks though x-delay after it is fine */
	{
		struct tb t = {.n = 0};
		amqp_basic_properties_t p;

		tb_str(&t, "x-opt-delivery-delay", "soon");
		tb_i64(&t, "x-delay", 1000);
		p = props_of(&t);
		decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
		expect_park(&r, "x-opt-delivery-delay");
	}
}

Test(router, a_double_delay_is_truncated_as_the_plugin_did)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	/* Brighter's x-delay: TimeSpan.TotalMilliseconds, a double */
	tb_add(&t, "x-delay", AMQP_FIELD_KIND_F64)->value.f64 = 90000.9;
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.due, NOW + 90000);
	t.e[0].value.value.f64 = 1e300;
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "x-delay");
	t.e[0].value.value.f64 = 0.0 / 0.0;
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "x-delay");
	t.n = 0;
	tb_add(&t, "x-remaining-delay", AMQP_FIELD_KIND_F32)->value.f32 =
	    1500.5f;
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.due, NOW + 1500);
}

Test(router, an_amqp10_timestamp_is_never_early)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	/* RabbitMQ hands a 1.0 timestamp over in seconds, ms cut off: the
	 * end of that second */
	tb_add(&t, "x-opt-delivery-time", AMQP_FIELD_KIND_TIMESTAMP)
	    ->value.u64 = (uint64_t)(NOW / 1000 + 10);
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.due, (NOW / 1000 + 10) * 1000 + 999);
}
