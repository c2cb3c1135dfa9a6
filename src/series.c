/* Repeats: the schedule, and which copy of each is the live one (series.h). */
#include "series.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int
series_check(const struct series_plan *p, int64_t k, int64_t max_every,
             const char **why)
{
	int64_t due;

	if (p->every < SERIES_EVERY_MIN || p->every > max_every)
		*why = "x-cascade-every: out of range";
	else if (p->first < 0 || p->first > SERIES_TIME_MAX)
		*why = "x-cascade-first: out of range";
	else if (p->times < 0)
		*why = "x-cascade-times: out of range";
	else if (p->until < 0 || p->until > SERIES_TIME_MAX)
		*why = "x-cascade-until: out of range";
	else if (!series_at(p, k, &due))
		*why = "x-cascade-occurrence: out of range";
	else
		return 0;
	return -1;
}

int
series_at(const struct series_plan *p, int64_t k, int64_t *due)
{
	int64_t off, t;

	if (k < 1 || p->every <= 0 || (p->times > 0 && k > p->times))
		return 0;
	if (__builtin_mul_overflow(k - 1, p->every, &off) ||
	    __builtin_add_overflow(p->first, off, &t) || t > SERIES_TIME_MAX)
		return 0;
	if (k > 1 && p->until > 0 && t > p->until)
		return 0;
	*due = t;
	return 1;
}

int64_t
series_last(const struct series_plan *p, int64_t t)
{
	int64_t n;

	if (p->every <= 0 || p->first < 0 || t < p->first)
		return 0;
	if (t > SERIES_TIME_MAX)
		t = SERIES_TIME_MAX;
	/* 0 <= first <= t: no overflow. */
	n = (t - p->first) / p->every + 1;
	if (p->times > 0 && n > p->times)
		n = p->times;
	if (p->until > 0) {
		int64_t u = p->until < p->first
		                ? 1
		                : (p->until - p->first) / p->every + 1;
		if (n > u)
			n = u;
	}
	return n;
}

int64_t
series_start(const struct series_plan *p, int64_t now)
{
	int64_t d, k, due;

	if (p->all || p->first >= now - SERIES_GRACE_MS)
		return p->first;
	/* The smallest k with first + (k - 1) * every >= now - grace. */
	d = now - SERIES_GRACE_MS - p->first;
	k = 2 + (d - 1) / p->every;
	return series_at(p, k, &due) ? due : now;
}

int64_t
series_deliver_as(const struct series_plan *p, int64_t k, int64_t now)
{
	int64_t j = series_last(p, now);

	if (j <= k)
		return k;
	if (!p->all)
		return j;
	return j - k >= SERIES_CATCH_UP_MAX ? j - SERIES_CATCH_UP_MAX + 1 : k;
}

int
series_next(const struct series_plan *p, int64_t k, int64_t now, int64_t *next,
            int64_t *due)
{
	int64_t t;

	if (k < 1 || k == INT64_MAX || !series_at(p, k + 1, &t))
		return 0;
	*next = k + 1;
	*due = t > now + SERIES_PACE_MS ? t : now + SERIES_PACE_MS;
	return 1;
}

void
series_init(struct series *s)
{
	idmap_init(&s->map);
}

void
series_free(struct series *s)
{
	idmap_free(&s->map, free);
}

/* h, or a copy of it sized for token; NULL out of memory (h stays). */
static struct series_head *
sized(struct series_head *h, amqp_bytes_t token)
{
	struct series_head *n;

	if (h != NULL && h->token_len == token.len)
		return h;
	if ((n = realloc(h, offsetof(struct series_head, token) + token.len)) ==
	    NULL)
		return NULL;
	if (h == NULL)
		memset(n, 0, offsetof(struct series_head, token));
	return n;
}

static int
same_token(const struct series_head *h, amqp_bytes_t token)
{
	return token.len == h->token_len &&
	       (token.len == 0 ||
	        memcmp(token.bytes, h->token, token.len) == 0);
}

int
series_add(struct series *s, amqp_bytes_t id, int64_t occurrence,
           amqp_bytes_t token, int64_t until, int64_t at)
{
	void **ref = idmap_ref(&s->map, id), *prev;
	struct series_head *h = ref != NULL ? *ref : NULL, *n;

	if (token.len > UINT32_MAX)
		return -1;
	if (h != NULL && occurrence < h->occurrence)
		return 0; /* an older record read late: the later stands */
	/* The same record again (a refresh): only its age changes. */
	if (h != NULL && occurrence == h->occurrence && same_token(h, token)) {
		if (at > h->written)
			h->written = at;
		if (until > h->until)
			h->until = until;
		return 0;
	}
	if ((n = sized(h, token)) == NULL)
		return -1;
	if (ref != NULL) {
		*ref = n;
	} else if (idmap_put(&s->map, id, n, &prev) < 0) {
		free(n);
		return -1;
	}
	n->occurrence = occurrence;
	n->written = at;
	n->token_len = (uint32_t)token.len;
	if (token.len > 0)
		memcpy(n->token, token.bytes, token.len);
	if (until > n->until)
		n->until = until;
	return 0;
}

int
series_stale(const struct series *s, amqp_bytes_t id, int64_t occurrence,
             amqp_bytes_t token)
{
	const struct series_head *h;

	if (s->map.n == 0 || id.len == 0 ||
	    (h = idmap_get(&s->map, id)) == NULL)
		return 0;
	if (occurrence < h->occurrence)
		return 1;
	return occurrence == h->occurrence && !same_token(h, token);
}

static int
lapsed(amqp_bytes_t key, void *value, void *ctx)
{
	struct series_head *h = value;

	(void)key;
	if (h->until > *(const int64_t *)ctx)
		return 0;
	free(h);
	return 1;
}

size_t
series_prune(struct series *s, int64_t now)
{
	idmap_each(&s->map, lapsed, &now);
	return s->map.n;
}

struct refresh {
	int64_t stale, now;
	size_t max, wrote;
	int (*write)(amqp_bytes_t id, const struct series_head *h, void *ctx);
	void *ctx;
};

/* One entry of the walk: write it again when old and in force; 1 stops. */
static int
refresh_one(amqp_bytes_t key, void *value, void *ctx)
{
	struct refresh *r = ctx;
	struct series_head *h = value;

	if (h->written > r->stale || h->until <= r->now)
		return 0;
	if (r->write(key, h, r->ctx) < 0)
		return 1;
	h->written = r->now;
	return ++r->wrote >= r->max;
}

size_t
series_refresh(struct series *s, size_t *cursor, size_t slots, size_t max,
               int64_t stale, int64_t now,
               int (*write)(amqp_bytes_t id, const struct series_head *h,
                            void *ctx),
               void *ctx)
{
	struct refresh r = {stale, now, max, 0, write, ctx};

	if (max == 0)
		return 0;
	(void)idmap_walk(&s->map, cursor, slots, refresh_one, &r);
	return r.wrote;
}
