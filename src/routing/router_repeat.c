/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A repeat's route (router_int.h): its headers read and checked, which
 * occurrence a delivery delivers, and its next copy.  Two kinds share the
 * series machinery (requests.h): an interval (x-cascade-every,
 * schedule.h) and a cron series (x-cascade-cron in x-cascade-tz, cron.h).
 * A cron series' zone is read from the tz database when it is first seen,
 * delivered, and given its next copy; never on a hop.
 */
#include "router_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "duration.h"
#include "headers.h"
#include "schedule.h"

/* r's schedule, as schedule.h reckons it. */
static void
router_schedule(const struct route *r, struct schedule *sp)
{
	sp->first = r->first;
	sp->every = r->every;
	sp->times = r->times;
	sp->until = r->until;
	sp->all = r->catch_up_all;
}

/*
 * One of a waiting copy's repeat headers, an integer, into *out: absent,
 * fallback; present, any integer (schedule_check bounds it).  -1 after
 * parking: our own state, garbled, is not guessed at.
 */
static int
router_repeat_integer(const amqp_table_t *h, const char *key, int64_t fallback,
                      int64_t *out, struct route *r)
{
	const amqp_field_value_t *v = headers_find(h, key);

	*out = fallback;
	if (v == NULL || headers_integer(v, out) == 1)
		return 0;
	router_park(r, PARK_bad_header, "%s: must be an integer", key);
	return -1;
}

/* A waiting copy's x-cascade-token; empty when absent or garbled (the
 * series records then tell it stale). */
static void
router_read_token(const amqp_table_t *h, struct route *r)
{
	const amqp_field_value_t *v = headers_find(h, "x-cascade-token");

	if (v == NULL || headers_string(v, &r->token) < 0)
		r->token = amqp_empty_bytes;
}

/* x-cascade-catch-up: absent, or all; -1 after parking on first sight. */
static int
router_read_catch_up(const amqp_table_t *h, struct route *r)
{
	const amqp_field_value_t *v = headers_find(h, "x-cascade-catch-up");
	amqp_bytes_t s;

	r->catch_up_all =
	    v != NULL && headers_string(v, &s) == 0 && headers_key_is(s, "all");
	if (v == NULL || r->catch_up_all || !r->fresh)
		return 0;
	router_park(r, PARK_bad_header,
	            "x-cascade-catch-up: must be all (or absent: missed "
	            "occurrences collapse into one delivery)");
	return -1;
}

/* The publisher's x-cascade-times, x-cascade-until and catch-up, for
 * either kind.  -1 after parking. */
static int
router_read_ends(const amqp_table_t *h, struct route *r)
{
	const amqp_field_value_t *v;
	const char *why;

	r->times = 0;
	v = headers_find(h, "x-cascade-times");
	if (v != NULL && (headers_integer(v, &r->times) != 1 || r->times < 1)) {
		router_park(r, PARK_bad_header,
		            "x-cascade-times: must be an integer of 1 or more");
		return -1;
	}
	r->until = 0;
	v = headers_find(h, "x-cascade-until");
	if (v != NULL && headers_epoch_ms(v, &r->until, &why) < 0) {
		router_park_header(r, "x-cascade-until", v, why);
		return -1;
	}
	/* At first sight, for a cron series as for an interval (whose
	 * schedule_check says so too): past the year 9999, its next copy
	 * could not carry it back (issue 47). */
	if (v != NULL && (r->until < 0 || r->until > SCHEDULE_TIME_MAX)) {
		router_park_header(r, "x-cascade-until", v,
		                   "out of range (Unix epoch ms, 1970 to the "
		                   "end of 9999)");
		return -1;
	}
	return router_read_catch_up(h, r);
}

/* A cron series' expression and zone, loaded (router_cron_load). */
struct cron_loaded {
	struct cron c;
	const struct zone *z; /* NULL: UTC */
	struct zone own;      /* loaded here, without a cache */
	int owned;
};

/*
 * A cron series' expression and zone, from r->cron and r->tz, into x
 * (router_cron_done after): the zone from p's cache when it has one.  -1
 * after parking, with the header at fault.
 */
static int
router_cron_load(const struct router_params *p, struct route *r, int64_t now,
                 struct cron_loaded *x)
{
	char err[160];

	x->z = NULL;
	x->owned = 0;
	if (cron_parse(&x->c, (const char *)r->cron.bytes, r->cron.len, err,
	               sizeof(err)) < 0) {
		router_park_header(r, "x-cascade-cron",
		                   &(amqp_field_value_t){AMQP_FIELD_KIND_UTF8,
		                                         {.bytes = r->cron}},
		                   err);
		return -1;
	}
	if (r->tz.len == 0)
		return 0;
	if (p != NULL && p->zones != NULL)
		x->z = zone_cached(p->zones, (const char *)r->tz.bytes,
		                   r->tz.len, now, err, sizeof(err));
	else if (zone_load(&x->own, (const char *)r->tz.bytes, r->tz.len, NULL,
	                   err, sizeof(err)) == 0)
		x->z = &x->own, x->owned = 1;
	if (x->z == NULL) {
		router_park_header(r, "x-cascade-tz",
		                   &(amqp_field_value_t){AMQP_FIELD_KIND_UTF8,
		                                         {.bytes = r->tz}},
		                   err);
		return -1;
	}
	return 0;
}

static void
router_cron_done(struct cron_loaded *x)
{
	if (x->owned)
		zone_free(&x->own);
}

static void
router_cron_schedule(const struct route *r, const struct cron_loaded *x,
                     struct schedule_cron *sc)
{
	sc->cron = &x->c;
	sc->zone = x->z;
	sc->times = r->times;
	sc->until = r->until;
	sc->all = r->catch_up_all;
}

/* A string header of a cron series, at most max bytes; -1 after
 * parking. */
static int
router_cron_string(const amqp_table_t *h, const char *key, size_t max,
                   amqp_bytes_t *out, struct route *r)
{
	const amqp_field_value_t *v = headers_find(h, key);

	*out = amqp_empty_bytes;
	if (v == NULL)
		return 0;
	if (headers_string(v, out) < 0 || out->len == 0 || out->len > max) {
		router_park(r, PARK_bad_header,
		            "%s: must be a string of 1 to %zu bytes", key, max);
		return -1;
	}
	return 0;
}

/*
 * A cron series: on first sight the publisher's expression and zone, its
 * ends, and occurrence 1, the first instant at or after its due time (its
 * delay headers: not before) and now; while it waits our own state.  -1
 * after parking.
 */
static int
router_read_cron(const struct router_params *p, const amqp_table_t *h,
                 int64_t now, struct route *r)
{
	struct cron_loaded x;
	struct schedule_cron sc;
	int64_t t;
	char a[32], b[32];

	if (router_cron_string(h, "x-cascade-cron", CRON_EXPR_MAX, &r->cron,
	                       r) < 0 ||
	    router_cron_string(h, "x-cascade-tz", ZONE_NAME_MAX, &r->tz, r) < 0)
		return -1;
	if (r->fresh) {
		if (headers_find(h, "x-cascade-every") != NULL) {
			router_park(r, PARK_bad_header,
			            "x-cascade-cron and x-cascade-every: a "
			            "repeat has one or the other");
			return -1;
		}
		if (router_read_ends(h, r) < 0)
			return -1;
		r->occurrence = 1;
		r->token = amqp_empty_bytes;
	} else {
		if (router_repeat_integer(h, "x-cascade-times", 0, &r->times,
		                          r) < 0 ||
		    router_repeat_integer(h, "x-cascade-until", 0, &r->until,
		                          r) < 0 ||
		    router_repeat_integer(h, "x-cascade-occurrence", 1,
		                          &r->occurrence, r) < 0 ||
		    router_repeat_integer(h, "x-cascade-scheduled", r->due,
		                          &r->at, r) < 0)
			return -1;
		(void)router_read_catch_up(h, r);
		if (r->times < 0 || r->until < 0 ||
		    r->until > SCHEDULE_TIME_MAX || r->occurrence < 1 ||
		    (r->times > 0 && r->occurrence > r->times) || r->at < 0 ||
		    r->at > SCHEDULE_TIME_MAX) {
			router_park(r, PARK_bad_header,
			            "x-cascade-occurrence, -times, -until or "
			            "-scheduled: out of range");
			return -1;
		}
		router_read_token(h, r);
		/* Checked when it is delivered: not on every hop. */
		r->repeat = 1;
		return 0;
	}
	if (router_cron_load(p, r, now, &x) < 0)
		return -1;
	router_cron_schedule(r, &x, &sc);
	t = schedule_cron_first(&sc, r->due > now ? r->due : now);
	router_cron_done(&x);
	if (t < 0) {
		router_park(r, PARK_bad_header,
		            "x-cascade-cron: no occurrence before "
		            "x-cascade-until or the year 9999");
		return -1;
	}
	if (t - now > p->max_delay + 86400000) {
		duration_format(t - now, a, sizeof(a));
		duration_format(p->max_delay, b, sizeof(b));
		router_park(r, PARK_bad_header,
		            "x-cascade-cron: the first occurrence is %s away, "
		            "more than max_delay %s and a day",
		            a, b);
		return -1;
	}
	r->at = r->due = t;
	r->repeat = 1;
	return 0;
}

int
router_read_repeat(const struct router_params *p, const amqp_table_t *h,
                   int64_t now, struct route *r)
{
	const amqp_field_value_t *v = headers_find(h, "x-cascade-every");
	struct schedule sp;
	const char *why;
	char a[32], b[32];

	r->every = 0;
	r->missed = 0;
	r->repeat = 0;
	if (headers_find(h, "x-cascade-cron") != NULL)
		return router_read_cron(p, h, now, r);
	if (v == NULL)
		return 0;
	if (!r->fresh) {
		if (router_repeat_integer(h, "x-cascade-every", 0, &r->every,
		                          r) < 0 ||
		    router_repeat_integer(h, "x-cascade-times", 0, &r->times,
		                          r) < 0 ||
		    router_repeat_integer(h, "x-cascade-until", 0, &r->until,
		                          r) < 0 ||
		    router_repeat_integer(h, "x-cascade-first", r->due,
		                          &r->first, r) < 0 ||
		    router_repeat_integer(h, "x-cascade-occurrence", 1,
		                          &r->occurrence, r) < 0)
			goto bad;
		(void)router_read_catch_up(h, r);
		router_schedule(r, &sp);
		/* max_delay may have been lowered since: its bound. */
		if (schedule_check(&sp, r->occurrence, SCHEDULE_EVERY_LIMIT,
		                   &why) < 0) {
			router_park(r, PARK_bad_header, "%s", why);
			goto bad;
		}
		router_read_token(h, r);
		(void)schedule_at(&sp, r->occurrence, &r->at);
		r->repeat = 1;
		return 0;
	}
	if (headers_delay(v, &r->every, &why) < 0) {
		router_park(r, PARK_bad_header, "x-cascade-every: %s", why);
		goto bad;
	}
	if (r->every < SCHEDULE_EVERY_MIN) {
		router_park(r, PARK_bad_header,
		            "x-cascade-every: must be at least 1s");
		goto bad;
	}
	/* The next copy waits up to every on the ladder, and its records
	 * must outlive that wait: max_delay bounds both. */
	if (r->every > p->max_delay) {
		duration_format(r->every, a, sizeof(a));
		duration_format(p->max_delay, b, sizeof(b));
		router_park(r, PARK_bad_header,
		            "x-cascade-every: %s exceeds max_delay %s", a, b);
		goto bad;
	}
	if (router_read_ends(h, r) < 0)
		goto bad;
	r->first = r->due;
	r->occurrence = 1;
	r->token = amqp_empty_bytes;
	router_schedule(r, &sp);
	if (schedule_check(&sp, 1, p->max_delay, &why) < 0) {
		/* Occurrence 1 is the publisher's due time. */
		router_park(r, PARK_bad_header, "%s",
		            r->first < 0 || r->first > SCHEDULE_TIME_MAX
		                ? "x-deliver-at: out of range for a repeat "
		                  "(1970 to 9999)"
		                : why);
		goto bad;
	}
	r->due = schedule_start(&sp, now);
	r->at = r->due;
	r->repeat = 1;
	return 0;
bad:
	r->every = 0;
	return -1;
}

/* A cron series' next copy (router_series_next). */
static int
router_cron_next(const struct router_params *p, struct route *r, int64_t now)
{
	struct cron_loaded x;
	struct schedule_cron sc;
	int ok;
	int64_t next, due;
	char a[32], b[32];

	if (router_cron_load(p, r, now, &x) < 0)
		return 1;
	router_cron_schedule(r, &x, &sc);
	ok = schedule_cron_next(&sc, r->occurrence + r->missed, r->deliver_at,
	                        now, &next, &due);
	router_cron_done(&x);
	if (!ok)
		return 0;
	r->occurrence += r->missed + 1;
	r->at = next;
	r->due = due;
	r->missed = 0;
	if (due - now > p->max_delay + 86400000) {
		duration_format(due - now, a, sizeof(a));
		duration_format(p->max_delay, b, sizeof(b));
		router_park(r, PARK_bad_header,
		            "x-cascade-cron: the next occurrence is %s away, "
		            "more than max_delay %s and a day",
		            a, b);
	}
	return 1;
}

int
router_series_next(const struct router_params *p, struct route *r, int64_t now)
{
	struct schedule sp;
	int64_t next, due;

	if (!r->repeat)
		return 0;
	if (r->cron.len > 0)
		return router_cron_next(p, r, now);
	router_schedule(r, &sp);
	if (!schedule_next(&sp, r->occurrence + r->missed, now, &next, &due))
		return 0;
	r->occurrence = next;
	r->due = due;
	(void)schedule_at(&sp, next, &r->at);
	r->missed = 0;
	return 1;
}

int
router_series_skip(const struct router_params *p, struct route *r, int64_t now)
{
	struct schedule sp;
	struct cron_loaded x;
	int64_t k, t, n, lim;

	if (!r->repeat)
		return 0;
	r->slot = 0;
	if (r->cron.len == 0) {
		router_schedule(r, &sp);
		k = schedule_last(&sp, now);
		if (k < r->occurrence)
			k = r->occurrence;
		if (k == INT64_MAX || !schedule_at(&sp, k + 1, &t))
			return 0;
		r->due = t;
		return 1;
	}
	if (router_cron_load(p, r, now, &x) < 0)
		return 1; /* parked: not ended */
	lim = r->until > 0 ? r->until : SCHEDULE_TIME_MAX;
	t = cron_next(&x.c, x.z, now, lim);
	n = t > r->at ? cron_count(&x.c, x.z, r->at, t) : 0;
	router_cron_done(&x);
	if (t < 0 || (r->times > 0 && r->occurrence + n > r->times))
		return 0;
	r->due = t;
	return 1;
}

void
router_deliver(const struct router_params *p, struct route *r, int64_t now)
{
	struct schedule sp;
	struct schedule_cron sc;
	struct cron_loaded x;

	r->action = ROUTE_DELIVER;
	r->level = -1;
	r->missed = 0;
	r->deliver_at = r->at;
	if (!r->repeat)
		return;
	if (r->cron.len == 0) {
		router_schedule(r, &sp);
		r->missed = schedule_deliver_as(&sp, r->occurrence, now) -
		            r->occurrence;
		(void)schedule_at(&sp, r->occurrence + r->missed,
		                  &r->deliver_at);
		return;
	}
	/* Garbled state, or a zone the tz database lost: parked, never
	 * delivered as a guess. */
	if (router_cron_load(p, r, now, &x) < 0)
		return;
	router_cron_schedule(r, &x, &sc);
	schedule_cron_deliver_as(&sc, r->occurrence, r->at, now, &r->missed,
	                         &r->deliver_at);
	router_cron_done(&x);
}
