/* Which waiting message holds each unique id (claims.h). */
#include "claims.h"

#include <stdlib.h>
#include <string.h>

/* A claim lasts this long past its due time, then it is forgotten. */
#define CLAIM_MARGIN_MS 86400000LL

void
claims_init(struct claims *c)
{
	idmap_init(&c->map);
}

void
claims_free(struct claims *c)
{
	idmap_free(&c->map, free);
}

static int
same(amqp_bytes_t a, const char *b, size_t blen)
{
	return a.len == blen && (blen == 0 || memcmp(a.bytes, b, blen) == 0);
}

static void
hold(struct claim *k, const struct event *e, amqp_bytes_t owner)
{
	size_t n =
	    e->id.len < sizeof(k->id) - 1 ? e->id.len : sizeof(k->id) - 1;

	memcpy(k->id, e->id.bytes, n);
	k->id[n] = '\0';
	k->due = e->due;
	k->until = e->due + CLAIM_MARGIN_MS;
	k->owner_len =
	    owner.len < sizeof(k->owner) - 1 ? owner.len : sizeof(k->owner) - 1;
	if (k->owner_len > 0)
		memcpy(k->owner, owner.bytes, k->owner_len);
	k->owner[k->owner_len] = '\0';
}

int
claims_add(struct claims *c, const struct event *e, amqp_bytes_t owner,
           int control, struct claim_verdict *v)
{
	struct claim *k = idmap_get(&c->map, e->cancel);
	void *prev;

	memset(v, 0, sizeof(*v));
	if (k == NULL) {
		if ((k = calloc(1, sizeof(*k))) == NULL)
			return -1;
		if (idmap_put(&c->map, e->cancel, k, &prev) < 0) {
			free(k);
			return -1;
		}
		hold(k, e, owner);
		v->won = 1;
		return 0;
	}
	/* The same message's claim again (written twice): it holds on. */
	if (same(e->id, k->id, strlen(k->id))) {
		hold(k, e, owner);
		v->won = 1;
		return 0;
	}
	if (k->due <= e->at) { /* nothing waits with the id any more */
		hold(k, e, owner);
		v->won = 1;
		return 0;
	}
	if (!e->replace)
		return 0;
	if (!control && k->owner_len > 0 &&
	    !same(owner, k->owner, k->owner_len)) {
		v->refused = 1;
		return 0;
	}
	v->replaced = 1;
	memcpy(v->old_id, k->id, sizeof(v->old_id));
	v->old_due = k->due;
	hold(k, e, owner);
	v->won = 1;
	return 0;
}

const struct claim *
claims_holder(const struct claims *c, amqp_bytes_t message_id, int64_t now)
{
	const struct claim *k;

	if (c->map.n == 0 || message_id.len == 0)
		return NULL;
	k = idmap_get(&c->map, message_id);
	return k != NULL && k->due > now ? k : NULL;
}

/* The holder of message_id, when by may change it (cancels.h). */
static struct claim *
claims_changed(struct claims *c, amqp_bytes_t message_id, amqp_bytes_t by,
               int control)
{
	struct claim *k = c->map.n ? idmap_get(&c->map, message_id) : NULL;

	if (k == NULL || control || k->owner_len == 0 ||
	    (by.len == k->owner_len && memcmp(by.bytes, k->owner, by.len) == 0))
		return k;
	return NULL; /* refused: the holder stays as it is */
}

void
claims_cancelled(struct claims *c, amqp_bytes_t message_id, int64_t at,
                 amqp_bytes_t by, int control)
{
	struct claim *k = claims_changed(c, message_id, by, control);

	if (k != NULL && k->due > at)
		k->due = at;
}

void
claims_rescheduled(struct claims *c, amqp_bytes_t message_id, int64_t due,
                   amqp_bytes_t by, int control)
{
	struct claim *k = claims_changed(c, message_id, by, control);

	if (k != NULL) {
		k->due = due;
		if (due + CLAIM_MARGIN_MS > k->until)
			k->until = due + CLAIM_MARGIN_MS;
	}
}

static int
lapsed(amqp_bytes_t key, void *value, void *ctx)
{
	struct claim *k = value;

	(void)key;
	if (k->until > *(const int64_t *)ctx)
		return 0;
	free(k);
	return 1;
}

size_t
claims_prune(struct claims *c, int64_t now)
{
	idmap_each(&c->map, lapsed, &now);
	return c->map.n;
}
