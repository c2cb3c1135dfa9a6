/* SPDX-License-Identifier: Apache-2.0 */
/* JSON strings from bytes: escapes, and U+FFFD for what is not UTF-8. */
#include "json.h"

#include <stdint.h>
#include <string.h>

size_t
json_utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t c;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, c = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, c = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, c = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates, beyond Unicode. */
	if ((len == 2 && c < 0x80) || (len == 3 && c < 0x800) ||
	    (len == 4 && (c < 0x10000 || c > 0x10ffff)) ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	return len;
}

size_t
json_char(const unsigned char *s, size_t n, char out[JSON_CHAR_MAX],
          size_t *used)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char c = s[0];
	size_t len;

	*used = 1;
	if (c == '"' || c == '\\') {
		out[0] = '\\';
		out[1] = (char)c;
		return 2;
	}
	if (c < 0x20 || c == 0x7f) {
		memcpy(out, "\\u00", 4);
		out[4] = hex[c >> 4];
		out[5] = hex[c & 15];
		return 6;
	}
	len = json_utf8_len(s, n);
	if (len == 0) {
		/* One replacement for each byte that starts nothing valid. */
		memcpy(out, "\\ufffd", 6);
		return 6;
	}
	memcpy(out, s, len);
	*used = len;
	return len;
}

/* c[0..k) to buf at *len, unless it does not fit or something before it did
 * not (then *written stays behind *len). */
static void
json_put(char *buf, size_t size, size_t *len, size_t *written, const char *c,
         size_t k)
{
	if (*written == *len && *len + k < size) {
		memcpy(buf + *len, c, k);
		*written += k;
	}
	*len += k;
}

size_t
json_string(char *buf, size_t size, const void *s, size_t n)
{
	const unsigned char *p = s;
	size_t i = 0, len = 0, written = 0, used, k;
	char c[JSON_CHAR_MAX];

	json_put(buf, size, &len, &written, "\"", 1);
	while (i < n) {
		k = json_char(p + i, n - i, c, &used);
		i += used;
		json_put(buf, size, &len, &written, c, k);
	}
	json_put(buf, size, &len, &written, "\"", 1);
	if (size > 0)
		buf[written] = '\0';
	return len;
}

void
json_write(FILE *fp, const void *s, size_t n)
{
	const unsigned char *p = s;
	size_t i = 0, used, k;
	char c[JSON_CHAR_MAX];

	fputc('"', fp);
	while (i < n) {
		k = json_char(p + i, n - i, c, &used);
		fwrite(c, 1, k, fp);
		i += used;
	}
	fputc('"', fp);
}

void
json_write_str(FILE *fp, const char *s)
{
	json_write(fp, s, strlen(s));
}

void
json_write_or_null(FILE *fp, int present, const void *s, size_t n)
{
	if (present)
		json_write(fp, s, n);
	else
		fputs("null", fp);
}
