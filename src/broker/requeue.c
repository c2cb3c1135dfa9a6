/* SPDX-License-Identifier: Apache-2.0 */
/*
 * requeue: parked messages back through P, as their owners
 * (include/requeue.h).  Publishes go on their own channel, for the
 * broker's refusal of a user-id closes it.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "headers.h"
#include "requeue.h"

#define CLOSED "channel closed by the broker" /* broker_close_reason */

/* basic.return: the publish reached no queue. */
static void
requeue_returned(void *arg, const amqp_basic_return_t *r)
{
	struct client *cl = arg;

	snprintf(cl->unroutable, sizeof(cl->unroutable),
	         "unroutable: %.*s (is %s bound to %s?)",
	         (int)r->reply_text.len, (const char *)r->reply_text.bytes,
	         cl->topo->ingress, cl->topo->exchange);
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

int
requeue_owner(const amqp_basic_properties_t *p, amqp_bytes_t *owner)
{
	const amqp_field_value_t *v =
	    headers_find(headers_of(p), "x-cascade-user-id");

	*owner = amqp_empty_bytes;
	if (v == NULL)
		return 0;
	if (headers_string(v, owner) < 0 || owner->len == 0 ||
	    owner->len >= CLIENT_KEY_MAX)
		return -1;
	return 0;
}

int
requeue_select(struct client *cl)
{
	/* Once per channel: selecting again would count the publishes
	 * from 1 while the broker goes on from the earlier ones (the
	 * console's session has often published a request first). */
	if (cl->confirms.ch != BROKER_CH_PUB &&
	    broker_confirm_select(cl->conn, BROKER_CH_PUB, &cl->confirms,
	                          cl->err, sizeof(cl->err)) < 0)
		return -1;
	cl->confirms.on_return = requeue_returned;
	cl->confirms.arg = cl;
	return 0;
}

/* Whether the message's x-cascade-error contains want. */
static int
requeue_reason_matches(amqp_bytes_t reason, const char *want)
{
	size_t n = strlen(want);

	if (n == 0)
		return 1;
	for (size_t i = 0; i + n <= reason.len; i++)
		if (memcmp((const char *)reason.bytes + i, want, n) == 0)
			return 1;
	return 0;
}

/*
 * The broker closed the publishing channel over the publish for owner:
 * say why in why, and open the channel again.  1, or -1 with cl->err.
 */
static int
requeue_refused(struct client *cl, amqp_bytes_t owner, char *why, size_t size)
{
	snprintf(why, size,
	         "the broker refused to publish it as its owner '%.*s' (%s); "
	         "requeue it as that user, or give this one the "
	         "impersonator tag",
	         (int)owner.len, (const char *)owner.bytes,
	         cl->err + strlen(CLOSED ": "));
	if (broker_channel_reopen(cl->conn, BROKER_CH_PUB, cl->err,
	                          sizeof(cl->err)) < 0 ||
	    requeue_select(cl) < 0)
		return -1;
	return 1;
}

/*
 * Publish one parked message to P with its restored properties and its
 * owner's user-id, and wait for the confirm: 0 sent, 1 refused (why), -1
 * with cl->err.
 */
static int
requeue_resend(struct client *cl, const amqp_message_t *m, const char *rk,
               char *why, size_t size)
{
	amqp_basic_properties_t props;
	struct park_target t;
	amqp_bytes_t owner;
	amqp_pool_t pool;
	uint64_t nacked = cl->confirms.nacked, returned = cl->confirms.returned;
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
		snprintf(cl->err, sizeof(cl->err), "out of memory");
		return -1;
	}
	if (owner.len > 0) {
		props._flags |= AMQP_BASIC_USER_ID_FLAG;
		props.user_id = owner;
	}
	/* P is a fanout: the routing key only names the target for people
	 * looking at the ingress queue; x-target-routing-key decides. */
	st = broker_confirm_publish(cl->conn, &cl->confirms,
	                            amqp_cstring_bytes(cl->topo->exchange),
	                            t.routing_key, 1, &props, m->body);
	empty_amqp_pool(&pool);
	if (st != AMQP_STATUS_OK) {
		snprintf(cl->err, sizeof(cl->err), "publish: %s",
		         amqp_error_string2(st));
		return -1;
	}
	rc = broker_confirm_wait(cl->conn, &cl->confirms, 0, CLIENT_CONFIRM_MS,
	                         cl->err, sizeof(cl->err));
	amqp_maybe_release_buffers(cl->conn);
	/* A user-id RabbitMQ does not allow this user closes the channel. */
	if (rc < 0 && owner.len > 0 &&
	    strncmp(cl->err, CLOSED ": ", strlen(CLOSED ": ")) == 0)
		return requeue_refused(cl, owner, why, size);
	if (rc < 0)
		return -1;
	if (cl->confirms.nacked > nacked) {
		snprintf(why, size, "the broker refused the publish (nack)");
		return 1;
	}
	if (cl->confirms.returned > returned) {
		snprintf(why, size, "%s", cl->unroutable);
		return 1;
	}
	return 0;
}

/*
 * m stays in P.error (failed: it could not be sent), held unacked until
 * the end, so that the next get does not return it again.
 */
static void
requeue_left(struct requeue *r, uint64_t tag, int failed,
             const amqp_message_t *m, const struct park_target *t,
             const char *note)
{
	r->last = tag;
	r->left++;
	r->failed += (uint64_t)failed;
	r->on_row(r->arg, "left", m, t, note);
}

int
requeue_pass(struct client *cl, struct requeue *r)
{
	uint64_t done, tag;
	struct park_target t;
	amqp_message_t m;
	char rk[CLIENT_KEY_MAX], why[1024];
	int got, st, rc = 0;

	for (done = 0; done < r->todo; done++) {
		got = client_get(cl, &tag, rk, &m);
		if (got <= 0) {
			rc = got;
			break;
		}
		park_target(&m.properties, amqp_cstring_bytes(rk), &t);
		if (r->reason != NULL &&
		    !requeue_reason_matches(t.reason, r->reason)) {
			requeue_left(r, tag, 0, &m, &t,
			             "reason does not match");
		} else if (r->message_id != NULL &&
		           !headers_key_is(client_message_id(&m.properties),
		                           r->message_id)) {
			requeue_left(r, tag, 0, &m, &t,
			             "message-id does not match");
		} else if (!requeue_parked_by_cascade(&m.properties)) {
			requeue_left(
			    r, tag, 1, &m, &t,
			    "not parked by cascade: no x-cascade-error "
			    "or x-death");
		} else if (client_rk_unknown(cl, &t)) {
			requeue_left(r, tag, 1, &m, &t,
			             "its routing key was not recorded when "
			             "it was parked");
		} else if (r->dry_run) {
			r->last = tag;
			r->would++;
			r->on_row(r->arg, "would requeue", &m, &t, NULL);
		} else {
			st = requeue_resend(cl, &m, rk, why, sizeof(why));
			if (st < 0) {
				amqp_destroy_message(&m);
				rc = -1;
				break;
			}
			if (st == 0) {
				/* Confirmed: only now may it leave P.error. */
				if (amqp_basic_ack(cl->conn, BROKER_CH_WORK,
				                   tag, 0) != AMQP_STATUS_OK) {
					snprintf(cl->err, sizeof(cl->err),
					         "basic.ack failed");
					amqp_destroy_message(&m);
					rc = -1;
					break;
				}
				r->sent++;
				r->on_row(r->arg, "requeued", &m, &t, NULL);
			} else {
				requeue_left(r, tag, 1, &m, &t, why);
			}
		}
		amqp_destroy_message(&m);
	}
	return rc;
}
