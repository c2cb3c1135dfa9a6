/* SPDX-License-Identifier: Apache-2.0 */
/* The verdict on a message (verdict.h): its rules, in their order. */
#include "verdict.h"

#include <inttypes.h>
#include <string.h>

static int
waits(const struct route *r)
{
	return r->action == ROUTE_HOP || r->action == ROUTE_WAIT;
}

/* Dropped, for why: what was noted before (retimed, scheduled) stays. */
static int
dropped(struct verdict *v, enum verdict_drop why)
{
	v->kind = VERDICT_DROP;
	v->drop = why;
	return 1;
}

int
verdict_needs_room(const struct verdict_facts *f, const struct route *r)
{
	return f->first_sight && r->fresh && f->events &&
	       r->action != ROUTE_PARK &&
	       (r->repeat || (r->unique != UNIQUE_NONE && f->has_message_id &&
	                      f->claim_new));
}

struct verdict
verdict_dispatch(int in_holding, const struct plan *p, struct route *r,
                 int64_t now, int64_t mono)
{
	struct verdict v;

	memset(&v, 0, sizeof(v));
	/* 13. Already in its holding queue: back there until due. */
	if (r->action == ROUTE_WAIT && in_holding) {
		v.kind = VERDICT_WAIT_AGAIN;
		return v;
	}
	/* 14. The plan. */
	switch (plan_dispatch(p, r, now, mono, &v.why)) {
	case PLAN_HOLD:
		v.kind = VERDICT_HOLD;
		break;
	case PLAN_RETRY:
		v.kind = VERDICT_RETRY;
		break;
	case PLAN_CHECK:
		v.kind = VERDICT_LOOKUP;
		break;
	case PLAN_PUBLISH:
		v.kind = VERDICT_PUBLISH;
		break;
	}
	return v;
}

/* Rules 1 to 5: what the requests held say.  1 with *v when that ends
 * it. */
static int
verdict_requests(const struct verdict_facts *f, struct route *r,
                 struct verdict *v)
{
	if (f->superseded)
		return dropped(v, VERDICT_DROP_SUPERSEDED);
	switch (f->cancel) {
	case VERDICT_CANCEL_DUPLICATE:
		return dropped(v, VERDICT_DROP_DUPLICATE);
	case VERDICT_CANCEL_REPLACED:
		return dropped(v, VERDICT_DROP_REPLACED);
	case VERDICT_CANCEL_ASKED:
		v->cancelled = 1;
		return dropped(v, VERDICT_DROP_CANCELLED);
	case VERDICT_CANCEL_PARK:
		router_park(r, PARK_cancelled, "cancelled");
		v->kind = VERDICT_PUBLISH;
		v->cancelled = 1;
		return 1;
	case VERDICT_CANCEL_NONE:
		break;
	}
	if (f->rescheduled && f->new_due != r->due) {
		v->retimed = 1;
		v->was_due = r->due;
		r->due = f->new_due;
	}
	if (f->stale && r->repeat && r->id.len > 0)
		return dropped(v, VERDICT_DROP_STALE);
	return 0;
}

/*
 * Rule 6: a due copy of a paused series waits for the series' next
 * occurrence after now, as the same copy (it then delivers what it
 * missed, by the series' rule), or is dropped when the series ends first.
 * 1 with *v when that ends it.
 */
static int
verdict_paused(const struct verdict_facts *f, const struct plan *p,
               struct route *r, int64_t now, struct verdict *v)
{
	if (!f->series_paused || !r->repeat || r->due > now)
		return 0;
	if (!router_series_skip(p->rp, r, now))
		return dropped(v, VERDICT_DROP_ENDED);
	if (r->action == ROUTE_PARK) {
		v->kind = VERDICT_PUBLISH; /* parked, never lost */
		return 1;
	}
	v->paused = 1;
	return 0;
}

/* Rule 7: a delivery to a paused target goes round the ladder. */
static void
verdict_target_paused(const struct verdict_facts *f, const struct plan *p,
                      struct route *r, int64_t now, struct verdict *v)
{
	if (!f->target_paused || r->action != ROUTE_DELIVER)
		return;
	plan_pause(p, r, now);
	v->paused = 1;
}

/* Rules 8 to 12: first sight of a message. 1 with *v when that ends
 * it. */
static int
verdict_first_sight(const struct verdict_facts *f, struct route *r,
                    struct verdict *v)
{
	int claim;

	/* 8. The cap on what the daemons hold. */
	if (r->fresh && r->action != ROUTE_PARK && f->events) {
		claim = r->unique != UNIQUE_NONE && f->has_message_id &&
		        waits(r) && f->claim_new;
		if ((claim || r->repeat) && f->full)
			router_park(r, PARK_too_many_ids,
			            "too many ids held: %zu, and [events] "
			            "max_held_ids is %" PRIu64
			            " (claims and repeats stop at nine tenths)",
			            f->held_ids, f->max_held_ids);
	}
	/* 9. Scheduled: a repeat has its series' id whenever it is first
	 * seen; what waits on the broker has an id of its own. */
	if (r->repeat && r->action != ROUTE_PARK && r->id.len == 0 &&
	    f->events &&
	    (r->action == ROUTE_DELIVER || r->action == ROUTE_HOLD))
		v->id = VERDICT_ID_SERIES;
	if (waits(r) || r->action == ROUTE_HOLD) {
		v->scheduled = 1;
		if (f->events && waits(r))
			v->id = VERDICT_ID_WAIT;
	}
	if (!r->fresh || r->unique == UNIQUE_NONE || r->action == ROUTE_PARK ||
	    !f->has_message_id)
		return 0;
	/* 10. */
	if (!f->events) {
		router_park(r, PARK_bad_header,
		            "x-cascade-unique: needs [events] enabled = yes");
		return 0;
	}
	/* 11. The id is its publisher's (requests.h). */
	if (r->unique == UNIQUE_KEEP && f->claim_held)
		return dropped(v, VERDICT_DROP_DUPLICATE);
	/* 12. Only what waits holds an id: a message due at once, or held
	 * in memory, has none and does not (CONTRACT.md 7.7). */
	if ((r->id.len > 0 || v->id != VERDICT_ID_NONE) && waits(r))
		r->action = ROUTE_CLAIM;
	return 0;
}

struct verdict
verdict_judge(const struct verdict_facts *f, const struct plan *p,
              struct route *r, int64_t now, int64_t mono)
{
	struct verdict v, d;

	memset(&v, 0, sizeof(v));
	if (r->action != ROUTE_PARK) {
		if (verdict_requests(f, r, &v) ||
		    verdict_paused(f, p, r, now, &v))
			return v;
		router_step(p->rp, r, now);
		verdict_target_paused(f, p, r, now, &v);
	}
	if (f->first_sight && verdict_first_sight(f, r, &v))
		return v;
	d = verdict_dispatch(f->in_holding, p, r, now, mono);
	v.kind = d.kind;
	v.why = d.why;
	return v;
}

struct verdict
verdict_last_look(const struct verdict_facts *f, const struct plan *p,
                  struct route *r, int64_t now, int64_t mono)
{
	struct verdict v, d;

	memset(&v, 0, sizeof(v));
	if (verdict_requests(f, r, &v) || verdict_paused(f, p, r, now, &v))
		return v;
	v.kind = VERDICT_PUBLISH;
	if (!v.retimed && !v.paused && !f->target_paused)
		return v;
	/* Rescheduled or paused while about to go: due still, or wait
	 * again. */
	router_step(p->rp, r, now);
	verdict_target_paused(f, p, r, now, &v);
	if (r->action == ROUTE_DELIVER)
		return v;
	d = verdict_dispatch(f->in_holding, p, r, now, mono);
	v.kind = d.kind;
	v.why = d.why;
	return v;
}
