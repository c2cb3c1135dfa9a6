/*
 * Unique ids (x-cascade-unique): which waiting message holds each
 * message-id, folded from the claims in P.cancels.  Pure code.
 *
 * A daemon records a claim (events.h) for every message with
 * x-cascade-unique before it first waits.  Every daemon reads the claims
 * in the stream's order and judges each the same way, by the time it was
 * recorded, not by its own clock:
 *
 *   - no message holds the id (none did, or its due time has passed, or
 *     it was cancelled): the claimant holds it;
 *   - keep: the claimant loses, and is dropped as a duplicate;
 *   - replace: the holder is replaced (dropped when next seen) and the
 *     claimant holds the id, if its publisher may change the holder
 *     (cancels.h); else the claimant loses, parked as not permitted.
 *
 * So where two daemons race, the first claim in the stream wins for keep
 * and the last for replace, and every daemon agrees.  The caller turns a
 * loss into a cancellation of the loser's cascade id (cancels.h).
 */
#ifndef CASCADE_CLAIMS_H
#define CASCADE_CLAIMS_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "idmap.h"

struct claims {
	struct idmap map; /* message-id -> struct claim, the holder */
};

struct claim {
	int64_t due;   /* the holder's due time: it holds the id until then */
	int64_t until; /* forgotten after this */
	size_t owner_len;
	char id[17]; /* the holder's cascade id */
	char owner[256];
};

/* What one claim decided. */
struct claim_verdict {
	int won;      /* the claimant holds the id */
	int refused;  /* replace, by a publisher who may not */
	int replaced; /* it took the id from old_id */
	char old_id[17];
	int64_t old_due;
};

void claims_init(struct claims *c);
void claims_free(struct claims *c);

/*
 * Judge claim e (EVENT_CLAIM) from owner (control: a control user's).
 * -1 out of memory.
 */
int claims_add(struct claims *c, const struct event *e, amqp_bytes_t owner,
               int control, struct claim_verdict *v);

/* The holder of message_id at now, or NULL. */
const struct claim *claims_holder(const struct claims *c,
                                  amqp_bytes_t message_id, int64_t now);

/*
 * A cancel of message_id recorded at `at` by `by` (control: one of
 * [events] control_users): its holder holds it no more, when by may
 * change it (cancels.h).
 */
void claims_cancelled(struct claims *c, amqp_bytes_t message_id, int64_t at,
                      amqp_bytes_t by, int control);

/* A reschedule of message_id by `by`: the holder holds it until due, when
 * by may change it. */
void claims_rescheduled(struct claims *c, amqp_bytes_t message_id, int64_t due,
                        amqp_bytes_t by, int control);

/* Forget holders past their time; how many are left. */
size_t claims_prune(struct claims *c, int64_t now);

#endif
