/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Seeing and cancelling what waits (events.h, requests.h): the records the
 * daemon writes in P.events, the cancellation requests published to the
 * ingress and recorded in P.cancels, and the judgment of a waiting message
 * by the requests and claims read back (daemon_ids.c holds them).
 *
 * Owns: the batch of records not yet written and its timer.
 * Calls into: daemon_ids (the cap), daemon_outgoing (records),
 * daemon_publish (park, ack), daemon_fail.
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <ev.h>
#include <inttypes.h>
#include <string.h>

#include "broker.h"
#include "duration.h"
#include "envelope.h"
#include "headers.h"
#include "log.h"

/* P.events records go out in one message per batch (events.h): after
 * this long, or at this many records or bytes, whichever comes first.
 * 50 ms, not 5: at saturation 5 ms batches cost the broker 6 % more CPU
 * per message and the rate 7 % (median of 7 rounds, tools/bench
 * records-cost); 50 ms ones 1.5 % and none measurable. */
#define BATCH_SECONDS 0.05
#define BATCH_RECORDS 1000
#define BATCH_BYTES (64 * 1024)

/*
 * A copy of a confirmed request in P.events, for cascade-ctl list's
 * "cancel pending" (list does not read P.cancels, which every daemon
 * replays on connect).
 */
void
daemon_request_copy(struct daemon *d, const struct message *m)
{
	struct event e;
	int st;

	if (d->out.blocked || d->broken || daemon_request_event(d, m, &e) < 0)
		return;
	if ((st = daemon_write(d, d->topo.events, &e)) != AMQP_STATUS_OK)
		daemon_fail(d, amqp_error_string2(st));
}

/*
 * The message m as its first hop published it, an envelope from
 * d->scratch (which daemon_write recycles), for its scheduled record:
 * cascade-ctl reschedule publishes it again when it moves m earlier
 * (events.h).  Empty for a repeat (its copies are the series') and when
 * it would exceed [events] copy_max_size.
 */
static amqp_bytes_t
daemon_copy(struct daemon *d, const struct message *m)
{
	amqp_basic_properties_t out;
	size_t cap, len;
	char *buf;

	size_t max = (size_t)d->cfg->events_copy_max_size;

	if (m->route.repeat || m->body.len >= max ||
	    router_props(&m->props, &m->route, &d->scratch, &out) < 0)
		return amqp_empty_bytes;
	cap = envelope_bound(&out, m->body.len);
	if (cap > max + 1024)
		cap = max + 1024;
	if ((buf = amqp_pool_alloc(&d->scratch, cap)) == NULL)
		return amqp_empty_bytes;
	len = envelope_encode(&out, m->body, buf, cap);
	if (len == 0 || len > max)
		return amqp_empty_bytes;
	return (amqp_bytes_t){len, buf};
}

/* Record what became of m, when it was recorded as waiting. */
void
daemon_event(struct daemon *d, const struct message *m, enum event_kind kind)
{
	const struct route *r = &m->route;
	struct event e, copy;
	int st;

	if (!config_events(d->cfg) || r->id.len == 0 || d->broken ||
	    d->conn == NULL)
		return;
	/* Its scheduled record waits for its first hop: no end without it. */
	if (m->unrecorded && kind != EVENT_SCHEDULED && kind != EVENT_DUPLICATE)
		return;
	/* A blocked connection stops reading: a publish could hang us. */
	if (d->out.blocked) {
		d->m.events_dropped++;
		return;
	}
	events_of(kind, r, &m->props, m->body.len, duration_wall_ms(), &e);
	memset(&copy, 0, sizeof(copy));
	/* Its copy into P.copies first (daemon_write recycles the scratch
	 * the copy is made in), in the same flush as the record. */
	if (kind == EVENT_SCHEDULED &&
	    (copy.copy = daemon_copy(d, m)).len > 0) {
		copy.kind = EVENT_COPY;
		copy.at = e.at;
		copy.id = e.id;
		if ((st = daemon_write(d, d->topo.copies, &copy)) !=
		    AMQP_STATUS_OK) {
			daemon_fail(d, amqp_error_string2(st));
			return;
		}
	}
	st = daemon_write(d, d->topo.events, &e);
	if (st != AMQP_STATUS_OK) {
		daemon_fail(d, amqp_error_string2(st));
		return;
	}
	d->m.events++;
}

/*
 * Park a copy of request k, which its requester may not apply to the
 * message named id (owned by owner): once per request and daemon.
 */
static void
daemon_refuse(struct daemon *d, struct cancel *k, amqp_bytes_t id,
              amqp_bytes_t owner)
{
	amqp_basic_properties_t props;
	struct message *m;
	struct event e;

	k->refusal_parked = 1;
	d->m.requests_refused++;
	log_warn("request_refused",
	         " kind=%s id=\"%.*s\" requester=\"%.*s\" owner=\"%.*s\"",
	         events_kind_name(k->kind), (int)id.len, (const char *)id.bytes,
	         (int)k->by_len, k->by, (int)owner.len,
	         (const char *)owner.bytes);
	memset(&e, 0, sizeof(e));
	e.kind = k->kind;
	e.at = k->at;
	e.cancel = id;
	e.park = k->park;
	e.due = k->due;
	e.until = k->until;
	e.requester.bytes = k->by;
	e.requester.len = k->by_len;
	e.has_requester = 1;
	if ((m = message_new()) == NULL) {
		daemon_fail(d, "out of memory");
		return;
	}
	if (events_props(&e, &d->scratch, &props) < 0 ||
	    message_set_props(m, &props) < 0) {
		recycle_amqp_pool(&d->scratch);
		message_free(m);
		daemon_fail(d, "out of memory");
		return;
	}
	recycle_amqp_pool(&d->scratch);
	m->kind = MESSAGE_MADE;
	m->src = ROUTE_FROM_INGRESS;
	m->routed = 1;
	memset(&m->route, 0, sizeof(m->route));
	m->route.level = -1;
	m->route.fresh = 1;
	daemon_park(
	    d, m, PARK_not_permitted,
	    "not permitted: user '%.*s' may not %s message '%.*s' of "
	    "user '%.*s' (see [events] control_users)",
	    k->by_len ? (int)k->by_len : 6, k->by_len ? k->by : "(none)",
	    k->kind == EVENT_CANCEL ? "cancel" : "reschedule", (int)id.len,
	    (const char *)id.bytes, (int)owner.len, (const char *)owner.bytes);
}

void
daemon_request_facts(struct daemon *d, struct message *m, int last_look,
                     struct verdict_facts *f)
{
	const struct route *r = &m->route;
	amqp_bytes_t mid = amqp_empty_bytes, owner;
	struct cancel_match cm;
	const struct cancel *k;
	struct event e;
	int64_t since;
	int matched;

	memset(f, 0, sizeof(*f));
	f->first_sight =
	    m->src != ROUTE_FROM_RETURN && m->src != ROUTE_FROM_HOLD;
	f->in_holding = message_in_holding(m);
	f->events = config_events(d->cfg);
	f->has_message_id = (m->props._flags & AMQP_BASIC_MESSAGE_ID_FLAG) != 0;
	if (r->action == ROUTE_PARK)
		return; /* parked by its headers: nothing more to know */
	if (f->has_message_id)
		mid = m->props.message_id;
	/* Its owner (a header to look up) only where a request or a claim
	 * may ask: most messages need none. */
	if (d->requests.n[REQUESTS_CANCEL] > 0 ||
	    (r->repeat && d->requests.n[REQUESTS_PAUSE] > 0) ||
	    (!last_look && r->unique != UNIQUE_NONE && f->has_message_id &&
	     f->events))
		owner = events_owner(&m->props, r->fresh);
	else
		owner = amqp_empty_bytes;
	if (d->requests.n[REQUESTS_CANCEL] > 0) {
		/* A copy has the due time of the request that made it: only
		 * later requests apply to it, even when that one is not read
		 * yet. */
		since = r->since;
		if (r->copied > 0 && r->copied >= since)
			since = r->copied + 1;
		matched = requests_match(&d->requests, mid, r->id, owner, since,
		                         duration_wall_ms(), &cm);
		/* Every refused request at once (each is parked once). */
		while (matched && cm.refused != NULL && !d->broken) {
			daemon_refuse(d, cm.refused, mid.len ? mid : r->id,
			              owner);
			matched =
			    requests_match(&d->requests, mid, r->id, owner,
			                   since, duration_wall_ms(), &cm);
		}
		/* A copy due at the new time took its place (requests.h). */
		f->superseded =
		    requests_superseded(&d->requests, mid, r->id, owner,
		                        r->copied, duration_wall_ms());
		if (matched && (k = cm.cancel) != NULL)
			f->cancel = k->reason == CANCEL_DUPLICATE
			                ? VERDICT_CANCEL_DUPLICATE
			            : k->reason == CANCEL_REPLACED
			                ? VERDICT_CANCEL_REPLACED
			            : k->park ? VERDICT_CANCEL_PARK
			                      : VERDICT_CANCEL_ASKED;
		if (matched && (k = cm.reschedule) != NULL) {
			f->rescheduled = 1;
			f->new_due = k->due;
		}
	}
	if (r->repeat && r->id.len > 0 && d->requests.n[REQUESTS_SERIES] > 0)
		f->stale = requests_series_stale(&d->requests, r->id,
		                                 r->occurrence, r->token);
	if (d->requests.n[REQUESTS_PAUSE] > 0) {
		int64_t now = duration_wall_ms();
		f->series_paused =
		    r->repeat && requests_series_paused(&d->requests, r->id,
		                                        mid, owner, now);
		f->target_paused = requests_target_paused(
		    &d->requests, r->exchange, r->routing_key, now);
	}
	if (last_look)
		return; /* rules 1 to 7 only (verdict_last_look) */
	/* The id is its publisher's (requests.h). */
	if (r->unique != UNIQUE_NONE && f->has_message_id && f->events) {
		memset(&e, 0, sizeof(e));
		e.kind = EVENT_CLAIM;
		e.cancel = mid;
		f->claim_new = requests_new(&d->requests, &e, owner);
		f->claim_held = r->unique == UNIQUE_KEEP &&
		                requests_holder(&d->requests, owner, mid,
		                                duration_wall_ms()) != NULL;
	}
	if (verdict_needs_room(f, r)) {
		f->full = !daemon_held_room(d, METRICS_HELD_CLAIM);
		f->held_ids = daemon_held(d);
		f->max_held_ids = d->cfg->events_max_held_ids;
	}
}

void
daemon_dropped(struct daemon *d, struct message *m, enum verdict_drop why)
{
	const struct route *r = &m->route;
	amqp_bytes_t mid = amqp_empty_bytes;
	const char *queue = d->consumers[m->consumer].queue;

	if (m->props._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
		mid = m->props.message_id;
	switch (why) {
	case VERDICT_DROP_SUPERSEDED:
		d->m.superseded++;
		log_info("superseded",
		         " message_id=\"%.*s\" id=\"%.*s\" copied=%" PRId64
		         " source=%s",
		         (int)mid.len, (const char *)mid.bytes, (int)r->id.len,
		         (const char *)r->id.bytes, r->copied, queue);
		break;
	case VERDICT_DROP_DUPLICATE:
	case VERDICT_DROP_REPLACED:
		log_info(why == VERDICT_DROP_DUPLICATE ? "duplicate"
		                                       : "replaced",
		         " message_id=\"%.*s\" id=\"%.*s\" source=%s",
		         (int)mid.len, (const char *)mid.bytes, (int)r->id.len,
		         (const char *)r->id.bytes, queue);
		if (why == VERDICT_DROP_DUPLICATE) {
			d->m.duplicates++;
			daemon_event(d, m, EVENT_DUPLICATE);
		} else {
			d->m.replaced++;
			daemon_event(d, m, EVENT_CANCELLED);
		}
		break;
	case VERDICT_DROP_CANCELLED:
		daemon_event(d, m, EVENT_CANCELLED);
		break;
	case VERDICT_DROP_STALE:
		d->m.series_stale++;
		log_info("series_stale",
		         " id=\"%.*s\" occurrence=%" PRId64 " source=%s",
		         (int)r->id.len, (const char *)r->id.bytes,
		         r->occurrence, queue);
		break;
	case VERDICT_DROP_ENDED:
		log_info("series_ended",
		         " id=\"%.*s\" occurrence=%" PRId64
		         " reason=\"paused past its last occurrence\" "
		         "source=%s",
		         (int)r->id.len, (const char *)r->id.bytes,
		         r->occurrence, queue);
		daemon_event(d, m, EVENT_CANCELLED);
		break;
	case VERDICT_DROP_NONE:
		break;
	}
	daemon_ack(d, m);
}

/*
 * A message published to P with x-cascade-cancel: a request, recorded in
 * P.cancels (acked once the broker confirmed it there).  A reschedule is
 * moved into P.requests instead (acked once confirmed there), and
 * recorded from there (daemon_scan.c).  Returns 1 when m was one.
 */
int
daemon_cancel_request(struct daemon *d, struct message *m)
{
	struct route *r = &m->route;
	const char *why;
	struct event e;
	int64_t now = duration_wall_ms();

	if (!events_is_request(&m->props))
		return 0;
	memset(r, 0, sizeof(*r));
	r->level = -1;
	r->fresh = 1;
	r->in_routing_key = m->routing_key;
	m->routed = 1;
	if (events_request(&m->props, 0, now, &e, &why) < 0)
		router_park(r, PARK_bad_header, "%s", why);
	else if (!config_events(d->cfg))
		router_park(r, PARK_bad_header,
		            "%s requests are off ([events] enabled = no)",
		            events_kind_name(e.kind));
	else if (e.target && !config_control_user(d->cfg, e.requester))
		/* Holding every delivery to a target is an operator's act
		 * (docs/CONTRACT.md 7.10). */
		router_park(r, PARK_bad_header,
		            "%s-target: only [events] control_users may pause "
		            "or resume a target",
		            e.kind == EVENT_PAUSE ? "x-cascade-pause"
		                                  : "x-cascade-resume");
	else if (!daemon_request_room(d, &e, r))
		; /* parked: too many ids held */
	else if (e.kind == EVENT_RESCHEDULE &&
	         router_read_due(&d->rp, &m->props.headers, now, r) < 0)
		; /* parked: no usable delay header for the new time */
	else {
		r->request_due = r->due;
		r->action = ROUTE_RECORD;
		r->due = now + config_events_max_age(d->cfg);
		/* Copies of what it moves earlier go out first, after a
		 * reading of P.events: it waits for one in P.requests, not
		 * against the ingress prefetch (daemon_scan.c). */
		if (e.kind == EVENT_RESCHEDULE)
			r->action = ROUTE_REQUEST;
	}
	return 1;
}

/* Write batch b into stream, if it holds any record. */
static int
daemon_batch_flush(struct daemon *d, struct daemon_batch *b, const char *stream)
{
	amqp_basic_properties_t props;
	amqp_table_entry_t h[1];
	int st;

	if (b->records == 0)
		return AMQP_STATUS_OK;
	memset(&props, 0, sizeof(props));
	props._flags = AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
	               AMQP_BASIC_HEADERS_FLAG;
	props.type = amqp_cstring_bytes(EVENTS_BATCH_TYPE);
	props.delivery_mode = 2;
	/* Readers believe a batch by its writer, which RabbitMQ checks. */
	daemon_sign(d, &props);
	h[0].key = amqp_cstring_bytes("x-cascade-records");
	h[0].value.kind = AMQP_FIELD_KIND_I64;
	h[0].value.value.i64 = b->records;
	props.headers = (amqp_table_t){1, h};
	st = amqp_basic_publish(d->conn, BROKER_CH_EVENTS, amqp_empty_bytes,
	                        amqp_cstring_bytes(stream), 0, 0, &props,
	                        (amqp_bytes_t){b->len, b->buf});
	b->len = 0;
	b->records = 0;
	return st;
}

/* Write the batches: P.copies' first, so that a reader that has read a
 * scheduled record in P.events and then reads P.copies to a marker of
 * its own finds its copy there. */
int
daemon_events_flush(struct daemon *d)
{
	int st;

	ev_timer_stop(d->loop, &d->batch_timer);
	st = daemon_batch_flush(d, &d->batch[DAEMON_BATCH_COPIES],
	                        d->topo.copies);
	if (st == AMQP_STATUS_OK)
		st = daemon_batch_flush(d, &d->batch[DAEMON_BATCH_EVENTS],
		                        d->topo.events);
	return st;
}

/* Records not written yet go with the connection (they are not
 * confirmed either way: P.events informs, nothing waits for it). */
void
daemon_events_drop(struct daemon *d)
{
	ev_timer_stop(d->loop, &d->batch_timer);
	for (int i = 0; i < 2; i++) {
		d->batch[i].len = 0;
		d->batch[i].records = 0;
	}
}

static void
on_batch(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, batch_timer);
	int st;

	(void)loop;
	(void)revents;
	if (d->broken || d->conn == NULL) {
		daemon_events_drop(d);
		return;
	}
	/* A blocked connection stops reading: a publish could hang us. */
	if (d->out.blocked) {
		d->m.events_dropped += d->batch[DAEMON_BATCH_EVENTS].records +
		                       d->batch[DAEMON_BATCH_COPIES].records;
		daemon_events_drop(d);
		return;
	}
	if ((st = daemon_events_flush(d)) != AMQP_STATUS_OK)
		daemon_fail(d, amqp_error_string2(st));
}

/* A record: into the batch for P.events or P.copies, on its own for
 * P.cancels and P.series. */
int
daemon_write(struct daemon *d, const char *stream, const struct event *e)
{
	amqp_basic_properties_t props;
	struct daemon_batch *b = NULL;
	int st = AMQP_STATUS_OK;

	if (stream == d->topo.events)
		b = &d->batch[DAEMON_BATCH_EVENTS];
	else if (stream == d->topo.copies)
		b = &d->batch[DAEMON_BATCH_COPIES];
	if (events_props(e, &d->scratch, &props) < 0) {
		recycle_amqp_pool(&d->scratch);
		return AMQP_STATUS_NO_MEMORY;
	}
	if (b == NULL) {
		st = amqp_basic_publish(
		    d->conn, BROKER_CH_EVENTS, amqp_empty_bytes,
		    amqp_cstring_bytes(stream), 0, 0, &props, amqp_empty_bytes);
	} else if (events_batch_add(&b->buf, &b->len, &b->cap, &props) < 0) {
		st = AMQP_STATUS_NO_MEMORY;
	} else if (++b->records >= BATCH_RECORDS || b->len >= BATCH_BYTES) {
		st = daemon_events_flush(d);
	} else if (!ev_is_active(&d->batch_timer)) {
		ev_timer_set(&d->batch_timer, BATCH_SECONDS, 0.);
		ev_timer_start(d->loop, &d->batch_timer);
	}
	recycle_amqp_pool(&d->scratch);
	return st;
}

void
daemon_events_init(struct daemon *d)
{
	ev_init(&d->batch_timer, on_batch);
}
