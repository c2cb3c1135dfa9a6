/*
 * Unique ids (x-cascade-unique): which waiting message holds each
 * message-id in each publisher's scope, folded from the claims in
 * P.cancels.  Pure code.
 *
 * A unique id belongs to its publisher: the key is the pair (scope,
 * message-id), where the scope is the user-id the message was published
 * with (which RabbitMQ checked); messages published without one share the
 * anonymous scope (empty).  Alice's "inv-1" and Bob's "inv-1" are two ids.
 * The two parts are held apart (a list of scopes per message-id, each
 * with its own length), never run together into one string.
 *
 * A daemon records a claim (events.h) for every message with
 * x-cascade-unique before it first waits.  Every daemon reads the claims
 * in the stream's order and judges each the same way, by the time it was
 * recorded, not by its own clock:
 *
 *   - no message holds the id in the claimant's scope (none did, or its
 *     due time has passed, or it was cancelled): the claimant holds it;
 *   - keep: the claimant loses, and is dropped as a duplicate;
 *   - replace: the holder is replaced (dropped when next seen) and the
 *     claimant holds the id.  Holder and claimant share a scope, so one
 *     publisher only ever replaces its own message.
 *
 * So where two daemons race, the first claim in the stream wins for keep
 * and the last for replace, and every daemon agrees.  The caller turns a
 * loss into a cancellation of the loser's cascade id only (cancels.h),
 * bound to the claimant's scope: a claim names no message-id it could
 * take from anyone.
 */
#ifndef CASCADE_CLAIMS_H
#define CASCADE_CLAIMS_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "idmap.h"

/* A cascade id is 16 hexadecimal digits (events_new_id). */
#define CLAIM_ID_MAX 16

struct claims {
	struct idmap map; /* message-id -> struct claim, a list of scopes */
	size_t n;         /* claims held: (scope, message-id) pairs */
};

/* The holder of one message-id in one scope, allocated to its size. */
struct claim {
	struct claim *next; /* the same message-id in another scope */
	int64_t due;   /* the holder's due time: it holds the id until then */
	int64_t until; /* forgotten after this */
	uint32_t scope_len;
	uint8_t id_len;
	char id[CLAIM_ID_MAX + 1]; /* the holder's cascade id */
	char scope[];              /* its publisher's user-id; not terminated */
};

/* What one claim decided. */
struct claim_verdict {
	int won;      /* the claimant holds the id */
	int lost;     /* it does not: a duplicate of the holder (keep) */
	int replaced; /* it took the id from old_id */
	char old_id[CLAIM_ID_MAX + 1];
	int64_t old_due;
};

void claims_init(struct claims *c);
void claims_free(struct claims *c);

/*
 * Judge claim e (EVENT_CLAIM) of a message published by scope (its
 * user-id; empty: anonymous).  A claim whose cascade id is empty or
 * longer than CLAIM_ID_MAX (none a daemon writes) is ignored: neither won
 * nor lost.  -1 out of memory.
 */
int claims_add(struct claims *c, const struct event *e, amqp_bytes_t scope,
               struct claim_verdict *v);

/* Would claim e add a (scope, message-id) not held yet? */
int claims_new(const struct claims *c, const struct event *e,
               amqp_bytes_t scope);

/* The holder of message_id in scope at now, or NULL. */
const struct claim *claims_holder(const struct claims *c, amqp_bytes_t scope,
                                  amqp_bytes_t message_id, int64_t now);

/*
 * A cancel of message_id recorded at `at` by `by` (control: one of
 * [events] control_users): its holders hold it no more, in every scope
 * by may change (cancels.h: its own, the anonymous one; control: all).
 */
void claims_cancelled(struct claims *c, amqp_bytes_t message_id, int64_t at,
                      amqp_bytes_t by, int control);

/* A reschedule of message_id by `by`: its holders hold it until due, in
 * every scope by may change. */
void claims_rescheduled(struct claims *c, amqp_bytes_t message_id, int64_t due,
                        amqp_bytes_t by, int control);

/* Forget holders past their time; how many claims are left. */
size_t claims_prune(struct claims *c, int64_t now);

#endif
