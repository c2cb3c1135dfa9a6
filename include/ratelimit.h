/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The console's login rate limits (docs/console-design.md, section 3):
 * failed logins counted by (client address, user), by address and in all,
 * so that guessing passwords through the console is slow, without an
 * account lockout that would let anyone lock out an operator.  The client
 * address is the peer's, or behind a trusted proxy the one its
 * X-Forwarded-For names (webgate_client).
 *
 *   per (address, user)  5 failures in 5 minutes: that client, that user
 *   per address         20 failures in 1 minute: that client
 *   in all             300 failures in 1 minute: every client but the
 *                       known ones
 *
 * A known client is a (user, address) pair, a login of that user from that
 * address in the last 7 days (ratelimit_known), kept apart from the
 * failure table, so that no flood of failures pushes one out.  Only that
 * user from that address passes the ceiling: another name tried from an
 * operator's address is a stranger's attempt.  The pairs are bounded per
 * user and in all, so that one user's logins (a publisher's credentials
 * ship with every app) cannot push another user's clients out:
 *
 *   per user   RATELIMIT_KNOWN_USER (8) pairs: a ninth address replaces
 *              that user's least recently seen
 *   in all     RATELIMIT_KNOWN (256) pairs: when they are all in their 7
 *              days, a user's new pair replaces the least recently seen
 *              pair of the user holding the most, if that user holds more
 *              than the newcomer, else the newcomer's own least recent
 *              (counted in known_evicted when it was another user's)
 *
 * So a user logging in from any number of addresses holds at most 8 pairs,
 * and takes another user's only when all 256 are in use (the others then
 * holding at least 249) and only from a user holding more than they do: a
 * user's latest pair leaves for another's only when 256 users hold one
 * each.  A user's own pairs leave in the order it last logged in from
 * them.  Finding the user holding the most is a scan of the 256 for each
 * of them, only when all are in use.
 *
 * A client's failures thus slow that client only: a stranger cannot make
 * another client's correct login wait by failing with its user name or
 * with any number of names, and a flood from many addresses, which the
 * global ceiling holds to 300 broker logins a minute, keeps out new
 * clients for as long as it lasts but never an operator from where they
 * logged in before.
 *
 * Sliding windows, kept exactly: each counter holds the times of its
 * latest failures (5, 20 or 60 of them), and a login is refused while the
 * oldest of those is still inside its window, that is while the limit's
 * number of failures all fall in the last window.  A failure at t counts
 * until t + window (exclusive), so the wait returned is exact, not a
 * bucket's end.  A refused attempt is not a failure (the caller does not
 * try the broker, and does not call ratelimit_fail), so a client that
 * keeps knocking is refused only until its window passes.  A successful
 * login clears its (address, user) failures but not its address's or the
 * global ones, so one valid account does not reset the limit for others.
 *
 * The (address, user) and address counters live in one table of at most
 * max_entries, the least recently failed leaving first (counted in
 * evicted, and in evicted_live when it still held a failure inside its
 * window).  The global limit bounds how fast entries are made (300 a
 * minute, two entries each), so the default 4,096 takes about 7 minutes
 * to turn over: longer than any window, and an attacker cannot flush a
 * counter by filling the table.  It is high enough that people logging in
 * never meet it (the console counts each attempt before asking the
 * broker, and clears a success's (address, user) failures only).
 *
 * Keys are bounded, never refused: an address is its first
 * RATELIMIT_ADDR_MAX bytes (NUL-terminated, read no further), a user name
 * its first RATELIMIT_USER_MAX bytes (any bytes, NUL included).  Keys
 * that differ only after the bound share a counter, which is only ever
 * stricter.  The table's hash is not keyed: chosen names can make one
 * chain of the whole table, a scan of at most max_entries.
 *
 * Pure code: times are passed in (Unix ms), no locks, no I/O.
 */
#ifndef CASCADE_RATELIMIT_H
#define CASCADE_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

#define RATELIMIT_DEFAULT_ENTRIES 4096
/* The most ratelimit_init takes (indexes are 32 bits). */
#define RATELIMIT_MAX_ENTRIES (1u << 24)
/* INET6_ADDRSTRLEN is 46; a zone or a proxy's form gets some room. */
#define RATELIMIT_ADDR_MAX 64
/* A broker user name is at most 255 bytes (AMQP shortstr). */
#define RATELIMIT_USER_MAX 255

#define RATELIMIT_USER_FAILS 5
#define RATELIMIT_USER_WINDOW_MS INT64_C(300000)
#define RATELIMIT_ADDR_FAILS 20
#define RATELIMIT_ADDR_WINDOW_MS INT64_C(60000)
#define RATELIMIT_GLOBAL_FAILS 300
#define RATELIMIT_GLOBAL_WINDOW_MS INT64_C(60000)
#define RATELIMIT_KNOWN 256
#define RATELIMIT_KNOWN_USER 8
#define RATELIMIT_KNOWN_MS INT64_C(604800000) /* 7 days */

struct ratelimit_entry; /* private to ratelimit.c */
struct ratelimit_known; /* likewise */

struct ratelimit {
	struct ratelimit_entry *e; /* max slots, allocated once */
	uint32_t *bucket;          /* hash chains' heads; nbucket of them */
	uint32_t nbucket;          /* a power of two */
	uint32_t free;             /* unused slots, chained */
	uint32_t lru_head;         /* most recently failed */
	uint32_t lru_tail;         /* least: the next to leave */
	size_t n;                  /* entries in the table */
	size_t max;
	int64_t global[RATELIMIT_GLOBAL_FAILS]; /* ring of the latest */
	unsigned global_head;                   /* the oldest, when full */
	unsigned global_count;
	struct ratelimit_known *known; /* RATELIMIT_KNOWN slots */
	uint64_t evicted;              /* entries removed to make room */
	uint64_t evicted_live;         /* of those, still counting a failure */
	uint64_t known_evicted; /* known pairs taken for another user's */
};

/*
 * An empty table of at most max_entries (2 .. RATELIMIT_MAX_ENTRIES; 0
 * means RATELIMIT_DEFAULT_ENTRIES).  Returns 0, or -1 (a bad size, or out
 * of memory) with rl left so that ratelimit_free is harmless.
 */
int ratelimit_init(struct ratelimit *rl, size_t max_entries);

void ratelimit_free(struct ratelimit *rl);

/*
 * Whether a login by user (user_len bytes) from addr may be tried at now:
 * 0 when it may, else the milliseconds until it may (1 .. the longest
 * window), for Retry-After (rounded up to seconds).  The longest wait of
 * the three limits.  Changes nothing.  addr NULL is "", user NULL with
 * user_len 0 is "".
 */
int64_t ratelimit_check(const struct ratelimit *rl, const char *addr,
                        const char *user, size_t user_len, int64_t now);

/*
 * A login by user from addr failed at now: one failure on each of the
 * three counters.  Never fails: a full table makes room.
 */
void ratelimit_fail(struct ratelimit *rl, const char *addr, const char *user,
                    size_t user_len, int64_t now);

/*
 * A login by user from addr succeeded at now: that user from that address
 * is a known client for RATELIMIT_KNOWN_MS, which the global limit does
 * not hold back.  A new pair takes a slot by the rules above.
 */
void ratelimit_known(struct ratelimit *rl, const char *addr, const char *user,
                     size_t user_len, int64_t now);

/* The known pairs still in their RATELIMIT_KNOWN_MS at now. */
size_t ratelimit_known_count(const struct ratelimit *rl, int64_t now);

/*
 * A login by user from addr succeeded: its (address, user) failures are
 * forgotten.  The address's and the global ones stay.
 */
void ratelimit_success(struct ratelimit *rl, const char *addr, const char *user,
                       size_t user_len);

/*
 * A login counted as a failure before it was tried (ratelimit_fail, so
 * that attempts made at once cannot all pass ratelimit_check) that did
 * not fail: take back its count from the address and the global limits,
 * and clear the (address, user) failures as ratelimit_success does.
 */
void ratelimit_refund(struct ratelimit *rl, const char *addr, const char *user,
                      size_t user_len);

#endif
