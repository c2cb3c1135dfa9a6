/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cascade-console: see console.h and docs/CONTRACT.md 7.11.
 *
 *   cascade-console -c /etc/cascade/cascade.ini [--listen HOST:PORT]
 *
 * This file: options, the configuration, starting the reader and the
 * web server, and stopping on SIGINT or SIGTERM.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "listen.h"
#include "log.h"
#include "stackroom.h"

static void
usage(FILE *fp)
{
	fprintf(fp,
	        "usage: " PROG " [-c FILE] [--listen HOST:PORT]\n"
	        "  a browser console and JSON API over what waits in cascade\n"
	        "  (docs/CONTRACT.md 7.11), until SIGINT or SIGTERM\n"
	        "\n"
	        "options:\n"
	        "  -c, --config FILE    cascade's config; [console] sets the "
	        "console's keys\n"
	        "  --listen HOST:PORT   where to serve, instead of [console] "
	        "listen\n"
	        "  -h, --help           this text\n");
}

/* Is host a loopback address (or name)? */
static int
loopback(const char *host)
{
	return strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
	       strcmp(host, "localhost") == 0;
}

static int
console_setup(struct console *c, const char *path, const char *listen)
{
	char err[8192], host[256], port[16];
	const char *why;

	if (path != NULL) {
		if (config_load(&c->cfg, path, err, sizeof(err)) < 0) {
			fputs(err, stderr);
			return -1;
		}
	} else if (config_load_string(&c->cfg, "environment", "", err,
	                              sizeof(err)) < 0) {
		fputs(err, stderr);
		return -1;
	}
	if (snprintf(c->listen, sizeof(c->listen), "%s",
	             listen != NULL ? listen : c->cfg.console_listen) >=
	    (int)sizeof(c->listen)) {
		fprintf(stderr, PROG ": listen: over 255 bytes\n");
		return -1;
	}
	if (listen_parse(c->listen, host, sizeof(host), port, sizeof(port),
	                 &why) < 0) {
		fprintf(stderr, PROG ": listen %s: %s\n", c->listen, why);
		return -1;
	}
	if (c->cfg.console_public_url[0] != '\0' &&
	    ((strncmp(c->cfg.console_public_url, "https://", 8) != 0 &&
	      strncmp(c->cfg.console_public_url, "http://", 7) != 0) ||
	     strstr(c->cfg.console_public_url, "://")[3] == '\0' ||
	     strstr(c->cfg.console_public_url, "://")[3] == '/')) {
		fprintf(stderr,
		        PROG ": %s: [console] public_url: http:// or https:// "
		             "and a host\n",
		        path != NULL ? path : "environment");
		return -1;
	}
	c->secure = strncmp(c->cfg.console_public_url, "https://", 8) == 0;
	if (!loopback(host) && !c->secure) {
		fprintf(stderr,
		        PROG ": listen %s is not a loopback address: the "
		             "console receives broker passwords, so put it "
		             "behind TLS and set [console] public_url = "
		             "https://...\n",
		        c->listen);
		return -1;
	}
	if (!config_events(&c->cfg)) {
		fprintf(stderr, PROG ": [events] enabled = no: there is "
		                     "nothing to show\n");
		return -1;
	}
	if (topology_of_config(&c->topo, &c->ladder, &c->cfg, &why) < 0) {
		fprintf(stderr, PROG ": %s\n", why);
		return -1;
	}
	if (config_broker_user(&c->cfg, c->own_user, sizeof(c->own_user)) < 0) {
		fprintf(stderr, PROG ": [broker] url: no user\n");
		return -1;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->changed, NULL);
	pthread_mutex_init(&c->sess_lock, NULL);
	idmap_init(&c->series);
	requests_init(&c->req);
	if (cindex_init(&c->ix, (uint32_t)c->cfg.console_max_waiting, 0) < 0 ||
	    (c->ring = calloc(CONSOLE_PARKED_RING, sizeof(*c->ring))) == NULL ||
	    ratelimit_init(&c->rl, 0) < 0 ||
	    websession_init(&c->sessions, (size_t)c->cfg.console_max_sessions,
	                    c->cfg.console_session_idle,
	                    c->cfg.console_session_max, err, sizeof(err)) < 0) {
		fprintf(stderr, PROG ": %s\n", "cannot set up: out of memory");
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"listen", required_argument, NULL, 'l'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static struct console c;
	const char *path = NULL, *listen = NULL;
	char err[1024];
	sigset_t sigs;
	int opt, sig;

	while ((opt = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			path = optarg;
			break;
		case 'l':
			listen = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	/* Before any record is decoded (stackroom.h). */
	(void)stackroom_raise(STACKROOM_BYTES);
	if (console_setup(&c, path, listen) < 0)
		return 1;
	log_init((enum log_level)c.cfg.log_level, c.cfg.log_format == 1);
	/* Every thread started below inherits the mask: signals come to
	 * sigwait here, and a closed socket is an error, not a death. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (reader_start(&c) < 0) {
		fprintf(stderr, PROG ": cannot start the reader thread\n");
		return 1;
	}
	if (web_start(&c, err, sizeof(err)) < 0) {
		log_error("console_failed", " reason=\"%s\"", err);
		reader_stop(&c);
		return 1;
	}
	log_info("console_listening", " port=%d url=%s user=%s", c.port,
	         c.origin, c.own_user);
	while (sigwait(&sigs, &sig) != 0)
		;
	log_info("console_stopping", " signal=%d", sig);
	atomic_store(&c.stop, 1);
	web_stop(&c);
	reader_stop(&c);
	/* All of it, so that a leak checker sees only real leaks. */
	cindex_free(&c.ix);
	requests_free(&c.req);
	idmap_free(&c.series, free);
	free(c.ring);
	ratelimit_free(&c.rl);
	topology_free(&c.topo);
	return 0;
}
