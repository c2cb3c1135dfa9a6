/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The INI file, read with inih: each key handed to config_set (the key
 * table, config_keys.c), each error reported with its file, line and key,
 * then the checks that need more than one key or the environment.
 */
#include "config_int.h"

#include "amqp_compat.h"
#include <errno.h>
#include <ini.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "listen.h"
#include "webgate.h"
#include "when.h"
#include "ladder.h"

/* State of one parse: where we are in the file and what went wrong. */
struct config_parse {
	struct config *cfg;
	const char *name;
	FILE *fp;
	const char *text;
	int line;       /* line the handler is looking at */
	int lines_done; /* complete lines handed to inih */
	int errors;
	char *err;
	size_t errsize, errlen;
	/*
	 * The [target NAME] section being read.  inih cuts section names to
	 * 49 bytes, so NAME is taken from the header line itself; the target
	 * is added when the section ends, once its pace is known.
	 */
	struct {
		int active;
		int line; /* of the header */
		char name[CONFIG_STR_MAX];
		size_t len;
		int refused;   /* the name was refused: add nothing */
		int pace_line; /* 0: no pace yet */
		double per_s;
	} target;
};

static void config_error(struct config_parse *p, int line, const char *key,
                         const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
config_error(struct config_parse *p, int line, const char *key, const char *fmt,
             ...)
{
	va_list ap;
	int n;

	p->errors++;
	if (p->errlen + 1 >= p->errsize)
		return;
	if (line > 0)
		n = snprintf(p->err + p->errlen, p->errsize - p->errlen,
		             "%s:%d: %s%s", p->name, line, key ? key : "",
		             key ? ": " : "");
	else
		n = snprintf(p->err + p->errlen, p->errsize - p->errlen,
		             "%s: %s%s", p->name, key ? key : "",
		             key ? ": " : "");
	if (n < 0 || (size_t)n >= p->errsize - p->errlen) {
		p->errlen = p->errsize - 1;
		return;
	}
	p->errlen += (size_t)n;
	va_start(ap, fmt);
	n = vsnprintf(p->err + p->errlen, p->errsize - p->errlen, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= p->errsize - p->errlen - 1) {
		p->errlen = p->errsize - 1;
		return;
	}
	p->errlen += (size_t)n;
	p->err[p->errlen++] = '\n';
	p->err[p->errlen] = '\0';
}

/* [retry] and [retry.QUEUE] keys; their names depend on the user's queues. */
static void
config_retry(struct config_parse *p, const char *section, const char *name,
             const char *value, const char *key)
{
	struct retry_policy *rp;
	const char *why = "";

	if (strcmp(section, "retry") == 0) {
		rp = &p->cfg->retry.def;
	} else if (section[6] == '\0') {
		config_error(p, p->line, key, "[retry.] needs a queue name");
		return;
	} else {
		rp = retry_section(&p->cfg->retry, section + 6);
		if (rp == NULL) {
			config_error(p, p->line, key,
			             "more than %d [retry.*] sections, or a "
			             "queue name longer than 255 bytes",
			             RETRY_MAX_POLICIES);
			return;
		}
	}
	switch (retry_set(rp, name, value, &why)) {
	case 0:
		if (rp->line == 0)
			rp->line = p->line;
		return;
	case -2:
		config_error(p, p->line, key,
		             "unknown key (max_retries, delays, backoff, "
		             "initial, multiplier, max, jitter)");
		return;
	case -3:
		config_error(p, p->line, key, "given twice");
		return;
	default:
		config_error(p, p->line, key, "%s: \"%s\"", why, value);
		return;
	}
}

/* A [target] section's name, or NULL when section is not one. */
static const char *
target_section(const char *section)
{
	if (strncmp(section, "target", 6) != 0)
		return NULL;
	if (section[6] == '\0')
		return section + 6;
	return section[6] == ' ' ? section + 7 : NULL;
}

/* "target NAME", for errors. */
static void
target_key(const struct config_parse *p, char *out, size_t size)
{
	snprintf(out, size, "target %.*s", (int)p->target.len, p->target.name);
}

/* A [target NAME] header (NAME, len bytes, after "target "). */
static void
config_target_begin(struct config_parse *p, const char *name, size_t len)
{
	char key[CONFIG_STR_MAX + 8];

	memset(&p->target, 0, sizeof(p->target));
	p->target.active = 1;
	p->target.line = p->line;
	if (len >= sizeof(p->target.name)) {
		config_error(p, p->line, "target", "name longer than %d bytes",
		             (int)sizeof(p->target.name) - 1);
		p->target.refused = 1;
		return;
	}
	memcpy(p->target.name, name, len);
	p->target.name[len] = '\0';
	p->target.len = len;
	target_key(p, key, sizeof(key));
	if (len == 0) {
		config_error(p, p->line, "target",
		             "no exchange or routing key: [target EXCHANGE] "
		             "paces every routing key of an exchange, [target "
		             "EXCHANGE/KEY] one key, [target /QUEUE] a queue");
		p->target.refused = 1;
	} else if (name[0] == ' ' || name[0] == '\t' || name[len - 1] == ' ' ||
	           name[len - 1] == '\t') {
		config_error(
		    p, p->line, key,
		    "a blank at the start or end of the name: "
		    "exchange and routing key are taken byte for byte");
		p->target.refused = 1;
	}
}

/* Where the [target] section being read was given before; 0: nowhere. */
static int
target_first_line(const struct config_parse *p)
{
	const struct pace *pace = &p->cfg->pace;
	const char *name = p->target.name, *slash;
	size_t len = p->target.len, exlen;

	slash = memchr(name, '/', len);
	exlen = slash ? (size_t)(slash - name) : len;
	for (size_t i = 0; i < pace->n; i++) {
		const struct pace_target *t = &pace->t[i];
		if (t->any_key != (slash == NULL) || t->exchange_len != exlen ||
		    memcmp(t->exchange, name, exlen) != 0)
			continue;
		if (slash == NULL ||
		    (t->routing_key_len == len - exlen - 1 &&
		     memcmp(t->routing_key, slash + 1, len - exlen - 1) == 0))
			return p->cfg->pace_line[i];
	}
	return 0;
}

/* The end of a [target] section (another header, or the end of the file):
 * the target is added with its pace. */
static void
config_target_end(struct config_parse *p)
{
	char key[CONFIG_STR_MAX + 8];
	const char *why;
	int first;

	if (!p->target.active)
		return;
	p->target.active = 0;
	if (p->target.refused)
		return;
	target_key(p, key, sizeof(key));
	if (p->target.pace_line == 0) {
		config_error(p, p->target.line, key,
		             "no pace (pace = N/s, N/m or N/h)");
		return;
	}
	first = target_first_line(p);
	if (first != 0) {
		config_error(p, p->target.line, key,
		             "given twice (first on line %d)", first);
		return;
	}
	if (pace_add(&p->cfg->pace, p->target.name, p->target.len,
	             p->target.per_s, &why) < 0) {
		config_error(p, p->target.line, key, "%s", why);
		return;
	}
	p->cfg->pace_line[p->cfg->pace.n - 1] = p->target.line;
}

/* A key of a [target NAME] section: pace, once. */
static void
config_target(struct config_parse *p, const char *name, const char *value,
              const char *inih_name)
{
	char key[CONFIG_STR_MAX + 64];
	const char *why;
	double per_s;

	/* The header is always seen first (config_section_line); should
	 * inih ever see one that was not, its name is the one there is. */
	if (!p->target.active)
		config_target_begin(p, inih_name, strlen(inih_name));
	snprintf(key, sizeof(key), "target %.*s.%s", (int)p->target.len,
	         p->target.name, name);
	if (strcmp(name, "pace") != 0) {
		config_error(p, p->line, key, "unknown key (pace)");
		return;
	}
	if (p->target.pace_line != 0) {
		config_error(p, p->line, key,
		             "given twice (first on line %d; an indented line "
		             "continues the key above it)",
		             p->target.pace_line);
		return;
	}
	if (pace_parse_rate(value, &per_s, &why) < 0) {
		config_error(p, p->line, key, "%s: \"%s\"", why, value);
		p->target.refused = 1; /* reported: no "no pace" */
		return;
	}
	p->target.per_s = per_s;
	p->target.pace_line = p->line;
}

static int
config_handler(void *user, const char *section, const char *name,
               const char *value)
{
	struct config_parse *p = user;
	const struct config_key *k;
	const char *why;
	char key[256];
	int known_section, first;

	snprintf(key, sizeof(key), "%s.%s", section, name);
	if (strcmp(section, "retry") == 0 ||
	    strncmp(section, "retry.", 6) == 0) {
		config_retry(p, section, name, value, key);
		return 1;
	}
	if (target_section(section) != NULL) {
		config_target(p, name, value, target_section(section));
		return 1;
	}
	k = config_key_find(section, name, &known_section);
	if (!known_section) {
		if (*section == '\0')
			config_error(p, p->line, name,
			             "key outside any section");
		else
			config_error(p, p->line, key, "unknown section [%s]",
			             section);
		return 1;
	}
	if (k == NULL) {
		config_error(p, p->line, key, "unknown key");
		return 1;
	}
	/* inih also hands an indented line to the key above as a continuation.
	 */
	first = *(int *)((char *)p->cfg + k->line_offset);
	if (first != 0) {
		config_error(p, p->line, key,
		             "given twice (first on line %d; an indented line "
		             "continues the key above it)",
		             first);
		return 1;
	}
	if (config_set(p->cfg, k, value, &why) < 0) {
		config_error(p, p->line, key, "%s: \"%s\"", why, value);
		return 1;
	}
	*(int *)((char *)p->cfg + k->line_offset) = p->line;
	return 1;
}

static int
section_known(const char *name, size_t len)
{
	static const char *const known[] = {"broker",  "topology", "router",
	                                    "retry",   "events",   "metrics",
	                                    "console", "log"};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strlen(known[i]) == len && memcmp(known[i], name, len) == 0)
			return 1;
	return (len > 6 && memcmp(name, "retry.", 6) == 0) ||
	       (len == 6 && memcmp(name, "target", 6) == 0) ||
	       (len > 6 && memcmp(name, "target ", 7) == 0);
}

/*
 * inih calls the handler for key lines only, so a section header with no
 * keys under it would pass unseen: check every header here.  Here too a
 * [target NAME] section starts (and the one before it ends), with NAME in
 * full.
 */
static void
config_section_line(struct config_parse *p, const char *line)
{
	const char *s = line, *end;
	size_t len;

	if (p->line == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
		s += 3; /* a UTF-8 byte order mark, which inih skips */
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s != '[')
		return;
	/* Where inih ends the name: at ']', or at a comment (a ';' after a
	 * blank), which makes the line a syntax error it reports. */
	for (end = s + 1; *end != '\0' && *end != ']'; end++)
		if (*end == ';' && (end[-1] == ' ' || end[-1] == '\t'))
			return;
	if (*end != ']')
		return;
	len = (size_t)(end - s - 1);
	config_target_end(p);
	if (!section_known(s + 1, len))
		config_error(p, p->line, NULL, "unknown section [%.*s]",
		             (int)len, s + 1);
	else if (len >= 6 && memcmp(s + 1, "target", 6) == 0)
		config_target_begin(p, len > 6 ? s + 8 : s + 7,
		                    len > 6 ? len - 7 : 0);
}

/* inih reads one line per call; counting them here gives the handler lines. */
static char *
config_reader(char *buf, int size, void *stream)
{
	struct config_parse *p = stream;
	size_t n;

	if (p->fp != NULL) {
		if (fgets(buf, size, p->fp) == NULL)
			return NULL;
	} else {
		const char *nl;
		if (*p->text == '\0')
			return NULL;
		nl = strchr(p->text, '\n');
		n = nl ? (size_t)(nl - p->text) + 1 : strlen(p->text);
		if (n > (size_t)size - 1)
			n = (size_t)size - 1;
		memcpy(buf, p->text, n);
		buf[n] = '\0';
		p->text += n;
	}
	p->line = p->lines_done + 1;
	config_section_line(p, buf);
	n = strlen(buf);
	if (n > 0 && buf[n - 1] == '\n') {
		p->lines_done++;
	} else if (n == (size_t)size - 1) {
		/* The rest of the line would come back as a line of its own. */
		config_error(p, p->line, NULL, "line longer than %d characters",
		             size - 2);
		return NULL;
	}
	return buf;
}

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
static void
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

static int
config_parse_any(struct config *cfg, struct config_parse *p)
{
	int rc;

	config_defaults(cfg);
	snprintf(cfg->path, sizeof(cfg->path), "%s", p->name);
	rc = ini_parse_stream(config_reader, p, config_handler, p);
	config_target_end(p);
	/* The handler never fails, so inih's line is a syntax error. */
	if (rc > 0)
		config_error(
		    p, rc, NULL,
		    "syntax error (expected [section] or key = value)");
	config_check(p);
	return p->errors ? -1 : 0;
}

int
config_load(struct config *cfg, const char *path, char *err, size_t errsize)
{
	struct config_parse p = {
	    .cfg = cfg, .name = path, .err = err, .errsize = errsize};
	int rc;

	if (errsize)
		err[0] = '\0';
	p.fp = fopen(path, "r");
	if (p.fp == NULL) {
		snprintf(err, errsize, "%s: cannot open: %s\n", path,
		         strerror(errno));
		return -1;
	}
	rc = config_parse_any(cfg, &p);
	fclose(p.fp);
	return rc;
}

int
config_load_string(struct config *cfg, const char *name, const char *text,
                   char *err, size_t errsize)
{
	struct config_parse p = {.cfg = cfg,
	                         .name = name,
	                         .text = text,
	                         .err = err,
	                         .errsize = errsize};

	if (errsize)
		err[0] = '\0';
	return config_parse_any(cfg, &p);
}
