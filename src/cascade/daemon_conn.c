/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connection: connect (topology, consume), say ready, and the one path
 * every failure takes, daemon_fail -> on_teardown -> on_reconnect.  All
 * state that matters lives in the broker: when anything goes wrong with
 * the connection the daemon drops what it holds, the broker redelivers
 * every unacked message, and the daemon connects again.
 *
 * Owns: conn, broken, consuming, url, the reconnect and teardown timers.
 * Calls into: daemon_wire (drain once connected), daemon_hold (the holding
 * queues), daemon_replay (read the streams before consuming),
 * daemon_consume (or consume at once), daemon_events and daemon_scan (drop
 * what they hold), daemon_fail, broker.h, topology.h.
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
 * broken socket, takes one path: daemon_fail (daemon_fail.c), then
 * on_teardown, which drops what the daemon holds and schedules the next
 * attempt.
 */

void
daemon_drop_held(struct daemon *d)
{
	struct message *m;

	while ((m = TAILQ_FIRST(&d->held)) != NULL) {
		ev_timer_stop(d->loop, &m->hold);
		TAILQ_REMOVE(&d->held, m, link);
		daemon_give_back(&m->out, d);
	}
	/* And the overdue ones waiting in the reorder window. */
	ev_timer_stop(d->loop, &d->reorder_timer);
	while ((m = reorder_drain(&d->reorder)) != NULL)
		daemon_give_back(&m->out, d);
}

void
daemon_drop_state(struct daemon *d)
{
	message_free(d->assembling);
	d->assembling = NULL;
	outbox_drop(&d->out, message_free_item, NULL);
	daemon_gate_drop(d, message_free_item, NULL, 0);
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
	if (d->consuming && !d->switching)
		d->m.reconnects++;
	d->broken = 0;
	d->consuming = 0;
	d->check_open = 0;
	if (d->stopping) {
		ev_break(d->loop, EVBREAK_ALL);
		return;
	}
	/* auto changes the waiting mode: back at once, on the same URL. */
	delay = d->switching
	            ? 0.
	            : backoff_seconds(d->reconnects++, RECONNECT_MIN_MS,
	                              d->cfg->broker_reconnect_max);
	if (d->switching)
		d->url_next--;
	d->switching = 0;
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
	/* What comes back now may have waited out the broker's restart, or
	 * this daemon's: the reorder window opens. */
	daemon_reorder_disrupted(d);
	outbox_open(&d->out);
	daemon_gate_connect(d);
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
