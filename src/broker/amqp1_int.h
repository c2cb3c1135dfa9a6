/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The AMQP 1.0 consumer's private header: the connection struct every
 * src/amqp1*.c file shares, and the functions they call across files.
 * Not part of the API (amqp1.h is): only those files include it.
 *
 * The consumer is cut in three:
 *   amqp1.c          the connection driver: socket, TLS, the Proton
 *                    driver's pump (read, write, tick, events), the libev
 *                    watchers, open, start, shutdown, close, blocking
 *                    waits
 *   amqp1_link.c     the links and their deliveries: attach, relink,
 *                    credit, reading a delivery, settling it (accept,
 *                    release, modified with x-opt-delivery-time)
 *   amqp1_message.c  a delivery's bytes read as a message (amqp1_parse)
 */
#ifndef CASCADE_AMQP1_INT_H
#define CASCADE_AMQP1_INT_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include <proton/condition.h>
#include <proton/connection_driver.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/session.h>
#include <proton/ssl.h>

#include "amqp1.h"

/* A receiving link, and the delivery being read on it, frame by frame. */
struct amqp1_link {
	pn_link_t *pn;
	char *buf;
	size_t len, cap;
	unsigned unsettled; /* its deliveries handed on, not settled */
	int64_t opened;     /* mono ms */
	char address[600];
};

struct amqp1 {
	pn_connection_driver_t drv;
	pn_ssl_domain_t *ssl;
	int fd;
	uint64_t gen;
	struct amqp1_link links[AMQP1_MAX_LINKS];
	unsigned nlinks;
	unsigned attached;
	unsigned unsettled;
	pn_session_t *session;
	unsigned credit;  /* each link's, once granted */
	unsigned relinks; /* links replaced so far (names stay unique) */
	/* Links detached by us, until the broker's detach: what comes on
	 * them meanwhile is dropped (the broker takes it back). */
	pn_link_t *retiring[AMQP1_MAX_LINKS];
	unsigned nretiring;
	int detaching; /* amqp1_shutdown: links closed, awaiting the broker */
	unsigned detached;
	const struct amqp1_handler *h;
	void *ctx;
	struct ev_loop *loop;
	ev_io rio, wio;
	ev_timer tick;
	ev_prepare flush; /* sends what settles queued, before the loop waits */
	int failed;
	char why[512];
};

/*
 * amqp1_link.c, for amqp1.c.  Calls go that way only: the links know
 * nothing of the socket, and what they change is sent by the driver's
 * next pump (amqp1_flush, or the loop's prepare watcher).
 */

/* "/queues/NAME" with NAME percent-encoded (RabbitMQ's v2 addresses). */
void amqp1_address(const char *queue, char *out, size_t size);

/* Link i, attached afresh to its queue, with the credit granted. */
void amqp1_link_open(struct amqp1 *c, unsigned i);

/* amqp1_grant's work: credit more to every link. */
void amqp1_links_flow(struct amqp1 *c, unsigned credit);

/* amqp1_relink_idle's work: the links replaced, how many. */
unsigned amqp1_links_relink(struct amqp1 *c, int64_t age_ms);

/* Whether we detached l and await the broker's detach; forget: and l is
 * no longer awaited (the broker's detach came). */
int amqp1_retiring(struct amqp1 *c, const pn_link_t *l, int forget);

/* Read what arrived of the current delivery; hand it on once whole.  0, or
 * -1 when out of memory (the driver fails the connection). */
int amqp1_read_delivery(struct amqp1 *c, pn_delivery_t *d);

#endif
