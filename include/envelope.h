/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A message kept whole inside the body of another: how a message waits in
 * a holding queue (docs/how-it-works.md, "Native waiting").
 *
 * The daemon publishes to a holding queue over AMQP 0-9-1 and receives
 * from it over AMQP 1.0, so RabbitMQ converts between the two on the way,
 * and that conversion does not keep every 0-9-1 header type (decimals,
 * void, byte arrays, nested tables and arrays, the exact integer widths).
 * The body is the one part it never touches: an envelope carries the
 * message's 0-9-1 properties, encoded as on the wire, and its body, so the
 * message delivered from a holding queue is byte for byte the one the
 * ladder would deliver.
 *
 *   "CSCE" (4 bytes) | version 1 (1 byte) | properties length (4 bytes,
 *   big-endian) | basic properties as in a content header, from the
 *   property flags on | the body
 *
 * Pure code.
 */
#ifndef CASCADE_ENVELOPE_H
#define CASCADE_ENVELOPE_H

#include "amqp_compat.h"
#include <stddef.h>

/* The outer message's content-type, for whoever looks into the queue. */
#define ENVELOPE_CONTENT_TYPE "application/vnd.cascade.envelope"

#define ENVELOPE_HEAD 9 /* magic, version, properties length */

/* At most this many bytes encode props and body (a bound, not exact). */
size_t envelope_bound(const amqp_basic_properties_t *props, size_t body_len);

/*
 * Encode props and body into out (cap bytes, envelope_bound of them
 * suffice).  The length written, or 0 when the properties do not encode.
 */
size_t envelope_encode(const amqp_basic_properties_t *props, amqp_bytes_t body,
                       char *out, size_t cap);

/*
 * Decode in: properties from pool, *body pointing into in.  0, or -1 with
 * the reason in *why.
 */
int envelope_decode(amqp_bytes_t in, amqp_pool_t *pool,
                    amqp_basic_properties_t *props, amqp_bytes_t *body,
                    const char **why);

#endif
