/* SPDX-License-Identifier: Apache-2.0 */
/* A queue's first publish since connecting, alone: see gate.h. */
#include "gate.h"

#include <limits.h>
#include <stdio.h>

#include "headers.h"

void
gate_reset(struct gate_slot *s)
{
	s->state = GATE_UNPROVEN;
	s->channel = GATE_CH_CLOSED;
	s->seq = 0;
	s->probe = NULL;
	s->since = 0;
	s->slow = 0;
	TAILQ_INIT(&s->waiters);
}

unsigned
gate_room(int channel_max, unsigned first, unsigned n)
{
	unsigned max, room;

	max = channel_max <= 0 || channel_max > 65535 ? 65535u
	                                              : (unsigned)channel_max;
	room = max >= first ? max - first + 1 : 0;
	return n < room ? n : room;
}

/* Its channel to be opened: 1 when it is closed (then it is opening). */
static int
gate_open(struct gate_slot *s)
{
	if (s->channel != GATE_CH_CLOSED)
		return 0;
	s->channel = GATE_CH_OPENING;
	return 1;
}

void
gate_limit_init(struct gate_limit *l)
{
	l->room = UINT_MAX;
	l->serial = 0;
}

/* Whether one more of the slots' channels may open now. */
enum room { ROOM_FREE, ROOM_BUSY /* later: one is opening */, ROOM_NONE };

static enum room
room_for_one(const struct gate_limit *lim, const struct gate_slot *slots,
             unsigned n)
{
	unsigned open = 0;

	if (lim->room == UINT_MAX)
		return ROOM_FREE;
	if (lim->room == 0)
		return ROOM_NONE;
	for (unsigned i = 0; i < n; i++) {
		if (slots[i].channel == GATE_CH_OPENING && lim->serial)
			return ROOM_BUSY;
		open += slots[i].channel != GATE_CH_CLOSED;
	}
	return open < lim->room ? ROOM_FREE : ROOM_BUSY;
}

enum gate_take
gate_take(const struct gate_limit *lim, struct gate_slot *slots, unsigned n,
          unsigned i, struct outbox_item *it, int64_t mono)
{
	struct gate_slot *s = &slots[i];
	enum room room = ROOM_FREE;

	if (s->state == GATE_OPEN)
		return GATE_PASS;
	/* Its channel to open: a limit of channels may leave none now (it
	 * waits for one) or none at all (on the publish channel). */
	if (s->channel == GATE_CH_CLOSED &&
	    (room = room_for_one(lim, slots, n)) == ROOM_NONE &&
	    TAILQ_EMPTY(&s->waiters)) {
		s->state = GATE_UNPROVEN;
		return GATE_PASS;
	}
	if (s->state == GATE_UNPROVEN) {
		s->state = GATE_PROBING;
		s->since = mono;
		s->slow = 0;
		s->probe = NULL;
	}
	/* The probe itself: none is out, and its channel is ready. */
	if (s->probe == NULL && s->channel == GATE_CH_READY)
		return GATE_PROBE;
	/* It waits for the probe: its channel opening (or to open), or its
	 * confirm. */
	TAILQ_INSERT_TAIL(&s->waiters, it, link);
	return room == ROOM_FREE && gate_open(s) ? GATE_WAIT_OPEN : GATE_WAIT;
}

int
gate_next_open(const struct gate_limit *lim, struct gate_slot *slots,
               unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct gate_slot *s = &slots[i];
		if (s->state != GATE_PROBING || s->channel != GATE_CH_CLOSED ||
		    TAILQ_EMPTY(&s->waiters))
			continue;
		if (room_for_one(lim, slots, n) != ROOM_FREE)
			return -1;
		gate_open(s);
		return (int)i;
	}
	return -1;
}

void
gate_sent(struct gate_slot *s, struct outbox_item *it, amqp_bytes_t exchange,
          amqp_bytes_t routing_key, int64_t mono)
{
	it->seq = ++s->seq;
	it->exchange = exchange;
	it->routing_key = routing_key;
	it->returned = 0;
	it->return_text[0] = '\0';
	s->probe = it;
	/* Its wait starts now, not while the channel opened. */
	s->since = mono;
}

void
gate_opened(struct gate_slot *s)
{
	s->channel = GATE_CH_SELECTING;
}

void
gate_selected(struct gate_slot *s)
{
	s->channel = GATE_CH_READY;
	s->seq = 0;
}

struct outbox_item *
gate_next_probe(struct gate_slot *s)
{
	struct outbox_item *it;

	if (s->probe != NULL || s->state != GATE_PROBING ||
	    s->channel != GATE_CH_READY ||
	    (it = TAILQ_FIRST(&s->waiters)) == NULL)
		return NULL;
	TAILQ_REMOVE(&s->waiters, it, link);
	return it;
}

enum gate_answer
gate_confirm(struct gate_slot *s, uint64_t tag, int multiple, int nack,
             struct outbox_item **probe, int *was_slow)
{
	struct outbox_item *it = s->probe;

	if (it == NULL || it->seq > tag || (!multiple && it->seq != tag))
		return GATE_NOT_PROBE;
	*probe = it;
	*was_slow = s->slow;
	s->probe = NULL;
	s->slow = 0;
	/* Returned unroutable: the queue is not there to be proven. */
	if (nack || it->returned) {
		s->state = GATE_UNPROVEN;
		return GATE_REFUSED;
	}
	s->state = GATE_OPEN;
	s->channel = GATE_CH_CLOSING;
	return GATE_PROVEN;
}

int
gate_returned(struct gate_slot *s, amqp_bytes_t exchange,
              amqp_bytes_t routing_key, const char *text)
{
	struct outbox_item *it = s->probe;

	if (it == NULL || it->returned ||
	    !headers_bytes_eq(it->exchange, exchange) ||
	    !headers_bytes_eq(it->routing_key, routing_key))
		return 0;
	it->returned = 1;
	snprintf(it->return_text, sizeof(it->return_text), "%s", text);
	return 1;
}

void
gate_close_ok(struct gate_slot *s)
{
	/* Proven, so nothing waits for it: open, the queue stays open
	 * until the connection ends. */
	s->channel = GATE_CH_CLOSED;
}

struct outbox_item *
gate_closed(struct gate_slot *s)
{
	struct outbox_item *it = s->probe;

	s->channel = GATE_CH_CLOSED;
	s->probe = NULL;
	if (s->state != GATE_OPEN)
		s->state = GATE_UNPROVEN;
	s->slow = 0;
	return it;
}

int
gate_limit_met(struct gate_limit *lim, const struct gate_slot *slots,
               unsigned n)
{
	unsigned opening = 0, used = 0;

	for (unsigned i = 0; i < n; i++) {
		opening += slots[i].channel == GATE_CH_OPENING;
		used += slots[i].channel == GATE_CH_SELECTING ||
		        slots[i].channel == GATE_CH_READY;
	}
	if (opening == 0)
		return 0;
	/* Opens went together: an open-ok may still be on its way. */
	if (!lim->serial && used == 0)
		used = 1;
	/* One at a time, the one opening was past it: always fewer. */
	if (used >= lim->room)
		used = lim->room > 0 ? lim->room - 1 : 0;
	lim->room = used;
	lim->serial = 1;
	return 1;
}

int64_t
gate_due(const struct gate_slot *s)
{
	if (s->state != GATE_PROBING || (s->slow && TAILQ_EMPTY(&s->waiters)))
		return INT64_MAX;
	if (s->probe != NULL)
		return s->since + GATE_WAIT_MS;
	/* No probe out yet: its channel opening, or waiting for room. */
	return TAILQ_EMPTY(&s->waiters) ? INT64_MAX
	                                : s->since + GATE_OPEN_WAIT_MS;
}

int
gate_slow(struct gate_slot *s)
{
	if (s->slow)
		return 0;
	s->slow = 1;
	return 1;
}

void
gate_unblocked(struct gate_slot *s, int64_t mono)
{
	if (s->probe != NULL && !s->slow)
		s->since = mono;
}

unsigned
gate_inflight(const struct gate_slot *s)
{
	return (s->probe != NULL) + outbox_count(&s->waiters);
}

void
gate_drop(struct gate_slot *s, outbox_free_fn free_item, void *ctx,
          int waiters_only)
{
	outbox_drop_list(&s->waiters, free_item, ctx);
	if (waiters_only)
		return;
	if (s->probe != NULL)
		free_item(s->probe, ctx);
	gate_reset(s);
}
