/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libmicrohttpd in "external polling" mode with its own epoll set: libev
 * watches that one descriptor, and a timer covers MHD's connection timeouts.
 */
#include "httpd.h"
#include "listen.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* /metrics with 64 shards of 64 levels and a 200-character prefix: 1.3 MB */
#define HTTPD_BODY_MAX (2 * 1024 * 1024)
#define HTTPD_CONNECTIONS 32
#define HTTPD_TIMEOUT_S 10

struct httpd {
	struct ev_loop *loop;
	struct MHD_Daemon *mhd;
	ev_io io;
	ev_timer timer;
	httpd_handler handler;
	void *ctx;
	char *body;
	int port;
};

static void httpd_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void
httpd_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[256];
	size_t n;

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strcspn(line, "\r\n");
	line[n] = '\0';
	log_warn("http_error", " reason=\"%s\"", line);
}

static enum MHD_Result
httpd_answer(void *cls, struct MHD_Connection *conn, const char *url,
             const char *method, const char *version, const char *upload,
             size_t *upload_size, void **con_cls)
{
	struct httpd *h = cls;
	struct MHD_Response *resp;
	const char *type = "text/plain; charset=utf-8";
	enum MHD_Result ret;
	int status = 200, len;

	(void)version;
	(void)upload;
	(void)con_cls;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		status = 405;
		len = snprintf(h->body, HTTPD_BODY_MAX, "GET only\n");
	} else if (*upload_size != 0) {
		status = 400;
		len = snprintf(h->body, HTTPD_BODY_MAX, "no body expected\n");
	} else {
		len = h->handler(h->ctx, url, h->body, HTTPD_BODY_MAX, &status,
		                 &type);
		if (len < 0) {
			status = 500;
			len = snprintf(h->body, HTTPD_BODY_MAX,
			               "response too large\n");
		}
	}
	resp = MHD_create_response_from_buffer((size_t)len, h->body,
	                                       MHD_RESPMEM_MUST_COPY);
	if (resp == NULL)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == 405)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
		                        "GET, HEAD");
	ret = MHD_queue_response(conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Run MHD, then arm the timer for its next timeout (0: more to do now). */
static void
httpd_run(struct httpd *h)
{
	MHD_UNSIGNED_LONG_LONG ms;

	MHD_run(h->mhd);
	ev_timer_stop(h->loop, &h->timer);
	if (MHD_get_timeout(h->mhd, &ms) == MHD_YES) {
		ev_timer_set(&h->timer, (double)ms / 1000.0, 0.);
		ev_timer_start(h->loop, &h->timer);
	}
}

static void
on_httpd_io(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	httpd_run((struct httpd *)((char *)w - offsetof(struct httpd, io)));
}

static void
on_httpd_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	httpd_run((struct httpd *)((char *)w - offsetof(struct httpd, timer)));
}

struct httpd *
httpd_start(struct ev_loop *loop, const char *listen, httpd_handler handler,
            void *ctx, char *err, size_t errsize)
{
	const union MHD_DaemonInfo *info;
	struct httpd *h;
	unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	int fd, port, v6;

	/* Our own socket (listen.h): MHD_USE_DUAL_STACK would not fall
	 * back to IPv4 on a host without IPv6. */
	fd = listen_open(listen, 0, &port, &v6, err, errsize);
	if (fd < 0)
		return NULL;
	h = calloc(1, sizeof(*h));
	if (h == NULL || (h->body = malloc(HTTPD_BODY_MAX)) == NULL) {
		free(h);
		close(fd);
		snprintf(err, errsize, "out of memory");
		return NULL;
	}
	h->loop = loop;
	h->handler = handler;
	h->ctx = ctx;
	h->port = port;
	if (v6)
		flags |= MHD_USE_IPv6;
	h->mhd = MHD_start_daemon(
	    flags, 0, NULL, NULL, httpd_answer, h,
	    /* first, or MHD logs the other options' errors itself */
	    MHD_OPTION_EXTERNAL_LOGGER, httpd_mhd_log, NULL,
	    MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned)HTTPD_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned)HTTPD_TIMEOUT_S, MHD_OPTION_END);
	if (h->mhd == NULL) {
		close(fd);
		snprintf(err, errsize, "cannot serve on %s", listen);
		free(h->body);
		free(h);
		return NULL;
	}
	info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (info == NULL) {
		snprintf(err, errsize, "libmicrohttpd has no epoll support");
		httpd_stop(h);
		return NULL;
	}
	ev_io_init(&h->io, on_httpd_io, info->epoll_fd, EV_READ);
	ev_io_start(loop, &h->io);
	ev_init(&h->timer, on_httpd_timer);
	return h;
}

int
httpd_port(const struct httpd *h)
{
	return h->port;
}

void
httpd_stop(struct httpd *h)
{
	if (h == NULL)
		return;
	ev_io_stop(h->loop, &h->io);
	ev_timer_stop(h->loop, &h->timer);
	MHD_stop_daemon(h->mhd);
	free(h->body);
	free(h);
}
