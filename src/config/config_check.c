/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checks once the whole file is read, which need more than one key or
 * the environment: CASCADE_BROKER_URL and each URL parsed, the password
 * (CASCADE_BROKER_PASSWORD or password_file) and the TLS files, the
 * topology's prefix, shards and ladder, the router's targets, [events]
 * against [router], the retry policies.
 */
#include "config_int.h"

#include "amqp_compat.h"
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "listen.h"
#include "webgate.h"
#include "when.h"
#include "ladder.h"

static int
prefix_valid(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '-' ||
		      *s == '_' || *s == ':'))
			return 0;
	return 1;
}

/* First line of path, without its line end, into out. */
static int
read_first_line(const char *path, char *out, size_t size, const char **why)
{
	FILE *fp = fopen(path, "r");
	size_t n;

	if (fp == NULL) {
		*why = strerror(errno);
		return -1;
	}
	if (fgets(out, (int)size, fp) == NULL) {
		fclose(fp);
		*why = "empty file";
		return -1;
	}
	fclose(fp);
	n = strcspn(out, "\r\n");
	if (out[n] == '\0' && n == size - 1) {
		*why = "first line too long";
		return -1;
	}
	out[n] = '\0';
	if (n == 0) {
		*why = "first line is empty";
		return -1;
	}
	return 0;
}

/* The password, and the TLS files when the URL is amqps://. */
static void
config_check_secrets(struct config_parse *p, int tls_url)
{
	struct config *cfg = p->cfg;
	const char *env = getenv("CASCADE_BROKER_PASSWORD"), *why;
	static const struct {
		const char *key;
		size_t offset, line_offset;
	} tls[] = {
	    {"broker.tls_ca_file", offsetof(struct config, broker_tls_ca_file),
	     offsetof(struct config, broker_tls_ca_file_line)},
	    {"broker.tls_cert_file",
	     offsetof(struct config, broker_tls_cert_file),
	     offsetof(struct config, broker_tls_cert_file_line)},
	    {"broker.tls_key_file",
	     offsetof(struct config, broker_tls_key_file),
	     offsetof(struct config, broker_tls_key_file_line)},
	};

	if (env != NULL && *env != '\0') {
		if (strlen(env) >= sizeof(cfg->broker_password)) {
			config_error(p, 0, "CASCADE_BROKER_PASSWORD",
			             "too long");
		} else {
			memcpy(cfg->broker_password, env, strlen(env) + 1);
			cfg->broker_password_set = 1;
		}
	} else if (cfg->broker_password_file[0] != '\0') {
		if (read_first_line(cfg->broker_password_file,
		                    cfg->broker_password,
		                    sizeof(cfg->broker_password), &why) < 0)
			config_error(p, cfg->broker_password_file_line,
			             "broker.password_file", "%s: %s",
			             cfg->broker_password_file, why);
		else
			cfg->broker_password_set = 1;
	}
	for (size_t i = 0; i < sizeof(tls) / sizeof(tls[0]); i++) {
		const char *path = (const char *)cfg + tls[i].offset;
		int line =
		    *(const int *)((const char *)cfg + tls[i].line_offset);
		FILE *fp;

		if (*path == '\0')
			continue;
		if (!tls_url) {
			config_error(p, line, tls[i].key,
			             "set, but no broker URL is amqps://");
			continue;
		}
		fp = fopen(path, "r");
		if (fp == NULL)
			config_error(p, line, tls[i].key, "%s: %s", path,
			             strerror(errno));
		else
			fclose(fp);
	}
	if ((cfg->broker_tls_cert_file[0] == '\0') !=
	    (cfg->broker_tls_key_file[0] == '\0'))
		config_error(p,
		             cfg->broker_tls_cert_file_line +
		                 cfg->broker_tls_key_file_line,
		             cfg->broker_tls_cert_file[0]
		                 ? "broker.tls_cert_file"
		                 : "broker.tls_key_file",
		             "a client certificate needs both tls_cert_file "
		             "and tls_key_file");
}

/* Checks that need more than one key, or the environment. */
void
config_check(struct config_parse *p)
{
	struct config *cfg = p->cfg;
	struct amqp_connection_info info;
	struct ladder ladder;
	const char *env, *why;
	char url[CONFIG_STR_MAX], bad[CONFIG_STR_MAX];
	unsigned drained;
	int tls_url = 0;

	env = getenv("CASCADE_BROKER_URL");
	if (env != NULL && *env != '\0') {
		if (strlen(env) >= sizeof(cfg->broker_url)) {
			config_error(p, 0, "CASCADE_BROKER_URL", "too long");
		} else {
			memcpy(cfg->broker_url, env, strlen(env) + 1);
			cfg->broker_url_line = 0;
		}
	}
	for (unsigned i = 0; config_broker_url(cfg, i, url, sizeof(url)) == 0;
	     i++) {
		char masked[CONFIG_STR_MAX];
		config_mask_url(url, masked, sizeof(masked));
		/* amqp_parse_url cuts its argument apart: it gets url, a copy.
		 */
		if (amqp_parse_url(url, &info) != AMQP_STATUS_OK)
			config_error(
			    p, cfg->broker_url_line,
			    cfg->broker_url_line ? "broker.url"
			                         : "CASCADE_BROKER_URL",
			    "not an amqp:// or amqps:// URL: \"%s\"", masked);
		else if (info.ssl)
			tls_url = 1;
	}
	if (config_broker_url_count(cfg) == 0)
		config_error(p, cfg->broker_url_line,
		             cfg->broker_url_line ? "broker.url"
		                                  : "CASCADE_BROKER_URL",
		             "no URL");
	config_check_secrets(p, tls_url);
	if (!webgate_addresses_ok(cfg->console_trusted_proxies, bad,
	                          sizeof(bad)))
		config_error(p, cfg->console_trusted_proxies_line,
		             "console.trusted_proxies",
		             "not an IP address: \"%s\" (give each proxy's "
		             "address, not a name or a network)",
		             bad);
	if (!prefix_valid(cfg->topology_prefix))
		config_error(p, cfg->topology_prefix_line, "topology.prefix",
		             "use only letters, digits and . - _ :");
	else if (strncmp(cfg->topology_prefix, "amq.", 4) == 0)
		config_error(p, cfg->topology_prefix_line, "topology.prefix",
		             "names starting with amq. are reserved by "
		             "RabbitMQ");
	{
		const char *s = cfg->router_allowed_targets;
		char pattern[CONFIG_STR_MAX];
		if (!config_next_pattern(&s, pattern, sizeof(pattern)))
			config_error(p, cfg->router_allowed_targets_line,
			             "router.allowed_targets",
			             "no pattern: nothing could be delivered "
			             "(* allows every exchange)");
	}
	if (cfg->router_accept_unsigned_until[0] != '\0') {
		char when_why[128];
		int64_t t;
		if (when_parse_absolute(cfg->router_accept_unsigned_until, &t,
		                        when_why, sizeof(when_why)) < 0)
			config_error(p, cfg->router_accept_unsigned_until_line,
			             "router.accept_unsigned_until",
			             "%s: \"%s\"", when_why,
			             cfg->router_accept_unsigned_until);
	}
	/* The daemons count each other by their markers in P.cancels: with
	 * no streams each would take the whole pace. */
	if (cfg->pace.n > 0 && !config_events(cfg))
		config_error(p, cfg->pace_line[0], "target.pace",
		             "a pace needs [events] enabled = yes (the daemons "
		             "share it by their records)");
	if (cfg->metrics_listen[0] != '\0') {
		char host[256], port[16];
		if (listen_parse(cfg->metrics_listen, host, sizeof(host), port,
		                 sizeof(port), &why) < 0)
			config_error(p, cfg->metrics_listen_line,
			             "metrics.listen", "%s: \"%s\"", why,
			             cfg->metrics_listen);
	}
	/* Only a quorum queue can hold a message until a given time. */
	if (cfg->topology_mode == WAIT_NATIVE &&
	    cfg->topology_queue_type != QUEUE_TYPE_QUORUM)
		config_error(p, cfg->topology_mode_line, "topology.mode",
		             "native needs quorum queues (topology.queue_type "
		             "is classic)");
	/* Shorter, a cancellation would lapse, and its record go, while the
	 * message it names may still wait. */
	if (cfg->events_max_age > 0 &&
	    cfg->events_max_age < cfg->router_max_delay) {
		char a[32], m[32];
		duration_format(cfg->events_max_age, a, sizeof(a));
		duration_format(cfg->router_max_delay, m, sizeof(m));
		config_error(p, cfg->events_max_age_line, "events.max_age",
		             "%s is shorter than [router] max_delay (%s): "
		             "records and cancellations must outlive the "
		             "longest wait",
		             a, m);
	}
	{
		uint64_t mask;
		if (config_shard_list(cfg->topology_consume_shards,
		                      (unsigned)cfg->topology_shards, &mask,
		                      &why) < 0)
			config_error(p, cfg->topology_consume_shards_line,
			             "topology.consume_shards", "%s: \"%s\"",
			             why, cfg->topology_consume_shards);
	}
	/* A former layout all of whose queues this one has: nothing to
	 * drain, and a sign the numbers are the wrong way round. */
	drained = 0;
	for (unsigned s = 0; s < cfg->topology_drain_shards; s++)
		drained += (unsigned)ladder_shard_drained(
		    (unsigned)cfg->topology_drain_shards,
		    (unsigned)cfg->topology_shards, s);
	if (cfg->topology_drain_shards > 0 && drained == 0)
		config_error(
		    p, cfg->topology_drain_shards_line, "topology.drain_shards",
		    "%" PRIu64 " shards have nothing to drain into %" PRIu64
		    ": give the former number of shards, when it was 1 "
		    "or more than shards is now (growing from 2 or more "
		    "keeps every queue)",
		    cfg->topology_drain_shards, cfg->topology_shards);
	if (cfg->broker_heartbeat % 1000 != 0)
		config_error(p, cfg->broker_heartbeat_line, "broker.heartbeat",
		             "AMQP heartbeats are whole seconds");
	retry_inherit(&cfg->retry);
	if (retry_check(&cfg->retry.def, &why) < 0)
		config_error(p, cfg->retry.def.line, "retry", "%s", why);
	for (unsigned i = 0; i < cfg->retry.n; i++) {
		char sec[RETRY_QUEUE_MAX + 8];
		snprintf(sec, sizeof(sec), "retry.%s",
		         cfg->retry.queues[i].queue);
		if (retry_check(&cfg->retry.queues[i], &why) < 0)
			config_error(p, cfg->retry.queues[i].line, sec, "%s",
			             why);
	}
	if (ladder_init(&ladder, cfg->topology_resolution, cfg->topology_factor,
	                config_levels(cfg), &why) < 0) {
		/* Name the last of the three keys the file sets. */
		static const char *const keys[] = {"resolution", "factor",
		                                   "levels"};
		const char *key = "levels";
		int line = 0;
		char name[32];
		for (int i = 0; i < 3; i++) {
			int l = config_line(cfg, "topology", keys[i]);
			if (l >= line) {
				line = l;
				key = keys[i];
			}
		}
		snprintf(name, sizeof(name), "topology.%s", key);
		config_error(p, line, name, "%s", why);
	}
}
