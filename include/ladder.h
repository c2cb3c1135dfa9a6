/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ladder of delay queues: level k has TTL resolution * factor^k.  Pure
 * arithmetic, no I/O, so every edge case is unit-tested without a broker.
 */
#ifndef CASCADE_LADDER_H
#define CASCADE_LADDER_H

#include <stddef.h>
#include <stdint.h>

#define LADDER_MAX_LEVELS 64
/* [topology] shards: copies of the ladder (docs/CONTRACT.md section 8). */
#define LADDER_MAX_SHARDS 64
/* RabbitMQ refuses an x-message-ttl above ten years. */
#define LADDER_TTL_LIMIT_MS INT64_C(315360000000)

struct ladder {
	unsigned levels;
	int64_t ttl[LADDER_MAX_LEVELS];
};

/*
 * Compute the TTLs.  Returns -1 with a reason in *why when a parameter is out
 * of range or the top level overflows or passes LADDER_TTL_LIMIT_MS.
 */
int ladder_init(struct ladder *l, int64_t resolution, uint64_t factor,
                unsigned levels, const char **why);

/*
 * The level for a message with `remaining` ms left: the largest level whose
 * TTL is at most remaining; -1 when remaining is below the shortest TTL
 * (including 0 and negative: nothing or only a sub-resolution tail is left).
 */
int ladder_pick(const struct ladder *l, int64_t remaining);

/*
 * The hops a message with `delay` ms takes when nothing is held in memory:
 * level indexes in order, the sub-resolution tail rounded up to level 0.
 * Writes at most max entries, returns how many hops there are in all.
 */
size_t ladder_plan(const struct ladder *l, int64_t delay, int *hops,
                   size_t max);

/*
 * Is the top level far below max_delay, so that a delay that long takes
 * the top level over and over (more than 2 * levels + 1 hops)?  *hops gets
 * ladder_plan's count for max_delay either way.
 */
int ladder_short(const struct ladder *l, int64_t max_delay, size_t *hops);

/*
 * Going from former shards to shards ([topology] drain_shards): is the
 * former layout's shard s one the new layout lacks, its return queue to be
 * drained?  One shard has the unsharded names and two or more carry
 * ".s<s>", so going to or from one drains every former shard; growing from
 * two or more keeps them all; shrinking drains those past the new count.
 */
int ladder_shard_drained(unsigned former, unsigned shards, unsigned s);

#endif
