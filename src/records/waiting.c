/* SPDX-License-Identifier: Apache-2.0 */
/* waiting: P.events folded into the messages still waiting (waiting.h). */
#include "waiting.h"

#include <stdlib.h>
#include <string.h>

#include "headers.h"

/* The value of `ended`: idmap_get's NULL means absent. */
static char ended_mark;

void
waiting_fold_init(struct waiting_fold *f)
{
	memset(f, 0, sizeof(*f));
	idmap_init(&f->waiting);
	idmap_init(&f->ended);
	requests_init(&f->requests);
}

void
waiting_fold_free(struct waiting_fold *f)
{
	idmap_free(&f->waiting, free);
	idmap_free(&f->ended, NULL);
	requests_free(&f->requests);
}

static amqp_bytes_t
waiting_copy(char **p, amqp_bytes_t b)
{
	amqp_bytes_t out = {b.len, *p};

	if (b.len > 0)
		memcpy(*p, b.bytes, b.len);
	*p += b.len;
	return out;
}

/* Whether the fold keeps the copy of the message e records. */
static int
waiting_wanted(const struct waiting_fold *f, const struct event *e)
{
	for (size_t i = 0; i < f->nwant; i++)
		if (headers_bytes_eq(f->want[i], e->id) ||
		    (e->message_id.len > 0 &&
		     headers_bytes_eq(f->want[i], e->message_id)))
			return 1;
	return 0;
}

/* A scheduled record as one allocation, its strings after it; its copy
 * (copy: the record's own, or one read from P.copies) when wanted. */
static struct waiting *
waiting_new(const struct waiting_fold *f, const struct event *e,
            amqp_bytes_t copy)
{
	if (copy.len == 0 || !waiting_wanted(f, e))
		copy = amqp_empty_bytes;
	size_t n = e->id.len + e->message_id.len + e->exchange.len +
	           e->routing_key.len + e->owner.len + copy.len + e->cron.len +
	           e->tz.len;
	struct waiting *w = malloc(sizeof(*w) + n + 1);
	char *p;

	if (w == NULL)
		return NULL;
	p = w->data;
	w->due = e->due;
	w->size = e->size;
	w->seen = e->at;
	w->cancel_pending = 0;
	w->rescheduled = 0;
	w->paused = 0;
	w->repeat = e->every > 0 || e->cron.len > 0;
	w->every = e->every;
	w->occurrence = e->occurrence;
	w->id = waiting_copy(&p, e->id);
	w->message_id = waiting_copy(&p, e->message_id);
	w->exchange = waiting_copy(&p, e->exchange);
	w->routing_key = waiting_copy(&p, e->routing_key);
	w->owner = waiting_copy(&p, e->owner);
	w->copy = waiting_copy(&p, copy);
	w->cron = waiting_copy(&p, e->cron);
	w->tz = waiting_copy(&p, e->tz);
	w->recorded_due = e->due;
	return w;
}

/*
 * Who asks in request e, into a copy of it (req): as the daemons judge
 * it when the fold has a config; without one, every request counts.
 */
static void
waiting_requester(const struct waiting_fold *f, const struct event *e,
                  struct event *req, amqp_bytes_t *by, int *control)
{
	*req = *e;
	*by = e->writer;
	*control = 1;
	if (f->cfg != NULL)
		requests_requester(f->cfg, req, amqp_cstring_bytes(f->own_user),
		                   by, control);
}

/*
 * A copy record (P.copies): the copy of a message waiting whose id is
 * wanted and whose scheduled record carried none.  Its entry is made
 * again with the copy, the rest as it was.
 */
static int
waiting_fold_copy(struct waiting_fold *f, const struct event *e)
{
	struct waiting *w = idmap_get(&f->waiting, e->id), *nw;
	struct event as;
	void *old;

	if (w == NULL || w->copy.len > 0 || w->repeat)
		return 0;
	memset(&as, 0, sizeof(as));
	as.id = w->id;
	as.message_id = w->message_id;
	as.exchange = w->exchange;
	as.routing_key = w->routing_key;
	as.owner = w->owner;
	as.cron = w->cron;
	as.tz = w->tz;
	if (!waiting_wanted(f, &as))
		return 0;
	if ((nw = waiting_new(f, &as, e->copy)) == NULL)
		return -1;
	/* Everything but the strings, which waiting_new placed anew. */
	nw->due = w->due;
	nw->size = w->size;
	nw->seen = w->seen;
	nw->recorded_due = w->recorded_due;
	nw->repeat = w->repeat;
	nw->every = w->every;
	nw->occurrence = w->occurrence;
	nw->cancel_pending = w->cancel_pending;
	nw->rescheduled = w->rescheduled;
	nw->paused = w->paused;
	if (idmap_put(&f->waiting, nw->id, nw, &old) < 0) {
		free(nw);
		return -1;
	}
	free(old);
	return 0;
}

int
waiting_fold_event(struct waiting_fold *f, const struct event *e)
{
	struct waiting *w;
	struct event req;
	amqp_bytes_t by;
	void *old;
	int control;

	f->records++;
	switch (e->kind) {
	case EVENT_CANCEL:
	case EVENT_RESCHEDULE:
		waiting_requester(f, e, &req, &by, &control);
		return requests_add(&f->requests, &req, by, control);
	case EVENT_PAUSE:
	case EVENT_RESUME:
		/* One refused (1) changes nothing, as at a daemon. */
		waiting_requester(f, e, &req, &by, &control);
		if (requests_pause_read(&f->requests, &req, by, control, 1) < 0)
			return -1;
		return 0;
	case EVENT_SCHEDULED:
		if (idmap_del(&f->ended, e->id) != NULL)
			return 0;
		if ((w = waiting_new(f, e, e->copy)) == NULL)
			return -1;
		if (idmap_put(&f->waiting, e->id, w, &old) < 0) {
			free(w);
			return -1;
		}
		free(old); /* the same id again: the later record wins */
		return 0;
	case EVENT_COPY:
		return waiting_fold_copy(f, e);
	case EVENT_DELIVERED:
	case EVENT_PARKED:
	case EVENT_CANCELLED:
	case EVENT_DUPLICATE:
		if ((w = idmap_del(&f->waiting, e->id)) != NULL) {
			free(w);
			return 0;
		}
		return idmap_put(&f->ended, e->id, &ended_mark, &old);
	default:
		return 0;
	}
}

void
waiting_filter_init(struct waiting_filter *flt)
{
	flt->target = NULL;
	flt->due_before = INT64_MAX;
	flt->due_after = INT64_MIN;
	flt->series = 0;
}

int
waiting_filter_set(const struct waiting_filter *flt)
{
	return flt->target != NULL || flt->due_before != INT64_MAX ||
	       flt->due_after != INT64_MIN;
}

int
waiting_exchange_is_default(amqp_bytes_t b)
{
	return b.len == 0 || headers_key_is(b, "amq.default");
}

static int
waiting_exchange_eq(amqp_bytes_t a, amqp_bytes_t b)
{
	if (waiting_exchange_is_default(a) || waiting_exchange_is_default(b))
		return waiting_exchange_is_default(a) &&
		       waiting_exchange_is_default(b);
	return a.len == b.len && memcmp(a.bytes, b.bytes, a.len) == 0;
}

/* memcmp's equality, for empty bytes too (whose pointer may be NULL). */
static int
waiting_mem_eq(const void *a, const void *b, size_t n)
{
	return n == 0 || memcmp(a, b, n) == 0;
}

/* Whether t is "<name>/<key>". */
static int
waiting_target_is(const char *t, size_t tlen, amqp_bytes_t name,
                  amqp_bytes_t key)
{
	return tlen == name.len + 1 + key.len &&
	       waiting_mem_eq(t, name.bytes, name.len) && t[name.len] == '/' &&
	       waiting_mem_eq(t + name.len + 1, key.bytes, key.len);
}

int
waiting_match(const struct waiting_filter *flt, const struct waiting *w)
{
	const char *t = flt->target;
	size_t n;

	if (w->due >= flt->due_before || w->due < flt->due_after)
		return 0;
	if (t == NULL)
		return 1;
	n = strlen(t);
	if (waiting_exchange_eq((amqp_bytes_t){n, (void *)t}, w->exchange))
		return 1;
	if (!waiting_exchange_is_default(w->exchange))
		return waiting_target_is(t, n, w->exchange, w->routing_key);
	return waiting_target_is(t, n, amqp_empty_bytes, w->routing_key) ||
	       waiting_target_is(t, n, amqp_cstring_bytes("amq.default"),
	                         w->routing_key);
}

static int
waiting_bytes_cmp(amqp_bytes_t a, amqp_bytes_t b)
{
	size_t n = a.len < b.len ? a.len : b.len;
	int d = n ? memcmp(a.bytes, b.bytes, n) : 0;

	return d ? d : (a.len > b.len) - (a.len < b.len);
}

/* Soonest due first; then first seen, then id, so the order is stable. */
static int
waiting_cmp(const void *pa, const void *pb)
{
	const struct waiting *a = *(struct waiting *const *)pa;
	const struct waiting *b = *(struct waiting *const *)pb;

	if (a->due != b->due)
		return a->due < b->due ? -1 : 1;
	if (a->seen != b->seen)
		return a->seen < b->seen ? -1 : 1;
	return waiting_bytes_cmp(a->id, b->id);
}

/* Append w to the array *a of *n (room for *cap; first: the first
 * room).  -1 out of memory, *a untouched. */
static int
waiting_push(struct waiting ***a, size_t *n, size_t *cap, size_t first,
             struct waiting *w)
{
	struct waiting **grown;

	if (*n == *cap) {
		size_t more = *cap ? *cap * 2 : first;
		if ((grown = realloc(*a, more * sizeof(*grown))) == NULL)
			return -1;
		*a = grown;
		*cap = more;
	}
	(*a)[(*n)++] = w;
	return 0;
}

struct waiting_gather {
	const struct waiting_filter *flt;
	struct requests *requests;
	int64_t now;
	struct waiting_rows *r;
	size_t cap;
	int oom;
};

static int
waiting_gather(amqp_bytes_t key, void *value, void *ctx)
{
	struct waiting_gather *g = ctx;
	struct waiting_rows *r = g->r;
	struct waiting *w = value;
	struct cancel_match cm;

	(void)key;
	if (g->flt->series && !w->repeat)
		return 0;
	r->total++;
	if (g->oom)
		return 0;
	/* What a daemon will do with it when it next sees it. */
	w->paused = w->repeat &&
	            requests_series_paused(g->requests, w->id, w->message_id,
	                                   w->owner, g->now);
	w->cancel_pending = 0;
	if (requests_match(g->requests, w->message_id, w->id, w->owner, w->seen,
	                   g->now, &cm)) {
		w->cancel_pending = cm.cancel != NULL;
		if (cm.reschedule != NULL && cm.reschedule->due != w->due) {
			w->due = cm.reschedule->due;
			w->rescheduled = 1;
		}
	}
	if (waiting_match(g->flt, w) &&
	    waiting_push(&r->w, &r->n, &g->cap, 256, w) < 0)
		g->oom = 1;
	return 0;
}

int
waiting_select(struct waiting_fold *f, const struct waiting_filter *flt,
               int64_t now, struct waiting_rows *r)
{
	struct waiting_gather g = {flt, &f->requests, now, r, 0, 0};

	memset(r, 0, sizeof(*r));
	idmap_each(&f->waiting, waiting_gather, &g);
	if (g.oom) {
		free(r->w);
		memset(r, 0, sizeof(*r));
		return -1;
	}
	if (r->n > 1)
		qsort(r->w, r->n, sizeof(*r->w), waiting_cmp);
	return 0;
}

amqp_bytes_t
waiting_name(const struct waiting *w)
{
	return w->message_id.len > 0 ? w->message_id : w->id;
}

/* Whether id names w: its message-id or its cascade id. */
static int
waiting_is_named(const struct waiting *w, amqp_bytes_t id)
{
	return headers_bytes_eq(w->id, id) ||
	       (w->message_id.len > 0 && headers_bytes_eq(w->message_id, id));
}

struct waiting_count {
	amqp_bytes_t id;
	uint64_t n;
	int64_t last_due;
};

static int
waiting_count_one(amqp_bytes_t key, void *value, void *ctx)
{
	struct waiting_count *m = ctx;
	const struct waiting *w = value;

	(void)key;
	if (waiting_is_named(w, m->id)) {
		m->n++;
		if (w->due > m->last_due)
			m->last_due = w->due;
	}
	return 0;
}

uint64_t
waiting_count_id(struct waiting_fold *f, amqp_bytes_t id, int64_t *last_due)
{
	struct waiting_count m = {id, 0, 0};

	idmap_each(&f->waiting, waiting_count_one, &m);
	*last_due = m.last_due;
	return m.n;
}

struct waiting_names {
	amqp_bytes_t id;
	struct waiting **w;
	size_t n, cap;
	int oom;
};

static int
waiting_name_one(amqp_bytes_t key, void *value, void *ctx)
{
	struct waiting_names *m = ctx;
	struct waiting *w = value;

	(void)key;
	if (!m->oom && waiting_is_named(w, m->id) &&
	    waiting_push(&m->w, &m->n, &m->cap, 8, w) < 0)
		m->oom = 1;
	return 0;
}

long
waiting_named(struct waiting_fold *f, amqp_bytes_t id, struct waiting ***out)
{
	struct waiting_names m = {id, NULL, 0, 0, 0};

	idmap_each(&f->waiting, waiting_name_one, &m);
	if (m.oom) {
		free(m.w);
		*out = NULL;
		return -1;
	}
	*out = m.w;
	return (long)m.n;
}

/* waiting_needs_copy, whether w has its copy yet or not. */
static int
waiting_wants_copy(struct waiting_fold *f, const struct waiting *w, int64_t due,
                   int64_t at, amqp_bytes_t by, int control)
{
	struct cancel_match cm;
	int copied, moved;
	int64_t back = w->recorded_due;

	/* First seen after the request: not for it (requests.h).  An id
	 * x-cascade-superseded cannot hold: never copied. */
	if (w->repeat || w->seen > at || w->id.len == 0 || w->id.len > 255 ||
	    !requests_may_change(w->owner, by, control))
		return 0;
	copied = requests_superseded(&f->requests, w->message_id, w->id,
	                             w->owner, 0, at);
	moved = requests_match(&f->requests, w->message_id, w->id, w->owner,
	                       w->seen, at, &cm) &&
	        cm.reschedule != NULL;
	/*
	 * When the instance waiting comes back to a daemon, at the latest.
	 * A copy of it is out already: that copy, due at the latest
	 * request's time.  Else the original, by its recorded time, or by
	 * the time a later move (without a copy) gave it.
	 */
	if (copied)
		back = moved ? cm.reschedule->due : back;
	else if (moved && cm.reschedule->due > back)
		back = cm.reschedule->due;
	/* Due by the new time, or so soon that it comes back before the
	 * request could be missed: the request alone will do. */
	return !(!copied && due >= back) && back > at + WAITING_COPY_MARGIN_MS;
}

int
waiting_needs_copy(struct waiting_fold *f, const struct waiting *w, int64_t due,
                   int64_t at, amqp_bytes_t by, int control)
{
	return w->copy.len > 0 &&
	       waiting_wants_copy(f, w, due, at, by, control);
}

uint64_t
waiting_copyless(struct waiting_fold *f, amqp_bytes_t id, int64_t due,
                 int64_t at, amqp_bytes_t by, int control, int64_t max_size,
                 int64_t *seen)
{
	struct waiting **ws;
	uint64_t n = 0;
	long k = waiting_named(f, id, &ws);

	for (long i = 0; i < k; i++) {
		const struct waiting *w = ws[i];
		/* None is written for a body over the limit. */
		if (w->copy.len > 0 || w->size >= max_size ||
		    !waiting_wants_copy(f, w, due, at, by, control))
			continue;
		if (n++ == 0 || w->seen < *seen)
			*seen = w->seen;
	}
	free(ws);
	return n;
}
