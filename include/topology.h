/*
 * The broker objects cascade owns (CONTRACT section 3): their names, and
 * declaring them with exactly the contract's arguments.
 */
#ifndef CASCADE_TOPOLOGY_H
#define CASCADE_TOPOLOGY_H

#include <amqp.h>
#include <stddef.h>

#include "config.h"
#include "ladder.h"

#define TOPOLOGY_NAME_MAX 256

struct topology {
	char exchange[TOPOLOGY_NAME_MAX];
	char ingress[TOPOLOGY_NAME_MAX];
	char ret[TOPOLOGY_NAME_MAX];
	char error[TOPOLOGY_NAME_MAX];
	char retry[TOPOLOGY_NAME_MAX]; /* exchange and queue */
	char delay[LADDER_MAX_LEVELS][TOPOLOGY_NAME_MAX];
	unsigned levels;
};

/* Names for cfg's prefix and ladder.  Pure. */
void topology_names(struct topology *t, const char *prefix,
		    const struct ladder *l);

/*
 * Declare everything on channel ch (blocking; only while connecting).  A
 * queue that exists with other arguments fails with the broker's words, which
 * name the queue and the argument, in err; nothing is changed.
 */
int topology_declare(amqp_connection_state_t conn, amqp_channel_t ch,
		     const struct config *cfg, const struct topology *t,
		     const struct ladder *l, char *err, size_t errsize);

#endif
