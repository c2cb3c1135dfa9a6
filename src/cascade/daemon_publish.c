/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Publishing, and what comes back of it.  Every hop, delivery, park and
 * cancellation record goes out here on BROKER_CH_PUB with confirms and
 * mandatory set (outbox.h); a confirm acks the delivery it came from
 * (acks.h), a nack or a return retries or parks it (plan.h), and a named
 * target exchange is looked up first on BROKER_CH_CHECK (xcheck.h).
 *
 * Owns: out, xc, targets, plan, acks, scratch, the retry timer.
 * Calls into: daemon_outgoing (records, envelopes, the signature),
 * daemon_fail.  What comes back of a publish is daemon_answer's.
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <ev.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>

#include "broker.h"
#include "duration.h"
#include "headers.h"
#include "log.h"

double
daemon_random_unit(void)
{
	return (double)rand() / ((double)RAND_MAX + 1.0);
}

/* m's properties as published: a route's, or a cancellation record's. */
static int
daemon_props(struct daemon *d, const struct message *m,
             amqp_basic_properties_t *props)
{
	struct event e;

	if (m->route.action == ROUTE_CLAIM || m->route.action == ROUTE_SERIES) {
		if ((m->route.action == ROUTE_CLAIM
		         ? daemon_claim_event(d, m, &e)
		         : daemon_series_event(d, m, &e)) < 0)
			return -1;
		return events_props(&e, &d->scratch, props);
	}
	if (m->route.action == ROUTE_REQUEST)
		return daemon_scan_props(d, m, props);
	if (m->route.action != ROUTE_RECORD)
		return router_props(&m->props, &m->route, &d->scratch, props);
	if (daemon_request_event(d, m, &e) < 0)
		return -1;
	return events_props(&e, &d->scratch, props);
}

/*
 * Acks, parking, retries
 */

/* Settled: acked with the next flush, batched with its neighbours. */
void
daemon_ack(struct daemon *d, struct message *m)
{
	if (m->kind == MESSAGE_MADE || m->kind == MESSAGE_COPY)
		; /* nothing was delivered: nothing to settle */
	else if (m->kind == MESSAGE_HELD)
		amqp1_accept(d->a1, m->dv);
	else if (!d->broken && acks_settle(&d->acks, m->ack_index) < 0)
		daemon_fail(d, "out of memory for acks");
	/* One of the requests a reading waits for is settled: the scan
	 * takes it from here (daemon_scan.c, on_settled). */
	if (m->scan_counted) {
		d->scan.settled++;
		ev_timer_set(&d->scan.settle, 0., 0.);
		ev_timer_start(d->loop, &d->scan.settle);
	}
	message_free(m);
}

static int
ack_send(void *ctx, uint64_t tag, int multiple)
{
	struct daemon *d = ctx;

	return amqp_basic_ack(d->conn, BROKER_CH_WORK, tag, multiple);
}

void
daemon_flush_acks(struct daemon *d)
{
	int st;

	if (d->broken || d->conn == NULL)
		return;
	st = acks_flush(&d->acks, ack_send, d);
	if (st != 0)
		daemon_fail(d, amqp_error_string2(st));
}

void
daemon_park(struct daemon *d, struct message *m, enum park_kind kind,
            const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	router_vpark(&m->route, kind, fmt, ap);
	va_end(ap);
	daemon_publish(d, m);
}

void
daemon_log_park(const struct daemon *d, const struct message *m)
{
	/* Its target's key, once read: back from the ladder, the key it
	 * came with is the return queue's; before, the one published. */
	amqp_bytes_t key = m->route.routing_key.bytes != NULL
	                       ? m->route.routing_key
	                       : m->routing_key;

	log_warn(
	    "parked", " queue=%s reason=\"%s\" source=%s routing_key=\"%.*s\"",
	    d->topo.error, m->route.reason, d->consumers[m->consumer].queue,
	    (int)key.len, (const char *)key.bytes);
}

void
daemon_retry_arm(struct daemon *d)
{
	int64_t first = outbox_retry_next(&d->out), now = duration_mono_ms();

	ev_timer_stop(d->loop, &d->retry_timer);
	/* When blocked, connection.unblocked arms it again. */
	if (d->out.blocked || first == INT64_MAX)
		return;
	ev_timer_set(&d->retry_timer,
	             first > now ? (double)(first - now) / 1000.0 : 0., 0.);
	ev_timer_start(d->loop, &d->retry_timer);
}

/* A publish was refused: log it, one line a second at most. */
void
daemon_log_refused(struct daemon *d, const struct message *m, const char *why,
                   int64_t wait_ms)
{
	int64_t now = duration_mono_ms();

	/* A full queue refuses many publishes at once: one line a second. */
	d->refused++;
	if (now - d->refused_logged_at < 1000)
		return;
	log_warn("publish_refused",
	         " reason=\"%s\" exchange=\"%.*s\" routing_key=\"%.*s\" "
	         "count=%u backoff_ms=%" PRId64,
	         why, (int)m->out.exchange.len,
	         (const char *)m->out.exchange.bytes,
	         (int)m->out.routing_key.len,
	         (const char *)m->out.routing_key.bytes, d->refused, wait_ms);
	d->refused = 0;
	d->refused_logged_at = now;
}

/*
 * Publish m again later, from memory: a parked copy the error queue
 * refused, a hop when every level it could take refuses, or a hop refused
 * by a missing queue.  Holds a prefetch slot meanwhile.
 */
void
daemon_retry_later(struct daemon *d, struct message *m, const char *why)
{
	int64_t wait = outbox_retry_later(&d->out, &m->out, duration_mono_ms(),
	                                  daemon_random_unit());

	daemon_log_refused(d, m, why, wait);
	daemon_retry_arm(d);
}

struct return_match {
	struct daemon *d;
	const struct message *r; /* the basic.return */
};

/* Was it published with the returned message's body and headers? */
static int
return_same(const struct outbox_item *it, void *ctx)
{
	const struct return_match *rm = ctx;
	const struct message *m = MESSAGE_OF(it), *r = rm->r;
	amqp_bytes_t body = m->route.action == ROUTE_RECORD ||
	                            m->route.action == ROUTE_CLAIM ||
	                            m->route.action == ROUTE_SERIES
	                        ? amqp_empty_bytes
	                        : m->body;
	amqp_basic_properties_t props;
	int same;

	/* Into a holding queue: the envelope, and no headers outside it;
	 * into P.requests, the envelope too. */
	if (m->route.action == ROUTE_WAIT || m->route.action == ROUTE_REQUEST)
		return headers_bytes_eq(m->envelope, r->body);
	if (!headers_bytes_eq(body, r->body))
		return 0;
	if (daemon_props(rm->d, m, &props) < 0)
		return 0;
	same = headers_equal(
	    (props._flags & AMQP_BASIC_HEADERS_FLAG) ? &props.headers : NULL,
	    (r->props._flags & AMQP_BASIC_HEADERS_FLAG) ? &r->props.headers
	                                                : NULL);
	recycle_amqp_pool(&rm->d->scratch);
	return same;
}

/* A basic.return: mark the publish it names (see outbox.h). */
void
daemon_match_return(struct daemon *d, const struct message *r)
{
	struct return_match rm = {d, r};

	if (outbox_returned(&d->out, r->exchange, r->routing_key,
	                    r->return_text, return_same, &rm) != NULL ||
	    daemon_gate_returned(d, r))
		return;
	log_warn("return_unmatched", " exchange=\"%.*s\" routing_key=\"%.*s\"",
	         (int)r->exchange.len, (const char *)r->exchange.bytes,
	         (int)r->routing_key.len, (const char *)r->routing_key.bytes);
}

/*
 * Publishing
 */

/*
 * Not even m's parked copy, stripped of the publisher's headers, could be
 * published.  Keep it unacked and say so: it goes back to its queue when
 * the connection ends, and the redelivery guard parks it if it can.
 */
static void
daemon_stuck(struct daemon *d, struct message *m, const char *why)
{
	log_error("unpublishable",
	          " reason=\"%s\" source=%s routing_key=\"%.*s\"", why,
	          d->consumers[m->consumer].queue, (int)m->routing_key.len,
	          (const char *)m->routing_key.bytes);
	outbox_stuck(&d->out, &m->out);
}

/*
 * m cannot be published as it is (too large, or refused by the broker):
 * park it with the reason; a parked copy goes again without the
 * publisher's headers; if even that fails, m is stuck.
 */
void
daemon_unpublishable(struct daemon *d, struct message *m, enum park_kind kind,
                     const char *reason)
{
	struct route *r = &m->route;

	if (r->action != ROUTE_PARK) {
		daemon_park(d, m, kind, "%s", reason);
	} else if (!r->strip_headers) {
		r->strip_headers = 1;
		daemon_publish(d, m);
	} else {
		daemon_stuck(d, m, reason);
	}
}

int64_t
daemon_overdue_of(const struct message *m, int64_t now)
{
	const struct route *r = &m->route;

	if (!m->routed || r->fresh || r->due <= 0 || r->due >= now)
		return 0;
	if (r->action != ROUTE_HOP && r->action != ROUTE_WAIT &&
	    r->action != ROUTE_HOLD && r->action != ROUTE_DELIVER &&
	    r->action != ROUTE_RETURN)
		return 0;
	return now - r->due;
}

/* The window: OVERDUE_SLOT_MS slots of the monotonic clock, this one and
 * the one before. */
static void
overdue_roll(struct daemon *d)
{
	int64_t slot = duration_mono_ms() / OVERDUE_SLOT_MS;

	if (slot == d->overdue_slot)
		return;
	d->overdue_max[1] = slot == d->overdue_slot + 1 ? d->overdue_max[0] : 0;
	d->overdue_max[0] = 0;
	d->overdue_slot = slot;
}

void
daemon_note_overdue(struct daemon *d, int64_t late)
{
	overdue_roll(d);
	if (late > d->overdue_max[0])
		d->overdue_max[0] = late;
}

int64_t
daemon_overdue_recent(struct daemon *d)
{
	overdue_roll(d);
	return d->overdue_max[0] > d->overdue_max[1] ? d->overdue_max[0]
	                                             : d->overdue_max[1];
}

void
daemon_publish(struct daemon *d, struct message *m)
{
	amqp_basic_properties_t props;
	amqp_bytes_t exchange, routing_key, body;
	struct route *r = &m->route;
	amqp_channel_t ch = BROKER_CH_PUB;
	size_t size;
	int st;

	if (d->broken) {
		message_free(m);
		return;
	}
	/* A blocked connection stops reading: a publish could hang us. */
	if (d->out.blocked) {
		outbox_pause(&d->out, &m->out);
		return;
	}
	/* The publish channel reopens, or suspects are tried one by one. */
	if (!outbox_may_send(&d->out, &m->out)) {
		outbox_queue(&d->out, &m->out);
		return;
	}
	/* Late on its way: a refused delivery goes round the ladder
	 * overdue, and is seen only as it passes through. */
	daemon_note_overdue(d, daemon_overdue_of(m, duration_wall_ms()));
	switch (r->action) {
	case ROUTE_HOP:
		exchange = amqp_empty_bytes;
		routing_key = amqp_cstring_bytes(
		    topology_delay(&d->topo, r->shard, (unsigned)r->level));
		break;
	case ROUTE_WAIT:
		exchange = amqp_empty_bytes;
		routing_key = amqp_cstring_bytes(d->topo.hold[r->shard]);
		break;
	case ROUTE_DELIVER:
		exchange = r->exchange;
		routing_key = r->routing_key;
		break;
	case ROUTE_RETURN:
		exchange = amqp_empty_bytes;
		routing_key = amqp_cstring_bytes(d->topo.ret[r->shard]);
		break;
	case ROUTE_REQUEST:
		exchange = amqp_empty_bytes;
		routing_key = amqp_cstring_bytes(d->topo.requests);
		break;
	case ROUTE_RECORD:
	case ROUTE_CLAIM:
		exchange = amqp_empty_bytes;
		routing_key = amqp_cstring_bytes(d->topo.cancels);
		break;
	case ROUTE_SERIES:
		exchange = amqp_empty_bytes;
		routing_key = amqp_cstring_bytes(d->topo.series);
		break;
	case ROUTE_PARK:
	default:
		exchange = amqp_empty_bytes;
		routing_key = amqp_cstring_bytes(d->topo.error);
		break;
	}
	/* A delay level's or holding queue's first publish since
	 * connecting goes alone, on its own channel (daemon_int.h). */
	if (daemon_gate_take(d, m, &ch))
		return;
	if (daemon_props(d, m, &props) < 0) {
		recycle_amqp_pool(&d->scratch);
		daemon_fail(d, "out of memory building properties");
		message_free(m);
		return;
	}
	if (r->action == ROUTE_HOP || r->action == ROUTE_RETURN ||
	    r->action == ROUTE_PARK)
		daemon_sign(d, &props);
	/* A content header that does not fit in one frame would break the
	 * connection half-way through the publish: check first. */
	size = headers_props_size(&props) + HEADERS_FRAME_OVERHEAD;
	if (size > (size_t)d->frame_max) {
		char why[160];
		recycle_amqp_pool(&d->scratch);
		snprintf(why, sizeof(why),
		         "properties too large: %zu bytes with cascade's "
		         "headers, one frame holds %d (frame_max)",
		         size, d->frame_max);
		daemon_unpublishable(d, m, PARK_too_large, why);
		return;
	}
	body = r->action == ROUTE_RECORD || r->action == ROUTE_CLAIM ||
	               r->action == ROUTE_SERIES
	           ? amqp_empty_bytes
	           : m->body;
	/* A request's record has no body, whatever the publisher sent; a
	 * wait goes inside an envelope (daemon_hold.c). */
	if (r->action == ROUTE_WAIT) {
		amqp_basic_properties_t inner = props;
		if (daemon_wrap(d, m, &inner, &props, &body) < 0) {
			recycle_amqp_pool(&d->scratch);
			daemon_fail(d, "out of memory building an envelope");
			message_free(m);
			return;
		}
	}
	/* The body is ignored (docs/CONTRACT.md 7.5): not kept. */
	if (r->action == ROUTE_REQUEST &&
	    (st = daemon_enclose(d, m, &m->props, amqp_empty_bytes, &body)) <
	        0) {
		recycle_amqp_pool(&d->scratch);
		if (st == -2) {
			daemon_unpublishable(d, m, PARK_bad_header,
			                     "its properties do not encode "
			                     "into an envelope");
			return;
		}
		daemon_fail(d, "out of memory building an envelope");
		message_free(m);
		return;
	}
	st = broker_publish(d->conn, ch, d->frame_max, exchange, routing_key, 1,
	                    &props, body);
	recycle_amqp_pool(&d->scratch);
	if (st != AMQP_STATUS_OK) {
		daemon_fail(d, amqp_error_string2(st));
		message_free(m);
		return;
	}
	m->published_at = duration_wall_ms();
	d->m.published++;
	if (ch != BROKER_CH_PUB)
		daemon_gate_sent(d, m, ch, exchange, routing_key);
	else
		outbox_sent(&d->out, &m->out, exchange, routing_key);
}

/*
 * Target exchanges: a passive declare on the check channel (xcheck.h).
 * The default exchange always exists.
 */

void
daemon_lookup_send(struct daemon *d, struct xcheck_lookup *lk)
{
	amqp_exchange_declare_t decl;
	int st;

	if (!d->check_open || d->broken || lk->sent)
		return;
	memset(&decl, 0, sizeof(decl));
	decl.exchange.bytes = lk->name;
	decl.exchange.len = lk->len;
	decl.type = amqp_cstring_bytes("");
	decl.passive = 1;
	decl.arguments = amqp_empty_table;
	st = amqp_send_method(d->conn, BROKER_CH_CHECK,
	                      AMQP_EXCHANGE_DECLARE_METHOD, &decl);
	if (st != AMQP_STATUS_OK) {
		daemon_fail(d, amqp_error_string2(st));
		return;
	}
	lk->sent = 1;
}

void
daemon_wait_exchange(struct daemon *d, struct message *m)
{
	struct xcheck_lookup *lk;
	int oom;

	lk = xcheck_wait(&d->xc, m->route.exchange, &m->out, &oom);
	if (oom) {
		daemon_fail(d, "out of memory");
		message_free(m);
		return;
	}
	if (lk != NULL)
		daemon_lookup_send(d, lk);
}
