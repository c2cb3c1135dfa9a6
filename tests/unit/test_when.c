/* SPDX-License-Identifier: Apache-2.0 */
/* when_parse and when_format: command-line times, and real calendar dates. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "when.h"

#define NOW INT64_C(1795424400000) /* 2026-11-23T09:00:00Z */

static void
expect(const char *s, int64_t want)
{
	char why[128] = "";
	int64_t ms = -777;

	cr_assert_eq(when_parse(s, NOW, &ms, why, sizeof(why)), 0,
	             "\"%s\" refused: %s", s, why);
	cr_assert_eq(ms, want, "\"%s\": got %lld, want %lld", s, (long long)ms,
	             (long long)want);
}

/* Refused, with a reason that contains about. */
static void
refuse(const char *s, const char *about)
{
	char why[128] = "";
	int64_t ms = -777;

	cr_assert_eq(when_parse(s, NOW, &ms, why, sizeof(why)), -1,
	             "\"%s\" taken as %lld", s, (long long)ms);
	cr_assert(strstr(why, about) != NULL, "\"%s\": why \"%s\", want %s", s,
	          why, about);
	cr_assert_eq(ms, -777);
}

Test(when, iso_utc_and_fraction)
{
	expect("2026-11-23T09:00:00Z", NOW);
	expect("2026-11-23T09:00:00.5Z", NOW + 500);
	expect("2026-11-23T09:00:00.123456Z", NOW + 123);
	expect("1970-01-01T00:00:00Z", 0);
}

Test(when, offsets)
{
	expect("2026-11-23T10:30:00+01:30", NOW);
	expect("2026-11-23T04:00:00-05:00", NOW);
	refuse("2026-11-23T09:00:00+24:00", "Z or +HH:MM");
	refuse("2026-11-23T09:00:00+0100", "Z or +HH:MM");
	refuse("2026-11-23T09:00:00", "Z or +HH:MM");
}

Test(when, unix_ms_and_durations)
{
	expect("0", 0);
	expect("1795424400000", NOW);
	expect("10m", NOW + 600000);
	expect("-5m", NOW - 300000);
	expect("2h", NOW + 7200000);
	refuse("", "nor");
	refuse("soon", "nor");
	refuse("99999999999999999999", "range");
}

Test(when, ten_is_unix_ms)
{
	expect("10", 10);
}

Test(when, calendar_dates_are_checked)
{
	refuse("2026-02-31T00:00:00Z", "no day 31 in 2026-02");
	refuse("2026-04-31T00:00:00Z", "no day 31 in 2026-04");
	refuse("2025-02-29T00:00:00Z", "no day 29 in 2025-02");
	refuse("2100-02-29T00:00:00Z", "no day 29");
	refuse("2026-13-01T00:00:00Z", "no month 13");
	refuse("2026-00-01T00:00:00Z", "no month 00");
	refuse("2026-01-00T00:00:00Z", "no day 00");
	refuse("2026-01-01T24:00:00Z", "time of day");
	refuse("2026-01-01T23:60:00Z", "time of day");
	refuse("2026-01-01T23:59:61Z", "time of day");
	expect("2028-02-29T00:00:00Z", INT64_C(1835395200000));
	expect("2000-02-29T00:00:00Z", INT64_C(951782400000));
	expect("2026-12-31T23:59:59Z", INT64_C(1798761599000));
}

Test(when, malformed_dates)
{
	refuse("2026-1-01T00:00:00Z", "ISO 8601");
	refuse("2026-11-23 09:00:00Z", "ISO 8601");
	refuse("2026-11-23", "ISO 8601");
	refuse("2026-11-23T09:00:00.Z", "digit after");
}

Test(when, absolute_takes_no_duration)
{
	char why[128];
	int64_t ms;

	cr_assert_eq(when_parse_absolute("10m", &ms, why, sizeof(why)), -1);
	cr_assert_eq(
	    when_parse_absolute("2026-11-23T09:00:00Z", &ms, why, sizeof(why)),
	    0);
	cr_assert_eq(ms, NOW);
}

Test(when, format_iso_with_ms)
{
	char buf[WHEN_TEXT_MAX];

	when_format(NOW + 7, buf, sizeof(buf));
	cr_assert_str_eq(buf, "2026-11-23T09:00:00.007Z");
	when_format(-1, buf, sizeof(buf));
	cr_assert_str_eq(buf, "1969-12-31T23:59:59.999Z");
	when_format(0, buf, sizeof(buf));
	cr_assert_str_eq(buf, "1970-01-01T00:00:00.000Z");
}

Test(when, relative)
{
	char buf[WHEN_TEXT_MAX];

	when_relative(0, buf, sizeof(buf));
	cr_assert_str_eq(buf, "now");
	when_relative(999, buf, sizeof(buf));
	cr_assert_str_eq(buf, "now");
	when_relative(-3000, buf, sizeof(buf));
	cr_assert_str_eq(buf, "3s ago");
	when_relative(192000, buf, sizeof(buf));
	cr_assert_str_eq(buf, "in 3m12s");
	when_relative(3600000 + 59000, buf, sizeof(buf));
	cr_assert_str_eq(buf, "in 1h");
	when_relative(-(86400000LL * 2 + 3600000 * 5 + 60000), buf,
	              sizeof(buf));
	cr_assert_str_eq(buf, "2d5h ago");
	when_relative(120000, buf, sizeof(buf));
	cr_assert_str_eq(buf, "in 2m");
}
