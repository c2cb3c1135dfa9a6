/* SPDX-License-Identifier: Apache-2.0 */
/*
 * requeue: send parked messages back through cascade's exchange with
 * their target and due time restored, once the cause of their parking is
 * fixed.  A message leaves P.error only once its re-publish is confirmed.
 * The pass itself is the library's (requeue.h): ctl has its options, its
 * lines and its summary.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "requeue.h"
#include "when.h"

/* requeue's options. */
static struct {
	int dry_run;
	uint64_t limit;     /* 0: every message there now */
	const char *reason; /* only messages whose x-cascade-error has it */
} opts;

const struct ctl_option requeue_options[] = {
    {"limit", 'n', 1},
    {"reason", 'r', 1},
    {"dry-run", 0, 0},
    {NULL, 0, 0},
};

int
requeue_option(struct ctl *c, const char *name, const char *arg)
{
	(void)c;
	if (strcmp(name, "dry-run") == 0)
		opts.dry_run = 1;
	else if (strcmp(name, "reason") == 0)
		opts.reason = arg;
	else
		return ctl_parse_limit(arg, &opts.limit);
	return 0;
}

/* One line about a message: what was done, its target and its reason. */
static void
requeue_line(void *arg, const char *verb, const amqp_message_t *m,
             const struct park_target *t, const char *note)
{
	const struct ctl *c = arg;
	amqp_bytes_t id = client_message_id(&m->properties), owner;
	char due[WHEN_TEXT_MAX];

	printf("%-13s message-id=%.*s", verb, id.len ? (int)id.len : 1,
	       id.len ? (const char *)id.bytes : "-");
	if (t->has_exchange)
		printf(" exchange='%.*s'", (int)t->exchange.len,
		       (const char *)t->exchange.bytes);
	else
		printf(" exchange=(default)");
	if (client_rk_unknown(&c->cl, t))
		printf(" routing_key=(not recorded)");
	else
		printf(" routing_key='%.*s'", (int)t->routing_key.len,
		       (const char *)t->routing_key.bytes);
	if (t->has_due) {
		when_format(t->due, due, sizeof(due));
		printf(" due=%s", due);
	}
	if (requeue_owner(&m->properties, &owner) == 0 && owner.len > 0)
		printf(" owner='%.*s'", (int)owner.len,
		       (const char *)owner.bytes);
	printf(" reason=\"%.*s\"", (int)t->reason.len,
	       (const char *)t->reason.bytes);
	if (note != NULL)
		printf(" (%s)", note);
	putchar('\n');
}

int
requeue_run(struct ctl *c)
{
	struct requeue r;
	uint32_t total;
	int rc;

	if (client_error_count(&c->cl, &total) < 0)
		return -1;
	if (client_exchange_exists(&c->cl) < 0)
		return -1;
	if (!opts.dry_run && requeue_select(&c->cl) < 0)
		return -1;
	memset(&r, 0, sizeof(r));
	/* Only what is there now: a message parked again meanwhile goes to
	 * the back of the queue and is not taken twice. */
	r.todo = total;
	if (opts.limit > 0 && opts.limit < r.todo)
		r.todo = opts.limit;
	r.reason = opts.reason;
	r.dry_run = opts.dry_run;
	r.on_row = requeue_line;
	r.arg = c;
	rc = requeue_pass(&c->cl, &r);
	/* The nack covers only the messages not acked: those left. */
	if (rc == 0 && session_give_back(c, r.last, r.left + r.would) < 0)
		rc = -1;
	if (opts.dry_run)
		printf("dry run: would requeue %" PRIu64 ", left %" PRIu64 "\n",
		       r.would, r.left);
	else
		printf("requeued %" PRIu64 ", left %" PRIu64 "\n", r.sent,
		       r.left);
	if (rc == 0 && r.failed > 0) {
		snprintf(c->cl.err, sizeof(c->cl.err),
		         "%" PRIu64 " message%s could not be requeued",
		         r.failed, r.failed == 1 ? "" : "s");
		rc = -1;
	}
	return rc;
}
