/* SPDX-License-Identifier: Apache-2.0 */
/* cindex: the due order of the index, sorted blocks (cindex_int.h). */
#include "cindex_int.h"

#include <stdlib.h>
#include <string.h>

/* Slots a block of the order holds; split when full, merged when small. */
#define BLOCK_MAX 512u

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

/* The first block whose last entry is not before en (nblock: none). */
static uint32_t
cindex_block_of(const struct cindex *ix, const struct cindex_entry *en)
{
	uint32_t lo = 0, hi = ix->nblock;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct cindex_block *b = ix->block[mid];
		if (cindex_cmp(ix, cindex_at(ix, b->slot[b->n - 1]), en) < 0)
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
		if (cindex_cmp(ix, cindex_at(ix, b->slot[mid]), en) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct cindex_block *
cindex_block_new(void)
{
	struct cindex_block *b =
	    malloc(sizeof(*b) + BLOCK_MAX * sizeof(b->slot[0]));

	if (b != NULL)
		b->n = 0;
	return b;
}

/* Room in the directory for one more block at k.  -1 out of memory. */
static int
cindex_dir_insert(struct cindex *ix, uint32_t k, struct cindex_block *b)
{
	if (ix->nblock == ix->block_cap) {
		uint32_t cap = ix->block_cap ? ix->block_cap * 2 : 64;
		struct cindex_block **v = realloc(ix->block, cap * sizeof(*v));
		if (v == NULL)
			return -1;
		ix->block = v;
		ix->block_cap = cap;
	}
	memmove(ix->block + k + 1, ix->block + k,
	        (ix->nblock - k) * sizeof(*ix->block));
	ix->block[k] = b;
	ix->nblock++;
	return 0;
}

static void
cindex_dir_remove(struct cindex *ix, uint32_t k)
{
	free(ix->block[k]);
	memmove(ix->block + k, ix->block + k + 1,
	        (ix->nblock - k - 1) * sizeof(*ix->block));
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
	if (b->n == BLOCK_MAX) {
		if ((nb = cindex_block_new()) == NULL ||
		    cindex_dir_insert(ix, k + 1, nb) < 0) {
			free(nb);
			return -1;
		}
		nb->n = BLOCK_MAX / 2;
		memcpy(nb->slot, b->slot + BLOCK_MAX / 2,
		       nb->n * sizeof(nb->slot[0]));
		b->n = BLOCK_MAX / 2;
		if (cindex_cmp(ix, cindex_at(ix, b->slot[b->n - 1]), en) < 0)
			b = nb;
	}
	i = cindex_index_in(ix, b, en);
	memmove(b->slot + i + 1, b->slot + i, (b->n - i) * sizeof(b->slot[0]));
	b->slot[i] = s;
	b->n++;
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
	b->n--;
	if (b->n == 0) {
		cindex_dir_remove(ix, k);
		return;
	}
	if (b->n < BLOCK_MAX / 4 && k + 1 < ix->nblock &&
	    b->n + (nx = ix->block[k + 1])->n <= BLOCK_MAX * 3 / 4) {
		memcpy(b->slot + b->n, nx->slot, nx->n * sizeof(b->slot[0]));
		b->n += nx->n;
		cindex_dir_remove(ix, k + 1);
	}
}

uint32_t
cindex_seek_due(const struct cindex *ix, int64_t t, uint32_t *b, uint32_t *i)
{
	uint32_t lo = 0, hi = ix->nblock, before = 0;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct cindex_block *bl = ix->block[mid];
		if (cindex_at(ix, bl->slot[bl->n - 1])->due < t)
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
			if (cindex_at(ix, bl->slot[m])->due < t)
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
