/* SPDX-License-Identifier: Apache-2.0 */
/* duration_parse and duration_format: what people write, and what we print. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "duration.h"

/* Parse a C string; returns duration_parse's result, *ms and *why. */
static int
parse(const char *s, enum duration_bare bare, int64_t *ms, const char **why)
{
	*ms = INT64_C(-777);
	*why = NULL;
	return duration_parse(s, strlen(s), bare, ms, why);
}

static void
expect_ms(const char *s, enum duration_bare bare, int64_t want)
{
	int64_t ms;
	const char *why;
	int rc = parse(s, bare, &ms, &why);

	cr_assert_eq(rc, 0, "\"%s\": rc %d, why %s", s, rc,
	             why ? why : "(none)");
	cr_assert_eq(ms, want, "\"%s\": got %lld ms, want %lld", s,
	             (long long)ms, (long long)want);
}

/* An error with a reason that contains `about` (NULL: any reason). */
static void
expect_error(const char *s, enum duration_bare bare, const char *about)
{
	int64_t ms;
	const char *why;
	int rc = parse(s, bare, &ms, &why);

	cr_assert_eq(rc, -1, "\"%s\": accepted as %lld ms", s, (long long)ms);
	cr_assert_not_null(why, "\"%s\": no reason", s);
	cr_assert_gt(strlen(why), 0, "\"%s\": empty reason", s);
	if (about != NULL)
		cr_assert(strstr(why, about) != NULL,
		          "\"%s\": reason \"%s\" does not mention \"%s\"", s,
		          why, about);
}

Test(duration_parse, every_unit)
{
	expect_ms("250ms", DURATION_BARE_REJECT, 250);
	expect_ms("2s", DURATION_BARE_REJECT, 2000);
	expect_ms("15m", DURATION_BARE_REJECT, 15 * 60 * 1000);
	expect_ms("2h", DURATION_BARE_REJECT, 2 * 3600 * 1000);
	expect_ms("3d", DURATION_BARE_REJECT, INT64_C(3) * 86400 * 1000);
	expect_ms("365d", DURATION_BARE_REJECT, INT64_C(31536000000));
	expect_ms("1ms", DURATION_BARE_REJECT, 1);
	expect_ms("0s", DURATION_BARE_REJECT, 0);
}

Test(duration_parse, ms_is_not_minutes)
{
	/* "ms" must not be read as "m" followed by junk, nor "m" as "ms". */
	expect_ms("5ms", DURATION_BARE_REJECT, 5);
	expect_ms("5m", DURATION_BARE_REJECT, 300000);
}

Test(duration_parse, bare_number_in_ms_for_headers)
{
	expect_ms("5000", DURATION_BARE_MS, 5000);
	expect_ms("0", DURATION_BARE_MS, 0);
	expect_ms("1", DURATION_BARE_MS, 1);
	/* A unit is still allowed where a bare number is. */
	expect_ms("90s", DURATION_BARE_MS, 90000);
}

Test(duration_parse, bare_number_rejected_for_config)
{
	expect_error("5000", DURATION_BARE_REJECT, "unit");
	expect_error("0", DURATION_BARE_REJECT, "unit");
	expect_error("  2  ", DURATION_BARE_REJECT, "unit");
}

Test(duration_parse, signs)
{
	expect_ms("-5s", DURATION_BARE_REJECT, -5000);
	expect_ms("+5s", DURATION_BARE_REJECT, 5000);
	expect_ms("-5000", DURATION_BARE_MS, -5000);
	expect_ms("+5000", DURATION_BARE_MS, 5000);
	expect_ms("-0", DURATION_BARE_MS, 0);
	expect_error("-", DURATION_BARE_MS, NULL);
	expect_error("+", DURATION_BARE_MS, NULL);
	expect_error("--5", DURATION_BARE_MS, NULL);
	expect_error("+-5", DURATION_BARE_MS, NULL);
	expect_error("- 5", DURATION_BARE_MS, NULL);
}

Test(duration_parse, surrounding_blanks)
{
	expect_ms("  2s", DURATION_BARE_REJECT, 2000);
	expect_ms("2s  ", DURATION_BARE_REJECT, 2000);
	expect_ms("\t 2s \t", DURATION_BARE_REJECT, 2000);
	expect_ms(" 5000 ", DURATION_BARE_MS, 5000);
	expect_ms(" -5s ", DURATION_BARE_REJECT, -5000);
}

Test(duration_parse, empty_and_blank)
{
	expect_error("", DURATION_BARE_MS, "empty");
	expect_error("  ", DURATION_BARE_MS, "empty");
	expect_error("\t", DURATION_BARE_REJECT, "empty");
}

Test(duration_parse, malformed)
{
	expect_error("5 s", DURATION_BARE_REJECT, NULL); /* unit must touch */
	expect_error("5 s", DURATION_BARE_MS, NULL);
	expect_error("5x", DURATION_BARE_MS, "unit");
	expect_error("s", DURATION_BARE_REJECT, "number");
	expect_error("ms", DURATION_BARE_REJECT, "number");
	expect_error("1.5s", DURATION_BARE_REJECT, NULL);
	expect_error("1.5", DURATION_BARE_MS, NULL);
	expect_error("5sec", DURATION_BARE_REJECT, "unit");
	expect_error("5secs", DURATION_BARE_MS, "unit");
	expect_error("5S", DURATION_BARE_REJECT, "unit");
	expect_error("5MS", DURATION_BARE_REJECT, "unit");
	expect_error("5s5", DURATION_BARE_REJECT, NULL);
	expect_error("5s 2m", DURATION_BARE_REJECT, NULL);
	expect_error("1e3", DURATION_BARE_MS, NULL);
	expect_error("0x10", DURATION_BARE_MS, NULL);
	expect_error("abc", DURATION_BARE_MS, NULL);
	expect_error("5 000", DURATION_BARE_MS, NULL);
}

Test(duration_parse, honours_len_not_nul)
{
	int64_t ms = 0;
	const char *why = NULL;

	/* Only the first len bytes count: "2s" out of "2s junk". */
	cr_assert_eq(
	    duration_parse("2s junk", 2, DURATION_BARE_REJECT, &ms, &why), 0);
	cr_assert_eq(ms, 2000);
	/* "25" of "250ms" is a bare number. */
	cr_assert_eq(duration_parse("250ms", 2, DURATION_BARE_MS, &ms, &why),
	             0);
	cr_assert_eq(ms, 25);
	cr_assert_eq(duration_parse("250ms", 0, DURATION_BARE_MS, &ms, &why),
	             -1);
	/* A NUL inside len is not a unit. */
	cr_assert_eq(duration_parse("5\0s", 3, DURATION_BARE_MS, &ms, &why),
	             -1);
}

Test(duration_parse, leading_zeros)
{
	expect_ms("007s", DURATION_BARE_REJECT, 7000);
	expect_ms("0000000000000000000000000001ms", DURATION_BARE_REJECT, 1);
}

Test(duration_parse, overflow)
{
	expect_error("9999999999999999999d", DURATION_BARE_REJECT, "range");
	expect_error("106751991167301d", DURATION_BARE_REJECT, "range");
	expect_error("99999999999999999999999999", DURATION_BARE_MS, "range");
	expect_error("-99999999999999999999999999", DURATION_BARE_MS, "range");
	expect_error("18446744073709551616", DURATION_BARE_MS, "range");
	expect_error("9223372036854775808", DURATION_BARE_MS, "range");
	expect_error("9223372036854775808ms", DURATION_BARE_REJECT, "range");
}

Test(duration_parse, unit_boundaries)
{
	/* The largest count of each unit that fits in int64 ms, and one more.
	 */
	expect_ms("106751991167d", DURATION_BARE_REJECT,
	          INT64_C(106751991167) * 86400000);
	expect_error("106751991168d", DURATION_BARE_REJECT, "range");
	expect_ms("2562047788015h", DURATION_BARE_REJECT,
	          INT64_C(2562047788015) * 3600000);
	expect_error("2562047788016h", DURATION_BARE_REJECT, "range");
	expect_ms("153722867280912m", DURATION_BARE_REJECT,
	          INT64_C(153722867280912) * 60000);
	expect_error("153722867280913m", DURATION_BARE_REJECT, "range");
	expect_ms("9223372036854775s", DURATION_BARE_REJECT,
	          INT64_C(9223372036854775) * 1000);
	expect_error("9223372036854776s", DURATION_BARE_REJECT, "range");
	expect_ms("-106751991167d", DURATION_BARE_REJECT,
	          -INT64_C(106751991167) * 86400000);
}

Test(duration_parse, error_leaves_no_garbage_success)
{
	int64_t ms = 42;
	const char *why = NULL;

	/* Callers test the return code; a failure must say so, with why. */
	cr_assert_eq(duration_parse("5x", 2, DURATION_BARE_MS, &ms, &why), -1);
	cr_assert_not_null(why);
}

static void
expect_format(int64_t ms, const char *want)
{
	char buf[64];

	memset(buf, 'X', sizeof(buf));
	duration_format(ms, buf, sizeof(buf));
	cr_assert_str_eq(buf, want, "%lld ms: got \"%s\", want \"%s\"",
	                 (long long)ms, buf, want);
}

Test(duration_format, largest_exact_unit)
{
	expect_format(90000, "90s");
	expect_format(250, "250ms");
	expect_format(0, "0ms");
	expect_format(3600000, "1h");
	expect_format(INT64_C(86400000) * 3, "3d");
	expect_format(1500, "1500ms");
	expect_format(60000, "1m");
	expect_format(90 * 60000, "90m");
	expect_format(1000, "1s");
	expect_format(1, "1ms");
	expect_format(INT64_C(31536000000), "365d");
	expect_format(INT64_C(315360000000), "3650d");
	expect_format(25 * 3600000, "25h");
}

Test(duration_format, negative)
{
	expect_format(-5000, "-5s");
	expect_format(-1, "-1ms");
	expect_format(-90000, "-90s");
}

Test(duration_format, int64_extremes)
{
	expect_format(INT64_MAX, "9223372036854775807ms");
	expect_format(INT64_MIN, "-9223372036854775808ms");
}

Test(duration_format, truncates_safely)
{
	char buf[4];

	memset(buf, 'X', sizeof(buf));
	duration_format(123456, buf, sizeof(buf));
	cr_assert_eq(buf[3], '\0', "not NUL-terminated within size");
	cr_assert_str_eq(buf, "123");
}

/* Every format parses back to the same value. */
Test(duration_format, round_trips)
{
	static const int64_t values[] = {
	    0,
	    1,
	    250,
	    999,
	    1000,
	    1500,
	    59999,
	    60000,
	    90000,
	    3600000,
	    3599000,
	    86400000,
	    INT64_C(86400000) * 3,
	    INT64_C(31536000000),
	    INT64_C(8388608000),
	    -5000,
	    INT64_C(106751991167) * 86400000,
	};

	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		char buf[64];
		int64_t back = -1;
		const char *why = NULL;

		duration_format(values[i], buf, sizeof(buf));
		cr_assert_eq(duration_parse(buf, strlen(buf),
		                            DURATION_BARE_REJECT, &back, &why),
		             0, "\"%s\" does not parse: %s", buf,
		             why ? why : "");
		cr_assert_eq(back, values[i], "\"%s\" parsed as %lld, not %lld",
		             buf, (long long)back, (long long)values[i]);
	}
}

static const char *
styled(int64_t ms, enum duration_style style)
{
	static char buf[48];

	duration_format_as(ms, style, buf, sizeof(buf));
	return buf;
}

Test(duration_format_as, exact_is_duration_format)
{
	cr_assert_str_eq(styled(90000, DURATION_EXACT), "90s");
	cr_assert_str_eq(styled(180000, DURATION_EXACT), "3m");
	cr_assert_str_eq(styled(250, DURATION_EXACT), "250ms");
	cr_assert_str_eq(styled(0, DURATION_EXACT), "0ms");
}

Test(duration_format_as, seconds)
{
	cr_assert_str_eq(styled(180000, DURATION_SECONDS), "180s");
	cr_assert_str_eq(styled(10000, DURATION_SECONDS), "10s");
	cr_assert_str_eq(styled(1500, DURATION_SECONDS), "1500ms");
	cr_assert_str_eq(styled(0, DURATION_SECONDS), "0s");
}

Test(duration_format_as, about)
{
	cr_assert_str_eq(styled(510000, DURATION_ABOUT), "8.5m");
	cr_assert_str_eq(styled(60000, DURATION_ABOUT), "1m");
	cr_assert_str_eq(styled(86400000LL * 97 + 3600000 * 2, DURATION_ABOUT),
	                 "97.1d");
	cr_assert_str_eq(styled(1000, DURATION_ABOUT), "1s");
	cr_assert_str_eq(styled(1049, DURATION_ABOUT), "1s");
	cr_assert_str_eq(styled(1050, DURATION_ABOUT), "1.1s");
	cr_assert_str_eq(styled(999, DURATION_ABOUT), "999ms");
	cr_assert_str_eq(styled(59999, DURATION_ABOUT), "60s");
}

Test(duration_format_as, span)
{
	cr_assert_str_eq(styled(0, DURATION_SPAN), "0s");
	cr_assert_str_eq(styled(999, DURATION_SPAN), "0s");
	cr_assert_str_eq(styled(59000, DURATION_SPAN), "59s");
	cr_assert_str_eq(styled(192000, DURATION_SPAN), "3m12s");
	cr_assert_str_eq(styled(3600000, DURATION_SPAN), "1h");
	cr_assert_str_eq(styled(3600000 + 61000, DURATION_SPAN), "1h1m");
	cr_assert_str_eq(styled(86400000LL + 3599000, DURATION_SPAN), "1d");
	cr_assert_str_eq(styled(86400000LL * 3 + 3600000, DURATION_SPAN),
	                 "3d1h");
}
