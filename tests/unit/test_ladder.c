/* SPDX-License-Identifier: Apache-2.0 */
/* The ladder: level TTLs, the level for a delay, the hop plan. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ladder.h"

#define SEC INT64_C(1000)
#define DAY (INT64_C(86400) * SEC)

static struct ladder
make(int64_t resolution, uint64_t factor, unsigned levels)
{
	struct ladder l;
	const char *why = NULL;

	memset(&l, 0, sizeof(l));
	cr_assert_eq(ladder_init(&l, resolution, factor, levels, &why), 0,
	             "ladder_init(%lld, %llu, %u): %s", (long long)resolution,
	             (unsigned long long)factor, levels, why ? why : "");
	return l;
}

/* The former default ladder: 2s x 4, 12 levels. */
static struct ladder
deflt(void)
{
	return make(2 * SEC, 4, 12);
}

Test(ladder_init, default_ttls)
{
	struct ladder l = deflt();
	int64_t want = 2000;

	cr_assert_eq(l.levels, 12);
	for (unsigned k = 0; k < 12; k++, want *= 4)
		cr_assert_eq(l.ttl[k], want, "ttl[%u] = %lld, want %lld", k,
		             (long long)l.ttl[k], (long long)want);
	cr_assert_eq(l.ttl[0], 2000);
	cr_assert_eq(l.ttl[1], 8000);
	cr_assert_eq(l.ttl[3], 128000);
	cr_assert_eq(l.ttl[11], INT64_C(8388608000));
}

Test(ladder_init, one_level)
{
	struct ladder l = make(5 * SEC, 10, 1);

	cr_assert_eq(l.levels, 1);
	cr_assert_eq(l.ttl[0], 5000);
}

Test(ladder_init, bad_parameters)
{
	struct ladder l;
	const char *why;

	why = NULL;
	cr_assert_eq(ladder_init(&l, 0, 4, 12, &why), -1);
	cr_assert_not_null(why);
	cr_assert(strstr(why, "resolution") != NULL, "%s", why);
	why = NULL;
	cr_assert_eq(ladder_init(&l, -2000, 4, 12, &why), -1);
	cr_assert_not_null(why);
	why = NULL;
	cr_assert_eq(ladder_init(&l, 2000, 1, 12, &why), -1);
	cr_assert_not_null(why);
	cr_assert(strstr(why, "factor") != NULL, "%s", why);
	why = NULL;
	cr_assert_eq(ladder_init(&l, 2000, 0, 12, &why), -1);
	cr_assert_not_null(why);
	why = NULL;
	cr_assert_eq(ladder_init(&l, 2000, 4, 0, &why), -1);
	cr_assert_not_null(why);
	cr_assert(strstr(why, "levels") != NULL, "%s", why);
	why = NULL;
	cr_assert_eq(ladder_init(&l, 2000, 4, LADDER_MAX_LEVELS + 1, &why), -1);
	cr_assert_not_null(why);
}

Test(ladder_init, ten_year_limit)
{
	struct ladder l;
	const char *why = NULL;

	/* 1d x 10, 5 levels: the top is 10000 days. */
	cr_assert_eq(ladder_init(&l, DAY, 10, 5, &why), -1);
	cr_assert_not_null(why);
	cr_assert(strstr(why, "10-year") != NULL, "%s", why);
	/* Exactly ten years (3650 days) is still allowed. */
	l = make(365 * DAY, 10, 2);
	cr_assert_eq(l.ttl[1], LADDER_TTL_LIMIT_MS);
	l = make(LADDER_TTL_LIMIT_MS, 2, 1);
	cr_assert_eq(l.ttl[0], LADDER_TTL_LIMIT_MS);
	/* One millisecond over, at the bottom or at the top. */
	why = NULL;
	cr_assert_eq(ladder_init(&l, LADDER_TTL_LIMIT_MS + 1, 2, 1, &why), -1);
	cr_assert_not_null(why);
	why = NULL;
	cr_assert_eq(ladder_init(&l, LADDER_TTL_LIMIT_MS / 2 + 1, 2, 2, &why),
	             -1);
	cr_assert_not_null(why);
	l = make(LADDER_TTL_LIMIT_MS / 2, 2, 2);
	cr_assert_eq(l.ttl[1], LADDER_TTL_LIMIT_MS);
}

Test(ladder_init, overflow_is_rejected_not_wrapped)
{
	struct ladder l;
	const char *why = NULL;

	/* 1000^63 overflows int64 many times over. */
	cr_assert_eq(ladder_init(&l, 1, 1000, 64, &why), -1);
	cr_assert_not_null(why);
	why = NULL;
	cr_assert_eq(ladder_init(&l, 2000, 4, 64, &why), -1);
	cr_assert_not_null(why);
	why = NULL;
	cr_assert_eq(ladder_init(&l, 1, UINT64_MAX, 2, &why), -1);
	cr_assert_not_null(why);
	why = NULL;
	cr_assert_eq(ladder_init(&l, 1, (UINT64_C(1) << 63) + 1, 2, &why), -1);
	cr_assert_not_null(why);
	why = NULL;
	cr_assert_eq(ladder_init(&l, INT64_MAX, 2, 1, &why), -1);
	cr_assert_not_null(why);
}

Test(ladder_init, most_levels_that_fit)
{
	/* 1ms x 2: 2^38 ms is under ten years, 2^39 is over. */
	struct ladder l = make(1, 2, 39);

	cr_assert_eq(l.ttl[38], INT64_C(1) << 38);
	{
		const char *why = NULL;
		cr_assert_eq(ladder_init(&l, 1, 2, 40, &why), -1);
	}
}

Test(ladder_pick, below_resolution)
{
	struct ladder l = deflt();

	cr_assert_eq(ladder_pick(&l, 0), -1);
	cr_assert_eq(ladder_pick(&l, 1), -1);
	cr_assert_eq(ladder_pick(&l, 1999), -1);
	cr_assert_eq(ladder_pick(&l, -1), -1);
	cr_assert_eq(ladder_pick(&l, -5000), -1);
	cr_assert_eq(ladder_pick(&l, INT64_MIN), -1);
}

Test(ladder_pick, exact_and_neighbours)
{
	struct ladder l = deflt();

	for (int k = 0; k < 12; k++) {
		cr_assert_eq(ladder_pick(&l, l.ttl[k]), k, "exactly ttl[%d]",
		             k);
		cr_assert_eq(ladder_pick(&l, l.ttl[k] - 1), k - 1,
		             "just under ttl[%d]", k);
		cr_assert_eq(ladder_pick(&l, l.ttl[k] + 1), k,
		             "just over ttl[%d]", k);
	}
	cr_assert_eq(ladder_pick(&l, 255000), 3);
	cr_assert_eq(ladder_pick(&l, 127999), 2);
	cr_assert_eq(ladder_pick(&l, 128000), 3);
}

Test(ladder_pick, huge_values_take_the_top)
{
	struct ladder l = deflt();

	cr_assert_eq(ladder_pick(&l, l.ttl[11] * 2), 11);
	cr_assert_eq(ladder_pick(&l, 365 * DAY), 11);
	cr_assert_eq(ladder_pick(&l, INT64_MAX), 11);
}

Test(ladder_pick, single_level)
{
	struct ladder l = make(2 * SEC, 4, 1);

	cr_assert_eq(ladder_pick(&l, 1999), -1);
	cr_assert_eq(ladder_pick(&l, 2000), 0);
	cr_assert_eq(ladder_pick(&l, INT64_MAX), 0);
}

/* Checks every plan must satisfy, whatever the delay. */
static void
check_plan(const struct ladder *l, int64_t delay, const int *hops, size_t n)
{
	int64_t sum = 0;
	unsigned count[LADDER_MAX_LEVELS] = {0};
	int top = (int)l->levels - 1;

	for (size_t i = 0; i < n; i++) {
		cr_assert(hops[i] >= 0 && hops[i] <= top, "hop %zu: level %d",
		          i, hops[i]);
		if (i > 0)
			cr_assert_leq(hops[i], hops[i - 1],
			              "hop %zu goes up a level", i);
		sum += l->ttl[hops[i]];
		count[hops[i]]++;
	}
	/* Never early, and late by less than one resolution step. */
	cr_assert_geq(sum, delay, "plan sums to %lld < %lld", (long long)sum,
	              (long long)delay);
	if (delay > 0)
		cr_assert_lt(sum - delay, l->ttl[0],
		             "plan sums to %lld for %lld", (long long)sum,
		             (long long)delay);
	/* Each lower level at most factor-1 times, plus the tail on level 0. */
	for (int k = 1; k < top; k++)
		cr_assert_leq(count[k], (unsigned)(l->ttl[1] / l->ttl[0]) - 1,
		              "level %d visited %u times", k, count[k]);
	if (top > 0)
		cr_assert_leq(count[0], (unsigned)(l->ttl[1] / l->ttl[0]),
		              "level 0 visited %u times", count[0]);
}

Test(ladder_plan, readme_worked_example)
{
	struct ladder l = deflt();
	int hops[64];
	static const int want[] = {3, 2, 2, 2, 1, 1, 1, 0, 0, 0, 0};
	size_t n;

	memset(hops, 0x7f, sizeof(hops));
	n = ladder_plan(&l, 255000, hops, 64);
	cr_assert_eq(n, 11, "255s takes %zu hops, want 11", n);
	for (size_t i = 0; i < 11; i++)
		cr_assert_eq(hops[i], want[i], "hop %zu: level %d, want %d", i,
		             hops[i], want[i]);
	check_plan(&l, 255000, hops, n);
}

Test(ladder_plan, exact_multiple_has_no_tail)
{
	struct ladder l = deflt();
	int hops[64];
	static const int want[] = {3, 2, 2, 2, 1, 1, 1, 0, 0, 0};

	/* 254 s = 128 + 3x32 + 3x8 + 3x2: ten hops, none extra. */
	cr_assert_eq(ladder_plan(&l, 254000, hops, 64), 10);
	for (size_t i = 0; i < 10; i++)
		cr_assert_eq(hops[i], want[i], "hop %zu", i);
}

Test(ladder_plan, zero_and_negative_are_empty)
{
	struct ladder l = deflt();
	int hops[4] = {-9, -9, -9, -9};

	cr_assert_eq(ladder_plan(&l, 0, hops, 4), 0);
	cr_assert_eq(ladder_plan(&l, -1, hops, 4), 0);
	cr_assert_eq(ladder_plan(&l, INT64_MIN, hops, 4), 0);
	cr_assert_eq(hops[0], -9, "an empty plan wrote a hop");
}

Test(ladder_plan, sub_resolution_rounds_up_to_one_hop)
{
	struct ladder l = deflt();
	int hops[4] = {-9, -9, -9, -9};

	cr_assert_eq(ladder_plan(&l, 1, hops, 4), 1);
	cr_assert_eq(hops[0], 0);
	cr_assert_eq(ladder_plan(&l, 1999, hops, 4), 1);
	cr_assert_eq(hops[0], 0);
	cr_assert_eq(ladder_plan(&l, 2000, hops, 4), 1);
	cr_assert_eq(hops[0], 0);
	cr_assert_eq(ladder_plan(&l, 2001, hops, 4), 2);
	cr_assert_eq(hops[0], 0);
	cr_assert_eq(hops[1], 0);
}

Test(ladder_plan, max_delay_uses_top_repeatedly)
{
	struct ladder l = deflt();
	int hops[64];
	int64_t delay = 365 * DAY;
	/* 365d = 3 x ttl[11] + 3 x ttl[10] + 2 x ttl[7] + ttl[6] + 2 x ttl[5]
	 * + ttl[4] + 3 x ttl[3], exactly. */
	static const int want[] = {11, 11, 11, 10, 10, 10, 7, 7,
	                           6,  5,  5,  4,  3,  3,  3};
	size_t nwant = sizeof(want) / sizeof(want[0]);
	size_t n = ladder_plan(&l, delay, hops, 64);

	cr_assert_eq(n, nwant, "365d takes %zu hops, want %zu", n, nwant);
	for (size_t i = 0; i < nwant; i++)
		cr_assert_eq(hops[i], want[i], "hop %zu: level %d, want %d", i,
		             hops[i], want[i]);
	check_plan(&l, delay, hops, n);
}

Test(ladder_plan, top_level_many_times)
{
	struct ladder l = make(2 * SEC, 4, 2); /* 2s, 8s */
	int hops[128];
	size_t n;

	/* 800 s = 100 x 8s; no lower level needed. */
	n = ladder_plan(&l, 800000, hops, 128);
	cr_assert_eq(n, 100);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(hops[i], 1, "hop %zu", i);
	/* 807 s = 100 x 8s + 3 x 2s + a 1s tail. */
	n = ladder_plan(&l, 807000, hops, 128);
	cr_assert_eq(n, 104);
	cr_assert_eq(hops[99], 1);
	cr_assert_eq(hops[100], 0);
	cr_assert_eq(hops[103], 0);
	check_plan(&l, 807000, hops, n);
}

Test(ladder_plan, short_buffer_still_counts_everything)
{
	struct ladder l = deflt();
	int hops[3] = {-9, -9, -9};
	int guard[4] = {-7, -7, -7, -7};
	size_t n;

	n = ladder_plan(&l, 255000, hops, 3);
	cr_assert_eq(n, 11, "count with max=3 is %zu, want 11", n);
	cr_assert_eq(hops[0], 3);
	cr_assert_eq(hops[1], 2);
	cr_assert_eq(hops[2], 2);
	for (size_t i = 0; i < 4; i++)
		cr_assert_eq(guard[i], -7, "wrote past max");

	/* max = 0 only counts; hops may even be NULL. */
	cr_assert_eq(ladder_plan(&l, 255000, NULL, 0), 11);
	/* The top-level repeats are counted past max too. */
	cr_assert_eq(ladder_plan(&l, 365 * DAY, hops, 2), 15);
	cr_assert_eq(hops[0], 11);
	cr_assert_eq(hops[1], 11);
	cr_assert_eq(ladder_plan(&l, 365 * DAY, NULL, 0), 15);
}

Test(ladder_plan, invariants_over_many_delays)
{
	static const struct {
		int64_t res;
		uint64_t factor;
		unsigned levels;
	} shapes[] = {
	    {2000, 4, 12}, {1000, 2, 10},  {500, 3, 5},
	    {1, 10, 6},    {60000, 60, 3},
	};

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		struct ladder l =
		    make(shapes[s].res, shapes[s].factor, shapes[s].levels);
		int64_t d = 1;
		while (d < 40 * DAY) {
			size_t n = ladder_plan(&l, d, NULL, 0);
			int *hops = calloc(n + 1, sizeof(*hops));
			cr_assert_not_null(hops);
			cr_assert_eq(ladder_plan(&l, d, hops, n), n,
			             "count differs between calls for %lld",
			             (long long)d);
			check_plan(&l, d, hops, n);
			free(hops);
			d = d * 3 + 7;
		}
	}
}

/* Bound from the README: below the top level's TTL, at most
 * (levels-1) x (factor-1) + 1 hops. */
Test(ladder_plan, hop_bound_below_the_top)
{
	struct ladder l = deflt();
	int hops[64];
	int64_t worst = l.ttl[11] - 1;

	cr_assert_leq(ladder_plan(&l, worst, hops, 64), 11 * 3 + 1);
	cr_assert_leq(ladder_plan(&l, 97 * DAY - 1, hops, 64), 35);
}

/* A top level far below max_delay: --check and the daemon warn. */
Test(ladder, short_ladder_against_max_delay)
{
	struct ladder l;
	const char *why;
	size_t hops;

	/* the default, 2 s x 2, 24 levels: a year in 10 hops */
	cr_assert_eq(ladder_init(&l, 2000, 2, 24, &why), 0);
	cr_assert_not(ladder_short(&l, 365LL * 86400000, &hops));
	cr_assert_eq(hops, ladder_plan(&l, 365LL * 86400000, NULL, 0));
	/* 12 levels of factor 2 stop at 68 min: a year takes 7,700 hops */
	cr_assert_eq(ladder_init(&l, 2000, 2, 12, &why), 0);
	cr_assert(ladder_short(&l, 365LL * 86400000, &hops));
	cr_assert_gt(hops, 7000);
}
