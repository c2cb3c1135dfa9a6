/* SPDX-License-Identifier: Apache-2.0 */
/* [metrics] listen's HOST:PORT (listen.h). */
#include "listen.h"

#include <stdlib.h>
#include <string.h>

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
