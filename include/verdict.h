/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verdict on a message: what becomes of it, decided once.  Pure code.
 *
 * The daemon reads a delivery, decides its route from its headers
 * (router_decide), looks up what the request state says of it (the
 * requests, claims and series held: struct verdict_facts), and asks here.
 * What comes back is one verdict, which the daemon carries out: it is the
 * only place that publishes, acks or parks (daemon_flow.c).  The rules, in
 * the order they apply, each with the part of docs/CONTRACT.md it
 * implements:
 *
 *   a route its headers park (4.1) stays parked: PUBLISH it to P.error
 *   1. superseded: a reschedule published a copy due at the new time
 *      (7.5): DROP superseded
 *   2. its claim on its unique id lost (7.7): DROP duplicate, or DROP
 *      replaced
 *   3. cancelled (7.3): DROP cancelled, or with --park PARK cancelled
 *   4. rescheduled (7.5): its due time is the request's (retimed)
 *   5. a stale copy of a repeat (7.8): DROP stale
 *   6. a due copy of a paused series (7.10): it waits for the series'
 *      next occurrence after now (paused), or, when the series ends
 *      before one, DROP ended
 *      then the next step from its due time (router_step, 3.2)
 *   7. a delivery to a paused target (7.10): round the ladder for a
 *      while, due time kept (paused)
 *   8. first sight of a unique id or a repeat with max_held_ids reached
 *      (7.9): PARK too_many_ids
 *   9. first sight of one that will wait: counted, and given its cascade
 *      id (7.1): scheduled, id
 *  10. x-cascade-unique without [events] (7.7): PARK bad_header
 *  11. x-cascade-unique: keep, and its id held in its publisher's scope by
 *      a waiting message (7.7): DROP duplicate
 *  12. x-cascade-unique, and it will wait: CLAIM its id first (7.7)
 *      then the dispatch (verdict_dispatch):
 *  13. back from its holding queue and to wait there again (3.6):
 *      WAIT_AGAIN
 *  14. the plan (plan.h, 4.3): HOLD in memory, RETRY later, LOOKUP the
 *      target exchange first, or PUBLISH as the route says (hop, deliver,
 *      wait, park, claim).
 *
 * tests/unit/test_verdict.c is a table with a row per rule.
 */
#ifndef CASCADE_VERDICT_H
#define CASCADE_VERDICT_H

#include <stddef.h>
#include <stdint.h>

#include "plan.h"
#include "router.h"

/* A cancellation in force for a message (rules 2 and 3). */
enum verdict_cancel {
	VERDICT_CANCEL_NONE,
	VERDICT_CANCEL_ASKED,     /* cancelled: dropped */
	VERDICT_CANCEL_PARK,      /* cancelled with --park */
	VERDICT_CANCEL_DUPLICATE, /* its claim lost: a duplicate (keep) */
	VERDICT_CANCEL_REPLACED,  /* its claim lost: replaced (replace) */
};

/*
 * What is known of a message besides its route: where it came from, and
 * what the request state held says of it (requests.h),
 * looked up by the daemon with the route as read.
 */
struct verdict_facts {
	/* First sight here: from ingress or a work queue's retry, not back
	 * from cascade's own return or holding queues. */
	int first_sight;
	/* From a holding queue over AMQP 1.0, and not a repeat's next copy:
	 * a wait there goes back with its due time (amqp1_delay). */
	int in_holding;
	int events;         /* [events] enabled */
	int has_message_id; /* its properties carry a message-id */
	int superseded;     /* a reschedule's newer copy took its place */
	enum verdict_cancel cancel;
	int rescheduled; /* a reschedule in force: due at new_due */
	int64_t new_due;
	int stale;         /* a stale copy of a repeat (requests.h) */
	int series_paused; /* its series is paused (requests.h) */
	int target_paused; /* its target is paused (requests.h) */
	/* Its unique id (scope, message-id) is not held yet: holding it
	 * takes one more id (requests.h). */
	int claim_new;
	/* Another waiting message holds its unique id in its scope. */
	int claim_held;
	/* [events] max_held_ids reached: no more claims or series may be
	 * held.  Asked only when it matters (verdict_needs_room). */
	int full;
	size_t held_ids;       /* for the park reason */
	uint64_t max_held_ids; /* for the park reason */
};

enum verdict_kind {
	VERDICT_PUBLISH,    /* publish as the route says */
	VERDICT_DROP,       /* ack; nothing published (drop says why) */
	VERDICT_HOLD,       /* in memory for route.left ms, then step again */
	VERDICT_RETRY,      /* publish again later from memory (why) */
	VERDICT_LOOKUP,     /* look the target exchange up first */
	VERDICT_WAIT_AGAIN, /* back to its holding queue with its due time */
};

enum verdict_drop {
	VERDICT_DROP_NONE,
	VERDICT_DROP_SUPERSEDED,
	VERDICT_DROP_DUPLICATE,
	VERDICT_DROP_REPLACED,
	VERDICT_DROP_CANCELLED,
	VERDICT_DROP_STALE,
	VERDICT_DROP_ENDED, /* its series ended while paused */
};

/* How a message first seen is given its cascade id (rule 9). */
enum verdict_id {
	VERDICT_ID_NONE,
	VERDICT_ID_SERIES, /* a repeat delivered or held at once: its series' */
	VERDICT_ID_WAIT,   /* one that waits: recorded once its first hop is
	                      confirmed (events.h) */
};

struct verdict {
	enum verdict_kind kind;
	enum verdict_drop drop;
	const char *why; /* VERDICT_RETRY */
	/* Rule 3 with --park (counted and logged as a cancel), rule 4. */
	int cancelled, retimed;
	int64_t was_due; /* retimed: the due time before */
	/* Rules 6 and 7: held back for a pause, of its series or target. */
	int paused;
	/* Rule 9: count it as scheduled (in the window of its delay), and
	 * the id it is given. */
	int scheduled;
	enum verdict_id id;
};

/*
 * Whether rule 8 needs f->full: first sight of a message not parked that
 * would hold a claim or a series, with [events] on.  The caller asks the
 * cap (which may prune) only then.
 */
int verdict_needs_room(const struct verdict_facts *f, const struct route *r);

/*
 * Judge a message whose route router_decide set (r, changed in place: its
 * due time, its step, a park, a claim), with what f says of it, at now
 * (wall ms) and mono (monotonic ms), by the rules above.
 */
struct verdict verdict_judge(const struct verdict_facts *f,
                             const struct plan *p, struct route *r, int64_t now,
                             int64_t mono);

/*
 * The last look at a delivery about to go out, however it came there (a
 * retry, a resume, a lookup, a hold): rules 1 to 7 again, since a request
 * may have been read since it was judged.  PUBLISH with r unchanged (or
 * retimed and still due): it goes out; else what becomes of it instead.
 */
struct verdict verdict_last_look(const struct verdict_facts *f,
                                 const struct plan *p, struct route *r,
                                 int64_t now, int64_t mono);

/*
 * Rules 13 and 14 alone: a route decided before (after a hold, a lookup,
 * a claim recorded, a repeat's next copy) goes out now.
 */
struct verdict verdict_dispatch(int in_holding, const struct plan *p,
                                struct route *r, int64_t now, int64_t mono);

#endif
