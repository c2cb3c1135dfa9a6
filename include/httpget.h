/* SPDX-License-Identifier: Apache-2.0 */
/*
 * httpget: a small HTTP/1.0 GET client, for a daemon's /metrics (status,
 * and the console's Health page to come) and the broker's management API.
 * In the library so that both ask the daemons the same way, with the same
 * timeouts.
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
