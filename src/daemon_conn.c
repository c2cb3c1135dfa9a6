/*
 * The connection: connect (topology, consume), say ready, and the one path
 * every failure takes, daemon_fail -> on_teardown -> on_reconnect.  All
 * state that matters lives in the broker: when anything goes wrong with
 * the connection the daemon drops what it holds, the broker redelivers
 * every unacked message, and the daemon connects again.
 *
 * Owns: conn, broken, consuming, url, the reconnect and teardown timers.
 * Calls into: daemon_wire (drain once connected), daemon_events (replay
 * P.cancels before consuming), broker.h, topology.h.
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <ev.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "broker.h"
#include "log.h"

#define RECONNECT_MIN_MS 500

static void daemon_connect(struct daemon *d);

/* Jittered exponential backoff: base * 2^n, capped, 80-100% of it. */
static double
backoff_seconds(unsigned n, int64_t base, int64_t cap)
{
	int64_t ms = base;

	while (n-- > 0 && ms < cap)
		ms *= 2;
	if (ms > cap)
		ms = cap;
	ms -= (int64_t)((double)ms * 0.2 * ((double)rand() / RAND_MAX));
	return (double)ms / 1000.0;
}

/*
 * Connection failure and recovery.  Every failure, from connecting to a
 * broken socket, takes one path: daemon_teardown_soon, then on_teardown,
 * which drops what the daemon holds and schedules the next attempt.
 */

/*
 * Stop using the connection, and tear it down from a fresh loop iteration
 * so that no caller walks a list we free.
 */
static void
daemon_teardown_soon(struct daemon *d)
{
	if (d->broken)
		return;
	d->broken = 1;
	d->url_next++;
	ev_io_stop(d->loop, &d->io);
	ev_idle_stop(d->loop, &d->more);
	ev_timer_stop(d->loop, &d->heartbeat);
	ev_timer_stop(d->loop, &d->replay);
	ev_timer_stop(d->loop, &d->probe_check);
	ev_timer_stop(d->loop, &d->series_refresh);
	ev_timer_set(&d->teardown, 0., 0.);
	ev_timer_start(d->loop, &d->teardown);
}

/* The connection is unusable: say why, once, and what the broker gets back. */
void
daemon_fail(struct daemon *d, const char *why)
{
	if (d->broken)
		return;
	/* What we drop is redelivered by the broker: say how much. */
	log_error("connection_lost",
	          " reason=\"%s\" in_flight=%u held=%u retrying=%u paused=%u"
	          " queued=%u",
	          why, outbox_count(&d->out.inflight), message_count(&d->held),
	          outbox_count(&d->out.retry), outbox_count(&d->out.paused),
	          outbox_count(&d->out.queued) +
	              outbox_count(&d->out.suspects));
	sd_notifyf(0, "STATUS=reconnecting: %s", why);
	daemon_teardown_soon(d);
}

void
daemon_drop_held(struct daemon *d)
{
	struct message *m;

	while ((m = TAILQ_FIRST(&d->held)) != NULL) {
		ev_timer_stop(d->loop, &m->hold);
		TAILQ_REMOVE(&d->held, m, link);
		daemon_give_back(&m->out, d);
	}
}

void
daemon_drop_state(struct daemon *d)
{
	message_free(d->assembling);
	d->assembling = NULL;
	outbox_drop(&d->out, message_free_item, NULL);
	xcheck_drop(&d->xc, message_free_item, NULL);
	daemon_drop_held(d);
	daemon_events_drop(d);
	daemon_scan_drop(d);
	ev_timer_stop(d->loop, &d->retry_timer);
}

static void
on_teardown(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, teardown);
	double delay;

	(void)loop;
	(void)revents;
	/* Unacked deliveries go back to their queues when the connection
	 * ends: dropping them here loses nothing. */
	daemon_drop_state(d);
	acks_reset(&d->acks);
	daemon_hold_close(d);
	if (d->conn != NULL) {
		amqp_destroy_connection(d->conn);
		d->conn = NULL;
	}
	if (d->consuming)
		d->m.reconnects++;
	d->broken = 0;
	d->consuming = 0;
	d->check_open = 0;
	if (d->stopping) {
		ev_break(d->loop, EVBREAK_ALL);
		return;
	}
	delay = backoff_seconds(d->reconnects++, RECONNECT_MIN_MS,
	                        d->cfg->broker_reconnect_max);
	log_info("reconnect_scheduled", " in_ms=%.0f attempt=%u", delay * 1000,
	         d->reconnects);
	ev_timer_set(&d->reconnect, delay, 0.);
	ev_timer_start(d->loop, &d->reconnect);
}

static void
on_reconnect(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = DAEMON_OF(w, reconnect);

	(void)loop;
	(void)revents;
	daemon_connect(d);
}

/*
 * Connecting
 */

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
	/* The holding queues' links, opened without credit, too. */
	daemon_hold_consume(d);
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

static int
daemon_consume(struct daemon *d, char *err, size_t errsize)
{
	amqp_basic_qos(d->conn, BROKER_CH_WORK, 0,
	               (uint16_t)d->cfg->router_prefetch, 0);
	if (broker_check(d->conn, "basic.qos", err, errsize) < 0)
		return -1;
	amqp_confirm_select(d->conn, BROKER_CH_PUB);
	if (broker_check(d->conn, "confirm.select", err, errsize) < 0)
		return -1;
	d->replaying = 0;
	if (config_events(d->cfg))
		return daemon_replay(d, err, errsize);
	return daemon_consume_queues(d, err, errsize);
}
static void
daemon_connect(struct daemon *d)
{
	char err[512], url[CONFIG_STR_MAX], raw[CONFIG_STR_MAX];
	unsigned placed;
	int hb, rc, fatal;

	/* With several URLs (a cluster's nodes), each attempt after a
	 * failure or a lost connection goes to the next one. */
	if (config_broker_url(d->cfg, d->url_next % d->urls, raw, sizeof(raw)) <
	    0)
		fatalx("bad_url", " index=%u", d->url_next);
	config_mask_url(raw, url, sizeof(url));
	snprintf(d->url, sizeof(d->url), "%s", url);
	d->conn = broker_connect_url(d->cfg, raw, err, sizeof(err));
	/* Records are written as this user (RabbitMQ checks a user-id). */
	if (config_url_user(raw, d->own_user, sizeof(d->own_user)) < 0)
		d->own_user[0] = '\0';
	if (d->conn == NULL) {
		log_error("connect_failed", " url=%s reason=\"%s\"", url, err);
		sd_notifyf(0, "STATUS=cannot connect to %s: %s", url, err);
		daemon_teardown_soon(d);
		return;
	}
	/* New shards' leaders on different nodes (topology.h). */
	if ((placed = topology_place(d->conn, BROKER_CH_WORK, d->cfg, &d->topo,
	                             &d->ladder)) > 0)
		log_info("shards_placed", " placed=%u shards=%u nodes=%u",
		         placed, d->topo.shards, d->urls);
	rc = topology_declare(d->conn, BROKER_CH_WORK, d->cfg, &d->topo,
	                      &d->ladder, d->reject_parks, err, sizeof(err));
	if (rc < 0) {
		/* PRECONDITION_FAILED names the queue and the argument. */
		if (rc == TOPOLOGY_MISMATCH) {
			log_error("topology_mismatch",
			          " reason=\"%s\" fix=\"delete the queue or "
			          "change the configuration to match it\"",
			          err);
			/* Not worth retrying: stop, exit status 1. */
			d->exit_code = 1;
			d->stopping = 1;
		} else {
			log_error("topology_failed", " reason=\"%s\"", err);
		}
		daemon_teardown_soon(d);
		return;
	}
	/* Native waiting, or the ladder (daemon_hold.c). */
	if (daemon_hold_connect(d, raw, err, sizeof(err), &fatal) < 0) {
		log_error("native_failed", " reason=\"%s\"", err);
		if (fatal) {
			d->exit_code = 1;
			d->stopping = 1;
		}
		daemon_teardown_soon(d);
		return;
	}
	if (daemon_consume(d, err, sizeof(err)) < 0) {
		log_error("consume_failed", " reason=\"%s\"", err);
		daemon_teardown_soon(d);
		return;
	}
	d->check_open = 1;
	d->consuming = 1;
	outbox_open(&d->out);
	/* What we may send; we accept more (see broker.h). */
	d->frame_max = broker_frame_max(d->conn);
	d->reconnects = 0;
	ev_io_set(&d->io, amqp_get_sockfd(d->conn), EV_READ);
	ev_io_start(d->loop, &d->io);
	hb = amqp_get_heartbeat(d->conn);
	if (hb > 0) {
		ev_timer_set(&d->heartbeat, hb / 2.0, hb / 2.0);
		ev_timer_start(d->loop, &d->heartbeat);
	}
	daemon_hold_start(d);
	/* Frames may already sit in rabbitmq-c's buffer from the set-up. */
	daemon_drain(d);
}

void
daemon_conn_init(struct daemon *d)
{
	ev_init(&d->reconnect, on_reconnect);
	ev_init(&d->teardown, on_teardown);
}
