/* SPDX-License-Identifier: Apache-2.0 */
/*
 * streamread: reading a stream up to a marker of ours, and past what the
 * AMQP library cannot decode (include/streamread.h).
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "duration.h"
#include "headers.h"
#include "streamread.h"
#include "trust.h"
#include "wirefilter.h"

#define STREAM_PREFETCH 1000 /* messages in flight, unless s->prefetch */
#define STREAM_ACK_EVERY 250 /* ack (multiple) after this many messages */
/* No record for this long before reaching our marker: give up.  An idle
 * limit, not a total one, so that a long stream may take its time. */
#define STREAM_IDLE_MS 30000
/*
 * Undecodable messages read past in one reading, at most.  Each costs a
 * connection; a stream with more (every one forged: cascade writes none)
 * is refused, at a clear error, rather than read for hours.
 */
#define STREAM_SKIPS_MAX 1000

/*
 * basic.consume of a stream from s->resume.from (its first record when
 * none), with the prefetch and manual acks a stream wants.
 */
static int
streamread_consume(struct client *cl, const struct streamread *s)
{
	amqp_table_entry_t arg;
	amqp_table_t args = {1, &arg};
	amqp_rpc_reply_t r;
	char what[TOPOLOGY_NAME_MAX + 32];

	amqp_basic_qos(cl->conn, BROKER_CH_WORK, 0,
	               s->prefetch > 0 ? s->prefetch : STREAM_PREFETCH, 0);
	if (broker_check(cl->conn, "basic.qos", cl->err, sizeof(cl->err)) < 0)
		return -1;
	events_stream_since(s->resume.from, s->since, &arg);
	if (amqp_basic_consume(
	        cl->conn, BROKER_CH_WORK, amqp_cstring_bytes(s->name),
	        amqp_cstring_bytes(s->tag), 0, 0, 0, args) != NULL)
		return 0;
	r = amqp_get_rpc_reply(cl->conn);
	snprintf(what, sizeof(what), "read stream %s", s->name);
	broker_reply_string(r, what, cl->err, sizeof(cl->err));
	return -1;
}

/*
 * A frame that is not a delivery came while reading: a close or a
 * consumer cancelled by the broker (its stream deleted) is an error.
 */
static int
streamread_frame(struct client *cl)
{
	amqp_frame_t f;
	int st;

	if ((st = amqp_simple_wait_frame(cl->conn, &f)) != AMQP_STATUS_OK) {
		snprintf(cl->err, sizeof(cl->err), "reading the streams: %s",
		         amqp_error_string2(st));
		return -1;
	}
	if (f.frame_type != AMQP_FRAME_METHOD)
		return 0;
	switch (f.payload.method.id) {
	case AMQP_CHANNEL_CLOSE_METHOD:
		if (f.channel != BROKER_CH_WORK)
			return 0;
		/* fall through */
	case AMQP_CONNECTION_CLOSE_METHOD:
		broker_close_reason(&f.payload.method, cl->err,
		                    sizeof(cl->err));
		return -1;
	case AMQP_BASIC_CANCEL_METHOD: {
		const amqp_basic_cancel_t *k = f.payload.method.decoded;
		snprintf(cl->err, sizeof(cl->err),
		         "the broker stopped our reading (consumer %.*s): was "
		         "the stream deleted?",
		         (int)k->consumer_tag.len,
		         (const char *)k->consumer_tag.bytes);
		return -1;
	}
	default:
		return 0;
	}
}

/* One record of stream s: the marker, or to the callback.  0, 1 to
 * stop, or -1. */
static int
streamread_record(struct client *cl, struct streamread *s,
                  const amqp_basic_properties_t *p)
{
	struct event e;

	if (events_parse(p, &e) < 0)
		return 0;
	if (e.kind == EVENT_MARKER) {
		if (!s->reached && headers_key_is(e.marker, s->token)) {
			s->reached = 1;
			return s->on_reached != NULL
			           ? s->on_reached(s->arg, cl->err,
			                           sizeof(cl->err))
			           : 0;
		}
		return s->on_marker != NULL
		           ? s->on_marker(s->arg, e.marker, cl->err,
		                          sizeof(cl->err))
		           : 0;
	}
	s->records++;
	return s->on_event(s->arg, &e, cl->err, sizeof(cl->err));
}

/* Whether the reading is over once the marker is read. */
static int
streamread_done(const struct streamread *s)
{
	return s->reached && !s->follow;
}

/* A stream message: one record, or a batch of them (events.h). */
static int
streamread_message(struct client *cl, struct streamread *s,
                   const amqp_message_t *msg)
{
	amqp_basic_properties_t p;
	amqp_pool_t pool;
	size_t off = 0;
	int rc = 0, got;

	if (!trust_stream_message(cl->cfg, amqp_cstring_bytes(cl->user),
	                          &msg->properties)) {
		amqp_bytes_t w = trust_writer_of(&msg->properties);
		if (s->untrusted++ == 0)
			snprintf(s->untrusted_writer,
			         sizeof(s->untrusted_writer), "%.*s",
			         (int)(w.len > 255 ? 255 : w.len),
			         (const char *)w.bytes);
		return 0;
	}
	if (!events_is_batch(&msg->properties))
		return streamread_record(cl, s, &msg->properties);
	init_amqp_pool(&pool, 4096);
	while (rc == 0 && !streamread_done(s) &&
	       (got = events_batch_next(msg->body, &off, &pool, &p)) != 0) {
		if (got < 0)
			break; /* the rest does not decode: skip it */
		rc = streamread_record(cl, s, &p);
	}
	empty_amqp_pool(&pool);
	return rc;
}

/*
 * The AMQP library could not decode a message of s (rabbitmq-c 0.14 and
 * later refuse headers nested over 100 deep) and the connection is lost
 * on it: connect again and read on past it (events.h).  Each skip starts
 * the reading at a later offset than the one before, so the marker is
 * reached; at most STREAM_SKIPS_MAX are made.  -1 with cl->err.
 */
static int
streamread_skip(struct client *cl, struct streamread *s)
{
	int64_t from;

	if (s->reconnects++ == STREAM_SKIPS_MAX) {
		snprintf(cl->err, sizeof(cl->err),
		         "%s holds more than %d messages this AMQP library "
		         "cannot decode (headers nested over 100 deep?), the "
		         "first at offset %" PRId64 ": not read further; they "
		         "go as the stream's retention passes them",
		         s->name, STREAM_SKIPS_MAX, s->first_skipped);
		return -1;
	}
	from = events_resume_skip(&s->resume);
	if (s->skipped++ == 0)
		s->first_skipped = from - 1;
	if (client_reconnect(cl) < 0) {
		char why[512]; /* a connect error says a few words */
		snprintf(why, sizeof(why), "%.*s", (int)sizeof(why) - 1,
		         cl->err);
		snprintf(cl->err, sizeof(cl->err),
		         "connecting again to read %s past an undecodable "
		         "message: %s",
		         s->name, why);
		return -1;
	}
	return streamread_consume(cl, s);
}

int
streamread_marker(struct client *cl, const char *name, const char *prefix,
                  char *token, size_t size)
{
	struct event e;
	char id[17];

	events_new_id(id);
	snprintf(token, size, "%s-%d-%s", prefix, (int)getpid(), id);
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_MARKER;
	e.at = duration_wall_ms();
	e.marker = amqp_cstring_bytes(token);
	return client_record(cl, name, &e);
}

/* Ack every delivery up to last (multiple).  0, or -1 with cl->err. */
static int
streamread_ack(struct client *cl, uint64_t last, uint64_t *acked)
{
	if (last <= *acked)
		return 0;
	if (amqp_basic_ack(cl->conn, BROKER_CH_WORK, last, 1) !=
	    AMQP_STATUS_OK) {
		snprintf(cl->err, sizeof(cl->err), "basic.ack failed");
		return -1;
	}
	*acked = last;
	return 0;
}

/*
 * Read stream s from its first record up to a marker of ours, written (and
 * confirmed) first: so every record written before we began is read.
 * Without s->follow, records after the marker are not read: what the
 * callback gets is what the stream held at one moment.  With it, the
 * reading goes on with each record as it comes until a callback says 1.
 * s->again goes on after a lost connection instead, from the offset after
 * the last one read, towards the marker already written.  -1 with cl->err.
 */
int
streamread_run(struct client *cl, struct streamread *s)
{
	uint64_t last = 0, acked = 0;
	int64_t now, heard, tick;
	int rc = 0;
	/* Half the prefetch at most, so that the broker never waits on an
	 * ack held back (a tick's wait). */
	uint64_t ack_every =
	    s->prefetch > 0 && s->prefetch < 2 * STREAM_ACK_EVERY
	        ? (s->prefetch + 1u) / 2
	        : STREAM_ACK_EVERY;

	if (client_stream_exists(cl, s->name) < 0)
		return -1;
	if (s->again) {
		s->resume.from = s->resume.last >= 0 ? s->resume.last + 1 : -1;
	} else {
		/* The marker that tells us when every record before
		 * it was read. */
		if (streamread_marker(cl, s->name, s->marker, s->token,
		                      sizeof(s->token)) < 0)
			return -1;
		events_resume_init(&s->resume);
	}
	s->stopped = 0;
	if (streamread_consume(cl, s) < 0)
		return -1;
	heard = tick = duration_mono_ms();
	while (rc == 0 && !streamread_done(s)) {
		struct timeval tv = {STREAMREAD_TICK_MS / 1000,
		                     STREAMREAD_TICK_MS % 1000 * 1000};
		amqp_envelope_t env;
		amqp_rpc_reply_t r;

		amqp_maybe_release_buffers(cl->conn);
		r = amqp_consume_message(cl->conn, &env, &tv, 0);
		now = duration_mono_ms();
		if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
		    r.library_error == AMQP_STATUS_BAD_AMQP_DATA) {
			if (streamread_skip(cl, s) < 0)
				return -1;
			last = acked = 0; /* tags of the new channel */
			heard = now;
			continue;
		}
		if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
		    r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
			if (streamread_frame(cl) < 0)
				return -1;
			continue;
		}
		if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
		    r.library_error == AMQP_STATUS_TIMEOUT) {
			/* A stream quiet while we follow it is no fault;
			 * one quiet before our marker came back is. */
			if (!s->reached && now - heard >= STREAM_IDLE_MS) {
				snprintf(cl->err, sizeof(cl->err),
				         "nothing came from stream %s for %ds "
				         "before the marker written at start "
				         "(%" PRIu64 " records read)",
				         s->name, STREAM_IDLE_MS / 1000,
				         s->records);
				return -1;
			}
			/* Nothing left in flight to hold back acks for. */
			if (streamread_ack(cl, last, &acked) < 0)
				return -1;
		} else if (r.reply_type != AMQP_RESPONSE_NORMAL) {
			broker_reply_string(r, "reading the streams", cl->err,
			                    sizeof(cl->err));
			return -1;
		} else {
			heard = now;
			events_resume_read(&s->resume, &env.message.properties);
			/* Its headers refused on the wire (wirefilter.h):
			 * not a record, and said once at the end. */
			if (wirefilter_refused(&env.message.properties,
			                       &(amqp_bytes_t){0})) {
				if (s->skipped++ == 0)
					s->first_skipped = s->resume.last;
				rc = 0;
			} else {
				rc = streamread_message(cl, s, &env.message);
			}
			last = env.delivery_tag;
			amqp_destroy_envelope(&env);
			if (rc < 0)
				return -1;
			if (last - acked >= ack_every &&
			    streamread_ack(cl, last, &acked) < 0)
				return -1;
		}
		/* Ticks whether records come or not: a busy stream must not
		 * keep the caller from stopping. */
		if (rc == 0 && s->on_tick != NULL && now - tick >= 0) {
			tick = now + STREAMREAD_TICK_MS;
			rc = s->on_tick(s->arg, cl->err, sizeof(cl->err));
			if (rc < 0)
				return -1;
		}
	}
	s->stopped = rc > 0;
	/* Stop the deliveries: what comes after is not wanted.  Opened
	 * again for a reading of another stream after this one. */
	amqp_channel_close(cl->conn, BROKER_CH_WORK, AMQP_REPLY_SUCCESS);
	if (broker_check(cl->conn, "channel.close", cl->err, sizeof(cl->err)) <
	    0)
		return -1;
	amqp_channel_open(cl->conn, BROKER_CH_WORK);
	return broker_check(cl->conn, "channel.open", cl->err, sizeof(cl->err));
}
