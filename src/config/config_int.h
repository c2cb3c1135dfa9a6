/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The config's private header: what its five files share.  Not part of
 * the library's API (include/config.h is); only src/config*.c include it.
 *
 *   config_keys.c    the key table made from CONFIG_KEYS, and the
 *                    functions that walk it: defaults, one key's value
 *   config.c         the INI file: inih's handler, line numbers, the
 *                    [retry.QUEUE] and [target NAME] sections
 *   config_error.c   a parse's errors as FILE:LINE: key: why
 *   config_check.c   the checks across keys and the environment, once
 *                    the file is read
 *   config_access.c  what the rest of cascade asks of a loaded config:
 *                    broker URLs and users, masking, targets, shards
 */
#ifndef CASCADE_CONFIG_INT_H
#define CASCADE_CONFIG_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"

enum config_kind {
	CONFIG_KIND_STR,
	CONFIG_KIND_DUR,
	CONFIG_KIND_UINT,
	CONFIG_KIND_ENUM,
};

/* One key of CONFIG_KEYS, and where struct config keeps it and its line. */
struct config_key {
	const char *section;
	const char *name;
	enum config_kind kind;
	const char *def;
	int64_t lo, hi;
	const char *choices;
	size_t offset;
	size_t line_offset;
};

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

/*
 * One error of the parse p, at line of the file (0: none, for the
 * environment) and key (NULL: none): counted, and added to p's buffer
 * while it has room.
 */
void config_error(struct config_parse *p, int line, const char *key,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Checks that need more than one key, or the environment. */
void config_check(struct config_parse *p);

/*
 * The key section.name, or NULL; *known_section says whether any key is in
 * that section.
 */
const struct config_key *config_key_find(const char *section, const char *name,
                                         int *known_section);

/* Set one key from text; *why says what is wrong when it returns -1. */
int config_set(struct config *cfg, const struct config_key *k,
               const char *value, const char **why);

/* The line section.name was set on; 0 when it has its default. */
int config_line(const struct config *cfg, const char *sec, const char *name);

/* Each pattern of allowed_targets, split at commas and blanks. */
int config_next_pattern(const char **s, char *out, size_t size);

/*
 * [topology] consume_shards: shard numbers and ranges ("0-3, 7"), apart by
 * commas or blanks, each below shards, into *mask; empty means every one.
 */
int config_shard_list(const char *s, unsigned shards, uint64_t *mask,
                      const char **why);

#endif
