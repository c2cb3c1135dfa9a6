/* SPDX-License-Identifier: Apache-2.0 */
/* The reorder window (reorder.h): a binary heap by due time, open after a
 * disruption. */
#include "reorder.h"

#include <stdlib.h>

int
reorder_init(struct reorder *r, int64_t window, size_t max)
{
	*r = (struct reorder){.window = window, .max = max > 0 ? max : 1};
	if (window <= 0)
		return 0;
	r->heap = calloc(r->max, sizeof(*r->heap));
	return r->heap != NULL ? 0 : -1;
}

void
reorder_free(struct reorder *r)
{
	free(r->heap);
	r->heap = NULL;
	r->n = 0;
}

void
reorder_disrupted(struct reorder *r, int64_t mono)
{
	r->disrupted_at = mono;
	if (r->window <= 0)
		return;
	if (!reorder_open(r, mono))
		r->opened_total++;
	if (mono + r->window > r->open_until)
		r->open_until = mono + r->window;
}

int
reorder_open(const struct reorder *r, int64_t mono)
{
	return r->window > 0 && mono < r->open_until;
}

int
reorder_overdue(const struct reorder *r, int64_t due, int64_t now)
{
	/* due is bounded by the router (max_delay), now by the clock: no
	 * overflow in now - due. */
	return r->window > 0 && r->heap != NULL && now - due > REORDER_LATE_MS;
}

static int
before(const struct reorder_entry *a, const struct reorder_entry *b)
{
	return a->due != b->due ? a->due < b->due : a->seq < b->seq;
}

static void
swap(struct reorder_entry *a, struct reorder_entry *b)
{
	struct reorder_entry t = *a;

	*a = *b;
	*b = t;
}

static void
up(struct reorder *r, size_t i)
{
	while (i > 0 && before(&r->heap[i], &r->heap[(i - 1) / 2])) {
		swap(&r->heap[i], &r->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
}

static void
down(struct reorder *r, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < r->n && before(&r->heap[l], &r->heap[m]))
			m = l;
		if (l + 1 < r->n && before(&r->heap[l + 1], &r->heap[m]))
			m = l + 1;
		if (m == i)
			return;
		swap(&r->heap[i], &r->heap[m]);
		i = m;
	}
}

/* Remove entry i: the last takes its place, and moves up or down. */
static void *
take_at(struct reorder *r, size_t i)
{
	void *item = r->heap[i].item;

	r->heap[i] = r->heap[--r->n];
	if (i < r->n) {
		up(r, i);
		down(r, i);
	}
	return item;
}

uint64_t
reorder_key(const void *exchange, size_t exchange_len, const void *routing_key,
            size_t routing_key_len)
{
	/* FNV-1a over the exchange, a separator no name can hold, the key. */
	const unsigned char *p = exchange;
	uint64_t h = UINT64_C(14695981039346656037);

	for (size_t i = 0; i < exchange_len; i++)
		h = (h ^ p[i]) * UINT64_C(1099511628211);
	h = (h ^ 0x100) * UINT64_C(1099511628211);
	p = routing_key;
	for (size_t i = 0; i < routing_key_len; i++)
		h = (h ^ p[i]) * UINT64_C(1099511628211);
	return h;
}

void
reorder_add(struct reorder *r, void *item, int64_t due, uint64_t key,
            int64_t now, int64_t mono, void **out)
{
	/* As long as it is late, up to the window: the router bounds due,
	 * the clock now, so now - due does not overflow. */
	int64_t hold = now - due < r->window ? now - due : r->window;
	struct reorder_entry e = {due, mono, mono + hold, r->seq++, key, item};

	*out = NULL;
	/* Overdue ones still coming back: the disruption goes on. */
	if (mono + r->window > r->open_until)
		r->open_until = mono + r->window;
	if (r->n == r->max) {
		r->full_total++;
		/* Full: the one due first goes now, which may be this one. */
		if (!before(&r->heap[0], &e)) {
			*out = item;
			return;
		}
		*out = take_at(r, 0);
	}
	r->heap[r->n] = e;
	up(r, r->n++);
	r->held_total++;
}

/* The entry here longest: the heap is small (max is a share of the
 * prefetch), so a scan. */
static int64_t
oldest(const struct reorder *r)
{
	int64_t t = r->heap[0].arrived;

	for (size_t i = 1; i < r->n; i++)
		if (r->heap[i].arrived < t)
			t = r->heap[i].arrived;
	return t;
}

void *
reorder_take(struct reorder *r, int64_t mono)
{
	if (r->n == 0)
		return NULL;
	if (mono >= r->heap[0].until)
		return take_at(r, 0);
	if (mono - oldest(r) >= 2 * r->window) {
		r->forced_total++;
		return take_at(r, 0);
	}
	return NULL;
}

void *
reorder_take_before(struct reorder *r, uint64_t key, int64_t due)
{
	size_t best = r->n;

	/* Most of the time the window is empty; otherwise small: a scan. */
	for (size_t i = 0; i < r->n; i++)
		if (r->heap[i].key == key && r->heap[i].due <= due &&
		    (best == r->n || before(&r->heap[i], &r->heap[best])))
			best = i;
	return best < r->n ? take_at(r, best) : NULL;
}

void *
reorder_drain(struct reorder *r)
{
	return r->n > 0 ? take_at(r, r->n - 1) : NULL;
}

int64_t
reorder_next_at(const struct reorder *r)
{
	int64_t a, b;

	if (r->n == 0)
		return INT64_MAX;
	a = r->heap[0].until;
	b = oldest(r) + 2 * r->window;
	return a < b ? a : b;
}
