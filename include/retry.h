/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Retry policies for work queues that dead-letter rejected messages into
 * P.retry: how many times a message goes back and after which delays.  Pure
 * code; the config reads [retry] and [retry.QUEUE] sections into a table.
 */
#ifndef CASCADE_RETRY_H
#define CASCADE_RETRY_H

#include "amqp_compat.h"
#include <stdint.h>

#define RETRY_MAX_DELAYS 32
#define RETRY_MAX_POLICIES 64
#define RETRY_QUEUE_MAX 256

enum retry_backoff {
	RETRY_BACKOFF_LIST,
	RETRY_BACKOFF_EXPONENTIAL,
};

struct retry_policy {
	char queue[RETRY_QUEUE_MAX]; /* "" for the default [retry] */
	unsigned max_retries;
	enum retry_backoff backoff;
	int64_t delays[RETRY_MAX_DELAYS];
	unsigned ndelays;
	int64_t initial, max;
	double multiplier, jitter;
	unsigned set; /* RETRY_KEY_* bits given in the file */
	int line;     /* line of the section header's first key */
};

struct retry_table {
	struct retry_policy def;
	struct retry_policy queues[RETRY_MAX_POLICIES];
	unsigned n;
};

/* The defaults: 5 retries after 15s, 1m, 10m, 1h (the last repeats). */
void retry_defaults(struct retry_policy *p);

/*
 * Set one key of a policy from text.  Returns 0, -1 with *why for a bad
 * value, -2 for an unknown key, -3 for a key given twice.
 */
int retry_set(struct retry_policy *p, const char *key, const char *value,
              const char **why);

/* The policy for [retry.QUEUE], added (inheriting nothing yet) if new. */
struct retry_policy *retry_section(struct retry_table *t, const char *queue);

/* After parsing: per-queue policies take what they left out from [retry]. */
void retry_inherit(struct retry_table *t);

/* Whether the policy's values fit together; -1 with *why if not. */
int retry_check(const struct retry_policy *p, const char **why);

/* The policy for a queue: its own section, or the default. */
const struct retry_policy *retry_find(const struct retry_table *t,
                                      amqp_bytes_t queue);

/*
 * The delay before attempt n (1 for the first retry).  List: the n-th delay,
 * the last one repeating.  Exponential: initial * multiplier^(n-1), capped
 * at max, then shortened by up to `jitter` of itself: u in [0, 1) picks
 * where, so the delay lies in [base * (1 - jitter), base].
 */
int64_t retry_delay(const struct retry_policy *p, unsigned n, double u);

#endif
