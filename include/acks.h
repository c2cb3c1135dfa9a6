/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Batched acknowledgements.  Deliveries on one channel carry increasing
 * tags; a message is settled when its next publish is confirmed, in any
 * order.  acks_flush sends one basic.ack with multiple=true for the settled
 * run at the front (the oldest deliveries) and single acks for settled
 * messages stuck behind an older one still in flight (a held tail, a
 * retry), so those never sit unacked against the prefetch.  Pure code.
 */
#ifndef CASCADE_ACKS_H
#define CASCADE_ACKS_H

#include <stddef.h>
#include <stdint.h>

struct acks {
	uint64_t *slot;    /* tag << 2 | state, at index % cap */
	size_t cap;        /* a power of two */
	uint64_t head;     /* absolute index of the oldest live delivery */
	uint64_t tail;     /* one past the newest */
	uint64_t *pending; /* indexes settled since the last flush */
	size_t npending, pcap;
};

/* Returns 0 or a negative status; called for every ack to send. */
typedef int (*acks_send_fn)(void *ctx, uint64_t tag, int multiple);

void acks_init(struct acks *a);
void acks_free(struct acks *a);

/* Forget everything: the channel is gone and its tags with it. */
void acks_reset(struct acks *a);

/* A delivery arrived; *index names it from now on.  -1 out of memory. */
int acks_push(struct acks *a, uint64_t tag, uint64_t *index);

/* The delivery at index may be acked.  -1 out of memory. */
int acks_settle(struct acks *a, uint64_t index);

/* Settled already, by a basic.reject the caller sent: nothing to send. */
void acks_rejected(struct acks *a, uint64_t index);

/* Send what was settled; the first failing send's status, or 0. */
int acks_flush(struct acks *a, acks_send_fn send, void *ctx);

/* Deliveries pushed and not yet acked on the wire. */
size_t acks_outstanding(const struct acks *a);

#endif
