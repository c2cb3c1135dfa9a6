/* SPDX-License-Identifier: Apache-2.0 */
/* websession: tokens kept only as hashes, expiry, the cap, CSRF. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "websession.h"

#define T0 INT64_C(1700000000000)
#define IDLE INT64_C(600000)       /* 10 min */
#define ABSOLUTE INT64_C(28800000) /* 8 h */

static struct websession_store st;

/* 1 when needle's n bytes occur in hay's size bytes (memmem is GNU). */
static int
contains(const void *hay, size_t size, const void *needle, size_t n)
{
	const unsigned char *h = hay;

	for (size_t i = 0; i + n <= size; i++)
		if (memcmp(h + i, needle, n) == 0)
			return 1;
	return 0;
}
static char err[256];

static void
setup(void)
{
	cr_assert_eq(websession_init(&st, 3, IDLE, ABSOLUTE, err, sizeof(err)),
	             0, "%s", err);
}

static void
teardown(void)
{
	websession_free(&st, NULL);
}

/* A session for user at now, holding conn; its token in tok. */
static struct websession *
login(const char *user, int control, void *conn, int64_t now,
      char tok[WEBSESSION_HEX_SIZE], void **evicted)
{
	struct websession *s =
	    websession_create(&st, user, strlen(user), control, conn, now, tok,
	                      evicted, err, sizeof(err));
	cr_assert_not_null(s, "%s", err);
	return s;
}

static struct websession *
touch(const char *tok, int64_t now, const char **why)
{
	*why = NULL;
	return websession_touch(&st, tok, strlen(tok), now, why);
}

TestSuite(websession, .init = setup, .fini = teardown);

Test(websession, create_and_find)
{
	char tok[WEBSESSION_HEX_SIZE];
	void *ev;
	const char *why;
	int conn;
	struct websession *s = login("alice", 0, &conn, T0, tok, &ev);

	cr_assert_null(ev);
	cr_assert_eq(strlen(tok), 64);
	cr_assert_eq(strspn(tok, "0123456789abcdef"), 64);
	cr_assert_str_eq(s->user, "alice");
	cr_assert_eq(s->control, 0);
	cr_assert_eq(s->created, T0);
	cr_assert_eq(touch(tok, T0 + 1000, &why), s);
	cr_assert_eq(s->used, T0 + 1000);
	cr_assert_eq(s->conn, &conn);
}

Test(websession, token_is_stored_only_as_hash)
{
	char tok[WEBSESSION_HEX_SIZE], tok2[WEBSESSION_HEX_SIZE];
	unsigned char raw[WEBSESSION_TOKEN_BYTES];
	void *ev;
	struct websession *s = login("ops", 1, NULL, T0, tok, &ev);

	login("ops", 1, NULL, T0, tok2, &ev);
	cr_assert_str_neq(tok, tok2, "two logins, two tokens");
	/* Neither the hex nor the raw bytes are anywhere in the session. */
	for (size_t i = 0; i < sizeof(raw); i++) {
		unsigned hi, lo;
		sscanf(tok + 2 * i, "%1x%1x", &hi, &lo);
		raw[i] = (unsigned char)(hi << 4 | lo);
	}
	cr_assert_not(contains(s, sizeof(*s), tok, 64));
	cr_assert_not(contains(s, sizeof(*s), raw, sizeof(raw)));
	cr_assert_not(contains(s, sizeof(*s), raw, 8));
	cr_assert_str_neq(s->csrf, tok);
}

Test(websession, unknown_and_malformed_tokens)
{
	char tok[WEBSESSION_HEX_SIZE];
	void *ev;
	const char *why;
	char other[WEBSESSION_HEX_SIZE];

	login("alice", 0, NULL, T0, tok, &ev);
	memcpy(other, tok, sizeof(other));
	other[10] = other[10] == '0' ? '1' : '0';
	cr_assert_null(touch(other, T0, &why));
	cr_assert_str_eq(why, "no session");
	cr_assert_null(touch("", T0, &why));
	cr_assert_str_eq(why, "no session");
	cr_assert_null(touch("abc", T0, &why));
	memcpy(other, tok, sizeof(other));
	other[0] = 'A'; /* we give out lowercase only */
	cr_assert_null(touch(other, T0, &why));
	memcpy(other, tok, sizeof(other));
	other[5] = 'g';
	cr_assert_null(touch(other, T0, &why));
	cr_assert_null(websession_touch(&st, tok, 63, T0, &why));
	cr_assert_null(websession_touch(&st, NULL, 0, T0, &why));
}

Test(websession, idle_expiry)
{
	char tok[WEBSESSION_HEX_SIZE];
	void *ev, *conn;
	const char *why;
	int c;

	login("alice", 0, &c, T0, tok, &ev);
	cr_assert_not_null(touch(tok, T0 + IDLE - 1, &why));
	/* Used just now: another IDLE from here. */
	cr_assert_not_null(touch(tok, T0 + 2 * IDLE - 2, &why));
	cr_assert_null(touch(tok, T0 + 3 * IDLE, &why));
	cr_assert_str_eq(why, "session expired");
	/* Still held, so its conn comes back from the sweep. */
	cr_assert_eq(st.n, 1);
	cr_assert_eq(websession_expire(&st, T0 + 3 * IDLE, &conn), 1);
	cr_assert_eq(conn, &c);
	cr_assert_eq(st.expired, 1);
	cr_assert_eq(websession_expire(&st, T0 + 3 * IDLE, &conn), 0);
	cr_assert_null(conn);
	cr_assert_null(touch(tok, T0 + 3 * IDLE, &why));
	cr_assert_str_eq(why, "no session");
}

Test(websession, absolute_expiry)
{
	char tok[WEBSESSION_HEX_SIZE];
	void *ev;
	const char *why;
	int64_t t;
	struct websession *s = login("alice", 0, NULL, T0, tok, &ev);

	for (t = T0; t < T0 + ABSOLUTE; t += IDLE / 2)
		cr_assert_not_null(touch(tok, t, &why), "at +%lld ms",
		                   (long long)(t - T0));
	cr_assert_eq(websession_expires(&st, s), T0 + ABSOLUTE);
	cr_assert_null(touch(tok, T0 + ABSOLUTE, &why));
	cr_assert_str_eq(why, "session expired");
}

Test(websession, expires_is_the_earlier_limit)
{
	char tok[WEBSESSION_HEX_SIZE];
	void *ev;
	struct websession *s = login("alice", 0, NULL, T0, tok, &ev);

	cr_assert_eq(websession_expires(&st, s), T0 + IDLE);
}

Test(websession, cap_evicts_least_recently_used)
{
	char a[WEBSESSION_HEX_SIZE], b[WEBSESSION_HEX_SIZE];
	char c[WEBSESSION_HEX_SIZE], d[WEBSESSION_HEX_SIZE];
	int ca, cb, cc, cd;
	void *ev;
	const char *why;

	login("a", 0, &ca, T0, a, &ev);
	login("b", 0, &cb, T0 + 1, b, &ev);
	login("c", 0, &cc, T0 + 2, c, &ev);
	cr_assert_not_null(touch(a, T0 + 3, &why)); /* b is now the oldest */
	login("d", 0, &cd, T0 + 4, d, &ev);
	cr_assert_eq(ev, &cb, "b's connection handed back");
	cr_assert_eq(st.evicted, 1);
	cr_assert_eq(st.n, 3);
	cr_assert_null(touch(b, T0 + 5, &why));
	cr_assert_not_null(touch(a, T0 + 5, &why));
	cr_assert_not_null(touch(c, T0 + 5, &why));
	cr_assert_not_null(touch(d, T0 + 5, &why));
}

Test(websession, cap_prefers_an_expired_session)
{
	char a[WEBSESSION_HEX_SIZE], b[WEBSESSION_HEX_SIZE];
	char c[WEBSESSION_HEX_SIZE], d[WEBSESSION_HEX_SIZE];
	int ca, cb, cc;
	void *ev;
	const char *why;

	login("a", 0, &ca, T0 + IDLE, a, &ev);
	login("b", 0, &cb, T0, b, &ev); /* expires first but is not oldest */
	login("c", 0, &cc, T0 + IDLE, c, &ev);
	login("d", 0, NULL, T0 + IDLE + 1, d, &ev);
	cr_assert_eq(ev, &cb);
	cr_assert_eq(st.evicted, 0);
	cr_assert_eq(st.expired, 1);
	cr_assert_not_null(touch(a, T0 + IDLE + 2, &why));
}

Test(websession, logout_hands_back_conn)
{
	char tok[WEBSESSION_HEX_SIZE];
	void *ev;
	const char *why;
	int c, found;

	login("alice", 0, &c, T0, tok, &ev);
	cr_assert_eq(websession_remove(&st, tok, 64, &found), &c);
	cr_assert_eq(found, 1);
	cr_assert_eq(st.n, 0);
	cr_assert_null(touch(tok, T0, &why));
	cr_assert_null(websession_remove(&st, tok, 64, &found));
	cr_assert_eq(found, 0);
}

Test(websession, csrf)
{
	char tok[WEBSESSION_HEX_SIZE], tok2[WEBSESSION_HEX_SIZE];
	char bad[WEBSESSION_HEX_SIZE];
	void *ev;
	struct websession *s = login("alice", 0, NULL, T0, tok, &ev);
	struct websession *s2 = login("bob", 0, NULL, T0, tok2, &ev);

	cr_assert_eq(strlen(s->csrf), 64);
	cr_assert_str_neq(s->csrf, s2->csrf);
	cr_assert_eq(websession_csrf_ok(s, s->csrf, 64), 1);
	cr_assert_eq(websession_csrf_ok(s, s2->csrf, 64), 0);
	cr_assert_eq(websession_csrf_ok(s, s->csrf, 63), 0);
	cr_assert_eq(websession_csrf_ok(s, "", 0), 0);
	cr_assert_eq(websession_csrf_ok(s, NULL, 0), 0);
	memcpy(bad, s->csrf, sizeof(bad));
	bad[63] = bad[63] == 'a' ? 'b' : 'a';
	cr_assert_eq(websession_csrf_ok(s, bad, 64), 0);
}

Test(websession, bad_user_names)
{
	char tok[WEBSESSION_HEX_SIZE], name[300];
	void *ev;

	cr_assert_null(websession_create(&st, "", 0, 0, NULL, T0, tok, &ev, err,
	                                 sizeof(err)));
	cr_assert_null(websession_create(&st, "a\0b", 3, 0, NULL, T0, tok, &ev,
	                                 err, sizeof(err)));
	memset(name, 'x', sizeof(name));
	cr_assert_null(websession_create(&st, name, 256, 0, NULL, T0, tok, &ev,
	                                 err, sizeof(err)));
	cr_assert_not_null(websession_create(&st, name, 255, 0, NULL, T0, tok,
	                                     &ev, err, sizeof(err)));
	cr_assert_eq(st.n, 1);
}

static int closed;

static void
count_close(void *conn)
{
	(void)conn;
	closed++;
}

Test(websession_free, closes_every_conn)
{
	struct websession_store s2;
	char tok[WEBSESSION_HEX_SIZE];
	void *ev;
	int c;

	cr_assert_eq(websession_init(&s2, 4, IDLE, ABSOLUTE, err, sizeof(err)),
	             0);
	for (int i = 0; i < 3; i++)
		cr_assert_not_null(websession_create(
		    &s2, "u", 1, 0, &c, T0, tok, &ev, err, sizeof(err)));
	closed = 0;
	websession_free(&s2, count_close);
	cr_assert_eq(closed, 3);
}

Test(websession_free, bad_limits)
{
	struct websession_store s2;

	cr_assert_eq(websession_init(&s2, 0, IDLE, ABSOLUTE, err, sizeof(err)),
	             -1);
	cr_assert_eq(websession_init(&s2, 1, 0, ABSOLUTE, err, sizeof(err)),
	             -1);
	cr_assert_eq(websession_init(&s2, 1, IDLE, -1, err, sizeof(err)), -1);
}

Test(websession, a_user_at_their_cap_loses_their_own_oldest)
{
	char t1[WEBSESSION_HEX_SIZE], t2[WEBSESSION_HEX_SIZE],
	    t3[WEBSESSION_HEX_SIZE];
	int a1, a2, b1;
	void *ev, *gone;
	const char *why;

	login("alice", 0, &a1, T0, t1, &ev);
	login("bob", 1, &b1, T0 + 1, t3, &ev);
	login("alice", 0, &a2, T0 + 2, t2, &ev);
	/* bob holds one: under a cap of 2, nothing to trim */
	cr_assert_eq(websession_trim_user(&st, "bob", 3, 2, &gone), 0);
	cr_assert_null(gone);
	/* alice holds two: her least recently used goes, bob's stays */
	cr_assert_not_null(touch(t1, T0 + 3, &why));
	cr_assert_eq(websession_trim_user(&st, "alice", 5, 2, &gone), 1);
	cr_assert_eq(gone, &a2);
	cr_assert_null(touch(t2, T0 + 4, &why));
	cr_assert_not_null(touch(t1, T0 + 4, &why));
	cr_assert_not_null(touch(t3, T0 + 4, &why));
	/* a name that is a prefix of another is another user */
	cr_assert_eq(websession_trim_user(&st, "ali", 3, 1, &gone), 0);
}
