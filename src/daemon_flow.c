/*
 * The life of a complete delivery: what it is (a return, a record, a
 * redelivery the guard parks), its route (router.h), its shard, and what
 * the plan makes of it (plan.h): publish, hold the tail in memory, retry
 * later or look its exchange up first.  Decides; publishing is
 * daemon_publish's, so tests/unit/test_daemon_flow.c links this file alone
 * with a stub publisher.
 *
 * Owns: held, next_shard.
 * Calls into: daemon_publish (publish, park, retry, lookups, returns),
 * daemon_events (cancellations, requests, records).
 */
#include "daemon_int.h"

#include <ev.h>
#include <stdint.h>
#include <sys/queue.h>
#include <time.h>

#include "duration.h"

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
	const char *why;
	enum plan_next next;

	/* Already in its holding queue: back there until due. */
	if (m->route.action == ROUTE_WAIT && m->amqp1 && !m->series_step) {
		daemon_wait_again(d, m);
		return;
	}
	next = plan_dispatch(&d->plan, &m->route, duration_wall_ms(),
	                     duration_mono_ms(), &why);
	daemon_next(d, m, next, why);
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
	if (m->src == ROUTE_FROM_INGRESS && daemon_cancel_request(d, m))
		return;
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
	if (m->route.action != ROUTE_PARK) {
		if (daemon_requests(d, m) == 1 || daemon_series_stale(d, m))
			return;
		router_step(&d->rp, &m->route, duration_wall_ms());
	}
	if (m->src != ROUTE_FROM_RETURN && m->src != ROUTE_FROM_HOLD) {
		if (m->route.fresh)
			daemon_admit(d, m);
		daemon_scheduled(d, m);
		if (m->route.fresh && daemon_unique(d, m))
			return;
	}
	daemon_dispatch(d, m);
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
