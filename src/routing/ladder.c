/* SPDX-License-Identifier: Apache-2.0 */
/* Ladder arithmetic: level TTLs, the level for a delay, the hop plan. */
#include "ladder.h"

int
ladder_init(struct ladder *l, int64_t resolution, uint64_t factor,
            unsigned levels, const char **why)
{
	if (resolution < 1) {
		*why = "resolution must be at least 1ms";
		return -1;
	}
	if (factor < 2) {
		*why = "factor must be at least 2";
		return -1;
	}
	if (levels < 1 || levels > LADDER_MAX_LEVELS) {
		*why = "levels must be between 1 and 64";
		return -1;
	}
	l->levels = levels;
	l->ttl[0] = resolution;
	for (unsigned k = 1; k < levels; k++) {
		/* Compare by division so the check itself cannot overflow. */
		if ((uint64_t)l->ttl[k - 1] >
		    (uint64_t)LADDER_TTL_LIMIT_MS / factor) {
			*why = "top level TTL (resolution * factor^(levels-1)) "
			       "exceeds RabbitMQ's 10-year TTL limit";
			return -1;
		}
		l->ttl[k] = l->ttl[k - 1] * (int64_t)factor;
	}
	if (l->ttl[levels - 1] > LADDER_TTL_LIMIT_MS) {
		*why = "top level TTL (resolution * factor^(levels-1)) exceeds "
		       "RabbitMQ's 10-year TTL limit";
		return -1;
	}
	return 0;
}

int
ladder_pick(const struct ladder *l, int64_t remaining)
{
	int k;

	if (remaining < l->ttl[0])
		return -1;
	for (k = (int)l->levels - 1; k > 0; k--)
		if (l->ttl[k] <= remaining)
			break;
	return k;
}

size_t
ladder_plan(const struct ladder *l, int64_t delay, int *hops, size_t max)
{
	size_t n = 0;
	int top = (int)l->levels - 1;
	int64_t reps;
	int k;

	/* The top level may repeat any number of times: count, don't loop. */
	if (delay >= l->ttl[top]) {
		reps = delay / l->ttl[top];
		for (int64_t i = 0; i < reps && n + (size_t)i < max; i++)
			hops[n + (size_t)i] = top;
		n += (size_t)reps;
		delay -= reps * l->ttl[top];
	}
	while (delay > 0) {
		k = ladder_pick(l, delay);
		if (k < 0)
			k = 0; /* round the tail up: late, never early */
		if (n < max)
			hops[n] = k;
		n++;
		delay -= l->ttl[k];
	}
	return n;
}

int
ladder_short(const struct ladder *l, int64_t max_delay, size_t *hops)
{
	*hops = ladder_plan(l, max_delay, NULL, 0);
	return *hops > 2 * (size_t)l->levels + 1;
}

int
ladder_shard_drained(unsigned former, unsigned shards, unsigned s)
{
	if (former > 1)
		return shards == 1 || s >= shards;
	return shards != 1;
}
