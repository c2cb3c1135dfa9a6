/* SPDX-License-Identifier: Apache-2.0 */
/*
 * requeue: sending parked messages back through cascade's exchange with
 * their target and due time restored (park.h), each one leaving P.error
 * only once its re-publish is confirmed.  In the library so that
 * cascade-ctl requeue and the console's Parked page judge and send each
 * message the same way, as its owner.
 *
 * A requeued message stays its publisher's: it is published with the
 * user-id it was parked with (x-cascade-user-id), which RabbitMQ checks,
 * so it allows that only to that user or to one tagged impersonator.
 * When the broker refuses, the message stays parked: sent without its
 * owner it would become anyone's to cancel or replace (CONTRACT 7.6).
 */
#ifndef CASCADE_REQUEUE_H
#define CASCADE_REQUEUE_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "park.h"

/* Zeroed, then the caller's part set. */
struct requeue {
	/* Set by the caller. */
	uint64_t todo;          /* messages to take from P.error, at most */
	const char *reason;     /* only those whose x-cascade-error has it */
	const char *message_id; /* only the one(s) with this message-id */
	int dry_run;            /* say what would be sent, send nothing */
	/*
	 * Each message taken: verb "requeued", "would requeue" or "left",
	 * and a note on why (NULL: none).
	 */
	void (*on_row)(void *arg, const char *verb, const amqp_message_t *m,
	               const struct park_target *t, const char *note);
	void *arg;

	/* Set by the pass. */
	uint64_t sent, would, left;
	uint64_t failed; /* of those left, the ones that could not be sent */
	uint64_t last;   /* the last delivery tag still held: give back to it */
};

/*
 * Confirms on BROKER_CH_PUB for the publishes of requeue_pass, a
 * basic.return said in cl->unroutable.  -1 with cl->err.
 */
int requeue_select(struct client *cl);
/*
 * Take r->todo messages from P.error (client_get), sending each on that
 * requeue_select made ready unless r->dry_run; those not sent stay held
 * unacked up to r->last, for the caller to give back (client_give_back,
 * r->left + r->would of them).  0, or -1 with cl->err.
 */
int requeue_pass(struct client *cl, struct requeue *r);

/*
 * A parked message's owner, the user-id it was published with, into
 * *owner (empty: none).  -1 when x-cascade-user-id is there but no user
 * name: who owns it is unknown.
 */
int requeue_owner(const amqp_basic_properties_t *p, amqp_bytes_t *owner);

#endif
