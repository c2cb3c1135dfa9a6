/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Each delay level's and holding queue's first publish since connecting,
 * alone on a channel of its own: see daemon_int.h.  A queue is a slot:
 * shard s's level k at s * levels + k, shard s's holding queue after all
 * the levels, at shards * levels + s; slot i's channel is BROKER_CH_GATE
 * + i.  Slots past what the connection's channel_max allows are not gated
 * (their publishes go on the publish channel, as they would without the
 * gate).
 */
#include "daemon_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "broker.h"
#include "duration.h"
#include "headers.h"
#include "log.h"

static struct gate_slot *
slot_of(struct daemon *d, const struct route *r, unsigned *index)
{
	unsigned i;

	if (r->action == ROUTE_HOP && r->level >= 0)
		i = r->shard * d->ladder.levels + (unsigned)r->level;
	else if (r->action == ROUTE_WAIT)
		i = d->topo.shards * d->ladder.levels + r->shard;
	else
		return NULL;
	if (i >= d->gate_usable)
		return NULL;
	*index = i;
	return &d->gate[i];
}

const char *
daemon_gate_queue(const struct daemon *d, unsigned i)
{
	unsigned levels = d->topo.shards * d->ladder.levels;

	return i < levels ? d->level_queues[i] : d->topo.hold[i - levels];
}

int
daemon_gate_init(struct daemon *d)
{
	d->ngate = d->topo.shards * d->ladder.levels + d->topo.shards;
	if ((d->gate = calloc(d->ngate, sizeof(*d->gate))) == NULL)
		return -1;
	for (unsigned i = 0; i < d->ngate; i++)
		TAILQ_INIT(&d->gate[i].waiters);
	d->gate_usable = 0;
	/* Its callback is daemon_answer.c's (daemon_answer_init). */
	return 0;
}

void
daemon_gate_free(struct daemon *d)
{
	free(d->gate);
	d->gate = NULL;
	d->ngate = d->gate_usable = 0;
}

void
daemon_gate_connect(struct daemon *d)
{
	int max = amqp_get_channel_max(d->conn);
	unsigned room;

	/* 0: no limit but the protocol's. */
	if (max <= 0 || max > 65535)
		max = 65535;
	room = max >= BROKER_CH_GATE ? (unsigned)(max - BROKER_CH_GATE + 1) : 0;
	d->gate_usable = d->ngate < room ? d->ngate : room;
	if (d->gate_usable < d->ngate)
		log_warn("queues_ungated",
		         " gated=%u queues=%u channel_max=%d reason=\"the "
		         "broker's channel_max leaves no channel for the first "
		         "publish of the others: one that does not answer "
		         "holds the publish channel\"",
		         d->gate_usable, d->ngate, max);
	for (unsigned i = 0; i < d->ngate; i++) {
		d->gate[i].state = GATE_UNPROVEN;
		d->gate[i].channel = GATE_CH_CLOSED;
		d->gate[i].seq = 0;
		d->gate[i].probe = NULL;
		d->gate[i].slow = 0;
	}
}

/* A method on a slot's channel, which is then in state next. */
static void
gate_send(struct daemon *d, struct gate_slot *s, amqp_channel_t ch,
          amqp_method_number_t method, void *decoded, enum gate_channel next)
{
	if (amqp_send_method(d->conn, ch, method, decoded) != AMQP_STATUS_OK) {
		daemon_fail(d,
		            "cannot send on a queue's first-publish channel");
		return;
	}
	s->channel = next;
}

/* Open slot i's channel; its first waiter is the probe once it is. */
void
daemon_gate_open(struct daemon *d, struct gate_slot *s, unsigned i)
{
	amqp_channel_open_t open = {amqp_empty_bytes};

	if (s->channel == GATE_CH_CLOSED)
		gate_send(d, s, (amqp_channel_t)(BROKER_CH_GATE + i),
		          AMQP_CHANNEL_OPEN_METHOD, &open, GATE_CH_OPENING);
}

/* The timer at the first probe's GATE_WAIT_MS with something to do. */
void
daemon_gate_arm(struct daemon *d)
{
	int64_t first = INT64_MAX, mono = duration_mono_ms();

	ev_timer_stop(d->loop, &d->gate_timer);
	for (unsigned i = 0; i < d->gate_usable; i++) {
		const struct gate_slot *s = &d->gate[i];
		if (s->state != GATE_PROBING || s->probe == NULL)
			continue;
		if (!s->slow && s->since + GATE_WAIT_MS < first)
			first = s->since + GATE_WAIT_MS;
		else if (s->slow && !TAILQ_EMPTY(&s->waiters))
			first = mono;
	}
	/* Blocked, the broker reads nothing: no confirm can come.
	 * connection.unblocked arms it again. */
	if (first == INT64_MAX || d->out.blocked)
		return;
	ev_timer_set(&d->gate_timer,
	             first > mono ? (double)(first - mono) / 1000.0 : 0., 0.);
	ev_timer_start(d->loop, &d->gate_timer);
}

int
daemon_gate_take(struct daemon *d, struct message *m, amqp_channel_t *ch)
{
	struct gate_slot *s;
	unsigned i;
	int64_t mono;

	if ((s = slot_of(d, &m->route, &i)) == NULL || s->state == GATE_OPEN)
		return 0;
	mono = duration_mono_ms();
	if (s->state == GATE_UNPROVEN) {
		s->state = GATE_PROBING;
		s->since = mono;
		s->slow = 0;
		s->probe = NULL;
	}
	/* The probe itself: none is out, and its channel is ready. */
	if (s->probe == NULL && s->channel == GATE_CH_READY) {
		*ch = (amqp_channel_t)(BROKER_CH_GATE + i);
		return 0;
	}
	/* It waits for the probe: its channel opening, or its confirm, a
	 * second at most; once the queue is slow, the timer (daemon_answer.c)
	 * sends it round at once. */
	TAILQ_INSERT_TAIL(&s->waiters, &m->out, link);
	daemon_gate_open(d, s, i);
	daemon_gate_arm(d);
	return 1;
}

void
daemon_gate_sent(struct daemon *d, struct message *m, amqp_channel_t ch,
                 amqp_bytes_t exchange, amqp_bytes_t routing_key)
{
	struct gate_slot *s = &d->gate[ch - BROKER_CH_GATE];

	s->seq++;
	s->probe = m;
	/* Its second starts now, not while the channel opened. */
	s->since = duration_mono_ms();
	daemon_gate_arm(d);
	m->out.seq = s->seq;
	m->out.exchange = exchange;
	m->out.routing_key = routing_key;
	m->out.returned = 0;
	m->out.return_text[0] = '\0';
}

void
daemon_gate_opened(struct daemon *d, amqp_channel_t ch)
{
	struct gate_slot *s = &d->gate[ch - BROKER_CH_GATE];
	amqp_confirm_select_t sel = {0};

	gate_send(d, s, ch, AMQP_CONFIRM_SELECT_METHOD, &sel,
	          GATE_CH_SELECTING);
}

int
daemon_gate_returned(struct daemon *d, const struct message *r)
{
	for (unsigned i = 0; i < d->gate_usable; i++) {
		struct message *m = d->gate[i].probe;
		if (m == NULL || m->out.returned ||
		    !headers_bytes_eq(m->out.exchange, r->exchange) ||
		    !headers_bytes_eq(m->out.routing_key, r->routing_key))
			continue;
		m->out.returned = 1;
		snprintf(m->out.return_text, sizeof(m->out.return_text), "%s",
		         r->return_text);
		return 1;
	}
	return 0;
}

int
daemon_gate_settled(const struct daemon *d)
{
	for (unsigned i = 0; i < d->gate_usable; i++)
		if (d->gate[i].probe != NULL ||
		    !TAILQ_EMPTY(&d->gate[i].waiters))
			return 0;
	return 1;
}

void
daemon_gate_drop(struct daemon *d, outbox_free_fn free_item, void *ctx,
                 int waiters_only)
{
	struct outbox_item *it;

	ev_timer_stop(d->loop, &d->gate_timer);
	for (unsigned i = 0; i < d->ngate; i++) {
		struct gate_slot *s = &d->gate[i];
		while ((it = TAILQ_FIRST(&s->waiters)) != NULL) {
			TAILQ_REMOVE(&s->waiters, it, link);
			free_item(it, ctx);
		}
		if (waiters_only)
			continue;
		if (s->probe != NULL) {
			free_item(&s->probe->out, ctx);
			s->probe = NULL;
		}
		s->state = GATE_UNPROVEN;
		s->channel = GATE_CH_CLOSED;
	}
}

/*
 * Proven: its channel is closed again, so that a connection keeps a
 * channel open only for the queues being probed (a broker may limit a
 * user's channels).
 */
void
daemon_gate_close(struct daemon *d, struct gate_slot *s, amqp_channel_t ch)
{
	amqp_channel_close_t close = {0};

	close.reply_code = AMQP_REPLY_SUCCESS;
	close.reply_text = amqp_cstring_bytes("proven");
	gate_send(d, s, ch, AMQP_CHANNEL_CLOSE_METHOD, &close, GATE_CH_CLOSING);
}

void
daemon_gate_close_ok(struct daemon *d, amqp_channel_t ch)
{
	unsigned i = ch - BROKER_CH_GATE;
	struct gate_slot *s = &d->gate[i];

	s->channel = GATE_CH_CLOSED;
	/* Unproven again meanwhile: open it again for what waits. */
	if (!TAILQ_EMPTY(&s->waiters))
		daemon_gate_open(d, s, i);
}

unsigned
daemon_gate_inflight(const struct daemon *d)
{
	unsigned n = 0;
	const struct outbox_item *it;

	for (unsigned i = 0; i < d->gate_usable; i++) {
		n += d->gate[i].probe != NULL;
		TAILQ_FOREACH(it, &d->gate[i].waiters, link)
			n++;
	}
	return n;
}

void
daemon_gate_unblocked(struct daemon *d)
{
	int64_t mono = duration_mono_ms();

	/* What the blocked broker did not read had no chance to answer. */
	for (unsigned i = 0; i < d->gate_usable; i++)
		if (d->gate[i].probe != NULL && !d->gate[i].slow)
			d->gate[i].since = mono;
	daemon_gate_arm(d);
}
