/* SPDX-License-Identifier: Apache-2.0 */
/* Repeats' schedules: when each occurrence is due (schedule.h). */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "router.h"
#include "schedule.h"

Test(schedule, occurrences_never_drift_and_end_by_times_or_until)
{
	struct route r = {0};

	struct router_params p = {0};

	r.every = 1000;
	r.repeat = 1;
	r.first = 5000;
	r.occurrence = 1;
	cr_assert(router_series_next(&p, &r, 0));
	cr_assert_eq(r.occurrence, 2);
	cr_assert_eq(r.due, 6000);
	r.occurrence = 7; /* however late the 7th went out */
	cr_assert(router_series_next(&p, &r, 0));
	cr_assert_eq(r.due, 12000);
	r.occurrence = 7;
	r.times = 7;
	cr_assert_not(router_series_next(&p, &r, 0), "7 of 7");
	cr_assert_eq(r.occurrence, 7, "left as it was");
	r.times = 0;
	r.until = 11999;
	cr_assert_not(router_series_next(&p, &r, 0), "past until");
	r.every = 0;
	r.repeat = 0;
	cr_assert_not(router_series_next(&p, &r, 0), "not a repeat");
}

/* ---- the schedule: times from headers, bounded and never wrapping ---- */

#define T0 INT64_C(1700000000000) /* a "now" */
#define SEC INT64_C(1000)

/* A schedule of every ms from first, with optional end and mode. */
static struct schedule
plan(int64_t first, int64_t every, int64_t times, int64_t until, int all)
{
	struct schedule p = {first, every, times, until, all};

	return p;
}

/* First sight at T0: when the first delivery is due. */
Test(schedule, a_past_start_begins_at_the_next_occurrence_after_now)
{
	static const struct {
		const char *what;
		struct schedule p;
		int64_t due;
	} rows[] = {
	    {"due now", {T0, SEC, 0, 0, 0}, T0},
	    {"in the future", {T0 + 5 * SEC, SEC, 0, 0, 0}, T0 + 5 * SEC},
	    {"late within the grace", {T0 - 500, SEC, 0, 0, 0}, T0 - 500},
	    {"late by exactly the grace",
	     {T0 - SEC, 60 * SEC, 0, 0, 0},
	     T0 - SEC},
	    /* 1 ms past the grace: occurrence 2, 999 ms ago, is now. */
	    {"just past the grace", {T0 - SEC - 1, SEC, 0, 0, 0}, T0 - 1},
	    /* The flood: x-deliver-at: 1, every 1s.  The occurrence
	     * 999 ms ago is within the grace: delivered now. */
	    {"from 1970, every 1s", {1, SEC, 0, 0, 0}, T0 - 999},
	    {"from 1970, every 7s", {1, 7 * SEC, 0, 0, 0}, T0 + 1001},
	    {"phase kept, every 1h",
	     {T0 - 90 * 60 * SEC, 3600 * SEC, 0, 0, 0},
	     T0 + 30 * 60 * SEC},
	    {"all past by times", {T0 - 100 * SEC, SEC, 5, 0, 0}, T0},
	    {"all past by until",
	     {T0 - 100 * SEC, SEC, 0, T0 - 50 * SEC, 0},
	     T0},
	    {"until reached later",
	     {T0 - 100 * SEC, SEC, 0, T0 + SEC, 0},
	     T0 - SEC},
	    {"catch-up all starts at first", {1, SEC, 0, 0, 1}, 1},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		cr_expect_eq(schedule_start(&rows[i].p, T0), rows[i].due,
		             "%s: due %" PRId64 ", want %" PRId64, rows[i].what,
		             schedule_start(&rows[i].p, T0), rows[i].due);
}

/* A copy of occurrence k delivered at now: which occurrence it delivers. */
Test(schedule, missed_occurrences_collapse_into_one_delivery)
{
	static const struct {
		const char *what;
		struct schedule p;
		int64_t k, at, as;
	} rows[] = {
	    {"on time", {T0, SEC, 0, 0, 0}, 3, T0 + 2 * SEC, 3},
	    {"late by under one interval",
	     {T0, SEC, 0, 0, 0},
	     3,
	     T0 + 3 * SEC - 1,
	     3},
	    {"late by one interval", {T0, SEC, 0, 0, 0}, 3, T0 + 3 * SEC, 4},
	    {"an outage", {T0, SEC, 0, 0, 0}, 3, T0 + 9 * SEC + 5, 10},
	    {"rescheduled early", {T0, SEC, 0, 0, 0}, 3, T0, 3},
	    {"outage past times", {T0, SEC, 5, 0, 0}, 3, T0 + 99 * SEC, 5},
	    {"outage past until",
	     {T0, SEC, 0, T0 + 6 * SEC, 0},
	     3,
	     T0 + 99 * SEC,
	     7},
	    {"past start, from 1970", {1, SEC, 0, 0, 0}, 1, T0 + 1, 1700000001},
	    /* x-cascade-catch-up: all: each, unless more than 100 owed. */
	    {"all: an outage", {T0, SEC, 0, 0, 1}, 3, T0 + 9 * SEC + 5, 3},
	    {"all: 100 owed", {T0, SEC, 0, 0, 1}, 1, T0 + 99 * SEC, 1},
	    {"all: 101 owed", {T0, SEC, 0, 0, 1}, 1, T0 + 100 * SEC, 2},
	    {"all: 250 owed", {T0, SEC, 0, 0, 1}, 1, T0 + 249 * SEC, 151},
	    {"all: from 1970", {1, SEC, 0, 0, 1}, 1, T0 + 1, 1700000001 - 99},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		cr_expect_eq(
		    schedule_deliver_as(&rows[i].p, rows[i].k, rows[i].at),
		    rows[i].as, "%s: %" PRId64 ", want %" PRId64, rows[i].what,
		    schedule_deliver_as(&rows[i].p, rows[i].k, rows[i].at),
		    rows[i].as);
}

/* Caught up at 10 a second at most, so 100 owed drain in about 11 s. */
Test(schedule, catch_up_all_is_bounded_and_paced)
{
	struct schedule p = plan(T0, SEC, 0, 0, 1);
	int64_t k = 1, now = T0 + 249 * SEC, next, due, n = 0;

	k = schedule_deliver_as(&p, k, now);
	cr_assert_eq(k, 151, "the oldest 150 collapse");
	/* Deliver each as it falls due, as a daemon would. */
	while (schedule_next(&p, k, now, &next, &due) && n < 1000) {
		cr_assert_geq(due, now + SCHEDULE_PACE_MS, "paced");
		now = due;
		k = schedule_deliver_as(&p, next, now);
		cr_assert_eq(k, next, "no more collapse once within the bound");
		n++;
		if (schedule_last(&p, now) == k)
			break; /* caught up: the next is in the future */
	}
	cr_assert_leq(n, 112, "%" PRId64 " deliveries in a row", n);
	cr_assert_lt(now, T0 + 262 * SEC, "caught up by %" PRId64, now - T0);
	cr_assert(schedule_next(&p, k, now, &next, &due));
	cr_assert_eq(due, T0 + (next - 1) * SEC, "then on the schedule");
}

Test(schedule, the_next_copy_is_paced_and_ends_with_the_series)
{
	static const struct {
		const char *what;
		struct schedule p;
		int64_t k, now;
		int more;
		int64_t next, due;
	} rows[] = {
	    {"on schedule", {T0, SEC, 0, 0, 0}, 1, T0, 1, 2, T0 + SEC},
	    {"never sooner than the pace",
	     {T0, SEC, 0, 0, 1},
	     1,
	     T0 + 5 * SEC,
	     1,
	     2,
	     T0 + 5 * SEC + SCHEDULE_PACE_MS},
	    {"times reached", {T0, SEC, 3, 0, 0}, 3, T0, 0, 0, 0},
	    {"until reached", {T0, SEC, 0, T0 + 2 * SEC, 0}, 3, T0, 0, 0, 0},
	    {"until exactly the next",
	     {T0, SEC, 0, T0 + 2 * SEC, 0},
	     2,
	     T0,
	     1,
	     3,
	     T0 + 2 * SEC},
	    /* Never wraps: past the year 9999 the series ends. */
	    {"the next past 9999",
	     {SCHEDULE_TIME_MAX - SEC, SEC, 0, 0, 0},
	     2,
	     T0,
	     0,
	     0,
	     0},
	    {"k * every overflows",
	     {0, SCHEDULE_EVERY_LIMIT, 0, 0, 0},
	     INT64_MAX / 2,
	     T0,
	     0,
	     0,
	     0},
	    {"k at INT64_MAX", {0, SEC, 0, 0, 0}, INT64_MAX, T0, 0, 0, 0},
	    {"huge times is no limit",
	     {T0, SEC, INT64_MAX, 0, 0},
	     7,
	     T0,
	     1,
	     8,
	     T0 + 7 * SEC},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int64_t next = 0, due = 0;
		int more = schedule_next(&rows[i].p, rows[i].k, rows[i].now,
		                         &next, &due);
		cr_expect_eq(more, rows[i].more, "%s", rows[i].what);
		if (more && rows[i].more) {
			cr_expect_eq(next, rows[i].next, "%s", rows[i].what);
			cr_expect_eq(due, rows[i].due, "%s: due %" PRId64,
			             rows[i].what, due);
		}
	}
}

/* Every value from a header is bounded before any arithmetic. */
Test(schedule, values_out_of_range_are_refused)
{
	static const struct {
		const char *what;
		struct schedule p;
		int64_t k;
		const char *why; /* NULL: in range */
	} rows[] = {
	    {"fine", {T0, SEC, 0, 0, 0}, 1, NULL},
	    {"fine, far on", {T0, SEC, 0, 0, 0}, 1000000, NULL},
	    {"every at the bound", {T0, 365 * 86400 * SEC, 0, 0, 0}, 1, NULL},
	    {"every below 1s", {T0, 999, 0, 0, 0}, 1, "x-cascade-every"},
	    {"every above the bound",
	     {T0, 365 * 86400 * SEC + 1, 0, 0, 0},
	     1,
	     "x-cascade-every"},
	    {"every near INT64_MAX",
	     {T0, INT64_MAX, 0, 0, 0},
	     1,
	     "x-cascade-every"},
	    {"every negative", {T0, INT64_MIN, 0, 0, 0}, 1, "x-cascade-every"},
	    {"first negative", {-1, SEC, 0, 0, 0}, 1, "x-cascade-first"},
	    {"first past 9999",
	     {SCHEDULE_TIME_MAX + 1, SEC, 0, 0, 0},
	     1,
	     "x-cascade-first"},
	    {"first near INT64_MAX",
	     {INT64_MAX - 1, SEC, 0, 0, 0},
	     1,
	     "x-cascade-first"},
	    {"times negative", {T0, SEC, -1, 0, 0}, 1, "x-cascade-times"},
	    {"until negative", {T0, SEC, 0, -5, 0}, 1, "x-cascade-until"},
	    {"until near INT64_MAX",
	     {T0, SEC, 0, INT64_MAX, 0},
	     1,
	     "x-cascade-until"},
	    {"occurrence 0", {T0, SEC, 0, 0, 0}, 0, "x-cascade-occurrence"},
	    {"occurrence negative",
	     {T0, SEC, 0, 0, 0},
	     INT64_MIN,
	     "x-cascade-occurrence"},
	    {"occurrence past times",
	     {T0, SEC, 5, 0, 0},
	     6,
	     "x-cascade-occurrence"},
	    {"occurrence near INT64_MAX",
	     {T0, SEC, 0, 0, 0},
	     INT64_MAX - 1,
	     "x-cascade-occurrence"},
	    {"occurrence due past 9999",
	     {T0, SEC, 0, 0, 0},
	     (SCHEDULE_TIME_MAX - T0) / SEC + 2,
	     "x-cascade-occurrence"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *why = NULL;
		int rc = schedule_check(&rows[i].p, rows[i].k,
		                        365 * 86400 * SEC, &why);
		if (rows[i].why == NULL) {
			cr_expect_eq(rc, 0, "%s: %s", rows[i].what,
			             why ? why : "");
			continue;
		}
		cr_expect_eq(rc, -1, "%s: accepted", rows[i].what);
		cr_expect(rc < 0 && strstr(why, rows[i].why) != NULL,
		          "%s: \"%s\", want %s", rows[i].what,
		          rc < 0 ? why : "", rows[i].why);
	}
}

/* Extremes in any field: never a signed overflow (UBSan watches). */
Test(schedule, extremes_never_overflow)
{
	static const int64_t v[] = {
	    INT64_MIN,     -1,       0, 1, 999, SEC, SCHEDULE_TIME_MAX,
	    INT64_MAX - 1, INT64_MAX};
	const size_t n = sizeof(v) / sizeof(v[0]);
	int64_t next, due;

	for (size_t a = 0; a < n; a++)
		for (size_t b = 0; b < n; b++)
			for (size_t c = 0; c < n; c++) {
				struct schedule p = plan(
				    v[a] < 0 ? 0 : v[a] % SCHEDULE_TIME_MAX,
				    v[b] <= 0 ? 1 : v[b], 0, 0, (int)(c & 1));
				(void)schedule_at(&p, v[c], &due);
				(void)schedule_last(&p, v[c] < 0 ? 0 : v[c]);
				(void)schedule_next(&p, v[c], T0, &next, &due);
				(void)schedule_deliver_as(&p, 1, T0);
				(void)schedule_start(&p, T0);
			}
}
