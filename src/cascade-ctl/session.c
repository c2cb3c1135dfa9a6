/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session: the one broker session cascade-ctl's commands share: the
 * config and topology it names, and the connection (client.h), with
 * what ctl adds to it: status's queue rows and a warning on stderr.
 */
#include "amqp_compat.h"
#include <stdio.h>

#include "ctl.h"

int
session_config(struct ctl *c, const char *path)
{
	const char *why;

	if (path != NULL) {
		if (config_load(&c->cfg, path, c->cl.err, sizeof(c->cl.err)) <
		    0) {
			fputs(c->cl.err, stderr);
			return -1;
		}
	} else if (config_load_string(&c->cfg, "environment", "", c->cl.err,
	                              sizeof(c->cl.err)) < 0) {
		/* No file: the defaults, and CASCADE_BROKER_URL and
		 * CASCADE_BROKER_PASSWORD checked as the daemon checks them. */
		fputs(c->cl.err, stderr);
		return -1;
	}
	if (topology_of_config(&c->topo, &c->ladder, &c->cfg, &why) < 0) {
		fprintf(stderr, PROG ": %s\n", why);
		return -1;
	}
	return 0;
}

int
session_open(struct ctl *c, const char *path)
{
	if (session_config(c, path) < 0)
		return -1;
	if (client_open(&c->cl, &c->cfg, &c->topo) < 0) {
		fprintf(stderr, PROG ": %s\n", c->cl.err);
		topology_free(&c->topo);
		return -1;
	}
	return 0;
}

void
session_close(struct ctl *c)
{
	topology_free(&c->topo);
	client_close(&c->cl);
}

/*
 * The queue's counts in the shape status keeps them, with its delay and
 * shard beside.
 */
int
session_inspect(struct ctl *c, amqp_channel_t ch, struct qinfo *q)
{
	struct client_queue cq;

	if (client_inspect(&c->cl, ch, q->name, &cq) < 0)
		return -1;
	q->missing = cq.missing;
	q->messages = cq.messages;
	q->consumers = cq.consumers;
	return 0;
}

/* Fewer came back than were given: somebody else consumes P.error. */
int
session_give_back(struct ctl *c, uint64_t tag, uint64_t held)
{
	int rc = client_give_back(&c->cl, tag, held);

	if (rc > 0)
		fprintf(stderr, PROG ": warning: %s\n", c->cl.err);
	return rc < 0 ? -1 : 0;
}

void
session_fold_init(struct ctl *c, struct waiting_fold *f)
{
	waiting_fold_init(f);
	f->cfg = &c->cfg;
	snprintf(f->own_user, sizeof(f->own_user), "%s", c->cl.user);
}
