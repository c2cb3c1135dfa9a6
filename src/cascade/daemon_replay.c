/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The replay of P.cancels and P.series after each connect: each is read
 * from its first record to a marker of the daemon's own before the queues
 * are consumed, so that no message is routed before every request, claim
 * and series recorded so far is known; then both are read on, with a probe
 * marker in each now and then to measure how current the reading is and
 * to catch one the broker stopped feeding.  Each record read is believed
 * by its writer (trust.h), and one of a kind held (requests, claims,
 * series) goes to the request state (daemon_ids.c).  P.series holds
 * series records and markers only: anything else there is skipped.
 *
 * Owns: streams, replaying, marker, the probe, the replay and probe
 * timers.
 * Calls into: daemon_ids (hold what is read), daemon_series (start the
 * refresh), daemon_events (markers), daemon_publish (ack),
 * daemon_consume (consume the queues once replayed), daemon_fail.
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <ev.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "broker.h"
#include "duration.h"
#include "escape.h"
#include "headers.h"
#include "log.h"

#define REPLAY_REMARK 10. /* s: write a marker not back yet again */
/* s: once consuming, write a marker to time the reading; seldom, for
 * the streams keep every one for their retention. */
#define CANCELS_PROBE 120.
/* s: how long a probe marker may take to come back.  RabbitMQ 4.3 has been
 * seen to stop feeding a stream consumer after a partition, without a
 * word: a probe not back after CANCELS_PROBE_MISSES such waits (it is
 * written again in between, as a marker may be lost) means the reading
 * stalled, and the daemon connects again, which reads the streams
 * afresh. */
#define CANCELS_PROBE_BACK 15.
#define CANCELS_PROBE_MISSES 2
/* ms: a recorded request asks for a probe, at most this often. */
#define CANCELS_PROBE_GAP 10000

/* The name of the stream of metrics index stream (METRICS_STREAM_*). */
static const char *
daemon_stream_name(const struct daemon *d, int stream)
{
	if (stream == METRICS_STREAM_CANCELS)
		return d->topo.cancels;
	if (stream == METRICS_STREAM_COPIES)
		return d->topo.copies;
	return stream == METRICS_STREAM_SERIES ? d->topo.series
	                                       : d->topo.events;
}

int
daemon_trusted(struct daemon *d, const struct message *m, int stream)
{
	amqp_bytes_t writer;

	if (trust_stream_message(d->cfg, amqp_cstring_bytes(d->own_user),
	                         &m->props))
		return 1;
	d->m.untrusted[stream]++;
	writer = trust_writer_of(&m->props);
	if (trust_first_sight(&d->untrusted, writer)) {
		char who[ESCAPE_MAX_FACTOR * 64 + 4],
		    type[ESCAPE_MAX_FACTOR * 32 + 4];

		escape_bytes(writer.bytes, writer.len, 64, ESCAPE_QUOTED, who,
		             sizeof(who));
		escape_bytes(m->props.type.bytes,
		             (m->props._flags & AMQP_BASIC_TYPE_FLAG)
		                 ? m->props.type.len
		                 : 0,
		             32, ESCAPE_QUOTED, type, sizeof(type));
		log_warn(
		    "record_untrusted",
		    " stream=%s type=\"%s\" writer=\"%s\" reason=\"written "
		    "by a user that is neither the daemon's nor one of "
		    "[events] control_users: skipped (logged once per "
		    "writer)\"",
		    daemon_stream_name(d, stream), type, who);
	}
	return 0;
}

int
daemon_stream_of_tag(const struct daemon *d, amqp_bytes_t tag)
{
	for (int i = 0; i < DAEMON_STREAMS; i++)
		if (headers_key_is(tag, d->streams[i].tag))
			return i + 1;
	return 0;
}

/*
 * Our marker came back in stream s: the reading is current up to when it
 * was written.  The first after connecting ends that stream's replay, and
 * the last stream's starts consuming.  0, or -1 with err.
 */
static int
daemon_marker_back(struct daemon *d, struct stream_reading *s, int64_t at,
                   char *err, size_t errsize)
{
	int probing = 0;

	if (at > s->read_at)
		s->read_at = at;
	if (s->probe_at > 0 && at >= s->probe_at)
		s->probe_at = 0;
	for (int i = 0; i < DAEMON_STREAMS; i++)
		probing |= d->streams[i].probe_at > 0;
	if (!probing) {
		d->probe_misses = 0;
		ev_timer_stop(d->loop, &d->probe_check);
	}
	if (!s->replaying)
		return 0;
	s->replaying = 0;
	if (--d->replaying > 0)
		return 0;
	/* From now on the timer writes probe markers. */
	ev_timer_stop(d->loop, &d->replay);
	ev_timer_set(&d->replay, CANCELS_PROBE, CANCELS_PROBE);
	ev_timer_start(d->loop, &d->replay);
	daemon_series_start(d);
	return daemon_consume_queues(d, err, errsize);
}

/*
 * A record from P.cancels (a request to hold, a claim, a series record an
 * earlier version wrote there, or our marker) or from P.series (a series
 * record, or our marker).
 */
void
daemon_record(struct daemon *d, struct message *m)
{
	struct stream_reading *s = &d->streams[m->stream - 1];
	int series_only = s == &d->streams[STREAM_SERIES];
	char err[512];
	struct event e;
	int rc = 0;
	const char *why = NULL;

	if (s->replaying)
		s->replayed++;
	events_resume_read(&s->resume, &m->props);
	if (!daemon_trusted(d, m, s->metric) ||
	    events_parse(&m->props, &e) < 0) {
		daemon_ack(d, m);
		return;
	}
	if (series_only && e.kind != EVENT_SERIES && e.kind != EVENT_MARKER)
		; /* not P.series' kind: skipped */
	else if (requests_kind(e.kind) >= 0 && e.until > duration_wall_ms())
		rc = daemon_held_read(d, &e, &why);
	else if (e.kind == EVENT_MARKER &&
	         !headers_key_is(e.marker, d->marker)) {
		/* Another daemon: it shares the paces (pace.h).  Those older
		 * than a peer is remembered, replayed, count for nothing. */
		int64_t now = duration_wall_ms();
		if (d->pace.n > 0 && e.at > now - PACE_PEER_TTL_MS)
			pace_peer_seen(&d->pace, e.marker,
			               e.at < now ? e.at : now);
	} else if (e.kind == EVENT_MARKER) {
		rc = daemon_marker_back(d, s, e.at, err, sizeof(err));
		why = err;
	}
	if (rc < 0) {
		message_free(m);
		daemon_fail(d, why);
		return;
	}
	daemon_ack(d, m);
}

/* Write our marker into stream s.  An AMQP status. */
static int
daemon_write_marker(struct daemon *d, const struct stream_reading *s,
                    int64_t at)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = EVENT_MARKER;
	e.at = at;
	e.marker = amqp_cstring_bytes(d->marker);
	/* Readers believe a marker from cascade's own users only (trust.h). */
	e.writer = amqp_cstring_bytes(d->own_user);
	return daemon_write(d, s->name, &e);
}

/*
 * Once consuming: a marker in each stream that must come back within
 * CANCELS_PROBE_BACK seconds (on_probe_check); with pending, only into
 * those whose probe is not back yet.  Nothing is written while the broker
 * blocks us, and the check waits meanwhile.
 */
static void
daemon_probe(struct daemon *d, int pending)
{
	int64_t at = duration_wall_ms();
	int st;

	if (d->out.blocked)
		return;
	for (int i = 0; i < DAEMON_STREAMS; i++) {
		struct stream_reading *s = &d->streams[i];
		if (pending && s->probe_at == 0)
			continue;
		if ((st = daemon_write_marker(d, s, at)) != AMQP_STATUS_OK) {
			daemon_fail(d, amqp_error_string2(st));
			return;
		}
		if (s->probe_at == 0)
			s->probe_at = at;
	}
	d->probe_written = duration_mono_ms();
	if (!ev_is_active(&d->probe_check)) {
		ev_timer_set(&d->probe_check, CANCELS_PROBE_BACK, 0.);
		ev_timer_start(d->loop, &d->probe_check);
	}
}

void
daemon_probe_soon(struct daemon *d)
{
	if (!d->consuming || d->replaying || d->broken || d->stopping ||
	    d->streams[STREAM_CANCELS].probe_at > 0 ||
	    duration_mono_ms() - d->probe_written < CANCELS_PROBE_GAP)
		return;
	daemon_probe(d, 0);
}

static void
on_probe_check(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, probe_check);
	const struct stream_reading *late = NULL;
	int64_t now = duration_wall_ms();

	(void)loop;
	(void)revents;
	for (int i = 0; i < DAEMON_STREAMS && late == NULL; i++)
		if (d->streams[i].probe_at > 0)
			late = &d->streams[i];
	if (d->broken || d->conn == NULL || d->stopping || late == NULL)
		return;
	if (d->out.blocked) {
		/* Reading may wait on writing: judge once unblocked. */
		ev_timer_set(&d->probe_check, CANCELS_PROBE_BACK, 0.);
		ev_timer_start(d->loop, &d->probe_check);
		return;
	}
	if (++d->probe_misses < CANCELS_PROBE_MISSES) {
		for (int i = 0; i < DAEMON_STREAMS; i++)
			if (d->streams[i].probe_at > 0)
				log_warn("reading_cancellations",
				         " stream=%s waited_ms=%" PRId64
				         " reason=\"probe marker not back yet: "
				         "written again\"",
				         d->streams[i].name,
				         now - d->streams[i].probe_at);
		daemon_probe(d, 1);
		return;
	}
	d->m.cancels_stalls++;
	log_error("cancellations_stalled",
	          " stream=%s waited_ms=%" PRId64
	          " reason=\"no probe marker read back: the broker stopped "
	          "feeding this reader; connecting again to read it afresh\"",
	          late->name, now - late->probe_at);
	daemon_fail(d, late == &d->streams[STREAM_CANCELS]
	                   ? "reading P.cancels stalled"
	                   : "reading P.series stalled");
}

/*
 * A marker is written without a confirm, and a stream whose leader moves
 * may lose it: write it again every REPLAY_REMARK seconds into each stream
 * it has not come back from, and say how far the reading got.  Once
 * consuming, probe every CANCELS_PROBE seconds: when the markers come back
 * tells how current what is read is
 * (cascade_cancellations_read_age_seconds), and one that does not come
 * back at all is a stalled reading (on_probe_check).
 */
static void
on_replay(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, replay);
	int st;

	(void)loop;
	(void)revents;
	if (d->broken || d->conn == NULL || d->stopping) {
		ev_timer_stop(d->loop, &d->replay);
		return;
	}
	if (!d->replaying) {
		daemon_probe(d, 0);
		return;
	}
	for (int i = 0; i < DAEMON_STREAMS; i++) {
		struct stream_reading *s = &d->streams[i];
		if (!s->replaying)
			continue;
		log_warn("reading_cancellations",
		         " stream=%s read=%" PRIu64
		         " held=%zu reason=\"marker not back yet: written "
		         "again\"",
		         s->name, s->replayed, daemon_held(d));
		st = daemon_write_marker(d, s, duration_wall_ms());
		if (st != AMQP_STATUS_OK) {
			daemon_fail(d, amqp_error_string2(st));
			return;
		}
	}
}

int
daemon_consume_stream(struct daemon *d, const char *stream, const char *tag,
                      int64_t from, int64_t since)
{
	amqp_table_entry_t arg;
	amqp_basic_consume_t c;

	memset(&c, 0, sizeof(c));
	events_stream_since(from, since, &arg);
	c.queue = amqp_cstring_bytes(stream);
	c.consumer_tag = amqp_cstring_bytes(tag);
	c.arguments.num_entries = 1;
	c.arguments.entries = &arg;
	return amqp_send_method(d->conn, BROKER_CH_WORK,
	                        AMQP_BASIC_CONSUME_METHOD, &c);
}

int
daemon_replay(struct daemon *d, char *err, size_t errsize)
{
	char id[17];
	int st;

	events_new_id(id);
	snprintf(d->marker, sizeof(d->marker), "daemon-%d-%s", (int)getpid(),
	         id);
	d->plan.own = amqp_cstring_bytes(d->marker);
	d->replaying = 0;
	d->probe_misses = 0;
	for (int i = 0; i < DAEMON_STREAMS; i++) {
		struct stream_reading *s = &d->streams[i];
		st = daemon_consume_stream(d, s->name, s->tag, s->resume.from,
		                           0);
		if (st == AMQP_STATUS_OK)
			st = daemon_write_marker(d, s, duration_wall_ms());
		if (st != AMQP_STATUS_OK) {
			snprintf(err, errsize, "consume %s: %s", s->name,
			         amqp_error_string2(st));
			return -1;
		}
		s->replaying = 1;
		s->replayed = 0;
		s->probe_at = 0;
		d->replaying++;
		log_info("reading_cancellations", " stream=%s", s->name);
	}
	ev_timer_set(&d->replay, REPLAY_REMARK, REPLAY_REMARK);
	ev_timer_start(d->loop, &d->replay);
	return 0;
}

void
daemon_replay_init(struct daemon *d)
{
	static const struct {
		const char *tag;
		int metric;
	} of[DAEMON_STREAMS] = {
	    [STREAM_CANCELS] = {CANCELS_TAG, METRICS_STREAM_CANCELS},
	    [STREAM_SERIES] = {SERIES_TAG, METRICS_STREAM_SERIES},
	};

	ev_init(&d->replay, on_replay);
	ev_init(&d->probe_check, on_probe_check);
	for (int i = 0; i < DAEMON_STREAMS; i++) {
		struct stream_reading *s = &d->streams[i];
		memset(s, 0, sizeof(*s));
		s->name = daemon_stream_name(d, of[i].metric);
		s->tag = of[i].tag;
		s->metric = of[i].metric;
		events_resume_init(&s->resume);
		s->read_at = duration_wall_ms();
	}
}
