/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one check every console request passes before any handler runs
 * (docs/console-design.md, section 3): the Host against DNS rebinding,
 * the method for the kind of path, and for a state-changing request the
 * CSRF token and the Origin (or Referer).  One pure function, so every
 * refusal is a row in a table test rather than a branch spread over the
 * handlers.  The caller does what needs the session store or the body
 * (is the CSRF token right) and passes the answer in.
 */
#ifndef CASCADE_WEBGATE_H
#define CASCADE_WEBGATE_H

#include <stddef.h>

/* What a path allows; the caller's routing table names it. */
enum webgate_class {
	WEBGATE_READ,   /* GET, HEAD: pages, JSON, assets, /changes */
	WEBGATE_ACTION, /* POST only: cancel, logout, requeue... */
	WEBGATE_FORM,   /* GET shows it, POST sends it: /login */
};

/* How the request says who it is. */
enum webgate_auth {
	WEBGATE_AUTH_NONE,   /* neither (a login, the assets) */
	WEBGATE_AUTH_COOKIE, /* the session cookie: a browser */
	WEBGATE_AUTH_BEARER, /* Authorization: Bearer: a script */
	WEBGATE_AUTH_BOTH,   /* both: refused, one must not vouch for the
	                        other */
};

enum webgate_verdict {
	WEBGATE_PASS = 0,
	WEBGATE_BAD_HOST,   /* 421: no Host, or one not ours */
	WEBGATE_BAD_METHOD, /* 405, with webgate_allow's Allow */
	WEBGATE_BOTH_AUTH,  /* 400 */
	WEBGATE_NO_CSRF,    /* 403: POST without the right CSRF token */
	WEBGATE_BAD_ORIGIN, /* 403: POST from another origin, or unsaid */
};

struct webgate_request {
	const char *method;
	const char *host; /* each NULL when the header is absent */
	const char *origin;
	const char *referer;
	enum webgate_class class;
	enum webgate_auth auth;
	/* The caller's comparison: the session's token (websession_csrf_ok)
	 * in the csrf field or X-CSRF-Token, or for a login the pre-session
	 * cookie equal to the field. */
	int csrf_ok;
};

struct webgate_config {
	/* The console's own origin, "http://127.0.0.1:8080" (scheme, host
	 * and port as the browser writes them, no path, no slash). */
	const char *origin;
	/* The Host values we answer to: the listen address, 127.0.0.1:PORT,
	 * localhost:PORT, [::1]:PORT and public_url's host. */
	const char *const *hosts;
	size_t nhosts;
};

/*
 * The verdict on r.  Checks in this order: Host, method, cookie and Bearer
 * together, then for a POST not made with Bearer (browsers never add
 * Authorization on their own) the CSRF token and the Origin, or without
 * an Origin a Referer under it.  *why is a static sentence for the JSON
 * refusal's message (NULL on WEBGATE_PASS).
 */
enum webgate_verdict webgate_judge(const struct webgate_request *r,
                                   const struct webgate_config *c,
                                   const char **why);

/* The HTTP status of a verdict: 200 for WEBGATE_PASS. */
int webgate_status(enum webgate_verdict v);

/* The refusal's code word for JSON ("bad_host", ...); "ok" for PASS. */
const char *webgate_code(enum webgate_verdict v);

/* The Allow header's value for a class: "GET, HEAD", "POST", ... */
const char *webgate_allow(enum webgate_class class);

/*
 * The client a login limit counts (ratelimit.h), into out (at least
 * WEBGATE_ADDR_SIZE bytes): the peer's address, unless the peer is one of
 * trusted (IP addresses, comma or blank apart: [console] trusted_proxies)
 * and xff (X-Forwarded-For, NULL when absent) names one.  Then it is the
 * rightmost address of xff that is not itself a trusted proxy: each proxy
 * appends the address it was reached from, so the entries to the left of
 * the first untrusted one may be anything the client wrote, and are never
 * read.  Addresses are compared as addresses (inet_pton; ::ffff:a.b.c.d
 * is a.b.c.d) and written as inet_ntop writes them.  An entry read on the
 * way that is not an address, over WEBGATE_XFF_MAX trusted hops, or an
 * xff all trusted counts as none: the proxy is then the client.
 * Returns 1 when the client came from xff, else 0.
 */
#define WEBGATE_ADDR_SIZE 64
#define WEBGATE_XFF_MAX 32
int webgate_client(const char *peer, const char *xff, const char *trusted,
                   char *out, size_t size);

/*
 * The key a client's login limits count under (at least
 * WEBGATE_ADDR_SIZE bytes): an IPv4 address as it is, an IPv6 address
 * by its /64 (one host's, as providers hand them out: a client must not
 * get a fresh limit from each of its 2^64 addresses), as "PREFIX::/64".
 */
void webgate_limit_key(const char *client, char *out, size_t size);

/* Whether every entry of list (comma or blank apart) is an IPv4 or IPv6
 * address; when one is not, it is written into bad (size bytes). */
int webgate_addresses_ok(const char *list, char *bad, size_t size);

#endif
