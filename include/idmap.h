/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A hash map from byte strings (message ids) to pointers: open addressing,
 * FNV-1a, a power-of-two table at most half full.  Keys are copied, each
 * allocated to its size behind its length; a slot is two pointers.  Pure
 * code, for the ids a daemon holds and the records cascade-ctl list folds.
 */
#ifndef CASCADE_IDMAP_H
#define CASCADE_IDMAP_H

#include "amqp_compat.h"
#include <stddef.h>

struct idmap_slot {
	unsigned char *key; /* NULL: empty; else its length, then its bytes */
	void *value;
};

struct idmap {
	struct idmap_slot *slot;
	size_t cap; /* 0 or a power of two */
	size_t n;
};

void idmap_init(struct idmap *m);

/* Free the table and the keys; each value goes to free_value when set. */
void idmap_free(struct idmap *m, void (*free_value)(void *));

/* The value for key, or NULL. */
void *idmap_get(const struct idmap *m, amqp_bytes_t key);

/*
 * Set key's value; the old value, if any, in *old (else NULL).  -1 out of
 * memory, or a key longer than UINT32_MAX bytes (nothing changed).
 */
int idmap_put(struct idmap *m, amqp_bytes_t key, void *value, void **old);

/*
 * The address of key's value, to change it in place (also from within
 * idmap_each), or NULL when key is not there.  Valid until the next
 * idmap_put or removal.
 */
void **idmap_ref(struct idmap *m, amqp_bytes_t key);

/* Remove key; its value, or NULL when it was not there. */
void *idmap_del(struct idmap *m, amqp_bytes_t key);

/*
 * Visit every entry; fn returns nonzero to remove that entry (its value is
 * then the caller's to free).  After a removal fn may see an entry a second
 * time (one moved back past the cursor): it must not mind.
 */
void idmap_each(struct idmap *m,
                int (*fn)(amqp_bytes_t key, void *value, void *ctx), void *ctx);

/*
 * Visit the entries in at most `slots` slots from slot *cursor on, for a
 * walk spread over many calls: fn returns nonzero to stop after that entry.
 * *cursor is then where the next call goes on, 0 once the walk passed the
 * last slot.  A walk misses or repeats an entry only when the map grows or
 * loses entries between calls.  Returns how many slots it looked at.
 */
size_t idmap_walk(struct idmap *m, size_t *cursor, size_t slots,
                  int (*fn)(amqp_bytes_t key, void *value, void *ctx),
                  void *ctx);

#endif
