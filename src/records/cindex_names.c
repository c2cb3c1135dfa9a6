/* SPDX-License-Identifier: Apache-2.0 */
/* cindex: the interned targets and users of the index (cindex_int.h). */
#include "cindex_int.h"

#include <stdlib.h>
#include <string.h>

/* ----- interned names: targets and users ----- */

int
cindex_names_init(struct cindex_names *t)
{
	memset(t, 0, sizeof(*t));
	t->max = CINDEX_MAX_NAMES;
	if ((t->v = calloc(16, sizeof(*t->v))) == NULL)
		return -1;
	t->cap = 16;
	t->n = 1; /* v[0]: the empty name */
	return 0;
}

void
cindex_names_free(struct cindex_names *t)
{
	for (uint32_t i = 1; i < t->n; i++)
		if (t->v[i].count > 0)
			free(t->v[i].s);
	free(t->v);
	free(t->hash);
	memset(t, 0, sizeof(*t));
}

amqp_bytes_t
cindex_name_bytes(const struct cindex_names *t, uint32_t i)
{
	return (amqp_bytes_t){t->v[i].len, t->v[i].s};
}

static void
cindex_names_place(struct cindex_names *t, uint32_t *h, uint32_t hcap,
                   uint32_t i, uint64_t seed)
{
	size_t k =
	    (size_t)cindex_fnv(cindex_name_bytes(t, i), seed) & (hcap - 1);

	while (h[k] != 0)
		k = (k + 1) & (hcap - 1);
	h[k] = i + 1;
}

/*
 * The index of name b, counted once more; a new one is copied in.
 * UINT32_MAX out of memory or when t->max names are live.
 */
uint32_t
cindex_intern(struct cindex_names *t, amqp_bytes_t b, uint64_t seed,
              uint64_t *live)
{
	uint32_t i, mask;
	size_t k;

	if (b.len == 0)
		return 0;
	if (t->hcap != 0) {
		mask = t->hcap - 1;
		for (k = (size_t)cindex_fnv(b, seed) & mask; t->hash[k] != 0;
		     k = (k + 1) & mask)
			if (cindex_bytes_eq(
			        cindex_name_bytes(t, t->hash[k] - 1), b)) {
				t->v[t->hash[k] - 1].count++;
				return t->hash[k] - 1;
			}
	}
	if (*live >= t->max)
		return UINT32_MAX;
	if ((uint64_t)(*live + 1) * 2 > t->hcap) {
		uint32_t ncap = t->hcap ? t->hcap * 2 : 64, *h;
		if ((h = calloc(ncap, sizeof(*h))) == NULL)
			return UINT32_MAX;
		for (uint32_t j = 0; j < t->hcap; j++)
			if (t->hash[j] != 0)
				cindex_names_place(t, h, ncap, t->hash[j] - 1,
				                   seed);
		free(t->hash);
		t->hash = h;
		t->hcap = ncap;
	}
	if (t->free_head == 0 && t->n == t->cap) {
		struct cindex_name *v = realloc(t->v, t->cap * 2 * sizeof(*v));
		if (v == NULL)
			return UINT32_MAX;
		t->v = v;
		t->cap *= 2;
	}
	i = t->free_head ? t->free_head - 1 : t->n;
	if ((t->v[i].s = malloc(b.len)) == NULL)
		return UINT32_MAX;
	if (t->free_head)
		t->free_head = t->v[i].len;
	else
		t->n++;
	memcpy(t->v[i].s, b.bytes, b.len);
	t->v[i].len = (uint32_t)b.len;
	t->v[i].count = 1;
	cindex_names_place(t, t->hash, t->hcap, i, seed);
	(*live)++;
	return i;
}

/* One entry fewer names i; the last one frees it. */
void
cindex_unname(struct cindex_names *t, uint32_t i, uint64_t seed, uint64_t *live)
{
	uint32_t mask = t->hcap - 1;
	size_t k, j;

	if (i == 0 || --t->v[i].count > 0)
		return;
	k = (size_t)cindex_fnv(cindex_name_bytes(t, i), seed) & mask;
	while (t->hash[k] != i + 1)
		k = (k + 1) & mask;
	j = k;
	for (;;) {
		size_t home;
		j = (j + 1) & mask;
		if (t->hash[j] == 0)
			break;
		home = (size_t)cindex_fnv(cindex_name_bytes(t, t->hash[j] - 1),
		                          seed) &
		       mask;
		if ((j > k && (home <= k || home > j)) ||
		    (j < k && home <= k && home > j)) {
			t->hash[k] = t->hash[j];
			k = j;
		}
	}
	t->hash[k] = 0;
	free(t->v[i].s);
	t->v[i].s = NULL;
	t->v[i].len = t->free_head;
	t->free_head = i + 1;
	(*live)--;
}

/* A target's name: [u8 exchange length][exchange][routing key]. */
amqp_bytes_t
cindex_target_key(unsigned char buf[512], amqp_bytes_t ex, amqp_bytes_t key)
{
	buf[0] = (unsigned char)ex.len;
	if (ex.len)
		memcpy(buf + 1, ex.bytes, ex.len);
	if (key.len)
		memcpy(buf + 1 + ex.len, key.bytes, key.len);
	/* The default exchange with no key: the empty name, index 0. */
	if (ex.len == 0 && key.len == 0)
		return amqp_empty_bytes;
	return (amqp_bytes_t){1 + ex.len + key.len, buf};
}

uint32_t
cindex_name_find(const struct cindex_names *t, amqp_bytes_t b, uint64_t seed)
{
	uint32_t mask = t->hcap - 1;

	if (b.len == 0)
		return 0;
	if (t->hcap == 0)
		return UINT32_MAX;
	for (size_t k = (size_t)cindex_fnv(b, seed) & mask; t->hash[k] != 0;
	     k = (k + 1) & mask)
		if (cindex_bytes_eq(cindex_name_bytes(t, t->hash[k] - 1), b))
			return t->hash[k] - 1;
	return UINT32_MAX;
}
