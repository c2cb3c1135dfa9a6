/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Form bodies, decoded in place: a decoded field is never longer than
 * its encoding, so it can be written over it, and the separator after it
 * ('=' or '&', or the byte past the end) takes its NUL.
 */
#include "form.h"

#include <string.h>

#include "escape.h"
#include "json.h"

/*
 * Decode s[0..len) over itself; the decoded length in *out.  -1 with *why
 * for a bad escape, a NUL or bytes that are not UTF-8.
 */
static int
decode(char *s, size_t len, size_t *out, const char **why)
{
	size_t i = 0, o = 0;

	while (i < len) {
		char c = s[i];
		if (c == '+') {
			c = ' ';
			i++;
		} else if (c == '%') {
			int hi, lo;
			if (len - i < 3 ||
			    (hi = escape_hex_value(s[i + 1])) < 0 ||
			    (lo = escape_hex_value(s[i + 2])) < 0) {
				*why = "a % not followed by two hex digits";
				return -1;
			}
			c = (char)(hi << 4 | lo);
			i += 3;
		} else {
			i++;
		}
		if (c == '\0') {
			*why = "a NUL byte in a field";
			return -1;
		}
		s[o++] = c;
	}
	for (i = 0; i < o;) {
		size_t k = json_utf8_len((const unsigned char *)s + i, o - i);
		if (k == 0) {
			*why = "a field that is not UTF-8";
			return -1;
		}
		i += k;
	}
	*out = o;
	return 0;
}

int
form_parse(char *body, size_t len, struct form_field *f, size_t max, size_t *n,
           const char **why)
{
	size_t at = 0;

	*n = 0;
	*why = NULL;
	if (len == 0) {
		body[0] = '\0';
		return 0;
	}
	if (memchr(body, '\0', len) != NULL) {
		*why = "a NUL byte in the body";
		return -1;
	}
	for (;;) {
		char *pair = body + at, *amp, *eq, *name, *value;
		size_t plen, nlen, vlen;

		amp = memchr(pair, '&', len - at);
		plen = amp != NULL ? (size_t)(amp - pair) : len - at;
		if (plen == 0) {
			*why = "an empty field (two '&' together, or one at "
			       "an end)";
			return -1;
		}
		if (*n == max) {
			*why = "too many fields";
			return -1;
		}
		eq = memchr(pair, '=', plen);
		if (eq == NULL) {
			*why = "a field without '='";
			return -1;
		}
		name = pair;
		value = eq + 1;
		if (decode(name, (size_t)(eq - pair), &nlen, why) != 0 ||
		    decode(value, plen - (size_t)(value - pair), &vlen, why) !=
		        0)
			return -1;
		if (nlen == 0) {
			*why = "a field without a name";
			return -1;
		}
		if (nlen > FORM_NAME_MAX) {
			*why = "a field name too long";
			return -1;
		}
		if (vlen > FORM_VALUE_MAX) {
			*why = "a field value too long";
			return -1;
		}
		name[nlen] = '\0';
		value[vlen] = '\0';
		if (form_get(f, *n, name) != NULL) {
			*why = "a field given twice";
			return -1;
		}
		f[*n].name = name;
		f[*n].name_len = nlen;
		f[*n].value = value;
		f[*n].value_len = vlen;
		(*n)++;
		if (amp == NULL)
			return 0;
		at += plen + 1;
	}
}

const struct form_field *
form_get(const struct form_field *f, size_t n, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < n; i++)
		if (f[i].name_len == len && memcmp(f[i].name, name, len) == 0)
			return &f[i];
	return NULL;
}
