/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A queue's first publish since connecting, alone on a channel of its own.
 *
 * RabbitMQ registers a channel's first publisher with a quorum queue by a
 * call that waits, inside the channel's process, for the queue's leader:
 * up to net_ticktime + 5 s (65 s), then the publish is nacked
 * (rabbit_fifo_client:enqueue/3, RabbitMQ 3.10 to 4.3).  Everything sent
 * on the channel meanwhile waits behind it, and once the channel's credit
 * is spent the whole connection does.  A delay level still replaying its
 * log after a broker's restart, or whose members are on lost nodes, would
 * stop every hop and delivery so.
 *
 * So a queue's first publish since connecting goes alone, on that queue's
 * own channel in confirm mode: the probe.  Once the probe is confirmed the
 * queue is open, and the publish channel takes it.  Others for the queue
 * meanwhile wait for the probe, GATE_WAIT_MS at most; then the queue is
 * slow, and the caller sends them another way.
 *
 * One gate_slot a queue.  Pure code: the caller owns the channel (it sends
 * what a call says to send), the messages (outbox items) and the clock,
 * an argument in monotonic ms.
 */
#ifndef CASCADE_GATE_H
#define CASCADE_GATE_H

#include "amqp_compat.h"
#include <stdint.h>

#include "outbox.h"

/* How long what waits for a probe waits, at most. */
#define GATE_WAIT_MS 1000
/* And before the probe is out, while its channel opens (or waits for
 * room to open, under a limit of channels), at most. */
#define GATE_OPEN_WAIT_MS 5000

enum gate_state {
	GATE_UNPROVEN, /* nothing published to it on this connection */
	GATE_PROBING,  /* its first publish is on its channel, or about to be */
	GATE_OPEN      /* it confirmed one: the publish channel takes it */
};

enum gate_channel {
	GATE_CH_CLOSED,
	GATE_CH_OPENING,   /* channel.open sent */
	GATE_CH_SELECTING, /* confirm.select sent */
	GATE_CH_READY,     /* in confirm mode: a probe may go */
	GATE_CH_CLOSING    /* proven: channel.close sent */
};

struct gate_slot {
	enum gate_state state;
	enum gate_channel channel;
	uint64_t seq;              /* publishes on its channel since select */
	struct outbox_item *probe; /* published on its channel, unconfirmed */
	int64_t since;             /* probing since (the probe's publish) */
	int slow;                  /* not answering: said, and sent round */
	struct outbox_list waiters;
};

/* A new slot, or one on a new connection: unproven, its channel closed,
 * nothing waiting (what waited is the caller's to have taken first). */
void gate_reset(struct gate_slot *s);

/*
 * How many of n queues get a channel of their own: channels first, first
 * + 1, ... up to channel_max (0 or less: no limit but the protocol's,
 * 65535).
 */
unsigned gate_room(int channel_max, unsigned first, unsigned n);

enum gate_take {
	GATE_PASS,     /* open, or no channel may open for it: on the
	                  publish channel */
	GATE_PROBE,    /* publish it on the queue's channel, then gate_sent */
	GATE_WAIT,     /* it waits for the probe (in s->waiters) */
	GATE_WAIT_OPEN /* it waits, and the queue's channel is to be opened:
	                  send channel.open */
};

/*
 * What a broker's limit of channels leaves the gate.  RabbitMQ closes the
 * whole connection (530 NOT_ALLOWED) on a channel.open past a user's
 * max-channels or a node's channel_max_per_node, and no client is told
 * the limit.  So the gate learns it from such a close: at most as many
 * channels open at once as it had open then, opened one at a time from
 * then on, so that each later close counts exactly, and lowers it.
 */
struct gate_limit {
	unsigned room; /* channels open (not closed) at once, at most */
	int serial;    /* one channel.open outstanding at a time */
};

/* No limit known. */
void gate_limit_init(struct gate_limit *l);

/*
 * Slot i of the n (a queue) is about to have it published at mono.  Under
 * a limit of channels (lim), a queue whose channel cannot open yet waits
 * for room (gate_next_open); one with no room at all has it on the
 * publish channel, as it would without the gate.
 */
enum gate_take gate_take(const struct gate_limit *lim, struct gate_slot *slots,
                         unsigned n, unsigned i, struct outbox_item *it,
                         int64_t mono);

/* After a channel opened or closed: a slot whose channel waited for room
 * may open it now (it is opening from now: send channel.open); -1 none. */
int gate_next_open(const struct gate_limit *lim, struct gate_slot *slots,
                   unsigned n);

/* it was published on s's channel, to exchange / routing key, at mono:
 * the probe.  Its sequence number on that channel is it->seq. */
void gate_sent(struct gate_slot *s, struct outbox_item *it,
               amqp_bytes_t exchange, amqp_bytes_t routing_key, int64_t mono);

/* channel.open-ok: send confirm.select. */
void gate_opened(struct gate_slot *s);

/* confirm.select-ok: the channel takes a probe. */
void gate_selected(struct gate_slot *s);

/* The next waiter to go as the probe, taken from the waiters; NULL when
 * none may go now (a probe out, the channel not ready, or not probing). */
struct outbox_item *gate_next_probe(struct gate_slot *s);

enum gate_answer {
	GATE_NOT_PROBE, /* the tag is not the probe's: nothing changes */
	GATE_PROVEN,    /* open now: send channel.close; what waits goes */
	GATE_REFUSED    /* nacked or returned: unproven again; what waits
	                   goes another way */
};

/*
 * basic.ack (nack 0) or basic.nack of tag (multiple) on s's channel.  For
 * the probe, *probe is it (no longer the slot's) and *was_slow whether the
 * queue had been said to be slow.
 */
enum gate_answer gate_confirm(struct gate_slot *s, uint64_t tag, int multiple,
                              int nack, struct outbox_item **probe,
                              int *was_slow);

/* basic.return of a publish to exchange / routing key: 1 when it was s's
 * probe (which the confirm then refuses). */
int gate_returned(struct gate_slot *s, amqp_bytes_t exchange,
                  amqp_bytes_t routing_key, const char *text);

/* channel.close-ok of the proven channel: closed. */
void gate_close_ok(struct gate_slot *s);

/*
 * The broker closed s's channel: the probe, if one was out, is returned
 * (no longer the slot's; the close was its publish's fault) and the
 * queue is unproven again unless it was open.
 */
struct outbox_item *gate_closed(struct gate_slot *s);

/*
 * The broker closed the connection with 530 NOT_ALLOWED.  When one of the
 * n slots' channels was opening, the close was over it: the limit is
 * lowered to the channels open and in use (those closing may be freed
 * already; an open-ok the broker sent may not have come yet, so the
 * first time at least one), and opens go one at a time.  1 when it
 * lowered the limit; 0 when none was opening (not the gate's doing).
 */
int gate_limit_met(struct gate_limit *lim, const struct gate_slot *slots,
                   unsigned n);

/* When s's wait is up (mono ms): its probe's GATE_WAIT_MS, or before the
 * probe is out GATE_OPEN_WAIT_MS from the first message, or at once once
 * slow with something waiting; INT64_MAX when nothing waits on it. */
int64_t gate_due(const struct gate_slot *s);

/* Its wait is up: 1 the first time (the caller says so and counts it).
 * The caller then sends every waiter another way. */
int gate_slow(struct gate_slot *s);

/* connection.unblocked at mono: what the broker did not read while
 * blocked had no chance to answer, so the probe's wait starts again. */
void gate_unblocked(struct gate_slot *s, int64_t mono);

/* The probe unconfirmed, if any, and what waits for it. */
unsigned gate_inflight(const struct gate_slot *s);

/* Empty s: its waiters to free_item, and unless waiters_only its probe
 * too (then s is as after gate_reset). */
void gate_drop(struct gate_slot *s, outbox_free_fn free_item, void *ctx,
               int waiters_only);

#endif
