/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An AMQP 1.0 consumer of quorum queues, for RabbitMQ 4.3's holding queues
 * (docs/how-it-works.md, "Native waiting"): Qpid Proton-C's connection
 * driver on a socket of our own, driven by the daemon's libev loop.
 *
 * One connection, one session, one receiving link per queue.  A delivery
 * is handed to the caller whole, unsettled, and settled in one of two ways:
 * accepted (done with it), or returned "modified" with the message
 * annotation x-opt-delivery-time, which makes a RabbitMQ 4.3 quorum queue
 * hold it until that millisecond and then deliver it again.  A settle is a
 * handle plus the connection's generation, so settling a delivery of a
 * connection since closed does nothing (the broker has it back already).
 *
 * Opening is blocking, with a deadline, like the 0-9-1 set-up (broker.h);
 * from then on nothing blocks.
 */
#ifndef CASCADE_AMQP1_H
#define CASCADE_AMQP1_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define AMQP1_MAX_LINKS 64

/* The annotation RabbitMQ 4.3 reads on a modified outcome. */
#define AMQP1_DELIVERY_TIME "x-opt-delivery-time"

struct amqp1;

/* A delivery to settle: valid for the connection generation it came on. */
struct amqp1_delivery {
	void *pn;     /* pn_delivery_t */
	uint64_t gen; /* the connection it belongs to */
};

struct amqp1_handler {
	/*
	 * A whole delivery on link `link` (the index of its queue).  bytes
	 * is the encoded AMQP 1.0 message (amqp1_parse reads it), valid
	 * during the call only.
	 */
	void (*delivery)(void *ctx, unsigned link, struct amqp1_delivery dv,
	                 const char *bytes, size_t len);
	/* The connection failed or the broker closed it, a link or the
	 * session: the caller tears down (amqp1_close) and reconnects. */
	void (*failed)(void *ctx, const char *why);
};

/* Where to connect: read from a 0-9-1 URL of [broker] url. */
struct amqp1_params {
	char host[256];
	int port;
	char user[256];
	char password[CONFIG_STR_MAX];
	char vhost[256];
	int tls;
	const struct config *cfg; /* [broker] tls_* and heartbeat */
};

/* Fill p from url and cfg (the password from cfg when set).  0, or -1. */
int amqp1_params_from_url(struct amqp1_params *p, const struct config *cfg,
                          const char *url, char *err, size_t errsize);

/*
 * Connect, log in, open a receiving link to each of the n queues with
 * `credit` deliveries of credit each (0: none until amqp1_grant), and wait
 * until the broker attached them all, for at most timeout_ms.  NULL with
 * the reason in err.  The handler runs from the loop once amqp1_start was
 * called.
 */
struct amqp1 *amqp1_open(const struct amqp1_params *p,
                         const char *const *queues, unsigned n, unsigned credit,
                         int64_t timeout_ms, const struct amqp1_handler *h,
                         void *ctx, char *err, size_t errsize);

/*
 * Before amqp1_start only: run the connection, blocking, until *count
 * (which the handler raises) reaches want, for at most timeout_ms.  0, or
 * -1 with err when it failed or timed out.
 */
int amqp1_wait(struct amqp1 *c, const unsigned *count, unsigned want,
               int64_t timeout_ms, char *err, size_t errsize);

/* Give each link credit deliveries more of credit. */
void amqp1_grant(struct amqp1 *c, unsigned credit);

/*
 * Detach, and attach again at once, each link that has been attached for
 * at least age_ms and has no delivery of ours unsettled.  RabbitMQ 4.3 can
 * check a delivery out to a consumer and lose it on its way between nodes
 * (after a restart or a partition); it notices only when a later delivery
 * comes, so on a quiet queue the message would stay checked out, for the
 * 30-minute consumer timeout or for good.  A detach returns it to the
 * queue.  What comes on the old link meanwhile is dropped: the broker
 * returns that too.  Returns how many links were replaced.
 */
unsigned amqp1_relink_idle(struct amqp1 *c, int64_t age_ms);

/* Run on loop from now on. */
void amqp1_start(struct amqp1 *c, struct ev_loop *loop);

/* Close at once (no handshake) and free: unsettled deliveries go back. */
void amqp1_close(struct amqp1 *c);

/*
 * Close with the handshake: write what settles queued and the close, and
 * wait for the broker's close for at most timeout_ms (blocking).  Then
 * amqp1_close.  For a clean exit: settles not yet written would otherwise
 * be lost, and the broker would count the deliveries as failed.
 */
void amqp1_shutdown(struct amqp1 *c, int64_t timeout_ms);

/* Settle: accepted.  One more delivery of credit on its link. */
void amqp1_accept(struct amqp1 *c, struct amqp1_delivery dv);

/*
 * Settle: modified, not failed, deliverable here, with
 * x-opt-delivery-time = due_ms (Unix epoch ms).  The queue holds it until
 * then.  One more delivery of credit on its link.
 */
void amqp1_delay(struct amqp1 *c, struct amqp1_delivery dv, int64_t due_ms);

/* Settle: released (back to the queue, not counted as failed). */
void amqp1_release(struct amqp1 *c, struct amqp1_delivery dv);

/* Send what settling queued.  The loop does it by itself as well. */
void amqp1_flush(struct amqp1 *c);

/* Deliveries received and not yet settled. */
unsigned amqp1_unsettled(const struct amqp1 *c);

/* What the daemon reads of an encoded AMQP 1.0 message. */
struct amqp1_message {
	const char *body; /* its one data section, pointing into the bytes */
	size_t body_len;
	uint32_t delivery_count; /* the header's: failed deliveries before */
	/* The x-opt-delivery-time it was last given back with (RabbitMQ
	 * keeps it on the message), Unix ms; 0: never. */
	int64_t delivery_time;
	/* The properties' user-id, which RabbitMQ checked when the message
	 * was published (a holding queue's envelope: a daemon's user);
	 * user_id_len 0: none, or longer than 255 bytes. */
	char user_id[256];
	size_t user_id_len;
};

/*
 * Read bytes.  0, or -1 with the reason in *why when they do not decode
 * or the body is not exactly one data section.
 */
int amqp1_parse(const char *bytes, size_t len, struct amqp1_message *msg,
                const char **why);

#endif
