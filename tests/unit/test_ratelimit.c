/* SPDX-License-Identifier: Apache-2.0 */
/* ratelimit: the three limits, sliding windows, waits, the cap, keys, the
 * known clients. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit.h"

#define T0 INT64_C(1700000000000)
#define USER_W RATELIMIT_USER_WINDOW_MS
#define ADDR_W RATELIMIT_ADDR_WINDOW_MS
#define GLOBAL_W RATELIMIT_GLOBAL_WINDOW_MS

static struct ratelimit rl;

static void
setup(void)
{
	cr_assert_eq(ratelimit_init(&rl, 0), 0);
	cr_assert_eq(rl.max, RATELIMIT_DEFAULT_ENTRIES);
}

static void
teardown(void)
{
	ratelimit_free(&rl);
}

static int64_t
check(const char *addr, const char *user, int64_t now)
{
	return ratelimit_check(&rl, addr, user, strlen(user), now);
}

static void
fail(const char *addr, const char *user, int64_t now)
{
	ratelimit_fail(&rl, addr, user, strlen(user), now);
}

/* An address of its own for each i, as a client would have. */
static const char *
nth_addr(unsigned i)
{
	static char b[32];

	snprintf(b, sizeof(b), "10.%u.%u.%u", i >> 16 & 255, i >> 8 & 255,
	         i & 255);
	return b;
}

static const char *
nth_user(unsigned i)
{
	static char b[32];

	snprintf(b, sizeof(b), "user%u", i);
	return b;
}

TestSuite(ratelimit, .init = setup, .fini = teardown);

Test(ratelimit, nothing_failed_is_allowed)
{
	cr_assert_eq(check("192.0.2.1", "alice", T0), 0);
	cr_assert_eq(rl.n, 0, "a check makes no entry");
}

Test(ratelimit, five_failures_of_one_user_from_one_address)
{
	for (int i = 0; i < RATELIMIT_USER_FAILS - 1; i++) {
		fail("192.0.2.1", "alice", T0 + i * 1000);
		cr_assert_eq(check("192.0.2.1", "alice", T0 + i * 1000), 0,
		             "%d failures", i + 1);
	}
	fail("192.0.2.1", "alice", T0 + 4000);
	/* The first of the five, at T0, counts until T0 + 5 min. */
	cr_assert_eq(check("192.0.2.1", "alice", T0 + 4000), USER_W - 4000);
	cr_assert_eq(check("192.0.2.1", "alice", T0 + USER_W - 1), 1);
	cr_assert_eq(check("192.0.2.1", "alice", T0 + USER_W), 0);
	/* The same user from elsewhere, another user from here: allowed. */
	cr_assert_eq(check("192.0.2.2", "alice", T0 + 4000), 0);
	cr_assert_eq(check("192.0.2.1", "bob", T0 + 4000), 0);
	cr_assert_eq(check("192.0.2.1", "alic", T0 + 4000), 0);
	cr_assert_eq(check("192.0.2.1", "alicee", T0 + 4000), 0);
}

Test(ratelimit, the_window_slides)
{
	for (int i = 0; i < 5; i++)
		fail("192.0.2.1", "alice", T0 + i);
	cr_assert_eq(check("192.0.2.1", "alice", T0 + 4), USER_W - 4);
	cr_assert_eq(check("192.0.2.1", "alice", T0 + USER_W), 0);
	/* One more: the last five are T0+1 .. T0+4 and now, so refused
	 * again until T0+1 leaves (a fixed window would have reset). */
	fail("192.0.2.1", "alice", T0 + USER_W);
	cr_assert_eq(check("192.0.2.1", "alice", T0 + USER_W), 1);
	cr_assert_eq(check("192.0.2.1", "alice", T0 + USER_W + 1), 0);
	/* Spread out, failures never add up to a refusal. */
	for (int i = 0; i < 50; i++) {
		int64_t t = T0 + 10 * USER_W + i * (USER_W / 4);
		fail("192.0.2.9", "carol", t);
		cr_assert_eq(check("192.0.2.9", "carol", t), 0, "at %d", i);
	}
}

Test(ratelimit, twenty_failures_from_one_address_in_a_minute)
{
	for (unsigned i = 0; i < RATELIMIT_ADDR_FAILS - 1; i++) {
		fail("198.51.100.7", nth_user(i), T0 + i * 100);
		cr_assert_eq(check("198.51.100.7", "new", T0 + i * 100), 0);
	}
	fail("198.51.100.7", nth_user(19), T0 + 1900);
	/* Any user from there now, for the first failure's minute. */
	cr_assert_eq(check("198.51.100.7", "new", T0 + 1900), ADDR_W - 1900);
	cr_assert_eq(check("198.51.100.7", "user3", T0 + 30000),
	             ADDR_W - 30000);
	cr_assert_eq(check("198.51.100.7", "new", T0 + ADDR_W - 1), 1);
	cr_assert_eq(check("198.51.100.7", "new", T0 + ADDR_W), 0);
	/* After the first leaves, the second is the oldest of twenty. */
	fail("198.51.100.7", "new", T0 + ADDR_W);
	cr_assert_eq(check("198.51.100.7", "x", T0 + ADDR_W), 100);
	cr_assert_eq(check("198.51.100.8", "new", T0 + 1900), 0);
}

static void
known(const char *addr, const char *user, int64_t now)
{
	ratelimit_known(&rl, addr, user, strlen(user), now);
}

/* The global ceiling reached at now: 300 failures from 30 clients of
 * their own (10 each: under each client's limit), the last at now. */
static void
flood(int64_t now)
{
	for (unsigned i = 0; i < RATELIMIT_GLOBAL_FAILS; i++)
		fail(nth_addr(5000 + i % 30), nth_user(i), now);
	cr_assert_eq(check("192.0.2.250", "stranger", now), GLOBAL_W,
	             "the ceiling holds a new client");
}

/* Whether user from addr passes the ceiling at now (a flood at now). */
static int
exempt(const char *addr, const char *user, int64_t now)
{
	return check(addr, user, now) == 0;
}

/*
 * 300 failures in all in a minute, from 30 clients (10 each: under each
 * client's own limit): every client waits for the oldest to leave the
 * minute, a new one too (the ceiling on broker logins), but not a known
 * client, a user that logged in from there in the last 7 days: a flood
 * never refuses the operators who logged in before.  A flood of failures
 * from fresh addresses does not push a known client out.
 */
Test(ratelimit, the_global_ceiling_holds_every_client_but_known_ones)
{
	known("203.0.113.5", "ops", T0 - 1000);
	known("203.0.113.9", "ops", T0 - RATELIMIT_KNOWN_MS - 1);
	for (unsigned i = 0; i < RATELIMIT_GLOBAL_FAILS - 1; i++) {
		fail(nth_addr(i % 30), nth_user(i), T0 + i * 10);
		cr_assert_eq(check(nth_addr(0), "new", T0 + i * 10), 0);
	}
	fail(nth_addr(29), nth_user(299), T0 + 2990);
	cr_assert_eq(check(nth_addr(0), "new", T0 + 2990), GLOBAL_W - 2990);
	cr_assert_eq(check("192.0.2.200", "ops", T0 + 2990), GLOBAL_W - 2990,
	             "a new client is held too: the ceiling");
	cr_assert_eq(check("203.0.113.5", "ops", T0 + 2990), 0,
	             "a known client is not held");
	cr_assert_eq(check("203.0.113.5", "root", T0 + 2990), GLOBAL_W - 2990,
	             "another user from a known client's address is held");
	cr_assert_eq(check("203.0.113.9", "ops", T0 + 2990), GLOBAL_W - 2990,
	             "known over 7 days ago: no more");
	/* The oldest leaves the window: the next may fail. */
	cr_assert_eq(check(nth_addr(0), "new", T0 + GLOBAL_W - 1), 1);
	cr_assert_eq(check(nth_addr(0), "new", T0 + GLOBAL_W), 0);
	/* 10,000 fresh addresses failing (table turned over twice): the
	 * known client is still known. */
	for (unsigned i = 0; i < 10000; i++)
		fail(nth_addr(1000 + i), "x", T0 + GLOBAL_W + i);
	cr_assert_eq(check("203.0.113.5", "ops", T0 + GLOBAL_W + 10000), 0);
	cr_assert_gt(check("192.0.2.200", "ops", T0 + GLOBAL_W + 10000), 0);
}

/* The key of the i-th /64 of 2001:db8:0:ab00::/56 (and on past it), as
 * webgate_limit_key writes it: 256 of them are one /56. */
static const char *
nth_net(unsigned i)
{
	static char b[48];

	snprintf(b, sizeof(b), "2001:db8:0:%x::/64", 0xab00u + i);
	return b;
}

/*
 * Issue 55: a publisher's credentials ship with every app, so anyone can
 * log in as that user, from 256 client keys (one IPv6 /56) and more.
 * That user keeps its latest 8 clients; an operator who logged in before
 * stays known, and so passes the ceiling during a flood.
 */
Test(ratelimit, one_users_logins_push_no_other_users_client_out)
{
	static const struct {
		const char *addr;
		const char *user;
		int exempt;
		const char *why;
	} rows[] = {
	    {"203.0.113.5", "ops", 1, "the operator, from where they were"},
	    {"203.0.113.6", "ops", 0, "the operator from a new client"},
	    {"203.0.113.5", "alice", 0, "alice from the operator's client"},
	    {"198.51.100.1", "bob", 1, "bob, who logged in 6 days ago"},
	    {"2001:db8:0:ac2b::/64", "alice", 1, "alice's latest"},
	    {"2001:db8:0:ac24::/64", "alice", 1, "alice's 8th latest"},
	    {"2001:db8:0:ac23::/64", "alice", 0, "alice's 9th latest"},
	    {"2001:db8:0:ab00::/64", "alice", 0, "alice's first"},
	    {"2001:db8:0:ac2b::/64", "ops", 0, "ops from alice's latest"},
	};
	int64_t t = T0;

	known("198.51.100.1", "bob", t - 6 * 86400000);
	known("203.0.113.5", "ops", t);
	for (unsigned i = 0; i < 300; i++)
		known(nth_net(i), "alice", t + 1 + i);
	t += 1000;
	cr_assert_eq(ratelimit_known_count(&rl, t), 2 + RATELIMIT_KNOWN_USER);
	cr_assert_eq(rl.known_evicted, 0);
	flood(t);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		cr_assert_eq(exempt(rows[i].addr, rows[i].user, t),
		             rows[i].exempt, "%s: %s from %s", rows[i].why,
		             rows[i].user, rows[i].addr);
}

/* A user's own clients leave in the order it last logged in from them:
 * a login again from a client makes it the latest. */
Test(ratelimit, a_users_least_recently_seen_client_leaves_first)
{
	static const struct {
		unsigned net; /* nth_net */
		int exempt;
	} rows[] = {
	    {0, 1}, /* seen again at 8 */
	    {1, 0}, /* the least recently seen at 9 */
	    {2, 0}, /* then at 10 */
	    {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}, {8, 1}, {9, 1},
	};

	for (unsigned i = 0; i < 8; i++)
		known(nth_net(i), "alice", T0 + i);
	known(nth_net(0), "alice", T0 + 8);
	cr_assert_eq(ratelimit_known_count(&rl, T0 + 8), 8, "no new pair");
	known(nth_net(8), "alice", T0 + 9);
	known(nth_net(9), "alice", T0 + 10);
	cr_assert_eq(ratelimit_known_count(&rl, T0 + 10), 8);
	cr_assert_eq(rl.known_evicted, 0, "alice's own: not counted");
	flood(T0 + 100);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		cr_assert_eq(exempt(nth_net(rows[i].net), "alice", T0 + 100),
		             rows[i].exempt, "net %u", rows[i].net);
}

/*
 * All 256 in use: 128 users holding 2 each.  A newcomer takes the least
 * recently seen pair of a user holding the most (2) while it holds fewer
 * (0, then 1), and then only its own: it ends with 2, two users with 1,
 * and every user keeps its latest.
 */
Test(ratelimit, a_full_table_gives_up_the_biggest_holders_pairs)
{
	char a[32], u[32];
	int64_t t = T0;

	for (unsigned i = 0; i < RATELIMIT_KNOWN / 2; i++)
		for (unsigned j = 0; j < 2; j++) {
			snprintf(a, sizeof(a), "10.1.%u.%u", i, j);
			known(a, nth_user(i), t++);
		}
	cr_assert_eq(ratelimit_known_count(&rl, t), RATELIMIT_KNOWN);
	for (unsigned i = 0; i < 20; i++)
		known(nth_net(i), "mallory", t++);
	cr_assert_eq(ratelimit_known_count(&rl, t), RATELIMIT_KNOWN);
	cr_assert_eq(rl.known_evicted, 2);
	flood(t);
	for (unsigned i = 0; i < RATELIMIT_KNOWN / 2; i++) {
		snprintf(u, sizeof(u), "%s", nth_user(i));
		snprintf(a, sizeof(a), "10.1.%u.1", i);
		cr_assert(exempt(a, u, t), "%s's latest", u);
		snprintf(a, sizeof(a), "10.1.%u.0", i);
		cr_assert_eq(exempt(a, u, t), i >= 2, "%s's first", u);
	}
	cr_assert(exempt(nth_net(19), "mallory", t));
	cr_assert(exempt(nth_net(18), "mallory", t));
	cr_assert_not(exempt(nth_net(17), "mallory", t));
	cr_assert_not(exempt(nth_net(0), "mallory", t));
}

/* 256 users holding one each: only then does a user's latest pair leave
 * for another's (the least recently seen). */
Test(ratelimit, a_users_latest_client_leaves_only_for_256_others)
{
	for (unsigned i = 0; i < RATELIMIT_KNOWN; i++)
		known(nth_addr(i), nth_user(i), T0 + i);
	known("192.0.2.77", "newcomer", T0 + 1000);
	cr_assert_eq(rl.known_evicted, 1);
	flood(T0 + 2000);
	cr_assert(exempt("192.0.2.77", "newcomer", T0 + 2000));
	cr_assert_not(exempt(nth_addr(0), "user0", T0 + 2000));
	cr_assert(exempt(nth_addr(1), "user1", T0 + 2000));
	cr_assert(exempt(nth_addr(255), "user255", T0 + 2000));
}

/* Pairs past their 7 days free their slots: a full table of old pairs
 * takes a new one without giving up any in their days. */
Test(ratelimit, known_pairs_expire_after_7_days)
{
	int64_t later = T0 + RATELIMIT_KNOWN_MS;

	for (unsigned i = 0; i < RATELIMIT_KNOWN; i++)
		known(nth_addr(i), nth_user(i % 32), T0);
	known(nth_addr(0), "ops", later - 1);
	cr_assert_eq(rl.known_evicted, 1, "at later - 1 all were in use");
	cr_assert_eq(ratelimit_known_count(&rl, later), 1);
	for (unsigned i = 0; i < 8; i++)
		known(nth_net(i), "alice", later + i);
	cr_assert_eq(rl.known_evicted, 1);
	cr_assert_eq(ratelimit_known_count(&rl, later + 8), 9);
	flood(later + 8);
	cr_assert(exempt(nth_addr(0), "ops", later + 8));
	cr_assert_not(exempt(nth_addr(1), "user1", later + 8));
	cr_assert(exempt(nth_net(0), "alice", later + 8));
}

/* Users are told apart by every byte of their first 255: a NUL is a byte
 * like any other, and names longer than that share their pairs. */
Test(ratelimit, known_users_by_every_byte)
{
	char u[300], v[300];

	ratelimit_known(&rl, "192.0.2.1", "a\0b", 3, T0);
	for (unsigned i = 0; i < 9; i++)
		ratelimit_known(&rl, nth_net(i), "a\0c", 3, T0 + 1 + i);
	memset(u, 'u', sizeof(u));
	memcpy(v, u, sizeof(v));
	v[sizeof(v) - 1] = 'v';
	ratelimit_known(&rl, "192.0.2.2", u, sizeof(u), T0 + 20);
	cr_assert_eq(ratelimit_known_count(&rl, T0 + 20), 1 + 8 + 1);
	flood(T0 + 100);
	cr_assert_eq(ratelimit_check(&rl, "192.0.2.1", "a\0b", 3, T0 + 100), 0);
	cr_assert_gt(ratelimit_check(&rl, "192.0.2.1", "a", 1, T0 + 100), 0);
	cr_assert_gt(ratelimit_check(&rl, "192.0.2.1", "a\0c", 3, T0 + 100), 0);
	cr_assert_eq(ratelimit_check(&rl, "192.0.2.2", v, sizeof(v), T0 + 100),
	             0);
	cr_assert_gt(ratelimit_check(&rl, "192.0.2.2", v,
	                             RATELIMIT_USER_MAX - 1, T0 + 100),
	             0);
}

Test(ratelimit, the_longest_wait_wins)
{
	/* The user's limit (5 min) and the address's (1 min) both refuse. */
	for (unsigned i = 0; i < 5; i++)
		fail("192.0.2.1", "alice", T0 + i);
	for (unsigned i = 0; i < 15; i++)
		fail("192.0.2.1", nth_user(i), T0 + 10 + i);
	cr_assert_eq(check("192.0.2.1", "bob", T0 + 100), ADDR_W - 100);
	cr_assert_eq(check("192.0.2.1", "alice", T0 + 100), USER_W - 100);
	cr_assert_eq(check("192.0.2.1", "alice", T0 + ADDR_W), USER_W - ADDR_W);
	cr_assert_eq(check("192.0.2.1", "bob", T0 + ADDR_W), 0);
}

Test(ratelimit, checks_and_refusals_count_nothing)
{
	for (int i = 0; i < 5; i++)
		fail("192.0.2.1", "alice", T0);
	for (int i = 0; i < 1000; i++)
		cr_assert_gt(check("192.0.2.1", "alice", T0 + i), 0);
	cr_assert_eq(check("192.0.2.1", "alice", T0 + USER_W), 0);
	cr_assert_eq(rl.n, 2);
}

Test(ratelimit, success_clears_the_users_failures_only)
{
	for (int i = 0; i < 5; i++)
		fail("192.0.2.1", "alice", T0 + i);
	cr_assert_gt(check("192.0.2.1", "alice", T0 + 10), 0);
	cr_assert_eq(rl.n, 2);
	ratelimit_success(&rl, "192.0.2.1", "alice", 5);
	cr_assert_eq(check("192.0.2.1", "alice", T0 + 10), 0);
	cr_assert_eq(rl.n, 1, "the address's counter stays");
	/* A success elsewhere, or of someone else, clears nothing here. */
	for (int i = 0; i < 5; i++)
		fail("192.0.2.1", "alice", T0 + 20 + i);
	ratelimit_success(&rl, "192.0.2.2", "alice", 5);
	ratelimit_success(&rl, "192.0.2.1", "bob", 3);
	cr_assert_gt(check("192.0.2.1", "alice", T0 + 30), 0);
	/* Those ten failures and ten more of others fill the address's
	 * limit; a success by one does not lift it. */
	for (unsigned i = 0; i < 10; i++)
		fail("192.0.2.1", nth_user(i), T0 + 40 + i);
	cr_assert_gt(check("192.0.2.1", "mallory", T0 + 100), 0);
	ratelimit_success(&rl, "192.0.2.1", "user0", 5);
	ratelimit_success(&rl, "192.0.2.1", "alice", 5);
	cr_assert_eq(check("192.0.2.1", "mallory", T0 + 100), ADDR_W - 100);
	cr_assert_eq(check("192.0.2.1", "alice", T0 + 100), ADDR_W - 100);
	/* Nothing to clear is no harm. */
	ratelimit_success(&rl, "192.0.2.3", "nobody", 6);
	ratelimit_success(&rl, NULL, NULL, 0);
}

Test(ratelimit, the_least_recently_failed_leaves_at_the_cap)
{
	ratelimit_free(&rl);
	cr_assert_eq(ratelimit_init(&rl, 4), 0);
	/* (a, x) twice, (b, y), (a, x) again: a and (a, x) are newer. */
	fail("a", "x", T0);
	fail("a", "x", T0 + 1);
	fail("b", "y", T0 + 2);
	cr_assert_eq(rl.n, 4);
	cr_assert_eq(rl.evicted, 0);
	fail("a", "x", T0 + 3);
	fail("c", "z", T0 + 4);
	cr_assert_eq(rl.n, 4);
	cr_assert_eq(rl.evicted, 2, "b and (b, y) left");
	cr_assert_eq(rl.evicted_live, 2);
	/* a's counters stayed: two more make five. */
	fail("a", "x", T0 + 5);
	cr_assert_eq(check("a", "x", T0 + 5), 0);
	fail("a", "x", T0 + 6);
	cr_assert_eq(check("a", "x", T0 + 6), USER_W - 6);
	cr_assert_eq(rl.evicted, 2);
	/* Counters whose windows have passed leave as stale. */
	fail("d", "w", T0 + USER_W + 10);
	cr_assert_eq(rl.evicted, 4);
	cr_assert_eq(rl.evicted_live, 2, "c and (c, z) were stale");
	/* An evicted counter is forgotten: its limit starts over. */
	fail("e", "v", T0 + USER_W + 11);
	cr_assert_eq(check("a", "x", T0 + 7), 0);
}

Test(ratelimit, the_cap_holds_under_many_clients)
{
	unsigned clients = 3000; /* two entries each: 6000 > 4096 */

	for (unsigned i = 0; i < clients; i++)
		fail(nth_addr(i), "root", T0 + i);
	cr_assert_eq(rl.n, RATELIMIT_DEFAULT_ENTRIES);
	cr_assert_eq(rl.evicted, 2 * clients - RATELIMIT_DEFAULT_ENTRIES);
	/* The table still works: the newest client's counters are there,
	 * and a success frees a slot that the next entry reuses. */
	for (int i = 0; i < 4; i++)
		fail(nth_addr(clients - 1), "root", T0 + clients + i);
	cr_assert_eq(check(nth_addr(clients - 1), "root", T0 + clients + 4),
	             USER_W - 4 - 1);
	ratelimit_success(&rl, nth_addr(clients - 1), "root", 4);
	cr_assert_eq(rl.n, RATELIMIT_DEFAULT_ENTRIES - 1);
	fail("192.0.2.200", "root", T0 + clients + 5);
	cr_assert_eq(rl.n, RATELIMIT_DEFAULT_ENTRIES);
	cr_assert_eq(rl.evicted, 2 * clients - RATELIMIT_DEFAULT_ENTRIES + 1);
}

Test(ratelimit, hostile_user_names)
{
	size_t big = 100000;
	char *u = malloc(big), *v = malloc(big);

	cr_assert_not_null(u);
	cr_assert_not_null(v);
	for (size_t i = 0; i < big; i++)
		u[i] = (char)(i * 131 + 7); /* every byte, NULs included */
	memcpy(v, u, big);
	v[big - 1] ^= 1;
	for (int i = 0; i < 5; i++)
		ratelimit_fail(&rl, "192.0.2.1", u, big, T0);
	cr_assert_eq(ratelimit_check(&rl, "192.0.2.1", u, big, T0), USER_W);
	/* Past the first 255 bytes names share a counter: only stricter. */
	cr_assert_eq(ratelimit_check(&rl, "192.0.2.1", v, big, T0), USER_W);
	cr_assert_eq(
	    ratelimit_check(&rl, "192.0.2.1", u, RATELIMIT_USER_MAX + 1, T0),
	    USER_W);
	cr_assert_eq(ratelimit_check(&rl, "192.0.2.1", u, SIZE_MAX, T0),
	             USER_W);
	/* Within them, every byte tells two names apart. */
	cr_assert_eq(
	    ratelimit_check(&rl, "192.0.2.1", u, RATELIMIT_USER_MAX - 1, T0),
	    0);
	v[RATELIMIT_USER_MAX - 1] ^= 1;
	cr_assert_eq(ratelimit_check(&rl, "192.0.2.1", v, big, T0), 0);
	v[RATELIMIT_USER_MAX - 1] ^= 1;
	v[0] ^= 1;
	cr_assert_eq(ratelimit_check(&rl, "192.0.2.1", v, big, T0), 0);
	/* A NUL is a byte like any other. */
	for (int i = 0; i < 5; i++)
		ratelimit_fail(&rl, "192.0.2.1", "a\0b", 3, T0);
	cr_assert_eq(ratelimit_check(&rl, "192.0.2.1", "a\0b", 3, T0), USER_W);
	cr_assert_eq(ratelimit_check(&rl, "192.0.2.1", "a\0c", 3, T0), 0);
	cr_assert_eq(ratelimit_check(&rl, "192.0.2.1", "a", 1, T0), 0);
	/* The empty name, however given. */
	for (int i = 0; i < 5; i++)
		ratelimit_fail(&rl, "192.0.2.2", NULL, 0, T0);
	cr_assert_eq(ratelimit_check(&rl, "192.0.2.2", "", 0, T0), USER_W);
	cr_assert_eq(ratelimit_check(&rl, "192.0.2.2", "x", 0, T0), USER_W);
	free(u);
	free(v);
}

Test(ratelimit, hostile_addresses)
{
	/* Exactly the bound, with no NUL: read no further than that. */
	char *a = malloc(RATELIMIT_ADDR_MAX);
	char longer[300];

	cr_assert_not_null(a);
	memset(a, 'f', RATELIMIT_ADDR_MAX);
	for (int i = 0; i < 5; i++)
		fail(a, "alice", T0);
	cr_assert_eq(check(a, "alice", T0), USER_W);
	memset(longer, 'f', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	cr_assert_eq(check(longer, "alice", T0), USER_W, "the same 64 bytes");
	longer[RATELIMIT_ADDR_MAX - 1] = 'e';
	cr_assert_eq(check(longer, "alice", T0), 0);
	/* An address and a user are not one string split anywhere. */
	for (int i = 0; i < 5; i++)
		fail("192.0.2.12", "3alice", T0);
	cr_assert_eq(check("192.0.2.12", "3alice", T0), USER_W);
	cr_assert_eq(check("192.0.2.123", "alice", T0), 0);
	cr_assert_eq(check("192.0.2.1", "23alice", T0), 0);
	/* No address at all is the empty one. */
	for (int i = 0; i < 5; i++)
		fail(NULL, "alice", T0);
	cr_assert_eq(check("", "alice", T0), USER_W);
	free(a);
}

Test(ratelimit, a_clock_set_back_waits_no_longer_than_a_window)
{
	for (int i = 0; i < 5; i++)
		fail("192.0.2.1", "alice", T0);
	cr_assert_eq(check("192.0.2.1", "alice", T0 - 3600000), USER_W);
}

Test(ratelimit, init_bounds)
{
	struct ratelimit r;

	cr_assert_eq(ratelimit_init(&r, 1), -1);
	/* A failed init leaves a table that counts only the global limit
	 * and frees harmlessly. */
	for (unsigned i = 0; i < RATELIMIT_GLOBAL_FAILS; i++)
		ratelimit_fail(&r, "192.0.2.1", "alice", 5, T0);
	cr_assert_eq(ratelimit_check(&r, "192.0.2.1", "alice", 5, T0),
	             GLOBAL_W);
	ratelimit_success(&r, "192.0.2.1", "alice", 5);
	ratelimit_known(&r, "192.0.2.1", "alice", 5, T0);
	cr_assert_eq(ratelimit_known_count(&r, T0), 0);
	ratelimit_free(&r);
	cr_assert_eq(ratelimit_init(&r, (size_t)RATELIMIT_MAX_ENTRIES + 1), -1);
	ratelimit_free(&r);
	cr_assert_eq(ratelimit_init(&r, 2), 0);
	cr_assert_eq(r.max, 2);
	ratelimit_fail(&r, "a", "x", 1, T0);
	ratelimit_fail(&r, "b", "y", 1, T0);
	cr_assert_eq(r.n, 2);
	cr_assert_eq(r.evicted, 2);
	ratelimit_free(&r);
	ratelimit_free(&r);
}

Test(ratelimit, a_refunded_attempt_counts_nowhere)
{
	/* Forty logins from one address, each counted as it is made and
	 * refunded once it succeeds: the address is never limited. */
	for (int i = 0; i < 40; i++) {
		cr_assert_eq(check("192.0.2.9", "alice", T0 + i), 0, "login %d",
		             i);
		fail("192.0.2.9", "alice", T0 + i);
		ratelimit_refund(&rl, "192.0.2.9", "alice", 5);
	}
	/* A failure stays counted: five of them, then refused. */
	for (int i = 0; i < 5; i++)
		fail("192.0.2.9", "bob", T0 + 100 + i);
	cr_assert_gt(check("192.0.2.9", "bob", T0 + 110), 0);
	/* A refund of a full ring takes back its newest only. */
	for (int i = 0; i < 15; i++)
		fail("192.0.2.9", nth_user(i), T0 + 200 + i);
	cr_assert_gt(check("192.0.2.9", "carol", T0 + 300), 0);
	ratelimit_refund(&rl, "192.0.2.9", nth_user(14), strlen(nth_user(14)));
	cr_assert_eq(check("192.0.2.9", "carol", T0 + 300), 0);
}
