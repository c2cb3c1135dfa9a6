/*
 * The life of a complete delivery: what it is (a return, a record, a
 * redelivery the guard parks), its route (router.h) and shard, then one
 * verdict (verdict.h) from what the request state says of it
 * (daemon_request_facts), and the verdict carried out (daemon_act):
 * publish, drop, hold the tail in memory, retry later, look its exchange
 * up first, or back to its holding queue.  Publishing is
 * daemon_publish's, so tests/unit/test_daemon_flow.c links this file alone
 * with a stub publisher.
 *
 * Owns: held, next_shard.
 * Calls into: daemon_publish (publish, park, retry, lookups, returns),
 * daemon_events (requests, the facts, drops), daemon_hold (envelopes,
 * waiting again), daemon_scan, daemon_replay (records).
 */
#include "daemon_int.h"

#include <ev.h>
#include <inttypes.h>
#include <stdint.h>
#include <sys/queue.h>
#include <time.h>

#include "duration.h"
#include "log.h"

/* The clock rounded up: a due time stamped from it is never early. */
static int64_t
now_ms_ceil(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + (ts.tv_nsec + 999999) / 1000000;
}

/*
 * The tail below one resolution step waits here, unacked, so it counts
 * against the prefetch, and goes to its target at its due time.
 */
static void
on_hold(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct message *m = CONTAINER_OF(w, struct message, hold);
	struct daemon *d = m->owner;

	(void)loop;
	(void)revents;
	TAILQ_REMOVE(&d->held, m, link);
	router_step(&d->rp, &m->route, duration_wall_ms());
	daemon_dispatch(d, m);
}

static void
daemon_hold(struct daemon *d, struct message *m)
{
	/* libev's clock can lag the wall clock: refresh it first, and
	 * on_hold steps again if the timer still fires a little early. */
	ev_now_update(d->loop);
	d->m.held_total++;
	m->owner = d;
	ev_timer_init(&m->hold, on_hold, (double)m->route.left / 1000.0, 0.);
	/* Due now: before the frames waiting in the same loop iteration. */
	ev_set_priority(&m->hold, EV_MAXPRI);
	ev_timer_start(d->loop, &m->hold);
	TAILQ_INSERT_TAIL(&d->held, m, link);
}

/* Publish m as m->route says, after checking a named target exists. */
void
daemon_dispatch(struct daemon *d, struct message *m)
{
	struct verdict v =
	    verdict_dispatch(m->amqp1 && !m->series_step, &d->plan, &m->route,
	                     duration_wall_ms(), duration_mono_ms());

	daemon_act(d, m, &v);
}

void
daemon_note(struct daemon *d, struct message *m, const struct verdict *v)
{
	struct route *r = &m->route;
	amqp_bytes_t mid = amqp_empty_bytes;
	char id[17];

	if (m->props._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
		mid = m->props.message_id;
	if (v->cancelled) {
		d->m.cancelled++;
		log_info("cancelled",
		         " message_id=\"%.*s\" id=\"%.*s\" park=%s source=%s",
		         (int)mid.len, (const char *)mid.bytes, (int)r->id.len,
		         (const char *)r->id.bytes,
		         v->kind == VERDICT_DROP ? "no" : "yes",
		         d->consumers[m->consumer].queue);
	}
	if (v->retimed) {
		d->m.rescheduled++;
		log_info("rescheduled",
		         " message_id=\"%.*s\" id=\"%.*s\" due=%" PRId64
		         " was=%" PRId64 " source=%s",
		         (int)mid.len, (const char *)mid.bytes, (int)r->id.len,
		         (const char *)r->id.bytes, r->due, v->was_due,
		         d->consumers[m->consumer].queue);
	}
	if (v->scheduled)
		d->m.scheduled[metrics_window(r->due - duration_wall_ms())]++;
	if (v->id != VERDICT_ID_NONE) {
		events_new_id(id);
		r->id = message_dup(m, amqp_cstring_bytes(id));
		/* Recorded once the hop is confirmed: a delivery redelivered
		 * after a connection loss is then recorded once, not once per
		 * sight. */
		if (v->id == VERDICT_ID_WAIT)
			m->unrecorded = 1;
	}
}

/* The one place a judged message's verdict is carried out. */
void
daemon_act(struct daemon *d, struct message *m, const struct verdict *v)
{
	daemon_note(d, m, v);
	switch (v->kind) {
	case VERDICT_DROP:
		daemon_dropped(d, m, v->drop);
		return;
	case VERDICT_WAIT_AGAIN:
		daemon_wait_again(d, m);
		return;
	case VERDICT_HOLD:
		daemon_next(d, m, PLAN_HOLD, NULL);
		return;
	case VERDICT_RETRY:
		daemon_next(d, m, PLAN_RETRY, v->why);
		return;
	case VERDICT_LOOKUP:
		daemon_next(d, m, PLAN_CHECK, NULL);
		return;
	case VERDICT_PUBLISH:
		daemon_next(d, m, PLAN_PUBLISH, NULL);
		return;
	}
}

/* Carry out what the plan says (plan.h). */
void
daemon_next(struct daemon *d, struct message *m, enum plan_next next,
            const char *why)
{
	const char *refused;

	switch (next) {
	case PLAN_HOLD:
		daemon_hold(d, m);
		return;
	case PLAN_RETRY:
		daemon_retry_later(d, m, why);
		return;
	case PLAN_CHECK:
		switch (xcheck_find(&d->xc, m->route.exchange,
		                    duration_mono_ms(), &refused)) {
		case XCHECK_UNKNOWN:
			daemon_wait_exchange(d, m);
			return;
		case XCHECK_REFUSED:
			daemon_park(d, m, PARK_broker_refused,
			            "the broker refused the delivery: %s",
			            refused);
			return;
		case XCHECK_EXISTS:
			break;
		}
		break;
	case PLAN_PUBLISH:
		break;
	}
	daemon_publish(d, m);
}

/*
 * The shard whose delay queues m takes.  A message keeps its shard for
 * life: one from a shard's return queue stays in it; one seen for the first
 * time, or drained from a former layout's return queue, gets the next
 * shard round robin.
 */
static unsigned
daemon_shard(struct daemon *d, const struct message *m)
{
	int s = d->consumers[m->consumer].shard;

	return s >= 0 ? (unsigned)s : d->next_shard++ % d->topo.shards;
}

void
daemon_route(struct daemon *d, struct message *m)
{
	struct verdict_facts f;
	struct verdict v;

	/* A request: recorded (or parked), not routed. */
	if (m->src == ROUTE_FROM_INGRESS && daemon_cancel_request(d, m)) {
		daemon_dispatch(d, m);
		return;
	}
	if (m->src == ROUTE_FROM_REQUESTS) {
		daemon_scan_take(d, m);
		return;
	}
	/* Stamp "now + delay" from the clock rounded up, then step from it
	 * rounded down, so that neither can make the message early. */
	router_decide(&d->rp, m->src, &m->props, m->routing_key, now_ms_ceil(),
	              &m->route);
	m->route.shard = daemon_shard(d, m);
	/* First sight: a reschedule recorded before now is not for it. */
	if (m->src == ROUTE_FROM_INGRESS || m->src == ROUTE_FROM_RETRY)
		m->route.since = duration_wall_ms();
	m->routed = 1;
	daemon_request_facts(d, m, 0, &f);
	v = verdict_judge(&f, &d->plan, &m->route, duration_wall_ms(),
	                  duration_mono_ms());
	daemon_act(d, m, &v);
}

void
daemon_message_done(struct daemon *d, struct message *m)
{
	if (m->stream && !m->discard) {
		daemon_record(d, m);
		return;
	}
	if (m->scan && !m->discard) {
		daemon_scan_message(d, m);
		return;
	}
	if (!m->is_return && !m->stream && !m->scan)
		d->m.received[m->consumer]++;
	if (m->is_return) {
		d->m.returns++;
		daemon_match_return(d, m);
		message_free(m);
		return;
	}
	if (m->discard) {
		/* Not acked: the broker gives it to another consumer. */
		message_free(m);
		return;
	}
	/* Back from cascade's own queues: put there by a daemon? */
	if ((m->src == ROUTE_FROM_RETURN || m->src == ROUTE_FROM_HOLD) &&
	    daemon_forged(d, m))
		return;
	/* A holding queue's message is an envelope: open it; so is a
	 * request's in P.requests. */
	if (m->src == ROUTE_FROM_HOLD && daemon_unwrap(d, m) < 0)
		return;
	if (m->src == ROUTE_FROM_REQUESTS && daemon_scan_open(d, m) < 0)
		return;
	if (m->redelivered &&
	    (m->src == ROUTE_FROM_HOLD || m->src == ROUTE_FROM_REQUESTS
	         ? router_guard_count(
	               m->src, &m->props, m->routing_key, m->delivery_count,
	               d->cfg->router_max_redeliveries, &m->route)
	         : router_guard(m->src, &m->props, m->routing_key,
	                        d->cfg->router_max_redeliveries, &m->route))) {
		m->routed = 1;
		daemon_publish(d, m);
		return;
	}
	if (d->out.blocked) {
		outbox_pause(&d->out, &m->out);
		return;
	}
	daemon_route(d, m);
}
