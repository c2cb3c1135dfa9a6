/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Does a target exchange exist?  Answered by a passive exchange.declare on
 * a channel of its own (a 404 closes that channel, not the one that
 * consumes), and remembered for XCHECK_TTL_MS, so that a busy target costs
 * one declare every few seconds.  The broker may also refuse publishes to
 * an exchange that exists (internal, or no permission): that is
 * remembered the same way, with the broker's words.
 *
 * Lookups are answered in the order they were sent; messages for the same
 * exchange wait on one lookup.  Pure code: the caller sends the declares.
 */
#ifndef CASCADE_XCHECK_H
#define CASCADE_XCHECK_H

#include "amqp_compat.h"
#include <stdint.h>
#include <sys/queue.h>

#include "outbox.h"

#define XCHECK_CACHE 256    /* exchanges remembered */
#define XCHECK_TTL_MS 10000 /* how long an answer is believed */

struct xcheck_lookup {
	TAILQ_ENTRY(xcheck_lookup) link;
	char name[256];
	size_t len;
	int sent;                   /* the declare is on the wire */
	struct outbox_list waiters; /* messages for this exchange */
};

TAILQ_HEAD(xcheck_lookups, xcheck_lookup);

struct xcheck_entry {
	char name[256];
	size_t len;
	int64_t until;     /* monotonic ms */
	char refused[300]; /* why the broker refused a publish to it */
};

struct xcheck {
	struct xcheck_entry cache[XCHECK_CACHE];
	unsigned next; /* the entry to overwrite */
	struct xcheck_lookups lookups;
};

void xcheck_init(struct xcheck *x);

enum xcheck_answer {
	XCHECK_UNKNOWN, /* ask the broker: xcheck_wait */
	XCHECK_EXISTS,
	XCHECK_REFUSED, /* *why says what the broker said */
};

/* What is known about the exchange at now (monotonic ms). */
enum xcheck_answer xcheck_find(const struct xcheck *x, amqp_bytes_t name,
                               int64_t now, const char **why);

/* Remember that it exists (why NULL) or why publishes to it are refused. */
void xcheck_add(struct xcheck *x, amqp_bytes_t name, const char *why,
                int64_t now);

/*
 * Make it wait for the answer about name.  Returns the lookup to send when
 * it is a new one, NULL when one was already waiting, or sets *oom (and
 * returns NULL; it is then on no list).
 */
struct xcheck_lookup *xcheck_wait(struct xcheck *x, amqp_bytes_t name,
                                  struct outbox_item *it, int *oom);

/*
 * The answer to the oldest declare sent: that lookup, off the list, for
 * the caller to handle its waiters and xcheck_free.  NULL when no declare
 * was sent (a protocol error).
 */
struct xcheck_lookup *xcheck_answered(struct xcheck *x);

void xcheck_free(struct xcheck_lookup *lk);

/* The first lookup whose declare is not sent yet, or NULL. */
struct xcheck_lookup *xcheck_unsent(const struct xcheck *x);

/* The channel closed: declares sent after the failing one were dropped. */
void xcheck_unsend(struct xcheck *x);

/* Messages waiting for an answer. */
unsigned xcheck_waiting(const struct xcheck *x);

/* Drop every lookup and its waiters (the connection is gone). */
void xcheck_drop(struct xcheck *x, outbox_free_fn free_item, void *ctx);

#endif
