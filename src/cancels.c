/* The cancellation requests held by id (cancels.h). */
#include "cancels.h"

#include <stdlib.h>

void
cancels_init(struct cancels *c)
{
	idmap_init(&c->map);
}

void
cancels_free(struct cancels *c)
{
	idmap_free(&c->map, free);
}

int
cancels_add(struct cancels *c, amqp_bytes_t id, int park, int64_t until)
{
	struct cancel *n, *old = idmap_get(&c->map, id);
	void *prev;

	if (old != NULL) {
		old->park = park;
		if (until > old->until)
			old->until = until;
		return 0;
	}
	if ((n = malloc(sizeof(*n))) == NULL)
		return -1;
	n->park = park;
	n->until = until;
	if (idmap_put(&c->map, id, n, &prev) < 0) {
		free(n);
		return -1;
	}
	return 0;
}

const struct cancel *
cancels_find(const struct cancels *c, amqp_bytes_t message_id,
             amqp_bytes_t cascade_id, int64_t now)
{
	const struct cancel *k = NULL;

	if (c->map.n == 0)
		return NULL;
	if (message_id.len > 0)
		k = idmap_get(&c->map, message_id);
	if ((k == NULL || k->until <= now) && cascade_id.len > 0)
		k = idmap_get(&c->map, cascade_id);
	return k != NULL && k->until > now ? k : NULL;
}

static int
lapsed(amqp_bytes_t key, void *value, void *ctx)
{
	struct cancel *k = value;

	(void)key;
	if (k->until > *(const int64_t *)ctx)
		return 0;
	free(k);
	return 1;
}

size_t
cancels_prune(struct cancels *c, int64_t now)
{
	idmap_each(&c->map, lapsed, &now);
	return c->map.n;
}
