/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A reschedule published to P that moves messages earlier (CONTRACT
 * section 7.5), done as cascade-ctl reschedule does it.
 *
 * A message in a long delay level comes back to a daemon only when the
 * level's TTL runs out.  To have it arrive at an earlier time, the daemon
 * that takes the request reads P.events from its first record up to a
 * marker of its own, finds the scheduled records of the messages the
 * request names, reads their copy records from P.copies (from a minute
 * before the earliest was first seen, up to another marker; an earlier
 * cascade put them in the scheduled records), and publishes each copy
 * (events.h) into the first shard's return queue, due at the new time and
 * stamped x-cascade-copied with the request's time.  Once the broker confirmed
 * every copy it records the request, naming the cascade ids copied in
 * x-cascade-superseded, and only then acks it: the daemons drop the
 * instances those copies replace when they come back (requests.h).
 *
 * A request is first moved off P.ingress into P.requests (below), so
 * that one waiting for a reading holds no ingress prefetch; the daemon
 * takes it from there, with a prefetch of its own, and acks it there.
 * Requests that arrive while P.events is being read wait for the next
 * reading; one reading serves every request waiting when it starts, in
 * order, each request's time later than the one before and each folded
 * in before the next is judged.  The next reading starts once every
 * request of the last one is acked (its record, and the record's copy
 * in P.events, written), so it reads what they did.  A lost connection
 * drops them all unacked, and the broker delivers them again: copies
 * published before are then superseded by the new ones.
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <ev.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker.h"
#include "duration.h"
#include "envelope.h"
#include "headers.h"
#include "log.h"

/* s: the marker is written without a confirm; write it again until it
 * comes back (as for P.cancels, daemon_events.c). */
#define SCAN_REMARK 5.

static void on_remark(struct ev_loop *loop, ev_timer *w, int revents);
static void on_settled(struct ev_loop *loop, ev_timer *w, int revents);

void
daemon_scan_init(struct daemon *d)
{
	TAILQ_INIT(&d->scan.queued);
	TAILQ_INIT(&d->scan.reading);
	TAILQ_INIT(&d->scan.copying);
	ev_init(&d->scan.remark, on_remark);
	ev_init(&d->scan.settle, on_settled);
	events_resume_init(&d->scan.resume);
	events_resume_init(&d->scan.copies_resume);
}

const char *
daemon_scan_stream(struct daemon *d, struct events_resume **resume)
{
	if (resume != NULL)
		*resume =
		    d->scan.copies ? &d->scan.copies_resume : &d->scan.resume;
	return d->scan.copies ? d->topo.copies : d->topo.events;
}

int
daemon_scan_metric(const struct daemon *d)
{
	return d->scan.copies ? METRICS_STREAM_COPIES : METRICS_STREAM_EVENTS;
}

/* The request m names: its id, and who asks (empty: anonymous). */
static int
scan_request(const struct message *m, amqp_bytes_t *id, amqp_bytes_t *by)
{
	const char *why;
	struct event e;

	if (events_request(&m->props, 0, 0, &e, &why) < 0)
		return -1;
	*id = e.cancel;
	*by = e.requester;
	return 0;
}

int
daemon_scan_tag(const struct daemon *d, amqp_bytes_t tag, int *current)
{
	size_t n = sizeof(SCAN_TAG) - 1;
	int ours = tag.len > n && memcmp(tag.bytes, SCAN_TAG, n) == 0 &&
	           ((const char *)tag.bytes)[n] == '.';

	if (current != NULL)
		*current =
		    ours && d->scan.active && headers_key_is(tag, d->scan.tag);
	return ours;
}

static int
scan_marker(struct daemon *d)
{
	struct event e;
	int st;

	/* A blocked connection stops reading: the remark writes it later. */
	if (d->out.blocked)
		return AMQP_STATUS_OK;
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_MARKER;
	e.at = duration_wall_ms();
	e.marker = amqp_cstring_bytes(d->scan.marker);
	if ((st = daemon_write(d, daemon_scan_stream(d, NULL), &e)) ==
	    AMQP_STATUS_OK)
		st = daemon_events_flush(d);
	return st;
}

/* Read P.events for the requests queued. */
static void
scan_start(struct daemon *d)
{
	struct message *m;
	size_t n = 0;
	char id[17];
	int st;

	if (d->scan.active || d->scan.recording > 0 ||
	    TAILQ_EMPTY(&d->scan.queued) || d->broken || d->conn == NULL)
		return;
	TAILQ_CONCAT(&d->scan.reading, &d->scan.queued, link);
	TAILQ_FOREACH(m, &d->scan.reading, link)
		n++;
	free(d->scan.want);
	if ((d->scan.want = calloc(n, sizeof(*d->scan.want))) == NULL) {
		daemon_fail(d, "out of memory for a reschedule");
		return;
	}
	n = 0;
	TAILQ_FOREACH(m, &d->scan.reading, link) {
		amqp_bytes_t by;
		if (scan_request(m, &d->scan.want[n], &by) == 0)
			n++;
	}
	waiting_fold_init(&d->scan.fold);
	d->scan.fold.cfg = d->cfg;
	snprintf(d->scan.fold.own_user, sizeof(d->scan.fold.own_user), "%s",
	         d->own_user);
	d->scan.fold.want = d->scan.want;
	d->scan.fold.nwant = n;
	d->scan.active = 1;
	d->scan.copies = 0;

	events_new_id(id);
	snprintf(d->scan.marker, sizeof(d->scan.marker), "scan-%d-%s",
	         (int)getpid(), id);
	/* A tag per reading: deliveries of the last one still in flight
	 * are told apart (and acked unread). */
	snprintf(d->scan.tag, sizeof(d->scan.tag), "%s.%" PRIu64, SCAN_TAG,
	         d->scan.serial);
	st = daemon_consume_stream(d, d->topo.events, d->scan.tag,
	                           d->scan.resume.from, 0);
	if (st == AMQP_STATUS_OK)
		st = scan_marker(d);
	if (st != AMQP_STATUS_OK) {
		daemon_fail(d, amqp_error_string2(st));
		return;
	}
	ev_timer_set(&d->scan.remark, SCAN_REMARK, SCAN_REMARK);
	ev_timer_start(d->loop, &d->scan.remark);
	log_info("reschedule_reading", " stream=%s requests=%zu",
	         d->topo.events, n);
}

static void
on_remark(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, scan.remark);
	int st;

	(void)loop;
	(void)revents;
	if (!d->scan.active || d->broken || d->conn == NULL) {
		ev_timer_stop(d->loop, &d->scan.remark);
		return;
	}
	if ((st = scan_marker(d)) != AMQP_STATUS_OK)
		daemon_fail(d, amqp_error_string2(st));
}

/*
 * Waiting in P.requests.  A request is taken off ingress at once: the
 * daemon publishes it into P.requests and acks the ingress delivery once
 * the broker confirmed that publish, so requests waiting for a reading
 * never hold the ingress prefetch, and plain messages go on meanwhile.
 * The request stays the one its publisher sent (whose user-id asks), in
 * an envelope: the daemon may not publish with another user's user-id.
 * The outer message says who moved it (the daemon's user-id, which the
 * broker checks) and the new due time read from its delay header then.
 */

int
daemon_scan_open(struct daemon *d, struct message *m)
{
	const amqp_table_t *h = (m->props._flags & AMQP_BASIC_HEADERS_FLAG)
	                            ? &m->props.headers
	                            : NULL;
	const amqp_field_value_t *v;
	amqp_basic_properties_t props;
	amqp_bytes_t body;
	const char *why;
	int64_t n, due = 0;

	/* The outer count: a quorum queue's, for the redelivery guard. */
	v = headers_find(h, "x-delivery-count");
	if (v != NULL && headers_integer(v, &n) == 1 && n > 0)
		m->delivery_count = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	v = headers_find(h, "x-cascade-due");
	/* Anyone with write on amq.default reaches the queue by name. */
	if (!trust_writer(d->cfg, amqp_cstring_bytes(d->own_user),
	                  trust_writer_of(&m->props)))
		why = "not moved there by a daemon (its user-id is not the "
		      "daemon's user nor one of [events] control_users)";
	else if (v == NULL || headers_integer(v, &due) != 1 || due < 0 ||
	         due > EVENTS_TIME_MAX)
		why = "x-cascade-due: missing or out of range";
	else if (envelope_decode(m->body, &m->pool, &props, &body, &why) == 0) {
		m->props = props;
		m->body = body;
		m->route.request_due = due;
		return 0;
	}
	m->routed = 1;
	m->route.level = -1;
	m->route.in_routing_key = m->routing_key;
	daemon_park(d, m, PARK_not_from_cascade, "%s: %s", d->topo.requests,
	            why);
	return -1;
}

void
daemon_scan_take(struct daemon *d, struct message *m)
{
	struct route *r = &m->route;
	int64_t due = r->request_due, now = duration_wall_ms();
	const char *why = "not a reschedule request";
	struct event e;

	memset(r, 0, sizeof(*r));
	r->level = -1;
	r->fresh = 1;
	r->in_routing_key = m->routing_key;
	m->routed = 1;
	if (events_request(&m->props, 0, now, &e, &why) < 0 ||
	    e.kind != EVENT_RESCHEDULE) {
		daemon_park(d, m, PARK_bad_header, "%s", why);
		return;
	}
	/* Checked again: a backlog in P.requests passed ingress's check
	 * before any of it was held. */
	if (!daemon_request_room(d, &e, r)) {
		daemon_dispatch(d, m);
		return;
	}
	/* As daemon_cancel_request set it on ingress. */
	r->request_due = due;
	r->action = ROUTE_RECORD;
	r->due = now + config_events_max_age(d->cfg);
	daemon_scan_request(d, m);
}

void
daemon_scan_request(struct daemon *d, struct message *m)
{
	m->scan_serial = ++d->scan.serial;
	TAILQ_INSERT_TAIL(&d->scan.queued, m, link);
	scan_start(d);
}

/*
 * A copy of w for request r, due at due: a message of the daemon's own,
 * routed as one back from a delay level into the first shard's return
 * queue.  0, 1 when it does not decode (nothing to copy), -1 out of
 * memory.
 */
static int
scan_copy(struct daemon *d, struct message *r, const struct waiting *w,
          int64_t due, int64_t at)
{
	amqp_basic_properties_t props;
	amqp_bytes_t body;
	struct message *m;
	const char *why;

	if ((m = message_new()) == NULL)
		return -1;
	if (envelope_decode(w->copy, &d->scratch, &props, &body, &why) < 0) {
		recycle_amqp_pool(&d->scratch);
		message_free(m);
		log_warn("reschedule_copy_undecodable",
		         " id=\"%.*s\" reason=\"%s\"", (int)w->id.len,
		         (const char *)w->id.bytes, why);
		return 1;
	}
	if (message_set_props(m, &props) < 0 || message_body(m, body.len) < 0 ||
	    message_append(m, body) < 0) {
		recycle_amqp_pool(&d->scratch);
		message_free(m);
		return -1;
	}
	recycle_amqp_pool(&d->scratch);
	m->kind = MESSAGE_COPY;
	m->scan_serial = r->scan_serial;
	m->src = ROUTE_FROM_RETURN;
	m->routed = 1;
	router_decide(&d->rp, ROUTE_FROM_RETURN, &m->props, amqp_empty_bytes,
	              duration_wall_ms(), &m->route);
	if (m->route.action == ROUTE_PARK) {
		log_warn("reschedule_copy_unroutable",
		         " id=\"%.*s\" reason=\"%s\"", (int)w->id.len,
		         (const char *)w->id.bytes, m->route.reason);
		message_free(m);
		return 1;
	}
	m->route.due = due;
	m->route.copied = at;
	m->route.shard = 0;
	m->route.level = -1;
	m->route.action = ROUTE_RETURN;
	r->copies_pending++;
	daemon_dispatch(d, m);
	return 0;
}

/*
 * Copy for request r: its time becomes now (later than the last), and
 * the copies of what it names go out.  Then it joins the fold, so that
 * the next request of this reading sees what it did.
 */
static int
scan_copies_for(struct daemon *d, struct message *r)
{
	amqp_bytes_t id = amqp_empty_bytes, by = amqp_empty_bytes;
	struct waiting **ws = NULL;
	struct event e;
	char *list = NULL;
	size_t len = 0;
	long n = 0;
	int64_t now = duration_wall_ms(), due = r->route.request_due, at;
	int control, rc = 0;

	at = now > d->scan.last_at ? now : d->scan.last_at + 1;
	d->scan.last_at = at;
	/* The record's time (daemon_request_event): the copies carry it. */
	r->route.due = at + config_events_max_age(d->cfg);
	if (scan_request(r, &id, &by) == 0 &&
	    (n = waiting_named(&d->scan.fold, id, &ws)) < 0)
		return -1;
	if (n > 0 && (list = malloc((size_t)n * 256)) == NULL)
		rc = -1;
	control = config_control_user(d->cfg, by);
	for (long i = 0; i < n && rc == 0; i++) {
		const struct waiting *w = ws[i];
		if (!waiting_needs_copy(&d->scan.fold, w, due, at, by, control))
			continue;
		if ((rc = scan_copy(d, r, w, due, at)) != 0) {
			rc = rc < 0 ? -1 : 0;
			continue;
		}
		events_superseded_append(list, &len, w->id);
	}
	free(ws);
	if (rc == 0 && len > 0) {
		r->superseded = message_dup(r, (amqp_bytes_t){len, list});
		if (r->superseded.bytes == NULL)
			rc = -1;
	}
	free(list);
	if (rc == 0 && daemon_request_event(d, r, &e) == 0 &&
	    waiting_fold_event(&d->scan.fold, &e) < 0)
		rc = -1;
	log_info("reschedule_copies", " id=\"%.*s\" copies=%u due=%" PRId64,
	         (int)id.len, (const char *)id.bytes, r->copies_pending, due);
	return rc;
}

/* P.events is read: publish the copies each request needs. */
static void
scan_copies(struct daemon *d)
{
	struct message *r;

	while ((r = TAILQ_FIRST(&d->scan.reading)) != NULL) {
		TAILQ_REMOVE(&d->scan.reading, r, link);
		if (scan_copies_for(d, r) < 0) {
			message_free(r);
			daemon_fail(d, "out of memory for a reschedule");
			return;
		}
		r->scan_counted = 1;
		d->scan.recording++;
		if (r->copies_pending == 0)
			daemon_dispatch(d, r);
		else
			TAILQ_INSERT_TAIL(&d->scan.copying, r, link);
	}
}

static void
scan_end(struct daemon *d)
{
	ev_timer_stop(d->loop, &d->scan.remark);
	if (d->scan.active)
		waiting_fold_free(&d->scan.fold);
	free(d->scan.want);
	d->scan.want = NULL;
	d->scan.active = 0;
	d->scan.copies = 0;
}

/*
 * P.events is read, and some of the messages named have no copy yet:
 * read P.copies to a new marker, from a little before the earliest of
 * them was first seen (its copy was written with its scheduled record).
 * A new tag, so that what the P.events consumer still has in flight is
 * acked unread.  An AMQP status.
 */
static int
scan_read_copies(struct daemon *d, int64_t seen)
{
	uint64_t n;
	int st;

	d->scan.copies = 1;
	if (!d->scan.copies_skipped)
		events_resume_init(&d->scan.copies_resume);
	d->scan.copies_skipped = 0;
	n = d->scan.serial;
	snprintf(d->scan.tag, sizeof(d->scan.tag), "%s.%" PRIu64 ".copies",
	         SCAN_TAG, n);
	st = daemon_consume_stream(
	    d, d->topo.copies, d->scan.tag, d->scan.copies_resume.from,
	    seen > EVENTS_COPY_LEAD_MS ? seen - EVENTS_COPY_LEAD_MS : 0);
	if (st == AMQP_STATUS_OK)
		st = scan_marker(d);
	if (st == AMQP_STATUS_OK)
		log_info("reschedule_reading", " stream=%s from=%" PRId64,
		         d->topo.copies, seen);
	return st;
}

/*
 * How many of the messages the requests read for name need a copy their
 * scheduled records do not carry (waiting_copyless), and the earliest
 * time one of those was first seen into *seen.
 */
static uint64_t
scan_copyless(struct daemon *d, int64_t *seen)
{
	int64_t now = duration_wall_ms(), first;
	struct message *r;
	uint64_t n = 0;

	TAILQ_FOREACH(r, &d->scan.reading, link) {
		amqp_bytes_t id, by;
		if (scan_request(r, &id, &by) < 0 ||
		    waiting_copyless(&d->scan.fold, id, r->route.request_due,
		                     now, by, config_control_user(d->cfg, by),
		                     d->cfg->events_copy_max_size, &first) == 0)
			continue;
		if (n++ == 0 || first < *seen)
			*seen = first;
	}
	return n;
}

/* The marker came back: stop reading, copy, and read again if asked. */
static void
scan_reached(struct daemon *d)
{
	amqp_basic_cancel_t c;
	int64_t seen = 0;
	int st;

	memset(&c, 0, sizeof(c));
	c.consumer_tag = amqp_cstring_bytes(d->scan.tag);
	st = amqp_send_method(d->conn, BROKER_CH_WORK, AMQP_BASIC_CANCEL_METHOD,
	                      &c);
	if (st == AMQP_STATUS_OK && !d->scan.copies &&
	    scan_copyless(d, &seen) > 0) {
		if ((st = scan_read_copies(d, seen)) == AMQP_STATUS_OK)
			return;
	}
	if (st != AMQP_STATUS_OK) {
		daemon_fail(d, amqp_error_string2(st));
		return;
	}
	scan_copies(d);
	scan_end(d);
	scan_start(d);
}

/* One record of P.events into the fold; 1 at our marker. */
static int
scan_record(struct daemon *d, const amqp_basic_properties_t *p)
{
	struct event e;

	if (events_parse(p, &e) < 0)
		return 0;
	if (e.kind == EVENT_MARKER)
		return headers_key_is(e.marker, d->scan.marker);
	/* In P.copies, the copies; in P.events, the rest. */
	if ((e.kind == EVENT_COPY) != (d->scan.copies != 0))
		return 0;
	return waiting_fold_event(&d->scan.fold, &e) < 0 ? -1 : 0;
}

void
daemon_scan_message(struct daemon *d, struct message *m)
{
	amqp_basic_properties_t p;
	size_t off = 0;
	int rc = 0, got;
	struct events_resume *resume;

	/* After the marker, or a former reading's: not wanted. */
	if (!d->scan.active || !m->scan_current) {
		daemon_ack(d, m);
		return;
	}
	(void)daemon_scan_stream(d, &resume);
	events_resume_read(resume, &m->props);
	if (!daemon_trusted(d, m, daemon_scan_metric(d))) {
		rc = 0;
	} else if (!events_is_batch(&m->props)) {
		rc = scan_record(d, &m->props);
	} else {
		while (rc == 0 && (got = events_batch_next(
		                       m->body, &off, &d->scratch, &p)) > 0)
			rc = scan_record(d, &p);
		recycle_amqp_pool(&d->scratch);
	}
	daemon_ack(d, m);
	if (rc < 0)
		daemon_fail(d, "out of memory reading the streams");
	else if (rc > 0)
		scan_reached(d);
}

/* Take id out of r's list of copies: its copy did not go out. */
static void
scan_unlist(struct message *r, amqp_bytes_t id)
{
	amqp_bytes_t each;
	char *out;
	size_t off = 0, len = 0;

	if (r->superseded.len == 0 || (out = malloc(r->superseded.len)) == NULL)
		return;
	while (events_superseded_next(r->superseded, &off, &each))
		if (!headers_bytes_eq(each, id))
			events_superseded_append(out, &len, each);
	r->superseded = len > 0 ? message_dup(r, (amqp_bytes_t){len, out})
	                        : amqp_empty_bytes;
	free(out);
}

void
daemon_scan_copied(struct daemon *d, struct message *m, int ok)
{
	struct message *r;

	TAILQ_FOREACH(r, &d->scan.copying, link)
		if (r->scan_serial == m->scan_serial)
			break;
	if (!ok) {
		/* Not superseded, then: the instance waiting takes the new
		 * time when it comes back. */
		log_warn("reschedule_copy_failed",
		         " id=\"%.*s\" action=%d returned=%d",
		         (int)m->route.id.len, (const char *)m->route.id.bytes,
		         (int)m->route.action, m->out.returned);
		if (r != NULL)
			scan_unlist(r, m->route.id);
	}
	message_free(m);
	if (r == NULL || --r->copies_pending > 0)
		return;
	TAILQ_REMOVE(&d->scan.copying, r, link);
	daemon_dispatch(d, r);
}

/*
 * Requests it copied for were acked (daemon_ack counts them in
 * scan.settled and starts this timer): the next reading may start.
 */
static void
on_settled(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = CONTAINER_OF(w, struct daemon, scan.settle);

	(void)loop;
	(void)revents;
	d->scan.recording -= d->scan.settled < d->scan.recording
	                         ? d->scan.settled
	                         : d->scan.recording;
	d->scan.settled = 0;
	scan_start(d);
}

static void
scan_drop_list(struct message_list *l)
{
	struct message *m;

	while ((m = TAILQ_FIRST(l)) != NULL) {
		TAILQ_REMOVE(l, m, link);
		message_free(m);
	}
}

void
daemon_scan_drop(struct daemon *d)
{
	scan_drop_list(&d->scan.queued);
	scan_drop_list(&d->scan.reading);
	scan_drop_list(&d->scan.copying);
	d->scan.recording = 0;
	d->scan.settled = 0;
	ev_timer_stop(d->loop, &d->scan.settle);
	scan_end(d);
}
