/* SPDX-License-Identifier: Apache-2.0 */
/* JSON strings from bytes: escapes, UTF-8 kept, the rest replaced. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static char out[512];

/* s (n bytes) through json_string and json_write: both must agree. */
static const char *
json(const char *s, size_t n)
{
	char *mem = NULL;
	size_t memlen = 0, len;
	FILE *fp = open_memstream(&mem, &memlen);

	cr_assert_not_null(fp);
	json_write(fp, s, n);
	fclose(fp);
	len = json_string(out, sizeof(out), s, n);
	cr_assert_eq(len, strlen(out), "returned %zu for \"%s\"", len, out);
	cr_assert_str_eq(mem, out, "json_write and json_string differ");
	free(mem);
	return out;
}

#define J(lit) json(lit, sizeof(lit) - 1)

Test(json, plain_ascii)
{
	cr_assert_str_eq(J("orders.eu-1"), "\"orders.eu-1\"");
	cr_assert_str_eq(J(""), "\"\"");
	cr_assert_str_eq(json(NULL, 0), "\"\"");
}

Test(json, quotes_and_backslashes)
{
	cr_assert_str_eq(J("say \"hi\""), "\"say \\\"hi\\\"\"");
	cr_assert_str_eq(J("C:\\tmp\\"), "\"C:\\\\tmp\\\\\"");
}

Test(json, control_bytes)
{
	cr_assert_str_eq(J("a\nb\tc\r"), "\"a\\u000ab\\u0009c\\u000d\"");
	cr_assert_str_eq(J("\x01\x1f\x7f"), "\"\\u0001\\u001f\\u007f\"");
	cr_assert_str_eq(J("nul\0here"), "\"nul\\u0000here\"");
}

Test(json, valid_multibyte_utf8_passes)
{
	/* 2, 3 and 4 bytes, and the highest code point. */
	cr_assert_str_eq(J("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
	cr_assert_str_eq(J("\xe2\x82\xac 5"), "\"\xe2\x82\xac 5\"");
	cr_assert_str_eq(J("\xf0\x9f\x93\xa6"), "\"\xf0\x9f\x93\xa6\"");
	cr_assert_str_eq(J("\xf4\x8f\xbf\xbf"), "\"\xf4\x8f\xbf\xbf\"");
}

Test(json, invalid_utf8_becomes_one_replacement_a_byte)
{
	/* A stray continuation byte, and a byte that starts nothing. */
	cr_assert_str_eq(J("a\x80z"), "\"a\\ufffdz\"");
	cr_assert_str_eq(J("\xff\xfe"), "\"\\ufffd\\ufffd\"");
	/* Truncated at the end, and cut by an ASCII byte. */
	cr_assert_str_eq(J("\xe2\x82"), "\"\\ufffd\\ufffd\"");
	cr_assert_str_eq(J("\xe2"
	                   "a"),
	                 "\"\\ufffda\"");
	/* Overlong '/', a surrogate, beyond U+10FFFF. */
	cr_assert_str_eq(J("\xc0\xaf"), "\"\\ufffd\\ufffd\"");
	cr_assert_str_eq(J("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
	cr_assert_str_eq(J("\xf4\x90\x80\x80"),
	                 "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
	/* A valid sequence right after an invalid byte survives. */
	cr_assert_str_eq(J("\xc3\xc3\xa9"), "\"\\ufffd\xc3\xa9\"");
}

Test(json, truncation_keeps_characters_whole)
{
	char small[8];
	size_t len;

	/* "a\u0001: the escape does not fit after "a and is left out. */
	len = json_string(small, sizeof(small), "a\x01", 2);
	cr_assert_eq(len, 9);
	cr_assert_str_eq(small, "\"a");
	len = json_string(small, sizeof(small), "abcdef", 6);
	cr_assert_eq(len, 8);
	cr_assert_str_eq(small, "\"abcdef");
	len = json_string(small, sizeof(small), "\xc3\xa9\xc3\xa9\xc3\xa9", 6);
	cr_assert_str_eq(small, "\"\xc3\xa9\xc3\xa9\xc3\xa9");
	cr_assert_eq(len, 8);
	cr_assert_eq(json_string(NULL, 0, "ab", 2), 4);
}

Test(json, one_character)
{
	char c[JSON_CHAR_MAX];
	size_t used, k;

	k = json_char((const unsigned char *)"\xe2\x82\xac!", 4, c, &used);
	cr_assert_eq(k, 3);
	cr_assert_eq(used, 3);
	k = json_char((const unsigned char *)"\xe2\x82", 2, c, &used);
	cr_assert_eq(k, 6);
	cr_assert_eq(used, 1);
	cr_assert(memcmp(c, "\\ufffd", 6) == 0);
}

Test(json, write_str_is_write_of_the_c_string)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);

	cr_assert_not_null(fp);
	json_write_str(fp, "a\"b\n");
	fclose(fp);
	cr_assert_str_eq(buf, "\"a\\\"b\\u000a\"");
	free(buf);
}

Test(json, write_or_null_writes_the_string_only_when_present)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);

	cr_assert_not_null(fp);
	json_write_or_null(fp, 1, "a\"", 2);
	fputc(',', fp);
	json_write_or_null(fp, 0, "a\"", 2);
	fclose(fp);
	cr_assert_str_eq(buf, "\"a\\\"\",null");
	free(buf);
}
