/* SPDX-License-Identifier: Apache-2.0 */
/* escape: bytes for a terminal line, in one of three styles (escape.h). */
#include "escape.h"

#include <stdio.h>
#include <string.h>

/* The escape of byte ch in style, or NULL when it stands for itself. */
static const char *
escape_one(unsigned char ch, enum escape_style style, char hex[8])
{
	if (style == ESCAPE_QUOTED) {
		switch (ch) {
		case '\\':
			return "\\\\";
		case '"':
			return "\\\"";
		case '\n':
			return "\\n";
		case '\t':
			return "\\t";
		case '\r':
			return "\\r";
		default:
			break;
		}
		if (ch >= 0x20 && ch < 0x7f)
			return NULL;
	} else if (ch >= 0x20 && ch != 0x7f &&
	           (ch != '\\' || style == ESCAPE_TEXT)) {
		return NULL;
	}
	snprintf(hex, 8, "\\x%02x", ch);
	return hex;
}

size_t
escape_bytes(const void *s, size_t n, size_t max, enum escape_style style,
             char *out, size_t size)
{
	const unsigned char *p = s;
	size_t o = 0, k;
	char hex[8];
	const char *e;

	if (size == 0)
		return 0;
	for (size_t i = 0; i < n && i < max; i++) {
		e = escape_one(p[i], style, hex);
		k = e ? strlen(e) : 1;
		if (o + k >= size)
			break;
		if (e != NULL)
			memcpy(out + o, e, k);
		else
			out[o] = (char)p[i];
		o += k;
	}
	if (n > max && o + 3 < size) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return o;
}

int
escape_hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
