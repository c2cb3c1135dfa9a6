/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `cascade-bench run`: publish o->count messages (confirmed, at o->rate)
 * by the mode's route, consume the target on the same connection, and
 * report what arrived: lateness percentiles, throughput, the CPU and RSS
 * of the mover and the broker, as one JSON line on stdout (and --json,
 * --plot; --lateness and --arrivals write each arrival, for a script that
 * merges several runs).  Progress goes to stderr once a second.
 *
 * --deadline stops publishing early: what was published is what arrivals
 * are counted against.  --reconnect survives a lost connection (a broker
 * restart): it connects again, consumes the target again (unpurged) and
 * goes on publishing at the rate from then; the publishes that were
 * unconfirmed when the connection went are counted as in_doubt (the broker
 * may or may not have them), and nothing is published meanwhile.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "bench.h"
#include "broker.h"
#include "duration.h"

/* Now, in µs of the wall clock the due times in the bodies are written in. */
static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A refused publish is said, not retried: the message shows as lost. */
static void
run_settled(void *arg, uint64_t seq, int acked)
{
	(void)arg;
	(void)seq;
	if (!acked)
		fprintf(stderr, "cascade-bench: nack\n");
}

/*
 * After a lost connection: connect again, confirm.select and consume the
 * target again (it is not declared or purged: it holds what arrived
 * meanwhile), trying for up to o->reconnect_ms.  The new connection, or
 * NULL with a reason in err.
 */
static amqp_connection_state_t
run_reconnect(const struct opts *o, amqp_connection_state_t old,
              struct broker_confirms *c, char *err, size_t errsize)
{
	int64_t until = duration_mono_ms() + o->reconnect_ms;
	amqp_connection_state_t conn;

	amqp_destroy_connection(old);
	for (;;) {
		conn = broker_connect(&o->cfg, err, errsize);
		if (conn != NULL) {
			if (broker_confirm_select(conn, CH_PUB, c, err,
			                          errsize) == 0) {
				c->on_settle = run_settled;
				amqp_basic_consume(
				    conn, CH_SUB, amqp_cstring_bytes(o->target),
				    amqp_empty_bytes, 0, 1, 0,
				    amqp_empty_table);
				if (broker_check(conn, "consume", err,
				                 errsize) == 0)
					return conn;
			}
			amqp_destroy_connection(conn);
		}
		if (duration_mono_ms() >= until)
			return NULL;
		nanosleep(&(struct timespec){0, 250000000}, NULL);
	}
}

/*
 * --lateness and --arrivals: one line per arrival, best effort.  For the
 * i-th arrival: lat[i], its lateness (µs), due[i], its due time, and
 * sent[i], when it was published (µs of the wall clock).
 */
static void
run_write_arrivals(const struct opts *o, const int64_t *lat, const int64_t *due,
                   const int64_t *sent, uint64_t n)
{
	FILE *fp;

	if (o->arrivals != NULL && due != NULL && sent != NULL &&
	    (fp = fopen(o->arrivals, "w")) != NULL) {
		for (uint64_t i = 0; i < n; i++)
			fprintf(fp, "%" PRId64 " %" PRId64 " %" PRId64 "\n",
			        sent[i] / 1000, due[i] / 1000,
			        (due[i] + lat[i]) / 1000);
		fclose(fp);
	}
	if (o->lateness != NULL && (fp = fopen(o->lateness, "w")) != NULL) {
		/* In whole ms, rounded to the nearest. */
		for (uint64_t i = 0; i < n; i++)
			fprintf(fp, "%" PRId64 "\n",
			        lat[i] >= 0 ? (lat[i] + 500) / 1000
			                    : -((-lat[i] + 500) / 1000));
		fclose(fp);
	}
}

/*
 * The run.  Declares and purges the target (and, for mode dlx, the chain
 * into it), then publishes and consumes until every message has arrived or
 * nothing has for o->idle_ms after the last publish.  Returns 0 when every
 * message published arrived and none early, 1 otherwise or when the
 * connection fails (for good, with --reconnect); a refused declare exits 1.
 */
int
run_measure(const struct opts *o)
{
	static struct broker_confirms c;
	static char err[8192];
	amqp_connection_state_t conn;
	uint64_t published = 0, received = 0, dups = 0;
	uint64_t early = 0, nlat = 0;
	/* What is to be published: o->count, or what was by the deadline. */
	uint64_t total = o->count;
	/* --reconnect: the publishes unconfirmed when a connection went. */
	uint64_t in_doubt = 0, reconnects = 0;
	/* --rate counts from here (moved on by a reconnect). */
	uint64_t pub_base = 0;
	int64_t pub_start;
	uint8_t *seen;
	/* --arrivals: each arrival's due and publish times; each id's
	 * publish time. */
	int64_t *due = NULL, *sent = NULL, *sent_by_id = NULL;
	int64_t *lat, start, last_arrival = 0, last_progress, idle_since;
	double mcpu0, bcpu0, mcpu1, bcpu1, secs;
	long rss_max = 0;
	char *buf;
	int stage = 0;
	uint64_t rng;
	double delay_sum = 0;
	struct payload pl;
	size_t got = 0;

	conn = broker_connect(&o->cfg, err, sizeof(err));
	if (conn == NULL) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	queues_declare(conn, o->target, o->target_type);
	amqp_queue_purge(conn, CH_PUB, amqp_cstring_bytes(o->target));
	queues_check(conn, "purge");
	if (o->mode == MODE_DLX)
		queues_declare_chain(conn, "dlx.delay", o->hops, o->unit,
		                     o->target, 1);
	if (broker_confirm_select(conn, CH_PUB, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	c.on_settle = run_settled;
	amqp_basic_consume(conn, CH_SUB, amqp_cstring_bytes(o->target),
	                   amqp_empty_bytes, 0, 1, 0, amqp_empty_table);
	queues_check(conn, "consume");

	seen = calloc(o->count + 1, 1);
	lat = calloc(o->count + 1, sizeof(*lat));
	buf = calloc(1, o->size);
	if (o->arrivals != NULL) {
		due = calloc(o->count + 1, sizeof(*due));
		sent = calloc(o->count + 1, sizeof(*sent));
		sent_by_id = calloc(o->count + 1, sizeof(*sent_by_id));
	}
	if (seen == NULL || lat == NULL || buf == NULL ||
	    (o->arrivals != NULL &&
	     (due == NULL || sent == NULL || sent_by_id == NULL)))
		return 1;
	srand(1);
	rng = o->seed;
	mcpu0 = proc_cpu(o->mover_pid);
	bcpu0 = proc_cpu(o->broker_pid);
	start = now_us();
	pub_start = start;
	last_progress = idle_since = start;

	while (received < total) {
		int64_t now = now_us();
		struct timeval tv = {0, 20000};
		amqp_frame_t f;
		int st, lost = 0;

		/* --deadline: what was published is all there is. */
		if (o->deadline_ms > 0 && published < total &&
		    now - start >= o->deadline_ms * 1000) {
			total = published;
			if (received >= total)
				break;
		}
		/* Publish what the rate and the confirm window allow. */
		while (published < total &&
		       broker_confirm_pending(&c) < WINDOW &&
		       (o->rate <= 0 ||
		        (double)(published - pub_base) <
		            o->rate * (double)(now - pub_start) / 1e6)) {
			amqp_table_entry_t h[2];
			amqp_basic_properties_t props = {0};
			int64_t d, due_ms = 0;
			const char *ex, *rk;
			if (o->at_ms >= 0) {
				/* One instant, in whole ms as x-deliver-at
				 * says it. */
				due_ms = start / 1000 + o->at_ms;
				d = due_ms - now_us() / 1000;
				pl.due_us = due_ms * 1000;
			} else {
				d = stats_draw_delay(o, &rng);
				pl.due_us = now_us() + d * 1000;
			}
			delay_sum += (double)d;
			pl.id = published + 1;
			memcpy(buf, &pl, sizeof(pl));
			props._flags = AMQP_BASIC_HEADERS_FLAG;
			props.headers.entries = h;
			props.headers.num_entries = 0;
			if (o->mode == MODE_CASCADE) {
				h[0].key = amqp_cstring_bytes(
				    o->at_ms >= 0 ? "x-deliver-at"
				                  : "x-remaining-delay");
				h[0].value.kind = AMQP_FIELD_KIND_I64;
				h[0].value.value.i64 =
				    o->at_ms >= 0 ? due_ms : d;
				props.headers.num_entries = 1;
				ex = o->prefix;
				rk = o->target;
			} else if (o->mode == MODE_FORWARD) {
				h[0].key = amqp_cstring_bytes("x-hops");
				h[0].value.kind = AMQP_FIELD_KIND_I64;
				h[0].value.value.i64 = 0;
				props.headers.num_entries = 1;
				ex = "";
				rk = "fwd.in";
			} else {
				ex = "";
				rk = "dlx.delay.0";
			}
			if (broker_confirm_publish(
			        conn, &c, amqp_cstring_bytes(ex),
			        amqp_cstring_bytes(rk), 0, &props,
			        (amqp_bytes_t){o->size, buf}) !=
			    AMQP_STATUS_OK) {
				snprintf(err, sizeof(err), "publish failed");
				lost = 1;
				break;
			}
			published++;
			now = now_us();
			if (sent_by_id != NULL)
				sent_by_id[published] = now;
		}
		/*
		 * Wait for a frame until the next publish is due (at most 1 ms
		 * while publishing as fast as confirms allow, 20 ms after):
		 * polling every 1 ms for the whole run cost the benchmark most
		 * of a core, taken from the broker and the daemon it measures.
		 * At a --rate, until that publish's turn (a trickle of 20 msg/s
		 * polled every 1 ms took a whole core).
		 */
		if (published < total && broker_confirm_pending(&c) < WINDOW) {
			int64_t wait = 1000;
			if (o->rate > 0) {
				wait = pub_start +
				       (int64_t)((double)(published - pub_base +
				                          1) *
				                 1e6 / o->rate) -
				       now;
				if (wait < 0)
					wait = 0;
				if (wait > 20000)
					wait = 20000;
			}
			tv.tv_usec = (long)wait;
		}
		st = lost ? AMQP_STATUS_SOCKET_ERROR
		          : amqp_simple_wait_frame_noblock(conn, &f, &tv);
		now = now_us();
		if (st == AMQP_STATUS_OK) {
			int mine =
			    broker_confirm_frame(&c, &f, err, sizeof(err));
			if (mine < 0) {
				lost = 1;
			} else if (mine) {
				/* a confirm, counted */
			} else if (f.frame_type == AMQP_FRAME_METHOD) {
				if (f.payload.method.id ==
				    AMQP_BASIC_DELIVER_METHOD) {
					stage = 1;
					got = 0;
				}
			} else if (f.frame_type == AMQP_FRAME_BODY &&
			           stage == 1) {
				amqp_bytes_t b = f.payload.body_fragment;
				if (got < sizeof(pl)) {
					size_t n = sizeof(pl) - got;
					if (n > b.len)
						n = b.len;
					memcpy((char *)&pl + got, b.bytes, n);
				}
				got += b.len;
				if (got >= o->size) {
					stage = 0;
					if (pl.id == 0 || pl.id > o->count) {
						/* not ours */
					} else if (seen[pl.id]) {
						dups++;
					} else {
						seen[pl.id] = 1;
						received++;
						if (due != NULL) {
							due[nlat] = pl.due_us;
							sent[nlat] =
							    sent_by_id[pl.id];
						}
						lat[nlat++] = now - pl.due_us;
						if (now < pl.due_us)
							early++;
					}
					last_arrival = now;
					idle_since = now;
				}
			}
			if (!amqp_frames_enqueued(conn) &&
			    !amqp_data_in_buffer(conn))
				amqp_maybe_release_buffers(conn);
		} else if (st != AMQP_STATUS_TIMEOUT && !lost) {
			snprintf(err, sizeof(err), "connection: %s",
			         amqp_error_string2(st));
			lost = 1;
		}
		if (lost) {
			int64_t t0 = duration_mono_ms();
			fprintf(stderr, "\ncascade-bench: %s\n", err);
			if (o->reconnect_ms <= 0)
				return 1;
			in_doubt += broker_confirm_pending(&c);
			conn = run_reconnect(o, conn, &c, err, sizeof(err));
			if (conn == NULL) {
				fprintf(stderr,
				        "cascade-bench: no connection for "
				        "%.1fs: %s\n",
				        (double)o->reconnect_ms / 1e3, err);
				return 1;
			}
			reconnects++;
			stage = 0;
			now = now_us();
			pub_base = published;
			pub_start = idle_since = now;
			fprintf(stderr,
			        "cascade-bench: connected again after %.1fs\n",
			        (double)(duration_mono_ms() - t0) / 1e3);
		}
		if (o->mover_pid > 0 && now - last_progress >= 1000000) {
			long rss = proc_rss_kib(o->mover_pid);
			if (rss > rss_max)
				rss_max = rss;
		}
		if (now - last_progress >= 1000000) {
			fprintf(stderr,
			        "\r%6.1fs published %" PRIu64
			        " received %" PRIu64 " early %" PRIu64
			        " dup %" PRIu64 "   ",
			        (double)(now - start) / 1e6, published,
			        received, early, dups);
			last_progress = now;
		}
		if (published == total && now - idle_since > o->idle_ms * 1000)
			break;
		if (published < total)
			idle_since = now;
	}
	fprintf(stderr, "\n");
	mcpu1 = proc_cpu(o->mover_pid);
	bcpu1 = proc_cpu(o->broker_pid);
	if (o->mover_pid > 0) {
		long rss = proc_rss_kib(o->mover_pid);
		if (rss > rss_max)
			rss_max = rss;
	}
	secs = (double)((last_arrival ? last_arrival : now_us()) - start) / 1e6;
	run_write_arrivals(o, lat, due, sent, nlat);
	stats_sort(lat, nlat);

	{
		double msgs = (double)received / secs;
		double hops = msgs * o->hops;
		double mcpu = o->mover_pid > 0 ? mcpu1 - mcpu0 : NAN;
		double bcpu = o->broker_pid > 0 ? bcpu1 - bcpu0 : NAN;
		const char *mode = o->mode == MODE_CASCADE   ? "cascade"
		                   : o->mode == MODE_FORWARD ? "forward"
		                                             : "dlx";
		char json[2048], v[12][32];
		double nums[12] = {stats_percentile(lat, nlat, 0),
		                   stats_percentile(lat, nlat, 0.5),
		                   stats_percentile(lat, nlat, 0.9),
		                   stats_percentile(lat, nlat, 0.99),
		                   stats_percentile(lat, nlat, 0.999),
		                   stats_percentile(lat, nlat, 1),
		                   mcpu,
		                   bcpu,
		                   mcpu * 1e6 / ((double)received * o->hops),
		                   bcpu * 1e6 / ((double)received * o->hops),
		                   msgs,
		                   hops};
		for (int i = 0; i < 12; i++) {
			if (isnan(nums[i]) || isinf(nums[i]))
				snprintf(v[i], sizeof(v[i]), "null");
			else
				snprintf(v[i], sizeof(v[i]), "%.3f", nums[i]);
		}
		snprintf(json, sizeof(json),
		         "{\"mode\": \"%s\", \"messages\": %" PRIu64
		         ", \"received\": %" PRIu64 ", \"lost\": %" PRIu64
		         ", \"early\": %" PRIu64 ", \"duplicates\": %" PRIu64
		         ", \"seconds\": %.3f, \"msgs_per_s\": %s, "
		         "\"hops_per_s\": %s, \"lateness_ms\": {\"min\": %s, "
		         "\"p50\": %s, \"p90\": %s, \"p99\": %s, "
		         "\"p999\": %s, \"max\": %s}, \"mover_cpu_s\": %s, "
		         "\"broker_cpu_s\": %s, \"mover_cpu_per_hop_us\": %s, "
		         "\"broker_cpu_per_hop_us\": %s, "
		         "\"mover_rss_max_kib\": %ld, \"delay_mean_ms\": %.1f, "
		         "\"reconnects\": %" PRIu64 ", \"in_doubt\": %" PRIu64
		         "}",
		         mode, published, received,
		         published > received ? published - received : 0, early,
		         dups, secs, v[10], v[11], v[0], v[1], v[2], v[3], v[4],
		         v[5], v[6], v[7], v[8], v[9], rss_max,
		         published ? delay_sum / (double)published : 0.0,
		         reconnects, in_doubt);
		printf("%s\n", json);
		if (o->json != NULL) {
			FILE *fp = fopen(o->json, "w");
			if (fp != NULL) {
				fprintf(fp, "%s\n", json);
				fclose(fp);
			}
		}
	}
	if (o->plot != NULL)
		stats_plot(o->plot, lat, nlat);
	amqp_destroy_connection(conn);
	/* Freed, so that a sanitized build's LeakSanitizer (make check's
	 * native part runs the benchmark in test_burst) exits 0. */
	free(seen);
	free(lat);
	free(due);
	free(sent);
	free(sent_by_id);
	free(buf);
	return received == published && early == 0 ? 0 : 1;
}
