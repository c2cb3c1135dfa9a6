/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The key table: every key of CONFIG_KEYS in config.h, with its section,
 * kind, bounds, default and place in struct config, as data; and the
 * functions that walk it: the defaults, a key looked up, one key's value
 * parsed and stored.  config.c reads the file and calls these.
 */
#include "config_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"

static const struct config_key config_keys[] = {
#define CONFIG_ENTRY(sec, nm, kind, d, l, h, ch, help)                         \
	{#sec,                                                                 \
	 #nm,                                                                  \
	 CONFIG_KIND_##kind,                                                   \
	 d,                                                                    \
	 l,                                                                    \
	 h,                                                                    \
	 ch,                                                                   \
	 offsetof(struct config, sec##_##nm),                                  \
	 offsetof(struct config, sec##_##nm##_line)},
    CONFIG_KEYS(CONFIG_ENTRY)
#undef CONFIG_ENTRY
};

#define CONFIG_NKEYS (sizeof(config_keys) / sizeof(config_keys[0]))

const struct config_key *
config_key_find(const char *section, const char *name, int *known_section)
{
	const struct config_key *k = NULL;

	*known_section = 0;
	for (size_t i = 0; i < CONFIG_NKEYS; i++) {
		if (strcmp(config_keys[i].section, section) != 0)
			continue;
		*known_section = 1;
		if (strcmp(config_keys[i].name, name) == 0)
			k = &config_keys[i];
	}
	return k;
}

int
config_set(struct config *cfg, const struct config_key *k, const char *value,
           const char **why)
{
	char *field = (char *)cfg + k->offset;
	static char whybuf[128];
	int64_t ms;
	uint64_t u;
	char *end;

	switch (k->kind) {
	case CONFIG_KIND_STR:
		if (strlen(value) < (size_t)k->lo) {
			*why = "must not be empty";
			return -1;
		}
		if (strlen(value) > (size_t)k->hi) {
			snprintf(whybuf, sizeof(whybuf),
			         "longer than %" PRId64 " characters", k->hi);
			*why = whybuf;
			return -1;
		}
		memcpy(field, value, strlen(value) + 1);
		return 0;
	case CONFIG_KIND_DUR:
		if (duration_parse(value, strlen(value), DURATION_BARE_REJECT,
		                   &ms, why) < 0)
			return -1;
		if (ms < k->lo || ms > k->hi) {
			char lo[32], hi[32];
			duration_format(k->lo, lo, sizeof(lo));
			duration_format(k->hi, hi, sizeof(hi));
			snprintf(whybuf, sizeof(whybuf),
			         "out of range (%s to %s)", lo, hi);
			*why = whybuf;
			return -1;
		}
		memcpy(field, &ms, sizeof(ms));
		return 0;
	case CONFIG_KIND_UINT:
		errno = 0;
		if (value[0] < '0' || value[0] > '9') {
			*why = "not a whole number";
			return -1;
		}
		u = strtoull(value, &end, 10);
		if (*end != '\0') {
			*why = "not a whole number";
			return -1;
		}
		if (errno == ERANGE || u < (uint64_t)k->lo ||
		    u > (uint64_t)k->hi) {
			snprintf(whybuf, sizeof(whybuf),
			         "out of range (%" PRId64 " to %" PRId64 ")",
			         k->lo, k->hi);
			*why = whybuf;
			return -1;
		}
		memcpy(field, &u, sizeof(u));
		return 0;
	case CONFIG_KIND_ENUM: {
		const char *c = k->choices;
		size_t n = strlen(value);
		int index = 0;
		for (;;) {
			size_t len = strcspn(c, "|");
			if (len == n && memcmp(c, value, n) == 0) {
				memcpy(field, &index, sizeof(index));
				return 0;
			}
			if (c[len] == '\0')
				break;
			c += len + 1;
			index++;
		}
		snprintf(whybuf, sizeof(whybuf), "must be one of %s",
		         k->choices);
		*why = whybuf;
		return -1;
	}
	}
	*why = "unknown kind";
	return -1;
}

void
config_defaults(struct config *cfg)
{
	const char *why;

	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < CONFIG_NKEYS; i++)
		if (config_set(cfg, &config_keys[i], config_keys[i].def, &why) <
		    0)
			abort(); /* a bad default is a broken build */
	retry_defaults(&cfg->retry.def);
	pace_init(&cfg->pace);
}

int
config_line(const struct config *cfg, const char *sec, const char *name)
{
	for (size_t i = 0; i < CONFIG_NKEYS; i++)
		if (strcmp(config_keys[i].section, sec) == 0 &&
		    strcmp(config_keys[i].name, name) == 0)
			return *(const int *)((const char *)cfg +
			                      config_keys[i].line_offset);
	return 0;
}
