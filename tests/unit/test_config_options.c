/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The INI file's options past the ladder: credentials, TLS, target
 * policy, metrics and logs (docs/CONTRACT.md sections 5, 11 and 12),
 * several broker URLs, events, shards, and the levels by default.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

#include "helpers.h"

CONFIG_FIXTURE(config);

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
