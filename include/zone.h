/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Time zones for schedules in an IANA zone ("Europe/Berlin"): for any
 * instant, the UTC offset in force and the span over which it holds.
 *
 * Why a reader of our own: the C library answers only for the process's
 * TZ, which is global state a daemon serving many zones at once must not
 * touch (setenv and tzset race with every other thread's localtime).  So
 * the tz database's files (RFC 8536 TZif, version 2 and later, as Debian's
 * tzdata installs them) are read here, and nothing in this module calls
 * setenv, tzset or localtime.  A file's table of transitions ends (2037 in
 * Debian's fat files, earlier in slim ones) where its footer, a POSIX TZ
 * string, takes over; a schedule runs until year 9999, so the footer's
 * rule is evaluated for the years around each instant asked about, never
 * expanded ahead of time.
 *
 * Why so suspicious: the name comes from a message header and the file
 * from disk, and neither is trusted.  A name is a relative path of
 * [A-Za-z0-9_+-] components (so it cannot leave the zone directory), and
 * every count, index, offset and length in a file is bounded before it is
 * used: a bad file is refused with a reason, never read past its end.
 * Files with leap seconds (the "right/" zones) are refused: their
 * instants are not Unix time.
 *
 * Why spans rather than offsets: a schedule asks "when does this offset
 * end", to know how far local-time arithmetic stays valid.  Changes of
 * abbreviation or of isdst alone (Europe/London 1968-1971) change nothing a
 * schedule sees, so a span is of the offset, with those merged away.
 *
 * Pure code except zone_load, which reads one file.
 */
#ifndef CASCADE_ZONE_H
#define CASCADE_ZONE_H

#include <stddef.h>
#include <stdint.h>

#define ZONE_NAME_MAX 64

/* When a POSIX TZ rule changes: day (Jn, n or Mm.w.d) and local time. */
struct zone_change {
	char kind;       /* 'J': Julian 1..365, no Feb 29; 'N': 0..365; 'M' */
	int16_t day;     /* J and N: the day; M: day of the week, 0 = Sunday */
	int8_t month;    /* M: 1..12 */
	int8_t week;     /* M: 1..5, 5 = the last */
	int32_t seconds; /* local time of day, -167 h .. 167 h (RFC 8536) */
};

/* A footer's rule: a fixed offset, or a standard and a daylight one. */
struct zone_rule {
	int32_t std; /* seconds east of UTC */
	int32_t dst; /* seconds east of UTC; == std when there is no DST */
	int has_dst; /* 0: std all the time */
	struct zone_change start, end; /* of daylight time */
};

/*
 * A zone: its transitions, each one a change of offset (changes of
 * abbreviation or isdst alone are merged away), and the rule after them.
 * Callers embed it; zone_free releases what it owns.
 */
struct zone {
	char name[ZONE_NAME_MAX + 1]; /* as loaded; "" from zone_parse */
	size_t count;                 /* transitions */
	int64_t *at;                  /* count instants, strictly increasing */
	int32_t *off;                 /* the offset from at[i] on */
	int32_t before;               /* the offset before at[0] */
	int has_rule;                 /* a footer: rule holds from rule_from */
	int64_t rule_from;            /* the file's last transition, merged or
	                                 not; INT64_MIN when it has none */
	struct zone_rule rule;
};

/*
 * Load zone `name` (len bytes, not terminated) from dir (NULL: $TZDIR if
 * set and absolute, else /usr/share/zoneinfo).  "UTC" needs no file.
 * 0, or -1 with a reason in err ("unknown zone", "not a valid zone name:
 * ...", "corrupt tz file: ..."); z is overwritten either way, and after a
 * failure owns nothing (zone_free on it is harmless).
 */
int zone_load(struct zone *z, const char *name, size_t len, const char *dir,
              char *err, size_t errlen);

/* Parse a TZif image (pure; for the fuzzer and tests).  As zone_load. */
int zone_parse(struct zone *z, const unsigned char *buf, size_t len, char *err,
               size_t errlen);

/* Release what z owns; z is left empty (UTC, no transitions). */
void zone_free(struct zone *z);

/* The instants zone_offset answers for: [-ZONE_T_LIMIT, ZONE_T_LIMIT]. */
#define ZONE_T_LIMIT (INT64_C(1) << 40)

/*
 * The UTC offset in force at instant t (Unix seconds, clamped into
 * [-ZONE_T_LIMIT, ZONE_T_LIMIT]), in seconds east of UTC.  *start and
 * *end (either may be NULL) receive the span [start, end) around t over
 * which that offset holds unchanged: start the transition that began it
 * (INT64_MIN when none), end the next one (INT64_MAX when none).
 */
int32_t zone_offset(const struct zone *z, int64_t t, int64_t *start,
                    int64_t *end);

/*
 * Zones as a daemon uses them: loaded once, and read again at most every
 * ZONE_CACHE_TTL_MS (a tzdata upgrade is seen within that), keeping the
 * copy it has when a new read fails (a file replaced under it, no file
 * descriptors left), so that a schedule never fails for a moment's
 * error.  At most ZONE_CACHE_MAX zones; the least recently used makes
 * room.  zone_cache.c.
 */
#define ZONE_CACHE_MAX 32
#define ZONE_CACHE_TTL_MS 300000

struct zone_cache {
	struct zone_cached {
		struct zone z;
		int64_t loaded; /* monotonic ms; 0: empty */
		uint64_t used;  /* the cache's clock when last used */
	} e[ZONE_CACHE_MAX];
	uint64_t clock;
	uint64_t loads; /* reads of a zone file, ever */
};

void zone_cache_init(struct zone_cache *c);
void zone_cache_free(struct zone_cache *c);

/*
 * Zone `name` at now (monotonic ms): the cache's, valid until the next
 * call.  NULL with a reason in err when it has none and cannot read it.
 */
const struct zone *zone_cached(struct zone_cache *c, const char *name,
                               size_t len, int64_t now, char *err,
                               size_t errlen);

#endif
