/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wirecheck: encoded and decoded properties held to the depth and field
 * bounds, lengths checked, every field kind rabbitmq-c knows accepted.
 */
#include "amqp_compat.h"
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headers.h"
#include "wirecheck.h"

static void
put32(unsigned char *b, uint32_t v)
{
	b[0] = (unsigned char)(v >> 24);
	b[1] = (unsigned char)(v >> 16);
	b[2] = (unsigned char)(v >> 8);
	b[3] = (unsigned char)v;
}

/*
 * Properties with only headers: a table whose one entry "k" holds `nest`
 * tables (kind F) or arrays (kind A), each inside the one before, the last
 * empty.  Depth, as wirecheck counts it: nest + 1.  Written front to back,
 * each level's size known from how many follow it.
 */
static unsigned char *
bomb(size_t nest, unsigned char kind, size_t *len)
{
	size_t per = kind == AMQP_FIELD_KIND_TABLE ? 7 : 5;
	size_t inner = per * nest; /* the nested levels, the key-less first */
	size_t n, o = 0;
	unsigned char *b;

	/* The headers' one entry is keyed: 2 bytes of key before its kind. */
	n = 2 + 4 + 2 + inner - (kind == AMQP_FIELD_KIND_TABLE ? 2 : 0);
	b = malloc(n);
	cr_assert_not_null(b);
	b[o++] = 0x20; /* AMQP_BASIC_HEADERS_FLAG >> 8 */
	b[o++] = 0x00;
	put32(b + o, (uint32_t)(n - 6));
	o += 4;
	b[o++] = 1;
	b[o++] = 'k';
	for (size_t i = 0; i < nest; i++) {
		b[o++] = kind;
		put32(b + o, (uint32_t)(n - o - 4));
		o += 4;
		if (kind == AMQP_FIELD_KIND_TABLE && i + 1 < nest) {
			b[o++] = 1;
			b[o++] = 'k';
		}
	}
	cr_assert_eq(o, n);
	*len = n;
	return b;
}

static int
check(const unsigned char *b, size_t len)
{
	const char *why = NULL;
	size_t used = 0;
	int st = wirecheck_props(b, len, &used, &why);

	if (st == 0)
		cr_assert_eq(used, len);
	else
		cr_assert_not_null(why);
	return st;
}

Test(wirecheck, depth_at_the_bound_passes_and_decodes)
{
	unsigned char kinds[] = {AMQP_FIELD_KIND_TABLE, AMQP_FIELD_KIND_ARRAY};

	for (int k = 0; k < 2; k++) {
		size_t len;
		unsigned char *b =
		    bomb(WIRECHECK_DEPTH_MAX - 1, kinds[k], &len);
		amqp_bytes_t enc = {len, b};
		amqp_pool_t pool;
		void *decoded = NULL;
		const amqp_table_t *h;
		const char *why = NULL;

		cr_assert_eq(check(b, len), 0, "kind %c", kinds[k]);
		/* and rabbitmq-c agrees it is well formed */
		init_amqp_pool(&pool, 4096);
		cr_assert_geq(amqp_decode_properties(AMQP_BASIC_CLASS, &pool,
		                                     enc, &decoded),
		              0);
		h = &((amqp_basic_properties_t *)decoded)->headers;
		cr_assert_eq(wirecheck_table(h, &why), 0);
		empty_amqp_pool(&pool);
		free(b);
	}
}

Test(wirecheck, one_past_the_bound_fails)
{
	unsigned char kinds[] = {AMQP_FIELD_KIND_TABLE, AMQP_FIELD_KIND_ARRAY};

	for (int k = 0; k < 2; k++) {
		size_t len;
		unsigned char *b = bomb(WIRECHECK_DEPTH_MAX, kinds[k], &len);
		cr_assert_eq(check(b, len), WIRECHECK_BOUND, "kind %c",
		             kinds[k]);
		free(b);
	}
}

Test(wirecheck, a_very_deep_bomb_fails_without_recursion)
{
	unsigned char kinds[] = {AMQP_FIELD_KIND_TABLE, AMQP_FIELD_KIND_ARRAY};

	for (int k = 0; k < 2; k++) {
		size_t len;
		unsigned char *b = bomb(200000, kinds[k], &len);
		cr_assert_eq(check(b, len), WIRECHECK_BOUND);
		free(b);
	}
}

Test(wirecheck, headers_props_get_says_bound)
{
	size_t len, used = 0;
	unsigned char *b = bomb(200000, AMQP_FIELD_KIND_ARRAY, &len);
	unsigned char *framed = malloc(len + 4);
	amqp_basic_properties_t p;
	amqp_pool_t pool;

	cr_assert_not_null(framed);
	put32(framed, (uint32_t)len);
	memcpy(framed + 4, b, len);
	init_amqp_pool(&pool, 4096);
	cr_assert_eq(headers_props_get((amqp_bytes_t){len + 4, framed}, &pool,
	                               &p, &used),
	             HEADERS_PROPS_BOUND);
	empty_amqp_pool(&pool);
	free(framed);
	free(b);
}

Test(wirecheck, a_length_past_the_end_fails)
{
	size_t len;
	unsigned char *b = bomb(3, AMQP_FIELD_KIND_TABLE, &len);

	/* the headers' size one byte more than there is */
	put32(b + 2, (uint32_t)(len - 6 + 1));
	cr_assert_eq(check(b, len), WIRECHECK_MALFORMED);
	/* an inner table's size past its outer one's end, though within the
	 * buffer: rabbitmq-c would read on into what follows */
	put32(b + 2, (uint32_t)(len - 6 - 1));
	cr_assert_eq(check(b, len), WIRECHECK_MALFORMED);
	free(b);
}

Test(wirecheck, an_unknown_kind_and_a_second_flag_word_fail)
{
	unsigned char unknown[] = {0x20, 0, 0, 0, 0, 3, 1, 'k', 'Z'};
	unsigned char cont[] = {0x20, 0x01, 0, 0, 0, 0, 0, 0};

	cr_assert_eq(check(unknown, sizeof(unknown)), WIRECHECK_MALFORMED);
	cr_assert_eq(check(cont, sizeof(cont)), WIRECHECK_MALFORMED);
}

Test(wirecheck, too_many_fields_fail)
{
	/* an array of WIRECHECK_FIELDS_MAX voids is one field too many:
	 * the array itself counts */
	size_t n = 2 + 4 + 2 + 5 + WIRECHECK_FIELDS_MAX;
	unsigned char *b = malloc(n);

	cr_assert_not_null(b);
	b[0] = 0x20;
	b[1] = 0;
	put32(b + 2, (uint32_t)(n - 6));
	b[6] = 1;
	b[7] = 'k';
	b[8] = AMQP_FIELD_KIND_ARRAY;
	put32(b + 9, WIRECHECK_FIELDS_MAX);
	memset(b + 13, AMQP_FIELD_KIND_VOID, WIRECHECK_FIELDS_MAX);
	cr_assert_eq(check(b, n), WIRECHECK_BOUND);
	/* one fewer passes */
	put32(b + 2, (uint32_t)(n - 7));
	put32(b + 9, WIRECHECK_FIELDS_MAX - 1);
	cr_assert_eq(check(b, n - 1), 0);
	free(b);
}

/* Every field kind rabbitmq-c has, nested table and array included. */
Test(wirecheck, every_kind_and_property_round_trips)
{
	static const uint8_t scalars[] = {
	    AMQP_FIELD_KIND_BOOLEAN, AMQP_FIELD_KIND_I8,
	    AMQP_FIELD_KIND_U8,      AMQP_FIELD_KIND_I16,
	    AMQP_FIELD_KIND_U16,     AMQP_FIELD_KIND_I32,
	    AMQP_FIELD_KIND_U32,     AMQP_FIELD_KIND_I64,
	    AMQP_FIELD_KIND_U64,     AMQP_FIELD_KIND_F32,
	    AMQP_FIELD_KIND_F64,     AMQP_FIELD_KIND_DECIMAL,
	    AMQP_FIELD_KIND_UTF8,    AMQP_FIELD_KIND_TIMESTAMP,
	    AMQP_FIELD_KIND_VOID,    AMQP_FIELD_KIND_BYTES};
	enum { NS = sizeof(scalars) };
	amqp_table_entry_t entries[NS + 2], inner[NS];
	amqp_field_value_t items[NS];
	char keys[NS + 2][4];
	amqp_basic_properties_t p;
	unsigned char buf[4096];
	amqp_bytes_t room = {sizeof(buf), buf};
	const char *why = NULL;
	int n;

	memset(entries, 0, sizeof(entries));
	memset(items, 0, sizeof(items));
	for (int i = 0; i < NS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%c", scalars[i]);
		items[i].kind = scalars[i];
		if (scalars[i] == AMQP_FIELD_KIND_UTF8 ||
		    scalars[i] == AMQP_FIELD_KIND_BYTES)
			items[i].value.bytes = amqp_cstring_bytes("text");
		entries[i].key = amqp_cstring_bytes(keys[i]);
		entries[i].value = items[i];
		inner[i] = entries[i];
	}
	entries[NS].key = amqp_cstring_bytes("kA");
	entries[NS].value.kind = AMQP_FIELD_KIND_ARRAY;
	entries[NS].value.value.array = (amqp_array_t){NS, items};
	entries[NS + 1].key = amqp_cstring_bytes("kF");
	entries[NS + 1].value.kind = AMQP_FIELD_KIND_TABLE;
	entries[NS + 1].value.value.table = (amqp_table_t){NS, inner};

	memset(&p, 0, sizeof(p));
	p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG |
	           AMQP_BASIC_CONTENT_ENCODING_FLAG | AMQP_BASIC_HEADERS_FLAG |
	           AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_PRIORITY_FLAG |
	           AMQP_BASIC_CORRELATION_ID_FLAG | AMQP_BASIC_REPLY_TO_FLAG |
	           AMQP_BASIC_EXPIRATION_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
	           AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_TYPE_FLAG |
	           AMQP_BASIC_USER_ID_FLAG | AMQP_BASIC_APP_ID_FLAG |
	           AMQP_BASIC_CLUSTER_ID_FLAG;
	p.content_type = amqp_cstring_bytes("text/plain");
	p.content_encoding = amqp_cstring_bytes("utf-8");
	p.headers = (amqp_table_t){NS + 2, entries};
	p.delivery_mode = 2;
	p.priority = 5;
	p.correlation_id = amqp_cstring_bytes("c");
	p.reply_to = amqp_cstring_bytes("r");
	p.expiration = amqp_cstring_bytes("60000");
	p.message_id = amqp_cstring_bytes("m");
	p.timestamp = 1700000000;
	p.type = amqp_cstring_bytes("t");
	p.user_id = amqp_cstring_bytes("u");
	p.app_id = amqp_cstring_bytes("a");
	p.cluster_id = amqp_cstring_bytes("cl");
	n = amqp_encode_properties(AMQP_BASIC_CLASS, &p, room);
	cr_assert_gt(n, 0);
	cr_assert_eq(check(buf, (size_t)n), 0);
	cr_assert_eq(wirecheck_table(&p.headers, &why), 0);
	/* every shorter prefix runs past its end somewhere */
	for (int cut = 0; cut < n; cut++)
		cr_assert_eq(check(buf, (size_t)cut), WIRECHECK_MALFORMED,
		             "cut at %d of %d", cut, n);
}

Test(wirecheck, decoded_depth_is_bounded_without_recursion)
{
	/* 200,000 arrays, each the only element of the one before */
	enum { DEEP = 200000 };
	amqp_field_value_t *v = calloc(DEEP, sizeof(*v));
	amqp_table_entry_t e;
	amqp_table_t t = {1, &e};
	const char *why = NULL;

	cr_assert_not_null(v);
	for (int i = 0; i < DEEP; i++) {
		v[i].kind = AMQP_FIELD_KIND_ARRAY;
		v[i].value.array.num_entries = i + 1 < DEEP ? 1 : 0;
		v[i].value.array.entries = i + 1 < DEEP ? &v[i + 1] : NULL;
	}
	e.key = amqp_cstring_bytes("k");
	e.value = v[0];
	cr_assert_eq(wirecheck_table(&t, &why), WIRECHECK_BOUND);
	cr_assert_not_null(why);
	/* headers and 15 arrays: at the bound */
	v[WIRECHECK_DEPTH_MAX - 2].value.array.num_entries = 0;
	e.value = v[0];
	cr_assert_eq(wirecheck_table(&t, &why), 0);
	/* one more */
	v[WIRECHECK_DEPTH_MAX - 2].value.array.num_entries = 1;
	v[WIRECHECK_DEPTH_MAX - 1].value.array.num_entries = 0;
	cr_assert_eq(wirecheck_table(&t, &why), WIRECHECK_BOUND);
	cr_assert_eq(wirecheck_table(NULL, &why), 0);
	free(v);
}
