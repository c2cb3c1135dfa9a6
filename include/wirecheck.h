/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bounds on AMQP 0-9-1 properties before rabbitmq-c decodes them.
 *
 * rabbitmq-c decodes nested field tables and arrays by recursion, and 0.11
 * (Debian 12) sets no bound on the depth: a header nested some 200,000 deep
 * exhausts the stack.  0.14 and later stop at 100.  Every body cascade
 * decodes itself (a batch's records, an envelope, a record's copy of a
 * message) is first walked here, without recursion, and refused when it
 * nests deeper, holds more fields than cascade or its users can need, runs
 * past its own lengths, or uses a field kind rabbitmq-c does not know.
 * What the broker delivers (decoded by rabbitmq-c itself) is held to the
 * same bounds on its decoded form, so that whatever cascade accepts it can
 * read back from its own streams and holding queues.
 *
 * Pure code: no allocation, no recursion, a stack of fixed size.
 */
#ifndef CASCADE_WIRECHECK_H
#define CASCADE_WIRECHECK_H

#include "amqp_compat.h"
#include <stddef.h>

/*
 * Tables and arrays nested one in another, the headers table counting as
 * the first.  RabbitMQ's deepest header is x-death (headers, array, table,
 * routing-keys array: 4); cascade's own are 1 deep (a copied message is a
 * byte array, decoded on its own).  16 leaves a publisher four times that,
 * and each level costs rabbitmq-c 0.11 one recursion of a few hundred bytes
 * of stack: nothing near its limit.  Kept well under rabbitmq-c 0.14's 100,
 * so that what passes here every version decodes.
 */
#define WIRECHECK_DEPTH_MAX 16

/*
 * Field values (table entries and array elements, at every depth) in one
 * set of properties.  rabbitmq-c spends some 40 bytes of memory on each
 * value, so a body of values of one byte each would cost 40 times its size:
 * 65,536 fields (about 2.6 MB decoded) is more than one 128 KiB frame of
 * ordinary headers holds, and bounds a forged body of any size.
 */
#define WIRECHECK_FIELDS_MAX 65536

/*
 * What every rabbitmq-c decodes: 0.14 and later refuse a field value
 * inside more than 100 tables and arrays below the headers table
 * (amqp_table.c, TABLE_DEPTH_LIMIT), 101 containers as counted here, and
 * lose the connection on it.  The wire filter (wirefilter.h) holds what
 * the broker delivers to this bound before the library sees it, on 0.11
 * too, which would decode deeper by recursion.
 */
#define WIRECHECK_LIBRARY_DEPTH 101

/* What the checks found wrong: 0 for none. */
enum wirecheck_status {
	WIRECHECK_MALFORMED = -1, /* a length past the end, an unknown kind */
	WIRECHECK_BOUND = -2,     /* nested too deep or too many fields */
};

/*
 * Check basic properties encoded as in a content header, from the property
 * flags on, in the len bytes at buf: 0, with *used the bytes they take
 * (trailing bytes are the caller's to judge), or an enum wirecheck_status
 * with *why a constant reason.  A second flag word (the continuation bit)
 * is malformed: basic has 14 properties, all in the first word.
 */
int wirecheck_props(const void *buf, size_t len, size_t *used,
                    const char **why);

/*
 * The same, held to what the library decodes (WIRECHECK_LIBRARY_DEPTH, no
 * bound on fields) instead of cascade's bounds.
 */
int wirecheck_props_library(const void *buf, size_t len, size_t *used,
                            const char **why);

/*
 * One value of a headers table, of kind kind, at buf[off..end) (after its
 * kind octet), held to what the library decodes: 0 when it decodes, with
 * *next where it ends; 1 when its extent is known (*next) but what it holds
 * does not decode (*why); WIRECHECK_MALFORMED with *why when its extent
 * cannot be told (a length past end, a kind of unknown size), so that
 * nothing after it can be read.
 */
int wirecheck_value(const void *buf, size_t off, size_t end, unsigned char kind,
                    size_t *next, const char **why);

/*
 * Check the same bounds on a table rabbitmq-c already decoded (a delivery's
 * headers), also without recursion: 0, or WIRECHECK_BOUND with *why.  A
 * NULL table passes.
 */
int wirecheck_table(const amqp_table_t *t, const char **why);

#endif
