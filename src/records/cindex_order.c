/* SPDX-License-Identifier: Apache-2.0 */
/* cindex: the due order of the index, sorted blocks (cindex_int.h). */
#include "cindex_int.h"

#include <stdlib.h>
#include <string.h>

amqp_bytes_t
cindex_id_bytes(const struct cindex *ix, const struct cindex_entry *en,
                char buf[17])
{
	static const char hex[] = "0123456789abcdef";

	if (en->off_flags & CINDEX_F_ID_TEXT)
		return cindex_str(ix, (uint32_t)en->cid);
	for (int i = 0; i < 16; i++)
		buf[i] = hex[(en->cid >> (60 - 4 * i)) & 15];
	buf[16] = '\0';
	return (amqp_bytes_t){16, buf};
}

/* ----- the order: sorted blocks with their counts ----- */

int
cindex_cmp(const struct cindex *ix, const struct cindex_entry *a,
           const struct cindex_entry *b)
{
	char ba[17], bb[17];
	amqp_bytes_t x, y;
	size_t n;
	int d;

	if (a->due != b->due)
		return a->due < b->due ? -1 : 1;
	if (a->seen != b->seen)
		return a->seen < b->seen ? -1 : 1;
	if (!((a->off_flags | b->off_flags) & CINDEX_F_ID_TEXT))
		return (a->cid > b->cid) - (a->cid < b->cid);
	/* waiting_cmp's: the bytes, then the length. */
	x = cindex_id_bytes(ix, a, ba);
	y = cindex_id_bytes(ix, b, bb);
	n = x.len < y.len ? x.len : y.len;
	d = n ? memcmp(x.bytes, y.bytes, n) : 0;
	if (d)
		return d < 0 ? -1 : 1;
	return (x.len > y.len) - (x.len < y.len);
}

/* Whether the entry at slot s, due at due, comes before en: its entry is
 * read only when the dues are equal. */
static int
cindex_before(const struct cindex *ix, int64_t due, uint32_t s,
              const struct cindex_entry *en)
{
	if (due != en->due)
		return due < en->due;
	return cindex_cmp(ix, cindex_at(ix, s), en) < 0;
}

/* The first block whose last entry is not before en (nblock: none). */
static uint32_t
cindex_block_of(const struct cindex *ix, const struct cindex_entry *en)
{
	uint32_t lo = 0, hi = ix->nblock;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct cindex_block *b = ix->block[mid];
		if (cindex_before(ix, ix->block_last[mid], b->slot[b->n - 1],
		                  en))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The first index of b whose entry is not before en. */
static uint32_t
cindex_index_in(const struct cindex *ix, const struct cindex_block *b,
                const struct cindex_entry *en)
{
	uint32_t lo = 0, hi = b->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (cindex_before(ix, b->due[mid], b->slot[mid], en))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct cindex_block *
cindex_block_new(void)
{
	struct cindex_block *b = malloc(sizeof(*b));

	if (b != NULL)
		b->n = 0;
	return b;
}

/* Block k's last due into the directory, after a change to block k. */
static void
cindex_block_fix(struct cindex *ix, uint32_t k)
{
	const struct cindex_block *b = ix->block[k];

	ix->block_last[k] = b->n > 0 ? b->due[b->n - 1] : INT64_MIN;
}

/* Room in the directory for one more block at k.  -1 out of memory. */
static int
cindex_dir_insert(struct cindex *ix, uint32_t k, struct cindex_block *b)
{
	if (ix->nblock == ix->block_cap) {
		uint32_t cap = ix->block_cap ? ix->block_cap * 2 : 64;
		struct cindex_block **v = realloc(ix->block, cap * sizeof(*v));
		int64_t *l;
		if (v == NULL)
			return -1;
		ix->block = v;
		l = realloc(ix->block_last, cap * sizeof(*l));
		if (l == NULL)
			return -1; /* block grew, block_cap not: still whole */
		ix->block_last = l;
		ix->block_cap = cap;
	}
	memmove(ix->block + k + 1, ix->block + k,
	        (ix->nblock - k) * sizeof(*ix->block));
	memmove(ix->block_last + k + 1, ix->block_last + k,
	        (ix->nblock - k) * sizeof(*ix->block_last));
	ix->block[k] = b;
	ix->nblock++;
	cindex_block_fix(ix, k);
	return 0;
}

static void
cindex_dir_remove(struct cindex *ix, uint32_t k)
{
	free(ix->block[k]);
	memmove(ix->block + k, ix->block + k + 1,
	        (ix->nblock - k - 1) * sizeof(*ix->block));
	memmove(ix->block_last + k, ix->block_last + k + 1,
	        (ix->nblock - k - 1) * sizeof(*ix->block_last));
	ix->nblock--;
}

/* Put slot s in the order.  -1 out of memory (not put). */
int
cindex_order_add(struct cindex *ix, uint32_t s)
{
	const struct cindex_entry *en = cindex_at(ix, s);
	struct cindex_block *b, *nb;
	uint32_t k, i;

	if (ix->nblock == 0) {
		if ((b = cindex_block_new()) == NULL ||
		    cindex_dir_insert(ix, 0, b) < 0) {
			free(b);
			return -1;
		}
	}
	/* The only block may be new and empty: no last entry to compare. */
	k = ix->block[0]->n == 0 ? 0 : cindex_block_of(ix, en);
	if (k == ix->nblock)
		k--; /* after everything: the last block */
	b = ix->block[k];
	if (b->n == CINDEX_BLOCK_MAX) {
		const uint32_t half = CINDEX_BLOCK_MAX / 2;
		if ((nb = cindex_block_new()) == NULL ||
		    cindex_dir_insert(ix, k + 1, nb) < 0) {
			free(nb);
			return -1;
		}
		nb->n = half;
		memcpy(nb->slot, b->slot + half, half * sizeof(nb->slot[0]));
		memcpy(nb->due, b->due + half, half * sizeof(nb->due[0]));
		b->n = half;
		cindex_block_fix(ix, k);
		cindex_block_fix(ix, k + 1);
		if (cindex_before(ix, ix->block_last[k], b->slot[b->n - 1], en))
			b = nb, k++;
	}
	i = cindex_index_in(ix, b, en);
	memmove(b->slot + i + 1, b->slot + i, (b->n - i) * sizeof(b->slot[0]));
	memmove(b->due + i + 1, b->due + i, (b->n - i) * sizeof(b->due[0]));
	b->slot[i] = s;
	b->due[i] = en->due;
	b->n++;
	cindex_block_fix(ix, k);
	return 0;
}

/* Take slot s out of the order; a small block joins its next one. */
void
cindex_order_del(struct cindex *ix, uint32_t s)
{
	const struct cindex_entry *en = cindex_at(ix, s);
	uint32_t k = cindex_block_of(ix, en), i;
	struct cindex_block *b = ix->block[k], *nx;

	i = cindex_index_in(ix, b, en);
	memmove(b->slot + i, b->slot + i + 1,
	        (b->n - i - 1) * sizeof(b->slot[0]));
	memmove(b->due + i, b->due + i + 1, (b->n - i - 1) * sizeof(b->due[0]));
	b->n--;
	if (b->n == 0) {
		cindex_dir_remove(ix, k);
		return;
	}
	if (b->n < CINDEX_BLOCK_MAX / 4 && k + 1 < ix->nblock &&
	    b->n + (nx = ix->block[k + 1])->n <= CINDEX_BLOCK_MAX * 3 / 4) {
		memcpy(b->slot + b->n, nx->slot, nx->n * sizeof(b->slot[0]));
		memcpy(b->due + b->n, nx->due, nx->n * sizeof(b->due[0]));
		b->n += nx->n;
		cindex_dir_remove(ix, k + 1);
	}
	cindex_block_fix(ix, k);
}

uint32_t
cindex_seek_due(const struct cindex *ix, int64_t t, uint32_t *b, uint32_t *i)
{
	uint32_t lo = 0, hi = ix->nblock, before = 0;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ix->block_last[mid] < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	*b = lo;
	*i = 0;
	for (uint32_t k = 0; k < lo; k++)
		before += ix->block[k]->n;
	if (lo < ix->nblock) {
		const struct cindex_block *bl = ix->block[lo];
		uint32_t l = 0, h = bl->n;
		while (l < h) {
			uint32_t m = l + (h - l) / 2;
			if (bl->due[m] < t)
				l = m + 1;
			else
				h = m;
		}
		*i = l;
		before += l;
	}
	return before;
}

void
cindex_seek_rank(const struct cindex *ix, uint32_t k, uint32_t *b, uint32_t *i)
{
	uint32_t j = 0;

	while (j < ix->nblock && k >= ix->block[j]->n)
		k -= ix->block[j++]->n;
	*b = j;
	*i = k;
}
