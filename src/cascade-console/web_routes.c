/* SPDX-License-Identifier: Apache-2.0 */
/*
 * web_routes: the table of routes (each path to its page, action or
 * answer, with the gate's class and whether a session is needed) and the
 * reading of a path against it; and the answers about the server itself:
 * / (to the Waiting page), /healthz, the long-poll of /changes, the
 * assets, and the target and series actions' routes.  It calls into the
 * pages, the actions (act.c), ctl.c and, for login and logout, web_login.c;
 * web.c calls it (web_int.h).
 */
#include "amqp_compat.h"
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console.h"
#include "console_assets.h"
#include "web_int.h"

#define WEB_POLLS_MAX 64

static atomic_int web_polls;

static void route_root(struct ask *a, struct answer *r);
static void route_healthz(struct ask *a, struct answer *r);
static void route_changes(struct ask *a, struct answer *r);
static void route_asset(struct ask *a, struct answer *r);
static void route_target_pause(struct ask *a, struct answer *r);
static void route_target_resume(struct ask *a, struct answer *r);
static void route_series_pause(struct ask *a, struct answer *r);
static void route_series_resume(struct ask *a, struct answer *r);

static const struct webroute routes[] = {
    {"/", NULL, WEBGATE_READ, WHO_ANYONE, route_root},
    {"/login", NULL, WEBGATE_FORM, WHO_ANYONE, route_login},
    {"/logout", NULL, WEBGATE_ACTION, WHO_SESSION, route_logout},
    {"/healthz", NULL, WEBGATE_READ, WHO_ANYONE, route_healthz},
    {"/changes", NULL, WEBGATE_READ, WHO_SESSION, route_changes},
    {"/favicon.svg", NULL, WEBGATE_READ, WHO_ANYONE, route_asset},
    {"/assets/", "", WEBGATE_READ, WHO_ANYONE, route_asset},
    {"/waiting", NULL, WEBGATE_READ, WHO_SESSION, page_waiting},
    {"/waiting/", "", WEBGATE_READ, WHO_SESSION, page_message},
    {"/waiting/", "/cancel", WEBGATE_ACTION, WHO_SESSION, act_cancel},
    {"/waiting/", "/reschedule", WEBGATE_ACTION, WHO_SESSION, act_reschedule},
    {"/series", NULL, WEBGATE_READ, WHO_SESSION, page_series},
    {"/series/", "/pause", WEBGATE_ACTION, WHO_SESSION, route_series_pause},
    {"/series/", "/resume", WEBGATE_ACTION, WHO_SESSION, route_series_resume},
    {"/targets/pause", NULL, WEBGATE_ACTION, WHO_SESSION, route_target_pause},
    {"/targets/resume", NULL, WEBGATE_ACTION, WHO_SESSION, route_target_resume},
    {"/parked", NULL, WEBGATE_READ, WHO_SESSION, page_parked},
    {"/parked/requeue", NULL, WEBGATE_ACTION, WHO_SESSION, act_requeue},
    {"/health", NULL, WEBGATE_READ, WHO_SESSION, page_health},
    /* A marker of cascade's own users is their credential (ctl.c). */
    {"/ctl/list", NULL, WEBGATE_READ, WHO_ANYONE, ctl_list},
    {"/ctl/count", NULL, WEBGATE_READ, WHO_ANYONE, ctl_count},
};

/* The route for path, with the id of a prefix route in a->rest. */
const struct webroute *
web_route(struct ask *a, const char *path)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const struct webroute *rt = &routes[i];
		size_t pl = strlen(rt->path), sl, tail;
		const char *id;

		if (rt->suffix == NULL) {
			if (strcmp(path, rt->path) == 0)
				return rt;
			continue;
		}
		if (strncmp(path, rt->path, pl) != 0)
			continue;
		id = path + pl;
		tail = strlen(id);
		sl = strlen(rt->suffix);
		if (tail <= sl || strcmp(id + tail - sl, rt->suffix) != 0)
			continue;
		/* the id is one segment */
		if (memchr(id, '/', tail - sl) != NULL)
			continue;
		a->rest = id;
		a->rest_len = tail - sl;
		return rt;
	}
	return NULL;
}

/* Routes kept here: they are about the server itself (login and logout,
 * about sessions, are web_login.c's). */
static void
route_root(struct ask *a, struct answer *r)
{
	(void)a;
	r->status = 303;
	snprintf(r->location, sizeof(r->location), "/waiting");
	r->type = "text/plain; charset=utf-8";
	hbuf_lit(&r->body, "see /waiting\n");
}

static void
route_healthz(struct ask *a, struct answer *r)
{
	struct console *c = a->c;
	uint64_t records;
	int ok, failed;

	pthread_mutex_lock(&c->lock);
	ok = c->caught_up;
	records = c->records;
	failed = c->reader_err[0] != '\0';
	pthread_mutex_unlock(&c->lock);
	r->type = "text/plain; charset=utf-8";
	if (ok) {
		hbuf_lit(&r->body, "ok\n");
		return;
	}
	r->status = 503;
	hbuf_printf(&r->body, "catching up: %" PRIu64 " records read", records);
	/* That the reader failed; not why (anyone may ask here, and an
	 * error names hosts): /health, behind a login, says why. */
	if (failed)
		hbuf_lit(&r->body, "; the reader failed (see /health)");
	hbuf_lit(&r->body, "\n");
}

static void
route_changes(struct ask *a, struct answer *r)
{
	struct console *c = a->c;
	const char *after = ask_arg(a, "after");
	uint64_t v = 0, now_v;
	struct timespec ts;
	char *end;

	if (after != NULL) {
		errno = 0;
		v = strtoull(after, &end, 10);
		if (errno != 0 || end == after || *end != '\0') {
			answer_error(a, r, 400, "bad_request",
			             "after is a version number");
			return;
		}
	}
	if (atomic_fetch_add(&web_polls, 1) >= WEB_POLLS_MAX) {
		atomic_fetch_sub(&web_polls, 1);
		answer_error(a, r, 503, "not_ready", "too many waiting");
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += CONSOLE_POLL_MS / 1000;
	pthread_mutex_lock(&c->lock);
	while (atomic_load(&c->version) <= v && !atomic_load(&c->stop))
		if (pthread_cond_timedwait(&c->changed, &c->lock, &ts) ==
		    ETIMEDOUT)
			break;
	now_v = atomic_load(&c->version);
	pthread_mutex_unlock(&c->lock);
	atomic_fetch_sub(&web_polls, 1);
	answer_json_start(r);
	hbuf_printf(&r->body, "{\"version\":%" PRIu64 "}\n", now_v);
}

static void
route_asset(struct ask *a, struct answer *r)
{
	const char *name = a->rest != NULL ? a->rest : "favicon.svg";
	size_t len = a->rest != NULL ? a->rest_len : strlen(name);

	for (size_t i = 0; i < console_nassets; i++) {
		const struct console_asset *as = &console_assets[i];
		const char *dot = strrchr(as->name, '.');
		size_t stem = (size_t)(dot - as->name), hl = strlen(as->hash);
		char want[128];

		/* console.<hash>.js for console.js; the favicon by name */
		if (a->rest == NULL) {
			if (strcmp(as->name, name) != 0)
				continue;
		} else {
			if (snprintf(want, sizeof(want), "%.*s.%s%s", (int)stem,
			             as->name, as->hash,
			             dot) >= (int)sizeof(want))
				continue;
			if (len != stem + 1 + hl + strlen(dot) ||
			    memcmp(want, name, len) != 0)
				continue;
			r->cache = 1;
		}
		r->type = as->type;
		hbuf_raw(&r->body, as->data, as->len);
		return;
	}
	answer_error(a, r, 404, "not_found", "no such asset");
}

static void
route_target_pause(struct ask *a, struct answer *r)
{
	act_target(a, r, 0);
}

static void
route_target_resume(struct ask *a, struct answer *r)
{
	act_target(a, r, 1);
}

static void
route_series_pause(struct ask *a, struct answer *r)
{
	act_series(a, r, 0);
}

static void
route_series_resume(struct ask *a, struct answer *r)
{
	act_series(a, r, 1);
}
