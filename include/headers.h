/* SPDX-License-Identifier: Apache-2.0 */
/*
 * AMQP header tables: reading delays and names from any field type, and
 * copying a table while dropping entries.  Pure code on rabbitmq-c's types.
 */
#ifndef CASCADE_HEADERS_H
#define CASCADE_HEADERS_H

#include "amqp_compat.h"
#include <stdint.h>

/* The entry named key, or NULL. */
const amqp_field_value_t *headers_find(const amqp_table_t *t, const char *key);

/* A message's headers table, or NULL when it has none. */
const amqp_table_t *headers_of(const amqp_basic_properties_t *props);

/*
 * A delay: an integer of any AMQP width, signed or unsigned, in ms; a
 * float or double, truncated towards zero (as the delayed-message plugin
 * took it); or a string ("5000", "250ms", "90s", "15m", "2h", "3d").
 * Returns 0, or -1 with a reason ("must be an integer or a number ...")
 * in *why.
 */
int headers_delay(const amqp_field_value_t *v, int64_t *ms, const char **why);

/*
 * An absolute time in Unix epoch ms: an integer of any width, a string of
 * digits, or an AMQP timestamp (seconds).  Returns 0 or -1 with *why.
 */
int headers_epoch_ms(const amqp_field_value_t *v, int64_t *ms,
                     const char **why);

/* Any integer kind as int64: 1 if it is one, 0 if not, -1 if too large. */
int headers_integer(const amqp_field_value_t *v, int64_t *out);

/* A string field (UTF-8 or bytes) as bytes; -1 for any other type. */
int headers_string(const amqp_field_value_t *v, amqp_bytes_t *out);

/* What a header is to cascade (the table is in headers.c). */
enum header_class {
	HEADER_OTHER,        /* the publisher's own */
	HEADER_DISTRIBUTION, /* CC, BCC */
	HEADER_DELAY,        /* x-remaining-delay, x-delay, x-deliver-at,
	                        x-opt-delivery-time, x-opt-delivery-delay */
	HEADER_TARGET,       /* x-target-exchange, x-target-routing-key */
	HEADER_BROKER,       /* x-death, x-*-death-*, x-delivery-count,
	                      * x-acquired-count */
	HEADER_USER_ID,      /* x-cascade-user-id */
	HEADER_ATTEMPT,      /* x-cascade-attempt */
	HEADER_PARK_NOTE,    /* x-cascade-error, x-cascade-dropped-headers */
	HEADER_STATE,        /* every other x-cascade-*: routing state */
	HEADER_CLASSES
};

/* Where a message is published: a hop or delivery, a park, a requeue. */
enum header_use { HEADER_FORWARD, HEADER_PARK, HEADER_REQUEUE, HEADER_USES };

/* What becomes of a header there; HEADER_ASK: the caller decides. */
enum header_fate { HEADER_KEEP, HEADER_DROP, HEADER_ASK };

enum header_class headers_class(amqp_bytes_t key);

/* The fate of key for use, and its class in *cls (unless NULL). */
enum header_fate headers_fate(amqp_bytes_t key, enum header_use use,
                              enum header_class *cls);

/* Whether a header is routing state that must not reach the target. */
int headers_is_routing(amqp_bytes_t key);

/* The same bytes?  The one comparison of amqp_bytes_t in cascade. */
int headers_bytes_eq(amqp_bytes_t a, amqp_bytes_t b);

/* Is key exactly name? */
int headers_key_is(amqp_bytes_t key, const char *name);

/*
 * Copy the entries of in that `drop` does not reject into out, with room for
 * `extra` more entries that the caller appends at out->num_entries.  Entries
 * point into in's memory; only the array comes from pool.  Returns -1 when
 * the pool is out of memory.
 */
int headers_filter(const amqp_table_t *in, int (*drop)(amqp_bytes_t key),
                   int extra, amqp_pool_t *pool, amqp_table_t *out);

/* Append an entry; the caller made room with headers_filter's extra. */
void headers_put_i64(amqp_table_t *t, const char *key, int64_t v);
void headers_put_bytes(amqp_table_t *t, const char *key, amqp_bytes_t v);
void headers_put_value(amqp_table_t *t, const char *key,
                       const amqp_field_value_t *v);

/*
 * Bytes the properties take on the wire: the property flags and every
 * property present, as rabbitmq-c encodes them.  A content-header frame is
 * HEADERS_FRAME_OVERHEAD bytes more, and must fit in the connection's
 * frame_max: check before publishing, for a frame that does not fit breaks
 * the connection after the method frame went out.
 */
size_t headers_props_size(const amqp_basic_properties_t *p);
#define HEADERS_FRAME_OVERHEAD                                                 \
	20 /* frame header and end, class, weight,                             \
	      body size */

/*
 * Basic properties framed for storage in a body (envelope.h, and the
 * batches of records in events.h): a 4-byte big-endian length, then the
 * properties as a content header encodes them, from the flags on.
 * headers_props_put writes them into out (cap bytes) and returns how many
 * bytes that took, or 0 when they do not fit or encode.
 */
size_t headers_props_put(const amqp_basic_properties_t *p, char *out,
                         size_t cap);

/* What headers_props_get found wrong: 0 for none. */
enum headers_props_error {
	HEADERS_PROPS_SHORT = 1,   /* the input ends first */
	HEADERS_PROPS_UNDECODABLE, /* rabbitmq-c cannot read them */
	HEADERS_PROPS_LENGTH,      /* they do not take the whole length */
	HEADERS_PROPS_BOUND, /* nested too deep or too many fields (wirecheck.h)
	                      */
};

/*
 * Read framed properties at the start of in into *p (from pool): the bytes
 * read in *used, and 0; or an enum headers_props_error.
 */
int headers_props_get(amqp_bytes_t in, amqp_pool_t *pool,
                      amqp_basic_properties_t *p, size_t *used);

/* The encoded size of one table (its 4-byte length included). */
size_t headers_table_size(const amqp_table_t *t);

/* Is b well-formed UTF-8 (RabbitMQ refuses other exchange names)? */
int headers_utf8_valid(amqp_bytes_t b);

/* Deep equality of two tables: the same entries, in any order. */
int headers_equal(const amqp_table_t *a, const amqp_table_t *b);

#endif
