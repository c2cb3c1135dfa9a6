/* SPDX-License-Identifier: Apache-2.0 */
/* [metrics] listen's HOST:PORT, and the socket for it (listen.h). */
#include "listen.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int
listen_parse(const char *listen, char *host, size_t hostsize, char *port,
             size_t portsize, const char **why)
{
	const char *colon = strrchr(listen, ':');
	const char *h = listen, *p;
	size_t hlen;
	char *end;
	long n;

	if (colon == NULL) {
		*why = "expected HOST:PORT";
		return -1;
	}
	hlen = (size_t)(colon - listen);
	if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
		h++;
		hlen -= 2;
	} else if (memchr(h, ':', hlen) != NULL) {
		*why = "an IPv6 address goes in brackets: [::1]:9464";
		return -1;
	}
	p = colon + 1;
	n = strtol(p, &end, 10);
	if (*p < '0' || *p > '9' || *end != '\0' || n < 0 || n > 65535) {
		*why = "port must be a number from 0 (any free one) to 65535";
		return -1;
	}
	if (hlen >= hostsize || strlen(p) >= portsize) {
		*why = "too long";
		return -1;
	}
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	memcpy(port, p, strlen(p) + 1);
	return 0;
}

/*
 * A socket listening on sa.  IPV6_V6ONLY is set either way, not left to
 * the system's default (net.ipv6.bindv6only).  -1 with errno.
 */
static int
listen_bind(const struct sockaddr *sa, socklen_t salen, int v6only)
{
	int fd, one = 1, e;

	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    (sa->sa_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only,
	                sizeof(v6only)) < 0) ||
	    bind(fd, sa, salen) < 0 || listen(fd, SOMAXCONN) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/*
 * Every interface of both families: one IPv6 socket on :: that takes
 * IPv4 as well (as ::ffff:a.b.c.d), or 0.0.0.0 on a host without IPv6
 * (a kernel without it, or with it turned off).  -1 with errno.
 */
static int
listen_any(uint16_t port)
{
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;
	int fd;

	memset(&s6, 0, sizeof(s6));
	s6.sin6_family = AF_INET6;
	s6.sin6_addr = in6addr_any;
	s6.sin6_port = htons(port);
	fd = listen_bind((const struct sockaddr *)&s6, sizeof(s6), 0);
	if (fd >= 0 || (errno != EAFNOSUPPORT && errno != EADDRNOTAVAIL))
		return fd;
	memset(&s4, 0, sizeof(s4));
	s4.sin_family = AF_INET;
	s4.sin_addr.s_addr = htonl(INADDR_ANY);
	s4.sin_port = htons(port);
	return listen_bind((const struct sockaddr *)&s4, sizeof(s4), 0);
}

int
listen_open(const char *listen, int numeric, int *port, int *v6, char *err,
            size_t errsize)
{
	struct addrinfo hints, *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[256], serv[16];
	const char *why;
	int fd, rc, e;

	if (listen_parse(listen, host, sizeof(host), serv, sizeof(serv), &why) <
	    0) {
		snprintf(err, errsize, "%s: %s", listen, why);
		return -1;
	}
	if (host[0] == '\0') {
		fd = listen_any((uint16_t)strtoul(serv, NULL, 10));
	} else {
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV |
		                 (numeric ? AI_NUMERICHOST : 0);
		rc = getaddrinfo(host, serv, &hints, &ai);
		if (rc != 0) {
			snprintf(err, errsize, "%s: %s", listen,
			         gai_strerror(rc));
			return -1;
		}
		/* An address is its own family only: [::] is IPv6's. */
		fd = listen_bind(ai->ai_addr, ai->ai_addrlen, 1);
		e = errno;
		freeaddrinfo(ai);
		errno = e;
	}
	if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		e = errno;
		if (fd >= 0)
			close(fd);
		snprintf(err, errsize, "cannot listen on %s: %s", listen,
		         strerror(e));
		return -1;
	}
	*v6 = ss.ss_family == AF_INET6;
	*port = *v6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
	            : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}
