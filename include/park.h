/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parked messages (P.error): where one was going, and the properties to send
 * it back through cascade's exchange once the cause of its parking is fixed.
 * Pure code on rabbitmq-c's types, for cascade-ctl.
 *
 * A message is parked in one of three shapes (router_props, ROUTE_PARK):
 *  - on ingress (bad header, max_delay, target not allowed, or no target
 *    exchange for a zero delay): the publisher's own headers, x-target-* and
 *    the delay header included;
 *  - after one or more hops (target exchange missing, unroutable): the
 *    daemon's state x-cascade-due, x-cascade-exchange, x-cascade-routing-key
 *    and x-cascade-expiration / x-cascade-cc;
 *  - by a retry that gave up: the worker's message with x-cascade-queue, the
 *    work queue, and x-cascade-attempt.
 * Each also carries x-cascade-error, the reason.
 */
#ifndef CASCADE_PARK_H
#define CASCADE_PARK_H

#include "amqp_compat.h"
#include <stdint.h>

struct park_target {
	/* Target exchange; has_exchange 0: [router] default_target_exchange */
	amqp_bytes_t exchange;
	int has_exchange;
	amqp_bytes_t routing_key;
	/*
	 * 1 when no header names the routing key and it is the one the message
	 * was parked with.  The daemon parks with the error queue's name as
	 * routing key, so that one means "not recorded".
	 */
	int routing_key_parked;
	int64_t due; /* x-cascade-due, Unix epoch ms, when has_due */
	int has_due;
	amqp_bytes_t queue; /* x-cascade-queue: the work queue that gave up */
	int retry_gave_up;
	amqp_bytes_t reason; /* x-cascade-error; empty when absent */
	/* What this process's wire filter refused of its headers
	 * (wirefilter.h), escaped; empty when nothing was. */
	amqp_bytes_t refused;
};

/*
 * Where the parked message in would go if sent back, read from its headers;
 * parked_routing_key is the routing key it was delivered from P.error with.
 * Bytes in *t point into in or parked_routing_key.
 */
void park_target(const amqp_basic_properties_t *in,
                 amqp_bytes_t parked_routing_key, struct park_target *t);

/*
 * The properties to publish a parked message to cascade's exchange with:
 *  - x-cascade-error and the daemon's other x-cascade-* state, x-death,
 *    x-first-death-*, x-last-death-* and x-delivery-count are dropped;
 *  - the target becomes x-target-exchange / x-target-routing-key (see
 *    park_target; a publisher's own x-target-* headers stay as they are);
 *  - the due time stays: x-deliver-at = x-cascade-due in place of any delay
 *    header; without x-cascade-due the publisher's delay headers stay, and a
 *    retry that gave up, which has none, is due now (x-remaining-delay 0);
 *  - a retry that gave up loses x-cascade-attempt, so that it gets its
 *    policy's retries afresh;
 *  - expiration comes back from x-cascade-expiration, CC from x-cascade-cc;
 *    user-id is left out (only its own user may publish it).
 * Everything else (body aside) is kept.  Entries point into in's memory;
 * the table comes from pool.  Returns 0, or -1 when the pool is out of
 * memory.
 */
int park_requeue_props(const amqp_basic_properties_t *in,
                       amqp_bytes_t parked_routing_key, amqp_pool_t *pool,
                       amqp_basic_properties_t *out);

#endif
