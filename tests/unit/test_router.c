/* Routing decisions and the properties a message is published with. */
#include "amqp_compat.h"
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "headers.h"
#include "ladder.h"
#include "router.h"
#include "schedule.h"
#include "wirecheck.h"

#include "helpers.h"

static struct ladder ladder;
static struct router_params params;
static amqp_pool_t pool;

/* The former default ladder (2s x 4, 12 levels), router settings, round-up. */
static void
setup(void)
{
	default_router(&ladder, &params);
	init_amqp_pool(&pool, 4096);
}

static void
teardown(void)
{
	empty_amqp_pool(&pool);
}

TestSuite(router, .init = setup, .fini = teardown);

/* Every property but headers, expiration and user-id is as published. */
static void
expect_same_props(const amqp_basic_properties_t *in,
                  const amqp_basic_properties_t *out)
{
	amqp_flags_t keep = ~(amqp_flags_t)(AMQP_BASIC_HEADERS_FLAG |
	                                    AMQP_BASIC_EXPIRATION_FLAG |
	                                    AMQP_BASIC_USER_ID_FLAG);

	cr_assert_eq(out->_flags & keep, in->_flags & keep, "flags %x vs %x",
	             (unsigned)out->_flags, (unsigned)in->_flags);
	expect_filled_props(out);
}

static void
decide(enum route_source src, const amqp_basic_properties_t *p, const char *rk,
       int64_t now, struct route *r)
{
	memset(r, 0x5a, sizeof(*r));
	router_decide(&params, src, p, amqp_cstring_bytes(rk), now, r);
}

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

static void
expect_park(const struct route *r, const char *about)
{
	cr_assert_eq(r->action, ROUTE_PARK, "action %d, want park", r->action);
	cr_assert(strstr(r->reason, about) != NULL,
	          "reason \"%s\" does not mention \"%s\"", r->reason, about);
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

	v = tb_add(&t, "x-remaining-delay", AMQP_FIELD_KIND_F64);
	v->value.f64 = 5000.0;
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "x-remaining-delay");

	t.n = 0;
	v = tb_add(&t, "x-remaining-delay", AMQP_FIELD_KIND_U64);
	v->value.u64 = UINT64_MAX;
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "x-remaining-delay");
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

/* ---- router_props ---- */

/* A publisher's full message with routing and dead-letter headers. */
static void
publisher_message(struct tb *t, amqp_basic_properties_t *p, int64_t delay)
{
	amqp_field_value_t *v;

	t->n = 0;
	tb_str(t, "trace-id", "abc");
	tb_i64(t, "x-remaining-delay", delay);
	tb_str(t, "x-target-exchange", "shop");
	tb_str(t, "x-target-routing-key", "order.paid");
	v = tb_add(t, "x-death", AMQP_FIELD_KIND_ARRAY);
	v->value.array.num_entries = 0;
	tb_str(t, "x-first-death-queue", "old");
	tb_str(t, "x-last-death-reason", "expired");
	tb_i32(t, "tenant", 7);
	*p = props_of(t);
	props_fill(p, "alice");
}

Test(router, props_on_hop)
{
	struct tb t;
	amqp_basic_properties_t in, out;
	struct route r;
	const amqp_table_t *h;

	publisher_message(&t, &in, 255000);
	decide(ROUTE_FROM_INGRESS, &in, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	h = &out.headers;

	cr_assert(out._flags & AMQP_BASIC_HEADERS_FLAG);
	expect_hdr_int(h, "x-cascade-due", NOW + 255000);
	expect_hdr_str(h, "x-cascade-exchange", "shop");
	expect_hdr_str(h, "x-cascade-routing-key", "order.paid");
	expect_hdr_int(h, "x-remaining-delay", 255000 - 128000);
	/* The publisher's own headers stay. */
	expect_hdr_str(h, "trace-id", "abc");
	expect_hdr_int(h, "tenant", 7);
	/* Routing and dead-letter headers go. */
	expect_no_hdr(h, "x-death");
	expect_no_hdr(h, "x-first-death-queue");
	expect_no_hdr(h, "x-last-death-reason");
	expect_no_hdr(h, "x-target-exchange");
	expect_no_hdr(h, "x-target-routing-key");
	/* Expiration held back in a header, not on the delay queue. */
	cr_assert_not(out._flags & AMQP_BASIC_EXPIRATION_FLAG,
	              "the expiration would expire it in the delay queue");
	expect_hdr_str(h, "x-cascade-expiration", "60000");
	/* user-id kept in a header. */
	cr_assert_not(out._flags & AMQP_BASIC_USER_ID_FLAG);
	expect_hdr_str(h, "x-cascade-user-id", "alice");
	expect_same_props(&in, &out);
	/* The input is left alone. */
	cr_assert(in._flags & AMQP_BASIC_EXPIRATION_FLAG);
	cr_assert(in._flags & AMQP_BASIC_USER_ID_FLAG);
	cr_assert_eq(in.headers.num_entries, 8);
	cr_assert_eq(in.headers.entries, t.e);
}

Test(router, props_on_deliver_now)
{
	struct tb t;
	amqp_basic_properties_t in, out;
	struct route r;
	const amqp_table_t *h;

	publisher_message(&t, &in, 0);
	decide(ROUTE_FROM_INGRESS, &in, "orders", NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	expect_bytes(r.exchange, "shop");
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	h = &out.headers;

	expect_hdr_str(h, "trace-id", "abc");
	expect_hdr_int(h, "tenant", 7);
	expect_hdr_str(h, "x-cascade-user-id", "alice");
	cr_assert_eq(h->num_entries, 3, "extra headers on delivery");
	expect_no_cascade_state(h);
	expect_no_hdr(h, "x-remaining-delay");
	expect_no_hdr(h, "x-target-exchange");
	expect_no_hdr(h, "x-death");
	cr_assert(out._flags & AMQP_BASIC_EXPIRATION_FLAG);
	expect_bytes(out.expiration, "60000");
	cr_assert_not(out._flags & AMQP_BASIC_USER_ID_FLAG);
	expect_same_props(&in, &out);
}

Test(router, props_on_deliver_without_user_headers)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t in, out;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 0);
	in = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &in, "orders", NOW, &r);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	cr_assert_eq(out.headers.num_entries, 0);
	cr_assert_not(out._flags & AMQP_BASIC_HEADERS_FLAG,
	              "an empty headers table is sent as none");
	cr_assert_not(out._flags & AMQP_BASIC_EXPIRATION_FLAG,
	              "no expiration was set");
}

/* Publish, hop through the ladder, deliver: what arrives is what was sent. */
Test(router, round_trip_keeps_everything)
{
	struct tb t;
	amqp_basic_properties_t in, cur, out;
	struct route r;
	int64_t now = NOW;
	int hops = 0;

	publisher_message(&t, &in, 255000);
	decide(ROUTE_FROM_INGRESS, &in, "orders", now, &r);
	cur = in;
	while (r.action == ROUTE_HOP) {
		cr_assert_eq(router_props(&cur, &r, &pool, &out), 0);
		expect_hdr_str(&out.headers, "x-cascade-user-id", "alice");
		expect_hdr_str(&out.headers, "x-cascade-expiration", "60000");
		expect_hdr_int(&out.headers, "x-cascade-due", NOW + 255000);
		expect_hdr_int(&out.headers, "x-remaining-delay", r.left);
		cr_assert_not(out._flags & AMQP_BASIC_EXPIRATION_FLAG);
		/* The delay queue expires it; it comes back by P.return. */
		now += ladder.ttl[r.level];
		cur = out;
		decide(ROUTE_FROM_RETURN, &cur, "cascade.return", now, &r);
		cr_assert_lt(++hops, 20);
	}
	cr_assert_eq(hops, 11);
	cr_assert_eq(r.action, ROUTE_DELIVER, "%s", r.reason);
	expect_bytes(r.exchange, "shop");
	expect_bytes(r.routing_key, "order.paid");
	cr_assert_eq(router_props(&cur, &r, &pool, &out), 0);

	expect_same_props(&in, &out);
	cr_assert(out._flags & AMQP_BASIC_EXPIRATION_FLAG);
	expect_bytes(out.expiration, "60000");
	expect_hdr_str(&out.headers, "trace-id", "abc");
	expect_hdr_int(&out.headers, "tenant", 7);
	expect_hdr_str(&out.headers, "x-cascade-user-id", "alice");
	cr_assert_eq(out.headers.num_entries, 3, "extra headers delivered");
	expect_no_cascade_state(&out.headers);
}

Test(router, props_on_park)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t in, out;
	struct route r;
	const amqp_table_t *h;
	amqp_field_value_t *v;

	tb_str(&t, "trace-id", "abc");
	tb_str(&t, "x-remaining-delay", "soon");
	tb_str(&t, "x-target-exchange", "shop");
	v = tb_add(&t, "x-death", AMQP_FIELD_KIND_ARRAY);
	v->value.array.num_entries = 0;
	tb_str(&t, "x-first-death-queue", "old");
	in = props_of(&t);
	props_fill(&in, "alice");
	decide(ROUTE_FROM_INGRESS, &in, "orders", NOW, &r);
	expect_park(&r, "x-remaining-delay");
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	h = &out.headers;

	expect_hdr_str(h, "x-cascade-error", r.reason);
	expect_no_hdr(h, "x-death");
	expect_no_hdr(h, "x-first-death-queue");
	/* The publisher's headers stay, so the error can be understood. */
	expect_hdr_str(h, "trace-id", "abc");
	expect_hdr_str(h, "x-remaining-delay", "soon");
	expect_hdr_str(h, "x-target-exchange", "shop");
	/* Nothing expires in the error queue; the user-id is kept. */
	cr_assert_not(out._flags & AMQP_BASIC_EXPIRATION_FLAG);
	expect_hdr_str(h, "x-cascade-expiration", "60000");
	cr_assert_not(out._flags & AMQP_BASIC_USER_ID_FLAG);
	expect_hdr_str(h, "x-cascade-user-id", "alice");
	expect_same_props(&in, &out);
}

Test(router, park_replaces_an_old_error)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t in, out;
	struct route r;

	tb_str(&t, "x-cascade-error", "an older reason");
	tb_str(&t, "trace-id", "abc");
	in = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &in, "orders", NOW, &r);
	expect_park(&r, "missing");
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	expect_hdr_str(&out.headers, "x-cascade-error", r.reason);
	expect_hdr_str(&out.headers, "trace-id", "abc");
}

Test(router, park_without_headers)
{
	amqp_basic_properties_t in, out;
	struct route r;

	in = props_of(NULL);
	decide(ROUTE_FROM_INGRESS, &in, "orders", NOW, &r);
	expect_park(&r, "missing");
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	cr_assert(out._flags & AMQP_BASIC_HEADERS_FLAG);
	expect_hdr_str(&out.headers, "x-cascade-error", r.reason);
	/* Kept for cascade-ctl requeue: the error queue's key replaces it. */
	expect_hdr_str(&out.headers, "x-cascade-routing-key", "orders");
	cr_assert_eq(out.headers.num_entries, 2);
}

Test(router, park_after_a_failed_delivery)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t in, out;
	struct route r;

	/* Due, but the daemon finds the target exchange missing. */
	tb_i64(&t, "x-cascade-due", NOW - 5);
	tb_str(&t, "x-cascade-exchange", "nope");
	tb_str(&t, "x-cascade-routing-key", "orders");
	tb_str(&t, "x-cascade-user-id", "alice");
	tb_str(&t, "x-cascade-expiration", "60000");
	in = props_of(&t);
	decide(ROUTE_FROM_RETURN, &in, "cascade.return", NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	router_park(&r, PARK_no_exchange, "exchange %s does not exist", "nope");
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	expect_hdr_str(&out.headers, "x-cascade-error",
	               "exchange nope does not exist");
	expect_hdr_str(&out.headers, "x-cascade-user-id", "alice");
	expect_hdr_str(&out.headers, "x-cascade-expiration", "60000");
	cr_assert_not(out._flags & AMQP_BASIC_EXPIRATION_FLAG);
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

/* ---- never stuck (docs/CONTRACT.md section 4.3) ---- */

Test(router, refused_count_goes_round_the_ladder_and_off_at_delivery)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p, out;
	struct route r;

	tb_i64(&t, "x-cascade-due", NOW - 5);
	tb_str(&t, "x-cascade-exchange", "billing");
	tb_str(&t, "x-cascade-routing-key", "invoices");
	tb_i64(&t, "x-cascade-refused", 3);
	tb_i64(&t, "x-cascade-refused-since", NOW - 60000);
	p = props_of(&t);
	decide(ROUTE_FROM_RETURN, &p, "ignored", NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	cr_assert_eq(r.refused, 3);
	cr_assert_eq(r.refused_since, NOW - 60000);
	/* Refused again: the daemon sends it round once more. */
	r.refused++;
	r.action = ROUTE_HOP;
	r.level = 0;
	r.left = 0;
	cr_assert_eq(router_props(&p, &r, &pool, &out), 0);
	expect_hdr_int(&out.headers, "x-cascade-refused", 4);
	expect_hdr_int(&out.headers, "x-cascade-refused-since", NOW - 60000);
	expect_hdr_int(&out.headers, "x-cascade-due", NOW - 5);
	/* Delivered at last: none of it reaches the target. */
	r.action = ROUTE_DELIVER;
	cr_assert_eq(router_props(&p, &r, &pool, &out), 0);
	expect_no_cascade_state(&out.headers);
}

Test(router, a_garbled_refused_count_is_ignored)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i64(&t, "x-cascade-due", NOW + 1000);
	tb_str(&t, "x-cascade-routing-key", "invoices");
	tb_str(&t, "x-cascade-refused", "many");
	tb_i64(&t, "x-cascade-refused-since", NOW);
	p = props_of(&t);
	decide(ROUTE_FROM_RETURN, &p, "ignored", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.refused, 0);
}

Test(router, target_exchange_not_utf8_is_parked)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p;
	struct route r;

	tb_i32(&t, "x-remaining-delay", 0);
	tb_str(&t, "x-target-exchange",
	       "\xff\xfe"
	       "billing");
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	expect_park(&r, "not valid UTF-8");
	cr_assert_eq(r.park, PARK_bad_header);
}

Test(router, a_parked_copy_drops_the_brokers_delivery_count)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p, out;
	struct route r;

	tb_str(&t, "tenant", "a");
	tb_i64(&t, "x-delivery-count", 12);
	p = props_of(&t);
	memset(&r, 0, sizeof(r));
	r.fresh = 1;
	r.in_routing_key = amqp_cstring_bytes("orders");
	router_park(&r, PARK_redelivered, "seen 12 times");
	cr_assert_eq(router_props(&p, &r, &pool, &out), 0);
	expect_no_hdr(&out.headers, "x-delivery-count");
	expect_hdr_str(&out.headers, "tenant", "a");
	expect_hdr_str(&out.headers, "x-cascade-error", "seen 12 times");
}

Test(router, a_stripped_parked_copy_keeps_our_state_and_names_the_rest)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p, out;
	struct route r;

	tb_str(&t, "pad", "xxxxxxxx");
	tb_str(&t, "trace", "t-1");
	tb_i64(&t, "x-cascade-due", NOW);
	tb_str(&t, "x-cascade-routing-key", "invoices");
	p = props_of(&t);
	props_fill(&p, "alice");
	memset(&r, 0, sizeof(r));
	router_park(&r, PARK_too_large, "properties too large");
	r.strip_headers = 1;
	cr_assert_eq(router_props(&p, &r, &pool, &out), 0);
	expect_no_hdr(&out.headers, "pad");
	expect_no_hdr(&out.headers, "trace");
	expect_hdr_int(&out.headers, "x-cascade-due", NOW);
	expect_hdr_str(&out.headers, "x-cascade-routing-key", "invoices");
	expect_hdr_str(&out.headers, "x-cascade-error", "properties too large");
	const amqp_field_value_t *v =
	    headers_find(&out.headers, "x-cascade-dropped-headers");
	amqp_bytes_t note;
	cr_assert_not_null(v);
	cr_assert_eq(headers_string(v, &note), 0);
	cr_assert(strncmp(note.bytes, "pad, trace (", 12) == 0, "%.*s",
	          (int)note.len, (const char *)note.bytes);
	/* The other properties stay: only headers are dropped. */
	expect_same_props(&p, &out);
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

/*
 * x-cascade-id (events.h): read back from the return queue, carried on
 * every hop, never delivered to the target.
 */
Test(router, cascade_id_rides_every_hop_and_is_not_delivered)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p, out;
	struct route r;

	tb_i64(&t, "x-cascade-due", NOW + 100000);
	tb_str(&t, "x-cascade-exchange", "");
	tb_str(&t, "x-cascade-routing-key", "orders");
	tb_str(&t, "x-cascade-id", "0123456789abcdef");
	p = props_of(&t);
	decide(ROUTE_FROM_RETURN, &p, "cascade.return", NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	expect_bytes(r.id, "0123456789abcdef");
	cr_assert_eq(router_props(&p, &r, &pool, &out), 0);
	expect_hdr_str(&out.headers, "x-cascade-id", "0123456789abcdef");

	decide(ROUTE_FROM_RETURN, &p, "cascade.return", NOW + 100000, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	cr_assert_eq(router_props(&p, &r, &pool, &out), 0);
	cr_assert_eq(count_key(&out.headers, "x-cascade-id"), 0,
	             "the target never sees it");
}

Test(router, first_sight_has_no_cascade_id_until_the_daemon_gives_one)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t p, out;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 100000);
	/* A publisher may not set cascade's state. */
	tb_str(&t, "x-cascade-id", "forged");
	p = props_of(&t);
	decide(ROUTE_FROM_INGRESS, &p, "orders", NOW, &r);
	cr_assert_eq(r.id.len, 0);
	cr_assert_eq(router_props(&p, &r, &pool, &out), 0);
	cr_assert_eq(count_key(&out.headers, "x-cascade-id"), 0);
	r.id = amqp_cstring_bytes("fedcba9876543210");
	cr_assert_eq(router_props(&p, &r, &pool, &out), 0);
	expect_hdr_str(&out.headers, "x-cascade-id", "fedcba9876543210");
}

Test(router, every_source_has_the_name_its_metrics_label_carries)
{
	cr_assert_str_eq(router_source_name(ROUTE_FROM_INGRESS), "ingress");
	cr_assert_str_eq(router_source_name(ROUTE_FROM_RETURN), "return");
	cr_assert_str_eq(router_source_name(ROUTE_FROM_RETRY), "retry");
	cr_assert_str_eq(router_source_name(ROUTE_SOURCES), "unknown");
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
}

/* ---- repeats (schedule.h): no flood, no wrap ---- */

/* A repeat published at now with the given headers. */
static void
repeat_at(struct tb *t, int64_t now, struct route *r)
{
	amqp_basic_properties_t p = props_of(t);

	decide(ROUTE_FROM_INGRESS, &p, "orders", now, r);
}

/* The flood: x-deliver-at: 1, every 1s, seen at NOW + 500. */
Test(router, a_repeat_from_1970_delivers_once_with_the_missed_count)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t in, out;
	struct route r;

	tb_i64(&t, "x-deliver-at", 1);
	tb_str(&t, "x-cascade-every", "1s");
	repeat_at(&t, NOW + 500, &r);
	in = props_of(&t);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	cr_assert_eq(r.first, 1);
	cr_assert_eq(r.occurrence, 1);
	/* Occurrences 1 .. NOW/1000 were missed; NOW + 1 is delivered. */
	cr_assert_eq(r.missed, NOW / 1000, "missed %" PRId64, r.missed);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	expect_hdr_int(&out.headers, "x-cascade-occurrence", NOW / 1000 + 1);
	expect_hdr_int(&out.headers, "x-cascade-missed", NOW / 1000);
	/* The next copy: the next second, not the next of 1970. */
	cr_assert(router_series_next(&r, NOW + 510));
	cr_assert_eq(r.occurrence, NOW / 1000 + 2);
	cr_assert_eq(r.due, NOW + 1001);
	cr_assert_eq(r.missed, 0);
}

/* Phase kept: a past daily start waits for today's occurrence. */
Test(router, a_past_start_waits_for_the_next_occurrence)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t in, out;
	struct route r;

	tb_i64(&t, "x-deliver-at", NOW - 3 * DAY - 3600000);
	tb_str(&t, "x-cascade-every", "1d");
	repeat_at(&t, NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.due, NOW + DAY - 3600000);
	cr_assert_eq(r.occurrence, 1, "the copy is still occurrence 1");
	/* Delivered then: as occurrence 5, the 4 before it missed. */
	router_step(&params, &r, r.due);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	cr_assert_eq(r.missed, 4);
	in = props_of(&t);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	expect_hdr_int(&out.headers, "x-cascade-occurrence", 5);
	expect_hdr_int(&out.headers, "x-cascade-missed", 4);
}

/* A waiting copy's state, as router_props wrote it. */
static void
waiting_copy(struct tb *t, int64_t due, int64_t first, int64_t occurrence)
{
	tb_i64(t, "x-cascade-due", due);
	tb_str(t, "x-cascade-exchange", "");
	tb_str(t, "x-cascade-routing-key", "orders");
	tb_str(t, "x-cascade-id", "0123456789abcdef");
	tb_i64(t, "x-cascade-every", 1000);
	tb_i64(t, "x-cascade-first", first);
	tb_i64(t, "x-cascade-occurrence", occurrence);
	tb_str(t, "x-cascade-token", "feedfacefeedface");
}

/* Back after an outage: one delivery, then the next second. */
Test(router, an_outage_collapses_into_one_delivery)
{
	static const struct {
		const char *what;
		int catch_up_all;
		int64_t late, missed;
	} rows[] = {
	    {"on time", 0, 0, 0},
	    {"late under one interval", 0, 999, 0},
	    {"late one interval", 0, 1000, 1},
	    {"down 10 minutes", 0, 600000, 600},
	    {"down 10 minutes, catch-up all", 1, 600000, 600 - 99},
	    {"down 50 s, catch-up all", 1, 50000, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct tb t = {.n = 0};
		amqp_basic_properties_t in, out;
		struct route r;

		waiting_copy(&t, NOW, NOW - 2000, 3);
		if (rows[i].catch_up_all)
			tb_str(&t, "x-cascade-catch-up", "all");
		in = props_of(&t);
		decide(ROUTE_FROM_RETURN, &in, "cascade.return",
		       NOW + rows[i].late, &r);
		cr_assert_eq(r.action, ROUTE_DELIVER, "%s", rows[i].what);
		cr_expect_eq(r.missed, rows[i].missed, "%s: missed %" PRId64,
		             rows[i].what, r.missed);
		cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
		expect_hdr_int(&out.headers, "x-cascade-occurrence",
		               3 + rows[i].missed);
		if (rows[i].missed == 0)
			expect_no_hdr(&out.headers, "x-cascade-missed");
		cr_assert(router_series_next(&r, NOW + rows[i].late));
		cr_expect_geq(r.due, NOW + rows[i].late + SCHEDULE_PACE_MS,
		              "%s: next copy paced", rows[i].what);
		if (!rows[i].catch_up_all)
			cr_expect_leq(r.due, NOW + rows[i].late + 1000,
			              "%s: next copy within a second",
			              rows[i].what);
	}
}

Test(router, catch_up_is_all_or_absent_and_rides_the_waiting_copy)
{
	struct tb t = {.n = 0}, u = {.n = 0};
	amqp_basic_properties_t in, out;
	struct route r;

	tb_str(&t, "x-remaining-delay", "1h");
	tb_str(&t, "x-cascade-every", "1s");
	tb_str(&t, "x-cascade-catch-up", "all");
	repeat_at(&t, NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.catch_up_all, 1);
	in = props_of(&t);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	expect_hdr_str(&out.headers, "x-cascade-catch-up", "all");
	/* Delivered: gone. */
	router_step(&params, &r, r.due);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	expect_no_hdr(&out.headers, "x-cascade-catch-up");

	tb_str(&u, "x-remaining-delay", "1h");
	tb_str(&u, "x-cascade-every", "1s");
	tb_str(&u, "x-cascade-catch-up", "some");
	repeat_at(&u, NOW, &r);
	expect_park(&r, "x-cascade-catch-up: must be all");
	cr_assert_eq(r.park, PARK_bad_header);
}

/* The publisher's values: bounded before arithmetic, parked if not. */
Test(router, a_repeat_out_of_range_is_parked)
{
	static const struct {
		const char *what, *key;
		int64_t value;
		const char *why;
	} rows[] = {
	    {"every above max_delay", "x-cascade-every", 365 * DAY + 1,
	     "exceeds max_delay 365d"},
	    {"every near INT64_MAX", "x-cascade-every", INT64_MAX,
	     "exceeds max_delay"},
	    {"every negative", "x-cascade-every", INT64_MIN, "at least 1s"},
	    {"times 0", "x-cascade-times", 0, "1 or more"},
	    {"times negative", "x-cascade-times", -5, "1 or more"},
	    {"until near INT64_MAX", "x-cascade-until", INT64_MAX,
	     "x-cascade-until: out of range"},
	    {"until negative", "x-cascade-until", -1,
	     "x-cascade-until: out of range"},
	    {"deliver-at before 1970", "x-deliver-at", -1000,
	     "x-deliver-at: out of range for a repeat"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct tb t = {.n = 0};
		struct route r;

		if (strcmp(rows[i].key, "x-deliver-at") != 0)
			tb_str(&t, "x-remaining-delay", "10s");
		if (strcmp(rows[i].key, "x-cascade-every") != 0)
			tb_str(&t, "x-cascade-every", "1s");
		tb_i64(&t, rows[i].key, rows[i].value);
		repeat_at(&t, NOW, &r);
		cr_expect_eq(r.action, ROUTE_PARK, "%s: action %d",
		             rows[i].what, r.action);
		cr_expect_eq(r.park, PARK_bad_header, "%s", rows[i].what);
		cr_expect(strstr(r.reason, rows[i].why) != NULL, "%s: \"%s\"",
		          rows[i].what, r.reason);
	}
}

/* x-cascade-times of INT64_MAX is no limit, and never wraps. */
Test(router, huge_times_is_just_no_limit)
{
	struct tb t = {.n = 0};
	struct route r;

	tb_str(&t, "x-remaining-delay", "0");
	tb_str(&t, "x-cascade-every", "1s");
	tb_i64(&t, "x-cascade-times", INT64_MAX);
	repeat_at(&t, NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	cr_assert_eq(r.missed, 0);
	cr_assert(router_series_next(&r, NOW));
	cr_assert_eq(r.due, NOW + 1000);
}

/* A waiting copy's state out of range (forged, or garbled): parked. */
Test(router, a_waiting_copy_out_of_range_is_parked)
{
	static const struct {
		const char *what, *key;
		int64_t value;
	} rows[] = {
	    {"every near INT64_MAX", "x-cascade-every", INT64_MAX},
	    {"every under 1s", "x-cascade-every", 1},
	    {"first near INT64_MAX", "x-cascade-first", INT64_MAX - 1},
	    {"first negative", "x-cascade-first", INT64_MIN},
	    {"occurrence near INT64_MAX", "x-cascade-occurrence",
	     INT64_MAX - 1},
	    {"occurrence 0", "x-cascade-occurrence", 0},
	    {"occurrence past times", "x-cascade-times", 2},
	    {"until near INT64_MAX", "x-cascade-until", INT64_MAX},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct tb t = {.n = 0};
		amqp_basic_properties_t in;
		struct route r;

		/* The row's value first: headers_find takes the first. */
		tb_i64(&t, rows[i].key, rows[i].value);
		waiting_copy(&t, NOW, NOW - 2000, 3);
		in = props_of(&t);
		decide(ROUTE_FROM_RETURN, &in, "cascade.return", NOW, &r);
		cr_expect_eq(r.action, ROUTE_PARK, "%s: action %d",
		             rows[i].what, r.action);
		cr_expect_eq(r.park, PARK_bad_header, "%s", rows[i].what);
		cr_expect(strstr(r.reason, "out of range") != NULL,
		          "%s: \"%s\"", rows[i].what, r.reason);
	}
	/* Not an integer at all: parked too, never guessed at. */
	{
		struct tb t = {.n = 0};
		amqp_basic_properties_t in;
		struct route r;

		tb_str(&t, "x-cascade-first", "soon");
		waiting_copy(&t, NOW, NOW - 2000, 3);
		in = props_of(&t);
		decide(ROUTE_FROM_RETURN, &in, "cascade.return", NOW, &r);
		expect_park(&r, "x-cascade-first: must be an integer");
	}
}
