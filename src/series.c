/* Which copy of each repeat is the live one (series.h). */
#include "series.h"

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
series_add(struct series *s, amqp_bytes_t id, int64_t occurrence,
           amqp_bytes_t token, int64_t until)
{
	struct series_head *h = idmap_get(&s->map, id);
	void *prev;

	if (h == NULL) {
		if ((h = calloc(1, sizeof(*h))) == NULL)
			return -1;
		if (idmap_put(&s->map, id, h, &prev) < 0) {
			free(h);
			return -1;
		}
	} else if (occurrence < h->occurrence) {
		return 0; /* an older record read late: the later stands */
	}
	h->occurrence = occurrence;
	h->token_len =
	    token.len < sizeof(h->token) - 1 ? token.len : sizeof(h->token) - 1;
	if (h->token_len > 0)
		memcpy(h->token, token.bytes, h->token_len);
	h->token[h->token_len] = '\0';
	if (until > h->until)
		h->until = until;
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
