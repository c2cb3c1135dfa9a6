/* SPDX-License-Identifier: Apache-2.0 */
/* Repeats (schedule.h) through the router: no flood, no wrap. */
#include "amqp_compat.h"
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "headers.h"
#include "ladder.h"
#include "router.h"
#include "schedule.h"

#include "helpers.h"

/* The former default ladder (2s x 4, 12 levels), router settings, round-up. */
ROUTER_FIXTURE(router);

/* A repeat published at now with the given headers. */
static void
repeat_at(struct tb *t, int64_t now, struct route *r)
{
	amqp_basic_properties_t p = props_of(t);

	decide(ROUTE_FROM_INGRESS, &p, "orders", now, r);
}

/* The flood: x-deliver-at: 1, every 1s, seen at NOW + 500. */
Test(router, a_repeat_from_1970_delivers_once_with_the_missed_count)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t in, out;
	struct route r;

	tb_i64(&t, "x-deliver-at", 1);
	tb_str(&t, "x-cascade-every", "1s");
	repeat_at(&t, NOW + 500, &r);
	in = props_of(&t);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	cr_assert_eq(r.first, 1);
	cr_assert_eq(r.occurrence, 1);
	/* Occurrences 1 .. NOW/1000 were missed; NOW + 1 is delivered. */
	cr_assert_eq(r.missed, NOW / 1000, "missed %" PRId64, r.missed);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	expect_hdr_int(&out.headers, "x-cascade-occurrence", NOW / 1000 + 1);
	expect_hdr_int(&out.headers, "x-cascade-missed", NOW / 1000);
	/* The next copy: the next second, not the next of 1970. */
	cr_assert(router_series_next(&params, &r, NOW + 510));
	cr_assert_eq(r.occurrence, NOW / 1000 + 2);
	cr_assert_eq(r.due, NOW + 1001);
	cr_assert_eq(r.missed, 0);
}

/* Phase kept: a past daily start waits for today's occurrence. */
Test(router, a_past_start_waits_for_the_next_occurrence)
{
	struct tb t = {.n = 0};
	amqp_basic_properties_t in, out;
	struct route r;

	tb_i64(&t, "x-deliver-at", NOW - 3 * DAY - 3600000);
	tb_str(&t, "x-cascade-every", "1d");
	repeat_at(&t, NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.due, NOW + DAY - 3600000);
	cr_assert_eq(r.occurrence, 1, "the copy is still occurrence 1");
	/* Delivered then: as occurrence 5, the 4 before it missed. */
	router_step(&params, &r, r.due);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	cr_assert_eq(r.missed, 4);
	in = props_of(&t);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	expect_hdr_int(&out.headers, "x-cascade-occurrence", 5);
	expect_hdr_int(&out.headers, "x-cascade-missed", 4);
}

/* A waiting copy's state, as router_props wrote it. */
static void
waiting_copy(struct tb *t, int64_t due, int64_t first, int64_t occurrence)
{
	tb_i64(t, "x-cascade-due", due);
	tb_str(t, "x-cascade-exchange", "");
	tb_str(t, "x-cascade-routing-key", "orders");
	tb_str(t, "x-cascade-id", "0123456789abcdef");
	tb_i64(t, "x-cascade-every", 1000);
	tb_i64(t, "x-cascade-first", first);
	tb_i64(t, "x-cascade-occurrence", occurrence);
	tb_str(t, "x-cascade-token", "feedfacefeedface");
}

/* Back after an outage: one delivery, then the next second. */
Test(router, an_outage_collapses_into_one_delivery)
{
	static const struct {
		const char *what;
		int catch_up_all;
		int64_t late, missed;
	} rows[] = {
	    {"on time", 0, 0, 0},
	    {"late under one interval", 0, 999, 0},
	    {"late one interval", 0, 1000, 1},
	    {"down 10 minutes", 0, 600000, 600},
	    {"down 10 minutes, catch-up all", 1, 600000, 600 - 99},
	    {"down 50 s, catch-up all", 1, 50000, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct tb t = {.n = 0};
		amqp_basic_properties_t in, out;
		struct route r;

		waiting_copy(&t, NOW, NOW - 2000, 3);
		if (rows[i].catch_up_all)
			tb_str(&t, "x-cascade-catch-up", "all");
		in = props_of(&t);
		decide(ROUTE_FROM_RETURN, &in, "cascade.return",
		       NOW + rows[i].late, &r);
		cr_assert_eq(r.action, ROUTE_DELIVER, "%s", rows[i].what);
		cr_expect_eq(r.missed, rows[i].missed, "%s: missed %" PRId64,
		             rows[i].what, r.missed);
		cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
		expect_hdr_int(&out.headers, "x-cascade-occurrence",
		               3 + rows[i].missed);
		if (rows[i].missed == 0)
			expect_no_hdr(&out.headers, "x-cascade-missed");
		cr_assert(router_series_next(&params, &r, NOW + rows[i].late));
		cr_expect_geq(r.due, NOW + rows[i].late + SCHEDULE_PACE_MS,
		              "%s: next copy paced", rows[i].what);
		if (!rows[i].catch_up_all)
			cr_expect_leq(r.due, NOW + rows[i].late + 1000,
			              "%s: next copy within a second",
			              rows[i].what);
	}
}

Test(router, catch_up_is_all_or_absent_and_rides_the_waiting_copy)
{
	struct tb t = {.n = 0}, u = {.n = 0};
	amqp_basic_properties_t in, out;
	struct route r;

	tb_str(&t, "x-remaining-delay", "1h");
	tb_str(&t, "x-cascade-every", "1s");
	tb_str(&t, "x-cascade-catch-up", "all");
	repeat_at(&t, NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(r.catch_up_all, 1);
	in = props_of(&t);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	expect_hdr_str(&out.headers, "x-cascade-catch-up", "all");
	/* Delivered: gone. */
	router_step(&params, &r, r.due);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	expect_no_hdr(&out.headers, "x-cascade-catch-up");

	tb_str(&u, "x-remaining-delay", "1h");
	tb_str(&u, "x-cascade-every", "1s");
	tb_str(&u, "x-cascade-catch-up", "some");
	repeat_at(&u, NOW, &r);
	expect_park(&r, "x-cascade-catch-up: must be all");
	cr_assert_eq(r.park, PARK_bad_header);
}

/* The publisher's values: bounded before arithmetic, parked if not. */
Test(router, a_repeat_out_of_range_is_parked)
{
	static const struct {
		const char *what, *key;
		int64_t value;
		const char *why;
	} rows[] = {
	    {"every above max_delay", "x-cascade-every", 365 * DAY + 1,
	     "exceeds max_delay 365d"},
	    {"every near INT64_MAX", "x-cascade-every", INT64_MAX,
	     "exceeds max_delay"},
	    {"every negative", "x-cascade-every", INT64_MIN, "at least 1s"},
	    {"times 0", "x-cascade-times", 0, "1 or more"},
	    {"times negative", "x-cascade-times", -5, "1 or more"},
	    {"until near INT64_MAX", "x-cascade-until", INT64_MAX,
	     "x-cascade-until 9223372036854775807: out of range"},
	    {"until negative", "x-cascade-until", -1,
	     "x-cascade-until -1: out of range"},
	    {"deliver-at before 1970", "x-deliver-at", -1000,
	     "x-deliver-at: out of range for a repeat"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct tb t = {.n = 0};
		struct route r;

		if (strcmp(rows[i].key, "x-deliver-at") != 0)
			tb_str(&t, "x-remaining-delay", "10s");
		if (strcmp(rows[i].key, "x-cascade-every") != 0)
			tb_str(&t, "x-cascade-every", "1s");
		tb_i64(&t, rows[i].key, rows[i].value);
		repeat_at(&t, NOW, &r);
		cr_expect_eq(r.action, ROUTE_PARK, "%s: action %d",
		             rows[i].what, r.action);
		cr_expect_eq(r.park, PARK_bad_header, "%s", rows[i].what);
		cr_expect(strstr(r.reason, rows[i].why) != NULL, "%s: \"%s\"",
		          rows[i].what, r.reason);
	}
}

/* A cron series' x-cascade-until, at first sight as an interval's
 * (issue 47: 2^63-1 with "* * * * * *" delivered once, then its next copy
 * was parked from P.return). */
Test(router, a_cron_until_out_of_range_is_parked_at_first_sight)
{
	static const int64_t untils[] = {INT64_MAX, INT64_C(253402300800000),
	                                 -1};

	for (size_t i = 0; i < sizeof(untils) / sizeof(untils[0]); i++) {
		struct tb t = {.n = 0};
		struct route r;

		tb_str(&t, "x-cascade-cron", "* * * * * *");
		tb_i64(&t, "x-cascade-until", untils[i]);
		repeat_at(&t, NOW, &r);
		cr_expect_eq(r.action, ROUTE_PARK, "until %" PRId64, untils[i]);
		cr_expect(strstr(r.reason, "x-cascade-until") != NULL &&
		              strstr(r.reason, "out of range") != NULL,
		          "\"%s\"", r.reason);
	}
}

/* x-cascade-times of INT64_MAX is no limit, and never wraps. */
Test(router, huge_times_is_just_no_limit)
{
	struct tb t = {.n = 0};
	struct route r;

	tb_str(&t, "x-remaining-delay", "0");
	tb_str(&t, "x-cascade-every", "1s");
	tb_i64(&t, "x-cascade-times", INT64_MAX);
	repeat_at(&t, NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	cr_assert_eq(r.missed, 0);
	cr_assert(router_series_next(&params, &r, NOW));
	cr_assert_eq(r.due, NOW + 1000);
}

/* A waiting copy's state out of range (forged, or garbled): parked. */
Test(router, a_waiting_copy_out_of_range_is_parked)
{
	static const struct {
		const char *what, *key;
		int64_t value;
	} rows[] = {
	    {"every near INT64_MAX", "x-cascade-every", INT64_MAX},
	    {"every under 1s", "x-cascade-every", 1},
	    {"first near INT64_MAX", "x-cascade-first", INT64_MAX - 1},
	    {"first negative", "x-cascade-first", INT64_MIN},
	    {"occurrence near INT64_MAX", "x-cascade-occurrence",
	     INT64_MAX - 1},
	    {"occurrence 0", "x-cascade-occurrence", 0},
	    {"occurrence past times", "x-cascade-times", 2},
	    {"until near INT64_MAX", "x-cascade-until", INT64_MAX},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct tb t = {.n = 0};
		amqp_basic_properties_t in;
		struct route r;

		/* The row's value first: headers_find takes the first. */
		tb_i64(&t, rows[i].key, rows[i].value);
		waiting_copy(&t, NOW, NOW - 2000, 3);
		in = props_of(&t);
		decide(ROUTE_FROM_RETURN, &in, "cascade.return", NOW, &r);
		cr_expect_eq(r.action, ROUTE_PARK, "%s: action %d",
		             rows[i].what, r.action);
		cr_expect_eq(r.park, PARK_bad_header, "%s", rows[i].what);
		cr_expect(strstr(r.reason, "out of range") != NULL,
		          "%s: \"%s\"", rows[i].what, r.reason);
	}
	/* Not an integer at all: parked too, never guessed at. */
	{
		struct tb t = {.n = 0};
		amqp_basic_properties_t in;
		struct route r;

		tb_str(&t, "x-cascade-first", "soon");
		waiting_copy(&t, NOW, NOW - 2000, 3);
		in = props_of(&t);
		decide(ROUTE_FROM_RETURN, &in, "cascade.return", NOW, &r);
		expect_park(&r, "x-cascade-first: must be an integer");
	}
}
