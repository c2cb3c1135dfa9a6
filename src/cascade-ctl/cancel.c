/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cancel and reschedule: record a request in P.cancels for each id that
 * names a waiting message (its message-id or cascade id).  cancel: no
 * daemon delivers it (with --park the daemons park it instead);
 * reschedule: the daemons give it the new due time when they next see it.
 * A message moved earlier than it would come back to a daemon is
 * published again first, due at the new time, from the copy its
 * scheduled record carries; the request then names it superseded, and
 * the daemons drop the instance still waiting (events.h).
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "duration.h"
#include "request.h"
#include "when.h"

/* The options and operands of cancel and reschedule. */
static struct {
	int park, force;
	int reschedule;    /* the command is reschedule */
	int64_t delay, at; /* reschedule: --delay, or --at (Unix ms) */
	int has_delay, has_at;
	char **ids;
	int nids;
} opts;

const struct ctl_option cancel_options[] = {
    {"park", 0, 0},
    {"force", 0, 0},
    {"from-stream", 0, 0},
    {NULL, 0, 0},
};

const struct ctl_option reschedule_options[] = {
    {"delay", 0, 1},
    {"at", 0, 1},
    {"force", 0, 0},
    {NULL, 0, 0},
};

int
cancel_option(struct ctl *c, const char *name, const char *arg)
{
	(void)arg;
	if (strcmp(name, "park") == 0)
		opts.park = 1;
	else if (strcmp(name, "from-stream") == 0)
		c->from_stream = 1;
	else
		opts.force = 1;
	return 0;
}

int
reschedule_option(struct ctl *c, const char *name, const char *arg)
{
	char why[128];
	const char *w;

	(void)c;
	opts.reschedule = 1;
	if (strcmp(name, "force") == 0) {
		opts.force = 1;
	} else if (strcmp(name, "delay") == 0) {
		if (duration_parse(arg, strlen(arg), DURATION_BARE_REJECT,
		                   &opts.delay, &w) < 0 ||
		    opts.delay < 0) {
			fprintf(stderr, PROG ": reschedule: --delay '%s': %s\n",
			        arg,
			        opts.delay < 0 ? "must not be negative" : w);
			return -1;
		}
		opts.has_delay = 1;
	} else {
		if (when_parse_absolute(arg, &opts.at, why, sizeof(why)) < 0) {
			fprintf(stderr, PROG ": reschedule: --at '%s': %s\n",
			        arg, why);
			return -1;
		}
		opts.has_at = 1;
	}
	return 0;
}

static int
request_operands(const char *cmd, int n, char **v)
{
	if (n == 0) {
		fprintf(stderr, PROG ": %s: which id?\n", cmd);
		return CTL_USAGE;
	}
	if (ctl_check_ids(cmd, n, v, "a message-id") < 0)
		return -1;
	opts.ids = v;
	opts.nids = n;
	return 0;
}

int
cancel_operands(int n, char **v)
{
	return request_operands("cancel", n, v);
}

int
reschedule_operands(int n, char **v)
{
	opts.reschedule = 1;
	return request_operands("reschedule", n, v);
}

/*
 * Record a request in P.cancels for each id that names a waiting message
 * (or for every id, with --force).  cancel counts them from a running
 * cascade-console's index when one answers (console.c), else, as
 * reschedule always does (it needs the records' copies), from P.events.
 * 0 every id recorded, 1 an id named nothing and was not recorded, -1
 * with c->cl.err.
 */
static int
request_run(struct ctl *c)
{
	struct waiting_fold f;
	struct event e;
	amqp_bytes_t *want = NULL;
	amqp_pool_t pool;
	int rc = -1, unmatched = 0;
	int64_t due = 0, at, last_at = 0;
	const char *what = opts.reschedule ? "reschedule" : "cancel";
	/* cancel: the counts a console's index answered, else NULL */
	uint64_t *counts = NULL;
	int64_t *last_dues = NULL;

	init_amqp_pool(&pool, 1024);
	session_fold_init(c, &f);
	if (!opts.reschedule && !c->from_stream) {
		counts = calloc((size_t)opts.nids, sizeof(*counts));
		last_dues = calloc((size_t)opts.nids, sizeof(*last_dues));
		if (counts == NULL || last_dues == NULL ||
		    console_count(c, opts.ids, opts.nids, counts, last_dues) <
		        0) {
			free(counts);
			free(last_dues);
			counts = NULL;
			last_dues = NULL;
		}
	}
	if (opts.reschedule) {
		/* The copies of the messages these ids name, and no more. */
		if ((want = calloc((size_t)opts.nids, sizeof(*want))) == NULL) {
			snprintf(c->cl.err, sizeof(c->cl.err), "out of memory");
			goto out;
		}
		for (int i = 0; i < opts.nids; i++)
			want[i] = amqp_cstring_bytes(opts.ids[i]);
		f.want = want;
		f.nwant = (size_t)opts.nids;
	}
	if (counts == NULL) {
		if (stream_fold(c, &f) < 0)
			goto out;
		if (!opts.reschedule)
			console_hint(c);
	}
	if (client_stream_exists(&c->cl, c->topo.cancels) < 0)
		goto out;
	if (opts.reschedule) {
		due = opts.has_at ? opts.at : duration_wall_ms() + opts.delay;
		if (due - duration_wall_ms() > c->cfg.router_max_delay) {
			char a[32];
			duration_format(c->cfg.router_max_delay, a, sizeof(a));
			snprintf(c->cl.err, sizeof(c->cl.err),
			         "reschedule: the new time is beyond "
			         "max_delay (%s) from now",
			         a);
			goto out;
		}
		/* The copies they need, which their scheduled records (of
		 * this version) do not carry. */
		if (stream_fold_copies(c, &f, opts.ids, opts.nids, due) < 0)
			goto out;
	}
	for (int i = 0; i < opts.nids; i++) {
		struct {
			amqp_bytes_t id;
			uint64_t n;
			int64_t last_due; /* the latest due time among them */
		} m = {amqp_cstring_bytes(opts.ids[i]), 0, 0};
		if (counts != NULL) {
			m.n = counts[i];
			m.last_due = last_dues[i];
		} else {
			m.n = waiting_count_id(&f, m.id, &m.last_due);
		}
		if (m.n == 0 && !opts.force) {
			fprintf(stderr,
			        PROG ": no waiting message has id %s; not "
			             "recorded (use --force to %s it "
			             "before it is published)\n",
			        opts.ids[i], what);
			unmatched = 1;
			continue;
		}
		/* Each request later than the one before: a copy of the
		 * next is then never taken for one of this one's. */
		at = duration_wall_ms();
		if (at <= last_at)
			at = last_at + 1;
		last_at = at;
		request_event(&e,
		              opts.reschedule ? EVENT_RESCHEDULE : EVENT_CANCEL,
		              m.id, opts.park, due, m.n, m.last_due, at,
		              config_events_max_age(&c->cfg));
		/* The copies first: once the request is read, the daemons
		 * drop the instances they supersede.  When one fails, the
		 * request is still recorded with those that went out, which
		 * would be delivered twice otherwise. */
		if (opts.reschedule && m.n > 0 &&
		    request_copies(&c->cl, &f, m.id, due, &e, &pool) < 0) {
			char why[sizeof(c->cl.err)];
			snprintf(why, sizeof(why), "%s", c->cl.err);
			if (e.superseded.len > 0)
				(void)request_record(&c->cl, &e);
			snprintf(c->cl.err, sizeof(c->cl.err), "%s", why);
			goto out;
		}
		if (client_record(&c->cl, c->topo.cancels, &e) < 0)
			goto out;
		/* Folded in: a second id naming the same message sees the
		 * copy this request made. */
		if (opts.reschedule && c->cl.user[0] != '\0') {
			struct event own = e;
			own.writer = amqp_cstring_bytes(c->cl.user);
			if (waiting_fold_event(&f, &own) < 0) {
				snprintf(c->cl.err, sizeof(c->cl.err),
				         "out of memory");
				goto out;
			}
		}
		/* A copy in P.events, for list's "cancel pending": list does
		 * not read P.cancels, which every daemon replays. */
		if (client_record(&c->cl, c->topo.events, &e) < 0)
			goto out;
		if (m.n == 0)
			printf("%s: recorded; no waiting message has it yet\n",
			       opts.ids[i]);
		else if (opts.reschedule) {
			char t[WHEN_TEXT_MAX];
			when_format(due, t, sizeof(t));
			printf("%s: rescheduled %" PRIu64
			       " waiting message%s to %s\n",
			       opts.ids[i], m.n, m.n == 1 ? "" : "s", t);
		} else
			printf("%s: cancelled %" PRIu64
			       " waiting message%s%s\n",
			       opts.ids[i], m.n, m.n == 1 ? "" : "s",
			       opts.park ? " (to be parked)" : "");
		fflush(stdout);
	}
	rc = unmatched;
out:
	waiting_fold_free(&f);
	empty_amqp_pool(&pool);
	free(want);
	free(counts);
	free(last_dues);
	return rc;
}

int
cancel_run(struct ctl *c)
{
	return request_run(c);
}

int
reschedule_run(struct ctl *c)
{
	/* Options come after operands (main.c): checked here. */
	if (opts.has_delay == opts.has_at) {
		snprintf(c->cl.err, sizeof(c->cl.err),
		         "reschedule: give the new time with --delay D or "
		         "--at T (one of them)");
		return -1;
	}
	return request_run(c);
}
