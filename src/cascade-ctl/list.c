/* SPDX-License-Identifier: Apache-2.0 */
/*
 * list: every message waiting, from the stream P.events: id, due time,
 * target, size, first seen; soonest first, filtered by target and due
 * time.  With --series, the repeats only, one row per series (its one
 * live copy): schedule, zone, next due time and occurrence, paused.  The
 * fold, filter and order are the library's (waiting.h).  A running
 * cascade-console's index answers the same in place of the stream, when
 * one answers (console.c).
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "json.h"
#include "metrics.h"
#include "when.h"

/* list's options. */
static struct {
	int json;
	uint64_t limit;               /* rows printed; 0: all */
	struct waiting_filter filter; /* as waiting_filter_init leaves it */
} opts = {0, 0, {NULL, INT64_MAX, INT64_MIN, 0}};

const struct ctl_option list_options[] = {
    {"json", 'j', 0},      {"limit", 'n', 1},   {"target", 0, 1},
    {"due-before", 0, 1},  {"due-after", 0, 1}, {"series", 0, 0},
    {"from-stream", 0, 0}, {NULL, 0, 0},
};

int
list_option(struct ctl *c, const char *name, const char *arg)
{
	char why[128];
	int before = strcmp(name, "due-before") == 0;

	if (strcmp(name, "json") == 0) {
		opts.json = 1;
	} else if (strcmp(name, "from-stream") == 0) {
		c->from_stream = 1;
	} else if (strcmp(name, "series") == 0) {
		opts.filter.series = 1;
	} else if (strcmp(name, "limit") == 0) {
		return ctl_parse_limit(arg, &opts.limit);
	} else if (strcmp(name, "target") == 0) {
		opts.filter.target = arg;
	} else if (when_parse(arg, c->now,
	                      before ? &opts.filter.due_before
	                             : &opts.filter.due_after,
	                      why, sizeof(why)) < 0) {
		fprintf(stderr,
		        PROG
		        ": --%s wants a time: 2026-11-23T09:00:00Z, Unix "
		        "ms, or a duration from now such as 10m: %s (%s)\n",
		        name, arg, why);
		return -1;
	}
	return 0;
}

static const char *const window_names[METRICS_NWINDOWS] = {"minute", "hour",
                                                           "day", "later"};

static void
list_json(const struct waiting_rows *r, size_t shown,
          const uint64_t counts[METRICS_NWINDOWS])
{
	printf("{\"waiting\":%zu,\"shown\":%zu,\"messages\":[", r->n, shown);
	for (size_t i = 0; i < shown; i++) {
		const struct waiting *w = r->w[i];
		amqp_bytes_t name = waiting_name(w);
		printf("%s{\"id\":", i ? "," : "");
		json_write(stdout, name.bytes, name.len);
		printf(",\"message_id\":");
		json_write_or_null(stdout, w->message_id.len > 0,
		                   w->message_id.bytes, w->message_id.len);
		printf(",\"cascade_id\":");
		json_write(stdout, w->id.bytes, w->id.len);
		format_json_time("due", 1, w->due);
		printf(",\"exchange\":");
		json_write(stdout, w->exchange.bytes, w->exchange.len);
		printf(",\"routing_key\":");
		json_write(stdout, w->routing_key.bytes, w->routing_key.len);
		printf(",\"size\":%" PRId64, w->size);
		format_json_time("first_seen", w->seen > 0, w->seen);
		printf(",\"cancel_pending\":%s",
		       w->cancel_pending ? "true" : "false");
		format_json_repeat(w);
		printf("}");
	}
	printf("],\"counts\":{");
	for (int k = 0; k < METRICS_NWINDOWS; k++)
		printf("%s\"%s\":%" PRIu64, k ? "," : "", window_names[k],
		       counts[k]);
	printf("}}\n");
}

static void
list_text(const struct ctl *c, const struct waiting_rows *r, size_t shown,
          const uint64_t counts[METRICS_NWINDOWS])
{
	char name[NAME_TEXT], target[TARGET_TEXT], due[WHEN_TEXT_MAX];
	char seen[WHEN_TEXT_MAX], rel[WHEN_TEXT_MAX];
	int wid = 2, wtarget = 6;

	if (waiting_filter_set(&opts.filter))
		printf("%zu of %zu message%s waiting in %s match\n", r->n,
		       r->total, r->total == 1 ? "" : "s", c->topo.events);
	else
		printf("%zu message%s waiting in %s\n", r->n,
		       r->n == 1 ? "" : "s", c->topo.events);
	for (size_t i = 0; i < shown; i++) {
		format_name(waiting_name(r->w[i]), name, sizeof(name));
		format_target(r->w[i], target, sizeof(target));
		if ((int)strlen(name) > wid)
			wid = (int)strlen(name);
		if ((int)strlen(target) > wtarget)
			wtarget = (int)strlen(target);
	}
	if (shown > 0)
		printf("%-*s  %-24s  %-10s  %-*s  %10s  %s\n", wid, "ID", "DUE",
		       "", wtarget, "TARGET", "SIZE", "FIRST SEEN");
	for (size_t i = 0; i < shown; i++) {
		const struct waiting *w = r->w[i];
		format_name(waiting_name(w), name, sizeof(name));
		format_target(w, target, sizeof(target));
		when_format(w->due, due, sizeof(due));
		when_relative(w->due - c->now, rel, sizeof(rel));
		if (w->seen > 0)
			when_format(w->seen, seen, sizeof(seen));
		else
			snprintf(seen, sizeof(seen), "-");
		printf("%-*s  %-24s  %-10s  %-*s  %10" PRId64 "  %s%s\n", wid,
		       name, due, rel, wtarget, target, w->size, seen,
		       w->cancel_pending ? "  cancel pending" : "");
	}
	if (shown < r->n)
		printf("(%zu of %zu shown, %zu left out; --limit N shows "
		       "more)\n",
		       shown, r->n, r->n - shown);
	printf("due in <1m: %" PRIu64 ", 1m-1h: %" PRIu64 ", 1h-1d: %" PRIu64
	       ", >1d: %" PRIu64 "\n",
	       counts[0], counts[1], counts[2], counts[3]);
}

/* The text of a series' cells: its name, schedule, zone (UTC when it
 * names none), target. */
struct series_cells {
	char name[NAME_TEXT], schedule[NAME_TEXT + 16], zone[NAME_TEXT];
	char target[TARGET_TEXT];
};

static void
series_cells(const struct waiting *w, struct series_cells *t)
{
	format_name(waiting_name(w), t->name, sizeof(t->name));
	format_schedule(w, t->schedule, sizeof(t->schedule));
	if (w->tz.len > 0)
		format_name(w->tz, t->zone, sizeof(t->zone));
	else
		snprintf(t->zone, sizeof(t->zone), "UTC");
	format_target(w, t->target, sizeof(t->target));
}

/* A column's width w, grown to fit s. */
static int
wider(int w, const char *s)
{
	return (int)strlen(s) > w ? (int)strlen(s) : w;
}

/* list --series: one row per series, soonest next occurrence first. */
static void
list_series(const struct ctl *c, const struct waiting_rows *r, size_t shown)
{
	struct series_cells t;
	char due[WHEN_TEXT_MAX], rel[WHEN_TEXT_MAX];
	int wid = 2, wsch = 8, wzone = 4;

	if (waiting_filter_set(&opts.filter))
		printf("%zu of %zu series waiting in %s match\n", r->n,
		       r->total, c->topo.events);
	else
		printf("%zu series waiting in %s\n", r->n, c->topo.events);
	for (size_t i = 0; i < shown; i++) {
		series_cells(r->w[i], &t);
		wid = wider(wid, t.name);
		wsch = wider(wsch, t.schedule);
		wzone = wider(wzone, t.zone);
	}
	if (shown > 0)
		printf("%-*s  %-*s  %-*s  %-24s  %-10s  %10s  %-6s  %s\n", wid,
		       "ID", wsch, "SCHEDULE", wzone, "ZONE", "NEXT", "",
		       "OCCURRENCE", "PAUSED", "TARGET");
	for (size_t i = 0; i < shown; i++) {
		const struct waiting *w = r->w[i];
		series_cells(w, &t);
		when_format(w->due, due, sizeof(due));
		when_relative(w->due - c->now, rel, sizeof(rel));
		printf("%-*s  %-*s  %-*s  %-24s  %-10s  %10" PRId64
		       "  %-6s  %s\n",
		       wid, t.name, wsch, t.schedule, wzone, t.zone, due, rel,
		       w->occurrence, w->paused ? "paused" : "", t.target);
	}
	if (shown < r->n)
		printf("(%zu of %zu shown, %zu left out; --limit N shows "
		       "more)\n",
		       shown, r->n, r->n - shown);
}

/* The rows r, shown of them, as list prints them. */
static void
list_print(const struct ctl *c, const struct waiting_rows *r, size_t shown,
           const uint64_t counts[METRICS_NWINDOWS])
{
	if (opts.json)
		list_json(r, shown, counts);
	else if (opts.filter.series)
		list_series(c, r, shown);
	else
		list_text(c, r, shown, counts);
}

/*
 * The rows from a console's index (console.c), as a reading of the stream
 * would give them: 0 printed, -1 not asked or not answered (read the
 * stream).  --series is read from the stream: the index keeps no count
 * of the repeats alone.
 */
static int
list_from_console(struct ctl *c)
{
	uint64_t counts[METRICS_NWINDOWS];
	struct console_answer a;
	struct waiting_rows r;

	if (c->from_stream || opts.filter.series ||
	    console_list(c, &opts.filter, opts.limit, &a) < 0)
		return -1;
	memset(&r, 0, sizeof(r));
	r.w = a.list.rows;
	r.n = (size_t)a.list.head.matching;
	r.total = (size_t)a.list.head.total;
	for (int k = 0; k < METRICS_NWINDOWS; k++)
		counts[k] = a.list.head.counts[k];
	list_print(c, &r, (size_t)a.list.head.shown, counts);
	console_answer_free(&a);
	return 0;
}

int
list_run(struct ctl *c)
{
	uint64_t counts[METRICS_NWINDOWS] = {0};
	struct waiting_rows r;
	struct waiting_fold f;
	size_t shown;
	int rc = -1;

	if (list_from_console(c) == 0)
		return 0;
	memset(&r, 0, sizeof(r));
	session_fold_init(c, &f);
	if (stream_fold(c, &f) < 0)
		goto out;
	console_hint(c);
	if (waiting_select(&f, &opts.filter, c->now, &r) < 0) {
		snprintf(c->cl.err, sizeof(c->cl.err), "out of memory");
		goto out;
	}
	/* Overdue counts as due within the minute, as in /metrics. */
	for (size_t i = 0; i < r.n; i++)
		counts[metrics_window(r.w[i]->due - c->now)]++;
	shown = opts.limit > 0 && opts.limit < r.n ? (size_t)opts.limit : r.n;
	list_print(c, &r, shown, counts);
	rc = 0;
out:
	free(r.w);
	waiting_fold_free(&f);
	return rc;
}
