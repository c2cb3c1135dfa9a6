/* SPDX-License-Identifier: Apache-2.0 */
/* Zones loaded once and kept, for the daemon (zone.h). */
#include "zone.h"

#include <string.h>

void
zone_cache_init(struct zone_cache *c)
{
	memset(c, 0, sizeof(*c));
}

void
zone_cache_free(struct zone_cache *c)
{
	for (int i = 0; i < ZONE_CACHE_MAX; i++)
		if (c->e[i].loaded != 0)
			zone_free(&c->e[i].z);
	memset(c, 0, sizeof(*c));
}

const struct zone *
zone_cached(struct zone_cache *c, const char *name, size_t len, int64_t now,
            char *err, size_t errlen)
{
	struct zone_cached *e = NULL, *room = &c->e[0];
	struct zone fresh;

	for (int i = 0; i < ZONE_CACHE_MAX; i++) {
		struct zone_cached *x = &c->e[i];
		if (x->loaded != 0 && strlen(x->z.name) == len &&
		    memcmp(x->z.name, name, len) == 0) {
			e = x;
			break;
		}
		if (x->loaded == 0 ||
		    (room->loaded != 0 && x->used < room->used))
			room = x;
	}
	if (e != NULL && now - e->loaded < ZONE_CACHE_TTL_MS) {
		e->used = ++c->clock;
		return &e->z;
	}
	c->loads++;
	if (zone_load(&fresh, name, len, NULL, err, errlen) < 0) {
		if (e == NULL)
			return NULL;
		/* The copy it has, until a read succeeds. */
		e->loaded = now;
		e->used = ++c->clock;
		return &e->z;
	}
	if (e == NULL)
		e = room;
	if (e->loaded != 0)
		zone_free(&e->z);
	e->z = fresh;
	e->loaded = now > 0 ? now : 1;
	e->used = ++c->clock;
	return &e->z;
}
