/* SPDX-License-Identifier: Apache-2.0 */
/* form_parse: what browsers send, and every refusal. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "form.h"

#define MAX 8

static struct form_field f[MAX];
static size_t n;
static char buf[16384];

/* Parse a copy of s (s's length unless len is given) with max fields. */
static int
parse_n(const char *s, size_t len, size_t max, const char **why)
{
	memcpy(buf, s, len);
	buf[len] = 'X'; /* must be overwritten or ignored, never read */
	return form_parse(buf, len, f, max, &n, why);
}

static int
parse(const char *s, const char **why)
{
	return parse_n(s, strlen(s), MAX, why);
}

static void
expect_ok(const char *s)
{
	const char *why = NULL;
	cr_assert_eq(parse(s, &why), 0, "\"%s\": %s", s, why ? why : "?");
}

static void
expect_refused(const char *s, size_t len, size_t max, const char *why_want)
{
	const char *why = NULL;
	cr_assert_eq(parse_n(s, len, max, &why), -1, "\"%s\" accepted", s);
	cr_assert_str_eq(why, why_want, "\"%s\"", s);
}

static void
expect_field(const char *name, const char *value)
{
	const struct form_field *x = form_get(f, n, name);

	cr_assert_not_null(x, "no field %s", name);
	cr_assert_eq(x->value_len, strlen(value), "%s: length %zu", name,
	             x->value_len);
	cr_assert_str_eq(x->value, value);
	cr_assert_eq(strlen(x->name), x->name_len);
}

Test(form, plain_fields)
{
	expect_ok("user=alice&password=s3cret&csrf=00ff");
	cr_assert_eq(n, 3);
	expect_field("user", "alice");
	expect_field("password", "s3cret");
	expect_field("csrf", "00ff");
	cr_assert_null(form_get(f, n, "use"));
	cr_assert_null(form_get(f, n, "users"));
}

Test(form, empty_body_and_empty_value)
{
	expect_ok("");
	cr_assert_eq(n, 0);
	expect_ok("park=&id=x");
	cr_assert_eq(n, 2);
	expect_field("park", "");
}

Test(form, plus_and_percent)
{
	expect_ok("q=a+b%20c&at=2026-01-01T00%3A00%3a00Z&p=%2B%25%26%3D");
	expect_field("q", "a b c");
	expect_field("at", "2026-01-01T00:00:00Z");
	expect_field("p", "+%&=");
}

Test(form, name_is_decoded_too)
{
	expect_ok("a%62c=1");
	expect_field("abc", "1");
}

Test(form, utf8_passes)
{
	expect_ok("id=%C3%A9t%C3%A9&e=%F0%9F%98%80&raw=\xc3\xa9");
	expect_field("id", "\xc3\xa9t\xc3\xa9");
	expect_field("e", "\xf0\x9f\x98\x80");
	expect_field("raw", "\xc3\xa9");
}

Test(form, control_bytes_other_than_nul_pass)
{
	/* A textarea's newline: the field's own parser judges it. */
	expect_ok("reason=a%0D%0Ab%09");
	expect_field("reason", "a\r\nb\t");
}

Test(form, bad_percent)
{
	expect_refused("a=%", 3, MAX, "a % not followed by two hex digits");
	expect_refused("a=%4", 4, MAX, "a % not followed by two hex digits");
	expect_refused("a=%4g", 5, MAX, "a % not followed by two hex digits");
	expect_refused("a=%g4&b=1", 9, MAX,
	               "a % not followed by two hex digits");
	expect_refused("%=1", 3, MAX, "a % not followed by two hex digits");
	/* The escape must not reach over the '&' into the next field. */
	expect_refused("a=%4&1=2", 8, MAX,
	               "a % not followed by two hex digits");
}

Test(form, nul)
{
	expect_refused("a=%00", 5, MAX, "a NUL byte in a field");
	expect_refused("a%00=1", 6, MAX, "a NUL byte in a field");
	expect_refused("a=x\0y", 5, MAX, "a NUL byte in the body");
}

Test(form, invalid_utf8)
{
	expect_refused("a=%FF", 5, MAX, "a field that is not UTF-8");
	expect_refused("a=%C3", 5, MAX, "a field that is not UTF-8");
	expect_refused("a=%C0%AF", 8, MAX, "a field that is not UTF-8");
	expect_refused("a=%ED%A0%80", 11, MAX, "a field that is not UTF-8");
	expect_refused("a=%F4%90%80%80", 14, MAX, "a field that is not UTF-8");
	expect_refused("a=\x80", 3, MAX, "a field that is not UTF-8");
	expect_refused("%FF=1", 5, MAX, "a field that is not UTF-8");
}

Test(form, shape)
{
	expect_refused("a", 1, MAX, "a field without '='");
	expect_refused("a=1&b", 5, MAX, "a field without '='");
	expect_refused("=1", 2, MAX, "a field without a name");
	expect_refused("a=1&&b=2", 8, MAX,
	               "an empty field (two '&' together, or one at an end)");
	expect_refused("a=1&", 4, MAX,
	               "an empty field (two '&' together, or one at an end)");
	expect_refused("&a=1", 4, MAX,
	               "an empty field (two '&' together, or one at an end)");
}

Test(form, equals_in_a_value_is_kept)
{
	expect_ok("a=b=c");
	expect_field("a", "b=c");
}

Test(form, duplicates)
{
	expect_refused("id=1&id=2", 9, MAX, "a field given twice");
	expect_refused("id=1&i%64=2", 11, MAX, "a field given twice");
}

Test(form, field_count)
{
	const char *why;

	cr_assert_eq(parse_n("a=1&b=2&c=3", 11, 3, &why), 0);
	cr_assert_eq(n, 3);
	expect_refused("a=1&b=2&c=3&d=4", 15, 3, "too many fields");
	expect_refused("a=1", 3, 0, "too many fields");
}

Test(form, lengths)
{
	char s[FORM_VALUE_MAX * 3 + 100];
	size_t k;

	/* A name of exactly FORM_NAME_MAX, then one more. */
	memset(s, 'n', FORM_NAME_MAX);
	memcpy(s + FORM_NAME_MAX, "=1", 3);
	expect_ok(s);
	memset(s, 'n', FORM_NAME_MAX + 1);
	memcpy(s + FORM_NAME_MAX + 1, "=1", 3);
	expect_refused(s, strlen(s), MAX, "a field name too long");

	/* A value of FORM_VALUE_MAX decoded bytes, written as %41 each. */
	memcpy(s, "v=", 2);
	for (k = 0; k < FORM_VALUE_MAX; k++)
		memcpy(s + 2 + 3 * k, "%41", 3);
	s[2 + 3 * k] = '\0';
	expect_ok(s);
	cr_assert_eq(form_get(f, n, "v")->value_len, FORM_VALUE_MAX);
	memcpy(s + 2 + 3 * k, "A", 2);
	expect_refused(s, strlen(s), MAX, "a field value too long");
}

Test(form, nul_terminated_in_place)
{
	const char *why;
	char body[] = "a=1&b=2X";

	/* body[7], past the length, takes the last value's NUL. */
	cr_assert_eq(form_parse(body, 7, f, MAX, &n, &why), 0);
	cr_assert_str_eq(f[0].value, "1");
	cr_assert_str_eq(f[1].value, "2");
	cr_assert_eq(body[7], '\0');
}
