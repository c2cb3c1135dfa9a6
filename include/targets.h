/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Backpressure per destination.  A destination is an exchange and a routing
 * key: a delivery's target, or one of cascade's delay queues (exchange "",
 * routing key the queue's name).  When the broker refuses a publish to one
 * (a nack: queue full with reject-publish, or without a leader), that
 * destination alone backs off, for a time that doubles with each refusal in
 * a row up to a cap; the first publish it accepts clears it.  While it backs
 * off, the daemon sends its messages round the ladder instead of holding
 * them, so a target that stays full for hours costs nothing and every other
 * destination keeps its speed.  Pure code: the clock is an argument.
 */
#ifndef CASCADE_TARGETS_H
#define CASCADE_TARGETS_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

/* Destinations remembered; the least recently refused make room. */
#define TARGETS_MAX 1024
/* At most this many are listed in /metrics, the most recently refused. */
#define TARGETS_RENDER_MAX 100

struct target {
	char exchange[256];
	char routing_key[256];
	uint8_t exchange_len;
	uint8_t routing_key_len;
	unsigned refusals;       /* in a row; 0: accepting */
	int64_t until;           /* backing off until (ms, caller's clock) */
	int64_t last_refused;    /* when it last refused (same clock) */
	uint64_t refused_total;  /* nacks, ever */
	uint64_t diverted_total; /* messages sent round the ladder for it */
};

struct targets {
	struct target *t;
	size_t n, cap;
	int64_t min_ms, max_ms; /* the first backoff and the cap */
};

/* An empty table: backoffs start at min_ms and double up to max_ms. */
void targets_init(struct targets *ts, int64_t min_ms, int64_t max_ms);
void targets_free(struct targets *ts);

/*
 * The destination refused a publish at now: count it and back off (again).
 * Returns how long it now backs off, in ms; -1 out of memory (nothing is
 * remembered then, and the caller retries as if it had backed off min_ms).
 */
int64_t targets_refused(struct targets *ts, amqp_bytes_t exchange,
                        amqp_bytes_t routing_key, int64_t now);

/* The destination took a publish: it backs off no more. */
void targets_accepted(struct targets *ts, amqp_bytes_t exchange,
                      amqp_bytes_t routing_key);

/*
 * How long the destination still backs off at now, in ms; 0 when a publish
 * may be tried (never refused, or its backoff is over: the next publish
 * probes it).
 */
int64_t targets_wait(const struct targets *ts, amqp_bytes_t exchange,
                     amqp_bytes_t routing_key, int64_t now);

/* A message for the destination was sent round the ladder (for metrics). */
void targets_diverted(struct targets *ts, amqp_bytes_t exchange,
                      amqp_bytes_t routing_key);

/* Destinations backing off at now. */
size_t targets_backing_off(const struct targets *ts, int64_t now);

#endif
