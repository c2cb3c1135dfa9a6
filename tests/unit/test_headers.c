/* SPDX-License-Identifier: Apache-2.0 */
/* Header values: delays and times of any field type, integers, strings. */
#include "amqp_compat.h"
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "headers.h"

#include "helpers.h"

static void
expect_delay(amqp_field_value_t v, int64_t want)
{
	int64_t ms = -777;
	const char *why = NULL;
	int rc = headers_delay(&v, &ms, &why);

	cr_assert_eq(rc, 0, "kind '%c': rc %d (%s)", v.kind, rc,
	             why ? why : "");
	cr_assert_eq(ms, want, "kind '%c': %lld ms, want %lld", v.kind,
	             (long long)ms, (long long)want);
}

static void
expect_delay_error(amqp_field_value_t v, const char *about)
{
	int64_t ms = -777;
	const char *why = NULL;

	cr_assert_eq(headers_delay(&v, &ms, &why), -1,
	             "kind '%c' accepted as %lld", v.kind, (long long)ms);
	cr_assert_not_null(why);
	if (about != NULL)
		cr_assert(strstr(why, about) != NULL,
		          "kind '%c': \"%s\" does not mention \"%s\"", v.kind,
		          why, about);
}

Test(headers_delay, every_integer_width)
{
	amqp_field_value_t v;

	v = fv_kind(AMQP_FIELD_KIND_I8);
	v.value.i8 = 100;
	expect_delay(v, 100);
	v.value.i8 = INT8_MIN;
	expect_delay(v, -128);
	v = fv_kind(AMQP_FIELD_KIND_U8);
	v.value.u8 = 250;
	expect_delay(v, 250);
	v = fv_kind(AMQP_FIELD_KIND_I16);
	v.value.i16 = 30000;
	expect_delay(v, 30000);
	v.value.i16 = -30000;
	expect_delay(v, -30000);
	v = fv_kind(AMQP_FIELD_KIND_U16);
	v.value.u16 = 65535;
	expect_delay(v, 65535);
	v = fv_kind(AMQP_FIELD_KIND_I32);
	v.value.i32 = 90000;
	expect_delay(v, 90000);
	v.value.i32 = INT32_MIN;
	expect_delay(v, INT32_MIN);
	v = fv_kind(AMQP_FIELD_KIND_U32);
	v.value.u32 = UINT32_MAX;
	expect_delay(v, INT64_C(4294967295));
	v = fv_kind(AMQP_FIELD_KIND_I64);
	v.value.i64 = INT64_C(31536000000);
	expect_delay(v, INT64_C(31536000000));
	v.value.i64 = INT64_MAX;
	expect_delay(v, INT64_MAX);
	v.value.i64 = INT64_MIN;
	expect_delay(v, INT64_MIN);
	v = fv_kind(AMQP_FIELD_KIND_U64);
	v.value.u64 = 5000;
	expect_delay(v, 5000);
	v.value.u64 = (uint64_t)INT64_MAX;
	expect_delay(v, INT64_MAX);
}

Test(headers_delay, u64_above_int64_max)
{
	amqp_field_value_t v = fv_kind(AMQP_FIELD_KIND_U64);

	v.value.u64 = (uint64_t)INT64_MAX + 1;
	expect_delay_error(v, "range");
	v.value.u64 = UINT64_MAX;
	expect_delay_error(v, "range");
}

Test(headers_delay, negative_values)
{
	amqp_field_value_t v = fv_kind(AMQP_FIELD_KIND_I8);

	v.value.i8 = -5;
	expect_delay(v, -5);
	expect_delay(fv_i64(-1), -1);
	expect_delay(fv_utf8("-5s"), -5000);
	expect_delay(fv_utf8("-250"), -250);
}

Test(headers_delay, strings_with_and_without_units)
{
	expect_delay(fv_utf8("5000"), 5000);
	expect_delay(fv_utf8("250ms"), 250);
	expect_delay(fv_utf8("90s"), 90000);
	expect_delay(fv_utf8("15m"), 900000);
	expect_delay(fv_utf8("2h"), 7200000);
	expect_delay(fv_utf8("3d"), INT64_C(259200000));
	expect_delay(fv_utf8(" 90s "), 90000);
	expect_delay(fv_utf8("0"), 0);
	/* Longstr sent as bytes (AMQP 'x', as some clients do) reads alike. */
	expect_delay(fv_str(AMQP_FIELD_KIND_BYTES, "90s"), 90000);
	expect_delay(fv_str(AMQP_FIELD_KIND_BYTES, "5000"), 5000);
}

Test(headers_delay, bad_strings)
{
	expect_delay_error(fv_utf8(""), NULL);
	expect_delay_error(fv_utf8("soon"), NULL);
	expect_delay_error(fv_utf8("5x"), NULL);
	expect_delay_error(fv_utf8("1.5s"), NULL);
	expect_delay_error(fv_utf8("99999999999999999999"), NULL);
	expect_delay_error(fv_str(AMQP_FIELD_KIND_BYTES, ""), NULL);
}

Test(headers_delay, embedded_nul_is_malformed)
{
	amqp_field_value_t v = fv_kind(AMQP_FIELD_KIND_BYTES);

	v.value.bytes.bytes = "5\0s";
	v.value.bytes.len = 3;
	expect_delay_error(v, NULL);
	/* Not cut at the NUL either: "90s\0junk" is not 90s. */
	v.value.bytes.bytes = "90s\0junk";
	v.value.bytes.len = 8;
	expect_delay_error(v, NULL);
}

Test(headers_delay, string_not_nul_terminated)
{
	/* AMQP bytes have a length and no terminator. */
	char buf[] = {'9', '0', 's', '7', '7'};
	amqp_field_value_t v = fv_kind(AMQP_FIELD_KIND_UTF8);

	v.value.bytes.bytes = buf;
	v.value.bytes.len = 3;
	expect_delay(v, 90000);
}

Test(headers_delay, wrong_kinds_mention_integer)
{
	amqp_field_value_t v;

	v = fv_kind(AMQP_FIELD_KIND_BOOLEAN);
	v.value.boolean = 1;
	expect_delay_error(v, "integer");
	v = fv_kind(AMQP_FIELD_KIND_DECIMAL);
	v.value.decimal.decimals = 0;
	v.value.decimal.value = 5000;
	expect_delay_error(v, "integer");
	v = fv_kind(AMQP_FIELD_KIND_TABLE);
	expect_delay_error(v, "integer");
	v = fv_kind(AMQP_FIELD_KIND_ARRAY);
	expect_delay_error(v, "integer");
	v = fv_kind(AMQP_FIELD_KIND_VOID);
	expect_delay_error(v, "integer");
}

static void
expect_epoch(amqp_field_value_t v, int64_t want)
{
	int64_t ms = -777;
	const char *why = NULL;
	int rc = headers_epoch_ms(&v, &ms, &why);

	cr_assert_eq(rc, 0, "kind '%c': rc %d (%s)", v.kind, rc,
	             why ? why : "");
	cr_assert_eq(ms, want, "kind '%c': %lld, want %lld", v.kind,
	             (long long)ms, (long long)want);
}

static void
expect_epoch_error(amqp_field_value_t v)
{
	int64_t ms = -777;
	const char *why = NULL;

	cr_assert_eq(headers_epoch_ms(&v, &ms, &why), -1,
	             "kind '%c' accepted as %lld", v.kind, (long long)ms);
	cr_assert_not_null(why);
}

Test(headers_epoch_ms, integers)
{
	amqp_field_value_t v;

	expect_epoch(fv_i64(INT64_C(1700000000123)), INT64_C(1700000000123));
	v = fv_kind(AMQP_FIELD_KIND_U64);
	v.value.u64 = UINT64_C(1700000000123);
	expect_epoch(v, INT64_C(1700000000123));
	v = fv_kind(AMQP_FIELD_KIND_U32);
	v.value.u32 = 4000000000u;
	expect_epoch(v, INT64_C(4000000000));
	v = fv_kind(AMQP_FIELD_KIND_I32);
	v.value.i32 = 12345;
	expect_epoch(v, 12345);
	v = fv_kind(AMQP_FIELD_KIND_U8);
	v.value.u8 = 7;
	expect_epoch(v, 7);
	v = fv_kind(AMQP_FIELD_KIND_U64);
	v.value.u64 = UINT64_MAX;
	expect_epoch_error(v);
}

Test(headers_epoch_ms, timestamp_is_seconds)
{
	amqp_field_value_t v = fv_kind(AMQP_FIELD_KIND_TIMESTAMP);

	v.value.u64 = 1700000000;
	expect_epoch(v, INT64_C(1700000000000));
	v.value.u64 = 0;
	expect_epoch(v, 0);
	v.value.u64 = UINT64_MAX;
	expect_epoch_error(v);
	v.value.u64 = (uint64_t)(INT64_MAX / 1000) + 1;
	expect_epoch_error(v);
}

Test(headers_epoch_ms, digit_strings)
{
	expect_epoch(fv_utf8("1700000000123"), INT64_C(1700000000123));
	expect_epoch(fv_utf8("0"), 0);
	expect_epoch(fv_str(AMQP_FIELD_KIND_BYTES, "1700000000123"),
	             INT64_C(1700000000123));
}

Test(headers_epoch_ms, bad_strings_and_kinds)
{
	amqp_field_value_t v;

	expect_epoch_error(fv_utf8(""));
	expect_epoch_error(fv_utf8("tomorrow"));
	expect_epoch_error(fv_utf8("-5"));
	expect_epoch_error(fv_utf8("+5"));
	expect_epoch_error(fv_utf8("17e11"));
	expect_epoch_error(fv_utf8("123 "));
	expect_epoch_error(fv_utf8("90s"));
	expect_epoch_error(fv_utf8("99999999999999999999999"));
	v = fv_kind(AMQP_FIELD_KIND_F64);
	v.value.f64 = 1.7e12;
	expect_epoch_error(v);
	v = fv_kind(AMQP_FIELD_KIND_BOOLEAN);
	expect_epoch_error(v);
	expect_epoch_error(fv_kind(AMQP_FIELD_KIND_VOID));
}

Test(headers_integer, kinds)
{
	amqp_field_value_t v = fv_kind(AMQP_FIELD_KIND_I16);
	int64_t out = 0;

	v.value.i16 = -7;
	cr_assert_eq(headers_integer(&v, &out), 1);
	cr_assert_eq(out, -7);
	v = fv_utf8("5");
	cr_assert_eq(headers_integer(&v, &out), 0);
	v = fv_kind(AMQP_FIELD_KIND_U64);
	v.value.u64 = UINT64_MAX;
	cr_assert_eq(headers_integer(&v, &out), -1);
	v = fv_kind(AMQP_FIELD_KIND_TIMESTAMP);
	v.value.u64 = 5;
	cr_assert_eq(headers_integer(&v, &out), 0,
	             "a timestamp is not a plain integer");
}

Test(headers_string, kinds)
{
	amqp_field_value_t v = fv_utf8("orders");
	amqp_bytes_t b = {0, NULL};

	cr_assert_eq(headers_string(&v, &b), 0);
	cr_assert_eq(b.len, 6);
	cr_assert_eq(memcmp(b.bytes, "orders", 6), 0);
	v = fv_str(AMQP_FIELD_KIND_BYTES, "x");
	cr_assert_eq(headers_string(&v, &b), 0);
	cr_assert_eq(b.len, 1);
	v = fv_i64(5);
	cr_assert_eq(headers_string(&v, &b), -1);
}
