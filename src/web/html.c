/* SPDX-License-Identifier: Apache-2.0 */
/* The console's escapes, each over a growing buffer that stops at a cap. */
#include "html.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static const char html_hex[] = "0123456789abcdef";

void
hbuf_init(struct hbuf *b, size_t max)
{
	memset(b, 0, sizeof(*b));
	b->max = max;
}

void
hbuf_free(struct hbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Room for n more bytes and a NUL: 0, or -1 having set full. */
static int
hbuf_room(struct hbuf *b, size_t n)
{
	size_t cap;
	char *p;

	if (b->full)
		return -1;
	if (n > b->max || b->n > b->max - n) {
		b->full = 1;
		return -1;
	}
	if (b->n + n + 1 <= b->cap)
		return 0;
	cap = b->cap != 0 ? b->cap : 4096;
	while (cap < b->n + n + 1)
		cap *= 2;
	if ((p = realloc(b->p, cap)) == NULL) {
		b->full = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void
hbuf_raw(struct hbuf *b, const void *s, size_t n)
{
	if (n == 0) /* s may be NULL: an empty buffer's */
		return;
	if (hbuf_room(b, n) < 0)
		return;
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

void
hbuf_printf(struct hbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->full = 1;
		return;
	}
	if (hbuf_room(b, (size_t)n) < 0)
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->n += (size_t)n;
}

/* One byte or character of s for HTML; attr: inside a quoted value. */
static size_t
html_one(struct hbuf *b, const unsigned char *s, size_t n, int attr)
{
	char ctl[48];
	size_t len;

	switch (s[0]) {
	case '&':
		hbuf_lit(b, "&amp;");
		return 1;
	case '<':
		hbuf_lit(b, "&lt;");
		return 1;
	case '>':
		hbuf_lit(b, "&gt;");
		return 1;
	case '"':
		hbuf_lit(b, "&quot;");
		return 1;
	case '\'':
		hbuf_lit(b, "&#39;");
		return 1;
	case '\t':
	case '\n':
		if (!attr) {
			hbuf_raw(b, s, 1);
			return 1;
		}
		break;
	default:
		break;
	}
	if (s[0] < 0x20 || s[0] == 0x7f) {
		if (attr) {
			hbuf_lit(b, "&#xFFFD;");
		} else {
			memcpy(ctl, "<span class=ctl>\\x", 18);
			ctl[18] = html_hex[s[0] >> 4];
			ctl[19] = html_hex[s[0] & 15];
			memcpy(ctl + 20, "</span>", 7);
			hbuf_raw(b, ctl, 27);
		}
		return 1;
	}
	len = json_utf8_len(s, n);
	if (len == 0) {
		hbuf_lit(b, "&#xFFFD;");
		return 1;
	}
	hbuf_raw(b, s, len);
	return len;
}

static void
html_escape(struct hbuf *b, const void *s, size_t n, int attr)
{
	const unsigned char *p = s;

	for (size_t i = 0; i < n && !b->full;)
		i += html_one(b, p + i, n - i, attr);
}

void
html_text(struct hbuf *b, const void *s, size_t n)
{
	html_escape(b, s, n, 0);
}

void
html_attr(struct hbuf *b, const void *s, size_t n)
{
	html_escape(b, s, n, 1);
}

void
html_url(struct hbuf *b, const void *s, size_t n)
{
	const unsigned char *p = s;
	char pct[3];

	for (size_t i = 0; i < n && !b->full; i++) {
		unsigned char c = p[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~') {
			hbuf_raw(b, &p[i], 1);
			continue;
		}
		pct[0] = '%';
		pct[1] = html_hex[c >> 4];
		pct[2] = html_hex[c & 15];
		hbuf_raw(b, pct, 3);
	}
}

void
html_json(struct hbuf *b, const void *s, size_t n)
{
	const unsigned char *p = s;
	char out[JSON_CHAR_MAX];
	size_t k, used;

	hbuf_lit(b, "\"");
	for (size_t i = 0; i < n && !b->full; i += used) {
		if (p[i] == '<' || p[i] == '>' || p[i] == '&') {
			char u[6] = {'\\',
			             'u',
			             '0',
			             '0',
			             html_hex[p[i] >> 4],
			             html_hex[p[i] & 15]};
			hbuf_raw(b, u, 6);
			used = 1;
			continue;
		}
		/* U+2028 and U+2029 end a line in JavaScript before ES2019. */
		if (n - i >= 3 && p[i] == 0xe2 && p[i + 1] == 0x80 &&
		    (p[i + 2] == 0xa8 || p[i + 2] == 0xa9)) {
			hbuf_raw(b, p[i + 2] == 0xa8 ? "\\u2028" : "\\u2029",
			         6);
			used = 3;
			continue;
		}
		k = json_char(p + i, n - i, out, &used);
		hbuf_raw(b, out, k);
	}
	hbuf_lit(b, "\"");
}

void
html_json_or_null(struct hbuf *b, int present, const void *s, size_t n)
{
	if (present)
		html_json(b, s, n);
	else
		hbuf_lit(b, "null");
}
