/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon: one libev loop on one connection with four channels
 * (broker.h).  BROKER_CH_WORK consumes the ingress, return and retry
 * queues (and the stream P.cancels) and acks a delivery once the broker
 * confirmed its next publish; BROKER_CH_PUB publishes every hop, delivery
 * and park with confirms and mandatory set (outbox.h); BROKER_CH_CHECK
 * asks, with passive declares, whether a target exchange exists
 * (xcheck.h), so that a missing one closes that channel only;
 * BROKER_CH_EVENTS writes the records of what waits (events.h).  What to
 * do with a message comes from pure modules: router.h decides, plan.h
 * checks the destinations that refuse.
 *
 * This file sets it all up and runs the loop: the consumers, signals and
 * the stop, systemd's watchdog, the totals at exit.  daemon_int.h lists
 * the other files and what each owns.
 *
 * Calls into: every daemon file's daemon_*_init, daemon_conn (the first
 * connect, through the reconnect timer; dropping state), daemon_wire
 * (drain while stopping), daemon_http (the handler).
 */
#include "daemon.h"
#include "daemon_int.h"

#include "amqp_compat.h"
#include <ev.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/queue.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "broker.h"
#include "duration.h"
#include "httpd.h"
#include "log.h"

/*
 * Stopping
 */

static void
on_stop_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)w;
	(void)revents;
	log_warn("stopped",
	         " reason=\"timed out waiting for confirms; "
	         "unconfirmed messages stay in their queues\"%s",
	         "");
	ev_break(loop, EVBREAK_ALL);
}

static void
on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct daemon *d = w->data;
	amqp_basic_cancel_t cancel = {0};

	(void)revents;
	if (d->stopping) {
		log_warn("stopped", " reason=\"second signal\" signal=%d",
		         w->signum);
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	d->stopping = 1;
	sd_notify(0, "STOPPING=1");
	log_info("stopping", " signal=%d in_flight=%u", w->signum,
	         outbox_count(&d->out.inflight) + daemon_gate_inflight(d));
	if (d->conn == NULL || d->broken || !d->consuming) {
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	for (unsigned i = 0; i < d->nconsumers + DAEMON_STREAMS; i++) {
		/* The queues, and the streams last (unknown tags are fine). */
		cancel.consumer_tag = amqp_cstring_bytes(
		    i < d->nconsumers ? d->consumers[i].tag
		                      : d->streams[i - d->nconsumers].tag);
		cancel.nowait = 0;
		if (amqp_send_method(d->conn, BROKER_CH_WORK,
		                     AMQP_BASIC_CANCEL_METHOD,
		                     &cancel) != AMQP_STATUS_OK) {
			ev_break(loop, EVBREAK_ALL);
			return;
		}
	}
	/* Messages waiting for a retry are left to the broker to redeliver. */
	outbox_drop_list(&d->out.retry, daemon_give_back, d);
	outbox_drop_list(&d->out.paused, daemon_give_back, d);
	outbox_drop_list(&d->out.stuck, daemon_give_back, d);
	daemon_gate_drop(d, daemon_give_back, d, 1);
	daemon_drop_held(d);
	ev_timer_stop(loop, &d->retry_timer);
	ev_timer_set(&d->stop_timer,
	             (double)d->cfg->router_stop_timeout / 1000.0, 0.);
	ev_timer_start(loop, &d->stop_timer);
	daemon_drain(d);
}

static void
daemon_close(struct daemon *d)
{
	struct timeval tv = {2, 0};

	if (d->conn == NULL)
		return;
	if (!d->broken) {
		/* Bounded: a dead peer must not hang the exit. */
		amqp_set_rpc_timeout(d->conn, &tv);
		amqp_connection_close(d->conn, AMQP_REPLY_SUCCESS);
	}
	amqp_destroy_connection(d->conn);
	d->conn = NULL;
}

static uint64_t
sum(const uint64_t *v, size_t n)
{
	uint64_t t = 0;

	for (size_t i = 0; i < n; i++)
		t += v[i];
	return t;
}

static int
target_allowed(const void *ctx, amqp_bytes_t exchange)
{
	return config_target_allowed(ctx, exchange.bytes, exchange.len);
}

/*
 * systemd's watchdog: ping at half its interval from the loop itself, so a
 * stuck loop stops the pings and systemd restarts the daemon.
 */
static void
on_watchdog(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	sd_notify(0, "WATCHDOG=1");
}

static void
daemon_watchdog_start(struct daemon *d)
{
	uint64_t usec = 0;

	ev_init(&d->watchdog, on_watchdog);
	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
		return;
	d->watchdog.repeat = (double)usec / 2e6;
	ev_timer_again(d->loop, &d->watchdog);
	log_info("watchdog", " interval_ms=%" PRIu64, usec / 1000);
}

static void
consumer_add(struct consumer *c, const char *tag, const char *queue,
             enum route_source src, int shard)
{
	snprintf(c->tag, sizeof(c->tag), "%s", tag);
	c->queue = queue;
	c->src = src;
	c->shard = shard;
}

/* What the work channel consumes (struct consumer). */
static void
daemon_consumers(struct daemon *d)
{
	const struct topology *t = &d->topo;
	char tag[24];

	consumer_add(&d->consumers[d->nconsumers++], "ingress", t->ingress,
	             ROUTE_FROM_INGRESS, -1);
	consumer_add(&d->consumers[d->nconsumers++], "retry", t->retry,
	             ROUTE_FROM_RETRY, -1);
	/* Reschedule requests waiting for a reading of P.events. */
	if (config_events(d->cfg))
		consumer_add(&d->consumers[d->nconsumers++], "requests",
		             t->requests, ROUTE_FROM_REQUESTS, -1);
	for (unsigned s = 0; s < t->shards; s++) {
		if (!config_shard_consumed(d->cfg, s))
			continue;
		/* One shard: the tag "return", as before shards. */
		if (t->shards > 1)
			snprintf(tag, sizeof(tag), "return.s%u", s);
		else
			snprintf(tag, sizeof(tag), "return");
		consumer_add(&d->consumers[d->nconsumers++], tag, t->ret[s],
		             ROUTE_FROM_RETURN, (int)s);
	}
	/* Holding queues: over AMQP 1.0, drained, or off, once connected. */
	for (unsigned s = 0; s < t->shards; s++) {
		if (!config_shard_consumed(d->cfg, s))
			continue;
		if (t->shards > 1)
			snprintf(tag, sizeof(tag), "hold.s%u", s);
		else
			snprintf(tag, sizeof(tag), "hold");
		consumer_add(&d->consumers[d->nconsumers], tag, t->hold[s],
		             ROUTE_FROM_HOLD, (int)s);
		d->consumers[d->nconsumers++].off = 1;
	}
	for (unsigned i = 0; i < t->drains; i++) {
		snprintf(tag, sizeof(tag), "drain.%u", i);
		consumer_add(&d->consumers[d->nconsumers++], tag, t->drain[i],
		             ROUTE_FROM_RETURN, -1);
	}
}

int
daemon_run(const struct config *cfg)
{
	struct daemon *d;
	const char *why;
	size_t hops;
	int rc;

	d = calloc(1, sizeof(*d));
	if (d == NULL)
		fatalx("out_of_memory", "%s", "");
	d->loop = ev_default_loop(EVFLAG_AUTO);
	d->cfg = cfg;
	d->native = -1;
	if (ladder_init(&d->ladder, cfg->topology_resolution,
	                cfg->topology_factor, config_levels(cfg), &why) < 0)
		fatalx("bad_ladder", " reason=\"%s\"", why);
	/* An explicit levels of a factor-4 ladder under the factor-2
	 * default: long delays would take hundreds of hops. */
	if (ladder_short(&d->ladder, cfg->router_max_delay, &hops))
		log_warn("ladder_short",
		         " levels=%u top_ttl_ms=%" PRId64
		         " max_delay_ms=%" PRId64
		         " hops=%zu fix=\"[topology] levels = 0: as many as "
		         "reach max_delay\"",
		         d->ladder.levels, d->ladder.ttl[d->ladder.levels - 1],
		         cfg->router_max_delay, hops);
	if (topology_names(&d->topo, cfg->topology_prefix, &d->ladder,
	                   (unsigned)cfg->topology_shards,
	                   (unsigned)cfg->topology_drain_shards) < 0)
		fatalx("out_of_memory", "%s", "");
	daemon_consumers(d);
	d->rp.ladder = &d->ladder;
	d->rp.max_delay = cfg->router_max_delay;
	d->rp.default_exchange =
	    amqp_cstring_bytes(cfg->router_default_target_exchange);
	d->rp.hold_tail = cfg->router_tail == TAIL_HOLD;
	d->rp.tail_margin = cfg->router_tail_margin;
	d->rp.own_prefix = amqp_cstring_bytes(cfg->topology_prefix);
	d->unsigned_until = config_unsigned_until(cfg);
	d->rp.allowed = target_allowed;
	d->rp.allowed_ctx = cfg;
	d->rp.retry = &cfg->retry;
	d->rp.random = daemon_random_unit;
	zone_cache_init(&d->zones);
	d->rp.zones = &d->zones;
	outbox_init(&d->out);
	xcheck_init(&d->xc);
	targets_init(&d->targets, d->ladder.ttl[0],
	             cfg->router_target_backoff_max);
	d->plan.rp = &d->rp;
	d->plan.ladder = &d->ladder;
	d->plan.targets = &d->targets;
	d->plan.level_queues = d->level_queues;
	d->plan.refused_park_after = cfg->router_refused_park_after;
	d->pace = cfg->pace;
	d->plan.pace = &d->pace;

	TAILQ_INIT(&d->held);
	init_amqp_pool(&d->scratch, 4096);
	acks_init(&d->acks);
	requests_init(&d->requests);
	if (config_broker_user(cfg, d->own_user, sizeof(d->own_user)) < 0)
		d->own_user[0] = '\0';
	srand((unsigned)(duration_wall_ms() ^ (int64_t)getpid()));
	/* Daemons sharing a list start on different nodes. */
	d->urls = config_broker_url_count(cfg);
	d->url_next = (unsigned)rand();

	daemon_wire_init(d);
	daemon_conn_init(d);
	daemon_answer_init(d);
	daemon_events_init(d);
	daemon_replay_init(d);
	daemon_series_init(d);
	daemon_scan_init(d);
	daemon_reorder_init(d);
	daemon_hold_init(d);
	if (daemon_gate_init(d) < 0)
		fatalx("out_of_memory", "%s", "");
	ev_init(&d->stop_timer, on_stop_timeout);
	ev_signal_init(&d->sigterm, on_signal, SIGTERM);
	ev_signal_init(&d->sigint, on_signal, SIGINT);
	d->sigterm.data = d;
	d->sigint.data = d;
	ev_signal_start(d->loop, &d->sigterm);
	ev_signal_start(d->loop, &d->sigint);
	for (unsigned k = 0; k < d->topo.shards * d->ladder.levels; k++)
		d->level_queues[k] = d->topo.delay[k];
	if (cfg->metrics_listen[0] != '\0') {
		char err[512];
		d->httpd = httpd_start(d->loop, cfg->metrics_listen,
		                       daemon_http, d, err, sizeof(err));
		if (d->httpd == NULL)
			fatalx(
			    "metrics_listen_failed",
			    " listen=%s reason=\"%s; set [metrics] listen to "
			    "another HOST:PORT (port 0: any free port; "
			    "empty: none)\"",
			    cfg->metrics_listen, err);
		log_info("metrics_listening", " listen=%s port=%d",
		         cfg->metrics_listen, httpd_port(d->httpd));
	}
	daemon_watchdog_start(d);

	/* Connect from inside the loop, so ev_break works from the start. */
	ev_timer_set(&d->reconnect, 0., 0.);
	ev_timer_start(d->loop, &d->reconnect);
	ev_run(d->loop, 0);

	/* The last records, before the connection closes. */
	if (d->conn != NULL && !d->broken)
		(void)daemon_events_flush(d);
	/* What a holding queue gave and is not settled goes back released;
	 * the accepts of what was delivered go out before the close. */
	outbox_drop(&d->out, daemon_give_back, d);
	daemon_gate_drop(d, daemon_give_back, d, 0);
	daemon_drop_held(d);
	daemon_hold_shutdown(d);
	daemon_hold_free(d);
	daemon_gate_free(d);
	daemon_drop_state(d);
	daemon_close(d);
	free(d->batch[DAEMON_BATCH_EVENTS].buf);
	free(d->batch[DAEMON_BATCH_COPIES].buf);
	httpd_stop(d->httpd);
	/* Totals for the operator and for tools/bench. */
	log_info("totals",
	         " received=%" PRIu64 " hops=%" PRIu64 " waits=%" PRIu64
	         " delivered=%" PRIu64 " parked=%" PRIu64 " held=%" PRIu64
	         " nacked=%" PRIu64 " reconnects=%" PRIu64,
	         sum(d->m.received, METRICS_QUEUES_MAX),
	         sum(d->m.hops, LADDER_MAX_SHARDS * LADDER_MAX_LEVELS),
	         sum(d->m.waits, LADDER_MAX_SHARDS), d->m.delivered,
	         sum(d->m.parked, PARK_KINDS), d->m.held_total, d->m.nacks,
	         d->m.reconnects);
	empty_amqp_pool(&d->scratch);
	acks_free(&d->acks);
	daemon_reorder_free(d);
	targets_free(&d->targets);
	requests_free(&d->requests);
	zone_cache_free(&d->zones);
	message_spare_free();
	topology_free(&d->topo);
	rc = d->exit_code;
	free(d);
	return rc;
}
