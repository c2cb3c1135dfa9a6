/* SPDX-License-Identifier: Apache-2.0 */
/* mgmt: the management URL, and the app env /api/config/effective shows. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "mgmt.h"

static struct mgmt m;

static void
parse_ok(const char *url)
{
	const char *why = NULL;

	memset(&m, 0, sizeof(m));
	cr_assert_eq(mgmt_parse(url, &m, &why), 0, "%s: %s", url,
	             why ? why : "");
}

static void
parse_bad(const char *url, const char *about)
{
	const char *why = NULL;

	memset(&m, 0, sizeof(m));
	cr_assert_eq(mgmt_parse(url, &m, &why), -1, "%s taken", url);
	cr_assert(strstr(why, about) != NULL, "%s: %s", url, why);
}

Test(mgmt, host_port_prefix)
{
	parse_ok("http://rabbit");
	cr_assert_str_eq(m.host, "rabbit");
	cr_assert_str_eq(m.port, "15672");
	cr_assert_str_eq(m.path, "/api/config/effective");
	cr_assert_str_eq(m.shown, "http://rabbit:15672");
	parse_ok("http://127.0.0.1:8080/mgmt/");
	cr_assert_str_eq(m.port, "8080");
	cr_assert_str_eq(m.path, "/mgmt/api/config/effective");
	cr_assert_str_eq(m.shown, "http://127.0.0.1:8080/mgmt");
	parse_ok("http://[::1]:9");
	cr_assert_str_eq(m.host, "::1");
	cr_assert_str_eq(m.shown, "http://[::1]:9");
}

Test(mgmt, credentials)
{
	parse_ok("http://ad%40min:p%2Fa@ss@h");
	cr_assert_str_eq(m.user, "ad@min");
	cr_assert_str_eq(m.pass, "p/a@ss");
	cr_assert_str_eq(m.host, "h");
	cr_assert(strstr(m.shown, "ss") == NULL);
	parse_ok("http://bob@h");
	cr_assert_str_eq(m.user, "bob");
	cr_assert_str_eq(m.pass, "");
}

Test(mgmt, refused)
{
	parse_bad("https://h", "https is not supported");
	parse_bad("ftp://x", "not an http:// URL");
	parse_bad("http://h x", "not an http:// URL");
	parse_bad("http://:15672", "no host");
	parse_bad("http://h:port", "bad port");
	parse_bad("http://h:", "bad port");
	parse_bad("http://[::1", "no ]");
	parse_bad("http://h/?q", "query or fragment");
	parse_bad("http://u%zz@h", "percent-encoding");
}

#define ENV                                                                    \
	"[{kernel,[{x,\"{rabbit,\"}]},{rabbit,[{tcp_listeners,[{\"::\","       \
	"5672}]},%s{log,[]}]},{'rabbit_common',[]}]"

Test(mgmt, dlx_timeout)
{
	char env[512];
	int64_t ms = 0;

	snprintf(env, sizeof(env), ENV,
	         "{dead_letter_worker_publisher_confirm_timeout, 10000 },");
	cr_assert_eq(mgmt_dlx_timeout(env, &ms), 1);
	cr_assert_eq(ms, 10000);
	snprintf(env, sizeof(env), ENV, "");
	cr_assert_eq(mgmt_dlx_timeout(env, &ms), 0);
	snprintf(env, sizeof(env), ENV,
	         "{dead_letter_worker_publisher_confirm_timeout,infinity},");
	cr_assert_eq(mgmt_dlx_timeout(env, &ms), -1);
	cr_assert_eq(mgmt_dlx_timeout("<html>login</html>", &ms), -1);
	/* rabbit's list alone */
	cr_assert_eq(mgmt_dlx_timeout("[{dead_letter_worker_publisher_"
	                              "confirm_timeout,2000}]",
	                              &ms),
	             1);
	cr_assert_eq(ms, 2000);
}

Test(mgmt, key_in_another_app_is_not_rabbits)
{
	int64_t ms = 0;

	cr_assert_eq(mgmt_dlx_timeout("[{other,[{dead_letter_worker_publisher_"
	                              "confirm_timeout,5}]},{rabbit,[]}]",
	                              &ms),
	             0);
}

Test(mgmt, listens_on)
{
	char env[512];

	snprintf(env, sizeof(env), ENV, "");
	cr_assert_eq(mgmt_listens_on(env, 5672), 1);
	cr_assert_eq(mgmt_listens_on(env, 5673), 0);
	cr_assert_eq(
	    mgmt_listens_on("[{rabbit,[{tcp_listeners,[5672]}]}]", 5672), 1);
	cr_assert_eq(mgmt_listens_on("[{rabbit,[]}]", 1), 1);
}

Test(mgmt, reason)
{
	char out[64];

	mgmt_reason("{\"error\":\"not_authorised\",\"reason\":\"Not "
	            "administrator user\"}",
	            out, sizeof(out));
	cr_assert_str_eq(out, "Not administrator user");
	mgmt_reason("nothing", out, sizeof(out));
	cr_assert_str_eq(out, "");
}
