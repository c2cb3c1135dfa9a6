/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a message may not go and what is parked for it: allowed_targets,
 * cascade's own exchange, queues and streams (CC too), headers nested too
 * deep, the names of the park kinds; and the redelivery guard.
 */
#include "amqp_compat.h"
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "headers.h"
#include "ladder.h"
#include "router.h"
#include "wirecheck.h"

#include "helpers.h"

/* The former default ladder (2s x 4, 12 levels), router settings, round-up. */
ROUTER_FIXTURE(router);

static int
allow_orders(const void *ctx, amqp_bytes_t exchange)
{
	(void)ctx;
	return bytes_is(exchange, "orders");
}

Test(router, disallowed_target_parks_on_ingress)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	params.allowed = allow_orders;
	tb_i64(&t, "x-remaining-delay", 60000);
	tb_str(&t, "x-target-exchange", "admin");
	p = props_of(&t);
	router_decide(&params, ROUTE_FROM_INGRESS, &p, amqp_cstring_bytes("k"),
	              NOW, &r);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_eq(r.park, PARK_not_allowed);
	cr_assert(strstr(r.reason, "'admin'") != NULL, "%s", r.reason);
	cr_assert(strstr(r.reason, "allowed_targets") != NULL, "%s", r.reason);

	t.n = 0;
	tb_i64(&t, "x-remaining-delay", 60000);
	tb_str(&t, "x-target-exchange", "orders");
	p = props_of(&t);
	router_decide(&params, ROUTE_FROM_INGRESS, &p, amqp_cstring_bytes("k"),
	              NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
}

/* cascade never delivers into its own exchange, queues or streams. */
Test(router, own_targets_are_refused)
{
	static const struct {
		const char *exchange, *routing_key;
		int own;
	} rows[] = {
	    {"cascade", "anything", 1},
	    {"cascade.retry", "", 1},
	    {"", "cascade.events", 1},
	    {"", "cascade.cancels", 1},
	    {"", "cascade.error", 1},
	    {"", "cascade.ingress", 1},
	    {"", "cascade.delay.2000", 1},
	    {"", "cascade.s3.return", 1},
	    {"", "cascade", 1},
	    {"amq.default", "cascade.hold", 1},
	    {"", "cascadex", 0},
	    {"", "cascade-events", 0},
	    {"", "orders", 0},
	    {"cascadex", "cascade.events", 0},
	    {"amq.direct", "cascade.events", 0},
	    {"orders", "cascade.error", 0},
	};
	amqp_bytes_t prefix = amqp_cstring_bytes("cascade");

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		cr_assert_eq(router_own_target(
		                 prefix, amqp_cstring_bytes(rows[i].exchange),
		                 amqp_cstring_bytes(rows[i].routing_key)),
		             rows[i].own, "%s/%s", rows[i].exchange,
		             rows[i].routing_key);
}

/* Whatever allowed_targets says, and from every source. */
Test(router, own_target_parks_bad_target)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	params.own_prefix = amqp_cstring_bytes("cascade");
	tb_i64(&t, "x-remaining-delay", 60000);
	tb_str(&t, "x-target-exchange", "");
	tb_str(&t, "x-target-routing-key", "cascade.events");
	p = props_of(&t);
	router_decide(&params, ROUTE_FROM_INGRESS, &p, amqp_cstring_bytes("k"),
	              NOW, &r);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_eq(r.park, PARK_bad_target);
	cr_assert(strstr(r.reason, "cascade.events") != NULL, "%s", r.reason);

	t.n = 0;
	tb_i64(&t, "x-cascade-due", NOW);
	tb_str(&t, "x-cascade-exchange", "cascade");
	tb_str(&t, "x-cascade-routing-key", "k");
	p = props_of(&t);
	router_decide(&params, ROUTE_FROM_RETURN, &p, amqp_cstring_bytes("k"),
	              NOW, &r);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_eq(r.park, PARK_bad_target);

	t.n = 0;
	tb_i64(&t, "x-remaining-delay", 60000);
	tb_str(&t, "x-target-routing-key", "orders");
	p = props_of(&t);
	router_decide(&params, ROUTE_FROM_INGRESS, &p, amqp_cstring_bytes("k"),
	              NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	params.own_prefix = amqp_empty_bytes;
}

/* The default exchange routes by every CC key too, at delivery. */
Test(router, a_cc_naming_cascades_own_parks_bad_target)
{
	amqp_field_value_t keys[2];
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	amqp_field_value_t *cc;
	struct route r;

	params.own_prefix = amqp_cstring_bytes("cascade");
	keys[0].kind = AMQP_FIELD_KIND_UTF8;
	keys[0].value.bytes = amqp_cstring_bytes("orders");
	keys[1].kind = AMQP_FIELD_KIND_UTF8;
	keys[1].value.bytes = amqp_cstring_bytes("cascade.hold");
	tb_i64(&t, "x-remaining-delay", 60000);
	tb_str(&t, "x-target-routing-key", "orders");
	cc = tb_add(&t, "CC", AMQP_FIELD_KIND_ARRAY);
	cc->value.array.num_entries = 2;
	cc->value.array.entries = keys;
	p = props_of(&t);
	router_decide(&params, ROUTE_FROM_INGRESS, &p, amqp_cstring_bytes("k"),
	              NOW, &r);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_eq(r.park, PARK_bad_target);
	cr_assert(strstr(r.reason, "CC 'cascade.hold'") != NULL, "%s",
	          r.reason);

	/* While it waits the list is x-cascade-cc. */
	t.n = 0;
	tb_i64(&t, "x-cascade-due", NOW);
	tb_str(&t, "x-cascade-exchange", "");
	tb_str(&t, "x-cascade-routing-key", "orders");
	cc = tb_add(&t, "x-cascade-cc", AMQP_FIELD_KIND_ARRAY);
	cc->value.array.num_entries = 2;
	cc->value.array.entries = keys;
	p = props_of(&t);
	router_decide(&params, ROUTE_FROM_RETURN, &p, amqp_cstring_bytes("k"),
	              NOW, &r);
	cr_assert_eq(r.park, PARK_bad_target);

	/* To another exchange, the keys are that exchange's. */
	t.n = 0;
	tb_i64(&t, "x-remaining-delay", 60000);
	tb_str(&t, "x-target-exchange", "orders");
	cc = tb_add(&t, "CC", AMQP_FIELD_KIND_ARRAY);
	cc->value.array.num_entries = 2;
	cc->value.array.entries = keys;
	p = props_of(&t);
	router_decide(&params, ROUTE_FROM_INGRESS, &p, amqp_cstring_bytes("k"),
	              NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	params.own_prefix = amqp_empty_bytes;
}

/* A forged return-queue message cannot reach what ingress would refuse. */
Test(router, disallowed_target_parks_from_return)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	params.allowed = allow_orders;
	tb_i64(&t, "x-cascade-due", NOW);
	tb_str(&t, "x-cascade-exchange", "admin");
	tb_str(&t, "x-cascade-routing-key", "k");
	p = props_of(&t);
	router_decide(&params, ROUTE_FROM_RETURN, &p, amqp_cstring_bytes("k"),
	              NOW, &r);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_eq(r.park, PARK_not_allowed);
}

/*
 * Headers nested past wirecheck's bound are parked from every source, so
 * that cascade never writes an envelope or copy it could not read back.
 */
Test(router, headers_nested_too_deep_are_parked)
{
	amqp_field_value_t v[WIRECHECK_DEPTH_MAX];
	enum route_source srcs[] = {ROUTE_FROM_INGRESS, ROUTE_FROM_RETURN};

	for (int past = 0; past < 2; past++) {
		/* the headers table and `levels` arrays, one in another */
		int levels = WIRECHECK_DEPTH_MAX - 1 + past;
		for (int i = 0; i < levels; i++) {
			v[i].kind = AMQP_FIELD_KIND_ARRAY;
			v[i].value.array.num_entries = i + 1 < levels ? 1 : 0;
			v[i].value.array.entries = &v[i + 1];
		}
		for (size_t s = 0; s < sizeof(srcs) / sizeof(srcs[0]); s++) {
			struct tb t = {.n = 0};
			amqp_basic_properties_t p;
			struct route r;
			tb_i64(&t, "x-delay", 5000);
			tb_i64(&t, "x-cascade-due", NOW + 5000);
			tb_str(&t, "x-cascade-exchange", "billing");
			tb_str(&t, "x-cascade-routing-key", "orders");
			*tb_add(&t, "deep", AMQP_FIELD_KIND_ARRAY) = v[0];
			p = props_of(&t);
			decide(srcs[s], &p, "orders", NOW, &r);
			if (past) {
				expect_park(&r, "nested deeper than cascade "
				                "reads (16)");
				cr_assert_eq(r.park, PARK_bad_header);
			} else {
				cr_assert_neq(r.action, ROUTE_PARK, "%s",
				              r.reason);
			}
		}
	}
}

Test(router, park_kinds_have_names)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p = props_of(&t);
	struct route r;

	router_decide(&params, ROUTE_FROM_INGRESS, &p, amqp_cstring_bytes("k"),
	              NOW, &r);
	cr_assert_eq(r.park, PARK_bad_header);
	cr_assert_str_eq(router_park_name(PARK_bad_header), "bad_header");
	cr_assert_str_eq(router_park_name(PARK_retries_exhausted),
	                 "retries_exhausted");
	cr_assert_str_eq(router_park_name(PARK_KINDS), "unknown");
}

/*
 * The redelivery guard: x-delivery-count at the limit parks, below it or
 * absent (classic queues) it does not; the parked copy is built like any
 * parked first sight.
 */
Test(router_guard, parks_at_the_limit_and_not_below)
{
	struct tb t = {0};
	struct route r;
	amqp_basic_properties_t p;

	tb_i64(&t, "x-delivery-count", 9);
	p = props_of(&t);
	memset(&r, 0x5a, sizeof(r));
	cr_assert_eq(router_guard(ROUTE_FROM_INGRESS, &p,
	                          amqp_cstring_bytes("orders"), 10, &r),
	             0);
	cr_assert_eq(r.level, 0x5a5a5a5a, "route untouched below the limit");

	t.e[0].value.value.i64 = 10;
	cr_assert_eq(router_guard(ROUTE_FROM_INGRESS, &p,
	                          amqp_cstring_bytes("orders"), 10, &r),
	             1);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_eq(r.park, PARK_redelivered);
	cr_assert(r.fresh, "first sight: the publisher's headers");
	cr_assert(bytes_is(r.in_routing_key, "orders"));
	cr_assert_str_eq(r.reason,
	                 "seen 10 times without being settled "
	                 "(x-delivery-count; [router] max_redeliveries is 10)");
}

Test(router_guard, counts_of_any_integer_width_and_none_at_all)
{
	struct tb t = {0};
	struct route r;
	amqp_basic_properties_t p, none = props_of(NULL);

	cr_assert_eq(router_guard(ROUTE_FROM_RETURN, &none,
	                          amqp_cstring_bytes("cascade.ret"), 1, &r),
	             0, "classic queues do not count");
	tb_i32(&t, "x-delivery-count", 3);
	p = props_of(&t);
	cr_assert_eq(router_guard(ROUTE_FROM_RETURN, &p,
	                          amqp_cstring_bytes("cascade.ret"), 3, &r),
	             1);
	cr_assert_not(r.fresh, "back from the ladder: cascade's own state");
	t.e[0].value.kind = AMQP_FIELD_KIND_UTF8;
	t.e[0].value.value.bytes = amqp_cstring_bytes("99");
	cr_assert_eq(router_guard(ROUTE_FROM_RETURN, &p,
	                          amqp_cstring_bytes("cascade.ret"), 3, &r),
	             0, "not an integer: not a count");
}
