/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The config's private header: what its three files share.  Not part of
 * the library's API (include/config.h is); only src/config*.c include it.
 *
 *   config_keys.c    the key table made from CONFIG_KEYS, and the
 *                    functions that walk it: defaults, one key's value
 *   config.c         the INI file: inih's handler, line numbers, errors
 *                    as FILE:LINE: key: why, and the checks across keys
 *   config_access.c  what the rest of cascade asks of a loaded config:
 *                    broker URLs and users, masking, targets, shards
 */
#ifndef CASCADE_CONFIG_INT_H
#define CASCADE_CONFIG_INT_H

#include <stddef.h>
#include <stdint.h>

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
