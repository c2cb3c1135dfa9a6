/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Schedules: when each occurrence of a repeat (x-cascade-every, first,
 * times, until, catch-up) is due, which one a late delivery delivers, and
 * when the copy after it is due.  Pure arithmetic on values from headers,
 * no state: which copy of a series is the live one is request state
 * (requests.h).  Pure code.
 */
#ifndef CASCADE_SCHEDULE_H
#define CASCADE_SCHEDULE_H

#include <stdint.h>

#include "cron.h"

/*
 * The schedule.  Occurrence k (k >= 1) of a series is due at
 * first + (k - 1) * every.  Every value comes from a header, so each is
 * range-checked (schedule_check) before any arithmetic, and the arithmetic
 * is checked too: a time past SCHEDULE_TIME_MAX ends the series, never wraps.
 */
/* The latest time a schedule reaches: 9999-12-31T23:59:59.999Z. */
#define SCHEDULE_TIME_MAX INT64_C(253402300799999)
/* The shortest interval, and the longest any copy may carry (a publisher's
 * is bounded by [router] max_delay, whose own bound this is). */
#define SCHEDULE_EVERY_MIN INT64_C(1000)
#define SCHEDULE_EVERY_LIMIT INT64_C(315360000000)
/* First sight: a first occurrence due at most this long ago is "now". */
#define SCHEDULE_GRACE_MS INT64_C(1000)
/* x-cascade-catch-up: all: at most this many occurrences owed at once
 * (older ones collapse), delivered no closer together than the pace.
 * Every copy, in both modes, is due at least the pace after the delivery
 * before it. */
#define SCHEDULE_CATCH_UP_MAX INT64_C(100)
#define SCHEDULE_PACE_MS INT64_C(100)

struct schedule {
	int64_t first; /* occurrence 1's due time, Unix epoch ms */
	int64_t every; /* ms */
	int64_t times; /* how many in all; 0: no limit */
	int64_t until; /* none due after this, Unix epoch ms; 0: none */
	int all;       /* x-cascade-catch-up: all */
};

/*
 * Is p, with a copy of occurrence k, in range: every within
 * [SCHEDULE_EVERY_MIN, max_every], first and until within [0,
 * SCHEDULE_TIME_MAX], times >= 0, 1 <= k and (with times) k <= times, and
 * occurrence k's due time computable?  0, or -1 with the header at fault
 * in *why.
 */
int schedule_check(const struct schedule *p, int64_t k, int64_t max_every,
                   const char **why);

/*
 * Occurrence k's due time into *due: 1, or 0 when k is not in the series
 * (below 1, past times, due after until, or past SCHEDULE_TIME_MAX).
 * Occurrence 1 is always in it.
 */
int schedule_at(const struct schedule *p, int64_t k, int64_t *due);

/* The last occurrence of the series due at or before t; 0 when none. */
int64_t schedule_last(const struct schedule *p, int64_t t);

/*
 * First sight at now: when the series' first delivery is due.  first,
 * when it is at most SCHEDULE_GRACE_MS ago or with catch-up all; else the
 * first occurrence due at or after now - SCHEDULE_GRACE_MS (the occurrences
 * before it are missed), or now when the whole series is past.
 */
int64_t schedule_start(const struct schedule *p, int64_t now);

/*
 * A copy of occurrence k delivered at now: which occurrence it delivers.
 * k itself, unless later ones are due too; then by default the last due
 * (those between are missed), with catch-up all k, or the oldest of the
 * last SCHEDULE_CATCH_UP_MAX due when more are owed.
 */
int64_t schedule_deliver_as(const struct schedule *p, int64_t k, int64_t now);

/*
 * The copy after occurrence k, delivered at now: 1 with its occurrence
 * and due time (never before now + SCHEDULE_PACE_MS), or 0 when the series
 * ends with k.
 */
int schedule_next(const struct schedule *p, int64_t k, int64_t now,
                  int64_t *next, int64_t *due);

/*
 * A cron series (x-cascade-cron, cron.h).  Occurrence 1 is the first
 * instant its expression names at or after the start; occurrence k + 1
 * the first after occurrence k.  times and until end it, and missed
 * occurrences collapse or are caught up, as for an interval; the
 * occurrences are counted from the expression (cron_count), so a copy
 * knows how many it stands for after any outage.
 */
struct schedule_cron {
	const struct cron *cron;
	const struct zone *zone; /* NULL: UTC */
	int64_t times;           /* 0: no limit */
	int64_t until;           /* 0: none */
	int all;                 /* x-cascade-catch-up: all */
};

/* Occurrence 1: the first instant at or after from; -1: none (after
 * until, or SCHEDULE_TIME_MAX). */
int64_t schedule_cron_first(const struct schedule_cron *p, int64_t from);

/*
 * A copy of occurrence k, scheduled at `at`, delivered at now: how many
 * later occurrences it delivers past (*missed: 0 unless the next is due
 * too; by the rule of schedule_deliver_as), and the scheduled time of the
 * occurrence it delivers, k + *missed (*as).
 */
void schedule_cron_deliver_as(const struct schedule_cron *p, int64_t k,
                              int64_t at, int64_t now, int64_t *missed,
                              int64_t *as);

/*
 * After occurrence j, scheduled at `at`, delivered at now: 1 with the
 * next occurrence's time (*next_at) and the copy's due time (*due: never
 * before now + SCHEDULE_PACE_MS), 0 when the series ends with j.
 */
int schedule_cron_next(const struct schedule_cron *p, int64_t j, int64_t at,
                       int64_t now, int64_t *next_at, int64_t *due);

#endif
