/* SPDX-License-Identifier: Apache-2.0 */
/*
 * [metrics] listen's HOST:PORT, apart from the HTTP server (httpd.h) so
 * that what reads the configuration (every tool) does not link
 * libmicrohttpd.  Pure code.
 */
#ifndef CASCADE_LISTEN_H
#define CASCADE_LISTEN_H

#include <stddef.h>

/*
 * Split listen into host and port; a host in brackets loses them, an empty
 * host means every interface.  0, or -1 with why.
 */
int listen_parse(const char *listen, char *host, size_t hostsize, char *port,
                 size_t portsize, const char **why);

#endif
