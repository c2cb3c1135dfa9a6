/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the rest of cascade asks of a loaded config: the broker's URLs, one
 * at a time or masked for logs, and its users; whether an exchange is an
 * allowed target; the shards consumed and the ladder's levels; the limits
 * of [events].
 */
#include "config_int.h"

#include "amqp_compat.h"
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "when.h"
#include "ladder.h"

int
config_next_pattern(const char **s, char *out, size_t size)
{
	size_t n;

	*s += strspn(*s, ", \t");
	n = strcspn(*s, ", \t");
	if (n == 0)
		return 0;
	snprintf(out, size, "%.*s", (int)n, *s);
	*s += n;
	return 1;
}

int
config_target_allowed(const struct config *cfg, const char *exchange,
                      size_t len)
{
	const char *s = cfg->router_allowed_targets;
	char pattern[CONFIG_STR_MAX], name[256];

	if (len == 0) {
		len = strlen("amq.default");
		exchange = "amq.default";
	}
	if (len >= sizeof(name))
		return 0;
	memcpy(name, exchange, len);
	name[len] = '\0';
	while (config_next_pattern(&s, pattern, sizeof(pattern)))
		if (fnmatch(pattern, name, 0) == 0)
			return 1;
	return 0;
}

int
config_shard_list(const char *s, unsigned shards, uint64_t *mask,
                  const char **why)
{
	const char *start = s;
	unsigned long lo, hi;
	char *end;

	*mask = 0;
	for (;;) {
		while (*s == ',' || *s == ' ' || *s == '\t')
			s++;
		if (*s == '\0')
			break;
		if (*s < '0' || *s > '9')
			goto bad;
		lo = hi = strtoul(s, &end, 10);
		s = end;
		if (*s == '-') {
			s++;
			if (*s < '0' || *s > '9')
				goto bad;
			hi = strtoul(s, &end, 10);
			s = end;
		}
		if (*s != '\0' && *s != ',' && *s != ' ' && *s != '\t')
			goto bad;
		if (lo > hi) {
			*why = "a range runs from low to high";
			return -1;
		}
		if (hi >= shards) {
			*why = "names a shard past [topology] shards (shards "
			       "are numbered from 0)";
			return -1;
		}
		for (unsigned long i = lo; i <= hi; i++)
			*mask |= UINT64_C(1) << i;
	}
	if (*mask == 0 && *start != '\0') {
		*why = "names no shard (leave it empty for every shard)";
		return -1;
	}
	if (*mask == 0)
		*mask = shards >= 64 ? UINT64_MAX : (UINT64_C(1) << shards) - 1;
	return 0;
bad:
	*why = "expected shard numbers and ranges such as \"0-3, 7\"";
	return -1;
}

unsigned
config_levels(const struct config *cfg)
{
	int64_t ttl = cfg->topology_resolution;
	unsigned n = 1;

	if (cfg->topology_levels > 0)
		return (unsigned)cfg->topology_levels;
	while (n < LADDER_MAX_LEVELS &&
	       ttl <= cfg->router_max_delay / (int64_t)cfg->topology_factor) {
		ttl *= (int64_t)cfg->topology_factor;
		n++;
	}
	return n;
}

int
config_shard_consumed(const struct config *cfg, unsigned s)
{
	uint64_t mask;
	const char *why;

	return s < 64 &&
	       config_shard_list(cfg->topology_consume_shards,
	                         (unsigned)cfg->topology_shards, &mask,
	                         &why) == 0 &&
	       (mask >> s & 1);
}

/* One URL, s[0..n), masked, appended to out. */
static void
mask_one(const char *s, size_t n, char *out, size_t size)
{
	size_t len = strlen(out);
	const char *scheme = NULL, *at = NULL, *colon = NULL;

	for (size_t i = 0; i + 3 <= n && scheme == NULL; i++)
		if (memcmp(s + i, "://", 3) == 0)
			scheme = s + i;
	if (scheme != NULL) {
		scheme += 3;
		at = memchr(scheme, '@', n - (size_t)(scheme - s));
		if (at != NULL)
			colon = memchr(scheme, ':', (size_t)(at - scheme));
	}
	if (colon == NULL)
		snprintf(out + len, size - len, "%.*s", (int)n, s);
	else
		snprintf(out + len, size - len, "%.*s:***%.*s",
		         (int)(colon - s), s, (int)(n - (size_t)(at - s)), at);
}

void
config_mask_url(const char *url, char *out, size_t size)
{
	const char *p = url;

	if (size == 0)
		return;
	out[0] = '\0';
	/* Every URL of a list, and what separates them, as it was. */
	while (*p != '\0') {
		size_t sep = strspn(p, ", \t"), n, len = strlen(out);
		snprintf(out + len, size - len, "%.*s", (int)sep, p);
		p += sep;
		n = strcspn(p, ", \t");
		if (n > 0)
			mask_one(p, n, out, size);
		p += n;
	}
}

int
config_broker_url(const struct config *cfg, unsigned i, char *out, size_t size)
{
	const char *p = cfg->broker_url;
	size_t n;

	for (;;) {
		p += strspn(p, ", \t");
		n = strcspn(p, ", \t");
		if (n == 0)
			return -1;
		if (i-- == 0)
			break;
		p += n;
	}
	if (n >= size)
		return -1;
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

unsigned
config_broker_url_count(const struct config *cfg)
{
	char url[CONFIG_STR_MAX];
	unsigned n = 0;

	while (config_broker_url(cfg, n, url, sizeof(url)) == 0)
		n++;
	return n;
}

int
config_events(const struct config *cfg)
{
	return cfg->events_enabled == 0; /* "yes|no" */
}

size_t
config_held_limit(const struct config *cfg, int request)
{
	size_t cap = (size_t)cfg->events_max_held_ids;

	return request ? cap : cap - cap / 10;
}

int64_t
config_events_max_age(const struct config *cfg)
{
	return cfg->events_max_age > 0 ? cfg->events_max_age
	                               : cfg->router_max_delay + 86400000LL;
}

int
config_url_user(const char *url, char *out, size_t size)
{
	struct amqp_connection_info info;
	char copy[CONFIG_STR_MAX];

	/* amqp_parse_url cuts its argument apart: it gets a copy. */
	snprintf(copy, sizeof(copy), "%s", url);
	if (amqp_parse_url(copy, &info) != AMQP_STATUS_OK)
		return -1;
	snprintf(out, size, "%s", info.user != NULL ? info.user : "guest");
	return 0;
}

int
config_broker_user(const struct config *cfg, char *out, size_t size)
{
	char url[CONFIG_STR_MAX];

	if (config_broker_url(cfg, 0, url, sizeof(url)) < 0)
		return -1;
	return config_url_user(url, out, size);
}

int
config_control_user(const struct config *cfg, amqp_bytes_t user)
{
	char buf[CONFIG_STR_MAX];
	const char *list = cfg->events_control_users, *p, *end;
	size_t n;

	if (user.len == 0)
		return 0;
	if (list[0] == '\0') {
		if (config_broker_user(cfg, buf, sizeof(buf)) < 0)
			return 0;
		list = buf;
	}
	for (p = list; *p != '\0'; p = end) {
		p += strspn(p, ", \t");
		end = p + strcspn(p, ", \t");
		n = (size_t)(end - p);
		if (n > 0 && n == user.len && memcmp(p, user.bytes, n) == 0)
			return 1;
	}
	return 0;
}

int64_t
config_unsigned_until(const struct config *cfg)
{
	char why[128];
	int64_t t;

	if (cfg->router_accept_unsigned_until[0] == '\0' ||
	    when_parse_absolute(cfg->router_accept_unsigned_until, &t, why,
	                        sizeof(why)) < 0)
		return 0;
	return t;
}
