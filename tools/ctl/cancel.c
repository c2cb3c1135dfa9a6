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
#include "envelope.h"
#include "headers.h"
#include "when.h"

/* A cancellation of waiting messages holds this long past their due time. */
#define CANCEL_MARGIN_MS 86400000LL

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
	(void)c;
	(void)arg;
	if (strcmp(name, "park") == 0)
		opts.park = 1;
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

/* Whether headers key is one a copy gets afresh. */
static int
copy_drops(amqp_bytes_t key)
{
	return headers_key_is(key, "x-cascade-due") ||
	       headers_key_is(key, "x-cascade-copied") ||
	       headers_key_is(key, "x-remaining-delay");
}

/*
 * Publish w again from its copy, due at due, as a copy made at `at`, into
 * the first shard's return queue: a daemon routes it from there as a
 * message back from a delay level.  0, or -1 with c->cl.err.
 */
static int
publish_copy(struct ctl *c, const struct waiting *w, int64_t due, int64_t at)
{
	amqp_basic_properties_t props;
	amqp_bytes_t body;
	amqp_table_t h;
	amqp_pool_t pool;
	const char *why;
	char user[256];
	int rc = -1;

	init_amqp_pool(&pool, 4096);
	if (envelope_decode(w->copy, &pool, &props, &body, &why) < 0) {
		snprintf(c->cl.err, sizeof(c->cl.err),
		         "the copy of %.*s in %s does not decode: %s",
		         (int)w->id.len, (const char *)w->id.bytes,
		         c->topo.events, why);
		goto out;
	}
	if (headers_filter((props._flags & AMQP_BASIC_HEADERS_FLAG)
	                       ? &props.headers
	                       : NULL,
	                   copy_drops, 2, &pool, &h) < 0) {
		snprintf(c->cl.err, sizeof(c->cl.err), "out of memory");
		goto out;
	}
	headers_put_i64(&h, "x-cascade-due", due);
	headers_put_i64(&h, "x-cascade-copied", at);
	props.headers = h;
	props._flags |= AMQP_BASIC_HEADERS_FLAG;
	/* As ctl's user, a control user: the daemons take from a return
	 * queue only what their own users put there (trust.h). */
	if (config_broker_user(&c->cfg, user, sizeof(user)) == 0) {
		props._flags |= AMQP_BASIC_USER_ID_FLAG;
		props.user_id = amqp_cstring_bytes(user);
	}
	rc = client_publish(&c->cl, c->topo.ret[0], &props, body);
out:
	empty_amqp_pool(&pool);
	return rc;
}

/*
 * A reschedule of id to due, recorded at `at`: publish a copy, due then,
 * of each waiting message it names that would come back to a daemon after
 * due (it waits in a delay level or holding queue until its own time),
 * when its scheduled record carries one.  Their cascade ids go into
 * e->superseded, from pool: only messages user (ctl's; empty: none)
 * may change (requests.h).  0, or -1 with c->cl.err.
 */
static int
reschedule_copies(struct ctl *c, struct waiting_fold *f, const char *user,
                  amqp_bytes_t id, int64_t due, struct event *e,
                  amqp_pool_t *pool)
{
	struct waiting **ws;
	char *ids;
	size_t len = 0;
	long n;
	int rc = 0, control;

	if (user[0] == '\0')
		return 0;
	control = config_control_user(&c->cfg, amqp_cstring_bytes(user));
	if ((n = waiting_named(f, id, &ws)) <= 0) {
		if (n < 0)
			snprintf(c->cl.err, sizeof(c->cl.err), "out of memory");
		return n < 0 ? -1 : 0;
	}
	if ((ids = amqp_pool_alloc(pool, (size_t)n * 256)) == NULL) {
		free(ws);
		snprintf(c->cl.err, sizeof(c->cl.err), "out of memory");
		return -1;
	}
	for (long i = 0; i < n && rc == 0; i++) {
		const struct waiting *w = ws[i];

		if (!waiting_needs_copy(f, w, due, e->at,
		                        amqp_cstring_bytes(user), control))
			continue;
		if ((rc = publish_copy(c, w, due, e->at)) < 0)
			break;
		events_superseded_append(ids, &len, w->id);
	}
	e->superseded = (amqp_bytes_t){len, ids};
	free(ws);
	return rc;
}

/*
 * Record a request in P.cancels for each id that names a waiting message
 * (or for every id, with --force).  0 every id recorded, 1 an id named
 * nothing and was not recorded, -1 with c->cl.err.
 */
static int
request_run(struct ctl *c)
{
	struct waiting_fold f;
	struct event e;
	amqp_bytes_t *want = NULL;
	amqp_pool_t pool;
	char ctl_user[256];
	int rc = -1, unmatched = 0;
	int64_t due = 0, last_at = 0;
	const char *what = opts.reschedule ? "reschedule" : "cancel";

	init_amqp_pool(&pool, 1024);
	session_fold_init(c, &f);
	if (config_broker_user(&c->cfg, ctl_user, sizeof(ctl_user)) < 0)
		ctl_user[0] = '\0';
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
	if (stream_fold(c, &f) < 0 ||
	    client_stream_exists(&c->cl, c->topo.cancels) < 0)
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
	}
	for (int i = 0; i < opts.nids; i++) {
		struct {
			amqp_bytes_t id;
			uint64_t n;
			int64_t last_due; /* the latest due time among them */
		} m = {amqp_cstring_bytes(opts.ids[i]), 0, 0};
		m.n = waiting_count_id(&f, m.id, &m.last_due);
		if (m.n == 0 && !opts.force) {
			fprintf(stderr,
			        PROG ": no waiting message has id %s; not "
			             "recorded (use --force to %s it "
			             "before it is published)\n",
			        opts.ids[i], what);
			unmatched = 1;
			continue;
		}
		memset(&e, 0, sizeof(e));
		e.kind = opts.reschedule ? EVENT_RESCHEDULE : EVENT_CANCEL;
		/* Each request later than the one before: a copy of the
		 * next is then never taken for one of this one's. */
		e.at = duration_wall_ms();
		if (e.at <= last_at)
			e.at = last_at + 1;
		last_at = e.at;
		e.cancel = m.id;
		e.park = opts.park;
		e.due = due;
		if (due > m.last_due)
			m.last_due = due;
		/*
		 * Until a day after the latest of the messages it matched is
		 * due (they come by then at the latest, unless a target
		 * refuses them); before publishing (--force), as long as a
		 * message may wait.  Not longer: a later message that reuses
		 * the id is not cancelled.
		 */
		e.until = m.n > 0 ? (m.last_due > e.at ? m.last_due : e.at) +
		                        CANCEL_MARGIN_MS
		                  : e.at + config_events_max_age(&c->cfg);
		/* The copies first: once the request is read, the daemons
		 * drop the instances they supersede.  When one fails, the
		 * request is still recorded with those that went out, which
		 * would be delivered twice otherwise. */
		if (opts.reschedule && m.n > 0 &&
		    reschedule_copies(c, &f, ctl_user, m.id, due, &e, &pool) <
		        0) {
			char why[sizeof(c->cl.err)];
			snprintf(why, sizeof(why), "%s", c->cl.err);
			if (e.superseded.len > 0 &&
			    client_record(&c->cl, c->topo.cancels, &e) == 0)
				(void)client_record(&c->cl, c->topo.events, &e);
			snprintf(c->cl.err, sizeof(c->cl.err), "%s", why);
			goto out;
		}
		if (client_record(&c->cl, c->topo.cancels, &e) < 0)
			goto out;
		/* Folded in: a second id naming the same message sees the
		 * copy this request made. */
		if (opts.reschedule && ctl_user[0] != '\0') {
			struct event own = e;
			own.writer = amqp_cstring_bytes(ctl_user);
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
