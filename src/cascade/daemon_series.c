/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Repeats (schedule.h, requests.h, docs/CONTRACT.md 7.8): a copy made
 * stale by a crash or a duplicate delivery is dropped, missed occurrences
 * are counted, the next copy of a delivered occurrence is routed and its
 * series record written, and the latest record of each series held
 * (daemon_ids.c reads them) is written again into P.series before [events]
 * series_window lets it age out (the refresh).
 *
 * Owns: the refresh timer and its cursor.
 * Calls into: daemon_events (write a record), daemon_outgoing (the
 * record), daemon_publish (random), daemon_fail.
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <ev.h>
#include <inttypes.h>
#include <string.h>

#include "duration.h"
#include "log.h"

/* s: how often the refresh goes on through the series held, each time
 * after 50 % to 150 % of this. */
#define SERIES_REFRESH_TICK 1.

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
daemon_series_next(struct daemon *d, struct message *m)
{
	struct route *r = &m->route;
	int64_t now = duration_wall_ms();
	char token[17];

	if (m->series_step != 0 || r->id.len == 0 || !config_events(d->cfg) ||
	    !router_series_next(&d->rp, r, now))
		return 0;
	events_new_id(token);
	r->token = message_dup(m, amqp_cstring_bytes(token));
	r->since = now;
	r->fresh = 0;
	r->slot = 0; /* the next occurrence takes a slot of its own */
	if (r->action != ROUTE_PARK)
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

/* Write the latest record of series id, h, again into P.series. */
static int
daemon_series_rewrite(amqp_bytes_t id, const struct series_head *h, void *ctx)
{
	struct daemon *d = ctx;
	struct event e;
	int st;

	daemon_series_record(d, id, h->occurrence,
	                     (amqp_bytes_t){h->token_len, (void *)h->token},
	                     h->until, duration_wall_ms(), &e);
	if ((st = daemon_write(d, d->topo.series, &e)) != AMQP_STATUS_OK) {
		daemon_fail(d, amqp_error_string2(st));
		return -1;
	}
	d->m.series_refreshed++;
	return 0;
}

/*
 * A tick of the refresh (requests.h): the series whose latest record was
 * written more than a quarter of [events] series_window ago, and which
 * are still in force, get it written again, a bounded part of the map per
 * tick.  Written without a confirm, like a marker: one lost is written
 * again a quarter window later, well before the record ages out.  The
 * age that counts as old is drawn a little above a quarter each tick, and
 * every daemon walks its map in an order of its own (idmap's hash is
 * seeded per process), so that daemons seldom write the same record
 * together: the first one's, read back, makes it fresh for the others.
 */
static void
on_series_refresh(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, series_refresh);
	int64_t now = duration_wall_ms(),
	        quarter = d->cfg->events_series_window / 4, stale;

	(void)loop;
	(void)revents;
	if (d->broken || d->conn == NULL || d->stopping)
		return;
	daemon_series_start(d);
	/* Only once both streams are read (the map is whole), and never
	 * while the broker blocks us: a publish could hang. */
	if (!d->consuming || d->replaying || d->out.blocked)
		return;
	stale = now - quarter -
	        (int64_t)(daemon_random_unit() * (double)(quarter / 8));
	(void)requests_series_refresh(
	    &d->requests, &d->series_cursor, REQUESTS_REFRESH_SLOTS,
	    REQUESTS_REFRESH_MAX, stale, now, daemon_series_rewrite, d);
}

void
daemon_series_start(struct daemon *d)
{
	ev_timer_stop(d->loop, &d->series_refresh);
	ev_timer_set(&d->series_refresh,
	             SERIES_REFRESH_TICK * (0.5 + daemon_random_unit()), 0.);
	ev_timer_start(d->loop, &d->series_refresh);
}

void
daemon_series_init(struct daemon *d)
{
	ev_init(&d->series_refresh, on_series_refresh);
	d->series_cursor = 0;
}
