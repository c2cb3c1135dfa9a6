/* The INI file: defaults, values, and errors that name file, line and key. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

#define DAY (INT64_C(86400000))

static struct config cfg;
static char err[8192];

/* The environment of whoever runs the tests must not leak in. */
static void
clear_env(void)
{
	unsetenv("CASCADE_BROKER_URL");
	unsetenv("CASCADE_BROKER_PASSWORD");
	memset(&cfg, 0, sizeof(cfg));
	memset(err, 0, sizeof(err));
}

TestSuite(config, .init = clear_env);

static void
load_ok(const char *text)
{
	int rc = config_load_string(&cfg, "test.ini", text, err, sizeof(err));

	cr_assert_eq(rc, 0, "rejected:\n%s\nerrors:\n%s", text, err);
	cr_assert_str_empty(err, "errors despite success: %s", err);
}

static void
load_bad(const char *text)
{
	int rc = config_load_string(&cfg, "test.ini", text, err, sizeof(err));

	cr_assert_eq(rc, -1, "accepted:\n%s", text);
	cr_assert_str_not_empty(err, "no error message for:\n%s", text);
}

/* err holds a line starting with `head` that also contains `about`. */
static void
expect_error(const char *head, const char *about)
{
	const char *line = err;

	while (line != NULL && *line != '\0') {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[1024];

		snprintf(buf, sizeof(buf), "%.*s", (int)len, line);
		if (strncmp(buf, head, strlen(head)) == 0 &&
		    (about == NULL || strstr(buf, about) != NULL))
			return;
		line = nl ? nl + 1 : NULL;
	}
	cr_assert_fail("no error \"%s...%s\" in:\n%s", head, about ? about : "",
	               err);
}

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

/*
 * Credentials, TLS, target policy, metrics, logs: docs/CONTRACT.md sections
 * 5, 11 and 12.
 */

static char *
temp_file(const char *content)
{
	static char path[64];
	FILE *fp;
	int fd;

	snprintf(path, sizeof(path), "/tmp/cascade-test-XXXXXX");
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	fp = fdopen(fd, "w");
	fputs(content, fp);
	fclose(fp);
	return path;
}

Test(config, password_file_replaces_the_url_password)
{
	char text[256], *path = temp_file("s3cret\n");

	snprintf(text, sizeof(text),
	         "[broker]\nurl = amqp://cascade@localhost/\n"
	         "password_file = %s\n",
	         path);
	load_ok(text);
	cr_assert(cfg.broker_password_set);
	cr_assert_str_eq(cfg.broker_password, "s3cret");
	unlink(path);
}

Test(config, password_env_wins_over_the_file)
{
	char text[256], *path = temp_file("from-file\r\n");

	setenv("CASCADE_BROKER_PASSWORD", "from-env", 1);
	snprintf(text, sizeof(text), "[broker]\npassword_file = %s\n", path);
	load_ok(text);
	cr_assert_str_eq(cfg.broker_password, "from-env");
	unlink(path);
}

Test(config, no_password_source_keeps_the_url_password)
{
	load_ok("[broker]\nurl = amqp://u:p@localhost/\n");
	cr_assert_not(cfg.broker_password_set);
}

Test(config, password_file_missing_or_empty)
{
	char text[256], *path;

	load_bad("[broker]\npassword_file = /nonexistent/pw\n");
	expect_error("test.ini:2: broker.password_file: ",
	             "No such file or directory");
	path = temp_file("\n");
	snprintf(text, sizeof(text), "[broker]\n\npassword_file = %s\n", path);
	load_bad(text);
	expect_error("test.ini:3: broker.password_file: ", "empty");
	unlink(path);
}

Test(config, tls_files_need_amqps)
{
	char text[256], *path = temp_file("not checked here\n");

	snprintf(text, sizeof(text),
	         "[broker]\nurl = amqp://localhost/\ntls_ca_file = %s\n", path);
	load_bad(text);
	expect_error("test.ini:3: broker.tls_ca_file: ",
	             "no broker URL is amqps://");
	snprintf(text, sizeof(text),
	         "[broker]\nurl = amqps://localhost/\ntls_ca_file = %s\n",
	         path);
	load_ok(text);
	unlink(path);
}

Test(config, tls_files_must_exist_and_come_in_pairs)
{
	load_bad("[broker]\nurl = amqps://localhost/\n"
	         "tls_ca_file = /nonexistent/ca.pem\n");
	expect_error("test.ini:3: broker.tls_ca_file: ", "/nonexistent/ca.pem");
	char text[256], *path = temp_file("pem\n");

	snprintf(text, sizeof(text),
	         "[broker]\nurl = amqps://localhost/\ntls_cert_file = %s\n",
	         path);
	load_bad(text);
	expect_error("test.ini:3: broker.tls_cert_file: ", "both");
	unlink(path);
}

Test(config, tls_verify)
{
	load_ok("[broker]\nurl = amqps://localhost/\n");
	cr_assert_eq(cfg.broker_tls_verify, TLS_VERIFY_YES);
	load_ok("[broker]\nurl = amqps://localhost/\ntls_verify = no\n");
	cr_assert_eq(cfg.broker_tls_verify, TLS_VERIFY_NO);
	load_bad("[broker]\ntls_verify = maybe\n");
	expect_error("test.ini:2: broker.tls_verify: ", "yes|no");
}

Test(config, allowed_targets)
{
	load_ok("");
	cr_assert(config_target_allowed(&cfg, "anything", 8));
	cr_assert(config_target_allowed(&cfg, "", 0));
	load_ok("[router]\nallowed_targets = orders.*, amq.default billing\n");
	cr_assert(config_target_allowed(&cfg, "orders.eu", 9));
	cr_assert(config_target_allowed(&cfg, "billing", 7));
	cr_assert(config_target_allowed(&cfg, "", 0), "default exchange");
	cr_assert_not(config_target_allowed(&cfg, "billing2", 8));
	cr_assert_not(config_target_allowed(&cfg, "admin", 5));
	/* Only the bytes given count, not what follows them. */
	cr_assert(config_target_allowed(&cfg, "billingX", 7));
	load_ok("[router]\nallowed_targets = orders\n");
	cr_assert_not(config_target_allowed(&cfg, "", 0));
	load_bad("[router]\nallowed_targets = ,\n");
	expect_error("test.ini:2: router.allowed_targets: ", "no pattern");
}

Test(config, accept_unsigned_until)
{
	load_ok("");
	cr_assert_eq(config_unsigned_until(&cfg), 0);
	load_ok("[router]\naccept_unsigned_until = 2027-01-01T00:00:00Z\n");
	cr_assert_eq(config_unsigned_until(&cfg), INT64_C(1798761600000));
	load_bad("[router]\naccept_unsigned_until = next week\n");
	expect_error("test.ini:2: router.accept_unsigned_until: ", "next week");
}

Test(config, metrics_listen)
{
	load_ok("");
	cr_assert_str_eq(cfg.metrics_listen, "127.0.0.1:9464");
	load_ok("[metrics]\nlisten =\n");
	cr_assert_str_empty(cfg.metrics_listen);
	load_ok("[metrics]\nlisten = [::1]:9000\n");
	load_ok("[metrics]\nlisten = :9000\n");
	load_bad("[metrics]\nlisten = 9464\n");
	expect_error("test.ini:2: metrics.listen: ", "HOST:PORT");
	load_bad("[metrics]\nlisten = localhost:http\n");
	expect_error("test.ini:2: metrics.listen: ", "port");
	load_bad("[metrics]\nlisten = ::1:9000\n");
	expect_error("test.ini:2: metrics.listen: ", "brackets");
}

Test(config, log_level_and_format)
{
	load_ok("");
	cr_assert_eq(cfg.log_level, 1, "info");
	cr_assert_eq(cfg.log_format, LOG_FORMAT_TEXT);
	load_ok("[log]\nlevel = debug\nformat = json\n");
	cr_assert_eq(cfg.log_level, 0);
	cr_assert_eq(cfg.log_format, LOG_FORMAT_JSON);
	load_bad("[log]\nformat = xml\n");
	expect_error("test.ini:2: log.format: ", "text|json");
}

Test(config, tail_margin)
{
	load_ok("");
	cr_assert_eq(cfg.router_tail_margin, 250);
	load_ok("[router]\ntail_margin = 0ms\n");
	cr_assert_eq(cfg.router_tail_margin, 0);
}

Test(config, several_broker_urls)
{
	char url[CONFIG_STR_MAX], masked[512];

	load_ok("[broker]\nurl = amqp://u:p1@a:5672/%2f, amqp://u:p2@b/%2f "
	        "amqp://c\n");
	cr_assert_eq(config_broker_url_count(&cfg), 3);
	cr_assert_eq(config_broker_url(&cfg, 0, url, sizeof(url)), 0);
	cr_assert_str_eq(url, "amqp://u:p1@a:5672/%2f");
	cr_assert_eq(config_broker_url(&cfg, 2, url, sizeof(url)), 0);
	cr_assert_str_eq(url, "amqp://c");
	cr_assert_eq(config_broker_url(&cfg, 3, url, sizeof(url)), -1);
	config_mask_url(cfg.broker_url, masked, sizeof(masked));
	cr_assert_str_eq(masked, "amqp://u:***@a:5672/%2f, amqp://u:***@b/%2f "
	                         "amqp://c");
}

Test(config, one_bad_url_among_several)
{
	load_bad("[broker]\nurl = amqp://a, http://u:secret@b\n");
	expect_error("test.ini:2: broker.url: ", "http://u:***@b");
	cr_assert_null(strstr(err, "secret"), "%s", err);
	load_bad("[broker]\nurl = ,\n");
	expect_error("test.ini:2: broker.url: ", "no URL");
}

Test(config, tls_files_with_one_amqps_url_among_several)
{
	char text[256], *path = temp_file("pem\n");

	snprintf(text, sizeof(text),
	         "[broker]\nurl = amqp://a amqps://b\ntls_ca_file = %s\n",
	         path);
	load_ok(text);
	unlink(path);
}

Test(config, events_on_by_default_kept_for_max_delay_plus_a_day)
{
	load_ok("");
	cr_assert(config_events(&cfg));
	cr_assert_eq(config_events_max_age(&cfg), 365 * DAY + DAY);
	load_ok("[router]\nmax_delay = 7d\n");
	cr_assert_eq(config_events_max_age(&cfg), 8 * DAY);
	load_ok("[events]\nenabled = no\nmax_age = 400d\n");
	cr_assert_not(config_events(&cfg));
	cr_assert_eq(config_events_max_age(&cfg), 400 * DAY);
}

Test(config, held_ids_leave_requests_a_tenth_of_the_cap)
{
	load_ok("");
	cr_assert_eq(cfg.events_max_held_ids, 1000000);
	cr_assert_eq(config_held_limit(&cfg, 1), 1000000);
	cr_assert_eq(config_held_limit(&cfg, 0), 900000);
	load_ok("[events]\nmax_held_ids = 5\n");
	cr_assert_eq(config_held_limit(&cfg, 1), 5);
	cr_assert_eq(config_held_limit(&cfg, 0), 5, "a tenth of 5 is none");
	load_ok("[events]\nmax_held_ids = 20\n");
	cr_assert_eq(config_held_limit(&cfg, 0), 18);
	load_bad("[events]\nmax_held_ids = 0\n");
	cr_assert(strstr(err, "events.max_held_ids") != NULL, "%s", err);
	load_bad("[events]\nmax_held_ids = 100000001\n");
}

Test(config, series_window_is_an_hour_to_thirty_days)
{
	load_ok("");
	cr_assert_eq(cfg.events_series_window, DAY);
	load_ok("[events]\nseries_window = 1h\n");
	cr_assert_eq(cfg.events_series_window, 3600000);
	load_ok("[events]\nseries_window = 30d\n");
	cr_assert_eq(cfg.events_series_window, 30 * DAY);
	load_bad("[events]\n\nseries_window = 59m\n");
	cr_assert(strstr(err, "test.ini:3: events.series_window") != NULL, "%s",
	          err);
	load_bad("[events]\nseries_window = 31d\n");
	cr_assert(strstr(err, "events.series_window") != NULL, "%s", err);
	load_bad("[events]\nseries_window = 3600\n");
	cr_assert(strstr(err, "events.series_window") != NULL, "%s", err);
}

Test(config, events_max_age_must_outlive_max_delay)
{
	load_bad("[router]\nmax_delay = 30d\n[events]\nmax_age = 7d\n");
	cr_assert(strstr(err, "test.ini:4") != NULL, "%s", err);
	cr_assert(strstr(err, "events.max_age") != NULL, "%s", err);
	cr_assert(strstr(err, "shorter than [router] max_delay (30d)") != NULL,
	          "%s", err);
	load_ok("[router]\nmax_delay = 7d\n[events]\nmax_age = 7d\n");
}

Test(config, events_enabled_takes_yes_or_no)
{
	load_bad("[events]\nenabled = maybe\n");
	cr_assert(strstr(err, "test.ini:2") != NULL, "%s", err);
	cr_assert(strstr(err, "events.enabled") != NULL, "%s", err);
}

/* [topology] shards and consume_shards (docs/CONTRACT.md section 8). */
Test(config, shards_and_the_shards_consumed)
{
	load_ok("[topology]\nshards = 4\nconsume_shards = 0, 2-3\n");
	cr_assert_eq(cfg.topology_shards, 4);
	cr_assert(config_shard_consumed(&cfg, 0));
	cr_assert_not(config_shard_consumed(&cfg, 1));
	cr_assert(config_shard_consumed(&cfg, 2));
	cr_assert(config_shard_consumed(&cfg, 3));
	cr_assert_not(config_shard_consumed(&cfg, 4));

	/* empty: every shard; the default is one shard */
	load_ok("[topology]\nshards = 3\n");
	for (unsigned s = 0; s < 3; s++)
		cr_assert(config_shard_consumed(&cfg, s));
	load_ok("");
	cr_assert_eq(cfg.topology_shards, 1);
	cr_assert(config_shard_consumed(&cfg, 0));
	cr_assert_eq(cfg.topology_drain_shards, 0);
}

Test(config, bad_shard_lists_name_line_and_key)
{
	load_bad("[topology]\nshards = 3\nconsume_shards = 1-3\n");
	expect_error("test.ini:3: topology.consume_shards: ", "past");
	load_bad("[topology]\nconsume_shards = 1\n");
	expect_error("test.ini:2: topology.consume_shards: ", "past");
	load_bad("[topology]\nshards = 3\nconsume_shards = one\n");
	expect_error("test.ini:3: topology.consume_shards: ", "0-3, 7");
	load_bad("[topology]\nshards = 3\nconsume_shards = 2-1\n");
	expect_error("test.ini:3: topology.consume_shards: ", "low to high");
	load_bad("[topology]\nshards = 3\nconsume_shards = , ,\n");
	expect_error("test.ini:3: topology.consume_shards: ", "names no shard");
	load_bad("[topology]\nshards = 3\ndrain_shards = 3\n");
	expect_error("test.ini:3: topology.drain_shards: ", "nothing to drain");
	load_bad("[topology]\nshards = 5\ndrain_shards = 3\n");
	expect_error("test.ini:3: topology.drain_shards: ", "nothing to drain");
	load_ok("[topology]\nshards = 3\ndrain_shards = 5\n");
	load_ok("[topology]\nshards = 3\ndrain_shards = 1\n");
	load_ok("[topology]\ndrain_shards = 3\n");
	load_bad("[topology]\nshards = 65\n");
	expect_error("test.ini:2: topology.shards: ", NULL);
	load_bad("[topology]\nshards = 0\n");
	expect_error("test.ini:2: topology.shards: ", NULL);
}

/* levels = 0 (the default): as many as reach max_delay. */
Test(config, levels_by_default_reach_max_delay)
{
	load_ok("");
	cr_assert_eq(config_levels(&cfg), 24); /* 2 s .. 2 s * 2^23 */
	load_ok("[topology]\nfactor = 4\n");
	cr_assert_eq(config_levels(&cfg), 12); /* 2 s .. 2 s * 4^11 */
	load_ok("[topology]\nfactor = 2\n[router]\nmax_delay = 1d\n");
	cr_assert_eq(config_levels(&cfg), 16); /* 2 s * 2^15 = 18.2 h */
	load_ok("[topology]\nresolution = 1h\n[router]\nmax_delay = 30m\n");
	cr_assert_eq(config_levels(&cfg), 1);
	load_ok("[topology]\nfactor = 3\nlevels = 5\n");
	cr_assert_eq(config_levels(&cfg), 5);
	load_ok("[topology]\nresolution = 1ms\n[router]\nmax_delay = 3650d\n");
	cr_assert_eq(config_levels(&cfg), 39); /* 1 ms * 2^38: 8.7 years */
}
