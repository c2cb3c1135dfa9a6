/* SPDX-License-Identifier: Apache-2.0 */
/* cindex: pages, searches and counts over the index (cindex.h). */
#include "cindex_int.h"

#include <stdlib.h>
#include <string.h>

#include "waiting.h"

#define MINUTE_MS INT64_C(60000)
#define HOUR_MS (60 * MINUTE_MS)
#define DAY_MS (24 * HOUR_MS)

void
cindex_query_init(struct cindex_query *q)
{
	memset(q, 0, sizeof(*q));
	q->due_after = INT64_MIN;
	q->due_before = INT64_MAX;
}

void
cindex_row(const struct cindex *ix, uint32_t slot, struct cindex_row *r)
{
	const struct cindex_entry *en = cindex_at(ix, slot);
	amqp_bytes_t t = cindex_name_bytes(&ix->targets, en->target);
	const unsigned char *p = t.bytes;

	memset(r, 0, sizeof(*r));
	r->slot = slot;
	r->due = en->due;
	r->seen = en->seen;
	r->size = en->size;
	r->offset = en->off_flags & CINDEX_OFFSET_MASK;
	r->repeat = (en->off_flags & CINDEX_F_REPEAT) != 0;
	r->moved = (en->off_flags & CINDEX_F_MOVED) != 0;
	r->id = cindex_id_bytes(ix, en, r->id_text);
	r->message_id = cindex_str(ix, en->mid);
	if (t.len > 0) {
		r->exchange = (amqp_bytes_t){p[0], (void *)(p + 1)};
		r->routing_key =
		    (amqp_bytes_t){t.len - 1 - p[0], (void *)(p + 1 + p[0])};
	}
	r->owner = cindex_name_bytes(&ix->users, en->owner);
}

uint32_t
cindex_rank(const struct cindex *ix, int64_t t)
{
	uint32_t b, i;

	return cindex_seek_due(ix, t, &b, &i);
}

/* A query read once: what each entry is tested against. */
struct cindex_test {
	int any;                /* owner, target or prefix set */
	int none;               /* an owner not held: nothing matches */
	uint32_t owner;         /* UINT32_MAX: any */
	unsigned char *targets; /* per target index: matches; NULL: any */
	amqp_bytes_t prefix;
	int prefix_set;
	/* the prefix as the top digits of a numeric id (prefix_hex), so a
	 * numeric id is never printed to be compared */
	int prefix_hex;
	uint64_t hex;
	unsigned shift;
};

/* Whether target i (exchange, key) is one q->target names, as
 * waiting_match reads it. */
static int
cindex_target_matches(const struct cindex *ix, uint32_t i, const char *target)
{
	struct waiting_filter flt;
	struct cindex_row r;
	struct waiting w;
	amqp_bytes_t t = cindex_name_bytes(&ix->targets, i);
	const unsigned char *p = t.bytes;

	memset(&r, 0, sizeof(r));
	if (t.len > 0) {
		r.exchange = (amqp_bytes_t){p[0], (void *)(p + 1)};
		r.routing_key =
		    (amqp_bytes_t){t.len - 1 - p[0], (void *)(p + 1 + p[0])};
	}
	waiting_filter_init(&flt);
	flt.target = target;
	memset(&w, 0, sizeof(w));
	w.exchange = r.exchange;
	w.routing_key = r.routing_key;
	return waiting_match(&flt, &w);
}

/* q read into t.  -1 out of memory. */
static int
cindex_test_init(const struct cindex *ix, const struct cindex_query *q,
                 struct cindex_test *t)
{
	memset(t, 0, sizeof(*t));
	t->owner = UINT32_MAX;
	if (q->owner != NULL) {
		t->any = 1;
		t->owner = cindex_name_find(
		    &ix->users, amqp_cstring_bytes(q->owner), ix->seed);
		t->none = t->owner == UINT32_MAX;
	}
	if (q->prefix != NULL && q->prefix[0] != '\0') {
		t->any = t->prefix_set = 1;
		t->prefix = amqp_cstring_bytes(q->prefix);
		t->prefix_hex = t->prefix.len <= 16;
		for (size_t i = 0; i < t->prefix.len && t->prefix_hex; i++) {
			char c = q->prefix[i];
			t->prefix_hex =
			    (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
			t->hex = t->hex << 4 |
			         (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
		}
		t->shift = 64 - 4 * (unsigned)t->prefix.len;
	}
	if (q->target != NULL) {
		t->any = 1;
		if ((t->targets = malloc(ix->targets.n)) == NULL)
			return -1;
		for (uint32_t i = 0; i < ix->targets.n; i++)
			t->targets[i] =
			    (i == 0 || ix->targets.v[i].count > 0) &&
			    cindex_target_matches(ix, i, q->target);
	}
	return 0;
}

static int
cindex_starts(amqp_bytes_t s, amqp_bytes_t prefix)
{
	return s.len >= prefix.len &&
	       (prefix.len == 0 ||
	        memcmp(s.bytes, prefix.bytes, prefix.len) == 0);
}

static int
cindex_test(const struct cindex *ix, const struct cindex_test *t, uint32_t s)
{
	const struct cindex_entry *en = cindex_at(ix, s);
	char buf[17];

	if (t->owner != UINT32_MAX && en->owner != t->owner)
		return 0;
	if (t->targets != NULL && !t->targets[en->target])
		return 0;
	if (t->prefix_set && !(en->off_flags & CINDEX_F_ID_TEXT)) {
		if (t->prefix_hex &&
		    (t->shift == 0 ? en->cid == t->hex
		                   : en->cid >> t->shift == t->hex))
			return 1;
	} else if (t->prefix_set &&
	           cindex_starts(cindex_id_bytes(ix, en, buf), t->prefix))
		return 1;
	if (t->prefix_set &&
	    !(en->mid != 0 &&
	      cindex_starts(cindex_str(ix, en->mid), t->prefix)))
		return 0;
	return 1;
}

/* The ranks [*lo, *hi) of q's due bounds. */
static void
cindex_range(const struct cindex *ix, const struct cindex_query *q,
             uint32_t *lo, uint32_t *hi)
{
	*lo = q->due_after == INT64_MIN ? 0 : cindex_rank(ix, q->due_after);
	*hi = q->due_before == INT64_MAX ? cindex_count(ix)
	                                 : cindex_rank(ix, q->due_before);
	if (*hi < *lo)
		*hi = *lo;
}

int
cindex_page(const struct cindex *ix, const struct cindex_query *q,
            uint32_t offset, uint32_t limit, uint32_t *slots, uint32_t *n,
            uint32_t *total)
{
	struct cindex_test t;
	uint32_t lo, hi, b, i, seen = 0;

	*n = *total = 0;
	if (cindex_test_init(ix, q, &t) < 0)
		return -1;
	cindex_range(ix, q, &lo, &hi);
	if (t.none || lo == hi) {
		free(t.targets);
		return 0;
	}
	if (!t.any) {
		*total = hi - lo;
		if (offset >= *total)
			return 0;
		lo += offset;
		cindex_seek_rank(ix, lo, &b, &i);
		for (; b < ix->nblock && lo < hi && *n < limit; b++, i = 0)
			for (; i < ix->block[b]->n && lo < hi && *n < limit;
			     i++, lo++)
				slots[(*n)++] = ix->block[b]->slot[i];
		return 0;
	}
	/* A walk over the range: every match counts, a page is kept. */
	cindex_seek_rank(ix, lo, &b, &i);
	for (; b < ix->nblock && lo < hi; b++, i = 0)
		for (; i < ix->block[b]->n && lo < hi; i++, lo++) {
			uint32_t s = ix->block[b]->slot[i];
			if (!cindex_test(ix, &t, s))
				continue;
			if (seen >= offset && *n < limit)
				slots[(*n)++] = s;
			seen++;
		}
	*total = seen;
	free(t.targets);
	return 0;
}

struct cindex_names_ctx {
	uint32_t *slots, max, n, by_id;
};

static int
cindex_named_one(uint32_t slot, void *ctx)
{
	struct cindex_names_ctx *c = ctx;

	if (slot == c->by_id)
		return 0;
	if (c->n < c->max)
		c->slots[c->n] = slot;
	c->n++;
	return 0;
}

int64_t
cindex_find(const struct cindex *ix, amqp_bytes_t id)
{
	uint32_t s = cindex_find_id(ix, id);

	if (s == UINT32_MAX || (cindex_at(ix, s)->off_flags & CINDEX_F_ENDED))
		return -1;
	return s;
}

uint32_t
cindex_named(const struct cindex *ix, amqp_bytes_t id, uint32_t *slots,
             uint32_t max)
{
	struct cindex_names_ctx c = {slots, max, 0, cindex_find_id(ix, id)};

	if (c.by_id != UINT32_MAX &&
	    (cindex_at(ix, c.by_id)->off_flags & CINDEX_F_ENDED))
		c.by_id = UINT32_MAX;
	if (c.by_id != UINT32_MAX) {
		if (max > 0)
			slots[0] = c.by_id;
		c.n = 1;
	}
	cindex_each_mid(ix, id, cindex_named_one, &c);
	return c.n;
}

/* Which bucket of h due falls in at now, counted once per window. */
static void
cindex_bucket(struct cindex_histogram *h, int64_t due, int64_t now, uint32_t k)
{
	int64_t d = due - now;

	if (d < 0) {
		h->late += k;
		return;
	}
	if (d < HOUR_MS)
		h->hour[d / MINUTE_MS] += k;
	if (d < DAY_MS)
		h->day[d / HOUR_MS] += k;
	if (d < 7 * DAY_MS)
		h->week[d / DAY_MS] += k;
	else
		h->later += k;
}

/* How many q's bounds let through in [a, b). */
static uint32_t
cindex_between(const struct cindex *ix, const struct cindex_query *q, int64_t a,
               int64_t b)
{
	if (q != NULL && a < q->due_after)
		a = q->due_after;
	if (q != NULL && b > q->due_before)
		b = q->due_before;
	if (b <= a)
		return 0;
	return (b == INT64_MAX ? cindex_count(ix) : cindex_rank(ix, b)) -
	       (a == INT64_MIN ? 0 : cindex_rank(ix, a));
}

void
cindex_histogram(const struct cindex *ix, const struct cindex_query *q,
                 int64_t now, struct cindex_histogram *h)
{
	struct cindex_test t;
	uint32_t lo, hi, b, i;

	memset(h, 0, sizeof(*h));
	if (q == NULL ||
	    (q->owner == NULL && q->target == NULL && q->prefix == NULL)) {
		h->late = cindex_between(ix, q, INT64_MIN, now);
		for (int k = 0; k < 60; k++)
			h->hour[k] = cindex_between(ix, q, now + k * MINUTE_MS,
			                            now + (k + 1) * MINUTE_MS);
		for (int k = 0; k < 24; k++)
			h->day[k] = cindex_between(ix, q, now + k * HOUR_MS,
			                           now + (k + 1) * HOUR_MS);
		for (int k = 0; k < 7; k++)
			h->week[k] = cindex_between(ix, q, now + k * DAY_MS,
			                            now + (k + 1) * DAY_MS);
		h->later = cindex_between(ix, q, now + 7 * DAY_MS, INT64_MAX);
		return;
	}
	/* Out of memory for the target table: an empty histogram. */
	if (cindex_test_init(ix, q, &t) < 0)
		return;
	cindex_range(ix, q, &lo, &hi);
	cindex_seek_rank(ix, lo, &b, &i);
	for (; !t.none && b < ix->nblock && lo < hi; b++, i = 0)
		for (; i < ix->block[b]->n && lo < hi; i++, lo++) {
			uint32_t s = ix->block[b]->slot[i];
			if (cindex_test(ix, &t, s))
				cindex_bucket(h, cindex_at(ix, s)->due, now, 1);
		}
	free(t.targets);
}

/* The window of edges[0..n) that due falls in. */
static size_t
cindex_window_of(int64_t due, const int64_t *edges, size_t n)
{
	size_t k = 0;

	while (k < n && due >= edges[k])
		k++;
	return k;
}

/* Whether q is due bounds only: ranks answer it, with no walk. */
static int
cindex_bounds_only(const struct cindex_query *q)
{
	return q == NULL ||
	       (q->owner == NULL && q->target == NULL && q->prefix == NULL);
}

int
cindex_windows(const struct cindex *ix, const struct cindex_query *q,
               const int64_t *edges, size_t n, uint32_t *counts)
{
	uint32_t total;

	memset(counts, 0, (n + 1) * sizeof(*counts));
	if (cindex_bounds_only(q)) {
		for (size_t k = 0; k <= n; k++)
			counts[k] = cindex_between(
			    ix, q, k == 0 ? INT64_MIN : edges[k - 1],
			    k == n ? INT64_MAX : edges[k]);
		return 0;
	}
	return cindex_page_windows(ix, q, 0, NULL, &total, &total, edges, n,
	                           counts);
}

int
cindex_page_windows(const struct cindex *ix, const struct cindex_query *q,
                    uint32_t limit, uint32_t *slots, uint32_t *n,
                    uint32_t *total, const int64_t *edges, size_t nedges,
                    uint32_t *counts)
{
	struct cindex_test t;
	uint32_t lo, hi, b, i, shown = 0, seen = 0;

	if (cindex_bounds_only(q))
		return cindex_page(ix, q, 0, limit, slots, n, total) < 0 ||
		               cindex_windows(ix, q, edges, nedges, counts) < 0
		           ? -1
		           : 0;
	memset(counts, 0, (nedges + 1) * sizeof(*counts));
	*n = *total = 0;
	if (cindex_test_init(ix, q, &t) < 0)
		return -1;
	cindex_range(ix, q, &lo, &hi);
	cindex_seek_rank(ix, lo, &b, &i);
	for (; !t.none && b < ix->nblock && lo < hi; b++, i = 0)
		for (; i < ix->block[b]->n && lo < hi; i++, lo++) {
			uint32_t s = ix->block[b]->slot[i];
			if (!cindex_test(ix, &t, s))
				continue;
			if (shown < limit)
				slots[shown++] = s;
			seen++;
			counts[cindex_window_of(cindex_at(ix, s)->due, edges,
			                        nedges)]++;
		}
	free(t.targets);
	*n = shown;
	*total = seen;
	return 0;
}
