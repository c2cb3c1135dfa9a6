/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pacing a target: rates read and written, targets split and found, the
 * slots handed out for one daemon and for several, and the daemons counted
 * from their markers.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pace.h"

#define B(s) amqp_cstring_bytes(s)
#define T0 INT64_C(1700000000000)

static struct pace p;

static void
add_ok(const char *target, double per_s)
{
	const char *why = NULL;

	cr_assert_eq(pace_add(&p, target, strlen(target), per_s, &why), 0,
	             "%s: %s", target, why ? why : "");
}

Test(pace, good_rates)
{
	static const struct {
		const char *s;
		double per_s;
	} rows[] = {
	    {"200/s", 200.0},        {"30/m", 0.5},
	    {"5/h", 5.0 / 3600.0},   {"0.5/s", 0.5},
	    {"1/h", 1.0 / 3600.0},   {"100000/s", 100000.0},
	    {"6000000/m", 100000.0}, {"200 / s", 200.0},
	    {"0.02/m", 0.02 / 60.0}, {"007/s", 7.0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *why = NULL;
		double per_s = -1;
		cr_assert_eq(pace_parse_rate(rows[i].s, &per_s, &why), 0,
		             "%s: %s", rows[i].s, why ? why : "");
		cr_assert_float_eq(per_s, rows[i].per_s, 1e-12, "%s: %g",
		                   rows[i].s, per_s);
	}
}

Test(pace, bad_rates)
{
	static const struct {
		const char *s, *why;
	} rows[] = {
	    {"", "expected"},
	    {"200", "expected"},
	    {"200/", "expected"},
	    {"/s", "expected"},
	    {"200/d", "expected"},
	    {"200/sec", "expected"},
	    {"200/S", "expected"},
	    {"-5/s", "expected"},
	    {"+5/s", "expected"},
	    {"1e3/s", "expected"},
	    {"inf/s", "expected"},
	    {"nan/s", "expected"},
	    {"0x10/s", "expected"},
	    {".5/s", "expected"},
	    {"5./s", "expected"},
	    {"5/s/s", "expected"},
	    {"0/s", "more than 0"},
	    {"0.0/m", "more than 0"},
	    {"100001/s", "faster"},
	    {"6000001/m", "faster"},
	    {"0.5/h", "slower"},
	    {"0.0002/s", "slower"},
	    {"0.01/m", "slower"},
	    {"1000000000000000000000000000000000/s", "digits"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *why = NULL;
		double per_s = -1;
		cr_assert_eq(pace_parse_rate(rows[i].s, &per_s, &why), -1,
		             "accepted \"%s\"", rows[i].s);
		cr_assert(why != NULL && strstr(why, rows[i].why) != NULL,
		          "\"%s\": %s", rows[i].s, why ? why : "(no why)");
		cr_assert_eq(per_s, -1);
	}
}

Test(pace, rates_are_written_as_read)
{
	static const char *const rows[] = {"200/s", "30/m", "5/h",     "1/h",
	                                   "90/m",  "1/s",  "100000/s"};
	char out[32];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *why;
		double per_s;
		cr_assert_eq(pace_parse_rate(rows[i], &per_s, &why), 0);
		pace_format_rate(per_s, out, sizeof(out));
		cr_assert_str_eq(out, rows[i]);
	}
	pace_format_rate(0.5, out, sizeof(out));
	cr_assert_str_eq(out, "30/m");
	pace_format_rate(1.0 / 7.0, out, sizeof(out));
	cr_assert_str_eq(out, "0.142857/s");
}

Test(pace, targets_split_at_the_first_slash)
{
	pace_init(&p);
	add_ok("orders", 1);
	add_ok("amq.topic/a.b", 2);
	add_ok("/q", 3);
	add_ok("ex/a/b", 4);
	add_ok("fan/", 5);
	cr_assert_eq(p.n, 5);

	cr_assert_eq(p.t[0].exchange_len, 6);
	cr_assert_eq(memcmp(p.t[0].exchange, "orders", 6), 0);
	cr_assert(p.t[0].any_key);
	cr_assert_eq(p.t[0].routing_key_len, 0);

	cr_assert_eq(p.t[1].exchange_len, 9);
	cr_assert_eq(memcmp(p.t[1].exchange, "amq.topic", 9), 0);
	cr_assert_not(p.t[1].any_key);
	cr_assert_eq(p.t[1].routing_key_len, 3);
	cr_assert_eq(memcmp(p.t[1].routing_key, "a.b", 3), 0);

	cr_assert_eq(p.t[2].exchange_len, 0);
	cr_assert_not(p.t[2].any_key);
	cr_assert_eq(p.t[2].routing_key_len, 1);
	cr_assert_eq(p.t[2].routing_key[0], 'q');

	cr_assert_eq(p.t[3].exchange_len, 2);
	cr_assert_eq(p.t[3].routing_key_len, 3);
	cr_assert_eq(memcmp(p.t[3].routing_key, "a/b", 3), 0);

	/* "fan/": exchange fan, the empty routing key only. */
	cr_assert_not(p.t[4].any_key);
	cr_assert_eq(p.t[4].routing_key_len, 0);
	cr_assert_float_eq(p.t[4].per_s, 5.0, 1e-12);
}

Test(pace, targets_refused)
{
	char longname[300];
	const char *why = NULL;

	pace_init(&p);
	add_ok("orders", 1);
	add_ok("orders/new", 1);
	cr_assert_eq(pace_add(&p, "orders", 6, 2, &why), -1);
	cr_assert(strstr(why, "twice") != NULL, "%s", why);
	cr_assert_eq(pace_add(&p, "orders/new", 10, 2, &why), -1);
	cr_assert(strstr(why, "twice") != NULL, "%s", why);
	/* Another key, or every key: not the same target. */
	add_ok("orders/old", 1);
	add_ok("orders/", 1);

	memset(longname, 'x', sizeof(longname));
	cr_assert_eq(pace_add(&p, longname, 256, 1, &why), -1);
	cr_assert(strstr(why, "exchange") != NULL, "%s", why);
	add_ok("", 1); /* not refused here: the config refuses "" */
	longname[3] = '/';
	cr_assert_eq(pace_add(&p, longname, 4 + 256, 1, &why), -1);
	cr_assert(strstr(why, "routing key") != NULL, "%s", why);
	cr_assert_eq(pace_add(&p, longname, 4 + 255, 1, &why), 0, "%s", why);
	cr_assert_eq(p.t[p.n - 1].routing_key_len, 255);
	cr_assert_eq(pace_add(&p, longname + 4, 255, 1, &why), 0, "%s", why);
	cr_assert_eq(p.t[p.n - 1].exchange_len, 255);

	pace_init(&p);
	for (int i = 0; i < PACE_TARGETS_MAX; i++) {
		char name[16];
		snprintf(name, sizeof(name), "ex%d", i);
		add_ok(name, 1);
	}
	cr_assert_eq(pace_add(&p, "one-more", 8, 1, &why), -1);
	cr_assert(strstr(why, "more than 64") != NULL, "%s", why);
	cr_assert_eq(p.n, PACE_TARGETS_MAX);
}

Test(pace, find_takes_the_exact_key_before_the_exchange)
{
	pace_init(&p);
	add_ok("orders", 1);
	add_ok("orders/rush", 2);
	add_ok("/work", 3);
	add_ok("amq.topic/reports.daily", 4);

	cr_assert_eq(pace_find(&p, B("orders"), B("rush")), &p.t[1]);
	cr_assert_eq(pace_find(&p, B("orders"), B("slow")), &p.t[0]);
	cr_assert_eq(pace_find(&p, B("orders"), B("")), &p.t[0]);
	cr_assert_eq(pace_find(&p, B(""), B("work")), &p.t[2]);
	/* The default exchange by its other name. */
	cr_assert_eq(pace_find(&p, B("amq.default"), B("work")), &p.t[2]);
	cr_assert_eq(pace_find(&p, B("amq.topic"), B("reports.daily")),
	             &p.t[3]);
	/* Unpaced: another key, another exchange, a prefix of one. */
	cr_assert_null(pace_find(&p, B("amq.topic"), B("reports.weekly")));
	cr_assert_null(pace_find(&p, B(""), B("other")));
	cr_assert_null(pace_find(&p, B("order"), B("rush")));
	cr_assert_null(pace_find(&p, B("orders.x"), B("rush")));
	cr_assert_null(pace_find(&p, B("amq.topic"), B("")));

	/* Written either way, it is one target. */
	add_ok("amq.default/jobs", 5);
	cr_assert_eq(pace_find(&p, B(""), B("jobs")), &p.t[4]);

	pace_init(&p);
	cr_assert_null(pace_find(&p, B("orders"), B("")));
}

Test(pace, one_daemon_slots_are_spaced_from_now)
{
	struct pace_target *t;

	pace_init(&p);
	add_ok("orders", 20);
	t = &p.t[0];
	/* Five due at once: the first now, then one every 50 ms. */
	for (int i = 0; i < 5; i++)
		cr_assert_eq(pace_slot(t, T0, 1), T0 + 50 * i, "slot %d", i);
	cr_assert_eq(t->delivered_total, 5);
	cr_assert_eq(t->paced_total, 4);
	/* Later, with the backlog still ahead: the queue goes on. */
	cr_assert_eq(pace_slot(t, T0 + 120, 1), T0 + 250);
	cr_assert_eq(t->paced_total, 5);
}

Test(pace, two_daemons_each_take_half)
{
	struct pace_target *t;

	pace_init(&p);
	add_ok("orders", 20);
	t = &p.t[0];
	for (int i = 0; i < 5; i++)
		cr_assert_eq(pace_slot(t, T0, 2), T0 + 100 * i, "slot %d", i);
	/* A third daemon comes: from the next slot on, 150 ms apart. */
	cr_assert_eq(pace_slot(t, T0, 3), T0 + 500);
	cr_assert_eq(pace_slot(t, T0, 3), T0 + 650);
	/* 0 daemons counts as one. */
	cr_assert_eq(pace_slot(t, T0, 0), T0 + 800);
	cr_assert_eq(pace_slot(t, T0, 0), T0 + 850);
}

Test(pace, an_idle_target_starts_from_now)
{
	struct pace_target *t;

	pace_init(&p);
	add_ok("orders", 20);
	t = &p.t[0];
	cr_assert_eq(pace_slot(t, T0, 1), T0);
	cr_assert_eq(pace_slot(t, T0, 1), T0 + 50);
	/* Idle for a minute: no burst of saved slots, one now, then 50 ms. */
	cr_assert_eq(pace_slot(t, T0 + 60000, 1), T0 + 60000);
	cr_assert_eq(pace_slot(t, T0 + 60000, 1), T0 + 60050);
	cr_assert_eq(pace_slot(t, T0 + 60000, 1), T0 + 60100);
	cr_assert_eq(t->paced_total, 3);
	/* Exactly at the next free slot: not paced. */
	cr_assert_eq(pace_slot(t, T0 + 60150, 1), T0 + 60150);
	cr_assert_eq(t->paced_total, 3);
	/* Between slots: from now, one spacing on. */
	cr_assert_eq(pace_slot(t, T0 + 60230, 1), T0 + 60230);
	cr_assert_eq(pace_slot(t, T0 + 60231, 1), T0 + 60280);
}

Test(pace, slots_are_never_before_now)
{
	struct pace_target *t;
	int64_t now = T0, last = 0;

	pace_init(&p);
	add_ok("orders", 7);
	t = &p.t[0];
	for (int i = 0; i < 1000; i++) {
		int64_t slot;
		now += (i * 37) % 311;
		slot = pace_slot(t, now, 1 + (unsigned)(i % 3));
		cr_assert_geq(slot, now);
		cr_assert_geq(slot, last);
		last = slot;
	}
}

Test(pace, fast_paces_keep_the_fraction)
{
	struct pace_target *t;
	int64_t slot = 0;

	pace_init(&p);
	add_ok("orders", 3000); /* a slot every 1/3 ms */
	t = &p.t[0];
	for (int i = 0; i < 30000; i++)
		slot = pace_slot(t, T0, 1);
	/* The 30000th slot is 29999/3 ms on, rounded up: 10 s, no drift. */
	cr_assert_eq(slot, T0 + 10000);
	add_ok("max", PACE_RATE_MAX);
	t = &p.t[1];
	for (int i = 0; i < 100001; i++)
		slot = pace_slot(t, T0, 1);
	cr_assert_eq(slot, T0 + 1000);
}

Test(pace, slow_paces)
{
	struct pace_target *t;

	pace_init(&p);
	add_ok("reports", 1.0 / 3600.0); /* 1/h */
	t = &p.t[0];
	cr_assert_eq(pace_slot(t, T0, 1), T0);
	cr_assert_eq(pace_slot(t, T0, 1), T0 + 3600000);
	cr_assert_eq(pace_slot(t, T0, 2), T0 + 7200000);
	cr_assert_eq(pace_slot(t, T0, 2), T0 + 14400000);
}

Test(pace, own_daemon_is_always_counted_once)
{
	pace_init(&p);
	cr_assert_eq(pace_peers(&p, B("daemon-1-aa"), T0), 1);
	pace_peer_seen(&p, B("daemon-1-aa"), T0);
	pace_peer_seen(&p, B("daemon-1-aa"), T0 + 1000);
	cr_assert_eq(pace_peers(&p, B("daemon-1-aa"), T0 + 1000), 1);
	pace_peer_seen(&p, B("daemon-2-bb"), T0 + 1000);
	cr_assert_eq(pace_peers(&p, B("daemon-1-aa"), T0 + 2000), 2);
	cr_assert_eq(pace_peers(&p, B("daemon-2-bb"), T0 + 2000), 2);
	/* A daemon whose own marker has not come back yet. */
	cr_assert_eq(pace_peers(&p, B("daemon-3-cc"), T0 + 2000), 3);
	/* Own long gone: still one. */
	cr_assert_eq(pace_peers(&p, B("daemon-1-aa"), T0 + 3600000), 1);
}

Test(pace, peers_expire_after_five_minutes)
{
	amqp_bytes_t own = B("daemon-1-aa");

	pace_init(&p);
	pace_peer_seen(&p, B("daemon-2-bb"), T0);
	pace_peer_seen(&p, B("daemon-3-cc"), T0 + 120000);
	cr_assert_eq(pace_peers(&p, own, T0 + 1), 3);
	cr_assert_eq(pace_peers(&p, own, T0 + PACE_PEER_TTL_MS - 1), 3);
	cr_assert_eq(pace_peers(&p, own, T0 + PACE_PEER_TTL_MS), 2);
	cr_assert_eq(pace_peers(&p, own, T0 + 120000 + PACE_PEER_TTL_MS), 1);
	/* Heard again: counted again; an older reading does not go back. */
	pace_peer_seen(&p, B("daemon-2-bb"), T0 + 600000);
	pace_peer_seen(&p, B("daemon-2-bb"), T0 + 500000);
	cr_assert_eq(pace_peers(&p, own, T0 + 600000 + PACE_PEER_TTL_MS - 1),
	             2);
	cr_assert_eq(p.npeers, 2);
}

Test(pace, tokens_other_than_daemons_are_ignored)
{
	char longtoken[PACE_TOKEN_MAX + 2];
	amqp_bytes_t own = B("daemon-1-aa");

	pace_init(&p);
	pace_peer_seen(&p, B("ctl-55-aa"), T0);
	pace_peer_seen(&p, B(""), T0);
	pace_peer_seen(&p, B("daemon"), T0);
	pace_peer_seen(&p, B("Daemon-2-bb"), T0);
	memcpy(longtoken, "daemon-", 7);
	memset(longtoken + 7, 'f', sizeof(longtoken) - 8);
	longtoken[sizeof(longtoken) - 1] = '\0';
	pace_peer_seen(&p, B(longtoken), T0);
	cr_assert_eq(p.npeers, 0);
	cr_assert_eq(pace_peers(&p, own, T0), 1);
	/* 64 bytes: kept. */
	longtoken[PACE_TOKEN_MAX] = '\0';
	pace_peer_seen(&p, B(longtoken), T0);
	cr_assert_eq(pace_peers(&p, own, T0), 2);
}

Test(pace, the_table_is_capped_and_the_oldest_replaced)
{
	amqp_bytes_t own = B("daemon-own");
	char token[32];

	pace_init(&p);
	for (int i = 0; i < PACE_PEERS_MAX; i++) {
		snprintf(token, sizeof(token), "daemon-%d", i);
		/* daemon-7 is the oldest; the rest in order after it. */
		pace_peer_seen(&p, B(token), i == 7 ? T0 : T0 + 1000 + i);
	}
	cr_assert_eq(p.npeers, PACE_PEERS_MAX);
	cr_assert_eq(pace_peers(&p, own, T0 + 2000), PACE_PEERS_MAX + 1);
	pace_peer_seen(&p, B("daemon-new"), T0 + 5000);
	cr_assert_eq(p.npeers, PACE_PEERS_MAX);
	cr_assert_eq(p.peers[7].token_len, strlen("daemon-new"));
	cr_assert_eq(memcmp(p.peers[7].token, "daemon-new", 10), 0);
	/* daemon-7 is gone: heard again, it replaces the next oldest. */
	pace_peer_seen(&p, B("daemon-7"), T0 + 6000);
	cr_assert_eq(p.peers[0].token_len, strlen("daemon-7"));
	cr_assert_eq(pace_peers(&p, own, T0 + 7000), PACE_PEERS_MAX + 1);
}
