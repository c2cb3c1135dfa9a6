/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `cascade-bench fill`: fill a cascade installation with messages that
 * wait hours to days (tools/bench waiting).  Publishes o->count messages
 * to the exchange o->prefix as `run` does in mode cascade (the delay in
 * x-remaining-delay, ms, drawn by stats_draw_delay; publisher confirms, at
 * most WINDOW open; at o->rate when set), and consumes nothing: they are
 * due long after it ends.
 *
 * Message I (from 1) has message-id "TAG-SEED-I" (--owner-tag, --seed),
 * the connection's user as its user-id (so that the daemons record its
 * owner), is persistent, has a body of 100 to 999 bytes (its size and
 * bytes follow from I and the seed), and is for one of --targets quorum
 * queues Q.t0 .. Q.t{T-1} (-q Q, default bench), declared first, by the
 * default exchange (the routing key is the queue's name).  Not P.t0: the
 * daemon parks what is for a queue named P.* (bad_target).
 *
 * Memory is the same for any count: nothing is kept per message.
 * Progress goes to stderr every 10 s; the result is one JSON line on
 * stdout: {"messages", "nacked", "seconds", "msgs_per_s"}.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "bench.h"
#include "broker.h"
#include "duration.h"

#define FILL_BODY_MIN 100
#define FILL_BODY_MAX 999
/* Give up when the broker confirms nothing for this long (a resource
 * alarm that blocks the connection, a broker that hangs). */
#define FILL_STALL_MS 120000
#define FILL_PROGRESS_MS 10000
/*
 * With --rate, how far ahead of it a publisher may run before it waits:
 * it publishes what it owes every 20 ms or so, not one message per wake.
 * A wake a message cost a paced publisher 400 µs of CPU a message on the
 * 2-core machine (four of them took half a core from the broker); 30 µs
 * now.
 */
#define FILL_SLACK_MS 20
#define FILL_MAX_TARGETS 1000

/*
 * Read the frames that come within timeout_ms (at least one wait): the
 * confirms, counted in c.  0, or -1 with a reason in err when the
 * connection is lost or the broker closed the channel.
 */
static int
fill_pump(amqp_connection_state_t conn, struct broker_confirms *c,
          int64_t timeout_ms, char *err, size_t errsize)
{
	struct timeval tv;
	amqp_frame_t f;
	int st;

	if (timeout_ms < 0)
		timeout_ms = 0;
	tv.tv_sec = (time_t)(timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)(timeout_ms % 1000 * 1000);
	for (;;) {
		st = amqp_simple_wait_frame_noblock(conn, &f, &tv);
		if (st == AMQP_STATUS_TIMEOUT)
			return 0;
		if (st != AMQP_STATUS_OK) {
			snprintf(err, errsize, "connection lost: %s",
			         amqp_error_string2(st));
			return -1;
		}
		if (broker_confirm_frame(c, &f, err, errsize) < 0)
			return -1;
		amqp_maybe_release_buffers_on_channel(conn, c->ch);
		/* Whatever else is already read, without waiting again. */
		if (!amqp_frames_enqueued(conn) && !amqp_data_in_buffer(conn))
			return 0;
		tv.tv_sec = 0;
		tv.tv_usec = 0;
	}
}

/* Every FILL_PROGRESS_MS, a line on stderr. */
static void
fill_progress(const char *tag, int64_t start, uint64_t published,
              const struct broker_confirms *c, int64_t *last_progress,
              uint64_t *last_published)
{
	int64_t now = duration_mono_ms();

	if (now - *last_progress < FILL_PROGRESS_MS)
		return;
	fprintf(stderr,
	        "fill %s: %6.0fs published %" PRIu64 " confirmed %" PRIu64
	        " nacked %" PRIu64 ", %.0f msg/s over the last %.0f s\n",
	        tag, (double)(now - start) / 1e3, published, c->acked,
	        c->nacked,
	        (double)(published - *last_published) * 1e3 /
	            (double)(now - *last_progress),
	        (double)(now - *last_progress) / 1e3);
	*last_published = published;
	*last_progress = now;
}

/*
 * The run.  0 when every message was published and confirmed; 1 on a
 * refused set-up, a lost connection, a stall, or any nack.
 */
int
fill_run(const struct opts *o)
{
	static struct broker_confirms c;
	static char err[8192];
	static char body[FILL_BODY_MAX];
	char user[256], mid[256], target[300], line[64];
	const char *tag = o->owner_tag;
	const char *base = o->target_set ? o->target : "bench";
	amqp_connection_state_t conn;
	uint64_t rng = o->seed, published = 0, last_published = 0;
	unsigned targets = o->targets;
	int64_t start, now, last_progress, last_confirm;
	double secs;

	if (targets < 1 || targets > FILL_MAX_TARGETS) {
		fprintf(stderr, "cascade-bench: --targets from 1 to %d\n",
		        FILL_MAX_TARGETS);
		return 2;
	}
	conn = broker_connect(&o->cfg, err, sizeof(err));
	if (conn == NULL) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	if (config_broker_user(&o->cfg, user, sizeof(user)) < 0)
		user[0] = '\0';
	if (tag == NULL)
		tag = user[0] != '\0' ? user : "fill";
	for (unsigned t = 0; t < targets; t++) {
		snprintf(target, sizeof(target), "%s.t%u", base, t);
		queues_declare(conn, target, "quorum");
	}
	if (broker_confirm_select(conn, CH_PUB, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	/* The bytes every body is cut from: printable, and not all alike. */
	for (size_t k = 0; k < sizeof(body); k++)
		body[k] = (char)('a' + stats_mix64(o->seed + k) % 26);

	start = last_progress = last_confirm = duration_mono_ms();
	while (published < o->count) {
		amqp_table_entry_t h[1];
		amqp_basic_properties_t props = {0};
		uint64_t i = published + 1;
		uint64_t x = stats_mix64(o->seed * UINT64_C(0x100000001b3) + i);
		size_t size =
		    FILL_BODY_MIN + x % (FILL_BODY_MAX - FILL_BODY_MIN + 1);
		int64_t d, wait_ms = 0;
		int n;

		now = duration_mono_ms();
		/* Ahead of --rate, or the window full: read confirms. */
		if (o->rate > 0 &&
		    (double)published >
		        o->rate * (double)(now - start + FILL_SLACK_MS) / 1e3)
			wait_ms = (int64_t)((double)published * 1e3 / o->rate) -
			          (now - start);
		if (wait_ms > 0 || broker_confirm_pending(&c) >= WINDOW) {
			uint64_t before = c.acked + c.nacked;
			int64_t pump_ms = 100; /* the window full: a confirm */
			if (wait_ms > 0) {
				/* Ahead of the rate: sleep, then read the
				 * confirms that came meanwhile, each wake
				 * serving many. */
				if (wait_ms > 100)
					wait_ms = 100;
				nanosleep(&(struct timespec){wait_ms / 1000,
				                             wait_ms % 1000 *
				                                 1000000L},
				          NULL);
				pump_ms = 0;
			}
			if (fill_pump(conn, &c, pump_ms, err, sizeof(err)) <
			    0) {
				fprintf(stderr, "cascade-bench: %s\n", err);
				return 1;
			}
			now = duration_mono_ms();
			if (c.acked + c.nacked != before ||
			    broker_confirm_pending(&c) == 0)
				last_confirm = now;
			else if (now - last_confirm > FILL_STALL_MS) {
				fprintf(stderr,
				        "cascade-bench: no confirm for %ds "
				        "(a resource alarm blocking the "
				        "connection?)\n",
				        FILL_STALL_MS / 1000);
				return 1;
			}
			fill_progress(tag, start, published, &c, &last_progress,
			              &last_published);
			continue;
		}
		d = stats_draw_delay(o, &rng);
		h[0].key = amqp_cstring_bytes("x-remaining-delay");
		h[0].value.kind = AMQP_FIELD_KIND_I64;
		h[0].value.value.i64 = d;
		n = snprintf(mid, sizeof(mid), "%s-%" PRIu64 "-%" PRIu64, tag,
		             o->seed, i);
		if (n < 0 || (size_t)n >= sizeof(mid)) {
			fprintf(stderr, "cascade-bench: --owner-tag: too "
			                "long\n");
			return 2;
		}
		props._flags = AMQP_BASIC_HEADERS_FLAG |
		               AMQP_BASIC_MESSAGE_ID_FLAG |
		               AMQP_BASIC_DELIVERY_MODE_FLAG;
		props.headers.entries = h;
		props.headers.num_entries = 1;
		props.message_id = amqp_cstring_bytes(mid);
		props.delivery_mode = 2;
		if (user[0] != '\0') {
			props._flags |= AMQP_BASIC_USER_ID_FLAG;
			props.user_id = amqp_cstring_bytes(user);
		}
		snprintf(target, sizeof(target), "%s.t%u", base,
		         (unsigned)((x >> 32) % targets));
		/* Its body: size bytes of the pattern, from an offset of
		 * its own. */
		if (broker_confirm_publish(
		        conn, &c, amqp_cstring_bytes(o->prefix),
		        amqp_cstring_bytes(target), 0, &props,
		        (amqp_bytes_t){size, body + (x >> 40) % (sizeof(body) -
		                                                 size + 1)}) !=
		    AMQP_STATUS_OK) {
			fprintf(stderr, "cascade-bench: publish failed\n");
			return 1;
		}
		published++;
		if (broker_confirm_pending(&c) == 1)
			last_confirm = duration_mono_ms();
		fill_progress(tag, start, published, &c, &last_progress,
		              &last_published);
	}
	/* The last confirms: as long as they keep coming. */
	while (broker_confirm_pending(&c) > 0) {
		uint64_t before = c.acked + c.nacked;
		if (fill_pump(conn, &c, 1000, err, sizeof(err)) < 0) {
			fprintf(stderr, "cascade-bench: %s\n", err);
			return 1;
		}
		now = duration_mono_ms();
		if (c.acked + c.nacked != before)
			last_confirm = now;
		else if (now - last_confirm > FILL_STALL_MS) {
			fprintf(stderr,
			        "cascade-bench: %" PRIu64 " publishes "
			        "unconfirmed after %ds\n",
			        broker_confirm_pending(&c),
			        FILL_STALL_MS / 1000);
			return 1;
		}
	}
	secs = (double)(duration_mono_ms() - start) / 1e3;
	if (secs <= 0)
		secs = 1e-3;
	snprintf(line, sizeof(line), "%.1f", (double)published / secs);
	fprintf(stderr,
	        "fill %s: %.1fs published %" PRIu64 " confirmed %" PRIu64
	        " nacked %" PRIu64 "\n",
	        tag, secs, published, c.acked, c.nacked);
	printf("{\"messages\": %" PRIu64 ", \"nacked\": %" PRIu64
	       ", \"seconds\": %.3f, \"msgs_per_s\": %s}\n",
	       published, c.nacked, secs, line);
	fflush(stdout);
	amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
	amqp_destroy_connection(conn);
	return c.nacked > 0;
}
