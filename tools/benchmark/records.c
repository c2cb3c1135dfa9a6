/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `cascade-bench records`: fill a stream with what cascade leaves there,
 * encoded by the daemon's own code (events_props), so that a reader's
 * catching up can be timed.
 *
 * --stream series (the default) or cancels: P.series (or P.cancels, where
 * versions before P.series wrote them) as a long-running repeat leaves it
 * (tools/bench replay).  --count N series records of one series of every
 * 1 s, occurrences 2 to N + 1, due over the N seconds before now, each
 * with a fresh token: what a daemon writes as it delivers a day of a
 * one-second series (N = 86400).  Each is still in force (x-cascade-until:
 * its due time plus a day), so a reader folds every one into its map, as
 * after a real day.
 *
 * --kind scheduled: P.events as daemons leave it with N messages
 * scheduled (tools/bench console), written as the daemon writes it
 * (daemon_events.c): records in batches by events_batch_add, a batch of
 * at most 1,000 records or 64 KiB, signed with the writer's user-id.
 * Each message has a 36-byte message-id (a UUID's form), one of 20
 * targets, one of 100 owners (x-cascade-user-id), a body of 100 to 999
 * bytes, and, with --copy-bytes B, a copy of B bytes (an envelope, as
 * [events] copy_max_size lets through) in a copy record in P.copies,
 * batched the same way.  Each record's x-cascade-at is the time it is
 * written, as the broker's chunks are stamped (the console looks for a
 * copy by it).  --delivered-fraction F: that
 * fraction of the N, spread evenly, is history: its `delivered` record
 * follows RECORDS_LAG records later, and it was due then (in the past);
 * the others are due over the next 7 days and still wait.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "broker.h"
#include "duration.h"
#include "envelope.h"
#include "events.h"

static int records_events(const struct opts *o);

int
records_write(const struct opts *o)
{
	static char err[512];
	char user[256], series[17], token[17], stream[300];
	struct broker_confirms c;
	amqp_connection_state_t conn;
	amqp_pool_t pool;
	int64_t now = duration_wall_ms();

	if (o->kind != NULL)
		return records_events(o);
	conn = broker_connect(&o->cfg, err, sizeof(err));
	if (conn == NULL) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	if (config_broker_user(&o->cfg, user, sizeof(user)) < 0)
		user[0] = '\0';
	if (getenv("CASCADE_BROKER_URL") != NULL &&
	    config_url_user(getenv("CASCADE_BROKER_URL"), user, sizeof(user)) <
	        0)
		user[0] = '\0';
	snprintf(stream, sizeof(stream), "%s.%s", o->prefix, o->stream);
	if (broker_confirm_select(conn, CH_PUB, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	events_new_id(series);
	init_amqp_pool(&pool, 4096);
	for (uint64_t k = 2; k < o->count + 2; k++) {
		struct event e;
		amqp_basic_properties_t props;
		int64_t due = now - (int64_t)(o->count + 1 - k) * 1000;

		memset(&e, 0, sizeof(e));
		e.kind = EVENT_SERIES;
		e.at = due - 1000; /* when occurrence k - 1 went out */
		e.id = amqp_cstring_bytes(series);
		e.occurrence = (int64_t)k;
		events_new_id(token);
		e.token = amqp_cstring_bytes(token);
		e.until = due + 86400000;
		e.writer = amqp_cstring_bytes(user);
		if (events_props(&e, &pool, &props) < 0 ||
		    (broker_confirm_pending(&c) >= WINDOW &&
		     broker_confirm_wait(conn, &c, WINDOW / 2, 30000, err,
		                         sizeof(err)) < 0) ||
		    broker_confirm_publish(
		        conn, &c, amqp_empty_bytes, amqp_cstring_bytes(stream),
		        0, &props, amqp_empty_bytes) != AMQP_STATUS_OK) {
			fprintf(stderr,
			        "cascade-bench: record %" PRIu64 ": %s\n", k,
			        err[0] ? err : "publish failed");
			return 1;
		}
		recycle_amqp_pool(&pool);
	}
	if (broker_confirm_wait(conn, &c, 0, 60000, err, sizeof(err)) < 0) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	empty_amqp_pool(&pool);
	printf("wrote %" PRIu64 " series records of series %s to %s "
	       "(%" PRIu64 " acked, %" PRIu64 " nacked)\n",
	       o->count, series, stream, c.acked, c.nacked);
	return c.nacked > 0;
}

/* The daemon's batches (daemon_events.c): at most this many records, or
 * this many bytes, in one stream message. */
#define BATCH_RECORDS 1000
#define BATCH_BYTES (64 * 1024)
/* Batches unconfirmed at most (each up to 64 KiB). */
#define BATCH_WINDOW 64
/* Records between a history message's scheduled and delivered records. */
#define RECORDS_LAG 5000
#define TARGETS 20
#define OWNERS 100
#define WEEK_MS INT64_C(604800000)

/* Message i's fields, the same each time they are asked for. */
struct rmsg {
	char id[17];  /* cascade id: 16 hex digits, as events_new_id's */
	char mid[37]; /* message-id, a UUID's form */
	char exchange[16], key[24], owner[16];
	uint64_t h;
};

static void
rmsg_of(uint64_t seed, uint64_t i, struct rmsg *m)
{
	uint64_t a = stats_mix64(seed * UINT64_C(0x100000001b3) + i * 2);
	uint64_t b = stats_mix64(seed * UINT64_C(0x100000001b3) + i * 2 + 1);
	unsigned t;

	m->h = a;
	snprintf(m->id, sizeof(m->id), "%016" PRIx64, a);
	snprintf(m->mid, sizeof(m->mid),
	         "%08" PRIx32 "-%04" PRIx32 "-4%03" PRIx32 "-%04" PRIx32
	         "-%012" PRIx64,
	         (uint32_t)(b >> 32), (uint32_t)(b >> 16) & 0xffff,
	         (uint32_t)b & 0xfff, 0x8000 | ((uint32_t)(a >> 40) & 0x3fff),
	         stats_mix64(b) & UINT64_C(0xffffffffffff));
	/* Half the targets by the default exchange to a queue, half by an
	 * exchange with a routing key. */
	t = (unsigned)((a >> 20) % TARGETS);
	if (t < TARGETS / 2) {
		m->exchange[0] = '\0';
		snprintf(m->key, sizeof(m->key), "work.q%u", t);
	} else {
		snprintf(m->exchange, sizeof(m->exchange), "orders");
		snprintf(m->key, sizeof(m->key), "orders.k%u", t - TARGETS / 2);
	}
	snprintf(m->owner, sizeof(m->owner), "user%03u",
	         (unsigned)((a >> 32) % OWNERS));
}

/* Is message i of n history, for d of the n (spread evenly)? */
static int
rmsg_history(uint64_t i, uint64_t n, uint64_t d)
{
	return (i + 1) * d / n > i * d / n;
}

struct rbatch {
	amqp_connection_state_t conn;
	/* One channel's confirms for both streams' batches: a wait for
	 * them throws away what comes on another channel. */
	struct broker_confirms *c;
	const char *stream, *user;
	char *buf;
	size_t len, cap;
	uint64_t records, batches, bytes;
	char err[512];
};

static int
rbatch_flush(struct rbatch *b)
{
	amqp_basic_properties_t props;
	amqp_table_entry_t h[1];

	if (b->records == 0)
		return 0;
	memset(&props, 0, sizeof(props));
	props._flags = AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
	               AMQP_BASIC_HEADERS_FLAG;
	props.type = amqp_cstring_bytes(EVENTS_BATCH_TYPE);
	props.delivery_mode = 2;
	/* Readers believe a batch by its writer, which RabbitMQ checks. */
	if (b->user[0] != '\0') {
		props._flags |= AMQP_BASIC_USER_ID_FLAG;
		props.user_id = amqp_cstring_bytes(b->user);
	}
	h[0].key = amqp_cstring_bytes("x-cascade-records");
	h[0].value.kind = AMQP_FIELD_KIND_I64;
	h[0].value.value.i64 = (int64_t)b->records;
	props.headers = (amqp_table_t){1, h};
	if ((broker_confirm_pending(b->c) >= BATCH_WINDOW &&
	     broker_confirm_wait(b->conn, b->c, BATCH_WINDOW / 2, 60000, b->err,
	                         sizeof(b->err)) < 0) ||
	    broker_confirm_publish(
	        b->conn, b->c, amqp_empty_bytes, amqp_cstring_bytes(b->stream),
	        0, &props, (amqp_bytes_t){b->len, b->buf}) != AMQP_STATUS_OK) {
		if (b->err[0] == '\0')
			snprintf(b->err, sizeof(b->err), "publish failed");
		return -1;
	}
	b->batches++;
	b->bytes += b->len;
	b->len = 0;
	b->records = 0;
	return 0;
}

/* Record e into the batch, as daemon_write does. */
static int
rbatch_add(struct rbatch *b, const struct event *e, amqp_pool_t *pool)
{
	amqp_basic_properties_t props;

	if (events_props(e, pool, &props) < 0 ||
	    events_batch_add(&b->buf, &b->len, &b->cap, &props) < 0) {
		snprintf(b->err, sizeof(b->err), "out of memory");
		return -1;
	}
	recycle_amqp_pool(pool);
	if (++b->records >= BATCH_RECORDS || b->len >= BATCH_BYTES)
		return rbatch_flush(b);
	return 0;
}

/* The copy of message m (x-cascade-message): an envelope of its
 * properties and a body that make it copy_bytes long; empty when they
 * alone are longer. */
static amqp_bytes_t
rmsg_copy(const struct rmsg *m, int64_t due, unsigned copy_bytes,
          amqp_pool_t *pool)
{
	amqp_basic_properties_t p;
	amqp_table_entry_t h[2];
	char *out;
	size_t head, cap;
	static char filler[65536];

	if (copy_bytes == 0)
		return amqp_empty_bytes;
	if (filler[0] == '\0')
		memset(filler, 'x', sizeof(filler));
	memset(&p, 0, sizeof(p));
	p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG |
	           AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
	           AMQP_BASIC_USER_ID_FLAG | AMQP_BASIC_HEADERS_FLAG;
	p.content_type = amqp_cstring_bytes("application/json");
	p.delivery_mode = 2;
	p.message_id = amqp_cstring_bytes(m->mid);
	p.user_id = amqp_cstring_bytes(m->owner);
	h[0].key = amqp_cstring_bytes("x-cascade-id");
	h[0].value.kind = AMQP_FIELD_KIND_UTF8;
	h[0].value.value.bytes = amqp_cstring_bytes(m->id);
	h[1].key = amqp_cstring_bytes("x-deliver-at");
	h[1].value.kind = AMQP_FIELD_KIND_I64;
	h[1].value.value.i64 = due;
	p.headers = (amqp_table_t){2, h};
	cap = envelope_bound(&p, copy_bytes);
	if ((out = amqp_pool_alloc(pool, cap)) == NULL)
		return amqp_empty_bytes;
	head = envelope_encode(&p, amqp_empty_bytes, out, cap);
	if (head == 0 || head >= copy_bytes ||
	    copy_bytes - head > sizeof(filler))
		return amqp_empty_bytes;
	return (amqp_bytes_t){
	    envelope_encode(&p, (amqp_bytes_t){copy_bytes - head, filler}, out,
	                    cap),
	    out};
}

/* The scheduled record of message i, due at due, written at at. */
static int
records_scheduled(struct rbatch *b, struct rbatch *cb, const struct opts *o,
                  uint64_t i, int64_t at, int64_t due, amqp_pool_t *pool)
{
	struct rmsg m;
	struct event e, copy;

	rmsg_of(o->seed, i, &m);
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_SCHEDULED;
	e.at = at;
	e.id = amqp_cstring_bytes(m.id);
	e.message_id = amqp_cstring_bytes(m.mid);
	e.due = due;
	e.exchange = amqp_cstring_bytes(m.exchange);
	e.routing_key = amqp_cstring_bytes(m.key);
	e.size = 100 + (int64_t)((m.h >> 8) % 900);
	e.owner = amqp_cstring_bytes(m.owner);
	/* The copy first, into P.copies, as the daemon writes it. */
	memset(&copy, 0, sizeof(copy));
	copy.kind = EVENT_COPY;
	copy.at = at;
	copy.id = e.id;
	copy.copy = rmsg_copy(&m, due, o->copy_bytes, pool);
	if (copy.copy.len > 0 && rbatch_add(cb, &copy, pool) < 0) {
		snprintf(b->err, sizeof(b->err), "%s", cb->err);
		return -1;
	}
	return rbatch_add(b, &e, pool);
}

static int
records_delivered(struct rbatch *b, const struct opts *o, uint64_t i,
                  int64_t at, amqp_pool_t *pool)
{
	struct rmsg m;
	struct event e;

	rmsg_of(o->seed, i, &m);
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_DELIVERED;
	e.at = at;
	e.id = amqp_cstring_bytes(m.id);
	e.message_id = amqp_cstring_bytes(m.mid);
	return rbatch_add(b, &e, pool);
}

/*
 * --kind scheduled: o->count messages, the fraction o->delivered of them
 * history (delivered RECORDS_LAG records after their scheduled record),
 * the rest waiting, due over the next 7 days.  Each record's x-cascade-at
 * is when it is written.
 */
static int
records_events(const struct opts *o)
{
	static struct rbatch b, cb;
	static struct broker_confirms confirms;
	static char user[256], stream[300], copies[300];
	uint64_t n = o->count, d, pos = 0, sample = n;
	uint64_t ring_cap = RECORDS_LAG + 2, *ring, head = 0, tail = 0;
	int64_t now = duration_wall_ms(), t0, ms;
	amqp_pool_t pool;
	struct rmsg m;

	if (strcmp(o->kind, "scheduled") != 0) {
		fprintf(stderr, "cascade-bench: --kind: scheduled\n");
		return 2;
	}
	if (n == 0 || o->delivered < 0 || o->delivered > 1) {
		fprintf(stderr, "cascade-bench: records: -n from 1, "
		                "--delivered-fraction from 0 to 1\n");
		return 2;
	}
	d = (uint64_t)((double)n * o->delivered + 0.5);
	if (d > n)
		d = n;
	/* The history messages whose delivered record is still to come:
	 * (index, stream position of its scheduled record). */
	if ((ring = malloc(2 * ring_cap * sizeof(*ring))) == NULL)
		return 1;
	b.conn = broker_connect(&o->cfg, b.err, sizeof(b.err));
	if (b.conn == NULL) {
		fprintf(stderr, "cascade-bench: %s\n", b.err);
		return 1;
	}
	if (config_broker_user(&o->cfg, user, sizeof(user)) < 0)
		user[0] = '\0';
	if (getenv("CASCADE_BROKER_URL") != NULL &&
	    config_url_user(getenv("CASCADE_BROKER_URL"), user, sizeof(user)) <
	        0)
		user[0] = '\0';
	b.user = user;
	snprintf(stream, sizeof(stream), "%s.events", o->prefix);
	b.stream = stream;
	snprintf(copies, sizeof(copies), "%s.copies", o->prefix);
	cb.conn = b.conn;
	cb.user = user;
	cb.stream = copies;
	b.c = cb.c = &confirms;
	if (broker_confirm_select(b.conn, CH_PUB, &confirms, b.err,
	                          sizeof(b.err)) < 0) {
		fprintf(stderr, "cascade-bench: %s\n", b.err);
		return 1;
	}
	init_amqp_pool(&pool, 16384);
	t0 = duration_mono_ms();
	for (uint64_t i = 0; i < n || head != tail; i++) {
		int64_t at, due;

		/* The delivered records now RECORDS_LAG old, or all at the
		 * end. */
		while (head != tail &&
		       (i >= n || pos - ring[2 * head + 1] >= RECORDS_LAG)) {
			at = duration_wall_ms();
			if (records_delivered(&b, o, ring[2 * head], at,
			                      &pool) < 0)
				goto fail;
			head = (head + 1) % ring_cap;
			pos++;
		}
		if (i >= n)
			continue;
		at = duration_wall_ms();
		if (rmsg_history(i, n, d)) {
			/* Due when its delivered record is written. */
			due = at + (int64_t)RECORDS_LAG * 10;
			if (records_scheduled(&b, &cb, o, i, at, due, &pool) <
			    0)
				goto fail;
			ring[2 * tail] = i;
			ring[2 * tail + 1] = pos;
			tail = (tail + 1) % ring_cap;
		} else {
			rmsg_of(o->seed, i, &m);
			due =
			    now + 60000 + (int64_t)(stats_mix64(m.h) % WEEK_MS);
			if (records_scheduled(&b, &cb, o, i, at, due, &pool) <
			    0)
				goto fail;
			if (sample == n && i >= n / 2)
				sample = i;
		}
		pos++;
	}
	if (rbatch_flush(&cb) < 0 || rbatch_flush(&b) < 0 ||
	    broker_confirm_wait(b.conn, &confirms, 0, 120000, b.err,
	                        sizeof(b.err)) < 0)
		goto fail;
	ms = duration_mono_ms() - t0;
	empty_amqp_pool(&pool);
	free(ring);
	free(b.buf);
	free(cb.buf);
	if (cb.batches > 0)
		printf("wrote %" PRIu64 " copies of %u bytes to %s in %" PRIu64
		       " batches, %.1f MiB\n",
		       n, o->copy_bytes, copies, cb.batches,
		       (double)cb.bytes / 1048576.0);
	printf("wrote %" PRIu64 " records to %s: %" PRIu64
	       " scheduled (%" PRIu64 " waiting), %" PRIu64
	       " delivered, in %" PRIu64 " batches, %.1f MiB, %" PRId64
	       " ms: %.0f records/s (%" PRIu64 " acked, %" PRIu64 " nacked)\n",
	       pos, stream, n, n - d, d, b.batches, (double)b.bytes / 1048576.0,
	       ms, (double)pos * 1000.0 / (double)(ms > 0 ? ms : 1),
	       confirms.acked, confirms.nacked);
	if (sample < n) {
		rmsg_of(o->seed, sample, &m);
		printf("sample message_id=%s id=%s owner=%s exchange=%s "
		       "routing_key=%s\n",
		       m.mid, m.id, m.owner, m.exchange, m.key);
	}
	return confirms.nacked > 0;
fail:
	fprintf(stderr, "cascade-bench: record %" PRIu64 ": %s\n", pos, b.err);
	return 1;
}
