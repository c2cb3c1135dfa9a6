/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The console's answers as they are written (docs/console-design.md,
 * section 3): a growing buffer with a cap, and the only ways bytes from
 * outside reach it, escaped for HTML text or attributes, for a URL's
 * path segment or query value, or for JSON inside or outside a page.
 * Markup goes in through hbuf_lit, which takes string literals only, so
 * a message's bytes cannot reach a page unescaped by mistake.
 *
 * Pure code: no I/O, no locks.
 */
#ifndef CASCADE_HTML_H
#define CASCADE_HTML_H

#include <stddef.h>
#include <stdint.h>

struct hbuf {
	char *p;
	size_t n, cap;
	size_t max; /* past it nothing more is written and full is set */
	int full;   /* the cap was met, or memory ran out */
};

void hbuf_init(struct hbuf *b, size_t max);
void hbuf_free(struct hbuf *b);
/* Trusted bytes: markup the console writes. */
void hbuf_raw(struct hbuf *b, const void *s, size_t n);
/* A string literal only: "" s "" does not compile for anything else. */
#define hbuf_lit(b, s) hbuf_raw((b), "" s "", sizeof(s) - 1)
/* Numbers and the console's own words only: never a string from outside. */
void hbuf_printf(struct hbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * s[0..n) as HTML text or a quoted attribute value: & < > " ' escaped;
 * a control byte or DEL as a visible \xNN in <span class=ctl> (in text;
 * in an attribute, as &#xFFFD;); bytes that are not UTF-8, U+FFFD.
 */
void html_text(struct hbuf *b, const void *s, size_t n);
void html_attr(struct hbuf *b, const void *s, size_t n);
/*
 * s[0..n) as one URL path segment or query value: everything but
 * A-Z a-z 0-9 - . _ ~ percent-encoded (so it is also safe in an
 * attribute).
 */
void html_url(struct hbuf *b, const void *s, size_t n);
/*
 * s[0..n) as a JSON string, quotes included (json.h's escapes and
 * U+FFFD), with < > & and U+2028, U+2029 as \u escapes as well, so that
 * it is safe inside a page and to every JSON parser.
 */
void html_json(struct hbuf *b, const void *s, size_t n);
/* The same, or null when absent. */
void html_json_or_null(struct hbuf *b, int present, const void *s, size_t n);

#endif
