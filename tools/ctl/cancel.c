/*
 * cancel: record a cancellation in P.cancels for each id that names a
 * waiting message (its message-id or cascade id), so that no daemon
 * delivers it; with --park the daemons park it instead.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "duration.h"

/* A cancellation of waiting messages holds this long past their due time. */
#define CANCEL_MARGIN_MS 86400000LL

/* cancel's options and operands. */
static struct {
	int park, force;
	char **ids;
	int nids;
} opts;

const struct ctl_option cancel_options[] = {
    {"park", 0, 0},
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
cancel_operands(int n, char **v)
{
	if (n == 0) {
		fprintf(stderr, PROG ": cancel: which id?\n");
		ctl_usage_short();
		return -1;
	}
	for (int i = 0; i < n; i++) {
		size_t len = strlen(v[i]);
		if (len == 0 || len > 255) {
			fprintf(stderr,
			        PROG ": cancel: an id has 1 to 255 bytes (a "
			             "message-id): '%s'\n",
			        v[i]);
			return -1;
		}
	}
	opts.ids = v;
	opts.nids = n;
	return 0;
}

/*
 * Record a cancel request in P.cancels for each id that names a waiting
 * message (or for every id, with --force).  0 every id recorded, 1 an id
 * named nothing and was not recorded, -1 with c->err.
 */
int
cancel_run(struct ctl *c)
{
	struct waiting_fold f;
	struct event e;
	int rc = -1, unmatched = 0;

	waiting_fold_init(&f);
	if (stream_fold(c, &f) < 0 || stream_exists(c, c->topo.cancels) < 0)
		goto out;
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
			             "recorded (use --force to cancel it "
			             "before it is published)\n",
			        opts.ids[i]);
			unmatched = 1;
			continue;
		}
		memset(&e, 0, sizeof(e));
		e.kind = EVENT_CANCEL;
		e.at = duration_wall_ms();
		e.cancel = m.id;
		e.park = opts.park;
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
		if (session_record(c, c->topo.cancels, &e) < 0)
			goto out;
		/* A copy in P.events, for list's "cancel pending": list does
		 * not read P.cancels, which every daemon replays. */
		if (session_record(c, c->topo.events, &e) < 0)
			goto out;
		if (m.n == 0)
			printf("%s: recorded; no waiting message has it yet\n",
			       opts.ids[i]);
		else
			printf("%s: cancelled %" PRIu64
			       " waiting message%s%s\n",
			       opts.ids[i], m.n, m.n == 1 ? "" : "s",
			       opts.park ? " (to be parked)" : "");
		fflush(stdout);
	}
	rc = unmatched;
out:
	waiting_fold_free(&f);
	return rc;
}
