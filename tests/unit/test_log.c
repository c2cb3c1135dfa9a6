/* SPDX-License-Identifier: Apache-2.0 */
/* Log lines, text and JSON: one line per event, whatever the values hold. */
#include <criterion/criterion.h>
#include <string.h>

#include "log.h"

static char out[16384];

#define TS "2026-01-02T03:04:05.678Z"

Test(log_text, head_then_the_fields_as_printed)
{
	log_format(out, sizeof(out), 0, TS, LOG_LEVEL_WARN, "parked",
	           " queue=%s reason=\"%s\" n=%d", "c.error",
	           "target exchange 'x' not found", 12);
	cr_assert_str_eq(out, TS " warn msg=parked queue=c.error "
	                         "reason=\"target exchange 'x' not found\" "
	                         "n=12");
}

Test(log_text, controls_become_blanks)
{
	log_format(out, sizeof(out), 0, "ts", LOG_LEVEL_ERROR, "m",
	           " reason=\"%s\"", "two\nlines\tand\x7f");
	cr_assert_str_eq(out, "ts error msg=m reason=\"two lines and \"");
}

Test(log_text, a_long_line_is_cut_at_2047_bytes)
{
	static char big[4000];

	memset(big, 'x', sizeof(big) - 1);
	log_format(out, sizeof(out), 0, "ts", LOG_LEVEL_INFO, "m", " v=%s",
	           big);
	cr_assert_eq(strlen(out), 2047);
	cr_assert(strncmp(out, "ts info msg=m v=xxx", 19) == 0);
}

Test(log_json, fields_and_quoted_values)
{
	log_format(out, sizeof(out), 1, TS, LOG_LEVEL_WARN, "parked",
	           " queue=%s reason=\"%s\" n=%d t=%.1f", "c.error",
	           "target exchange 'x' not found", 12, -3.5);
	cr_assert_str_eq(out, "{\"ts\":\"" TS "\","
	                      "\"level\":\"warn\",\"msg\":\"parked\","
	                      "\"queue\":\"c.error\",\"reason\":\"target "
	                      "exchange 'x' not found\",\"n\":12,\"t\":-3.5}");
}

Test(log_json, strings_that_look_like_numbers_stay_strings)
{
	log_format(out, sizeof(out), 1, "ts", LOG_LEVEL_INFO, "m",
	           " v=%s z=%03d e=1e3 d=%d. q=\"%d\"", "0.1.0", 7, 5, 42);
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"info\",\"msg\":\"m\","
	                      "\"v\":\"0.1.0\",\"z\":\"007\",\"e\":\"1e3\","
	                      "\"d\":\"5.\",\"q\":\"42\"}");
}

Test(log_json, a_value_is_what_its_conversion_printed)
{
	/* Quotes, blanks and " k=" inside a value: the old parse of the text
	 * line split or cut these. */
	log_format(out, sizeof(out), 1, "ts", LOG_LEVEL_ERROR, "m",
	           " reason=\"%s\" url=%s n=%u", "say \"hi\" x=\" y=1",
	           "/tmp/a b.ini", 3u);
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"error\",\"msg\":"
	                      "\"m\",\"reason\":\"say \\\"hi\\\" x=\\\" y=1\","
	                      "\"url\":\"/tmp/a b.ini\",\"n\":3}");
}

Test(log_json, several_conversions_make_one_value)
{
	log_format(out, sizeof(out), 1, "ts", LOG_LEVEL_INFO, "m",
	           " listen=%s:%d rk=\"%.*s\" pct=%d%% id=0x%08x", "::1", 80, 3,
	           "orders", 50, 255u);
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"info\",\"msg\":\"m\","
	                      "\"listen\":\"::1:80\",\"rk\":\"ord\","
	                      "\"pct\":\"50%\",\"id\":\"0x000000ff\"}");
}

Test(log_json, quotes_backslashes_and_controls_are_escaped)
{
	log_format(out, sizeof(out), 1, "ts", LOG_LEVEL_ERROR, "m",
	           " reason=\"%s\"", "say \"hi\" \\ now");
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"error\",\"msg\":"
	                      "\"m\",\"reason\":\"say \\\"hi\\\" \\\\ now\"}");
	log_format(out, sizeof(out), 1, "ts", LOG_LEVEL_INFO, "m", " a=\"%s\"",
	           "x\ny");
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"info\",\"msg\":\"m\","
	                      "\"a\":\"x\\u000ay\"}");
}

Test(log_json, bytes_that_are_not_utf8_are_replaced)
{
	log_format(out, sizeof(out), 1, "ts", LOG_LEVEL_WARN, "m", " rk=\"%s\"",
	           "caf\xc3\xa9 \xff");
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"warn\",\"msg\":\"m\","
	                      "\"rk\":\"caf\xc3\xa9 \\ufffd\"}");
}

Test(log_json, words_without_a_key)
{
	log_format(out, sizeof(out), 1, "ts", LOG_LEVEL_INFO, "m",
	           " loose word");
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"info\",\"msg\":\"m\","
	                      "\"text\":\"loose\",\"text\":\"word\"}");
}

Test(log_json, empty_fields)
{
	log_format(out, sizeof(out), 1, "ts", LOG_LEVEL_INFO, "unblocked", "%s",
	           "");
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"info\","
	                      "\"msg\":\"unblocked\"}");
	log_format(out, sizeof(out), 1, "ts", LOG_LEVEL_INFO, "stopped",
	           " reason=\"all confirms received\"%s", "");
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"info\","
	                      "\"msg\":\"stopped\",\"reason\":\"all confirms "
	                      "received\"}");
}

Test(log_json, truncated_output_is_still_terminated)
{
	char small[16];

	log_format(small, sizeof(small), 1, "ts", LOG_LEVEL_INFO,
	           "a-long-message-here", " k=%s", "v");
	cr_assert_lt(strlen(small), sizeof(small));
}

Test(log_json, unterminated_quote)
{
	log_format(out, sizeof(out), 1, "ts", LOG_LEVEL_INFO, "m", " r=\"%s",
	           "open");
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"info\",\"msg\":\"m\","
	                      "\"r\":\"open\"}");
}
