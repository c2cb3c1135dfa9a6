/* SPDX-License-Identifier: Apache-2.0 */
/*
 * series: the repeats, one row per series (its live copy), as
 * cascade-ctl list --series shows them, with pause and resume.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"

#define SERIES_COLUMNS "id,schedule,zone,due,occurrence,paused,target"

struct series_walk {
	struct console *c;
	struct ask *a;
	uint32_t *slots;
	uint32_t n, max;
};

static int
series_one(amqp_bytes_t key, void *value, void *ctx)
{
	struct series_walk *w = ctx;
	int64_t slot = console_find(w->c, w->a, key);

	(void)value;
	if (slot < 0 || w->n >= w->max)
		return 0;
	w->slots[w->n++] = (uint32_t)slot;
	return 0;
}

void
page_series(struct ask *a, struct answer *r)
{
	struct console *c = a->c;
	struct series_walk w;
	struct hbuf *b = &r->body;
	uint32_t shown;

	memset(&w, 0, sizeof(w));
	w.c = c;
	w.a = a;
	pthread_mutex_lock(&c->lock);
	if (!c->caught_up) {
		pthread_mutex_unlock(&c->lock);
		answer_error(a, r, 503, "not_ready",
		             "catching up on P.events: try again shortly");
		return;
	}
	/* Every series the user may see, sorted, then the soonest
	 * CONSOLE_ROWS_MAX shown: at most CONSOLE_SERIES_MAX of them. */
	w.max = (uint32_t)c->series.n;
	w.slots = malloc(((size_t)w.max + 1) * sizeof(*w.slots));
	if (w.slots != NULL)
		idmap_each(&c->series, series_one, &w);
	if (w.slots == NULL || console_sort_slots(c, w.slots, w.n) < 0) {
		pthread_mutex_unlock(&c->lock);
		free(w.slots);
		answer_error(a, r, 500, "internal", "out of memory");
		return;
	}
	shown = w.n < CONSOLE_ROWS_MAX ? w.n : CONSOLE_ROWS_MAX;
	if (r->json) {
		answer_json_start(r);
		hbuf_printf(b,
		            "{\"version\":%" PRIu64 ",\"waiting\":%" PRIu32
		            ",\"matched\":%" PRIu32 ",\"rows\":[",
		            (uint64_t)atomic_load(&c->version), w.n, w.n);
		for (uint32_t i = 0; i < shown; i++) {
			if (i > 0)
				hbuf_lit(b, ",");
			page_row_json(c, b, w.slots[i], a->now);
		}
		hbuf_lit(b, "]}\n");
		pthread_mutex_unlock(&c->lock);
		free(w.slots);
		return;
	}
	page_head(a, r, "Series", "series");
	hbuf_printf(
	    b,
	    "<main><h1>Series</h1><p class=summary><b id=waiting>%" PRIu32
	    "</b> series waiting that you may see (<span "
	    "id=matched>%" PRIu32 "</span> shown).</p>"
	    "<table id=rows-table data-columns=\"" SERIES_COLUMNS
	    "\"><thead><tr><th>Id</th><th>Schedule</th><th>Zone</th>"
	    "<th>Next</th><th>Occurrence</th><th>Paused</th>"
	    "<th>Target</th></tr></thead><tbody id=rows>",
	    w.n, shown);
	for (uint32_t i = 0; i < shown; i++)
		page_row_html(c, b, w.slots[i], a->now, SERIES_COLUMNS);
	hbuf_lit(b, "</tbody></table><p class=note>Open a series to pause or "
	            "resume it.</p>");
	if (a->control) {
		hbuf_lit(b, "<h2>Pause a target</h2><form method=post "
		            "id=target-pause action=\"/targets/pause\">"
		            "<input type=hidden name=csrf value=\"");
		hbuf_raw(b, a->csrf, strlen(a->csrf));
		hbuf_lit(b,
		         "\"><label>Target <input name=target "
		         "placeholder=\"exchange/key\"></label><button "
		         "type=submit>Pause</button></form><form method=post "
		         "id=target-resume action=\"/targets/resume\">"
		         "<input type=hidden name=csrf value=\"");
		hbuf_raw(b, a->csrf, strlen(a->csrf));
		hbuf_lit(b, "\"><label>Target <input name=target "
		            "placeholder=\"exchange/key\"></label><button "
		            "type=submit>Resume</button></form>");
	}
	hbuf_lit(b, "</main>");
	pthread_mutex_unlock(&c->lock);
	free(w.slots);
	page_foot(r);
}
