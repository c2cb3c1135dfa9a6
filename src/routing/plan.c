/* SPDX-License-Identifier: Apache-2.0 */
/* The next publish of a routed message: see plan.h. */
#include "plan.h"

#include <stdio.h>
#include <string.h>

#include "duration.h"

static amqp_bytes_t
level_queue(const struct plan *p, const struct route *r, int level)
{
	return amqp_cstring_bytes(
	    p->level_queues[r->shard * p->ladder->levels + (unsigned)level]);
}

/*
 * A hop to r's level: when that delay queue backs off, take the largest
 * lower level that does not.  Returns 0, or the shortest wait in ms when
 * every level from r's down backs off.
 */
static int64_t
plan_hop_level(const struct plan *p, struct route *r, int64_t now, int64_t mono)
{
	int64_t wait, first = INT64_MAX;
	int level = r->level;

	for (; level >= 0; level--) {
		wait = targets_wait(p->targets, amqp_empty_bytes,
		                    level_queue(p, r, level), mono);
		if (wait == 0)
			break;
		if (wait < first)
			first = wait;
	}
	if (level < 0)
		return first;
	if (level != r->level)
		router_hop(p->rp, r, level, now);
	return 0;
}

/*
 * r's target refused it, or backs off for wait ms: send r round the ladder
 * for about that long, or park it once it has been refused for
 * refused_park_after.
 */
static void
plan_divert(const struct plan *p, struct route *r, int64_t wait, int64_t now)
{
	char a[32];
	int level;

	if (r->refused == 0 || r->refused_since <= 0)
		r->refused_since = now;
	r->refused++;
	if (p->refused_park_after > 0 &&
	    now - r->refused_since >= p->refused_park_after) {
		duration_format(now - r->refused_since, a, sizeof(a));
		router_park(r, PARK_refused,
		            "target exchange '%.*s' routing key '%.*s' refused "
		            "it for %s ([router] refused_park_after)",
		            (int)r->exchange.len,
		            (const char *)r->exchange.bytes,
		            (int)r->routing_key.len,
		            (const char *)r->routing_key.bytes, a);
		return;
	}
	targets_diverted(p->targets, r->exchange, r->routing_key);
	r->slot = 0; /* its turn afresh once the target takes messages */
	level = ladder_pick(p->ladder, wait);
	router_hop(p->rp, r, level < 0 ? 0 : level, now);
}

static int
same(amqp_bytes_t a, amqp_bytes_t b)
{
	return a.len == b.len &&
	       (a.len == 0 || memcmp(a.bytes, b.bytes, a.len) == 0);
}

/*
 * A delivery to a paced target: its slot, reserved the first time (a
 * slot is kept in x-cascade-slot while it waits for it).  1 when the slot
 * is later: r is held for it, or sent round the ladder to come back
 * within the shortest level of it.
 */
static int
plan_paced(const struct plan *p, struct route *r, int64_t now)
{
	struct pace_target *t;
	int64_t wait, short_wait = p->ladder->ttl[0];
	int level;

	if (p->pace == NULL || p->pace->n == 0)
		return 0;
	/* Reserved by a daemon still counted (this one, or another whose
	 * line it is), and not long past (a pause, a backoff or a
	 * reschedule kept it out meanwhile): kept.  Else a slot here now, at
	 * the end of the line: late rather than in a burst. */
	if (r->slot == 0 || r->slot < now - short_wait ||
	    !(same(r->slot_by, p->own) ||
	      pace_peer_live(p->pace, r->slot_by, now))) {
		r->slot = 0;
		t = pace_find(p->pace, r->exchange, r->routing_key);
		if (t == NULL)
			return 0;
		r->slot = pace_slot(t, now, pace_peers(p->pace, p->own, now));
		r->slot_by = p->own;
	}
	if (r->slot <= now)
		return 0;
	wait = r->slot - now;
	if (wait <= short_wait) {
		r->action = ROUTE_HOLD;
		r->left = wait;
		return 1;
	}
	level = ladder_pick(p->ladder, wait - short_wait / 2);
	router_hop(p->rp, r, level < 0 ? 0 : level, now);
	return 1;
}

void
plan_pause(const struct plan *p, struct route *r, int64_t now)
{
	int64_t wait = now > r->due ? (now - r->due) / 2 : 0;
	int level;

	if (wait < p->ladder->ttl[0])
		wait = p->ladder->ttl[0];
	if (wait > PLAN_PAUSE_MAX_MS)
		wait = PLAN_PAUSE_MAX_MS;
	/* Neither a slot nor refusals survive a pause: on resume it takes
	 * its turn afresh. */
	r->slot = 0;
	r->refused = 0;
	r->refused_since = 0;
	level = ladder_pick(p->ladder, wait);
	router_hop(p->rp, r, level < 0 ? 0 : level, now);
}

enum plan_next
plan_dispatch(const struct plan *p, struct route *r, int64_t now, int64_t mono,
              const char **why)
{
	int64_t wait;

	*why = NULL;
	/* A holding queue that refuses: the ladder instead, as before. */
	if (r->action == ROUTE_WAIT &&
	    targets_wait(p->targets, amqp_empty_bytes,
	                 amqp_cstring_bytes(p->hold_queues[r->shard]),
	                 mono) > 0)
		router_ladder_step(p->rp, r, now);
	if (r->action == ROUTE_HOLD)
		return PLAN_HOLD;
	if (r->action == ROUTE_DELIVER) {
		wait =
		    targets_wait(p->targets, r->exchange, r->routing_key, mono);
		if (wait == 0 && plan_paced(p, r, now))
			return r->action == ROUTE_HOLD ? PLAN_HOLD
			                               : PLAN_PUBLISH;
		if (wait == 0)
			return r->exchange.len == 0 ? PLAN_PUBLISH : PLAN_CHECK;
		plan_divert(p, r, wait, now);
	}
	if (r->action == ROUTE_HOP && plan_hop_level(p, r, now, mono) > 0) {
		*why = "every delay level it could take refuses publishes";
		return PLAN_RETRY;
	}
	return PLAN_PUBLISH;
}

enum plan_next
plan_nacked(const struct plan *p, struct route *r, amqp_bytes_t routing_key,
            int64_t now, int64_t mono, const char **refusal, int64_t *wait,
            const char **why)
{
	*refusal = NULL;
	*wait = 0;
	switch (r->action) {
	case ROUTE_DELIVER:
		*wait = targets_refused(p->targets, r->exchange, r->routing_key,
		                        mono);
		if (*wait <= 0)
			*wait = p->ladder->ttl[0];
		*refusal = "target refused the delivery "
		           "(queue full or unavailable)";
		plan_divert(p, r, *wait, now);
		break;
	case ROUTE_HOP:
		*wait = targets_refused(p->targets, amqp_empty_bytes,
		                        routing_key, mono);
		*refusal = "delay queue refused the hop "
		           "(full or unavailable)";
		/* Step afresh: a lower level, or deliver if due by now. */
		router_step(p->rp, r, now);
		break;
	case ROUTE_WAIT:
		*wait = targets_refused(p->targets, amqp_empty_bytes,
		                        routing_key, mono);
		*refusal = "holding queue refused the message "
		           "(full or unavailable)";
		/* The ladder, until the holding queue takes messages again. */
		router_ladder_step(p->rp, r, now);
		break;
	default:
		*why = "broker nacked the publish (queue full or unavailable)";
		return PLAN_RETRY;
	}
	return plan_dispatch(p, r, now, mono, why);
}

void
plan_accepted(const struct plan *p, const struct route *r,
              amqp_bytes_t routing_key)
{
	if (r->action == ROUTE_HOP || r->action == ROUTE_WAIT)
		targets_accepted(p->targets, amqp_empty_bytes, routing_key);
	else if (r->action == ROUTE_DELIVER)
		targets_accepted(p->targets, r->exchange, r->routing_key);
}
