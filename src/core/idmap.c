/* SPDX-License-Identifier: Apache-2.0 */
/* Byte-string keys to pointers: see idmap.h. */
#include "idmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void
idmap_init(struct idmap *m)
{
	memset(m, 0, sizeof(*m));
}

/*
 * A key's length: one byte below KEY_LONG, else KEY_LONG and four bytes
 * (host order).  Message ids are at most 255 bytes, so nearly every key
 * costs one byte more than itself.
 */
#define KEY_LONG 0xff

static size_t
key_head(size_t len)
{
	return len < KEY_LONG ? 1 : 1 + sizeof(uint32_t);
}

static amqp_bytes_t
key_of(const unsigned char *k)
{
	amqp_bytes_t b;
	uint32_t n;

	if (k[0] < KEY_LONG) {
		b.len = k[0];
		b.bytes = (void *)(k + 1);
		return b;
	}
	memcpy(&n, k + 1, sizeof(n));
	b.len = n;
	b.bytes = (void *)(k + 1 + sizeof(n));
	return b;
}

void
idmap_free(struct idmap *m, void (*free_value)(void *))
{
	for (size_t i = 0; i < m->cap; i++) {
		if (m->slot[i].key == NULL)
			continue;
		free(m->slot[i].key);
		if (free_value != NULL)
			free_value(m->slot[i].value);
	}
	free(m->slot);
	memset(m, 0, sizeof(*m));
}

/*
 * FNV-1a from a per-process seed: ids come from publishers, and a fixed
 * hash would let one choose ids that all collide.
 */
static uint64_t
hash(amqp_bytes_t key)
{
	static uint64_t seed;
	const unsigned char *p = key.bytes;
	uint64_t h;

	if (seed == 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		seed = ((uint64_t)ts.tv_nsec << 20 ^ (uint64_t)ts.tv_sec ^
		        (uint64_t)getpid() << 40) |
		       1;
	}
	h = UINT64_C(14695981039346656037) ^ seed;

	for (size_t i = 0; i < key.len; i++) {
		h ^= p[i];
		h *= UINT64_C(1099511628211);
	}
	return h;
}

static int
same(const struct idmap_slot *s, amqp_bytes_t key)
{
	amqp_bytes_t k = key_of(s->key);

	return k.len == key.len &&
	       (key.len == 0 || memcmp(k.bytes, key.bytes, key.len) == 0);
}

/* The slot holding key, or the empty slot where it would go. */
static struct idmap_slot *
find(const struct idmap *m, amqp_bytes_t key)
{
	size_t i = (size_t)hash(key) & (m->cap - 1);

	while (m->slot[i].key != NULL && !same(&m->slot[i], key))
		i = (i + 1) & (m->cap - 1);
	return &m->slot[i];
}

static int
grow(struct idmap *m)
{
	struct idmap old = *m;
	size_t cap = m->cap ? m->cap * 2 : 16;

	m->slot = calloc(cap, sizeof(*m->slot));
	if (m->slot == NULL) {
		*m = old;
		return -1;
	}
	m->cap = cap;
	for (size_t i = 0; i < old.cap; i++) {
		struct idmap_slot *s = &old.slot[i], *t;
		if (s->key == NULL)
			continue;
		t = find(m, key_of(s->key));
		*t = *s;
	}
	free(old.slot);
	return 0;
}

void *
idmap_get(const struct idmap *m, amqp_bytes_t key)
{
	const struct idmap_slot *s;

	if (m->n == 0)
		return NULL;
	s = find(m, key);
	return s->key != NULL ? s->value : NULL;
}

void **
idmap_ref(struct idmap *m, amqp_bytes_t key)
{
	struct idmap_slot *s;

	if (m->n == 0)
		return NULL;
	s = find(m, key);
	return s->key != NULL ? &s->value : NULL;
}

int
idmap_put(struct idmap *m, amqp_bytes_t key, void *value, void **old)
{
	struct idmap_slot *s;
	unsigned char *k;
	size_t head = key_head(key.len);

	*old = NULL;
	if (key.len > UINT32_MAX)
		return -1;
	if ((m->n + 1) * 2 > m->cap && grow(m) < 0)
		return -1;
	s = find(m, key);
	if (s->key != NULL) {
		*old = s->value;
		s->value = value;
		return 0;
	}
	k = malloc(head + key.len);
	if (k == NULL)
		return -1;
	if (head == 1) {
		k[0] = (unsigned char)key.len;
	} else {
		uint32_t n = (uint32_t)key.len;
		k[0] = KEY_LONG;
		memcpy(k + 1, &n, sizeof(n));
	}
	if (key.len)
		memcpy(k + head, key.bytes, key.len);
	s->key = k;
	s->value = value;
	m->n++;
	return 0;
}

/* Remove slot i and move back the entries after it that probed past it. */
static void
remove_at(struct idmap *m, size_t i)
{
	size_t j = i, home;

	free(m->slot[i].key);
	m->slot[i].key = NULL;
	m->n--;
	for (;;) {
		j = (j + 1) & (m->cap - 1);
		if (m->slot[j].key == NULL)
			return;
		home = (size_t)hash(key_of(m->slot[j].key)) & (m->cap - 1);
		/* Stays when its home lies cyclically in (i, j]. */
		if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		m->slot[i] = m->slot[j];
		m->slot[j].key = NULL;
		i = j;
	}
}

void *
idmap_del(struct idmap *m, amqp_bytes_t key)
{
	struct idmap_slot *s;
	void *v;

	if (m->n == 0)
		return NULL;
	s = find(m, key);
	if (s->key == NULL)
		return NULL;
	v = s->value;
	remove_at(m, (size_t)(s - m->slot));
	return v;
}

void
idmap_each(struct idmap *m, int (*fn)(amqp_bytes_t key, void *value, void *ctx),
           void *ctx)
{
	size_t i = 0;

	/* Removing moves later entries back into i: look at i again. */
	while (i < m->cap) {
		struct idmap_slot *s = &m->slot[i];
		if (s->key == NULL) {
			i++;
			continue;
		}
		if (fn(key_of(s->key), s->value, ctx))
			remove_at(m, i);
		else
			i++;
	}
}

size_t
idmap_walk(struct idmap *m, size_t *cursor, size_t slots,
           int (*fn)(amqp_bytes_t key, void *value, void *ctx), void *ctx)
{
	size_t i = *cursor, seen = 0;

	while (i < m->cap && seen < slots) {
		struct idmap_slot *s = &m->slot[i++];
		seen++;
		if (s->key != NULL && fn(key_of(s->key), s->value, ctx))
			break;
	}
	*cursor = i < m->cap ? i : 0;
	return seen;
}
