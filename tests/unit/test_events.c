/*
 * Records in the events streams, the cancellations a daemon holds, and the
 * id map under both.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cancels.h"
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

/* Hold a request for id, as daemon_record does. */
static int
add(struct cancels *c, const char *id, enum event_kind kind, int park,
    int64_t due, int64_t at, int64_t until, const char *by, int control)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = kind;
	e.cancel = b(id);
	e.park = park;
	e.due = due;
	e.at = at;
	e.until = until;
	return cancels_add(c, &e, b(by), control);
}

static int
cancel(struct cancels *c, const char *id, int park, int64_t until)
{
	return add(c, id, EVENT_CANCEL, park, 0, 0, until, "", 1);
}

/* The cancellation in force for a message nobody owns, or NULL. */
static const struct cancel *
find(struct cancels *c, const char *mid, const char *cid, int64_t now)
{
	struct cancel_match m;

	cancels_match(c, b(mid), b(cid), b(""), 0, now, &m);
	return m.cancel;
}

Test(cancels, found_by_message_id_or_cascade_id_until_they_lapse)
{
	struct cancels c;
	const struct cancel *k;

	cancels_init(&c);
	cr_assert_null(find(&c, "order-1", "id-1", 0));
	cr_assert_eq(cancel(&c, "order-1", 0, 1000), 0);
	cr_assert_eq(cancel(&c, "id-2", 1, 2000), 0);
	k = find(&c, "order-1", "id-1", 999);
	cr_assert_not_null(k);
	cr_assert_eq(k->park, 0);
	cr_assert_null(find(&c, "order-1", "id-1", 1000), "lapsed");
	k = find(&c, "", "id-2", 10);
	cr_assert_not_null(k, "a message without message-id, by cascade id");
	cr_assert_eq(k->park, 1);
	k = find(&c, "order-9", "id-2", 10);
	cr_assert_not_null(k, "by cascade id when the message-id is not");
	cr_assert_null(find(&c, "id-2", "", 3000));
	cancels_free(&c);
}

Test(cancels, a_later_request_wins_and_the_longer_life_stays)
{
	struct cancels c;
	const struct cancel *k;

	cancels_init(&c);
	add(&c, "order-1", EVENT_CANCEL, 0, 0, 10, 5000, "", 1);
	add(&c, "order-1", EVENT_CANCEL, 1, 0, 20, 3000, "", 1);
	k = find(&c, "order-1", "", 4000);
	cr_assert_not_null(k);
	cr_assert_eq(k->park, 1);
	cr_assert_eq(k->until, 5000);
	cancels_free(&c);
}

Test(cancels, prune_forgets_lapsed_requests_only)
{
	struct cancels c;
	char id[16];

	cancels_init(&c);
	for (int i = 0; i < 100; i++) {
		snprintf(id, sizeof(id), "m%d", i);
		cancel(&c, id, 0, i < 60 ? 100 : 10000);
	}
	/* Two requests for one id, one lapsing: the other stays. */
	add(&c, "m99", EVENT_RESCHEDULE, 0, 7, 1, 100, "", 1);
	cr_assert_eq(cancels_prune(&c, 100), 40);
	cr_assert_null(find(&c, "m0", "", 50));
	cr_assert_not_null(find(&c, "m99", "", 50));
	cancels_free(&c);
}

Test(cancels, a_requester_changes_only_its_own_or_unowned_messages)
{
	struct cancels c;
	struct cancel_match m;

	cancels_init(&c);
	add(&c, "order-1", EVENT_CANCEL, 0, 0, 10, 5000, "bob", 0);
	/* alice's message: bob may not, and his request is refused. */
	cr_assert_eq(
	    cancels_match(&c, b("order-1"), b(""), b("alice"), 0, 100, &m), 1);
	cr_assert_null(m.cancel);
	cr_assert_not_null(m.refused);
	cr_assert_eq(m.refused->by_len, 3);
	cr_assert_eq(memcmp(m.refused->by, "bob", 3), 0);
	/* Once parked, not reported again. */
	m.refused->refusal_parked = 1;
	cr_assert_eq(
	    cancels_match(&c, b("order-1"), b(""), b("alice"), 0, 100, &m), 0);
	/* His own, and one published without a user-id: yes. */
	cancels_match(&c, b("order-1"), b(""), b("bob"), 0, 100, &m);
	cr_assert_not_null(m.cancel);
	cancels_match(&c, b("order-1"), b(""), b(""), 0, 100, &m);
	cr_assert_not_null(m.cancel);
	/* A control user's request: any message; bob's stays held too. */
	add(&c, "order-1", EVENT_CANCEL, 1, 0, 20, 5000, "cascade", 1);
	cancels_match(&c, b("order-1"), b(""), b("alice"), 0, 100, &m);
	cr_assert_not_null(m.cancel);
	cr_assert_eq(m.cancel->park, 1);
	cr_assert_null(m.refused);
	cancels_free(&c);
}

Test(cancels, a_reschedule_moves_messages_first_seen_before_it)
{
	struct cancels c;
	struct cancel_match m;

	cancels_init(&c);
	add(&c, "r-1", EVENT_RESCHEDULE, 0, 9000, 1000, 50000, "", 1);
	cancels_match(&c, b("r-1"), b(""), b(""), 999, 1500, &m);
	cr_assert_not_null(m.reschedule);
	cr_assert_eq(m.reschedule->due, 9000);
	cr_assert_null(m.cancel);
	/* First seen after the request: not for it. */
	cr_assert_eq(cancels_match(&c, b("r-1"), b(""), b(""), 1001, 1500, &m),
	             0);
	/* The later of two reschedules wins. */
	add(&c, "r-1", EVENT_RESCHEDULE, 0, 4000, 1200, 50000, "x", 0);
	cancels_match(&c, b("r-1"), b(""), b(""), 999, 1500, &m);
	cr_assert_eq(m.reschedule->due, 4000);
	/* A cancel in force wins over both. */
	add(&c, "r-1", EVENT_CANCEL, 0, 0, 1100, 50000, "", 1);
	cancels_match(&c, b("r-1"), b(""), b(""), 999, 1500, &m);
	cr_assert_not_null(m.cancel);
	cancels_free(&c);
}

/* A reschedule by `by` at `at` that published copies of ids (a, b). */
static int
add_copies(struct cancels *c, const char *id, int64_t at, const char *by,
           int control, const char *ids)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = EVENT_RESCHEDULE;
	e.cancel = b(id);
	e.due = at + 100;
	e.at = at;
	e.until = 1000000;
	e.superseded = b(ids);
	return cancels_add(c, &e, b(by), control);
}

Test(cancels, a_copy_supersedes_the_instances_copied_before_it)
{
	struct cancels c;

	cancels_init(&c);
	cr_assert_eq(add_copies(&c, "order-1", 1000, "ctl", 1, "c1"), 0);
	/* The original (never copied) is superseded, the copy is not. */
	cr_assert(
	    cancels_superseded(&c, b("order-1"), b("c1"), b(""), 0, 5000));
	cr_assert_not(
	    cancels_superseded(&c, b("order-1"), b("c1"), b(""), 1000, 5000));
	/* Another cascade id under the same message-id: not copied. */
	cr_assert_not(
	    cancels_superseded(&c, b("order-1"), b("c2"), b(""), 0, 5000));
	/* Named by its cascade id alone too. */
	cr_assert(cancels_superseded(&c, b(""), b("c1"), b(""), 0, 5000) == 0,
	          "held under order-1: a message without it is not named");
	cr_assert(
	    cancels_superseded(&c, b("order-1"), b("c1"), b(""), 999, 5000));
	/* A later request without copies keeps what the first said. */
	add(&c, "order-1", EVENT_RESCHEDULE, 0, 9000, 2000, 1000000, "ctl", 1);
	cr_assert_not(
	    cancels_superseded(&c, b("order-1"), b("c1"), b(""), 1000, 5000));
	cr_assert(
	    cancels_superseded(&c, b("order-1"), b("c1"), b(""), 0, 5000));
	/* A later copy supersedes the first copy, and not itself. */
	cr_assert_eq(add_copies(&c, "order-1", 3000, "ctl", 1, "c1,,c2,"), 0);
	cr_assert(
	    cancels_superseded(&c, b("order-1"), b("c1"), b(""), 1000, 5000));
	cr_assert_not(
	    cancels_superseded(&c, b("order-1"), b("c1"), b(""), 3000, 5000));
	cr_assert(
	    cancels_superseded(&c, b("order-1"), b("c2"), b(""), 0, 5000));
	/* Lapsed: nothing is superseded any more. */
	cr_assert_not(
	    cancels_superseded(&c, b("order-1"), b("c1"), b(""), 0, 1000000));
	cancels_free(&c);
}

Test(cancels, copies_supersede_what_their_requester_may_change)
{
	struct cancels c;

	cancels_init(&c);
	cr_assert_eq(add_copies(&c, "order-1", 1000, "bob", 0, "c1"), 0);
	cr_assert(
	    cancels_superseded(&c, b("order-1"), b("c1"), b("bob"), 0, 5000));
	cr_assert_not(
	    cancels_superseded(&c, b("order-1"), b("c1"), b("alice"), 0, 5000));
	cancels_free(&c);
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

Test(cancels, a_relayed_requester_is_believed_from_a_trusted_writer_only)
{
	struct config cfg;
	struct event e;
	amqp_bytes_t by;
	int control;

	config_defaults(&cfg);
	snprintf(cfg.broker_url, sizeof(cfg.broker_url),
	         "amqp://cascade:pw@127.0.0.1:5672/%%2f");
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_CANCEL;
	e.writer = b("cascade");
	e.requester = b("bob");
	e.has_requester = 1;
	cancels_requester(&cfg, &e, b("cascade"), &by, &control);
	cr_assert(same(by, "bob"));
	cr_assert_eq(control, 0);
	/* Written by bob himself, claiming to relay alice: he is bob. */
	e.writer = b("bob");
	e.requester = b("cascade");
	cancels_requester(&cfg, &e, b("cascade"), &by, &control);
	cr_assert(same(by, "bob"));
	cr_assert_eq(control, 0);
	/* ctl, as the broker user: a control user by default. */
	e.writer = b("cascade");
	e.has_requester = 0;
	cancels_requester(&cfg, &e, b("cascade"), &by, &control);
	cr_assert(same(by, "cascade"));
	cr_assert_eq(control, 1);
	/* control_users names others. */
	snprintf(cfg.events_control_users, sizeof(cfg.events_control_users),
	         "ops, admin");
	e.writer = b("admin");
	cancels_requester(&cfg, &e, b("cascade"), &by, &control);
	cr_assert_eq(control, 1);
	e.writer = b("cascade");
	cancels_requester(&cfg, &e, b("cascade"), &by, &control);
	cr_assert_eq(control, 0);
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
