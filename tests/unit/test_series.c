/* Repeats: which copy of a series is the live one (series.h). */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "router.h"
#include "series.h"

static amqp_bytes_t
b(const char *s)
{
	return amqp_cstring_bytes(s);
}

Test(series, a_copy_is_stale_below_the_latest_or_with_another_token)
{
	struct series s;

	series_init(&s);
	cr_assert_not(series_stale(&s, b("S"), 1, b("")), "nothing known");
	cr_assert_eq(series_add(&s, b("S"), 2, b("t1"), 1000, 0), 0);
	cr_assert(series_stale(&s, b("S"), 1, b("")), "the delivered one");
	cr_assert_not(series_stale(&s, b("S"), 2, b("t1")));
	/* A crash before the ack: occurrence 1 again, a second copy t2
	 * recorded later; the first copy t1 is now the stale one. */
	series_add(&s, b("S"), 2, b("t2"), 1000, 0);
	cr_assert(series_stale(&s, b("S"), 2, b("t1")));
	cr_assert_not(series_stale(&s, b("S"), 2, b("t2")));
	/* An older record read late changes nothing. */
	series_add(&s, b("S"), 3, b("t3"), 2000, 0);
	series_add(&s, b("S"), 2, b("t2"), 1000, 0);
	cr_assert(series_stale(&s, b("S"), 2, b("t2")));
	cr_assert_not(series_stale(&s, b("S"), 3, b("t3")));
	cr_assert_eq(series_prune(&s, 1999), 1);
	cr_assert_eq(series_prune(&s, 2000), 0);
	series_free(&s);
}

Test(series, occurrences_never_drift_and_end_by_times_or_until)
{
	struct route r = {0};

	r.every = 1000;
	r.first = 5000;
	r.occurrence = 1;
	cr_assert(router_series_next(&r, 0));
	cr_assert_eq(r.occurrence, 2);
	cr_assert_eq(r.due, 6000);
	r.occurrence = 7; /* however late the 7th went out */
	cr_assert(router_series_next(&r, 0));
	cr_assert_eq(r.due, 12000);
	r.occurrence = 7;
	r.times = 7;
	cr_assert_not(router_series_next(&r, 0), "7 of 7");
	cr_assert_eq(r.occurrence, 7, "left as it was");
	r.times = 0;
	r.until = 11999;
	cr_assert_not(router_series_next(&r, 0), "past until");
	r.every = 0;
	cr_assert_not(router_series_next(&r, 0), "not a repeat");
}

/* ---- the schedule: times from headers, bounded and never wrapping ---- */

#define T0 INT64_C(1700000000000) /* a "now" */
#define SEC INT64_C(1000)

/* A schedule of every ms from first, with optional end and mode. */
static struct series_plan
plan(int64_t first, int64_t every, int64_t times, int64_t until, int all)
{
	struct series_plan p = {first, every, times, until, all};

	return p;
}

/* First sight at T0: when the first delivery is due. */
Test(series, a_past_start_begins_at_the_next_occurrence_after_now)
{
	static const struct {
		const char *what;
		struct series_plan p;
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
		cr_expect_eq(series_start(&rows[i].p, T0), rows[i].due,
		             "%s: due %" PRId64 ", want %" PRId64, rows[i].what,
		             series_start(&rows[i].p, T0), rows[i].due);
}

/* A copy of occurrence k delivered at now: which occurrence it delivers. */
Test(series, missed_occurrences_collapse_into_one_delivery)
{
	static const struct {
		const char *what;
		struct series_plan p;
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
		    series_deliver_as(&rows[i].p, rows[i].k, rows[i].at),
		    rows[i].as, "%s: %" PRId64 ", want %" PRId64, rows[i].what,
		    series_deliver_as(&rows[i].p, rows[i].k, rows[i].at),
		    rows[i].as);
}

/* Caught up at 10 a second at most, so 100 owed drain in about 11 s. */
Test(series, catch_up_all_is_bounded_and_paced)
{
	struct series_plan p = plan(T0, SEC, 0, 0, 1);
	int64_t k = 1, now = T0 + 249 * SEC, next, due, n = 0;

	k = series_deliver_as(&p, k, now);
	cr_assert_eq(k, 151, "the oldest 150 collapse");
	/* Deliver each as it falls due, as a daemon would. */
	while (series_next(&p, k, now, &next, &due) && n < 1000) {
		cr_assert_geq(due, now + SERIES_PACE_MS, "paced");
		now = due;
		k = series_deliver_as(&p, next, now);
		cr_assert_eq(k, next, "no more collapse once within the bound");
		n++;
		if (series_last(&p, now) == k)
			break; /* caught up: the next is in the future */
	}
	cr_assert_leq(n, 112, "%" PRId64 " deliveries in a row", n);
	cr_assert_lt(now, T0 + 262 * SEC, "caught up by %" PRId64, now - T0);
	cr_assert(series_next(&p, k, now, &next, &due));
	cr_assert_eq(due, T0 + (next - 1) * SEC, "then on the schedule");
}

Test(series, the_next_copy_is_paced_and_ends_with_the_series)
{
	static const struct {
		const char *what;
		struct series_plan p;
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
	     T0 + 5 * SEC + SERIES_PACE_MS},
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
	     {SERIES_TIME_MAX - SEC, SEC, 0, 0, 0},
	     2,
	     T0,
	     0,
	     0,
	     0},
	    {"k * every overflows",
	     {0, SERIES_EVERY_LIMIT, 0, 0, 0},
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
		int more = series_next(&rows[i].p, rows[i].k, rows[i].now,
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
Test(series, values_out_of_range_are_refused)
{
	static const struct {
		const char *what;
		struct series_plan p;
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
	     {SERIES_TIME_MAX + 1, SEC, 0, 0, 0},
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
	     (SERIES_TIME_MAX - T0) / SEC + 2,
	     "x-cascade-occurrence"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *why = NULL;
		int rc = series_check(&rows[i].p, rows[i].k, 365 * 86400 * SEC,
		                      &why);
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
Test(series, extremes_never_overflow)
{
	static const int64_t v[] = {
	    INT64_MIN,     -1,       0, 1, 999, SEC, SERIES_TIME_MAX,
	    INT64_MAX - 1, INT64_MAX};
	const size_t n = sizeof(v) / sizeof(v[0]);
	int64_t next, due;

	for (size_t a = 0; a < n; a++)
		for (size_t b = 0; b < n; b++)
			for (size_t c = 0; c < n; c++) {
				struct series_plan p = plan(
				    v[a] < 0 ? 0 : v[a] % SERIES_TIME_MAX,
				    v[b] <= 0 ? 1 : v[b], 0, 0, (int)(c & 1));
				(void)series_at(&p, v[c], &due);
				(void)series_last(&p, v[c] < 0 ? 0 : v[c]);
				(void)series_next(&p, v[c], T0, &next, &due);
				(void)series_deliver_as(&p, 1, T0);
				(void)series_start(&p, T0);
			}
}

Test(series, a_token_of_any_length_is_held_whole)
{
	struct series s;
	char long_token[300];

	memset(long_token, 't', sizeof(long_token) - 1);
	long_token[sizeof(long_token) - 1] = '\0';
	series_init(&s);
	cr_assert_eq(series_add(&s, b("S"), 2, b(long_token), 1000, 0), 0);
	cr_assert_not(series_stale(&s, b("S"), 2, b(long_token)));
	/* One byte short is another token, not the same one cut. */
	long_token[298] = '\0';
	cr_assert(series_stale(&s, b("S"), 2, b(long_token)));
	/* A shorter token later: the head is sized again. */
	cr_assert_eq(series_add(&s, b("S"), 3, b("t3"), 2000, 0), 0);
	cr_assert_not(series_stale(&s, b("S"), 3, b("t3")));
	cr_assert(series_stale(&s, b("S"), 3, b("t")));
	cr_assert_eq(series_prune(&s, 2000), 0);
	series_free(&s);
}

/* A refresh writer for the tests: notes each id and what it was told. */
struct wrote {
	char ids[8][8];
	int64_t occurrence[8];
	unsigned n;
	int fail;
};

static int
note(amqp_bytes_t id, const struct series_head *h, void *ctx)
{
	struct wrote *w = ctx;

	if (w->fail)
		return -1;
	cr_assert_lt(w->n, 8);
	snprintf(w->ids[w->n], sizeof(w->ids[0]), "%.*s", (int)id.len,
	         (const char *)id.bytes);
	w->occurrence[w->n++] = h->occurrence;
	return 0;
}

/* One pass over the whole map: the ids written, sorted, joined by commas. */
static void
refresh_all(struct series *s, int64_t stale, int64_t now, struct wrote *w,
            char *out, size_t size)
{
	size_t cursor = 0, j = 0;

	memset(w, 0, sizeof(*w));
	do
		(void)series_refresh(s, &cursor, SERIES_REFRESH_SLOTS,
		                     SERIES_REFRESH_MAX, stale, now, note, w);
	while (cursor != 0);
	/* Slot order is the hash's: sort for the comparison. */
	for (unsigned i = 1; i < w->n; i++)
		for (unsigned k = i;
		     k > 0 && strcmp(w->ids[k - 1], w->ids[k]) > 0; k--) {
			char t[8];
			int64_t o = w->occurrence[k];
			memcpy(t, w->ids[k], sizeof(t));
			memcpy(w->ids[k], w->ids[k - 1], sizeof(t));
			memcpy(w->ids[k - 1], t, sizeof(t));
			w->occurrence[k] = w->occurrence[k - 1];
			w->occurrence[k - 1] = o;
		}
	out[0] = '\0';
	for (unsigned i = 0; i < w->n; i++)
		j += (size_t)snprintf(out + j, size - j, "%s%s", i ? "," : "",
		                      w->ids[i]);
}

/*
 * Which series the refresh writes again (CONTRACT.md 7.8): those whose
 * latest record was written at or before `stale` and are still in force;
 * a record read again later (another daemon's refresh) makes one fresh,
 * an older occurrence read late does not; once written, a series is fresh
 * until it grows old again.
 */
Test(series, the_refresh_writes_old_records_still_in_force)
{
	const int64_t now = 10000000, stale = now - 1000;
	struct series s;
	struct wrote w;
	char got[128];

	series_init(&s);
	/* old, in force */
	series_add(&s, b("A"), 2, b("a"), now + 50000, stale - 1);
	/* written exactly at the limit: old */
	series_add(&s, b("B"), 7, b("b"), now + 50000, stale);
	/* fresh */
	series_add(&s, b("C"), 2, b("c"), now + 50000, stale + 1);
	/* old but lapsed: nothing to keep */
	series_add(&s, b("D"), 2, b("d"), now, 0);
	/* old, then its record read again, written later: fresh */
	series_add(&s, b("E"), 3, b("e"), now + 50000, 0);
	series_add(&s, b("E"), 3, b("e"), now + 50000, now - 10);
	/* fresh, then an older occurrence read late: still fresh */
	series_add(&s, b("F"), 4, b("f"), now + 50000, now - 10);
	series_add(&s, b("F"), 3, b("f0"), now + 50000, 0);
	/* old, then a new occurrence written late: fresh */
	series_add(&s, b("G"), 4, b("g"), now + 50000, 0);
	series_add(&s, b("G"), 5, b("g2"), now + 50000, now - 10);
	/* fresh, then a record of the same occurrence with another token
	 * written long ago (a crash's second copy): that one is the latest,
	 * and old */
	series_add(&s, b("H"), 4, b("h"), now + 50000, now - 10);
	series_add(&s, b("H"), 4, b("h2"), now + 50000, 0);

	refresh_all(&s, stale, now, &w, got, sizeof(got));
	cr_assert_str_eq(got, "A,B,H");
	/* What it writes is the latest record: occurrence and token. */
	for (unsigned i = 0; i < w.n; i++) {
		const struct series_head *h = idmap_get(&s.map, b(w.ids[i]));
		cr_assert_eq(w.occurrence[i], h->occurrence);
		cr_assert_eq(h->written, now, "taken as written now");
	}
	/* Written: fresh until it grows old again. */
	refresh_all(&s, stale, now, &w, got, sizeof(got));
	cr_assert_str_eq(got, "");
	refresh_all(&s, now + 2000, now + 3000, &w, got, sizeof(got));
	cr_assert_str_eq(got, "A,B,C,E,F,G,H");
	/* A writer that fails leaves the record old, to try again. */
	{
		size_t cursor = 0;
		struct wrote f = {.fail = 1};
		cr_assert_eq(series_refresh(&s, &cursor, SERIES_REFRESH_SLOTS,
		                            10, now + 9000, now + 9000, note,
		                            &f),
		             0);
	}
	refresh_all(&s, now + 9000, now + 9000, &w, got, sizeof(got));
	cr_assert_str_eq(got, "A,B,C,E,F,G,H");
	series_free(&s);
}

/*
 * The work of a tick is bounded: at most `slots` slots looked at and `max`
 * records written, and the next tick goes on where this one stopped, so
 * that a pass over many ticks writes each old record once.
 */
Test(series, the_refresh_is_bounded_per_tick_and_goes_on_where_it_stopped)
{
	const int64_t now = 10000000;
	struct series s;
	struct wrote w;
	size_t cursor = 0, total = 0, ticks = 0;
	char id[8];

	series_init(&s);
	for (int i = 0; i < 40; i++) {
		snprintf(id, sizeof(id), "s%d", i);
		series_add(&s, b(id), 2, b("t"), now + 5000, 0);
	}
	cr_assert_eq(s.map.cap, 128);
	do {
		memset(&w, 0, sizeof(w));
		size_t n = series_refresh(&s, &cursor, 16, 3, now - 1000, now,
		                          note, &w);
		cr_assert_leq(n, 3);
		total += n;
		ticks++;
	} while (cursor != 0 && ticks < 1000);
	cr_assert_eq(total, 40, "each old record once in a pass");
	/* 128 slots, 16 a tick: at least 8 ticks; 40 records, 3 a tick: at
	 * least 14. */
	cr_assert_geq(ticks, 14);
	memset(&w, 0, sizeof(w));
	cr_assert_eq(
	    series_refresh(&s, &cursor, 128, 100, now - 1000, now, note, &w), 0,
	    "all fresh now");
	series_free(&s);
}
