/*
 * The broker objects cascade owns (CONTRACT section 3): their names, and
 * declaring them with exactly the contract's arguments.
 */
#ifndef CASCADE_TOPOLOGY_H
#define CASCADE_TOPOLOGY_H

#include "amqp_compat.h"
#include <stddef.h>

#include "config.h"
#include "ladder.h"

#define TOPOLOGY_NAME_MAX 256

struct topology {
	char exchange[TOPOLOGY_NAME_MAX];
	char ingress[TOPOLOGY_NAME_MAX];
	char ret[TOPOLOGY_NAME_MAX];
	char error[TOPOLOGY_NAME_MAX];
	char retry[TOPOLOGY_NAME_MAX];   /* exchange and queue */
	char events[TOPOLOGY_NAME_MAX];  /* stream: what waits (events.h) */
	char cancels[TOPOLOGY_NAME_MAX]; /* stream: cancellation requests */
	char delay[LADDER_MAX_LEVELS][TOPOLOGY_NAME_MAX];
	unsigned levels;
};

/* Names for cfg's prefix and ladder.  Pure. */
void topology_names(struct topology *t, const char *prefix,
                    const struct ladder *l);

/* topology_declare: a queue exists with other arguments (406). */
#define TOPOLOGY_MISMATCH (-2)

/*
 * Declare everything on channel ch (blocking; only while connecting).
 * Returns 0, -1 with the reason in err, or TOPOLOGY_MISMATCH when a queue
 * exists with other arguments: err has the broker's words, which name the
 * queue and the argument; nothing is changed.
 *
 * On RabbitMQ 4.x a quorum queue drops a message returned (nack, or a
 * channel closed while holding it) 20 times.  The queues cascade consumes
 * or browses (ingress, return, retry, error) are therefore declared there
 * with x-delivery-limit -1 (unlimited; on 3.x the same value would drop at
 * the first return, and there is no limit by default).  Ingress, return
 * and retry also dead-letter into P.error (at least once on quorum
 * queues): what the daemon rejects goes there.  reject_parks[i] (ingress,
 * return, retry) says whether that holds.  A queue made by an older
 * cascade keeps its arguments, and a warning gives the policy that adds
 * them.  With [events] enabled, the streams P.events and P.cancels are
 * declared too, keeping records for config_events_max_age; a stream
 * declared with another retention keeps it, with a warning.
 */
int topology_declare(amqp_connection_state_t conn, amqp_channel_t ch,
                     const struct config *cfg, const struct topology *t,
                     const struct ladder *l, int reject_parks[3], char *err,
                     size_t errsize);

#endif
