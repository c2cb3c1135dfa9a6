/* SPDX-License-Identifier: Apache-2.0 */
/*
 * streamread: reading a stream (P.events, events.h) from its first record
 * up to a marker of our own, written and confirmed first, so that every
 * record written before the reading began is read; and reading on past any
 * message the AMQP library cannot decode.  In the library so that
 * cascade-ctl and the console read the streams the same way, trusting the
 * same writers (trust.h).
 *
 * What each record means is the caller's: a callback gets them in order.
 * cascade-ctl stops at the marker; the console follows the stream on, live.
 */
#ifndef CASCADE_STREAMREAD_H
#define CASCADE_STREAMREAD_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "events.h"

/* How often on_tick is called, and a stop asked for is seen, at most. */
#define STREAMREAD_TICK_MS 1000
/* A marker's token: PREFIX-<pid>-<16 hex digits>, with its NUL. */
#define STREAMREAD_TOKEN_MAX 64

/* Zeroed, then the caller's part set. */
struct streamread {
	/* Set by the caller. */
	const char *name;   /* the stream */
	const char *tag;    /* our consumer tag */
	const char *marker; /* the marker's prefix: PREFIX-<pid>-<hex> */
	/*
	 * Each record but our marker, in stream order: 0, 1 to stop the
	 * reading, or -1 having said why in err.  Each callback is called
	 * with arg, on the reading's thread.
	 */
	int (*on_event)(void *arg, const struct event *e, char *err,
	                size_t size);
	void *arg;
	/*
	 * 1: read on past the marker, each record as it comes, until a
	 * callback says 1 (the console follows P.events live).  0: stop at
	 * the marker (cascade-ctl).
	 */
	int follow;
	/* Optional: once, when our marker is read (caught up): 0, 1 to
	 * stop, or -1 with err. */
	int (*on_reached)(void *arg, char *err, size_t size);
	/*
	 * Optional: each marker record that is not ours (another reader's:
	 * cascade-ctl's, a daemon's), with its token, in stream order: 0, 1
	 * to stop, or -1 with err.  The console keeps the last few, so that
	 * a cascade-ctl that wrote one knows when the console has read
	 * everything before it.
	 */
	int (*on_marker)(void *arg, amqp_bytes_t token, char *err, size_t size);
	/*
	 * Optional: about every STREAMREAD_TICK_MS, whether records come or
	 * not: 0, 1 to stop, or -1 with err.  The way for another thread to
	 * stop a reading: set a flag (atomic) that this reads.  Progress
	 * ("catching up: N records") can be shown from here too.
	 */
	int (*on_tick)(void *arg, char *err, size_t size);
	/*
	 * Set by a caller running s again after streamread_run failed on a
	 * lost connection (having connected again): the reading goes on
	 * after the last offset it read, with the marker it wrote, so no
	 * record is handed over twice and none is missed.  Not after a stop
	 * or a callback's error: the rest of that stream message's batch
	 * would be skipped.
	 */
	int again;
	/*
	 * Optional: stream messages in flight at most (basic.qos), 0 for
	 * the default of 1000.  A reading that wants one message (the
	 * console's fetch) asks for a few: what is in flight when it stops
	 * is read and thrown away before the channel closes.
	 */
	uint16_t prefetch;
	/*
	 * Optional: read from the first chunk the broker wrote at or after
	 * this Unix ms (events_stream_since), not from the first record.
	 * The marker is still the end: what comes before since is not read.
	 */
	int64_t since;

	/* Set by the reading. */
	int reached;      /* our marker was read: every record before it was */
	int stopped;      /* a callback said 1 */
	uint64_t records; /* records handed to on_event */
	/* Undecodable messages read past, and the offset of the first:
	 * refused by the wire filter (wirefilter.h), or, should the library
	 * still refuse one, each at the cost of a connection (reconnects,
	 * at most STREAM_SKIPS_MAX). */
	int64_t skipped, first_skipped, reconnects;
	/* Stream messages skipped, written by a user neither cascade's own
	 * nor a control user (trust.h), and the first such writer. */
	uint64_t untrusted;
	char untrusted_writer[256];

	/* The reading's own. */
	char token[STREAMREAD_TOKEN_MAX]; /* the marker we wrote */
	struct events_resume resume;
};

/*
 * Read s->name from its first record up to a marker of ours, on
 * BROKER_CH_WORK of cl, which is closed at the end (and opened again, for
 * another reading): what comes after the
 * marker is not read, unless s->follow, when the reading goes on until a
 * callback says 1.  0 at the marker or a stop (s->stopped); -1 with
 * cl->err (the callback's reason, or the broker's); s->reached says
 * whether the marker was read.  Before the marker, 30 s without a record
 * is an error; after it, a quiet stream is not.
 */
int streamread_run(struct client *cl, struct streamread *s);

/*
 * Write a marker record into stream name, as streamread_run writes its
 * own, and wait for the broker's confirm: its token,
 * PREFIX-<pid>-<16 hex digits>, into token (size: at least
 * STREAMREAD_TOKEN_MAX).  A reader that meets it has read every record
 * written before.  0, or -1 with cl->err.
 */
int streamread_marker(struct client *cl, const char *name, const char *prefix,
                      char *token, size_t size);

#endif
