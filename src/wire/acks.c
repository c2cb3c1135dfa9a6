/* SPDX-License-Identifier: Apache-2.0 */
/* Batched acks: one multiple=true ack for the settled run at the front. */
#include "acks.h"

#include <stdlib.h>
#include <string.h>

enum {
	ACK_OUTSTANDING = 0,
	ACK_SETTLED = 1, /* may be acked, not sent yet */
	ACK_SENT = 2,    /* acked alone, waiting for the front to pass */
};

#define SLOT(a, i) ((a)->slot[(i) & ((a)->cap - 1)])

void
acks_init(struct acks *a)
{
	memset(a, 0, sizeof(*a));
}

void
acks_free(struct acks *a)
{
	free(a->slot);
	free(a->pending);
	acks_init(a);
}

void
acks_reset(struct acks *a)
{
	/* Keep counting: an index from before can never name a new delivery. */
	a->head = a->tail;
	a->npending = 0;
}

static int
acks_grow(struct acks *a)
{
	size_t cap = a->cap ? a->cap * 2 : 1024;
	uint64_t *slot = malloc(cap * sizeof(*slot));

	if (slot == NULL)
		return -1;
	for (uint64_t i = a->head; i < a->tail; i++)
		slot[i & (cap - 1)] = SLOT(a, i);
	free(a->slot);
	a->slot = slot;
	a->cap = cap;
	return 0;
}

int
acks_push(struct acks *a, uint64_t tag, uint64_t *index)
{
	if (a->tail - a->head == a->cap && acks_grow(a) < 0)
		return -1;
	*index = a->tail++;
	SLOT(a, *index) = tag << 2 | ACK_OUTSTANDING;
	return 0;
}

int
acks_settle(struct acks *a, uint64_t index)
{
	if (index < a->head || index >= a->tail)
		return 0; /* from before a reset */
	if (a->npending == a->pcap) {
		size_t cap = a->pcap ? a->pcap * 2 : 256;
		uint64_t *p = realloc(a->pending, cap * sizeof(*p));
		if (p == NULL)
			return -1;
		a->pending = p;
		a->pcap = cap;
	}
	SLOT(a, index) = (SLOT(a, index) & ~UINT64_C(3)) | ACK_SETTLED;
	a->pending[a->npending++] = index;
	return 0;
}

void
acks_rejected(struct acks *a, uint64_t index)
{
	if (index >= a->head && index < a->tail)
		SLOT(a, index) = (SLOT(a, index) & ~UINT64_C(3)) | ACK_SENT;
}

int
acks_flush(struct acks *a, acks_send_fn send, void *ctx)
{
	uint64_t last = 0;
	int st;

	/* The settled run at the front: one ack covers it.  Entries acked
	 * alone before are inside the run; the broker skips them. */
	while (a->head < a->tail && (SLOT(a, a->head) & 3) != ACK_OUTSTANDING) {
		if ((SLOT(a, a->head) & 3) == ACK_SETTLED)
			last = SLOT(a, a->head) >> 2;
		a->head++;
	}
	if (last != 0 && (st = send(ctx, last, 1)) != 0)
		return st;
	/* Settled behind an older delivery still in flight: ack alone. */
	for (size_t i = 0; i < a->npending; i++) {
		uint64_t idx = a->pending[i];
		if (idx < a->head || (SLOT(a, idx) & 3) != ACK_SETTLED)
			continue;
		SLOT(a, idx) = (SLOT(a, idx) & ~UINT64_C(3)) | ACK_SENT;
		if ((st = send(ctx, SLOT(a, idx) >> 2, 0)) != 0)
			return st;
	}
	a->npending = 0;
	return 0;
}

size_t
acks_outstanding(const struct acks *a)
{
	return (size_t)(a->tail - a->head);
}
