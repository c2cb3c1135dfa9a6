/* SPDX-License-Identifier: Apache-2.0 */
/*
 * httpget: a small HTTP/1.0 client (include/httpget.h).  Every connect
 * and read has a timeout: a caller never hangs on a listener that does
 * not answer.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "httpget.h"
#include "listen.h"

#define METRICS_MAX (3 * 1024 * 1024) /* the daemon sends up to 2 MiB */

static int
httpget_connect(const struct addrinfo *ai)
{
	struct timeval tv = {HTTPGET_TIMEOUT_S, 0};
	int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol), e;

	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

char *
httpget_fetch(const char *host, const char *port, const char *path,
              const char *auth, size_t max, int *status, char *why,
              size_t whysize)
{
	char req[2048];
	struct addrinfo hints, *res = NULL, *ai;
	char *buf = NULL, *body;
	size_t len = 0;
	ssize_t n = 0;
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
		if ((fd = httpget_connect(ai)) < 0)
			err = errno;
	freeaddrinfo(res);
	if (fd < 0) {
		/* connect gives up after SO_SNDTIMEO with EINPROGRESS */
		if (err == EINPROGRESS || err == EAGAIN || err == ETIMEDOUT)
			snprintf(why, whysize, "no answer within %d s",
			         HTTPGET_TIMEOUT_S);
		else
			snprintf(why, whysize, "%s", strerror(err));
		return NULL;
	}
	rc = snprintf(req, sizeof(req),
	              "GET %s HTTP/1.0\r\nHost: %s%s%s:%s\r\n%s%s%s\r\n", path,
	              strchr(host, ':') ? "[" : "", host,
	              strchr(host, ':') ? "]" : "", port,
	              auth ? "Authorization: Basic " : "", auth ? auth : "",
	              auth ? "\r\n" : "");
	if (rc < 0 || (size_t)rc >= sizeof(req) ||
	    send(fd, req, (size_t)rc, MSG_NOSIGNAL) != rc ||
	    (buf = malloc(max + 1)) == NULL) {
		snprintf(why, whysize, "cannot ask");
		goto fail;
	}
	while (len < max && (n = read(fd, buf + len, max - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	if (len == 0) {
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			snprintf(why, whysize, "no answer within %d s",
			         HTTPGET_TIMEOUT_S);
		else
			snprintf(why, whysize, "no answer");
		goto fail;
	}
	body = strstr(buf, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.", 7) != 0 || len < 12 || buf[8] != ' ' ||
	    sscanf(buf + 9, "%3d", status) != 1 || body == NULL) {
		snprintf(why, whysize, "not an HTTP answer");
		goto fail;
	}
	memmove(buf, body + 4, strlen(body + 4) + 1);
	close(fd);
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
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
