/* SPDX-License-Identifier: Apache-2.0 */
/*
 * act: the actions, as the logged-in user and on their own connection,
 * each the request the commands make (docs/CONTRACT.md 7.11): a control
 * user's cancel, pause and resume written into P.cancels and P.events as
 * cascade-ctl writes them (request.h); anyone else's, and every
 * reschedule (so that a daemon makes the copies an earlier time needs,
 * as for any request published to P), published to P with the user's
 * user-id.  A requeue is cascade-ctl requeue's pass.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "duration.h"
#include "escape.h"
#include "log.h"
#include "request.h"
#include "requeue.h"
#include "when.h"

/* What an action answers once the broker confirmed it. */
static void
act_done(struct ask *a, struct answer *r, const char *kind, amqp_bytes_t id,
         const char *back)
{
	char who[ESCAPE_MAX_FACTOR * 64 + 4];

	escape_bytes(a->user, strlen(a->user), 64, ESCAPE_QUOTED, who,
	             sizeof(who));
	log_info("console_action", " kind=%s user=\"%s\" control=%d", kind, who,
	         a->control);
	if (r->json) {
		answer_json_start(r);
		hbuf_lit(&r->body, "{\"ok\":true,\"kind\":\"");
		hbuf_raw(&r->body, kind, strlen(kind));
		hbuf_lit(&r->body, "\",\"id\":");
		html_json(&r->body, id.bytes, id.len);
		hbuf_lit(&r->body, "}\n");
		return;
	}
	r->status = 303;
	snprintf(r->location, sizeof(r->location), "%s?done=%s", back, kind);
	r->type = "text/plain; charset=utf-8";
	hbuf_raw(&r->body, kind, strlen(kind));
	hbuf_lit(&r->body, "\n");
}

/*
 * The row of the message the path names, as the user may see it: 0 with
 * c->lock held (the row's bytes are the index's, valid until the
 * unlock), or -1 with the answer made and the lock released.
 */
static int
act_lock_row(struct ask *a, struct answer *r, amqp_bytes_t id,
             struct cindex_row *row)
{
	struct console *c = a->c;
	int64_t slot;

	if (id.len == 0 || id.len > 255) {
		answer_error(a, r, 400, "bad_request",
		             "an id is 1 to 255 bytes");
		return -1;
	}
	pthread_mutex_lock(&c->lock);
	if (!c->caught_up) {
		pthread_mutex_unlock(&c->lock);
		answer_error(a, r, 503, "not_ready",
		             "catching up on P.events: try again shortly");
		return -1;
	}
	if ((slot = console_find(c, a, id)) < 0) {
		pthread_mutex_unlock(&c->lock);
		answer_error(a, r, 404, "not_found",
		             "no waiting message you may see has that id");
		return -1;
	}
	cindex_row(&c->ix, (uint32_t)slot, row);
	return 0;
}

/* The message the path names, as the user may see it; its due. */
static int
act_target_of(struct ask *a, struct answer *r, amqp_bytes_t id, int64_t *due,
              int *repeat)
{
	struct cindex_row row;

	if (act_lock_row(a, r, id, &row) < 0)
		return -1;
	*due = row.due;
	*repeat = row.repeat;
	pthread_mutex_unlock(&a->c->lock);
	return 0;
}

/*
 * A pause or resume a control user recorded, applied to the console's own
 * view at once, as its reader applies the record when it reads it back
 * (again, to no effect): the next page and the next request see it.
 */
static void
act_applied(struct ask *a, const struct event *e)
{
	struct console *c = a->c;

	pthread_mutex_lock(&c->lock);
	/* Out of memory leaves it to the reader. */
	(void)requests_pause_read(&c->req, e, amqp_cstring_bytes(a->user), 1,
	                          1);
	atomic_fetch_add(&c->version, 1);
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
}

/* e recorded as a control user records, or published to P. */
static int
act_send(struct ask *a, struct answer *r, const struct event *e, int direct)
{
	int rc;

	pthread_mutex_lock(&a->cs->mu);
	rc = direct ? request_record(&a->cs->cl, e)
	            : request_publish_to_p(&a->cs->cl, e);
	if (rc < 0) {
		answer_error(a, r, 502, "broker", a->cs->cl.err);
		console_check_conn(a->cs);
	}
	pthread_mutex_unlock(&a->cs->mu);
	return rc;
}

/*
 * A pause or resume of name (a target when target): recorded by a control
 * user, and shown by the console at once (act_applied); published to P
 * for anyone else.  0, or -1 with the answer made.
 */
static int
act_pause(struct ask *a, struct answer *r, int resume, amqp_bytes_t name,
          int target)
{
	struct event e;

	request_pause_event(&e, resume, name, target, a->now,
	                    config_events_max_age(&a->c->cfg));
	if (act_send(a, r, &e, a->control) < 0)
		return -1;
	if (a->control)
		act_applied(a, &e);
	return 0;
}

void
act_cancel(struct ask *a, struct answer *r)
{
	amqp_bytes_t id = {a->rest_len, (void *)a->rest};
	const char *park = ask_field(a, "park");
	struct event e;
	int64_t due;
	int repeat;

	if (park != NULL && strcmp(park, "1") != 0 && strcmp(park, "") != 0) {
		answer_error(a, r, 400, "bad_request", "park: 1 or absent");
		return;
	}
	if (act_target_of(a, r, id, &due, &repeat) < 0)
		return;
	request_event(&e, EVENT_CANCEL, id, park != NULL && park[0] == '1', 0,
	              1, due, a->now, config_events_max_age(&a->c->cfg));
	if (act_send(a, r, &e, a->control) < 0)
		return;
	act_done(a, r, "cancel", id, "/waiting");
}

void
act_reschedule(struct ask *a, struct answer *r)
{
	amqp_bytes_t id = {a->rest_len, (void *)a->rest};
	const char *at = ask_field(a, "at"), *delay = ask_field(a, "delay");
	const char *why = NULL;
	char whybuf[256];
	struct event e;
	int64_t due, when, ms;
	int repeat;

	if (at != NULL && at[0] == '\0')
		at = NULL;
	if (delay != NULL && delay[0] == '\0')
		delay = NULL;
	if ((at == NULL) == (delay == NULL)) {
		answer_error(a, r, 400, "bad_request",
		             "give one of at and delay");
		return;
	}
	if (delay != NULL) {
		if (duration_parse(delay, strlen(delay), DURATION_BARE_REJECT,
		                   &ms, &why) < 0 ||
		    ms < 0) {
			snprintf(whybuf, sizeof(whybuf), "delay: %s",
			         why != NULL ? why : "not a duration");
			answer_error(a, r, 400, "bad_request", whybuf);
			return;
		}
		if (ms > a->c->cfg.router_max_delay) {
			answer_error(a, r, 400, "bad_request",
			             "later than [router] max_delay from now");
			return;
		}
		when = a->now + ms; /* both bounded: no overflow */
	} else if (when_parse_absolute(at, &when, whybuf, sizeof(whybuf)) < 0) {
		answer_error(a, r, 400, "bad_request", whybuf);
		return;
	}
	/* when is a time when_parse_absolute took: at most year 9999 */
	if (when > a->now && when - a->now > a->c->cfg.router_max_delay) {
		answer_error(a, r, 400, "bad_request",
		             "later than [router] max_delay from now");
		return;
	}
	if (act_target_of(a, r, id, &due, &repeat) < 0)
		return;
	request_event(&e, EVENT_RESCHEDULE, id, 0, when, 1, due, a->now,
	              config_events_max_age(&a->c->cfg));
	/* Through P for everyone: the daemon that records it also sends
	 * the copy an earlier time needs. */
	if (act_send(a, r, &e, 0) < 0)
		return;
	act_done(a, r, "reschedule", id, "/waiting");
}

/* The names a series' pause or resume goes to: its cascade id and, when
 * it has one, its message-id, as copied from the index under its lock. */
struct series_names {
	unsigned paused; /* REQUESTS_BY_ID, REQUESTS_BY_MESSAGE_ID */
	int others;      /* paused by someone this user cannot resume */
	char id[256], mid[256];
	size_t id_len, mid_len;
};

/* The series the path names, as the user may see it, and how it is
 * paused; -1 with the answer made. */
static int
act_series_of(struct ask *a, struct answer *r, amqp_bytes_t id,
              struct series_names *n)
{
	struct console *c = a->c;
	struct cindex_row row;

	if (act_lock_row(a, r, id, &row) < 0)
		return -1;
	if (!row.repeat) {
		pthread_mutex_unlock(&c->lock);
		answer_error(a, r, 404, "not_found",
		             "that message is not a series' copy");
		return -1;
	}
	n->paused = requests_series_pauses(
	    &c->req, row.id, row.message_id, row.owner,
	    amqp_cstring_bytes(a->user), a->control, a->now, &n->others);
	/* Both at most 255 bytes (events.h bounds every id read). */
	n->id_len = row.id.len < sizeof(n->id) ? row.id.len : 0;
	n->mid_len =
	    row.message_id.len < sizeof(n->mid) ? row.message_id.len : 0;
	if (n->id_len > 0)
		memcpy(n->id, row.id.bytes, n->id_len);
	if (n->mid_len > 0)
		memcpy(n->mid, row.message_id.bytes, n->mid_len);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/*
 * A series' pause or resume.  A pause names the series by its cascade id.
 * A resume lifts every pause the Series page counts, under each name it
 * was made by (the cascade id, or the message-id as cascade-ctl pause
 * and x-cascade-pause may name it).  A resume that would change nothing
 * says so instead: 409 not_paused, or 403 when the pause is one this
 * user may not lift.  A pause is always recorded: one's own pause again
 * renews it.
 */
void
act_series(struct ask *a, struct answer *r, int resume)
{
	amqp_bytes_t id = {a->rest_len, (void *)a->rest};
	struct series_names n;

	if (act_series_of(a, r, id, &n) < 0)
		return;
	if (!resume) {
		/* Paused already or not: a pause of one's own is made, or
		 * renewed from now (CONTRACT.md 7.10). */
		if (act_pause(a, r, 0, id, 0) < 0)
			return;
		act_done(a, r, "pause", id, "/series");
		return;
	}
	if (n.paused == 0) {
		answer_error(a, r, 409, "not_paused",
		             "that series is not paused");
		return;
	}
	if (n.others) {
		/* Only for a user who is not a control user. */
		answer_error(a, r, 403, "forbidden",
		             "paused by a control user or another user: only "
		             "a control user can resume it");
		return;
	}
	for (int i = 0; i < 2; i++) {
		unsigned bit = i == 0 ? REQUESTS_BY_ID : REQUESTS_BY_MESSAGE_ID;
		amqp_bytes_t name = {i == 0 ? n.id_len : n.mid_len,
		                     i == 0 ? n.id : n.mid};
		if (!(n.paused & bit) || name.len == 0)
			continue;
		if (act_pause(a, r, 1, name, 0) < 0)
			return;
	}
	act_done(a, r, "resume", id, "/series");
}

void
act_target(struct ask *a, struct answer *r, int resume)
{
	const char *t = ask_field(a, "target");
	int held;

	if (!a->control) {
		answer_error(a, r, 403, "forbidden",
		             "pausing a target is for control users");
		return;
	}
	if (t == NULL || t[0] == '\0' || strlen(t) > 511) {
		answer_error(a, r, 400, "bad_request",
		             "target: EXCHANGE[/KEY], at most 511 bytes");
		return;
	}
	pthread_mutex_lock(&a->c->lock);
	if (!a->c->caught_up) {
		pthread_mutex_unlock(&a->c->lock);
		answer_error(a, r, 503, "not_ready",
		             "catching up on P.events: try again shortly");
		return;
	}
	held = requests_target_held(&a->c->req, amqp_cstring_bytes(t), a->now);
	pthread_mutex_unlock(&a->c->lock);
	if (resume && !held) {
		answer_error(a, r, 409, "not_paused",
		             "that target is not paused");
		return;
	}
	/* Only a control user comes here: recorded, as cascade-ctl does. */
	if (act_pause(a, r, resume, amqp_cstring_bytes(t), 1) < 0)
		return;
	act_done(a, r, resume ? "resume" : "pause", amqp_cstring_bytes(t),
	         "/waiting");
}

/* A requeue's rows, collected for the answer. */
struct requeue_rows {
	struct hbuf *b;
	int json;
	uint64_t n;
};

static void
act_requeue_row(void *arg, const char *verb, const amqp_message_t *m,
                const struct park_target *t, const char *note)
{
	struct requeue_rows *rr = arg;
	amqp_bytes_t mid = client_message_id(&m->properties);
	struct hbuf *b = rr->b;

	if (rr->n++ >= 1000)
		return;
	if (rr->json) {
		if (rr->n > 1)
			hbuf_lit(b, ",");
		hbuf_lit(b, "{\"verb\":");
		html_json(b, verb, strlen(verb));
		hbuf_lit(b, ",\"message_id\":");
		html_json_or_null(b, mid.len > 0, mid.bytes, mid.len);
		hbuf_lit(b, ",\"exchange\":");
		html_json(b, t->exchange.bytes, t->exchange.len);
		hbuf_lit(b, ",\"routing_key\":");
		html_json(b, t->routing_key.bytes, t->routing_key.len);
		hbuf_lit(b, ",\"reason\":");
		html_json(b, t->reason.bytes, t->reason.len);
		hbuf_lit(b, ",\"note\":");
		html_json_or_null(b, note != NULL, note,
		                  note != NULL ? strlen(note) : 0);
		hbuf_lit(b, "}");
		return;
	}
	hbuf_lit(b, "<tr><td data-label=Result>");
	html_text(b, verb, strlen(verb));
	hbuf_lit(b, "</td><td data-label=Message-id>");
	html_text(b, mid.bytes, mid.len);
	hbuf_lit(b, "</td><td data-label=Target>");
	page_target(b, t->exchange, t->routing_key);
	hbuf_lit(b, "</td><td data-label=Reason>");
	html_text(b, t->reason.bytes, t->reason.len);
	hbuf_lit(b, "</td><td data-label=Note>");
	if (note != NULL)
		html_text(b, note, strlen(note));
	hbuf_lit(b, "</td></tr>");
}

void
act_requeue(struct ask *a, struct answer *r)
{
	const char *mid = ask_field(a, "message_id");
	const char *reason = ask_field(a, "reason");
	const char *all = ask_field(a, "all"), *lim = ask_field(a, "limit");
	struct requeue q;
	struct requeue_rows rr;
	struct client *cl;
	struct hbuf rows;
	uint32_t total;
	uint64_t limit = 1000;
	int rc, given;
	char *end;

	if (!a->control) {
		answer_error(a, r, 403, "forbidden",
		             "requeueing is for control users");
		return;
	}
	given = (mid != NULL && mid[0] != '\0') +
	        (reason != NULL && reason[0] != '\0') +
	        (all != NULL && strcmp(all, "1") == 0);
	if (given != 1) {
		answer_error(a, r, 400, "bad_request",
		             "give one of message_id, reason and all=1");
		return;
	}
	if (lim != NULL && lim[0] != '\0') {
		limit = strtoull(lim, &end, 10);
		if (*end != '\0' || lim[0] == '-' || limit == 0 ||
		    limit > 100000) {
			answer_error(a, r, 400, "bad_request",
			             "limit: 1 to 100000");
			return;
		}
	}
	hbuf_init(&rows, CONSOLE_ANSWER_MAX / 2);
	memset(&rr, 0, sizeof(rr));
	rr.b = &rows;
	rr.json = r->json;
	memset(&q, 0, sizeof(q));
	q.reason = reason != NULL && reason[0] != '\0' ? reason : NULL;
	q.message_id = mid != NULL && mid[0] != '\0' ? mid : NULL;
	q.on_row = act_requeue_row;
	q.arg = &rr;
	pthread_mutex_lock(&a->cs->mu);
	cl = &a->cs->cl;
	rc = client_error_count(cl, &total);
	if (rc == 0)
		rc = client_exchange_exists(cl);
	if (rc == 0)
		rc = requeue_select(cl);
	if (rc == 0) {
		q.todo = total < limit ? total : limit;
		rc = requeue_pass(cl, &q);
		if (rc == 0 && client_give_back(cl, q.last, q.left) < 0)
			rc = -1;
	}
	if (rc < 0) {
		answer_error(a, r, 502, "broker", cl->err);
		console_check_conn(a->cs);
	}
	pthread_mutex_unlock(&a->cs->mu);
	if (rc < 0) {
		hbuf_free(&rows);
		return;
	}
	{
		char who[ESCAPE_MAX_FACTOR * 64 + 4];
		escape_bytes(a->user, strlen(a->user), 64, ESCAPE_QUOTED, who,
		             sizeof(who));
		log_info("console_action",
		         " kind=requeue user=\"%s\" control=1 requeued=%" PRIu64
		         " left=%" PRIu64,
		         who, q.sent, q.left);
	}
	if (r->json) {
		answer_json_start(r);
		hbuf_printf(&r->body,
		            "{\"requeued\":%" PRIu64 ",\"left\":%" PRIu64
		            ",\"rows\":[",
		            q.sent, q.left);
		hbuf_raw(&r->body, rows.p != NULL ? rows.p : "", rows.n);
		hbuf_lit(&r->body, "]}\n");
	} else {
		page_head(a, r, "Requeued", NULL);
		hbuf_printf(&r->body,
		            "<main><h1>Requeue</h1><p id=requeued>Requeued "
		            "%" PRIu64 ", left %" PRIu64 ".</p><table "
		            "id=requeue-rows><thead><tr><th>Result</th>"
		            "<th>Message-id</th><th>Target</th><th>Reason</th>"
		            "<th>Note</th></tr></thead><tbody>",
		            q.sent, q.left);
		hbuf_raw(&r->body, rows.p != NULL ? rows.p : "", rows.n);
		hbuf_lit(&r->body, "</tbody></table><p><a href=\"/parked\">"
		                   "Back to Parked</a></p></main>");
		page_foot(r);
	}
	hbuf_free(&rows);
}
