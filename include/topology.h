/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The broker objects cascade owns (docs/CONTRACT.md section 3): their
 * names, and declaring them with exactly the arguments listed there.
 */
#ifndef CASCADE_TOPOLOGY_H
#define CASCADE_TOPOLOGY_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "ladder.h"
#include "router.h"

#define TOPOLOGY_NAME_MAX 256

struct topology {
	char exchange[TOPOLOGY_NAME_MAX];
	char ingress[TOPOLOGY_NAME_MAX];
	char error[TOPOLOGY_NAME_MAX];
	char retry[TOPOLOGY_NAME_MAX];   /* exchange and queue */
	char events[TOPOLOGY_NAME_MAX];  /* stream: what waits (events.h) */
	char cancels[TOPOLOGY_NAME_MAX]; /* stream: cancellation requests */
	char series[TOPOLOGY_NAME_MAX];  /* stream: repeats' series records */
	char copies[TOPOLOGY_NAME_MAX];  /* stream: waiting messages' copies */
	/* queue: reschedule requests waiting for a reading of P.events */
	char requests[TOPOLOGY_NAME_MAX];
	unsigned levels;
	/*
	 * [topology] shards: copies of the ladder and of the return queue
	 * (docs/CONTRACT.md section 8).  With one, the unsharded names,
	 * P.delay.<ttl> and P.return; with more, shard s's are
	 * P.delay.<ttl>.s<s> and P.return.s<s>.  ret[s];
	 * delay[s * levels + k] (topology_delay).
	 */
	unsigned shards;
	char (*ret)[TOPOLOGY_NAME_MAX];
	char (*delay)[TOPOLOGY_NAME_MAX];
	/*
	 * [topology] drain_shards: the return queues of a former layout
	 * that this one does not have, consumed until they are empty, and
	 * the delay queues that feed them (drain_delay[i * levels + k], for
	 * cascade-ctl status: the same ladder is assumed).  drain_sharded:
	 * they were declared with x-queue-leader-locator.
	 */
	/*
	 * [topology] mode = native: shard s's holding queue, P.hold or
	 * P.hold.s<s>, where a message waits its last stretch (see
	 * topology_declare_hold).  Named in every mode.
	 */
	char (*hold)[TOPOLOGY_NAME_MAX];
	unsigned drains;
	int drain_sharded;
	char (*drain)[TOPOLOGY_NAME_MAX];
	char (*drain_delay)[TOPOLOGY_NAME_MAX];
};

/*
 * Names for prefix, ladder l, shards and drain_shards (0: none).  Pure
 * apart from allocating the name arrays; -1 when out of memory.  Release
 * with topology_free.
 */
int topology_names(struct topology *t, const char *prefix,
                   const struct ladder *l, unsigned shards,
                   unsigned drain_shards);

void topology_free(struct topology *t);

/*
 * The ladder and the names cfg gives (ladder_init, topology_names), for a
 * tool that reads a checked configuration: 0, or -1 with why (static).
 */
int topology_of_config(struct topology *t, struct ladder *l,
                       const struct config *cfg, const char **why);

/* Shard s's delay queue of level k. */
static inline const char *
topology_delay(const struct topology *t, unsigned s, unsigned k)
{
	return t->delay[s * t->levels + k];
}

/*
 * P.series' segment files, in bytes (x-stream-max-segment-size-bytes): a
 * stream drops records a whole segment at a time, so it keeps at most its
 * window plus one segment, about 4,000 series records.
 */
#define TOPOLOGY_SERIES_SEGMENT (INT64_C(1) << 20)

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
 * or browses (ingress, return, retry, requests, error) are therefore
 * declared there with x-delivery-limit -1 (unlimited; on 3.x the same
 * value would drop at the first return, and there is no limit by default).
 * Ingress, return, retry and requests also dead-letter into P.error (at
 * least once on quorum queues): what the daemon rejects goes there.
 * reject_parks[src] (by ROUTE_FROM_*: ingress, return, retry, requests)
 * says whether that holds.  A queue made by an older
 * cascade keeps its arguments, and a warning gives the policy that adds
 * them.  With [events] enabled, the streams P.events, P.cancels and
 * P.copies are declared too, keeping records for config_events_max_age,
 * and P.series, keeping them for [events] series_window (a stream
 * declared with another retention keeps it, with a warning), and the
 * queue P.requests.
 *
 * With shards, every shard's return and delay queues are declared, with
 * x-queue-leader-locator client-local (see topology_place), and the
 * drained return queues of a former layout as they were.  reject_parks[1]
 * holds only when it holds for every return queue.
 */
int topology_declare(amqp_connection_state_t conn, amqp_channel_t ch,
                     const struct config *cfg, const struct topology *t,
                     const struct ladder *l, int reject_parks[ROUTE_SOURCES],
                     char *err, size_t errsize);

/*
 * The holding queues, one per shard: quorum queues that dead-letter what
 * the daemon rejects into P.error, with x-max-length and reject-publish
 * like a delay queue (a full one refuses, and the message takes the
 * ladder; the messages it holds until a time count), and a delivery
 * limit of TOPOLOGY_HOLD_LIMIT.  Blocking; only while connecting.
 * Returns as topology_declare does.
 */
#define TOPOLOGY_HOLD_LIMIT 20
int topology_declare_hold(amqp_connection_state_t conn, amqp_channel_t ch,
                          const struct config *cfg, const struct topology *t,
                          char *err, size_t errsize);

/*
 * How many of the holding queues exist (passive declares on ch, which is
 * open again afterwards), in *n; each one's in present[s].  0, or -1 with
 * err.
 */
int topology_hold_present(amqp_connection_state_t conn, amqp_channel_t ch,
                          const struct topology *t, int *present, unsigned *n,
                          char *err, size_t errsize);

/*
 * Where shard leaders go.  A quorum queue's leader starts on the node its
 * declaring connection is on (x-queue-leader-locator client-local), so with
 * shards and several [broker] url (a cluster's nodes), the shards whose
 * return queue does not exist yet (asked on conn's channel ch) are first
 * declared over one connection per node, shard s through URL s mod n: each
 * level's shards then lead on different nodes.  Best effort: a node that
 * cannot be reached leaves the placement to topology_declare's connection.
 * Blocking; only while connecting.  Returns how many shards were placed.
 */
unsigned topology_place(amqp_connection_state_t conn, amqp_channel_t ch,
                        const struct config *cfg, const struct topology *t,
                        const struct ladder *l);

#endif
