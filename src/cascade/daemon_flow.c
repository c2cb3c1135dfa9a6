/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The life of a complete delivery: what it is (a return, a record, a
 * redelivery the guard parks), its route (router.h) and shard, then one
 * verdict (verdict.h) from what the request state says of it
 * (daemon_request_facts), and the verdict carried out (daemon_act):
 * publish, drop, hold the tail in memory, retry later, look its exchange
 * up first, or back to its holding queue.  Publishing is
 * daemon_publish's, so the test_daemon_* unit tests link this file alone
 * with a stub publisher (tests/unit/daemon_fixture.c).
 *
 * Owns: held, next_shard, reorder, reorder_timer, overdue_unlogged,
 * overdue_worst, overdue_logged_at.
 * Calls into: daemon_events (requests, the facts, drops), daemon_publish
 * (publish, park, retry, lookups).
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
	    verdict_dispatch(message_in_holding(m), &d->plan, &m->route,
	                     duration_wall_ms(), duration_mono_ms());

	daemon_act(d, m, &v);
}

/* How long a delivery a holding queue released early waits in memory
 * before it goes back: twice as long at each early release, from the
 * least to the most (and never past its due time), and the least again
 * after a minute without one. */
#define EARLY_BACKOFF_MIN_MS 100
#define EARLY_BACKOFF_MAX_MS 10000

/* m from a holding queue, not due: back to it with its due time (or held
 * in memory for the last few ms).  Takes m. */
static void
daemon_wait_again(struct daemon *d, struct message *m)
{
	int64_t now = duration_wall_ms(), left = m->route.due - now;

	/* Given back before with its due time, and released this early: the
	 * broker's clock is ahead of ours, or the queue ignores the time.
	 * Given back again at once, it would come straight back, at
	 * round-trip speed: it waits here first, backing off. */
	if (m->delivery_time >= m->route.due && left > ROUTER_NATIVE_HOLD_MS) {
		int64_t mono = duration_mono_ms();

		if (d->early_backoff == 0 || mono - d->early_at >= 60000)
			d->early_backoff = EARLY_BACKOFF_MIN_MS;
		else if (d->early_backoff < EARLY_BACKOFF_MAX_MS)
			d->early_backoff *= 2;
		if (d->early_backoff > EARLY_BACKOFF_MAX_MS)
			d->early_backoff = EARLY_BACKOFF_MAX_MS;
		d->early_at = mono;
		d->m.native_early++;
		if (mono - d->early_logged_at >= 60000) {
			d->early_logged_at = mono;
			log_warn("native_early",
			         " queue=%s early_ms=%" PRId64 " count=%" PRIu64
			         " reason=\"the holding queue "
			         "released it before its time by this daemon's "
			         "clock: the broker's clock is ahead\"",
			         d->consumers[m->consumer].queue, left,
			         d->m.native_early);
		}
		/* Then back with its time, as a first wait: not counted
		 * again. */
		m->delivery_time = 0;
		m->route.action = ROUTE_HOLD;
		m->route.left =
		    left < d->early_backoff ? left : d->early_backoff;
		daemon_hold(d, m);
		return;
	}
	/* Due within a few ms: held in memory for the rest. */
	if (left <= ROUTER_NATIVE_HOLD_MS) {
		m->route.action = ROUTE_HOLD;
		m->route.left = left > 0 ? left : 0;
		daemon_hold(d, m);
		return;
	}
	/* RabbitMQ arms a timer for the time given: one past 292 years
	 * takes the queue down.  Ten years at most (max_delay's bound); if
	 * that comes first, the message is simply given back again then. */
	amqp1_delay(d->a1, m->dv,
	            left > LADDER_TTL_LIMIT_MS ? now + LADDER_TTL_LIMIT_MS
	                                       : m->route.due);
	d->m.native_returns++;
	message_free(m);
}

void
daemon_note(struct daemon *d, struct message *m, const struct verdict *v)
{
	struct route *r = &m->route;
	amqp_bytes_t mid = amqp_empty_bytes;
	char id[17];

	if (!v->cancelled && !v->retimed && !v->scheduled && !v->paused &&
	    v->id == VERDICT_ID_NONE)
		return; /* most verdicts note nothing */
	d->m.paused_waits += v->paused != 0;
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
	daemon_send(d, m);
}

/* Could a request held, a pause, or a repeat's newer record, stop m
 * now? */
static int
daemon_may_stop(const struct daemon *d, const struct message *m)
{
	return d->requests.n[REQUESTS_CANCEL] > 0 ||
	       d->requests.n[REQUESTS_PAUSE] > 0 ||
	       (m->route.repeat && m->route.id.len > 0 &&
	        d->requests.n[REQUESTS_SERIES] > 0);
}

/*
 * Overdue deliveries in due order (reorder.h): a delivery to its target
 * that came back from a return queue more than a second past its due time
 * and its last hop's planned return (x-cascade-back), that P.ingress
 * handed out again (the broker's redelivered flag: a daemon had it when
 * it stopped or lost its connection), or that a holding queue gave back
 * without having held it until its due time (x-opt-delivery-time), more
 * than a second past its due time, waits in the reorder window, unacked,
 * and leaves in due order; its timer lets them out.  The window holds
 * only after a disruption this daemon saw (a connection made, a
 * redelivery), until returns have been on time for a window's length: a
 * burst late behind its own backlog, with nothing disrupted, goes at
 * once.  Deliveries on time are not held, nor a first delivery from
 * P.ingress that asked for a time already past, nor one a holding queue
 * held until its time (the broker releases those in due order), and each
 * lets out first its target's overdue ones due before it.  Every overdue
 * return is counted, and logged at most once a minute with what makes
 * them late and what to set.
 */

/* How often the log says that deliveries come back overdue. */
#define OVERDUE_LOG_MS 60000

static void
arm(struct daemon *d)
{
	int64_t at = reorder_next_at(&d->reorder), now;

	ev_timer_stop(d->loop, &d->reorder_timer);
	if (at == INT64_MAX)
		return;
	now = duration_mono_ms();
	ev_timer_set(&d->reorder_timer,
	             at > now ? (double)(at - now) / 1000.0 : 0., 0.);
	ev_timer_start(d->loop, &d->reorder_timer);
}

/*
 * Out of the window.  A delivery to a paced target took its slot before
 * it waited (plan.h): that slot has passed, and the window lets out
 * several at once.  So it takes its turn at the pace again, from the
 * plan: late rather than in a burst.  The rest goes now.
 */
static void
let_out(struct daemon *d, struct message *m)
{
	if (m->route.slot != 0) {
		m->route.slot = 0;
		daemon_dispatch(d, m);
		return;
	}
	daemon_send(d, m);
}

static void
on_reorder(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, reorder_timer);
	struct message *m;

	(void)loop;
	(void)revents;
	while ((m = reorder_take(&d->reorder, duration_mono_ms())) != NULL)
		let_out(d, m);
	arm(d);
}

void
daemon_reorder_init(struct daemon *d)
{
	size_t max = d->cfg->router_prefetch / 2;

	/* Half the prefetch at most: the return queue's consumer keeps
	 * receiving while the window holds its share. */
	if (reorder_init(&d->reorder, d->cfg->router_reorder_window,
	                 max > 0 ? max : 1) < 0)
		fatalx("out_of_memory", " what=reorder%s", "");
	ev_init(&d->reorder_timer, on_reorder);
}

void
daemon_reorder_free(struct daemon *d)
{
	reorder_free(&d->reorder);
}

void
daemon_reorder_disrupted(struct daemon *d)
{
	reorder_disrupted(&d->reorder, duration_mono_ms());
}

/* How long after a disruption the dead-letter worker's stragglers may
 * still come: two of RabbitMQ's default confirm timeouts (180 s) and a
 * window. */
#define STRAGGLERS_MS (2 * 180000 + 15000)

/* Counted, and said at most once a minute: a restart's stragglers come
 * back over minutes, each level's in a batch.  After a disruption this
 * daemon saw, recent enough for the broker's stragglers, they are said
 * to be those; else a backlog in the return queue (or a disruption it did
 * not see: a node lost elsewhere in the cluster). */
static void
overdue(struct daemon *d, const struct message *m, int64_t late)
{
	int64_t mono = duration_mono_ms();
	int open = d->reorder.disrupted_at != 0 &&
	           mono - d->reorder.disrupted_at < STRAGGLERS_MS;

	d->m.overdue_returns++;
	d->overdue_unlogged++;
	if (late > d->overdue_worst)
		d->overdue_worst = late;
	if (d->overdue_logged_at != 0 &&
	    mono - d->overdue_logged_at < OVERDUE_LOG_MS)
		return;
	d->overdue_logged_at = mono;
	log_warn("overdue_returns",
	         " count=%" PRIu64 " worst_late_ms=%" PRId64
	         " queue=%s reorder_window_ms=%" PRId64 " reason=\"%s\"",
	         d->overdue_unlogged, d->overdue_worst,
	         d->consumers[m->consumer].queue, d->cfg->router_reorder_window,
	         open ? "deliveries came back from the ladder late: after a "
	                "broker restart or a node's loss RabbitMQ's "
	                "dead-letter worker resends what it could not hand "
	                "over only after "
	                "dead_letter_worker_publisher_confirm_timeout (180 s "
	                "by default; conf/advanced.config sets 10 s; "
	                "cascade-ctl status shows it), and what comes back "
	                "after the reorder window closed goes at once, out of "
	                "order; RabbitMQ 4.3 waits natively (mode = auto)"
	              : "deliveries came back from the ladder late with no "
	                "disruption seen by this daemon: more came due at "
	                "once than the daemons move at once (a backlog in "
	                "the return queue), or a node was lost elsewhere in "
	                "the cluster; they go at once");
	d->overdue_unlogged = 0;
	d->overdue_worst = 0;
}

static int
daemon_reorder(struct daemon *d, struct message *m)
{
	uint64_t key;
	int64_t now, mono, planned;
	struct message *x;
	void *out;

	if (m->route.action != ROUTE_DELIVER ||
	    (m->kind != MESSAGE_DELIVERY && m->kind != MESSAGE_HELD))
		return 0;
	key = reorder_key(m->route.exchange.bytes, m->route.exchange.len,
	                  m->route.routing_key.bytes, m->route.routing_key.len);
	now = duration_wall_ms();
	mono = duration_mono_ms();
	/* Late against when its last hop was to give it back: a wait on
	 * purpose (a pace's slot, a paused or refusing target) is not the
	 * broker's delay.  A message of an earlier daemon: its due time. */
	planned = m->route.back > 0 ? m->route.back : m->route.due;
	if (planned < m->route.due)
		planned = m->route.due;
	/* Handed out before: a daemon had it when it stopped or lost its
	 * connection.  A disruption, whether or not this one is late. */
	if (!m->reordered && m->redelivered)
		reorder_disrupted(&d->reorder, mono);
	/* After a broker's restart a holding queue gives back first what a
	 * daemon had taken and not yet given back with its due time (4.3
	 * returns to the front), before what it held until its time: seen
	 * as the first of seven, 15 s late; and P.ingress redelivers what a
	 * daemon was moving, beside them.  Those wait too. */
	if (!m->reordered &&
	    (m->src == ROUTE_FROM_RETURN ||
	     (m->src == ROUTE_FROM_INGRESS && m->redelivered) ||
	     (m->src == ROUTE_FROM_HOLD && m->delivery_time < m->route.due)) &&
	    now - planned > REORDER_LATE_MS) {
		m->reordered = 1;
		if (m->src == ROUTE_FROM_RETURN)
			overdue(d, m, now - planned);
		if (reorder_open(&d->reorder, mono) &&
		    reorder_overdue(&d->reorder, planned, now)) {
			reorder_add(&d->reorder, m, m->route.due, key, now,
			            mono, &out);
			arm(d);
			if (out != m) {
				if (out != NULL)
					let_out(d, out);
				return 1;
			}
		}
	}
	m->reordered = 1;
	/* Going out now: first its target's overdue ones due before it. */
	while ((x = reorder_take_before(&d->reorder, key, m->route.due)) !=
	       NULL)
		let_out(d, x);
	if (d->reorder.n == 0)
		ev_timer_stop(d->loop, &d->reorder_timer);
	return 0;
}

/*
 * Whatever way a delivery comes to be published (judged just now, or
 * after a hold, a retry, a lookup, a channel reopened), a request in
 * force stops it: the last look (verdict_last_look), when it is about to
 * go out rather than wait in the outbox.
 */
void
daemon_send(struct daemon *d, struct message *m)
{
	struct verdict_facts f;
	struct verdict v;

	/* Overdue, back from the ladder: it waits for those due before it. */
	if (daemon_reorder(d, m))
		return;
	if (m->route.action == ROUTE_DELIVER &&
	    (m->kind == MESSAGE_DELIVERY || m->kind == MESSAGE_HELD) &&
	    !m->series_step && daemon_may_stop(d, m) && !d->broken &&
	    !d->out.blocked && outbox_may_send(&d->out, &m->out)) {
		daemon_request_facts(d, m, 1, &f);
		v = verdict_last_look(&f, &d->plan, &m->route,
		                      duration_wall_ms(), duration_mono_ms());
		if (v.kind != VERDICT_PUBLISH ||
		    m->route.action != ROUTE_DELIVER) {
			daemon_act(d, m, &v);
			return;
		}
		daemon_note(d, m, &v);
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
