/* SPDX-License-Identifier: Apache-2.0 */
/*
 * waiting: the Waiting page (totals by target, a histogram of due times,
 * a searchable table in due order), in HTML and in JSON on the same
 * path.  One message's page is waiting_message.c's.  It calls into page.c
 * (the frame, the rows, the order of a search's few) and the index
 * (cindex.h); nothing calls into it but the routes (web_routes.c).
 */
#include "amqp_compat.h"
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "when.h"

#define WAITING_COLUMNS "id,target,due,owner,size,state"
#define WAITING_TARGETS 20

/* Query arguments, checked. */
struct wq {
	struct cindex_query q;
	const char *text; /* q= */
	int prefix;
	uint32_t offset, limit;
	char why[256];
};

static int
wq_uint(const char *s, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int
wq_parse(struct ask *a, struct wq *w)
{
	const char *s;

	memset(w, 0, sizeof(*w));
	cindex_query_init(&w->q);
	w->limit = CONSOLE_ROWS_DEFAULT;
	if ((s = ask_arg(a, "q")) != NULL && s[0] != '\0') {
		if (strlen(s) > 255) {
			snprintf(w->why, sizeof(w->why), "q: over 255 bytes");
			return -1;
		}
		w->text = s;
	}
	w->prefix = (s = ask_arg(a, "prefix")) != NULL && strcmp(s, "1") == 0;
	if (w->text != NULL && w->prefix)
		w->q.prefix = w->text;
	if ((s = ask_arg(a, "target")) != NULL && s[0] != '\0')
		w->q.target = s;
	if ((s = ask_arg(a, "owner")) != NULL && s[0] != '\0' && a->control)
		w->q.owner = s;
	if (!a->control)
		w->q.owner = a->user;
	if ((s = ask_arg(a, "after")) != NULL && s[0] != '\0' &&
	    when_parse(s, a->now, &w->q.due_after, w->why, sizeof(w->why)) < 0)
		return -1;
	if ((s = ask_arg(a, "before")) != NULL && s[0] != '\0' &&
	    when_parse(s, a->now, &w->q.due_before, w->why, sizeof(w->why)) < 0)
		return -1;
	if ((s = ask_arg(a, "offset")) != NULL &&
	    wq_uint(s, UINT32_MAX, &w->offset) < 0) {
		snprintf(w->why, sizeof(w->why), "offset: a whole number");
		return -1;
	}
	if ((s = ask_arg(a, "limit")) != NULL &&
	    (wq_uint(s, CONSOLE_ROWS_MAX, &w->limit) < 0 || w->limit == 0)) {
		snprintf(w->why, sizeof(w->why), "limit: 1 to %d",
		         CONSOLE_ROWS_MAX);
		return -1;
	}
	return 0;
}

/* Does the row's target match t, EXCHANGE[/KEY], as list --target
 * reads it (the default exchange is amq.default)? */
static int
wq_target(const char *t, const struct cindex_row *row)
{
	const char *slash = strchr(t, '/');
	size_t el = slash != NULL ? (size_t)(slash - t) : strlen(t);
	amqp_bytes_t ex = row->exchange;

	if (ex.len == 0) {
		if (!(el == 11 && memcmp(t, "amq.default", 11) == 0) && el != 0)
			return 0;
	} else if (ex.len != el || memcmp(ex.bytes, t, el) != 0) {
		return 0;
	}
	if (slash == NULL)
		return 1;
	return row->routing_key.len == strlen(slash + 1) &&
	       memcmp(row->routing_key.bytes, slash + 1,
	              row->routing_key.len) == 0;
}

/* Which windows of h due falls in at now (as cindex_histogram counts:
 * the hour's minutes, the day's hours and the week's days overlap). */
static void
waiting_bucket(struct cindex_histogram *h, int64_t due, int64_t now)
{
	int64_t d = due < now ? -1 : due - now;

	if (d < 0) {
		h->late++;
		return;
	}
	if (d < 3600000)
		h->hour[d / 60000]++;
	if (d < 86400000)
		h->day[d / 3600000]++;
	if (d < 7 * 86400000LL)
		h->week[d / 86400000]++;
	else
		h->later++;
}

/*
 * The rows of an exact search: every message the text names (a cascade
 * id or a message-id, which any number may share) that the user may see
 * and that passes the filters, in due order, into *out (malloc'd; the
 * caller frees it).  Their histogram goes into h.  How many, or -1 out of
 * memory.
 */
static int64_t
waiting_named(struct console *c, struct ask *a, const struct wq *w,
              uint32_t **out, struct cindex_histogram *h)
{
	amqp_bytes_t text = amqp_cstring_bytes(w->text);
	uint32_t total = cindex_named(&c->ix, text, NULL, 0), n, k = 0;
	uint32_t *slots;

	memset(h, 0, sizeof(*h));
	*out = NULL;
	if ((slots = malloc(((size_t)total + 1) * sizeof(*slots))) == NULL)
		return -1;
	n = cindex_named(&c->ix, text, slots, total);
	for (uint32_t i = 0; i < n && i < total; i++) {
		struct cindex_row row;

		cindex_row(&c->ix, slots[i], &row);
		if (!console_visible(a, &row) || row.due < w->q.due_after ||
		    row.due >= w->q.due_before)
			continue;
		if (w->q.owner != NULL &&
		    (row.owner.len != strlen(w->q.owner) ||
		     memcmp(row.owner.bytes, w->q.owner, row.owner.len) != 0))
			continue;
		if (w->q.target != NULL && !wq_target(w->q.target, &row))
			continue;
		slots[k++] = slots[i];
		waiting_bucket(h, row.due, a->now);
	}
	if (console_sort_slots(c, slots, k) < 0) {
		free(slots);
		return -1;
	}
	*out = slots;
	return k;
}

/* A target's count, from the index's table of names. */
struct tcount {
	uint32_t target, n;
};

static int
tcount_cmp(const void *pa, const void *pb)
{
	const struct tcount *a = pa, *b = pb;

	return a->n < b->n ? 1 : a->n > b->n ? -1 : 0;
}

/* The targets of what the user may see, most messages first: for a
 * control user the index's own counts, else a walk of the user's. */
static size_t
waiting_targets(struct console *c, struct ask *a, struct tcount *out,
                size_t max, uint32_t *seen)
{
	const struct cindex_names *t = &c->ix.targets;
	size_t n = 0;

	*seen = 0;
	if (a->control) {
		for (uint32_t i = 0; i < t->n; i++) {
			if (t->v[i].count == 0)
				continue;
			if (n < max) {
				out[n].target = i;
				out[n++].n = t->v[i].count;
			} else {
				qsort(out, n, sizeof(*out), tcount_cmp);
				if (out[n - 1].n < t->v[i].count) {
					out[n - 1].target = i;
					out[n - 1].n = t->v[i].count;
				}
			}
			*seen += t->v[i].count;
		}
	} else {
		struct cindex_query q;
		uint32_t *slots, got = 0, total = 0;
		uint32_t cap = cindex_count(&c->ix) + 1;

		cindex_query_init(&q);
		q.owner = a->user;
		if ((slots = malloc((size_t)cap * sizeof(*slots))) == NULL)
			return 0;
		if (cindex_page(&c->ix, &q, 0, cap, slots, &got, &total) < 0)
			got = 0;
		*seen = total;
		for (uint32_t i = 0; i < got; i++) {
			const struct cindex_entry *en =
			    &c->ix.slab[slots[i] / CINDEX_SLAB]
			               [slots[i] % CINDEX_SLAB];
			size_t k = 0;
			while (k < n && out[k].target != en->target)
				k++;
			if (k == n) {
				if (n == max)
					continue;
				out[n].target = en->target;
				out[n++].n = 0;
			}
			out[k].n++;
		}
		free(slots);
	}
	qsort(out, n, sizeof(*out), tcount_cmp);
	return n;
}

/* A target table entry's exchange and key. */
static void
waiting_target_name(struct console *c, uint32_t i, amqp_bytes_t *ex,
                    amqp_bytes_t *key)
{
	const struct cindex_name *nm = &c->ix.targets.v[i];
	size_t el = nm->len > 0 ? nm->s[0] : 0;

	if (nm->len == 0 || el + 1 > nm->len) {
		*ex = *key = amqp_empty_bytes;
		return;
	}
	ex->bytes = nm->s + 1;
	ex->len = el;
	key->bytes = nm->s + 1 + el;
	key->len = nm->len - 1 - el;
}

static void
waiting_bars(struct hbuf *b, const char *title, const uint32_t *v, int n,
             const char *unit)
{
	uint32_t max = 1;
	int w = 8;

	for (int i = 0; i < n; i++)
		if (v[i] > max)
			max = v[i];
	hbuf_lit(b, "<figure class=histf><figcaption>");
	hbuf_raw(b, title, strlen(title));
	hbuf_printf(b,
	            "</figcaption><svg class=hist viewBox=\"0 0 %d 50\" "
	            "preserveAspectRatio=\"none\" role=img>",
	            n * w);
	for (int i = 0; i < n; i++) {
		int h = v[i] == 0 ? 0 : 1 + (int)((uint64_t)v[i] * 48 / max);
		hbuf_printf(
		    b,
		    "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\">"
		    "<title>%s %d: %" PRIu32 "</title></rect>",
		    i * w, 50 - h, w - 1, h, unit, i, v[i]);
	}
	hbuf_lit(b, "</svg></figure>");
}

static void
waiting_input(struct hbuf *b, const char *label, const char *name,
              const char *value, const char *placeholder)
{
	hbuf_lit(b, "<label>");
	hbuf_raw(b, label, strlen(label));
	hbuf_lit(b, " <input name=");
	hbuf_raw(b, name, strlen(name));
	hbuf_lit(b, " id=f-");
	hbuf_raw(b, name, strlen(name));
	hbuf_lit(b, " placeholder=\"");
	hbuf_raw(b, placeholder, strlen(placeholder));
	hbuf_lit(b, "\" value=\"");
	if (value != NULL)
		html_attr(b, value, strlen(value));
	hbuf_lit(b, "\"></label>");
}

/* A link to the same search at another offset. */
static void
waiting_page_link(struct hbuf *b, struct ask *a, uint32_t offset,
                  const char *text, const char *id)
{
	static const char *const keep[] = {"q",     "prefix", "target", "owner",
	                                   "after", "before", "limit"};

	hbuf_lit(b, "<a id=");
	hbuf_raw(b, id, strlen(id));
	hbuf_printf(b, " href=\"/waiting?offset=%" PRIu32, offset);
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		const char *v = ask_arg(a, keep[i]);
		if (v == NULL || v[0] == '\0')
			continue;
		hbuf_lit(b, "&amp;");
		hbuf_raw(b, keep[i], strlen(keep[i]));
		hbuf_lit(b, "=");
		html_url(b, v, strlen(v));
	}
	hbuf_lit(b, "\">");
	hbuf_raw(b, text, strlen(text));
	hbuf_lit(b, "</a> ");
}

void
page_waiting(struct ask *a, struct answer *r)
{
	struct console *c = a->c;
	struct cindex_histogram h;
	struct tcount tc[WAITING_TARGETS];
	uint32_t *slots, n = 0, matched = 0, seen = 0;
	uint64_t minute, hour = 0, day = 0, later;
	size_t nt;
	struct wq w;
	struct hbuf *b = &r->body;

	if (wq_parse(a, &w) < 0) {
		answer_error(a, r, 400, "bad_request", w.why);
		return;
	}
	if ((slots = malloc(CONSOLE_ROWS_MAX * sizeof(*slots))) == NULL) {
		answer_error(a, r, 500, "internal", "out of memory");
		return;
	}
	pthread_mutex_lock(&c->lock);
	if (!c->caught_up) {
		pthread_mutex_unlock(&c->lock);
		free(slots);
		answer_error(a, r, 503, "not_ready",
		             "catching up on P.events: try again shortly");
		return;
	}
	if (w.text != NULL && !w.prefix) {
		uint32_t *named;
		int64_t k = waiting_named(c, a, &w, &named, &h);

		if (k < 0) {
			pthread_mutex_unlock(&c->lock);
			free(slots);
			answer_error(a, r, 500, "internal", "out of memory");
			return;
		}
		matched = (uint32_t)k;
		n = w.offset < matched ? matched - w.offset : 0;
		if (n > w.limit)
			n = w.limit;
		if (n > 0)
			memcpy(slots, named + w.offset, n * sizeof(*slots));
		free(named);
	} else {
		if (cindex_page(&c->ix, &w.q, w.offset, w.limit, slots, &n,
		                &matched) < 0) {
			pthread_mutex_unlock(&c->lock);
			free(slots);
			answer_error(a, r, 500, "internal", "out of memory");
			return;
		}
		cindex_histogram(&c->ix, &w.q, a->now, &h);
	}
	nt = waiting_targets(c, a, tc, WAITING_TARGETS, &seen);
	minute = h.late + h.hour[0];
	for (int i = 1; i < 60; i++)
		hour += h.hour[i];
	for (int i = 1; i < 24; i++)
		day += h.day[i];
	later = h.later;
	for (int i = 1; i < 7; i++)
		later += h.week[i];

	if (r->json) {
		answer_json_start(r);
		hbuf_printf(b,
		            "{\"version\":%" PRIu64 ",\"caught_up\":true,"
		            "\"waiting\":%" PRIu32 ",\"matched\":%" PRIu32
		            ",\"offset\":%" PRIu32 ",\"rows\":[",
		            (uint64_t)atomic_load(&c->version), seen, matched,
		            w.offset);
		for (uint32_t i = 0; i < n; i++) {
			if (i > 0)
				hbuf_lit(b, ",");
			page_row_json(c, b, slots[i], a->now);
		}
		hbuf_printf(b,
		            "],\"counts\":{\"minute\":%" PRIu64
		            ",\"hour\":%" PRIu64 ",\"day\":%" PRIu64
		            ",\"later\":%" PRIu64
		            "},\"histogram\":{\"late\":%" PRIu32 ",\"hour\":[",
		            minute, hour, day, later, h.late);
		for (int i = 0; i < 60; i++)
			hbuf_printf(b, "%s%" PRIu32, i ? "," : "", h.hour[i]);
		hbuf_lit(b, "],\"day\":[");
		for (int i = 0; i < 24; i++)
			hbuf_printf(b, "%s%" PRIu32, i ? "," : "", h.day[i]);
		hbuf_lit(b, "],\"week\":[");
		for (int i = 0; i < 7; i++)
			hbuf_printf(b, "%s%" PRIu32, i ? "," : "", h.week[i]);
		hbuf_printf(b, "],\"later\":%" PRIu32 "},\"targets\":[",
		            h.later);
		for (size_t i = 0; i < nt; i++) {
			amqp_bytes_t ex, key;
			waiting_target_name(c, tc[i].target, &ex, &key);
			if (i > 0)
				hbuf_lit(b, ",");
			hbuf_lit(b, "{\"exchange\":");
			html_json(b, ex.bytes, ex.len);
			hbuf_lit(b, ",\"routing_key\":");
			html_json(b, key.bytes, key.len);
			hbuf_printf(b, ",\"waiting\":%" PRIu32 "}", tc[i].n);
		}
		hbuf_lit(b, "]}\n");
		pthread_mutex_unlock(&c->lock);
		free(slots);
		return;
	}

	page_head(a, r, "Waiting", "waiting");
	hbuf_printf(
	    b,
	    "<main><h1>Waiting</h1><p class=summary><b id=waiting>%" PRIu32
	    "</b> waiting that you may see; <b id=matched>%" PRIu32
	    "</b> match.</p><section class=overview><div "
	    "class=targets><h2>By target</h2><table "
	    "id=targets><thead><tr><th>Target</th><th>Waiting</th>"
	    "</tr></thead><tbody>",
	    seen, matched);
	for (size_t i = 0; i < nt; i++) {
		amqp_bytes_t ex, key;
		waiting_target_name(c, tc[i].target, &ex, &key);
		hbuf_lit(b, "<tr><td data-label=Target>");
		page_target(b, ex, key);
		hbuf_printf(b,
		            "</td><td data-label=Waiting>%" PRIu32 "</td></tr>",
		            tc[i].n);
	}
	hbuf_printf(b,
	            "</tbody></table></div><div class=hists><h2>By due time"
	            "</h2><p>late %" PRIu32 " · &lt;1m %" PRIu64
	            " · 1m–1h %" PRIu64 " · 1h–1d %" PRIu64 " · &gt;1d %" PRIu64
	            "</p>",
	            h.late, minute, hour, day, later);
	waiting_bars(b, "Next hour, by minute", h.hour, 60, "minute");
	waiting_bars(b, "Next day, by hour", h.day, 24, "hour");
	waiting_bars(b, "Next week, by day", h.week, 7, "day");
	hbuf_lit(b, "</div></section><form class=search method=get "
	            "action=\"/waiting\" id=search><div class=fields>");
	waiting_input(b, "Id or message-id", "q", ask_arg(a, "q"), "order-42");
	hbuf_lit(b, "<label class=check><input type=checkbox name=prefix "
	            "value=1");
	if (w.prefix)
		hbuf_lit(b, " checked");
	hbuf_lit(b, "> starts with</label>");
	waiting_input(b, "Target", "target", ask_arg(a, "target"),
	              "exchange/key");
	if (a->control)
		waiting_input(b, "Owner", "owner", ask_arg(a, "owner"), "user");
	waiting_input(b, "Due after", "after", ask_arg(a, "after"),
	              "now or 2026-11-27T09:00Z");
	waiting_input(b, "Due before", "before", ask_arg(a, "before"), "1h");
	hbuf_lit(b, "<button type=submit id=find>Search</button></div></form>"
	            "<table id=rows-table data-columns=\"" WAITING_COLUMNS
	            "\"><thead><tr><th>Id</th><th>Target</th><th>Due</th>"
	            "<th>Owner</th><th>Size</th><th>State</th></tr></thead>"
	            "<tbody id=rows>");
	for (uint32_t i = 0; i < n; i++)
		page_row_html(c, b, slots[i], a->now, WAITING_COLUMNS);
	hbuf_lit(b, "</tbody></table><p class=pages>");
	if (w.offset > 0)
		waiting_page_link(b, a,
		                  w.offset > w.limit ? w.offset - w.limit : 0,
		                  "← earlier", "prev");
	hbuf_printf(b, "rows %" PRIu32 "–%" PRIu32 " of %" PRIu32 " ",
	            n > 0 ? w.offset + 1 : 0, w.offset + n, matched);
	if (w.offset + n < matched)
		waiting_page_link(b, a, w.offset + n, "later →", "next");
	hbuf_lit(b, "</p></main>");
	pthread_mutex_unlock(&c->lock);
	free(slots);
	page_foot(r);
}
