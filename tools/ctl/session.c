/*
 * session: the one broker session cascade-ctl's commands share: the
 * config and topology it names, the connection (and connecting again),
 * passive declares, the error queue's basic.get and give back, and
 * confirmed records to a stream.  A broker error becomes c->err, never an exit.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "duration.h"
#include "headers.h"

#define GIVE_BACK_WAIT_MS 5000 /* see session_give_back */
#define GIVE_BACK_POLL_MS 20

int
session_open(struct ctl *c, const char *path)
{
	const char *why;

	if (path != NULL) {
		if (config_load(&c->cfg, path, c->err, sizeof(c->err)) < 0) {
			fputs(c->err, stderr);
			return -1;
		}
	} else if (config_load_string(&c->cfg, "environment", "", c->err,
	                              sizeof(c->err)) < 0) {
		/* No file: the defaults, and CASCADE_BROKER_URL and
		 * CASCADE_BROKER_PASSWORD checked as the daemon checks them. */
		fputs(c->err, stderr);
		return -1;
	}
	if (ladder_init(&c->ladder, c->cfg.topology_resolution,
	                c->cfg.topology_factor, config_levels(&c->cfg),
	                &why) < 0) {
		fprintf(stderr, PROG ": ladder: %s\n", why);
		return -1;
	}
	if (topology_names(&c->topo, c->cfg.topology_prefix, &c->ladder,
	                   (unsigned)c->cfg.topology_shards,
	                   (unsigned)c->cfg.topology_drain_shards) < 0) {
		fprintf(stderr, PROG ": out of memory\n");
		return -1;
	}
	/* Keeps the URL it connected to: status asks that broker's
	 * management API. */
	c->conn = broker_connect_which(&c->cfg, c->url, sizeof(c->url), c->err,
	                               sizeof(c->err));
	if (c->conn == NULL) {
		fprintf(stderr, PROG ": %s\n", c->err);
		topology_free(&c->topo);
		return -1;
	}
	return 0;
}

void
session_close(struct ctl *c)
{
	topology_free(&c->topo);
	if (c->conn == NULL)
		return; /* a reconnect failed */
	amqp_connection_close(c->conn, AMQP_REPLY_SUCCESS);
	amqp_destroy_connection(c->conn);
	c->conn = NULL;
}

/*
 * A connection the AMQP library can no longer read (it could not decode
 * a frame, so it has lost its place in the byte stream) cannot be closed
 * cleanly: drop it, which ends its consumers, and connect to the same
 * broker again.  Publisher confirms are selected anew at the next publish.
 */
int
session_reconnect(struct ctl *c)
{
	amqp_destroy_connection(c->conn);
	memset(&c->confirms, 0, sizeof(c->confirms));
	c->conn = broker_connect_url(&c->cfg, c->url, c->err, sizeof(c->err));
	return c->conn != NULL ? 0 : -1;
}

/*
 * The broker closed channel ch (its reply is in r): say why in err, answer
 * with close-ok and open the channel again.  Returns the reply code, or -1
 * when the channel cannot be opened again.
 */
static int
session_channel_closed(struct ctl *c, amqp_channel_t ch, amqp_rpc_reply_t r,
                       const char *what)
{
	amqp_channel_close_t *cl = r.reply.decoded;
	int code = cl->reply_code;

	broker_reply_string(r, what, c->err, sizeof(c->err));
	if (broker_channel_reopen(c->conn, ch, c->err, sizeof(c->err)) < 0)
		return -1;
	return code;
}

/*
 * Passive declare of q->name on ch: its counts, or q->missing when the
 * broker has no such queue (404, or 403 below, which close the channel:
 * it is opened again).  Returns -1 with c->err on any other failure.
 */
int
session_inspect(struct ctl *c, amqp_channel_t ch, struct qinfo *q)
{
	amqp_queue_declare_ok_t *ok;
	amqp_rpc_reply_t r;
	char what[TOPOLOGY_NAME_MAX + 32];

	snprintf(what, sizeof(what), "queue %s", q->name);
	ok = amqp_queue_declare(c->conn, ch, amqp_cstring_bytes(q->name), 1, 0,
	                        0, 0, amqp_empty_table);
	if (ok != NULL) {
		q->missing = 0;
		q->messages = ok->message_count;
		q->consumers = ok->consumer_count;
		amqp_maybe_release_buffers(c->conn);
		return 0;
	}
	r = amqp_get_rpc_reply(c->conn);
	if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
	    r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
		int code = session_channel_closed(c, ch, r, what);
		amqp_maybe_release_buffers(c->conn);
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
	broker_reply_string(r, what, c->err, sizeof(c->err));
	return -1;
}

/* The error queue's message count; -1 with c->err when it is missing. */
int
session_error_count(struct ctl *c, uint32_t *count)
{
	struct qinfo q = {c->topo.error, -1, -1, 0, 0, 0};

	if (session_inspect(c, BROKER_CH_CHECK, &q) < 0)
		return -1;
	if (q.missing) {
		snprintf(c->err, sizeof(c->err),
		         "queue %s does not exist: has cascade run with this "
		         "config (prefix %s)?",
		         q.name, c->cfg.topology_prefix);
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
session_delivery_count(const amqp_basic_properties_t *p, int64_t *n)
{
	const amqp_field_value_t *v;

	if (!(p->_flags & AMQP_BASIC_HEADERS_FLAG))
		return 0;
	v = headers_find(&p->headers, "x-delivery-count");
	return v != NULL && headers_integer(v, n) == 1;
}

/*
 * One message from the error queue, unacked: 1 and *tag, *rk, *m; 0 when
 * the queue is empty; -1 with c->err.  The caller destroys *m.
 */
int
session_get(struct ctl *c, uint64_t *tag, char *rk, amqp_message_t *m)
{
	amqp_basic_get_ok_t *g;
	amqp_rpc_reply_t r;
	int64_t n;

	r = amqp_basic_get(c->conn, BROKER_CH_WORK,
	                   amqp_cstring_bytes(c->topo.error), 0);
	if (r.reply_type != AMQP_RESPONSE_NORMAL) {
		broker_reply_string(r, "basic.get", c->err, sizeof(c->err));
		return -1;
	}
	if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
		return 0;
	g = r.reply.decoded;
	*tag = g->delivery_tag;
	format_key(g->routing_key, rk);
	r = amqp_read_message(c->conn, BROKER_CH_WORK, m, 0);
	if (r.reply_type != AMQP_RESPONSE_NORMAL) {
		broker_reply_string(r, "read message", c->err, sizeof(c->err));
		return -1;
	}
	amqp_maybe_release_buffers(c->conn);
	if (session_delivery_count(&m->properties, &n) &&
	    n > c->most_deliveries)
		c->most_deliveries = n;
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
session_give_back(struct ctl *c, uint64_t tag, uint64_t held)
{
	const struct timespec pause = {0, GIVE_BACK_POLL_MS * 1000000L};
	uint32_t before, now;
	int64_t until;

	if (tag == 0)
		return 0;
	if (session_error_count(c, &before) < 0)
		return -1;
	if (amqp_basic_nack(c->conn, BROKER_CH_WORK, tag, 1, 1) !=
	    AMQP_STATUS_OK) {
		snprintf(c->err, sizeof(c->err), "basic.nack failed");
		return -1;
	}
	until = duration_mono_ms() + GIVE_BACK_WAIT_MS;
	for (;;) {
		if (session_error_count(c, &now) < 0)
			return -1;
		if ((uint64_t)now >= (uint64_t)before + held)
			return 0;
		if (duration_mono_ms() >= until) {
			fprintf(stderr,
			        PROG
			        ": warning: %s shows %" PRIu32
			        " ready, %" PRIu64 " expected, %d s after "
			        "giving the messages back: is something else "
			        "consuming it?\n",
			        c->topo.error, now, (uint64_t)before + held,
			        GIVE_BACK_WAIT_MS / 1000);
			return 0;
		}
		nanosleep(&pause, NULL);
	}
}

amqp_bytes_t
session_message_id(const amqp_basic_properties_t *p)
{
	return (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) ? p->message_id
	                                                : amqp_empty_bytes;
}

/* Whether the parked message's original routing key was lost. */
int
session_rk_unknown(const struct ctl *c, const struct park_target *t)
{
	return t->routing_key_parked &&
	       t->routing_key.len == strlen(c->topo.error) &&
	       memcmp(t->routing_key.bytes, c->topo.error,
	              t->routing_key.len) == 0;
}

/* A passive declare of cascade's exchange P; -1 with c->err. */
int
session_exchange_exists(struct ctl *c)
{
	amqp_rpc_reply_t r;
	char what[TOPOLOGY_NAME_MAX + 32];

	snprintf(what, sizeof(what), "exchange %s", c->topo.exchange);
	amqp_exchange_declare(
	    c->conn, BROKER_CH_CHECK, amqp_cstring_bytes(c->topo.exchange),
	    amqp_cstring_bytes("fanout"), 1, 0, 0, 0, amqp_empty_table);
	r = amqp_get_rpc_reply(c->conn);
	if (r.reply_type == AMQP_RESPONSE_NORMAL)
		return 0;
	if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
	    r.reply.id == AMQP_CHANNEL_CLOSE_METHOD &&
	    session_channel_closed(c, BROKER_CH_CHECK, r, what) ==
	        AMQP_NOT_FOUND)
		snprintf(c->err, sizeof(c->err),
		         "exchange %s does not exist: has cascade run with "
		         "this config (prefix %s)?",
		         c->topo.exchange, c->cfg.topology_prefix);
	else if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION ||
	         r.reply.id != AMQP_CHANNEL_CLOSE_METHOD)
		broker_reply_string(r, what, c->err, sizeof(c->err));
	return -1;
}

/* basic.return of a record: its stream is gone. */
static void
session_record_returned(void *arg, const amqp_basic_return_t *r)
{
	struct ctl *c = arg;

	snprintf(c->unroutable, sizeof(c->unroutable),
	         "unroutable: %.*s (was it deleted?)", (int)r->reply_text.len,
	         (const char *)r->reply_text.bytes);
}

/*
 * Publish props and body to queue (exchange "", mandatory) and wait for
 * the broker's confirm: then it is in the queue, durably.  -1 with
 * c->err.
 */
int
session_publish(struct ctl *c, const char *queue,
                const amqp_basic_properties_t *props, amqp_bytes_t body)
{
	uint64_t nacked, returned;
	int st;

	if (c->confirms.ch != BROKER_CH_PUB) {
		if (broker_confirm_select(c->conn, BROKER_CH_PUB, &c->confirms,
		                          c->err, sizeof(c->err)) < 0)
			return -1;
		c->confirms.on_return = session_record_returned;
		c->confirms.arg = c;
	}
	nacked = c->confirms.nacked;
	returned = c->confirms.returned;
	st = broker_confirm_publish(c->conn, &c->confirms, amqp_empty_bytes,
	                            amqp_cstring_bytes(queue), 1, props, body);
	if (st != AMQP_STATUS_OK) {
		snprintf(c->err, sizeof(c->err), "publish to %s: %s", queue,
		         amqp_error_string2(st));
		return -1;
	}
	if (broker_confirm_wait(c->conn, &c->confirms, 0, CONFIRM_MS, c->err,
	                        sizeof(c->err)) < 0)
		return -1;
	amqp_maybe_release_buffers(c->conn);
	if (c->confirms.returned > returned) {
		snprintf(c->err, sizeof(c->err), "%s: %s", queue,
		         c->unroutable);
		return -1;
	}
	if (c->confirms.nacked > nacked) {
		snprintf(c->err, sizeof(c->err),
		         "%s: the broker refused the message (nack)", queue);
		return -1;
	}
	return 0;
}

/*
 * Append e to stream (exchange "", routing key the stream) and wait for
 * the broker's confirm: then it is in the stream, durably.  -1 with
 * c->err.
 */
int
session_record(struct ctl *c, const char *stream, const struct event *e)
{
	char user[256];
	struct event own;
	amqp_basic_properties_t props;
	amqp_pool_t pool;
	int rc;

	/* Written as the user ctl logs in as, which RabbitMQ checks: the
	 * daemons judge a request by it (requests.h), and believe any other
	 * record only from their own users (trust.h). */
	own = *e;
	if (own.writer.len == 0 &&
	    config_broker_user(&c->cfg, user, sizeof(user)) == 0)
		own.writer = amqp_cstring_bytes(user);
	e = &own;
	init_amqp_pool(&pool, 1024);
	if (events_props(e, &pool, &props) < 0) {
		empty_amqp_pool(&pool);
		snprintf(c->err, sizeof(c->err), "out of memory");
		return -1;
	}
	rc = session_publish(c, stream, &props, amqp_empty_bytes);
	empty_amqp_pool(&pool);
	return rc;
}

void
session_fold_init(struct ctl *c, struct waiting_fold *f)
{
	waiting_fold_init(f);
	f->cfg = &c->cfg;
	if (config_broker_user(&c->cfg, f->own_user, sizeof(f->own_user)) < 0)
		f->own_user[0] = '\0';
}
