/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What web.c and its two files share: web.c serves each request and
 * passes it through the gate, web_routes.c names the handler of its path,
 * web_login.c holds the sessions and the logins.  They call down, never
 * up (make check-calls): web.c into web_routes.c and web_login.c,
 * web_routes.c into web_login.c (its table names login and logout).  Only
 * those three include it.
 */
#ifndef CASCADE_CONSOLE_WEB_INT_H
#define CASCADE_CONSOLE_WEB_INT_H

#include "console.h"
#include "webgate.h"

struct MHD_Connection;

/* Routes. */
enum route_who { WHO_ANYONE, WHO_SESSION };
struct webroute {
	const char *path;   /* exact, or a prefix ending in '/' with a tail */
	const char *suffix; /* after the id: NULL none, "" the id alone */
	enum webgate_class class;
	enum route_who who;
	void (*fn)(struct ask *, struct answer *);
};

/* web_routes.c: the route for path, with the id of a prefix route in
 * a->rest; NULL when none. */
const struct webroute *web_route(struct ask *a, const char *path);

/* web_login.c: what names a session in a request (its cookie, or a Bearer
 * token), the session a request names, and login and logout. */
const char *web_header(struct MHD_Connection *conn, const char *name);
const char *web_cookie_name(const struct console *c);
/* The Bearer token of an Authorization header, or NULL. */
const char *web_bearer(struct MHD_Connection *conn);
/* A session's connection closed (no request holds it any more). */
void csess_close(struct csess *cs);
/* A request's reference to a session's connection released. */
void csess_put(struct console *c, struct csess *cs);
/* Expired sessions out, their connections closed. */
void web_sweep(struct console *c, int64_t now);
/* The session the request names, referenced into a; why when none. */
void web_session(struct ask *a, const char *token, const char **why);
void route_login(struct ask *a, struct answer *r);
void route_logout(struct ask *a, struct answer *r);

#endif
