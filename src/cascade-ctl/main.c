/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cascade-ctl: look at a running cascade's queues, and send parked
 * messages back once the cause of their parking is fixed; list the
 * messages waiting and cancel them.
 *
 *   cascade-ctl -c /etc/cascade/cascade.ini status [--management URL] [--json]
 *   cascade-ctl -c cascade.ini errors [--limit N] [--json]
 *   cascade-ctl -c cascade.ini requeue [--limit N] [--reason TEXT] [--dry-run]
 *   cascade-ctl -c cascade.ini list [--target EXCHANGE[/KEY]]
 *                               [--due-before T] [--due-after T] [--series]
 *                               [--from-stream] [--json]
 *   cascade-ctl -c cascade.ini cancel [--park] [--force] [--from-stream] ID...
 *   cascade-ctl -c cascade.ini reschedule (--delay D | --at T) [--force] ID...
 *   cascade-ctl -c cascade.ini pause|resume [--target EXCHANGE[/KEY]] [ID...]
 *   cascade-ctl -c cascade.ini console [--listen HOST:PORT]
 *   cascade-ctl -c cascade.ini health [--metrics HOST:PORT]
 *
 * This file is the grammar and the dispatch: the command table, the
 * common options (-c, -h), and the session's life around one command.
 * Each command is a file of its own with its own options (ctl.h).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "duration.h"
#include "stackroom.h"

static const struct ctl_command commands[] = {
    {"status", status_options, status_option, NULL, status_run, 1, 1},
    {"errors", errors_options, errors_option, NULL, errors_run, 1, 1},
    {"requeue", requeue_options, requeue_option, NULL, requeue_run, 1, 1},
    {"list", list_options, list_option, NULL, list_run, 1, 1},
    {"cancel", cancel_options, cancel_option, cancel_operands, cancel_run, 2,
     1},
    {"reschedule", reschedule_options, reschedule_option, reschedule_operands,
     reschedule_run, 2, 1},
    {"pause", pause_options, pause_option, pause_operands, pause_run, 2, 1},
    {"resume", pause_options, pause_option, resume_operands, resume_run, 2, 1},
    {"health", health_options, health_option, NULL, health_run, 1, 0},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* The options every command takes. */
static const struct ctl_option common_options[] = {
    {"config", 'c', 1},
    {"help", 'h', 0},
    {NULL, 0, 0},
};

/* Every option name once: the common ones, then each command's. */
#define OPTIONS_MAX 32

/* What a usage error prints: the synopsis, not the whole help. */
static void
usage_short(void)
{
	fprintf(stderr, "usage: " PROG " [-c FILE] ");
	for (size_t k = 0; k < NCOMMANDS; k++)
		fprintf(stderr, "%s%s", k ? "|" : "", commands[k].name);
	fprintf(stderr, " [options] [ID...]; " PROG " --help for more\n");
}

static void
usage(FILE *fp)
{
	fprintf(
	    fp,
	    "usage: " PROG " [-c FILE] COMMAND [options]\n"
	    "\n"
	    "commands:\n"
	    "  status              each delay level and the ingress, return, "
	    "retry and\n"
	    "                      error queues: TTL, messages waiting, "
	    "consumers; the\n"
	    "                      broker's dead-letter re-send timeout "
	    "(management API)\n"
	    "  errors              the parked messages in P.error with their "
	    "reasons;\n"
	    "                      they stay in the queue\n"
	    "  requeue             send parked messages back through "
	    "cascade's exchange,\n"
	    "                      with their target and due time, once the "
	    "cause is fixed\n"
	    "  list                every message waiting, from the stream "
	    "P.events (or a\n"
	    "                      cascade-console's index): id, due time, "
	    "target, size,\n"
	    "                      first seen; soonest first\n"
	    "  cancel ID...        cancel the waiting messages whose "
	    "message-id (or cascade\n"
	    "                      id) is ID: they are never delivered\n"
	    "  reschedule ID...    give the waiting messages whose message-id "
	    "(or cascade\n"
	    "                      id) is ID a new due time, earlier or "
	    "later\n"
	    "  pause ID...         pause the series whose message-id (or "
	    "series id) is ID:\n"
	    "                      it delivers nothing until resumed\n"
	    "  resume ID...        resume it: its next occurrence after now "
	    "is delivered,\n"
	    "                      with what it missed\n"
	    "  health              the daemon's /healthz: exit 0 while it "
	    "is connected and\n"
	    "                      consuming, else 1 (a container's health "
	    "check)\n"
	    "  console             serve the browser console "
	    "(cascade-console) on\n"
	    "                      --listen HOST:PORT (default [console] "
	    "listen)\n"
	    "\n"
	    "options:\n"
	    "  -c, --config FILE   cascade's config: broker URL, prefix, "
	    "ladder\n"
	    "                      (default: the built-in defaults)\n"
	    "  -j, --json          status, errors, list: one JSON object\n"
	    "  -n, --limit N       errors: show at most N (default %d); "
	    "requeue: at most N;\n"
	    "                      list: print at most N rows (default: "
	    "all)\n"
	    "  -r, --reason TEXT   requeue: only messages whose "
	    "x-cascade-error contains TEXT\n"
	    "      --dry-run       requeue: say what would be sent, send "
	    "nothing\n"
	    "      --target EXCHANGE[/KEY]\n"
	    "                      list: only messages for this exchange "
	    "(amq.default or\n"
	    "                      empty: the default exchange) and routing "
	    "key;\n"
	    "                      pause, resume: this target's deliveries "
	    "(control users;\n"
	    "                      repeatable)\n"
	    "      --series        list: the repeats only, one row per "
	    "series: schedule,\n"
	    "                      zone, next occurrence and its number, "
	    "paused\n"
	    "      --due-before TIME, --due-after TIME\n"
	    "                      list: only messages due before TIME, or "
	    "at TIME or later;\n"
	    "                      TIME is 2026-11-23T09:00:00Z, Unix ms, or "
	    "a duration from\n"
	    "                      now (10m, 2h, -5m)\n"
	    "      --park          cancel: park the messages in P.error "
	    "(reason \"cancelled\")\n"
	    "                      instead of dropping them\n"
	    "      --force         cancel, reschedule: record the request "
	    "even when no\n"
	    "                      waiting message has the id (yet)\n"
	    "      --from-stream   list, cancel: read P.events, not a "
	    "cascade-console's\n"
	    "                      index (asked first when [console] listen "
	    "is on this\n"
	    "                      machine and its user is a control user)\n"
	    "      --delay D       reschedule: due D from now (90s, 15m, "
	    "2h)\n"
	    "      --at TIME       reschedule: due at TIME "
	    "(2026-11-23T09:00:00Z or Unix ms)\n"
	    "      --management URL\n"
	    "                      status: the broker's management API, where "
	    "status reads\n"
	    "                      its dead-letter re-send timeout (RabbitMQ "
	    "3.12 or later,\n"
	    "                      as an administrator):\n"
	    "                      http://[USER:PASS@]HOST[:PORT][/PREFIX], "
	    "PORT by default\n"
	    "                      15672; without it, HOST, user and password "
	    "of an amqp://\n"
	    "                      broker URL; empty: not asked\n"
	    "      --metrics HOST:PORT\n"
	    "                      health: the daemon's address (default "
	    "[metrics] listen;\n"
	    "                      a wildcard host is asked on loopback)\n"
	    "  -h, --help          this text\n"
	    "\n"
	    "CASCADE_BROKER_URL, when set, overrides the URL, and "
	    "CASCADE_BROKER_PASSWORD\n"
	    "gives the password.  CASCADE_MANAGEMENT_URL, when set, is "
	    "--management's\n"
	    "default.\n"
	    "\n"
	    "Exit status: 0 done, 1 error (broker, config, a message not "
	    "requeued), 2 usage.\n"
	    "cancel, reschedule: 0 every ID recorded, 1 an ID named no "
	    "waiting message\n"
	    "(not recorded),\n"
	    "2 usage or an error.\n",
	    ERRORS_LIMIT);
}

/* An option given, in the order given. */
struct given {
	const struct ctl_option *opt;
	const char *arg;
};

/* Add the options of list to the union all[0..*n), each name once. */
static void
main_union(const struct ctl_option *list, const struct ctl_option **all,
           size_t *n)
{
	for (; list->name != NULL; list++) {
		size_t i;
		for (i = 0; i < *n; i++)
			if (strcmp(all[i]->name, list->name) == 0)
				break;
		if (i == *n && *n < OPTIONS_MAX)
			all[(*n)++] = list;
	}
}

/* The option of cmd named name, or NULL when cmd does not take it. */
static const struct ctl_option *
main_takes(const struct ctl_command *cmd, const char *name)
{
	for (const struct ctl_option *o = cmd->options; o->name != NULL; o++)
		if (strcmp(o->name, name) == 0)
			return o;
	return NULL;
}

/*
 * The command line against every command's options at once (getopt
 * permutes, so options may come before or after the command), then the
 * command's own: an option of another command is a usage error.  Returns
 * the command, or NULL with *status (0 after --help, 2 for a usage error).
 */
static const struct ctl_command *
main_parse(struct ctl *c, int argc, char *argv[], const char **path,
           int *status)
{
	static const struct ctl_option *all[OPTIONS_MAX];
	static struct option longopts[OPTIONS_MAX + 1];
	char shortopts[2 * OPTIONS_MAX + 1];
	struct given *given;
	const struct ctl_command *cmd = NULL;
	size_t n = 0, s = 0, ngiven = 0;
	int ch, idx;

	*status = 2;
	main_union(common_options, all, &n);
	for (size_t k = 0; k < NCOMMANDS; k++)
		main_union(commands[k].options, all, &n);
	for (size_t i = 0; i < n; i++) {
		longopts[i] = (struct option){
		    all[i]->name,
		    all[i]->has_arg ? required_argument : no_argument, NULL,
		    (int)(256 + i)};
		if (all[i]->letter != 0) {
			shortopts[s++] = (char)all[i]->letter;
			if (all[i]->has_arg)
				shortopts[s++] = ':';
		}
	}
	longopts[n] = (struct option){NULL, 0, NULL, 0};
	shortopts[s] = '\0';
	if ((given = calloc((size_t)argc + 1, sizeof(*given))) == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		return NULL;
	}
	while ((ch = getopt_long(argc, argv, shortopts, longopts, NULL)) !=
	       -1) {
		if (ch >= 256) {
			idx = ch - 256;
		} else {
			for (idx = 0; idx < (int)n; idx++)
				if (all[idx]->letter == ch)
					break;
		}
		if (ch == '?' || idx >= (int)n) {
			usage_short();
			goto out;
		}
		if (strcmp(all[idx]->name, "help") == 0) {
			usage(stdout);
			*status = 0;
			goto out;
		}
		if (strcmp(all[idx]->name, "config") == 0)
			*path = optarg;
		else
			given[ngiven++] = (struct given){all[idx], optarg};
	}
	if (optind == argc) {
		fprintf(stderr, PROG ": which command?\n");
		usage_short();
		goto out;
	}
	for (size_t k = 0; k < NCOMMANDS; k++)
		if (strcmp(argv[optind], commands[k].name) == 0)
			cmd = &commands[k];
	if (cmd == NULL) {
		fprintf(stderr, PROG ": unknown command %s\n", argv[optind]);
		usage_short();
		goto out;
	}
	if (cmd->operands != NULL) {
		int rc = cmd->operands(argc - optind - 1, argv + optind + 1);

		if (rc == CTL_USAGE)
			usage_short();
		if (rc < 0)
			goto out;
	} else if (argc - optind - 1 > 0) {
		fprintf(stderr, PROG ": one command at a time\n");
		usage_short();
		goto out;
	}
	for (size_t i = 0; i < ngiven; i++)
		if (main_takes(cmd, given[i].opt->name) == NULL) {
			fprintf(stderr, PROG ": option not valid for %s\n",
			        cmd->name);
			usage_short();
			goto out;
		}
	for (size_t i = 0; i < ngiven; i++)
		if (cmd->option(c, given[i].opt->name, given[i].arg) < 0)
			goto out;
	free(given);
	return cmd;
out:
	free(given);
	return NULL;
}

/*
 * cascade-ctl [-c FILE] console [--listen HOST:PORT]: the console is a
 * program of its own (it serves until stopped, with threads), installed
 * beside this one: run it in our place with the same options.
 */
static void
main_console(int argc, char *argv[])
{
	char self[4096], path[4096 + 32], *slash, **args;
	ssize_t n;
	int cmd = 0, k = 0;

	for (int i = 1; i < argc && cmd == 0; i++) {
		if (strcmp(argv[i], "-c") == 0 ||
		    strcmp(argv[i], "--config") == 0)
			i++;
		else if (argv[i][0] != '-')
			cmd = i;
	}
	if (cmd == 0 || strcmp(argv[cmd], "console") != 0)
		return;
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) < 0) {
		perror(PROG ": /proc/self/exe");
		exit(1);
	}
	self[n] = '\0';
	slash = strrchr(self, '/');
	snprintf(path, sizeof(path), "%.*s/cascade-console",
	         slash != NULL ? (int)(slash - self) : 1,
	         slash != NULL ? self : ".");
	if ((args = calloc((size_t)argc + 1, sizeof(*args))) == NULL)
		exit(1);
	args[k++] = path;
	for (int i = 1; i < argc; i++)
		if (i != cmd)
			args[k++] = argv[i];
	execv(path, args);
	fprintf(stderr, PROG ": cannot run %s: %s\n", path, strerror(errno));
	exit(1);
}

int
main(int argc, char *argv[])
{
	static struct ctl c;
	const struct ctl_command *cmd;
	const char *path = NULL;
	int rc;

	main_console(argc, argv);
	/* Before any record is decoded (stackroom.h). */
	(void)stackroom_raise(STACKROOM_BYTES);
	config_defaults(&c.cfg);
	c.now = duration_wall_ms();
	if ((cmd = main_parse(&c, argc, argv, &path, &rc)) == NULL)
		return rc;
	if ((cmd->broker ? session_open(&c, path) : session_config(&c, path)) <
	    0)
		return cmd->error_status;
	rc = cmd->run(&c);
	fflush(stdout);
	if (rc < 0)
		fprintf(stderr, PROG ": %s\n", c.cl.err);
	if (c.cl.most_deliveries >= WORN)
		fprintf(stderr,
		        PROG ": warning: parked messages were handed out up to "
		             "%" PRId64 " times (x-delivery-count); from "
		             "RabbitMQ 4.0 a quorum queue drops a message past "
		             "its delivery-limit (default 20), and before 4.3 "
		             "every look with errors counts: give %s a "
		             "delivery-limit policy or a dead-letter target\n",
		        c.cl.most_deliveries, c.topo.error);
	session_close(&c);
	return rc < 0 ? cmd->error_status : rc;
}
