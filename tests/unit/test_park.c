/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sending parked messages back (cascade-ctl requeue).  Most tests park a
 * message with the router's own code, as the daemon does, requeue it, and
 * route the result from ingress again: the target, the due time and the
 * publisher's properties must come out as they went in.
 */
#include "amqp_compat.h"
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "headers.h"
#include "ladder.h"
#include "park.h"
#include "retry.h"
#include "router.h"

#include "helpers.h"

#define ERROR_QUEUE "cascade.error"

static struct ladder ladder;
static struct retry_table retries;
static struct router_params params;
static amqp_pool_t pool;

/* The default router with the default retry policy. */
static void
setup(void)
{
	default_router(&ladder, &params);
	memset(&retries, 0, sizeof(retries));
	retry_defaults(&retries.def);
	params.retry = &retries;
	init_amqp_pool(&pool, 4096);
}

static void
teardown(void)
{
	empty_amqp_pool(&pool);
}

TestSuite(park, .init = setup, .fini = teardown);

/* The daemon parks m as router_props does, with kind and reason. */
static void
park(const amqp_basic_properties_t *in, struct route *r, enum park_kind kind,
     const char *reason, amqp_basic_properties_t *out)
{
	router_park(r, kind, "%s", reason);
	cr_assert_eq(router_props(in, r, &pool, out), 0);
}

/*
 * Parked at delivery, after hops: the target exchange was missing.  Sent
 * back, the message has its target, due time, expiration, CC and every
 * header of the publisher, and no routing state of the daemon.
 */
Test(park, parked_after_hops_goes_back_to_its_target_and_due_time)
{
	struct tb t = {0};
	amqp_basic_properties_t p, hop, parked, back, out;
	amqp_field_value_t *cc;
	struct park_target pt;
	struct route r;
	int64_t due = NOW + 90000;

	tb_i64(&t, "x-remaining-delay", 90000);
	tb_str(&t, "x-target-exchange", "orders-x");
	tb_str(&t, "x-target-routing-key", "paid");
	tb_str(&t, "tenant", "acme");
	cc = tb_add(&t, "CC", AMQP_FIELD_KIND_ARRAY);
	cc->value.array.num_entries = 0;
	p = props_of(&t);
	props_fill(&p, NULL);

	router_decide(&params, ROUTE_FROM_INGRESS, &p,
	              amqp_cstring_bytes("orders"), NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(router_props(&p, &r, &pool, &hop), 0);
	/* Back from the delay queue, the target has gone. */
	router_decide(&params, ROUTE_FROM_RETURN, &hop,
	              amqp_cstring_bytes("cascade.return"), due, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	park(&hop, &r, PARK_no_exchange,
	     "target exchange 'orders-x' does not exist", &parked);

	park_target(&parked, amqp_cstring_bytes(ERROR_QUEUE), &pt);
	cr_assert(pt.has_exchange);
	expect_bytes(pt.exchange, "orders-x");
	expect_bytes(pt.routing_key, "paid");
	cr_assert_not(pt.routing_key_parked);
	cr_assert(pt.has_due);
	cr_assert_eq(pt.due, due);
	cr_assert_not(pt.retry_gave_up);
	expect_bytes(pt.reason, "target exchange 'orders-x' does not exist");

	cr_assert_eq(park_requeue_props(&parked,
	                                amqp_cstring_bytes(ERROR_QUEUE), &pool,
	                                &back),
	             0);
	expect_no_cascade_state(&back.headers);
	expect_hdr_str(&back.headers, "x-target-exchange", "orders-x");
	expect_hdr_str(&back.headers, "x-target-routing-key", "paid");
	expect_hdr_int(&back.headers, "x-deliver-at", due);
	expect_no_hdr(&back.headers, "x-remaining-delay");
	expect_hdr_str(&back.headers, "tenant", "acme");
	cr_assert_not_null(headers_find(&back.headers, "CC"));
	cr_assert(back._flags & AMQP_BASIC_EXPIRATION_FLAG);
	expect_bytes(back.expiration, "60000");
	expect_filled_props(&back);

	/* Requeued before its due time: it waits for the rest of it. */
	router_decide(&params, ROUTE_FROM_INGRESS, &back,
	              amqp_cstring_bytes("paid"), NOW + 1000, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.due, due);
	/* Requeued after it: delivered now, as published. */
	router_decide(&params, ROUTE_FROM_INGRESS, &back,
	              amqp_cstring_bytes("paid"), due + 5000, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	expect_bytes(r.exchange, "orders-x");
	expect_bytes(r.routing_key, "paid");
	cr_assert_eq(router_props(&back, &r, &pool, &out), 0);
	expect_no_cascade_state(&out.headers);
	expect_hdr_str(&out.headers, "tenant", "acme");
	cr_assert_not_null(headers_find(&out.headers, "CC"));
	expect_no_hdr(&out.headers, "x-target-exchange");
	expect_no_hdr(&out.headers, "x-deliver-at");
	expect_bytes(out.expiration, "60000");
	expect_filled_props(&out);
}

/* The target's routing key defaults to the one the publisher used. */
Test(park, parked_after_hops_keeps_the_publishers_routing_key)
{
	struct tb t = {0};
	amqp_basic_properties_t p, hop, parked, back;
	struct park_target pt;
	struct route r;

	tb_str(&t, "x-remaining-delay", "5s");
	tb_str(&t, "x-target-exchange", "gone");
	p = props_of(&t);
	router_decide(&params, ROUTE_FROM_INGRESS, &p,
	              amqp_cstring_bytes("orders.eu"), NOW, &r);
	cr_assert_eq(router_props(&p, &r, &pool, &hop), 0);
	router_decide(&params, ROUTE_FROM_RETURN, &hop,
	              amqp_cstring_bytes("cascade.return"), NOW + 5000, &r);
	park(&hop, &r, PARK_unroutable, "unroutable", &parked);

	park_target(&parked, amqp_cstring_bytes(ERROR_QUEUE), &pt);
	expect_bytes(pt.routing_key, "orders.eu");
	cr_assert_not(pt.routing_key_parked);
	cr_assert_eq(park_requeue_props(&parked,
	                                amqp_cstring_bytes(ERROR_QUEUE), &pool,
	                                &back),
	             0);
	expect_hdr_str(&back.headers, "x-target-routing-key", "orders.eu");
	expect_hdr_int(&back.headers, "x-deliver-at", NOW + 5000);
	cr_assert_not(back._flags & AMQP_BASIC_EXPIRATION_FLAG);
}

/*
 * Parked on ingress: the publisher's headers are all there and stay as they
 * are, the relative delay too (it counts again from the requeue).
 */
Test(park, parked_on_ingress_keeps_the_publishers_headers)
{
	struct tb t = {0};
	amqp_basic_properties_t p, parked, back;
	struct park_target pt;
	struct route r;

	tb_str(&t, "x-remaining-delay", "400d");
	tb_str(&t, "x-target-exchange", "billing");
	tb_str(&t, "x-target-routing-key", "invoice");
	tb_str(&t, "tenant", "acme");
	p = props_of(&t);
	props_fill(&p, NULL);
	router_decide(&params, ROUTE_FROM_INGRESS, &p,
	              amqp_cstring_bytes("orders"), NOW, &r);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_eq(router_props(&p, &r, &pool, &parked), 0);

	park_target(&parked, amqp_cstring_bytes(ERROR_QUEUE), &pt);
	cr_assert_not(pt.has_due);
	cr_assert(strstr((const char *)pt.reason.bytes, "max_delay") != NULL);
	cr_assert_eq(park_requeue_props(&parked,
	                                amqp_cstring_bytes(ERROR_QUEUE), &pool,
	                                &back),
	             0);
	expect_no_cascade_state(&back.headers);
	expect_hdr_str(&back.headers, "x-remaining-delay", "400d");
	expect_hdr_str(&back.headers, "x-target-exchange", "billing");
	expect_hdr_str(&back.headers, "x-target-routing-key", "invoice");
	expect_hdr_str(&back.headers, "tenant", "acme");
	expect_no_hdr(&back.headers, "x-deliver-at");
	expect_bytes(back.expiration, "60000");
	expect_filled_props(&back);

	/* Once max_delay allows it, it goes on its way. */
	params.max_delay = 500 * DAY;
	router_decide(&params, ROUTE_FROM_INGRESS, &back,
	              amqp_cstring_bytes("invoice"), NOW + 1000, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	expect_bytes(r.exchange, "billing");
	expect_bytes(r.routing_key, "invoice");
	cr_assert_eq(r.due, NOW + 1000 + 400 * DAY);
}

/* An absolute due time from the publisher stays absolute. */
Test(park, parked_on_ingress_keeps_x_deliver_at)
{
	struct tb t = {0};
	amqp_basic_properties_t p, parked, back;
	struct route r;

	tb_i64(&t, "x-deliver-at", NOW + 400 * DAY);
	tb_str(&t, "x-target-routing-key", "invoice");
	p = props_of(&t);
	router_decide(&params, ROUTE_FROM_INGRESS, &p, amqp_cstring_bytes("x"),
	              NOW, &r);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_eq(router_props(&p, &r, &pool, &parked), 0);
	cr_assert_eq(park_requeue_props(&parked,
	                                amqp_cstring_bytes(ERROR_QUEUE), &pool,
	                                &back),
	             0);
	expect_hdr_int(&back.headers, "x-deliver-at", NOW + 400 * DAY);
	expect_no_hdr(&back.headers, "x-remaining-delay");
}

/*
 * Parked on ingress without x-target-routing-key: the publisher's routing
 * key is not in the message, and the daemon parks with the error queue's
 * name.  park_target says so; cascade-ctl leaves such a message alone.
 */
Test(park, parked_on_ingress_records_its_routing_key)
{
	struct tb t = {0};
	amqp_basic_properties_t p, parked, back;
	struct park_target pt;
	struct route r;

	tb_str(&t, "x-remaining-delay", "soon");
	p = props_of(&t);
	router_decide(&params, ROUTE_FROM_INGRESS, &p,
	              amqp_cstring_bytes("orders"), NOW, &r);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_eq(router_props(&p, &r, &pool, &parked), 0);

	/* The error queue's routing key is all the broker keeps: the daemon
	 * records the publisher's in x-cascade-routing-key. */
	park_target(&parked, amqp_cstring_bytes(ERROR_QUEUE), &pt);
	cr_assert_not(pt.routing_key_parked);
	cr_assert_not(pt.has_exchange);
	expect_bytes(pt.routing_key, "orders");

	cr_assert_eq(park_requeue_props(&parked,
	                                amqp_cstring_bytes(ERROR_QUEUE), &pool,
	                                &back),
	             0);
	expect_hdr_str(&back.headers, "x-target-routing-key", "orders");
	expect_no_hdr(&back.headers, "x-target-exchange");
	expect_no_hdr(&back.headers, "x-cascade-routing-key");
	expect_hdr_str(&back.headers, "x-remaining-delay", "soon");
}

/* A header of the wrong type stays: the message is parked again for it
 * rather than sent to the default exchange. */
Test(park, unreadable_target_header_stays_as_it_is)
{
	struct tb t = {0};
	amqp_basic_properties_t p, parked, back;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 1000);
	tb_i64(&t, "x-target-exchange", 42);
	p = props_of(&t);
	router_decide(&params, ROUTE_FROM_INGRESS, &p,
	              amqp_cstring_bytes("orders"), NOW, &r);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_eq(router_props(&p, &r, &pool, &parked), 0);
	cr_assert_eq(park_requeue_props(&parked, amqp_cstring_bytes("orders"),
	                                &pool, &back),
	             0);
	expect_hdr_int(&back.headers, "x-target-exchange", 42);
	cr_assert_eq(count_key(&back.headers, "x-target-exchange"), 1);
	router_decide(&params, ROUTE_FROM_INGRESS, &back,
	              amqp_cstring_bytes("orders"), NOW, &r);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert(strstr(r.reason, "x-target-exchange") != NULL);
}

/* A dead-lettered message as RabbitMQ hands it to P.retry. */
static void
death_of(struct tb *t, const char *queue, amqp_table_entry_t *death,
         amqp_field_value_t *arr)
{
	amqp_field_value_t *v;

	death[0].key = amqp_cstring_bytes("queue");
	death[0].value.kind = AMQP_FIELD_KIND_UTF8;
	death[0].value.value.bytes = amqp_cstring_bytes(queue);
	death[1].key = amqp_cstring_bytes("reason");
	death[1].value.kind = AMQP_FIELD_KIND_UTF8;
	death[1].value.value.bytes = amqp_cstring_bytes("rejected");
	arr->kind = AMQP_FIELD_KIND_TABLE;
	arr->value.table.num_entries = 2;
	arr->value.table.entries = death;
	v = tb_add(t, "x-death", AMQP_FIELD_KIND_ARRAY);
	v->value.array.num_entries = 1;
	v->value.array.entries = arr;
	tb_str(t, "x-first-death-queue", queue);
	tb_str(t, "x-first-death-reason", "rejected");
}

/*
 * A retry that gave up goes back to its work queue now, with its retries
 * counted afresh.
 */
Test(park, retry_gave_up_goes_back_to_its_work_queue_now)
{
	struct tb t = {0};
	amqp_table_entry_t death[2];
	amqp_field_value_t arr;
	amqp_basic_properties_t p, parked, back, out;
	struct park_target pt;
	struct route r;

	tb_str(&t, "tenant", "acme");
	tb_i64(&t, "x-cascade-attempt", 5);
	death_of(&t, "work", death, &arr);
	p = props_of(&t);
	props_fill(&p, NULL);
	router_decide(&params, ROUTE_FROM_RETRY, &p, amqp_cstring_bytes("job"),
	              NOW, &r);
	cr_assert_eq(r.action, ROUTE_PARK, "%s", r.reason);
	cr_assert_eq(router_props(&p, &r, &pool, &parked), 0);

	park_target(&parked, amqp_cstring_bytes(ERROR_QUEUE), &pt);
	cr_assert(pt.retry_gave_up);
	expect_bytes(pt.queue, "work");
	cr_assert(pt.has_exchange);
	expect_bytes(pt.exchange, "");
	expect_bytes(pt.routing_key, "work");
	cr_assert_not(pt.routing_key_parked);

	cr_assert_eq(park_requeue_props(&parked,
	                                amqp_cstring_bytes(ERROR_QUEUE), &pool,
	                                &back),
	             0);
	expect_no_cascade_state(&back.headers);
	expect_no_hdr(&back.headers, "x-cascade-attempt");
	expect_no_hdr(&back.headers, "x-death");
	expect_no_hdr(&back.headers, "x-first-death-queue");
	expect_hdr_str(&back.headers, "x-target-exchange", "");
	expect_hdr_str(&back.headers, "x-target-routing-key", "work");
	expect_hdr_int(&back.headers, "x-remaining-delay", 0);
	expect_hdr_str(&back.headers, "tenant", "acme");
	expect_filled_props(&back);

	router_decide(&params, ROUTE_FROM_INGRESS, &back,
	              amqp_cstring_bytes("work"), NOW + 1000, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	expect_bytes(r.exchange, "");
	expect_bytes(r.routing_key, "work");
	cr_assert_eq(router_props(&back, &r, &pool, &out), 0);
	expect_no_hdr(&out.headers, "x-cascade-attempt");
	expect_hdr_str(&out.headers, "tenant", "acme");
}

/* Broker and daemon bookkeeping goes; user-id cannot be published by us. */
Test(park, broker_headers_and_user_id_are_dropped)
{
	struct tb t = {0};
	amqp_basic_properties_t p, back;

	tb_str(&t, "x-cascade-error", "why");
	tb_i64(&t, "x-cascade-due", NOW);
	tb_str(&t, "x-cascade-exchange", "x");
	tb_str(&t, "x-cascade-routing-key", "k");
	tb_str(&t, "x-cascade-expiration", "1000");
	tb_str(&t, "x-cascade-user-id", "alice");
	tb_i64(&t, "x-remaining-delay", 0);
	tb_i64(&t, "x-delay", 10);
	tb_i64(&t, "x-opt-delivery-time", NOW + 5);
	tb_i64(&t, "x-opt-delivery-delay", 7);
	tb_i64(&t, "x-delivery-count", 3);
	tb_str(&t, "x-last-death-queue", "q");
	tb_str(&t, "CC", "stale");
	tb_str(&t, "BCC", "hidden");
	tb_str(&t, "keep", "me");
	p = props_of(&t);
	p._flags |= AMQP_BASIC_USER_ID_FLAG;
	p.user_id = amqp_cstring_bytes("alice");

	cr_assert_eq(park_requeue_props(&p, amqp_cstring_bytes(ERROR_QUEUE),
	                                &pool, &back),
	             0);
	cr_assert_not(back._flags & AMQP_BASIC_USER_ID_FLAG);
	expect_no_cascade_state(&back.headers);
	expect_hdr_str(&back.headers, "x-cascade-user-id", "alice");
	expect_no_hdr(&back.headers, "x-delay");
	expect_no_hdr(&back.headers, "x-remaining-delay");
	expect_no_hdr(&back.headers, "x-opt-delivery-time");
	expect_no_hdr(&back.headers, "x-opt-delivery-delay");
	expect_no_hdr(&back.headers, "x-delivery-count");
	expect_no_hdr(&back.headers, "x-last-death-queue");
	expect_no_hdr(&back.headers, "CC");
	expect_no_hdr(&back.headers, "BCC");
	expect_hdr_str(&back.headers, "keep", "me");
	expect_hdr_int(&back.headers, "x-deliver-at", NOW);
	expect_bytes(back.expiration, "1000");
	/* keep, the user-id, the target and the due time */
	cr_assert_eq(back.headers.num_entries, 5);
}

/* A message with no headers at all (someone published it there). */
Test(park, no_headers)
{
	amqp_basic_properties_t p, back;
	struct park_target pt;

	memset(&p, 0, sizeof(p));
	park_target(&p, amqp_cstring_bytes("orders"), &pt);
	cr_assert_not(pt.has_exchange);
	cr_assert_not(pt.has_due);
	cr_assert(pt.routing_key_parked);
	cr_assert_eq(pt.reason.len, 0);
	cr_assert_eq(
	    park_requeue_props(&p, amqp_cstring_bytes("orders"), &pool, &back),
	    0);
	cr_assert(back._flags & AMQP_BASIC_HEADERS_FLAG);
	cr_assert_eq(back.headers.num_entries, 1);
	expect_hdr_str(&back.headers, "x-target-routing-key", "orders");
}

/* Parked by the broker: a consumed queue dead-lettered it into P.error. */
Test(park, dead_lettered_by_the_broker_says_why_and_keeps_its_key)
{
	struct tb death = {.n = 0}, t = {.n = 0};
	amqp_field_value_t keys[1], deaths[1];
	amqp_basic_properties_t p;
	struct park_target pt;

	tb_str(&death, "reason", "rejected");
	tb_str(&death, "queue", "cascade.ingress");
	keys[0].kind = AMQP_FIELD_KIND_UTF8;
	keys[0].value.bytes = amqp_cstring_bytes("orders");
	tb_add(&death, "routing-keys", AMQP_FIELD_KIND_ARRAY)->value.array =
	    (amqp_array_t){1, keys};
	deaths[0].kind = AMQP_FIELD_KIND_TABLE;
	deaths[0].value.table = (amqp_table_t){death.n, death.e};
	tb_str(&t, "x-remaining-delay", "90s");
	tb_add(&t, "x-death", AMQP_FIELD_KIND_ARRAY)->value.array =
	    (amqp_array_t){1, deaths};
	p = props_of(&t);
	park_target(&p, amqp_cstring_bytes(ERROR_QUEUE), &pt);
	char reason[256];
	snprintf(reason, sizeof(reason), "%.*s", (int)pt.reason.len,
	         (const char *)pt.reason.bytes);
	cr_assert(strstr(reason, "could not decode") != NULL, "%s", reason);
	cr_assert_eq(pt.routing_key_parked, 0);
	cr_assert(pt.routing_key.len == 6 &&
	          memcmp(pt.routing_key.bytes, "orders", 6) == 0);
	/* cascade's own reason wins over the broker's record. */
	tb_str(&t, "x-cascade-error", "target exchange 'x' does not exist");
	p = props_of(&t);
	park_target(&p, amqp_cstring_bytes(ERROR_QUEUE), &pt);
	cr_assert(pt.reason.len == 34);
}
