/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Content headers checked on the wire, before rabbitmq-c decodes them.
 *
 * rabbitmq-c 0.14 and later refuse a header nested more than 100 deep
 * (RabbitMQ takes it from any publisher), and the refusal is not the
 * message's but the connection's: the library's frame reader fails with
 * AMQP_STATUS_BAD_AMQP_DATA and the connection must be dropped, after which
 * the broker hands the same message back first.  0.11 decodes it by
 * recursion with no bound at all.  So every connection cascade opens reads
 * through this filter: it splits the bytes the socket delivers into frames,
 * holds each content header frame back until it is whole, walks it without
 * recursion (wirecheck.h, to what every rabbitmq-c decodes) and, when it
 * fails, hands the library a rewritten header frame in its place: the same
 * channel, class and body size (so the body frames that follow are
 * assembled as usual), the other properties kept when they can be read,
 * the header entries that fail dropped, and one header added, the marker,
 * that says what was refused.  The reader then settles the message as it
 * sees fit: the daemon rejects a delivery so that the broker dead-letters
 * it, whole, into P.error; a stream reader reads on past it.  No connection
 * is lost, and nothing else waits.
 *
 * The marker is x-cascade-undecodable, a long string that begins with a
 * random token of this process: a publisher cannot forge it.
 *
 * Why a socket of our own and not the library's reading: rabbitmq-c reads
 * through a table of functions each socket carries (amqp_socket_t's klass:
 * send, recv, open, close, get_sockfd, delete), the same in 0.11 to 0.18,
 * and calls recv with the buffer it decodes from.  Swapping that table for
 * one whose recv filters what the socket's own recv returned sits exactly
 * between TLS and the decoder, costs nothing on other frames (they pass in
 * place), and needs no second connection or thread.  The library offers no
 * call to install a socket class (amqp_set_socket is not exported), so the
 * table of a socket it made is replaced after it is set up (TLS options
 * check the class they were given) and before the first frame is read.
 *
 * The frame splitting (struct wirestream) is pure and tested on its own.
 */
#ifndef CASCADE_WIREFILTER_H
#define CASCADE_WIREFILTER_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The marker header's name. */
#define WIREFILTER_MARKER "x-cascade-undecodable"

/*
 * A header frame is held whole up to this size (cascade negotiates 128 KiB
 * frames, RabbitMQ's default too); a larger one passes unchecked, and the
 * library refuses it as larger than the frame size anyway.
 */
#define WIREFILTER_HOLD_MAX (1u << 20)

/* The frame stream of one connection, from the broker to the library. */
struct wirestream {
	unsigned char head[7]; /* a frame's type, channel and size */
	size_t head_have;
	uint64_t pass;       /* bytes of the current frame still to pass */
	unsigned char *hold; /* a header frame being held: head, payload, end */
	size_t hold_have, hold_need, hold_cap;
	unsigned char *spill; /* output that did not fit in place */
	size_t spill_at, spill_len, spill_cap;
	uint64_t refused; /* header frames rewritten */
};

void wirestream_init(struct wirestream *s);
void wirestream_free(struct wirestream *s);

/*
 * Filter the n bytes at buf, just read from the socket, in place: the
 * return value is how many bytes of output are ready at buf; output that
 * did not fit there (a held header frame let go) waits in the stream for
 * wirestream_take, and comes before anything read later.  -1 when out of
 * memory.  Never more output than was read, but for held frames.
 */
ssize_t wirestream_filter(struct wirestream *s, unsigned char *buf, size_t n);

/* Output waiting: how many bytes. */
size_t wirestream_pending(const struct wirestream *s);

/* Up to len bytes of waiting output into buf: how many. */
size_t wirestream_take(struct wirestream *s, void *buf, size_t len);

/*
 * Read the connection's socket through a filter: after the socket is set up
 * and opened, before login.  0, or -1 when out of memory (the socket is
 * left as it was).
 */
int wirefilter_install(amqp_connection_state_t conn);

/*
 * Output the filter holds for conn that the library has not read yet: a
 * reader that waits on the socket's descriptor must not wait while this is
 * not 0 (the descriptor is dry, the bytes are here).
 */
size_t wirefilter_pending(amqp_connection_state_t conn);

/*
 * Whether properties p carry this process's marker: 1 with *why the
 * reason the filter gave (what it refused, escaped; it points into p), or
 * 0.  A marker a publisher wrote is not this process's: 0.
 */
int wirefilter_refused(const amqp_basic_properties_t *p, amqp_bytes_t *why);

#endif
