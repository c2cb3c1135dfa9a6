/* SPDX-License-Identifier: Apache-2.0 */
/* ratelimit: the three limits, sliding windows, waits, the cap, keys. */
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

/*
 * 300 failures in all in a minute, from 30 clients (10 each: under each
 * client's own limit): every client waits for the oldest to leave the
 * minute, a new one too (the ceiling on broker logins), but not a known
 * client, one that logged in in the last 7 days: a flood never refuses
 * the operators who logged in before.  A flood of failures from fresh
 * addresses does not push a known client out.
 */
Test(ratelimit, the_global_ceiling_holds_every_client_but_known_ones)
{
	ratelimit_known(&rl, "203.0.113.5", T0 - 1000);
	ratelimit_known(&rl, "203.0.113.9", T0 - RATELIMIT_KNOWN_MS - 1);
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
