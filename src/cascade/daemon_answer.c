/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the broker answers to publishes, and what is published again
 * because of it: a confirm takes a message to its next step (a claim
 * recorded lets it wait, a repeat's next copy is recorded, a record is
 * checked back, a reading's copy is counted) and acks what it came from;
 * a nack backs its destination off and sends it another way (plan.h); a
 * passive declare answered sends or parks what waited for it; a retry due
 * and a connection unblocked send what waited in memory.  Each is judged
 * again where that can change its fate (daemon_flow).
 *
 * Owns: the retry timer's callback.
 * Calls into: daemon_flow (dispatch, send), daemon_events (records),
 * daemon_series (the next copy), daemon_scan (a reading's copies),
 * daemon_replay (probes), daemon_sort (what waited unrouted),
 * daemon_publish (acks, parks, retries).
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <ev.h>
#include <inttypes.h>
#include <stdint.h>

#include "broker.h"
#include "duration.h"
#include "log.h"

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
			daemon_take(d, m);
	}
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
void
daemon_confirmed(struct daemon *d, struct message *m, int nack)
{
	if (m->kind == MESSAGE_COPY) {
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
			if (m->route.repeat) {
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

/*
 * The gate (daemon_int.h): what a queue's probe, or its silence, lets
 * go on.
 */

/*
 * The queue of slot i did not answer its probe within GATE_WAIT_MS: it
 * backs off as if it had refused, and what waited for it goes another way
 * (a lower level; the ladder for a holding queue).
 */
static void
gate_around(struct daemon *d, struct message *m, unsigned i)
{
	amqp_bytes_t q = amqp_cstring_bytes(daemon_gate_queue(d, i));
	int64_t mono = duration_mono_ms();

	/* Out of memory, nothing remembered: the plan would choose it
	 * again; later, from memory, instead. */
	if (targets_refused(&d->targets, amqp_empty_bytes, q, mono) < 0) {
		daemon_retry_later(d, m, "delay queue does not answer");
		return;
	}
	daemon_dispatch(d, m);
}

static void
gate_not_answering(struct daemon *d, unsigned i, int64_t mono)
{
	struct gate_slot *s = &d->gate[i];
	struct outbox_item *it;

	if (gate_slow(s)) {
		d->m.gate_slow++;
		log_warn("queue_not_answering",
		         " queue=%s waited_ms=%" PRId64 "%s"
		         " reason=\"its first publish since connecting is "
		         "not confirmed: RabbitMQ waits for a quorum queue's "
		         "leader (replaying its log after a restart, or its "
		         "members lost) and holds the publisher's channel; "
		         "hops go to the levels below it meanwhile\"",
		         daemon_gate_queue(d, i), mono - s->since, "");
	}
	while (!d->broken && (it = TAILQ_FIRST(&s->waiters)) != NULL) {
		TAILQ_REMOVE(&s->waiters, it, link);
		gate_around(d, MESSAGE_OF(it), i);
	}
}

static void
on_gate_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, gate_timer);
	int64_t mono = duration_mono_ms();

	(void)loop;
	(void)revents;
	for (unsigned i = 0; i < d->gate_usable && !d->broken; i++)
		if (!d->out.blocked && mono >= gate_due(&d->gate[i]))
			gate_not_answering(d, i, mono);
	if (!d->broken)
		daemon_gate_arm(d);
}

void
daemon_gate_selected(struct daemon *d, amqp_channel_t ch)
{
	struct gate_slot *s = &d->gate[ch - BROKER_CH_GATE];
	struct outbox_item *it;

	gate_selected(s);
	/* The first waiter that can go goes as the probe (daemon_gate_take;
	 * one may be held back: a blocked connection pauses it). */
	while (!d->broken && (it = gate_next_probe(s)) != NULL)
		daemon_send(d, MESSAGE_OF(it));
}

/*
 * What waited for slot s's probe goes on: published as it is, or routed
 * afresh (replan: the queue refused, and backs off).  Left over when the
 * connection broke meanwhile: freed (the broker redelivers).
 */
void
daemon_gate_release(struct daemon *d, struct gate_slot *s, int replan)
{
	struct outbox_list waiting;
	struct outbox_item *it;

	TAILQ_INIT(&waiting);
	TAILQ_CONCAT(&waiting, &s->waiters, link);
	while (!d->broken && (it = TAILQ_FIRST(&waiting)) != NULL) {
		TAILQ_REMOVE(&waiting, it, link);
		if (replan)
			daemon_dispatch(d, MESSAGE_OF(it));
		else
			daemon_send(d, MESSAGE_OF(it));
	}
	outbox_drop_list(&waiting, message_free_item, NULL);
}

void
daemon_gate_confirm(struct daemon *d, amqp_channel_t ch, uint64_t tag,
                    int multiple, int nack)
{
	unsigned i = ch - BROKER_CH_GATE;
	struct gate_slot *s = &d->gate[i];
	struct outbox_item *probe;
	enum gate_answer a;
	int was_slow;

	a = gate_confirm(s, tag, multiple, nack, &probe, &was_slow);
	if (a == GATE_NOT_PROBE)
		return;
	if (a == GATE_PROVEN) {
		daemon_gate_close(d, ch);
		targets_accepted(&d->targets, amqp_empty_bytes,
		                 amqp_cstring_bytes(daemon_gate_queue(d, i)));
		if (was_slow)
			log_info("queue_answering",
			         " queue=%s waited_ms=%" PRId64 "%s",
			         daemon_gate_queue(d, i),
			         duration_mono_ms() - s->since, "");
	}
	/* Refused: the queue backs off (plan_nacked) before the waiters go
	 * their way again. */
	daemon_confirmed(d, MESSAGE_OF(probe), nack);
	daemon_gate_release(d, s, a == GATE_REFUSED);
	if (!d->broken)
		daemon_gate_arm(d);
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
		daemon_send(d, MESSAGE_OF(it));
	}
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
			daemon_send(d, MESSAGE_OF(it));
		else
			daemon_park(d, MESSAGE_OF(it), PARK_no_exchange,
			            "target exchange '%.*s' %s", (int)lk->len,
			            lk->name, why);
	}
	xcheck_free(lk);
}

void
daemon_answer_init(struct daemon *d)
{
	ev_init(&d->retry_timer, on_retry);
	ev_init(&d->gate_timer, on_gate_timer);
}
