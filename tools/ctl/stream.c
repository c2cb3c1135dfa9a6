/*
 * stream: reading the stream P.events (events.h) from its first record up
 * to a marker of our own, for list, cancel and reschedule, and past any
 * message in it that the AMQP library cannot decode.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "ctl.h"
#include "duration.h"
#include "escape.h"
#include "headers.h"
#include "trust.h"

#define STREAM_PREFETCH 1000 /* records in flight per stream consumer */
#define STREAM_ACK_EVERY 250 /* ack (multiple) after this many records */
/* No record for this long before reaching our marker: give up.  An idle
 * limit, not a total one, so that a long stream may take its time. */
#define STREAM_IDLE_MS 30000
/*
 * Undecodable messages read past in one reading, at most.  Each costs a
 * connection; a stream with more (every one forged: cascade writes none)
 * is refused, at a clear error, rather than read for hours.
 */
#define STREAM_SKIPS_MAX 1000

struct stream {
	const char *name;
	const char *tag; /* our consumer tag */
	char marker[64]; /* the token of the marker we wrote */
	int reached;
	struct events_resume resume; /* where to read on after a loss */
	int64_t skipped;             /* undecodable messages read past */
	int64_t first_skipped;       /* the offset of the first */
};

/*
 * basic.consume of a stream from s->resume.from (its first record when
 * none), with the prefetch and manual acks a stream wants.
 */
static int
stream_consume(struct ctl *c, const struct stream *s)
{
	amqp_table_entry_t arg;
	amqp_table_t args = {1, &arg};
	amqp_rpc_reply_t r;
	char what[TOPOLOGY_NAME_MAX + 32];

	amqp_basic_qos(c->cl.conn, BROKER_CH_WORK, 0, STREAM_PREFETCH, 0);
	if (broker_check(c->cl.conn, "basic.qos", c->cl.err,
	                 sizeof(c->cl.err)) < 0)
		return -1;
	events_stream_offset(s->resume.from, &arg);
	if (amqp_basic_consume(
	        c->cl.conn, BROKER_CH_WORK, amqp_cstring_bytes(s->name),
	        amqp_cstring_bytes(s->tag), 0, 0, 0, args) != NULL)
		return 0;
	r = amqp_get_rpc_reply(c->cl.conn);
	snprintf(what, sizeof(what), "read stream %s", s->name);
	broker_reply_string(r, what, c->cl.err, sizeof(c->cl.err));
	return -1;
}

/*
 * A frame that is not a delivery came while reading: a close or a
 * consumer cancelled by the broker (its stream deleted) is an error.
 */
static int
stream_frame(struct ctl *c)
{
	amqp_frame_t f;
	int st;

	if ((st = amqp_simple_wait_frame(c->cl.conn, &f)) != AMQP_STATUS_OK) {
		snprintf(c->cl.err, sizeof(c->cl.err),
		         "reading the streams: %s", amqp_error_string2(st));
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
		broker_close_reason(&f.payload.method, c->cl.err,
		                    sizeof(c->cl.err));
		return -1;
	case AMQP_BASIC_CANCEL_METHOD: {
		const amqp_basic_cancel_t *k = f.payload.method.decoded;
		snprintf(c->cl.err, sizeof(c->cl.err),
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

/* One record of stream s: the marker, or into the fold.  0, or -1. */
static int
stream_record(struct ctl *c, struct stream *s, const amqp_basic_properties_t *p,
              struct waiting_fold *f)
{
	struct event e;

	if (events_parse(p, &e) < 0)
		return 0;
	if (e.kind == EVENT_MARKER) {
		if (headers_key_is(e.marker, s->marker))
			s->reached = 1;
		return 0;
	}
	if (waiting_fold_event(f, &e) < 0) {
		snprintf(c->cl.err, sizeof(c->cl.err),
		         "out of memory after %" PRIu64 " records", f->records);
		return -1;
	}
	return 0;
}

/* A stream message: one record, or a batch of them (events.h). */
static int
stream_message(struct ctl *c, struct stream *s, const amqp_message_t *msg,
               struct waiting_fold *f)
{
	amqp_basic_properties_t p;
	amqp_pool_t pool;
	size_t off = 0;
	int rc = 0, got;

	if (!trust_stream_message(&c->cfg, amqp_cstring_bytes(f->own_user),
	                          &msg->properties)) {
		amqp_bytes_t w = trust_writer_of(&msg->properties);
		if (f->untrusted++ == 0)
			snprintf(f->untrusted_writer,
			         sizeof(f->untrusted_writer), "%.*s",
			         (int)(w.len > 255 ? 255 : w.len),
			         (const char *)w.bytes);
		return 0;
	}
	if (!events_is_batch(&msg->properties))
		return stream_record(c, s, &msg->properties, f);
	init_amqp_pool(&pool, 4096);
	while (rc == 0 && !s->reached &&
	       (got = events_batch_next(msg->body, &off, &pool, &p)) != 0) {
		if (got < 0)
			break; /* the rest does not decode: skip it */
		rc = stream_record(c, s, &p, f);
	}
	empty_amqp_pool(&pool);
	return rc;
}

/*
 * The AMQP library could not decode a message of s (rabbitmq-c 0.14 and
 * later refuse headers nested over 100 deep) and the connection is lost
 * on it: connect again and read on past it (events.h).  Each skip starts
 * the reading at a later offset than the one before, so the marker is
 * reached; at most STREAM_SKIPS_MAX are made.  -1 with c->cl.err.
 */
static int
stream_skip(struct ctl *c, struct stream *s)
{
	int64_t from;

	if (s->skipped == STREAM_SKIPS_MAX) {
		snprintf(c->cl.err, sizeof(c->cl.err),
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
	if (client_reconnect(&c->cl) < 0) {
		char why[512]; /* a connect error says a few words */
		snprintf(why, sizeof(why), "%.*s", (int)sizeof(why) - 1,
		         c->cl.err);
		snprintf(c->cl.err, sizeof(c->cl.err),
		         "connecting again to read %s past an undecodable "
		         "message: %s",
		         s->name, why);
		return -1;
	}
	return stream_consume(c, s);
}

/*
 * Read stream s from its first record up to a marker of ours, written (and
 * confirmed) first: so every record written before we began is read.
 * Records after the marker are not folded: f is what the stream held at
 * one moment.  -1 with c->cl.err.
 */
static int
stream_read(struct ctl *c, struct stream *s, struct waiting_fold *f)
{
	uint64_t last = 0, acked = 0;
	struct event e;
	char id[17];

	if (client_stream_exists(&c->cl, s->name) < 0)
		return -1;
	events_new_id(id);
	snprintf(s->marker, sizeof(s->marker), "ctl-%d-%s", (int)getpid(), id);
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_MARKER;
	e.at = duration_wall_ms();
	e.marker = amqp_cstring_bytes(s->marker);
	if (client_record(&c->cl, s->name, &e) < 0)
		return -1;
	events_resume_init(&s->resume);
	if (stream_consume(c, s) < 0)
		return -1;
	while (!s->reached) {
		struct timeval tv = {STREAM_IDLE_MS / 1000, 0};
		amqp_envelope_t env;
		amqp_rpc_reply_t r;
		int rc;

		amqp_maybe_release_buffers(c->cl.conn);
		r = amqp_consume_message(c->cl.conn, &env, &tv, 0);
		if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
		    r.library_error == AMQP_STATUS_BAD_AMQP_DATA) {
			if (stream_skip(c, s) < 0)
				return -1;
			last = acked = 0; /* tags of the new channel */
			continue;
		}
		if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
		    r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
			if (stream_frame(c) < 0)
				return -1;
			continue;
		}
		if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
		    r.library_error == AMQP_STATUS_TIMEOUT) {
			snprintf(c->cl.err, sizeof(c->cl.err),
			         "nothing came from stream %s for %ds before "
			         "the marker written at start (%" PRIu64
			         " records read)",
			         s->name, STREAM_IDLE_MS / 1000, f->records);
			return -1;
		}
		if (r.reply_type != AMQP_RESPONSE_NORMAL) {
			broker_reply_string(r, "reading the streams", c->cl.err,
			                    sizeof(c->cl.err));
			return -1;
		}
		events_resume_read(&s->resume, &env.message.properties);
		rc = stream_message(c, s, &env.message, f);
		last = env.delivery_tag;
		amqp_destroy_envelope(&env);
		if (rc < 0)
			return -1;
		if (last - acked >= STREAM_ACK_EVERY) {
			if (amqp_basic_ack(c->cl.conn, BROKER_CH_WORK, last,
			                   1) != AMQP_STATUS_OK) {
				snprintf(c->cl.err, sizeof(c->cl.err),
				         "basic.ack failed");
				return -1;
			}
			acked = last;
		}
	}
	if (s->skipped > 0)
		fprintf(stderr,
		        PROG ": skipped %" PRId64 " undecodable message(s) in "
		             "%s at offset %" PRId64 "%s: headers nested "
		             "deeper than this AMQP library decodes (see "
		             "docs/CONTRACT.md section 4.4)\n",
		        s->skipped, s->name, s->first_skipped,
		        s->skipped > 1 ? " and later" : "");
	if (f->untrusted > 0) {
		char who[ESCAPE_MAX_FACTOR * 64 + 4];
		escape_bytes(f->untrusted_writer, strlen(f->untrusted_writer),
		             64, ESCAPE_QUOTED, who, sizeof(who));
		fprintf(stderr,
		        "cascade-ctl: skipped %" PRIu64 " record(s) written "
		        "by users that are neither cascade's nor [events] "
		        "control_users (the first by \"%s\"); see "
		        "docs/security.md\n",
		        f->untrusted, who);
	}
	/* Stop the deliveries: what came after the marker is not wanted. */
	amqp_channel_close(c->cl.conn, BROKER_CH_WORK, AMQP_REPLY_SUCCESS);
	return broker_check(c->cl.conn, "channel.close", c->cl.err,
	                    sizeof(c->cl.err));
}

/* list does not read P.cancels: see cancel_run. */
int
stream_fold(struct ctl *c, struct waiting_fold *f)
{
	struct stream s;

	memset(&s, 0, sizeof(s));
	s.name = c->topo.events;
	s.tag = "cascade-ctl.events";
	return stream_read(c, &s, f);
}
