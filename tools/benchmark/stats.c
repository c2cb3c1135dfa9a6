/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The numbers of a run: the delay each message is published with (-d, or
 * --dist's seeded distributions), and what is made of the lateness seen on
 * arrival (sorting, percentiles, a gnuplot of the cumulative distribution).
 * No broker here.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "duration.h"

uint64_t
stats_mix64(uint64_t x)
{
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

/* splitmix64: a small seeded generator, the same sequence everywhere. */
static uint64_t
next_u64(uint64_t *state)
{
	uint64_t z = stats_mix64(*state);

	*state += UINT64_C(0x9e3779b97f4a7c15);
	return z;
}

/* A uniform double in [0, 1). */
static double
next_unit(uint64_t *state)
{
	return (double)(next_u64(state) >> 11) / 9007199254740992.0;
}

/*
 * --dist KIND:MIN:MAX into o (dist, delay_lo, delay_hi); 0, or -1 with a
 * message.  loguniform needs MIN above 0: it draws between log(MIN) and
 * log(MAX).
 */
int
stats_parse_dist(struct opts *o, const char *arg)
{
	const char *c1 = strchr(arg, ':'), *c2, *why = "";

	if (c1 == NULL || (c2 = strchr(c1 + 1, ':')) == NULL)
		goto bad;
	if ((size_t)(c1 - arg) == 7 && strncmp(arg, "uniform", 7) == 0)
		o->dist = DIST_UNIFORM;
	else if ((size_t)(c1 - arg) == 10 &&
	         strncmp(arg, "loguniform", 10) == 0)
		o->dist = DIST_LOGUNIFORM;
	else
		goto bad;
	if (duration_parse(c1 + 1, (size_t)(c2 - c1 - 1), DURATION_BARE_MS,
	                   &o->delay_lo, &why) < 0 ||
	    duration_parse(c2 + 1, strlen(c2 + 1), DURATION_BARE_MS,
	                   &o->delay_hi, &why) < 0)
		goto bad;
	if (o->delay_hi <= o->delay_lo ||
	    (o->dist == DIST_LOGUNIFORM && o->delay_lo <= 0)) {
		why = "MAX must be above MIN, and MIN above 0 for loguniform";
		goto bad;
	}
	return 0;
bad:
	fprintf(stderr,
	        "cascade-bench: --dist uniform:MIN:MAX or "
	        "loguniform:MIN:MAX %s\n",
	        why);
	return -1;
}

/*
 * One message's delay in ms, by -d or --dist.  --dist draws from state
 * (seeded by --seed); a -d range draws from rand(), which the run seeds
 * with 1, so either gives the same delays on every run.
 */
int64_t
stats_draw_delay(const struct opts *o, uint64_t *state)
{
	double u, d;

	switch (o->dist) {
	case DIST_UNIFORM:
		u = next_unit(state);
		d = (double)o->delay_lo +
		    u * (double)(o->delay_hi - o->delay_lo);
		return (int64_t)d;
	case DIST_LOGUNIFORM:
		u = next_unit(state);
		d = (double)o->delay_lo *
		    exp(u * log((double)o->delay_hi / (double)o->delay_lo));
		return (int64_t)d;
	default:
		if (o->delay_hi > o->delay_lo)
			return o->delay_lo +
			       (int64_t)((double)(o->delay_hi - o->delay_lo +
			                          1) *
			                 ((double)rand() /
			                  ((double)RAND_MAX + 1.0)));
		return o->delay_lo;
	}
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Sorts n values ascending, as stats_percentile and stats_plot want them. */
void
stats_sort(int64_t *v, uint64_t n)
{
	qsort(v, n, sizeof(*v), cmp_i64);
}

/*
 * The p-quantile (0 to 1) of n sorted values in µs, in ms, by nearest
 * rank: the smallest value with at least a fraction p of them at or below
 * it (p 0: the least).  NAN when there are none, which the report writes
 * as null.
 */
double
stats_percentile(const int64_t *v, uint64_t n, double p)
{
	uint64_t i;

	if (n == 0)
		return NAN;
	i = (uint64_t)ceil(p * (double)n) - (p > 0);
	if (i >= n)
		i = n - 1;
	return (double)v[i] / 1000.0;
}

/*
 * The cumulative distribution of n sorted lateness values (µs) as a PNG in
 * file, drawn by gnuplot from a temporary data file.  Best effort: without
 * gnuplot it says so and draws nothing; the run's result does not depend
 * on it.
 */
void
stats_plot(const char *file, const int64_t *v, uint64_t n)
{
	char data[] = "/tmp/cascade-bench-XXXXXX";
	int fd = mkstemp(data);
	FILE *fp, *gp;

	if (fd < 0)
		return;
	fp = fdopen(fd, "w");
	for (uint64_t i = 0; i < n; i++)
		fprintf(fp, "%.3f %.6f\n", (double)v[i] / 1000.0,
		        (double)(i + 1) / (double)n);
	fclose(fp);
	gp = popen("gnuplot", "w");
	if (gp == NULL) {
		fprintf(stderr, "cascade-bench: no gnuplot: no plot\n");
		unlink(data);
		return;
	}
	/* Lateness can be 0 or below; a log axis needs it above 0. */
	fprintf(gp,
	        "set terminal pngcairo size 900,500\nset output '%s'\n"
	        "set title 'cascade lateness, %" PRIu64 " messages'\n"
	        "set xlabel 'lateness (ms)'\nset ylabel 'fraction delivered'\n"
	        "set logscale x\nset grid\nset key bottom right\n"
	        "plot '%s' using ($1 > 0.01 ? $1 : 0.01):2 with lines lw 2 "
	        "title 'cumulative'\n",
	        file, n, data);
	pclose(gp);
	unlink(data);
}
