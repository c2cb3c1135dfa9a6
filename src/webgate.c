/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The console's request gate: header checks only, in the order that
 * gives the most telling refusal first (a rebinding attempt is a wrong
 * Host before it is anything else).
 */
#include "webgate.h"

#include <arpa/inet.h>
#include <stdio.h>

#include <string.h>
#include <strings.h>

static int
is_read(const char *m)
{
	return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;
}

static int
method_allowed(const char *m, enum webgate_class class)
{
	if (m == NULL)
		return 0;
	switch (class) {
	case WEBGATE_READ:
		return is_read(m);
	case WEBGATE_ACTION:
		return strcmp(m, "POST") == 0;
	case WEBGATE_FORM:
		return is_read(m) || strcmp(m, "POST") == 0;
	}
	return 0;
}

const char *webgate_allow(enum webgate_class class)
{
	switch (class) {
	case WEBGATE_READ:
		return "GET, HEAD";
	case WEBGATE_ACTION:
		return "POST";
	case WEBGATE_FORM:
		return "GET, HEAD, POST";
	}
	return "";
}

static int
host_allowed(const char *host, const struct webgate_config *c)
{
	if (host == NULL || host[0] == '\0')
		return 0;
	/* Host names are case-insensitive; ports and brackets are not
	 * letters, so one compare does both. */
	for (size_t i = 0; i < c->nhosts; i++)
		if (strcasecmp(host, c->hosts[i]) == 0)
			return 1;
	return 0;
}

/* Origin must be exactly ours: "null" (a sandboxed or file page) and
 * any other site are not. */
static int
origin_ok(const char *origin, const struct webgate_config *c)
{
	return strcasecmp(origin, c->origin) == 0;
}

/* A Referer under our origin: the origin, then '/', '?' or the end, so
 * "http://127.0.0.1:8080.evil.example/" does not pass. */
static int
referer_ok(const char *referer, const struct webgate_config *c)
{
	size_t n = strlen(c->origin);

	if (strncasecmp(referer, c->origin, n) != 0)
		return 0;
	return referer[n] == '\0' || referer[n] == '/' || referer[n] == '?';
}

enum webgate_verdict
webgate_judge(const struct webgate_request *r, const struct webgate_config *c,
              const char **why)
{
	*why = NULL;
	if (!host_allowed(r->host, c)) {
		*why = r->host == NULL ? "no Host header"
		                       : "Host is not this console's";
		return WEBGATE_BAD_HOST;
	}
	if (!method_allowed(r->method, r->class)) {
		*why = "method not allowed here";
		return WEBGATE_BAD_METHOD;
	}
	if (r->auth == WEBGATE_AUTH_BOTH) {
		*why = "a session cookie and a Bearer token together";
		return WEBGATE_BOTH_AUTH;
	}
	if (is_read(r->method) || r->auth == WEBGATE_AUTH_BEARER)
		return WEBGATE_PASS;
	if (!r->csrf_ok) {
		*why = "missing or wrong CSRF token";
		return WEBGATE_NO_CSRF;
	}
	if (r->origin != NULL) {
		if (!origin_ok(r->origin, c)) {
			*why = "Origin is not this console's";
			return WEBGATE_BAD_ORIGIN;
		}
	} else if (r->referer == NULL) {
		*why = "neither Origin nor Referer";
		return WEBGATE_BAD_ORIGIN;
	} else if (!referer_ok(r->referer, c)) {
		*why = "Referer is not this console's";
		return WEBGATE_BAD_ORIGIN;
	}
	return WEBGATE_PASS;
}

int
webgate_status(enum webgate_verdict v)
{
	switch (v) {
	case WEBGATE_PASS:
		return 200;
	case WEBGATE_BAD_HOST:
		return 421;
	case WEBGATE_BAD_METHOD:
		return 405;
	case WEBGATE_BOTH_AUTH:
		return 400;
	case WEBGATE_NO_CSRF:
	case WEBGATE_BAD_ORIGIN:
		return 403;
	}
	return 500;
}

const char *
webgate_code(enum webgate_verdict v)
{
	switch (v) {
	case WEBGATE_PASS:
		return "ok";
	case WEBGATE_BAD_HOST:
		return "bad_host";
	case WEBGATE_BAD_METHOD:
		return "bad_method";
	case WEBGATE_BOTH_AUTH:
		return "both_auth";
	case WEBGATE_NO_CSRF:
		return "csrf";
	case WEBGATE_BAD_ORIGIN:
		return "origin";
	}
	return "internal";
}

/* An address's bytes, for comparison: 4 or 16, 0 when not an address. */
static size_t
addr_bytes(const char *text, size_t len, unsigned char *out)
{
	char buf[WEBGATE_ADDR_SIZE];

	if (len == 0 || len >= sizeof(buf))
		return 0;
	memcpy(buf, text, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET, buf, out) == 1)
		return 4;
	if (inet_pton(AF_INET6, buf, out) == 1)
		return 16;
	return 0;
}

/* The next entry of a list (comma or blank apart) from *p: its start and
 * length, or 0 at the end. */
static size_t
next_entry(const char **p, const char **start)
{
	const char *s = *p;
	size_t n;

	while (*s == ',' || *s == ' ' || *s == '\t')
		s++;
	*start = s;
	n = strcspn(s, ", \t");
	*p = s + n;
	return n;
}

/* Is the address (n bytes at a) one of trusted? */
static int
is_trusted(const unsigned char *a, size_t n, const char *trusted)
{
	const char *p = trusted, *e;
	unsigned char b[16];
	size_t len;

	while ((len = next_entry(&p, &e)) > 0)
		if (addr_bytes(e, len, b) == n && memcmp(a, b, n) == 0)
			return 1;
	return 0;
}

int
webgate_client(const char *peer, const char *xff, const char *trusted,
               char *out, size_t size)
{
	const char *ent[WEBGATE_XFF_MAX], *p, *e;
	size_t len[WEBGATE_XFF_MAX], n = 0, k, l;
	unsigned char a[16];

	snprintf(out, size, "%s", peer != NULL ? peer : "?");
	if (xff == NULL || trusted == NULL || trusted[0] == '\0' ||
	    peer == NULL || (k = addr_bytes(peer, strlen(peer), a)) == 0 ||
	    !is_trusted(a, k, trusted))
		return 0;
	for (p = xff; (l = next_entry(&p, &e)) > 0;) {
		if (n == WEBGATE_XFF_MAX)
			return 0;
		ent[n] = e;
		len[n++] = l;
	}
	/* Right to left: the first that is not a trusted proxy. */
	while (n > 0) {
		n--;
		if ((k = addr_bytes(ent[n], len[n], a)) == 0)
			return 0;
		/* Written as inet_ntop writes it: one text per address. */
		if (!is_trusted(a, k, trusted) &&
		    inet_ntop(k == 4 ? AF_INET : AF_INET6, a, out,
		              (socklen_t)size) != NULL)
			return 1;
		if (!is_trusted(a, k, trusted)) {
			snprintf(out, size, "%s", peer);
			return 0;
		}
	}
	return 0;
}

int
webgate_addresses_ok(const char *list, char *bad, size_t size)
{
	const char *p = list, *e;
	unsigned char a[16];
	size_t len;

	while ((len = next_entry(&p, &e)) > 0)
		if (addr_bytes(e, len, a) == 0) {
			snprintf(bad, size, "%.*s", (int)len, e);
			return 0;
		}
	return 1;
}
