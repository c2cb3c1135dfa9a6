/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the router, park, regression, header and config tests:
 * the ladder those tests were written for, header tables and field values
 * built by hand, a publisher's full set of properties, assertions on the
 * headers, properties and routes that come out, and the fixtures of the
 * files that test router.h (test_router*.c) and config.h (test_config*.c).
 * Everything is static inline so a test file that leaves a helper unused
 * gets no warning.
 */
#ifndef CASCADE_TEST_HELPERS_H
#define CASCADE_TEST_HELPERS_H

#include "amqp_compat.h"
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "headers.h"
#include "ladder.h"
#include "plan.h"
#include "router.h"
#include "targets.h"

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

/* One field value of the given kind, zero otherwise. */
static inline amqp_field_value_t
fv_kind(uint8_t kind)
{
	amqp_field_value_t v;

	memset(&v, 0, sizeof(v));
	v.kind = kind;
	return v;
}

static inline amqp_field_value_t
fv_str(uint8_t kind, const char *s)
{
	amqp_field_value_t v = fv_kind(kind);

	v.value.bytes = amqp_cstring_bytes(s);
	return v;
}

static inline amqp_field_value_t
fv_utf8(const char *s)
{
	return fv_str(AMQP_FIELD_KIND_UTF8, s);
}

static inline amqp_field_value_t
fv_i64(int64_t n)
{
	amqp_field_value_t v = fv_kind(AMQP_FIELD_KIND_I64);

	v.value.i64 = n;
	return v;
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

/* router_decide on a route filled with junk, so nothing is left unset. */
static inline void
route_decide(const struct router_params *params, enum route_source src,
             const amqp_basic_properties_t *p, const char *rk, int64_t now,
             struct route *r)
{
	memset(r, 0x5a, sizeof(*r));
	router_decide(params, src, p, amqp_cstring_bytes(rk), now, r);
}

static inline void
expect_park(const struct route *r, const char *about)
{
	cr_assert_eq(r->action, ROUTE_PARK, "action %d, want park", r->action);
	cr_assert(strstr(r->reason, about) != NULL,
	          "reason \"%s\" does not mention \"%s\"", r->reason, about);
}

/*
 * The fixture of the files that test router.h (test_router*.c), one line
 * at the top of each: ladder, params and pool, the default router made
 * before every test of suite and the pool emptied after it, and decide,
 * route_decide on those params.
 */
#define ROUTER_FIXTURE(suite)                                                  \
	static struct ladder ladder;                                           \
	static struct router_params params;                                    \
	static amqp_pool_t pool;                                               \
	static void suite##_fixture_init(void)                                 \
	{                                                                      \
		default_router(&ladder, &params);                              \
		init_amqp_pool(&pool, 4096);                                   \
	}                                                                      \
	static void suite##_fixture_fini(void)                                 \
	{                                                                      \
		empty_amqp_pool(&pool);                                        \
	}                                                                      \
	static inline void decide(                                             \
	    enum route_source src, const amqp_basic_properties_t *p,           \
	    const char *rk, int64_t now, struct route *r)                      \
	{                                                                      \
		route_decide(&params, src, p, rk, now, r);                     \
	}                                                                      \
	TestSuite(suite, .init = suite##_fixture_init,                         \
	          .fini = suite##_fixture_fini)

/* Loads text as test.ini into cfg: it must be accepted without a word. */
static inline void
config_load_ok(struct config *cfg, char *err, size_t size, const char *text)
{
	int rc = config_load_string(cfg, "test.ini", text, err, size);

	cr_assert_eq(rc, 0, "rejected:\n%s\nerrors:\n%s", text, err);
	cr_assert_str_empty(err, "errors despite success: %s", err);
}

/* Loads text as test.ini into cfg: it must be rejected with a message. */
static inline void
config_load_bad(struct config *cfg, char *err, size_t size, const char *text)
{
	int rc = config_load_string(cfg, "test.ini", text, err, size);

	cr_assert_eq(rc, -1, "accepted:\n%s", text);
	cr_assert_str_not_empty(err, "no error message for:\n%s", text);
}

/* err holds a line starting with `head` that also contains `about`. */
static inline void
config_expect_error(const char *err, const char *head, const char *about)
{
	const char *line = err;

	while (line != NULL && *line != '\0') {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[1024];

		snprintf(buf, sizeof(buf), "%.*s", (int)len, line);
		if (strncmp(buf, head, strlen(head)) == 0 &&
		    (about == NULL || strstr(buf, about) != NULL))
			return;
		line = nl ? nl + 1 : NULL;
	}
	cr_assert_fail("no error \"%s...%s\" in:\n%s", head, about ? about : "",
	               err);
}

/* The environment of whoever runs the tests must not leak in. */
static inline void
config_clear_env(struct config *cfg, char *err, size_t size)
{
	unsetenv("CASCADE_BROKER_URL");
	unsetenv("CASCADE_BROKER_PASSWORD");
	memset(cfg, 0, sizeof(*cfg));
	memset(err, 0, size);
}

/*
 * The fixture of the files that test config.h (test_config*.c), one line
 * at the top of each: cfg and err, cleared with the environment before
 * every test of suite, and load_ok, load_bad and expect_error on them.
 */
#define CONFIG_FIXTURE(suite)                                                  \
	static struct config cfg;                                              \
	static char err[8192];                                                 \
	static void suite##_fixture_init(void)                                 \
	{                                                                      \
		config_clear_env(&cfg, err, sizeof(err));                      \
	}                                                                      \
	static inline void load_ok(const char *text)                           \
	{                                                                      \
		config_load_ok(&cfg, err, sizeof(err), text);                  \
	}                                                                      \
	static inline void load_bad(const char *text)                          \
	{                                                                      \
		config_load_bad(&cfg, err, sizeof(err), text);                 \
	}                                                                      \
	static inline void expect_error(const char *head, const char *about)   \
	{                                                                      \
		config_expect_error(err, head, about);                         \
	}                                                                      \
	TestSuite(suite, .init = suite##_fixture_init)

/*
 * The plan's tests and the verdict's: default_router's ladder, targets
 * whose backoff starts at one resolution step, capped at a minute, and
 * the plan over them, with its delay queues named cascade.delay.K.
 */
struct plan_fixture {
	struct ladder ladder;
	struct router_params rp;
	struct targets targets;
	const char *queues[LADDER_MAX_LEVELS];
	char names[LADDER_MAX_LEVELS][32];
	struct plan p;
};

static inline void
plan_fixture_init(struct plan_fixture *f)
{
	default_router(&f->ladder, &f->rp);
	targets_init(&f->targets, f->ladder.ttl[0], 60000);
	for (unsigned k = 0; k < f->ladder.levels; k++) {
		snprintf(f->names[k], sizeof(f->names[k]), "cascade.delay.%u",
		         k);
		f->queues[k] = f->names[k];
	}
	memset(&f->p, 0, sizeof(f->p));
	f->p.rp = &f->rp;
	f->p.ladder = &f->ladder;
	f->p.targets = &f->targets;
	f->p.level_queues = f->queues;
}

#endif
