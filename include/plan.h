/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The next publish of a routed message, given which destinations refuse
 * (targets.h).  The router says where a message goes; the plan checks that
 * against the destinations backing off and answers what to do now:
 *
 *   - a delivery whose target backs off goes round the ladder for about
 *     that long instead (diverted), its due time kept, so it is late and
 *     never early; after [router] refused_park_after it is parked instead;
 *   - a hop whose delay level backs off takes the largest lower level that
 *     does not (a lower level is never early, it only costs another hop);
 *     when every level from its own down backs off, it is retried from
 *     memory;
 *   - a nacked publish is stepped afresh from the clock, so it may now be
 *     due, or take a lower level;
 *   - a wait whose holding queue backs off takes the ladder instead;
 *   - a delivery to a paced target (pace.h) takes a slot: one due later
 *     is held in memory for it when it is within the shortest level,
 *     else goes round the ladder to come back before it, its due time
 *     kept, so deliveries go out at the pace in the order they came due.
 *
 * Pure code: the caller publishes, holds or retries, and passes in the wall
 * clock (Unix ms, for due times) and the monotonic clock (for backoffs).
 */
#ifndef CASCADE_PLAN_H
#define CASCADE_PLAN_H

#include "amqp_compat.h"
#include <stdint.h>

#include "ladder.h"
#include "pace.h"
#include "router.h"
#include "targets.h"

struct plan {
	const struct router_params *rp;
	const struct ladder *ladder;
	struct targets *targets;
	/* the delay queues: shard s's level k at s * levels + k */
	const char *const *level_queues;
	/* native: shard s's holding queue at s; NULL in ladder mode */
	const char *const *hold_queues;
	int64_t refused_park_after; /* ms; 0: never park for refusals */
	/* [target ...] pace: NULL or no targets, none paced.  own: this
	 * daemon's marker token, always counted among the daemons sharing
	 * a pace, and its name on the slots it reserves (x-cascade-slot-by):
	 * a slot is honoured while the daemon that reserved it is heard from
	 * (pace_peer_live), else reserved again here. */
	struct pace *pace;
	amqp_bytes_t own;
};

enum plan_next {
	PLAN_PUBLISH, /* publish as r says now (it may be parked or diverted) */
	PLAN_CHECK,   /* a delivery to a named exchange: publish once it is
	                 known to exist (xcheck.h) */
	PLAN_HOLD,    /* hold in memory for r->left ms, then step again */
	PLAN_RETRY,   /* publish again later from memory, for *why */
};

/*
 * What to do with r, routed, at now.  r may change: diverted to a hop, or
 * a lower level, or parked.
 */
enum plan_next plan_dispatch(const struct plan *p, struct route *r, int64_t now,
                             int64_t mono, const char **why);

/*
 * r's publish to routing_key (a delay queue's name for a hop) was nacked:
 * its destination backs off, and r goes where plan_dispatch says once
 * stepped afresh.  *refusal says what refused, for the log, with the
 * backoff in *wait (ms); NULL when the publish is simply retried.
 */
enum plan_next plan_nacked(const struct plan *p, struct route *r,
                           amqp_bytes_t routing_key, int64_t now, int64_t mono,
                           const char **refusal, int64_t *wait,
                           const char **why);

/*
 * A delivery to a paused target (docs/CONTRACT.md 7.10): round the ladder
 * instead, its due time kept, for half as long as it is late already,
 * between the shortest level and PLAN_PAUSE_MAX_MS: a short pause costs
 * little lateness, a long one few hops.  Never parked, never counted as
 * refused.
 */
#define PLAN_PAUSE_MAX_MS 30000
void plan_pause(const struct plan *p, struct route *r, int64_t now);

/* r's publish to routing_key was confirmed: its destination accepts. */
void plan_accepted(const struct plan *p, const struct route *r,
                   amqp_bytes_t routing_key);

#endif
