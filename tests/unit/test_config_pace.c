/* SPDX-License-Identifier: Apache-2.0 */
/*
 * [target EXCHANGE[/KEY]] sections and their pace: read into the config's
 * struct pace in full (inih cuts section names short), and each refusal
 * named by file, line and key.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "pace.h"

#include "helpers.h"

CONFIG_FIXTURE(config_pace);

#define B(s) amqp_cstring_bytes(s)

Test(config_pace, sections_are_read)
{
	struct pace_target *t;

	load_ok("[target orders]\n"
	        "pace = 200/s\n"
	        "\n"
	        "[target amq.topic/reports.daily]\n"
	        "pace = 30/m ; a comment\n"
	        "[target /myqueue]\n"
	        "pace = 5/h\n"
	        "[log]\n"
	        "level = warn\n");
	cr_assert_eq(cfg.pace.n, 3);
	cr_assert_eq(cfg.log_level, 2);

	t = pace_find(&cfg.pace, B("orders"), B("anything"));
	cr_assert_eq(t, &cfg.pace.t[0]);
	cr_assert(t->any_key);
	cr_assert_float_eq(t->per_s, 200.0, 1e-9);
	cr_assert_eq(cfg.pace_line[0], 1);

	t = pace_find(&cfg.pace, B("amq.topic"), B("reports.daily"));
	cr_assert_eq(t, &cfg.pace.t[1]);
	cr_assert_float_eq(t->per_s, 0.5, 1e-9);
	cr_assert_eq(cfg.pace_line[1], 4);
	cr_assert_null(pace_find(&cfg.pace, B("amq.topic"), B("reports")));

	t = pace_find(&cfg.pace, B(""), B("myqueue"));
	cr_assert_eq(t, &cfg.pace.t[2]);
	cr_assert_float_eq(t->per_s, 5.0 / 3600.0, 1e-12);
	cr_assert_eq(cfg.pace_line[2], 6);
}

Test(config_pace, none_by_default)
{
	load_ok("[router]\nprefetch = 10\n");
	cr_assert_eq(cfg.pace.n, 0);
	cr_assert_null(pace_find(&cfg.pace, B("orders"), B("")));
}

Test(config_pace, a_long_name_is_kept_in_full)
{
	/* Past inih's 49 bytes of section name. */
	const char *name = "amq.topic/reports.daily.for.every.region.and.every."
	                   "customer.of.ours";
	char text[256], head[256];

	snprintf(text, sizeof(text), "[target %s]\npace = 1/s\n", name);
	load_ok(text);
	cr_assert_eq(cfg.pace.n, 1);
	cr_assert_eq(cfg.pace.t[0].routing_key_len, strlen(name) - 10);
	cr_assert_not_null(
	    pace_find(&cfg.pace, B("amq.topic"), B(strchr(name, '/') + 1)));
	snprintf(text, sizeof(text), "[target %s]\npace = fast\n", name);
	load_bad(text);
	snprintf(head, sizeof(head), "test.ini:2: target %s.pace: ", name);
	expect_error(head, "expected a rate");
}

Test(config_pace, the_config_may_be_copied)
{
	static struct config copy;
	struct pace_target *t;

	load_ok("[target orders]\npace = 10/s\n");
	copy = cfg;
	memset(&cfg, 0, sizeof(cfg));
	t = pace_find(&copy.pace, B("orders"), B("x"));
	cr_assert_eq(t, &copy.pace.t[0]);
	cr_assert_eq(pace_slot(t, 1000, 1), 1000);
	cr_assert_eq(pace_slot(t, 1000, 1), 1100);
}

Test(config_pace, a_bad_rate)
{
	load_bad("[router]\nprefetch = 10\n\n[target orders]\npace = fast\n");
	expect_error("test.ini:5: target orders.pace: ",
	             "expected a rate such as 200/s");
	load_bad("[target orders]\npace = 0/s\n");
	expect_error("test.ini:2: target orders.pace: ", "more than 0");
	load_bad("[target orders]\npace = 100001/s\n");
	expect_error("test.ini:2: target orders.pace: ", "faster than");
	load_bad("[target orders]\npace = 0.5/h\n");
	expect_error("test.ini:2: target orders.pace: ", "slower than 1/h");
	load_bad("[target orders]\npace =\n");
	expect_error("test.ini:2: target orders.pace: ", "expected");
	/* Reported once: not also as a section without a pace. */
	cr_assert_null(strstr(err, "no pace"), "%s", err);
}

Test(config_pace, an_unknown_key)
{
	load_bad("[target orders]\npace = 1/s\nburst = 10\n");
	expect_error("test.ini:3: target orders.burst: ", "unknown key (pace)");
}

Test(config_pace, pace_is_required)
{
	load_bad("[target orders]\n[log]\nlevel = info\n");
	expect_error("test.ini:1: target orders: ", "no pace");
	load_bad("[target orders]\npace = 1/s\n[target billing]\n");
	expect_error("test.ini:3: target billing: ", "no pace");
	load_bad("[target orders]\nrate = 1/s\n");
	expect_error("test.ini:2: target orders.rate: ", "unknown key");
	expect_error("test.ini:1: target orders: ", "no pace");
}

Test(config_pace, pace_given_twice)
{
	load_bad("[target orders]\npace = 1/s\npace = 2/s\n");
	expect_error("test.ini:3: target orders.pace: ",
	             "given twice (first on line 2");
}

Test(config_pace, a_target_given_twice)
{
	load_bad("[target orders]\npace = 1/s\n[target orders/new]\n"
	         "pace = 1/s\n[target orders]\npace = 2/s\n");
	expect_error("test.ini:5: target orders: ",
	             "given twice (first on line 1)");
	load_bad("[target /q]\npace = 1/s\n[target /q]\npace = 1/s\n");
	expect_error("test.ini:3: target /q: ",
	             "given twice (first on line 1)");
	/* Another key, or every key of the exchange: another target. */
	load_ok("[target orders]\npace = 1/s\n[target orders/]\npace = 1/s\n"
	        "[target orders/a]\npace = 1/s\n[target orders/b]\n"
	        "pace = 1/s\n");
	cr_assert_eq(cfg.pace.n, 4);
}

Test(config_pace, too_many_sections)
{
	static char text[8192];
	size_t len = 0;

	for (int i = 0; i <= PACE_TARGETS_MAX; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len,
		                        "[target ex%d]\npace = 1/s\n", i);
	load_bad(text);
	/* The 65th, on line 129. */
	expect_error("test.ini:129: target ex64: ", "more than 64");
	cr_assert_eq(cfg.pace.n, PACE_TARGETS_MAX);
}

Test(config_pace, no_name)
{
	load_bad("[target ]\npace = 1/s\n");
	expect_error("test.ini:1: target: ", "no exchange or routing key");
	load_bad("[log]\nlevel = info\n[target]\npace = 1/s\n");
	expect_error("test.ini:3: target: ", "no exchange or routing key");
	cr_assert_null(strstr(err, "no pace"), "%s", err);
	load_bad("[target]\n");
	expect_error("test.ini:1: target: ", "no exchange or routing key");
	load_bad("[targetorders]\npace = 1/s\n");
	expect_error("test.ini:1: ", "unknown section [targetorders]");
}

Test(config_pace, blanks_around_the_name)
{
	load_bad("[target  orders]\npace = 1/s\n");
	expect_error("test.ini:1: target  orders: ", "a blank at the start");
	load_bad("[target orders ]\npace = 1/s\n");
	expect_error("test.ini:1: target orders : ", "a blank at the start");
}

Test(config_pace, a_name_too_long)
{
	static char text[1024];
	char name[300];

	/* Longer than an exchange name may be; inih's line limit (198
	 * characters in Debian's build) may come first. */
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	snprintf(text, sizeof(text),
	         "[log]\nlevel = info\n[target %s]\n"
	         "pace = 1/s\n",
	         name);
	load_bad(text);
	expect_error("test.ini:3: ", "longer than");
	cr_assert_eq(cfg.pace.n, 0);
}
