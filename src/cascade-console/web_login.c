/* SPDX-License-Identifier: Apache-2.0 */
/*
 * web_login: sessions and logins.  What names a session in a request (the
 * session cookie, or a Bearer token), the session a request names and the
 * reference it holds on the session's broker connection, expired sessions
 * swept out, and the login form, login (the broker asked with the user's
 * own name and password, failures limited) and logout.  It calls into
 * page.c and the library, never back into web.c or web_routes.c, which
 * call it (web_int.h).
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "console.h"
#include "escape.h"
#include "log.h"
#include "web_int.h"
#include "webgate.h"

const char *
web_header(struct MHD_Connection *conn, const char *name)
{
	return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

const char *
web_cookie_name(const struct console *c)
{
	return c->secure ? "__Host-cascade_session" : "cascade_session";
}

/* The Bearer token of an Authorization header, or NULL. */
const char *
web_bearer(struct MHD_Connection *conn)
{
	const char *h = web_header(conn, MHD_HTTP_HEADER_AUTHORIZATION);

	if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
		return NULL;
	return h + 7;
}

/* Sessions: a reference to a session's connection, and its release. */
void
csess_close(struct csess *cs)
{
	client_close(&cs->cl);
	pthread_mutex_destroy(&cs->mu);
	free(cs);
}

/* A connection left the store (under sess_lock): closed now, or by the
 * last request using it; *later is set to close it after the unlock. */
static void
csess_gone(void *conn, struct csess **later)
{
	struct csess *cs = conn;

	*later = NULL;
	if (cs == NULL)
		return;
	cs->dead = 1;
	if (cs->refs == 0)
		*later = cs;
}

void
csess_put(struct console *c, struct csess *cs)
{
	int close_it;

	if (cs == NULL)
		return;
	pthread_mutex_lock(&c->sess_lock);
	close_it = --cs->refs == 0 && cs->dead;
	pthread_mutex_unlock(&c->sess_lock);
	if (close_it)
		csess_close(cs);
}

/* Expired sessions out, their connections closed. */
void
web_sweep(struct console *c, int64_t now)
{
	for (;;) {
		struct csess *later = NULL;
		void *conn = NULL;
		int found;

		pthread_mutex_lock(&c->sess_lock);
		found = websession_expire(&c->sessions, now, &conn);
		if (found)
			csess_gone(conn, &later);
		pthread_mutex_unlock(&c->sess_lock);
		if (!found)
			return;
		if (later != NULL)
			csess_close(later);
	}
}

/* The session the request names, referenced into a; why when none. */
void
web_session(struct ask *a, const char *token, const char **why)
{
	struct console *c = a->c;
	struct websession *s;

	*why = "no session";
	if (token == NULL)
		return;
	pthread_mutex_lock(&c->sess_lock);
	s = websession_touch(&c->sessions, token, strlen(token), a->now, why);
	if (s != NULL && atomic_load(&((struct csess *)s->conn)->broken))
		*why = "the broker closed this session's connection: log in "
		       "again";
	else if (s != NULL && !((struct csess *)s->conn)->dead) {
		a->s = s;
		snprintf(a->user, sizeof(a->user), "%s", s->user);
		a->control = s->control;
		memcpy(a->csrf, s->csrf, sizeof(a->csrf));
		a->cs = s->conn;
		a->cs->refs++;
	}
	pthread_mutex_unlock(&c->sess_lock);
}

/*
 * Is next a path of ours to send a browser to after its login: '/', then
 * only the bytes of a path and query (no second '/' first, no '\\', no
 * blank or control byte, which browsers drop from a URL), at most 512?
 */
static int
web_local_path(const char *next)
{
	size_t n;

	if (next == NULL || next[0] != '/' || next[1] == '/' || next[1] == '\\')
		return 0;
	n = strspn(next, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                 "0123456789/-._~?=&%+");
	return next[n] == '\0' && n <= 512;
}

static void
login_form(struct ask *a, struct answer *r, int status, const char *message)
{
	char pre[WEBSESSION_HEX_SIZE];
	const char *next = ask_arg(a, "next");

	if (websession_new_token(pre) != 0) {
		answer_error(a, r, 500, "internal", "no random bytes");
		return;
	}
	snprintf(r->cookie, sizeof(r->cookie),
	         "cascade_pre=%s; Path=/login; HttpOnly; SameSite=Strict%s",
	         pre, a->c->secure ? "; Secure" : "");
	r->status = status;
	page_head(a, r, "Log in", NULL);
	hbuf_lit(&r->body, "<main class=login><h1>Log in to cascade</h1>"
	                   "<p>Your RabbitMQ user name and password: the "
	                   "console connects to the broker as you.</p>");
	if (message != NULL) {
		hbuf_lit(&r->body, "<p class=error>");
		html_text(&r->body, message, strlen(message));
		hbuf_lit(&r->body, "</p>");
	}
	hbuf_lit(&r->body, "<form method=post action=\"/login");
	if (web_local_path(next)) {
		hbuf_lit(&r->body, "?next=");
		html_url(&r->body, next, strlen(next));
	}
	hbuf_lit(&r->body, "\"><input type=hidden name=pre value=\"");
	hbuf_raw(&r->body, pre, strlen(pre));
	hbuf_lit(&r->body,
	         "\"><label>User <input name=user id=user "
	         "autocomplete=username required></label>"
	         "<label>Password <input name=password id=password "
	         "type=password autocomplete=current-password></label>"
	         "<button type=submit id=login>Log in</button></form></main>");
	page_foot(r);
}

void
route_login(struct ask *a, struct answer *r)
{
	struct console *c = a->c;
	const char *user, *password, *next;
	struct csess *cs, *later = NULL;
	struct websession *s;
	char token[WEBSESSION_HEX_SIZE], err[512], key[WEBGATE_ADDR_SIZE];
	char who[ESCAPE_MAX_FACTOR * 64 + 4];
	void *evicted = NULL;
	int64_t wait, expires = 0;
	int control;

	if (strcmp(a->method, "POST") != 0) {
		login_form(a, r, 200, NULL);
		return;
	}
	user = ask_field(a, "user");
	password = ask_field(a, "password");
	if (user == NULL || password == NULL || user[0] == '\0') {
		answer_error(a, r, 400, "bad_request",
		             "user and password are needed");
		return;
	}
	/* Counted as a failure before the broker is asked, so that logins
	 * made at once cannot all pass the check; a success clears it. */
	webgate_limit_key(a->client_ip, key, sizeof(key));
	pthread_mutex_lock(&c->sess_lock);
	wait = ratelimit_check(&c->rl, key, user, strlen(user), a->now);
	if (wait == 0)
		ratelimit_fail(&c->rl, key, user, strlen(user), a->now);
	pthread_mutex_unlock(&c->sess_lock);
	if (wait > 0) {
		r->retry_after = (int)((wait + 999) / 1000);
		answer_error(a, r, 429, "rate_limited",
		             "too many failed logins: try again later");
		return;
	}
	if ((cs = calloc(1, sizeof(*cs))) == NULL) {
		answer_error(a, r, 500, "internal", "out of memory");
		return;
	}
	pthread_mutex_init(&cs->mu, NULL);
	if (client_open_user(&cs->cl, &c->cfg, &c->topo,
	                     amqp_cstring_bytes(user),
	                     amqp_cstring_bytes(password), 0) < 0) {
		/* A refused login (the broker's close) or a broker that
		 * did not answer: only the first counts as a failure. */
		int refused = strstr(cs->cl.err, "login") != NULL;
		snprintf(err, sizeof(err), "%.500s", cs->cl.err);
		pthread_mutex_destroy(&cs->mu);
		free(cs);
		if (refused) {
			escape_bytes(user, strlen(user), 64, ESCAPE_QUOTED, who,
			             sizeof(who));
			log_info("console_login_failed", " user=\"%s\" from=%s",
			         who, a->client_ip);
			if (r->json)
				answer_error(a, r, 401, "no_session",
				             "wrong user name or password");
			else
				login_form(a, r, 401,
				           "Wrong user name or password.");
		} else {
			/* Not the user's fault: the broker did not answer. */
			pthread_mutex_lock(&c->sess_lock);
			ratelimit_refund(&c->rl, key, user, strlen(user));
			pthread_mutex_unlock(&c->sess_lock);
			answer_error(a, r, 502, "broker", err);
		}
		return;
	}
	control = config_control_user(&c->cfg, amqp_cstring_bytes(user));
	pthread_mutex_lock(&c->sess_lock);
	ratelimit_refund(&c->rl, key, user, strlen(user));
	ratelimit_known(&c->rl, key, user, strlen(user), a->now);
	if (websession_trim_user(&c->sessions, user, strlen(user),
	                         CONSOLE_USER_SESSIONS, &evicted)) {
		csess_gone(evicted, &later);
		if (later != NULL) {
			pthread_mutex_unlock(&c->sess_lock);
			csess_close(later);
			pthread_mutex_lock(&c->sess_lock);
			later = NULL;
		}
		evicted = NULL;
	}
	s = websession_create(&c->sessions, user, strlen(user), control, cs,
	                      a->now, token, &evicted, err, sizeof(err));
	if (s != NULL)
		expires = websession_expires(&c->sessions, s);
	if (evicted != NULL)
		csess_gone(evicted, &later);
	pthread_mutex_unlock(&c->sess_lock);
	if (later != NULL)
		csess_close(later);
	if (s == NULL) {
		csess_close(cs);
		answer_error(a, r, 500, "internal", err);
		return;
	}
	escape_bytes(user, strlen(user), 64, ESCAPE_QUOTED, who, sizeof(who));
	log_info("console_login", " user=\"%s\" control=%d from=%s", who,
	         control, a->client_ip);
	if (r->json) {
		answer_json_start(r);
		hbuf_lit(&r->body, "{\"token\":\"");
		hbuf_raw(&r->body, token, strlen(token));
		hbuf_lit(&r->body, "\",\"user\":");
		html_json(&r->body, user, strlen(user));
		hbuf_printf(&r->body,
		            ",\"control\":%s,\"expires_ms\":%" PRId64 "}\n",
		            control ? "true" : "false", expires);
		return;
	}
	snprintf(r->cookie, sizeof(r->cookie),
	         "%s=%s; Path=/; HttpOnly; SameSite=Strict%s",
	         web_cookie_name(c), token, c->secure ? "; Secure" : "");
	snprintf(r->cookie2, sizeof(r->cookie2),
	         "cascade_pre=; Path=/login; Max-Age=0");
	next = ask_arg(a, "next");
	r->status = 303;
	snprintf(r->location, sizeof(r->location), "%s",
	         web_local_path(next) ? next : "/waiting");
	r->type = "text/plain; charset=utf-8";
	hbuf_lit(&r->body, "logged in\n");
}

void
route_logout(struct ask *a, struct answer *r)
{
	struct console *c = a->c;
	const char *cookie = MHD_lookup_connection_value(
	    a->conn, MHD_COOKIE_KIND, web_cookie_name(c));
	const char *token = web_bearer(a->conn);
	struct csess *later = NULL;
	void *conn;
	int found;

	if (token == NULL)
		token = cookie;
	pthread_mutex_lock(&c->sess_lock);
	conn = websession_remove(&c->sessions, token, strlen(token), &found);
	csess_gone(conn, &later);
	pthread_mutex_unlock(&c->sess_lock);
	/* Our own reference keeps it open until the answer is sent. */
	(void)later;
	a->s = NULL;
	if (r->json) {
		answer_json_start(r);
		hbuf_lit(&r->body, "{\"ok\":true}\n");
		return;
	}
	snprintf(r->cookie, sizeof(r->cookie),
	         "%s=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict%s",
	         web_cookie_name(c), c->secure ? "; Secure" : "");
	r->status = 303;
	snprintf(r->location, sizeof(r->location), "/login");
	r->type = "text/plain; charset=utf-8";
	hbuf_lit(&r->body, "logged out\n");
}
