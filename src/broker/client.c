/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client: one blocking broker connection, for cascade-ctl and whatever
 * else asks the broker what cascade-ctl asks (include/client.h).  A
 * broker error becomes cl->err, never an exit.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <sys/time.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "duration.h"
#include "headers.h"

#define GIVE_BACK_WAIT_MS 5000 /* see client_give_back */
#define GIVE_BACK_POLL_MS 20
/*
 * How long basic.get may wait for its answer.  The broker encodes the
 * message's header before it answers, and the deepest header a frame
 * holds (a publisher's bomb, parked in P.error: CONTRACT.md 4.4) costs
 * RabbitMQ 4.3.6 some 2.5 s to encode on a quiet 2-core machine and over
 * 10 s, the connection's setup timeout, on a loaded one.  The setup
 * timeout stays for every other call.
 */
#define GET_TIMEOUT_S 120

int
client_open(struct client *cl, const struct config *cfg,
            const struct topology *topo)
{
	cl->cfg = cfg;
	cl->topo = topo;
	cl->as_user = 0;
	/* Records are written as this user, which RabbitMQ checks: the
	 * daemons judge a request by it (requests.h), and believe any other
	 * record only from their own users (trust.h). */
	if (config_broker_user(cfg, cl->user, sizeof(cl->user)) < 0)
		cl->user[0] = '\0';
	/* Keeps the URL it connected to: status asks that broker's
	 * management API. */
	cl->conn = broker_connect_which(cfg, cl->url, sizeof(cl->url), cl->err,
	                                sizeof(cl->err));
	return cl->conn != NULL ? 0 : -1;
}

int
client_open_user(struct client *cl, const struct config *cfg,
                 const struct topology *topo, amqp_bytes_t user,
                 amqp_bytes_t password, int heartbeat_s)
{
	cl->cfg = cfg;
	cl->topo = topo;
	cl->as_user = 1;
	cl->user[0] = '\0';
	cl->conn =
	    broker_connect_user(cfg, user, password, heartbeat_s, cl->url,
	                        sizeof(cl->url), cl->err, sizeof(cl->err));
	if (cl->conn == NULL)
		return -1;
	/* broker_connect_user took it: at most 255 bytes, no NUL.  Records
	 * and publishes to P are signed as this user, which RabbitMQ
	 * checks against the login. */
	memcpy(cl->user, user.bytes, user.len);
	cl->user[user.len] = '\0';
	return 0;
}

void
client_close(struct client *cl)
{
	if (cl->conn == NULL)
		return; /* a reconnect failed */
	amqp_connection_close(cl->conn, AMQP_REPLY_SUCCESS);
	amqp_destroy_connection(cl->conn);
	cl->conn = NULL;
}

/*
 * A connection the AMQP library can no longer read (it could not decode
 * a frame, so it has lost its place in the byte stream) cannot be closed
 * cleanly: drop it, which ends its consumers, and connect to the same
 * broker again.  Publisher confirms are selected anew at the next publish.
 * A login's connection cannot: its password was wiped once it connected.
 */
int
client_reconnect(struct client *cl)
{
	amqp_destroy_connection(cl->conn);
	memset(&cl->confirms, 0, sizeof(cl->confirms));
	if (cl->as_user) {
		cl->conn = NULL;
		snprintf(cl->err, sizeof(cl->err),
		         "the connection as %s was lost, and its password is "
		         "not kept: log in again",
		         cl->user);
		return -1;
	}
	cl->conn =
	    broker_connect_url(cl->cfg, cl->url, cl->err, sizeof(cl->err));
	return cl->conn != NULL ? 0 : -1;
}

/*
 * The broker closed channel ch (its reply is in r): say why in err, answer
 * with close-ok and open the channel again.  Returns the reply code, or -1
 * when the channel cannot be opened again.
 */
static int
client_channel_closed(struct client *cl, amqp_channel_t ch, amqp_rpc_reply_t r,
                      const char *what)
{
	amqp_channel_close_t *reply = r.reply.decoded;
	int code = reply->reply_code;

	broker_reply_string(r, what, cl->err, sizeof(cl->err));
	if (broker_channel_reopen(cl->conn, ch, cl->err, sizeof(cl->err)) < 0)
		return -1;
	return code;
}

/*
 * Passive declare of queue name on ch: its counts, or q->missing when the
 * broker has no such queue (404, or 403 below, which close the channel:
 * it is opened again).  Returns -1 with cl->err on any other failure.
 */
int
client_inspect(struct client *cl, amqp_channel_t ch, const char *name,
               struct client_queue *q)
{
	amqp_queue_declare_ok_t *ok;
	amqp_rpc_reply_t r;
	char what[TOPOLOGY_NAME_MAX + 32];

	snprintf(what, sizeof(what), "queue %s", name);
	ok = amqp_queue_declare(cl->conn, ch, amqp_cstring_bytes(name), 1, 0, 0,
	                        0, amqp_empty_table);
	if (ok != NULL) {
		q->missing = 0;
		q->messages = ok->message_count;
		q->consumers = ok->consumer_count;
		amqp_maybe_release_buffers(cl->conn);
		return 0;
	}
	r = amqp_get_rpc_reply(cl->conn);
	if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
	    r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
		int code = client_channel_closed(cl, ch, r, what);
		amqp_maybe_release_buffers(cl->conn);
		/* RabbitMQ 4.3 answers a passive declare of a queue that
		 * does not exist with 403 to a user without configure on
		 * it (a control user, docs/security.md), 404 to others. */
		if (code == AMQP_NOT_FOUND || code == AMQP_ACCESS_REFUSED) {
			q->missing = 1;
			q->messages = q->consumers = 0;
			return 0;
		}
		return -1;
	}
	broker_reply_string(r, what, cl->err, sizeof(cl->err));
	return -1;
}

/* The error queue's message count; -1 with cl->err when it is missing. */
int
client_error_count(struct client *cl, uint32_t *count)
{
	struct client_queue q;

	if (client_inspect(cl, BROKER_CH_CHECK, cl->topo->error, &q) < 0)
		return -1;
	if (q.missing) {
		snprintf(cl->err, sizeof(cl->err),
		         "queue %s does not exist: has cascade run with this "
		         "config (prefix %s)?",
		         cl->topo->error, cl->cfg->topology_prefix);
		return -1;
	}
	*count = q.messages;
	return 0;
}

/*
 * How often a quorum queue has handed the message out before.  Each look
 * with `errors` counts on RabbitMQ before 4.3, and from 4.0 a quorum queue
 * drops a message past its delivery-limit (20 unless set).
 */
int
client_delivery_count(const amqp_basic_properties_t *p, int64_t *n)
{
	const amqp_field_value_t *v;

	if (!(p->_flags & AMQP_BASIC_HEADERS_FLAG))
		return 0;
	v = headers_find(&p->headers, "x-delivery-count");
	return v != NULL && headers_integer(v, n) == 1;
}

/*
 * One message from the error queue, unacked: 1 and *tag, *rk, *m; 0 when
 * the queue is empty; -1 with cl->err.  The caller destroys *m.
 */
int
client_get(struct client *cl, uint64_t *tag, char *rk, amqp_message_t *m)
{
	const struct timeval slow = {GET_TIMEOUT_S, 0};
	const struct timeval usual = {BROKER_SETUP_TIMEOUT, 0};
	amqp_basic_get_ok_t *g;
	amqp_rpc_reply_t r;
	size_t len;
	int64_t n;

	amqp_set_rpc_timeout(cl->conn, &slow);
	r = amqp_basic_get(cl->conn, BROKER_CH_WORK,
	                   amqp_cstring_bytes(cl->topo->error), 0);
	amqp_set_rpc_timeout(cl->conn, &usual);
	if (r.reply_type != AMQP_RESPONSE_NORMAL) {
		broker_reply_string(r, "basic.get", cl->err, sizeof(cl->err));
		return -1;
	}
	if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
		return 0;
	g = r.reply.decoded;
	*tag = g->delivery_tag;
	len = g->routing_key.len < CLIENT_KEY_MAX - 1 ? g->routing_key.len
	                                              : CLIENT_KEY_MAX - 1;
	if (len > 0)
		memcpy(rk, g->routing_key.bytes, len);
	rk[len] = '\0';
	r = amqp_read_message(cl->conn, BROKER_CH_WORK, m, 0);
	if (r.reply_type != AMQP_RESPONSE_NORMAL) {
		broker_reply_string(r, "read message", cl->err,
		                    sizeof(cl->err));
		return -1;
	}
	amqp_maybe_release_buffers(cl->conn);
	if (client_delivery_count(&m->properties, &n) &&
	    n > cl->most_deliveries)
		cl->most_deliveries = n;
	return 1;
}

/*
 * Give back every unacked message up to tag, in order, uncounted as a
 * failed delivery (basic.nack, unlike basic.reject, does not raise a quorum
 * queue's delivery-count on RabbitMQ 4.3 and later).
 *
 * Then wait until the queue shows the held messages ready again.  basic.nack
 * has no reply, and a quorum queue applies it through its log after we may
 * have gone: `cascade-ctl errors && cascade-ctl requeue` would otherwise find
 * them still held and requeue nothing.  Fewer may come back when somebody
 * else consumes P.error meanwhile, so the wait is bounded.
 */
int
client_give_back(struct client *cl, uint64_t tag, uint64_t held)
{
	const struct timespec pause = {0, GIVE_BACK_POLL_MS * 1000000L};
	uint32_t before, now;
	int64_t until;

	if (tag == 0)
		return 0;
	if (client_error_count(cl, &before) < 0)
		return -1;
	if (amqp_basic_nack(cl->conn, BROKER_CH_WORK, tag, 1, 1) !=
	    AMQP_STATUS_OK) {
		snprintf(cl->err, sizeof(cl->err), "basic.nack failed");
		return -1;
	}
	until = duration_mono_ms() + GIVE_BACK_WAIT_MS;
	for (;;) {
		if (client_error_count(cl, &now) < 0)
			return -1;
		if ((uint64_t)now >= (uint64_t)before + held)
			return 0;
		if (duration_mono_ms() >= until) {
			snprintf(cl->err, sizeof(cl->err),
			         "%s shows %" PRIu32 " ready, %" PRIu64
			         " expected, %d s after giving the messages "
			         "back: is something else consuming it?",
			         cl->topo->error, now, (uint64_t)before + held,
			         GIVE_BACK_WAIT_MS / 1000);
			return 1;
		}
		nanosleep(&pause, NULL);
	}
}

amqp_bytes_t
client_message_id(const amqp_basic_properties_t *p)
{
	return (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) ? p->message_id
	                                                : amqp_empty_bytes;
}

/* Whether the parked message's original routing key was lost. */
int
client_rk_unknown(const struct client *cl, const struct park_target *t)
{
	return t->routing_key_parked &&
	       t->routing_key.len == strlen(cl->topo->error) &&
	       memcmp(t->routing_key.bytes, cl->topo->error,
	              t->routing_key.len) == 0;
}

/* Whether stream name exists; -1 with cl->err when not, or on an error. */
int
client_stream_exists(struct client *cl, const char *name)
{
	struct client_queue q;

	if (client_inspect(cl, BROKER_CH_CHECK, name, &q) < 0)
		return -1;
	if (q.missing) {
		/* Or refused: client_inspect cannot tell them apart. */
		snprintf(cl->err, sizeof(cl->err),
		         "no stream %s: is [events] enabled = yes, has the "
		         "daemon run with this configuration, and may this "
		         "user read it?",
		         name);
		return -1;
	}
	return 0;
}

/* A passive declare of cascade's exchange P; -1 with cl->err. */
int
client_exchange_exists(struct client *cl)
{
	amqp_rpc_reply_t r;
	char what[TOPOLOGY_NAME_MAX + 32];

	snprintf(what, sizeof(what), "exchange %s", cl->topo->exchange);
	amqp_exchange_declare(
	    cl->conn, BROKER_CH_CHECK, amqp_cstring_bytes(cl->topo->exchange),
	    amqp_cstring_bytes("fanout"), 1, 0, 0, 0, amqp_empty_table);
	r = amqp_get_rpc_reply(cl->conn);
	if (r.reply_type == AMQP_RESPONSE_NORMAL)
		return 0;
	if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
	    r.reply.id == AMQP_CHANNEL_CLOSE_METHOD &&
	    client_channel_closed(cl, BROKER_CH_CHECK, r, what) ==
	        AMQP_NOT_FOUND)
		snprintf(cl->err, sizeof(cl->err),
		         "exchange %s does not exist: has cascade run with "
		         "this config (prefix %s)?",
		         cl->topo->exchange, cl->cfg->topology_prefix);
	else if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION ||
	         r.reply.id != AMQP_CHANNEL_CLOSE_METHOD)
		broker_reply_string(r, what, cl->err, sizeof(cl->err));
	return -1;
}

/* basic.return of a record: its stream is gone. */
static void
client_record_returned(void *arg, const amqp_basic_return_t *r)
{
	struct client *cl = arg;

	snprintf(cl->unroutable, sizeof(cl->unroutable),
	         "unroutable: %.*s (was it deleted?)", (int)r->reply_text.len,
	         (const char *)r->reply_text.bytes);
}

/*
 * Publish props and body to exchange with routing_key (mandatory) and
 * wait for the broker's confirm: then it is routed to a queue, durably.
 * -1 with cl->err, which begins with what.
 */
static int
client_publish_as(struct client *cl, const char *exchange,
                  const char *routing_key, const char *what,
                  const amqp_basic_properties_t *props, amqp_bytes_t body)
{
	uint64_t nacked, returned;
	int st;

	if (cl->confirms.ch != BROKER_CH_PUB) {
		if (broker_confirm_select(cl->conn, BROKER_CH_PUB,
		                          &cl->confirms, cl->err,
		                          sizeof(cl->err)) < 0)
			return -1;
		cl->confirms.on_return = client_record_returned;
		cl->confirms.arg = cl;
	}
	nacked = cl->confirms.nacked;
	returned = cl->confirms.returned;
	st = broker_confirm_publish(
	    cl->conn, &cl->confirms, amqp_cstring_bytes(exchange),
	    amqp_cstring_bytes(routing_key), 1, props, body);
	if (st != AMQP_STATUS_OK) {
		snprintf(cl->err, sizeof(cl->err), "publish to %s: %s", what,
		         amqp_error_string2(st));
		return -1;
	}
	if (broker_confirm_wait(cl->conn, &cl->confirms, 0, CLIENT_CONFIRM_MS,
	                        cl->err, sizeof(cl->err)) < 0)
		return -1;
	amqp_maybe_release_buffers(cl->conn);
	if (cl->confirms.returned > returned) {
		snprintf(cl->err, sizeof(cl->err), "%s: %s", what,
		         cl->unroutable);
		return -1;
	}
	if (cl->confirms.nacked > nacked) {
		snprintf(cl->err, sizeof(cl->err),
		         "%s: the broker refused the message (nack)", what);
		return -1;
	}
	return 0;
}

int
client_publish(struct client *cl, const char *queue,
               const amqp_basic_properties_t *props, amqp_bytes_t body)
{
	return client_publish_as(cl, "", queue, queue, props, body);
}

int
client_publish_exchange(struct client *cl, const char *exchange,
                        const amqp_basic_properties_t *props, amqp_bytes_t body)
{
	char what[TOPOLOGY_NAME_MAX + 16];

	snprintf(what, sizeof(what), "exchange %s", exchange);
	return client_publish_as(cl, exchange, "", what, props, body);
}

/*
 * Append e to stream (exchange "", routing key the stream) and wait for
 * the broker's confirm: then it is in the stream, durably.  -1 with
 * cl->err.
 */
int
client_record(struct client *cl, const char *stream, const struct event *e)
{
	struct event own;
	amqp_basic_properties_t props;
	amqp_pool_t pool;
	int rc;

	/* Written as cl->user, which RabbitMQ checks (client_open). */
	own = *e;
	if (own.writer.len == 0)
		own.writer = amqp_cstring_bytes(cl->user);
	e = &own;
	init_amqp_pool(&pool, 1024);
	if (events_props(e, &pool, &props) < 0) {
		empty_amqp_pool(&pool);
		snprintf(cl->err, sizeof(cl->err), "out of memory");
		return -1;
	}
	rc = client_publish(cl, stream, &props, amqp_empty_bytes);
	empty_amqp_pool(&pool);
	return rc;
}
