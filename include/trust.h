/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who wrote what cascade reads back from the broker.  RabbitMQ refuses a
 * message whose user-id is not the publishing connection's user, so the
 * user-id of a stream message (a record, or a batch of them) names its
 * writer.  cascade's own bookkeeping (scheduled, delivered, parked,
 * cancelled, duplicate, claim, series, and every batch) and markers are
 * believed only from a daemon's own user or one of [events] control_users:
 * anyone else who can write into the streams (a user with write on amq.default
 * or on P.*) is skipped before a batch body is decoded.  Requests (cancel,
 * reschedule) are read from anyone, as that writer's own request
 * (requests.h, docs/CONTRACT.md section 7.6).  A marker, too, is believed
 * from cascade's own users only: one planted with the token a reader
 * waits for would cut its reading short.  docs/security.md says who is
 * trusted with what.  Pure code.
 */
#ifndef CASCADE_TRUST_H
#define CASCADE_TRUST_H

#include "amqp_compat.h"
#include <stdint.h>

#include "config.h"

/* The writer of a stream message: its user-id; empty when it has none. */
amqp_bytes_t trust_writer_of(const amqp_basic_properties_t *p);

/*
 * Is writer cascade's own: own_user (the reader's login, a daemon's user)
 * or one of [events] control_users (cfg NULL: own_user only)?  An empty
 * writer never is.
 */
int trust_writer(const struct config *cfg, amqp_bytes_t own_user,
                 amqp_bytes_t writer);

/*
 * May a stream message of properties p (one record, or a batch) be read?
 * 1: read it; 0: its kind is believed only from cascade's own users and
 * its writer is not one: skip it without decoding further.  A message of
 * no known kind is read (the parser ignores it).
 */
int trust_stream_message(const struct config *cfg, amqp_bytes_t own_user,
                         const amqp_basic_properties_t *p);

/*
 * Is a message back from cascade's own queues (a return queue, a holding
 * queue) one a daemon put there?  The daemons publish every hop, wait and
 * park as their own user, so its user-id is a daemon's, or a control
 * user's (cascade-ctl reschedule's copies).  One without a user-id was
 * published by an earlier cascade, which did not sign its hops: it is
 * taken until unsigned_until (Unix ms; 0: never), as an upgrade needs.
 * Anything else was put there by someone with write on amq.default.
 */
int trust_hop(const struct config *cfg, amqp_bytes_t own_user,
              amqp_bytes_t writer, int64_t unsigned_until, int64_t now);

/* Writers named in the log: each once, at most this many. */
#define TRUST_SEEN_MAX 32

/* The writers already logged as untrusted. */
struct trust_seen {
	unsigned n;
	unsigned char len[TRUST_SEEN_MAX];
	char name[TRUST_SEEN_MAX][255];
};

/*
 * Is this the first time writer is seen untrusted (log it)?  0 when it
 * was seen already, or when TRUST_SEEN_MAX writers were: the metric still
 * counts every record.  s starts zeroed.
 */
int trust_first_sight(struct trust_seen *s, amqp_bytes_t writer);

#endif
