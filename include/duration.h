/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Durations as people write them: "250ms", "2s", "15m", "2h", "3d", or a bare
 * integer in a default unit; and the two clocks, in milliseconds.  No I/O.
 */
#ifndef CASCADE_DURATION_H
#define CASCADE_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* Unit of a bare number: headers default to milliseconds, never config. */
enum duration_bare {
	DURATION_BARE_REJECT,
	DURATION_BARE_MS,
};

/*
 * Parse s[0..len) into milliseconds.  Optional surrounding blanks and a
 * leading sign are accepted; the number is decimal digits only.  Returns 0, or
 * -1 with a short reason in *why (a static string) for an empty, malformed,
 * unit-less (when bare == DURATION_BARE_REJECT) or overflowing value.
 */
int duration_parse(const char *s, size_t len, enum duration_bare bare,
                   int64_t *ms, const char **why);

/*
 * How duration_format_as writes a duration.  One formatter, four readers:
 * the config dump and status's ttl column want it exact, status's "about"
 * column and list's "in 3m12s" want it short, the dead-letter timeout is
 * named in seconds as advanced.config's readers think of it.
 */
enum duration_style {
	DURATION_EXACT,   /* the largest unit that divides it: "90s", "3m" */
	DURATION_SECONDS, /* whole seconds when it is, else ms: "180s" */
	DURATION_ABOUT,   /* the largest unit it reaches, one decimal: "8.5m" */
	DURATION_SPAN,    /* two units at most, whole seconds: "3m12s", "0s" */
};

/*
 * ms in style into buf, as snprintf (truncated to size).  DURATION_ABOUT
 * and DURATION_SPAN take ms >= 0 (a caller says "ago" itself); below one
 * second ABOUT writes ms ("250ms") and SPAN "0s".
 */
void duration_format_as(int64_t ms, enum duration_style style, char *buf,
                        size_t size);

/* duration_format_as(ms, DURATION_EXACT, ...): "90s", "250ms". */
void duration_format(int64_t ms, char *buf, size_t size);

/* The wall clock (Unix epoch ms), for due times. */
int64_t duration_wall_ms(void);

/* The monotonic clock (ms), for timeouts and backoffs. */
int64_t duration_mono_ms(void);

#endif
