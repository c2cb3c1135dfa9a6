/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The console's request gate: header checks only, in the order that
 * gives the most telling refusal first (a rebinding attempt is a wrong
 * Host before it is anything else).
 */
#include "webgate.h"

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
