/* Which waiting message holds each unique id, per scope (claims.h). */
#include "claims.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* A claim lasts this long past its due time, then it is forgotten. */
#define CLAIM_MARGIN_MS 86400000LL

static void
free_list(void *value)
{
	struct claim *k, *next;

	for (k = value; k != NULL; k = next) {
		next = k->next;
		free(k);
	}
}

void
claims_init(struct claims *c)
{
	idmap_init(&c->map);
	c->n = 0;
}

void
claims_free(struct claims *c)
{
	idmap_free(&c->map, free_list);
	c->n = 0;
}

static int
same(amqp_bytes_t a, const char *b, size_t blen)
{
	return a.len == blen && (blen == 0 || memcmp(a.bytes, b, blen) == 0);
}

/* The claim of scope in the list for one message-id, or NULL. */
static struct claim *
in_scope(struct claim *k, amqp_bytes_t scope)
{
	for (; k != NULL; k = k->next)
		if (same(scope, k->scope, k->scope_len))
			return k;
	return NULL;
}

/* Whether a request by `by` (control: any) may change k's holder. */
static int
may_change(const struct claim *k, amqp_bytes_t by, int control)
{
	return control || k->scope_len == 0 || same(by, k->scope, k->scope_len);
}

/* The time after which a holder due at due is forgotten, saturated. */
static int64_t
margin(int64_t due)
{
	return due > INT64_MAX - CLAIM_MARGIN_MS ? INT64_MAX
	                                         : due + CLAIM_MARGIN_MS;
}

static void
hold(struct claim *k, const struct event *e)
{
	k->id_len = (uint8_t)e->id.len;
	memcpy(k->id, e->id.bytes, e->id.len);
	k->id[e->id.len] = '\0';
	k->due = e->due;
	k->until = margin(e->due);
}

int
claims_new(const struct claims *c, const struct event *e, amqp_bytes_t scope)
{
	return in_scope(idmap_get(&c->map, e->cancel), scope) == NULL;
}

int
claims_add(struct claims *c, const struct event *e, amqp_bytes_t scope,
           struct claim_verdict *v)
{
	void **head = idmap_ref(&c->map, e->cancel), *prev;
	struct claim *k = head != NULL ? in_scope(*head, scope) : NULL;

	memset(v, 0, sizeof(*v));
	if (e->id.len == 0 || e->id.len > CLAIM_ID_MAX ||
	    scope.len > UINT32_MAX)
		return 0; /* not a daemon's claim: nothing to judge */
	if (k == NULL) {
		/* Sized to its scope: scope starts inside sizeof's padding. */
		if ((k = malloc(offsetof(struct claim, scope) + scope.len)) ==
		    NULL)
			return -1;
		memset(k, 0, offsetof(struct claim, scope));
		k->scope_len = (uint32_t)scope.len;
		if (scope.len > 0)
			memcpy(k->scope, scope.bytes, scope.len);
		if (head != NULL) {
			k->next = *head;
			*head = k;
		} else if (idmap_put(&c->map, e->cancel, k, &prev) < 0) {
			free(k);
			return -1;
		}
		c->n++;
		hold(k, e);
		v->won = 1;
		return 0;
	}
	/* The same message's claim again (written twice), or one after
	 * nothing waits with the id any more: it holds. */
	if (same(e->id, k->id, k->id_len) || k->due <= e->at) {
		hold(k, e);
		v->won = 1;
		return 0;
	}
	if (!e->replace) {
		v->lost = 1;
		return 0;
	}
	/* Same scope: a publisher replaces its own message (claims.h). */
	v->replaced = 1;
	memcpy(v->old_id, k->id, sizeof(v->old_id));
	v->old_due = k->due;
	hold(k, e);
	v->won = 1;
	return 0;
}

const struct claim *
claims_holder(const struct claims *c, amqp_bytes_t scope,
              amqp_bytes_t message_id, int64_t now)
{
	const struct claim *k;

	if (c->n == 0 || message_id.len == 0)
		return NULL;
	k = in_scope(idmap_get(&c->map, message_id), scope);
	return k != NULL && k->due > now ? k : NULL;
}

void
claims_cancelled(struct claims *c, amqp_bytes_t message_id, int64_t at,
                 amqp_bytes_t by, int control)
{
	struct claim *k = c->n ? idmap_get(&c->map, message_id) : NULL;

	for (; k != NULL; k = k->next)
		if (may_change(k, by, control) && k->due > at)
			k->due = at;
}

void
claims_rescheduled(struct claims *c, amqp_bytes_t message_id, int64_t due,
                   amqp_bytes_t by, int control)
{
	struct claim *k = c->n ? idmap_get(&c->map, message_id) : NULL;

	for (; k != NULL; k = k->next) {
		if (!may_change(k, by, control))
			continue;
		k->due = due;
		if (margin(due) > k->until)
			k->until = margin(due);
	}
}

struct prune {
	struct claims *c;
	int64_t now;
};

/* Drop the lapsed claims of one message-id; 1 when none is left. */
static int
lapsed(amqp_bytes_t key, void *value, void *ctx)
{
	struct prune *p = ctx;
	struct claim *head = value, **pp = &head, *k;

	while ((k = *pp) != NULL) {
		if (k->until <= p->now) {
			*pp = k->next;
			free(k);
			p->c->n--;
		} else {
			pp = &k->next;
		}
	}
	if (head == NULL)
		return 1;
	if (head != value)
		*idmap_ref(&p->c->map, key) = head;
	return 0;
}

size_t
claims_prune(struct claims *c, int64_t now)
{
	struct prune p = {c, now};

	idmap_each(&c->map, lapsed, &p);
	return c->n;
}
