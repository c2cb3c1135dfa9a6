/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `cascade-bench cron [-n N]`: what a cron series costs the daemon's loop
 * (cron.h, schedule.h), in CPU time per call, median of N rounds: parsing
 * an expression, the next occurrence in UTC and in Berlin, counting what
 * a day, a year and ten years of outage missed (cron_count), finding the
 * occurrence a collapse delivers (cron_nth), and a zone read from the tz
 * database against one from the daemon's cache.  No broker.  These are
 * the numbers docs/CONTRACT.md 7.10 quotes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "cron.h"
#include "zone.h"

static double
cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

#define ROUNDS_MAX 1001
#define T0 INT64_C(1767225600000) /* 2026-01-01T00:00:00Z */
#define DAY_MS INT64_C(86400000)
#define LIMIT INT64_C(253402300799999)

enum what {
	W_PARSE,
	W_NEXT_UTC,
	W_NEXT_BERLIN,
	W_COUNT_DAY,
	W_COUNT_YEAR,
	W_COUNT_DECADE,
	W_NTH_YEAR,
	W_ZONE_LOAD,
	W_ZONE_CACHED,
	W_KINDS
};

static const char *const names[W_KINDS] = {
    "parse",         "next (UTC)",       "next (Berlin)",
    "count 1 day",   "count 1 year",     "count 10 years",
    "nth in 1 year", "zone read (file)", "zone (cache)",
};

/* One call of kind w, timed, in us. */
static double
one(enum what w, const char *expr, struct zone *berlin,
    struct zone_cache *cache, int64_t n)
{
	struct cron c;
	struct zone z;
	char err[160];
	double t0, t1;
	volatile int64_t sink = 0;

	(void)cron_parse(&c, expr, strlen(expr), err, sizeof(err));
	t0 = cpu_us();
	switch (w) {
	case W_PARSE:
		sink = cron_parse(&c, expr, strlen(expr), err, sizeof(err));
		break;
	case W_NEXT_UTC:
		sink = cron_next(&c, NULL, T0 + n * 997, LIMIT);
		break;
	case W_NEXT_BERLIN:
		sink = cron_next(&c, berlin, T0 + n * 997, LIMIT);
		break;
	case W_COUNT_DAY:
		sink = cron_count(&c, berlin, T0, T0 + DAY_MS);
		break;
	case W_COUNT_YEAR:
		sink = cron_count(&c, berlin, T0, T0 + 365 * DAY_MS);
		break;
	case W_COUNT_DECADE:
		sink = cron_count(&c, berlin, T0, T0 + 3652 * DAY_MS);
		break;
	case W_NTH_YEAR: {
		int64_t all = cron_count(&c, berlin, T0, T0 + 365 * DAY_MS);
		t0 = cpu_us();
		sink = cron_nth(&c, berlin, T0, all > 1 ? all - 1 : 1,
		                T0 + 365 * DAY_MS);
		break;
	}
	case W_ZONE_LOAD:
		if (zone_load(&z, "Europe/Berlin", 13, NULL, err,
		              sizeof(err)) == 0)
			zone_free(&z);
		break;
	case W_ZONE_CACHED:
		sink = zone_cached(cache, "Europe/Berlin", 13, 1000, err,
		                   sizeof(err)) != NULL;
		break;
	default:
		break;
	}
	t1 = cpu_us();
	(void)sink;
	return t1 - t0;
}

int
cron_main(int argc, char *argv[])
{
	static const char *const exprs[] = {"*/2 * * * * *", "0 9 * * MON-FRI",
	                                    "30 2 * * *"};
	static double us[ROUNDS_MAX];
	struct zone berlin;
	struct zone_cache cache;
	char err[160];
	long n = 201;

	if (argc == 3 && strcmp(argv[1], "-n") == 0)
		n = strtol(argv[2], NULL, 10);
	if (n < 1 || n > ROUNDS_MAX || (argc != 1 && argc != 3)) {
		fprintf(stderr, "usage: cascade-bench cron [-n ROUNDS]\n");
		return 2;
	}
	if (zone_load(&berlin, "Europe/Berlin", 13, NULL, err, sizeof(err)) <
	    0) {
		fprintf(stderr, "cascade-bench: Europe/Berlin: %s\n", err);
		return 1;
	}
	zone_cache_init(&cache);
	printf("%-16s %-18s %12s %12s\n", "call", "expression", "median us",
	       "p99 us");
	for (size_t e = 0; e < sizeof(exprs) / sizeof(exprs[0]); e++)
		for (int w = 0; w < W_KINDS; w++) {
			if ((w == W_ZONE_LOAD || w == W_ZONE_CACHED) && e > 0)
				continue;
			for (long i = 0; i < n; i++)
				us[i] = one((enum what)w, exprs[e], &berlin,
				            &cache, i);
			qsort(us, (size_t)n, sizeof(us[0]), cmp_double);
			printf("%-16s %-18s %12.2f %12.2f\n", names[w],
			       w >= W_ZONE_LOAD ? "Europe/Berlin" : exprs[e],
			       us[n / 2], us[(n * 99) / 100]);
		}
	zone_free(&berlin);
	zone_cache_free(&cache);
	return 0;
}
