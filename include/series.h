/*
 * Repeats (x-cascade-every): which copy of each series is the live one,
 * folded from the series records in P.series (and in P.cancels, where
 * versions before P.series wrote them).  Pure code.
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

/*
 * The schedule.  Occurrence k (k >= 1) of a series is due at
 * first + (k - 1) * every.  Every value comes from a header, so each is
 * range-checked (series_check) before any arithmetic, and the arithmetic
 * is checked too: a time past SERIES_TIME_MAX ends the series, never wraps.
 */
/* The latest time a schedule reaches: 9999-12-31T23:59:59.999Z. */
#define SERIES_TIME_MAX INT64_C(253402300799999)
/* The shortest interval, and the longest any copy may carry (a publisher's
 * is bounded by [router] max_delay, whose own bound this is). */
#define SERIES_EVERY_MIN INT64_C(1000)
#define SERIES_EVERY_LIMIT INT64_C(315360000000)
/* First sight: a first occurrence due at most this long ago is "now". */
#define SERIES_GRACE_MS INT64_C(1000)
/* x-cascade-catch-up: all: at most this many occurrences owed at once
 * (older ones collapse), delivered no closer together than the pace.
 * Every copy, in both modes, is due at least the pace after the delivery
 * before it. */
#define SERIES_CATCH_UP_MAX INT64_C(100)
#define SERIES_PACE_MS INT64_C(100)

struct series_plan {
	int64_t first; /* occurrence 1's due time, Unix epoch ms */
	int64_t every; /* ms */
	int64_t times; /* how many in all; 0: no limit */
	int64_t until; /* none due after this, Unix epoch ms; 0: none */
	int all;       /* x-cascade-catch-up: all */
};

/*
 * Is p, with a copy of occurrence k, in range: every within
 * [SERIES_EVERY_MIN, max_every], first and until within [0,
 * SERIES_TIME_MAX], times >= 0, 1 <= k and (with times) k <= times, and
 * occurrence k's due time computable?  0, or -1 with the header at fault
 * in *why.
 */
int series_check(const struct series_plan *p, int64_t k, int64_t max_every,
                 const char **why);

/*
 * Occurrence k's due time into *due: 1, or 0 when k is not in the series
 * (below 1, past times, due after until, or past SERIES_TIME_MAX).
 * Occurrence 1 is always in it.
 */
int series_at(const struct series_plan *p, int64_t k, int64_t *due);

/* The last occurrence of the series due at or before t; 0 when none. */
int64_t series_last(const struct series_plan *p, int64_t t);

/*
 * First sight at now: when the series' first delivery is due.  first,
 * when it is at most SERIES_GRACE_MS ago or with catch-up all; else the
 * first occurrence due at or after now - SERIES_GRACE_MS (the occurrences
 * before it are missed), or now when the whole series is past.
 */
int64_t series_start(const struct series_plan *p, int64_t now);

/*
 * A copy of occurrence k delivered at now: which occurrence it delivers.
 * k itself, unless later ones are due too; then by default the last due
 * (those between are missed), with catch-up all k, or the oldest of the
 * last SERIES_CATCH_UP_MAX due when more are owed.
 */
int64_t series_deliver_as(const struct series_plan *p, int64_t k, int64_t now);

/*
 * The copy after occurrence k, delivered at now: 1 with its occurrence
 * and due time (never before now + SERIES_PACE_MS), or 0 when the series
 * ends with k.
 */
int series_next(const struct series_plan *p, int64_t k, int64_t now,
                int64_t *next, int64_t *due);

struct series {
	struct idmap map; /* series id -> struct series_head */
};

/* The latest record of one series, allocated to its token's size. */
struct series_head {
	int64_t occurrence; /* the latest recorded */
	int64_t until;      /* forgotten after this */
	/* When the latest record was last written, Unix ms: its newest
	 * x-cascade-at (the refresh writes it again, below). */
	int64_t written;
	uint32_t token_len;
	char token[]; /* not terminated */
};

void series_init(struct series *s);
void series_free(struct series *s);

/*
 * A record written at `at` (Unix ms): occurrence of series id has token.
 * -1 out of memory, or a token longer than UINT32_MAX bytes.
 */
int series_add(struct series *s, amqp_bytes_t id, int64_t occurrence,
               amqp_bytes_t token, int64_t until, int64_t at);

/* Is the copy (occurrence, token) of series id a stale one? */
int series_stale(const struct series *s, amqp_bytes_t id, int64_t occurrence,
                 amqp_bytes_t token);

/* Forget series past their time; how many are left. */
size_t series_prune(struct series *s, int64_t now);

/*
 * The refresh.  P.series keeps records for [events] series_window only, and
 * a series whose latest record aged out while it lives could no longer tell
 * a stale copy.  So every daemon writes the latest record of each series it
 * holds again once that record is old: written at or before `stale` (a
 * quarter of the window ago) with its until still after now.  A record
 * another daemon wrote again, read back, makes it fresh here too, so one
 * daemon's refresh serves all.
 *
 * series_refresh goes on from *cursor through at most `slots` slots of the
 * map (idmap_walk: a tick's work is bounded however many series are held)
 * and hands at most `max` old records to write, which writes one again and
 * returns 0 (the record is then taken as written now; one lost on the way
 * is written again a quarter window later), or -1 to stop.  Returns how
 * many it wrote.
 */
#define SERIES_REFRESH_SLOTS 16384
#define SERIES_REFRESH_MAX 500
size_t series_refresh(struct series *s, size_t *cursor, size_t slots,
                      size_t max, int64_t stale, int64_t now,
                      int (*write)(amqp_bytes_t id, const struct series_head *h,
                                   void *ctx),
                      void *ctx);

#endif
