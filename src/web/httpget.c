/* SPDX-License-Identifier: Apache-2.0 */
/*
 * httpget: a small HTTP/1.0 client (include/httpget.h).  Every connect
 * and read has a timeout: a caller never hangs on a listener that does
 * not answer.
 */
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "httpget.h"
#include "listen.h"

#define METRICS_MAX (3 * 1024 * 1024) /* the daemon sends up to 2 MiB */

/* A socket timeout of ms (at least 1 ms: 0 would be none). */
static int
httpget_timeout(int fd, int opt, int64_t ms)
{
	struct timeval tv;

	if (ms < 1)
		ms = 1;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000 * 1000);
	return setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv));
}

/* Connected to ai within connect_ms (connect gives up after
 * SO_SNDTIMEO), or -1 with errno. */
static int
httpget_connect(const struct addrinfo *ai, int connect_ms)
{
	int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol), e;

	if (fd < 0)
		return -1;
	if (httpget_timeout(fd, SO_RCVTIMEO, HTTPGET_TIMEOUT_S * 1000) < 0 ||
	    httpget_timeout(fd, SO_SNDTIMEO, connect_ms) < 0 ||
	    connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* "no answer within 2 s" (or 500 ms) into why. */
static void
httpget_no_answer(int ms, char *why, size_t whysize)
{
	if (ms % 1000 == 0)
		snprintf(why, whysize, "no answer within %d s", ms / 1000);
	else
		snprintf(why, whysize, "no answer within %d ms", ms);
}

static int64_t
httpget_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The request's bytes, in a malloc'd string of *n bytes; NULL out of
 * memory. */
static char *
httpget_request(const char *host, const char *port, const struct httpget_req *q,
                size_t *n)
{
	int v6 = strchr(host, ':') != NULL;
	size_t size = strlen(q->path) + strlen(host) + strlen(port) +
	              (q->headers ? strlen(q->headers) : 0) + q->body_len + 128;
	char *req = malloc(size);
	int rc;

	if (req == NULL)
		return NULL;
	rc = snprintf(req, size, "%s %s HTTP/1.0\r\nHost: %s%s%s:%s\r\n%s",
	              q->method ? q->method : "GET", q->path, v6 ? "[" : "",
	              host, v6 ? "]" : "", port, q->headers ? q->headers : "");
	if (rc >= 0 && q->body != NULL)
		rc += snprintf(req + rc, size - (size_t)rc,
		               "Content-Length: %zu\r\n", q->body_len);
	if (rc < 0 || (size_t)rc + 2 + q->body_len >= size) {
		free(req);
		return NULL;
	}
	memcpy(req + rc, "\r\n", 2);
	rc += 2;
	if (q->body_len > 0)
		memcpy(req + rc, q->body, q->body_len);
	*n = (size_t)rc + q->body_len;
	return req;
}

char *
httpget_ask(const char *host, const char *port, const struct httpget_req *q,
            int *status, size_t *lenp, char *why, size_t whysize)
{
	struct addrinfo hints, *res = NULL, *ai;
	char *buf = NULL, *req = NULL, *body;
	size_t len = 0, reqlen = 0;
	ssize_t n = 0;
	int64_t deadline = 0;
	int connect_ms =
	    q->connect_ms > 0 ? q->connect_ms : HTTPGET_TIMEOUT_S * 1000;
	int fd = -1, rc, err = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if ((rc = getaddrinfo(host, port, &hints, &res)) != 0) {
		snprintf(why, whysize, "%s", gai_strerror(rc));
		return NULL;
	}
	/* Every address in turn: "localhost" can be ::1 first, with the
	 * server on 127.0.0.1 only. */
	for (ai = res; ai != NULL && fd < 0; ai = ai->ai_next)
		if ((fd = httpget_connect(ai, connect_ms)) < 0)
			err = errno;
	freeaddrinfo(res);
	if (fd < 0) {
		/* connect gives up after SO_SNDTIMEO with EINPROGRESS */
		if (err == EINPROGRESS || err == EAGAIN || err == ETIMEDOUT)
			httpget_no_answer(connect_ms, why, whysize);
		else
			snprintf(why, whysize, "%s", strerror(err));
		return NULL;
	}
	if (q->answer_ms > 0)
		deadline = httpget_mono_ms() + q->answer_ms;
	if ((req = httpget_request(host, port, q, &reqlen)) == NULL ||
	    httpget_timeout(fd, SO_SNDTIMEO,
	                    q->answer_ms > 0 ? q->answer_ms
	                                     : HTTPGET_TIMEOUT_S * 1000) < 0 ||
	    send(fd, req, reqlen, MSG_NOSIGNAL) != (ssize_t)reqlen ||
	    (buf = malloc(q->max + 1)) == NULL) {
		snprintf(why, whysize, "cannot ask");
		goto fail;
	}
	while (len < q->max) {
		if (deadline != 0 &&
		    httpget_timeout(fd, SO_RCVTIMEO,
		                    deadline - httpget_mono_ms()) < 0)
			break;
		if ((n = read(fd, buf + len, q->max - len)) <= 0)
			break;
		len += (size_t)n;
		if (deadline != 0 && httpget_mono_ms() >= deadline) {
			n = -1;
			errno = EAGAIN;
			break;
		}
	}
	buf[len] = '\0';
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
	    (len == 0 || deadline != 0)) {
		httpget_no_answer(q->answer_ms > 0 ? q->answer_ms
		                                   : HTTPGET_TIMEOUT_S * 1000,
		                  why, whysize);
		goto fail;
	}
	if (len == 0) {
		snprintf(why, whysize, "no answer");
		goto fail;
	}
	body = strstr(buf, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.", 7) != 0 || len < 12 || buf[8] != ' ' ||
	    sscanf(buf + 9, "%3d", status) != 1 || body == NULL) {
		snprintf(why, whysize, "not an HTTP answer");
		goto fail;
	}
	body += 4;
	len -= (size_t)(body - buf);
	memmove(buf, body, len + 1);
	if (lenp != NULL)
		*lenp = len;
	free(req);
	close(fd);
	return buf;
fail:
	free(req);
	free(buf);
	close(fd);
	return NULL;
}

char *
httpget_fetch(const char *host, const char *port, const char *path,
              const char *auth, size_t max, int *status, char *why,
              size_t whysize)
{
	struct httpget_req q;
	char headers[1024];

	memset(&q, 0, sizeof(q));
	q.path = path;
	q.max = max;
	if (auth != NULL) {
		if (snprintf(headers, sizeof(headers),
		             "Authorization: Basic %s\r\n",
		             auth) >= (int)sizeof(headers)) {
			snprintf(why, whysize, "cannot ask");
			return NULL;
		}
		q.headers = headers;
	}
	return httpget_ask(host, port, &q, status, NULL, why, whysize);
}

char *
httpget_daemon(const char *listen, const char *path, size_t max, int *status,
               char *why, size_t whysize)
{
	char host[256], port[16];
	const char *perr;

	if (listen_parse(listen, host, sizeof(host), port, sizeof(port),
	                 &perr) < 0) {
		snprintf(why, whysize, "%s", perr);
		return NULL;
	}
	if (strcmp(port, "0") == 0) {
		snprintf(why, whysize,
		         "port 0: the daemon logs the port it "
		         "took (msg=metrics_listening)");
		return NULL;
	}
	/* A daemon listening on every interface answers on loopback. */
	if (host[0] == '\0' || strcmp(host, "0.0.0.0") == 0)
		snprintf(host, sizeof(host), "127.0.0.1");
	else if (strcmp(host, "::") == 0)
		snprintf(host, sizeof(host), "::1");
	return httpget_fetch(host, port, path, NULL, max, status, why, whysize);
}

char *
httpget_metrics(const char *listen, char *why, size_t whysize)
{
	char *text;
	int status = 0;

	text = httpget_daemon(listen, "/metrics", METRICS_MAX, &status, why,
	                      whysize);
	if (text == NULL) {
		char detail[128];
		snprintf(detail, sizeof(detail), "%.120s", why);
		snprintf(why, whysize, "no daemon answers there (%s)", detail);
		return NULL;
	}
	if (status != 200) {
		snprintf(why, whysize, "no /metrics there");
		free(text);
		return NULL;
	}
	return text;
}
