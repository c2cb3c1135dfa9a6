/* SPDX-License-Identifier: Apache-2.0 */
/*
 * page: what every page shares: the frame (head, top bar, foot), a
 * refusal in HTML or JSON, and a waiting message as a JSON row (the
 * fields of cascade-ctl list --json, docs/CONTRACT.md 7.2 and 7.11) or a
 * table row.  Every byte from a record goes through html.h.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "console.h"
#include "form.h"
#include "console_assets.h"
#include "duration.h"
#include "when.h"

void
console_check_conn(struct csess *cs)
{
	char err[sizeof(cs->cl.err)];

	/* The failure's words are the caller's to show: keep them. */
	memcpy(err, cs->cl.err, sizeof(err));
	if (cs->cl.conn == NULL || client_exchange_exists(&cs->cl) < 0)
		atomic_store(&cs->broken, 1);
	memcpy(cs->cl.err, err, sizeof(err));
}

const char *
ask_arg(const struct ask *a, const char *name)
{
	return MHD_lookup_connection_value(a->conn, MHD_GET_ARGUMENT_KIND,
	                                   name);
}

const char *
ask_field(const struct ask *a, const char *name)
{
	const struct form_field *f =
	    a->form != NULL ? form_get(a->form, a->nform, name) : NULL;

	return f != NULL ? f->value : NULL;
}

/* A slot with the keys of the index's order, for sorting a few. */
struct page_key {
	int64_t due, seen;
	uint32_t slot;
};

static int
page_key_cmp(const void *pa, const void *pb)
{
	const struct page_key *a = pa, *b = pb;

	if (a->due != b->due)
		return a->due < b->due ? -1 : 1;
	if (a->seen != b->seen)
		return a->seen < b->seen ? -1 : 1;
	return a->slot < b->slot ? -1 : a->slot > b->slot;
}

int
console_sort_slots(struct console *c, uint32_t *slots, uint32_t n)
{
	struct page_key *k = malloc(((size_t)n + 1) * sizeof(*k));

	if (k == NULL)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		struct cindex_row row;
		cindex_row(&c->ix, slots[i], &row);
		k[i] = (struct page_key){row.due, row.seen, slots[i]};
	}
	qsort(k, n, sizeof(*k), page_key_cmp);
	for (uint32_t i = 0; i < n; i++)
		slots[i] = k[i].slot;
	free(k);
	return 0;
}

/* The slot of the waiting message whose cascade id is id, visible to a;
 * -1 when none (the index locked). */
int64_t
console_find(struct console *c, struct ask *a, amqp_bytes_t id)
{
	struct cindex_row row;
	int64_t slot;

	if (id.len == 0 || id.len > 255 || (slot = cindex_find(&c->ix, id)) < 0)
		return -1;
	cindex_row(&c->ix, (uint32_t)slot, &row);
	return console_visible(a, &row) ? slot : -1;
}

static const struct console_asset *
page_asset(const char *name)
{
	for (size_t i = 0; i < console_nassets; i++)
		if (strcmp(console_assets[i].name, name) == 0)
			return &console_assets[i];
	return NULL;
}

/* /assets/console.<hash>.js for console.js */
static void
page_asset_url(struct hbuf *b, const char *name)
{
	const struct console_asset *as = page_asset(name);
	const char *dot = strrchr(name, '.');

	hbuf_lit(b, "/assets/");
	hbuf_raw(b, name, (size_t)(dot - name));
	hbuf_lit(b, ".");
	if (as != NULL)
		hbuf_raw(b, as->hash, strlen(as->hash));
	hbuf_raw(b, dot, strlen(dot));
}

void
page_head(struct ask *a, struct answer *r, const char *title, const char *live)
{
	struct hbuf *b = &r->body;
	uint64_t version;

	/* Read without the lock: a page holds it while it writes. */
	version = atomic_load(&a->c->version);
	r->type = "text/html; charset=utf-8";
	hbuf_lit(b, "<!doctype html><html lang=en><head><meta charset=utf-8>"
	            "<meta name=viewport "
	            "content=\"width=device-width,initial-scale=1\">"
	            "<title>");
	html_text(b, title, strlen(title));
	hbuf_lit(b, " · cascade</title><link rel=icon href=\"/favicon.svg\">"
	            "<link rel=stylesheet href=\"");
	page_asset_url(b, "console.css");
	hbuf_lit(b, "\"><script defer src=\"");
	page_asset_url(b, "console.js");
	hbuf_lit(b, "\"></script>");
	if (a->s != NULL) {
		hbuf_lit(b, "<meta name=csrf content=\"");
		hbuf_raw(b, a->csrf, strlen(a->csrf));
		hbuf_lit(b, "\">");
	}
	hbuf_printf(b, "</head><body data-version=\"%" PRIu64 "\"", version);
	if (live != NULL) {
		hbuf_lit(b, " data-live=\"");
		html_attr(b, live, strlen(live));
		hbuf_lit(b, "\"");
	}
	hbuf_lit(b, "><header class=top><a class=brand href=\"/waiting\">"
	            "cascade</a>");
	if (a->s != NULL) {
		hbuf_lit(b, "<nav><a href=\"/waiting\">Waiting</a>"
		            "<a href=\"/series\">Series</a>"
		            "<a href=\"/parked\">Parked</a>"
		            "<a href=\"/health\">Health</a></nav>"
		            "<form class=user method=post action=\"/logout\">"
		            "<span class=who id=whoami>");
		html_text(b, a->user, strlen(a->user));
		if (a->control)
			hbuf_lit(b, " <small>(control)</small>");
		hbuf_lit(b, "</span><input type=hidden name=csrf value=\"");
		hbuf_raw(b, a->csrf, strlen(a->csrf));
		hbuf_lit(b, "\"><button type=submit id=logout>Log out</button>"
		            "</form>");
	}
	hbuf_lit(b, "</header>");
	/* After an action, its word from a fixed table: never the query's
	 * own text on the page. */
	{
		static const char *const done[][2] = {
		    {"cancel", "Cancel recorded: the message is dropped when "
		               "it next comes back to a daemon."},
		    {"reschedule", "Reschedule recorded: a daemon moves the "
		                   "message to its new time."},
		    {"pause", "Pause recorded."},
		    {"resume", "Resume recorded."},
		};
		const char *word = ask_arg(a, "done");
		for (size_t i = 0; word != NULL && i < 4; i++)
			if (strcmp(word, done[i][0]) == 0) {
				hbuf_lit(b, "<div id=notice class=notice "
				            "role=status>");
				hbuf_raw(b, done[i][1], strlen(done[i][1]));
				hbuf_lit(b, "</div>");
				return;
			}
	}
	hbuf_lit(b, "<div id=notice class=notice hidden></div>");
}

void
page_foot(struct answer *r)
{
	hbuf_lit(&r->body, "</body></html>\n");
}

void
answer_json_start(struct answer *r)
{
	r->json = 1;
	r->type = "application/json";
}

void
answer_error(struct ask *a, struct answer *r, int status, const char *code,
             const char *message)
{
	hbuf_free(&r->body);
	hbuf_init(&r->body, CONSOLE_ANSWER_MAX);
	r->status = status;
	if (r->json) {
		answer_json_start(r);
		hbuf_lit(&r->body, "{\"error\":");
		html_json(&r->body, code, strlen(code));
		hbuf_lit(&r->body, ",\"message\":");
		html_json(&r->body, message, strlen(message));
		hbuf_lit(&r->body, "}\n");
		return;
	}
	page_head(a, r, "Error", NULL);
	hbuf_lit(&r->body, "<main><h1>");
	hbuf_printf(&r->body, "%d", status);
	hbuf_lit(&r->body, "</h1><p class=error id=error>");
	html_text(&r->body, message, strlen(message));
	hbuf_lit(&r->body, "</p><p><a href=\"/waiting\">Back to what waits</a>"
	                   "</p></main>");
	page_foot(r);
}

int
console_visible(const struct ask *a, const struct cindex_row *row)
{
	size_t n = strlen(a->user);

	if (a->control)
		return 1;
	return row->owner.len == n && n > 0 &&
	       memcmp(row->owner.bytes, a->user, n) == 0;
}

void
console_rowstate(struct console *c, const struct cindex_row *row, int64_t now,
                 struct rowstate *st)
{
	struct cancel_match cm;

	memset(st, 0, sizeof(*st));
	st->due = row->due;
	st->rescheduled = row->moved;
	if (row->repeat)
		st->paused = requests_series_paused(
		    &c->req, row->id, row->message_id, row->owner, now);
	if (requests_match(&c->req, row->message_id, row->id, row->owner,
	                   row->seen, now, &cm)) {
		st->cancel_pending = cm.cancel != NULL;
		if (cm.reschedule != NULL && cm.reschedule->due != row->due) {
			st->due = cm.reschedule->due;
			st->rescheduled = 1;
		}
	}
}

const struct cseries *
console_series(struct console *c, const struct cindex_row *row)
{
	if (!row->repeat)
		return NULL;
	return idmap_get(&c->series, row->id);
}

void
page_target(struct hbuf *b, amqp_bytes_t exchange, amqp_bytes_t key)
{
	if (exchange.len == 0)
		hbuf_lit(b, "amq.default");
	else
		html_text(b, exchange.bytes, exchange.len);
	hbuf_lit(b, "/");
	html_text(b, key.bytes, key.len);
}

static void
page_iso(struct hbuf *b, int64_t ms)
{
	char t[64];

	when_format(ms, t, sizeof(t));
	hbuf_raw(b, t, strlen(t));
}

void
page_time(struct hbuf *b, int64_t ms, int64_t now)
{
	char rel[64];

	hbuf_printf(b, "<time data-ms=\"%" PRId64 "\" datetime=\"", ms);
	page_iso(b, ms);
	hbuf_lit(b, "\">");
	page_iso(b, ms);
	hbuf_lit(b, "</time><small class=rel>");
	when_relative(ms - now, rel, sizeof(rel));
	hbuf_raw(b, rel, strlen(rel));
	hbuf_lit(b, "</small>");
}

/* The name list shows: the message-id, else the cascade id. */
static amqp_bytes_t
page_name(const struct cindex_row *row)
{
	return row->message_id.len > 0 ? row->message_id : row->id;
}

void
page_row_json(struct console *c, struct hbuf *b, uint32_t slot, int64_t now)
{
	const struct cseries *se;
	struct cindex_row row;
	struct rowstate st;
	amqp_bytes_t name;

	cindex_row(&c->ix, slot, &row);
	console_rowstate(c, &row, now, &st);
	name = page_name(&row);
	hbuf_lit(b, "{\"id\":");
	html_json(b, name.bytes, name.len);
	hbuf_lit(b, ",\"message_id\":");
	html_json_or_null(b, row.message_id.len > 0, row.message_id.bytes,
	                  row.message_id.len);
	hbuf_lit(b, ",\"cascade_id\":");
	html_json(b, row.id.bytes, row.id.len);
	hbuf_lit(b, ",\"due\":\"");
	page_iso(b, st.due);
	hbuf_printf(b, "\",\"due_ms\":%" PRId64 ",\"exchange\":", st.due);
	html_json(b, row.exchange.bytes, row.exchange.len);
	hbuf_lit(b, ",\"routing_key\":");
	html_json(b, row.routing_key.bytes, row.routing_key.len);
	hbuf_lit(b, ",\"owner\":");
	html_json_or_null(b, row.owner.len > 0, row.owner.bytes, row.owner.len);
	hbuf_printf(b, ",\"size\":%" PRId64 ",\"first_seen\":", row.size);
	if (row.seen > 0) {
		hbuf_lit(b, "\"");
		page_iso(b, row.seen);
		hbuf_printf(b, "\",\"first_seen_ms\":%" PRId64, row.seen);
	} else {
		hbuf_lit(b, "null,\"first_seen_ms\":null");
	}
	hbuf_printf(b, ",\"cancel_pending\":%s,\"rescheduled\":%s,\"repeat\":",
	            st.cancel_pending ? "true" : "false",
	            st.rescheduled ? "true" : "false");
	if ((se = console_series(c, &row)) == NULL) {
		if (row.repeat)
			hbuf_printf(b,
			            "{\"every_ms\":null,\"cron\":null,\"tz\":"
			            "null,\"occurrence\":null,\"paused\":%s}}",
			            st.paused ? "true" : "false");
		else
			hbuf_lit(b, "null}");
		return;
	}
	if (se->cron_len == 0)
		hbuf_printf(b, "{\"every_ms\":%" PRId64 ",\"cron\":null",
		            se->every);
	else {
		hbuf_lit(b, "{\"every_ms\":null,\"cron\":");
		html_json(b, se->text, se->cron_len);
	}
	hbuf_lit(b, ",\"tz\":");
	html_json_or_null(b, se->tz_len > 0, se->text + se->cron_len,
	                  se->tz_len);
	hbuf_printf(b, ",\"occurrence\":%" PRId64 ",\"paused\":%s}}",
	            se->occurrence, st.paused ? "true" : "false");
}

static void
page_cell(struct hbuf *b, const char *label)
{
	hbuf_lit(b, "<td data-label=\"");
	hbuf_raw(b, label, strlen(label));
	hbuf_lit(b, "\">");
}

/* Columns: a comma-separated list of the keys below, with their labels. */
void
page_row_html(struct console *c, struct hbuf *b, uint32_t slot, int64_t now,
              const char *columns)
{
	const struct cseries *se;
	struct cindex_row row;
	struct rowstate st;
	amqp_bytes_t name;
	const char *p = columns;

	cindex_row(&c->ix, slot, &row);
	console_rowstate(c, &row, now, &st);
	se = console_series(c, &row);
	name = page_name(&row);
	hbuf_lit(b, "<tr data-id=\"");
	html_attr(b, row.id.bytes, row.id.len);
	if (st.cancel_pending && st.paused)
		hbuf_lit(b, "\" class=\"pending paused\">");
	else if (st.cancel_pending)
		hbuf_lit(b, "\" class=pending>");
	else if (st.paused)
		hbuf_lit(b, "\" class=paused>");
	else
		hbuf_lit(b, "\">");
	while (*p != '\0') {
		size_t n = strcspn(p, ",");
#define COL(k) (n == sizeof(k) - 1 && memcmp(p, k, n) == 0)
		if (COL("id")) {
			page_cell(b, "Id");
			hbuf_lit(b, "<a href=\"/waiting/");
			html_url(b, row.id.bytes, row.id.len);
			hbuf_lit(b, "\">");
			html_text(b, name.bytes, name.len);
			hbuf_lit(b, "</a>");
		} else if (COL("message_id")) {
			page_cell(b, "Message-id");
			html_text(b, row.message_id.bytes, row.message_id.len);
		} else if (COL("target")) {
			page_cell(b, "Target");
			page_target(b, row.exchange, row.routing_key);
		} else if (COL("due")) {
			page_cell(b, "Due");
			page_time(b, st.due, now);
		} else if (COL("owner")) {
			page_cell(b, "Owner");
			if (row.owner.len > 0)
				html_text(b, row.owner.bytes, row.owner.len);
			else
				hbuf_lit(b, "—");
		} else if (COL("size")) {
			page_cell(b, "Size");
			hbuf_printf(b, "%" PRId64, row.size);
		} else if (COL("state")) {
			const char *sep = "";
			page_cell(b, "State");
			if (st.cancel_pending) {
				hbuf_lit(b, "cancel pending");
				sep = ", ";
			}
			if (st.rescheduled) {
				hbuf_raw(b, sep, strlen(sep));
				hbuf_lit(b, "rescheduled");
				sep = ", ";
			}
			if (st.paused) {
				hbuf_raw(b, sep, strlen(sep));
				hbuf_lit(b, "paused");
			}
		} else if (COL("schedule")) {
			page_cell(b, "Schedule");
			if (se != NULL && se->cron_len > 0) {
				hbuf_lit(b, "cron \"");
				html_text(b, se->text, se->cron_len);
				hbuf_lit(b, "\"");
			} else if (se != NULL) {
				char d[64];
				duration_format(se->every, d, sizeof(d));
				hbuf_lit(b, "every ");
				hbuf_raw(b, d, strlen(d));
			}
		} else if (COL("zone")) {
			page_cell(b, "Zone");
			if (se != NULL && se->tz_len > 0)
				html_text(b, se->text + se->cron_len,
				          se->tz_len);
			else
				hbuf_lit(b, "UTC");
		} else if (COL("occurrence")) {
			page_cell(b, "Occurrence");
			if (se != NULL)
				hbuf_printf(b, "%" PRId64, se->occurrence);
		} else if (COL("paused")) {
			page_cell(b, "Paused");
			if (st.paused)
				hbuf_lit(b, "paused");
		}
#undef COL
		hbuf_lit(b, "</td>");
		p += n;
		if (*p == ',')
			p++;
	}
	hbuf_lit(b, "</tr>");
}
