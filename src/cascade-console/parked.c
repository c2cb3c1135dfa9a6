/* SPDX-License-Identifier: Apache-2.0 */
/*
 * parked: the Parked page: the last parked records the user may see
 * (from P.events, live), P.error's count, and for a control user the
 * messages in P.error itself, read as cascade-ctl errors reads them
 * (each basic.get given back), with requeue forms.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "park.h"

#define PARKED_READ_MAX 200

static int
parked_visible(const struct ask *a, const struct cparked *p)
{
	size_t n = strlen(a->user);

	return a->control || (p->has_owner && p->owner_len == n && n > 0 &&
	                      memcmp(p->owner, a->user, n) == 0);
}

static void
parked_json(struct hbuf *b, const struct cparked *p)
{
	hbuf_printf(b, "{\"at_ms\":%" PRId64 ",\"cascade_id\":", p->at);
	html_json(b, p->id, p->id_len);
	hbuf_lit(b, ",\"message_id\":");
	html_json_or_null(b, p->has_mid, p->message_id, p->mid_len);
	hbuf_lit(b, ",\"exchange\":");
	html_json(b, p->exchange, p->ex_len);
	hbuf_lit(b, ",\"routing_key\":");
	html_json(b, p->routing_key, p->rk_len);
	hbuf_lit(b, ",\"owner\":");
	html_json_or_null(b, p->has_owner, p->owner, p->owner_len);
	hbuf_lit(b, ",\"reason\":");
	html_json(b, p->reason, p->reason_len);
	hbuf_lit(b, "}");
}

static void
parked_html(struct hbuf *b, const struct cparked *p, int64_t now)
{
	amqp_bytes_t ex = {p->ex_len, (void *)p->exchange};
	amqp_bytes_t rk = {p->rk_len, (void *)p->routing_key};

	hbuf_lit(b, "<tr><td data-label=Parked>");
	page_time(b, p->at, now);
	hbuf_lit(b, "</td><td data-label=Id>");
	if (p->has_mid)
		html_text(b, p->message_id, p->mid_len);
	else
		html_text(b, p->id, p->id_len);
	hbuf_lit(b, "</td><td data-label=Target>");
	page_target(b, ex, rk);
	hbuf_lit(b, "</td><td data-label=Owner>");
	html_text(b, p->owner, p->owner_len);
	hbuf_lit(b, "</td><td data-label=Reason>");
	html_text(b, p->reason, p->reason_len);
	hbuf_lit(b, "</td></tr>");
}

/* P.error's own messages, up to PARKED_READ_MAX, given back after. */
static int
parked_read(struct ask *a, struct hbuf *b, int json, uint32_t *count)
{
	struct client *cl = &a->cs->cl;
	uint64_t tag = 0, held = 0;
	int rc = 0, got;

	if (client_error_count(cl, count) < 0)
		return -1;
	for (uint32_t i = 0; i < PARKED_READ_MAX && i < *count; i++) {
		struct park_target t;
		amqp_message_t m;
		char rk[CLIENT_KEY_MAX];
		amqp_bytes_t mid;
		size_t pv;

		if ((got = client_get(cl, &tag, rk, &m)) <= 0) {
			rc = got;
			break;
		}
		held++;
		park_target(&m.properties, amqp_cstring_bytes(rk), &t);
		mid = client_message_id(&m.properties);
		pv = m.body.len < 256 ? m.body.len : 256;
		if (json) {
			if (held > 1)
				hbuf_lit(b, ",");
			hbuf_lit(b, "{\"message_id\":");
			html_json_or_null(b, mid.len > 0, mid.bytes, mid.len);
			hbuf_lit(b, ",\"exchange\":");
			html_json(b, t.exchange.bytes, t.exchange.len);
			hbuf_lit(b, ",\"routing_key\":");
			html_json(b, t.routing_key.bytes, t.routing_key.len);
			hbuf_lit(b, ",\"reason\":");
			html_json(b, t.reason.bytes, t.reason.len);
			hbuf_lit(b, ",\"body_preview\":");
			html_json(b, m.body.bytes, pv);
			hbuf_lit(b, "}");
		} else {
			hbuf_lit(b, "<tr><td data-label=Message-id>");
			html_text(b, mid.bytes, mid.len);
			hbuf_lit(b, "</td><td data-label=Target>");
			page_target(b, t.exchange, t.routing_key);
			hbuf_lit(b, "</td><td data-label=Reason>");
			html_text(b, t.reason.bytes, t.reason.len);
			hbuf_lit(b, "</td><td data-label=Body><code>");
			html_text(b, m.body.bytes, pv);
			hbuf_lit(b, "</code></td><td data-label=Act>");
			if (mid.len > 0) {
				hbuf_lit(b,
				         "<form method=post "
				         "action=\"/parked/requeue\" "
				         "class=requeue-one><input type=hidden "
				         "name=csrf value=\"");
				hbuf_raw(b, a->csrf, strlen(a->csrf));
				hbuf_lit(b, "\"><input type=hidden "
				            "name=message_id value=\"");
				html_attr(b, mid.bytes, mid.len);
				hbuf_lit(b, "\"><button type=submit>Requeue"
				            "</button></form>");
			}
			hbuf_lit(b, "</td></tr>");
		}
		amqp_destroy_message(&m);
	}
	if (held > 0 && client_give_back(cl, tag, held) < 0)
		rc = -1;
	return rc;
}

void
page_parked(struct ask *a, struct answer *r)
{
	struct console *c = a->c;
	const char *read = ask_arg(a, "read");
	int want_read = read != NULL && strcmp(read, "1") == 0;
	struct hbuf *b = &r->body, snap;
	uint32_t count = 0;
	size_t shown = 0;
	int rc = 0;

	if (want_read && !a->control) {
		answer_error(a, r, 403, "forbidden",
		             "reading P.error is for control users");
		return;
	}
	hbuf_init(&snap, CONSOLE_ANSWER_MAX / 2);
	if (want_read) {
		pthread_mutex_lock(&a->cs->mu);
		rc = parked_read(a, &snap, r->json, &count);
		if (rc < 0) {
			answer_error(a, r, 502, "broker", a->cs->cl.err);
			console_check_conn(a->cs);
		}
		pthread_mutex_unlock(&a->cs->mu);
		if (rc < 0) {
			hbuf_free(&snap);
			return;
		}
	}
	if (r->json)
		answer_json_start(r);
	else
		page_head(a, r, "Parked", NULL);
	if (r->json)
		hbuf_lit(b, "{\"recent\":[");
	else
		hbuf_lit(b,
		         "<main><h1>Parked</h1><p>Messages cascade parked in "
		         "P.error, newest first, as P.events recorded "
		         "them.</p><table id=recent><thead><tr>"
		         "<th>Parked</th><th>Id</th><th>Target</th>"
		         "<th>Owner</th><th>Reason</th></tr></thead>"
		         "<tbody id=rows>");
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->ring_n; i++) {
		size_t k = (c->ring_next + CONSOLE_PARKED_RING - 1 - i) %
		           CONSOLE_PARKED_RING;
		const struct cparked *p = &c->ring[k];
		if (!parked_visible(a, p))
			continue;
		if (r->json) {
			if (shown > 0)
				hbuf_lit(b, ",");
			parked_json(b, p);
		} else {
			parked_html(b, p, a->now);
		}
		shown++;
	}
	pthread_mutex_unlock(&c->lock);
	if (r->json) {
		hbuf_lit(b, "]");
		if (want_read) {
			hbuf_printf(b,
			            ",\"error_queue\":%" PRIu32 ",\"read\":[",
			            count);
			hbuf_raw(b, snap.p != NULL ? snap.p : "", snap.n);
			hbuf_lit(b, "]");
		}
		hbuf_lit(b, "}\n");
		hbuf_free(&snap);
		return;
	}
	hbuf_lit(b, "</tbody></table>");
	if (a->control) {
		if (want_read) {
			hbuf_printf(
			    b,
			    "<h2>In P.error now</h2><p id=error-count>%" PRIu32
			    " messages (the first %d shown).</p><table "
			    "id=error-rows><thead><tr><th>Message-id</th>"
			    "<th>Target</th><th>Reason</th><th>Body</th>"
			    "<th></th></tr></thead><tbody>",
			    count, PARKED_READ_MAX);
			hbuf_raw(b, snap.p != NULL ? snap.p : "", snap.n);
			hbuf_lit(b, "</tbody></table>");
		} else {
			hbuf_lit(b, "<p><a id=read-errors class=button "
			            "href=\"/parked?read=1\">Read P.error</a> "
			            "(each read raises the messages' delivery "
			            "count)</p>");
		}
		hbuf_lit(b, "<h2>Requeue</h2><form method=post id=requeue-form "
		            "data-confirm=\"Requeue these messages?\" "
		            "action=\"/parked/requeue\"><input type=hidden "
		            "name=csrf value=\"");
		hbuf_raw(b, a->csrf, strlen(a->csrf));
		hbuf_lit(b, "\"><label>Reason <input name=reason "
		            "placeholder=\"no_route\"></label><label>or "
		            "message-id <input name=message_id></label>"
		            "<label class=check><input type=checkbox name=all "
		            "value=1> all</label><button type=submit "
		            "id=requeue>Requeue</button></form>");
	}
	hbuf_lit(b, "</main>");
	hbuf_free(&snap);
	page_foot(r);
}
