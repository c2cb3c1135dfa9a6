/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client: one blocking broker connection for a program without an event
 * loop (cascade-ctl, and the console's workers to come, docs/console-
 * design.md): connecting and connecting again, passive declares, the
 * error queue's basic.get and give back, and publishes and stream records
 * that wait for the broker's confirm.  It lives in the library so that
 * every such program asks the broker the same things the same way.
 *
 * A broker error becomes cl->err and a -1, never an exit or a line on a
 * terminal: what to print is the caller's.
 */
#ifndef CASCADE_CLIENT_H
#define CASCADE_CLIENT_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "config.h"
#include "events.h"
#include "park.h"
#include "topology.h"

#define CLIENT_CONFIRM_MS                                                      \
	30000              /* how long a publish may wait for its confirm */
#define CLIENT_KEY_MAX 256 /* shortstr: routing keys, exchange names */

struct client {
	const struct config *cfg;     /* the broker URLs, control_users */
	const struct topology *topo;  /* the queues and streams it names */
	amqp_connection_state_t conn; /* NULL: not connected */
	char url[CONFIG_STR_MAX];     /* the broker URL connected to */
	char
	    user[256]; /* who it logs in as (the first URL's); empty: unknown */
	/* 1: opened by client_open_user, whose password is not kept; a lost
	 * connection cannot be made again. */
	int as_user;
	/* requeue: BROKER_CH_WORK; list and cancel: BROKER_CH_PUB */
	struct broker_confirms confirms;
	char unroutable[1024];   /* what the last basic.return said */
	int64_t most_deliveries; /* highest x-delivery-count seen */
	char err[8192];
};

/* One queue as a passive declare saw it. */
struct client_queue {
	int missing;
	uint32_t messages, consumers;
};

/*
 * Connect to the first of cfg's broker URLs that answers, keeping the one
 * connected to in cl->url.  cfg and topo must outlive cl.  -1 with
 * cl->err.
 */
int client_open(struct client *cl, const struct config *cfg,
                const struct topology *topo);
/*
 * The same as another user than the config's, with that user's password
 * (broker_connect_user: the URLs' hosts, vhost and TLS; a heartbeat of
 * heartbeat_s, 0 for none): the console's login.  cl->user is that user,
 * so records and publishes are signed as them; the password is not kept,
 * so client_reconnect fails.  -1 with cl->err, which never holds the
 * password.
 */
int client_open_user(struct client *cl, const struct config *cfg,
                     const struct topology *topo, amqp_bytes_t user,
                     amqp_bytes_t password, int heartbeat_s);
/* A clean close: the broker has handled every ack and nack first. */
void client_close(struct client *cl);
/*
 * Drop the connection, which the AMQP library can no longer read, and
 * connect again to cl->url, with the same channels open.  -1 with cl->err
 * (cl->conn is then NULL: only client_close may follow); always for a
 * client_open_user connection.
 */
int client_reconnect(struct client *cl);

/*
 * Passive declare of queue name on ch: its counts, or q->missing when the
 * broker has no such queue (404, which closes the channel: it is opened
 * again).  Returns -1 with cl->err on any other failure.
 */
int client_inspect(struct client *cl, amqp_channel_t ch, const char *name,
                   struct client_queue *q);
/* The error queue's message count; -1 with cl->err when it is missing. */
int client_error_count(struct client *cl, uint32_t *count);
/* A passive declare of cascade's exchange P; -1 with cl->err. */
int client_exchange_exists(struct client *cl);
/* Whether stream name exists; -1 with cl->err when not, or on an error. */
int client_stream_exists(struct client *cl, const char *name);

/*
 * One message from the error queue on BROKER_CH_WORK, unacked: 1 and
 * *tag, *rk (CLIENT_KEY_MAX bytes), *m; 0 when the queue is empty; -1
 * with cl->err.  The caller destroys *m.
 */
int client_get(struct client *cl, uint64_t *tag, char *rk, amqp_message_t *m);
/*
 * Give back every unacked message up to tag, and wait (bounded) until the
 * error queue shows the held ones ready again.  0; 1 when they did not
 * all show in time, with a warning in cl->err; -1 with cl->err.
 */
int client_give_back(struct client *cl, uint64_t tag, uint64_t held);

/*
 * Publish props and body to queue through the default exchange, with a
 * publisher confirm on BROKER_CH_PUB.  -1 with cl->err.
 */
int client_publish(struct client *cl, const char *queue,
                   const amqp_basic_properties_t *props, amqp_bytes_t body);
/*
 * The same through exchange (routing key empty: for cascade's exchange P,
 * a fanout): a request published as a publisher makes it (request.h).
 */
int client_publish_exchange(struct client *cl, const char *exchange,
                            const amqp_basic_properties_t *props,
                            amqp_bytes_t body);
/*
 * Append e to stream (exchange "", routing key the stream) and wait for
 * the broker's confirm, written as cl->user unless e names its writer.
 * -1 with cl->err.
 */
int client_record(struct client *cl, const char *stream, const struct event *e);

/* What a parked message says: its x-delivery-count (1 with *n, else 0),
 * its message-id (or empty), whether its routing key was lost. */
int client_delivery_count(const amqp_basic_properties_t *p, int64_t *n);
amqp_bytes_t client_message_id(const amqp_basic_properties_t *p);
int client_rk_unknown(const struct client *cl, const struct park_target *t);

#endif
