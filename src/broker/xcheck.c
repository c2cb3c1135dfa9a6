/* SPDX-License-Identifier: Apache-2.0 */
/* Does a target exchange exist: see xcheck.h. */
#include "xcheck.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headers.h"

void
xcheck_init(struct xcheck *x)
{
	memset(x, 0, sizeof(*x));
	TAILQ_INIT(&x->lookups);
}

static int
name_eq(const char *name, size_t len, amqp_bytes_t b)
{
	amqp_bytes_t a = {len, (void *)(uintptr_t)name};

	return headers_bytes_eq(a, b);
}

enum xcheck_answer
xcheck_find(const struct xcheck *x, amqp_bytes_t name, int64_t now,
            const char **why)
{
	*why = NULL;
	for (unsigned i = 0; i < XCHECK_CACHE; i++) {
		const struct xcheck_entry *e = &x->cache[i];
		if (e->until <= now || !name_eq(e->name, e->len, name))
			continue;
		if (e->refused[0] == '\0')
			return XCHECK_EXISTS;
		*why = e->refused;
		return XCHECK_REFUSED;
	}
	return XCHECK_UNKNOWN;
}

void
xcheck_add(struct xcheck *x, amqp_bytes_t name, const char *why, int64_t now)
{
	struct xcheck_entry *e = NULL;

	if (name.len > sizeof(e->name))
		return; /* AMQP names are at most 255 bytes */
	/* An answer replaces the older one about the same exchange. */
	for (unsigned i = 0; i < XCHECK_CACHE && e == NULL; i++)
		if (name_eq(x->cache[i].name, x->cache[i].len, name))
			e = &x->cache[i];
	if (e == NULL)
		e = &x->cache[x->next++ % XCHECK_CACHE];
	if (name.len > 0)
		memcpy(e->name, name.bytes, name.len);
	e->len = name.len;
	e->until = now + XCHECK_TTL_MS;
	snprintf(e->refused, sizeof(e->refused), "%s", why ? why : "");
}

struct xcheck_lookup *
xcheck_wait(struct xcheck *x, amqp_bytes_t name, struct outbox_item *it,
            int *oom)
{
	struct xcheck_lookup *lk;

	*oom = 0;
	TAILQ_FOREACH(lk, &x->lookups, link) {
		if (name_eq(lk->name, lk->len, name)) {
			TAILQ_INSERT_TAIL(&lk->waiters, it, link);
			return NULL;
		}
	}
	if (name.len > sizeof(lk->name) ||
	    (lk = calloc(1, sizeof(*lk))) == NULL) {
		*oom = 1;
		return NULL;
	}
	if (name.len > 0)
		memcpy(lk->name, name.bytes, name.len);
	lk->len = name.len;
	TAILQ_INIT(&lk->waiters);
	TAILQ_INSERT_TAIL(&lk->waiters, it, link);
	TAILQ_INSERT_TAIL(&x->lookups, lk, link);
	return lk;
}

struct xcheck_lookup *
xcheck_answered(struct xcheck *x)
{
	struct xcheck_lookup *lk = TAILQ_FIRST(&x->lookups);

	if (lk == NULL || !lk->sent)
		return NULL;
	TAILQ_REMOVE(&x->lookups, lk, link);
	return lk;
}

void
xcheck_free(struct xcheck_lookup *lk)
{
	free(lk);
}

struct xcheck_lookup *
xcheck_unsent(const struct xcheck *x)
{
	struct xcheck_lookup *lk;

	TAILQ_FOREACH(lk, &x->lookups, link)
		if (!lk->sent)
			return lk;
	return NULL;
}

void
xcheck_unsend(struct xcheck *x)
{
	struct xcheck_lookup *lk;

	TAILQ_FOREACH(lk, &x->lookups, link)
		lk->sent = 0;
}

unsigned
xcheck_waiting(const struct xcheck *x)
{
	const struct xcheck_lookup *lk;
	unsigned n = 0;

	TAILQ_FOREACH(lk, &x->lookups, link)
		n += outbox_count(&lk->waiters);
	return n;
}

void
xcheck_drop(struct xcheck *x, outbox_free_fn free_item, void *ctx)
{
	struct xcheck_lookup *lk;

	while ((lk = TAILQ_FIRST(&x->lookups)) != NULL) {
		TAILQ_REMOVE(&x->lookups, lk, link);
		outbox_drop_list(&lk->waiters, free_item, ctx);
		free(lk);
	}
}
