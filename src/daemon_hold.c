/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Native waiting, for RabbitMQ 4.3 and later ([topology] mode = native or
 * auto).  A message with at most [topology] native_window left waits in its
 * shard's holding queue: published there over 0-9-1 inside an envelope
 * (envelope.h), received over AMQP 1.0 (amqp1.h), and given back with the
 * outcome "modified" and x-opt-delivery-time, which makes the quorum queue
 * hold it until that millisecond and deliver it again.  Due, it goes to its
 * target like any other, and is accepted once the target confirmed it.
 * docs/how-it-works.md, "Native waiting", has the whole path.
 *
 * auto chooses native once per process: the broker says it is 4.3 or
 * later, and a canary message in a queue of its own comes back no earlier
 * than its delivery time.  Otherwise the ladder, and the log says why.  In
 * ladder mode, holding queues that exist (a native daemon made them) are
 * drained over 0-9-1: what they release goes on over the ladder.
 *
 * Owns: native, a1, hold_link, hold_queues, the consumers' amqp1 and off.
 * Calls into: daemon_sort (a delivery from a holding queue),
 * daemon_publish (daemon_park), daemon_fail, topology.h.
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <ev.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "broker.h"
#include "duration.h"
#include "log.h"

/* RabbitMQ 4.3: quorum queues hold a modified message until its time. */
#define NATIVE_MIN_VERSION 4003
/* s: how long a link to a holding queue lives before it is replaced,
 * once it has no delivery unsettled (amqp1_relink_idle). */
#ifndef HOLD_RELINK_S
#define HOLD_RELINK_S 60
#endif
/* The canary's wait, and how long it may take to come back. */
#define CANARY_DELAY_MS 300
#define CANARY_TIMEOUT_MS 10000

/*
 * The canary
 */

struct canary {
	unsigned got;
	struct amqp1_delivery dv;
	int64_t at; /* wall ms of the last delivery */
};

static void
canary_delivery(void *ctx, unsigned link, struct amqp1_delivery dv,
                const char *bytes, size_t len)
{
	struct canary *c = ctx;

	(void)link;
	(void)bytes;
	(void)len;
	c->got++;
	c->dv = dv;
	c->at = duration_wall_ms();
}

static void
canary_failed(void *ctx, const char *why)
{
	(void)ctx;
	(void)why;
}

static const struct amqp1_handler canary_handler = {canary_delivery,
                                                    canary_failed};

/*
 * Does a quorum queue on this broker hold a message given back with
 * x-opt-delivery-time until then?  A queue of our own (it expires a
 * minute after we leave it), one message, one return.  1 yes, 0 no (with
 * why in err), -1 could not tell (err).
 */
static int
daemon_canary(struct daemon *d, const char *url, char *err, size_t errsize)
{
	char queue[TOPOLOGY_NAME_MAX], host[64];
	const char *queues[1] = {queue};
	amqp_table_entry_t e[2];
	amqp_basic_properties_t props;
	struct amqp1_params p;
	struct amqp1 *a;
	struct canary c = {0};
	int64_t due;
	int rc = -1;

	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "host");
	host[sizeof(host) - 1] = '\0';
	snprintf(queue, sizeof(queue), "%.180s.canary.%.40s.%ld",
	         d->cfg->topology_prefix, host, (long)getpid());
	e[0].key = amqp_cstring_bytes("x-queue-type");
	e[0].value.kind = AMQP_FIELD_KIND_UTF8;
	e[0].value.value.bytes = amqp_cstring_bytes("quorum");
	e[1].key = amqp_cstring_bytes("x-expires");
	e[1].value.kind = AMQP_FIELD_KIND_I64;
	e[1].value.value.i64 = 60000;
	amqp_queue_declare(d->conn, BROKER_CH_WORK, amqp_cstring_bytes(queue),
	                   0, 1, 0, 0, (amqp_table_t){2, e});
	if (broker_check(d->conn, "declare the canary queue", err, errsize) < 0)
		return -1;
	if (amqp1_params_from_url(&p, d->cfg, url, err, errsize) < 0)
		return -1;
	a = amqp1_open(&p, queues, 1, 1, BROKER_SETUP_TIMEOUT * 1000,
	               &canary_handler, &c, err, errsize);
	if (a == NULL)
		goto out;
	memset(&props, 0, sizeof(props));
	props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG;
	props.content_type = amqp_cstring_bytes("text/plain");
	if (amqp_basic_publish(d->conn, BROKER_CH_WORK, amqp_empty_bytes,
	                       amqp_cstring_bytes(queue), 0, 0, &props,
	                       amqp_cstring_bytes("cascade canary")) !=
	    AMQP_STATUS_OK) {
		snprintf(err, errsize, "publish the canary: connection lost");
		goto out;
	}
	if (amqp1_wait(a, &c.got, 1, CANARY_TIMEOUT_MS, err, errsize) < 0)
		goto out;
	due = duration_wall_ms() + CANARY_DELAY_MS;
	amqp1_delay(a, c.dv, due);
	if (amqp1_wait(a, &c.got, 2, CANARY_TIMEOUT_MS, err, errsize) < 0)
		goto out;
	amqp1_accept(a, c.dv);
	amqp1_flush(a);
	if (c.at < due) {
		snprintf(err, errsize,
		         "a quorum queue gave a message back %" PRId64
		         " ms before its x-opt-delivery-time",
		         due - c.at);
		rc = 0;
	} else {
		rc = 1;
	}
out:
	amqp1_close(a);
	amqp_queue_delete(d->conn, BROKER_CH_WORK, amqp_cstring_bytes(queue), 0,
	                  0);
	if (amqp_get_rpc_reply(d->conn).reply_type != AMQP_RESPONSE_NORMAL &&
	    rc >= 0) {
		snprintf(err, errsize, "delete the canary queue %s", queue);
		rc = -1;
	}
	return rc;
}

/* auto, the first time: native when the broker proves it.  0, or -1. */
static int
daemon_choose(struct daemon *d, const char *url, char *err, size_t errsize)
{
	int version = broker_version(d->conn);
	char why[512];
	int rc;

	if (d->cfg->topology_queue_type != QUEUE_TYPE_QUORUM) {
		d->native = 0;
		log_info("wait_mode",
		         " mode=ladder reason=\"auto: "
		         "topology.queue_type is classic\"%s",
		         "");
		return 0;
	}
	if (version < NATIVE_MIN_VERSION) {
		d->native = 0;
		log_info("wait_mode",
		         " mode=ladder reason=\"auto: RabbitMQ %d.%d holds no "
		         "message until a time (4.3 or later does)\"",
		         version / 1000, version % 1000);
		return 0;
	}
	rc = daemon_canary(d, url, why, sizeof(why));
	if (rc < 0) {
		snprintf(err, errsize, "auto: the canary failed: %s", why);
		return -1;
	}
	d->native = rc;
	if (rc)
		log_info("wait_mode",
		         " mode=native reason=\"auto: RabbitMQ "
		         "%d.%d held the canary until its time\"",
		         version / 1000, version % 1000);
	else
		log_warn("wait_mode",
		         " mode=ladder reason=\"auto: %s (a queue on an older "
		         "machine version, in a cluster being upgraded?)\"",
		         why);
	return 0;
}

/*
 * Deliveries from the holding queues
 */

static void
on_hold_delivery(void *ctx, unsigned link, struct amqp1_delivery dv,
                 const char *bytes, size_t len)
{
	struct daemon *d = ctx;
	struct amqp1_message msg;
	struct message *m;
	const char *why;

	if (d->stopping || d->broken) {
		/* Back to the queue, its delivery count unchanged. */
		amqp1_release(d->a1, dv);
		return;
	}
	if ((m = message_new()) == NULL) {
		daemon_fail(d, "out of memory");
		return;
	}
	m->src = ROUTE_FROM_HOLD;
	m->consumer = d->hold_link[link];
	m->kind = MESSAGE_HELD;
	m->dv = dv;
	m->routing_key = amqp_cstring_bytes(d->consumers[m->consumer].queue);
	if (amqp1_parse(bytes, len, &msg, &why) < 0) {
		/* Not ours: park the bytes as they came. */
		if (message_body(m, len) < 0) {
			message_free(m);
			daemon_fail(d, "out of memory");
			return;
		}
		memcpy(m->buf, bytes, len);
		m->body_got = len;
		m->routed = 1;
		d->m.received[m->consumer]++;
		daemon_park(d, m, PARK_undecodable, "holding queue %s: %s",
		            d->consumers[m->consumer].queue, why);
		return;
	}
	if (message_body(m, msg.body_len) < 0) {
		message_free(m);
		daemon_fail(d, "out of memory");
		return;
	}
	if (msg.body_len > 0)
		memcpy(m->buf, msg.body, msg.body_len);
	m->body_got = msg.body_len;
	/* Who published the envelope, for daemon_forged. */
	if (msg.user_id_len > 0) {
		m->props.user_id = message_dup(
		    m, (amqp_bytes_t){msg.user_id_len, msg.user_id});
		if (m->props.user_id.bytes != NULL)
			m->props._flags |= AMQP_BASIC_USER_ID_FLAG;
	}
	m->delivery_count = msg.delivery_count;
	m->delivery_time = msg.delivery_time;
	m->redelivered = msg.delivery_count > 0;
	m->have_header = 1;
	daemon_message_done(d, m);
}

static void
on_hold_failed(void *ctx, const char *why)
{
	daemon_fail(ctx, why);
}

static const struct amqp1_handler hold_handler = {on_hold_delivery,
                                                  on_hold_failed};

/*
 * Connecting
 */

/* Native: the holding queues, and a link to each this daemon consumes. */
static int
daemon_hold_open(struct daemon *d, const char *url, char *err, size_t errsize)
{
	const char *queues[AMQP1_MAX_LINKS];
	struct amqp1_params p;
	unsigned n = 0;
	int rc;

	rc = topology_declare_hold(d->conn, BROKER_CH_WORK, d->cfg, &d->topo,
	                           err, errsize);
	if (rc < 0)
		return rc;
	for (unsigned i = 0; i < d->nconsumers; i++) {
		struct consumer *c = &d->consumers[i];
		if (c->src != ROUTE_FROM_HOLD)
			continue;
		c->amqp1 = 1;
		c->off = 0;
		d->hold_link[n] = i;
		queues[n++] = c->queue;
	}
	if (amqp1_params_from_url(&p, d->cfg, url, err, errsize) < 0)
		return -1;
	/* No credit yet: nothing is routed before P.cancels is read (see
	 * daemon_consume_queues). */
	d->a1 = amqp1_open(&p, queues, n, 0, BROKER_SETUP_TIMEOUT * 1000,
	                   &hold_handler, d, err, errsize);
	if (d->a1 == NULL)
		return -1;
	d->rp.native_window = d->cfg->topology_native_window;
	d->plan.hold_queues = d->hold_queues;
	return 0;
}

/* Ladder: drain the holding queues a native daemon left, over 0-9-1. */
static int
daemon_hold_drain(struct daemon *d, char *err, size_t errsize)
{
	int present[LADDER_MAX_SHARDS];
	unsigned n;

	d->rp.native_window = 0;
	d->plan.hold_queues = NULL;
	if (topology_hold_present(d->conn, BROKER_CH_WORK, &d->topo, present,
	                          &n, err, errsize) < 0)
		return -1;
	for (unsigned i = 0; i < d->nconsumers; i++) {
		struct consumer *c = &d->consumers[i];
		if (c->src != ROUTE_FROM_HOLD)
			continue;
		c->amqp1 = 0;
		c->off = !present[c->shard];
	}
	if (n > 0)
		log_info("hold_drain",
		         " queues=%u reason=\"holding queues of "
		         "native waiting exist: what they release "
		         "goes on over the ladder\"",
		         n);
	return 0;
}

int
daemon_hold_connect(struct daemon *d, const char *url, char *err,
                    size_t errsize, int *fatal)
{
	int version = broker_version(d->conn);

	*fatal = 0;
	for (unsigned s = 0; s < d->topo.shards; s++)
		d->hold_queues[s] = d->topo.hold[s];
	switch (d->cfg->topology_mode) {
	case WAIT_NATIVE:
		if (version < NATIVE_MIN_VERSION) {
			snprintf(err, errsize,
			         "topology.mode = native needs RabbitMQ 4.3 or "
			         "later; this broker is %d.%d (mode = auto "
			         "falls back to the ladder)",
			         version / 1000, version % 1000);
			*fatal = 1;
			return -1;
		}
		if (d->native < 0)
			log_info("wait_mode", " mode=native reason=\"%s\"",
			         "topology.mode = native");
		d->native = 1;
		break;
	case WAIT_AUTO:
		if (d->native < 0 && daemon_choose(d, url, err, errsize) < 0)
			return -1;
		break;
	default:
		d->native = 0;
		break;
	}
	if (d->native)
		return daemon_hold_open(d, url, err, errsize);
	return daemon_hold_drain(d, err, errsize);
}

void
daemon_give_back(struct outbox_item *it, void *ctx)
{
	struct daemon *d = ctx;
	struct message *m = MESSAGE_OF(it);

	if (m->kind == MESSAGE_HELD)
		amqp1_release(d->a1, m->dv);
	message_free(m);
}

static void
on_relink(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, relink);

	(void)loop;
	(void)revents;
	if (d->broken || d->stopping)
		return;
	d->m.native_relinks += amqp1_relink_idle(d->a1, HOLD_RELINK_S * 1000);
}

void
daemon_hold_start(struct daemon *d)
{
	if (d->a1 == NULL)
		return;
	amqp1_start(d->a1, d->loop);
	/* Checked more often than the links' age: a busy one waits for a
	 * quiet moment. */
	ev_init(&d->relink, on_relink);
	ev_timer_set(&d->relink, HOLD_RELINK_S / 4.0, HOLD_RELINK_S / 4.0);
	ev_timer_start(d->loop, &d->relink);
}

/* Links detached, then the connection closed, within timeout_ms. */
static void
daemon_hold_end(struct daemon *d, int64_t timeout_ms)
{
	if (ev_is_active(&d->relink))
		ev_timer_stop(d->loop, &d->relink);
	amqp1_shutdown(d->a1, timeout_ms);
	d->a1 = NULL;
}

void
daemon_hold_shutdown(struct daemon *d)
{
	daemon_hold_end(d, 2000);
}

void
daemon_hold_close(struct daemon *d)
{
	/* Detached cleanly when the AMQP 1.0 connection still works (the
	 * 0-9-1 one failed): RabbitMQ then sends the settles it held back. */
	daemon_hold_end(d, 1000);
}
