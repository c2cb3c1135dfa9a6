/*
 * The replay of P.cancels after each connect: read from its first record
 * to a marker of the daemon's own before the queues are consumed, so that
 * no message is routed before every request, claim and series recorded so
 * far is known; then read on, with a probe marker now and then to measure
 * how current the reading is and to catch one the broker stopped feeding.
 * Each record read is believed by its writer (trust.h) and handed to what
 * holds its kind: requests and claims (daemon_events.c), series
 * (daemon_series.c).
 *
 * Owns: replaying, replayed, marker, cancels_resume, cancels_read_at,
 * the probe, the replay and probe timers.
 * Calls into: daemon_events, daemon_series (hold what is read),
 * daemon_publish (ack), daemon_conn (consume the queues once replayed,
 * daemon_fail).
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

#define REPLAY_REMARK 10. /* s: write the P.cancels marker again */
/* s: once consuming, write a marker to time the reading; seldom, for
 * P.cancels keeps every one for [events] max_age. */
#define CANCELS_PROBE 120.
/* s: how long a probe marker may take to come back.  RabbitMQ 4.3 has been
 * seen to stop feeding a stream consumer after a partition, without a
 * word: a probe not back after CANCELS_PROBE_MISSES such waits (it is
 * written again in between, as a marker may be lost) means the reading
 * stalled, and the daemon connects again, which reads P.cancels afresh. */
#define CANCELS_PROBE_BACK 15.
#define CANCELS_PROBE_MISSES 2
/* ms: a recorded request asks for a probe, at most this often. */
#define CANCELS_PROBE_GAP 10000

int
daemon_trusted(struct daemon *d, const struct message *m, const char *stream)
{
	amqp_bytes_t writer;

	if (trust_stream_message(d->cfg, amqp_cstring_bytes(d->own_user),
	                         &m->props))
		return 1;
	if (stream == d->topo.cancels)
		d->m.untrusted_cancels++;
	else
		d->m.untrusted_events++;
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
		    stream, type, who);
	}
	return 0;
}

/* A record from P.cancels: a request to hold, or our marker. */
void
daemon_record(struct daemon *d, struct message *m)
{
	char err[512];
	struct event e;
	int rc = 0;
	const char *why = NULL;

	if (d->replaying)
		d->replayed++;
	events_resume_read(&d->cancels_resume, &m->props);
	if (!daemon_trusted(d, m, d->topo.cancels) ||
	    events_parse(&m->props, &e) < 0) {
		daemon_ack(d, m);
		return;
	}
	if ((e.kind == EVENT_CANCEL || e.kind == EVENT_RESCHEDULE) &&
	    e.until > duration_wall_ms()) {
		rc = daemon_request_read(d, &e);
		why = "out of memory for cancellations";
	} else if (e.kind == EVENT_CLAIM && e.until > duration_wall_ms()) {
		rc = daemon_claim_read(d, &e);
		why = "out of memory for claims";
	} else if (e.kind == EVENT_SERIES && e.until > duration_wall_ms()) {
		rc = daemon_series_read(d, &e);
		why = "out of memory for series";
	} else if (e.kind == EVENT_MARKER &&
	           headers_key_is(e.marker, d->marker)) {
		if (e.at > d->cancels_read_at)
			d->cancels_read_at = e.at;
		if (d->probe_at > 0 && e.at >= d->probe_at) {
			d->probe_at = 0;
			d->probe_misses = 0;
			ev_timer_stop(d->loop, &d->probe_check);
		}
		if (!d->replaying) {
			daemon_ack(d, m);
			return;
		}
		d->replaying = 0;
		/* From now on the timer writes a probe marker. */
		ev_timer_stop(d->loop, &d->replay);
		ev_timer_set(&d->replay, CANCELS_PROBE, CANCELS_PROBE);
		ev_timer_start(d->loop, &d->replay);
		if (daemon_consume_queues(d, err, sizeof(err)) < 0) {
			rc = -1;
			why = err;
		}
	}
	if (rc < 0) {
		message_free(m);
		daemon_fail(d, why);
		return;
	}
	daemon_ack(d, m);
}

/*
 * Read P.cancels from the start, and write a marker into it: the queues
 * are consumed once the marker comes back, so no message is routed
 * before every cancellation recorded so far is known.
 */
static int
daemon_write_marker(struct daemon *d, int64_t at)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = EVENT_MARKER;
	e.at = at;
	e.marker = amqp_cstring_bytes(d->marker);
	/* Readers believe a marker from cascade's own users only (trust.h). */
	e.writer = amqp_cstring_bytes(d->own_user);
	return daemon_write(d, d->topo.cancels, &e);
}

/*
 * Once consuming: a marker that must come back within CANCELS_PROBE_BACK
 * seconds (on_probe_check).  Nothing is written while the broker blocks
 * us, and the check waits meanwhile.
 */
static void
daemon_probe(struct daemon *d)
{
	int64_t at = duration_wall_ms();
	int st;

	if (d->out.blocked)
		return;
	if ((st = daemon_write_marker(d, at)) != AMQP_STATUS_OK) {
		daemon_fail(d, amqp_error_string2(st));
		return;
	}
	d->probe_written = duration_mono_ms();
	if (d->probe_at == 0)
		d->probe_at = at;
	if (!ev_is_active(&d->probe_check)) {
		ev_timer_set(&d->probe_check, CANCELS_PROBE_BACK, 0.);
		ev_timer_start(d->loop, &d->probe_check);
	}
}

void
daemon_probe_soon(struct daemon *d)
{
	if (!d->consuming || d->replaying || d->broken || d->stopping ||
	    d->probe_at > 0 ||
	    duration_mono_ms() - d->probe_written < CANCELS_PROBE_GAP)
		return;
	daemon_probe(d);
}

static void
on_probe_check(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, probe_check);

	(void)loop;
	(void)revents;
	if (d->broken || d->conn == NULL || d->stopping || d->probe_at == 0)
		return;
	if (d->out.blocked) {
		/* Reading may wait on writing: judge once unblocked. */
		ev_timer_set(&d->probe_check, CANCELS_PROBE_BACK, 0.);
		ev_timer_start(d->loop, &d->probe_check);
		return;
	}
	if (++d->probe_misses < CANCELS_PROBE_MISSES) {
		log_warn("reading_cancellations",
		         " stream=%s waited_ms=%" PRId64
		         " reason=\"probe marker not back yet: written "
		         "again\"",
		         d->topo.cancels, duration_wall_ms() - d->probe_at);
		daemon_probe(d);
		return;
	}
	d->m.cancels_stalls++;
	log_error("cancellations_stalled",
	          " stream=%s waited_ms=%" PRId64
	          " reason=\"no probe marker read back: the broker stopped "
	          "feeding this reader; connecting again to read it afresh\"",
	          d->topo.cancels, duration_wall_ms() - d->probe_at);
	daemon_fail(d, "reading P.cancels stalled");
}

/*
 * The marker is written without a confirm, and a stream whose leader
 * moves may lose it: write it again every REPLAY_REMARK seconds until one
 * comes back, and say how far the reading got.  Once consuming, probe
 * every CANCELS_PROBE seconds: when the marker comes back tells how
 * current the cancellations read are
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
		daemon_probe(d);
		return;
	}
	log_warn("reading_cancellations",
	         " stream=%s read=%" PRIu64 " held=%zu reason=\"marker not "
	         "back yet: written again\"",
	         d->topo.cancels, d->replayed, d->cancels.map.n);
	if ((st = daemon_write_marker(d, duration_wall_ms())) != AMQP_STATUS_OK)
		daemon_fail(d, amqp_error_string2(st));
}

int
daemon_consume_stream(struct daemon *d, const char *stream, const char *tag,
                      int64_t from)
{
	amqp_table_entry_t arg;
	amqp_basic_consume_t c;

	memset(&c, 0, sizeof(c));
	arg.key = amqp_cstring_bytes("x-stream-offset");
	if (from < 0) {
		arg.value.kind = AMQP_FIELD_KIND_UTF8;
		arg.value.value.bytes = amqp_cstring_bytes("first");
	} else {
		arg.value.kind = AMQP_FIELD_KIND_I64;
		arg.value.value.i64 = from;
	}
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

	st = daemon_consume_stream(d, d->topo.cancels, CANCELS_TAG,
	                           d->cancels_resume.from);
	if (st == AMQP_STATUS_OK) {
		events_new_id(id);
		snprintf(d->marker, sizeof(d->marker), "daemon-%d-%s",
		         (int)getpid(), id);
		st = daemon_write_marker(d, duration_wall_ms());
	}
	if (st != AMQP_STATUS_OK) {
		snprintf(err, errsize, "consume %s: %s", d->topo.cancels,
		         amqp_error_string2(st));
		return -1;
	}
	d->replaying = 1;
	d->replayed = 0;
	d->probe_at = 0;
	d->probe_misses = 0;
	ev_timer_set(&d->replay, REPLAY_REMARK, REPLAY_REMARK);
	ev_timer_start(d->loop, &d->replay);
	log_info("reading_cancellations", " stream=%s", d->topo.cancels);
	return 0;
}

void
daemon_replay_init(struct daemon *d)
{
	ev_init(&d->replay, on_replay);
	ev_init(&d->probe_check, on_probe_check);
	events_resume_init(&d->cancels_resume);
	d->cancels_read_at = duration_wall_ms();
}
