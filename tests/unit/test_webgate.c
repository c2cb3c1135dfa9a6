/* SPDX-License-Identifier: Apache-2.0 */
/* webgate: one row per rule, every refusal and what must pass. */
#include <criterion/criterion.h>
#include <stddef.h>
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
