/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The console's escapes (html.h): whatever bytes a message carries, what
 * reaches a page or a JSON answer is text, never markup or script.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "html.h"

static char out[65536];

typedef void (*escaper)(struct hbuf *, const void *, size_t);

static const char *
esc(escaper fn, const void *s, size_t n)
{
	struct hbuf b;

	hbuf_init(&b, sizeof(out) - 1);
	fn(&b, s, n);
	cr_assert(!b.full);
	memcpy(out, b.p != NULL ? b.p : "", b.n);
	out[b.n] = '\0';
	hbuf_free(&b);
	return out;
}

#define ESC(fn, lit) esc(fn, lit, sizeof(lit) - 1)

Test(html, text_escapes_markup)
{
	cr_assert_str_eq(ESC(html_text, "<script>alert('x')</script>"),
	                 "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
	cr_assert_str_eq(ESC(html_text, "a & \"b\""), "a &amp; &quot;b&quot;");
	cr_assert_str_eq(ESC(html_text, "line\nnext\ttab"), "line\nnext\ttab");
}

Test(html, control_bytes_are_shown_not_sent)
{
	cr_assert_str_eq(ESC(html_text, "a\x01"
	                                "b\x7f"),
	                 "a<span class=ctl>\\x01</span>b<span "
	                 "class=ctl>\\x7f</span>");
	cr_assert_str_eq(ESC(html_attr, "a\nb\x01"), "a&#xFFFD;b&#xFFFD;");
	cr_assert_str_eq(esc(html_text, "a\0b", 3),
	                 "a<span class=ctl>\\x00</span>b");
}

Test(html, invalid_utf8_is_a_replacement_character)
{
	cr_assert_str_eq(ESC(html_text, "\xff\xc3("), "&#xFFFD;&#xFFFD;(");
	/* an overlong '<' does not get through as one */
	cr_assert_str_eq(ESC(html_text, "\xc0\xbc"), "&#xFFFD;&#xFFFD;");
	cr_assert_str_eq(ESC(html_text, "caf\xc3\xa9"), "caf\xc3\xa9");
}

Test(html, url_part_encodes_all_but_unreserved)
{
	cr_assert_str_eq(ESC(html_url, "a b/c?d=e&f\"<"),
	                 "a%20b%2fc%3fd%3de%26f%22%3c");
	cr_assert_str_eq(ESC(html_url, "A-z_0.9~"), "A-z_0.9~");
}

Test(html, json_is_safe_inside_a_page)
{
	cr_assert_str_eq(ESC(html_json, "</script><b>&"),
	                 "\"\\u003c/script\\u003e\\u003cb\\u003e\\u0026\"");
	cr_assert_str_eq(ESC(html_json, "a\"\\\n"), "\"a\\\"\\\\\\u000a\"");
	cr_assert_str_eq(ESC(html_json, "\xe2\x80\xa8\xe2\x80\xa9"),
	                 "\"\\u2028\\u2029\"");
	cr_assert_str_eq(ESC(html_json, "\xff"), "\"\\ufffd\"");
}

Test(html, the_cap_stops_writing)
{
	struct hbuf b;
	char big[100];

	memset(big, '<', sizeof(big));
	hbuf_init(&b, 64);
	html_text(&b, big, sizeof(big));
	cr_assert(b.full);
	cr_assert_leq(b.n, 64);
	hbuf_raw(&b, "x", 1);
	cr_assert_leq(b.n, 64);
	hbuf_free(&b);
}

Test(html, printf_of_any_length)
{
	struct hbuf b;
	char long_word[2000];

	memset(long_word, 'w', sizeof(long_word) - 1);
	long_word[sizeof(long_word) - 1] = '\0';
	hbuf_init(&b, 1 << 20);
	hbuf_printf(&b, "%s:%d", long_word, 7);
	cr_assert(!b.full);
	cr_assert_eq(b.n, sizeof(long_word) - 1 + 2);
	cr_assert_str_eq(b.p + b.n - 2, ":7");
	hbuf_free(&b);
}
