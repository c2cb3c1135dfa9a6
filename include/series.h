/*
 * Repeats (x-cascade-every): which copy of each series is the live one,
 * folded from the series records in P.cancels.  Pure code.
 *
 * When a daemon delivers occurrence k of a series, it publishes the copy
 * for occurrence k + 1 with a fresh token, then records (series, k + 1,
 * token) in P.cancels, then acknowledges occurrence k.  A crash anywhere
 * in between leaves at most one extra copy, which the records tell apart:
 * a copy of an occurrence below the latest recorded one, or of the latest
 * with another token, is stale and dropped where it is seen.  So a series
 * never forks, and no occurrence is lost (a crash before the record only
 * delivers occurrence k twice, as any delivery may be).
 */
#ifndef CASCADE_SERIES_H
#define CASCADE_SERIES_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "idmap.h"

struct series {
	struct idmap map; /* series id -> struct series_head */
};

/* The latest record of one series, allocated to its token's size. */
struct series_head {
	int64_t occurrence; /* the latest recorded */
	int64_t until;      /* forgotten after this */
	uint32_t token_len;
	char token[]; /* not terminated */
};

void series_init(struct series *s);
void series_free(struct series *s);

/*
 * A record: occurrence of series id has token.  -1 out of memory, or a
 * token longer than UINT32_MAX bytes.
 */
int series_add(struct series *s, amqp_bytes_t id, int64_t occurrence,
               amqp_bytes_t token, int64_t until);

/* Would a record of series id add an id not held yet? */
int series_new(const struct series *s, amqp_bytes_t id);

/* Is the copy (occurrence, token) of series id a stale one? */
int series_stale(const struct series *s, amqp_bytes_t id, int64_t occurrence,
                 amqp_bytes_t token);

/* Forget series past their time; how many are left. */
size_t series_prune(struct series *s, int64_t now);

#endif
