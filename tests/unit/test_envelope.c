/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Envelopes: a message's basic properties, headers of every field kind,
 * and its body, kept whole inside another message's body and read back.
 */
#include "amqp_compat.h"
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "headers.h"

#define MIB (1024 * 1024)

static amqp_pool_t pool;

static void
setup(void)
{
	init_amqp_pool(&pool, 4096);
}

static void
teardown(void)
{
	empty_amqp_pool(&pool);
}

TestSuite(envelope, .init = setup, .fini = teardown);

/* Every field kind rabbitmq-c has, the array and nested table included. */
static amqp_field_value_t array_items[5];
static amqp_table_entry_t nested_entries[2];
static amqp_table_entry_t all_entries[18];

static amqp_field_value_t
fv(uint8_t kind)
{
	amqp_field_value_t v;

	memset(&v, 0, sizeof(v));
	v.kind = kind;
	return v;
}

static void
entry(int i, const char *key, amqp_field_value_t v)
{
	all_entries[i].key = amqp_cstring_bytes(key);
	all_entries[i].value = v;
}

static amqp_table_t
every_kind(void)
{
	static const char raw[] = {'b', 0, 'y', '\xff', 't', 'e', 's'};
	amqp_field_value_t v;
	amqp_table_t t;
	int i = 0;

	v = fv(AMQP_FIELD_KIND_BOOLEAN);
	v.value.boolean = 1;
	entry(i++, "boolean", v);
	v = fv(AMQP_FIELD_KIND_I8);
	v.value.i8 = -100;
	entry(i++, "i8", v);
	v = fv(AMQP_FIELD_KIND_U8);
	v.value.u8 = 250;
	entry(i++, "u8", v);
	v = fv(AMQP_FIELD_KIND_I16);
	v.value.i16 = -30000;
	entry(i++, "i16", v);
	v = fv(AMQP_FIELD_KIND_U16);
	v.value.u16 = 65000;
	entry(i++, "u16", v);
	v = fv(AMQP_FIELD_KIND_I32);
	v.value.i32 = INT32_MIN;
	entry(i++, "i32", v);
	v = fv(AMQP_FIELD_KIND_U32);
	v.value.u32 = UINT32_MAX;
	entry(i++, "u32", v);
	v = fv(AMQP_FIELD_KIND_I64);
	v.value.i64 = INT64_MIN;
	entry(i++, "i64", v);
	v = fv(AMQP_FIELD_KIND_U64);
	v.value.u64 = UINT64_MAX;
	entry(i++, "u64", v);
	v = fv(AMQP_FIELD_KIND_F32);
	v.value.f32 = -1.5f;
	entry(i++, "f32", v);
	v = fv(AMQP_FIELD_KIND_F64);
	v.value.f64 = 3.141592653589793;
	entry(i++, "f64", v);
	v = fv(AMQP_FIELD_KIND_DECIMAL);
	v.value.decimal.decimals = 2;
	v.value.decimal.value = 12345;
	entry(i++, "decimal", v);
	v = fv(AMQP_FIELD_KIND_UTF8);
	v.value.bytes = amqp_cstring_bytes("long string \xc3\xa9");
	entry(i++, "utf8", v);
	v = fv(AMQP_FIELD_KIND_BYTES);
	v.value.bytes.bytes = (void *)raw;
	v.value.bytes.len = sizeof(raw);
	entry(i++, "bytes", v);

	array_items[0] = fv(AMQP_FIELD_KIND_I32);
	array_items[0].value.i32 = 7;
	array_items[1] = fv(AMQP_FIELD_KIND_UTF8);
	array_items[1].value.bytes = amqp_cstring_bytes("seven");
	array_items[2] = fv(AMQP_FIELD_KIND_VOID);
	array_items[3] = fv(AMQP_FIELD_KIND_U8);
	array_items[3].value.u8 = 7;
	array_items[4] = fv(AMQP_FIELD_KIND_F64);
	array_items[4].value.f64 = 7.5;
	v = fv(AMQP_FIELD_KIND_ARRAY);
	v.value.array.num_entries = 5;
	v.value.array.entries = array_items;
	entry(i++, "array", v);

	nested_entries[0].key = amqp_cstring_bytes("inner-i16");
	nested_entries[0].value = fv(AMQP_FIELD_KIND_I16);
	nested_entries[0].value.value.i16 = 42;
	nested_entries[1].key = amqp_cstring_bytes("inner-bytes");
	nested_entries[1].value = fv(AMQP_FIELD_KIND_BYTES);
	nested_entries[1].value.value.bytes = amqp_cstring_bytes("in");
	v = fv(AMQP_FIELD_KIND_TABLE);
	v.value.table.num_entries = 2;
	v.value.table.entries = nested_entries;
	entry(i++, "table", v);

	entry(i++, "void", fv(AMQP_FIELD_KIND_VOID));
	v = fv(AMQP_FIELD_KIND_TIMESTAMP);
	v.value.u64 = 1700000000;
	entry(i++, "timestamp", v);

	cr_assert_eq(i, (int)(sizeof(all_entries) / sizeof(all_entries[0])));
	t.num_entries = i;
	t.entries = all_entries;
	return t;
}

/* Every basic property set, headers of every kind among them. */
static amqp_basic_properties_t
every_property(void)
{
	amqp_basic_properties_t p;

	memset(&p, 0, sizeof(p));
	p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG |
	           AMQP_BASIC_CONTENT_ENCODING_FLAG | AMQP_BASIC_HEADERS_FLAG |
	           AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_PRIORITY_FLAG |
	           AMQP_BASIC_CORRELATION_ID_FLAG | AMQP_BASIC_REPLY_TO_FLAG |
	           AMQP_BASIC_EXPIRATION_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
	           AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_TYPE_FLAG |
	           AMQP_BASIC_USER_ID_FLAG | AMQP_BASIC_APP_ID_FLAG |
	           AMQP_BASIC_CLUSTER_ID_FLAG;
	p.content_type = amqp_cstring_bytes("application/json");
	p.content_encoding = amqp_cstring_bytes("gzip");
	p.headers = every_kind();
	p.delivery_mode = 2;
	p.priority = 9;
	p.correlation_id = amqp_cstring_bytes("corr-1");
	p.reply_to = amqp_cstring_bytes("amq.rabbitmq.reply-to");
	p.expiration = amqp_cstring_bytes("60000");
	p.message_id = amqp_cstring_bytes("msg-1");
	p.timestamp = UINT64_C(1700000000);
	p.type = amqp_cstring_bytes("order.paid");
	p.user_id = amqp_cstring_bytes("guest");
	p.app_id = amqp_cstring_bytes("shop-api");
	p.cluster_id = amqp_cstring_bytes("cluster-a");
	return p;
}

#define expect_same_bytes(a, b)                                                \
	cr_assert(headers_bytes_eq((a), (b)), "%s: \"%.*s\", want \"%.*s\"",   \
	          #a, (int)(a).len, (a).len ? (const char *)(a).bytes : "",    \
	          (int)(b).len, (b).len ? (const char *)(b).bytes : "")

/* The kind of every value, in arrays and nested tables too. */
static void expect_same_kinds_table(const amqp_table_t *got,
                                    const amqp_table_t *want);

static void
expect_same_kinds_value(const amqp_field_value_t *got,
                        const amqp_field_value_t *want, const char *where)
{
	cr_assert_eq(got->kind, want->kind, "%s: kind '%c', want '%c'", where,
	             got->kind, want->kind);
	if (want->kind == AMQP_FIELD_KIND_ARRAY) {
		cr_assert_eq(got->value.array.num_entries,
		             want->value.array.num_entries, "%s: array length",
		             where);
		for (int i = 0; i < want->value.array.num_entries; i++)
			expect_same_kinds_value(&got->value.array.entries[i],
			                        &want->value.array.entries[i],
			                        where);
	} else if (want->kind == AMQP_FIELD_KIND_TABLE) {
		expect_same_kinds_table(&got->value.table, &want->value.table);
	}
}

static void
expect_same_kinds_table(const amqp_table_t *got, const amqp_table_t *want)
{
	cr_assert_eq(got->num_entries, want->num_entries);
	for (int i = 0; i < want->num_entries; i++) {
		amqp_bytes_t k = want->entries[i].key;
		char key[64];
		const amqp_field_value_t *v;

		cr_assert_lt(k.len, sizeof(key));
		memcpy(key, k.bytes, k.len);
		key[k.len] = '\0';
		v = headers_find(got, key);
		cr_assert_not_null(v, "header %s missing", key);
		expect_same_kinds_value(v, &want->entries[i].value, key);
	}
}

static void
expect_same_props(const amqp_basic_properties_t *got,
                  const amqp_basic_properties_t *want)
{
	cr_assert_eq(got->_flags, want->_flags, "flags %#x, want %#x",
	             (unsigned)got->_flags, (unsigned)want->_flags);
	expect_same_bytes(got->content_type, want->content_type);
	expect_same_bytes(got->content_encoding, want->content_encoding);
	expect_same_bytes(got->correlation_id, want->correlation_id);
	expect_same_bytes(got->reply_to, want->reply_to);
	expect_same_bytes(got->expiration, want->expiration);
	expect_same_bytes(got->message_id, want->message_id);
	expect_same_bytes(got->type, want->type);
	expect_same_bytes(got->user_id, want->user_id);
	expect_same_bytes(got->app_id, want->app_id);
	expect_same_bytes(got->cluster_id, want->cluster_id);
	cr_assert_eq(got->delivery_mode, want->delivery_mode);
	cr_assert_eq(got->priority, want->priority);
	cr_assert_eq(got->timestamp, want->timestamp);
	if (want->_flags & AMQP_BASIC_HEADERS_FLAG) {
		cr_assert(headers_equal(&got->headers, &want->headers),
		          "headers differ");
		expect_same_kinds_table(&got->headers, &want->headers);
	}
}

/* Encode props and body into a buffer of its own (free it). */
static char *
encode(const amqp_basic_properties_t *props, amqp_bytes_t body, size_t *len)
{
	size_t cap = envelope_bound(props, body.len);
	char *out = malloc(cap);

	cr_assert_not_null(out);
	*len = envelope_encode(props, body, out, cap);
	cr_assert_gt(*len, 0, "does not encode in envelope_bound's %zu", cap);
	cr_assert_leq(*len, cap);
	return out;
}

/* Decode in, which must succeed. */
static void
decode(amqp_bytes_t in, amqp_basic_properties_t *props, amqp_bytes_t *body)
{
	const char *why = "untouched";

	cr_assert_eq(envelope_decode(in, &pool, props, body, &why), 0, "%s",
	             why ? why : "(no reason)");
	cr_assert_null(why);
}

/* Encode, decode, and compare: the properties and the body exactly. */
static void
round_trip(const amqp_basic_properties_t *props, amqp_bytes_t body)
{
	amqp_basic_properties_t got;
	amqp_bytes_t got_body;
	size_t len;
	char *buf = encode(props, body, &len);

	cr_assert_eq(memcmp(buf, "CSCE", 4), 0);
	cr_assert_eq(buf[4], 1, "version");
	decode((amqp_bytes_t){.len = len, .bytes = buf}, &got, &got_body);
	expect_same_props(&got, props);
	cr_assert_eq(got_body.len, body.len, "body of %zu bytes, want %zu",
	             got_body.len, body.len);
	if (body.len > 0)
		cr_assert_eq(memcmp(got_body.bytes, body.bytes, body.len), 0,
		             "body bytes differ");
	/* The body points into the envelope, after the properties. */
	cr_assert_eq((char *)got_body.bytes, buf + len - body.len);
	free(buf);
}

Test(envelope, every_property_and_every_header_kind_round_trip)
{
	amqp_basic_properties_t p = every_property();

	round_trip(&p, amqp_cstring_bytes("{\"order\": 42}"));
}

Test(envelope, decoded_headers_keep_each_value_and_kind)
{
	amqp_basic_properties_t p = every_property(), got;
	amqp_bytes_t body;
	const amqp_field_value_t *v;
	size_t len;
	char *buf = encode(&p, amqp_cstring_bytes("x"), &len);

	decode((amqp_bytes_t){.len = len, .bytes = buf}, &got, &body);
	/* Each value and kind by hand, not only through headers_equal. */
	v = headers_find(&got.headers, "boolean");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_BOOLEAN && v->value.boolean);
	v = headers_find(&got.headers, "i8");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_I8 && v->value.i8 == -100);
	v = headers_find(&got.headers, "u8");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_U8 && v->value.u8 == 250);
	v = headers_find(&got.headers, "i16");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_I16 &&
	          v->value.i16 == -30000);
	v = headers_find(&got.headers, "u16");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_U16 && v->value.u16 == 65000);
	v = headers_find(&got.headers, "i32");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_I32 &&
	          v->value.i32 == INT32_MIN);
	v = headers_find(&got.headers, "u32");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_U32 &&
	          v->value.u32 == UINT32_MAX);
	v = headers_find(&got.headers, "i64");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_I64 &&
	          v->value.i64 == INT64_MIN);
	v = headers_find(&got.headers, "u64");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_U64 &&
	          v->value.u64 == UINT64_MAX);
	v = headers_find(&got.headers, "f32");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_F32 && v->value.f32 == -1.5f);
	v = headers_find(&got.headers, "f64");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_F64 &&
	          v->value.f64 == 3.141592653589793);
	v = headers_find(&got.headers, "decimal");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_DECIMAL &&
	          v->value.decimal.decimals == 2 &&
	          v->value.decimal.value == 12345);
	v = headers_find(&got.headers, "utf8");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_UTF8);
	expect_same_bytes(v->value.bytes,
	                  amqp_cstring_bytes("long string \xc3\xa9"));
	v = headers_find(&got.headers, "bytes");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_BYTES);
	cr_assert_eq(v->value.bytes.len, 7);
	cr_assert_eq(memcmp(v->value.bytes.bytes, "b\0y\xfftes", 7), 0);
	v = headers_find(&got.headers, "array");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_ARRAY &&
	          v->value.array.num_entries == 5);
	cr_assert_eq(v->value.array.entries[0].kind, AMQP_FIELD_KIND_I32);
	cr_assert_eq(v->value.array.entries[0].value.i32, 7);
	cr_assert_eq(v->value.array.entries[1].kind, AMQP_FIELD_KIND_UTF8);
	expect_same_bytes(v->value.array.entries[1].value.bytes,
	                  amqp_cstring_bytes("seven"));
	cr_assert_eq(v->value.array.entries[2].kind, AMQP_FIELD_KIND_VOID);
	cr_assert_eq(v->value.array.entries[3].kind, AMQP_FIELD_KIND_U8);
	cr_assert_eq(v->value.array.entries[3].value.u8, 7);
	cr_assert_eq(v->value.array.entries[4].kind, AMQP_FIELD_KIND_F64);
	cr_assert_eq(v->value.array.entries[4].value.f64, 7.5);
	v = headers_find(&got.headers, "table");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_TABLE &&
	          v->value.table.num_entries == 2);
	v = headers_find(&v->value.table, "inner-i16");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_I16 && v->value.i16 == 42);
	v = headers_find(&got.headers, "void");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_VOID);
	v = headers_find(&got.headers, "timestamp");
	cr_assert(v && v->kind == AMQP_FIELD_KIND_TIMESTAMP &&
	          v->value.u64 == 1700000000);
	free(buf);
}

Test(envelope, no_properties_at_all_round_trip)
{
	amqp_basic_properties_t p;

	memset(&p, 0, sizeof(p));
	round_trip(&p, amqp_cstring_bytes("plain"));
}

Test(envelope, an_empty_body_round_trips)
{
	amqp_basic_properties_t p = every_property();

	round_trip(&p, amqp_empty_bytes);
}

Test(envelope, a_body_with_nul_bytes_round_trips)
{
	static const char raw[] = {0, 'a', 0, 0, '\xff', 'b', 0};
	amqp_basic_properties_t p = every_property();

	round_trip(&p,
	           (amqp_bytes_t){.len = sizeof(raw), .bytes = (void *)raw});
}

Test(envelope, a_one_mib_body_round_trips)
{
	amqp_basic_properties_t p = every_property();
	char *body = malloc(MIB);

	cr_assert_not_null(body);
	for (size_t i = 0; i < MIB; i++)
		body[i] = (char)(i * 131 + (i >> 8));
	round_trip(&p, (amqp_bytes_t){.len = MIB, .bytes = body});
	free(body);
}

/* The bound holds what encode writes; a byte less does not encode. */
static void
expect_exact_fit(const amqp_basic_properties_t *p, amqp_bytes_t body)
{
	size_t len, again;
	char *buf = encode(p, body, &len);
	char *tight = malloc(len);

	cr_assert_not_null(tight);
	again = envelope_encode(p, body, tight, len);
	cr_assert_eq(again, len, "in exactly %zu bytes: %zu", len, again);
	cr_assert_eq(memcmp(tight, buf, len), 0);
	cr_assert_eq(envelope_encode(p, body, tight, len - 1), 0,
	             "encoded in %zu bytes, one short of %zu", len - 1, len);
	free(tight);
	free(buf);
}

Test(envelope, bound_suffices_and_one_byte_short_is_refused)
{
	amqp_basic_properties_t p = every_property(), none;

	memset(&none, 0, sizeof(none));
	/* Short by one byte of body, and (empty body) of properties. */
	expect_exact_fit(&p, amqp_cstring_bytes("body"));
	expect_exact_fit(&p, amqp_empty_bytes);
	expect_exact_fit(&none, amqp_cstring_bytes("b"));
	expect_exact_fit(&none, amqp_empty_bytes);
}

Test(envelope, a_buffer_smaller_than_the_head_is_refused)
{
	amqp_basic_properties_t p;
	char out[ENVELOPE_HEAD];

	memset(&p, 0, sizeof(p));
	cr_assert_eq(envelope_encode(&p, amqp_empty_bytes, out, 0), 0);
	cr_assert_eq(
	    envelope_encode(&p, amqp_empty_bytes, out, ENVELOPE_HEAD - 1), 0);
	cr_assert_eq(envelope_encode(&p, amqp_empty_bytes, out, ENVELOPE_HEAD),
	             0, "no room for the property flags");
}

/* Decoding in fails with a reason. */
static void
expect_refused(const char *in, size_t len, const char *what)
{
	amqp_basic_properties_t got;
	amqp_bytes_t body;
	const char *why = NULL;
	int rc =
	    envelope_decode((amqp_bytes_t){.len = len, .bytes = (void *)in},
	                    &pool, &got, &body, &why);

	cr_assert_eq(rc, -1, "%s: decoded", what);
	cr_assert_not_null(why, "%s: no reason", what);
	cr_assert_gt(strlen(why), 0, "%s: an empty reason", what);
}

/* A good envelope to spoil (free it). */
static char *
good(size_t *len, size_t *props_len)
{
	amqp_basic_properties_t p = every_property();
	char *buf = encode(&p, amqp_cstring_bytes("the body"), len);

	*props_len = (size_t)(unsigned char)buf[5] << 24 |
	             (size_t)(unsigned char)buf[6] << 16 |
	             (size_t)(unsigned char)buf[7] << 8 |
	             (size_t)(unsigned char)buf[8];
	cr_assert_eq(*props_len, *len - ENVELOPE_HEAD - strlen("the body"));
	return buf;
}

static void
put_length(char *buf, size_t n)
{
	buf[5] = (char)(n >> 24);
	buf[6] = (char)(n >> 16);
	buf[7] = (char)(n >> 8);
	buf[8] = (char)n;
}

Test(envelope, wrong_magic_is_refused)
{
	size_t len, n;
	char *buf = good(&len, &n);

	for (int i = 0; i < 4; i++) {
		char keep = buf[i];

		buf[i] ^= 0x20;
		expect_refused(buf, len, "wrong magic");
		buf[i] = keep;
	}
	expect_refused("{\"order\": 42}", 13, "JSON");
	free(buf);
}

Test(envelope, an_unknown_version_is_refused)
{
	size_t len, n;
	char *buf = good(&len, &n);

	buf[4] = 2;
	expect_refused(buf, len, "version 2");
	buf[4] = 0;
	expect_refused(buf, len, "version 0");
	buf[4] = (char)0xff;
	expect_refused(buf, len, "version 255");
	free(buf);
}

Test(envelope, a_length_beyond_the_input_is_refused)
{
	size_t len, n;
	char *buf = good(&len, &n);

	put_length(buf, len - ENVELOPE_HEAD + 1);
	expect_refused(buf, len, "length one past the end");
	put_length(buf, 0xffffffffu);
	expect_refused(buf, len, "length 2^32 - 1");
	put_length(buf, n);
	/* The properties cut short by the end of the input. */
	expect_refused(buf, ENVELOPE_HEAD + n - 1, "input ends in properties");
	expect_refused(buf, ENVELOPE_HEAD + 1, "input ends in the flags");
	expect_refused(buf, ENVELOPE_HEAD, "input ends after the head");
	free(buf);
}

Test(envelope, truncated_property_bytes_are_refused)
{
	size_t len, n;
	char *buf = good(&len, &n);

	/* A length field short of the properties, at every length: the
	 * body's bytes follow, but the properties must not run into them. */
	for (size_t cut = 0; cut < n; cut++) {
		char what[64];

		put_length(buf, cut);
		snprintf(what, sizeof(what), "properties cut to %zu of %zu",
		         cut, n);
		expect_refused(buf, len, what);
		expect_refused(buf, ENVELOPE_HEAD + cut, what);
	}
	free(buf);
}

Test(envelope, input_shorter_than_the_head_is_refused)
{
	size_t len, n;
	char *buf = good(&len, &n);

	for (size_t cut = 0; cut < ENVELOPE_HEAD; cut++)
		expect_refused(buf, cut, "shorter than the head");
	expect_refused(NULL, 0, "nothing");
	free(buf);
}

Test(envelope, a_length_longer_than_the_properties_is_refused)
{
	amqp_basic_properties_t p, out;
	amqp_bytes_t body;
	char buf[256];
	const char *why = NULL;
	size_t len;

	memset(&p, 0, sizeof(p));
	p._flags = AMQP_BASIC_MESSAGE_ID_FLAG;
	p.message_id = amqp_cstring_bytes("id");
	len = envelope_encode(&p, amqp_cstring_bytes("BODY"), buf, sizeof(buf));
	cr_assert_gt(len, 0);
	buf[8] = (char)(buf[8] + 2); /* two body bytes claimed as properties */
	cr_assert_eq(
	    envelope_decode((amqp_bytes_t){len, buf}, &pool, &out, &body, &why),
	    -1);
	cr_assert_not_null(why);
}
