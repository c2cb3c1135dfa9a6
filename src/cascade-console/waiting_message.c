/* SPDX-License-Identifier: Apache-2.0 */
/*
 * waiting_message: one message's page, under /waiting/ID (its record, its
 * state and history, the action forms, its properties, headers and the
 * start of its body, read again from P.events), in HTML and in JSON on
 * the same path.  It calls into page.c (the frame, the row), fetch.c (the
 * copy) and the library (envelope.h, headers.h); nothing calls into it
 * but the routes (web_routes.c).
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "envelope.h"
#include "headers.h"

#define VALUE_DEPTH 16

static void value_text(struct hbuf *b, const amqp_field_value_t *v, int depth);

static void
table_text(struct hbuf *b, const amqp_table_t *t, int depth)
{
	hbuf_lit(b, "{");
	for (int i = 0; i < t->num_entries && !b->full; i++) {
		if (i > 0)
			hbuf_lit(b, ", ");
		html_text(b, t->entries[i].key.bytes, t->entries[i].key.len);
		hbuf_lit(b, ": ");
		value_text(b, &t->entries[i].value, depth + 1);
	}
	hbuf_lit(b, "}");
}

/* A header's value as text, escaped; nesting shown to VALUE_DEPTH. */
static void
value_text(struct hbuf *b, const amqp_field_value_t *v, int depth)
{
	int64_t i;

	if (depth > VALUE_DEPTH) {
		hbuf_lit(b, "…");
		return;
	}
	/* Every integer kind, as the router reads them (headers.h). */
	if (headers_integer(v, &i) == 1) {
		hbuf_printf(b, "%" PRId64, i);
		return;
	}
	switch (v->kind) {
	case AMQP_FIELD_KIND_UTF8:
	case AMQP_FIELD_KIND_BYTES:
		html_text(b, v->value.bytes.bytes, v->value.bytes.len);
		break;
	case AMQP_FIELD_KIND_BOOLEAN:
		hbuf_printf(b, "%s", v->value.boolean ? "true" : "false");
		break;
	case AMQP_FIELD_KIND_U64:
		hbuf_printf(b, "%" PRIu64, v->value.u64);
		break;
	case AMQP_FIELD_KIND_F32:
		hbuf_printf(b, "%g", (double)v->value.f32);
		break;
	case AMQP_FIELD_KIND_F64:
		hbuf_printf(b, "%g", v->value.f64);
		break;
	case AMQP_FIELD_KIND_TABLE:
		table_text(b, &v->value.table, depth);
		break;
	case AMQP_FIELD_KIND_ARRAY:
		hbuf_lit(b, "[");
		for (int k = 0; k < v->value.array.num_entries && !b->full;
		     k++) {
			if (k > 0)
				hbuf_lit(b, ", ");
			value_text(b, &v->value.array.entries[k], depth + 1);
		}
		hbuf_lit(b, "]");
		break;
	case AMQP_FIELD_KIND_VOID:
		hbuf_lit(b, "void");
		break;
	default:
		hbuf_lit(b, "(a decimal)");
		break;
	}
}

/* The message's properties and headers as a two-column table body, or
 * JSON pairs [name, text]. */
static void
message_props(struct hbuf *b, const amqp_basic_properties_t *p, int json)
{
	struct hbuf v;

	hbuf_init(&v, 65536);
#define PROP(flag, name, field)                                                \
	if (p->_flags & (flag)) {                                              \
		v.n = 0;                                                       \
		html_text(&v, p->field.bytes, p->field.len);                   \
		if (json) {                                                    \
			hbuf_lit(b, ",[\"" name "\",");                        \
			html_json(b, p->field.bytes, p->field.len);            \
			hbuf_lit(b, "]");                                      \
		} else {                                                       \
			hbuf_lit(b, "<tr><th>" name "</th><td>");              \
			hbuf_raw(b, v.p, v.n);                                 \
			hbuf_lit(b, "</td></tr>");                             \
		}                                                              \
	}
	PROP(AMQP_BASIC_CONTENT_TYPE_FLAG, "content-type", content_type)
	PROP(AMQP_BASIC_CONTENT_ENCODING_FLAG, "content-encoding",
	     content_encoding)
	PROP(AMQP_BASIC_CORRELATION_ID_FLAG, "correlation-id", correlation_id)
	PROP(AMQP_BASIC_REPLY_TO_FLAG, "reply-to", reply_to)
	PROP(AMQP_BASIC_MESSAGE_ID_FLAG, "message-id", message_id)
	PROP(AMQP_BASIC_TYPE_FLAG, "type", type)
	PROP(AMQP_BASIC_USER_ID_FLAG, "user-id", user_id)
	PROP(AMQP_BASIC_APP_ID_FLAG, "app-id", app_id)
#undef PROP
	if (p->_flags & AMQP_BASIC_HEADERS_FLAG)
		for (int i = 0; i < p->headers.num_entries && !b->full; i++) {
			const amqp_table_entry_t *e = &p->headers.entries[i];
			v.n = 0;
			v.full = 0;
			value_text(&v, &e->value, 0);
			if (json) {
				hbuf_lit(b, ",[");
				html_json(b, e->key.bytes, e->key.len);
				hbuf_lit(b, ",");
				/* the text, unescaped for JSON: escape the
				 * raw value instead for strings */
				if (e->value.kind == AMQP_FIELD_KIND_UTF8 ||
				    e->value.kind == AMQP_FIELD_KIND_BYTES)
					html_json(b, e->value.value.bytes.bytes,
					          e->value.value.bytes.len);
				else
					html_json(b, v.p, v.n);
				hbuf_lit(b, "]");
			} else {
				hbuf_lit(b, "<tr><th>");
				html_text(b, e->key.bytes, e->key.len);
				hbuf_lit(b, "</th><td>");
				hbuf_raw(b, v.p, v.n);
				hbuf_lit(b, "</td></tr>");
			}
		}
	hbuf_free(&v);
}

/* One request in force on a message, in its history. */
static void
history_request(struct hbuf *h, struct hbuf *j, const struct cancel *k,
                int64_t now)
{
	const char *what = k->kind == EVENT_RESCHEDULE ? "reschedule"
	                   : k->park                   ? "cancel (park)"
	                                               : "cancel";

	hbuf_lit(h, "<li>");
	page_time(h, k->at, now);
	hbuf_lit(h, " ");
	hbuf_raw(h, what, strlen(what));
	hbuf_lit(h, " requested by ");
	if (k->by_len > 0)
		html_text(h, k->by, k->by_len);
	else
		hbuf_lit(h, "a publisher without a user-id");
	if (k->kind == EVENT_RESCHEDULE) {
		hbuf_lit(h, ", to ");
		page_time(h, k->due, now);
	}
	hbuf_lit(h, "; in force until ");
	page_time(h, k->until, now);
	hbuf_lit(h, "</li>");
	hbuf_printf(j, ",{\"event\":\"%s\",\"at_ms\":%" PRId64 ",\"by\":",
	            k->kind == EVENT_RESCHEDULE ? "reschedule" : "cancel",
	            k->at);
	html_json_or_null(j, k->by_len > 0, k->by, k->by_len);
	if (k->kind == EVENT_RESCHEDULE)
		hbuf_printf(j, ",\"due_ms\":%" PRId64, k->due);
	hbuf_printf(j, ",\"until_ms\":%" PRId64 ",\"park\":%s}", k->until,
	            k->park ? "true" : "false");
}

/*
 * What is known of a message's life (the index locked): its scheduled
 * record and the requests in force on it.  Hops are not recorded.
 */
static void
message_history(struct console *c, const struct cindex_row *row, int64_t now,
                int paused, struct hbuf *h, struct hbuf *j)
{
	struct cancel_match cm;

	hbuf_lit(h, "<h2>History</h2><ol id=history><li>");
	if (row->seen > 0)
		page_time(h, row->seen, now);
	hbuf_lit(h, " scheduled");
	if (!row->moved) {
		hbuf_lit(h, ", due ");
		page_time(h, row->due, now);
	}
	hbuf_lit(h, "</li>");
	hbuf_lit(j, "[{\"event\":\"scheduled\",\"at_ms\":");
	if (row->seen > 0)
		hbuf_printf(j, "%" PRId64, row->seen);
	else
		hbuf_lit(j, "null");
	hbuf_lit(j, "}");
	if (requests_match(&c->req, row->message_id, row->id, row->owner,
	                   row->seen, now, &cm)) {
		if (cm.reschedule != NULL)
			history_request(h, j, cm.reschedule, now);
		if (cm.cancel != NULL)
			history_request(h, j, cm.cancel, now);
	}
	if (paused) {
		hbuf_lit(h, "<li>its series is paused</li>");
		hbuf_lit(j, ",{\"event\":\"paused\"}");
	}
	hbuf_lit(h, "</ol>");
	hbuf_lit(j, "]");
}

/* The action forms of a message's page. */
static void
message_forms(struct ask *a, struct hbuf *b, amqp_bytes_t id, int repeat,
              int paused)
{
	hbuf_lit(b, "<section class=actions><h2>Act</h2><form method=post "
	            "id=cancel-form data-confirm=\"Cancel this message?\" "
	            "action=\"/waiting/");
	html_url(b, id.bytes, id.len);
	hbuf_lit(b, "/cancel\"><input type=hidden name=csrf value=\"");
	hbuf_raw(b, a->csrf, strlen(a->csrf));
	hbuf_lit(b, "\"><label class=check><input type=checkbox name=park "
	            "value=1> park it instead</label><button type=submit "
	            "id=cancel class=danger>Cancel</button></form>"
	            "<form method=post id=reschedule-form action=\"/waiting/");
	html_url(b, id.bytes, id.len);
	hbuf_lit(b, "/reschedule\"><input type=hidden name=csrf value=\"");
	hbuf_raw(b, a->csrf, strlen(a->csrf));
	hbuf_lit(b, "\"><label>Delay <input name=delay id=delay "
	            "placeholder=\"90s\"></label><label>or at <input name=at "
	            "id=at placeholder=\"2026-11-27T09:00:00Z\"></label>"
	            "<button type=submit id=reschedule>Reschedule</button>"
	            "</form>");
	if (repeat) {
		hbuf_lit(b,
		         "<form method=post id=series-form action=\"/series/");
		html_url(b, id.bytes, id.len);
		if (paused)
			hbuf_lit(b, "/resume\">");
		else
			hbuf_lit(b, "/pause\">");
		hbuf_lit(b, "<input type=hidden name=csrf value=\"");
		hbuf_raw(b, a->csrf, strlen(a->csrf));
		if (paused)
			hbuf_lit(b, "\"><button type=submit id=resume>Resume "
			            "series</button></form>");
		else
			hbuf_lit(b, "\"><button type=submit id=pause>Pause "
			            "series</button></form>");
	}
	hbuf_lit(b, "</section>");
}

void
page_message(struct ask *a, struct answer *r)
{
	struct console *c = a->c;
	amqp_bytes_t id = {a->rest_len, (void *)a->rest}, copy, body;
	amqp_basic_properties_t props;
	struct cindex_row row;
	struct rowstate st;
	struct hbuf *b = &r->body, rowjson, hist, histjson, mid_html,
	            owner_html;
	amqp_pool_t pool;
	char err[1024], idbuf[256], target[600];
	const char *why = NULL;
	uint64_t offset;
	int64_t slot, seen, size, recorded;
	int fetched, decoded = 0, repeat;

	if (id.len == 0 || id.len > 255) {
		answer_error(a, r, 400, "bad_request",
		             "an id is 1 to 255 bytes");
		return;
	}
	pthread_mutex_lock(&c->lock);
	if ((slot = console_find(c, a, id)) < 0) {
		pthread_mutex_unlock(&c->lock);
		answer_error(a, r, 404, "not_found",
		             "no waiting message you may see has that id");
		return;
	}
	hbuf_init(&rowjson, 1 << 20);
	page_row_json(c, &rowjson, (uint32_t)slot, a->now);
	cindex_row(&c->ix, (uint32_t)slot, &row);
	console_rowstate(c, &row, a->now, &st);
	hbuf_init(&hist, 1 << 16);
	hbuf_init(&histjson, 1 << 16);
	message_history(c, &row, a->now, st.paused, &hist, &histjson);
	offset = row.offset;
	seen = row.seen;
	size = row.size;
	recorded = row.due;
	repeat = row.repeat;
	snprintf(idbuf, sizeof(idbuf), "%.*s", (int)row.id.len,
	         (const char *)row.id.bytes);
	{
		struct hbuf t;
		hbuf_init(&t, sizeof(target) - 1);
		page_target(&t, row.exchange, row.routing_key);
		snprintf(target, sizeof(target), "%s", t.p != NULL ? t.p : "");
		hbuf_free(&t);
	}
	/* the names shown, escaped now while the views are valid: each in
	 * a buffer of its own, large enough for any 255-byte name escaped */
	hbuf_init(&mid_html, 1 << 16);
	hbuf_init(&owner_html, 1 << 16);
	html_text(&mid_html, row.message_id.bytes, row.message_id.len);
	html_text(&owner_html, row.owner.bytes, row.owner.len);
	pthread_mutex_unlock(&c->lock);

	fetched = fetch_copy(c, offset, amqp_cstring_bytes(idbuf), &copy, err,
	                     sizeof(err));
	init_amqp_pool(&pool, 4096);
	if (fetched == 0 && copy.len > 0 &&
	    envelope_decode(copy, &pool, &props, &body, &why) == 0)
		decoded = 1;

	if (r->json) {
		answer_json_start(r);
		hbuf_lit(b, "{\"message\":");
		hbuf_raw(b, rowjson.p, rowjson.n);
		hbuf_printf(
		    b, ",\"offset\":%" PRIu64 ",\"recorded_due_ms\":%" PRId64,
		    offset, recorded);
		hbuf_lit(b, ",\"history\":");
		hbuf_raw(b, histjson.p, histjson.n);
		if (decoded) {
			size_t pv = body.len < CONSOLE_PREVIEW
			                ? body.len
			                : CONSOLE_PREVIEW;
			hbuf_lit(b, ",\"properties\":[null");
			message_props(b, &props, 1);
			hbuf_lit(b, "],\"body_preview\":");
			html_json(b, body.bytes, pv);
			hbuf_printf(b, ",\"body_bytes\":%zu}\n", body.len);
		} else {
			const char *m = fetched < 0 ? err
			                : fetched > 0
			                    ? "the record is no longer in the "
			                      "stream"
			                : why != NULL ? why
			                              : "it has no copy";
			hbuf_lit(b,
			         ",\"properties\":null,\"body_preview\":null,"
			         "\"copy\":");
			html_json(b, m, strlen(m));
			hbuf_lit(b, "}\n");
		}
		goto out;
	}
	page_head(a, r, "Message", NULL);
	{
		hbuf_lit(b, "<main><h1>Message <code id=cid>");
		html_text(b, idbuf, strlen(idbuf));
		hbuf_lit(b, "</code></h1><dl class=record><dt>Message-id</dt>"
		            "<dd id=mid>");
		hbuf_raw(b, mid_html.p, mid_html.n);
		hbuf_lit(b, "</dd><dt>Target</dt><dd id=target>");
		hbuf_raw(b, target, strlen(target));
		hbuf_lit(b, "</dd><dt>Due</dt><dd id=due>");
		page_time(b, st.due, a->now);
		if (st.rescheduled) {
			hbuf_lit(b, " (rescheduled; recorded ");
			page_time(b, recorded, a->now);
			hbuf_lit(b, ")");
		}
		hbuf_lit(b, "</dd><dt>Owner</dt><dd id=owner>");
		hbuf_raw(b, owner_html.p, owner_html.n);
		hbuf_printf(b, "</dd><dt>Size</dt><dd>%" PRId64 " bytes</dd>",
		            size);
		hbuf_lit(b, "<dt>First seen</dt><dd>");
		if (seen > 0)
			page_time(b, seen, a->now);
		hbuf_lit(b, "</dd><dt>State</dt><dd id=state>");
		hbuf_lit(b, "waiting");
		if (st.cancel_pending)
			hbuf_lit(b, ", cancel pending");
		if (st.paused)
			hbuf_lit(b, ", series paused");
		hbuf_printf(b,
		            "</dd><dt>Record</dt><dd>scheduled, P.events "
		            "offset %" PRIu64 "</dd></dl>",
		            offset);
	}
	hbuf_raw(b, hist.p, hist.n);
	hbuf_lit(b, "<p class=note>Where it waits now is not recorded: "
	            "cascade records a message when it is scheduled, "
	            "requested and ended, not at each hop.</p>");
	message_forms(a, b, amqp_cstring_bytes(idbuf), repeat, st.paused);
	if (decoded) {
		size_t pv =
		    body.len < CONSOLE_PREVIEW ? body.len : CONSOLE_PREVIEW;
		hbuf_lit(b, "<h2>Properties and headers</h2><table "
		            "id=headers class=kv><tbody>");
		message_props(b, &props, 0);
		hbuf_printf(b, "</tbody></table><h2>Body <small>(%zu bytes",
		            body.len);
		if (pv < body.len)
			hbuf_printf(b, "; the first %zu", pv);
		hbuf_lit(b, ")</small></h2><pre id=body>");
		html_text(b, body.bytes, pv);
		hbuf_lit(b, "</pre>");
	} else {
		hbuf_lit(b, "<p class=note id=nocopy>Headers and body: ");
		if (fetched < 0)
			html_text(b, err, strlen(err));
		else if (fetched > 0)
			hbuf_lit(b, "the record is no longer in the stream.");
		else if (why != NULL)
			html_text(b, why, strlen(why));
		else
			hbuf_lit(b, "it has no copy (larger than [events] "
			            "copy_max_size, or a repeat, or its copy "
			            "record is not in the stream).");
		hbuf_lit(b, "</p>");
	}
	hbuf_lit(b, "</main>");
	page_foot(r);
out:
	empty_amqp_pool(&pool);
	free(copy.bytes);
	hbuf_free(&rowjson);
	hbuf_free(&mid_html);
	hbuf_free(&owner_html);
	hbuf_free(&hist);
	hbuf_free(&histjson);
}
