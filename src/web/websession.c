/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The console's session store: tokens from the kernel, kept only as their
 * SHA-256; a linear store (tens of sessions, each with a broker
 * connection behind it, so a scan is cheaper than any index).
 */
#include "websession.h"

#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char hexdigits[] = "0123456789abcdef";

int
websession_init(struct websession_store *st, size_t max, int64_t idle_ms,
                int64_t absolute_ms, char *err, size_t errlen)
{
	memset(st, 0, sizeof(*st));
	if (max == 0 || idle_ms <= 0 || absolute_ms <= 0) {
		snprintf(err, errlen, "session limits must be positive");
		return -1;
	}
	st->s = calloc(max, sizeof(*st->s));
	if (st->s == NULL) {
		snprintf(err, errlen, "out of memory for %zu sessions", max);
		return -1;
	}
	st->max = max;
	st->idle_ms = idle_ms;
	st->absolute_ms = absolute_ms;
	return 0;
}

/* Take session i out of the store, wipe it; its conn. */
static void *
drop(struct websession_store *st, size_t i)
{
	struct websession *s = st->s[i];
	void *conn = s->conn;

	OPENSSL_cleanse(s, sizeof(*s));
	free(s);
	st->s[i] = st->s[--st->n];
	st->s[st->n] = NULL;
	return conn;
}

void
websession_free(struct websession_store *st, void (*close_conn)(void *conn))
{
	while (st->n > 0) {
		void *conn = drop(st, st->n - 1);
		if (close_conn != NULL && conn != NULL)
			close_conn(conn);
	}
	free(st->s);
	memset(st, 0, sizeof(*st));
}

/* Random bytes from the kernel, all or -1: no weaker fallback for a
 * secret. */
static int
random_bytes(unsigned char *b, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = getrandom(b + got, n - got, 0);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static void
to_hex(const unsigned char *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexdigits[b[i] >> 4];
		out[2 * i + 1] = hexdigits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

int
websession_new_token(char hex[WEBSESSION_HEX_SIZE])
{
	unsigned char raw[WEBSESSION_TOKEN_BYTES];

	if (random_bytes(raw, sizeof(raw)) != 0) {
		OPENSSL_cleanse(raw, sizeof(raw));
		return -1;
	}
	to_hex(raw, sizeof(raw), hex);
	OPENSSL_cleanse(raw, sizeof(raw));
	return 0;
}

int
websession_token_eq(const char *given, size_t len,
                    const char token[WEBSESSION_HEX_SIZE])
{
	/* The length is no secret: every token is 64 digits. */
	if (given == NULL || len != 2 * WEBSESSION_TOKEN_BYTES)
		return 0;
	return CRYPTO_memcmp(token, given, len) == 0;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The SHA-256 of the token the hex names; -1 for anything but exactly 64
 * lowercase hex digits (as we gave out). */
static int
token_hash(const char *hex, size_t len, unsigned char hash[32])
{
	unsigned char raw[WEBSESSION_TOKEN_BYTES];
	unsigned int mdlen = 0;
	int rc;

	if (hex == NULL || len != 2 * WEBSESSION_TOKEN_BYTES)
		return -1;
	for (size_t i = 0; i < WEBSESSION_TOKEN_BYTES; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		raw[i] = (unsigned char)(hi << 4 | lo);
	}
	rc = EVP_Digest(raw, sizeof(raw), hash, &mdlen, EVP_sha256(), NULL);
	OPENSSL_cleanse(raw, sizeof(raw));
	return rc == 1 && mdlen == 32 ? 0 : -1;
}

static int
is_expired(const struct websession_store *st, const struct websession *s,
           int64_t now)
{
	return now >= websession_expires(st, s);
}

int64_t
websession_expires(const struct websession_store *st,
                   const struct websession *s)
{
	int64_t idle = s->used + st->idle_ms;
	int64_t absolute = s->created + st->absolute_ms;
	return idle < absolute ? idle : absolute;
}

/* Index of the session with this hash, or -1.  The compare is constant
 * time though it need not be (a hash leaks nothing of its token). */
static long
find(const struct websession_store *st, const unsigned char hash[32])
{
	for (size_t i = 0; i < st->n; i++)
		if (CRYPTO_memcmp(st->s[i]->hash, hash, 32) == 0)
			return (long)i;
	return -1;
}

/* Make room for one: an expired session first, else the least recently
 * used.  Its conn. */
static void *
make_room(struct websession_store *st, int64_t now)
{
	size_t oldest = 0;

	for (size_t i = 0; i < st->n; i++) {
		if (is_expired(st, st->s[i], now)) {
			st->expired++;
			return drop(st, i);
		}
		if (st->s[i]->used < st->s[oldest]->used)
			oldest = i;
	}
	st->evicted++;
	return drop(st, oldest);
}

struct websession *
websession_create(struct websession_store *st, const char *user, size_t len,
                  int control, void *conn, int64_t now,
                  char token_hex[WEBSESSION_HEX_SIZE], void **evicted,
                  char *err, size_t errlen)
{
	char csrf_hex[WEBSESSION_HEX_SIZE];
	unsigned char hash[32];
	struct websession *s;

	*evicted = NULL;
	token_hex[0] = '\0';
	if (len == 0 || len > WEBSESSION_USER_MAX || memchr(user, 0, len)) {
		snprintf(err, errlen,
		         "a user name is 1 to 255 bytes without NUL");
		return NULL;
	}
	if (websession_new_token(token_hex) != 0 ||
	    websession_new_token(csrf_hex) != 0) {
		OPENSSL_cleanse(token_hex, WEBSESSION_HEX_SIZE);
		snprintf(err, errlen, "no random bytes from the kernel");
		return NULL;
	}
	if (token_hash(token_hex, 2 * WEBSESSION_TOKEN_BYTES, hash) != 0) {
		OPENSSL_cleanse(token_hex, WEBSESSION_HEX_SIZE);
		OPENSSL_cleanse(csrf_hex, sizeof(csrf_hex));
		snprintf(err, errlen, "SHA-256 failed");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		OPENSSL_cleanse(token_hex, WEBSESSION_HEX_SIZE);
		OPENSSL_cleanse(csrf_hex, sizeof(csrf_hex));
		snprintf(err, errlen, "out of memory for a session");
		return NULL;
	}
	memcpy(s->hash, hash, sizeof(hash));
	memcpy(s->user, user, len);
	s->control = control != 0;
	memcpy(s->csrf, csrf_hex, sizeof(csrf_hex));
	OPENSSL_cleanse(csrf_hex, sizeof(csrf_hex));
	s->created = now;
	s->used = now;
	s->conn = conn;
	if (st->n == st->max)
		*evicted = make_room(st, now);
	st->s[st->n++] = s;
	return s;
}

struct websession *
websession_touch(struct websession_store *st, const char *token, size_t len,
                 int64_t now, const char **why)
{
	unsigned char hash[32];
	long i;

	if (token_hash(token, len, hash) != 0 || (i = find(st, hash)) < 0) {
		*why = "no session";
		return NULL;
	}
	if (is_expired(st, st->s[i], now)) {
		*why = "session expired";
		return NULL;
	}
	st->s[i]->used = now;
	return st->s[i];
}

void *
websession_remove(struct websession_store *st, const char *token, size_t len,
                  int *found)
{
	unsigned char hash[32];
	long i;

	*found = 0;
	if (token_hash(token, len, hash) != 0 || (i = find(st, hash)) < 0)
		return NULL;
	*found = 1;
	return drop(st, (size_t)i);
}

int
websession_expire(struct websession_store *st, int64_t now, void **conn)
{
	*conn = NULL;
	for (size_t i = 0; i < st->n; i++) {
		if (is_expired(st, st->s[i], now)) {
			st->expired++;
			*conn = drop(st, i);
			return 1;
		}
	}
	return 0;
}

int
websession_csrf_ok(const struct websession *s, const char *given, size_t len)
{
	return websession_token_eq(given, len, s->csrf);
}

int
websession_trim_user(struct websession_store *st, const char *user, size_t len,
                     size_t max, void **conn)
{
	size_t held = 0, oldest = 0;

	*conn = NULL;
	for (size_t i = 0; i < st->n; i++) {
		const struct websession *s = st->s[i];
		if (strlen(s->user) != len || memcmp(s->user, user, len) != 0)
			continue;
		if (held++ == 0 || s->used < st->s[oldest]->used)
			oldest = i;
	}
	if (held < max)
		return 0;
	st->evicted++;
	*conn = drop(st, oldest);
	return 1;
}
