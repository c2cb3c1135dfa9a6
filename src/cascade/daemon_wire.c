/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Frames in.  The daemon reads frames itself from an ev_io watcher on the
 * socket (rabbitmq-c's consume call blocks), assembles deliveries and
 * returns from their method, header and body frames, and hands each
 * method to whoever it concerns.  The only file that knows frames; a
 * content header the wire filter refused (wirefilter.h) is settled here.
 *
 * Owns: assembling, the io, more and heartbeat watchers.
 * Calls into: daemon_sort (a message done), daemon_answer (confirms,
 * lookups answered, resumes), daemon_publish (acks, lookups sent),
 * daemon_replay and daemon_scan (whose consumer tags), daemon_consume
 * (ready), daemon_fail.
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <ev.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "duration.h"
#include "headers.h"
#include "log.h"
#include "wirefilter.h"

/*
 * Frames read per callback before the loop gets a turn: small enough that a
 * burst from the broker (a level expiring at once) cannot hold up the timers
 * of held messages for long, large enough to batch acks.
 */
#define FRAMES_PER_CALLBACK 64

static void
daemon_start_message(struct daemon *d, struct message *m)
{
	if (d->assembling != NULL) {
		daemon_fail(d, "new delivery before the last one was complete");
		message_free(m);
		return;
	}
	d->assembling = m;
}

/*
 * The broker closed the publish channel because of one publish (a name it
 * refuses, an internal exchange, a permission): park that message alone.
 * A parked copy that is refused in turn goes again without the publisher's
 * headers.  The exchange is remembered, so that the next messages for it
 * are parked without closing the channel again.
 */
void
daemon_blame(struct daemon *d, struct message *m, const amqp_channel_close_t *c,
             const char *why)
{
	struct route *r = &m->route;
	char reason[340];

	log_warn("publish_refused_by_broker",
	         " reason=\"%s\" exchange=\"%.*s\" routing_key=\"%.*s\"", why,
	         (int)m->out.exchange.len, (const char *)m->out.exchange.bytes,
	         (int)m->out.routing_key.len,
	         (const char *)m->out.routing_key.bytes);
	if (r->action == ROUTE_DELIVER && r->exchange.len > 0 &&
	    (c->reply_code == AMQP_ACCESS_REFUSED ||
	     c->reply_code == AMQP_NOT_FOUND))
		xcheck_add(&d->xc, r->exchange, why, duration_mono_ms());
	snprintf(reason, sizeof(reason), "the broker refused the publish: %s",
	         why);
	daemon_unpublishable(d, m, PARK_broker_refused, reason);
}

/*
 * The publish channel was closed by the broker.  Unconfirmed publishes
 * lost their confirms with it and go again (at least once).  When a
 * publish caused it, the culprit is the only one in flight, or else they
 * are tried one at a time until it closes the channel alone.
 */
static void
daemon_pub_closed(struct daemon *d, const amqp_channel_close_t *c,
                  const char *why)
{
	amqp_channel_close_ok_t ok = {0};
	amqp_channel_open_t open = {amqp_empty_bytes};
	struct outbox_item *culprit;
	enum outbox_close what;
	char msg[340];

	what = outbox_closed(&d->out,
	                     c->class_id == AMQP_BASIC_CLASS &&
	                         c->method_id ==
	                             (AMQP_BASIC_PUBLISH_METHOD & 0xffff),
	                     &culprit);
	if (what == OUTBOX_CLOSE_FAIL) {
		snprintf(msg, sizeof(msg),
		         "publish channel closed by broker: %s", why);
		daemon_fail(d, msg);
		return;
	}
	if (amqp_send_method(d->conn, BROKER_CH_PUB,
	                     AMQP_CHANNEL_CLOSE_OK_METHOD,
	                     &ok) != AMQP_STATUS_OK ||
	    amqp_send_method(d->conn, BROKER_CH_PUB, AMQP_CHANNEL_OPEN_METHOD,
	                     &open) != AMQP_STATUS_OK) {
		if (culprit != NULL)
			message_free(MESSAGE_OF(culprit));
		daemon_fail(d, "cannot reopen the publish channel");
		return;
	}
	if (culprit != NULL) {
		daemon_blame(d, MESSAGE_OF(culprit), c, why);
		return;
	}
	log_warn("publish_channel_closed", " reason=\"%s\" suspects=%u", why,
	         outbox_count(&d->out.suspects));
}

/* The broker closed a queue's first-publish channel. */
static void
daemon_gate_closed(struct daemon *d, amqp_channel_t ch,
                   const amqp_channel_close_t *c, const char *why)
{
	struct gate_slot *s = &d->gate[ch - BROKER_CH_GATE];
	amqp_channel_close_ok_t ok = {0};
	struct outbox_item *probe;

	if (amqp_send_method(d->conn, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) !=
	    AMQP_STATUS_OK) {
		daemon_fail(d, "cannot close a queue's first-publish channel");
		return;
	}
	probe = gate_closed(s);
	/* The publish closed it: that message alone is refused, as on the
	 * publish channel (daemon_blame); the others go again. */
	if (probe != NULL)
		daemon_blame(d, MESSAGE_OF(probe), c, why);
	daemon_gate_release(d, s, 0);
	daemon_gate_open_next(d);
}

static void
daemon_channel_close(struct daemon *d, amqp_channel_t ch,
                     const amqp_channel_close_t *c)
{
	amqp_channel_close_ok_t ok = {0};
	amqp_channel_open_t open = {amqp_empty_bytes};
	char why[300];

	snprintf(why, sizeof(why), "%u %.*s", c->reply_code,
	         (int)c->reply_text.len, (const char *)c->reply_text.bytes);
	if (ch == BROKER_CH_PUB) {
		daemon_pub_closed(d, c, why);
		return;
	}
	if (ch == BROKER_CH_PROBE) {
		daemon_hold_probe_closed(d, c);
		return;
	}
	if (DAEMON_GATE_CHANNEL(d, ch)) {
		daemon_gate_closed(d, ch, c, why);
		return;
	}
	if (ch != BROKER_CH_CHECK) {
		char msg[340];
		snprintf(msg, sizeof(msg), "channel %u closed by broker: %s",
		         ch, why);
		daemon_fail(d, msg);
		return;
	}
	d->check_open = 0;
	if (amqp_send_method(d->conn, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) !=
	        AMQP_STATUS_OK ||
	    amqp_send_method(d->conn, ch, AMQP_CHANNEL_OPEN_METHOD, &open) !=
	        AMQP_STATUS_OK) {
		daemon_fail(d, "cannot reopen the check channel");
		return;
	}
	if (c->reply_code == AMQP_NOT_FOUND)
		daemon_lookup_done(d, 0, "does not exist");
	else
		daemon_lookup_done(d, 0, why);
	/* Declares sent after the failed one were dropped by the broker. */
	xcheck_unsend(&d->xc);
}

static void
daemon_method(struct daemon *d, amqp_frame_t *f)
{
	amqp_channel_t ch = f->channel;
	void *dec = f->payload.method.decoded;
	struct xcheck_lookup *lk;
	struct message *m;

	switch (f->payload.method.id) {
	case AMQP_BASIC_DELIVER_METHOD: {
		amqp_basic_deliver_t *dv = dec;
		if ((m = message_new()) == NULL) {
			daemon_fail(d, "out of memory");
			return;
		}
		m->delivery_tag = dv->delivery_tag;
		if (acks_push(&d->acks, dv->delivery_tag, &m->ack_index) < 0) {
			message_free(m);
			daemon_fail(d, "out of memory for acks");
			return;
		}
		m->src = ROUTE_FROM_INGRESS;
		m->consumer = 0; /* ingress */
		m->stream = daemon_stream_of_tag(d, dv->consumer_tag);
		if (m->stream)
			m->kind = MESSAGE_RECORD;
		else if (daemon_scan_tag(d, dv->consumer_tag, &m->scan_current))
			m->kind = MESSAGE_READING;
		for (unsigned i = 0; i < d->nconsumers; i++) {
			const struct consumer *c = &d->consumers[i];
			if (!headers_key_is(dv->consumer_tag, c->tag))
				continue;
			m->src = c->src;
			m->consumer = i;
			break;
		}
		m->exchange = message_dup(m, dv->exchange);
		m->routing_key = message_dup(m, dv->routing_key);
		m->redelivered = dv->redelivered;
		m->discard = d->stopping;
		daemon_start_message(d, m);
		return;
	}
	case AMQP_BASIC_RETURN_METHOD: {
		amqp_basic_return_t *rt = dec;
		if ((m = message_new()) == NULL) {
			daemon_fail(d, "out of memory");
			return;
		}
		m->kind = MESSAGE_RETURN;
		m->exchange = message_dup(m, rt->exchange);
		m->routing_key = message_dup(m, rt->routing_key);
		snprintf(m->return_text, sizeof(m->return_text), "%u %.*s",
		         rt->reply_code, (int)rt->reply_text.len,
		         (const char *)rt->reply_text.bytes);
		daemon_start_message(d, m);
		return;
	}
	case AMQP_BASIC_ACK_METHOD: {
		amqp_basic_ack_t *a = dec;
		if (ch == BROKER_CH_PUB)
			daemon_confirm(d, a->delivery_tag, a->multiple, 0);
		else if (DAEMON_GATE_CHANNEL(d, ch))
			daemon_gate_confirm(d, ch, a->delivery_tag, a->multiple,
			                    0);
		return;
	}
	case AMQP_BASIC_NACK_METHOD: {
		amqp_basic_nack_t *n = dec;
		if (ch == BROKER_CH_PUB)
			daemon_confirm(d, n->delivery_tag, n->multiple, 1);
		else if (DAEMON_GATE_CHANNEL(d, ch))
			daemon_gate_confirm(d, ch, n->delivery_tag, n->multiple,
			                    1);
		return;
	}
	case AMQP_BASIC_CONSUME_OK_METHOD: {
		amqp_basic_consume_ok_t *ok = dec;
		/* The queues' consumers, all registered (not the streams'). */
		if (ch == BROKER_CH_WORK &&
		    !daemon_stream_of_tag(d, ok->consumer_tag) &&
		    !daemon_scan_tag(d, ok->consumer_tag, NULL) &&
		    d->consume_oks > 0 && --d->consume_oks == 0)
			daemon_ready(d);
		return;
	}
	case AMQP_CONFIRM_SELECT_OK_METHOD:
		if (ch == BROKER_CH_PUB) {
			outbox_open(&d->out);
			daemon_pub_kick(d);
		} else if (DAEMON_GATE_CHANNEL(d, ch)) {
			daemon_gate_selected(d, ch);
		}
		return;
	case AMQP_BASIC_CANCEL_METHOD: {
		/* The broker cancelled a consumer (we announce
		 * consumer_cancel_notify): its queue was deleted, a quorum
		 * queue lost its leader, or (RabbitMQ 4.3) a delivery was
		 * held past the consumer timeout.  Start over: reconnecting
		 * declares the queues again and consumes them all; nothing
		 * is lost, for the consumed queues have no delivery limit. */
		amqp_basic_cancel_t *c = dec;
		char why[320];
		snprintf(why, sizeof(why),
		         "consumer %.*s cancelled by the broker",
		         (int)c->consumer_tag.len,
		         (const char *)c->consumer_tag.bytes);
		daemon_fail(d, why);
		return;
	}
	case AMQP_EXCHANGE_DECLARE_OK_METHOD:
		if (ch == BROKER_CH_CHECK)
			daemon_lookup_done(d, 1, NULL);
		return;
	case AMQP_QUEUE_DECLARE_OK_METHOD:
		if (ch == BROKER_CH_PROBE)
			daemon_hold_probe_found(d);
		return;
	case AMQP_CHANNEL_OPEN_OK_METHOD:
		if (ch == BROKER_CH_PROBE) {
			daemon_hold_probe_opened(d);
		} else if (DAEMON_GATE_CHANNEL(d, ch)) {
			daemon_gate_opened(d, ch);
		} else if (ch == BROKER_CH_CHECK) {
			d->check_open = 1;
			while (!d->broken &&
			       (lk = xcheck_unsent(&d->xc)) != NULL)
				daemon_lookup_send(d, lk);
		} else if (ch == BROKER_CH_PUB) {
			amqp_confirm_select_t sel = {0};
			if (amqp_send_method(d->conn, ch,
			                     AMQP_CONFIRM_SELECT_METHOD,
			                     &sel) != AMQP_STATUS_OK)
				daemon_fail(d, "cannot select confirms");
		}
		return;
	case AMQP_CHANNEL_CLOSE_METHOD:
		daemon_channel_close(d, ch, dec);
		return;
	case AMQP_CHANNEL_CLOSE_OK_METHOD:
		if (DAEMON_GATE_CHANNEL(d, ch))
			daemon_gate_close_ok(d, ch);
		return;
	case AMQP_CONNECTION_CLOSE_METHOD: {
		amqp_connection_close_t *c = dec;
		amqp_connection_close_ok_t ok = {0};
		char why[300];
		amqp_send_method(d->conn, 0, AMQP_CONNECTION_CLOSE_OK_METHOD,
		                 &ok);
		snprintf(why, sizeof(why),
		         "connection closed by broker: %u %.*s", c->reply_code,
		         (int)c->reply_text.len,
		         (const char *)c->reply_text.bytes);
		daemon_gate_conn_closed(d, c->reply_code);
		daemon_fail(d, why);
		return;
	}
	case AMQP_CONNECTION_BLOCKED_METHOD: {
		amqp_connection_blocked_t *b = dec;
		log_warn("connection_blocked", " reason=\"%.*s\"",
		         (int)b->reason.len, (const char *)b->reason.bytes);
		d->out.blocked = 1;
		return;
	}
	case AMQP_CONNECTION_UNBLOCKED_METHOD:
		log_info("connection_unblocked", "%s", "");
		d->out.blocked = 0;
		daemon_retry_arm(d);
		daemon_gate_unblocked(d);
		daemon_resume(d);
		daemon_pub_kick(d);
		return;
	default:
		log_debug("method_ignored", " id=0x%08x channel=%u",
		          f->payload.method.id, ch);
		return;
	}
}

/*
 * A message whose content header the wire filter refused (wirefilter.h):
 * what it held cannot be read, so it cannot be routed or parked by a
 * publish of ours.  A delivery from a queue is rejected without requeue,
 * and the broker dead-letters it, whole, as it came, into P.error; a
 * stream's message is read past as one that is not a record.  Either way
 * the connection and every other delivery go on.  Its routing key is
 * logged as the other parked lines log it: the log escapes what its
 * arguments hold (log.h).
 */
static void
daemon_refused(struct daemon *d, struct message *m)
{
	amqp_bytes_t why = {0, NULL};
	int wl;

	wirefilter_refused(&m->props, &why);
	wl = (int)why.len;
	if (m->kind == MESSAGE_RECORD || m->kind == MESSAGE_READING) {
		struct stream_reading *s = m->kind == MESSAGE_RECORD
		                               ? &d->streams[m->stream - 1]
		                               : NULL;
		d->m.undecodable[s ? s->metric : daemon_scan_metric(d)]++;
		log_error("record_undecodable",
		          " stream=%s reason=\"%.*s; read on past it\"",
		          s ? s->name : daemon_scan_stream(d, NULL), wl,
		          (const char *)why.bytes);
		daemon_message_done(d, m); /* not a record: acked, skipped */
		return;
	}
	if (m->discard) {
		message_free(m); /* another consumer gets it */
		return;
	}
	if (m->src >= ROUTE_SOURCES || !d->reject_parks[m->src]) {
		/* Its queue was declared by an older cascade without a
		 * dead-letter exchange: a reject would drop it.  It stays
		 * unacknowledged, in the queue, until the connection ends. */
		log_error("undecodable_kept",
		          " queue=%s reason=\"%.*s; the queue does not "
		          "dead-letter into %s: left unacknowledged\" "
		          "routing_key=\"%.*s\"",
		          d->consumers[m->consumer].queue, wl,
		          (const char *)why.bytes, d->topo.error,
		          (int)m->routing_key.len,
		          (const char *)m->routing_key.bytes);
		message_free(m);
		return;
	}
	if (amqp_basic_reject(d->conn, BROKER_CH_WORK, m->delivery_tag, 0) !=
	    AMQP_STATUS_OK) {
		message_free(m);
		daemon_fail(d, "cannot reject an undecodable message");
		return;
	}
	acks_rejected(&d->acks, m->ack_index);
	d->m.parked[PARK_undecodable]++;
	log_error("parked",
	          " queue=%s reason=\"%.*s; rejected, the broker dead-letters "
	          "it whole\" source=%s routing_key=\"%.*s\"",
	          d->topo.error, wl, (const char *)why.bytes,
	          d->consumers[m->consumer].queue, (int)m->routing_key.len,
	          (const char *)m->routing_key.bytes);
	message_free(m);
}

/* A delivery or return whole: to whoever takes it. */
static void
daemon_done(struct daemon *d, struct message *m)
{
	d->assembling = NULL;
	if (m->refused && m->kind != MESSAGE_RETURN)
		daemon_refused(d, m);
	else
		daemon_message_done(d, m);
}

static void
daemon_frame(struct daemon *d, amqp_frame_t *f)
{
	struct message *m = d->assembling;

	switch (f->frame_type) {
	case AMQP_FRAME_METHOD:
		daemon_method(d, f);
		return;
	case AMQP_FRAME_HEADER:
		if (m == NULL || m->have_header) {
			daemon_fail(d, "content header without a delivery");
			return;
		}
		m->have_header = 1;
		if (message_set_props(m, f->payload.properties.decoded) < 0) {
			daemon_fail(d, "out of memory copying properties");
			return;
		}
		if (message_body(m, f->payload.properties.body_size) < 0) {
			daemon_fail(d, "out of memory for a message body");
			return;
		}
		m->refused = wirefilter_refused(&m->props, &(amqp_bytes_t){0});
		if (m->body.len == 0)
			daemon_done(d, m);
		return;
	case AMQP_FRAME_BODY: {
		int done = m == NULL || !m->have_header
		               ? -1
		               : message_append(m, f->payload.body_fragment);
		if (done < 0) {
			daemon_fail(d, "unexpected body frame");
		} else if (done) {
			daemon_done(d, m);
		}
		return;
	}
	default:
		return; /* heartbeats: rabbitmq-c already noted them */
	}
}

/*
 * rabbitmq-c could not decode a frame (0.14 and later refuse headers nested
 * more than 100 deep, which RabbitMQ accepts): the connection is lost, and
 * the broker would hand the same message back first every time.  When the
 * frame was the content header of a delivery seen before (redelivered), and
 * its queue dead-letters into P.error, reject it there before going.
 */
static void
daemon_undecodable(struct daemon *d, int st)
{
	struct message *m = d->assembling;

	/* In a stream nothing can be rejected: read on past it next time
	 * (events.h), or every connection would end on it. */
	if (st == AMQP_STATUS_BAD_AMQP_DATA && m != NULL && !m->have_header &&
	    (m->kind == MESSAGE_RECORD || m->kind == MESSAGE_READING)) {
		struct stream_reading *s = m->kind == MESSAGE_RECORD
		                               ? &d->streams[m->stream - 1]
		                               : NULL;
		struct events_resume *scan;
		const char *name = daemon_scan_stream(d, &scan);
		int64_t from;
		/* A former reading's (of the other stream, maybe): nothing
		 * to read past, the next reading starts afresh. */
		if (s == NULL && (!m->scan_current || !d->scan.active))
			return;
		from = events_resume_skip(s ? &s->resume : scan);
		if (s == NULL && d->scan.copies)
			d->scan.copies_skipped = 1;
		d->m.undecodable[s ? s->metric : daemon_scan_metric(d)]++;
		log_error("record_undecodable",
		          " stream=%s next_offset=%" PRId64
		          " reason=\"a stream message this AMQP library "
		          "cannot decode (headers nested over 100 deep?): read "
		          "on past it\"",
		          s ? s->name : name, from);
		return;
	}
	if (st != AMQP_STATUS_BAD_AMQP_DATA || m == NULL ||
	    m->kind == MESSAGE_RETURN || m->have_header || !m->redelivered ||
	    m->src >= ROUTE_SOURCES || !d->reject_parks[m->src])
		return;
	if (amqp_basic_reject(d->conn, BROKER_CH_WORK, m->delivery_tag, 0) !=
	    AMQP_STATUS_OK)
		return;
	d->m.parked[PARK_undecodable]++;
	log_error("parked",
	          " queue=%s reason=\"its headers cannot be decoded by this "
	          "AMQP library; rejected, the broker dead-letters it\" "
	          "source=%s routing_key=\"%.*s\"",
	          d->topo.error, d->consumers[m->consumer].queue,
	          (int)m->routing_key.len, (const char *)m->routing_key.bytes);
}

/* Read and handle frames until the socket and rabbitmq-c's buffer are dry. */
void
daemon_drain(struct daemon *d)
{
	struct timeval zero = {0, 0};
	amqp_frame_t f;
	int st, n;

	for (n = 0; n < FRAMES_PER_CALLBACK && !d->broken; n++) {
		st = amqp_simple_wait_frame_noblock(d->conn, &f, &zero);
		if (st == AMQP_STATUS_TIMEOUT)
			break;
		if (st != AMQP_STATUS_OK) {
			daemon_undecodable(d, st);
			daemon_fail(d, amqp_error_string2(st));
			break;
		}
		daemon_frame(d, &f);
		if (!d->broken && !amqp_frames_enqueued(d->conn) &&
		    !amqp_data_in_buffer(d->conn))
			amqp_maybe_release_buffers(d->conn);
	}
	daemon_flush_acks(d);
	if (d->broken)
		return;
	/* The socket may be dry while rabbitmq-c still holds bytes: ev_io
	 * would not wake us for those. */
	if (amqp_frames_enqueued(d->conn) || amqp_data_in_buffer(d->conn) ||
	    wirefilter_pending(d->conn) > 0)
		ev_idle_start(d->loop, &d->more);
	else
		ev_idle_stop(d->loop, &d->more);
	if (d->stopping && outbox_settled(&d->out) && daemon_gate_settled(d) &&
	    TAILQ_EMPTY(&d->xc.lookups)) {
		log_info("stopped", " reason=\"all confirms received\"%s", "");
		ev_break(d->loop, EVBREAK_ALL);
	}
}

static void
on_io(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	daemon_drain(DAEMON_OF(w, io));
}

static void
on_more(struct ev_loop *loop, ev_idle *w, int revents)
{
	(void)loop;
	(void)revents;
	daemon_drain(DAEMON_OF(w, more));
}

/* rabbitmq-c sends and checks heartbeats only inside its wait calls. */
static void
on_heartbeat(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	daemon_drain(DAEMON_OF(w, heartbeat));
}

void
daemon_wire_init(struct daemon *d)
{
	ev_init(&d->io, on_io);
	ev_idle_init(&d->more, on_more);
	ev_init(&d->heartbeat, on_heartbeat);
}
