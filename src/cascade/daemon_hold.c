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
 * auto waits natively where the broker says it is 4.3 or later and a
 * canary message in a queue of its own comes back no earlier than its
 * delivery time (daemon_canary.c, in the background: the daemon is ready
 * on the ladder meanwhile, and switches when the canary answers).  In
 * ladder mode, holding queues that exist (a native daemon made them) are
 * drained over 0-9-1: what they release goes on over the ladder.
 *
 * Owns: native, auto_native, canary_version, canary_due, canary_retry,
 * canary_async, switching, a1, hold_link, hold_queues, the consumers'
 * amqp1 and off.
 * Calls into: daemon_sort (a delivery from a holding queue),
 * daemon_publish (daemon_park), daemon_canary, daemon_fail, topology.h.
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
/* s: how often a daemon on the ladder looks for holding queues that
 * appeared since it connected. */
#ifndef HOLD_PROBE_S
#define HOLD_PROBE_S 30
#endif
/* s: how long auto waits before it asks the canary again when the last
 * could not tell (refused, limited, timed out). */
#ifndef CANARY_RETRY_S
#define CANARY_RETRY_S 300
#endif

/*
 * auto's choice.  Classic queues or a broker older than 4.3: the ladder,
 * said once.  Otherwise this connection waits as the canary last answered
 * (the ladder until it has), and the canary (daemon_canary.c) asks again
 * in the background once connected: at a connection unless it answered in
 * the last CANARY_RETRY_S, and every CANARY_RETRY_S while it cannot tell.  An
 * answer that differs from the mode in use switches it (a reconnect); one that
 * cannot tell changes nothing, and says what to change.  So auto never leaves a
 * daemon idle. 1: the broker can hold (a canary runs); 0: it cannot (ladder for
 * good).
 */
static int
auto_may_hold(struct daemon *d, int version)
{
	if (d->cfg->topology_queue_type != QUEUE_TYPE_QUORUM) {
		if (d->native < 0)
			log_info("wait_mode",
			         " mode=ladder reason=\"auto: "
			         "topology.queue_type is classic\"%s",
			         "");
		return 0;
	}
	if (version < NATIVE_MIN_VERSION) {
		if (d->native < 0)
			log_info("wait_mode",
			         " mode=ladder reason=\"auto: RabbitMQ %d.%d "
			         "holds no message until a time (4.3 or later "
			         "does)\"",
			         version / 1000, version % 1000);
		return 0;
	}
	return 1;
}

/* The switch to the mode the canary answered: from a fresh connection,
 * at once, what was in flight given back to the broker. */
static void
auto_switch(struct daemon *d, int native, int version, const char *why)
{
	if (native)
		log_info("wait_mode",
		         " mode=native reason=\"auto: RabbitMQ %d.%d held the "
		         "canary until its time\"",
		         version / 1000, version % 1000);
	else
		log_warn("wait_mode",
		         " mode=ladder reason=\"auto: %s (a queue on an older "
		         "machine version, in a cluster being upgraded?)\"",
		         why);
	d->auto_native = native;
	if (d->native != native && d->consuming && !d->broken) {
		d->switching = 1;
		daemon_teardown_soon(d);
	}
}

static void
on_canary(struct ev_loop *loop, ev_async *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, canary_async);
	char why[512];
	int rc, version = d->canary_version;

	(void)loop;
	(void)revents;
	rc = daemon_canary_answer(d, why, sizeof(why));
	if (rc == -2 || d->stopping)
		return;
	d->m.canaries[rc < 0 ? 2 : rc]++;
	if (rc >= 0) {
		d->canary_at = duration_mono_ms();
		ev_timer_stop(d->loop, &d->canary_retry);
		if (rc != d->auto_native)
			auto_switch(d, rc, version, why);
		return;
	}
	/* Could not tell: the mode stays, and it asks again later. */
	log_warn("wait_mode",
	         " mode=%s reason=\"auto: the canary could not tell (%s); "
	         "%s; it asks again in %d s. To "
	         "wait natively, let this user open one more connection "
	         "(max-connections) and its vhost one more queue "
	         "(max-queues), or set [topology] mode = native; to keep "
	         "the ladder without asking, mode = ladder\"",
	         d->native == 1 ? "native" : "ladder", why,
	         d->native == 1 ? "native waiting goes on"
	                        : "the ladder meanwhile",
	         CANARY_RETRY_S);
	ev_timer_set(&d->canary_retry, CANARY_RETRY_S, 0.);
	ev_timer_start(d->loop, &d->canary_retry);
}

/* Ask the canary, in the background, on the URL this connection used. */
static void
canary_ask(struct daemon *d)
{
	char err[256], raw[CONFIG_STR_MAX];

	if (d->canary != NULL || d->stopping)
		return;
	if (config_broker_url(d->cfg, d->url_next % d->urls, raw, sizeof(raw)) <
	    0)
		return;
	if (daemon_canary_start(d, raw, err, sizeof(err)) < 0)
		log_warn("wait_mode",
		         " mode=%s reason=\"auto: the canary did not start: "
		         "%s\"",
		         d->native == 1 ? "native" : "ladder", err);
}

static void
on_canary_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, canary_retry);

	(void)loop;
	(void)revents;
	if (d->consuming && !d->broken)
		canary_ask(d);
}

static void on_hold_probe(struct ev_loop *loop, ev_timer *w, int revents);

void
daemon_hold_init(struct daemon *d)
{
	ev_init(&d->hold_probe, on_hold_probe);
	ev_async_init(&d->canary_async, on_canary);
	ev_async_start(d->loop, &d->canary_async);
	ev_init(&d->canary_retry, on_canary_retry);
	d->auto_native = -1;
}

void
daemon_hold_free(struct daemon *d)
{
	ev_timer_stop(d->loop, &d->hold_probe);
	ev_timer_stop(d->loop, &d->canary_retry);
	ev_async_stop(d->loop, &d->canary_async);
	daemon_canary_orphan(d);
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

/* Native: the holding queues, and a link to each this daemon consumes.
 * 0; -1 (err) when a declare failed (the channel is gone); -2 (err) when
 * the AMQP 1.0 connection failed (the 0-9-1 one goes on). */
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
		return -2;
	/* No credit yet: nothing is routed before P.cancels is read (see
	 * daemon_consume_queues). */
	d->a1 = amqp1_open(&p, queues, n, 0, BROKER_SETUP_TIMEOUT * 1000,
	                   &hold_handler, d, err, errsize);
	if (d->a1 == NULL)
		return -2;
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
	int version = broker_version(d->conn), rc;

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
		if (!auto_may_hold(d, version)) {
			d->native = 0;
			break;
		}
		if (d->native < 0 && d->auto_native < 0)
			log_info(
			    "wait_mode",
			    " mode=ladder reason=\"auto: RabbitMQ %d.%d: "
			    "the ladder until a canary, in the background, "
			    "shows that a quorum queue holds a message until "
			    "its time\"",
			    version / 1000, version % 1000);
		d->canary_version = version;
		d->native = d->auto_native == 1;
		/* Asked again at a connection, unless it answered lately (the
		 * switch it asked for is this connection) or is pausing. */
		d->canary_due =
		    !ev_is_active(&d->canary_retry) &&
		    (d->auto_native < 0 || duration_mono_ms() - d->canary_at >=
		                               CANARY_RETRY_S * 1000);
		if (!d->native)
			break;
		rc = daemon_hold_open(d, url, err, errsize);
		if (rc == 0)
			return 0;
		/* Not on this connection: the ladder, and the canary asks
		 * again after its pause, not at once. */
		d->auto_native = -1;
		d->canary_due = 0;
		ev_timer_set(&d->canary_retry, CANARY_RETRY_S, 0.);
		ev_timer_start(d->loop, &d->canary_retry);
		if (rc == -1)
			return -1;
		log_warn("wait_mode",
		         " mode=ladder reason=\"auto: native waiting could "
		         "not start on this connection (%s); the ladder until "
		         "the canary shows it can\"",
		         err);
		d->native = 0;
		break;
	default:
		d->native = 0;
		break;
	}
	if (d->native)
		return daemon_hold_open(d, url, err, errsize) < 0 ? -1 : 0;
	return daemon_hold_drain(d, err, errsize);
}

/*
 * Holding queues that appear while a daemon runs on the ladder (a native
 * daemon of the same prefix made them, and may since have stopped): every
 * HOLD_PROBE_S, once ready, each shard's holding queue this daemon does not
 * consume yet is looked for, one passive declare at a time on a channel of
 * its own (a 404 closes it, so it is opened again for the next), and one
 * that exists is consumed from then on.  So none is left without a
 * consumer for more than HOLD_PROBE_S.
 */

/* The next holding queue not consumed, from consumer index `from` on;
 * d->nconsumers when none is left. */
static unsigned
probe_next(const struct daemon *d, unsigned from)
{
	for (unsigned i = from; i < d->nconsumers; i++)
		if (d->consumers[i].src == ROUTE_FROM_HOLD &&
		    d->consumers[i].off && !d->consumers[i].amqp1)
			return i;
	return d->nconsumers;
}

/* Look for consumer i's queue: the channel first, when it is closed. */
static void
probe_send(struct daemon *d)
{
	amqp_queue_declare_t q;
	amqp_channel_open_t open = {amqp_empty_bytes};
	int st;

	if (d->probe_state == PROBE_CLOSED) {
		st = amqp_send_method(d->conn, BROKER_CH_PROBE,
		                      AMQP_CHANNEL_OPEN_METHOD, &open);
		d->probe_state = PROBE_OPENING;
	} else {
		memset(&q, 0, sizeof(q));
		q.queue = amqp_cstring_bytes(d->consumers[d->probe_at].queue);
		q.passive = 1;
		q.arguments = amqp_empty_table;
		st = amqp_send_method(d->conn, BROKER_CH_PROBE,
		                      AMQP_QUEUE_DECLARE_METHOD, &q);
		d->probe_state = PROBE_ASKING;
	}
	if (st != AMQP_STATUS_OK)
		daemon_fail(d, "cannot look for a holding queue");
}

/* The next look of this round, or the round's end. */
static void
probe_step(struct daemon *d, unsigned from)
{
	d->probe_at = probe_next(d, from);
	if (d->probe_at < d->nconsumers)
		probe_send(d);
	else if (d->probe_state != PROBE_CLOSED)
		d->probe_state = PROBE_IDLE;
}

static void
on_hold_probe(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, hold_probe);

	(void)loop;
	(void)revents;
	/* Once ready (a consume-ok now is not one it waits for), and not
	 * while a look is under way. */
	if (d->broken || d->stopping || !d->consuming || d->replaying ||
	    d->consume_oks > 0 || d->probe_state == PROBE_OPENING ||
	    d->probe_state == PROBE_ASKING)
		return;
	if (probe_next(d, 0) == d->nconsumers) {
		ev_timer_stop(d->loop, &d->hold_probe);
		return;
	}
	probe_step(d, 0);
}

void
daemon_hold_probe_opened(struct daemon *d)
{
	d->probe_state = PROBE_IDLE;
	if (d->probe_at < d->nconsumers)
		probe_send(d);
}

void
daemon_hold_probe_found(struct daemon *d)
{
	struct consumer *c;
	amqp_basic_consume_t bc;

	d->probe_state = PROBE_IDLE;
	if (d->probe_at >= d->nconsumers)
		return;
	c = &d->consumers[d->probe_at];
	c->off = 0;
	memset(&bc, 0, sizeof(bc));
	bc.queue = amqp_cstring_bytes(c->queue);
	bc.consumer_tag = amqp_cstring_bytes(c->tag);
	bc.arguments = amqp_empty_table;
	if (amqp_send_method(d->conn, BROKER_CH_WORK, AMQP_BASIC_CONSUME_METHOD,
	                     &bc) != AMQP_STATUS_OK) {
		daemon_fail(d, "cannot consume a holding queue");
		return;
	}
	log_info("hold_drain",
	         " queues=1 queue=%s reason=\"a holding queue of native "
	         "waiting appeared: what it releases goes on over the "
	         "ladder\"",
	         c->queue);
	probe_step(d, d->probe_at + 1);
}

void
daemon_hold_probe_closed(struct daemon *d, const amqp_channel_close_t *c)
{
	amqp_channel_close_ok_t ok = {0};

	d->probe_state = PROBE_CLOSED;
	if (amqp_send_method(d->conn, BROKER_CH_PROBE,
	                     AMQP_CHANNEL_CLOSE_OK_METHOD,
	                     &ok) != AMQP_STATUS_OK) {
		daemon_fail(d, "cannot close the probe channel");
		return;
	}
	/* Not there (404): the next.  Anything else: said, and the next
	 * round tries again. */
	if (c->reply_code != AMQP_NOT_FOUND) {
		log_warn("hold_probe_failed", " queue=%s reason=\"%u %.*s\"",
		         d->probe_at < d->nconsumers
		             ? d->consumers[d->probe_at].queue
		             : "",
		         c->reply_code, (int)c->reply_text.len,
		         (const char *)c->reply_text.bytes);
		d->probe_at = d->nconsumers;
		return;
	}
	probe_step(d, d->probe_at + 1);
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
	if (d->canary_due) {
		d->canary_due = 0;
		canary_ask(d);
	}
	/* A fresh connection: the probe channel is not open on it. */
	d->probe_state = PROBE_CLOSED;
	d->probe_at = d->nconsumers;
	if (!d->native && probe_next(d, 0) < d->nconsumers) {
		ev_timer_set(&d->hold_probe, HOLD_PROBE_S, HOLD_PROBE_S);
		ev_timer_start(d->loop, &d->hold_probe);
	} else {
		ev_timer_stop(d->loop, &d->hold_probe);
	}
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
