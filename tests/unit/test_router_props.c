/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The properties a message is published with (router_props, in
 * src/routing/router_props.c): on a hop, at delivery and when parked; the state
 * that keeps it from being stuck, and x-cascade-id.
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
	/* Planned to come back when its level's TTL is over. */
	expect_hdr_int(h, "x-cascade-back", NOW + 128000);
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
