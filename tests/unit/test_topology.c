/* SPDX-License-Identifier: Apache-2.0 */
/* Names of the broker objects (docs/CONTRACT.md section 3). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ladder.h"
#include "topology.h"

static struct ladder
make(int64_t resolution, uint64_t factor, unsigned levels)
{
	struct ladder l;
	const char *why = NULL;

	cr_assert_eq(ladder_init(&l, resolution, factor, levels, &why), 0, "%s",
	             why ? why : "");
	return l;
}

Test(topology_names, default_prefix_and_ladder)
{
	struct ladder l = make(2000, 4, 12);
	struct topology t;

	memset(&t, 'X', sizeof(t));
	cr_assert_eq(topology_names(&t, "cascade", &l, 1, 0), 0);
	cr_assert_str_eq(t.exchange, "cascade");
	cr_assert_str_eq(t.ingress, "cascade.ingress");
	cr_assert_str_eq(t.ret[0], "cascade.return");
	cr_assert_str_eq(t.error, "cascade.error");
	cr_assert_str_eq(t.retry, "cascade.retry");
	cr_assert_str_eq(t.events, "cascade.events");
	cr_assert_str_eq(t.cancels, "cascade.cancels");
	cr_assert_str_eq(t.series, "cascade.series");
	cr_assert_str_eq(t.requests, "cascade.requests");
	cr_assert_eq(t.levels, 12);
	cr_assert_str_eq(t.delay[0], "cascade.delay.2000");
	cr_assert_str_eq(t.delay[1], "cascade.delay.8000");
	cr_assert_str_eq(t.delay[2], "cascade.delay.32000");
	cr_assert_str_eq(t.delay[3], "cascade.delay.128000");
	cr_assert_str_eq(t.delay[11], "cascade.delay.8388608000");
	for (unsigned k = 0; k < 12; k++) {
		char want[64];
		snprintf(want, sizeof(want), "cascade.delay.%lld",
		         (long long)l.ttl[k]);
		cr_assert_str_eq(t.delay[k], want);
	}
	cr_assert_eq(t.shards, 1);
	cr_assert_eq(t.drains, 0);
	topology_free(&t);
}

Test(topology_names, other_prefix)
{
	struct ladder l = make(500, 10, 3);
	struct topology t;

	cr_assert_eq(topology_names(&t, "team-a.delays", &l, 1, 0), 0);
	cr_assert_str_eq(t.exchange, "team-a.delays");
	cr_assert_str_eq(t.ingress, "team-a.delays.ingress");
	cr_assert_str_eq(t.ret[0], "team-a.delays.return");
	cr_assert_str_eq(t.error, "team-a.delays.error");
	cr_assert_eq(t.levels, 3);
	cr_assert_str_eq(t.delay[0], "team-a.delays.delay.500");
	cr_assert_str_eq(t.delay[1], "team-a.delays.delay.5000");
	cr_assert_str_eq(t.delay[2], "team-a.delays.delay.50000");
	topology_free(&t);
}

Test(topology_names, names_are_distinct)
{
	struct ladder l = make(1000, 2, 20);
	struct topology t;
	const char *all[9 + 20];
	size_t n = 0;

	cr_assert_eq(topology_names(&t, "cascade", &l, 1, 0), 0);
	all[n++] = t.exchange;
	all[n++] = t.ingress;
	all[n++] = t.ret[0];
	all[n++] = t.error;
	all[n++] = t.retry;
	all[n++] = t.events;
	all[n++] = t.cancels;
	all[n++] = t.series;
	all[n++] = t.requests;
	for (unsigned k = 0; k < t.levels; k++)
		all[n++] = t.delay[k];
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			cr_assert_str_neq(all[i], all[j]);
	topology_free(&t);
}

Test(topology_names, longest_prefix_fits)
{
	/* The config allows a 200-character prefix. */
	char prefix[201];
	char want[TOPOLOGY_NAME_MAX];
	struct ladder l = make(365LL * 86400000, 10, 2);
	struct topology t;

	memset(prefix, 'p', 200);
	prefix[200] = '\0';
	cr_assert_eq(topology_names(&t, prefix, &l, 64, 0), 0);
	snprintf(want, sizeof(want), "%s.delay.315360000000.s63", prefix);
	cr_assert_str_eq(topology_delay(&t, 63, 1), want);
	snprintf(want, sizeof(want), "%s.ingress", prefix);
	cr_assert_str_eq(t.ingress, want);
	topology_free(&t);
}

/* docs/CONTRACT.md section 8: with S > 1 every shard's queues carry it. */
Test(topology_names, shards_carry_the_shard_in_their_names)
{
	struct ladder l = make(2000, 4, 3);
	struct topology t;

	cr_assert_eq(topology_names(&t, "cascade", &l, 3, 0), 0);
	cr_assert_eq(t.shards, 3);
	cr_assert_str_eq(t.ret[0], "cascade.return.s0");
	cr_assert_str_eq(t.ret[2], "cascade.return.s2");
	cr_assert_str_eq(topology_delay(&t, 0, 0), "cascade.delay.2000.s0");
	cr_assert_str_eq(topology_delay(&t, 1, 2), "cascade.delay.32000.s1");
	cr_assert_str_eq(topology_delay(&t, 2, 1), "cascade.delay.8000.s2");
	/* the rest are shared */
	cr_assert_str_eq(t.ingress, "cascade.ingress");
	cr_assert_str_eq(t.error, "cascade.error");
	cr_assert_eq(t.drains, 0);
	topology_free(&t);
}

/* Changing S: the return queues of the former layout that the new one
 * has not are drained; shards both share keep their names and queues. */
Test(topology_names, drained_return_queues)
{
	struct ladder l = make(2000, 4, 2);
	struct topology t;

	/* 1 -> 3: the unsharded P.return */
	cr_assert_eq(topology_names(&t, "c", &l, 3, 1), 0);
	cr_assert_eq(t.drains, 1);
	cr_assert_str_eq(t.drain[0], "c.return");
	cr_assert_str_eq(t.drain_delay[1], "c.delay.8000");
	cr_assert_eq(t.drain_sharded, 0);
	topology_free(&t);
	/* 3 -> 1: every former shard */
	cr_assert_eq(topology_names(&t, "c", &l, 1, 3), 0);
	cr_assert_eq(t.drains, 3);
	cr_assert_str_eq(t.drain[0], "c.return.s0");
	cr_assert_str_eq(t.drain[2], "c.return.s2");
	cr_assert_eq(t.drain_sharded, 1);
	topology_free(&t);
	/* 5 -> 3: shards 3 and 4 */
	cr_assert_eq(topology_names(&t, "c", &l, 3, 5), 0);
	cr_assert_eq(t.drains, 2);
	cr_assert_str_eq(t.drain[0], "c.return.s3");
	cr_assert_str_eq(t.drain[1], "c.return.s4");
	cr_assert_str_eq(t.drain_delay[0], "c.delay.2000.s3");
	cr_assert_str_eq(t.drain_delay[1], "c.delay.8000.s3");
	cr_assert_str_eq(t.drain_delay[3], "c.delay.8000.s4");
	topology_free(&t);
	/* 3 -> 5, 3 -> 3 and 1 -> 1: nothing to drain */
	cr_assert_eq(topology_names(&t, "c", &l, 5, 3), 0);
	cr_assert_eq(t.drains, 0);
	topology_free(&t);
	cr_assert_eq(topology_names(&t, "c", &l, 3, 3), 0);
	cr_assert_eq(t.drains, 0);
	topology_free(&t);
	cr_assert_eq(topology_names(&t, "c", &l, 1, 1), 0);
	cr_assert_eq(t.drains, 0);
	topology_free(&t);
}
