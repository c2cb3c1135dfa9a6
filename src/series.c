/* Which copy of each repeat is the live one (series.h). */
#include "series.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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

int
series_new(const struct series *s, amqp_bytes_t id)
{
	return idmap_get(&s->map, id) == NULL;
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

int
series_add(struct series *s, amqp_bytes_t id, int64_t occurrence,
           amqp_bytes_t token, int64_t until)
{
	void **ref = idmap_ref(&s->map, id), *prev;
	struct series_head *h = ref != NULL ? *ref : NULL, *n;

	if (token.len > UINT32_MAX)
		return -1;
	if (h != NULL && occurrence < h->occurrence)
		return 0; /* an older record read late: the later stands */
	if ((n = sized(h, token)) == NULL)
		return -1;
	if (ref != NULL) {
		*ref = n;
	} else if (idmap_put(&s->map, id, n, &prev) < 0) {
		free(n);
		return -1;
	}
	n->occurrence = occurrence;
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
	return occurrence == h->occurrence &&
	       (token.len != h->token_len ||
	        memcmp(token.bytes, h->token, token.len) != 0);
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
