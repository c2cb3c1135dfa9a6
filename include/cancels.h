/*
 * The cancellation requests a daemon (or cascade-ctl list) holds, by id:
 * what it read from P.cancels (events.h), each until it lapses.  Pure code.
 */
#ifndef CASCADE_CANCELS_H
#define CASCADE_CANCELS_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "idmap.h"

struct cancels {
	struct idmap map; /* id -> struct cancel */
};

struct cancel {
	int park;
	int64_t until; /* Unix ms */
};

void cancels_init(struct cancels *c);
void cancels_free(struct cancels *c);

/*
 * Hold a request (again): a later one for the same id wins, and the
 * longer of the two lifetimes.  -1 out of memory.
 */
int cancels_add(struct cancels *c, amqp_bytes_t id, int park, int64_t until);

/*
 * The request for either id (the message-id, then the cascade id) still
 * in force at now, or NULL.
 */
const struct cancel *cancels_find(const struct cancels *c,
                                  amqp_bytes_t message_id,
                                  amqp_bytes_t cascade_id, int64_t now);

/* Forget the requests that lapsed by now; how many are left. */
size_t cancels_prune(struct cancels *c, int64_t now);

#endif
