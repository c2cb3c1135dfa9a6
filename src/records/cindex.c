/* SPDX-License-Identifier: Apache-2.0 */
/* cindex: the console's index of what waits (cindex.h): storage and fold. */
#include "cindex_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Whether b is 16 lowercase hexadecimal digits (a cascade id), into *v.
 * Lowercase only, so that the number orders and prints as the bytes. */
static int
cindex_hex16(amqp_bytes_t b, uint64_t *v)
{
	const unsigned char *p = b.bytes;
	uint64_t x = 0;

	if (b.len != 16)
		return 0;
	for (int i = 0; i < 16; i++) {
		if (p[i] >= '0' && p[i] <= '9')
			x = x << 4 | (uint64_t)(p[i] - '0');
		else if (p[i] >= 'a' && p[i] <= 'f')
			x = x << 4 | (uint64_t)(p[i] - 'a' + 10);
		else
			return 0;
	}
	*v = x;
	return 1;
}

/* ----- the arena ----- */

/* s into the arena: its ref, 0 out of memory (s is 1 to 255 bytes). */
static uint32_t
cindex_arena_put(struct cindex *ix, amqp_bytes_t s)
{
	unsigned char *p;

	if (ix->nchunk == 0 || ix->chunk_fill + 1 + s.len > CINDEX_CHUNK) {
		if (ix->nchunk == ix->chunk_cap) {
			uint32_t cap = ix->chunk_cap ? ix->chunk_cap * 2 : 8;
			unsigned char **c;
			if (cap > 4096 ||
			    (c = realloc(ix->chunk, cap * sizeof(*c))) == NULL)
				return 0;
			ix->chunk = c;
			ix->chunk_cap = cap;
		}
		if ((ix->chunk[ix->nchunk] = malloc(CINDEX_CHUNK)) == NULL)
			return 0;
		/* Offset 0 of chunk 0 is never handed out: ref 0 is none. */
		ix->chunk_fill = ix->nchunk == 0 ? 1 : 0;
		ix->nchunk++;
		ix->stats.arena_bytes += CINDEX_CHUNK;
	}
	p = ix->chunk[ix->nchunk - 1] + ix->chunk_fill;
	p[0] = (unsigned char)s.len;
	memcpy(p + 1, s.bytes, s.len);
	ix->chunk_fill += 1 + (uint32_t)s.len;
	return (ix->nchunk - 1) << 20 | (ix->chunk_fill - 1 - (uint32_t)s.len);
}

static void
cindex_arena_drop(struct cindex *ix, uint32_t r)
{
	if (r != 0)
		ix->stats.arena_garbage += 1 + cindex_str(ix, r).len;
}

/* Whether en holds a text id in the arena. */
static int
cindex_has_text(const struct cindex_entry *en)
{
	return (en->off_flags & CINDEX_F_ID_TEXT) && en->cid != 0;
}

/*
 * Copy every live string into new chunks and rewrite the refs; the old
 * chunks go.  The hashes hold slots, not refs, so they stay as they are.
 * Out of memory: nothing changes, garbage stays for the next try.
 */
static void
cindex_compact(struct cindex *ix)
{
	struct cindex old = *ix;
	uint32_t *nref = malloc(((size_t)ix->used * 2 + 1) * sizeof(*nref));
	int ok = nref != NULL;

	ix->chunk = NULL;
	ix->nchunk = ix->chunk_cap = ix->chunk_fill = 0;
	ix->stats.arena_bytes = 0;
	for (uint32_t s = 0; s < ix->used && ok; s++) {
		const struct cindex_entry *en = cindex_at(ix, s);
		nref[2 * s] = nref[2 * s + 1] = 0;
		if (en->off_flags & CINDEX_F_FREE)
			continue;
		if (en->mid != 0)
			ok = (nref[2 * s] = cindex_arena_put(
			          ix, cindex_str(&old, en->mid))) != 0;
		if (ok && cindex_has_text(en))
			ok =
			    (nref[2 * s + 1] = cindex_arena_put(
			         ix, cindex_str(&old, (uint32_t)en->cid))) != 0;
	}
	if (!ok) {
		for (uint32_t i = 0; i < ix->nchunk; i++)
			free(ix->chunk[i]);
		free(ix->chunk);
		free(nref);
		ix->chunk = old.chunk;
		ix->nchunk = old.nchunk;
		ix->chunk_cap = old.chunk_cap;
		ix->chunk_fill = old.chunk_fill;
		ix->stats.arena_bytes = old.stats.arena_bytes;
		return;
	}
	for (uint32_t s = 0; s < ix->used; s++) {
		struct cindex_entry *en = cindex_at(ix, s);
		if (en->off_flags & CINDEX_F_FREE)
			continue;
		en->mid = nref[2 * s];
		if (cindex_has_text(en))
			en->cid = nref[2 * s + 1];
	}
	free(nref);
	for (uint32_t i = 0; i < old.nchunk; i++)
		free(old.chunk[i]);
	free(old.chunk);
	ix->stats.arena_garbage = 0;
	ix->stats.compactions++;
}

/* Compact when garbage passes a quarter of what the arena was written
 * and compact_min (16 MiB: about 50 ms of copying at a million). */
static void
cindex_maybe_compact(struct cindex *ix)
{
	uint64_t written =
	    ix->nchunk
	        ? (uint64_t)(ix->nchunk - 1) * CINDEX_CHUNK + ix->chunk_fill
	        : 0;

	if (ix->stats.arena_garbage > ix->compact_min &&
	    ix->stats.arena_garbage * 4 > written)
		cindex_compact(ix);
}

/* ----- slots ----- */

/* A free slot, UINT32_MAX when out of memory or out of numbers. */
static uint32_t
cindex_slot_new(struct cindex *ix)
{
	uint32_t s;

	if (ix->free_head != 0) {
		s = ix->free_head - 1;
		ix->free_head = (uint32_t)cindex_at(ix, s)->cid;
		return s;
	}
	if (ix->used == UINT32_MAX - 1)
		return UINT32_MAX;
	if ((ix->used & (CINDEX_SLAB - 1)) == 0 &&
	    ix->used >> 16 == ix->nslab) {
		if (ix->nslab == ix->slab_cap) {
			uint32_t cap = ix->slab_cap ? ix->slab_cap * 2 : 16;
			struct cindex_entry **v =
			    realloc(ix->slab, cap * sizeof(*v));
			if (v == NULL)
				return UINT32_MAX;
			ix->slab = v;
			ix->slab_cap = cap;
		}
		ix->slab[ix->nslab] = malloc(CINDEX_SLAB * sizeof(**ix->slab));
		if (ix->slab[ix->nslab] == NULL)
			return UINT32_MAX;
		ix->nslab++;
	}
	return ix->used++;
}

static void
cindex_slot_free(struct cindex *ix, uint32_t s)
{
	struct cindex_entry *en = cindex_at(ix, s);

	memset(en, 0, sizeof(*en));
	en->off_flags = CINDEX_F_FREE;
	en->cid = ix->free_head;
	ix->free_head = s + 1;
}

/* ----- the two hashes: its hash and slot + 1 in a power-of-two table ----- */

enum { BY_ID, BY_MID };

/* A place: 32 bits of the hash (the table is at most 2^32) and slot + 1. */
#define HASH_PLACE(h, s) ((uint64_t)(uint32_t)(h) << 32 | ((uint64_t)(s) + 1))
#define HASH_SLOT(p) ((uint32_t)(p)-1u)
#define HASH_OF(p) ((uint32_t)((p) >> 32))

static uint64_t
cindex_slot_hash(const struct cindex *ix, int which, uint32_t s)
{
	const struct cindex_entry *en = cindex_at(ix, s);

	if (which == BY_MID)
		return cindex_fnv(cindex_str(ix, en->mid), ix->seed);
	if (en->off_flags & CINDEX_F_ID_TEXT)
		return cindex_fnv(cindex_str(ix, (uint32_t)en->cid), ix->seed);
	return cindex_mix(en->cid, ix->seed);
}

static uint64_t **
cindex_tab(struct cindex *ix, int which, uint32_t **cap, uint32_t **n)
{
	*cap = which == BY_ID ? &ix->id_cap : &ix->mid_cap;
	*n = which == BY_ID ? &ix->id_n : &ix->mid_n;
	return which == BY_ID ? &ix->id_hash : &ix->mid_hash;
}

static void
cindex_hash_place(uint64_t *t, uint32_t cap, uint64_t place)
{
	size_t i = (size_t)HASH_OF(place) & (cap - 1);

	while (t[i] != 0)
		i = (i + 1) & (cap - 1);
	t[i] = place;
}

/* Room for one more at a load of at most 3/4, placed again by the hashes
 * kept: no entry is read.  -1 out of memory. */
static int
cindex_hash_room(struct cindex *ix, int which)
{
	uint32_t *cap, *n;
	uint64_t **tab = cindex_tab(ix, which, &cap, &n), *t;
	uint32_t ncap;

	if ((uint64_t)(*n + 1) * 4 <= (uint64_t)*cap * 3)
		return 0;
	ncap = *cap ? *cap * 2 : 1024;
	if (ncap == 0 || (t = calloc(ncap, sizeof(*t))) == NULL)
		return -1;
	for (uint32_t i = 0; i < *cap; i++)
		if ((*tab)[i] != 0)
			cindex_hash_place(t, ncap, (*tab)[i]);
	free(*tab);
	*tab = t;
	*cap = ncap;
	return 0;
}

/* Add s (cindex_hash_room first). */
static void
cindex_hash_add(struct cindex *ix, int which, uint32_t s)
{
	uint32_t *cap, *n;
	uint64_t **tab = cindex_tab(ix, which, &cap, &n);

	cindex_hash_place(*tab, *cap,
	                  HASH_PLACE(cindex_slot_hash(ix, which, s), s));
	(*n)++;
}

/* Remove s, shifting back what its place kept from its home. */
static void
cindex_hash_del(struct cindex *ix, int which, uint32_t s)
{
	uint32_t *cap, *n;
	uint64_t *t = *cindex_tab(ix, which, &cap, &n);
	uint32_t mask = *cap - 1;
	uint64_t place = HASH_PLACE(cindex_slot_hash(ix, which, s), s);
	size_t i = (size_t)HASH_OF(place) & mask, j;

	while (t[i] != place)
		i = (i + 1) & mask;
	j = i;
	for (;;) {
		size_t home;
		j = (j + 1) & mask;
		if (t[j] == 0)
			break;
		home = (size_t)HASH_OF(t[j]) & mask;
		/* t[j] may move to i when its home is not in (i, j]. */
		if ((j > i && (home <= i || home > j)) ||
		    (j < i && home <= i && home > j)) {
			t[i] = t[j];
			i = j;
		}
	}
	t[i] = 0;
	(*n)--;
}

uint32_t
cindex_find_id(const struct cindex *ix, amqp_bytes_t id)
{
	uint64_t v = 0;
	int num = cindex_hex16(id, &v);
	uint64_t h = num ? cindex_mix(v, ix->seed) : cindex_fnv(id, ix->seed);
	uint32_t mask = ix->id_cap - 1;

	if (ix->id_cap == 0)
		return UINT32_MAX;
	for (size_t i = (size_t)h & mask; ix->id_hash[i] != 0;
	     i = (i + 1) & mask) {
		uint32_t s = HASH_SLOT(ix->id_hash[i]);
		const struct cindex_entry *en;
		int text;
		if (HASH_OF(ix->id_hash[i]) != (uint32_t)h)
			continue; /* not it, and its entry is not read */
		en = cindex_at(ix, s);
		text = (en->off_flags & CINDEX_F_ID_TEXT) != 0;
		if (num ? !text && en->cid == v
		        : text && cindex_bytes_eq(
		                      cindex_str(ix, (uint32_t)en->cid), id))
			return s;
	}
	return UINT32_MAX;
}

void
cindex_each_mid(const struct cindex *ix, amqp_bytes_t mid,
                int (*fn)(uint32_t slot, void *ctx), void *ctx)
{
	uint32_t mask = ix->mid_cap - 1;
	uint64_t h;

	if (ix->mid_cap == 0 || mid.len == 0)
		return;
	h = cindex_fnv(mid, ix->seed);
	for (size_t i = (size_t)h & mask; ix->mid_hash[i] != 0;
	     i = (i + 1) & mask) {
		uint32_t s = HASH_SLOT(ix->mid_hash[i]);
		if (HASH_OF(ix->mid_hash[i]) == (uint32_t)h &&
		    cindex_bytes_eq(cindex_str(ix, cindex_at(ix, s)->mid),
		                    mid) &&
		    fn(s, ctx))
			return;
	}
}

/* ----- the fold ----- */

int
cindex_init(struct cindex *ix, uint32_t max_waiting, uint32_t max_ended)
{
	struct timespec ts;

	memset(ix, 0, sizeof(*ix));
	ix->max_waiting = max_waiting ? max_waiting : CINDEX_MAX_WAITING;
	ix->max_ended = max_ended ? max_ended : CINDEX_MAX_ENDED;
	ix->compact_min = 16u << 20;
	clock_gettime(CLOCK_REALTIME, &ts);
	ix->seed = cindex_mix((uint64_t)ts.tv_nsec << 20 ^ (uint64_t)ts.tv_sec ^
	                          (uint64_t)(uintptr_t)ix,
	                      0);
	if (cindex_names_init(&ix->targets) < 0 ||
	    cindex_names_init(&ix->users) < 0) {
		cindex_free(ix);
		return -1;
	}
	return 0;
}

void
cindex_free(struct cindex *ix)
{
	for (uint32_t i = 0; i < ix->nslab; i++)
		free(ix->slab[i]);
	free(ix->slab);
	for (uint32_t i = 0; i < ix->nchunk; i++)
		free(ix->chunk[i]);
	free(ix->chunk);
	free(ix->id_hash);
	free(ix->mid_hash);
	for (uint32_t i = 0; i < ix->nblock; i++)
		free(ix->block[i]);
	free(ix->block);
	free(ix->block_last);
	cindex_names_free(&ix->targets);
	cindex_names_free(&ix->users);
	memset(ix, 0, sizeof(*ix));
}

/* The cascade id of e into en: a number, or text in the arena.
 * -1 out of memory. */
static int
cindex_set_id(struct cindex *ix, struct cindex_entry *en, amqp_bytes_t id)
{
	uint64_t v;

	if (cindex_hex16(id, &v)) {
		en->cid = v;
		return 0;
	}
	en->off_flags |= CINDEX_F_ID_TEXT;
	en->cid = id.len ? cindex_arena_put(ix, id) : 0;
	return id.len && en->cid == 0 ? -1 : 0;
}

/* Take a message out of everything and free its slot. */
static void
cindex_remove_live(struct cindex *ix, uint32_t s)
{
	struct cindex_entry *en = cindex_at(ix, s);

	cindex_order_del(ix, s);
	cindex_hash_del(ix, BY_ID, s);
	if (en->mid != 0)
		cindex_hash_del(ix, BY_MID, s);
	cindex_unname(&ix->targets, en->target, ix->seed, &ix->stats.targets);
	cindex_unname(&ix->users, en->owner, ix->seed, &ix->stats.users);
	cindex_arena_drop(ix, en->mid);
	if (en->off_flags & CINDEX_F_ID_TEXT)
		cindex_arena_drop(ix, (uint32_t)en->cid);
	cindex_slot_free(ix, s);
	ix->stats.waiting--;
}

/* Forget a remembered end. */
static void
cindex_remove_end(struct cindex *ix, uint32_t s)
{
	struct cindex_entry *en = cindex_at(ix, s);
	uint32_t prev = en->target, next = en->owner;

	if (prev)
		cindex_at(ix, prev - 1)->owner = next;
	else
		ix->end_oldest = next;
	if (next)
		cindex_at(ix, next - 1)->target = prev;
	else
		ix->end_newest = prev;
	cindex_hash_del(ix, BY_ID, s);
	if (en->off_flags & CINDEX_F_ID_TEXT)
		cindex_arena_drop(ix, (uint32_t)en->cid);
	cindex_slot_free(ix, s);
	ix->stats.ended--;
}

static int
cindex_add(struct cindex *ix, const struct event *e, uint64_t offset)
{
	unsigned char tk[512];
	struct cindex_entry *en;
	uint32_t target, owner, s;

	if (ix->stats.waiting >= ix->max_waiting || e->id.len > 255 ||
	    e->message_id.len > 255 || e->exchange.len > 255 ||
	    e->routing_key.len > 255) {
		ix->stats.refused++;
		return 0;
	}
	target = cindex_intern(
	    &ix->targets, cindex_target_key(tk, e->exchange, e->routing_key),
	    ix->seed, &ix->stats.targets);
	owner = target == UINT32_MAX
	            ? UINT32_MAX
	            : cindex_intern(&ix->users, e->owner, ix->seed,
	                            &ix->stats.users);
	if (owner == UINT32_MAX) {
		if (target != UINT32_MAX)
			cindex_unname(&ix->targets, target, ix->seed,
			              &ix->stats.targets);
		/* A cap, or out of memory: both refuse the record; the
		 * caller sees the count. */
		ix->stats.refused++;
		return 0;
	}
	if ((s = cindex_slot_new(ix)) == UINT32_MAX)
		goto names;
	en = cindex_at(ix, s);
	memset(en, 0, sizeof(*en));
	en->due = e->due;
	en->seen = e->at;
	en->size = e->size < 0                      ? 0
	           : (uint64_t)e->size > UINT32_MAX ? UINT32_MAX
	                                            : (uint32_t)e->size;
	en->off_flags = (offset & CINDEX_OFFSET_MASK) |
	                (e->every > 0 || e->cron.len > 0 ? CINDEX_F_REPEAT : 0);
	en->target = target;
	en->owner = owner;
	if (cindex_set_id(ix, en, e->id) < 0)
		goto slot;
	if (e->message_id.len > 0 &&
	    (en->mid = cindex_arena_put(ix, e->message_id)) == 0)
		goto id;
	if (cindex_hash_room(ix, BY_ID) < 0 ||
	    (en->mid && cindex_hash_room(ix, BY_MID) < 0) ||
	    cindex_order_add(ix, s) < 0)
		goto mid;
	cindex_hash_add(ix, BY_ID, s);
	if (en->mid)
		cindex_hash_add(ix, BY_MID, s);
	ix->stats.waiting++;
	return 0;
mid:
	cindex_arena_drop(ix, en->mid);
id:
	if (en->off_flags & CINDEX_F_ID_TEXT)
		cindex_arena_drop(ix, (uint32_t)en->cid);
slot:
	cindex_slot_free(ix, s);
names:
	cindex_unname(&ix->targets, target, ix->seed, &ix->stats.targets);
	cindex_unname(&ix->users, owner, ix->seed, &ix->stats.users);
	return -1;
}

/* Remember an end whose scheduled record has not been read. */
static int
cindex_add_end(struct cindex *ix, const struct event *e)
{
	struct cindex_entry *en;
	uint32_t s;

	if (e->id.len > 255)
		return 0; /* no scheduled record can name it either */
	if (ix->stats.ended >= ix->max_ended) {
		cindex_remove_end(ix, ix->end_oldest - 1);
		ix->stats.ended_evicted++;
	}
	if (cindex_hash_room(ix, BY_ID) < 0 ||
	    (s = cindex_slot_new(ix)) == UINT32_MAX)
		return -1;
	en = cindex_at(ix, s);
	memset(en, 0, sizeof(*en));
	en->off_flags = CINDEX_F_ENDED;
	en->due = e->at;
	if (cindex_set_id(ix, en, e->id) < 0) {
		cindex_slot_free(ix, s);
		return -1;
	}
	cindex_hash_add(ix, BY_ID, s);
	en->target = ix->end_newest;
	if (ix->end_newest)
		cindex_at(ix, ix->end_newest - 1)->owner = s + 1;
	else
		ix->end_oldest = s + 1;
	ix->end_newest = s + 1;
	ix->stats.ended++;
	return 0;
}

int
cindex_fold_event(struct cindex *ix, const struct event *e, uint64_t offset)
{
	uint32_t s;
	int rc = 0;

	ix->stats.records++;
	switch (e->kind) {
	case EVENT_SCHEDULED:
		s = cindex_find_id(ix, e->id);
		if (s != UINT32_MAX &&
		    (cindex_at(ix, s)->off_flags & CINDEX_F_ENDED)) {
			cindex_remove_end(ix, s);
			break;
		}
		/* The same id again: the later record wins. */
		if (s != UINT32_MAX)
			cindex_remove_live(ix, s);
		rc = cindex_add(ix, e, offset);
		break;
	case EVENT_DELIVERED:
	case EVENT_PARKED:
	case EVENT_CANCELLED:
	case EVENT_DUPLICATE:
		s = cindex_find_id(ix, e->id);
		if (s == UINT32_MAX)
			rc = cindex_add_end(ix, e);
		else if (!(cindex_at(ix, s)->off_flags & CINDEX_F_ENDED))
			cindex_remove_live(ix, s);
		break;
	default:
		return 0;
	}
	cindex_maybe_compact(ix);
	return rc;
}

void
cindex_prune_ended(struct cindex *ix, int64_t before)
{
	while (ix->end_oldest != 0 &&
	       cindex_at(ix, ix->end_oldest - 1)->due < before) {
		cindex_remove_end(ix, ix->end_oldest - 1);
		ix->stats.ended_evicted++;
	}
	cindex_maybe_compact(ix);
}

struct cindex_stats
cindex_stats(const struct cindex *ix)
{
	return ix->stats;
}

uint32_t
cindex_count(const struct cindex *ix)
{
	return (uint32_t)ix->stats.waiting;
}

int
cindex_move(struct cindex *ix, uint32_t slot, int64_t due)
{
	struct cindex_entry *en = cindex_at(ix, slot);
	int64_t old = en->due;

	if (due == old)
		return 0;
	cindex_order_del(ix, slot);
	en->due = due;
	if (cindex_order_add(ix, slot) < 0) {
		en->due = old;
		/* back at its old place (which may itself need memory) */
		(void)cindex_order_add(ix, slot);
		return -1;
	}
	en->off_flags |= CINDEX_F_MOVED;
	return 0;
}
