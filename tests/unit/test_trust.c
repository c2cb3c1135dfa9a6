/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who wrote what cascade reads back (trust.h), and the bounds a record's
 * fields must keep (events.h).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "events.h"
#include "headers.h"
#include "trust.h"

static struct config cfg;

static void
setup(void)
{
	config_defaults(&cfg);
	snprintf(cfg.broker_url, sizeof(cfg.broker_url),
	         "amqp://cascade:pw@127.0.0.1:5672/%%2f");
}

TestSuite(trust, .init = setup);

static amqp_bytes_t
b(const char *s)
{
	return amqp_cstring_bytes(s);
}

static amqp_basic_properties_t
message(const char *type, const char *writer)
{
	amqp_basic_properties_t p;

	memset(&p, 0, sizeof(p));
	if (type != NULL) {
		p._flags |= AMQP_BASIC_TYPE_FLAG;
		p.type = b(type);
	}
	if (writer != NULL) {
		p._flags |= AMQP_BASIC_USER_ID_FLAG;
		p.user_id = b(writer);
	}
	return p;
}

Test(trust, writers)
{
	cr_assert(trust_writer(&cfg, b("cascade"), b("cascade")));
	cr_assert(!trust_writer(&cfg, b("cascade"), b("eve")));
	cr_assert(!trust_writer(&cfg, b("cascade"), b("")), "no user-id");
	cr_assert(!trust_writer(&cfg, b(""), b("")));
	cr_assert(!trust_writer(&cfg, b("cascade"), b("cascadex")));
	cr_assert(!trust_writer(&cfg, b("cascade"), b("cascad")));
	snprintf(cfg.events_control_users, sizeof(cfg.events_control_users),
	         "ops, admin");
	cr_assert(trust_writer(&cfg, b("daemon"), b("admin")));
	cr_assert(trust_writer(&cfg, b("daemon"), b("daemon")));
	cr_assert(!trust_writer(&cfg, b("daemon"), b("cascade")),
	          "the URL's user is a control user only by default");
	cr_assert(!trust_writer(NULL, b("daemon"), b("admin")));
}

/* A row per kind of stream message, from cascade's user and from eve. */
Test(trust, stream_messages_by_kind)
{
	static const struct {
		const char *type;
		int from_eve;
	} rows[] = {
	    {"batch", 0},      {"scheduled", 0}, {"delivered", 0},
	    {"parked", 0},     {"cancelled", 0}, {"duplicate", 0},
	    {"claim", 0},      {"series", 0},    {"cancel", 1},
	    {"reschedule", 1}, {"marker", 0},    {"something", 1},
	};
	amqp_basic_properties_t p;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		p = message(rows[i].type, "cascade");
		cr_assert(trust_stream_message(&cfg, b("cascade"), &p), "%s",
		          rows[i].type);
		p = message(rows[i].type, "eve");
		cr_assert_eq(trust_stream_message(&cfg, b("cascade"), &p),
		             rows[i].from_eve, "%s from eve", rows[i].type);
		p = message(rows[i].type, NULL);
		cr_assert_eq(trust_stream_message(&cfg, b("cascade"), &p),
		             rows[i].from_eve, "%s without user-id",
		             rows[i].type);
	}
	p = message(NULL, "eve");
	cr_assert(trust_stream_message(&cfg, b("cascade"), &p),
	          "no type: not a record, the parser ignores it");
}

Test(trust, each_writer_is_logged_once_and_the_list_is_capped)
{
	struct trust_seen s;
	char name[32];

	memset(&s, 0, sizeof(s));
	cr_assert(trust_first_sight(&s, b("eve")));
	cr_assert(!trust_first_sight(&s, b("eve")));
	cr_assert(trust_first_sight(&s, b("")));
	cr_assert(!trust_first_sight(&s, b("")));
	/* No user-id at all: amqp_empty_bytes, a NULL pointer. */
	cr_assert(!trust_first_sight(&s, amqp_empty_bytes));
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "user-%d", i);
		cr_assert_eq(trust_first_sight(&s, b(name)),
		             i < TRUST_SEEN_MAX - 2, "%s", name);
	}
	cr_assert_eq(s.n, TRUST_SEEN_MAX);
}

/* A record of kind with one i64 field set to v: does it parse? */
static int
parses_with(const char *type, const char *key, int64_t v)
{
	amqp_table_entry_t h[8];
	amqp_table_t t = {0, h};
	amqp_basic_properties_t p;
	struct event e;

	memset(&p, 0, sizeof(p));
	p._flags = AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_HEADERS_FLAG;
	p.type = b(type);
	headers_put_bytes(&t, "x-cascade-id", b("0123456789abcdef"));
	headers_put_bytes(&t, "x-cascade-cancel", b("order-1"));
	headers_put_bytes(&t, "x-cascade-series", b("0123456789abcdef"));
	headers_put_bytes(&t, "x-cascade-token", b("t"));
	headers_put_i64(&t, "x-cascade-occurrence", 1);
	headers_put_i64(&t, "x-cascade-until", 1000);
	headers_put_i64(&t, "x-cascade-due", 1000);
	for (int i = 0; i < t.num_entries; i++)
		if (headers_key_is(h[i].key, key))
			h[i].value.value.i64 = v;
	if (strcmp(key, "x-cascade-at") == 0)
		headers_put_i64(&t, "x-cascade-at", v);
	p.headers = t;
	return events_parse(&p, &e);
}

/* A forged due near INT64_MAX could overflow a reader's "due + a day". */
Test(trust, record_times_and_counts_are_bounded)
{
	static const struct {
		const char *type, *key;
		int64_t v;
		int ok;
	} rows[] = {
	    {"scheduled", "x-cascade-due", 1000, 0},
	    {"scheduled", "x-cascade-due", EVENTS_TIME_MAX, 0},
	    {"scheduled", "x-cascade-due", EVENTS_TIME_MAX + 1, -1},
	    {"scheduled", "x-cascade-due", INT64_MAX - 1, -1},
	    {"scheduled", "x-cascade-due", -1, -1},
	    {"scheduled", "x-cascade-at", INT64_MIN, -1},
	    {"cancel", "x-cascade-until", INT64_MAX, -1},
	    {"cancel", "x-cascade-until", 5000, 0},
	    {"reschedule", "x-cascade-due", INT64_MAX, -1},
	    {"series", "x-cascade-occurrence", INT64_MAX, -1},
	    {"series", "x-cascade-occurrence", -5, -1},
	    {"series", "x-cascade-occurrence", 7, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		cr_assert_eq(parses_with(rows[i].type, rows[i].key, rows[i].v),
		             rows[i].ok, "%s %s=%lld", rows[i].type,
		             rows[i].key, (long long)rows[i].v);
}

Test(trust, record_ids_are_short_strings)
{
	char big[300];
	amqp_table_entry_t h[4];
	amqp_table_t t = {0, h};
	amqp_basic_properties_t p;
	struct event e;

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memset(&p, 0, sizeof(p));
	p._flags = AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_HEADERS_FLAG;
	p.type = b("cancel");
	headers_put_bytes(&t, "x-cascade-cancel", b(big));
	headers_put_i64(&t, "x-cascade-until", 1000);
	p.headers = t;
	cr_assert_eq(events_parse(&p, &e), -1);
	big[EVENTS_ID_MAX] = '\0';
	t.num_entries = 0;
	headers_put_bytes(&t, "x-cascade-cancel", b(big));
	headers_put_i64(&t, "x-cascade-until", 1000);
	p.headers = t;
	cr_assert_eq(events_parse(&p, &e), 0);
}

/* What comes back from a return or holding queue. */
Test(trust, hops_are_a_daemons_or_taken_unsigned_until_a_time)
{
	int64_t now = 1800000000000;

	cr_assert(trust_hop(&cfg, b("cascade"), b("cascade"), 0, now));
	cr_assert(!trust_hop(&cfg, b("cascade"), b("eve"), 0, now));
	cr_assert(!trust_hop(&cfg, b("cascade"), b(""), 0, now),
	          "unsigned: refused by default");
	cr_assert(trust_hop(&cfg, b("cascade"), b(""), now + 1, now),
	          "unsigned, before accept_unsigned_until");
	cr_assert(!trust_hop(&cfg, b("cascade"), b(""), now, now),
	          "unsigned, at accept_unsigned_until");
	cr_assert(!trust_hop(&cfg, b("cascade"), b("eve"), now + 1, now),
	          "a foreign user-id is never taken");
	snprintf(cfg.events_control_users, sizeof(cfg.events_control_users),
	         "cascade, ops");
	cr_assert(trust_hop(&cfg, b("cascade"), b("ops"), 0, now),
	          "cascade-ctl reschedule's copy, as a control user");
}

Test(trust, accept_unsigned_until_is_a_time)
{
	snprintf(cfg.router_accept_unsigned_until,
	         sizeof(cfg.router_accept_unsigned_until),
	         "2027-01-01T00:00:00Z");
	cr_assert_eq(config_unsigned_until(&cfg), INT64_C(1798761600000));
	snprintf(cfg.router_accept_unsigned_until,
	         sizeof(cfg.router_accept_unsigned_until), "1798761600000");
	cr_assert_eq(config_unsigned_until(&cfg), INT64_C(1798761600000));
	cfg.router_accept_unsigned_until[0] = '\0';
	cr_assert_eq(config_unsigned_until(&cfg), 0);
}
