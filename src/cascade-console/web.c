/* SPDX-License-Identifier: Apache-2.0 */
/*
 * web: libmicrohttpd, a thread per connection (each with the stack room
 * rabbitmq-c 0.11 needs to decode hostile headers), a request's body
 * read, the one gate every request passes (webgate.h) and the call of
 * its route's handler.  Every answer gets the same security headers
 * (docs/CONTRACT.md 7.11).  It calls into web_routes.c (the route of a
 * path) and web_login.c (the session a request names), which never call
 * back (web_int.h).
 */
#include "amqp_compat.h"
#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "console.h"
#include "duration.h"
#include "form.h"
#include "listen.h"
#include "log.h"
#include "web_int.h"
#include "webgate.h"

#define WEB_FIELDS 16

static const char web_csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'";

/* One HTTP request's state across MHD's calls. */
struct creq {
	char *body;
	size_t len;
	int too_large;
};

static int
web_wants_json(struct MHD_Connection *conn)
{
	const char *accept = web_header(conn, MHD_HTTP_HEADER_ACCEPT);
	const char *fmt =
	    MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "format");

	if (fmt != NULL)
		return strcmp(fmt, "json") == 0;
	return accept != NULL && strstr(accept, "application/json") != NULL;
}

static void
web_client_ip(struct MHD_Connection *conn, char *out, size_t size)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;

	snprintf(out, size, "?");
	if (sa == NULL)
		return;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
		          out, (socklen_t)size);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6,
		          &((const struct sockaddr_in6 *)sa)->sin6_addr, out,
		          (socklen_t)size);
}

/* Keeps the last X-Forwarded-For header line. */
static enum MHD_Result
web_last_xff(void *arg, enum MHD_ValueKind kind, const char *key,
             const char *value)
{
	(void)kind;
	if (key != NULL && strcasecmp(key, "X-Forwarded-For") == 0)
		*(const char **)arg = value;
	return MHD_YES;
}

/*
 * The client the login limits count: the peer, or behind a trusted
 * proxy the address its X-Forwarded-For names (webgate_client).  Of two
 * X-Forwarded-For lines the last is read: a proxy that adds its own line
 * adds it after the client's.
 */
static void
web_client(struct console *c, struct MHD_Connection *conn, char *out,
           size_t size)
{
	char peer[WEBGATE_ADDR_SIZE];
	const char *xff = NULL;

	web_client_ip(conn, peer, sizeof(peer));
	if (c->cfg.console_trusted_proxies[0] != '\0')
		(void)MHD_get_connection_values(conn, MHD_HEADER_KIND,
		                                web_last_xff, &xff);
	(void)webgate_client(peer, xff, c->cfg.console_trusted_proxies, out,
	                     size);
}

/* The answer, with the headers every one has, queued. */
static enum MHD_Result
web_send(struct MHD_Connection *conn, struct answer *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	char num[32];

	if (r->body.full) {
		hbuf_free(&r->body);
		hbuf_init(&r->body, 4096);
		r->status = 500;
		r->type = "text/plain; charset=utf-8";
		hbuf_lit(&r->body, "answer too large\n");
	}
	resp = MHD_create_response_from_buffer(
	    r->body.n, r->body.p != NULL ? r->body.p : (char *)"",
	    MHD_RESPMEM_MUST_COPY);
	if (resp == NULL)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
	                        r->type != NULL ? r->type
	                                        : "text/html; charset=utf-8");
	MHD_add_response_header(resp, "Content-Security-Policy", web_csp);
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, "X-Frame-Options", "DENY");
	MHD_add_response_header(resp, "Referrer-Policy", "same-origin");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
	                        r->cache ? "max-age=31536000, immutable"
	                                 : "no-store");
	if (r->location[0] != '\0')
		MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION,
		                        r->location);
	if (r->cookie[0] != '\0')
		MHD_add_response_header(resp, MHD_HTTP_HEADER_SET_COOKIE,
		                        r->cookie);
	if (r->cookie2[0] != '\0')
		MHD_add_response_header(resp, MHD_HTTP_HEADER_SET_COOKIE,
		                        r->cookie2);
	if (r->allow[0] != '\0')
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
	if (r->retry_after > 0) {
		snprintf(num, sizeof(num), "%d", r->retry_after);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, num);
	}
	ret = MHD_queue_response(conn, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result
web_answer(void *cls, struct MHD_Connection *conn, const char *url,
           const char *method, const char *version, const char *upload,
           size_t *upload_size, void **con_cls)
{
	struct console *c = cls;
	struct creq *q = *con_cls;
	struct form_field fields[WEB_FIELDS];
	char empty[1] = "";
	struct webgate_request g;
	struct webgate_config gc;
	struct answer r;
	struct ask a;
	const struct webroute *rt;
	const char *cookie, *bearer, *why, *token = NULL;
	/* Why there is no session; what is wrong with the body, if anything */
	const char *sess_why = "no session", *bad_code = NULL, *bad_why = NULL;
	int bad_status = 0;
	char origin[320];
	enum webgate_verdict v;
	enum MHD_Result ret;

	(void)version;
	if (q == NULL) {
		if ((q = calloc(1, sizeof(*q))) == NULL)
			return MHD_NO;
		*con_cls = q;
		return MHD_YES;
	}
	if (*upload_size != 0) {
		if (!q->too_large &&
		    q->len + *upload_size <= CONSOLE_BODY_MAX) {
			char *p = realloc(q->body, q->len + *upload_size + 1);
			if (p == NULL)
				return MHD_NO;
			q->body = p;
			memcpy(q->body + q->len, upload, *upload_size);
			q->len += *upload_size;
			q->body[q->len] = '\0';
		} else {
			q->too_large = 1;
		}
		*upload_size = 0;
		return MHD_YES;
	}

	memset(&a, 0, sizeof(a));
	memset(&r, 0, sizeof(r));
	a.c = c;
	a.conn = conn;
	a.method = method;
	a.path = url;
	a.now = duration_wall_ms();
	hbuf_init(&r.body, CONSOLE_ANSWER_MAX);
	r.status = 200;
	r.json = web_wants_json(conn);
	web_client(c, conn, a.client_ip, sizeof(a.client_ip));
	web_sweep(c, a.now);

	rt = web_route(&a, url);
	cookie = MHD_lookup_connection_value(conn, MHD_COOKIE_KIND,
	                                     web_cookie_name(c));
	bearer = web_bearer(conn);
	memset(&g, 0, sizeof(g));
	g.method = method;
	g.host = web_header(conn, MHD_HTTP_HEADER_HOST);
	g.origin = web_header(conn, "Origin");
	g.referer = web_header(conn, MHD_HTTP_HEADER_REFERER);
	g.class = rt != NULL ? rt->class : WEBGATE_READ;
	g.auth = cookie != NULL && bearer != NULL ? WEBGATE_AUTH_BOTH
	         : cookie != NULL                 ? WEBGATE_AUTH_COOKIE
	         : bearer != NULL                 ? WEBGATE_AUTH_BEARER
	                                          : WEBGATE_AUTH_NONE;
	token = bearer != NULL ? bearer : cookie;

	/* A POST's body: a form, of bounded size, each field once.  What
	 * is wrong with it is said after the gate's Host and method. */
	if (strcmp(method, "POST") == 0 && rt != NULL &&
	    rt->class != WEBGATE_READ) {
		const char *ct = web_header(conn, MHD_HTTP_HEADER_CONTENT_TYPE);
		if (q->too_large) {
			bad_status = 413;
			bad_code = "too_large";
			bad_why = "a body over 16 KiB";
		} else if (q->len > 0 &&
		           (ct == NULL ||
		            strncasecmp(ct, "application/x-www-form-urlencoded",
		                        33) != 0)) {
			bad_status = 415;
			bad_code = "not_a_form";
			bad_why = "POST bodies are "
			          "application/x-www-form-urlencoded";
		} else if (form_parse(q->body != NULL ? q->body : empty, q->len,
		                      fields, WEB_FIELDS, &a.nform,
		                      &bad_why) < 0) {
			/* form_parse writes a NUL at body[len]: never a
			 * literal */
			bad_status = 400;
			bad_code = "bad_request";
			a.nform = 0; /* partly decoded: not to be read */
		} else {
			a.form = fields;
		}
	}

	/* Our origin as this request reached us: with a public_url, its;
	 * else that of the Host it named, when the Host is one of ours
	 * (localhost, 127.0.0.1, [::1] and the listen address alike). */
	snprintf(origin, sizeof(origin), "%s", c->origin);
	if (c->cfg.console_public_url[0] == '\0' && g.host != NULL)
		for (size_t i = 0; i < c->nhosts; i++)
			if (strcasecmp(g.host, c->hosts[i]) == 0)
				snprintf(origin, sizeof(origin), "http://%s",
				         c->hosts[i]);
	if (g.auth != WEBGATE_AUTH_BOTH)
		web_session(&a, token, &sess_why);
	if (strcmp(method, "POST") == 0) {
		const char *given = ask_field(&a, "csrf");
		if (given == NULL)
			given = web_header(conn, "X-CSRF-Token");
		if (rt != NULL && rt->fn == route_login) {
			/* The login form's double submit: the pre cookie
			 * and the form's copy of it.  A JSON login sets no
			 * cookie and so needs neither (no browser carries
			 * what it answers to another site). */
			const char *pre = MHD_lookup_connection_value(
			    conn, MHD_COOKIE_KIND, "cascade_pre");
			const char *field = ask_field(&a, "pre");
			if (r.json && cookie == NULL &&
			    (g.origin == NULL ||
			     strcasecmp(g.origin, origin) == 0))
				g.auth = WEBGATE_AUTH_BEARER;
			g.csrf_ok =
			    pre != NULL && field != NULL &&
			    strlen(pre) == WEBSESSION_HEX_SIZE - 1 &&
			    websession_token_eq(field, strlen(field), pre);
		} else {
			/* Against the copy taken under the lock: a.s may
			 * leave the store meanwhile. */
			g.csrf_ok =
			    a.s != NULL && given != NULL &&
			    websession_token_eq(given, strlen(given), a.csrf);
		}
	}
	gc.origin = origin;
	gc.hosts = c->hosts;
	gc.nhosts = c->nhosts;
	v = webgate_judge(&g, &gc, &why);
	if (v != WEBGATE_PASS && v != WEBGATE_BAD_HOST &&
	    v != WEBGATE_BAD_METHOD && bad_status != 0) {
		answer_error(&a, &r, bad_status, bad_code, bad_why);
		goto send;
	}
	/* A POST that names no session at all is a 401, as a GET is: the
	 * CSRF check is for a request the browser sent with our cookie. */
	if ((v == WEBGATE_NO_CSRF || v == WEBGATE_BAD_ORIGIN) &&
	    (g.auth == WEBGATE_AUTH_NONE ||
	     (g.auth == WEBGATE_AUTH_COOKIE && a.s == NULL)) &&
	    rt != NULL && rt->who == WHO_SESSION) {
		answer_error(&a, &r, 401, "no_session", sess_why);
		goto send;
	}
	if (v != WEBGATE_PASS) {
		if (v == WEBGATE_BAD_METHOD && rt != NULL)
			snprintf(r.allow, sizeof(r.allow), "%s",
			         webgate_allow(rt->class));
		answer_error(&a, &r, webgate_status(v),
		             v == WEBGATE_BAD_HOST     ? "bad_host"
		             : v == WEBGATE_BAD_METHOD ? "method"
		             : v == WEBGATE_BOTH_AUTH  ? "bad_request"
		                                       : "forbidden",
		             why);
		goto send;
	}
	if (bad_status != 0) {
		answer_error(&a, &r, bad_status, bad_code, bad_why);
		goto send;
	}
	if (rt == NULL) {
		answer_error(&a, &r, 404, "not_found", "no such page");
		goto send;
	}
	if (rt->who == WHO_SESSION && a.s == NULL) {
		if (!r.json && strcmp(method, "GET") == 0) {
			struct hbuf loc;
			hbuf_init(&loc, sizeof(r.location) - 1);
			hbuf_lit(&loc, "/login?next=");
			html_url(&loc, url, strlen(url));
			r.status = 303;
			snprintf(r.location, sizeof(r.location), "%s",
			         loc.full ? "/login" : loc.p);
			hbuf_free(&loc);
			hbuf_lit(&r.body, "log in first\n");
			r.type = "text/plain; charset=utf-8";
		} else {
			answer_error(&a, &r, 401, "no_session", sess_why);
		}
		goto send;
	}
	rt->fn(&a, &r);
send:
	ret = web_send(conn, &r);
	hbuf_free(&r.body);
	csess_put(c, a.cs);
	return ret;
}

static void
web_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
              enum MHD_RequestTerminationCode toe)
{
	struct creq *q = *con_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (q != NULL) {
		free(q->body);
		free(q);
		*con_cls = NULL;
	}
}

static void web_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void
web_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[256];

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\r\n")] = '\0';
	/* A client that went away says so here: debug, not to be flooded. */
	log_debug("console_http_error", " reason=\"%s\"", line);
}

/* The Host values we answer to, and our origin (webgate.h). */
static void
web_hosts(struct console *c, const char *host)
{
	const char *pub = c->cfg.console_public_url;
	int v6 = strchr(host, ':') != NULL;

	c->nhosts = 0;
	snprintf(c->hostbuf[c->nhosts++], sizeof(c->hostbuf[0]),
	         v6 ? "[%.250s]:%d" : "%.250s:%d", host, c->port);
	snprintf(c->hostbuf[c->nhosts++], sizeof(c->hostbuf[0]), "127.0.0.1:%d",
	         c->port);
	snprintf(c->hostbuf[c->nhosts++], sizeof(c->hostbuf[0]), "localhost:%d",
	         c->port);
	snprintf(c->hostbuf[c->nhosts++], sizeof(c->hostbuf[0]), "[::1]:%d",
	         c->port);
	if (pub[0] != '\0') {
		const char *h = strstr(pub, "://") + 3;
		size_t n = strcspn(h, "/");
		snprintf(c->hostbuf[c->nhosts++], sizeof(c->hostbuf[0]), "%.*s",
		         (int)(n < 250 ? n : 250), h);
		snprintf(c->origin, sizeof(c->origin), "%.*s",
		         (int)(h - pub + (ptrdiff_t)n), pub);
	} else {
		snprintf(c->origin, sizeof(c->origin), "http://%.280s",
		         c->hostbuf[0]);
	}
	for (size_t i = 0; i < c->nhosts; i++)
		c->hosts[i] = c->hostbuf[i];
}

int
web_start(struct console *c, char *err, size_t size)
{
	char host[256], port[16];
	const char *why;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION |
	                 MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	int fd, v6;

	if (listen_parse(c->listen, host, sizeof(host), port, sizeof(port),
	                 &why) < 0) {
		snprintf(err, size, "%s: %s", c->listen, why);
		return -1;
	}
	/* Bound before the server starts, so that the Host and Origin it
	 * accepts are known before the first request. */
	fd = listen_open(c->listen, 1, &c->port, &v6, err, size);
	if (fd < 0)
		return -1;
	if (v6)
		flags |= MHD_USE_IPv6;
	web_hosts(c, host[0] != '\0' ? host : "127.0.0.1");
	c->mhd = MHD_start_daemon(
	    flags, 0, NULL, NULL, web_answer, c, MHD_OPTION_EXTERNAL_LOGGER,
	    web_mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONSOLE_CONNECTIONS,
	    /* one address may not take every connection (and thread) */
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)CONSOLE_PER_IP,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
	    MHD_OPTION_THREAD_STACK_SIZE, (size_t)(64u << 20),
	    MHD_OPTION_NOTIFY_COMPLETED, web_completed, c, MHD_OPTION_END);
	if (c->mhd == NULL) {
		close(fd);
		snprintf(err, size, "cannot serve on %s", c->listen);
		return -1;
	}
	return 0;
}

static void
web_close_conn(void *conn)
{
	struct csess *cs = conn;

	/* The server is stopped: no request holds it any more. */
	csess_close(cs);
}

void
web_stop(struct console *c)
{
	pthread_mutex_lock(&c->lock);
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
	if (c->mhd != NULL)
		MHD_stop_daemon(c->mhd);
	c->mhd = NULL;
	/* Every session's connection closed, as at logout. */
	websession_free(&c->sessions, web_close_conn);
}
