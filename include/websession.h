/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The console's sessions (docs/console-design.md, section 3): who is
 * logged in, kept in memory only.  A session is named by a random 32-byte
 * token that the browser holds (64 hex digits in the cookie, or a Bearer
 * token for scripts); the store keeps only its SHA-256, so a memory dump
 * or a log of the store gives nobody a cookie to replay.  Each session has
 * its own CSRF token, compared in constant time, and an opaque pointer the
 * caller owns (its broker connection as that user), handed back whenever
 * the session leaves the store so the caller can close it.
 *
 * Pure code: times are passed in (Unix ms), no locks, no I/O but the
 * kernel's random bytes.
 */
#ifndef CASCADE_WEBSESSION_H
#define CASCADE_WEBSESSION_H

#include <stddef.h>
#include <stdint.h>

#define WEBSESSION_TOKEN_BYTES 32
/* 64 hex digits and a NUL: the token and the CSRF token as given out. */
#define WEBSESSION_HEX_SIZE (2 * WEBSESSION_TOKEN_BYTES + 1)
/* A broker user name is at most 255 bytes (AMQP shortstr). */
#define WEBSESSION_USER_MAX 255

struct websession {
	unsigned char hash[32]; /* SHA-256 of the token's bytes */
	char user[WEBSESSION_USER_MAX + 1];
	int control;                    /* a control user: sees everything */
	char csrf[WEBSESSION_HEX_SIZE]; /* put in forms; not a secret to
	                                   the page, only to other sites */
	int64_t created;
	int64_t used;
	void *conn; /* the caller's; never looked at here */
};

struct websession_store {
	struct websession **s; /* each its own allocation: stable */
	size_t n;
	size_t max;
	int64_t idle_ms;     /* unused this long: expired */
	int64_t absolute_ms; /* this long after login: expired, used or not */
	uint64_t evicted;    /* live sessions removed to make room */
	uint64_t expired;    /* removed by websession_expire */
};

/*
 * An empty store of at most max sessions (>= 1), with its idle and absolute
 * lifetimes (> 0).  Returns 0, or -1 with err (out of memory, bad limits).
 */
int websession_init(struct websession_store *st, size_t max, int64_t idle_ms,
                    int64_t absolute_ms, char *err, size_t errlen);

/*
 * Free the store; each session's conn goes to close_conn when that is set
 * (else the caller must have taken them all back already).
 */
void websession_free(struct websession_store *st,
                     void (*close_conn)(void *conn));

/*
 * A new session for user (name of len bytes, 1..255, no NUL) holding conn.
 * The token, 64 hex digits, goes to token_hex: it is not kept, only its
 * hash.  When the store is full an expired session leaves, else the one
 * unused the longest (counted in st->evicted); its conn is put in *evicted
 * for the caller to close, else *evicted is NULL.  Returns the session
 * (valid until it leaves the store), or NULL with err: a bad name, no
 * random bytes from the kernel, or out of memory.
 */
struct websession *websession_create(struct websession_store *st,
                                     const char *user, size_t len, int control,
                                     void *conn, int64_t now,
                                     char token_hex[WEBSESSION_HEX_SIZE],
                                     void **evicted, char *err, size_t errlen);

/*
 * The live session named by the token (hex of len bytes, as the cookie or
 * Authorization header gave it), its last use set to now.  NULL with *why
 * "no session" (unknown, malformed) or "session expired" (idle or
 * absolute: it stays until websession_expire or websession_remove takes
 * it, so its conn is still handed back).
 */
struct websession *websession_touch(struct websession_store *st,
                                    const char *token, size_t len, int64_t now,
                                    const char **why);

/*
 * Remove the session named by token (logout), wiping it.  Returns its
 * conn for the caller to close; *found says whether there was one (conn
 * may be NULL either way).
 */
void *websession_remove(struct websession_store *st, const char *token,
                        size_t len, int *found);

/*
 * Remove one expired session, wiping it: returns 1 and its conn in *conn,
 * or 0 when none has expired.  Call until 0 (a timer's sweep).
 */
int websession_expire(struct websession_store *st, int64_t now, void **conn);

/*
 * When user (len bytes) holds max sessions or more, remove the one they
 * used least recently, wiping it (counted in evicted): 1 and its conn in
 * *conn; else 0.  Called before websession_create, so that one user
 * logging in again and again ends their own sessions, not everyone's.
 */
int websession_trim_user(struct websession_store *st, const char *user,
                         size_t len, size_t max, void **conn);

/* When s expires if unused from now on: the earlier of its two limits. */
int64_t websession_expires(const struct websession_store *st,
                           const struct websession *s);

/*
 * A new token: 32 random bytes from the kernel, as 64 hex digits (a
 * session's, its CSRF token, the login form's pre-session one).  0, or
 * -1 when the kernel gave none.
 */
int websession_new_token(char hex[WEBSESSION_HEX_SIZE]);

/*
 * 1 when given (len bytes) is token, compared in constant time; else 0
 * (also for NULL, or a length not a token's).
 */
int websession_token_eq(const char *given, size_t len,
                        const char token[WEBSESSION_HEX_SIZE]);

/*
 * 1 when given (len bytes, from a form field or X-CSRF-Token) is s's CSRF
 * token, compared in constant time; else 0.
 */
int websession_csrf_ok(const struct websession *s, const char *given,
                       size_t len);

#endif
