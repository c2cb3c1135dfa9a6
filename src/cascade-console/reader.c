/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reader: one thread follows P.events from its first record, live, as
 * the console's own user (the [broker] url's, a control user as for
 * cascade-ctl list), folding each record into the index, the requests and
 * the parked ring under the console's lock.  A lost connection is made
 * again and the reading goes on after the last offset it read, so the
 * index is never rebuilt.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console.h"
#include "duration.h"
#include "log.h"
#include "streamread.h"

struct reader {
	struct console *c;
	struct streamread s;
	struct client cl;
	uint64_t batch;   /* records since the last wake-up */
	int64_t start_ms; /* monotonic, when the reading began */
	int64_t
	    pruned_ms; /* monotonic, when lapsed requests were last let go */
};

/* A change to show: the version moves on and the long-polls wake. */
static void
console_changed(struct console *c)
{
	atomic_fetch_add(&c->version, 1);
	pthread_cond_broadcast(&c->changed);
}

/* A bounded copy of b into a ring field. */
static void
reader_put(char *dst, size_t size, uint8_t *len, amqp_bytes_t b)
{
	size_t n = b.len < size ? b.len : size;

	if (n > 0)
		memcpy(dst, b.bytes, n);
	*len = (uint8_t)n;
}

/*
 * A parked record names the message by its cascade id and says why
 * (CONTRACT 7.4): its message-id, target and owner come from its
 * scheduled record, still in the index (the record is folded after).
 */
static void
reader_parked(struct console *c, const struct event *e)
{
	struct cparked *p = &c->ring[c->ring_next];
	struct cindex_row row;
	int64_t slot;

	memset(p, 0, sizeof(*p));
	memset(&row, 0, sizeof(row));
	row.message_id = e->message_id;
	row.exchange = e->exchange;
	row.routing_key = e->routing_key;
	row.owner = e->owner;
	slot = cindex_find(&c->ix, e->id);
	if (slot >= 0)
		cindex_row(&c->ix, (uint32_t)slot, &row);
	p->at = e->at;
	reader_put(p->id, 64, &p->id_len, e->id);
	reader_put(p->message_id, 128, &p->mid_len, row.message_id);
	p->has_mid = row.message_id.len > 0;
	reader_put(p->exchange, 128, &p->ex_len, row.exchange);
	reader_put(p->routing_key, 128, &p->rk_len, row.routing_key);
	reader_put(p->owner, 128, &p->owner_len, row.owner);
	p->has_owner = row.owner.len > 0 && row.owner.len <= 128;
	reader_put(p->reason, 128, &p->reason_len, e->reason);
	c->ring_next = (c->ring_next + 1) % CONSOLE_PARKED_RING;
	if (c->ring_n < CONSOLE_PARKED_RING)
		c->ring_n++;
}

/* A repeat's schedule, kept by cascade id while its copy waits. */
static int
reader_series(struct console *c, const struct event *e)
{
	struct cseries *s;
	void *old;
	size_t cl = e->cron.len > 255 ? 255 : e->cron.len;
	size_t tl = e->tz.len > 255 ? 255 : e->tz.len;

	if (e->every <= 0 && e->cron.len == 0) {
		free(idmap_del(&c->series, e->id));
		return 0;
	}
	if (idmap_get(&c->series, e->id) == NULL &&
	    c->series.n >= CONSOLE_SERIES_MAX) {
		c->series_refused++;
		return 0;
	}
	if ((s = malloc(sizeof(*s) + cl + tl)) == NULL)
		return -1;
	s->every = e->every;
	s->occurrence = e->occurrence;
	s->cron_len = (uint8_t)cl;
	s->tz_len = (uint8_t)tl;
	if (cl > 0)
		memcpy(s->text, e->cron.bytes, cl);
	if (tl > 0)
		memcpy(s->text + cl, e->tz.bytes, tl);
	if (idmap_put(&c->series, e->id, s, &old) < 0) {
		free(s);
		return -1;
	}
	free(old);
	return 0;
}

/* Who asks in request e, as the daemons judge it (waiting.c does the
 * same for cascade-ctl list). */
static void
reader_requester(struct console *c, const struct event *e, struct event *req,
                 amqp_bytes_t *by, int *control)
{
	*req = *e;
	*by = e->writer;
	*control = 1;
	requests_requester(&c->cfg, req, amqp_cstring_bytes(c->own_user), by,
	                   control);
}

/*
 * The message in slot where the reschedule in force on it (as the daemons
 * judge it: requests_match, their requester may change it, and it was
 * made after it was first seen) says it waits now.  -1 out of memory.
 */
static int
reader_settle(struct console *c, uint32_t slot, int64_t now)
{
	struct cancel_match cm;
	struct cindex_row row;

	cindex_row(&c->ix, slot, &row);
	if (requests_match(&c->req, row.message_id, row.id, row.owner, row.seen,
	                   now, &cm) &&
	    cm.reschedule != NULL && cm.reschedule->due != row.due)
		return cindex_move(&c->ix, slot, cm.reschedule->due);
	return 0;
}

/*
 * A reschedule in force moves the messages it names in the index, so a
 * page lists them where they wait now, in the order cascade-ctl list
 * shows them.
 */
static int
reader_move(struct console *c, const struct event *e)
{
	uint32_t total = cindex_named(&c->ix, e->cancel, NULL, 0), n;
	uint32_t *slots = malloc(((size_t)total + 1) * sizeof(*slots));
	int64_t now = duration_wall_ms();
	int rc = 0;

	if (slots == NULL)
		return -1;
	n = cindex_named(&c->ix, e->cancel, slots, total);
	for (uint32_t i = 0; i < n && i < total && rc == 0; i++)
		rc = reader_settle(c, slots[i], now);
	free(slots);
	return rc;
}

/*
 * A scheduled record read after a reschedule that names it (its record
 * came late, or again: the later one wins, at the time it recorded) is
 * moved as well.
 */
static int
reader_scheduled(struct console *c, const struct event *e)
{
	int64_t slot;

	if (c->req.n[REQUESTS_CANCEL] == 0 ||
	    (slot = cindex_find(&c->ix, e->id)) < 0)
		return 0;
	return reader_settle(c, (uint32_t)slot, duration_wall_ms());
}

/*
 * Whether the requests held are at [events] max_held_ids, as a daemon
 * holds them: then a new one is not held (counted), so that no publisher
 * can grow the console's memory without end.  Those that lapse are
 * forgotten every minute (reader_tick).
 */
static int
reader_requests_full(struct console *c)
{
	size_t held = 0;

	for (size_t k = 0; k < REQUESTS_KINDS; k++)
		held += c->req.n[k];
	if (held < config_held_limit(&c->cfg, 1))
		return 0;
	c->requests_refused++;
	return 1;
}

static int
reader_fold(struct console *c, const struct event *e, uint64_t offset)
{
	struct event req;
	amqp_bytes_t by;
	int control;

	switch (e->kind) {
	case EVENT_CANCEL:
		if (reader_requests_full(c))
			return 0;
		reader_requester(c, e, &req, &by, &control);
		return requests_add(&c->req, &req, by, control) < 0 ? -1 : 0;
	case EVENT_RESCHEDULE:
		if (reader_requests_full(c))
			return 0;
		reader_requester(c, e, &req, &by, &control);
		if (requests_add(&c->req, &req, by, control) < 0)
			return -1;
		return reader_move(c, e);
	case EVENT_PAUSE:
	case EVENT_RESUME:
		if (reader_requests_full(c))
			return 0;
		reader_requester(c, e, &req, &by, &control);
		return requests_pause_read(&c->req, &req, by, control, 1) < 0
		           ? -1
		           : 0;
	case EVENT_SCHEDULED:
		if (cindex_fold_event(&c->ix, e, offset) < 0 ||
		    reader_scheduled(c, e) < 0)
			return -1;
		return reader_series(c, e);
	case EVENT_PARKED:
		reader_parked(c, e);
		/* fall through */
	case EVENT_DELIVERED:
	case EVENT_CANCELLED:
	case EVENT_DUPLICATE:
		free(idmap_del(&c->series, e->id));
		return cindex_fold_event(&c->ix, e, offset);
	default:
		return cindex_fold_event(&c->ix, e, offset);
	}
}

static int
reader_event(void *arg, const struct event *e, char *err, size_t size)
{
	struct reader *r = arg;
	struct console *c = r->c;
	uint64_t offset =
	    r->s.resume.last >= 0 ? (uint64_t)r->s.resume.last : 0;
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = reader_fold(c, e, offset);
	c->records++;
	c->live_ms = duration_wall_ms();
	/* Live: each record shows at once; catching up: every 10,000. */
	if (c->caught_up || ++r->batch % 10000 == 0)
		console_changed(c);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0) {
		snprintf(err, size, "out of memory after %" PRIu64 " records",
		         c->records);
		return -1;
	}
	return atomic_load(&c->stop) ? 1 : 0;
}

static int
reader_reached(void *arg, char *err, size_t size)
{
	struct reader *r = arg;
	struct console *c = r->c;

	(void)err;
	(void)size;
	pthread_mutex_lock(&c->lock);
	if (!c->caught_up) {
		c->caught_up = 1;
		/* Ends whose scheduled record was never read: not coming. */
		cindex_prune_ended(&c->ix, duration_wall_ms() - 600000);
		log_info("console_caught_up",
		         " records=%" PRIu64 " waiting=%" PRIu32 " ms=%" PRId64,
		         c->records, cindex_count(&c->ix),
		         duration_mono_ms() - r->start_ms);
	}
	console_changed(c);
	pthread_mutex_unlock(&c->lock);
	return atomic_load(&c->stop) ? 1 : 0;
}

/*
 * Another reader's marker (cascade-ctl's, written just before it asks,
 * ctl.c), from cascade's own users only (streamread skips the others'):
 * kept in the ring, and the questions waiting for it woken.  The
 * version does not move: nothing shown changed.
 */
static int
reader_marker(void *arg, amqp_bytes_t token, char *err, size_t size)
{
	struct reader *r = arg;
	struct console *c = r->c;
	size_t k;

	(void)err;
	(void)size;
	if (token.len == 0 || token.len > CONSOLE_MARK_MAX)
		return 0;
	pthread_mutex_lock(&c->lock);
	k = c->marks_next;
	memcpy(c->marks[k], token.bytes, token.len);
	c->mark_len[k] = (uint8_t)token.len;
	c->mark_at[k] = duration_mono_ms();
	c->marks_next = (k + 1) % CONSOLE_MARKS;
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
	return atomic_load(&c->stop) ? 1 : 0;
}

static int
reader_tick(void *arg, char *err, size_t size)
{
	struct reader *r = arg;
	struct console *c = r->c;

	(void)err;
	(void)size;
	pthread_mutex_lock(&c->lock);
	if (r->s.reached)
		c->live_ms = duration_wall_ms();
	if (!c->caught_up)
		console_changed(c);
	if (duration_mono_ms() - r->pruned_ms >= 60000) {
		requests_prune(&c->req, duration_wall_ms());
		r->pruned_ms = duration_mono_ms();
	}
	c->untrusted = r->s.untrusted;
	pthread_mutex_unlock(&c->lock);
	return atomic_load(&c->stop) ? 1 : 0;
}

static void
reader_sleep(struct console *c, int64_t ms)
{
	for (int64_t t = 0; t < ms && !atomic_load(&c->stop); t += 100) {
		struct timespec ts = {0, 100 * 1000000L};
		nanosleep(&ts, NULL);
	}
}

/* The reader's last error and its wall time, for /health and /healthz:
 * kept after the reader reads again (the time says how old it is). */
static void
reader_failed(struct console *c, const char *err)
{
	pthread_mutex_lock(&c->lock);
	snprintf(c->reader_err, sizeof(c->reader_err), "%.500s", err);
	c->reader_err_ms = duration_wall_ms();
	pthread_mutex_unlock(&c->lock);
}

static void *
reader_main(void *arg)
{
	struct reader *r = arg;
	struct console *c = r->c;
	int64_t backoff = 500;

	while (!atomic_load(&c->stop)) {
		if (r->cl.conn == NULL &&
		    client_open(&r->cl, &c->cfg, &c->topo) < 0) {
			log_warn("console_reader", " error=\"%s\"", r->cl.err);
			reader_failed(c, r->cl.err);
			reader_sleep(c, backoff);
			backoff = backoff < 16000 ? backoff * 2 : 30000;
			continue;
		}
		backoff = 500;
		if (streamread_run(&r->cl, &r->s) == 0)
			break; /* stopped */
		reader_failed(c, r->cl.err);
		log_warn("console_reader", " error=\"%s\" offset=%" PRId64,
		         r->cl.err, r->s.resume.last);
		client_close(&r->cl);
		memset(&r->cl, 0, sizeof(r->cl));
		/* On from the last offset read, towards the same marker;
		 * when nothing was read (the stream was missing, or the
		 * marker's write failed), from the start with a new one. */
		r->s.again = r->s.resume.last >= 0;
		reader_sleep(c, 1000);
	}
	if (r->cl.conn != NULL)
		client_close(&r->cl);
	return NULL;
}

static struct reader the_reader;

int
reader_start(struct console *c)
{
	struct reader *r = &the_reader;
	pthread_attr_t attr;
	int rc;

	memset(r, 0, sizeof(*r));
	r->c = c;
	r->s.name = c->topo.events;
	r->s.tag = "cascade-console.events";
	r->s.marker = "console";
	r->s.follow = 1;
	r->s.on_event = reader_event;
	r->s.on_reached = reader_reached;
	r->s.on_tick = reader_tick;
	r->s.on_marker = reader_marker;
	r->s.arg = r;
	events_resume_init(&r->s.resume); /* nothing read yet */
	r->start_ms = duration_mono_ms();
	c->live_ms = duration_wall_ms();
	/* rabbitmq-c 0.11 decodes nested headers recursively: the room
	 * stackroom gives the main thread, given to this one too. */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64u << 20);
	rc = pthread_create(&c->reader, &attr, reader_main, r);
	pthread_attr_destroy(&attr);
	return rc == 0 ? 0 : -1;
}

void
reader_stop(struct console *c)
{
	atomic_store(&c->stop, 1);
	pthread_join(c->reader, NULL);
}
