/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON strings from arbitrary bytes, for the log's JSON lines and
 * cascade-ctl's --json output: one escaper, so both say the same of the
 * same bytes.
 *
 * '"' and '\\' take a backslash; control bytes (below 0x20, and 0x7f)
 * become \u00XX; valid UTF-8 passes as it is; every byte that does not
 * start a valid UTF-8 sequence (a stray continuation byte, a truncated,
 * overlong or surrogate sequence, one beyond U+10FFFF) becomes \ufffd, the
 * replacement character, so the output is always valid JSON.
 */
#ifndef CASCADE_JSON_H
#define CASCADE_JSON_H

#include <stddef.h>
#include <stdio.h>

/* The most bytes one character of input becomes: \u00XX or \ufffd. */
#define JSON_CHAR_MAX 6

/*
 * Length of the valid UTF-8 sequence at s[0..n) (n > 0), or 0: overlong
 * forms, surrogates, code points beyond U+10FFFF and truncated sequences
 * are not valid.  Exported so that whatever else checks UTF-8 (the
 * console's forms and HTML) agrees with what JSON calls valid.
 */
size_t json_utf8_len(const unsigned char *s, size_t n);

/*
 * The character at s[0..n) (n > 0), escaped into out.  Returns how many
 * bytes it wrote to out; *used is how many bytes of s it took.
 */
size_t json_char(const unsigned char *s, size_t n, char out[JSON_CHAR_MAX],
                 size_t *used);

/*
 * s[0..n) as a JSON string, quotes included, in buf: as snprintf, the
 * length it needs (without the NUL) is returned, and what fits is written
 * and terminated.  A character is written whole or not at all, so a
 * truncated string never ends inside an escape.
 */
size_t json_string(char *buf, size_t size, const void *s, size_t n);

/* s[0..n) as a JSON string, quotes included, to fp. */
void json_write(FILE *fp, const void *s, size_t n);

/* The C string s as a JSON string, quotes included, to fp. */
void json_write_str(FILE *fp, const char *s);

/* s[0..n) as a JSON string when present, else null, to fp. */
void json_write_or_null(FILE *fp, int present, const void *s, size_t n);

#endif
