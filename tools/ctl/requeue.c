/*
 * requeue: send parked messages back through cascade's exchange with
 * their target and due time restored, once the cause of their parking is
 * fixed.  A message leaves P.error only once its re-publish is confirmed.
 *
 * A requeued message stays its publisher's: it is published with the
 * user-id it was parked with (x-cascade-user-id), which RabbitMQ checks,
 * so it allows that only to that user or to one tagged impersonator.
 * When the broker refuses, the message stays parked: sent without its
 * owner it would become anyone's to cancel or replace (CONTRACT 7.6).
 * Publishes go on their own channel, for that refusal closes it.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "headers.h"
#include "when.h"

#define CLOSED "channel closed by the broker" /* broker_close_reason */

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

/* basic.return: the publish reached no queue. */
static void
requeue_returned(void *arg, const amqp_basic_return_t *r)
{
	struct ctl *c = arg;

	snprintf(c->cl.unroutable, sizeof(c->cl.unroutable),
	         "unroutable: %.*s (is %s bound to %s?)",
	         (int)r->reply_text.len, (const char *)r->reply_text.bytes,
	         c->topo.ingress, c->topo.exchange);
}

/*
 * Whether cascade parked it: it says why (x-cascade-error), or the broker
 * dead-lettered it from one of cascade's queues (x-death).  Anything else
 * in P.error was put there by hand, and is not ours to send on.
 */
static int
requeue_parked_by_cascade(const amqp_basic_properties_t *p)
{
	const amqp_table_t *h = headers_of(p);

	return headers_find(h, "x-cascade-error") != NULL ||
	       headers_find(h, "x-death") != NULL;
}

/*
 * Its owner, the user-id it was published with, into *owner (empty:
 * none).  -1 when x-cascade-user-id is there but no user name: who owns
 * it is unknown.
 */
static int
requeue_owner(const amqp_basic_properties_t *p, amqp_bytes_t *owner)
{
	const amqp_field_value_t *v =
	    headers_find(headers_of(p), "x-cascade-user-id");

	*owner = amqp_empty_bytes;
	if (v == NULL)
		return 0;
	if (headers_string(v, owner) < 0 || owner->len == 0 ||
	    owner->len >= KEY_MAX)
		return -1;
	return 0;
}

/* Confirms on the publishing channel, and where returns go. */
static int
requeue_select(struct ctl *c)
{
	if (broker_confirm_select(c->cl.conn, BROKER_CH_PUB, &c->cl.confirms,
	                          c->cl.err, sizeof(c->cl.err)) < 0)
		return -1;
	c->cl.confirms.on_return = requeue_returned;
	c->cl.confirms.arg = c;
	return 0;
}

/* One line about a message: what was done, its target and its reason. */
static void
requeue_line(const struct ctl *c, const char *verb, const amqp_message_t *m,
             const struct park_target *t, const char *note)
{
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

/* Whether the message's x-cascade-error contains --reason. */
static int
requeue_reason_matches(amqp_bytes_t reason)
{
	size_t n = strlen(opts.reason);

	if (n == 0)
		return 1;
	for (size_t i = 0; i + n <= reason.len; i++)
		if (memcmp((const char *)reason.bytes + i, opts.reason, n) == 0)
			return 1;
	return 0;
}

/*
 * The broker closed the publishing channel over the publish for owner:
 * say why in why, and open the channel again.  1, or -1 with c->cl.err.
 */
static int
requeue_refused(struct ctl *c, amqp_bytes_t owner, char *why, size_t size)
{
	snprintf(why, size,
	         "the broker refused to publish it as its owner '%.*s' (%s); "
	         "requeue it as that user, or give this one the "
	         "impersonator tag",
	         (int)owner.len, (const char *)owner.bytes,
	         c->cl.err + strlen(CLOSED ": "));
	if (broker_channel_reopen(c->cl.conn, BROKER_CH_PUB, c->cl.err,
	                          sizeof(c->cl.err)) < 0 ||
	    requeue_select(c) < 0)
		return -1;
	return 1;
}

/*
 * Publish one parked message to P with its restored properties and its
 * owner's user-id, and wait for the confirm: 0 sent, 1 refused (why), -1
 * with c->cl.err.
 */
static int
requeue_resend(struct ctl *c, const amqp_message_t *m, const char *rk,
               char *why, size_t size)
{
	amqp_basic_properties_t props;
	struct park_target t;
	amqp_bytes_t owner;
	amqp_pool_t pool;
	uint64_t nacked = c->cl.confirms.nacked,
	         returned = c->cl.confirms.returned;
	int st, rc;

	if (requeue_owner(&m->properties, &owner) < 0) {
		snprintf(why, size,
		         "its owner (x-cascade-user-id) is not a "
		         "user name");
		return 1;
	}
	init_amqp_pool(&pool, 4096);
	park_target(&m->properties, amqp_cstring_bytes(rk), &t);
	if (park_requeue_props(&m->properties, amqp_cstring_bytes(rk), &pool,
	                       &props) < 0) {
		empty_amqp_pool(&pool);
		snprintf(c->cl.err, sizeof(c->cl.err), "out of memory");
		return -1;
	}
	if (owner.len > 0) {
		props._flags |= AMQP_BASIC_USER_ID_FLAG;
		props.user_id = owner;
	}
	/* P is a fanout: the routing key only names the target for people
	 * looking at the ingress queue; x-target-routing-key decides. */
	st = broker_confirm_publish(c->cl.conn, &c->cl.confirms,
	                            amqp_cstring_bytes(c->topo.exchange),
	                            t.routing_key, 1, &props, m->body);
	empty_amqp_pool(&pool);
	if (st != AMQP_STATUS_OK) {
		snprintf(c->cl.err, sizeof(c->cl.err), "publish: %s",
		         amqp_error_string2(st));
		return -1;
	}
	rc = broker_confirm_wait(c->cl.conn, &c->cl.confirms, 0,
	                         CLIENT_CONFIRM_MS, c->cl.err,
	                         sizeof(c->cl.err));
	amqp_maybe_release_buffers(c->cl.conn);
	/* A user-id RabbitMQ does not allow this user closes the channel. */
	if (rc < 0 && owner.len > 0 &&
	    strncmp(c->cl.err, CLOSED ": ", strlen(CLOSED ": ")) == 0)
		return requeue_refused(c, owner, why, size);
	if (rc < 0)
		return -1;
	if (c->cl.confirms.nacked > nacked) {
		snprintf(why, size, "the broker refused the publish (nack)");
		return 1;
	}
	if (c->cl.confirms.returned > returned) {
		snprintf(why, size, "%s", c->cl.unroutable);
		return 1;
	}
	return 0;
}

int
requeue_run(struct ctl *c)
{
	uint64_t todo, done, sent = 0, would = 0, left = 0, failed = 0;
	uint64_t tag, last = 0;
	struct park_target t;
	amqp_message_t m;
	uint32_t total;
	char rk[KEY_MAX], why[1024];
	int got, st, rc = 0;

	if (client_error_count(&c->cl, &total) < 0)
		return -1;
	if (client_exchange_exists(&c->cl) < 0)
		return -1;
	if (!opts.dry_run && requeue_select(c) < 0)
		return -1;
	/* Only what is there now: a message parked again meanwhile goes to
	 * the back of the queue and is not taken twice. */
	todo = total;
	if (opts.limit > 0 && opts.limit < todo)
		todo = opts.limit;

	for (done = 0; done < todo; done++) {
		got = client_get(&c->cl, &tag, rk, &m);
		if (got <= 0) {
			rc = got;
			break;
		}
		park_target(&m.properties, amqp_cstring_bytes(rk), &t);
		if (opts.reason != NULL && !requeue_reason_matches(t.reason)) {
			/* Held unacked until the end, so that the next get
			 * does not return it again. */
			last = tag;
			left++;
			requeue_line(c, "left", &m, &t,
			             "reason does not match");
		} else if (!requeue_parked_by_cascade(&m.properties)) {
			last = tag;
			left++;
			failed++;
			requeue_line(
			    c, "left", &m, &t,
			    "not parked by cascade: no x-cascade-error "
			    "or x-death");
		} else if (client_rk_unknown(&c->cl, &t)) {
			last = tag;
			left++;
			failed++;
			requeue_line(c, "left", &m, &t,
			             "its routing key was not recorded when "
			             "it was parked");
		} else if (opts.dry_run) {
			last = tag;
			would++;
			requeue_line(c, "would requeue", &m, &t, NULL);
		} else {
			st = requeue_resend(c, &m, rk, why, sizeof(why));
			if (st < 0) {
				amqp_destroy_message(&m);
				rc = -1;
				break;
			}
			if (st == 0) {
				/* Confirmed: only now may it leave P.error. */
				if (amqp_basic_ack(c->cl.conn, BROKER_CH_WORK,
				                   tag, 0) != AMQP_STATUS_OK) {
					snprintf(c->cl.err, sizeof(c->cl.err),
					         "basic.ack failed");
					amqp_destroy_message(&m);
					rc = -1;
					break;
				}
				sent++;
				requeue_line(c, "requeued", &m, &t, NULL);
			} else {
				last = tag;
				left++;
				failed++;
				requeue_line(c, "left", &m, &t, why);
			}
		}
		amqp_destroy_message(&m);
	}
	/* The nack covers only the messages not acked: those left. */
	if (rc == 0 && session_give_back(c, last, left + would) < 0)
		rc = -1;
	if (opts.dry_run)
		printf("dry run: would requeue %" PRIu64 ", left %" PRIu64 "\n",
		       would, left);
	else
		printf("requeued %" PRIu64 ", left %" PRIu64 "\n", sent, left);
	if (rc == 0 && failed > 0) {
		snprintf(c->cl.err, sizeof(c->cl.err),
		         "%" PRIu64 " message%s could not be requeued", failed,
		         failed == 1 ? "" : "s");
		rc = -1;
	}
	return rc;
}
