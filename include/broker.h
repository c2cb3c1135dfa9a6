/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connecting to RabbitMQ and the blocking set-up that happens before the
 * event loop takes over; and, for the tools, which have no event loop,
 * publishing with confirms and waiting for them.  Blocking calls
 * (amqp_simple_rpc and friends) are used here only, with socket and RPC
 * timeouts; the daemon never makes them at run time.
 */
#ifndef CASCADE_BROKER_H
#define CASCADE_BROKER_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define BROKER_CH_WORK 1  /* consumes and acks */
#define BROKER_CH_CHECK 2 /* passive exchange declares; a 404 closes it */
/*
 * Publishes with confirms.  Apart from the consuming channel, so that a
 * publish the broker refuses by closing the channel (an internal target
 * exchange, a permission) never takes the unacked deliveries with it.
 */
#define BROKER_CH_PUB 3
/*
 * The daemon's records of what waits (events.h): published without
 * confirms, for they only inform cascade-ctl list, and nothing must wait
 * for them.
 */
#define BROKER_CH_EVENTS 4
/*
 * The daemon's looks for holding queues that appeared while it runs on the
 * ladder (passive queue declares, one at a time): opened when needed, and
 * a 404 closes it.
 */
#define BROKER_CH_PROBE 5
/*
 * From here on, one channel for each of cascade's own quorum queues it
 * publishes to (the delay levels, the holding queues): that queue's first
 * publish since connecting goes alone on it (the daemon's gate).
 */
#define BROKER_CH_GATE 16

/* Seconds any blocking set-up step may take before the attempt fails. */
#define BROKER_SETUP_TIMEOUT 10

/*
 * Open a connection to url (one of cfg's), log in (announcing
 * connection.blocked and publisher confirms), and open its channels.  Returns
 * NULL with a reason in err on failure.
 */
amqp_connection_state_t broker_connect_url(const struct config *cfg,
                                           const char *url, char *err,
                                           size_t errsize);

/* The same with each URL of [broker] url in turn, until one connects. */
amqp_connection_state_t broker_connect(const struct config *cfg, char *err,
                                       size_t errsize);

/* The same, leaving in url the URL it connected to (cascade-ctl asks that
 * broker's management API). */
amqp_connection_state_t broker_connect_which(const struct config *cfg,
                                             char *url, size_t urlsize,
                                             char *err, size_t errsize);

/*
 * A login's user name and password: at most this many bytes, as
 * RabbitMQ's own tools take them, and no NUL byte.
 */
#define BROKER_CREDENTIAL_MAX 255

/*
 * Connect as someone else than cascade: the console's login checks a
 * user's password by connecting as them (docs/console-design.md 3).  Each
 * URL of [broker] url in turn gives the host, port, vhost and TLS
 * settings (client certificate included); user and password replace the
 * URL's own and [broker] password_file, and go nowhere else (err never
 * holds the password).  The first that connects is left in url.  A login
 * the broker refuses ends the attempts.  heartbeat_s 0 asks for none: the
 * socket gets SO_KEEPALIVE instead.  Returns NULL with a reason in err,
 * without connecting when user is empty or either is over
 * BROKER_CREDENTIAL_MAX bytes or holds a NUL byte.
 */
amqp_connection_state_t
broker_connect_user(const struct config *cfg, amqp_bytes_t user,
                    amqp_bytes_t password, int heartbeat_s, char *url,
                    size_t urlsize, char *err, size_t errsize);

/*
 * The broker sends content-header frames larger than the negotiated
 * frame_max: 8 bytes more from a publisher (RabbitMQ's frame size fudge),
 * and more again when dead-lettering adds x-death and x-*-death-* to a
 * message that already filled a frame.  rabbitmq-c drops the connection on
 * a frame above its limit, so broker_connect_url raises that limit to this
 * many times frame_max (frames are allocated at their own size: it costs
 * nothing until one comes); what we send stays within frame_max.
 */
#define BROKER_FRAME_READ_FACTOR 8

/* The negotiated frame_max: the largest frame we may send. */
int broker_frame_max(amqp_connection_state_t conn);

/*
 * basic.publish as rabbitmq-c's, with body frames of at most frame_max
 * bytes (the negotiated size, not the widened one).  The caller checked
 * that the content header fits.
 */
int broker_publish(amqp_connection_state_t conn, amqp_channel_t ch,
                   int frame_max, amqp_bytes_t exchange,
                   amqp_bytes_t routing_key, int mandatory,
                   const amqp_basic_properties_t *props, amqp_bytes_t body);

/*
 * A channel.close or connection.close the broker sent (m), in words:
 * "channel closed by the broker: 404 NOT_FOUND - ...".
 */
void broker_close_reason(const amqp_method_t *m, char *err, size_t size);

/* A reply that is not AMQP_RESPONSE_NORMAL, in words, prefixed by what. */
void broker_reply_string(amqp_rpc_reply_t r, const char *what, char *buf,
                         size_t size);

/* The reply code of a channel.close or connection.close that answered the
 * last RPC (406 PRECONDITION_FAILED, ...); 0 for any other reply. */
int broker_reply_code(amqp_connection_state_t conn);

/* The broker's version as major * 1000 + minor (4.3.6: 4003); 0 unknown. */
int broker_version(amqp_connection_state_t conn);

/* RabbitMQ's major version from the server properties; 0 when unknown. */
int broker_major_version(amqp_connection_state_t conn);

/* The reply of the last RPC in words; 0 when it succeeded. */
int broker_check(amqp_connection_state_t conn, const char *what, char *err,
                 size_t errsize);

/*
 * After the broker closed channel ch (channel.close received): answer with
 * close-ok and open ch again.  A channel that was in confirm mode needs
 * broker_confirm_select again.  Returns -1 with a reason in err.
 */
int broker_channel_reopen(amqp_connection_state_t conn, amqp_channel_t ch,
                          char *err, size_t errsize);

/*
 * Publisher confirms for the tools, which block while they wait (the
 * daemon matches confirms in its event loop: see outbox.h).
 *
 *	struct broker_confirms c;
 *	broker_confirm_select(conn, BROKER_CH_WORK, &c, err, errsize);
 *	broker_confirm_publish(conn, &c, exchange, routing_key, 1, &p, body);
 *	broker_confirm_wait(conn, &c, 0, 30000, err, errsize);
 *
 * Publishes are numbered on the channel from 1.  A basic.ack or basic.nack
 * settles its publish, or with multiple set every one still open up to
 * it, in whatever order they come; a basic.return (a mandatory publish
 * nothing was bound for) precedes its publish's ack.  At most
 * BROKER_CONFIRM_WINDOW publishes may be open at a time.
 */
#define BROKER_CONFIRM_WINDOW 4096

struct broker_confirms {
	amqp_channel_t ch;                /* in confirm mode */
	uint64_t seq;                     /* the last publish's number */
	uint64_t acked, nacked, returned; /* so far */
	/* Called, when set, for each publish settled and each return. */
	void (*on_settle)(void *arg, uint64_t seq, int acked);
	void (*on_return)(void *arg, const amqp_basic_return_t *r);
	void *arg;
	/* Private. */
	uint64_t low;  /* every publish up to this one is settled */
	int in_return; /* 1: a return's content header is due, 2: its body */
	uint64_t body_left;                        /* of the returned message */
	unsigned char open[BROKER_CONFIRM_WINDOW]; /* by seq % the size */
};

/*
 * confirm.select on ch, and c reset for it: set the callbacks after.
 * Returns -1 with a reason in err.
 */
int broker_confirm_select(amqp_connection_state_t conn, amqp_channel_t ch,
                          struct broker_confirms *c, char *err, size_t errsize);

/*
 * broker_publish on c->ch, numbered.  AMQP_STATUS_NO_MEMORY, before
 * anything is sent, when BROKER_CONFIRM_WINDOW publishes are open.
 */
int broker_confirm_publish(amqp_connection_state_t conn,
                           struct broker_confirms *c, amqp_bytes_t exchange,
                           amqp_bytes_t routing_key, int mandatory,
                           const amqp_basic_properties_t *props,
                           amqp_bytes_t body);

/* Publishes neither acked nor nacked yet. */
uint64_t broker_confirm_pending(const struct broker_confirms *c);

/*
 * A frame read by a caller that also consumes: 1 when it was c's (a
 * confirm, a return or the returned message's content: counted, the
 * callbacks called), 0 when it is the caller's, -1 with a reason in err
 * when the broker closed c->ch or the connection.
 */
int broker_confirm_frame(struct broker_confirms *c, const amqp_frame_t *f,
                         char *err, size_t errsize);

/*
 * Read frames until at most `pending` publishes are unsettled: 0.  -1 with
 * a reason in err when timeout_ms (< 0: no limit) passes first, or the
 * connection is lost, or the broker closed c->ch (broker_channel_reopen
 * opens it again) or the connection.  Frames that are not c's are
 * dropped: for callers that consume nothing meanwhile.
 */
int broker_confirm_wait(amqp_connection_state_t conn, struct broker_confirms *c,
                        uint64_t pending, int timeout_ms, char *err,
                        size_t errsize);

#endif
