/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bytes from the broker (bodies, ids, exchange names) made safe for a
 * terminal line: one escaper with three styles, so that cascade-ctl's errors
 * and list say the same of the same byte.  JSON output has its own rules
 * (json.h).  Pure code.
 */
#ifndef CASCADE_ESCAPE_H
#define CASCADE_ESCAPE_H

#include <stddef.h>

enum escape_style {
	/*
	 * A C string literal's escapes, for text shown between double
	 * quotes (a body preview): \\ \" \n \t \r, and \xNN for every other
	 * byte below 0x20 or from 0x7f, UTF-8 included.
	 */
	ESCAPE_QUOTED,
	/*
	 * A name in a column: \xNN for bytes below 0x20, 0x7f and the
	 * backslash (so an escape in the output is never ambiguous); every
	 * other byte, UTF-8 included, as it is.
	 */
	ESCAPE_NAME,
	/*
	 * Text cascade wrote that may hold escapes of its own (a park
	 * reason naming a publisher's value, already escaped): \xNN for
	 * bytes below 0x20 and 0x7f only, so that a forged one still reaches
	 * no terminal raw; a backslash stands for itself.
	 */
	ESCAPE_TEXT,
};

/*
 * The first max bytes of s[0..n) escaped in style into out, NUL
 * terminated; when n > max, "..." follows.  What does not fit in size is
 * left out, a whole escape at a time, so out never ends inside one.
 * Returns the length written.  ESCAPE_MAX_FACTOR * max + 4 bytes always
 * hold the whole preview.
 */
#define ESCAPE_MAX_FACTOR 4
size_t escape_bytes(const void *s, size_t n, size_t max,
                    enum escape_style style, char *out, size_t size);

/* The value of hexadecimal digit c (either case), or -1: for decoding
 * %XX escapes (form bodies, management URLs). */
int escape_hex_value(char c);

#endif
