/* SPDX-License-Identifier: Apache-2.0 */
/* The routing decision (router.h); the properties it publishes with are
 * router_props.c's. */
#include "router_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "headers.h"
#include "schedule.h"
#include "wirecheck.h"

int
router_guard(enum route_source src, const amqp_basic_properties_t *props,
             amqp_bytes_t routing_key, uint64_t max, struct route *r)
{
	const amqp_field_value_t *v;
	int64_t n;

	v = headers_find(headers_of(props), "x-delivery-count");
	if (v == NULL || headers_integer(v, &n) != 1 || n < 0)
		return 0;
	return router_guard_count(src, props, routing_key, (uint64_t)n, max, r);
}

int
router_guard_count(enum route_source src, const amqp_basic_properties_t *props,
                   amqp_bytes_t routing_key, uint64_t n, uint64_t max,
                   struct route *r)
{
	const amqp_field_value_t *v;

	if (n < max)
		return 0;
	memset(r, 0, sizeof(*r));
	r->level = -1;
	/* A request from P.requests is its publisher's, as on ingress. */
	r->fresh = src == ROUTE_FROM_INGRESS || src == ROUTE_FROM_REQUESTS;
	r->in_routing_key = routing_key;
	/* Back from the ladder: its id, for the record of its parking. */
	v = r->fresh ? NULL : headers_find(headers_of(props), "x-cascade-id");
	if (v != NULL && headers_string(v, &r->id) < 0)
		r->id = amqp_empty_bytes;
	router_park(r, PARK_redelivered,
	            "seen %" PRIu64 " times without being settled "
	            "(x-delivery-count; [router] max_redeliveries is %" PRIu64
	            ")",
	            n, max);
	return 1;
}

/*
 * The delay headers, in the order they are read (docs/CONTRACT.md section 1):
 * the first present decides.  Times before delays, as Tanzu RabbitMQ's delayed
 * queues read the three they share (x-opt-delivery-time, then
 * x-opt-delivery-delay, then x-delay); ours before the others of each
 * kind.  An AMQP 1.0 publisher's message annotations reach us as headers
 * of the same names (RabbitMQ's mc_amqpl).
 */
static const struct {
	const char *name;
	int absolute; /* Unix ms (headers_epoch_ms), else a delay */
} router_delays[] = {
    {"x-deliver-at", 1},      {"x-opt-delivery-time", 1},
    {"x-remaining-delay", 0}, {"x-opt-delivery-delay", 0},
    {"x-delay", 0},
};

/* Read the publisher's delay headers into r->due; 0, or -1 after parking. */
int
router_read_due(const struct router_params *p, const amqp_table_t *h,
                int64_t now, struct route *r)
{
	const amqp_field_value_t *v = NULL;
	const char *why, *name = NULL;
	int64_t ms;
	size_t i;
	char a[32], b[32];

	for (i = 0; i < sizeof(router_delays) / sizeof(router_delays[0]); i++)
		if ((v = headers_find(h, name = router_delays[i].name)) != NULL)
			break;
	if (v == NULL) {
		/* A cron series needs none: its expression says when. */
		if (headers_find(h, "x-cascade-cron") != NULL) {
			r->due = now;
			return 0;
		}
		router_park(r, PARK_bad_header,
		            "missing delay header (x-remaining-delay, x-delay, "
		            "x-deliver-at, x-opt-delivery-time or "
		            "x-opt-delivery-delay)");
		return -1;
	}
	if (router_delays[i].absolute) {
		if (headers_epoch_ms(v, &r->due, &why) < 0) {
			router_park_header(r, name, v, why);
			return -1;
		}
		/* An AMQP 1.0 timestamp annotation reaches us in whole
		 * seconds, its milliseconds cut off (RabbitMQ's to_091): the
		 * end of that second, so that it is never early. */
		if (i == 1 && v->kind == AMQP_FIELD_KIND_TIMESTAMP)
			r->due += 999;
		ms = r->due > now ? r->due - now : 0;
	} else {
		if (headers_delay(v, &ms, &why) < 0) {
			router_park_header(r, name, v, why);
			return -1;
		}
		if (ms < 0)
			ms = 0;
		r->due = now + (ms < p->max_delay ? ms : p->max_delay);
	}
	if (ms > p->max_delay) {
		duration_format(ms, a, sizeof(a));
		duration_format(p->max_delay, b, sizeof(b));
		router_park(r, PARK_max_delay, "delay %s exceeds max_delay %s",
		            a, b);
		return -1;
	}
	return 0;
}

/*
 * x-cascade-unique: keep or replace.  On first sight a bad value, or one
 * on a message without a message-id, parks it (-1); on a return it is our
 * own and read as it is.
 */
static int
router_read_unique(const amqp_basic_properties_t *props, const amqp_table_t *h,
                   struct route *r)
{
	const amqp_field_value_t *v = headers_find(h, "x-cascade-unique");
	amqp_bytes_t s;

	r->unique = UNIQUE_NONE;
	if (v == NULL)
		return 0;
	if (headers_string(v, &s) == 0 && headers_key_is(s, "keep"))
		r->unique = UNIQUE_KEEP;
	else if (headers_string(v, &s) == 0 && headers_key_is(s, "replace"))
		r->unique = UNIQUE_REPLACE;
	else if (r->fresh) {
		router_park(r, PARK_bad_header,
		            "x-cascade-unique: must be keep or replace");
		return -1;
	}
	if (r->fresh && r->unique != UNIQUE_NONE &&
	    (!(props->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) ||
	     props->message_id.len == 0)) {
		r->unique = UNIQUE_NONE;
		router_park(r, PARK_bad_header,
		            "x-cascade-unique: the message has no message-id "
		            "to be unique by");
		return -1;
	}
	return 0;
}

/* A string header into *out, or the fallback; -1 after parking. */
static int
router_string(const amqp_table_t *h, const char *key, amqp_bytes_t fallback,
              amqp_bytes_t *out, struct route *r)
{
	const amqp_field_value_t *v = headers_find(h, key);

	*out = fallback;
	if (v == NULL)
		return 0;
	if (headers_string(v, out) < 0 || out->len > 255) {
		router_park(r, PARK_bad_header,
		            "%s: must be a string of at most 255 bytes", key);
		return -1;
	}
	return 0;
}

/* The queue that dead-lettered the message: the newest x-death entry. */
static int
router_death_queue(const amqp_table_t *h, amqp_bytes_t *q)
{
	const amqp_field_value_t *v = headers_find(h, "x-death");

	if (v != NULL && v->kind == AMQP_FIELD_KIND_ARRAY &&
	    v->value.array.num_entries > 0 &&
	    v->value.array.entries[0].kind == AMQP_FIELD_KIND_TABLE) {
		v = headers_find(&v->value.array.entries[0].value.table,
		                 "queue");
		if (v != NULL && headers_string(v, q) == 0 && q->len > 0)
			return 0;
	}
	v = headers_find(h, "x-first-death-queue");
	if (v != NULL && headers_string(v, q) == 0 && q->len > 0)
		return 0;
	return -1;
}

/* A message a worker rejected: next attempt after the policy's delay. */
static int
router_retry(const struct router_params *p, const amqp_table_t *h, int64_t now,
             struct route *r)
{
	const struct retry_policy *pol;
	const amqp_field_value_t *v;
	int64_t done = 0;
	double u;

	if (p->retry == NULL || router_death_queue(h, &r->queue) < 0) {
		router_park(r, PARK_not_from_cascade,
		            "no x-death queue: the message was not "
		            "dead-lettered by a work queue");
		return -1;
	}
	v = headers_find(h, "x-cascade-attempt");
	if (v != NULL && (headers_integer(v, &done) != 1 || done < 0))
		done = 0;
	pol = retry_find(p->retry, r->queue);
	if (done >= (int64_t)pol->max_retries) {
		router_park(r, PARK_retries_exhausted,
		            "gave up after %u retries", pol->max_retries);
		return -1;
	}
	r->attempt = (unsigned)done + 1;
	u = p->random != NULL ? p->random() : 0.0;
	r->due = now + retry_delay(pol, r->attempt, u);
	r->exchange = amqp_empty_bytes;
	r->routing_key = r->queue;
	return 0;
}

/* How often its target refused it, since when; 0 when never. */
static void
router_read_refused(const amqp_table_t *h, struct route *r)
{
	const amqp_field_value_t *v = headers_find(h, "x-cascade-refused");
	int64_t n = 0, since = 0;

	if (v == NULL || headers_integer(v, &n) != 1 || n <= 0)
		return;
	v = headers_find(h, "x-cascade-refused-since");
	if (v == NULL || headers_integer(v, &since) != 1 || since <= 0)
		return;
	r->refused = n > 1000000000 ? 1000000000u : (unsigned)n;
	r->refused_since = since;
}

/* Its paced target's slot, our own state: taken when in range, else it
 * is given a new one. */
static void
router_read_slot(const amqp_table_t *h, struct route *r)
{
	const amqp_field_value_t *v = headers_find(h, "x-cascade-slot");
	int64_t t;

	if (v != NULL && headers_integer(v, &t) == 1 && t > 0 &&
	    t <= SCHEDULE_TIME_MAX)
		r->slot = t;
	v = headers_find(h, "x-cascade-slot-by");
	if (v == NULL || headers_string(v, &r->slot_by) < 0 ||
	    r->slot_by.len > 64) {
		r->slot = 0;
		r->slot_by = amqp_empty_bytes;
	}
}

/* When its last hop was to give it back: our own state, taken when in
 * range. */
static void
router_read_back(const amqp_table_t *h, struct route *r)
{
	const amqp_field_value_t *v = headers_find(h, "x-cascade-back");
	int64_t t;

	r->back = 0;
	if (v != NULL && headers_integer(v, &t) == 1 && t > 0 &&
	    t <= SCHEDULE_TIME_MAX)
		r->back = t;
}

/* name is prefix, or prefix followed by a dot and anything. */
static int
router_own_name(amqp_bytes_t prefix, amqp_bytes_t name)
{
	if (name.len < prefix.len ||
	    memcmp(name.bytes, prefix.bytes, prefix.len) != 0)
		return 0;
	return name.len == prefix.len ||
	       ((const char *)name.bytes)[prefix.len] == '.';
}

int
router_own_target(amqp_bytes_t prefix, amqp_bytes_t exchange,
                  amqp_bytes_t routing_key)
{
	if (router_own_name(prefix, exchange))
		return 1;
	if (exchange.len == 0 || headers_key_is(exchange, "amq.default"))
		return router_own_name(prefix, routing_key);
	return 0;
}

/*
 * Does the CC list (CC, or x-cascade-cc while it waits) name one of
 * cascade's own?  At delivery the exchange routes by each of its keys as
 * by the routing key.  *key: the first such.
 */
static int
router_own_cc(amqp_bytes_t prefix, const amqp_table_t *h, amqp_bytes_t exchange,
              amqp_bytes_t *key)
{
	const amqp_field_value_t *cc = headers_find(h, "CC");

	if (cc == NULL)
		cc = headers_find(h, "x-cascade-cc");
	if (cc == NULL || cc->kind != AMQP_FIELD_KIND_ARRAY)
		return 0;
	for (int i = 0; i < cc->value.array.num_entries; i++)
		if (headers_string(&cc->value.array.entries[i], key) == 0 &&
		    router_own_target(prefix, exchange, *key))
			return 1;
	return 0;
}

void
router_decide(const struct router_params *p, enum route_source src,
              const amqp_basic_properties_t *props, amqp_bytes_t routing_key,
              int64_t now, struct route *r)
{
	const amqp_table_t *h = headers_of(props);
	const amqp_field_value_t *v;
	amqp_bytes_t cc_key;
	const char *why;

	memset(r, 0, sizeof(*r));
	r->level = -1;
	r->fresh = src == ROUTE_FROM_INGRESS;
	r->in_routing_key = routing_key;
	/* Held to the bounds of what cascade decodes itself, so that every
	 * envelope and record copy it writes it can read back. */
	if (wirecheck_table(h, &why) < 0) {
		router_park(r, PARK_bad_header, "%s", why);
		return;
	}
	if (src == ROUTE_FROM_INGRESS) {
		if (router_read_due(p, h, now, r) < 0 ||
		    router_string(h, "x-target-exchange", p->default_exchange,
		                  &r->exchange, r) < 0 ||
		    router_string(h, "x-target-routing-key", routing_key,
		                  &r->routing_key, r) < 0 ||
		    router_read_unique(props, h, r) < 0 ||
		    router_read_repeat(p, h, now, r) < 0)
			return;
		if (props->_flags & AMQP_BASIC_EXPIRATION_FLAG) {
			r->expiration = props->expiration;
			r->has_expiration = 1;
		} else {
			/* A parked message sent back through ingress. */
			v = headers_find(h, "x-cascade-expiration");
			if (v != NULL && headers_string(v, &r->expiration) == 0)
				r->has_expiration = 1;
		}
	} else if (src == ROUTE_FROM_RETRY) {
		if (router_retry(p, h, now, r) < 0)
			return;
		if (props->_flags & AMQP_BASIC_EXPIRATION_FLAG) {
			r->expiration = props->expiration;
			r->has_expiration = 1;
		}
	} else {
		v = headers_find(h, "x-cascade-due");
		if (v == NULL) {
			router_park(r, PARK_not_from_cascade,
			            "x-cascade-due missing: the message did "
			            "not come through cascade's ingress");
			return;
		}
		if (headers_epoch_ms(v, &r->due, &why) < 0) {
			router_park(r, PARK_not_from_cascade,
			            "x-cascade-due: %s", why);
			return;
		}
		if (headers_find(h, "x-cascade-routing-key") == NULL) {
			router_park(r, PARK_not_from_cascade,
			            "x-cascade-routing-key missing: the "
			            "message did not come through cascade's "
			            "ingress");
			return;
		}
		if (router_string(h, "x-cascade-exchange", p->default_exchange,
		                  &r->exchange, r) < 0 ||
		    router_string(h, "x-cascade-routing-key", routing_key,
		                  &r->routing_key, r) < 0)
			return;
		v = headers_find(h, "x-cascade-expiration");
		if (v != NULL && headers_string(v, &r->expiration) == 0)
			r->has_expiration = 1;
		router_read_refused(h, r);
		router_read_slot(h, r);
		router_read_back(h, r);
		v = headers_find(h, "x-cascade-id");
		if (v != NULL && headers_string(v, &r->id) < 0)
			r->id = amqp_empty_bytes;
		v = headers_find(h, "x-cascade-since");
		if (v == NULL || headers_integer(v, &r->since) != 1)
			r->since = 0;
		v = headers_find(h, "x-cascade-copied");
		if (v == NULL || headers_integer(v, &r->copied) != 1)
			r->copied = 0;
		(void)router_read_unique(props, h, r);
		if (router_read_repeat(p, h, now, r) < 0)
			return;
	}
	/* RabbitMQ closes the whole connection on such a name. */
	if (!headers_utf8_valid(r->exchange)) {
		router_park(r, PARK_bad_header,
		            "target exchange name is not valid UTF-8 "
		            "(RabbitMQ refuses it)");
		return;
	}
	if (p->own_prefix.len > 0 &&
	    router_own_cc(p->own_prefix, h, r->exchange, &cc_key)) {
		router_park(r, PARK_bad_target,
		            "CC '%.*s' names cascade's own queue or stream: "
		            "never delivered there",
		            (int)(cc_key.len > 200 ? 200 : cc_key.len),
		            (const char *)cc_key.bytes);
		return;
	}
	if (p->own_prefix.len > 0 &&
	    router_own_target(p->own_prefix, r->exchange, r->routing_key)) {
		router_park(
		    r, PARK_bad_target,
		    "target '%.*s/%.*s' is cascade's own exchange, queue "
		    "or stream: never delivered there",
		    (int)r->exchange.len, (const char *)r->exchange.bytes,
		    (int)(r->routing_key.len > 200 ? 200 : r->routing_key.len),
		    (const char *)r->routing_key.bytes);
		return;
	}
	if (p->allowed != NULL && !p->allowed(p->allowed_ctx, r->exchange)) {
		router_park(r, PARK_not_allowed,
		            "target exchange '%.*s' is not allowed by [router] "
		            "allowed_targets",
		            (int)r->exchange.len,
		            (const char *)r->exchange.bytes);
		return;
	}
	router_step(p, r, now);
}

void
router_step(const struct router_params *p, struct route *r, int64_t now)
{
	int64_t remaining;

	r->left = 0;
	/* Compare before subtracting: a header may hold any int64. */
	remaining = r->due > now ? r->due - now : 0;
	if (remaining <= 0) {
		router_deliver(p, r, now);
		return;
	}
	/* The last stretch in a holding queue, to the millisecond; the last
	 * few ms in memory. */
	if (p->native_window > 0 && remaining <= p->native_window &&
	    (!p->hold_tail || remaining > ROUTER_NATIVE_HOLD_MS)) {
		r->action = ROUTE_WAIT;
		r->level = -1;
		r->back = r->due;
		return;
	}
	router_ladder_step(p, r, now);
}

void
router_ladder_step(const struct router_params *p, struct route *r, int64_t now)
{
	int64_t remaining = r->due > now ? r->due - now : 0;

	r->left = 0;
	if (remaining <= 0) {
		router_deliver(p, r, now);
		return;
	}
	r->action = ROUTE_HOP;
	if (p->hold_tail) {
		/* Come back tail_margin early; hold the rest. */
		r->level =
		    remaining > p->tail_margin
		        ? ladder_pick(p->ladder, remaining - p->tail_margin)
		        : -1;
	} else {
		r->level = ladder_pick(p->ladder, remaining);
	}
	if (r->level < 0 && p->hold_tail) {
		r->action = ROUTE_HOLD;
		r->left = remaining;
		return;
	}
	/* Below level 0: round the tail up, late, never early. */
	router_hop(p, r, r->level < 0 ? 0 : r->level, now);
}

void
router_hop(const struct router_params *p, struct route *r, int level,
           int64_t now)
{
	int64_t remaining = r->due > now ? r->due - now : 0;

	r->action = ROUTE_HOP;
	r->level = level;
	r->left = remaining > p->ladder->ttl[level]
	              ? remaining - p->ladder->ttl[level]
	              : 0;
	r->back = now + p->ladder->ttl[level];
}
