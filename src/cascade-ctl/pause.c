/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pause and resume: record in P.cancels that a series (named by its
 * message-id or its cascade id) or, with --target, a target (EXCHANGE,
 * or EXCHANGE/KEY) is paused or resumed (docs/CONTRACT.md 7.10).  Every
 * daemon holds the pause until a resume: a paused series delivers
 * nothing, a paused target's due messages go round the ladder.  A copy
 * of each record goes into P.events, where list reads which series are
 * paused.
 *
 * First P.events is read as list reads it, so that the command does what
 * list shows and says when it changes nothing: a name no waiting series
 * the user may change has is an error; a resume of what is not paused is
 * said and nothing is recorded.  A resume lifts every pause that holds
 * the series, under each name it was made by (its cascade id or its
 * message-id), which the name given alone might not.  A pause is always
 * recorded: one's own again renews it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "duration.h"
#include "headers.h"
#include "request.h"

#define PAUSE_TARGETS_MAX 64
/* The names one resume records: the one given, and the other names of
 * the series it names (a message-id may name several). */
#define PAUSE_NAMES_MAX 64

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
pause_record(struct ctl *c, amqp_bytes_t name, int target)
{
	struct event e;

	request_pause_event(&e, opts.resume, name, target, duration_wall_ms(),
	                    config_events_max_age(&c->cfg));
	return request_record(&c->cl, &e);
}

/* Add name to v (n of them) unless it is there; 0, or -1 when full. */
static int
pause_name_add(amqp_bytes_t *v, size_t *n, amqp_bytes_t name)
{
	for (size_t i = 0; i < *n; i++)
		if (headers_bytes_eq(v[i], name))
			return 0;
	if (*n == PAUSE_NAMES_MAX)
		return -1;
	v[(*n)++] = name;
	return 0;
}

/* One series, as given: paused or resumed, or said why not.  1 when
 * nothing was recorded and that is no error. */
static int
pause_series(struct ctl *c, struct waiting_fold *f,
             const struct waiting_rows *rows, const char *given)
{
	amqp_bytes_t name = amqp_cstring_bytes(given), names[PAUSE_NAMES_MAX];
	amqp_bytes_t by = amqp_cstring_bytes(c->cl.user);
	int control = config_control_user(&c->cfg, by), others = 0, o;
	const char *cmd = opts.resume ? "resume" : "pause";
	size_t found = 0, n = 0;
	unsigned held = 0;

	names[n++] = name;
	for (size_t i = 0; i < rows->n; i++) {
		const struct waiting *w = rows->w[i];
		unsigned m;
		if (!headers_bytes_eq(w->id, name) &&
		    !headers_bytes_eq(w->message_id, name))
			continue;
		if (!requests_may_change(w->owner, by, control))
			continue;
		found++;
		m = requests_series_pauses(&f->requests, w->id, w->message_id,
		                           w->owner, by, control, c->now, &o);
		held |= m;
		others |= m != 0 && o;
		if (((m & REQUESTS_BY_ID) &&
		     pause_name_add(names, &n, w->id) < 0) ||
		    ((m & REQUESTS_BY_MESSAGE_ID) &&
		     pause_name_add(names, &n, w->message_id) < 0)) {
			snprintf(c->cl.err, sizeof(c->cl.err),
			         "%s: '%s' names over %d paused series: resume "
			         "them by their ids",
			         cmd, given, PAUSE_NAMES_MAX);
			return -1;
		}
	}
	if (found == 0) {
		snprintf(c->cl.err, sizeof(c->cl.err),
		         "%s: no waiting series you may change has '%s' as its "
		         "message-id or id (cascade-ctl list --series shows "
		         "them); nothing recorded",
		         cmd, given);
		return -1;
	}
	if (opts.resume && held == 0) {
		printf("%s: not paused; nothing recorded\n", given);
		return 1;
	}
	if (opts.resume && others) {
		snprintf(c->cl.err, sizeof(c->cl.err),
		         "resume: '%s' is paused by a control user or another "
		         "user: only a control user can resume it; nothing "
		         "recorded",
		         given);
		return -1;
	}
	/* A pause goes to the name given; a resume to every name held. */
	for (size_t i = 0; i < (opts.resume ? n : 1); i++)
		if (pause_record(c, names[i], 0) < 0)
			return -1;
	printf("%s: %s\n", given, opts.resume ? "resumed" : "paused");
	fflush(stdout);
	return 0;
}

/* One target, as given: paused or resumed, or said why not. */
static int
pause_target(struct ctl *c, struct waiting_fold *f, const char *given)
{
	amqp_bytes_t name = amqp_cstring_bytes(given);
	int held = requests_target_held(&f->requests, name, c->now);

	if (opts.resume && !held) {
		printf("target %s: not paused; nothing recorded\n", given);
		return 1;
	}
	if (pause_record(c, name, 1) < 0)
		return -1;
	printf("target %s: %s\n", given, opts.resume ? "resumed" : "paused");
	fflush(stdout);
	return 0;
}

static int
pause_run_all(struct ctl *c)
{
	const char *cmd = opts.resume ? "resume" : "pause";
	struct waiting_filter flt;
	struct waiting_rows rows;
	struct waiting_fold f;
	int rc = -1;

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
	memset(&rows, 0, sizeof(rows));
	session_fold_init(c, &f);
	waiting_filter_init(&flt);
	flt.series = 1;
	if (stream_fold(c, &f) < 0)
		goto out;
	if (waiting_select(&f, &flt, c->now, &rows) < 0) {
		snprintf(c->cl.err, sizeof(c->cl.err), "out of memory");
		goto out;
	}
	for (int i = 0; i < opts.nids; i++)
		if (pause_series(c, &f, &rows, opts.ids[i]) < 0)
			goto out;
	for (int i = 0; i < opts.ntargets; i++)
		if (pause_target(c, &f, opts.targets[i]) < 0)
			goto out;
	rc = 0;
out:
	free(rows.w);
	waiting_fold_free(&f);
	return rc;
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
