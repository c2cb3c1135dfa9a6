/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The properties a message is published with, for its route (router.h,
 * router_props): which of the publisher's headers stay, cascade's own state
 * added while it waits, expiration held back until delivery, user-id kept
 * as x-cascade-user-id, and a parked copy's note of the headers it left
 * out.  The routing decision itself is router.c's.
 */
#include "router.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headers.h"

/* A parked copy without the publisher's headers leaves these out. */
static int
router_strips(enum header_class c)
{
	return c == HEADER_OTHER || c == HEADER_DELAY || c == HEADER_TARGET;
}

/* Whether an input header is left out of the publish for route r. */
static int
router_drops(const struct route *r, amqp_bytes_t key)
{
	enum header_class c;
	enum header_fate f = headers_fate(
	    key, r->action == ROUTE_PARK ? HEADER_PARK : HEADER_FORWARD, &c);

	/* Parked without the publisher's headers: cascade's own stay. */
	if (r->action == ROUTE_PARK && r->strip_headers && router_strips(c))
		return 1;
	if (f != HEADER_ASK)
		return f == HEADER_DROP;
	switch (c) {
	case HEADER_USER_ID:
		/* A publisher cannot name itself: only a checked one counts. */
		return r->fresh;
	case HEADER_ATTEMPT:
		/* A retry stamps the new attempt in its place. */
		return r->attempt > 0;
	default:
		return 0;
	}
}

static int
key_order(const void *a, const void *b)
{
	const amqp_bytes_t *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = n ? memcmp(x->bytes, y->bytes, n) : 0;

	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/*
 * For a parked copy without the publisher's headers: which were dropped
 * and why, in words an operator reads ("pad, trace (131052 bytes encoded)
 * did not fit in one frame"), names cut short past 512 bytes.
 */
static char *
router_dropped_note(const amqp_table_t *h, amqp_pool_t *pool)
{
	const size_t cap = 640;
	char *note = amqp_pool_alloc(pool, cap);
	size_t len = 0;
	int i, n = 0, all = h ? h->num_entries : 0;
	amqp_bytes_t *keys =
	    amqp_pool_alloc(pool, sizeof(*keys) * (size_t)(all + 1));

	if (note == NULL || keys == NULL)
		return NULL;
	note[0] = '\0';
	/* In name order: RabbitMQ 4.x hands headers on sorted anyway. */
	for (i = 0; i < all; i++)
		if (router_strips(headers_class(h->entries[i].key)))
			keys[n++] = h->entries[i].key;
	qsort(keys, (size_t)n, sizeof(*keys), key_order);
	for (i = 0; i < n && len < 512; i++) {
		amqp_bytes_t k = keys[i];
		len += (size_t)snprintf(
		    note + len, cap - len, "%s%.*s", len ? ", " : "",
		    (int)(k.len < 100 ? k.len : 100), (const char *)k.bytes);
	}
	snprintf(note + len, cap - len,
	         "%s (%zu bytes encoded) did not fit "
	         "in one frame and %s dropped",
	         i < n ? ", ..." : "", headers_table_size(h),
	         n == 1 ? "was" : "were");
	return note;
}

int
router_props(const amqp_basic_properties_t *in, const struct route *r,
             amqp_pool_t *pool, amqp_basic_properties_t *out)
{
	const amqp_table_t *h = headers_of(in);
	const amqp_field_value_t *cc;
	int n = h ? h->num_entries : 0;
	int move_uid =
	    (in->_flags & AMQP_BASIC_USER_ID_FLAG) &&
	    (r->fresh || headers_find(h, "x-cascade-user-id") == NULL);
	amqp_table_t t;

	*out = *in;
	/* Another user's user-id would be refused; the header carries it. */
	out->_flags &= ~AMQP_BASIC_USER_ID_FLAG;
	out->_flags &= ~AMQP_BASIC_EXPIRATION_FLAG;

	t.num_entries = 0;
	t.entries = amqp_pool_alloc(pool, sizeof(amqp_table_entry_t) *
	                                      (size_t)(n + 28));
	if (t.entries == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		if (!router_drops(r, h->entries[i].key))
			t.entries[t.num_entries++] = h->entries[i];
	cc = headers_find(h, "CC");
	if (cc == NULL)
		cc = headers_find(h, "x-cascade-cc");

	switch (r->action) {
	case ROUTE_PARK:
		/* Hold the expiration, or it would expire in the error queue.
		 */
		if ((in->_flags & AMQP_BASIC_EXPIRATION_FLAG) &&
		    headers_find(h, "x-cascade-expiration") == NULL)
			headers_put_bytes(&t, "x-cascade-expiration",
			                  in->expiration);
		if (cc != NULL && headers_find(h, "x-cascade-cc") == NULL)
			headers_put_value(&t, "x-cascade-cc", cc);
		if (r->queue.len > 0)
			headers_put_bytes(&t, "x-cascade-queue", r->queue);
		/* Parked on first sight: the error queue's routing key is all
		 * the broker keeps, so record the publisher's for a requeue. */
		if (r->fresh &&
		    headers_find(h, "x-cascade-routing-key") == NULL)
			headers_put_bytes(&t, "x-cascade-routing-key",
			                  r->in_routing_key);
		headers_put_bytes(&t, "x-cascade-error",
		                  amqp_cstring_bytes(r->reason));
		if (r->strip_headers) {
			char *note = router_dropped_note(h, pool);
			if (note == NULL)
				return -1;
			headers_put_bytes(&t, "x-cascade-dropped-headers",
			                  amqp_cstring_bytes(note));
		}
		break;
	case ROUTE_HOP:
	case ROUTE_WAIT:
	case ROUTE_RETURN:
		headers_put_i64(&t, "x-cascade-due", r->due);
		headers_put_bytes(&t, "x-cascade-exchange", r->exchange);
		headers_put_bytes(&t, "x-cascade-routing-key", r->routing_key);
		if (r->has_expiration)
			headers_put_bytes(&t, "x-cascade-expiration",
			                  r->expiration);
		if (cc != NULL)
			headers_put_value(&t, "x-cascade-cc", cc);
		if (r->attempt > 0)
			headers_put_i64(&t, "x-cascade-attempt", r->attempt);
		if (r->refused > 0) {
			headers_put_i64(&t, "x-cascade-refused", r->refused);
			headers_put_i64(&t, "x-cascade-refused-since",
			                r->refused_since);
		}
		headers_put_i64(&t, "x-remaining-delay", r->left);
		if (r->slot > 0) {
			headers_put_i64(&t, "x-cascade-slot", r->slot);
			headers_put_bytes(&t, "x-cascade-slot-by", r->slot_by);
		}
		if (r->back > 0)
			headers_put_i64(&t, "x-cascade-back", r->back);
		if (r->id.len > 0)
			headers_put_bytes(&t, "x-cascade-id", r->id);
		if (r->since > 0)
			headers_put_i64(&t, "x-cascade-since", r->since);
		if (r->copied > 0)
			headers_put_i64(&t, "x-cascade-copied", r->copied);
		if (r->unique != UNIQUE_NONE)
			headers_put_bytes(
			    &t, "x-cascade-unique",
			    amqp_cstring_bytes(
			        r->unique == UNIQUE_KEEP ? "keep" : "replace"));
		if (r->repeat) {
			if (r->cron.len > 0) {
				headers_put_bytes(&t, "x-cascade-cron",
				                  r->cron);
				if (r->tz.len > 0)
					headers_put_bytes(&t, "x-cascade-tz",
					                  r->tz);
				headers_put_i64(&t, "x-cascade-scheduled",
				                r->at);
			} else {
				headers_put_i64(&t, "x-cascade-every",
				                r->every);
				headers_put_i64(&t, "x-cascade-first",
				                r->first);
			}
			if (r->times > 0)
				headers_put_i64(&t, "x-cascade-times",
				                r->times);
			if (r->until > 0)
				headers_put_i64(&t, "x-cascade-until",
				                r->until);
			headers_put_i64(&t, "x-cascade-occurrence",
			                r->occurrence);
			if (r->catch_up_all)
				headers_put_bytes(&t, "x-cascade-catch-up",
				                  amqp_cstring_bytes("all"));
			if (r->token.len > 0)
				headers_put_bytes(&t, "x-cascade-token",
				                  r->token);
		}
		break;
	case ROUTE_DELIVER:
	default:
		if (r->has_expiration) {
			out->_flags |= AMQP_BASIC_EXPIRATION_FLAG;
			out->expiration = r->expiration;
		}
		/* At the target, CC routes as the publisher meant it to. */
		if (cc != NULL)
			headers_put_value(&t, "CC", cc);
		if (r->attempt > 0)
			headers_put_i64(&t, "x-cascade-attempt", r->attempt);
		/* A repeat's copy says which it is, and how many before it
		 * were missed (schedule.h). */
		if (r->repeat) {
			headers_put_i64(&t, "x-cascade-occurrence",
			                r->occurrence + r->missed);
			headers_put_i64(&t, "x-cascade-scheduled",
			                r->deliver_at);
		}
		if (r->repeat && r->missed > 0)
			headers_put_i64(&t, "x-cascade-missed", r->missed);
		break;
	}
	if (move_uid)
		headers_put_bytes(&t, "x-cascade-user-id", in->user_id);
	out->headers = t;
	if (t.num_entries > 0)
		out->_flags |= AMQP_BASIC_HEADERS_FLAG;
	else
		out->_flags &= ~AMQP_BASIC_HEADERS_FLAG;
	return 0;
}
