/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What waits in cascade, recorded in RabbitMQ streams (durable,
 * replicated, no plugin: RabbitMQ 3.9 and later):
 *
 *   P.events   a `scheduled` record when a message starts waiting (first
 *              sight from P.ingress or P.retry) and one when it stops
 *              (`delivered`, `parked` or `cancelled`): cascade-ctl list
 *              folds them.  Not one per hop.
 *   P.cancels  `cancel` requests.  Every daemon reads it from the start when
 *              it connects, keeps the requests whose messages may still be
 *              waiting (requests.h), and drops (or parks) those messages at
 *              their next hop or delivery.
 *   P.series   repeats' `series` records (requests.h), read like P.cancels,
 *              kept for [events] series_window only: the daemons write
 *              the latest of each series again before it ages out.
 *   P.copies   a `copy` record beside each scheduled record that has one:
 *              the message itself, for a reschedule that moves it
 *              earlier.  Apart from P.events, so that a reader of what
 *              waits (list, the console) does not read every body too.
 *
 * Every stream also carries `marker` records: a reader writes one and
 * reads until it sees it, so it knows it has read everything before.
 *
 * A record is an AMQP message with an empty body; its type property names
 * the kind and its headers carry the fields, so any client can read the
 * streams.  The daemon writes its P.events records in batches: one stream
 * message of type "batch" whose body holds the records one after the
 * other, each as [4-byte big-endian length][its properties encoded as in
 * an AMQP 0-9-1 content header, from the property flags on], which any
 * AMQP 0-9-1 library decodes (pika: BasicProperties().decode()).  One
 * message per few milliseconds instead of one per record is what makes
 * the records cheap for the broker.  Pure code.
 */
#ifndef CASCADE_EVENTS_H
#define CASCADE_EVENTS_H

#include "amqp_compat.h"
#include <stdint.h>

#include "router.h"

enum event_kind {
	EVENT_SCHEDULED,
	EVENT_DELIVERED,
	EVENT_PARKED,
	EVENT_CANCELLED,
	EVENT_CANCEL, /* a request, in P.cancels */
	EVENT_MARKER,
	EVENT_RESCHEDULE, /* a request, in P.cancels: a new due time */
	EVENT_CLAIM,      /* in P.cancels: a message with x-cascade-unique */
	EVENT_DUPLICATE,  /* in P.events: one not scheduled (unique keep) */
	EVENT_SERIES,     /* in P.series: a repeat's live copy (requests.h) */
	EVENT_PAUSE,  /* a request, in P.cancels: pause a series or target */
	EVENT_RESUME, /* a request, in P.cancels: resume it */
	EVENT_COPY,   /* in P.copies: a scheduled message's copy */
	EVENT_KINDS
};

struct event {
	enum event_kind kind;
	int64_t at;              /* written, Unix ms (x-cascade-at) */
	amqp_bytes_t id;         /* x-cascade-id: one message, unique */
	amqp_bytes_t message_id; /* the publisher's (property), or empty */
	/* scheduled */
	int64_t due;              /* Unix ms (x-cascade-due) */
	amqp_bytes_t exchange;    /* target (x-cascade-exchange) */
	amqp_bytes_t routing_key; /* target (x-cascade-routing-key) */
	int64_t size;             /* body bytes (x-cascade-size) */
	amqp_bytes_t owner;       /* its checked user-id (x-cascade-user-id) */
	/*
	 * x-cascade-message (bytes): the message as its first hop published
	 * it, an envelope (envelope.h), for cascade-ctl reschedule to
	 * publish again when it moves a message earlier.  Only up to
	 * [events] copy_max_size bytes, and never a repeat's.  On a copy
	 * record in P.copies, with id and at; on a scheduled record only
	 * as earlier versions wrote them (readers take both).
	 */
	amqp_bytes_t copy;
	/*
	 * A repeat's copy (router.h), so list can show its series: the
	 * interval in ms (x-cascade-every; 0: none) or the cron expression
	 * (x-cascade-cron) and its zone (x-cascade-tz; empty: UTC), and the
	 * occurrence the copy is for (x-cascade-occurrence, below).
	 */
	int64_t every;
	amqp_bytes_t cron, tz;
	/* parked */
	amqp_bytes_t reason; /* x-cascade-error */
	/* cancel and reschedule: x-cascade-cancel or x-cascade-reschedule
	 * names a message-id or a cascade id (due: the new due time) */
	amqp_bytes_t cancel;
	/*
	 * reschedule, x-cascade-superseded (optional): the cascade ids,
	 * separated by commas, of which the requester published a copy due
	 * at the new time, with x-cascade-copied = at.  Every instance of
	 * them copied before at (the original: never) is dropped on sight.
	 * A string, not an array: RabbitMQ streams before 4.x drop arrays
	 * on the way through.
	 */
	amqp_bytes_t superseded;
	int park;      /* x-cascade-cancel-park: park rather than drop */
	int64_t until; /* x-cascade-until: the request lapses then, Unix ms */
	/*
	 * Who asks (requests.h): writer is the record's user-id property,
	 * which RabbitMQ checked against the connection that wrote it.  A
	 * daemon relaying a request published to P puts the requester's
	 * user-id (validated the same way; empty when it had none) in
	 * x-cascade-requester.
	 */
	amqp_bytes_t writer;
	amqp_bytes_t requester;
	int has_requester;
	/* claim: x-cascade-claim names the message-id (in cancel), id the
	 * claimant's cascade id, due its due time, requester its publisher;
	 * x-cascade-unique: keep, or replace */
	int replace;
	/* cancel, made by a daemon from a claim (requests.h): why; 0 asked */
	int cancel_reason;
	/*
	 * pause and resume: cancel names a series (its id or message-id,
	 * x-cascade-pause or x-cascade-resume) or, with target set, a
	 * target, EXCHANGE[/KEY] (x-cascade-pause-target or
	 * x-cascade-resume-target).
	 */
	int target;
	/* series: id is the series' (x-cascade-series), with the live
	 * copy's occurrence and token; scheduled: a repeat's copy's
	 * occurrence */
	int64_t occurrence;
	amqp_bytes_t token;
	/* marker */
	amqp_bytes_t marker; /* x-cascade-marker: the writer's token */
};

/*
 * Who published a message (requests.h): the user-id RabbitMQ checked, kept
 * in x-cascade-user-id while it waits; on first sight (fresh) the
 * property only.  Empty: published without one.
 */
amqp_bytes_t events_owner(const amqp_basic_properties_t *p, int fresh);

/* The type property's value for kind ("scheduled", ...). */
const char *events_kind_name(enum event_kind kind);

/*
 * The properties of e's record (delivery-mode 2, type, message-id,
 * headers), with the headers table from pool.  -1 out of memory.
 */
int events_props(const struct event *e, amqp_pool_t *pool,
                 amqp_basic_properties_t *out);

/*
 * Bounds on what a record may say, checked before any arithmetic: times
 * (x-cascade-at, -due, -until) are Unix ms from 1970 to the end of the
 * year 9999; a repeat's occurrence and interval and a body's size are
 * counts well inside int64; ids, tokens, users, cron expressions and
 * zones are at most 255 bytes, as an AMQP short string is.
 */
#define EVENTS_TIME_MAX INT64_C(253402300799999)
#define EVENTS_COUNT_MAX (INT64_C(1) << 48)
#define EVENTS_ID_MAX 255
#define EVENTS_SUPERSEDED_MAX 65536

/*
 * Read a record's properties into e (bytes point into p).  -1 when it is
 * not a record of a known kind, lacks a field its kind needs, or a field
 * is out of the bounds above.
 */
int events_parse(const amqp_basic_properties_t *p, struct event *e);

/*
 * The record of what became of a message (kind: scheduled, delivered,
 * parked or cancelled) from its route r, its properties and its body size,
 * at now.  Bytes point into r and props.
 */
void events_of(enum event_kind kind, const struct route *r,
               const amqp_basic_properties_t *props, size_t body_len,
               int64_t now, struct event *e);

/* Does a message published to P carry a request (events_request)? */
int events_is_request(const amqp_basic_properties_t *props);

/*
 * A request published to P as the record for P.cancels, in force until
 * until: a cancellation (x-cascade-cancel, and x-cascade-cancel-park), a
 * reschedule (x-cascade-reschedule: the caller sets e->due), a pause or a
 * resume (x-cascade-pause, x-cascade-resume; of a target:
 * x-cascade-pause-target, x-cascade-resume-target).  One per message.
 * The requester is the publisher's user-id (empty: none).  -1 when props
 * hold no usable request: why says what is wrong.
 */
int events_request(const amqp_basic_properties_t *props, int64_t until,
                   int64_t now, struct event *e, const char **why);

/*
 * The inverse of events_request: the properties of a message that, published
 * to P, asks the daemons for request e (kind cancel, reschedule, pause or
 * resume; e->target for a target's).  This is how a publisher asks, who
 * may write to P only (docs/security.md): the request header naming
 * e->cancel, x-cascade-cancel-park when e->park, x-deliver-at = e->due
 * for a reschedule, and user-id = e->requester when set, which RabbitMQ
 * checks against the connection.  The header table comes from pool.  -1
 * when e is not such a request, names nothing or over 255 bytes, or out
 * of memory.
 */
int events_request_props(const struct event *e, amqp_pool_t *pool,
                         amqp_basic_properties_t *out);

/*
 * x-cascade-superseded, a list of cascade ids separated by commas: the
 * next id of list from *off (1, with *id; empty ids and ids over 255
 * bytes are skipped), 0 at its end.
 */
int events_superseded_next(amqp_bytes_t list, size_t *off, amqp_bytes_t *id);

/* Append id to the list of *len bytes in buf, which has room for it and
 * a comma. */
void events_superseded_append(char *buf, size_t *len, amqp_bytes_t id);

/*
 * Reading a stream past a message no client of this AMQP library can
 * decode: rabbitmq-c 0.14 and later refuse headers nested more than 100
 * deep, and the connection is lost on it; read from the start again, the
 * stream would hand it over first every time.  So a reader notes the
 * offset of each message it could read (the x-stream-offset header
 * RabbitMQ adds), and after such a loss reads on from the next one.
 * Offsets are normally dense; if the one after the last read is not the
 * culprit, each further loss there skips one more.
 */
struct events_resume {
	int64_t last;  /* the last offset read; -1: none */
	int64_t base;  /* last, at the latest loss */
	int64_t steps; /* losses in a row at base */
	int64_t from;  /* read from this offset; -1: from the first */
};

void events_resume_init(struct events_resume *r);

/* A message of the stream was read: note its offset. */
void events_resume_read(struct events_resume *r,
                        const amqp_basic_properties_t *p);

/* The connection was lost on an undecodable message: the offset to read
 * from next (also in r->from). */
int64_t events_resume_skip(struct events_resume *r);

/* The x-stream-offset argument of a basic.consume reading a stream from
 * offset from, or from its first record when from < 0. */
void events_stream_offset(int64_t from, amqp_table_entry_t *arg);

/*
 * The same from offset from, or, when from < 0, from the first chunk the
 * broker wrote at or after Unix ms since (a stream's timestamp offset, in
 * seconds: RabbitMQ 3.9 and later); from the first record when since <= 0.
 */
void events_stream_since(int64_t from, int64_t since, amqp_table_entry_t *arg);

/*
 * A copy record is looked for in P.copies from this long before the
 * x-cascade-at of its scheduled record: the broker stamps a stream's
 * chunks with its own clock, which may be behind the daemon's.
 */
#define EVENTS_COPY_LEAD_MS 60000

/* The type of a batch of records. */
#define EVENTS_BATCH_TYPE "batch"

/* Is a stream message of these properties a batch of records? */
int events_is_batch(const amqp_basic_properties_t *p);

/*
 * Append the record of properties p to a batch of *len bytes in *buf (of
 * *cap, grown with realloc).  0, or -1 out of memory.
 */
int events_batch_add(char **buf, size_t *len, size_t *cap,
                     const amqp_basic_properties_t *p);

/*
 * The next record of batch body from *off: its properties from pool.  1
 * with *p set, 0 at the end, -1 when the rest does not decode.
 */
int events_batch_next(amqp_bytes_t body, size_t *off, amqp_pool_t *pool,
                      amqp_basic_properties_t *p);

/*
 * A fresh cascade id: 16 bytes of hex from a 64-bit counter mixed with a
 * per-process random seed, so daemons never hand out the same one.
 */
void events_new_id(char out[17]);

#endif
