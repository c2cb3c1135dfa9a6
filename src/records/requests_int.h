/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the request state (requests.h) share: the key of an
 * id in a kind and the map's access by it, and a few helpers of the
 * kinds.  requests.c holds the map (its kinds, counts, the one prune, the
 * trust check, the reading of a record); requests_kinds.c what each
 * kind's entries say.  Only those two files include it.
 */
#ifndef CASCADE_REQUESTS_INT_H
#define CASCADE_REQUESTS_INT_H

#include "requests.h"

#include <stdlib.h>
#include <string.h>

/* A claim lasts this long past its due time, then it is forgotten. */
#define CLAIM_MARGIN_MS 86400000LL

/* A key: the kind's byte, then the id. */
struct key {
	unsigned char b[1 + REQUESTS_ID_MAX];
};

/* The key of id in kind, in k; 0 when the id is too long to be held. */
static inline int
key_of(struct key *k, int kind, amqp_bytes_t id, amqp_bytes_t *out)
{
	if (id.len > REQUESTS_ID_MAX)
		return 0;
	k->b[0] = (unsigned char)kind;
	if (id.len > 0)
		memcpy(k->b + 1, id.bytes, id.len);
	out->len = 1 + id.len;
	out->bytes = k->b;
	return 1;
}

/* A key's kind, and its id. */
static inline int
key_kind(amqp_bytes_t key)
{
	return ((const unsigned char *)key.bytes)[0];
}

static inline amqp_bytes_t
key_id(amqp_bytes_t key)
{
	return (amqp_bytes_t){key.len - 1, (unsigned char *)key.bytes + 1};
}

/* The entry of id in kind, or NULL. */
static inline void *
entry_get(const struct requests *r, int kind, amqp_bytes_t id)
{
	struct key k;
	amqp_bytes_t key;

	if (r->n[kind] == 0 || !key_of(&k, kind, id, &key))
		return NULL;
	return idmap_get(&r->map, key);
}

/* The address of id's entry in kind (idmap_ref), or NULL. */
static inline void **
entry_ref(struct requests *r, int kind, amqp_bytes_t id)
{
	struct key k;
	amqp_bytes_t key;

	if (!key_of(&k, kind, id, &key))
		return NULL;
	return idmap_ref(&r->map, key);
}

/* A new entry for id in kind.  -1 out of memory, or an id too long. */
static inline int
entry_put(struct requests *r, int kind, amqp_bytes_t id, void *value)
{
	struct key k;
	amqp_bytes_t key;
	void *prev;

	if (!key_of(&k, kind, id, &key) ||
	    idmap_put(&r->map, key, value, &prev) < 0)
		return -1;
	return 0;
}

static inline void
cancel_free(struct cancel *k)
{
	free(k->superseded);
	free(k);
}

static inline int
same_bytes(amqp_bytes_t a, const char *b, size_t blen)
{
	return a.len == blen && (blen == 0 || memcmp(a.bytes, b, blen) == 0);
}

/* The claim of scope in the list for one message-id, or NULL. */
static inline struct claim *
claim_in_scope(struct claim *k, amqp_bytes_t scope)
{
	for (; k != NULL; k = k->next)
		if (same_bytes(scope, k->scope, k->scope_len))
			return k;
	return NULL;
}

/* The time after which a holder due at due is forgotten, saturated. */
static inline int64_t
claim_margin(int64_t due)
{
	return due > INT64_MAX - CLAIM_MARGIN_MS ? INT64_MAX
	                                         : due + CLAIM_MARGIN_MS;
}

/* requests_pause.c: would pause record e from by hold a pause not held
 * yet?  And the lapsed pauses of one name dropped, counted off *n. */
int requests_pause_new(const struct requests *r, const struct event *e,
                       amqp_bytes_t by);
struct pause *requests_pauses_lapsed(struct pause *head, int64_t now,
                                     size_t *n);

#endif
