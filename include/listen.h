/* SPDX-License-Identifier: Apache-2.0 */
/*
 * [metrics] listen's and [console] listen's HOST:PORT, apart from the HTTP
 * servers (httpd.h, the console's web.c) so that what reads the
 * configuration (every tool) does not link libmicrohttpd.  listen_parse is
 * pure code; listen_open makes the socket both servers hand to
 * libmicrohttpd, so that both listen alike.
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

/*
 * A TCP socket listening on listen (as listen_parse takes it), close-on-
 * exec, with SO_REUSEADDR; *port is the port it took (port 0: any free
 * one), *v6 whether it is an IPv6 socket.  An empty host is every
 * interface of both families: one IPv6 socket that takes IPv4 too, or
 * IPv4 alone on a host without IPv6.  An address is its own family only:
 * 0.0.0.0 every IPv4 interface, [::] every IPv6 one.  numeric refuses
 * host names (no resolver).  -1 with the reason in err.
 */
int listen_open(const char *listen, int numeric, int *port, int *v6, char *err,
                size_t errsize);

#endif
