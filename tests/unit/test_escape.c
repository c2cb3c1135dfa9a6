/* SPDX-License-Identifier: Apache-2.0 */
/* escape_bytes: a body preview and a name, safe on a terminal line. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "escape.h"

static const char *
esc(const char *s, size_t n, size_t max, enum escape_style style)
{
	static char out[256];

	escape_bytes(s, n, max, style, out, sizeof(out));
	return out;
}

Test(escape, quoted_c_escapes)
{
	const char in[] = "a\"b\\c\nd\te\rf\x01g\x7f";

	cr_assert_str_eq(esc(in, sizeof(in) - 1, 60, ESCAPE_QUOTED),
	                 "a\\\"b\\\\c\\nd\\te\\rf\\x01g\\x7f");
}

Test(escape, quoted_escapes_non_ascii)
{
	cr_assert_str_eq(esc("\xc3\xa9", 2, 60, ESCAPE_QUOTED), "\\xc3\\xa9");
}

Test(escape, quoted_preview_is_cut)
{
	cr_assert_str_eq(esc("abcdef", 6, 3, ESCAPE_QUOTED), "abc...");
	cr_assert_str_eq(esc("abc", 3, 3, ESCAPE_QUOTED), "abc");
}

Test(escape, name_keeps_utf8_and_quotes)
{
	cr_assert_str_eq(esc("caf\xc3\xa9 \"x\"", 9, SIZE_MAX, ESCAPE_NAME),
	                 "caf\xc3\xa9 \"x\"");
	cr_assert_str_eq(esc("a\\b\nc\x7f", 6, SIZE_MAX, ESCAPE_NAME),
	                 "a\\x5cb\\x0ac\\x7f");
}

Test(escape, never_ends_inside_an_escape)
{
	char out[6];
	size_t n = escape_bytes("ab\x01", 3, 60, ESCAPE_NAME, out, sizeof(out));

	cr_assert_str_eq(out, "ab");
	cr_assert_eq(n, 2);
	n = escape_bytes("abcdef", 6, 60, ESCAPE_NAME, out, sizeof(out));
	cr_assert_str_eq(out, "abcde");
	n = escape_bytes("x", 1, 60, ESCAPE_NAME, out, 0);
	cr_assert_eq(n, 0);
}

Test(escape, empty)
{
	cr_assert_str_eq(esc("", 0, 60, ESCAPE_QUOTED), "");
	cr_assert_str_eq(esc(NULL, 0, 60, ESCAPE_NAME), "");
}

/* cascade's own text (a reason naming an escaped value): only what would
 * reach a terminal raw is escaped, and its escapes stay as they are. */
Test(escape, text_escapes_controls_and_keeps_backslashes)
{
	char out[128];

	static const char in[] = "x \"soon\\x1b\": a\x1b[31m\r\n\x7f";

	escape_bytes(in, sizeof(in) - 1, 100, ESCAPE_TEXT, out, sizeof(out));
	cr_assert_str_eq(out, "x \"soon\\x1b\": a\\x1b[31m\\x0d\\x0a\\x7f");
}
