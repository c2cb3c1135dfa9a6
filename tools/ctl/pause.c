/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pause and resume: record in P.cancels that a series (named by its
 * message-id or its cascade id) or, with --target, a target (EXCHANGE,
 * or EXCHANGE/KEY) is paused or resumed (docs/CONTRACT.md 7.10).  Every
 * daemon holds the pause until a resume: a paused series delivers
 * nothing, a paused target's due messages go round the ladder.  A copy
 * of each record goes into P.events, where list reads which series are
 * paused.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "duration.h"
#include "request.h"

#define PAUSE_TARGETS_MAX 64

static struct {
	int resume;
	char **ids;
	int nids;
	const char *targets[PAUSE_TARGETS_MAX];
	int ntargets;
} opts;

const struct ctl_option pause_options[] = {
    {"target", 0, 1},
    {NULL, 0, 0},
};

int
pause_option(struct ctl *c, const char *name, const char *arg)
{
	(void)c;
	(void)name;
	if (strlen(arg) == 0 || strlen(arg) > 255) {
		fprintf(stderr,
		        PROG ": --target: EXCHANGE[/KEY] has 1 to 255 bytes: "
		             "'%s'\n",
		        arg);
		return -1;
	}
	if (opts.ntargets == PAUSE_TARGETS_MAX) {
		fprintf(stderr, PROG ": --target: at most %d at a time\n",
		        PAUSE_TARGETS_MAX);
		return -1;
	}
	opts.targets[opts.ntargets++] = arg;
	return 0;
}

static int
pause_ids(const char *cmd, int n, char **v)
{
	if (ctl_check_ids(cmd, n, v, "a message-id or series id") < 0)
		return -1;
	opts.ids = v;
	opts.nids = n;
	return 0;
}

int
pause_operands(int n, char **v)
{
	return pause_ids("pause", n, v);
}

int
resume_operands(int n, char **v)
{
	opts.resume = 1;
	return pause_ids("resume", n, v);
}

/* Record one request: into P.cancels, where the daemons read it, then
 * into P.events, where list does. */
static int
pause_record(struct ctl *c, const char *name, int target)
{
	struct event e;

	request_pause_event(&e, opts.resume, amqp_cstring_bytes(name), target,
	                    duration_wall_ms(), config_events_max_age(&c->cfg));
	if (request_record(&c->cl, &e) < 0)
		return -1;
	printf("%s%s: %s\n", target ? "target " : "", name,
	       opts.resume ? "resumed" : "paused");
	fflush(stdout);
	return 0;
}

static int
pause_run_all(struct ctl *c)
{
	const char *cmd = opts.resume ? "resume" : "pause";

	if (opts.nids == 0 && opts.ntargets == 0) {
		snprintf(c->cl.err, sizeof(c->cl.err),
		         "%s: name a series (its message-id or id) or "
		         "--target EXCHANGE[/KEY]",
		         cmd);
		return -1;
	}
	if (opts.ntargets > 0 &&
	    !config_control_user(&c->cfg, amqp_cstring_bytes(c->cl.user))) {
		snprintf(c->cl.err, sizeof(c->cl.err),
		         "%s --target: only [events] control_users may pause "
		         "or resume a target",
		         cmd);
		return -1;
	}
	if (client_stream_exists(&c->cl, c->topo.cancels) < 0)
		return -1;
	for (int i = 0; i < opts.nids; i++)
		if (pause_record(c, opts.ids[i], 0) < 0)
			return -1;
	for (int i = 0; i < opts.ntargets; i++)
		if (pause_record(c, opts.targets[i], 1) < 0)
			return -1;
	return 0;
}

int
pause_run(struct ctl *c)
{
	return pause_run_all(c);
}

int
resume_run(struct ctl *c)
{
	return pause_run_all(c);
}
