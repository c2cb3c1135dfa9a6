/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Each delay level's and holding queue's first publish since connecting,
 * alone on a channel of its own (gate.h), on the daemon's connection.  A
 * queue is a slot: shard s's level k at s * levels + k, shard s's holding
 * queue after all the levels, at shards * levels + s; slot i's channel is
 * BROKER_CH_GATE + i.  Slots past what the connection's channel_max
 * allows are not gated (their publishes go on the publish channel, as
 * they would without the gate).
 */
#include "daemon_int.h"

#include <stdlib.h>

#include "broker.h"
#include "duration.h"
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
		gate_reset(&d->gate[i]);
	d->gate_usable = 0;
	gate_limit_init(&d->gate_limit);
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

	d->gate_usable = gate_room(max, BROKER_CH_GATE, d->ngate);
	if (d->gate_usable < d->ngate)
		log_warn("queues_ungated",
		         " gated=%u queues=%u channel_max=%d reason=\"the "
		         "broker's channel_max leaves no channel for the first "
		         "publish of the others: one that does not answer "
		         "holds the publish channel\"",
		         d->gate_usable, d->ngate, max);
	for (unsigned i = 0; i < d->ngate; i++)
		gate_reset(&d->gate[i]);
}

/* A method on a slot's channel (its state is the caller's). */
static void
gate_send(struct daemon *d, amqp_channel_t ch, amqp_method_number_t method,
          void *decoded)
{
	if (amqp_send_method(d->conn, ch, method, decoded) != AMQP_STATUS_OK)
		daemon_fail(d,
		            "cannot send on a queue's first-publish channel");
}

/* channel.open for slot i; its first waiter is the probe once the
 * channel is in confirm mode. */
static void
gate_send_open(struct daemon *d, unsigned i)
{
	amqp_channel_open_t open = {amqp_empty_bytes};

	gate_send(d, (amqp_channel_t)(BROKER_CH_GATE + i),
	          AMQP_CHANNEL_OPEN_METHOD, &open);
}

/* The timer at the first probe's GATE_WAIT_MS with something to do. */
void
daemon_gate_arm(struct daemon *d)
{
	int64_t first = INT64_MAX, mono = duration_mono_ms();

	ev_timer_stop(d->loop, &d->gate_timer);
	for (unsigned i = 0; i < d->gate_usable; i++) {
		int64_t due = gate_due(&d->gate[i]);
		if (due < first)
			first = due;
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

	if ((s = slot_of(d, &m->route, &i)) == NULL)
		return 0;
	switch (gate_take(&d->gate_limit, d->gate, d->gate_usable, i, &m->out,
	                  duration_mono_ms())) {
	case GATE_PASS:
		return 0;
	case GATE_PROBE:
		*ch = (amqp_channel_t)(BROKER_CH_GATE + i);
		return 0;
	case GATE_WAIT_OPEN:
		gate_send_open(d, i);
		break;
	case GATE_WAIT:
		break;
	}
	/* It waits for the probe, a second at most; once the queue is slow,
	 * the timer (daemon_answer.c) sends it round at once. */
	daemon_gate_arm(d);
	return 1;
}

void
daemon_gate_sent(struct daemon *d, struct message *m, amqp_channel_t ch,
                 amqp_bytes_t exchange, amqp_bytes_t routing_key)
{
	gate_sent(&d->gate[ch - BROKER_CH_GATE], &m->out, exchange, routing_key,
	          duration_mono_ms());
	daemon_gate_arm(d);
}

void
daemon_gate_open_next(struct daemon *d)
{
	int i;

	while (!d->broken && (i = gate_next_open(&d->gate_limit, d->gate,
	                                         d->gate_usable)) >= 0)
		gate_send_open(d, (unsigned)i);
}

void
daemon_gate_opened(struct daemon *d, amqp_channel_t ch)
{
	amqp_confirm_select_t sel = {0};

	gate_opened(&d->gate[ch - BROKER_CH_GATE]);
	gate_send(d, ch, AMQP_CONFIRM_SELECT_METHOD, &sel);
	/* One at a time under a limit of channels: the next may open. */
	daemon_gate_open_next(d);
}

int
daemon_gate_returned(struct daemon *d, const struct message *r)
{
	for (unsigned i = 0; i < d->gate_usable; i++)
		if (gate_returned(&d->gate[i], r->exchange, r->routing_key,
		                  r->return_text))
			return 1;
	return 0;
}

int
daemon_gate_settled(const struct daemon *d)
{
	return daemon_gate_inflight(d) == 0;
}

void
daemon_gate_drop(struct daemon *d, outbox_free_fn free_item, void *ctx,
                 int waiters_only)
{
	ev_timer_stop(d->loop, &d->gate_timer);
	for (unsigned i = 0; i < d->ngate; i++)
		gate_drop(&d->gate[i], free_item, ctx, waiters_only);
}

void
daemon_gate_conn_closed(struct daemon *d, unsigned reply_code)
{
	/* Over another channel's open, maybe: nothing learnt. */
	if (reply_code != AMQP_NOT_ALLOWED || d->probe_state == PROBE_OPENING ||
	    !d->check_open || !d->out.ready ||
	    !gate_limit_met(&d->gate_limit, d->gate, d->gate_usable))
		return;
	log_warn("channels_limited",
	         " channels=%u reason=\"the broker closed the connection "
	         "over a channel opened for a queue's first publish, past "
	         "its limit of the user's (or the node's) channels: from "
	         "now on at most this many at once, opened one at a time; "
	         "a queue's first publish with none left goes on the "
	         "publish channel\"",
	         d->gate_limit.room);
}

/*
 * Proven: its channel is closed again, so that a connection keeps a
 * channel open only for the queues being probed (a broker may limit a
 * user's channels).
 */
void
daemon_gate_close(struct daemon *d, amqp_channel_t ch)
{
	amqp_channel_close_t close = {0};

	close.reply_code = AMQP_REPLY_SUCCESS;
	close.reply_text = amqp_cstring_bytes("proven");
	gate_send(d, ch, AMQP_CHANNEL_CLOSE_METHOD, &close);
}

void
daemon_gate_close_ok(struct daemon *d, amqp_channel_t ch)
{
	gate_close_ok(&d->gate[ch - BROKER_CH_GATE]);
	daemon_gate_open_next(d);
}

unsigned
daemon_gate_inflight(const struct daemon *d)
{
	unsigned n = 0;

	for (unsigned i = 0; i < d->gate_usable; i++)
		n += gate_inflight(&d->gate[i]);
	return n;
}

void
daemon_gate_unblocked(struct daemon *d)
{
	int64_t mono = duration_mono_ms();

	/* What the blocked broker did not read had no chance to answer. */
	for (unsigned i = 0; i < d->gate_usable; i++)
		gate_unblocked(&d->gate[i], mono);
	daemon_gate_arm(d);
}
