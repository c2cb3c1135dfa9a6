/*
 * Publishing, and what comes back of it.  Every hop, delivery, park and
 * cancellation record goes out here on BROKER_CH_PUB with confirms and
 * mandatory set (outbox.h); a confirm acks the delivery it came from
 * (acks.h), a nack or a return retries or parks it (plan.h), and a named
 * target exchange is looked up first on BROKER_CH_CHECK (xcheck.h).
 *
 * Owns: out, xc, targets, plan, acks, scratch, the retry timer.
 * Calls into: daemon_flow (dispatch again after a retry or a resume),
 * daemon_events (records of what became of a message), daemon_conn
 * (daemon_fail).
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

void
daemon_sign(const struct daemon *d, amqp_basic_properties_t *p)
{
	if (d->own_user[0] == '\0')
		return;
	p->_flags |= AMQP_BASIC_USER_ID_FLAG;
	p->user_id = amqp_cstring_bytes(d->own_user);
}

/*
 * Acks, parking, retries
 */

/* Settled: acked with the next flush, batched with its neighbours. */
void
daemon_ack(struct daemon *d, struct message *m)
{
	if (m->synthetic)
		; /* nothing was delivered: nothing to settle */
	else if (m->amqp1)
		amqp1_accept(d->a1, m->dv);
	else if (!d->broken && acks_settle(&d->acks, m->ack_index) < 0)
		daemon_fail(d, "out of memory for acks");
	if (m->scan_counted) {
		message_free(m);
		daemon_scan_settled(d);
		return;
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

static void
daemon_log_park(const struct daemon *d, const struct message *m)
{
	log_warn(
	    "parked", " queue=%s reason=\"%s\" source=%s routing_key=\"%.*s\"",
	    d->topo.error, m->route.reason, d->consumers[m->consumer].queue,
	    (int)m->routing_key.len, (const char *)m->routing_key.bytes);
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

/*
 * Backpressure.  While the connection is blocked (connection.blocked: the
 * broker's alarm for the whole node), new deliveries are held unrouted
 * instead of adding to the pile.  They count against the prefetch, so the
 * broker stops sending once it is reached: memory stays bounded and
 * nothing spins.  A refusing queue slows down the messages for that queue
 * alone (see targets.h).
 */
void
daemon_resume(struct daemon *d)
{
	struct outbox_item *it;

	while (!d->broken && (it = outbox_resume(&d->out)) != NULL) {
		struct message *m = MESSAGE_OF(it);
		if (m->routed)
			daemon_dispatch(d, m);
		else
			daemon_route(d, m);
	}
}

/* A publish was refused: log it, one line a second at most. */
static void
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

static void
on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, retry_timer);
	struct outbox_item *it;
	int64_t now = duration_mono_ms();

	(void)loop;
	(void)revents;
	/* A message refused again goes back with a later retry_at. */
	while (!d->broken && (it = outbox_retry_due(&d->out, now)) != NULL) {
		struct message *m = MESSAGE_OF(it);
		/* The due time may have come meanwhile: step afresh. */
		if (m->route.action != ROUTE_PARK &&
		    m->route.action != ROUTE_RECORD &&
		    m->route.action != ROUTE_CLAIM &&
		    m->route.action != ROUTE_SERIES &&
		    m->route.action != ROUTE_RETURN &&
		    m->route.action != ROUTE_REQUEST)
			router_step(&d->rp, &m->route, duration_wall_ms());
		daemon_dispatch(d, m);
	}
	daemon_retry_arm(d);
	daemon_resume(d);
}

/* The broker refused m's publish (basic.nack). */
static void
daemon_nacked(struct daemon *d, struct message *m)
{
	const char *refusal, *why;
	enum plan_next next;
	int64_t wait;

	d->m.nacks++;
	next = plan_nacked(&d->plan, &m->route, m->out.routing_key,
	                   duration_wall_ms(), duration_mono_ms(), &refusal,
	                   &wait, &why);
	if (refusal != NULL)
		daemon_log_refused(d, m, refusal, wait);
	daemon_next(d, m, next, why);
}

/* The broker confirmed m's publish (or refused it, when nack). */
static void
daemon_confirmed(struct daemon *d, struct message *m, int nack)
{
	if (m->scan_copy) {
		daemon_scan_copied(d, m,
		                   !nack && !m->out.returned &&
		                       m->route.action == ROUTE_RETURN);
		return;
	}
	if (nack) {
		daemon_nacked(d, m);
		return;
	}
	d->m.confirms++;
	if (!m->out.returned && m->route.action == ROUTE_CLAIM) {
		/* Its claim is in P.cancels: now it may wait. */
		router_step(&d->rp, &m->route, duration_wall_ms());
		daemon_dispatch(d, m);
		return;
	}
	if (!m->out.returned && m->series_step == 1 &&
	    m->route.action != ROUTE_DELIVER) {
		/* The next copy is in the broker: record it, then ack. */
		if (m->route.action == ROUTE_HOP)
			d->m.hops[m->route.shard * d->ladder.levels +
			          (unsigned)m->route.level]++;
		else if (m->route.action == ROUTE_WAIT)
			d->m.waits[m->route.shard]++;
		if (m->unrecorded) {
			daemon_event(d, m, EVENT_SCHEDULED);
			m->unrecorded = 0;
		}
		plan_accepted(&d->plan, &m->route, m->out.routing_key);
		m->series_step = 2;
		m->route.action = ROUTE_SERIES;
		daemon_dispatch(d, m);
		return;
	}
	if (!m->out.returned && m->route.action == ROUTE_SERIES) {
		daemon_ack(d, m);
		return;
	}
	if (!m->out.returned) {
		if (m->route.action == ROUTE_PARK) {
			d->m.parked[m->route.park]++;
			daemon_log_park(d, m);
			daemon_event(d, m,
			             m->route.park == PARK_cancelled
			                 ? EVENT_CANCELLED
			                 : EVENT_PARKED);
		} else if (m->route.action == ROUTE_RECORD) {
			log_info("cancel_recorded",
			         " stream=%s routing_key=\"%.*s\"",
			         d->topo.cancels, (int)m->routing_key.len,
			         (const char *)m->routing_key.bytes);
			daemon_request_copy(d, m);
			/* It takes effect once read back: check that soon. */
			daemon_probe_soon(d);
		} else if (m->route.action == ROUTE_REQUEST) {
			; /* in P.requests: recorded from there */
		} else if (m->route.action == ROUTE_WAIT) {
			d->m.waits[m->route.shard]++;
			if (m->unrecorded) {
				daemon_event(d, m, EVENT_SCHEDULED);
				m->unrecorded = 0;
			}
		} else if (m->route.action == ROUTE_HOP) {
			d->m.hops[m->route.shard * d->ladder.levels +
			          (unsigned)m->route.level]++;
			if (m->unrecorded) {
				daemon_event(d, m, EVENT_SCHEDULED);
				m->unrecorded = 0;
			}
		} else {
			d->m.delivered++;
			metrics_observe_lateness(&d->m, m->published_at -
			                                    m->route.due);
			/* A repeat goes on: its next copy, before the ack.
			 * The target took this one: say so before the route
			 * turns into the copy's. */
			if (m->route.every > 0) {
				plan_accepted(&d->plan, &m->route,
				              m->out.routing_key);
				if (m->route.missed > 0)
					daemon_series_missed(d, m);
				/* A next copy that went straight to the target
				 * (its hop refused, and due by then) was that
				 * occurrence's delivery: go on from it. */
				m->series_step = 0;
				if (daemon_series_next(d, m)) {
					daemon_dispatch(d, m);
					return;
				}
				daemon_event(d, m, EVENT_DELIVERED);
				daemon_ack(d, m);
				return;
			}
			daemon_event(d, m, EVENT_DELIVERED);
		}
		plan_accepted(&d->plan, &m->route, m->out.routing_key);
		daemon_ack(d, m);
		return;
	}
	m->out.returned = 0;
	if (m->route.action == ROUTE_DELIVER) {
		daemon_park(d, m, PARK_unroutable,
		            "unroutable: no queue bound to exchange "
		            "'%.*s' for routing key '%.*s' (%s)",
		            (int)m->route.exchange.len,
		            (const char *)m->route.exchange.bytes,
		            (int)m->route.routing_key.len,
		            (const char *)m->route.routing_key.bytes,
		            m->out.return_text);
		return;
	}
	/* One of our own queues is gone (deleted by hand?): keep the message
	 * and try again; a reconnect redeclares the topology. */
	daemon_retry_later(d, m, m->out.return_text);
}

void
daemon_confirm(struct daemon *d, uint64_t tag, int multiple, int nack)
{
	struct outbox_item *it;

	while ((it = outbox_confirmed(&d->out, tag, multiple)) != NULL) {
		daemon_confirmed(d, MESSAGE_OF(it), nack);
		if (d->broken)
			return;
	}
	daemon_pub_kick(d);
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
	                    r->return_text, return_same, &rm) != NULL)
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
	/* Whatever way a delivery came here (a retry, a resume, a probe, a
	 * lookup), a cancellation in force stops it: the last look. */
	if (r->action == ROUTE_DELIVER && !m->synthetic && !m->series_step) {
		struct verdict_facts f;
		struct verdict v;

		daemon_request_facts(d, m, 1, &f);
		v = verdict_last_look(&f, &d->plan, r, duration_wall_ms(),
		                      duration_mono_ms());
		if (v.kind != VERDICT_PUBLISH || r->action != ROUTE_DELIVER) {
			daemon_act(d, m, &v);
			return;
		}
		daemon_note(d, m, &v);
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
	st = broker_publish(d->conn, BROKER_CH_PUB, d->frame_max, exchange,
	                    routing_key, 1, &props, body);
	recycle_amqp_pool(&d->scratch);
	if (st != AMQP_STATUS_OK) {
		daemon_fail(d, amqp_error_string2(st));
		message_free(m);
		return;
	}
	m->published_at = duration_wall_ms();
	d->m.published++;
	outbox_sent(&d->out, &m->out, exchange, routing_key);
}

/*
 * The publish channel may take more: the next suspect once the last was
 * confirmed, or, with no suspect left, everything that waited.
 */
void
daemon_pub_kick(struct daemon *d)
{
	struct outbox_item *it;
	int probe_done;

	while (!d->broken) {
		it = outbox_next(&d->out, &probe_done);
		if (probe_done)
			log_info("probe_done", " queued=%u",
			         outbox_count(&d->out.queued) + (it != NULL));
		if (it == NULL)
			break;
		daemon_publish(d, MESSAGE_OF(it));
	}
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

/* The answer to the oldest passive declare: exists, or closed with why. */
void
daemon_lookup_done(struct daemon *d, int exists, const char *why)
{
	struct xcheck_lookup *lk = xcheck_answered(&d->xc);
	struct outbox_item *it;
	amqp_bytes_t name;

	if (lk == NULL) {
		daemon_fail(d, "unexpected reply on the check channel");
		return;
	}
	name.bytes = lk->name;
	name.len = lk->len;
	if (exists)
		xcheck_add(&d->xc, name, NULL, duration_mono_ms());
	while ((it = TAILQ_FIRST(&lk->waiters)) != NULL) {
		TAILQ_REMOVE(&lk->waiters, it, link);
		if (exists)
			daemon_publish(d, MESSAGE_OF(it));
		else
			daemon_park(d, MESSAGE_OF(it), PARK_no_exchange,
			            "target exchange '%.*s' %s", (int)lk->len,
			            lk->name, why);
	}
	xcheck_free(lk);
}

void
daemon_publish_init(struct daemon *d)
{
	ev_init(&d->retry_timer, on_retry);
}
