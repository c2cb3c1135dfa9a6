/* SPDX-License-Identifier: Apache-2.0 */
/* Cron expressions and their instants in a zone (cron.h). */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cron.h"
#include "schedule.h"
#include "zone.h"

/* "2026-03-29T01:00:00Z" as Unix ms. */
static int64_t
iso(const char *s)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	cr_assert(sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon,
	                 &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec) == 6,
	          "%s", s);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm) * 1000;
}

static void
fmt(int64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (ms < 0) {
		snprintf(buf, len, "none");
		return;
	}
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static struct cron
parsed(const char *expr)
{
	struct cron c;
	char err[160];

	cr_assert(cron_parse(&c, expr, strlen(expr), err, sizeof(err)) == 0,
	          "%s: %s", expr, err);
	return c;
}

/* zone name ("" UTC) loaded into z; returns z or NULL for UTC. */
static const struct zone *
loaded(const char *name, struct zone *z)
{
	char err[160];

	if (name[0] == '\0')
		return NULL;
	cr_assert(zone_load(z, name, strlen(name), NULL, err, sizeof(err)) == 0,
	          "%s: %s", name, err);
	return z;
}

#define LIMIT INT64_C(253402300799999)

struct row {
	const char *zone, *expr, *after, *want;
};

static void
check_rows(const struct row *rows, size_t n)
{
	struct zone z;
	const struct zone *zp;
	struct cron c;
	char got[32];

	for (size_t i = 0; i < n; i++) {
		c = parsed(rows[i].expr);
		zp = loaded(rows[i].zone, &z);
		fmt(cron_next(&c, zp, iso(rows[i].after), LIMIT), got,
		    sizeof(got));
		cr_expect_str_eq(got, rows[i].want, "%s '%s' after %s",
		                 rows[i].zone, rows[i].expr, rows[i].after);
		if (zp != NULL)
			zone_free(&z);
	}
}

/* Every field form, in UTC. */
Test(cron, next_time_for_every_field_form)
{
	static const struct row rows[] = {
	    /* six fields, seconds first */
	    {"", "*/2 * * * * *", "2026-01-01T00:00:00Z",
	     "2026-01-01T00:00:02Z"},
	    {"", "*/2 * * * * *", "2026-01-01T00:00:01Z",
	     "2026-01-01T00:00:02Z"},
	    {"", "15,45 * * * * *", "2026-01-01T00:00:20Z",
	     "2026-01-01T00:00:45Z"},
	    /* five fields: second 0 */
	    {"", "* * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"},
	    {"", "0 9 * * 1-5", "2026-01-02T10:00:00Z",
	     "2026-01-05T09:00:00Z"}, /* Friday after 9: Monday */
	    {"", "0 9 * * MON-FRI", "2026-01-02T08:00:00Z",
	     "2026-01-02T09:00:00Z"},
	    {"", "0 0-10/5,30 * * * *", "2026-01-01T00:06:00Z",
	     "2026-01-01T00:10:00Z"},
	    {"", "0 30/15 * * * *", "2026-01-01T00:31:00Z",
	     "2026-01-01T00:45:00Z"},
	    {"", "0 0 1 */3 *", "2026-02-01T00:00:00Z", "2026-04-01T00:00:00Z"},
	    {"", "0 12 * jan,Jul *", "2026-02-01T00:00:00Z",
	     "2026-07-01T12:00:00Z"},
	    {"", "0 0 * * 7", "2026-01-01T00:00:00Z",
	     "2026-01-04T00:00:00Z"}, /* 7: Sunday */
	    {"", "0 0 * * 5-7", "2026-01-03T12:00:00Z", "2026-01-04T00:00:00Z"},
	    {"", "0 0 ? * SUN", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"},
	    /* both day fields restricted: either */
	    {"", "0 0 13 * 5", "2026-02-01T00:00:00Z", "2026-02-06T00:00:00Z"},
	    {"", "0 0 13 * 5", "2026-02-10T00:00:00Z", "2026-02-13T00:00:00Z"},
	    /* one starts with *: both */
	    {"", "0 0 */2 * 5", "2026-02-01T00:00:00Z", "2026-02-13T00:00:00Z"},
	    /* macros */
	    {"", "@yearly", "2026-03-01T00:00:00Z", "2027-01-01T00:00:00Z"},
	    {"", "@annually", "2026-03-01T00:00:00Z", "2027-01-01T00:00:00Z"},
	    {"", "@monthly", "2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z"},
	    {"", "@weekly", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"},
	    {"", "@daily", "2026-01-01T10:00:00Z", "2026-01-02T00:00:00Z"},
	    {"", "@midnight", "2026-01-01T10:00:00Z", "2026-01-02T00:00:00Z"},
	    {"", "@hourly", "2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z"},
	    /* extensions */
	    {"", "0 0 L * *", "2026-02-10T00:00:00Z", "2026-02-28T00:00:00Z"},
	    {"", "0 0 L * *", "2028-02-10T00:00:00Z", "2028-02-29T00:00:00Z"},
	    {"", "0 0 LW * *", "2026-01-01T00:00:00Z",
	     "2026-01-30T00:00:00Z"}, /* the 31st is a Saturday */
	    {"", "0 0 15W * *", "2026-08-01T00:00:00Z",
	     "2026-08-14T00:00:00Z"}, /* the 15th is a Saturday */
	    {"", "0 0 1W * *", "2026-07-31T00:00:00Z",
	     "2026-08-03T00:00:00Z"}, /* Saturday the 1st: Monday */
	    {"", "0 0 1W * *", "2026-10-31T00:00:00Z",
	     "2026-11-02T00:00:00Z"}, /* Sunday the 1st: Monday */
	    {"", "0 0 30W * *", "2026-05-01T00:00:00Z",
	     "2026-05-29T00:00:00Z"}, /* Saturday the 30th: Friday */
	    {"", "0 0 31W * *", "2026-05-01T00:00:00Z",
	     "2026-05-29T00:00:00Z"}, /* Sunday the 31st: Friday */
	    {"", "0 0 * * 5L", "2026-01-01T00:00:00Z", "2026-01-30T00:00:00Z"},
	    {"", "0 0 * * FRIL", "2026-01-01T00:00:00Z",
	     "2026-01-30T00:00:00Z"},
	    {"", "0 0 * * 1#2", "2026-02-01T00:00:00Z", "2026-02-09T00:00:00Z"},
	    {"", "0 0 * * MON#5", "2026-01-01T00:00:00Z",
	     "2026-03-30T00:00:00Z"},
	    /* rare, and never fired in the window asked */
	    {"", "0 0 29 2 *", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z"},
	    {"", "0 0 0 29 2 ?", "2028-02-29T00:00:00Z",
	     "2032-02-29T00:00:00Z"},
	    {"", "59 59 23 31 12 *", "9999-12-31T23:59:59Z", "none"},
	};

	check_rows(rows, sizeof(rows) / sizeof(rows[0]));
}

/*
 * Daylight saving, around both changes of 2026 and 2027: a fixed time that
 * does not exist fires once at the first instant after the gap, one that
 * occurs twice fires once at the first; an interval keeps its spacing in
 * real time (a skipped time is not there, a repeated one fires twice).
 */
Test(cron, daylight_saving_in_berlin)
{
	static const struct row rows[] = {
	    /* 2026-03-29: 02:00 CET -> 03:00 CEST at 01:00Z */
	    {"Europe/Berlin", "30 2 * * *", "2026-03-29T00:00:00Z",
	     "2026-03-29T01:00:00Z"},
	    {"Europe/Berlin", "30 2 * * *", "2026-03-29T01:00:00Z",
	     "2026-03-30T00:30:00Z"},
	    {"Europe/Berlin", "0 3 * * *", "2026-03-29T00:00:00Z",
	     "2026-03-29T01:00:00Z"},
	    {"Europe/Berlin", "*/15 * * * *", "2026-03-29T00:45:00Z",
	     "2026-03-29T01:00:00Z"},
	    {"Europe/Berlin", "30 * * * *", "2026-03-29T00:30:00Z",
	     "2026-03-29T01:30:00Z"},
	    {"Europe/Berlin", "0 9 * * 1-5", "2026-03-27T09:00:00Z",
	     "2026-03-30T07:00:00Z"},
	    /* 2026-10-25: 03:00 CEST -> 02:00 CET at 01:00Z */
	    {"Europe/Berlin", "30 2 * * *", "2026-10-24T23:00:00Z",
	     "2026-10-25T00:30:00Z"},
	    {"Europe/Berlin", "30 2 * * *", "2026-10-25T00:30:00Z",
	     "2026-10-26T01:30:00Z"},
	    {"Europe/Berlin", "*/30 * * * *", "2026-10-25T00:30:00Z",
	     "2026-10-25T01:00:00Z"},
	    {"Europe/Berlin", "*/30 * * * *", "2026-10-25T01:00:00Z",
	     "2026-10-25T01:30:00Z"},
	    {"Europe/Berlin", "30 * * * *", "2026-10-25T00:30:00Z",
	     "2026-10-25T01:30:00Z"},
	    /* 2027 */
	    {"Europe/Berlin", "30 2 * * *", "2027-03-28T00:00:00Z",
	     "2027-03-28T01:00:00Z"},
	    {"Europe/Berlin", "30 2 * * *", "2027-10-30T23:00:00Z",
	     "2027-10-31T00:30:00Z"},
	    {"Europe/Berlin", "30 2 * * *", "2027-10-31T00:30:00Z",
	     "2027-11-01T01:30:00Z"},
	    {"Europe/Berlin", "*/20 * * * *", "2027-10-31T00:40:00Z",
	     "2027-10-31T01:00:00Z"},
	};

	check_rows(rows, sizeof(rows) / sizeof(rows[0]));
}

Test(cron, daylight_saving_in_new_york)
{
	static const struct row rows[] = {
	    /* 2026-03-08: 02:00 EST -> 03:00 EDT at 07:00Z */
	    {"America/New_York", "30 2 * * *", "2026-03-08T05:00:00Z",
	     "2026-03-08T07:00:00Z"},
	    {"America/New_York", "*/10 * * * *", "2026-03-08T06:50:00Z",
	     "2026-03-08T07:00:00Z"},
	    /* 2026-11-01: 02:00 EDT -> 01:00 EST at 06:00Z */
	    {"America/New_York", "30 1 * * *", "2026-11-01T04:00:00Z",
	     "2026-11-01T05:30:00Z"},
	    {"America/New_York", "30 1 * * *", "2026-11-01T05:30:00Z",
	     "2026-11-02T06:30:00Z"},
	    {"America/New_York", "*/20 * * * *", "2026-11-01T05:40:00Z",
	     "2026-11-01T06:00:00Z"},
	    /* 2027 */
	    {"America/New_York", "30 2 * * *", "2027-03-14T05:00:00Z",
	     "2027-03-14T07:00:00Z"},
	    {"America/New_York", "30 1 * * *", "2027-11-07T05:30:00Z",
	     "2027-11-08T06:30:00Z"},
	    {"America/New_York", "0 * * * *", "2027-11-07T05:00:00Z",
	     "2027-11-07T06:00:00Z"},
	};

	check_rows(rows, sizeof(rows) / sizeof(rows[0]));
}

/* A 30-minute shift, in the southern hemisphere. */
Test(cron, daylight_saving_on_lord_howe)
{
	static const struct row rows[] = {
	    /* 2026-04-05: 02:00 +11 -> 01:30 +1030 at 15:00Z (the 4th) */
	    {"Australia/Lord_Howe", "45 1 * * *", "2026-04-04T14:00:00Z",
	     "2026-04-04T14:45:00Z"},
	    {"Australia/Lord_Howe", "45 1 * * *", "2026-04-04T14:45:00Z",
	     "2026-04-05T15:15:00Z"},
	    {"Australia/Lord_Howe", "*/15 * * * *", "2026-04-04T14:45:00Z",
	     "2026-04-04T15:00:00Z"},
	    {"Australia/Lord_Howe", "*/15 * * * *", "2026-04-04T15:00:00Z",
	     "2026-04-04T15:15:00Z"},
	    /* 2026-10-04: 02:00 +1030 -> 02:30 +11 at 15:30Z (the 3rd) */
	    {"Australia/Lord_Howe", "15 2 * * *", "2026-10-03T12:00:00Z",
	     "2026-10-03T15:30:00Z"},
	    {"Australia/Lord_Howe", "*/15 * * * *", "2026-10-03T15:15:00Z",
	     "2026-10-03T15:30:00Z"},
	    /* 2027 */
	    {"Australia/Lord_Howe", "45 1 * * *", "2027-04-03T14:45:00Z",
	     "2027-04-04T15:15:00Z"},
	    {"Australia/Lord_Howe", "15 2 * * *", "2027-10-02T12:00:00Z",
	     "2027-10-02T15:30:00Z"},
	};

	check_rows(rows, sizeof(rows) / sizeof(rows[0]));
}

Test(cron, a_zone_without_daylight_saving)
{
	static const struct row rows[] = {
	    {"Asia/Kolkata", "0 9 * * *", "2026-03-01T00:00:00Z",
	     "2026-03-01T03:30:00Z"},
	    {"Asia/Kolkata", "0 9 * * *", "2026-10-25T03:30:00Z",
	     "2026-10-26T03:30:00Z"},
	    {"UTC", "0 9 * * *", "2026-03-29T00:00:00Z",
	     "2026-03-29T09:00:00Z"},
	};

	check_rows(rows, sizeof(rows) / sizeof(rows[0]));
}

/*
 * The same rules, by brute force: every second of a window around each
 * change, its local time from the C library (TZ, in this test only), and
 * the rule applied to it.  cron_next must step through exactly those.
 */
static int
local_matches(const struct cron *c, const struct tm *tm)
{
	struct tm u = *tm;
	time_t t;
	int64_t got;

	/* Does c name this local time?  Ask cron_next in UTC for the
	 * second before the same wall-clock time read as UTC. */
	u.tm_isdst = 0;
	t = timegm(&u);
	got = cron_next(c, NULL, (int64_t)t * 1000 - 1, LIMIT);
	return got == (int64_t)t * 1000;
}

static void
brute_force(const char *zone, const char *expr, const char *from, int hours)
{
	struct zone z;
	struct cron c = parsed(expr);
	int64_t a = iso(from) / 1000, s, want, got, prev_t;
	struct tm tm, tb;
	time_t t;
	char w[32], g[32];
	int fires;

	setenv("TZ", zone, 1);
	tzset();
	loaded(zone, &z);
	got = a * 1000;
	for (s = a + 1; s <= a + hours * 3600; s++) {
		t = (time_t)s;
		localtime_r(&t, &tm);
		fires = local_matches(&c, &tm);
		if (fires && !c.interval) {
			/* A fixed time fires in its first pass only. */
			for (int d = 1800; d <= 7200 && fires; d += 1800) {
				time_t e = t - d;
				localtime_r(&e, &tb);
				if (tb.tm_hour == tm.tm_hour &&
				    tb.tm_min == tm.tm_min &&
				    tb.tm_sec == tm.tm_sec &&
				    tb.tm_mday == tm.tm_mday)
					fires = 0;
			}
		}
		if (!fires && !c.interval) {
			/* Clocks went forward at s: a fixed time skipped
			 * fires now. */
			time_t e = t - 1;
			localtime_r(&e, &tb);
			if (tm.tm_gmtoff > tb.tm_gmtoff) {
				struct tm l = tb;
				for (long k = 1;
				     k < tm.tm_gmtoff - tb.tm_gmtoff; k++) {
					struct tm x = l;
					time_t lt;
					x.tm_sec += (int)k;
					x.tm_isdst = 0;
					lt = timegm(&x);
					gmtime_r(&lt, &x);
					if (local_matches(&c, &x)) {
						fires = 1;
						break;
					}
				}
			}
		}
		if (!fires)
			continue;
		want = s * 1000;
		prev_t = got;
		got = cron_next(&c, &z, prev_t, LIMIT);
		fmt(want, w, sizeof(w));
		fmt(got, g, sizeof(g));
		cr_assert_str_eq(g, w, "%s '%s': the firing after %" PRId64,
		                 zone, expr, prev_t);
		cr_assert_eq(cron_count(&c, &z, a * 1000, got),
		             cron_count(&c, &z, a * 1000, prev_t) + 1);
	}
	zone_free(&z);
	unsetenv("TZ");
	tzset();
}

Test(cron, matches_the_c_library_second_by_second_around_changes)
{
	static const struct {
		const char *zone, *from;
	} changes[] = {
	    {"Europe/Berlin", "2026-03-28T22:00:00Z"},
	    {"Europe/Berlin", "2026-10-24T22:00:00Z"},
	    {"America/New_York", "2027-03-14T04:00:00Z"},
	    {"America/New_York", "2027-11-07T03:00:00Z"},
	    {"Australia/Lord_Howe", "2026-04-04T12:00:00Z"},
	    {"Australia/Lord_Howe", "2027-10-02T12:00:00Z"},
	};
	static const char *const exprs[] = {
	    "*/15 * * * *", "30 2 * * *",    "45 1 * * *",   "15 2 * * *",
	    "0 * * * *",    "*/7 1-3 * * *", "20 */2 * * *",
	};

	for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++)
		for (size_t j = 0; j < sizeof(exprs) / sizeof(exprs[0]); j++)
			brute_force(changes[i].zone, exprs[j], changes[i].from,
			            8);
}

/* cron_count and cron_nth agree with stepping, over long spans too. */
Test(cron, count_and_nth_agree_with_stepping)
{
	static const char *const zones[] = {
	    "", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"};
	static const char *const exprs[] = {
	    "*/2 * * * * *", "0 9 * * 1-5", "30 2 * * *",  "*/15 * * * *",
	    "0 0 L * *",     "0 0 * * 5L",  "7 */3 * * *", "@hourly",
	};
	struct zone z;
	const struct zone *zp;
	struct cron c;
	int64_t a = iso("2026-01-01T00:00:00Z") + 123, t, n;

	for (size_t i = 0; i < sizeof(zones) / sizeof(zones[0]); i++) {
		zp = loaded(zones[i], &z);
		for (size_t j = 0; j < sizeof(exprs) / sizeof(exprs[0]); j++) {
			c = parsed(exprs[j]);
			t = a;
			for (n = 1; n <= 600; n++) {
				int64_t u = cron_next(&c, zp, t, LIMIT);
				cr_assert_gt(u, t);
				t = u;
				if (n % 37 != 0 && n != 600)
					continue;
				cr_assert_eq(cron_count(&c, zp, a, t), n,
				             "%s '%s' n=%" PRId64, zones[i],
				             exprs[j], n);
				cr_assert_eq(cron_count(&c, zp, a, t - 1),
				             n - 1);
				cr_assert_eq(cron_nth(&c, zp, a, n, t + 5000),
				             t);
			}
		}
		if (zp != NULL)
			zone_free(&z);
	}
	/* A year of a weekday schedule in Berlin: 261 days. */
	zp = loaded("Europe/Berlin", &z);
	c = parsed("0 9 * * MON-FRI");
	cr_assert_eq(cron_count(&c, zp, iso("2026-01-01T00:00:00Z"),
	                        iso("2027-01-01T00:00:00Z")),
	             261);
	/* Both days of the changes: 23 and 25 hours. */
	c = parsed("0 * * * *");
	cr_assert_eq(cron_count(&c, zp, iso("2026-03-28T23:00:00Z") - 1,
	                        iso("2026-03-29T22:00:00Z") - 1),
	             23);
	cr_assert_eq(cron_count(&c, zp, iso("2026-10-24T22:00:00Z") - 1,
	                        iso("2026-10-25T23:00:00Z") - 1),
	             25);
	c = parsed("30 2 * * *");
	cr_assert_eq(cron_count(&c, zp, iso("2026-03-28T00:00:00Z"),
	                        iso("2026-03-31T00:00:00Z")),
	             3, "the skipped one fires once");
	cr_assert_eq(cron_count(&c, zp, iso("2026-10-24T00:00:00Z"),
	                        iso("2026-10-27T00:00:00Z")),
	             3, "the repeated one fires once");
	zone_free(&z);
}

struct bad {
	const char *expr, *why;
};

Test(cron, a_bad_expression_names_its_field)
{
	static const struct bad rows[] = {
	    {"60 * * * *", "minute field '60': 60 is out of range 0-59"},
	    {"* 25 * * *", "hour field '25': 25 is out of range 0-23"},
	    {"* * 0 * *", "day-of-month field '0': 0 is out of range 1-31"},
	    {"* * * 13 *", "month field '13': 13 is out of range 1-12"},
	    {"* * * * 8", "day-of-week field '8': 8 is out of range 0-7"},
	    {"61 * * * * *", "second field '61'"},
	    {"* * * *", "expected 5 or 6 fields, found 4"},
	    {"* * * * * * *", "expected 5 or 6 fields, found more"},
	    {"", "must be 1 to"},
	    {"0 0 30 2 *", "never fires"},
	    {"0 0 31 4,6,9,11 *", "never fires"},
	    {"0 0 * * FRI-MON", "must not wrap"},
	    {"*/0 * * * *", "a step must be 1 or more"},
	    {"*/61 * * * *", "a step must be 1 or more"},
	    {"1,,2 * * * *", "an empty item"},
	    {"1, * * * *", "an empty item"},
	    {"0 0 * * 1#6", "# must be followed by 1 to 5"},
	    {"0 0 32W * *", "32 is out of range 1-31"},
	    {"0 0 * FOO *", "month field 'FOO': expected a value"},
	    {"0 0 * * MON-", "a range needs an end"},
	    {"0 0 1-2-3 * *", "unexpected characters"},
	    {"0 0 0 1 ? *", "month field '?'"},
	    {"? * * * *", "minute field '?'"},
	    {"00000 * * * *", "expected a value"},
	    {"@every 5m", "not one of @yearly"},
	    {"0 0 * * L", "expected a value"},
	    {"0 0 * * 7/2", "day-of-week field '7/2': names no value"},
	    {"0 0 \x01 * *", "byte 5: not a printable ASCII character"},
	};
	struct cron c;
	char err[160];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		err[0] = '\0';
		cr_expect(cron_parse(&c, rows[i].expr, strlen(rows[i].expr),
		                     err, sizeof(err)) < 0,
		          "'%s' was taken", rows[i].expr);
		cr_expect(strstr(err, rows[i].why) != NULL,
		          "'%s': said '%s', not '%s'", rows[i].expr, err,
		          rows[i].why);
	}
}

/* The series reckoning of a cron schedule (schedule.h). */
Test(cron, a_series_collapses_or_catches_up_what_it_missed)
{
	struct cron c = parsed("*/2 * * * * *");
	struct schedule_cron p = {&c, NULL, 0, 0, 0};
	int64_t t0 = iso("2026-05-01T00:00:00Z"), missed, as, next, due;

	cr_assert_eq(schedule_cron_first(&p, t0), t0, "at its start");
	cr_assert_eq(schedule_cron_first(&p, t0 + 1), t0 + 2000);
	/* On time: itself. */
	schedule_cron_deliver_as(&p, 5, t0, t0 + 300, &missed, &as);
	cr_assert_eq(missed, 0);
	cr_assert_eq(as, t0);
	/* Ten seconds late: the last due, five skipped. */
	schedule_cron_deliver_as(&p, 5, t0, t0 + 10500, &missed, &as);
	cr_assert_eq(missed, 5);
	cr_assert_eq(as, t0 + 10000);
	cr_assert(schedule_cron_next(&p, 10, as, t0 + 10500, &next, &due));
	cr_assert_eq(next, t0 + 12000);
	cr_assert_eq(due, t0 + 12000);
	/* A day late, catching up: the oldest of the last 100. */
	p.all = 1;
	schedule_cron_deliver_as(&p, 5, t0, t0 + 86400000, &missed, &as);
	cr_assert_eq(missed, 43200 - 99);
	cr_assert_eq(as, t0 + (43200 - 99) * 2000);
	/* Paced: never sooner than 100 ms after the delivery. */
	cr_assert(schedule_cron_next(&p, 6, t0, t0 + 86400000, &next, &due));
	cr_assert_eq(next, t0 + 2000);
	cr_assert_eq(due, t0 + 86400000 + 100);
	/* times and until end it, missed ones among them. */
	p.all = 0;
	p.times = 8;
	schedule_cron_deliver_as(&p, 5, t0, t0 + 10500, &missed, &as);
	cr_assert_eq(missed, 3);
	cr_assert_not(schedule_cron_next(&p, 8, as, t0 + 10500, &next, &due));
	p.times = 0;
	p.until = t0 + 4000;
	schedule_cron_deliver_as(&p, 1, t0, t0 + 10500, &missed, &as);
	cr_assert_eq(missed, 2);
	cr_assert_eq(as, t0 + 4000);
	cr_assert_not(schedule_cron_next(&p, 3, as, t0 + 10500, &next, &due));
	cr_assert_eq(schedule_cron_first(&p, t0 + 4001), -1);
}
