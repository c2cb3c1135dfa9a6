/* SPDX-License-Identifier: Apache-2.0 */
/* cascade: per-message delay for any AMQP publisher on a stock RabbitMQ. */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "daemon.h"
#include "duration.h"
#include "ladder.h"
#include "log.h"
#include "pace.h"
#include "stackroom.h"
#include "topology.h"
#include "version.h"

static void
usage(FILE *fp)
{
	fprintf(fp,
	        "usage: cascade -c FILE [--check]\n"
	        "       cascade --version | --help\n"
	        "\n"
	        "  -c, --config FILE  configuration file (INI)\n"
	        "  -n, --check        validate FILE, print the ladder, exit\n"
	        "  -V, --version      print the version and exit\n"
	        "  -h, --help         print this help and exit\n"
	        "\n"
	        "CASCADE_BROKER_URL, when set, overrides [broker] url.\n");
}

/* --check: the ladder, one level a line, and a worked hop count. */
static void
print_ladder(const struct config *cfg)
{
	struct ladder l;
	struct topology t;
	const char *why;
	char ttl[32], maxd[32];
	size_t hops;
	int short_ladder;

	if (ladder_init(&l, cfg->topology_resolution, cfg->topology_factor,
	                config_levels(cfg), &why) < 0)
		return; /* config_load already reported it */
	if (topology_names(&t, cfg->topology_prefix, &l,
	                   (unsigned)cfg->topology_shards,
	                   (unsigned)cfg->topology_drain_shards) < 0)
		return;
	printf("exchange %s -> queue %s; errors to %s\n", t.exchange, t.ingress,
	       t.error);
	for (unsigned s = 0; s < t.shards; s++) {
		if (t.shards > 1)
			printf("shard %u%s: ", s,
			       config_shard_consumed(cfg, s)
			           ? ""
			           : " (not consumed here)");
		printf("expired messages return to %s\n", t.ret[s]);
		for (unsigned k = 0; k < l.levels; k++) {
			duration_format(l.ttl[k], ttl, sizeof(ttl));
			printf("level %2u  queue %-40s ttl %-10s (%" PRId64
			       " ms)\n",
			       k, topology_delay(&t, s, k), ttl, l.ttl[k]);
		}
	}
	for (unsigned i = 0; i < t.drains; i++)
		printf("draining %s (a former layout's)\n", t.drain[i]);
	if (cfg->topology_mode != WAIT_LADDER) {
		char win[32];
		duration_format(cfg->topology_native_window, win, sizeof(win));
		printf(
		    "mode %s: on RabbitMQ 4.3 or later the last %s of a "
		    "delay waits in %s%s%s\n",
		    cfg->topology_mode == WAIT_AUTO ? "auto" : "native", win,
		    t.hold[0], t.shards > 1 ? " (one per shard)" : "",
		    cfg->topology_mode == WAIT_AUTO
		        ? ", once a canary proves it (in the background; the "
		          "ladder until then)"
		        : "");
	}
	topology_free(&t);
	short_ladder = ladder_short(&l, cfg->router_max_delay, &hops);
	duration_format(cfg->router_max_delay, maxd, sizeof(maxd));
	printf("max_delay %s takes %zu hops\n", maxd, hops);
	if (short_ladder)
		printf("warning: the top level is far below max_delay, which "
		       "it takes many times; [topology] levels = 0 gives as "
		       "many levels as reach it\n");
}

/* --check: the paced targets, as [target ...] sections name them. */
static void
print_paces(const struct config *cfg)
{
	for (size_t i = 0; i < cfg->pace.n; i++) {
		const struct pace_target *t = &cfg->pace.t[i];
		char rate[32];

		pace_format_rate(t->per_s, rate, sizeof(rate));
		printf("target %.*s%s%.*s%s: pace %s across all daemons\n",
		       (int)t->exchange_len, t->exchange, t->any_key ? "" : "/",
		       (int)t->routing_key_len, t->routing_key,
		       t->any_key ? " (every routing key)" : "", rate);
	}
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"check", no_argument, NULL, 'n'},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static struct config cfg;
	static char err[8192];
	const char *path = NULL;
	int check = 0, ch;

	/* Before any message is decoded (stackroom.h). */
	(void)stackroom_raise(STACKROOM_BYTES);
	/* A log reader that went away (a pipe to a tee, a container's log
	 * driver restarted) costs its log lines, not the messages in flight:
	 * a write to a closed stderr fails with EPIPE instead of killing the
	 * daemon before its orderly stop.  Sockets already write with
	 * MSG_NOSIGNAL (rabbitmq-c, libmicrohttpd, src/broker/amqp1.c). */
	signal(SIGPIPE, SIG_IGN);
	while ((ch = getopt_long(argc, argv, "c:nVh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'n':
			check = 1;
			break;
		case 'V':
			printf("cascade %s\n", CASCADE_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || path == NULL) {
		usage(stderr);
		return 2;
	}
	if (config_load(&cfg, path, err, sizeof(err)) < 0) {
		fputs(err, stderr);
		if (check)
			fprintf(stderr, "%s: configuration has errors\n", path);
		return 1;
	}
	if (check) {
		print_ladder(&cfg);
		print_paces(&cfg);
		printf("configuration OK\n");
		return 0;
	}
	log_init((enum log_level)cfg.log_level,
	         cfg.log_format == LOG_FORMAT_JSON);
	log_info("starting", " version=%s config=%s", CASCADE_VERSION, path);
	return daemon_run(&cfg);
}
