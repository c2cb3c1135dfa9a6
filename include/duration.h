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

/* Format ms with the largest unit that divides it exactly ("90s", "250ms"). */
void duration_format(int64_t ms, char *buf, size_t size);

/* The wall clock (Unix epoch ms), for due times. */
int64_t duration_wall_ms(void);

/* The monotonic clock (ms), for timeouts and backoffs. */
int64_t duration_mono_ms(void);

#endif
