/* SPDX-License-Identifier: Apache-2.0 */
/* Backpressure per destination: see targets.h. */
#include "targets.h"

#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "headers.h"

void
targets_init(struct targets *ts, int64_t min_ms, int64_t max_ms)
{
	memset(ts, 0, sizeof(*ts));
	ts->min_ms = min_ms > 0 ? min_ms : 1;
	ts->max_ms = max_ms > ts->min_ms ? max_ms : ts->min_ms;
}

void
targets_free(struct targets *ts)
{
	free(ts->t);
	memset(ts, 0, sizeof(*ts));
}

static int
target_is(const struct target *t, amqp_bytes_t ex, amqp_bytes_t rk)
{
	amqp_bytes_t e = {t->exchange_len, (void *)(uintptr_t)t->exchange};
	amqp_bytes_t k = {t->routing_key_len,
	                  (void *)(uintptr_t)t->routing_key};

	return headers_bytes_eq(e, ex) && headers_bytes_eq(k, rk);
}

static struct target *
targets_find(const struct targets *ts, amqp_bytes_t ex, amqp_bytes_t rk)
{
	/* Few destinations ever refuse: a scan is cheaper than a hash. */
	for (size_t i = 0; i < ts->n; i++)
		if (target_is(&ts->t[i], ex, rk))
			return &ts->t[i];
	return NULL;
}

/* The entry for a destination, made (or taken over) when absent. */
static struct target *
targets_get(struct targets *ts, amqp_bytes_t ex, amqp_bytes_t rk)
{
	struct target *t = targets_find(ts, ex, rk);

	if (t != NULL)
		return t;
	if (ex.len > 255 || rk.len > 255)
		return NULL; /* AMQP short strings: cannot happen */
	if (ts->n == ts->cap && ts->cap < TARGETS_MAX) {
		size_t cap = ts->cap ? ts->cap * 2 : 16;
		struct target *nt = realloc(ts->t, cap * sizeof(*nt));
		if (nt == NULL)
			return NULL;
		ts->t = nt;
		ts->cap = cap;
	}
	if (ts->n < ts->cap) {
		t = &ts->t[ts->n++];
	} else {
		/* Full: the one refused longest ago makes room. */
		t = &ts->t[0];
		for (size_t i = 1; i < ts->n; i++)
			if (ts->t[i].last_refused < t->last_refused)
				t = &ts->t[i];
	}
	memset(t, 0, sizeof(*t));
	if (ex.len > 0)
		memcpy(t->exchange, ex.bytes, ex.len);
	if (rk.len > 0)
		memcpy(t->routing_key, rk.bytes, rk.len);
	t->exchange_len = (uint8_t)ex.len;
	t->routing_key_len = (uint8_t)rk.len;
	return t;
}

int64_t
targets_refused(struct targets *ts, amqp_bytes_t exchange,
                amqp_bytes_t routing_key, int64_t now)
{
	struct target *t = targets_get(ts, exchange, routing_key);
	int64_t ms = ts->min_ms;

	if (t == NULL)
		return -1;
	/* Refusals of publishes sent before the backoff began (a prefetch
	 * full of them) do not lengthen it again. */
	if (t->refusals > 0 && now < t->until) {
		t->refused_total++;
		t->last_refused = now;
		return t->until - now;
	}
	for (unsigned i = 0; i < t->refusals && ms < ts->max_ms; i++)
		ms *= 2;
	if (ms > ts->max_ms)
		ms = ts->max_ms;
	t->refusals++;
	t->refused_total++;
	t->last_refused = now;
	t->until = now + ms;
	return ms;
}

void
targets_accepted(struct targets *ts, amqp_bytes_t exchange,
                 amqp_bytes_t routing_key)
{
	struct target *t = targets_find(ts, exchange, routing_key);

	if (t != NULL) {
		t->refusals = 0;
		t->until = 0;
	}
}

int64_t
targets_wait(const struct targets *ts, amqp_bytes_t exchange,
             amqp_bytes_t routing_key, int64_t now)
{
	const struct target *t;

	if (ts->n == 0)
		return 0; /* the common case: nothing ever refused */
	t = targets_find(ts, exchange, routing_key);
	if (t == NULL || t->refusals == 0 || now >= t->until)
		return 0;
	return t->until - now;
}

void
targets_diverted(struct targets *ts, amqp_bytes_t exchange,
                 amqp_bytes_t routing_key)
{
	struct target *t = targets_find(ts, exchange, routing_key);

	if (t != NULL)
		t->diverted_total++;
}

size_t
targets_backing_off(const struct targets *ts, int64_t now)
{
	size_t n = 0;

	for (size_t i = 0; i < ts->n; i++)
		if (ts->t[i].refusals > 0 && now < ts->t[i].until)
			n++;
	return n;
}
