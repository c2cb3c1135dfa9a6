/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cron expressions, and the instants they name in a time zone.  Pure code
 * (the zone is read by zone.h).
 *
 * An expression has five fields (minute, hour, day of month, month, day
 * of week) or six, with seconds first; or is one of @yearly (@annually),
 * @monthly, @weekly, @daily (@midnight), @hourly.  A field is a list of
 * items separated by commas; an item is *, a value, or a range a-b, each
 * with an optional /step (a/step runs from a to the field's end).  Months
 * and days of the week may be named (JAN, MON; any case); a day of the
 * week is 0 to 7, 0 and 7 both Sunday.  ? is * in the two day fields.
 * Extensions, as Quartz and cronie spell them:
 *
 *   - day of month: L (the last day of the month), LW (its last weekday),
 *     nW (the weekday nearest day n, within the month);
 *   - day of week: nL (the last day n of the month), n#k (the k-th day n
 *     of the month, k 1 to 5).
 *
 * Wrapping ranges (FRI-MON) are refused, as is an expression that can
 * never fire (30 2 30 FEB *): the calendar repeats every 400 years, and
 * one that fires in none of them fires never.  When both day fields are
 * restricted, a day matches either (as in Vixie cron and POSIX crontab);
 * a day field that starts with * or ? is unrestricted.
 *
 * Instants.  An expression names local times in its zone, to the second.
 * Where clocks go forward, the local times skipped do not exist; where
 * they go back, the local times repeated exist twice.  Following cronie
 * (and Vixie cron before it), an expression whose hour field starts with
 * * (every hour, every N hours, every N minutes, every second) is an
 * interval: it fires at every instant whose local time matches, so it
 * keeps its spacing in real time (a skipped local time is not there; a
 * repeated one fires in both passes).  Any other expression names fixed
 * times of day: a fixed time that does not exist fires once, at the first
 * instant after the gap; one that occurs twice fires once, at the first.
 */
#ifndef CASCADE_CRON_H
#define CASCADE_CRON_H

#include <stddef.h>
#include <stdint.h>

#include "zone.h"

/* The longest expression read. */
#define CRON_EXPR_MAX 200

struct cron {
	uint64_t sec, min;          /* bit i: second i, minute i */
	uint32_t hour;              /* bits 0 to 23 */
	uint32_t dom;               /* bits 1 to 31 */
	uint32_t dom_near;          /* nW: bits 1 to 31 */
	uint16_t month;             /* bits 1 to 12 */
	uint8_t dow;                /* bits 0 to 6, Sunday 0 */
	uint8_t dow_last;           /* nL: bits 0 to 6 */
	uint8_t dow_nth[7];         /* n#k: bit k - 1 of dow_nth[n] */
	unsigned dom_last : 1;      /* L */
	unsigned dom_last_near : 1; /* LW */
	unsigned dom_any : 1;       /* the day-of-month field is * or ? */
	unsigned dow_any : 1;       /* the day-of-week field is * or ? */
	unsigned interval : 1;      /* the hour field starts with * */
};

/*
 * Parse expression s (len bytes, not terminated).  0, or -1 with a
 * reason in err that names the field at fault ("hour field '25': 25 is
 * out of range 0-23").
 */
int cron_parse(struct cron *c, const char *s, size_t len, char *err,
               size_t errlen);

/*
 * The first instant after `after` (Unix ms) at which c fires in zone z
 * (NULL: UTC), in Unix ms (a whole second); -1 when none is before
 * `limit` (Unix ms).
 */
int64_t cron_next(const struct cron *c, const struct zone *z, int64_t after,
                  int64_t limit);

/*
 * How many instants in (a, b] (Unix ms, a <= b) c fires at in z, as
 * cron_next steps them.  Its cost grows with the days in (a, b], not the
 * instants: about a microsecond a day.
 */
int64_t cron_count(const struct cron *c, const struct zone *z, int64_t a,
                   int64_t b);

/*
 * The n-th instant (n >= 1) after a at which c fires in z, given that it
 * is at or before b (cron_count(c, z, a, b) >= n).
 */
int64_t cron_nth(const struct cron *c, const struct zone *z, int64_t a,
                 int64_t n, int64_t b);

#endif
