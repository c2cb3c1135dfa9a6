/* SPDX-License-Identifier: Apache-2.0 */
/* The publishes of one confirm-mode channel: see outbox.h. */
#include "outbox.h"

#include <stdio.h>
#include <string.h>

#include "headers.h"

void
outbox_init(struct outbox *o)
{
	memset(o, 0, sizeof(*o));
	TAILQ_INIT(&o->queued);
	TAILQ_INIT(&o->inflight);
	TAILQ_INIT(&o->suspects);
	TAILQ_INIT(&o->retry);
	TAILQ_INIT(&o->paused);
	TAILQ_INIT(&o->stuck);
}

void
outbox_drop_list(struct outbox_list *l, outbox_free_fn free_item, void *ctx)
{
	struct outbox_item *it;

	while ((it = TAILQ_FIRST(l)) != NULL) {
		TAILQ_REMOVE(l, it, link);
		free_item(it, ctx);
	}
}

void
outbox_drop(struct outbox *o, outbox_free_fn free_item, void *ctx)
{
	outbox_drop_list(&o->queued, free_item, ctx);
	outbox_drop_list(&o->inflight, free_item, ctx);
	outbox_drop_list(&o->suspects, free_item, ctx);
	outbox_drop_list(&o->retry, free_item, ctx);
	outbox_drop_list(&o->paused, free_item, ctx);
	outbox_drop_list(&o->stuck, free_item, ctx);
	o->probing = 0;
	o->ready = 0;
	o->blocked = 0;
	o->last_seq = 0;
}

unsigned
outbox_count(const struct outbox_list *l)
{
	const struct outbox_item *it;
	unsigned n = 0;

	TAILQ_FOREACH(it, l, link)
		n++;
	return n;
}

void
outbox_open(struct outbox *o)
{
	o->ready = 1;
	o->last_seq = 0;
}

int
outbox_may_send(const struct outbox *o, const struct outbox_item *it)
{
	return o->ready && !o->blocked && (!o->probing || it->suspect);
}

void
outbox_queue(struct outbox *o, struct outbox_item *it)
{
	/* Only outbox_next makes a suspect: one queued is one no more. */
	it->suspect = 0;
	TAILQ_INSERT_TAIL(&o->queued, it, link);
}

void
outbox_sent(struct outbox *o, struct outbox_item *it, amqp_bytes_t exchange,
            amqp_bytes_t routing_key)
{
	it->seq = ++o->last_seq;
	it->exchange = exchange;
	it->routing_key = routing_key;
	it->returned = 0;
	TAILQ_INSERT_TAIL(&o->inflight, it, link);
}

struct outbox_item *
outbox_next(struct outbox *o, int *probe_done)
{
	struct outbox_item *it;

	*probe_done = 0;
	if (!o->ready || o->blocked)
		return NULL;
	if (o->probing) {
		if (!TAILQ_EMPTY(&o->inflight))
			return NULL;
		if ((it = TAILQ_FIRST(&o->suspects)) != NULL) {
			TAILQ_REMOVE(&o->suspects, it, link);
			it->suspect = 1;
			return it;
		}
		o->probing = 0;
		*probe_done = 1;
	}
	if ((it = TAILQ_FIRST(&o->queued)) != NULL)
		TAILQ_REMOVE(&o->queued, it, link);
	return it;
}

struct outbox_item *
outbox_confirmed(struct outbox *o, uint64_t tag, int multiple)
{
	struct outbox_item *it;

	TAILQ_FOREACH(it, &o->inflight, link) {
		if (it->seq > tag)
			return NULL;
		if (multiple || it->seq == tag) {
			TAILQ_REMOVE(&o->inflight, it, link);
			it->suspect = 0;
			return it;
		}
	}
	return NULL;
}

struct outbox_item *
outbox_returned(struct outbox *o, amqp_bytes_t exchange,
                amqp_bytes_t routing_key, const char *text, outbox_same_fn same,
                void *ctx)
{
	struct outbox_item *it;

	TAILQ_FOREACH(it, &o->inflight, link) {
		if (it->returned || !headers_bytes_eq(it->exchange, exchange) ||
		    !headers_bytes_eq(it->routing_key, routing_key))
			continue;
		if (same != NULL && !same(it, ctx))
			continue;
		it->returned = 1;
		snprintf(it->return_text, sizeof(it->return_text), "%s", text);
		return it;
	}
	return NULL;
}

enum outbox_close
outbox_closed(struct outbox *o, int by_publish, struct outbox_item **culprit)
{
	struct outbox_item *it;

	o->ready = 0;
	o->last_seq = 0;
	*culprit = NULL;
	if (!by_publish || TAILQ_EMPTY(&o->inflight))
		return OUTBOX_CLOSE_FAIL;
	it = TAILQ_FIRST(&o->inflight);
	if (TAILQ_NEXT(it, link) == NULL) {
		TAILQ_REMOVE(&o->inflight, it, link);
		it->returned = 0;
		it->suspect = 0;
		*culprit = it;
		return OUTBOX_CLOSE_CULPRIT;
	}
	/* Before any older suspects, in publish order. */
	while ((it = TAILQ_LAST(&o->inflight, outbox_list)) != NULL) {
		TAILQ_REMOVE(&o->inflight, it, link);
		it->returned = 0;
		it->suspect = 0;
		TAILQ_INSERT_HEAD(&o->suspects, it, link);
	}
	o->probing = 1;
	return OUTBOX_CLOSE_PROBE;
}

int64_t
outbox_retry_later(struct outbox *o, struct outbox_item *it, int64_t now,
                   double unit)
{
	int64_t ms = OUTBOX_RETRY_MIN_MS;
	unsigned n = it->retries++;

	while (n-- > 0 && ms < OUTBOX_RETRY_MAX_MS)
		ms *= 2;
	if (ms > OUTBOX_RETRY_MAX_MS)
		ms = OUTBOX_RETRY_MAX_MS;
	/* 80-100%: items refused together do not come back together. */
	ms -= (int64_t)((double)ms * 0.2 * unit);
	it->retry_at = now + ms;
	it->suspect = 0;
	TAILQ_INSERT_TAIL(&o->retry, it, link);
	return ms;
}

struct outbox_item *
outbox_retry_due(struct outbox *o, int64_t now)
{
	struct outbox_item *it;

	if (o->blocked)
		return NULL;
	TAILQ_FOREACH(it, &o->retry, link) {
		if (it->retry_at <= now) {
			TAILQ_REMOVE(&o->retry, it, link);
			return it;
		}
	}
	return NULL;
}

int64_t
outbox_retry_next(const struct outbox *o)
{
	const struct outbox_item *it;
	int64_t first = INT64_MAX;

	TAILQ_FOREACH(it, &o->retry, link)
		if (it->retry_at < first)
			first = it->retry_at;
	return first;
}

void
outbox_pause(struct outbox *o, struct outbox_item *it)
{
	it->suspect = 0;
	TAILQ_INSERT_TAIL(&o->paused, it, link);
}

struct outbox_item *
outbox_resume(struct outbox *o)
{
	struct outbox_item *it;

	if (o->blocked || (it = TAILQ_FIRST(&o->paused)) == NULL)
		return NULL;
	TAILQ_REMOVE(&o->paused, it, link);
	return it;
}

void
outbox_stuck(struct outbox *o, struct outbox_item *it)
{
	TAILQ_INSERT_TAIL(&o->stuck, it, link);
}

int
outbox_settled(const struct outbox *o)
{
	return TAILQ_EMPTY(&o->inflight) && TAILQ_EMPTY(&o->queued) &&
	       TAILQ_EMPTY(&o->suspects);
}
