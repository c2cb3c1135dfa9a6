/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a publish carries besides the message's own properties and body,
 * built from the message alone: the record a request, a claim or a
 * repeat's step writes (ROUTE_RECORD, ROUTE_CLAIM, ROUTE_SERIES), the
 * envelope of a message given to a holding queue or moved into
 * P.requests, and the daemon's signature on what it puts in its own
 * queues.  Called by the files that publish (daemon_publish) and by those
 * that match or refresh records; calls no other file of the daemon's.
 *
 * Owns: nothing.
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <inttypes.h>
#include <string.h>

#include "envelope.h"
#include "headers.h"

void
daemon_sign(const struct daemon *d, amqp_basic_properties_t *p)
{
	if (d->own_user[0] == '\0')
		return;
	p->_flags |= AMQP_BASIC_USER_ID_FLAG;
	p->user_id = amqp_cstring_bytes(d->own_user);
}

/*
 * The record of the cancellation request m (ROUTE_RECORD): the same every
 * time, for a basic.return to match it and for its copy in P.events.
 */
int
daemon_request_event(const struct daemon *d, const struct message *m,
                     struct event *e)
{
	int64_t age = config_events_max_age(d->cfg);
	const char *why;

	if (events_request(&m->props, m->route.due, m->route.due - age, e,
	                   &why) < 0)
		return -1;
	e->due = m->route.request_due;
	e->superseded = m->superseded; /* its copies (daemon_scan.c) */
	/* Written as ourselves, naming who asked (requests.h). */
	e->writer = amqp_cstring_bytes(d->own_user);
	return 0;
}

int
daemon_claim_event(const struct daemon *d, const struct message *m,
                   struct event *e)
{
	const struct route *r = &m->route;

	memset(e, 0, sizeof(*e));
	e->kind = EVENT_CLAIM;
	e->at = r->since;
	e->cancel = m->props.message_id;
	e->id = r->id;
	e->due = r->due;
	e->until = r->due + 86400000LL;
	e->replace = r->unique == UNIQUE_REPLACE;
	if (m->props._flags & AMQP_BASIC_USER_ID_FLAG)
		e->requester = m->props.user_id;
	e->has_requester = 1;
	e->writer = amqp_cstring_bytes(d->own_user);
	return 0;
}

/* The series record (id, occurrence, token, until) written at `at`, as
 * ours: believed from cascade's own users only (trust.h). */
void
daemon_series_record(const struct daemon *d, amqp_bytes_t id,
                     int64_t occurrence, amqp_bytes_t token, int64_t until,
                     int64_t at, struct event *e)
{
	memset(e, 0, sizeof(*e));
	e->kind = EVENT_SERIES;
	e->at = at;
	e->id = id;
	e->occurrence = occurrence;
	e->token = token;
	e->until = until;
	e->writer = amqp_cstring_bytes(d->own_user);
}

int
daemon_series_event(const struct daemon *d, const struct message *m,
                    struct event *e)
{
	const struct route *r = &m->route;

	daemon_series_record(d, r->id, r->occurrence, r->token,
	                     r->due + 86400000LL, r->since, e);
	return 0;
}

int
daemon_scan_props(struct daemon *d, const struct message *m,
                  amqp_basic_properties_t *out)
{
	amqp_table_entry_t *e = amqp_pool_alloc(&d->scratch, sizeof(*e));

	if (e == NULL)
		return -1;
	daemon_enclose_props(d, out);
	out->_flags |= AMQP_BASIC_HEADERS_FLAG;
	out->headers = (amqp_table_t){0, e};
	headers_put_i64(&out->headers, "x-cascade-due", m->route.request_due);
	return 0;
}

int
daemon_enclose(struct daemon *d, struct message *m,
               const amqp_basic_properties_t *inner, amqp_bytes_t content,
               amqp_bytes_t *body)
{
	size_t cap = envelope_bound(inner, content.len);
	char *buf = amqp_pool_alloc(&d->scratch, cap);

	if (buf == NULL)
		return -1;
	body->len = envelope_encode(inner, content, buf, cap);
	body->bytes = buf;
	if (body->len == 0)
		return -2;
	/* Kept to tell a basic.return of it from another (return_same). */
	m->envelope = message_dup(m, *body);
	return m->envelope.len == body->len ? 0 : -1;
}

void
daemon_enclose_props(const struct daemon *d, amqp_basic_properties_t *outer)
{
	memset(outer, 0, sizeof(*outer));
	outer->_flags =
	    AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
	outer->content_type = amqp_cstring_bytes(ENVELOPE_CONTENT_TYPE);
	outer->delivery_mode = 2;
	daemon_sign(d, outer);
}

int
daemon_wrap(struct daemon *d, struct message *m,
            const amqp_basic_properties_t *inner,
            amqp_basic_properties_t *outer, amqp_bytes_t *body)
{
	if (daemon_enclose(d, m, inner, m->body, body) < 0)
		return -1;
	daemon_enclose_props(d, outer);
	return 0;
}
