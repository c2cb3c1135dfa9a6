/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the console's index (cindex.h) share: reaching an
 * entry by slot, a string in the arena, the order's comparison and seek.
 * cindex.c holds the storage and the fold and calls cindex_order.c (the
 * due order) and cindex_names.c (the interned targets and users), which
 * call nothing of it; cindex_query.c reads them all.  Only those files
 * include it.
 */
#ifndef CASCADE_CINDEX_INT_H
#define CASCADE_CINDEX_INT_H

#include "cindex.h"

#include <string.h>

static inline struct cindex_entry *
cindex_at(const struct cindex *ix, uint32_t slot)
{
	return &ix->slab[slot >> 16][slot & (CINDEX_SLAB - 1)];
}

/* The string at arena ref r: its bytes (r 0: empty). */
static inline amqp_bytes_t
cindex_str(const struct cindex *ix, uint32_t r)
{
	const unsigned char *p;

	if (r == 0)
		return amqp_empty_bytes;
	p = ix->chunk[r >> 20] + (r & (CINDEX_CHUNK - 1));
	return (amqp_bytes_t){p[0], (void *)(p + 1)};
}

/* A per-index seed: ids and message-ids come from publishers, and a fixed
 * hash would let one choose ids that all collide. */
static inline uint64_t
cindex_mix(uint64_t x, uint64_t seed)
{
	x ^= seed;
	x ^= x >> 33;
	x *= UINT64_C(0xff51afd7ed558ccd);
	x ^= x >> 33;
	x *= UINT64_C(0xc4ceb9fe1a85ec53);
	return x ^ (x >> 33);
}

static inline uint64_t
cindex_fnv(amqp_bytes_t b, uint64_t seed)
{
	const unsigned char *p = b.bytes;
	uint64_t h = UINT64_C(14695981039346656037) ^ seed;

	for (size_t i = 0; i < b.len; i++) {
		h ^= p[i];
		h *= UINT64_C(1099511628211);
	}
	return cindex_mix(h, 0);
}

static inline int
cindex_bytes_eq(amqp_bytes_t a, amqp_bytes_t b)
{
	return a.len == b.len &&
	       (a.len == 0 || memcmp(a.bytes, b.bytes, a.len) == 0);
}

/* An entry's cascade id as bytes, written into buf when numeric. */
amqp_bytes_t cindex_id_bytes(const struct cindex *ix,
                             const struct cindex_entry *en, char buf[17]);

/* -1, 0, 1: a before, with, after b in the order (due, seen, id). */
int cindex_cmp(const struct cindex *ix, const struct cindex_entry *a,
               const struct cindex_entry *b);

/*
 * Where the first entry due at or after t is: block *b, index *i (*b ==
 * nblock when none); and how many come before it.
 */
uint32_t cindex_seek_due(const struct cindex *ix, int64_t t, uint32_t *b,
                         uint32_t *i);

/* The position of rank k (k < count): block *b, index *i. */
void cindex_seek_rank(const struct cindex *ix, uint32_t k, uint32_t *b,
                      uint32_t *i);

/* The slot of id in the id hash (a message or an end), or UINT32_MAX. */
uint32_t cindex_find_id(const struct cindex *ix, amqp_bytes_t id);

/* The slots with message-id mid: calls fn on each until it returns 1. */
void cindex_each_mid(const struct cindex *ix, amqp_bytes_t mid,
                     int (*fn)(uint32_t slot, void *ctx), void *ctx);

/* The order (cindex_order.c): put slot s in, -1 out of memory; take it
 * out (it must be in, with the key it went in with). */
int cindex_order_add(struct cindex *ix, uint32_t s);
void cindex_order_del(struct cindex *ix, uint32_t s);

/* The names (cindex_names.c).  -1 out of memory. */
int cindex_names_init(struct cindex_names *t);
void cindex_names_free(struct cindex_names *t);
amqp_bytes_t cindex_name_bytes(const struct cindex_names *t, uint32_t i);

/*
 * The index of name b, counted once more (the empty name: 0, never
 * counted); a new one is copied in and *live counts it.  UINT32_MAX out
 * of memory or when t->max names are live.
 */
uint32_t cindex_intern(struct cindex_names *t, amqp_bytes_t b, uint64_t seed,
                       uint64_t *live);

/* The index of name b, UINT32_MAX when none is held. */
uint32_t cindex_name_find(const struct cindex_names *t, amqp_bytes_t b,
                          uint64_t seed);

/* One entry fewer names i; the last one frees it. */
void cindex_unname(struct cindex_names *t, uint32_t i, uint64_t seed,
                   uint64_t *live);

/* A target's name in buf[512]: [u8 exchange length][exchange][key];
 * the empty name for the default exchange with no key. */
amqp_bytes_t cindex_target_key(unsigned char buf[512], amqp_bytes_t ex,
                               amqp_bytes_t key);

#endif
