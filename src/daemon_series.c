/*
 * Repeats (series.h, docs/CONTRACT.md 7.8): a copy made stale by a crash
 * or a duplicate delivery is dropped, missed occurrences are counted, the
 * next copy of a delivered occurrence is routed and its series record
 * written, and the series records read back are held.
 *
 * Owns: series, series_prune_at.
 * Calls into: daemon_publish (ack), daemon_conn (daemon_fail, through the
 * caller).
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <inttypes.h>
#include <string.h>

#include "duration.h"
#include "log.h"

int
daemon_series_stale(struct daemon *d, struct message *m)
{
	const struct route *r = &m->route;

	if (r->every <= 0 || r->id.len == 0 ||
	    !series_stale(&d->series, r->id, r->occurrence, r->token))
		return 0;
	d->m.series_stale++;
	log_info("series_stale",
	         " id=\"%.*s\" occurrence=%" PRId64 " source=%s",
	         (int)r->id.len, (const char *)r->id.bytes, r->occurrence,
	         d->consumers[m->consumer].queue);
	daemon_ack(d, m);
	return 1;
}

void
daemon_series_missed(struct daemon *d, const struct message *m)
{
	const struct route *r = &m->route;

	d->m.series_missed += (uint64_t)r->missed;
	log_info("series_missed",
	         " id=\"%.*s\" occurrence=%" PRId64 " missed=%" PRId64
	         " catch_up=%s",
	         (int)r->id.len, (const char *)r->id.bytes,
	         r->occurrence + r->missed, r->missed,
	         r->catch_up_all ? "all" : "collapse");
}

int
daemon_series_event(const struct daemon *d, const struct message *m,
                    struct event *e)
{
	const struct route *r = &m->route;

	memset(e, 0, sizeof(*e));
	e->kind = EVENT_SERIES;
	e->at = r->since;
	e->id = r->id;
	e->occurrence = r->occurrence;
	e->token = r->token;
	e->until = r->due + 86400000LL;
	e->writer = amqp_cstring_bytes(d->own_user);
	return 0;
}

int
daemon_series_next(struct daemon *d, struct message *m)
{
	struct route *r = &m->route;
	int64_t now = duration_wall_ms();
	char token[17];

	if (m->series_step != 0 || r->id.len == 0 || !config_events(d->cfg) ||
	    !router_series_next(r, now))
		return 0;
	events_new_id(token);
	r->token = message_dup(m, amqp_cstring_bytes(token));
	r->since = now;
	r->fresh = 0;
	router_step(&d->rp, r, now);
	/* Due within a step: through the return queue, where a daemon holds
	 * it; the copy must be in the broker before the ack.  What it
	 * delivers is reckoned when it comes out. */
	if (r->action == ROUTE_DELIVER || r->action == ROUTE_HOLD)
		r->action = ROUTE_RETURN;
	r->missed = 0;
	m->series_step = 1;
	m->unrecorded = 1; /* its scheduled record: the new due time */
	return 1;
}

int
daemon_series_read(struct daemon *d, const struct event *e)
{
	/* A daemon's (trust.h), capped where it was taken. */
	if (series_add(&d->series, e->id, e->occurrence, e->token, e->until,
	               e->at) < 0)
		return -1;
	if (d->series.map.n >= d->series_prune_at)
		d->series_prune_at =
		    2 * series_prune(&d->series, duration_wall_ms()) + 64;
	return 0;
}
