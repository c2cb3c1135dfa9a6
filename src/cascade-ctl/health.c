/* SPDX-License-Identifier: Apache-2.0 */
/*
 * health: the daemon's /healthz, for a container's health check, a
 * Kubernetes exec probe or a script, with no HTTP client of its own:
 * exit 0 when the daemon answers 200 (connected and consuming), 1 when it
 * answers anything else or nothing (docs/CONTRACT.md 6.2).  It asks the
 * daemon at [metrics] listen, or at --metrics HOST:PORT; a wildcard host
 * (empty, 0.0.0.0, [::]) is asked on loopback.  It opens no broker
 * connection: the daemon's own answer is the verdict.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "httpget.h"
#include "listen.h"

#define HEALTH_MAX 4096 /* "ok" or one reason, a line */

static struct {
	const char *metrics;
} opts;

const struct ctl_option health_options[] = {
    {"metrics", 0, 1},
    {NULL, 0, 0},
};

int
health_option(struct ctl *c, const char *name, const char *arg)
{
	char host[256], port[16];
	const char *why;

	(void)c;
	(void)name;
	if (listen_parse(arg, host, sizeof(host), port, sizeof(port), &why) <
	    0) {
		fprintf(stderr, PROG ": --metrics '%s': %s\n", arg, why);
		return -1;
	}
	opts.metrics = arg;
	return 0;
}

int
health_run(struct ctl *c)
{
	const char *listen =
	    opts.metrics != NULL ? opts.metrics : c->cfg.metrics_listen;
	char why[256];
	char *body;
	int status = 0;
	size_t n;

	if (listen[0] == '\0') {
		fprintf(stderr,
		        PROG ": health: [metrics] listen is empty: the daemon "
		             "serves no /healthz (give --metrics HOST:PORT)\n");
		return 1;
	}
	body = httpget_daemon(listen, "/healthz", HEALTH_MAX, &status, why,
	                      sizeof(why));
	if (body == NULL) {
		fprintf(stderr, PROG ": health: no daemon answers at %s: %s\n",
		        listen, why);
		return 1;
	}
	/* The body as the daemon wrote it, on one line, printable bytes
	 * only: it is a container runtime's health log. */
	for (unsigned char *p = (unsigned char *)body; *p != '\0'; p++)
		if (*p < 0x20 || *p == 0x7f)
			*p = ' ';
	n = strlen(body);
	while (n > 0 && body[n - 1] == ' ')
		body[--n] = '\0';
	if (status == 200) {
		printf("%s\n", body);
	} else {
		printf("unhealthy (HTTP %d): %s\n", status, body);
	}
	free(body);
	return status == 200 ? 0 : 1;
}
