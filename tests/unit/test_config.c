/* SPDX-License-Identifier: Apache-2.0 */
/* The INI file: defaults, values, and errors that name file, line and key. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

#include "helpers.h"

CONFIG_FIXTURE(config);

static int
count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		if (*s == '\n')
			n++;
	return n;
}

static void
check_defaults(const struct config *c)
{
	cr_assert_str_eq(c->broker_url,
	                 "amqp://guest:guest@127.0.0.1:5672/%2f");
	cr_assert_eq(c->broker_heartbeat, 30000);
	cr_assert_str_eq(c->topology_prefix, "cascade");
	cr_assert_eq(c->topology_queue_type, QUEUE_TYPE_QUORUM);
	cr_assert_eq(c->topology_resolution, 2000);
	cr_assert_eq(c->topology_factor, 2);
	cr_assert_eq(c->topology_levels, 0);
	cr_assert_eq(config_levels(c), 24); /* 2 s * 2^23: 194 days */
	cr_assert_eq(c->topology_max_length, 1000000);
	cr_assert_eq(c->router_prefetch, 1000);
	cr_assert_eq(c->router_max_delay, 365 * DAY);
	cr_assert_str_eq(c->router_default_target_exchange, "");
}

Test(config, defaults_match_the_contract)
{
	config_defaults(&cfg);
	check_defaults(&cfg);
}

Test(config, empty_file_gives_defaults)
{
	load_ok("");
	check_defaults(&cfg);
	load_ok("; nothing but a comment\n# and another\n\n");
	check_defaults(&cfg);
}

Test(config, sections_without_keys_give_defaults)
{
	load_ok("[broker]\n[topology]\n[router]\n");
	check_defaults(&cfg);
}

Test(config, full_file)
{
	load_ok("[broker]\n"
	        "url = amqps://user:pw@rabbit.example:5671/prod\n"
	        "heartbeat = 60s\n"
	        "\n"
	        "[topology]\n"
	        "prefix = delays\n"
	        "queue_type = classic\n"
	        "resolution = 500ms\n"
	        "factor = 3\n"
	        "levels = 10\n"
	        "max_length = 5000\n"
	        "\n"
	        "[router]\n"
	        "prefetch = 250\n"
	        "max_delay = 30d\n"
	        "default_target_exchange = shop\n");
	cr_assert_str_eq(cfg.broker_url,
	                 "amqps://user:pw@rabbit.example:5671/prod");
	cr_assert_eq(cfg.broker_heartbeat, 60000);
	cr_assert_str_eq(cfg.topology_prefix, "delays");
	cr_assert_eq(cfg.topology_queue_type, QUEUE_TYPE_CLASSIC);
	cr_assert_eq(cfg.topology_resolution, 500);
	cr_assert_eq(cfg.topology_factor, 3);
	cr_assert_eq(cfg.topology_levels, 10);
	cr_assert_eq(cfg.topology_max_length, 5000);
	cr_assert_eq(cfg.router_prefetch, 250);
	cr_assert_eq(cfg.router_max_delay, 30 * DAY);
	cr_assert_str_eq(cfg.router_default_target_exchange, "shop");
}

Test(config, records_the_line_of_each_key)
{
	load_ok("[topology]\n"
	        "\n"
	        "factor = 3\n"
	        "[router]\n"
	        "prefetch = 5\n");
	cr_assert_eq(cfg.topology_factor_line, 3);
	cr_assert_eq(cfg.router_prefetch_line, 5);
	cr_assert_eq(cfg.topology_levels_line, 0, "levels was not given");
	cr_assert_str_eq(cfg.path, "test.ini");
}

Test(config, inline_comments)
{
	load_ok("[topology]\n"
	        "queue_type = classic        ; quorum | classic\n"
	        "resolution = 2s ; the shortest\n"
	        "factor = 4\t; N\n"
	        "[router]\n"
	        "default_target_exchange = ; empty: the default exchange\n");
	cr_assert_eq(cfg.topology_queue_type, QUEUE_TYPE_CLASSIC);
	cr_assert_eq(cfg.topology_resolution, 2000);
	cr_assert_eq(cfg.topology_factor, 4);
	cr_assert_str_eq(cfg.router_default_target_exchange, "");
}

Test(config, empty_default_target_exchange)
{
	load_ok("[router]\ndefault_target_exchange =\n");
	cr_assert_str_eq(cfg.router_default_target_exchange, "");
	load_ok("[router]\ndefault_target_exchange = \n");
	cr_assert_str_eq(cfg.router_default_target_exchange, "");
}

Test(config, crlf_line_endings)
{
	load_ok("[topology]\r\nfactor = 8\r\nlevels = 6\r\n");
	cr_assert_eq(cfg.topology_factor, 8);
	cr_assert_eq(cfg.topology_levels, 6);
}

Test(config, last_line_without_newline)
{
	load_ok("[topology]\nfactor = 5");
	cr_assert_eq(cfg.topology_factor, 5);
}

Test(config, shipped_file_loads)
{
	int rc = config_load(&cfg, "conf/cascade.ini", err, sizeof(err));

	cr_assert_eq(rc, 0, "conf/cascade.ini:\n%s", err);
	check_defaults(&cfg);
}

Test(config, unknown_key)
{
	load_bad("[topology]\nfactor = 4\nfactr = 4\n");
	expect_error("test.ini:3: topology.factr: ", "unknown key");
}

Test(config, unknown_sections)
{
	load_bad("[broker]\nurl = amqp://localhost\n\n[statsd]\n"
	         "listen = 127.0.0.1:9464\n");
	expect_error("test.ini:5: statsd.listen: ", "unknown section");
	load_bad("[log]\nlevel = loud\n");
	expect_error("test.ini:2: log.level: ", "must be one of");
	load_bad("[Broker]\nurl = amqp://localhost\n");
	expect_error("test.ini:2: Broker.url: ", NULL);
}

Test(config, key_outside_any_section)
{
	load_bad("factor = 4\n");
	expect_error("test.ini:1: ", "factor");
}

Test(config, duration_without_unit)
{
	load_bad("[topology]\nresolution = 2\n");
	expect_error("test.ini:2: topology.resolution: ", "unit");
	load_bad("[router]\nmax_delay = 86400000\n");
	expect_error("test.ini:2: router.max_delay: ", "unit");
	load_bad("[broker]\n\nheartbeat = 30\n");
	expect_error("test.ini:3: broker.heartbeat: ", "unit");
}

Test(config, bad_durations)
{
	load_bad("[topology]\nresolution = 2x\n");
	expect_error("test.ini:2: topology.resolution: ", NULL);
	load_bad("[topology]\nresolution = 1.5s\n");
	expect_error("test.ini:2: topology.resolution: ", NULL);
	load_bad("[topology]\nresolution = 0s\n");
	expect_error("test.ini:2: topology.resolution: ", "range");
	load_bad("[topology]\nresolution = -2s\n");
	expect_error("test.ini:2: topology.resolution: ", "range");
	load_bad("[router]\nmax_delay = 3651d\n");
	expect_error("test.ini:2: router.max_delay: ", "range");
	load_bad("[router]\nmax_delay = 9999999999999999999d\n");
	expect_error("test.ini:2: router.max_delay: ", NULL);
	load_bad("[router]\nmax_delay =\n");
	expect_error("test.ini:2: router.max_delay: ", NULL);
}

Test(config, duration_limits_accepted)
{
	load_ok("[router]\nmax_delay = 0s\n");
	cr_assert_eq(cfg.router_max_delay, 0);
	load_ok("[router]\nmax_delay = 3650d\n");
	cr_assert_eq(cfg.router_max_delay, 3650 * DAY);
	load_ok("[topology]\nresolution = 1ms\n");
	cr_assert_eq(cfg.topology_resolution, 1);
}

Test(config, numbers_out_of_range)
{
	load_bad("[topology]\nfactor = 1\n");
	expect_error("test.ini:2: topology.factor: ", "range");
	load_bad("[topology]\nfactor = 1001\n");
	expect_error("test.ini:2: topology.factor: ", "range");
	load_bad("[topology]\nlevels = 65\n");
	expect_error("test.ini:2: topology.levels: ", "range");
	load_bad("[router]\nprefetch = 70000\n");
	expect_error("test.ini:2: router.prefetch: ", "range");
	load_bad("[router]\nprefetch = 0\n");
	expect_error("test.ini:2: router.prefetch: ", "range");
	load_bad("[topology]\nmax_length = 0\n");
	expect_error("test.ini:2: topology.max_length: ", "range");
	load_bad("[topology]\nmax_length = 2147483648\n");
	expect_error("test.ini:2: topology.max_length: ", "range");
	load_bad("[topology]\nfactor = 99999999999999999999999\n");
	expect_error("test.ini:2: topology.factor: ", "range");
}

Test(config, number_limits_accepted)
{
	load_ok("[router]\nprefetch = 65535\n[topology]\nmax_length = "
	        "2147483647\nlevels = 1\nfactor = 1000\n");
	cr_assert_eq(cfg.router_prefetch, 65535);
	cr_assert_eq(cfg.topology_max_length, 2147483647);
	cr_assert_eq(cfg.topology_levels, 1);
	cr_assert_eq(cfg.topology_factor, 1000);
}

Test(config, not_a_number)
{
	load_bad("[topology]\nfactor = banana\n");
	expect_error("test.ini:2: topology.factor: ", "banana");
	load_bad("[topology]\nfactor = -4\n");
	expect_error("test.ini:2: topology.factor: ", NULL);
	load_bad("[topology]\nfactor = 4x\n");
	expect_error("test.ini:2: topology.factor: ", NULL);
	load_bad("[topology]\nfactor = 4.0\n");
	expect_error("test.ini:2: topology.factor: ", NULL);
	load_bad("[topology]\nfactor = 0x10\n");
	expect_error("test.ini:2: topology.factor: ", NULL);
	load_bad("[topology]\nfactor =\n");
	expect_error("test.ini:2: topology.factor: ", NULL);
	load_bad("[topology]\nfactor = 4;no space before the comment\n");
	expect_error("test.ini:2: topology.factor: ", NULL);
}

Test(config, bad_queue_type)
{
	load_bad("[topology]\nqueue_type = stream\n");
	expect_error("test.ini:2: topology.queue_type: ", "quorum");
	load_bad("[topology]\nqueue_type = Quorum\n");
	expect_error("test.ini:2: topology.queue_type: ", NULL);
	load_bad("[topology]\nqueue_type =\n");
	expect_error("test.ini:2: topology.queue_type: ", NULL);
}

Test(config, key_given_twice)
{
	load_bad("[topology]\nfactor = 4\nlevels = 3\nfactor = 5\n");
	expect_error("test.ini:4: topology.factor: ", "twice");
	expect_error("test.ini:4: topology.factor: ", "line 2");
	/* Also across two sections of the same name. */
	load_bad("[router]\nprefetch = 5\n[topology]\n[router]\nprefetch = "
	         "6\n");
	expect_error("test.ini:5: router.prefetch: ", "twice");
}

Test(config, indented_line_continues_the_key_above)
{
	/* inih reads an indented line as more of the previous value. */
	load_bad("[topology]\nfactor = 4\n  levels = 3\n");
	expect_error("test.ini:3: topology.factor: ", NULL);
}

Test(config, several_errors_together)
{
	load_bad("[topology]\n"
	         "factor = 1\n"
	         "levels = banana\n"
	         "[router]\n"
	         "prefetch = 70000\n"
	         "colour = blue\n");
	expect_error("test.ini:2: topology.factor: ", NULL);
	expect_error("test.ini:3: topology.levels: ", NULL);
	expect_error("test.ini:5: router.prefetch: ", NULL);
	expect_error("test.ini:6: router.colour: ", NULL);
	cr_assert_eq(count_lines(err), 4, "one line per error:\n%s", err);
}

Test(config, syntax_error)
{
	load_bad("[topology]\nfactor = 4\nthis line has no equals sign\n");
	expect_error("test.ini:3: ", NULL);
	load_bad("[broker]\nheartbeat 30s\n");
	expect_error("test.ini:2: ", NULL);
}

Test(config, overlong_line)
{
	char text[512];

	snprintf(text, sizeof(text), "[topology]\nprefix = %0300d\n", 0);
	load_bad(text);
	expect_error("test.ini:2: ", NULL);
}

Test(config, broker_url_env_override)
{
	setenv("CASCADE_BROKER_URL", "amqp://env:pw@env.example:5673/v", 1);
	load_ok("[broker]\nurl = amqp://file:pw@file.example:5672/%2f\n");
	cr_assert_str_eq(cfg.broker_url, "amqp://env:pw@env.example:5673/v");
	/* Also when the file does not set it, and over a bad file URL. */
	load_ok("");
	cr_assert_str_eq(cfg.broker_url, "amqp://env:pw@env.example:5673/v");
	load_ok("[broker]\nurl = not a url\n");
	cr_assert_str_eq(cfg.broker_url, "amqp://env:pw@env.example:5673/v");
	unsetenv("CASCADE_BROKER_URL");
	unsetenv("CASCADE_BROKER_PASSWORD");
}

Test(config, broker_url_env_empty_is_unset)
{
	setenv("CASCADE_BROKER_URL", "", 1);
	load_ok("[broker]\nurl = amqp://file.example\n");
	cr_assert_str_eq(cfg.broker_url, "amqp://file.example");
	unsetenv("CASCADE_BROKER_URL");
	unsetenv("CASCADE_BROKER_PASSWORD");
}

Test(config, broker_url_env_bad)
{
	setenv("CASCADE_BROKER_URL", "http://example.com/", 1);
	load_bad("");
	cr_assert(strstr(err, "CASCADE_BROKER_URL") != NULL, "%s", err);
	cr_assert(strstr(err, "test.ini") != NULL, "%s", err);
	unsetenv("CASCADE_BROKER_URL");
	unsetenv("CASCADE_BROKER_PASSWORD");
}

Test(config, bad_broker_url)
{
	load_bad("[broker]\nurl = http://example.com/\n");
	expect_error("test.ini:2: broker.url: ", "amqp");
	load_bad("[broker]\nurl = rabbit.example:5672\n");
	expect_error("test.ini:2: broker.url: ", NULL);
	load_bad("[broker]\nurl = amqp://host:port/\n");
	expect_error("test.ini:2: broker.url: ", NULL);
	load_bad("[broker]\nurl =\n");
	expect_error("test.ini:2: broker.url: ", NULL);
}

Test(config, good_broker_urls)
{
	load_ok("[broker]\nurl = amqp://localhost\n");
	load_ok("[broker]\nurl = amqps://u:p@h:5671/vhost\n");
	cr_assert_str_eq(cfg.broker_url, "amqps://u:p@h:5671/vhost");
}

Test(config, bad_prefix)
{
	load_bad("[topology]\nprefix = my delays\n");
	expect_error("test.ini:2: topology.prefix: ", NULL);
	load_bad("[topology]\nprefix =\n");
	expect_error("test.ini:2: topology.prefix: ", NULL);
	load_ok("[topology]\nprefix = team-a.delay_v2:x\n");
	cr_assert_str_eq(cfg.topology_prefix, "team-a.delay_v2:x");
}

Test(config, ladder_over_ten_years)
{
	load_bad("[topology]\nresolution = 1d\nfactor = 10\nlevels = 5\n");
	expect_error("test.ini:4: topology.levels: ", NULL);
	cr_assert_eq(count_lines(err), 1, "%s", err);
}

Test(config, ladder_overflow)
{
	load_bad("[topology]\nfactor = 1000\nlevels = 64\n");
	expect_error("test.ini:3: topology.levels: ", NULL);
}

Test(config, ladder_error_without_levels_line)
{
	/* 2s * 1000^8 is far past ten years.  The error names the last of
	 * the keys that make the ladder, on its line. */
	load_bad("[topology]\nlevels = 9\nfactor = 1000\n");
	expect_error("test.ini:3: topology.factor: ", "10-year");
	/* levels left at 0 reach max_delay, never past the limit */
	load_ok("[topology]\nfactor = 1000\n");
}

Test(config, ladder_at_ten_years_is_accepted)
{
	load_ok("[topology]\nresolution = 365d\nfactor = 10\nlevels = 2\n");
}

Test(config, heartbeat_whole_seconds)
{
	load_bad("[broker]\nheartbeat = 1500ms\n");
	expect_error("test.ini:2: broker.heartbeat: ", "second");
	load_ok("[broker]\nheartbeat = 0s\n");
	cr_assert_eq(cfg.broker_heartbeat, 0);
	load_ok("[broker]\nheartbeat = 2000ms\n");
	cr_assert_eq(cfg.broker_heartbeat, 2000);
	load_ok("[broker]\nheartbeat = 1m\n");
	cr_assert_eq(cfg.broker_heartbeat, 60000);
	load_bad("[broker]\nheartbeat = 65536s\n");
	expect_error("test.ini:2: broker.heartbeat: ", "range");
}

Test(config, error_names_the_given_name)
{
	int rc =
	    config_load_string(&cfg, "/etc/cascade/prod.ini",
	                       "[topology]\nfactor = 1\n", err, sizeof(err));

	cr_assert_eq(rc, -1);
	expect_error("/etc/cascade/prod.ini:2: topology.factor: ", NULL);
}

Test(config, reload_starts_from_defaults)
{
	load_ok("[topology]\nfactor = 3\n");
	cr_assert_eq(cfg.topology_factor, 3);
	load_ok("");
	cr_assert_eq(cfg.topology_factor, 2, "a value leaked between loads");
	cr_assert_eq(cfg.topology_factor_line, 0);
}

Test(config, tiny_error_buffer)
{
	char small[24];
	const char *bad = "[topology]\nfactor = 1\nlevels = 0\n[x]\ny = z\n";

	memset(small, 'X', sizeof(small));
	cr_assert_eq(
	    config_load_string(&cfg, "test.ini", bad, small, sizeof(small)),
	    -1);
	cr_assert(memchr(small, '\0', sizeof(small)) != NULL,
	          "not NUL-terminated");
	cr_assert(strncmp(small, "test.ini:2:", 11) == 0, "%s", small);
	/* No buffer at all still fails cleanly. */
	cr_assert_eq(config_load_string(&cfg, "test.ini", bad, NULL, 0), -1);
	cr_assert_eq(config_load_string(&cfg, "test.ini", "", NULL, 0), 0);
}

/* A real file: errors name its path. */
Test(config, load_from_file)
{
	char path[] = "/tmp/cascade-test-XXXXXX";
	int fd = mkstemp(path);
	FILE *fp;

	cr_assert_geq(fd, 0);
	fp = fdopen(fd, "w");
	cr_assert_not_null(fp);
	fputs("[topology]\nfactor = 1000\nlevels = 9\n", fp);
	fclose(fp);
	cr_assert_eq(config_load(&cfg, path, err, sizeof(err)), -1);
	{
		char head[64];
		snprintf(head, sizeof(head), "%s:3: topology.levels: ", path);
		expect_error(head, NULL);
	}
	cr_assert_str_eq(cfg.path, path);

	fp = fopen(path, "w");
	cr_assert_not_null(fp);
	fputs("[topology]\nfactor = 3\n", fp);
	fclose(fp);
	cr_assert_eq(config_load(&cfg, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cfg.topology_factor, 3);
	unlink(path);
}

Test(config, missing_file)
{
	cr_assert_eq(
	    config_load(&cfg, "/nonexistent/cascade.ini", err, sizeof(err)),
	    -1);
	cr_assert(strstr(err, "/nonexistent/cascade.ini") != NULL, "%s", err);
}

static void
expect_mask(const char *url, const char *want)
{
	char out[256];

	memset(out, 'X', sizeof(out));
	config_mask_url(url, out, sizeof(out));
	cr_assert_str_eq(out, want, "%s: got %s", url, out);
}

Test(config_mask_url, hides_the_password)
{
	expect_mask("amqp://guest:guest@127.0.0.1:5672/%2f",
	            "amqp://guest:***@127.0.0.1:5672/%2f");
	expect_mask("amqps://user:s3cr3t@rabbit.example:5671/prod",
	            "amqps://user:***@rabbit.example:5671/prod");
	expect_mask("amqp://u:@h", "amqp://u:***@h");
}

Test(config_mask_url, nothing_to_hide)
{
	expect_mask("amqp://localhost", "amqp://localhost");
	expect_mask("amqp://localhost:5672/%2f", "amqp://localhost:5672/%2f");
	expect_mask("amqp://guest@localhost:5672",
	            "amqp://guest@localhost:5672");
	expect_mask("", "");
}

Test(config_mask_url, small_buffer)
{
	char out[12];

	memset(out, 'X', sizeof(out));
	config_mask_url("amqp://guest:secretpassword@host", out, sizeof(out));
	cr_assert(memchr(out, '\0', sizeof(out)) != NULL, "not terminated");
	cr_assert(strstr(out, "secret") == NULL, "leaks: %s", out);
}

Test(config, console_trusted_proxies_are_addresses_named_by_line)
{
	load_ok("[console]\ntrusted_proxies = 127.0.0.1, ::1 10.0.0.2\n");
	cr_assert_str_eq(cfg.console_trusted_proxies,
	                 "127.0.0.1, ::1 10.0.0.2");
	load_bad("[console]\n\ntrusted_proxies = 127.0.0.1 proxy.local\n");
	cr_assert(strstr(err, "test.ini:3: console.trusted_proxies: not an "
	                      "IP address: \"proxy.local\"") != NULL,
	          "%s", err);
}
