/* SPDX-License-Identifier: Apache-2.0 */
/*
 * httpget: a small HTTP/1.0 client, for a daemon's /metrics (status, and
 * the console's Health page), the broker's management API, and a
 * cascade-console's answers to cascade-ctl (a POST with a body, headers
 * of the caller's).  In the library so that all ask the same way, with
 * the same timeouts.
 */
#ifndef CASCADE_HTTPGET_H
#define CASCADE_HTTPGET_H

#include <stddef.h>

/*
 * GET path from host:port into a malloc'd string: the body after the
 * headers, the status code in *status.  auth, when not NULL, is the
 * base64 of "user:password" (basic authentication).  At most max bytes of
 * answer are read; each connect and read gives up after
 * HTTPGET_TIMEOUT_S.  NULL with why when there is no HTTP answer.
 */
#define HTTPGET_TIMEOUT_S 2
char *httpget_fetch(const char *host, const char *port, const char *path,
                    const char *auth, size_t max, int *status, char *why,
                    size_t whysize);
/*
 * One request of httpget_ask: a method, a body and header lines of the
 * caller's, and its own timeouts.
 */
struct httpget_req {
	const char *method; /* NULL: GET */
	const char *path;   /* with its query, encoded */
	const char
	    *headers;     /* more header lines, each ending "\r\n"; or NULL */
	const char *body; /* sent with its Content-Length; or NULL */
	size_t body_len;
	int connect_ms; /* the connect gives up after it; 0: HTTPGET_TIMEOUT_S
	                 */
	/* The answer, from the request sent to its last byte, gives up
	 * after it; 0: each read after HTTPGET_TIMEOUT_S. */
	int answer_ms;
	size_t max; /* bytes of answer read at most, headers included */
};

/*
 * q to host:port (HTTP/1.0: the server closes after its answer) into a
 * malloc'd string, NUL-terminated: the body after the headers, its length
 * in *len (when len is not NULL: a body may hold NUL bytes), the status
 * code in *status.  NULL with why when there is no HTTP answer.
 */
char *httpget_ask(const char *host, const char *port,
                  const struct httpget_req *q, int *status, size_t *len,
                  char *why, size_t whysize);
/*
 * GET path from the daemon at listen ([metrics] listen, HOST:PORT): as
 * httpget_fetch, at most max bytes; a wildcard host (empty, 0.0.0.0, ::)
 * is asked on loopback, and port 0 is refused with why.
 */
char *httpget_daemon(const char *listen, const char *path, size_t max,
                     int *status, char *why, size_t whysize);
/* GET /metrics from listen ([metrics] listen) into a malloc'd string;
 * NULL with why. */
char *httpget_metrics(const char *listen, char *why, size_t whysize);

#endif
