/*
 * Connecting to RabbitMQ and the blocking set-up that happens before the
 * event loop takes over.  Blocking calls (amqp_simple_rpc and friends) are
 * used here only, with socket and RPC timeouts, never at run time.
 */
#ifndef CASCADE_BROKER_H
#define CASCADE_BROKER_H

#include "amqp_compat.h"
#include <stddef.h>

#include "config.h"

#define BROKER_CH_WORK 1  /* consumes and acks */
#define BROKER_CH_CHECK 2 /* passive exchange declares; a 404 closes it */
/*
 * Publishes with confirms.  Apart from the consuming channel, so that a
 * publish the broker refuses by closing the channel (an internal target
 * exchange, a permission) never takes the unacked deliveries with it.
 */
#define BROKER_CH_PUB 3

/* Seconds any blocking set-up step may take before the attempt fails. */
#define BROKER_SETUP_TIMEOUT 10

/*
 * Open a connection to url (one of cfg's), log in (announcing
 * connection.blocked and publisher confirms), and open both channels.  Returns
 * NULL with a reason in err on failure.
 */
amqp_connection_state_t broker_connect_url(const struct config *cfg,
                                           const char *url, char *err,
                                           size_t errsize);

/* The same with each URL of [broker] url in turn, until one connects. */
amqp_connection_state_t broker_connect(const struct config *cfg, char *err,
                                       size_t errsize);

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

/* A reply that is not AMQP_RESPONSE_NORMAL, in words, prefixed by what. */
void broker_reply_string(amqp_rpc_reply_t r, const char *what, char *buf,
                         size_t size);

/* The reply code of a channel.close or connection.close that answered the
 * last RPC (406 PRECONDITION_FAILED, ...); 0 for any other reply. */
int broker_reply_code(amqp_connection_state_t conn);

/* RabbitMQ's major version from the server properties; 0 when unknown. */
int broker_major_version(amqp_connection_state_t conn);

/* The reply of the last RPC in words; 0 when it succeeded. */
int broker_check(amqp_connection_state_t conn, const char *what, char *err,
                 size_t errsize);

#endif
