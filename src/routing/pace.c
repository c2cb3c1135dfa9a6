/* SPDX-License-Identifier: Apache-2.0 */
/* Pacing a target across daemons: see pace.h. */
#include "pace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headers.h"

/* The units a rate may be given in, and their length in seconds. */
static const struct {
	char unit;
	double seconds;
} pace_units[] = {{'s', 1.0}, {'m', 60.0}, {'h', 3600.0}};

#define PACE_NUNITS (sizeof(pace_units) / sizeof(pace_units[0]))

void
pace_init(struct pace *p)
{
	memset(p, 0, sizeof(*p));
}

static int
pace_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int
pace_blank(char c)
{
	return c == ' ' || c == '\t';
}

int
pace_parse_rate(const char *s, double *per_s, const char **why)
{
	char num[32];
	const char *start = s;
	size_t n;
	double count, seconds = 0;

	/* Digits, maybe a fraction: strtod alone would take "inf", "1e3",
	 * hex and a sign too. */
	while (pace_digit(*s))
		s++;
	if (s > start && *s == '.' && pace_digit(s[1]))
		for (s++; pace_digit(*s);)
			s++;
	n = (size_t)(s - start);
	if (n == 0)
		goto bad;
	if (n >= sizeof(num)) {
		*why = "too many digits";
		return -1;
	}
	memcpy(num, start, n);
	num[n] = '\0';
	count = strtod(num, NULL);
	while (pace_blank(*s))
		s++;
	if (*s++ != '/')
		goto bad;
	while (pace_blank(*s))
		s++;
	for (size_t i = 0; i < PACE_NUNITS; i++)
		if (*s == pace_units[i].unit)
			seconds = pace_units[i].seconds;
	if (seconds == 0 || s[1] != '\0')
		goto bad;
	if (count <= 0) {
		*why = "must be more than 0";
		return -1;
	}
	if (count / seconds > PACE_RATE_MAX) {
		*why = "faster than 100000/s";
		return -1;
	}
	if (count * (3600.0 / seconds) < 1.0) {
		*why = "slower than 1/h";
		return -1;
	}
	*per_s = count / seconds;
	return 0;
bad:
	*why = "expected a rate such as 200/s, 30/m or 5/h";
	return -1;
}

void
pace_format_rate(double per_s, char *out, size_t size)
{
	for (size_t i = 0; i < PACE_NUNITS; i++) {
		double count = per_s * pace_units[i].seconds;
		double whole = round(count);
		if (whole >= 1.0 && fabs(count - whole) <= 1e-9 * whole) {
			snprintf(out, size, "%.0f/%c", whole,
			         pace_units[i].unit);
			return;
		}
	}
	snprintf(out, size, "%.6g/s", per_s);
}

static int
pace_bytes_eq(const char *a, size_t alen, amqp_bytes_t b)
{
	return alen == b.len && (alen == 0 || memcmp(a, b.bytes, alen) == 0);
}

/* The default exchange's two names, "" and amq.default, as one. */
static amqp_bytes_t
pace_exchange(amqp_bytes_t ex)
{
	if (headers_key_is(ex, "amq.default"))
		ex.len = 0;
	return ex;
}

int
pace_add(struct pace *p, const char *target, size_t len, double per_s,
         const char **why)
{
	const char *slash = memchr(target, '/', len);
	size_t exlen = slash ? (size_t)(slash - target) : len;
	size_t keylen = slash ? len - exlen - 1 : 0;
	amqp_bytes_t ex = {exlen, (void *)(uintptr_t)target};
	amqp_bytes_t key = {keylen,
	                    (void *)(uintptr_t)(slash ? slash + 1 : "")};
	struct pace_target *t;

	ex = pace_exchange(ex);
	if (exlen > 255) {
		*why = "exchange name longer than 255 bytes";
		return -1;
	}
	if (keylen > 255) {
		*why = "routing key longer than 255 bytes";
		return -1;
	}
	for (size_t i = 0; i < p->n; i++) {
		t = &p->t[i];
		if (t->any_key == (slash == NULL) &&
		    pace_bytes_eq(t->exchange, t->exchange_len, ex) &&
		    (t->any_key ||
		     pace_bytes_eq(t->routing_key, t->routing_key_len, key))) {
			*why = "this target is paced twice";
			return -1;
		}
	}
	if (p->n >= PACE_TARGETS_MAX) {
		*why = "more than 64 paced targets";
		return -1;
	}
	t = &p->t[p->n++];
	memset(t, 0, sizeof(*t));
	memcpy(t->exchange, ex.bytes, ex.len);
	t->exchange_len = (uint8_t)ex.len;
	if (slash != NULL)
		memcpy(t->routing_key, slash + 1, keylen);
	t->routing_key_len = (uint8_t)keylen;
	t->any_key = slash == NULL;
	t->per_s = per_s;
	return 0;
}

struct pace_target *
pace_find(struct pace *p, amqp_bytes_t exchange, amqp_bytes_t routing_key)
{
	struct pace_target *any = NULL;

	exchange = pace_exchange(exchange);
	/* At most 64 targets, each compared in a few bytes: a scan. */
	for (size_t i = 0; i < p->n; i++) {
		struct pace_target *t = &p->t[i];
		if (!pace_bytes_eq(t->exchange, t->exchange_len, exchange))
			continue;
		if (t->any_key)
			any = t;
		else if (pace_bytes_eq(t->routing_key, t->routing_key_len,
		                       routing_key))
			return t;
	}
	return any;
}

int64_t
pace_slot(struct pace_target *t, int64_t now, unsigned daemons)
{
	double spacing, frac;
	int64_t slot, whole;

	if (daemons == 0)
		daemons = 1;
	t->delivered_total++;
	if (!(t->per_s > 0))
		return now;
	spacing = 1000.0 * daemons / t->per_s;
	/* The next free slot, rounded up to the ms: never before it. */
	slot = t->next_free + (t->next_frac > 0);
	if (slot <= now) {
		/* Free already (or idle): from now, with no credit kept. */
		slot = now;
		t->next_free = now;
		t->next_frac = 0;
	} else {
		t->paced_total++;
	}
	/* A fraction within a nanosecond of a whole ms is that ms: sums of
	 * inexact spacings (1/3 ms) must not round a slot up a ms late. */
	frac = t->next_frac + spacing;
	whole = (int64_t)floor(frac + 1e-6);
	frac -= (double)whole;
	t->next_free += whole;
	t->next_frac = frac > 1e-6 ? frac : 0;
	return slot;
}

void
pace_peer_seen(struct pace *p, amqp_bytes_t token, int64_t at)
{
	struct pace_peer *peer = NULL;

	if (token.len < 7 || token.len > PACE_TOKEN_MAX ||
	    memcmp(token.bytes, "daemon-", 7) != 0)
		return;
	for (size_t i = 0; i < p->npeers; i++)
		if (pace_bytes_eq(p->peers[i].token, p->peers[i].token_len,
		                  token)) {
			if (at > p->peers[i].heard)
				p->peers[i].heard = at;
			return;
		}
	if (p->npeers < PACE_PEERS_MAX) {
		peer = &p->peers[p->npeers++];
	} else {
		/* Full: the one heard from longest ago makes room. */
		peer = &p->peers[0];
		for (size_t i = 1; i < p->npeers; i++)
			if (p->peers[i].heard < peer->heard)
				peer = &p->peers[i];
	}
	memset(peer, 0, sizeof(*peer));
	memcpy(peer->token, token.bytes, token.len);
	peer->token_len = (uint8_t)token.len;
	peer->heard = at;
}

int
pace_peer_live(const struct pace *p, amqp_bytes_t token, int64_t now)
{
	for (size_t i = 0; i < p->npeers; i++) {
		const struct pace_peer *peer = &p->peers[i];
		if (pace_bytes_eq(peer->token, peer->token_len, token))
			return now - peer->heard < PACE_PEER_TTL_MS;
	}
	return 0;
}

unsigned
pace_peers(const struct pace *p, amqp_bytes_t own, int64_t now)
{
	unsigned n = 1; /* own, heard or not */

	for (size_t i = 0; i < p->npeers; i++) {
		const struct pace_peer *peer = &p->peers[i];
		if (now - peer->heard < PACE_PEER_TTL_MS &&
		    !pace_bytes_eq(peer->token, peer->token_len, own))
			n++;
	}
	return n;
}
