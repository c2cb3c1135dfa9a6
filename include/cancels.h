/*
 * The requests a daemon (or cascade-ctl list) holds, by id: the
 * cancellations and reschedules it read from P.cancels (events.h), each
 * until it lapses, with who asked.  Pure code.
 *
 * Who may change a waiting message: a request takes effect on a message
 * whose owner (the user-id it was published with, which RabbitMQ checked)
 * is the requester, on a message published without a user-id, or on any
 * message when the requester is one of [events] control_users.  Any other
 * match is refused: the caller parks the request once and counts it.
 */
#ifndef CASCADE_CANCELS_H
#define CASCADE_CANCELS_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "events.h"
#include "idmap.h"

struct cancels {
	struct idmap map; /* id -> struct cancel, a list */
};

/*
 * Why a cancellation: asked for, or made by the daemon itself from a claim
 * that lost (claims.h): a duplicate, or a replaced message.  One made from
 * a claim names the loser's cascade id and is matched by cascade id only
 * (never by message-id), and only on a message of the claim's scope (by,
 * not control): a claim takes nothing from another publisher.
 */
enum cancel_reason { CANCEL_ASKED, CANCEL_DUPLICATE, CANCEL_REPLACED };

/* One request held for an id, allocated to its size. */
struct cancel {
	struct cancel *next; /* another request for the same id */
	int64_t due;         /* reschedule: the new due time, Unix ms */
	int64_t at;          /* when it was recorded, Unix ms */
	int64_t until;       /* it lapses then, Unix ms */
	/*
	 * Reschedules that published copies (events.h): the cascade ids
	 * copied, each with the time of the latest request that copied it
	 * (cancels.c).  An instance of one of them copied before that time
	 * is superseded.
	 */
	char *superseded;
	uint32_t superseded_len;
	uint32_t by_len;
	unsigned kind : 4;           /* EVENT_CANCEL or EVENT_RESCHEDULE */
	unsigned reason : 2;         /* enum cancel_reason */
	unsigned park : 1;           /* cancel: park rather than drop */
	unsigned control : 1;        /* from a control user: any message */
	unsigned refusal_parked : 1; /* refused here once: parked, not again */
	char by[]; /* the requester's user-id, not terminated; empty: none */
};

/* What the requests held say about one message. */
struct cancel_match {
	const struct cancel *cancel;     /* a cancellation in force */
	const struct cancel *reschedule; /* the latest reschedule in force */
	struct cancel *refused; /* one it may not apply, not parked yet */
};

void cancels_init(struct cancels *c);
void cancels_free(struct cancels *c);

/*
 * Who asks in record e, and whether that user may change every message.
 * A record's user-id (its writer) was checked by RabbitMQ.  A daemon that
 * relays a request published to P writes it as itself and names the
 * requester in x-cascade-requester; that is believed only from a control
 * user or from own_user (the reader's own login), and so is its
 * x-cascade-superseded list, which is cleared in e otherwise.  by points
 * into e.
 */
void cancels_requester(const struct config *cfg, struct event *e,
                       amqp_bytes_t own_user, amqp_bytes_t *by, int *control);

/*
 * Hold request e (EVENT_CANCEL or EVENT_RESCHEDULE, for e->cancel_reason)
 * for e->cancel, from by.  The same kind and reason from the same
 * requester replaces the one held (the later record wins; the longer
 * lifetime is kept).  -1 out of memory, or a requester or list longer
 * than UINT32_MAX bytes.
 */
int cancels_add(struct cancels *c, const struct event *e, amqp_bytes_t by,
                int control);

/* Whether e would add an id not held yet. */
int cancels_new(const struct cancels *c, const struct event *e);

/*
 * The requests in force at now for a message named message_id or
 * cascade_id, published by owner (empty: no user-id) and first seen at
 * since (Unix ms; 0: unknown, before any request).  A reschedule applies
 * to messages first seen before it was recorded; a cancel to any; one
 * made from a claim only by cascade_id and only when permitted (it is
 * never refused).  Returns 1 when out holds anything.
 */
int cancels_match(struct cancels *c, amqp_bytes_t message_id,
                  amqp_bytes_t cascade_id, amqp_bytes_t owner, int64_t since,
                  int64_t now, struct cancel_match *out);

/*
 * Whether the instance of cascade_id copied at copied (x-cascade-copied;
 * 0: the original), published by owner, is superseded at now: a
 * reschedule its requester may make, named by its message_id or
 * cascade_id, published a newer copy of it, due at the new time.  The
 * caller drops it.
 */
int cancels_superseded(struct cancels *c, amqp_bytes_t message_id,
                       amqp_bytes_t cascade_id, amqp_bytes_t owner,
                       int64_t copied, int64_t now);

/* Whether request k may change a message published by owner. */
int cancels_permitted(const struct cancel *k, amqp_bytes_t owner);

/* Forget the requests that lapsed by now; how many ids are left. */
size_t cancels_prune(struct cancels *c, int64_t now);

#endif
