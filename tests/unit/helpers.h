/*
 * Helpers shared by the router, park and regression tests: the ladder
 * those tests were written for, header tables built by hand, a
 * publisher's full set of properties, and assertions on the headers and
 * properties that come out.
 * Everything is static inline so a test file that leaves a helper unused
 * gets no warning.
 */
#ifndef CASCADE_TEST_HELPERS_H
#define CASCADE_TEST_HELPERS_H

#include "amqp_compat.h"
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "headers.h"
#include "ladder.h"
#include "router.h"

#define NOW INT64_C(1700000000000)
#define DAY INT64_C(86400000)

/*
 * Not the shipped defaults (include/config.h: 2 s, factor 2, as many levels
 * as reach max_delay, tail = hold with a 250 ms margin): a 2 s ladder of
 * factor 4 and 12 levels, the one these tests' levels and hop counts were
 * worked out on, with round-up: a year's maximum delay, the default
 * exchange for deliveries without x-target-exchange, no hold tail, no
 * retries.
 */
static inline void
default_router(struct ladder *ladder, struct router_params *params)
{
	const char *why = NULL;

	cr_assert_eq(ladder_init(ladder, 2000, 4, 12, &why), 0, "%s",
	             why ? why : "");
	memset(params, 0, sizeof(*params));
	params->ladder = ladder;
	params->max_delay = 365 * DAY;
	params->default_exchange = amqp_empty_bytes;
	params->hold_tail = 0;
}

/* A header table under construction. */
struct tb {
	amqp_table_entry_t e[32];
	int n;
};

static inline amqp_field_value_t *
tb_add(struct tb *t, const char *key, uint8_t kind)
{
	amqp_table_entry_t *e;

	cr_assert_lt(t->n, (int)(sizeof(t->e) / sizeof(t->e[0])),
	             "header table full at %s", key);
	e = &t->e[t->n++];
	memset(e, 0, sizeof(*e));
	e->key = amqp_cstring_bytes(key);
	e->value.kind = kind;
	return &e->value;
}

static inline void
tb_str(struct tb *t, const char *key, const char *v)
{
	tb_add(t, key, AMQP_FIELD_KIND_UTF8)->value.bytes =
	    amqp_cstring_bytes(v);
}

static inline void
tb_i64(struct tb *t, const char *key, int64_t v)
{
	tb_add(t, key, AMQP_FIELD_KIND_I64)->value.i64 = v;
}

static inline void
tb_i32(struct tb *t, const char *key, int32_t v)
{
	tb_add(t, key, AMQP_FIELD_KIND_I32)->value.i32 = v;
}

/* Properties carrying t as headers (t NULL: no headers property). */
static inline amqp_basic_properties_t
props_of(struct tb *t)
{
	amqp_basic_properties_t p;

	memset(&p, 0, sizeof(p));
	if (t != NULL) {
		p._flags |= AMQP_BASIC_HEADERS_FLAG;
		p.headers.num_entries = t->n;
		p.headers.entries = t->e;
	}
	return p;
}

/*
 * Every basic property a publisher can set besides headers, with the
 * values expect_filled_props checks; user-id only when user_id is not NULL.
 */
static inline void
props_fill(amqp_basic_properties_t *p, const char *user_id)
{
	p->_flags |= AMQP_BASIC_CONTENT_TYPE_FLAG |
	             AMQP_BASIC_CONTENT_ENCODING_FLAG |
	             AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_PRIORITY_FLAG |
	             AMQP_BASIC_CORRELATION_ID_FLAG | AMQP_BASIC_REPLY_TO_FLAG |
	             AMQP_BASIC_EXPIRATION_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
	             AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_TYPE_FLAG |
	             AMQP_BASIC_APP_ID_FLAG;
	p->content_type = amqp_cstring_bytes("application/json");
	p->content_encoding = amqp_cstring_bytes("gzip");
	p->delivery_mode = 2;
	p->priority = 5;
	p->correlation_id = amqp_cstring_bytes("corr-1");
	p->reply_to = amqp_cstring_bytes("replies");
	p->expiration = amqp_cstring_bytes("60000");
	p->message_id = amqp_cstring_bytes("msg-1");
	p->timestamp = 1700000000;
	p->type = amqp_cstring_bytes("order.paid");
	p->app_id = amqp_cstring_bytes("shop-api");
	if (user_id != NULL) {
		p->_flags |= AMQP_BASIC_USER_ID_FLAG;
		p->user_id = amqp_cstring_bytes(user_id);
	}
}

static inline int
bytes_is(amqp_bytes_t b, const char *s)
{
	size_t n = strlen(s);

	return b.len == n && (n == 0 || memcmp(b.bytes, s, n) == 0);
}

#define expect_bytes(b, s)                                                     \
	cr_assert(bytes_is((b), (s)), "%s is \"%.*s\", want \"%s\"", #b,       \
	          (int)(b).len, (b).len ? (const char *)(b).bytes : "", (s))

/* How many entries of t are named key. */
static inline int
count_key(const amqp_table_t *t, const char *key)
{
	int n = 0;

	for (int i = 0; i < t->num_entries; i++)
		if (bytes_is(t->entries[i].key, key))
			n++;
	return n;
}

/* t has key exactly once, as a string equal to want. */
static inline void
expect_hdr_str(const amqp_table_t *t, const char *key, const char *want)
{
	const amqp_field_value_t *v = headers_find(t, key);
	amqp_bytes_t b;

	cr_assert_not_null(v, "header %s missing", key);
	cr_assert_eq(count_key(t, key), 1, "header %s given %d times", key,
	             count_key(t, key));
	cr_assert_eq(headers_string(v, &b), 0, "header %s is not a string",
	             key);
	cr_assert(bytes_is(b, want), "header %s is \"%.*s\", want \"%s\"", key,
	          (int)b.len, b.len ? (const char *)b.bytes : "", want);
}

/* t has key exactly once, as an integer of any width equal to want. */
static inline void
expect_hdr_int(const amqp_table_t *t, const char *key, int64_t want)
{
	const amqp_field_value_t *v = headers_find(t, key);
	int64_t n = 0;

	cr_assert_not_null(v, "header %s missing", key);
	cr_assert_eq(count_key(t, key), 1, "header %s given %d times", key,
	             count_key(t, key));
	cr_assert_eq(headers_integer(v, &n), 1, "header %s is no integer", key);
	cr_assert_eq(n, want, "header %s is %lld, want %lld", key, (long long)n,
	             (long long)want);
}

static inline void
expect_no_hdr(const amqp_table_t *t, const char *key)
{
	cr_assert_null(headers_find(t, key), "header %s should be gone", key);
}

/* No header named x-cascade-* but x-cascade-user-id. */
static inline void
expect_no_cascade_state(const amqp_table_t *t)
{
	for (int i = 0; i < t->num_entries; i++) {
		amqp_bytes_t k = t->entries[i].key;
		if (k.len >= 10 && memcmp(k.bytes, "x-cascade-", 10) == 0)
			cr_assert(bytes_is(k, "x-cascade-user-id"),
			          "left over: %.*s", (int)k.len,
			          (const char *)k.bytes);
	}
}

/* out carries the values props_fill set, but user-id and expiration. */
static inline void
expect_filled_props(const amqp_basic_properties_t *out)
{
	expect_bytes(out->content_type, "application/json");
	expect_bytes(out->content_encoding, "gzip");
	cr_assert_eq(out->delivery_mode, 2);
	cr_assert_eq(out->priority, 5);
	expect_bytes(out->correlation_id, "corr-1");
	expect_bytes(out->reply_to, "replies");
	expect_bytes(out->message_id, "msg-1");
	cr_assert_eq(out->timestamp, 1700000000);
	expect_bytes(out->type, "order.paid");
	expect_bytes(out->app_id, "shop-api");
}

#endif
