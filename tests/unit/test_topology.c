/* Names of the broker objects (CONTRACT section 3). */
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
	topology_names(&t, "cascade", &l);
	cr_assert_str_eq(t.exchange, "cascade");
	cr_assert_str_eq(t.ingress, "cascade.ingress");
	cr_assert_str_eq(t.ret, "cascade.return");
	cr_assert_str_eq(t.error, "cascade.error");
	cr_assert_str_eq(t.retry, "cascade.retry");
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
}

Test(topology_names, other_prefix)
{
	struct ladder l = make(500, 10, 3);
	struct topology t;

	topology_names(&t, "team-a.delays", &l);
	cr_assert_str_eq(t.exchange, "team-a.delays");
	cr_assert_str_eq(t.ingress, "team-a.delays.ingress");
	cr_assert_str_eq(t.ret, "team-a.delays.return");
	cr_assert_str_eq(t.error, "team-a.delays.error");
	cr_assert_eq(t.levels, 3);
	cr_assert_str_eq(t.delay[0], "team-a.delays.delay.500");
	cr_assert_str_eq(t.delay[1], "team-a.delays.delay.5000");
	cr_assert_str_eq(t.delay[2], "team-a.delays.delay.50000");
}

Test(topology_names, names_are_distinct)
{
	struct ladder l = make(1000, 2, 20);
	struct topology t;
	const char *all[5 + 20];
	size_t n = 0;

	topology_names(&t, "cascade", &l);
	all[n++] = t.exchange;
	all[n++] = t.ingress;
	all[n++] = t.ret;
	all[n++] = t.error;
	all[n++] = t.retry;
	for (unsigned k = 0; k < t.levels; k++)
		all[n++] = t.delay[k];
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			cr_assert_str_neq(all[i], all[j]);
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
	topology_names(&t, prefix, &l);
	snprintf(want, sizeof(want), "%s.delay.315360000000", prefix);
	cr_assert_str_eq(t.delay[1], want);
	snprintf(want, sizeof(want), "%s.ingress", prefix);
	cr_assert_str_eq(t.ingress, want);
}
