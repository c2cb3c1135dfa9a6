/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The request state held in memory from P.cancels and P.series
 * (requests.h: requests, claims, series) and its cap, [events]
 * max_held_ids (CONTRACT.md 7.9): each record read into it, its prune,
 * how many are held, whether one more may be, and the refusals past the
 * cap.
 *
 * Owns: requests, held_prune_at, held_pruned_at, held_full_logged.
 * Calls into: nothing else of the daemon's (router_park marks a message;
 * the caller parks it).
 */
#include "daemon_int.h"

#include <inttypes.h>
#include <string.h>

#include "duration.h"
#include "log.h"

/* A kind held is counted under the metrics' label of the same index. */
_Static_assert((int)REQUESTS_CANCEL == (int)METRICS_HELD_REQUEST &&
                   (int)REQUESTS_CLAIM == (int)METRICS_HELD_CLAIM &&
                   (int)REQUESTS_SERIES == (int)METRICS_HELD_SERIES &&
                   (int)REQUESTS_PAUSE == (int)METRICS_HELD_PAUSE &&
                   (int)REQUESTS_KINDS == (int)METRICS_HELD_KINDS,
               "requests.h's kinds are metrics.h's");

/*
 * Held ids ([events] max_held_ids, config_held_limit).  Requests keep a
 * message from being delivered, claims keep a duplicate from waiting,
 * series keep a stale copy from being delivered: a request not held does
 * the most harm.  So claims and series stop at nine tenths of the cap and
 * requests at the cap.  New ones published to P are refused (parked) at
 * those limits; a request written into P.cancels by a user that is
 * neither a daemon's nor a control user past them is counted and not
 * held.  A daemon's or control user's record is always held: the cap was
 * checked where it was taken.
 */
size_t
daemon_held(const struct daemon *d)
{
	return requests_held(&d->requests);
}

static size_t
daemon_held_limit(const struct daemon *d, int kind)
{
	/* A pause not held would let a paused series or target deliver:
	 * held as requests are. */
	return config_held_limit(d->cfg, kind == METRICS_HELD_REQUEST ||
	                                     kind == METRICS_HELD_PAUSE);
}

/* Forget what lapsed, every kind; the next prune when the map has twice
 * what is left. */
static void
daemon_held_prune(struct daemon *d)
{
	d->held_prune_at =
	    2 * requests_prune(&d->requests, duration_wall_ms()) + 64;
}

/* May one more id of kind be held?  At the limit, prune first (at most
 * once a second: a prune walks the whole map). */
int
daemon_held_room(struct daemon *d, int kind)
{
	int64_t now;

	if (daemon_held(d) < daemon_held_limit(d, kind))
		return 1;
	now = duration_mono_ms();
	if (d->held_pruned_at != 0 && now - d->held_pruned_at < 1000)
		return 0;
	d->held_pruned_at = now;
	daemon_held_prune(d);
	return daemon_held(d) < daemon_held_limit(d, kind);
}

/* A record of P.cancels that would add an id of kind past the limit: not
 * held; counted, and logged at most once a minute. */
static void
daemon_not_held(struct daemon *d, int kind, amqp_bytes_t id)
{
	int64_t now = duration_mono_ms();

	d->m.held_refused[kind]++;
	if (d->held_full_logged != 0 && now - d->held_full_logged < 60000)
		return;
	d->held_full_logged = now;
	log_warn("held_ids_full",
	         " kind=%s id=\"%.*s\" held=%zu max_held_ids=%" PRIu64
	         " not_held=%" PRIu64
	         " reason=\"a record read from P.cancels was not held: "
	         "[events] max_held_ids reached\"",
	         metrics_held_name(kind), (int)id.len, (const char *)id.bytes,
	         daemon_held(d), d->cfg->events_max_held_ids,
	         d->m.held_refused[kind]);
}

int
daemon_request_room(struct daemon *d, const struct event *e, struct route *r)
{
	/* A pause is its requester's (requests.h). */
	if (!requests_new(&d->requests, e, e->requester) ||
	    daemon_held_room(d, METRICS_HELD_REQUEST))
		return 1;
	router_park(r, PARK_too_many_ids,
	            "too many ids held: %zu, and [events] max_held_ids is "
	            "%" PRIu64 "; the request was not recorded",
	            daemon_held(d), d->cfg->events_max_held_ids);
	return 0;
}

/* A pause or resume read (rc: requests_pause_read's): logged, and a
 * refusal counted. */
static void
daemon_pause_read(struct daemon *d, const struct event *e, amqp_bytes_t by,
                  int rc)
{
	const char *what = events_kind_name(e->kind);

	if (rc == 1) {
		if (d->replaying)
			return; /* told when it was first read */
		d->m.requests_refused++;
		log_warn("pause_refused",
		         " kind=%s %s=\"%.*s\" requester=\"%.*s\" "
		         "reason=\"%s\"",
		         what, e->target ? "target" : "id", (int)e->cancel.len,
		         (const char *)e->cancel.bytes, (int)by.len,
		         (const char *)by.bytes,
		         e->target ? "only [events] control_users may pause "
		                     "or resume a target"
		                   : "only who paused it, or a control user, "
		                     "may resume it");
		return;
	}
	if (!d->replaying)
		log_info(what, " %s=\"%.*s\" requester=\"%.*s\" held=%zu",
		         e->target ? "target" : "id", (int)e->cancel.len,
		         (const char *)e->cancel.bytes, (int)by.len,
		         (const char *)by.bytes, d->requests.n[REQUESTS_PAUSE]);
}

int
daemon_held_read(struct daemon *d, struct event *e, const char **why)
{
	static const char *const oom[REQUESTS_KINDS] = {
	    "out of memory for cancellations", "out of memory for claims",
	    "out of memory for series", "out of memory for pauses"};
	amqp_bytes_t own = amqp_cstring_bytes(d->own_user), by;
	int kind = requests_kind(e->kind), control, hold = 1, rc;

	if (kind < 0)
		return 0;
	*why = oom[kind];
	requests_requester(d->cfg, e, own, &by, &control);
	/* A daemon's or a control user's record is held whatever the cap:
	 * the daemon that took it from P checked the cap, and cascade-ctl's
	 * must never say "cancelled" in vain.  What others wrote straight
	 * into the stream is capped (claims and series are believed from
	 * cascade's own users only: trust.h). */
	if (!trust_writer(d->cfg, own, e->writer) &&
	    requests_new(&d->requests, e, by) && !daemon_held_room(d, kind)) {
		daemon_not_held(d, kind,
		                kind == REQUESTS_SERIES ? e->id : e->cancel);
		hold = 0;
	}
	rc = requests_read(&d->requests, e, by, control, hold,
	                   duration_wall_ms());
	if (rc < 0)
		return -1;
	if (kind == REQUESTS_PAUSE)
		daemon_pause_read(d, e, by, rc);
	else if (d->replaying || kind != REQUESTS_CANCEL)
		;
	else if (e->kind == EVENT_CANCEL)
		log_info("cancellation",
		         " id=\"%.*s\" park=%s requester=\"%.*s\" held=%zu",
		         (int)e->cancel.len, (const char *)e->cancel.bytes,
		         e->park ? "yes" : "no", (int)by.len,
		         (const char *)by.bytes, d->requests.n[kind]);
	else
		log_info(
		    "reschedule",
		    " id=\"%.*s\" due=%" PRId64 " requester=\"%.*s\" held=%zu",
		    (int)e->cancel.len, (const char *)e->cancel.bytes, e->due,
		    (int)by.len, (const char *)by.bytes, d->requests.n[kind]);
	/* Forget lapsed ones now and then: memory stays bounded. */
	if (d->requests.map.n >= d->held_prune_at)
		daemon_held_prune(d);
	return 0;
}
