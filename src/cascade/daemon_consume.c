/* SPDX-License-Identifier: Apache-2.0 */
/*
 * From reading the streams to consuming: basic.consume of every queue
 * that holds messages once P.cancels and P.series are read (or at once
 * without [events]), and ready at the last consume-ok.
 *
 * Owns: consume_oks, notified_ready.
 * Calls into: no other file of the daemon's.
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "broker.h"
#include "log.h"

/*
 * Consume the queues that hold messages.  Not waiting for consume-ok:
 * deliveries start at once, and the loop, not a blocking call, must be the
 * one to read them (see daemon_undecodable).  A consume the broker refuses
 * closes the channel, which the loop handles like any other failure.  The
 * loop says ready at the last consume-ok: a quorum queue registers its
 * consumer through its log, and `cascade-ctl status` run once the daemon
 * (or systemd) says ready should see it.
 */
int
daemon_consume_queues(struct daemon *d, char *err, size_t errsize)
{
	unsigned n = 0;

	for (unsigned i = 0; i < d->nconsumers; i++) {
		amqp_basic_consume_t c;
		/* Over AMQP 1.0 (daemon_hold.c), or not this time. */
		if (d->consumers[i].amqp1 || d->consumers[i].off)
			continue;
		n++;
		memset(&c, 0, sizeof(c));
		c.queue = amqp_cstring_bytes(d->consumers[i].queue);
		c.consumer_tag = amqp_cstring_bytes(d->consumers[i].tag);
		c.arguments = amqp_empty_table;
		int st = amqp_send_method(d->conn, BROKER_CH_WORK,
		                          AMQP_BASIC_CONSUME_METHOD, &c);
		if (st != AMQP_STATUS_OK) {
			snprintf(err, errsize, "consume %s: %s",
			         d->consumers[i].tag, amqp_error_string2(st));
			return -1;
		}
	}
	d->consume_oks = n;
	/* The holding queues' links, opened without credit (daemon_hold.c),
	 * get as much as the prefetch. */
	amqp1_grant(d->a1, (unsigned)d->cfg->router_prefetch);
	return 0;
}

/* The return queues of the shards this daemon takes (not those drained). */
static unsigned
daemon_returns(const struct daemon *d)
{
	unsigned n = 0;

	for (unsigned i = 0; i < d->nconsumers; i++)
		if (d->consumers[i].src == ROUTE_FROM_RETURN &&
		    d->consumers[i].shard >= 0)
			n++;
	return n;
}

/* Consuming: say so, once per connection (and to systemd). */
void
daemon_ready(struct daemon *d)
{
	log_info("ready",
	         " url=%s ingress=%s shards=%u returns=%u drained=%u levels=%u"
	         " prefetch=%" PRIu64 " heartbeat=%ds cancellations=%zu"
	         " mode=%s",
	         d->url, d->topo.ingress, d->topo.shards, daemon_returns(d),
	         d->topo.drains, d->ladder.levels, d->cfg->router_prefetch,
	         amqp_get_heartbeat(d->conn), d->requests.n[REQUESTS_CANCEL],
	         d->native == 1 ? "native" : "ladder");
	/* systemd (Type=notify): ready once consuming, the first time. */
	if (!d->notified_ready) {
		d->notified_ready = 1;
		sd_notifyf(0, "READY=1\nSTATUS=consuming from %s", d->url);
	} else {
		sd_notifyf(0, "STATUS=consuming from %s", d->url);
	}
}
