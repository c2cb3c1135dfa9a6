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
	if (inet_pton(AF_INET6, buf, out) != 1)
		return 0;
	/* An IPv4 address as a dual-stack socket shows it (::ffff:a.b.c.d)
	 * is that IPv4 address. */
	if (memcmp(out, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) {
		memmove(out, out + 12, 4);
		return 4;
	}
	return 16;
}

/* a (n bytes) written into out as inet_ntop writes it; 0, or -1. */
static int
addr_text(const unsigned char *a, size_t n, char *out, size_t size)
{
	return inet_ntop(n == 4 ? AF_INET : AF_INET6, a, out,
	                 (socklen_t)size) != NULL
	           ? 0
	           : -1;
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
	const char *end, *start;
	unsigned char a[16];
	size_t k, len;

	snprintf(out, size, "%s", peer != NULL ? peer : "?");
	if (peer == NULL || (k = addr_bytes(peer, strlen(peer), a)) == 0)
		return 0;
	(void)addr_text(a, k, out, size);
	if (xff == NULL || trusted == NULL || !is_trusted(a, k, trusted))
		return 0;
	/* From the right: each proxy appended the address it was reached
	 * from, so the first that is not a trusted proxy is the client, and
	 * what lies to its left (the client's own) is never read. */
	end = xff + strlen(xff);
	for (int hops = 0; hops < WEBGATE_XFF_MAX; hops++) {
		while (end > xff && strchr(", \t", end[-1]) != NULL)
			end--;
		if (end == xff)
			return 0; /* all trusted: the proxy is the client */
		start = end;
		while (start > xff && strchr(", \t", start[-1]) == NULL)
			start--;
		len = (size_t)(end - start);
		if ((k = addr_bytes(start, len, a)) == 0)
			return 0; /* written by a proxy, and not an address */
		if (!is_trusted(a, k, trusted))
			return addr_text(a, k, out, size) == 0;
		end = start;
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

void
webgate_limit_key(const char *client, char *out, size_t size)
{
	unsigned char a[16];
	size_t k = addr_bytes(client, strlen(client), a);

	snprintf(out, size, "%s", client);
	if (k != 16)
		return;
	memset(a + 8, 0, 8);
	if (addr_text(a, 16, out, size - 3) == 0)
		strcat(out, "/64");
}
