/*
 * The event loop and the wiring.  One connection, four channels (broker.h):
 * BROKER_CH_WORK consumes the ingress, return and retry queues (and the
 * stream P.cancels) and acks a delivery once the broker confirmed its next
 * publish; BROKER_CH_PUB publishes every hop, delivery and park with
 * confirms and mandatory set (outbox.h); BROKER_CH_CHECK asks, with passive
 * declares, whether a target exchange exists (xcheck.h), so that a missing
 * one closes that channel only; BROKER_CH_EVENTS writes the records of what
 * waits (events.h).  What to do with a message comes from pure modules:
 * router.h decides, plan.h checks the destinations that refuse.
 *
 * The daemon reads frames itself from an ev_io watcher on the socket
 * (rabbitmq-c's consume call blocks) and assembles deliveries from their
 * method, header and body frames.  All state that matters lives in the
 * broker: when anything goes wrong with the connection the daemon drops what
 * it holds, the broker redelivers every unacked message, and the daemon
 * reconnects.
 */
#include "daemon.h"

#include "amqp_compat.h"
#include <ev.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/queue.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "acks.h"
#include "broker.h"
#include "duration.h"
#include "cancels.h"
#include "events.h"
#include "headers.h"
#include "httpd.h"
#include "ladder.h"
#include "log.h"
#include "message.h"
#include "metrics.h"
#include "outbox.h"
#include "plan.h"
#include "router.h"
#include "targets.h"
#include "topology.h"
#include "version.h"
#include "xcheck.h"

#define RECONNECT_MIN_MS 500
#define REPLAY_REMARK 10. /* s: write the P.cancels marker again */
/*
 * Frames read per callback before the loop gets a turn: small enough that a
 * burst from the broker (a level expiring at once) cannot hold up the timers
 * of held messages for long, large enough to batch acks.
 */
#define FRAMES_PER_CALLBACK 64

/*
 * What the work channel consumes: ingress, retry, the return queue of each
 * shard this daemon takes ([topology] consume_shards), and the return
 * queues of a former layout being drained.  By consumer tag.
 */
struct consumer {
	char tag[24];
	const char *queue;
	enum route_source src;
	int shard; /* a return queue's; -1: a shard is picked at first sight */
};

/* Reads P.cancels (events.h) on the work channel as well. */
#define CANCELS_TAG "cancels"

static void
consumer_add(struct consumer *c, const char *tag, const char *queue,
             enum route_source src, int shard)
{
	snprintf(c->tag, sizeof(c->tag), "%s", tag);
	c->queue = queue;
	c->src = src;
	c->shard = shard;
}

struct daemon {
	struct ev_loop *loop;
	const struct config *cfg;
	struct ladder ladder;
	struct topology topo;
	struct router_params rp;

	amqp_connection_state_t conn;
	int broken; /* connection failed; teardown pending */
	int consuming;
	int check_open; /* BROKER_CH_CHECK usable */
	int frame_max;
	/* Rejecting a delivery from this source parks it (topology.h). */
	int reject_parks[METRICS_NSOURCES];
	struct message *assembling;
	struct outbox out;        /* publishes on BROKER_CH_PUB */
	struct xcheck xc;         /* target exchanges, BROKER_CH_CHECK */
	struct message_list held; /* the sub-resolution tail */
	struct targets targets;
	struct plan plan; /* the next publish, given the targets */
	amqp_pool_t scratch;
	struct acks acks;
	struct cancels cancels; /* requests read from P.cancels */
	/*
	 * Reading P.cancels from the start after connecting: the queues are
	 * consumed once the marker written then comes back (events.h).
	 */
	int replaying;
	char marker[40];
	size_t cancels_prune_at;  /* prune when this many are held */
	uint64_t replayed;        /* records read while replaying */
	ev_timer replay;          /* writes the marker again (on_replay) */
	char url[CONFIG_STR_MAX]; /* the broker's, password masked */
	unsigned reconnects;
	unsigned refused;          /* nacks and returns not yet logged */
	int64_t refused_logged_at; /* mono ms */

	ev_io io;
	ev_idle more; /* frames left in rabbitmq-c's buffer */
	ev_timer heartbeat;
	ev_timer reconnect;
	ev_timer teardown;
	ev_timer retry_timer;
	ev_timer stop_timer;
	ev_signal sigterm, sigint;
	ev_timer watchdog; /* systemd's WatchdogSec, when it is set */
	int stopping;
	int exit_code;
	int notified_ready;   /* told systemd READY=1 */
	unsigned consume_oks; /* awaited before saying ready */
	unsigned urls;        /* how many [broker] url holds */
	unsigned url_next;    /* the next to try, modulo urls */

	struct httpd *httpd;
	struct metrics m;
	/* shard s's delay queue of level k at s * levels + k (plan.h) */
	const char *level_queues[LADDER_MAX_SHARDS * LADDER_MAX_LEVELS];
	/* What the work channel consumes (daemon_consumers). */
	struct consumer consumers[METRICS_QUEUES_MAX];
	unsigned nconsumers;
	unsigned next_shard; /* round robin over the shards at first sight */
};

static void daemon_connect(struct daemon *d);
static void daemon_dispatch(struct daemon *d, struct message *m);
static void daemon_route(struct daemon *d, struct message *m);
static void daemon_publish(struct daemon *d, struct message *m);
static void daemon_pub_kick(struct daemon *d);
static void daemon_ready(struct daemon *d);
static int daemon_consume_queues(struct daemon *d, char *err, size_t errsize);
static int daemon_write(struct daemon *d, const char *stream,
                        const struct event *e);
static void daemon_event(struct daemon *d, const struct message *m,
                         enum event_kind kind);
static int daemon_props(struct daemon *d, const struct message *m,
                        amqp_basic_properties_t *props);
static int daemon_cancelled(struct daemon *d, struct message *m);
static int daemon_cancel_request(struct daemon *d, struct message *m);
static void daemon_record(struct daemon *d, struct message *m);
static void daemon_scheduled(struct daemon *d, struct message *m);
static void daemon_request_copy(struct daemon *d, const struct message *m);
static void daemon_next(struct daemon *d, struct message *m,
                        enum plan_next next, const char *why);

/* The clock rounded up: a due time stamped from it is never early. */
static int64_t
now_ms_ceil(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + (ts.tv_nsec + 999999) / 1000000;
}

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

static double
random_unit(void)
{
	return (double)rand() / ((double)RAND_MAX + 1.0);
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
	ev_timer_set(&d->teardown, 0., 0.);
	ev_timer_start(d->loop, &d->teardown);
}

/* The connection is unusable: say why, once, and what the broker gets back. */
static void
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

static void
daemon_drop_held(struct daemon *d)
{
	struct message *m;

	while ((m = TAILQ_FIRST(&d->held)) != NULL) {
		ev_timer_stop(d->loop, &m->hold);
		TAILQ_REMOVE(&d->held, m, link);
		message_free(m);
	}
}

static void
daemon_drop_state(struct daemon *d)
{
	message_free(d->assembling);
	d->assembling = NULL;
	outbox_drop(&d->out, message_free_item, NULL);
	xcheck_drop(&d->xc, message_free_item, NULL);
	daemon_drop_held(d);
	ev_timer_stop(d->loop, &d->retry_timer);
}

static void
on_teardown(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d =
	    (struct daemon *)((char *)w - offsetof(struct daemon, teardown));
	double delay;

	(void)loop;
	(void)revents;
	/* Unacked deliveries go back to their queues when the connection
	 * ends: dropping them here loses nothing. */
	daemon_drop_state(d);
	acks_reset(&d->acks);
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
	struct daemon *d =
	    (struct daemon *)((char *)w - offsetof(struct daemon, reconnect));

	(void)loop;
	(void)revents;
	daemon_connect(d);
}

/*
 * Acks, parking, retries
 */

/* Settled: acked with the next flush, batched with its neighbours. */
static void
daemon_ack(struct daemon *d, struct message *m)
{
	if (!d->broken && acks_settle(&d->acks, m->ack_index) < 0)
		daemon_fail(d, "out of memory for acks");
	message_free(m);
}

static int
ack_send(void *ctx, uint64_t tag, int multiple)
{
	struct daemon *d = ctx;

	return amqp_basic_ack(d->conn, BROKER_CH_WORK, tag, multiple);
}

static void
daemon_flush_acks(struct daemon *d)
{
	int st;

	if (d->broken || d->conn == NULL)
		return;
	st = acks_flush(&d->acks, ack_send, d);
	if (st != 0)
		daemon_fail(d, amqp_error_string2(st));
}

static void daemon_park(struct daemon *d, struct message *m,
                        enum park_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
daemon_park(struct daemon *d, struct message *m, enum park_kind kind,
            const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	router_vpark(&m->route, kind, fmt, ap);
	va_end(ap);
	daemon_publish(d, m);
}

static void
daemon_log_park(const struct daemon *d, const struct message *m)
{
	log_warn(
	    "parked", " queue=%s reason=\"%s\" source=%s routing_key=\"%.*s\"",
	    d->topo.error, m->route.reason, d->consumers[m->consumer].queue,
	    (int)m->routing_key.len, (const char *)m->routing_key.bytes);
}

static void
daemon_retry_arm(struct daemon *d)
{
	int64_t first = outbox_retry_next(&d->out), now = duration_mono_ms();

	ev_timer_stop(d->loop, &d->retry_timer);
	/* When blocked, connection.unblocked arms it again. */
	if (d->out.blocked || first == INT64_MAX)
		return;
	ev_timer_set(&d->retry_timer,
	             first > now ? (double)(first - now) / 1000.0 : 0., 0.);
	ev_timer_start(d->loop, &d->retry_timer);
}

/*
 * Backpressure.  While the connection is blocked (connection.blocked: the
 * broker's alarm for the whole node), new deliveries are held unrouted
 * instead of adding to the pile.  They count against the prefetch, so the
 * broker stops sending once it is reached: memory stays bounded and
 * nothing spins.  A refusing queue slows down the messages for that queue
 * alone (see targets.h).
 */
static void
daemon_resume(struct daemon *d)
{
	struct outbox_item *it;

	while (!d->broken && (it = outbox_resume(&d->out)) != NULL) {
		struct message *m = MESSAGE_OF(it);
		if (m->routed)
			daemon_dispatch(d, m);
		else
			daemon_route(d, m);
	}
}

/* A publish was refused: log it, one line a second at most. */
static void
daemon_log_refused(struct daemon *d, const struct message *m, const char *why,
                   int64_t wait_ms)
{
	int64_t now = duration_mono_ms();

	/* A full queue refuses many publishes at once: one line a second. */
	d->refused++;
	if (now - d->refused_logged_at < 1000)
		return;
	log_warn("publish_refused",
	         " reason=\"%s\" exchange=\"%.*s\" routing_key=\"%.*s\" "
	         "count=%u backoff_ms=%" PRId64,
	         why, (int)m->out.exchange.len,
	         (const char *)m->out.exchange.bytes,
	         (int)m->out.routing_key.len,
	         (const char *)m->out.routing_key.bytes, d->refused, wait_ms);
	d->refused = 0;
	d->refused_logged_at = now;
}

/*
 * Publish m again later, from memory: a parked copy the error queue
 * refused, a hop when every level it could take refuses, or a hop refused
 * by a missing queue.  Holds a prefetch slot meanwhile.
 */
static void
daemon_retry_later(struct daemon *d, struct message *m, const char *why)
{
	int64_t wait = outbox_retry_later(&d->out, &m->out, duration_mono_ms(),
	                                  random_unit());

	daemon_log_refused(d, m, why, wait);
	daemon_retry_arm(d);
}

static void
on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d =
	    (struct daemon *)((char *)w - offsetof(struct daemon, retry_timer));
	struct outbox_item *it;
	int64_t now = duration_mono_ms();

	(void)loop;
	(void)revents;
	/* A message refused again goes back with a later retry_at. */
	while (!d->broken && (it = outbox_retry_due(&d->out, now)) != NULL) {
		struct message *m = MESSAGE_OF(it);
		/* The due time may have come meanwhile: step afresh. */
		if (m->route.action != ROUTE_PARK &&
		    m->route.action != ROUTE_RECORD)
			router_step(&d->rp, &m->route, duration_wall_ms());
		daemon_dispatch(d, m);
	}
	daemon_retry_arm(d);
	daemon_resume(d);
}

/* The broker refused m's publish (basic.nack). */
static void
daemon_nacked(struct daemon *d, struct message *m)
{
	const char *refusal, *why;
	enum plan_next next;
	int64_t wait;

	d->m.nacks++;
	next = plan_nacked(&d->plan, &m->route, m->out.routing_key,
	                   duration_wall_ms(), duration_mono_ms(), &refusal,
	                   &wait, &why);
	if (refusal != NULL)
		daemon_log_refused(d, m, refusal, wait);
	daemon_next(d, m, next, why);
}

/* The broker confirmed m's publish (or refused it, when nack). */
static void
daemon_confirmed(struct daemon *d, struct message *m, int nack)
{
	if (nack) {
		daemon_nacked(d, m);
		return;
	}
	d->m.confirms++;
	if (!m->out.returned) {
		if (m->route.action == ROUTE_PARK) {
			d->m.parked[m->route.park]++;
			daemon_log_park(d, m);
			daemon_event(d, m,
			             m->route.park == PARK_cancelled
			                 ? EVENT_CANCELLED
			                 : EVENT_PARKED);
		} else if (m->route.action == ROUTE_RECORD) {
			log_info("cancel_recorded",
			         " stream=%s routing_key=\"%.*s\"",
			         d->topo.cancels, (int)m->routing_key.len,
			         (const char *)m->routing_key.bytes);
			daemon_request_copy(d, m);
		} else if (m->route.action == ROUTE_HOP) {
			d->m.hops[m->route.shard * d->ladder.levels +
			          (unsigned)m->route.level]++;
			if (m->unrecorded) {
				daemon_event(d, m, EVENT_SCHEDULED);
				m->unrecorded = 0;
			}
		} else {
			d->m.delivered++;
			metrics_observe_lateness(&d->m, m->published_at -
			                                    m->route.due);
			daemon_event(d, m, EVENT_DELIVERED);
		}
		plan_accepted(&d->plan, &m->route, m->out.routing_key);
		daemon_ack(d, m);
		return;
	}
	m->out.returned = 0;
	if (m->route.action == ROUTE_DELIVER) {
		daemon_park(d, m, PARK_unroutable,
		            "unroutable: no queue bound to exchange "
		            "'%.*s' for routing key '%.*s' (%s)",
		            (int)m->route.exchange.len,
		            (const char *)m->route.exchange.bytes,
		            (int)m->route.routing_key.len,
		            (const char *)m->route.routing_key.bytes,
		            m->out.return_text);
		return;
	}
	/* One of our own queues is gone (deleted by hand?): keep the message
	 * and try again; a reconnect redeclares the topology. */
	daemon_retry_later(d, m, m->out.return_text);
}

static void
daemon_confirm(struct daemon *d, uint64_t tag, int multiple, int nack)
{
	struct outbox_item *it;

	while ((it = outbox_confirmed(&d->out, tag, multiple)) != NULL) {
		daemon_confirmed(d, MESSAGE_OF(it), nack);
		if (d->broken)
			return;
	}
	daemon_pub_kick(d);
}

struct return_match {
	struct daemon *d;
	const struct message *r; /* the basic.return */
};

/* Was it published with the returned message's body and headers? */
static int
return_same(const struct outbox_item *it, void *ctx)
{
	const struct return_match *rm = ctx;
	const struct message *m = MESSAGE_OF(it), *r = rm->r;
	amqp_bytes_t body =
	    m->route.action == ROUTE_RECORD ? amqp_empty_bytes : m->body;
	amqp_basic_properties_t props;
	int same;

	if (!headers_bytes_eq(body, r->body))
		return 0;
	if (daemon_props(rm->d, m, &props) < 0)
		return 0;
	same = headers_equal(
	    (props._flags & AMQP_BASIC_HEADERS_FLAG) ? &props.headers : NULL,
	    (r->props._flags & AMQP_BASIC_HEADERS_FLAG) ? &r->props.headers
	                                                : NULL);
	recycle_amqp_pool(&rm->d->scratch);
	return same;
}

/* A basic.return: mark the publish it names (see outbox.h). */
static void
daemon_match_return(struct daemon *d, const struct message *r)
{
	struct return_match rm = {d, r};

	if (outbox_returned(&d->out, r->exchange, r->routing_key,
	                    r->return_text, return_same, &rm) != NULL)
		return;
	log_warn("return_unmatched", " exchange=\"%.*s\" routing_key=\"%.*s\"",
	         (int)r->exchange.len, (const char *)r->exchange.bytes,
	         (int)r->routing_key.len, (const char *)r->routing_key.bytes);
}

/*
 * Publishing
 */

/*
 * Not even m's parked copy, stripped of the publisher's headers, could be
 * published.  Keep it unacked and say so: it goes back to its queue when
 * the connection ends, and the redelivery guard parks it if it can.
 */
static void
daemon_stuck(struct daemon *d, struct message *m, const char *why)
{
	log_error("unpublishable",
	          " reason=\"%s\" source=%s routing_key=\"%.*s\"", why,
	          d->consumers[m->consumer].queue, (int)m->routing_key.len,
	          (const char *)m->routing_key.bytes);
	outbox_stuck(&d->out, &m->out);
}

/*
 * m cannot be published as it is (too large, or refused by the broker):
 * park it with the reason; a parked copy goes again without the
 * publisher's headers; if even that fails, m is stuck.
 */
static void
daemon_unpublishable(struct daemon *d, struct message *m, enum park_kind kind,
                     const char *reason)
{
	struct route *r = &m->route;

	if (r->action != ROUTE_PARK) {
		daemon_park(d, m, kind, "%s", reason);
	} else if (!r->strip_headers) {
		r->strip_headers = 1;
		daemon_publish(d, m);
	} else {
		daemon_stuck(d, m, reason);
	}
}

static void
daemon_publish(struct daemon *d, struct message *m)
{
	amqp_basic_properties_t props;
	amqp_bytes_t exchange, routing_key;
	struct route *r = &m->route;
	size_t size;
	int st;

	if (d->broken) {
		message_free(m);
		return;
	}
	/* A blocked connection stops reading: a publish could hang us. */
	if (d->out.blocked) {
		outbox_pause(&d->out, &m->out);
		return;
	}
	/* The publish channel reopens, or suspects are tried one by one. */
	if (!outbox_may_send(&d->out, &m->out)) {
		outbox_queue(&d->out, &m->out);
		return;
	}
	/* Whatever way a delivery came here (a retry, a resume, a probe, a
	 * lookup), a cancellation in force stops it. */
	if (r->action == ROUTE_DELIVER && daemon_cancelled(d, m))
		return;
	switch (r->action) {
	case ROUTE_HOP:
		exchange = amqp_empty_bytes;
		routing_key = amqp_cstring_bytes(
		    topology_delay(&d->topo, r->shard, (unsigned)r->level));
		break;
	case ROUTE_DELIVER:
		exchange = r->exchange;
		routing_key = r->routing_key;
		break;
	case ROUTE_RECORD:
		exchange = amqp_empty_bytes;
		routing_key = amqp_cstring_bytes(d->topo.cancels);
		break;
	case ROUTE_PARK:
	default:
		exchange = amqp_empty_bytes;
		routing_key = amqp_cstring_bytes(d->topo.error);
		break;
	}
	if (daemon_props(d, m, &props) < 0) {
		recycle_amqp_pool(&d->scratch);
		daemon_fail(d, "out of memory building properties");
		message_free(m);
		return;
	}
	/* A content header that does not fit in one frame would break the
	 * connection half-way through the publish: check first. */
	size = headers_props_size(&props) + HEADERS_FRAME_OVERHEAD;
	if (size > (size_t)d->frame_max) {
		char why[160];
		recycle_amqp_pool(&d->scratch);
		snprintf(why, sizeof(why),
		         "properties too large: %zu bytes with cascade's "
		         "headers, one frame holds %d (frame_max)",
		         size, d->frame_max);
		daemon_unpublishable(d, m, PARK_too_large, why);
		return;
	}
	/* A request's record has no body, whatever the publisher sent. */
	st = broker_publish(
	    d->conn, BROKER_CH_PUB, d->frame_max, exchange, routing_key, 1,
	    &props, r->action == ROUTE_RECORD ? amqp_empty_bytes : m->body);
	recycle_amqp_pool(&d->scratch);
	if (st != AMQP_STATUS_OK) {
		daemon_fail(d, amqp_error_string2(st));
		message_free(m);
		return;
	}
	m->published_at = duration_wall_ms();
	d->m.published++;
	outbox_sent(&d->out, &m->out, exchange, routing_key);
}

/*
 * The publish channel may take more: the next suspect once the last was
 * confirmed, or, with no suspect left, everything that waited.
 */
static void
daemon_pub_kick(struct daemon *d)
{
	struct outbox_item *it;
	int probe_done;

	while (!d->broken) {
		it = outbox_next(&d->out, &probe_done);
		if (probe_done)
			log_info("probe_done", " queued=%u",
			         outbox_count(&d->out.queued) + (it != NULL));
		if (it == NULL)
			break;
		daemon_publish(d, MESSAGE_OF(it));
	}
}

/*
 * Target exchanges: a passive declare on the check channel (xcheck.h).
 * The default exchange always exists.
 */

static void
lookup_send(struct daemon *d, struct xcheck_lookup *lk)
{
	amqp_exchange_declare_t decl;
	int st;

	if (!d->check_open || d->broken || lk->sent)
		return;
	memset(&decl, 0, sizeof(decl));
	decl.exchange.bytes = lk->name;
	decl.exchange.len = lk->len;
	decl.type = amqp_cstring_bytes("");
	decl.passive = 1;
	decl.arguments = amqp_empty_table;
	st = amqp_send_method(d->conn, BROKER_CH_CHECK,
	                      AMQP_EXCHANGE_DECLARE_METHOD, &decl);
	if (st != AMQP_STATUS_OK) {
		daemon_fail(d, amqp_error_string2(st));
		return;
	}
	lk->sent = 1;
}

static void
daemon_wait_exchange(struct daemon *d, struct message *m)
{
	struct xcheck_lookup *lk;
	int oom;

	lk = xcheck_wait(&d->xc, m->route.exchange, &m->out, &oom);
	if (oom) {
		daemon_fail(d, "out of memory");
		message_free(m);
		return;
	}
	if (lk != NULL)
		lookup_send(d, lk);
}

/* The answer to the oldest passive declare: exists, or closed with why. */
static void
daemon_lookup_done(struct daemon *d, int exists, const char *why)
{
	struct xcheck_lookup *lk = xcheck_answered(&d->xc);
	struct outbox_item *it;
	amqp_bytes_t name;

	if (lk == NULL) {
		daemon_fail(d, "unexpected reply on the check channel");
		return;
	}
	name.bytes = lk->name;
	name.len = lk->len;
	if (exists)
		xcheck_add(&d->xc, name, NULL, duration_mono_ms());
	while ((it = TAILQ_FIRST(&lk->waiters)) != NULL) {
		TAILQ_REMOVE(&lk->waiters, it, link);
		if (exists)
			daemon_publish(d, MESSAGE_OF(it));
		else
			daemon_park(d, MESSAGE_OF(it), PARK_no_exchange,
			            "target exchange '%.*s' %s", (int)lk->len,
			            lk->name, why);
	}
	xcheck_free(lk);
}

/*
 * Seeing and cancelling what waits (events.h)
 */

/*
 * The record of the cancellation request m (ROUTE_RECORD): the same every
 * time, for a basic.return to match it and for its copy in P.events.
 */
static int
daemon_request_event(const struct daemon *d, const struct message *m,
                     struct event *e)
{
	int64_t age = config_events_max_age(d->cfg);
	const char *why;

	return events_request(&m->props, m->route.due, m->route.due - age, e,
	                      &why);
}

/* m's properties as published: a route's, or a cancellation record's. */
static int
daemon_props(struct daemon *d, const struct message *m,
             amqp_basic_properties_t *props)
{
	struct event e;

	if (m->route.action != ROUTE_RECORD)
		return router_props(&m->props, &m->route, &d->scratch, props);
	if (daemon_request_event(d, m, &e) < 0)
		return -1;
	return events_props(&e, &d->scratch, props);
}

/*
 * A copy of a confirmed request in P.events, for cascade-ctl list's
 * "cancel pending" (list does not read P.cancels, which every daemon
 * replays on connect).
 */
static void
daemon_request_copy(struct daemon *d, const struct message *m)
{
	struct event e;
	int st;

	if (d->out.blocked || d->broken || daemon_request_event(d, m, &e) < 0)
		return;
	if ((st = daemon_write(d, d->topo.events, &e)) != AMQP_STATUS_OK)
		daemon_fail(d, amqp_error_string2(st));
}

/* Record what became of m, when it was recorded as waiting. */
static void
daemon_event(struct daemon *d, const struct message *m, enum event_kind kind)
{
	const struct route *r = &m->route;
	struct event e;
	int st;

	if (!config_events(d->cfg) || r->id.len == 0 || d->broken ||
	    d->conn == NULL)
		return;
	/* Its scheduled record waits for its first hop: no end without it. */
	if (m->unrecorded && kind != EVENT_SCHEDULED)
		return;
	/* A blocked connection stops reading: a publish could hang us. */
	if (d->out.blocked) {
		d->m.events_dropped++;
		return;
	}
	events_of(kind, r, &m->props, m->body.len, duration_wall_ms(), &e);
	st = daemon_write(d, d->topo.events, &e);
	if (st != AMQP_STATUS_OK) {
		daemon_fail(d, amqp_error_string2(st));
		return;
	}
	d->m.events++;
}

/* First sight of a message that will wait: give it an id, record it. */
static void
daemon_scheduled(struct daemon *d, struct message *m)
{
	struct route *r = &m->route;
	char id[17];

	if (r->action != ROUTE_HOP && r->action != ROUTE_HOLD)
		return;
	d->m.scheduled[metrics_window(r->due - duration_wall_ms())]++;
	/* A tail held at first sight waits under a resolution step, in
	 * memory: nothing to list or to cancel later. */
	if (!config_events(d->cfg) || r->action != ROUTE_HOP)
		return;
	events_new_id(id);
	r->id = message_dup(m, amqp_cstring_bytes(id));
	/* Recorded once the hop is confirmed: a delivery redelivered after
	 * a connection loss is then recorded once, not once per sight. */
	m->unrecorded = 1;
}

/*
 * A cancellation for m (by its message-id or its cascade id): drop it,
 * settled and never delivered, or park it.  Returns 1 when it was.
 */
static int
daemon_cancelled(struct daemon *d, struct message *m)
{
	amqp_bytes_t mid = amqp_empty_bytes;
	const struct cancel *k;

	if (d->cancels.map.n == 0)
		return 0;
	if (m->props._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
		mid = m->props.message_id;
	k = cancels_find(&d->cancels, mid, m->route.id, duration_wall_ms());
	if (k == NULL)
		return 0;
	d->m.cancelled++;
	log_info("cancelled",
	         " message_id=\"%.*s\" id=\"%.*s\" park=%s source=%s",
	         (int)mid.len, (const char *)mid.bytes, (int)m->route.id.len,
	         (const char *)m->route.id.bytes, k->park ? "yes" : "no",
	         d->consumers[m->consumer].queue);
	if (k->park) {
		daemon_park(d, m, PARK_cancelled, "cancelled");
		return 1;
	}
	daemon_event(d, m, EVENT_CANCELLED);
	daemon_ack(d, m);
	return 1;
}

/*
 * A message published to P with x-cascade-cancel: a request, recorded in
 * P.cancels (acked once the broker confirmed it there).  Returns 1 when
 * m was one.
 */
static int
daemon_cancel_request(struct daemon *d, struct message *m)
{
	struct route *r = &m->route;
	const char *why;
	struct event e;
	int64_t now = duration_wall_ms();

	if ((m->props._flags & AMQP_BASIC_HEADERS_FLAG) == 0 ||
	    headers_find(&m->props.headers, "x-cascade-cancel") == NULL)
		return 0;
	memset(r, 0, sizeof(*r));
	r->level = -1;
	r->fresh = 1;
	r->in_routing_key = m->routing_key;
	m->routed = 1;
	if (events_request(&m->props, 0, now, &e, &why) < 0)
		router_park(r, PARK_bad_header, "%s", why);
	else if (!config_events(d->cfg))
		router_park(r, PARK_bad_header,
		            "x-cascade-cancel: cancellations are off ([events] "
		            "enabled = no)");
	else {
		r->action = ROUTE_RECORD;
		r->due = now + config_events_max_age(d->cfg);
	}
	daemon_dispatch(d, m);
	return 1;
}

/* A record from P.cancels: a request to hold, or our marker. */
static void
daemon_record(struct daemon *d, struct message *m)
{
	char err[512];
	struct event e;

	if (d->replaying)
		d->replayed++;
	if (events_parse(&m->props, &e) < 0) {
		daemon_ack(d, m);
		return;
	}
	if (e.kind == EVENT_CANCEL && e.until > duration_wall_ms()) {
		if (cancels_add(&d->cancels, e.cancel, e.park, e.until) < 0) {
			message_free(m);
			daemon_fail(d, "out of memory for cancellations");
			return;
		}
		if (!d->replaying)
			log_info(
			    "cancellation", " id=\"%.*s\" park=%s held=%zu",
			    (int)e.cancel.len, (const char *)e.cancel.bytes,
			    e.park ? "yes" : "no", d->cancels.map.n);
		/* Forget lapsed ones now and then: memory stays bounded. */
		if (d->cancels.map.n >= d->cancels_prune_at)
			d->cancels_prune_at =
			    2 * cancels_prune(&d->cancels, duration_wall_ms()) +
			    64;
	} else if (e.kind == EVENT_MARKER && d->replaying &&
	           headers_key_is(e.marker, d->marker)) {
		d->replaying = 0;
		ev_timer_stop(d->loop, &d->replay);
		if (daemon_consume_queues(d, err, sizeof(err)) < 0) {
			message_free(m);
			daemon_fail(d, err);
			return;
		}
	}
	daemon_ack(d, m);
}

/*
 * Routing a complete delivery
 */

/*
 * The tail below one resolution step waits here, unacked, so it counts
 * against the prefetch, and goes to its target at its due time.
 */
static void
on_hold(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct message *m =
	    (struct message *)((char *)w - offsetof(struct message, hold));
	struct daemon *d = m->owner;

	(void)loop;
	(void)revents;
	TAILQ_REMOVE(&d->held, m, link);
	router_step(&d->rp, &m->route, duration_wall_ms());
	daemon_dispatch(d, m);
}

static void
daemon_hold(struct daemon *d, struct message *m)
{
	/* libev's clock can lag the wall clock: refresh it first, and
	 * on_hold steps again if the timer still fires a little early. */
	ev_now_update(d->loop);
	d->m.held_total++;
	m->owner = d;
	ev_timer_init(&m->hold, on_hold, (double)m->route.left / 1000.0, 0.);
	/* Due now: before the frames waiting in the same loop iteration. */
	ev_set_priority(&m->hold, EV_MAXPRI);
	ev_timer_start(d->loop, &m->hold);
	TAILQ_INSERT_TAIL(&d->held, m, link);
}

/* Publish m as m->route says, after checking a named target exists. */
static void
daemon_dispatch(struct daemon *d, struct message *m)
{
	const char *why;
	enum plan_next next;

	next = plan_dispatch(&d->plan, &m->route, duration_wall_ms(),
	                     duration_mono_ms(), &why);
	daemon_next(d, m, next, why);
}

/* Carry out what the plan says (plan.h). */
static void
daemon_next(struct daemon *d, struct message *m, enum plan_next next,
            const char *why)
{
	const char *refused;

	switch (next) {
	case PLAN_HOLD:
		daemon_hold(d, m);
		return;
	case PLAN_RETRY:
		daemon_retry_later(d, m, why);
		return;
	case PLAN_CHECK:
		switch (xcheck_find(&d->xc, m->route.exchange,
		                    duration_mono_ms(), &refused)) {
		case XCHECK_UNKNOWN:
			daemon_wait_exchange(d, m);
			return;
		case XCHECK_REFUSED:
			daemon_park(d, m, PARK_broker_refused,
			            "the broker refused the delivery: %s",
			            refused);
			return;
		case XCHECK_EXISTS:
			break;
		}
		break;
	case PLAN_PUBLISH:
		break;
	}
	daemon_publish(d, m);
}

/*
 * The shard whose delay queues m takes.  A message keeps its shard for
 * life: one from a shard's return queue stays in it; one seen for the first
 * time, or drained from a former layout's return queue, gets the next
 * shard round robin.
 */
static unsigned
daemon_shard(struct daemon *d, const struct message *m)
{
	int s = d->consumers[m->consumer].shard;

	return s >= 0 ? (unsigned)s : d->next_shard++ % d->topo.shards;
}

static void
daemon_route(struct daemon *d, struct message *m)
{
	if (m->src == ROUTE_FROM_INGRESS && daemon_cancel_request(d, m))
		return;
	/* Stamp "now + delay" from the clock rounded up, then step from it
	 * rounded down, so that neither can make the message early. */
	router_decide(&d->rp, m->src, &m->props, m->routing_key, now_ms_ceil(),
	              &m->route);
	m->route.shard = daemon_shard(d, m);
	if (m->route.action != ROUTE_PARK)
		router_step(&d->rp, &m->route, duration_wall_ms());
	m->routed = 1;
	if (m->route.action != ROUTE_PARK && daemon_cancelled(d, m))
		return;
	if (m->src != ROUTE_FROM_RETURN)
		daemon_scheduled(d, m);
	daemon_dispatch(d, m);
}

static void
daemon_message_done(struct daemon *d, struct message *m)
{
	d->assembling = NULL;
	if (m->stream && !m->discard) {
		daemon_record(d, m);
		return;
	}
	if (!m->is_return && !m->stream)
		d->m.received[m->consumer]++;
	if (m->is_return) {
		d->m.returns++;
		daemon_match_return(d, m);
		message_free(m);
		return;
	}
	if (m->discard) {
		/* Not acked: the broker gives it to another consumer. */
		message_free(m);
		return;
	}
	if (m->redelivered &&
	    router_guard(m->src, &m->props, m->routing_key,
	                 d->cfg->router_max_redeliveries, &m->route)) {
		m->routed = 1;
		daemon_publish(d, m);
		return;
	}
	if (d->out.blocked) {
		outbox_pause(&d->out, &m->out);
		return;
	}
	daemon_route(d, m);
}

/*
 * Frames
 */

static void
daemon_start_message(struct daemon *d, struct message *m)
{
	if (d->assembling != NULL) {
		daemon_fail(d, "new delivery before the last one was complete");
		message_free(m);
		return;
	}
	d->assembling = m;
}

/*
 * The broker closed the publish channel because of one publish (a name it
 * refuses, an internal exchange, a permission): park that message alone.
 * A parked copy that is refused in turn goes again without the publisher's
 * headers.  The exchange is remembered, so that the next messages for it
 * are parked without closing the channel again.
 */
static void
daemon_blame(struct daemon *d, struct message *m, const amqp_channel_close_t *c,
             const char *why)
{
	struct route *r = &m->route;
	char reason[340];

	log_warn("publish_refused_by_broker",
	         " reason=\"%s\" exchange=\"%.*s\" routing_key=\"%.*s\"", why,
	         (int)m->out.exchange.len, (const char *)m->out.exchange.bytes,
	         (int)m->out.routing_key.len,
	         (const char *)m->out.routing_key.bytes);
	if (r->action == ROUTE_DELIVER && r->exchange.len > 0 &&
	    (c->reply_code == AMQP_ACCESS_REFUSED ||
	     c->reply_code == AMQP_NOT_FOUND))
		xcheck_add(&d->xc, r->exchange, why, duration_mono_ms());
	snprintf(reason, sizeof(reason), "the broker refused the publish: %s",
	         why);
	daemon_unpublishable(d, m, PARK_broker_refused, reason);
}

/*
 * The publish channel was closed by the broker.  Unconfirmed publishes
 * lost their confirms with it and go again (at least once).  When a
 * publish caused it, the culprit is the only one in flight, or else they
 * are tried one at a time until it closes the channel alone.
 */
static void
daemon_pub_closed(struct daemon *d, const amqp_channel_close_t *c,
                  const char *why)
{
	amqp_channel_close_ok_t ok = {0};
	amqp_channel_open_t open = {amqp_empty_bytes};
	struct outbox_item *culprit;
	enum outbox_close what;
	char msg[340];

	what = outbox_closed(&d->out,
	                     c->class_id == AMQP_BASIC_CLASS &&
	                         c->method_id ==
	                             (AMQP_BASIC_PUBLISH_METHOD & 0xffff),
	                     &culprit);
	if (what == OUTBOX_CLOSE_FAIL) {
		snprintf(msg, sizeof(msg),
		         "publish channel closed by broker: %s", why);
		daemon_fail(d, msg);
		return;
	}
	if (amqp_send_method(d->conn, BROKER_CH_PUB,
	                     AMQP_CHANNEL_CLOSE_OK_METHOD,
	                     &ok) != AMQP_STATUS_OK ||
	    amqp_send_method(d->conn, BROKER_CH_PUB, AMQP_CHANNEL_OPEN_METHOD,
	                     &open) != AMQP_STATUS_OK) {
		if (culprit != NULL)
			message_free(MESSAGE_OF(culprit));
		daemon_fail(d, "cannot reopen the publish channel");
		return;
	}
	if (culprit != NULL) {
		daemon_blame(d, MESSAGE_OF(culprit), c, why);
		return;
	}
	log_warn("publish_channel_closed", " reason=\"%s\" suspects=%u", why,
	         outbox_count(&d->out.suspects));
}

static void
daemon_channel_close(struct daemon *d, amqp_channel_t ch,
                     const amqp_channel_close_t *c)
{
	amqp_channel_close_ok_t ok = {0};
	amqp_channel_open_t open = {amqp_empty_bytes};
	char why[300];

	snprintf(why, sizeof(why), "%u %.*s", c->reply_code,
	         (int)c->reply_text.len, (const char *)c->reply_text.bytes);
	if (ch == BROKER_CH_PUB) {
		daemon_pub_closed(d, c, why);
		return;
	}
	if (ch != BROKER_CH_CHECK) {
		char msg[340];
		snprintf(msg, sizeof(msg), "channel %u closed by broker: %s",
		         ch, why);
		daemon_fail(d, msg);
		return;
	}
	d->check_open = 0;
	if (amqp_send_method(d->conn, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) !=
	        AMQP_STATUS_OK ||
	    amqp_send_method(d->conn, ch, AMQP_CHANNEL_OPEN_METHOD, &open) !=
	        AMQP_STATUS_OK) {
		daemon_fail(d, "cannot reopen the check channel");
		return;
	}
	if (c->reply_code == AMQP_NOT_FOUND)
		daemon_lookup_done(d, 0, "does not exist");
	else
		daemon_lookup_done(d, 0, why);
	/* Declares sent after the failed one were dropped by the broker. */
	xcheck_unsend(&d->xc);
}

static void
daemon_method(struct daemon *d, amqp_frame_t *f)
{
	amqp_channel_t ch = f->channel;
	void *dec = f->payload.method.decoded;
	struct xcheck_lookup *lk;
	struct message *m;

	switch (f->payload.method.id) {
	case AMQP_BASIC_DELIVER_METHOD: {
		amqp_basic_deliver_t *dv = dec;
		if ((m = message_new()) == NULL) {
			daemon_fail(d, "out of memory");
			return;
		}
		m->delivery_tag = dv->delivery_tag;
		if (acks_push(&d->acks, dv->delivery_tag, &m->ack_index) < 0) {
			message_free(m);
			daemon_fail(d, "out of memory for acks");
			return;
		}
		m->src = ROUTE_FROM_INGRESS;
		m->consumer = 0; /* ingress */
		m->stream = headers_key_is(dv->consumer_tag, CANCELS_TAG);
		for (unsigned i = 0; i < d->nconsumers; i++) {
			const struct consumer *c = &d->consumers[i];
			if (!headers_key_is(dv->consumer_tag, c->tag))
				continue;
			m->src = c->src;
			m->consumer = i;
			break;
		}
		m->exchange = message_dup(m, dv->exchange);
		m->routing_key = message_dup(m, dv->routing_key);
		m->redelivered = dv->redelivered;
		m->discard = d->stopping;
		daemon_start_message(d, m);
		return;
	}
	case AMQP_BASIC_RETURN_METHOD: {
		amqp_basic_return_t *rt = dec;
		if ((m = message_new()) == NULL) {
			daemon_fail(d, "out of memory");
			return;
		}
		m->is_return = 1;
		m->exchange = message_dup(m, rt->exchange);
		m->routing_key = message_dup(m, rt->routing_key);
		snprintf(m->return_text, sizeof(m->return_text), "%u %.*s",
		         rt->reply_code, (int)rt->reply_text.len,
		         (const char *)rt->reply_text.bytes);
		daemon_start_message(d, m);
		return;
	}
	case AMQP_BASIC_ACK_METHOD: {
		amqp_basic_ack_t *a = dec;
		if (ch == BROKER_CH_PUB)
			daemon_confirm(d, a->delivery_tag, a->multiple, 0);
		return;
	}
	case AMQP_BASIC_NACK_METHOD: {
		amqp_basic_nack_t *n = dec;
		if (ch == BROKER_CH_PUB)
			daemon_confirm(d, n->delivery_tag, n->multiple, 1);
		return;
	}
	case AMQP_BASIC_CONSUME_OK_METHOD: {
		amqp_basic_consume_ok_t *ok = dec;
		/* The queues' consumers, all registered (not P.cancels'). */
		if (ch == BROKER_CH_WORK &&
		    !headers_key_is(ok->consumer_tag, CANCELS_TAG) &&
		    d->consume_oks > 0 && --d->consume_oks == 0)
			daemon_ready(d);
		return;
	}
	case AMQP_CONFIRM_SELECT_OK_METHOD:
		if (ch == BROKER_CH_PUB) {
			outbox_open(&d->out);
			daemon_pub_kick(d);
		}
		return;
	case AMQP_BASIC_CANCEL_METHOD: {
		/* The broker cancelled a consumer (we announce
		 * consumer_cancel_notify): its queue was deleted, a quorum
		 * queue lost its leader, or (RabbitMQ 4.3) a delivery was
		 * held past the consumer timeout.  Start over: reconnecting
		 * declares the queues again and consumes them all; nothing
		 * is lost, for the consumed queues have no delivery limit. */
		amqp_basic_cancel_t *c = dec;
		char why[320];
		snprintf(why, sizeof(why),
		         "consumer %.*s cancelled by the broker",
		         (int)c->consumer_tag.len,
		         (const char *)c->consumer_tag.bytes);
		daemon_fail(d, why);
		return;
	}
	case AMQP_EXCHANGE_DECLARE_OK_METHOD:
		if (ch == BROKER_CH_CHECK)
			daemon_lookup_done(d, 1, NULL);
		return;
	case AMQP_CHANNEL_OPEN_OK_METHOD:
		if (ch == BROKER_CH_CHECK) {
			d->check_open = 1;
			while (!d->broken &&
			       (lk = xcheck_unsent(&d->xc)) != NULL)
				lookup_send(d, lk);
		} else if (ch == BROKER_CH_PUB) {
			amqp_confirm_select_t sel = {0};
			if (amqp_send_method(d->conn, ch,
			                     AMQP_CONFIRM_SELECT_METHOD,
			                     &sel) != AMQP_STATUS_OK)
				daemon_fail(d, "cannot select confirms");
		}
		return;
	case AMQP_CHANNEL_CLOSE_METHOD:
		daemon_channel_close(d, ch, dec);
		return;
	case AMQP_CONNECTION_CLOSE_METHOD: {
		amqp_connection_close_t *c = dec;
		amqp_connection_close_ok_t ok = {0};
		char why[300];
		amqp_send_method(d->conn, 0, AMQP_CONNECTION_CLOSE_OK_METHOD,
		                 &ok);
		snprintf(why, sizeof(why),
		         "connection closed by broker: %u %.*s", c->reply_code,
		         (int)c->reply_text.len,
		         (const char *)c->reply_text.bytes);
		daemon_fail(d, why);
		return;
	}
	case AMQP_CONNECTION_BLOCKED_METHOD: {
		amqp_connection_blocked_t *b = dec;
		log_warn("connection_blocked", " reason=\"%.*s\"",
		         (int)b->reason.len, (const char *)b->reason.bytes);
		d->out.blocked = 1;
		return;
	}
	case AMQP_CONNECTION_UNBLOCKED_METHOD:
		log_info("connection_unblocked", "%s", "");
		d->out.blocked = 0;
		daemon_retry_arm(d);
		daemon_resume(d);
		daemon_pub_kick(d);
		return;
	default:
		log_debug("method_ignored", " id=0x%08x channel=%u",
		          f->payload.method.id, ch);
		return;
	}
}

static void
daemon_frame(struct daemon *d, amqp_frame_t *f)
{
	struct message *m = d->assembling;

	switch (f->frame_type) {
	case AMQP_FRAME_METHOD:
		daemon_method(d, f);
		return;
	case AMQP_FRAME_HEADER:
		if (m == NULL || m->have_header) {
			daemon_fail(d, "content header without a delivery");
			return;
		}
		m->have_header = 1;
		if (message_set_props(m, f->payload.properties.decoded) < 0) {
			daemon_fail(d, "out of memory copying properties");
			return;
		}
		if (message_body(m, f->payload.properties.body_size) < 0) {
			daemon_fail(d, "out of memory for a message body");
			return;
		}
		if (m->body.len == 0)
			daemon_message_done(d, m);
		return;
	case AMQP_FRAME_BODY: {
		int done = m == NULL || !m->have_header
		               ? -1
		               : message_append(m, f->payload.body_fragment);
		if (done < 0)
			daemon_fail(d, "unexpected body frame");
		else if (done)
			daemon_message_done(d, m);
		return;
	}
	default:
		return; /* heartbeats: rabbitmq-c already noted them */
	}
}

/*
 * rabbitmq-c could not decode a frame (0.14 and later refuse headers nested
 * more than 100 deep, which RabbitMQ accepts): the connection is lost, and
 * the broker would hand the same message back first every time.  When the
 * frame was the content header of a delivery seen before (redelivered), and
 * its queue dead-letters into P.error, reject it there before going.
 */
static void
daemon_undecodable(struct daemon *d, int st)
{
	struct message *m = d->assembling;

	if (st != AMQP_STATUS_BAD_AMQP_DATA || m == NULL || m->is_return ||
	    m->have_header || !m->redelivered || m->src >= METRICS_NSOURCES ||
	    !d->reject_parks[m->src])
		return;
	if (amqp_basic_reject(d->conn, BROKER_CH_WORK, m->delivery_tag, 0) !=
	    AMQP_STATUS_OK)
		return;
	d->m.parked[PARK_undecodable]++;
	log_error("parked",
	          " queue=%s reason=\"its headers cannot be decoded by this "
	          "AMQP library; rejected, the broker dead-letters it\" "
	          "source=%s routing_key=\"%.*s\"",
	          d->topo.error, d->consumers[m->consumer].queue,
	          (int)m->routing_key.len, (const char *)m->routing_key.bytes);
}

/* Read and handle frames until the socket and rabbitmq-c's buffer are dry. */
static void
daemon_drain(struct daemon *d)
{
	struct timeval zero = {0, 0};
	amqp_frame_t f;
	int st, n;

	for (n = 0; n < FRAMES_PER_CALLBACK && !d->broken; n++) {
		st = amqp_simple_wait_frame_noblock(d->conn, &f, &zero);
		if (st == AMQP_STATUS_TIMEOUT)
			break;
		if (st != AMQP_STATUS_OK) {
			daemon_undecodable(d, st);
			daemon_fail(d, amqp_error_string2(st));
			break;
		}
		daemon_frame(d, &f);
		if (!d->broken && !amqp_frames_enqueued(d->conn) &&
		    !amqp_data_in_buffer(d->conn))
			amqp_maybe_release_buffers(d->conn);
	}
	daemon_flush_acks(d);
	if (d->broken)
		return;
	/* The socket may be dry while rabbitmq-c still holds bytes: ev_io
	 * would not wake us for those. */
	if (amqp_frames_enqueued(d->conn) || amqp_data_in_buffer(d->conn))
		ev_idle_start(d->loop, &d->more);
	else
		ev_idle_stop(d->loop, &d->more);
	if (d->stopping && outbox_settled(&d->out) &&
	    TAILQ_EMPTY(&d->xc.lookups)) {
		log_info("stopped", " reason=\"all confirms received\"%s", "");
		ev_break(d->loop, EVBREAK_ALL);
	}
}

static void
on_io(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	daemon_drain(
	    (struct daemon *)((char *)w - offsetof(struct daemon, io)));
}

static void
on_more(struct ev_loop *loop, ev_idle *w, int revents)
{
	(void)loop;
	(void)revents;
	daemon_drain(
	    (struct daemon *)((char *)w - offsetof(struct daemon, more)));
}

/* rabbitmq-c sends and checks heartbeats only inside its wait calls. */
static void
on_heartbeat(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	daemon_drain(
	    (struct daemon *)((char *)w - offsetof(struct daemon, heartbeat)));
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
static int
daemon_consume_queues(struct daemon *d, char *err, size_t errsize)
{
	for (unsigned i = 0; i < d->nconsumers; i++) {
		amqp_basic_consume_t c;
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
	d->consume_oks = d->nconsumers;
	return 0;
}

/* Consuming: say so, once per connection (and to systemd). */
static void
daemon_ready(struct daemon *d)
{
	log_info("ready",
	         " url=%s ingress=%s shards=%u returns=%u drained=%u levels=%u"
	         " prefetch=%" PRIu64 " heartbeat=%ds cancellations=%zu",
	         d->url, d->topo.ingress, d->topo.shards,
	         d->nconsumers - 2 - d->topo.drains, d->topo.drains,
	         d->ladder.levels, d->cfg->router_prefetch,
	         amqp_get_heartbeat(d->conn), d->cancels.map.n);
	/* systemd (Type=notify): ready once consuming, the first time. */
	if (!d->notified_ready) {
		d->notified_ready = 1;
		sd_notifyf(0, "READY=1\nSTATUS=consuming from %s", d->url);
	} else {
		sd_notifyf(0, "STATUS=consuming from %s", d->url);
	}
}

/* Write a record on the events channel (no confirm: see broker.h). */
static int
daemon_write(struct daemon *d, const char *stream, const struct event *e)
{
	amqp_basic_properties_t props;
	int st;

	if (events_props(e, &d->scratch, &props) < 0) {
		recycle_amqp_pool(&d->scratch);
		return AMQP_STATUS_NO_MEMORY;
	}
	st = amqp_basic_publish(d->conn, BROKER_CH_EVENTS, amqp_empty_bytes,
	                        amqp_cstring_bytes(stream), 0, 0, &props,
	                        amqp_empty_bytes);
	recycle_amqp_pool(&d->scratch);
	return st;
}

/*
 * Read P.cancels from the start, and write a marker into it: the queues
 * are consumed once the marker comes back, so no message is routed
 * before every cancellation recorded so far is known.
 */
static int
daemon_write_marker(struct daemon *d)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = EVENT_MARKER;
	e.at = duration_wall_ms();
	e.marker = amqp_cstring_bytes(d->marker);
	return daemon_write(d, d->topo.cancels, &e);
}

/*
 * The marker is written without a confirm, and a stream whose leader
 * moves may lose it: write it again every REPLAY_REMARK seconds until one
 * comes back, and say how far the reading got.
 */
static void
on_replay(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d =
	    (struct daemon *)((char *)w - offsetof(struct daemon, replay));
	int st;

	(void)loop;
	(void)revents;
	if (!d->replaying || d->broken || d->conn == NULL) {
		ev_timer_stop(d->loop, &d->replay);
		return;
	}
	log_warn("reading_cancellations",
	         " stream=%s read=%" PRIu64 " held=%zu reason=\"marker not "
	         "back yet: written again\"",
	         d->topo.cancels, d->replayed, d->cancels.map.n);
	if ((st = daemon_write_marker(d)) != AMQP_STATUS_OK)
		daemon_fail(d, amqp_error_string2(st));
}

static int
daemon_replay(struct daemon *d, char *err, size_t errsize)
{
	amqp_table_entry_t arg;
	amqp_basic_consume_t c;
	char id[17];
	int st;

	memset(&c, 0, sizeof(c));
	arg.key = amqp_cstring_bytes("x-stream-offset");
	arg.value.kind = AMQP_FIELD_KIND_UTF8;
	arg.value.value.bytes = amqp_cstring_bytes("first");
	c.queue = amqp_cstring_bytes(d->topo.cancels);
	c.consumer_tag = amqp_cstring_bytes(CANCELS_TAG);
	c.arguments.num_entries = 1;
	c.arguments.entries = &arg;
	st = amqp_send_method(d->conn, BROKER_CH_WORK,
	                      AMQP_BASIC_CONSUME_METHOD, &c);
	if (st == AMQP_STATUS_OK) {
		events_new_id(id);
		snprintf(d->marker, sizeof(d->marker), "daemon-%d-%s",
		         (int)getpid(), id);
		st = daemon_write_marker(d);
	}
	if (st != AMQP_STATUS_OK) {
		snprintf(err, errsize, "consume %s: %s", d->topo.cancels,
		         amqp_error_string2(st));
		return -1;
	}
	d->replaying = 1;
	d->replayed = 0;
	ev_timer_set(&d->replay, REPLAY_REMARK, REPLAY_REMARK);
	ev_timer_start(d->loop, &d->replay);
	log_info("reading_cancellations", " stream=%s", d->topo.cancels);
	return 0;
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
	int hb, rc;

	/* With several URLs (a cluster's nodes), each attempt after a
	 * failure or a lost connection goes to the next one. */
	if (config_broker_url(d->cfg, d->url_next % d->urls, raw, sizeof(raw)) <
	    0)
		fatalx("bad_url", " index=%u", d->url_next);
	config_mask_url(raw, url, sizeof(url));
	snprintf(d->url, sizeof(d->url), "%s", url);
	d->conn = broker_connect_url(d->cfg, raw, err, sizeof(err));
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
	/* Frames may already sit in rabbitmq-c's buffer from the set-up. */
	daemon_drain(d);
}

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
	         outbox_count(&d->out.inflight));
	if (d->conn == NULL || d->broken || !d->consuming) {
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	for (unsigned i = 0; i <= d->nconsumers; i++) {
		/* The queues, and P.cancels last (unknown tags are fine). */
		cancel.consumer_tag = amqp_cstring_bytes(
		    i < d->nconsumers ? d->consumers[i].tag : CANCELS_TAG);
		cancel.nowait = 0;
		if (amqp_send_method(d->conn, BROKER_CH_WORK,
		                     AMQP_BASIC_CANCEL_METHOD,
		                     &cancel) != AMQP_STATUS_OK) {
			ev_break(loop, EVBREAK_ALL);
			return;
		}
	}
	/* Messages waiting for a retry are left to the broker to redeliver. */
	outbox_drop_list(&d->out.retry, message_free_item, NULL);
	outbox_drop_list(&d->out.paused, message_free_item, NULL);
	outbox_drop_list(&d->out.stuck, message_free_item, NULL);
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
 * /metrics and /healthz.  Healthy means what a load balancer or systemd
 * would want to know: connected and consuming, not stopping.
 */
static int
daemon_http(void *ctx, const char *path, char *buf, size_t size, int *status,
            const char **content_type)
{
	struct daemon *d = ctx;
	const char *why = NULL;
	int n, t;

	if (strcmp(path, "/healthz") == 0) {
		if (d->stopping)
			why = "stopping";
		else if (d->conn == NULL || d->broken)
			why = "not connected to the broker";
		else if (!d->consuming)
			why = "not consuming";
		else if (d->replaying)
			why = "reading cancellations before consuming";
		*status = why ? 503 : 200;
		return snprintf(buf, size, "%s\n", why ? why : "ok");
	}
	if (strcmp(path, "/metrics") == 0) {
		static const char *const sources[] = {"ingress", "return",
		                                      "retry"};
		struct metrics_queue q[METRICS_QUEUES_MAX];
		struct metrics_labels l = {
		    .ladder = &d->ladder,
		    .shards = d->topo.shards,
		    .level_queues = d->level_queues,
		    .queues = q,
		    .nqueues = d->nconsumers,
		    .version = CASCADE_VERSION,
		};
		for (unsigned i = 0; i < d->nconsumers; i++)
			q[i] = (struct metrics_queue){
			    sources[d->consumers[i].src], d->consumers[i].queue,
			    d->consumers[i].shard};
		d->m.in_flight =
		    outbox_count(&d->out.inflight) + xcheck_waiting(&d->xc);
		d->m.held = message_count(&d->held);
		d->m.retrying = outbox_count(&d->out.retry);
		d->m.paused = outbox_count(&d->out.paused);
		d->m.queued = outbox_count(&d->out.queued) +
		              outbox_count(&d->out.suspects);
		d->m.stuck = outbox_count(&d->out.stuck);
		d->m.cancel_requests = (unsigned)d->cancels.map.n;
		d->m.backing_off = (unsigned)targets_backing_off(
		    &d->targets, duration_mono_ms());
		d->m.connected = d->conn != NULL && !d->broken;
		d->m.consuming = d->m.connected && d->consuming &&
		                 !d->replaying && !d->stopping;
		d->m.blocked = d->out.blocked;
		*content_type = "text/plain; version=0.0.4; charset=utf-8";
		n = metrics_render(&d->m, &l, buf, size);
		if (n < 0)
			return n;
		t = metrics_render_targets(&d->targets, duration_mono_ms(),
		                           buf + n, size - (size_t)n);
		return t < 0 ? t : n + t;
	}
	*status = 404;
	return snprintf(buf, size, "not found: try /metrics or /healthz\n");
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
	d->rp.allowed = target_allowed;
	d->rp.allowed_ctx = cfg;
	d->rp.retry = &cfg->retry;
	d->rp.random = random_unit;
	outbox_init(&d->out);
	xcheck_init(&d->xc);
	targets_init(&d->targets, d->ladder.ttl[0],
	             cfg->router_target_backoff_max);
	d->plan.rp = &d->rp;
	d->plan.ladder = &d->ladder;
	d->plan.targets = &d->targets;
	d->plan.level_queues = d->level_queues;
	d->plan.refused_park_after = cfg->router_refused_park_after;
	TAILQ_INIT(&d->held);
	init_amqp_pool(&d->scratch, 4096);
	acks_init(&d->acks);
	cancels_init(&d->cancels);
	srand((unsigned)(duration_wall_ms() ^ (int64_t)getpid()));
	/* Daemons sharing a list start on different nodes. */
	d->urls = config_broker_url_count(cfg);
	d->url_next = (unsigned)rand();

	ev_init(&d->io, on_io);
	ev_idle_init(&d->more, on_more);
	ev_init(&d->heartbeat, on_heartbeat);
	ev_init(&d->reconnect, on_reconnect);
	ev_init(&d->teardown, on_teardown);
	ev_init(&d->retry_timer, on_retry);
	ev_init(&d->stop_timer, on_stop_timeout);
	ev_init(&d->replay, on_replay);
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
			fatalx("metrics_listen_failed",
			       " listen=%s reason=\"%s\"", cfg->metrics_listen,
			       err);
		log_info("metrics_listening", " listen=%s port=%d",
		         cfg->metrics_listen, httpd_port(d->httpd));
	}
	daemon_watchdog_start(d);

	/* Connect from inside the loop, so ev_break works from the start. */
	ev_timer_set(&d->reconnect, 0., 0.);
	ev_timer_start(d->loop, &d->reconnect);
	ev_run(d->loop, 0);

	daemon_drop_state(d);
	daemon_close(d);
	httpd_stop(d->httpd);
	/* Totals for the operator and for tools/bench. */
	log_info("totals",
	         " received=%" PRIu64 " hops=%" PRIu64 " delivered=%" PRIu64
	         " parked=%" PRIu64 " held=%" PRIu64 " nacked=%" PRIu64
	         " reconnects=%" PRIu64,
	         sum(d->m.received, METRICS_QUEUES_MAX),
	         sum(d->m.hops, LADDER_MAX_SHARDS * LADDER_MAX_LEVELS),
	         d->m.delivered, sum(d->m.parked, PARK_KINDS), d->m.held_total,
	         d->m.nacks, d->m.reconnects);
	empty_amqp_pool(&d->scratch);
	acks_free(&d->acks);
	targets_free(&d->targets);
	cancels_free(&d->cancels);
	message_spare_free();
	topology_free(&d->topo);
	rc = d->exit_code;
	free(d);
	return rc;
}
