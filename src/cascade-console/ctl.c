/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl: cascade-ctl's questions (docs/CONTRACT.md 7.11), so that list and
 * cancel answer from the index instead of reading P.events.  cascade-ctl
 * writes a marker into P.events first and names its token: a question is
 * answered once the reader has read that marker, so the answer holds
 * every record written before it, as ctl's own reading would.  The
 * marker is the question's credential too: the reader keeps only markers
 * written by cascade's own users (the daemons' user, one of [events]
 * control_users: trust.h, as RabbitMQ's user-id check vouches), so only
 * they can ask, with no session and no password, and only for a minute
 * after their marker was read.  The answers are lines (ctlwire.h);
 * where the index does not hold what ctl's reading would show (a record the
 * caps refused, a request not held, a series' schedule not kept, a reschedule
 * no longer in force), the answer is 503 and ctl reads the stream.
 */
#include "amqp_compat.h"
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console.h"
#include "ctlwire.h"
#include "duration.h"
#include "log.h"
#include "trust.h"

/* Questions waiting for their marker at once, at most. */
#define CTL_WAITING_MAX 64

static atomic_int ctl_waiting;

/* What a question names besides its own arguments. */
struct ctlq {
	const char *marker;
	int64_t now;     /* the asker's: list's windows and requests in force */
	int64_t started; /* monotonic, for the log */
};

/* Unix ms the asker may name as its now: 1970 to some 140,000 years on,
 * far from overflowing a window's edge. */
#define CTL_NOW_MAX (INT64_C(1) << 62)

/* A whole decimal integer, optionally negative. */
static int
ctl_int(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (s == NULL || s[0] == '\0')
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' ||
	    !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')))
		return -1;
	*out = v;
	return 0;
}

/* One line in the log per question, whatever its answer. */
static void
ctl_logged(const struct ask *a, const struct answer *r, const char *kind,
           const struct ctlq *q, uint64_t rows)
{
	log_info("console_ctl",
	         " kind=%s status=%d rows=%" PRIu64 " ms=%" PRId64 " from=%s",
	         kind, r->status, rows, duration_mono_ms() - q->started,
	         a->client_ip);
}

/* Whether the ring holds the marker token, read within the last
 * CONSOLE_MARK_TTL_MS (the index locked). */
static int
ctl_marker_read(const struct console *c, const char *token, size_t len)
{
	int64_t now = duration_mono_ms();

	for (size_t k = 0; k < CONSOLE_MARKS; k++)
		if (c->mark_len[k] == len &&
		    memcmp(c->marks[k], token, len) == 0)
			return now - c->mark_at[k] <= CONSOLE_MARK_TTL_MS;
	return 0;
}

/*
 * The question's common part: the arguments every question takes (into
 * q), and its marker read.  0 with c->lock held, or
 * -1 with the answer made and the lock released.
 */
static int
ctl_begin(struct ask *a, struct answer *r, struct ctlq *q)
{
	struct console *c = a->c;
	const char *stream = ask_arg(a, "stream"), *who;
	struct timespec ts;
	size_t len;
	int found = 0;

	q->marker = ask_arg(a, "marker");
	if (q->marker == NULL || (len = strlen(q->marker)) == 0 ||
	    len > CONSOLE_MARK_MAX || ctl_int(ask_arg(a, "now"), &q->now) < 0 ||
	    q->now < 0 || q->now > CTL_NOW_MAX || stream == NULL) {
		answer_error(a, r, 400, "bad_request",
		             "marker (1 to 64 bytes), now (Unix ms) and stream "
		             "are needed");
		return -1;
	}
	/* A user whose markers the reader skips would wait in vain: said
	 * at once, so that ctl reads the stream without waiting.  (The
	 * marker, not this name, is the credential.) */
	if ((who = ask_arg(a, "user")) == NULL ||
	    !trust_writer(&c->cfg, amqp_cstring_bytes(c->own_user),
	                  amqp_cstring_bytes(who))) {
		answer_error(a, r, 403, "not_trusted",
		             "markers are read from cascade's own users only "
		             "(the console's user and [events] control_users)");
		return -1;
	}
	/* Another configuration's console: not the stream ctl reads. */
	if (strcmp(stream, c->topo.events) != 0) {
		answer_error(a, r, 409, "other_stream",
		             "this console reads another stream");
		return -1;
	}
	if (atomic_fetch_add(&ctl_waiting, 1) >= CTL_WAITING_MAX) {
		atomic_fetch_sub(&ctl_waiting, 1);
		answer_error(a, r, 503, "not_ready", "too many waiting");
		return -1;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += CONSOLE_MARK_WAIT_MS / 1000;
	ts.tv_nsec += (CONSOLE_MARK_WAIT_MS % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&c->lock);
	if (c->caught_up)
		for (;;) {
			if ((found = ctl_marker_read(c, q->marker, len)) != 0 ||
			    atomic_load(&c->stop))
				break;
			if (pthread_cond_timedwait(&c->changed, &c->lock,
			                           &ts) == ETIMEDOUT) {
				found = ctl_marker_read(c, q->marker, len);
				break;
			}
		}
	atomic_fetch_sub(&ctl_waiting, 1);
	if (found)
		return 0;
	if (!c->caught_up || atomic_load(&c->stop)) {
		pthread_mutex_unlock(&c->lock);
		answer_error(a, r, 503, "not_ready",
		             "catching up on P.events: read the stream");
		return -1;
	}
	pthread_mutex_unlock(&c->lock);
	answer_error(a, r, 504, "marker_timeout",
	             "no marker of cascade's own users with that token was "
	             "read within 10 s (or it was read over a minute ago)");
	return -1;
}

/* What the index holds is not what a reading of the stream would show. */
static void
ctl_incomplete(struct ask *a, struct answer *r, const char *why)
{
	pthread_mutex_unlock(&a->c->lock);
	answer_error(a, r, 503, "incomplete", why);
}

/* Why the index cannot answer for everything (the index locked), or NULL. */
static const char *
ctl_lacks(const struct console *c)
{
	if (cindex_stats(&c->ix).refused > 0)
		return "the index refused records (its caps)";
	if (c->requests_refused > 0)
		return "requests were not held ([events] max_held_ids)";
	return NULL;
}

/* The row of slot as list shows it into w (the index locked), whose
 * views point into the index and into *rowp (a cascade id is in its
 * id_text): the caller keeps it while w is used.  -1 when the index lacks
 * what the row needs. */
static int
ctl_row(struct console *c, uint32_t slot, int64_t now, struct cindex_row *rowp,
        struct waiting *w, const char **why)
{
	const struct cseries *se = NULL;
	struct cindex_row row;
	struct rowstate st;

	cindex_row(&c->ix, slot, rowp);
	row = *rowp;
	console_rowstate(c, &row, now, &st);
	*why = "a reschedule moved a message and is no longer in force";
	if (st.due != row.due)
		return -1;
	*why = "a series' schedule is not held";
	if (row.repeat && (se = console_series(c, &row)) == NULL)
		return -1;
	memset(w, 0, sizeof(*w));
	w->due = st.due;
	w->seen = row.seen;
	w->size = row.size;
	w->id = row.id;
	w->message_id = row.message_id;
	w->exchange = row.exchange;
	w->routing_key = row.routing_key;
	w->cancel_pending = st.cancel_pending;
	w->rescheduled = st.rescheduled;
	w->repeat = row.repeat;
	w->paused = st.paused;
	if (se != NULL) {
		w->every = se->every;
		w->occurrence = se->occurrence;
		w->cron = (amqp_bytes_t){se->cron_len, (void *)se->text};
		w->tz = (amqp_bytes_t){se->tz_len,
		                       (void *)(se->text + se->cron_len)};
	}
	return 0;
}

/* list's filters from the question into q; -1 with the answer made. */
static int
ctl_filters(struct ask *a, struct answer *r, struct cindex_query *q,
            uint64_t *limit)
{
	const char *s;
	int64_t v;

	cindex_query_init(q);
	q->target = ask_arg(a, "target");
	if (((s = ask_arg(a, "due_before")) != NULL &&
	     ctl_int(s, &q->due_before) < 0) ||
	    ((s = ask_arg(a, "due_after")) != NULL &&
	     ctl_int(s, &q->due_after) < 0) ||
	    ctl_int(ask_arg(a, "limit"), &v) < 0 || v < 0) {
		answer_error(a, r, 400, "bad_request",
		             "due_before, due_after: Unix ms; limit: 0 (all) "
		             "or more");
		return -1;
	}
	*limit = (uint64_t)v;
	return 0;
}

/*
 * GET /ctl/list: list's answer, as its reading of the stream would
 * compute it at the asker's now.
 */
void
ctl_list(struct ask *a, struct answer *r)
{
	struct console *c = a->c;
	struct ctlwire_head h;
	struct cindex_query q;
	struct ctlq cq;
	const char *why;
	uint32_t *slots = NULL, n = 0, matching = 0, want;
	uint32_t windows[CTLWIRE_WINDOWS];
	uint64_t limit = 0, wanted;
	int64_t edges[CTLWIRE_WINDOWS - 1];

	memset(&cq, 0, sizeof(cq));
	cq.started = duration_mono_ms();
	if (ctl_filters(a, r, &q, &limit) < 0 || ctl_begin(a, r, &cq) < 0) {
		ctl_logged(a, r, "list", &cq, 0);
		return;
	}
	if ((why = ctl_lacks(c)) != NULL) {
		ctl_incomplete(a, r, why);
		goto out;
	}
	/* Where metrics_window puts a due time, from now: overdue in the
	 * first, and each bound inclusive. */
	edges[0] = cq.now + 60000 + 1;
	edges[1] = cq.now + 3600000 + 1;
	edges[2] = cq.now + 86400000 + 1;
	want = limit > 0 && limit < CONSOLE_CTL_ROWS_MAX ? (uint32_t)limit
	                                                 : CONSOLE_CTL_ROWS_MAX;
	if ((slots = malloc(((size_t)want + 1) * sizeof(*slots))) == NULL ||
	    cindex_page_windows(&c->ix, &q, want, slots, &n, &matching, edges,
	                        CTLWIRE_WINDOWS - 1, windows) < 0) {
		pthread_mutex_unlock(&c->lock);
		answer_error(a, r, 500, "internal", "out of memory");
		goto out;
	}
	wanted = limit > 0 && limit < matching ? limit : matching;
	if (wanted > n) {
		ctl_incomplete(a, r,
		               "more rows than the console answers "
		               "(50,000): read the stream");
		goto out;
	}
	memset(&h, 0, sizeof(h));
	h.matching = matching;
	h.total = cindex_count(&c->ix);
	h.shown = n;
	for (int k = 0; k < CTLWIRE_WINDOWS; k++)
		h.counts[k] = windows[k];
	r->type = "text/plain; charset=utf-8";
	ctlwire_list_head(&r->body, &h);
	for (uint32_t i = 0; i < n; i++) {
		struct cindex_row row; /* w's cascade id is in it */
		struct waiting w;
		if (ctl_row(c, slots[i], cq.now, &row, &w, &why) < 0) {
			ctl_incomplete(a, r, why);
			n = 0;
			goto out;
		}
		ctlwire_list_row(&r->body, &w);
	}
	pthread_mutex_unlock(&c->lock);
	ctlwire_end(&r->body);
	if (r->body.full) {
		answer_error(a, r, 503, "incomplete",
		             "an answer over 8 MiB: read the stream");
		n = 0;
	}
out:
	free(slots);
	ctl_logged(a, r, "list", &cq, r->status == 200 ? n : 0);
}

/*
 * GET /ctl/count: how many waiting messages id names, and the latest due
 * time among them, as cancel counts them (waiting_count_id): the due
 * times their scheduled records carry, so one a reschedule moved is not
 * answered here.
 */
void
ctl_count(struct ask *a, struct answer *r)
{
	struct console *c = a->c;
	const char *id = ask_arg(a, "id"), *why;
	struct ctlq cq;
	uint32_t total, n, *slots;
	int64_t last_due = 0;

	memset(&cq, 0, sizeof(cq));
	cq.started = duration_mono_ms();
	if (id == NULL || id[0] == '\0' || strlen(id) > 255) {
		answer_error(a, r, 400, "bad_request",
		             "id: an id of 1 to 255 bytes");
		ctl_logged(a, r, "count", &cq, 0);
		return;
	}
	if (ctl_begin(a, r, &cq) < 0) {
		ctl_logged(a, r, "count", &cq, 0);
		return;
	}
	if ((why = ctl_lacks(c)) != NULL) {
		ctl_incomplete(a, r, why);
		ctl_logged(a, r, "count", &cq, 0);
		return;
	}
	total = cindex_named(&c->ix, amqp_cstring_bytes(id), NULL, 0);
	if ((slots = malloc(((size_t)total + 1) * sizeof(*slots))) == NULL) {
		pthread_mutex_unlock(&c->lock);
		answer_error(a, r, 500, "internal", "out of memory");
		ctl_logged(a, r, "count", &cq, 0);
		return;
	}
	n = cindex_named(&c->ix, amqp_cstring_bytes(id), slots, total);
	for (uint32_t i = 0; i < n && i < total; i++) {
		struct cindex_row row;
		cindex_row(&c->ix, slots[i], &row);
		if (row.moved) {
			free(slots);
			ctl_incomplete(
			    a, r,
			    "a reschedule moved one: its recorded due "
			    "time is not held");
			ctl_logged(a, r, "count", &cq, 0);
			return;
		}
		if (row.due > last_due)
			last_due = row.due;
	}
	pthread_mutex_unlock(&c->lock);
	free(slots);
	r->type = "text/plain; charset=utf-8";
	ctlwire_count(&r->body, n, last_due);
	ctlwire_end(&r->body);
	ctl_logged(a, r, "count", &cq, n);
}
