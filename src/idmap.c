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
	return s->len == key.len &&
	       (key.len == 0 || memcmp(s->key, key.bytes, key.len) == 0);
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
		amqp_bytes_t k;
		if (s->key == NULL)
			continue;
		k.bytes = s->key;
		k.len = s->len;
		t = find(m, k);
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

int
idmap_put(struct idmap *m, amqp_bytes_t key, void *value, void **old)
{
	struct idmap_slot *s;
	char *k;

	*old = NULL;
	if ((m->n + 1) * 2 > m->cap && grow(m) < 0)
		return -1;
	s = find(m, key);
	if (s->key != NULL) {
		*old = s->value;
		s->value = value;
		return 0;
	}
	k = malloc(key.len ? key.len : 1);
	if (k == NULL)
		return -1;
	if (key.len)
		memcpy(k, key.bytes, key.len);
	s->key = k;
	s->len = key.len;
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
		amqp_bytes_t k;
		j = (j + 1) & (m->cap - 1);
		if (m->slot[j].key == NULL)
			return;
		k.bytes = m->slot[j].key;
		k.len = m->slot[j].len;
		home = (size_t)hash(k) & (m->cap - 1);
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
		amqp_bytes_t k;
		if (s->key == NULL) {
			i++;
			continue;
		}
		k.bytes = s->key;
		k.len = s->len;
		if (fn(k, s->value, ctx))
			remove_at(m, i);
		else
			i++;
	}
}
