/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Records in the events streams, and the id map under what is held of
 * them (test_requests.c tests that).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "headers.h"
#include "idmap.h"

static amqp_bytes_t
b(const char *s)
{
	return amqp_cstring_bytes(s);
}

Test(idmap, put_get_replace_delete_across_growth)
{
	struct idmap m;
	char key[32];
	void *old;

	idmap_init(&m);
	cr_assert_null(idmap_get(&m, b("absent")));
	for (long i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "order-%ld", i);
		cr_assert_eq(idmap_put(&m, b(key), (void *)(i + 1), &old), 0);
		cr_assert_null(old);
	}
	cr_assert_eq(m.n, 5000);
	cr_assert_eq(idmap_put(&m, b("order-7"), (void *)99, &old), 0);
	cr_assert_eq((long)old, 8, "replacing returns the old value");
	cr_assert_eq(m.n, 5000);
	for (long i = 0; i < 5000; i += 2) {
		snprintf(key, sizeof(key), "order-%ld", i);
		cr_assert_eq((long)idmap_del(&m, b(key)), i == 0 ? 1 : i + 1);
	}
	cr_assert_eq(m.n, 2500);
	/* Deleting never hides the entries that probed past it. */
	for (long i = 1; i < 5000; i += 2) {
		snprintf(key, sizeof(key), "order-%ld", i);
		cr_assert_eq((long)idmap_get(&m, b(key)), i == 7 ? 99 : i + 1,
		             "%s", key);
	}
	cr_assert_null(idmap_get(&m, b("order-8")));
	cr_assert_null(idmap_del(&m, b("order-8")));
	cr_assert_eq(idmap_put(&m, b(""), (void *)5, &old), 0,
	             "the empty key is a key");
	cr_assert_eq((long)idmap_get(&m, b("")), 5);
	idmap_free(&m, NULL);
}

static int
drop_odd(amqp_bytes_t key, void *value, void *ctx)
{
	(void)key;
	(*(int *)ctx)++;
	return (long)value % 2 == 1;
}

Test(idmap, each_removes_what_it_is_told_and_keeps_the_rest)
{
	struct idmap m;
	char key[32];
	void *old;
	int visits = 0;

	idmap_init(&m);
	for (long i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "%ld", i);
		idmap_put(&m, b(key), (void *)i, &old);
	}
	idmap_each(&m, drop_odd, &visits);
	cr_assert_geq(visits, 1000);
	cr_assert_eq(m.n, 500);
	for (long i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "%ld", i);
		if (i % 2)
			cr_assert_null(idmap_get(&m, b(key)));
		else
			cr_assert_eq((long)idmap_get(&m, b(key)), i);
	}
	idmap_free(&m, NULL);
}

static int
count_until(amqp_bytes_t key, void *value, void *ctx)
{
	size_t *n = ctx;

	(void)key;
	(void)value;
	return ++n[0] == n[1];
}

/* A walk over many calls sees every entry once, and stops when told. */
Test(idmap, a_walk_goes_on_where_it_stopped_and_ends_at_0)
{
	struct idmap m;
	void *old;
	char key[16];
	size_t cursor = 0, seen[2] = {0, 0}, calls = 0, slots = 0;

	idmap_init(&m);
	cr_assert_eq(idmap_walk(&m, &cursor, 10, count_until, seen), 0);
	cr_assert_eq(cursor, 0);
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		cr_assert_eq(idmap_put(&m, amqp_cstring_bytes(key), &m, &old),
		             0);
	}
	cr_assert_eq(m.cap, 256);
	do {
		slots += idmap_walk(&m, &cursor, 7, count_until, seen);
		calls++;
	} while (cursor != 0);
	cr_assert_eq(seen[0], 100);
	cr_assert_eq(slots, 256);
	cr_assert_eq(calls, (256 + 6) / 7);
	/* Told to stop after the 10th entry: the next call goes on from
	 * the slot after it. */
	seen[0] = 0;
	seen[1] = 10;
	(void)idmap_walk(&m, &cursor, 256, count_until, seen);
	cr_assert_eq(seen[0], 10);
	cr_assert_neq(cursor, 0);
	seen[1] = 0;
	while (cursor != 0)
		(void)idmap_walk(&m, &cursor, 256, count_until, seen);
	cr_assert_eq(seen[0], 100);
	idmap_free(&m, NULL);
}

Test(idmap, long_keys_and_keys_differing_only_in_length)
{
	struct idmap m;
	char *big = malloc(70000);
	void *old, **ref;

	cr_assert_not_null(big);
	memset(big, 'k', 70000);
	idmap_init(&m);
	/* Lengths on either side of the one-byte length (255). */
	for (size_t n = 250; n < 260; n++)
		cr_assert_eq(idmap_put(&m, (amqp_bytes_t){n, big},
		                       (void *)(n + 1), &old),
		             0);
	cr_assert_eq(idmap_put(&m, (amqp_bytes_t){70000, big}, (void *)7, &old),
	             0);
	cr_assert_eq(m.n, 11);
	for (size_t n = 250; n < 260; n++)
		cr_assert_eq((size_t)idmap_get(&m, (amqp_bytes_t){n, big}),
		             n + 1, "length %zu", n);
	cr_assert_eq((long)idmap_get(&m, (amqp_bytes_t){70000, big}), 7);
	cr_assert_null(idmap_get(&m, (amqp_bytes_t){69999, big}));
	/* A value changed in place through its address. */
	ref = idmap_ref(&m, (amqp_bytes_t){255, big});
	cr_assert_not_null(ref);
	*ref = (void *)42;
	cr_assert_eq((long)idmap_get(&m, (amqp_bytes_t){255, big}), 42);
	cr_assert_null(idmap_ref(&m, b("absent")));
	cr_assert_eq((long)idmap_del(&m, (amqp_bytes_t){70000, big}), 7);
	cr_assert_eq(m.n, 10);
	idmap_free(&m, NULL);
	free(big);
}

static void
roundtrip(const struct event *in, struct event *out)
{
	/* out points into the record: the pool lives until the next call. */
	static amqp_pool_t pool;
	static int ready;
	amqp_basic_properties_t p;

	if (!ready)
		init_amqp_pool(&pool, 1024);
	else
		recycle_amqp_pool(&pool);
	ready = 1;
	cr_assert_eq(events_props(in, &pool, &p), 0);
	cr_assert_eq(p.delivery_mode, 2, "records are persistent");
	cr_assert(headers_key_is(p.type, events_kind_name(in->kind)));
	cr_assert_eq(events_parse(&p, out), 0);
	cr_assert_eq(out->kind, in->kind);
	cr_assert_eq(out->at, in->at);
}

static int
same(amqp_bytes_t a, const char *s)
{
	return headers_key_is(a, s);
}

Test(events, scheduled_record_carries_what_list_shows)
{
	struct event e = {0}, r;

	e.kind = EVENT_SCHEDULED;
	e.at = 1700000000123;
	e.id = b("0123456789abcdef");
	e.message_id = b("order-42");
	e.due = 1700000090000;
	e.exchange = b("orders");
	e.routing_key = b("new");
	e.size = 1234;
	e.copy = b("CSCE\001 the message, whole");
	roundtrip(&e, &r);
	cr_assert(same(r.copy, "CSCE\001 the message, whole"));
	cr_assert(same(r.id, "0123456789abcdef"));
	cr_assert(same(r.message_id, "order-42"));
	cr_assert_eq(r.due, 1700000090000);
	cr_assert(same(r.exchange, "orders"));
	cr_assert(same(r.routing_key, "new"));
	cr_assert_eq(r.size, 1234);
}

Test(events, a_repeats_scheduled_record_carries_its_schedule)
{
	struct event e = {0}, r;
	amqp_basic_properties_t p;
	amqp_pool_t pool;
	char big[256];

	e.kind = EVENT_SCHEDULED;
	e.at = 1700000000123;
	e.id = b("0123456789abcdef");
	e.due = 1700000090000;
	e.every = 3600000;
	e.occurrence = 7;
	roundtrip(&e, &r);
	cr_assert_eq(r.every, 3600000);
	cr_assert_eq(r.occurrence, 7);
	cr_assert_eq(r.cron.len, 0);
	cr_assert_eq(r.tz.len, 0);

	e.every = 0;
	e.cron = b("0 9 * * 1-5");
	e.tz = b("Europe/Berlin");
	e.occurrence = 1;
	roundtrip(&e, &r);
	cr_assert_eq(r.every, 0);
	cr_assert(same(r.cron, "0 9 * * 1-5"));
	cr_assert(same(r.tz, "Europe/Berlin"));
	cr_assert_eq(r.occurrence, 1);

	/* No zone: none written, UTC. */
	e.tz = amqp_empty_bytes;
	roundtrip(&e, &r);
	cr_assert(same(r.cron, "0 9 * * 1-5"));
	cr_assert_eq(r.tz.len, 0);

	/* A plain message's record says nothing of a schedule. */
	e.cron = amqp_empty_bytes;
	roundtrip(&e, &r);
	cr_assert_eq(r.every, 0);
	cr_assert_eq(r.occurrence, 0);
	cr_assert_eq(r.cron.len, 0);

	/* A cron expression over 255 bytes is out of bounds: no record. */
	memset(big, '*', sizeof(big));
	e.cron = (amqp_bytes_t){sizeof(big), big};
	init_amqp_pool(&pool, 1024);
	cr_assert_eq(events_props(&e, &pool, &p), 0);
	cr_assert_eq(events_parse(&p, &r), -1);
	e.cron = (amqp_bytes_t){255, big};
	cr_assert_eq(events_props(&e, &pool, &p), 0);
	cr_assert_eq(events_parse(&p, &r), 0);
	cr_assert_eq(r.cron.len, 255);
	/* Nor an interval past the bound. */
	e.cron = amqp_empty_bytes;
	e.every = EVENTS_COUNT_MAX + 1;
	cr_assert_eq(events_props(&e, &pool, &p), 0);
	cr_assert_eq(events_parse(&p, &r), -1);
	empty_amqp_pool(&pool);
}

Test(events, end_records_and_requests_round_trip)
{
	struct event e = {0}, r;

	e.kind = EVENT_PARKED;
	e.id = b("abc");
	e.reason = b("cancelled");
	roundtrip(&e, &r);
	cr_assert(same(r.id, "abc"));
	cr_assert(same(r.reason, "cancelled"));

	memset(&e, 0, sizeof(e));
	e.kind = EVENT_CANCEL;
	e.cancel = b("order-42");
	e.park = 1;
	e.until = 1800000000000;
	roundtrip(&e, &r);
	cr_assert(same(r.cancel, "order-42"));
	cr_assert_eq(r.park, 1);
	cr_assert_eq(r.until, 1800000000000);

	memset(&e, 0, sizeof(e));
	e.kind = EVENT_MARKER;
	e.marker = b("ctl-1");
	roundtrip(&e, &r);
	cr_assert(same(r.marker, "ctl-1"));
}

Test(events, a_copy_record_carries_the_id_and_the_message)
{
	amqp_basic_properties_t p;
	amqp_pool_t pool;
	struct event e = {0}, r;

	e.kind = EVENT_COPY;
	e.at = 1700000000000;
	e.id = b("c1");
	e.copy = b("an envelope");
	roundtrip(&e, &r);
	cr_assert_eq(r.kind, EVENT_COPY);
	cr_assert(same(r.id, "c1"));
	cr_assert(same(r.copy, "an envelope"));
	cr_assert_eq(r.at, 1700000000000);

	/* Without the message, or the id, it is no record. */
	init_amqp_pool(&pool, 1024);
	e.copy = amqp_empty_bytes;
	cr_assert_eq(events_props(&e, &pool, &p), 0);
	cr_assert_eq(events_parse(&p, &r), -1, "a copy with no message");
	e.copy = b("x");
	e.id = amqp_empty_bytes;
	cr_assert_eq(events_props(&e, &pool, &p), 0);
	cr_assert_eq(events_parse(&p, &r), -1, "a copy of no id");
	empty_amqp_pool(&pool);
}

Test(events, anything_else_is_not_a_record)
{
	amqp_basic_properties_t p;
	amqp_table_entry_t h[1];
	struct event e;

	memset(&p, 0, sizeof(p));
	cr_assert_eq(events_parse(&p, &e), -1, "no type, no headers");
	p._flags = AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_HEADERS_FLAG;
	p.type = b("order.created");
	cr_assert_eq(events_parse(&p, &e), -1, "a type of someone else's");
	p.type = b("cancel");
	h[0].key = b("x-cascade-cancel");
	h[0].value.kind = AMQP_FIELD_KIND_UTF8;
	h[0].value.value.bytes = b("x");
	p.headers.entries = h;
	p.headers.num_entries = 1;
	cr_assert_eq(events_parse(&p, &e), -1, "a request without until");
	p.type = b("scheduled");
	cr_assert_eq(events_parse(&p, &e), -1, "scheduled without id and due");
}

Test(events, new_ids_differ)
{
	char a[17], c[17];

	events_new_id(a);
	events_new_id(c);
	cr_assert_eq(strlen(a), 16);
	cr_assert_str_neq(a, c);
}

Test(events, a_reschedule_names_the_copies_it_published)
{
	struct event e = {0}, r;

	e.kind = EVENT_RESCHEDULE;
	e.cancel = b("order-1");
	e.due = 1700000009000;
	e.until = 1800000000000;
	e.superseded = b("0123456789abcdef,fedcba9876543210");
	roundtrip(&e, &r);
	cr_assert(same(r.superseded, "0123456789abcdef,fedcba9876543210"));
	/* Without copies, no header. */
	e.superseded = amqp_empty_bytes;
	roundtrip(&e, &r);
	cr_assert_eq(r.superseded.len, 0);
}

Test(events, a_request_published_to_p_becomes_a_cancel_record)
{
	amqp_basic_properties_t p;
	amqp_table_entry_t h[2];
	struct event e;
	const char *why;

	memset(&p, 0, sizeof(p));
	p._flags = AMQP_BASIC_HEADERS_FLAG;
	p.headers.entries = h;
	h[0].key = b("x-cascade-cancel");
	h[0].value.kind = AMQP_FIELD_KIND_UTF8;
	h[0].value.value.bytes = b("order-42");
	h[1].key = b("x-cascade-cancel-park");
	h[1].value.kind = AMQP_FIELD_KIND_BOOLEAN;
	h[1].value.value.boolean = 1;
	p.headers.num_entries = 1;
	cr_assert_eq(events_request(&p, 9000, 1000, &e, &why), 0);
	cr_assert_eq(e.kind, EVENT_CANCEL);
	cr_assert(same(e.cancel, "order-42"));
	cr_assert_eq(e.park, 0);
	cr_assert_eq(e.until, 9000);
	cr_assert_eq(e.at, 1000);
	p.headers.num_entries = 2;
	cr_assert_eq(events_request(&p, 9000, 1000, &e, &why), 0);
	cr_assert_eq(e.park, 1);
	h[0].value.value.bytes = b("");
	cr_assert_eq(events_request(&p, 9000, 1000, &e, &why), -1);
	cr_assert_str_eq(why, "x-cascade-cancel: must be a string of 1 to 255 "
	                      "bytes (the message-id to cancel)");
	h[0].value.kind = AMQP_FIELD_KIND_I64;
	cr_assert_eq(events_request(&p, 9000, 1000, &e, &why), -1);
}

/*
 * A request built for P (events_request_props) is read back by the daemon
 * (events_request) as it was asked, through the wire encoding; a
 * reschedule's time is its x-deliver-at.
 */
Test(events, a_request_for_p_reads_back_as_built)
{
	static const struct {
		enum event_kind kind;
		int target, park;
		const char *name, *header;
	} cases[] = {
	    {EVENT_CANCEL, 0, 0, "order-42", "x-cascade-cancel"},
	    {EVENT_CANCEL, 0, 1, "0123456789abcdef", "x-cascade-cancel"},
	    {EVENT_RESCHEDULE, 0, 0, "order-42", "x-cascade-reschedule"},
	    {EVENT_PAUSE, 0, 0, "nightly", "x-cascade-pause"},
	    {EVENT_RESUME, 0, 0, "nightly", "x-cascade-resume"},
	    {EVENT_PAUSE, 1, 0, "orders/eu", "x-cascade-pause-target"},
	    {EVENT_RESUME, 1, 0, "/jobs", "x-cascade-resume-target"},
	};
	amqp_pool_t pool, rd;
	amqp_basic_properties_t p, wire;
	struct event e, back;
	const char *why;
	char *buf = NULL;
	size_t len, cap = 0, off;
	int64_t at;

	init_amqp_pool(&pool, 1024);
	init_amqp_pool(&rd, 1024);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&e, 0, sizeof(e));
		e.kind = cases[i].kind;
		e.target = cases[i].target;
		e.park = cases[i].park;
		e.cancel = b(cases[i].name);
		e.due = e.kind == EVENT_RESCHEDULE ? 1700000090000 : 0;
		e.requester = b("alice");
		cr_assert_eq(events_request_props(&e, &pool, &p), 0);
		cr_assert(events_is_request(&p));
		cr_assert(headers_find(&p.headers, cases[i].header) != NULL);
		len = off = 0;
		cr_assert_eq(events_batch_add(&buf, &len, &cap, &p), 0);
		cr_assert_eq(events_batch_next((amqp_bytes_t){len, buf}, &off,
		                               &rd, &wire),
		             1);
		cr_assert_eq(events_request(&wire, 9000, 1000, &back, &why), 0,
		             "case %zu: %s", i, why);
		cr_assert_eq(back.kind, e.kind, "case %zu", i);
		cr_assert_eq(back.target, e.target, "case %zu", i);
		cr_assert_eq(back.park, e.park, "case %zu", i);
		cr_assert(same(back.cancel, cases[i].name));
		cr_assert(back.has_requester);
		cr_assert(same(back.requester, "alice"));
		cr_assert_eq(back.until, 9000);
		if (e.kind == EVENT_RESCHEDULE) {
			const amqp_field_value_t *v =
			    headers_find(&wire.headers, "x-deliver-at");
			cr_assert(v != NULL && headers_integer(v, &at) == 1);
			cr_assert_eq(at, 1700000090000);
		} else {
			cr_assert_null(
			    headers_find(&wire.headers, "x-deliver-at"));
		}
		recycle_amqp_pool(&pool);
		recycle_amqp_pool(&rd);
	}
	/* Without a requester, no user-id: the daemon records none. */
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_CANCEL;
	e.cancel = b("order-42");
	cr_assert_eq(events_request_props(&e, &pool, &p), 0);
	cr_assert_not(p._flags & AMQP_BASIC_USER_ID_FLAG);
	cr_assert_eq(events_request(&p, 9000, 1000, &back, &why), 0);
	cr_assert_eq(back.requester.len, 0);
	/* What is not a request, or names nothing, is not built. */
	e.cancel = amqp_empty_bytes;
	cr_assert_eq(events_request_props(&e, &pool, &p), -1);
	e.cancel = b("order-42");
	e.kind = EVENT_SCHEDULED;
	cr_assert_eq(events_request_props(&e, &pool, &p), -1);
	e.kind = EVENT_RESCHEDULE;
	e.due = -1;
	cr_assert_eq(events_request_props(&e, &pool, &p), -1);
	free(buf);
	empty_amqp_pool(&pool);
	empty_amqp_pool(&rd);
}

Test(events, records_of_a_route_carry_its_ids_and_target)
{
	amqp_basic_properties_t p;
	struct route r;
	struct event e;

	memset(&p, 0, sizeof(p));
	memset(&r, 0, sizeof(r));
	r.id = b("0123456789abcdef");
	r.due = 5000;
	r.exchange = b("billing");
	r.routing_key = b("invoices");
	events_of(EVENT_SCHEDULED, &r, &p, 77, 1000, &e);
	cr_assert_eq(e.message_id.len, 0, "no message-id: the cascade id");
	cr_assert(same(e.id, "0123456789abcdef"));
	cr_assert_eq(e.due, 5000);
	cr_assert(same(e.exchange, "billing"));
	cr_assert(same(e.routing_key, "invoices"));
	cr_assert_eq(e.size, 77);
	cr_assert_eq(e.at, 1000);
	p._flags = AMQP_BASIC_MESSAGE_ID_FLAG;
	p.message_id = b("inv-7");
	router_park(&r, PARK_unroutable, "unroutable");
	events_of(EVENT_PARKED, &r, &p, 77, 2000, &e);
	cr_assert(same(e.message_id, "inv-7"));
	cr_assert(same(e.reason, "unroutable"));
	cr_assert_eq(e.due, 0, "an end record says only which message");
	cr_assert_eq(e.every, 0);
	cr_assert_eq(e.occurrence, 0);

	/* A repeat's copy: its schedule and occurrence. */
	r.repeat = 1;
	r.every = 60000;
	r.occurrence = 3;
	events_of(EVENT_SCHEDULED, &r, &p, 77, 3000, &e);
	cr_assert_eq(e.every, 60000);
	cr_assert_eq(e.occurrence, 3);
	cr_assert_eq(e.cron.len, 0);
	r.every = 0;
	r.cron = b("0 9 * * *");
	r.tz = b("Asia/Tokyo");
	events_of(EVENT_SCHEDULED, &r, &p, 77, 3000, &e);
	cr_assert_eq(e.every, 0);
	cr_assert(same(e.cron, "0 9 * * *"));
	cr_assert(same(e.tz, "Asia/Tokyo"));
}

/* A batch of records reads back record for record; a cut batch stops. */
Test(events, a_batch_holds_each_record_as_written)
{
	amqp_pool_t pool, rd;
	amqp_basic_properties_t p, got;
	struct event e, back;
	char *buf = NULL, id[8];
	size_t len = 0, cap = 0, off = 0;

	init_amqp_pool(&pool, 4096);
	init_amqp_pool(&rd, 4096);
	for (int i = 0; i < 300; i++) {
		memset(&e, 0, sizeof(e));
		e.kind = i % 2 ? EVENT_DELIVERED : EVENT_SCHEDULED;
		e.at = 1700000000000 + i;
		e.due = 1700000060000 + i;
		snprintf(id, sizeof(id), "id%d", i);
		e.id = amqp_cstring_bytes(id);
		e.exchange = b("orders");
		e.routing_key = b("eu");
		cr_assert_eq(events_props(&e, &pool, &p), 0);
		cr_assert_eq(events_batch_add(&buf, &len, &cap, &p), 0);
		recycle_amqp_pool(&pool);
	}
	for (int i = 0; i < 300; i++) {
		cr_assert_eq(events_batch_next((amqp_bytes_t){len, buf}, &off,
		                               &rd, &got),
		             1, "record %d", i);
		cr_assert_eq(events_parse(&got, &back), 0);
		cr_assert_eq(back.kind,
		             i % 2 ? EVENT_DELIVERED : EVENT_SCHEDULED);
		cr_assert_eq(back.at, 1700000000000 + i);
		snprintf(id, sizeof(id), "id%d", i);
		cr_assert(headers_key_is(back.id, id));
	}
	cr_assert_eq(
	    events_batch_next((amqp_bytes_t){len, buf}, &off, &rd, &got), 0,
	    "the end");
	off = 0;
	cr_assert_eq(
	    events_batch_next((amqp_bytes_t){len - 3, buf}, &off, &rd, &got),
	    1);
	off = len - 10;
	cr_assert_eq(
	    events_batch_next((amqp_bytes_t){len - 3, buf}, &off, &rd, &got),
	    -1, "a record cut short");
	memset(&p, 0, sizeof(p));
	p._flags = AMQP_BASIC_TYPE_FLAG;
	p.type = b(EVENTS_BATCH_TYPE);
	cr_assert(events_is_batch(&p));
	p.type = b("scheduled");
	cr_assert_not(events_is_batch(&p));
	free(buf);
	empty_amqp_pool(&pool);
	empty_amqp_pool(&rd);
}

/* A stream message read at offset off. */
static amqp_basic_properties_t
at_offset(amqp_table_entry_t *e, int64_t off)
{
	amqp_basic_properties_t p;

	memset(&p, 0, sizeof(p));
	p._flags = AMQP_BASIC_HEADERS_FLAG;
	p.headers = (amqp_table_t){0, e};
	headers_put_i64(&p.headers, "x-stream-offset", off);
	return p;
}

Test(events, a_reader_goes_on_past_what_it_cannot_decode)
{
	struct events_resume r;
	amqp_table_entry_t e[1];
	amqp_basic_properties_t p;

	events_resume_init(&r);
	cr_assert_eq(r.from, -1, "from the first");
	/* The first message already: from the one after it. */
	cr_assert_eq(events_resume_skip(&r), 1);
	for (int64_t off = 1; off <= 41; off++) {
		p = at_offset(e, off);
		events_resume_read(&r, &p);
	}
	/* Lost on 42: from 43; lost there again (42 was not the culprit,
	 * offsets had a gap): from 44. */
	cr_assert_eq(events_resume_skip(&r), 43);
	cr_assert_eq(events_resume_skip(&r), 44);
	p = at_offset(e, 50);
	events_resume_read(&r, &p);
	cr_assert_eq(events_resume_skip(&r), 52, "a new place: one step");
	/* An older offset read again (a reconnect) moves nothing back. */
	p = at_offset(e, 7);
	events_resume_read(&r, &p);
	cr_assert_eq(r.last, 50);
}

/* Where a reader starts: its first record, or the offset it goes on at. */
Test(events, a_stream_is_read_from_its_first_record_or_an_offset)
{
	amqp_table_entry_t arg;

	events_stream_offset(-1, &arg);
	cr_assert(headers_key_is(arg.key, "x-stream-offset"));
	cr_assert_eq(arg.value.kind, AMQP_FIELD_KIND_UTF8);
	cr_assert(headers_bytes_eq(arg.value.value.bytes,
	                           amqp_cstring_bytes("first")));
	events_stream_offset(52, &arg);
	cr_assert_eq(arg.value.kind, AMQP_FIELD_KIND_I64);
	cr_assert_eq(arg.value.value.i64, 52);
}

Test(events, a_stream_is_read_from_a_time_in_seconds_unless_from_an_offset)
{
	amqp_table_entry_t arg;

	/* RabbitMQ reads a timestamp offset in seconds. */
	events_stream_since(-1, 1700000001999, &arg);
	cr_assert(headers_key_is(arg.key, "x-stream-offset"));
	cr_assert_eq(arg.value.kind, AMQP_FIELD_KIND_TIMESTAMP);
	cr_assert_eq(arg.value.value.u64, 1700000001);
	/* An offset to go on from wins (past what cannot be read). */
	events_stream_since(52, 1700000001999, &arg);
	cr_assert_eq(arg.value.kind, AMQP_FIELD_KIND_I64);
	cr_assert_eq(arg.value.value.i64, 52);
	events_stream_since(-1, 0, &arg);
	cr_assert_eq(arg.value.kind, AMQP_FIELD_KIND_UTF8);
}
