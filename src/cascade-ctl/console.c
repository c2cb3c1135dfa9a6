/* SPDX-License-Identifier: Apache-2.0 */
/*
 * console: list's and cancel's answers from a running cascade-console's
 * index (docs/CONTRACT.md 7.2, 7.3, 7.11) instead of a reading of the
 * whole of P.events, which takes seconds at a million records.
 *
 * Only a console on this machine is asked: [console] listen on a loopback
 * address, or on every interface (asked on loopback).  ctl writes a
 * marker into P.events and asks with its token.  The marker is both the
 * question's credential and its sync: the console answers only for a
 * marker it has read from cascade's own users (the daemons' user or one
 * of [events] control_users, as RabbitMQ's user-id check vouches), and
 * only once it has read it, so nothing recorded before is missed.  No
 * password is sent.  Anything amiss (nothing listening, a refusal, a
 * console behind, an answer that does not parse) and the caller reads
 * the stream, as without a console.
 */
#include "amqp_compat.h"
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "httpget.h"
#include "listen.h"
#include "metrics.h"
#include "streamread.h"

_Static_assert(CTLWIRE_WINDOWS == METRICS_NWINDOWS,
               "the console's windows are list's");

/* Nothing listening costs a refused connect; a host that drops packets,
 * this long. */
#define CONSOLE_CONNECT_MS 1000
/* A question waits up to 10 s for its marker, then answers. */
#define CONSOLE_ASK_MS 30000
/* The console's answers are at most 8 MiB, and their headers. */
#define CONSOLE_ANSWER_BYTES ((8u << 20) + 65536)
#define CONSOLE_SHORT_BYTES 65536
/* One conversation with a console: where, and the marker. */
struct csess {
	char hosts[2][64], port[16];
	int nhosts;
	const char *host; /* the one that answered first */
	char marker[STREAMREAD_TOKEN_MAX];
};

/*
 * Where [console] listen is reached on this machine, into s: a loopback
 * address as it is, every interface on 127.0.0.1 and ::1 (the ones it
 * listens on), localhost on both.  0 when it is elsewhere (a marker's
 * token is never sent off this machine), port 0, or unset.
 */
static int
console_where(const char *listen, struct csess *s)
{
	char host[256];
	unsigned char addr[16];
	const char *why;

	s->nhosts = 0;
	if (listen[0] == '\0' ||
	    listen_parse(listen, host, sizeof(host), s->port, sizeof(s->port),
	                 &why) < 0 ||
	    strcmp(s->port, "0") == 0)
		return 0;
	if (host[0] == '\0' || strcmp(host, "localhost") == 0) {
		snprintf(s->hosts[s->nhosts++], 64, "127.0.0.1");
		snprintf(s->hosts[s->nhosts++], 64, "::1");
	} else if (strcmp(host, "0.0.0.0") == 0) {
		snprintf(s->hosts[s->nhosts++], 64, "127.0.0.1");
	} else if (strcmp(host, "::") == 0) {
		snprintf(s->hosts[s->nhosts++], 64, "::1");
	} else if ((inet_pton(AF_INET, host, addr) == 1 && addr[0] == 127) ||
	           strcmp(host, "::1") == 0) {
		/* An address, never a name that would be resolved. */
		snprintf(s->hosts[s->nhosts++], 64, "%.63s", host);
	}
	return s->nhosts;
}

/* s percent-encoded (everything but A-Z a-z 0-9 - . _ ~) onto out[*n..),
 * which has size bytes.  -1 when it does not fit. */
static int
console_pct(const char *s, char *out, size_t size, size_t *n)
{
	static const char hex[] = "0123456789ABCDEF";

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		int plain = (*p >= 'A' && *p <= 'Z') ||
		            (*p >= 'a' && *p <= 'z') ||
		            (*p >= '0' && *p <= '9') || *p == '-' ||
		            *p == '.' || *p == '_' || *p == '~';
		if (*n + 4 > size)
			return -1;
		if (plain) {
			out[(*n)++] = (char)*p;
		} else {
			out[(*n)++] = '%';
			out[(*n)++] = hex[*p >> 4];
			out[(*n)++] = hex[*p & 15];
		}
	}
	out[*n] = '\0';
	return 0;
}

/* A literal onto out[*n..); -1 when it does not fit. */
static int
console_put(const char *s, char *out, size_t size, size_t *n)
{
	size_t len = strlen(s);

	if (*n + len + 1 > size)
		return -1;
	memcpy(out + *n, s, len + 1);
	*n += len;
	return 0;
}

/* "&name=" and value, encoded, onto out. */
static int
console_arg(const char *name, const char *value, char *out, size_t size,
            size_t *n)
{
	return console_put("&", out, size, n) < 0 ||
	               console_put(name, out, size, n) < 0 ||
	               console_put("=", out, size, n) < 0 ||
	               console_pct(value, out, size, n) < 0
	           ? -1
	           : 0;
}

/* One request to the console s answered from before (or, first, each
 * host in turn until one answers): the body, or NULL with why. */
static char *
console_ask(struct ctl *c, struct csess *s, const struct httpget_req *q,
            int *status, size_t *len)
{
	char why[256] = "";
	char *body = NULL;

	for (int i = 0; i < s->nhosts && body == NULL; i++) {
		if (s->host != NULL && s->host != s->hosts[i])
			continue;
		body = httpget_ask(s->hosts[i], s->port, q, status, len, why,
		                   sizeof(why));
		if (body != NULL)
			s->host = s->hosts[i];
	}
	/* The first reason is the one told. */
	if (body == NULL && s->host != NULL && c->console_why[0] == '\0')
		snprintf(c->console_why, sizeof(c->console_why), "%s", why);
	return body;
}

/* Why an answer was refused, for console_hint: the status and the
 * console's error code (a word of ours: nothing else is printed). */
static void
console_refused(struct ctl *c, int status, const char *body)
{
	const char *code = strstr(body, "\"error\":\"");
	size_t n = 0;

	if (code != NULL) {
		code += 9;
		n = strspn(code, "abcdefghijklmnopqrstuvwxyz_");
	}
	snprintf(c->console_why, sizeof(c->console_why), "HTTP %d%s%.*s%s",
	         status, n > 0 ? " (" : "", (int)(n < 64 ? n : 64),
	         code != NULL ? code : "", n > 0 ? ")" : "");
}

/*
 * Where the console is, and the marker written: 0, or -1.  The marker is
 * written now, so that the answer holds every record written before:
 * what ctl's own reading would read.
 */
static int
console_open(struct ctl *c, struct csess *s)
{
	struct httpget_req q;
	char *body;
	int status = 0;

	memset(s, 0, sizeof(*s));
	c->console_why[0] = '\0';
	if (c->from_stream || !config_events(&c->cfg) ||
	    console_where(c->cfg.console_listen, s) == 0)
		return -1;
	/* Nothing listening costs a refused connect, and no marker. */
	memset(&q, 0, sizeof(q));
	q.path = "/healthz";
	q.headers = "Accept: application/json\r\n";
	q.connect_ms = CONSOLE_CONNECT_MS;
	q.answer_ms = CONSOLE_CONNECT_MS;
	q.max = CONSOLE_SHORT_BYTES;
	if ((body = console_ask(c, s, &q, &status, NULL)) == NULL)
		return -1;
	free(body);
	if (status != 200) {
		console_refused(c, status, "");
		return -1;
	}
	if (streamread_marker(&c->cl, c->topo.events, "ctl", s->marker,
	                      sizeof(s->marker)) < 0) {
		snprintf(c->console_why, sizeof(c->console_why),
		         "no marker written");
		return -1;
	}
	return 0;
}

/* GET path (its query's first argument given) with the marker, the
 * stream and now added: the 200 answer's body, or NULL. */
static char *
console_get(struct ctl *c, struct csess *s, char *path, size_t size, size_t *n,
            size_t max, size_t *len)
{
	char now[32];
	struct httpget_req q;
	char *body;
	int status = 0;

	snprintf(now, sizeof(now), "%" PRId64, c->now);
	if (console_arg("marker", s->marker, path, size, n) < 0 ||
	    console_arg("user", c->cl.user, path, size, n) < 0 ||
	    console_arg("stream", c->topo.events, path, size, n) < 0 ||
	    console_arg("now", now, path, size, n) < 0)
		return NULL;
	memset(&q, 0, sizeof(q));
	q.path = path;
	q.headers = "Accept: application/json\r\n";
	q.connect_ms = CONSOLE_CONNECT_MS;
	q.answer_ms = CONSOLE_ASK_MS;
	q.max = max;
	if ((body = console_ask(c, s, &q, &status, len)) == NULL)
		return NULL;
	if (status != 200) {
		console_refused(c, status, body);
		free(body);
		return NULL;
	}
	return body;
}

void
console_answer_free(struct console_answer *a)
{
	ctlwire_list_free(&a->list);
	free(a->text);
	a->text = NULL;
}

int
console_list(struct ctl *c, const struct waiting_filter *flt, uint64_t limit,
             struct console_answer *a)
{
	char path[4096], num[32];
	const char *why;
	struct csess s;
	size_t n = 0, len = 0;
	uint64_t shown;

	memset(a, 0, sizeof(*a));
	if (flt->series || console_open(c, &s) < 0)
		return -1;
	snprintf(num, sizeof(num), "%" PRIu64, limit);
	if (console_put("/ctl/list?limit=", path, sizeof(path), &n) < 0 ||
	    console_put(num, path, sizeof(path), &n) < 0 ||
	    (flt->target != NULL &&
	     console_arg("target", flt->target, path, sizeof(path), &n) < 0))
		goto fail;
	if (flt->due_before != INT64_MAX) {
		snprintf(num, sizeof(num), "%" PRId64, flt->due_before);
		if (console_arg("due_before", num, path, sizeof(path), &n) < 0)
			goto fail;
	}
	if (flt->due_after != INT64_MIN) {
		snprintf(num, sizeof(num), "%" PRId64, flt->due_after);
		if (console_arg("due_after", num, path, sizeof(path), &n) < 0)
			goto fail;
	}
	if ((a->text = console_get(c, &s, path, sizeof(path), &n,
	                           CONSOLE_ANSWER_BYTES, &len)) == NULL)
		goto fail;
	if (ctlwire_parse_list(a->text, len, &a->list, &why) < 0) {
		snprintf(c->console_why, sizeof(c->console_why),
		         "an answer that does not parse: %s", why);
		goto fail;
	}
	/* As many rows as list shows: --limit of them, or all. */
	shown = limit > 0 && limit < a->list.head.matching
	            ? limit
	            : a->list.head.matching;
	if (a->list.head.shown != shown) {
		snprintf(c->console_why, sizeof(c->console_why),
		         "%" PRIu64 " rows where %" PRIu64 " were asked for",
		         a->list.head.shown, shown);
		goto fail;
	}
	return 0;
fail:
	console_answer_free(a);
	return -1;
}

int
console_count(struct ctl *c, char **ids, int nids, uint64_t *count,
              int64_t *last_due)
{
	char path[2048];
	const char *why;
	struct csess s;
	char *text;
	size_t n, len = 0;
	int rc = 0;

	if (console_open(c, &s) < 0)
		return -1;
	for (int i = 0; i < nids && rc == 0; i++) {
		n = 0;
		text = NULL;
		if (console_put("/ctl/count?", path, sizeof(path), &n) < 0 ||
		    console_put("id=", path, sizeof(path), &n) < 0 ||
		    console_pct(ids[i], path, sizeof(path), &n) < 0 ||
		    (text = console_get(c, &s, path, sizeof(path), &n,
		                        CONSOLE_SHORT_BYTES, &len)) == NULL)
			rc = -1;
		else if (ctlwire_parse_count(text, len, &count[i], &last_due[i],
		                             &why) < 0) {
			snprintf(c->console_why, sizeof(c->console_why),
			         "an answer that does not parse: %s", why);
			rc = -1;
		}
		free(text);
	}
	return rc;
}

void
console_hint(const struct ctl *c)
{
	if (c->stream_ms <= CONSOLE_HINT_MS)
		return;
	fprintf(stderr,
	        PROG ": reading %s took %.1f s (%" PRIu64 " records); a "
	             "cascade-console on [console] listen (%s) lets list and "
	             "cancel answer from its index%s%s\n",
	        c->topo.events, (double)c->stream_ms / 1000.0,
	        c->stream_records, c->cfg.console_listen,
	        c->console_why[0] != '\0' ? "; the one there did not: " : "",
	        c->console_why);
}
