/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Header tables: which headers route, lookup, filtering, equality; the
 * size of properties as rabbitmq-c encodes them, UTF-8 names, and the one
 * table of special headers.
 */
#include "amqp_compat.h"
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "headers.h"

#include "helpers.h"

static int
routing(const char *key)
{
	return headers_is_routing(amqp_cstring_bytes(key));
}

Test(headers_is_routing, publisher_routing_headers)
{
	cr_assert(routing("x-remaining-delay"));
	cr_assert(routing("x-delay"));
	cr_assert(routing("x-deliver-at"));
	cr_assert(routing("x-opt-delivery-time"));
	cr_assert(routing("x-opt-delivery-delay"));
	cr_assert(routing("x-target-exchange"));
	cr_assert(routing("x-target-routing-key"));
}

Test(headers_is_routing, broker_dead_letter_headers)
{
	cr_assert(routing("x-death"));
	cr_assert(routing("x-first-death-queue"));
	cr_assert(routing("x-first-death-reason"));
	cr_assert(routing("x-first-death-exchange"));
	cr_assert(routing("x-last-death-reason"));
	cr_assert(routing("x-last-death-queue"));
	cr_assert(routing("x-last-death-exchange"));
}

Test(headers_is_routing, cascade_state)
{
	cr_assert(routing("x-cascade-due"));
	cr_assert(routing("x-cascade-exchange"));
	cr_assert(routing("x-cascade-routing-key"));
	cr_assert(routing("x-cascade-expiration"));
	cr_assert_not(routing("x-cascade-user-id"),
	              "the user-id is kept for the consumer");
}

Test(headers_is_routing, user_headers)
{
	cr_assert_not(routing("trace-id"));
	cr_assert_not(routing("x-match"));
	cr_assert_not(routing("x-delayed"));
	cr_assert_not(routing("x-delay-reason"));
	cr_assert_not(routing("x-deathly"));
	cr_assert_not(routing("x-remaining"));
	cr_assert_not(routing("X-Delay"), "header names are case-sensitive");
	cr_assert_not(routing(""));
	cr_assert_not(routing("x-"));
	cr_assert_not(routing("x-cascade"));
}

Test(headers_is_routing, uses_length_not_nul)
{
	amqp_bytes_t k;

	/* "x-delay" with a trailing byte is another header. */
	k.bytes = "x-delayZ";
	k.len = 8;
	cr_assert_not(headers_is_routing(k));
	k.len = 7;
	cr_assert(headers_is_routing(k));
	k.bytes = "x-deat";
	k.len = 6;
	cr_assert_not(headers_is_routing(k));
}

/* A small table on the stack. */
#define ENTRY(k, v) ((amqp_table_entry_t){amqp_cstring_bytes(k), (v)})

static int
drop_secret(amqp_bytes_t key)
{
	return key.len == 6 && memcmp(key.bytes, "secret", 6) == 0;
}

Test(headers_find, lookup)
{
	amqp_table_entry_t e[] = {
	    ENTRY("a", fv_i64(1)),
	    ENTRY("b", fv_utf8("two")),
	};
	amqp_table_t t = {2, e};
	const amqp_field_value_t *v;

	v = headers_find(&t, "b");
	cr_assert_not_null(v);
	cr_assert_eq(v->kind, AMQP_FIELD_KIND_UTF8);
	cr_assert_eq(headers_find(&t, "a")->value.i64, 1);
	cr_assert_null(headers_find(&t, "c"));
	cr_assert_null(headers_find(&t, "ab"));
	cr_assert_null(headers_find(&t, ""));
	cr_assert_null(headers_find(NULL, "a"));
}

Test(headers_filter, drops_and_keeps_order)
{
	amqp_table_entry_t e[] = {
	    ENTRY("trace-id", fv_utf8("abc")),
	    ENTRY("x-remaining-delay", fv_i64(5000)),
	    ENTRY("tenant", fv_i64(7)),
	    ENTRY("x-death", fv_kind(AMQP_FIELD_KIND_ARRAY)),
	    ENTRY("x-cascade-user-id", fv_utf8("alice")),
	};
	amqp_table_t in = {5, e}, out;
	amqp_pool_t pool;

	init_amqp_pool(&pool, 4096);
	cr_assert_eq(headers_filter(&in, headers_is_routing, 0, &pool, &out),
	             0);
	cr_assert_eq(out.num_entries, 3);
	cr_assert_null(headers_find(&out, "x-remaining-delay"));
	cr_assert_null(headers_find(&out, "x-death"));
	cr_assert_str_eq(out.entries[0].key.bytes, "trace-id");
	cr_assert_str_eq(out.entries[1].key.bytes, "tenant");
	cr_assert_str_eq(out.entries[2].key.bytes, "x-cascade-user-id");
	/* The input is untouched. */
	cr_assert_eq(in.num_entries, 5);
	cr_assert_str_eq(in.entries[1].key.bytes, "x-remaining-delay");
	empty_amqp_pool(&pool);
}

Test(headers_filter, null_drop_copies_everything)
{
	amqp_table_entry_t e[] = {
	    ENTRY("a", fv_i64(1)),
	    ENTRY("secret", fv_i64(2)),
	};
	amqp_table_t in = {2, e}, out;
	amqp_pool_t pool;

	init_amqp_pool(&pool, 4096);
	cr_assert_eq(headers_filter(&in, NULL, 0, &pool, &out), 0);
	cr_assert(headers_equal(&in, &out));
	cr_assert_eq(headers_filter(&in, drop_secret, 0, &pool, &out), 0);
	cr_assert_eq(out.num_entries, 1);
	cr_assert_null(headers_find(&out, "secret"));
	empty_amqp_pool(&pool);
}

Test(headers_filter, room_for_extra_entries)
{
	amqp_table_entry_t e[] = {
	    ENTRY("trace-id", fv_utf8("abc")),
	    ENTRY("x-delay", fv_i64(5000)),
	};
	amqp_table_t in = {2, e}, out;
	amqp_pool_t pool;
	const amqp_field_value_t *v;

	init_amqp_pool(&pool, 4096);
	cr_assert_eq(headers_filter(&in, headers_is_routing, 2, &pool, &out),
	             0);
	cr_assert_eq(out.num_entries, 1);
	headers_put_i64(&out, "x-cascade-due", INT64_C(1700000000000));
	headers_put_bytes(&out, "x-cascade-exchange",
	                  amqp_cstring_bytes("shop"));
	cr_assert_eq(out.num_entries, 3);
	v = headers_find(&out, "x-cascade-due");
	cr_assert_not_null(v);
	cr_assert_eq(v->kind, AMQP_FIELD_KIND_I64);
	cr_assert_eq(v->value.i64, INT64_C(1700000000000));
	v = headers_find(&out, "x-cascade-exchange");
	cr_assert_not_null(v);
	cr_assert_eq(v->kind, AMQP_FIELD_KIND_UTF8);
	cr_assert_eq(v->value.bytes.len, 4);
	cr_assert_eq(memcmp(v->value.bytes.bytes, "shop", 4), 0);
	/* The trace-id is still first, the new entries follow. */
	cr_assert_str_eq(out.entries[0].key.bytes, "trace-id");
	empty_amqp_pool(&pool);
}

Test(headers_filter, null_or_empty_input)
{
	amqp_table_t out, empty = {0, NULL};
	amqp_pool_t pool;

	init_amqp_pool(&pool, 4096);
	cr_assert_eq(headers_filter(NULL, headers_is_routing, 0, &pool, &out),
	             0);
	cr_assert_eq(out.num_entries, 0);
	cr_assert_eq(headers_filter(NULL, headers_is_routing, 1, &pool, &out),
	             0);
	cr_assert_eq(out.num_entries, 0);
	cr_assert_not_null(out.entries, "no room made for the extra entry");
	headers_put_i64(&out, "x-remaining-delay", 5);
	cr_assert_eq(out.num_entries, 1);
	cr_assert_eq(headers_filter(&empty, NULL, 0, &pool, &out), 0);
	cr_assert_eq(out.num_entries, 0);
	empty_amqp_pool(&pool);
}

Test(headers_equal, flat_tables)
{
	amqp_table_entry_t a[] = {
	    ENTRY("k", fv_utf8("v")),
	    ENTRY("n", fv_i64(5)),
	};
	amqp_table_entry_t b[] = {
	    ENTRY("k", fv_utf8("v")),
	    ENTRY("n", fv_i64(5)),
	};
	amqp_table_entry_t swapped[] = {
	    ENTRY("n", fv_i64(5)),
	    ENTRY("k", fv_utf8("v")),
	};
	amqp_table_entry_t other_value[] = {
	    ENTRY("k", fv_utf8("w")),
	    ENTRY("n", fv_i64(5)),
	};
	amqp_table_entry_t other_key[] = {
	    ENTRY("k", fv_utf8("v")),
	    ENTRY("m", fv_i64(5)),
	};
	amqp_table_t ta = {2, a}, tb = {2, b}, ts = {2, swapped},
	             tv = {2, other_value}, tk = {2, other_key}, t1 = {1, a},
	             empty = {0, NULL};

	cr_assert(headers_equal(&ta, &tb));
	cr_assert(headers_equal(&ta, &ta));
	/* RabbitMQ 4.x hands back (basic.return) headers sorted by name. */
	cr_assert(headers_equal(&ta, &ts), "order does not count");
	cr_assert(headers_equal(&ts, &ta));
	cr_assert_not(headers_equal(&ta, &tv));
	cr_assert_not(headers_equal(&ta, &tk));
	cr_assert_not(headers_equal(&ta, &t1));
	cr_assert_not(headers_equal(&t1, &ta));
	cr_assert(headers_equal(&empty, NULL));
	cr_assert(headers_equal(NULL, NULL));
	cr_assert_not(headers_equal(&ta, NULL));
}

Test(headers_equal, kinds_and_values)
{
	amqp_field_value_t x, y;
	amqp_table_entry_t ea[1], eb[1];
	amqp_table_t a = {1, ea}, b = {1, eb};

	/* Same number, different kinds: not equal. */
	x = fv_kind(AMQP_FIELD_KIND_I32);
	x.value.i32 = 5;
	y = fv_i64(5);
	ea[0] = ENTRY("n", x);
	eb[0] = ENTRY("n", y);
	cr_assert_not(headers_equal(&a, &b));
	/* Signed and unsigned of one width are different kinds too. */
	y = fv_kind(AMQP_FIELD_KIND_U32);
	y.value.u32 = 5;
	eb[0] = ENTRY("n", y);
	cr_assert_not(headers_equal(&a, &b));
	/* UTF-8 and bytes with the same content differ in kind. */
	ea[0] = ENTRY("s", fv_utf8("abc"));
	eb[0] = ENTRY("s", fv_str(AMQP_FIELD_KIND_BYTES, "abc"));
	cr_assert_not(headers_equal(&a, &b));
	/* Booleans compare by truth. */
	x = fv_kind(AMQP_FIELD_KIND_BOOLEAN);
	x.value.boolean = 1;
	y = x;
	ea[0] = ENTRY("b", x);
	eb[0] = ENTRY("b", y);
	cr_assert(headers_equal(&a, &b));
	y.value.boolean = 0;
	eb[0] = ENTRY("b", y);
	cr_assert_not(headers_equal(&a, &b));
	/* Doubles, decimals, timestamps, void. */
	x = fv_kind(AMQP_FIELD_KIND_F64);
	x.value.f64 = 1.5;
	y = x;
	ea[0] = ENTRY("f", x);
	eb[0] = ENTRY("f", y);
	cr_assert(headers_equal(&a, &b));
	y.value.f64 = 2.5;
	eb[0] = ENTRY("f", y);
	cr_assert_not(headers_equal(&a, &b));
	x = fv_kind(AMQP_FIELD_KIND_DECIMAL);
	x.value.decimal.decimals = 2;
	x.value.decimal.value = 150;
	y = x;
	ea[0] = ENTRY("d", x);
	eb[0] = ENTRY("d", y);
	cr_assert(headers_equal(&a, &b));
	y.value.decimal.decimals = 1;
	eb[0] = ENTRY("d", y);
	cr_assert_not(headers_equal(&a, &b));
	x = fv_kind(AMQP_FIELD_KIND_TIMESTAMP);
	x.value.u64 = 1700000000;
	y = x;
	ea[0] = ENTRY("t", x);
	eb[0] = ENTRY("t", y);
	cr_assert(headers_equal(&a, &b));
	y.value.u64++;
	eb[0] = ENTRY("t", y);
	cr_assert_not(headers_equal(&a, &b));
	ea[0] = ENTRY("v", fv_kind(AMQP_FIELD_KIND_VOID));
	eb[0] = ENTRY("v", fv_kind(AMQP_FIELD_KIND_VOID));
	cr_assert(headers_equal(&a, &b));
	/* Strings of different length with a common prefix. */
	ea[0] = ENTRY("s", fv_utf8("abc"));
	eb[0] = ENTRY("s", fv_utf8("abcd"));
	cr_assert_not(headers_equal(&a, &b));
	ea[0] = ENTRY("s", fv_utf8(""));
	eb[0] = ENTRY("s", fv_utf8(""));
	cr_assert(headers_equal(&a, &b));
}

Test(headers_equal, nested_tables_and_arrays)
{
	/* {"x-death": [{"queue": "q", "count": 1}], "meta": {"a": "b"}} */
	amqp_table_entry_t d1[] = {
	    ENTRY("queue", fv_utf8("q")),
	    ENTRY("count", fv_i64(1)),
	};
	amqp_table_entry_t d2[] = {
	    ENTRY("queue", fv_utf8("q")),
	    ENTRY("count", fv_i64(1)),
	};
	amqp_table_entry_t d3[] = {
	    ENTRY("queue", fv_utf8("q")),
	    ENTRY("count", fv_i64(2)),
	};
	amqp_field_value_t arr1[1], arr2[1], arr3[1], arr_long[2];
	amqp_table_entry_t m1[] = {ENTRY("a", fv_utf8("b"))};
	amqp_table_entry_t m2[] = {ENTRY("a", fv_utf8("c"))};
	amqp_field_value_t v;
	amqp_table_entry_t ta[2], tb[2];
	amqp_table_t a = {2, ta}, b = {2, tb};

	v = fv_kind(AMQP_FIELD_KIND_TABLE);
	v.value.table = (amqp_table_t){2, d1};
	arr1[0] = v;
	v.value.table = (amqp_table_t){2, d2};
	arr2[0] = v;
	arr_long[0] = v;
	arr_long[1] = v;
	v.value.table = (amqp_table_t){2, d3};
	arr3[0] = v;

	v = fv_kind(AMQP_FIELD_KIND_ARRAY);
	v.value.array = (amqp_array_t){1, arr1};
	ta[0] = ENTRY("x-death", v);
	v.value.array = (amqp_array_t){1, arr2};
	tb[0] = ENTRY("x-death", v);
	v = fv_kind(AMQP_FIELD_KIND_TABLE);
	v.value.table = (amqp_table_t){1, m1};
	ta[1] = ENTRY("meta", v);
	tb[1] = ENTRY("meta", v);
	cr_assert(headers_equal(&a, &b), "equal deep structures");

	/* A value deep in the array's table differs. */
	tb[0].value.value.array = (amqp_array_t){1, arr3};
	cr_assert_not(headers_equal(&a, &b));
	/* The array has one more element. */
	tb[0].value.value.array = (amqp_array_t){2, arr_long};
	cr_assert_not(headers_equal(&a, &b));
	/* Back to equal, then the nested table differs. */
	tb[0].value.value.array = (amqp_array_t){1, arr2};
	cr_assert(headers_equal(&a, &b));
	tb[1].value.value.table = (amqp_table_t){1, m2};
	cr_assert_not(headers_equal(&a, &b));
}

/* The size check must agree with rabbitmq-c's own encoder, to the byte. */
static size_t
encoded_props(amqp_basic_properties_t *p)
{
	static char buf[1 << 20];
	amqp_bytes_t b = {sizeof(buf), buf};
	int n = amqp_encode_properties(AMQP_BASIC_CLASS, p, b);

	cr_assert_geq(n, 0);
	return (size_t)n;
}

Test(headers, props_size_is_what_rabbitmq_c_encodes)
{
	amqp_basic_properties_t p;
	amqp_table_entry_t e[14], inner[2];
	amqp_field_value_t arr[3];
	amqp_decimal_t dec = {2, 12345};

	memset(&p, 0, sizeof(p));
	cr_assert_eq(headers_props_size(&p), encoded_props(&p));
	p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG |
	           AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_PRIORITY_FLAG |
	           AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
	           AMQP_BASIC_EXPIRATION_FLAG | AMQP_BASIC_USER_ID_FLAG |
	           AMQP_BASIC_APP_ID_FLAG | AMQP_BASIC_CLUSTER_ID_FLAG |
	           AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_REPLY_TO_FLAG |
	           AMQP_BASIC_CORRELATION_ID_FLAG |
	           AMQP_BASIC_CONTENT_ENCODING_FLAG | AMQP_BASIC_HEADERS_FLAG;
	p.content_type = amqp_cstring_bytes("application/json");
	p.content_encoding = amqp_cstring_bytes("gzip");
	p.correlation_id = amqp_cstring_bytes("c-1");
	p.reply_to = amqp_cstring_bytes("replies");
	p.expiration = amqp_cstring_bytes("60000");
	p.message_id = amqp_cstring_bytes("m-1");
	p.type = amqp_cstring_bytes("t");
	p.user_id = amqp_cstring_bytes("guest");
	p.app_id = amqp_cstring_bytes("app");
	p.cluster_id = amqp_cstring_bytes("");
	p.delivery_mode = 2;
	p.priority = 3;
	p.timestamp = 1700000000;
	static const uint8_t kinds[] = {
	    AMQP_FIELD_KIND_BOOLEAN,   AMQP_FIELD_KIND_I8,
	    AMQP_FIELD_KIND_U8,        AMQP_FIELD_KIND_I16,
	    AMQP_FIELD_KIND_U16,       AMQP_FIELD_KIND_I32,
	    AMQP_FIELD_KIND_U32,       AMQP_FIELD_KIND_I64,
	    AMQP_FIELD_KIND_F32,       AMQP_FIELD_KIND_F64,
	    AMQP_FIELD_KIND_TIMESTAMP, AMQP_FIELD_KIND_VOID,
	};
	memset(e, 0, sizeof(e));
	for (size_t i = 0; i < sizeof(kinds); i++) {
		e[i].key = amqp_cstring_bytes("k");
		e[i].value.kind = kinds[i];
	}
	e[12].key = amqp_cstring_bytes("decimal");
	e[12].value.kind = AMQP_FIELD_KIND_DECIMAL;
	e[12].value.value.decimal = dec;
	e[13].key = amqp_cstring_bytes("nested");
	e[13].value.kind = AMQP_FIELD_KIND_ARRAY;
	arr[0].kind = AMQP_FIELD_KIND_UTF8;
	arr[0].value.bytes = amqp_cstring_bytes("a string");
	arr[1].kind = AMQP_FIELD_KIND_BYTES;
	arr[1].value.bytes = amqp_cstring_bytes("bytes");
	arr[2].kind = AMQP_FIELD_KIND_TABLE;
	inner[0].key = amqp_cstring_bytes("x-cascade-due");
	inner[0].value.kind = AMQP_FIELD_KIND_I64;
	inner[1].key = amqp_cstring_bytes("u64");
	inner[1].value.kind = AMQP_FIELD_KIND_U64;
	arr[2].value.table = (amqp_table_t){2, inner};
	e[13].value.value.array = (amqp_array_t){3, arr};
	p.headers = (amqp_table_t){14, e};
	cr_assert_eq(headers_props_size(&p), encoded_props(&p));
}

Test(headers, utf8_validity_as_rabbitmq_checks_names)
{
	static const struct {
		const char *s;
		int ok;
	} cases[] = {
	    {"", 1},
	    {"billing", 1},
	    {"caf\xc3\xa9", 1},
	    {"\xe2\x82\xac", 1},
	    {"\xf0\x9f\x90\x87", 1},
	    {"foo\n", 1},
	    {"\xff\xfe"
	     "abc",
	     0},
	    {"\xc3", 0},             /* cut short */
	    {"\xc0\xaf", 0},         /* overlong '/' */
	    {"\xed\xa0\x80", 0},     /* surrogate */
	    {"\xf4\x90\x80\x80", 0}, /* past U+10FFFF */
	    {"\xe2\x28\xa1", 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_assert_eq(headers_utf8_valid(amqp_cstring_bytes(cases[i].s)),
		             cases[i].ok, "case %zu", i);
}

/* The one table of special headers: every use agrees with it. */
Test(headers, rules_table_classes_and_fates)
{
	static const struct {
		const char *key;
		enum header_class cls;
		enum header_fate forward, park, requeue;
	} cases[] = {
	    {"tenant", HEADER_OTHER, HEADER_KEEP, HEADER_KEEP, HEADER_KEEP},
	    {"x-custom", HEADER_OTHER, HEADER_KEEP, HEADER_KEEP, HEADER_KEEP},
	    {"CC", HEADER_DISTRIBUTION, HEADER_DROP, HEADER_DROP, HEADER_DROP},
	    {"BCC", HEADER_DISTRIBUTION, HEADER_DROP, HEADER_DROP, HEADER_DROP},
	    {"x-delay", HEADER_DELAY, HEADER_DROP, HEADER_KEEP, HEADER_ASK},
	    {"x-target-exchange", HEADER_TARGET, HEADER_DROP, HEADER_KEEP,
	     HEADER_KEEP},
	    {"x-death", HEADER_BROKER, HEADER_DROP, HEADER_DROP, HEADER_DROP},
	    {"x-last-death-queue", HEADER_BROKER, HEADER_DROP, HEADER_DROP,
	     HEADER_DROP},
	    {"x-delivery-count", HEADER_BROKER, HEADER_DROP, HEADER_DROP,
	     HEADER_DROP},
	    {"x-acquired-count", HEADER_BROKER, HEADER_DROP, HEADER_DROP,
	     HEADER_DROP},
	    {"x-cascade-user-id", HEADER_USER_ID, HEADER_ASK, HEADER_ASK,
	     HEADER_KEEP},
	    {"x-cascade-attempt", HEADER_ATTEMPT, HEADER_ASK, HEADER_KEEP,
	     HEADER_ASK},
	    {"x-cascade-error", HEADER_PARK_NOTE, HEADER_DROP, HEADER_DROP,
	     HEADER_DROP},
	    {"x-cascade-due", HEADER_STATE, HEADER_DROP, HEADER_KEEP,
	     HEADER_DROP},
	    /* state added later needs no new rule */
	    {"x-cascade-refused-since", HEADER_STATE, HEADER_DROP, HEADER_KEEP,
	     HEADER_DROP},
	    /* near misses are the publisher's */
	    {"x-deat", HEADER_OTHER, HEADER_KEEP, HEADER_KEEP, HEADER_KEEP},
	    {"CCX", HEADER_OTHER, HEADER_KEEP, HEADER_KEEP, HEADER_KEEP},
	    {"x-cascade", HEADER_OTHER, HEADER_KEEP, HEADER_KEEP, HEADER_KEEP},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		amqp_bytes_t k = amqp_cstring_bytes(cases[i].key);
		enum header_class c;
		cr_assert_eq(headers_fate(k, HEADER_FORWARD, &c),
		             cases[i].forward, "%s forward", cases[i].key);
		cr_assert_eq(c, cases[i].cls, "%s class", cases[i].key);
		cr_assert_eq(headers_fate(k, HEADER_PARK, NULL), cases[i].park,
		             "%s park", cases[i].key);
		cr_assert_eq(headers_fate(k, HEADER_REQUEUE, NULL),
		             cases[i].requeue, "%s requeue", cases[i].key);
	}
}
