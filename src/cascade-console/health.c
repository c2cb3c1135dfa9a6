/* SPDX-License-Identifier: Apache-2.0 */
/*
 * health: the console's own state (caught up, records read, sessions,
 * the index's counts and caps) and each daemon's, from the /metrics
 * addresses in [console] metrics ([metrics] listen when empty): waiting
 * mode, connected, held, overdue, and the targets refusing deliveries, as
 * cascade-ctl status shows them.
 *
 * A user who is not a control user sees what is theirs and nothing that
 * counts anyone else's (CONTRACT.md 7.11): whether the console has caught
 * up and its reader's last error, their own waiting messages, and each
 * daemon's mode and connection; not the totals of records, sessions,
 * skipped writers and the index, nor a daemon's held messages, overdue
 * time or refusing targets, which are everyone's.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "duration.h"
#include "httpget.h"
#include "prom.h"

#define HEALTH_DAEMONS 16
#define HEALTH_TARGETS 20

/* The sum (or, max set, the largest) of metric name's samples in text. */
static double
health_sample(const char *text, const char *name, int max)
{
	size_t n = strlen(name);
	double v = 0;
	const char *p = text;

	while ((p = strstr(p, name)) != NULL) {
		const char *eol = strchr(p, '\n'), *sp;
		int at_start = p == text || p[-1] == '\n';
		if (at_start && (p[n] == ' ' || p[n] == '{')) {
			size_t len =
			    eol != NULL ? (size_t)(eol - p) : strlen(p);
			char line[512];
			snprintf(line, sizeof(line), "%.*s",
			         (int)(len < 511 ? len : 511), p);
			if ((sp = strrchr(line, ' ')) != NULL) {
				double x = strtod(sp + 1, NULL);
				v = max ? (x > v ? x : v) : v + x;
			}
		}
		p += n;
	}
	return v;
}

static void
health_daemon(struct ask *a, struct hbuf *b, const char *listen, int json,
              int first)
{
	struct prom_target t[HEALTH_TARGETS];
	char why[256];
	char *text = httpget_metrics(listen, why, sizeof(why));
	const char *mode;
	double held, overdue, connected;
	size_t n;

	if (json) {
		if (!first)
			hbuf_lit(b, ",");
		hbuf_lit(b, "{\"metrics\":");
	} else
		hbuf_lit(b, "<tr><td data-label=Daemon>");
	if (json)
		html_json(b, listen, strlen(listen));
	else
		html_text(b, listen, strlen(listen));
	if (text == NULL) {
		if (json) {
			hbuf_lit(b, ",\"error\":");
			html_json(b, why, strlen(why));
			hbuf_lit(b, "}");
		} else {
			hbuf_printf(b, "</td><td colspan=%d class=error>",
			            a->control ? 5 : 2);
			html_text(b, why, strlen(why));
			hbuf_lit(b, "</td></tr>");
		}
		return;
	}
	mode = prom_wait_mode(text);
	held = health_sample(text, "cascade_held_messages", 0);
	overdue = health_sample(text, "cascade_overdue_seconds", 1);
	connected = health_sample(text, "cascade_connected", 1);
	n = prom_targets_parse(text, t, HEALTH_TARGETS);
	if (json) {
		hbuf_lit(b, ",\"mode\":");
		html_json_or_null(b, mode != NULL, mode,
		                  mode != NULL ? strlen(mode) : 0);
		hbuf_printf(b, ",\"connected\":%s",
		            connected > 0 ? "true" : "false");
		if (!a->control) {
			hbuf_lit(b, "}");
			free(text);
			return;
		}
		hbuf_printf(b,
		            ",\"held\":%.0f,\"overdue_s\":%.3f,"
		            "\"refusing\":[",
		            held, overdue);
	} else if (!a->control) {
		hbuf_printf(b,
		            "</td><td data-label=Mode>%s</td><td "
		            "data-label=Connected>%s</td></tr>",
		            mode != NULL ? mode : "?",
		            connected > 0 ? "yes" : "no");
		free(text);
		return;
	} else {
		hbuf_printf(b,
		            "</td><td data-label=Mode>%s</td><td "
		            "data-label=Connected>%s</td><td data-label=Held>"
		            "%.0f</td><td data-label=Overdue>%.1f s</td><td "
		            "data-label=Refusing>",
		            mode != NULL ? mode : "?",
		            connected > 0 ? "yes" : "no", held, overdue);
	}
	for (size_t i = 0, k = 0; i < n; i++) {
		if (t[i].refusals <= 0 && t[i].backoff <= 0)
			continue;
		if (json) {
			if (k++ > 0)
				hbuf_lit(b, ",");
			hbuf_lit(b, "{\"exchange\":");
			html_json(b, t[i].exchange, strlen(t[i].exchange));
			hbuf_lit(b, ",\"routing_key\":");
			html_json(b, t[i].routing_key,
			          strlen(t[i].routing_key));
			hbuf_printf(b, ",\"refusals\":%.0f,\"backoff_s\":%.1f}",
			            t[i].refusals, t[i].backoff);
		} else {
			html_text(b, t[i].exchange, strlen(t[i].exchange));
			hbuf_lit(b, "/");
			html_text(b, t[i].routing_key,
			          strlen(t[i].routing_key));
			hbuf_printf(b, " (%.0f) ", t[i].refusals);
		}
	}
	if (json)
		hbuf_lit(b, "]}");
	else
		hbuf_lit(b, "</td></tr>");
	free(text);
}

/* The reader's last error, or none, as JSON or in the page. */
static void
health_error(struct ask *a, struct hbuf *b, int json, const char *err,
             int64_t err_ms)
{
	if (err[0] == '\0' && json)
		hbuf_lit(b, "null");
	else if (err[0] == '\0')
		hbuf_lit(b, "none");
	else if (json) {
		hbuf_printf(b, "{\"at_ms\":%" PRId64 ",\"message\":", err_ms);
		html_json(b, err, strlen(err));
		hbuf_lit(b, "}");
	} else {
		html_text(b, err, strlen(err));
		hbuf_printf(b, ", %" PRId64 " s ago", (a->now - err_ms) / 1000);
	}
}

/* The head of a publisher's health: theirs only (see the top). */
static void
health_mine(struct ask *a, struct answer *r, int caught, int64_t live,
            uint32_t mine, const char *err, int64_t err_ms)
{
	struct hbuf *b = &r->body;

	if (r->json) {
		answer_json_start(r);
		hbuf_printf(
		    b,
		    "{\"console\":{\"caught_up\":%s,\"live_age_ms\":%" PRId64
		    ",\"waiting\":%" PRIu32 ",\"reader_error\":",
		    caught ? "true" : "false", a->now - live, mine);
		health_error(a, b, 1, err, err_ms);
		hbuf_lit(b, "},\"daemons\":[");
		return;
	}
	page_head(a, r, "Health", NULL);
	hbuf_printf(b,
	            "<main><h1>Health</h1><h2>This console</h2><dl "
	            "class=record id=console-state><dt>P.events</dt><dd>%s, "
	            "last record %" PRId64
	            " ms ago</dd><dt>Your waiting messages</dt><dd "
	            "id=health-waiting>%" PRIu32
	            "</dd><dt>Reader's last error</dt><dd id=reader-error>",
	            caught ? "caught up" : "catching up", a->now - live, mine);
	health_error(a, b, 0, err, err_ms);
	hbuf_lit(b, "</dd></dl><h2>Daemons</h2><table id=daemons><thead>"
	            "<tr><th>/metrics</th><th>Mode</th><th>Connected</th>"
	            "</tr></thead><tbody>");
}

void
page_health(struct ask *a, struct answer *r)
{
	struct console *c = a->c;
	struct cindex_stats st;
	struct hbuf *b = &r->body;
	char list[CONFIG_STR_MAX], *save = NULL, *tok;
	uint64_t records, untrusted, version, req_refused, series_refused;
	uint64_t known_evicted;
	int64_t live, err_ms;
	char err[sizeof(c->reader_err)];
	int caught, first = 1;
	size_t sessions, known;
	uint32_t mine = 0, shown;

	pthread_mutex_lock(&c->lock);
	st = cindex_stats(&c->ix);
	if (!a->control) {
		struct cindex_query q;
		cindex_query_init(&q);
		q.owner = a->user;
		if (cindex_page(&c->ix, &q, 0, 0, NULL, &shown, &mine) < 0)
			mine = 0;
	}
	records = c->records;
	untrusted = c->untrusted;
	req_refused = c->requests_refused;
	series_refused = c->series_refused;
	memcpy(err, c->reader_err, sizeof(err));
	err_ms = c->reader_err_ms;
	version = atomic_load(&c->version);
	caught = c->caught_up;
	live = c->live_ms;
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_lock(&c->sess_lock);
	sessions = c->sessions.n;
	known = ratelimit_known_count(&c->rl, a->now);
	known_evicted = c->rl.known_evicted;
	pthread_mutex_unlock(&c->sess_lock);
	snprintf(list, sizeof(list), "%s",
	         c->cfg.console_metrics[0] != '\0' ? c->cfg.console_metrics
	                                           : c->cfg.metrics_listen);
	if (!a->control) {
		health_mine(a, r, caught, live, mine, err, err_ms);
	} else if (r->json) {
		answer_json_start(r);
		hbuf_printf(
		    b,
		    "{\"console\":{\"caught_up\":%s,\"records\":%" PRIu64
		    ",\"version\":%" PRIu64 ",\"live_age_ms\":%" PRId64
		    ",\"sessions\":%zu,\"untrusted_skipped\":%" PRIu64
		    ",\"waiting\":%" PRIu64 ",\"ended_held\":%" PRIu64
		    ",\"refused\":%" PRIu64 ",\"arena_bytes\":%" PRIu64
		    ",\"requests_refused\":%" PRIu64
		    ",\"series_refused\":%" PRIu64 ",\"known_clients\":%zu"
		    ",\"known_evicted\":%" PRIu64 ",\"reader_error\":",
		    caught ? "true" : "false", records, version, a->now - live,
		    sessions, untrusted, st.waiting, st.ended, st.refused,
		    st.arena_bytes, req_refused, series_refused, known,
		    known_evicted);
		health_error(a, b, 1, err, err_ms);
		hbuf_lit(b, "},\"daemons\":[");
	} else {
		page_head(a, r, "Health", NULL);
		hbuf_printf(
		    b,
		    "<main><h1>Health</h1><h2>This console</h2><dl "
		    "class=record id=console-state><dt>P.events</dt><dd>%s, "
		    "%" PRIu64 " records read, last %" PRId64
		    " ms ago</dd><dt>Waiting</dt><dd id=health-waiting>%" PRIu64
		    "</dd><dt>Index</dt><dd>%" PRIu64 " arena bytes; %" PRIu64
		    " refused at its caps; %" PRIu64 " ends held; %" PRIu64
		    " series and %" PRIu64
		    " requests refused at theirs</dd><dt>Sessions</dt><dd>%zu"
		    "</dd><dt>Known clients</dt><dd>%zu logins of the last 7 "
		    "days by user and client; %" PRIu64
		    " given up for another user's</dd>"
		    "<dt>Records skipped</dt><dd>%" PRIu64
		    " from writers neither cascade's nor control users"
		    "</dd><dt>Reader's last error</dt><dd id=reader-error>",
		    caught ? "caught up" : "catching up", records,
		    a->now - live, st.waiting, st.arena_bytes, st.refused,
		    st.ended, series_refused, req_refused, sessions, known,
		    known_evicted, untrusted);
		health_error(a, b, 0, err, err_ms);
		hbuf_lit(b,
		         "</dd></dl><h2>Daemons</h2><table id=daemons><thead>"
		         "<tr><th>/metrics</th><th>Mode</th><th>Connected</th>"
		         "<th>Held</th><th>Overdue</th><th>Refusing "
		         "targets</th></tr></thead><tbody>");
	}
	if (list[0] != '\0')
		for (tok = strtok_r(list, ", \t", &save); tok != NULL;
		     tok = strtok_r(NULL, ", \t", &save)) {
			health_daemon(a, b, tok, r->json, first);
			first = 0;
		}
	if (r->json) {
		hbuf_lit(b, "]}\n");
		return;
	}
	hbuf_lit(b, "</tbody></table></main>");
	page_foot(r);
}
