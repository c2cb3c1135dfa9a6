/*
 * streamread: reading a stream (P.events, events.h) from its first record
 * up to a marker of our own, written and confirmed first, so that every
 * record written before the reading began is read; and reading on past any
 * message the AMQP library cannot decode.  In the library so that
 * cascade-ctl and the console read the streams the same way, trusting the
 * same writers (trust.h).
 *
 * What each record means is the caller's: a callback gets them in order.
 */
#ifndef CASCADE_STREAMREAD_H
#define CASCADE_STREAMREAD_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "events.h"

/* Zeroed, then the caller's part set. */
struct streamread {
	/* Set by the caller. */
	const char *name;   /* the stream */
	const char *tag;    /* our consumer tag */
	const char *marker; /* the marker's prefix: PREFIX-<pid>-<hex> */
	/* Each record but our marker, in stream order: 0, or -1 having
	 * said why in err. */
	int (*on_event)(void *arg, const struct event *e, char *err,
	                size_t size);
	void *arg;

	/* Set by the reading. */
	int reached;      /* our marker was read: every record before it was */
	uint64_t records; /* records handed to on_event */
	/* Undecodable messages read past (each cost a connection), and the
	 * offset of the first. */
	int64_t skipped, first_skipped;
	/* Stream messages skipped, written by a user neither cascade's own
	 * nor a control user (trust.h), and the first such writer. */
	uint64_t untrusted;
	char untrusted_writer[256];

	/* The reading's own. */
	char token[64]; /* the marker we wrote */
	struct events_resume resume;
};

/*
 * Read s->name from its first record up to a marker of ours, on
 * BROKER_CH_WORK of cl, which is closed at the end: what comes after the
 * marker is not read.  -1 with cl->err (the callback's reason, or the
 * broker's); s->reached says whether the marker was read.
 */
int streamread_run(struct client *cl, struct streamread *s);

#endif
