/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cascade-bench: drive a running cascade daemon (or, for comparison, a plain
 * forwarder or a chain of dead-lettering queues) and measure it.
 *
 *   cascade-bench run [options]      publish, consume the target, report
 *   cascade-bench forward [options]  the plain forwarder (mode forward)
 *   cascade-bench records -n N       P.series as a repeat leaves it
 *   cascade-bench records --kind scheduled -n N
 *                                    P.events with N messages scheduled
 *   cascade-bench cindex [-n N]      the console's index, in memory
 *   cascade-bench fill -n N          N messages due hours to days later
 *
 * Each message carries its id and due time in its body, so lateness is
 * measured on arrival.  CPU seconds come from /proc/PID/stat of the process
 * moving the messages (--mover-pid) and of the broker (beam.smp).
 *
 * This file is the command line and the dispatch; bench.h says which file
 * does the rest.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "duration.h"

static void
usage(FILE *fp)
{
	fprintf(
	    fp,
	    "usage: cascade-bench run [options]\n"
	    "       cascade-bench forward [-c FILE] [--hops N] "
	    "[--queue TARGET]\n"
	    "       cascade-bench ids [-n N]   bytes per id held in memory\n"
	    "       cascade-bench cron [-n N]  CPU per cron call (parse, next, "
	    "count)\n"
	    "       cascade-bench cindex [-n N]  the console's index: bytes "
	    "per message,\n"
	    "                        time to add N, pages, searches, "
	    "histogram\n"
	    "       cascade-bench records [-c FILE] [-p P] [--stream S] -n N\n"
	    "                        write N series records (one series of "
	    "every 1s)\n"
	    "                        into P.S: series (default), or cancels "
	    "as versions\n"
	    "                        before P.series wrote them\n"
	    "       cascade-bench records [-c FILE] [-p P] --kind scheduled "
	    "-n N\n"
	    "                        [--copy-bytes B] [--delivered-fraction "
	    "F] [--seed S]\n"
	    "                        write N scheduled records into "
	    "P.events in batches,\n"
	    "                        as the daemon does; the fraction F "
	    "of them also\n"
	    "                        delivered (history), the rest "
	    "waiting\n"
	    "       cascade-bench fill [-c FILE] [-p P] -n N [--dist D] "
	    "[--seed S]\n"
	    "                        [--targets T] [-q Q] [--owner-tag TAG] "
	    "[--rate R]\n"
	    "                        publish N messages to P, consuming "
	    "nothing: delays by\n"
	    "                        --dist (default loguniform:1h:30d), "
	    "message-id TAG-S-I\n"
	    "                        (TAG default the user), the user as "
	    "user-id, bodies\n"
	    "                        of 100-999 bytes, for T quorum queues "
	    "Q.t0 .. (default\n"
	    "                        5; Q default bench); one JSON line at "
	    "the end\n"
	    "\n"
	    "  -m, --mode MODE       cascade (default) | forward | dlx\n"
	    "  -n, --count N         messages (default 10000)\n"
	    "  -r, --rate R          messages per second (default: as fast "
	    "as confirms allow)\n"
	    "  -d, --delay D|LO-HI   fixed or uniform delay (default 0)\n"
	    "      --dist uniform:MIN:MAX | loguniform:MIN:MAX\n"
	    "                        each message draws its own delay "
	    "(e.g. loguniform:100ms:30s)\n"
	    "      --seed N          --dist's generator (default 1)\n"
	    "      --at D            every message due at one instant, D "
	    "after the start\n"
	    "                        (x-deliver-at): a burst due together\n"
	    "  -q, --queue NAME      target queue (default bench.target)\n"
	    "      --target-type T   its type: quorum (default) or "
	    "classic\n"
	    "  -p, --prefix P        cascade's exchange (default: config's)\n"
	    "      --hops N          hops per message, for hops/s "
	    "(default 4)\n"
	    "      --size BYTES      body size (default 16)\n"
	    "      --mover-pid PID   the daemon or forwarder, for CPU/RSS\n"
	    "      --broker-pid PID  beam.smp (default: the only one)\n"
	    "      --idle D          stop when nothing arrives for D "
	    "(default 10s)\n"
	    "      --unit D          forward/dlx: TTL of the shortest of "
	    "the hop queues\n"
	    "                        (TTLs unit*2^(hops-1) .. unit; "
	    "default 1ms)\n"
	    "      --deadline D      stop publishing after D (lost is "
	    "judged against\n"
	    "                        what was published)\n"
	    "      --reconnect D     connect again when the connection is "
	    "lost, for up\n"
	    "                        to D; publishes unconfirmed then are "
	    "in_doubt\n"
	    "      --lateness FILE   write each arrival's lateness, ms, "
	    "one a line\n"
	    "      --arrivals FILE   write when each arrival was published, "
	    "due and\n"
	    "                        received, Unix ms, \"SENT DUE "
	    "ARRIVAL\" a line\n"
	    "      --json FILE       write the results as JSON\n"
	    "      --plot FILE.png   plot the lateness distribution\n"
	    "  -c, --config FILE     broker URL from cascade's config\n");
}

/*
 * `cascade-bench run|forward|records|fill [options]`.  Exit status: 2 for a
 * bad command line (usage on stderr), 0 for --help (usage on stdout), else
 * the command's: run_measure's, forward_run's, records_write's or
 * fill_run's.
 */
int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
	    {"mode", required_argument, NULL, 'm'},
	    {"count", required_argument, NULL, 'n'},
	    {"rate", required_argument, NULL, 'r'},
	    {"delay", required_argument, NULL, 'd'},
	    {"queue", required_argument, NULL, 'q'},
	    {"prefix", required_argument, NULL, 'p'},
	    {"config", required_argument, NULL, 'c'},
	    {"hops", required_argument, NULL, 'H'},
	    {"size", required_argument, NULL, 'S'},
	    {"mover-pid", required_argument, NULL, 'M'},
	    {"broker-pid", required_argument, NULL, 'B'},
	    {"idle", required_argument, NULL, 'I'},
	    {"unit", required_argument, NULL, 'U'},
	    {"json", required_argument, NULL, 'J'},
	    {"plot", required_argument, NULL, 'P'},
	    {"target-type", required_argument, NULL, 'T'},
	    {"dist", required_argument, NULL, 'D'},
	    {"seed", required_argument, NULL, 'E'},
	    {"at", required_argument, NULL, 'A'},
	    {"stream", required_argument, NULL, 'Z'},
	    {"kind", required_argument, NULL, 'K'},
	    {"copy-bytes", required_argument, NULL, 'C'},
	    {"delivered-fraction", required_argument, NULL, 'F'},
	    {"targets", required_argument, NULL, 'G'},
	    {"owner-tag", required_argument, NULL, 'O'},
	    {"lateness", required_argument, NULL, 'L'},
	    {"arrivals", required_argument, NULL, 'W'},
	    {"deadline", required_argument, NULL, 'X'},
	    {"reconnect", required_argument, NULL, 'R'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static struct opts o;
	static char err[8192];
	const char *cmd, *why;
	int ch, count_set = 0, delay_set = 0;

	if (argc >= 2 && strcmp(argv[1], "ids") == 0)
		return ids_main(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "cron") == 0)
		return cron_main(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "cindex") == 0)
		return cindex_main(argc - 1, argv + 1);
	if (argc < 2 ||
	    (strcmp(argv[1], "run") != 0 && strcmp(argv[1], "forward") != 0 &&
	     strcmp(argv[1], "records") != 0 && strcmp(argv[1], "fill") != 0)) {
		usage(stderr);
		return 2;
	}
	cmd = argv[1];
	argv++;
	argc--;
	config_defaults(&o.cfg);
	o.count = 10000;
	o.target = "bench.target";
	o.target_type = "quorum";
	o.hops = 4;
	o.size = sizeof(struct payload);
	o.idle_ms = 10000;
	o.unit = 1;
	o.seed = 1;
	o.at_ms = -1;
	o.stream = "series";
	o.targets = 5;
	while ((ch = getopt_long(argc, argv, "m:n:r:d:q:p:c:h", longopts,
	                         NULL)) != -1) {
		switch (ch) {
		case 'm':
			if (strcmp(optarg, "cascade") == 0)
				o.mode = MODE_CASCADE;
			else if (strcmp(optarg, "forward") == 0)
				o.mode = MODE_FORWARD;
			else if (strcmp(optarg, "dlx") == 0)
				o.mode = MODE_DLX;
			else {
				fprintf(stderr, "cascade-bench: bad mode\n");
				return 2;
			}
			break;
		case 'n':
			o.count = strtoull(optarg, NULL, 10);
			count_set = 1;
			break;
		case 'r':
			o.rate = strtod(optarg, NULL);
			break;
		case 'd': {
			/* From optarg + 1: a leading '-' is no range. */
			const char *dash = strchr(optarg + 1, '-');
			size_t len =
			    dash ? (size_t)(dash - optarg) : strlen(optarg);
			if (duration_parse(optarg, len, DURATION_BARE_MS,
			                   &o.delay_lo, &why) < 0 ||
			    (dash && duration_parse(dash + 1, strlen(dash + 1),
			                            DURATION_BARE_MS,
			                            &o.delay_hi, &why) < 0)) {
				fprintf(stderr, "cascade-bench: --delay: %s\n",
				        why);
				return 2;
			}
			if (!dash)
				o.delay_hi = o.delay_lo;
			o.dist = DIST_FIXED_OR_RANGE;
			delay_set = 1;
			break;
		}
		case 'D':
			if (stats_parse_dist(&o, optarg) < 0)
				return 2;
			delay_set = 1;
			break;
		case 'E':
			o.seed = strtoull(optarg, NULL, 10);
			break;
		case 'q':
			o.target = optarg;
			o.target_set = 1;
			break;
		case 'p':
			o.prefix = optarg;
			break;
		case 'c':
			if (config_load(&o.cfg, optarg, err, sizeof(err)) < 0) {
				fputs(err, stderr);
				return 2;
			}
			break;
		case 'H':
			o.hops = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'S':
			o.size = (unsigned)strtoul(optarg, NULL, 10);
			if (o.size < sizeof(struct payload))
				o.size = sizeof(struct payload);
			break;
		case 'M':
			o.mover_pid = strtol(optarg, NULL, 10);
			break;
		case 'B':
			o.broker_pid = strtol(optarg, NULL, 10);
			break;
		case 'I':
			duration_parse(optarg, strlen(optarg), DURATION_BARE_MS,
			               &o.idle_ms, &why);
			break;
		case 'J':
			o.json = optarg;
			break;
		case 'A':
			if (duration_parse(optarg, strlen(optarg),
			                   DURATION_BARE_MS, &o.at_ms,
			                   &why) < 0) {
				fprintf(stderr, "cascade-bench: --at: %s\n",
				        why);
				return 2;
			}
			break;
		case 'U':
			if (duration_parse(optarg, strlen(optarg),
			                   DURATION_BARE_MS, &o.unit,
			                   &why) < 0 ||
			    o.unit < 1) {
				fprintf(stderr, "cascade-bench: --unit: bad\n");
				return 2;
			}
			break;
		case 'P':
			o.plot = optarg;
			break;
		case 'T':
			if (strcmp(optarg, "quorum") != 0 &&
			    strcmp(optarg, "classic") != 0) {
				fprintf(stderr, "cascade-bench: --target-type: "
				                "quorum or classic\n");
				return 2;
			}
			o.target_type = optarg;
			break;
		case 'Z':
			if (strcmp(optarg, "series") != 0 &&
			    strcmp(optarg, "cancels") != 0) {
				fprintf(stderr,
				        "cascade-bench: --stream: series "
				        "or cancels\n");
				return 2;
			}
			o.stream = optarg;
			break;
		case 'K':
			if (strcmp(optarg, "scheduled") != 0) {
				fprintf(stderr,
				        "cascade-bench: --kind: scheduled\n");
				return 2;
			}
			o.kind = optarg;
			break;
		case 'C':
			o.copy_bytes = (unsigned)strtoul(optarg, NULL, 10);
			if (o.copy_bytes > 60000) {
				fprintf(stderr, "cascade-bench: --copy-bytes: "
				                "at most 60000\n");
				return 2;
			}
			break;
		case 'F':
			o.delivered = strtod(optarg, NULL);
			if (!(o.delivered >= 0 && o.delivered <= 1)) {
				fprintf(stderr,
				        "cascade-bench: "
				        "--delivered-fraction: 0 to 1\n");
				return 2;
			}
			break;
		case 'G':
			o.targets = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'O':
			o.owner_tag = optarg;
			break;
		case 'L':
			o.lateness = optarg;
			break;
		case 'W':
			o.arrivals = optarg;
			break;
		case 'X':
		case 'R': {
			int64_t *v =
			    ch == 'X' ? &o.deadline_ms : &o.reconnect_ms;
			if (duration_parse(optarg, strlen(optarg),
			                   DURATION_BARE_MS, v, &why) < 0 ||
			    *v < 1) {
				fprintf(stderr, "cascade-bench: --%s: bad\n",
				        ch == 'X' ? "deadline" : "reconnect");
				return 2;
			}
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (getenv("CASCADE_BROKER_URL") != NULL)
		snprintf(o.cfg.broker_url, sizeof(o.cfg.broker_url), "%s",
		         getenv("CASCADE_BROKER_URL"));
	if (o.prefix == NULL)
		o.prefix = o.cfg.topology_prefix;
	if (o.hops < 1 || o.hops > 20) {
		fprintf(stderr, "cascade-bench: --hops from 1 to 20\n");
		return 2;
	}
	if (strcmp(cmd, "forward") == 0)
		return forward_run(&o);
	if (strcmp(cmd, "records") == 0)
		return records_write(&o);
	if (strcmp(cmd, "fill") == 0) {
		if (!count_set) {
			fprintf(stderr, "cascade-bench: fill needs -n N\n");
			return 2;
		}
		if (!delay_set && stats_parse_dist(&o, "loguniform:1h:30d") < 0)
			return 2;
		return fill_run(&o);
	}
	if (o.broker_pid == 0)
		o.broker_pid = proc_find_beam();
	return run_measure(&o);
}
