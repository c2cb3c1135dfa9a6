/* SPDX-License-Identifier: Apache-2.0 */
/* Parked messages: their target, and the properties to send them back. */
#include "park.h"

#include <string.h>

#include "headers.h"
#include "wirefilter.h"

/* A string header, or 0 when it is absent or of another type. */
static int
park_string(const amqp_table_t *h, const char *key, amqp_bytes_t *out)
{
	const amqp_field_value_t *v = headers_find(h, key);

	return v != NULL && headers_string(v, out) == 0;
}

/*
 * Parked by the broker, not by cascade: a queue cascade consumes
 * dead-lettered it into P.error (x-death).  Say why in words, and take the
 * routing key it had from x-death, for the broker replaced it with P.error.
 */
static void
park_dead_lettered(const amqp_table_t *h, struct park_target *t)
{
	static const struct {
		const char *reason, *words;
	} why[] = {
	    {"rejected", "dead-lettered by RabbitMQ: cascade rejected it, "
	                 "for its AMQP library could not decode its "
	                 "headers"},
	    {"delivery_limit", "dead-lettered by RabbitMQ: returned too "
	                       "often without being settled (delivery "
	                       "limit)"},
	    {"expired", "dead-lettered by RabbitMQ: its expiration passed "
	                "before cascade read it"},
	};
	const amqp_field_value_t *v = headers_find(h, "x-death");
	const amqp_table_t *death;
	amqp_bytes_t r;

	if (v == NULL || v->kind != AMQP_FIELD_KIND_ARRAY ||
	    v->value.array.num_entries == 0 ||
	    v->value.array.entries[0].kind != AMQP_FIELD_KIND_TABLE)
		return;
	death = &v->value.array.entries[0].value.table;
	if (!park_string(death, "reason", &r))
		return;
	for (size_t i = 0; i < sizeof(why) / sizeof(why[0]); i++)
		if (headers_key_is(r, why[i].reason))
			t->reason = amqp_cstring_bytes(why[i].words);
	v = headers_find(death, "routing-keys");
	if (t->routing_key_parked && v != NULL &&
	    v->kind == AMQP_FIELD_KIND_ARRAY &&
	    v->value.array.num_entries > 0 &&
	    headers_string(&v->value.array.entries[0], &r) == 0) {
		t->routing_key = r;
		t->routing_key_parked = 0;
	}
}

void
park_target(const amqp_basic_properties_t *in, amqp_bytes_t parked_routing_key,
            struct park_target *t)
{
	const amqp_table_t *h = headers_of(in);
	const amqp_field_value_t *v;
	const char *why;

	memset(t, 0, sizeof(*t));
	t->exchange = amqp_empty_bytes;
	t->routing_key = parked_routing_key;
	t->routing_key_parked = 1;
	t->reason = amqp_empty_bytes;
	park_string(h, "x-cascade-error", &t->reason);
	t->refused = amqp_empty_bytes;
	wirefilter_refused(in, &t->refused);
	t->retry_gave_up =
	    park_string(h, "x-cascade-queue", &t->queue) && t->queue.len > 0;

	if (park_string(h, "x-target-exchange", &t->exchange) ||
	    park_string(h, "x-cascade-exchange", &t->exchange)) {
		t->has_exchange = 1;
	} else if (t->retry_gave_up) {
		/* Back to the work queue, through the default exchange. */
		t->has_exchange = 1;
		t->exchange = amqp_empty_bytes;
		t->routing_key = t->queue;
		t->routing_key_parked = 0;
	}
	if (t->routing_key_parked &&
	    (park_string(h, "x-target-routing-key", &t->routing_key) ||
	     park_string(h, "x-cascade-routing-key", &t->routing_key)))
		t->routing_key_parked = 0;

	v = headers_find(h, "x-cascade-due");
	if (v != NULL && headers_epoch_ms(v, &t->due, &why) == 0)
		t->has_due = 1;
	if (t->reason.len == 0)
		park_dead_lettered(h, t);
}

/* Whether h holds any delay header (docs/CONTRACT.md section 1). */
static int
park_has_delay(const amqp_table_t *h)
{
	enum header_class c;

	for (int i = 0; h != NULL && i < h->num_entries; i++) {
		(void)headers_fate(h->entries[i].key, HEADER_REQUEUE, &c);
		if (c == HEADER_DELAY)
			return 1;
	}
	return 0;
}

/* Whether header key of a parked message stays in the requeued one. */
static int
park_keeps(const struct park_target *t, amqp_bytes_t key)
{
	enum header_class c;
	enum header_fate f = headers_fate(key, HEADER_REQUEUE, &c);

	if (f != HEADER_ASK)
		return f == HEADER_KEEP;
	switch (c) {
	case HEADER_DELAY:
		/* The due time goes as x-deliver-at instead. */
		return !t->has_due;
	case HEADER_ATTEMPT:
		/* A retry that gave up gets its policy's retries afresh. */
		return !t->retry_gave_up;
	default:
		return 1;
	}
}

int
park_requeue_props(const amqp_basic_properties_t *in,
                   amqp_bytes_t parked_routing_key, amqp_pool_t *pool,
                   amqp_basic_properties_t *out)
{
	const amqp_table_t *h = headers_of(in);
	const amqp_field_value_t *cc;
	struct park_target t;
	amqp_bytes_t exp;
	int n = h ? h->num_entries : 0;
	amqp_table_t tab;

	park_target(in, parked_routing_key, &t);
	*out = *in;
	out->_flags &= ~AMQP_BASIC_USER_ID_FLAG;

	tab.num_entries = 0;
	tab.entries =
	    amqp_pool_alloc(pool, sizeof(amqp_table_entry_t) * (size_t)(n + 5));
	if (tab.entries == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		if (park_keeps(&t, h->entries[i].key))
			tab.entries[tab.num_entries++] = h->entries[i];

	/* A publisher's own x-target-* headers stay, whatever their type:
	 * one that cannot be read parks the message again for that reason,
	 * rather than sending it somewhere else. */
	if (t.has_exchange && headers_find(h, "x-target-exchange") == NULL)
		headers_put_bytes(&tab, "x-target-exchange", t.exchange);
	if (headers_find(h, "x-target-routing-key") == NULL)
		headers_put_bytes(&tab, "x-target-routing-key", t.routing_key);
	if (t.has_due)
		headers_put_i64(&tab, "x-deliver-at", t.due);
	else if (t.retry_gave_up && !park_has_delay(h))
		headers_put_i64(&tab, "x-remaining-delay", 0);
	cc = headers_find(h, "x-cascade-cc");
	if (cc != NULL)
		headers_put_value(&tab, "CC", cc);

	if (park_string(h, "x-cascade-expiration", &exp)) {
		out->_flags |= AMQP_BASIC_EXPIRATION_FLAG;
		out->expiration = exp;
	}
	out->headers = tab;
	if (tab.num_entries > 0)
		out->_flags |= AMQP_BASIC_HEADERS_FLAG;
	else
		out->_flags &= ~AMQP_BASIC_HEADERS_FLAG;
	return 0;
}
