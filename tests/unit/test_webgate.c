/* SPDX-License-Identifier: Apache-2.0 */
/* webgate: one row per rule, every refusal and what must pass. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "webgate.h"

#define ME "http://127.0.0.1:8080"
#define HOST "127.0.0.1:8080"

static const char *const hosts[] = {HOST, "localhost:8080", "[::1]:8080",
                                    "ops.example"};
static const struct webgate_config cfg = {ME, hosts, 4};

struct row {
	const char *name;
	struct webgate_request r;
	enum webgate_verdict want;
	int status;
};

/* method, host, origin, referer, class[, auth[, csrf_ok]]: the last two
 * 0 (no auth, no token) when left out. */
#define R(...) R_(__VA_ARGS__, 0, 0, 0)
#define R_(m, h, o, ref, cls, auth, csrf, ...)                                 \
	((struct webgate_request){m, h, o, ref, cls, auth, csrf})
#define COOKIE WEBGATE_AUTH_COOKIE
#define BEARER WEBGATE_AUTH_BEARER
#define NONE WEBGATE_AUTH_NONE

static const struct row rows[] = {
    /* What passes. */
    {"page GET with cookie", R("GET", HOST, NULL, NULL, WEBGATE_READ, COOKIE),
     WEBGATE_PASS, 200},
    {"HEAD is a read", R("HEAD", HOST, NULL, NULL, WEBGATE_READ, NONE),
     WEBGATE_PASS, 200},
    {"GET ignores a foreign Origin",
     R("GET", HOST, "http://evil.example", NULL, WEBGATE_READ, COOKIE),
     WEBGATE_PASS, 200},
    {"POST with token and Origin",
     R("POST", HOST, ME, NULL, WEBGATE_ACTION, COOKIE, 1), WEBGATE_PASS, 200},
    {"POST with token and Referer",
     R("POST", HOST, NULL, ME "/waiting?q=a", WEBGATE_ACTION, COOKIE, 1),
     WEBGATE_PASS, 200},
    {"Referer of the bare origin",
     R("POST", HOST, NULL, ME, WEBGATE_ACTION, COOKIE, 1), WEBGATE_PASS, 200},
    {"Bearer POST needs neither",
     R("POST", HOST, NULL, NULL, WEBGATE_ACTION, BEARER, 0), WEBGATE_PASS, 200},
    {"login form with double-submit",
     R("POST", HOST, ME, NULL, WEBGATE_FORM, NONE, 1), WEBGATE_PASS, 200},
    {"login form shown", R("GET", HOST, NULL, NULL, WEBGATE_FORM, NONE),
     WEBGATE_PASS, 200},
    {"localhost Host", R("GET", "localhost:8080", NULL, NULL, WEBGATE_READ),
     WEBGATE_PASS, 200},
    {"Host case", R("GET", "LocalHost:8080", NULL, NULL, WEBGATE_READ),
     WEBGATE_PASS, 200},
    {"IPv6 Host", R("GET", "[::1]:8080", NULL, NULL, WEBGATE_READ),
     WEBGATE_PASS, 200},
    {"public_url Host", R("GET", "ops.example", NULL, NULL, WEBGATE_READ),
     WEBGATE_PASS, 200},

    /* Host: DNS rebinding. */
    {"no Host", R("GET", NULL, NULL, NULL, WEBGATE_READ), WEBGATE_BAD_HOST,
     421},
    {"empty Host", R("GET", "", NULL, NULL, WEBGATE_READ), WEBGATE_BAD_HOST,
     421},
    {"rebound name", R("GET", "evil.example:8080", NULL, NULL, WEBGATE_READ),
     WEBGATE_BAD_HOST, 421},
    {"other port", R("GET", "127.0.0.1:9090", NULL, NULL, WEBGATE_READ),
     WEBGATE_BAD_HOST, 421},
    {"no port", R("GET", "127.0.0.1", NULL, NULL, WEBGATE_READ),
     WEBGATE_BAD_HOST, 421},
    {"Host before all else",
     R("DELETE", "evil.example", NULL, NULL, WEBGATE_ACTION, WEBGATE_AUTH_BOTH),
     WEBGATE_BAD_HOST, 421},

    /* Method for the path's class. */
    {"POST to a page", R("POST", HOST, ME, NULL, WEBGATE_READ, COOKIE, 1),
     WEBGATE_BAD_METHOD, 405},
    {"GET to an action", R("GET", HOST, NULL, NULL, WEBGATE_ACTION, COOKIE),
     WEBGATE_BAD_METHOD, 405},
    {"PUT to the form", R("PUT", HOST, ME, NULL, WEBGATE_FORM, NONE, 1),
     WEBGATE_BAD_METHOD, 405},
    {"lowercase post", R("post", HOST, ME, NULL, WEBGATE_ACTION, COOKIE, 1),
     WEBGATE_BAD_METHOD, 405},
    {"no method", R(NULL, HOST, ME, NULL, WEBGATE_ACTION, COOKIE, 1),
     WEBGATE_BAD_METHOD, 405},

    /* Cookie and Bearer together. */
    {"both auths on GET",
     R("GET", HOST, NULL, NULL, WEBGATE_READ, WEBGATE_AUTH_BOTH),
     WEBGATE_BOTH_AUTH, 400},
    {"both auths on POST",
     R("POST", HOST, ME, NULL, WEBGATE_ACTION, WEBGATE_AUTH_BOTH, 1),
     WEBGATE_BOTH_AUTH, 400},

    /* CSRF token. */
    {"POST without token", R("POST", HOST, ME, NULL, WEBGATE_ACTION, COOKIE, 0),
     WEBGATE_NO_CSRF, 403},
    {"login without double-submit",
     R("POST", HOST, ME, NULL, WEBGATE_FORM, NONE, 0), WEBGATE_NO_CSRF, 403},
    {"cookieless POST to an action",
     R("POST", HOST, ME, NULL, WEBGATE_ACTION, NONE, 0), WEBGATE_NO_CSRF, 403},

    /* Origin and Referer. */
    {"foreign Origin",
     R("POST", HOST, "http://evil.example", NULL, WEBGATE_ACTION, COOKIE, 1),
     WEBGATE_BAD_ORIGIN, 403},
    {"Origin null", R("POST", HOST, "null", NULL, WEBGATE_ACTION, COOKIE, 1),
     WEBGATE_BAD_ORIGIN, 403},
    {"Origin other scheme",
     R("POST", HOST, "https://127.0.0.1:8080", NULL, WEBGATE_ACTION, COOKIE, 1),
     WEBGATE_BAD_ORIGIN, 403},
    {"Origin with a path",
     R("POST", HOST, ME "/", NULL, WEBGATE_ACTION, COOKIE, 1),
     WEBGATE_BAD_ORIGIN, 403},
    {"Origin wins over a good Referer",
     R("POST", HOST, "http://evil.example", ME "/waiting", WEBGATE_ACTION,
       COOKIE, 1),
     WEBGATE_BAD_ORIGIN, 403},
    {"neither Origin nor Referer",
     R("POST", HOST, NULL, NULL, WEBGATE_ACTION, COOKIE, 1), WEBGATE_BAD_ORIGIN,
     403},
    {"foreign Referer",
     R("POST", HOST, NULL, "http://evil.example/x", WEBGATE_ACTION, COOKIE, 1),
     WEBGATE_BAD_ORIGIN, 403},
    {"Referer on a longer host",
     R("POST", HOST, NULL, ME ".evil.example/", WEBGATE_ACTION, COOKIE, 1),
     WEBGATE_BAD_ORIGIN, 403},
    {"Referer on a longer port",
     R("POST", HOST, NULL, ME "0/waiting", WEBGATE_ACTION, COOKIE, 1),
     WEBGATE_BAD_ORIGIN, 403},
    {"Referer with our origin later",
     R("POST", HOST, NULL, "http://evil.example/" ME, WEBGATE_ACTION, COOKIE,
       1),
     WEBGATE_BAD_ORIGIN, 403},
    {"login from another site",
     R("POST", HOST, "http://evil.example", NULL, WEBGATE_FORM, NONE, 1),
     WEBGATE_BAD_ORIGIN, 403},
};

Test(webgate, table)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *w = &rows[i];
		const char *why = "unset";
		enum webgate_verdict v = webgate_judge(&w->r, &cfg, &why);

		cr_expect_eq(v, w->want, "%s: got %s, want %s", w->name,
		             webgate_code(v), webgate_code(w->want));
		cr_expect_eq(webgate_status(v), w->status, "%s: status %d",
		             w->name, webgate_status(v));
		if (w->want == WEBGATE_PASS)
			cr_expect_null(why, "%s", w->name);
		else
			cr_expect(why != NULL && why[0] != '\0',
			          "%s: no reason", w->name);
	}
}

Test(webgate, reasons_name_the_header)
{
	const char *why;
	struct webgate_request r = R("POST", HOST, NULL, "http://evil.example/",
	                             WEBGATE_ACTION, COOKIE, 1);

	webgate_judge(&r, &cfg, &why);
	cr_assert_str_eq(why, "Referer is not this console's");
	r.referer = NULL;
	webgate_judge(&r, &cfg, &why);
	cr_assert_str_eq(why, "neither Origin nor Referer");
	r.host = NULL;
	webgate_judge(&r, &cfg, &why);
	cr_assert_str_eq(why, "no Host header");
}

Test(webgate, allow)
{
	cr_assert_str_eq(webgate_allow(WEBGATE_READ), "GET, HEAD");
	cr_assert_str_eq(webgate_allow(WEBGATE_ACTION), "POST");
	cr_assert_str_eq(webgate_allow(WEBGATE_FORM), "GET, HEAD, POST");
}

Test(webgate, codes_are_distinct)
{
	enum webgate_verdict all[] = {WEBGATE_PASS,       WEBGATE_BAD_HOST,
	                              WEBGATE_BAD_METHOD, WEBGATE_BOTH_AUTH,
	                              WEBGATE_NO_CSRF,    WEBGATE_BAD_ORIGIN};
	size_t n = sizeof(all) / sizeof(all[0]);

	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			cr_assert_str_neq(webgate_code(all[i]),
			                  webgate_code(all[j]));
}

/* The client the login limits count (webgate_client). */
struct client_case {
	const char *peer, *xff, *trusted, *want;
	int from_xff;
};

Test(webgate, the_client_is_the_peer_unless_a_trusted_proxy_names_one)
{
	static const struct client_case cases[] = {
	    /* No trusted proxies: the peer, whatever the header says. */
	    {"127.0.0.1", "198.51.100.7", "", "127.0.0.1", 0},
	    /* A peer that is not trusted: its header is not read. */
	    {"192.0.2.9", "198.51.100.7", "127.0.0.1", "192.0.2.9", 0},
	    /* A trusted proxy: the address it appended. */
	    {"127.0.0.1", "198.51.100.7", "127.0.0.1", "198.51.100.7", 1},
	    /* The client's own entries to the left are not believed. */
	    {"127.0.0.1", "6.6.6.6, 198.51.100.7", "127.0.0.1", "198.51.100.7",
	     1},
	    /* Two proxies: the rightmost address that is not one of them. */
	    {"10.0.0.2", "6.6.6.6,198.51.100.7, 10.0.0.1", "10.0.0.1 10.0.0.2",
	     "198.51.100.7", 1},
	    /* Compared and written as addresses. */
	    {"::1", "2001:DB8:0:0::7", "0:0:0:0:0:0:0:1", "2001:db8::7", 1},
	    /* No header, an empty one, all trusted: the proxy is the client. */
	    {"127.0.0.1", NULL, "127.0.0.1", "127.0.0.1", 0},
	    {"127.0.0.1", "", "127.0.0.1", "127.0.0.1", 0},
	    {"127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.1", 0},
	    /* An entry read that is not an address (a port, a name,
	     * unknown): the proxy is the client.  To the left of the client,
	     * what the client wrote is never read. */
	    {"127.0.0.1", "198.51.100.7:443", "127.0.0.1", "127.0.0.1", 0},
	    {"127.0.0.1", "198.51.100.7, unknown", "127.0.0.1", "127.0.0.1", 0},
	    {"127.0.0.1", "evil.example", "127.0.0.1", "127.0.0.1", 0},
	    {"127.0.0.1", "unknown, 198.51.100.7", "127.0.0.1", "198.51.100.7",
	     1},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct client_case *k = &cases[i];
		char out[WEBGATE_ADDR_SIZE];
		int got = webgate_client(k->peer, k->xff, k->trusted, out,
		                         sizeof(out));
		cr_assert_str_eq(out, k->want, "case %zu", i);
		cr_assert_eq(got, k->from_xff, "case %zu", i);
	}
}

/* What the client wrote to the left is never read, however long; the
 * walk stops after WEBGATE_XFF_MAX trusted hops. */
Test(webgate, an_xff_is_read_from_the_right_and_left_padding_is_not_read)
{
	char xff[4096] = "", trusted[WEBGATE_XFF_MAX * 16 + 16] = "";
	char out[WEBGATE_ADDR_SIZE];

	for (int i = 0; i < 200; i++)
		strcat(xff, "junk, ");
	strcat(xff, "198.51.100.7");
	cr_assert_eq(
	    webgate_client("127.0.0.1", xff, "127.0.0.1", out, sizeof(out)), 1);
	cr_assert_str_eq(out, "198.51.100.7");
	/* 33 trusted proxies in a row: the walk gives up, the peer. */
	strcpy(xff, "198.51.100.7");
	for (int i = 0; i <= WEBGATE_XFF_MAX; i++) {
		char one[16];
		snprintf(one, sizeof(one), "10.0.%d.1", i);
		strcat(xff, ", ");
		strcat(xff, one);
		strcat(trusted, one);
		strcat(trusted, " ");
	}
	strcat(trusted, "127.0.0.1");
	cr_assert_eq(
	    webgate_client("127.0.0.1", xff, trusted, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "127.0.0.1");
}

Test(webgate, ipv4_mapped_peers_match_and_ipv6_clients_count_by_their_64)
{
	char out[WEBGATE_ADDR_SIZE], key[WEBGATE_ADDR_SIZE];

	cr_assert_eq(webgate_client("::ffff:10.0.0.5", "198.51.100.7",
	                            "10.0.0.5", out, sizeof(out)),
	             1);
	cr_assert_str_eq(out, "198.51.100.7");
	cr_assert_eq(
	    webgate_client("::ffff:192.0.2.1", NULL, "", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "192.0.2.1");
	webgate_limit_key("2001:db8:1:2:aaaa:bbbb:cccc:dddd", key, sizeof(key));
	cr_assert_str_eq(key, "2001:db8:1:2::/64");
	webgate_limit_key("198.51.100.7", key, sizeof(key));
	cr_assert_str_eq(key, "198.51.100.7");
}

Test(webgate, trusted_proxies_must_be_addresses)
{
	char bad[64];

	cr_assert(webgate_addresses_ok("", bad, sizeof(bad)));
	cr_assert(
	    webgate_addresses_ok("127.0.0.1, ::1 10.0.0.1", bad, sizeof(bad)));
	cr_assert_not(
	    webgate_addresses_ok("127.0.0.1, proxy.local", bad, sizeof(bad)));
	cr_assert_str_eq(bad, "proxy.local");
	cr_assert_not(webgate_addresses_ok("10.0.0.0/8", bad, sizeof(bad)));
	cr_assert_str_eq(bad, "10.0.0.0/8");
}
