/* Log lines as JSON: one object per event, whatever the values hold. */
#include <criterion/criterion.h>
#include <string.h>

#include "log.h"

static char out[4096];

Test(log_json, fields_and_quoted_values)
{
	log_to_json("2026-01-02T03:04:05.678Z warn msg=parked queue=c.error "
	            "reason=\"target exchange 'x' not found\" n=12 t=-3.5",
	            out, sizeof(out));
	cr_assert_str_eq(out, "{\"ts\":\"2026-01-02T03:04:05.678Z\","
	                      "\"level\":\"warn\",\"msg\":\"parked\","
	                      "\"queue\":\"c.error\",\"reason\":\"target "
	                      "exchange 'x' not found\",\"n\":12,\"t\":-3.5}");
}

Test(log_json, strings_that_look_like_numbers_stay_strings)
{
	log_to_json("ts info msg=m v=0.1.0 z=007 e=1e3 d=5.", out, sizeof(out));
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"info\",\"msg\":\"m\","
	                      "\"v\":\"0.1.0\",\"z\":\"007\",\"e\":\"1e3\","
	                      "\"d\":\"5.\"}");
}

Test(log_json, quotes_backslashes_and_controls_are_escaped)
{
	log_to_json("ts error msg=m reason=\"say \"hi\" \\ now\"", out,
	            sizeof(out));
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"error\",\"msg\":"
	                      "\"m\",\"reason\":\"say \\\"hi\\\" \\\\ now\"}");
	log_to_json("ts info msg=m a=\"x\ny\"", out, sizeof(out));
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"info\",\"msg\":\"m\","
	                      "\"a\":\"x\\u000ay\"}");
}

Test(log_json, words_without_a_key)
{
	log_to_json("ts info msg=m loose word", out, sizeof(out));
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"info\",\"msg\":\"m\","
	                      "\"text\":\"loose\",\"text\":\"word\"}");
}

Test(log_json, truncated_output_is_still_terminated)
{
	char small[16];

	log_to_json("ts info msg=a-long-message-here", small, sizeof(small));
	cr_assert_lt(strlen(small), sizeof(small));
}

Test(log_json, unterminated_quote)
{
	log_to_json("ts info msg=m r=\"open", out, sizeof(out));
	cr_assert_str_eq(out, "{\"ts\":\"ts\",\"level\":\"info\",\"msg\":\"m\","
	                      "\"r\":\"open\"}");
}
