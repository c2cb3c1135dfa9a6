/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small HTTP server for /metrics and /healthz, on libmicrohttpd driven from
 * the daemon's libev loop (one thread: the handler reads the daemon's
 * counters without locks).
 */
#ifndef CASCADE_HTTPD_H
#define CASCADE_HTTPD_H

#include <ev.h>
#include <stddef.h>

struct httpd;

/*
 * Answer a GET for path: write the body into buf (at most size bytes), set
 * *status and *content_type, return the body's length or -1 (answered 500).
 */
typedef int (*httpd_handler)(void *ctx, const char *path, char *buf,
                             size_t size, int *status,
                             const char **content_type);

/*
 * Listen on listen ("HOST:PORT", "[V6]:PORT") and serve handler from loop.
 * Returns NULL with the reason in err.
 */
struct httpd *httpd_start(struct ev_loop *loop, const char *listen,
                          httpd_handler handler, void *ctx, char *err,
                          size_t errsize);

void httpd_stop(struct httpd *h);

/* The TCP port h listens on: the one chosen when listen said port 0. */
int httpd_port(const struct httpd *h);

#endif
