/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP handlers (httpd.h serves them): /metrics fills the gauges from
 * the daemon's state and renders metrics.h's exposition; /healthz says
 * whether the daemon is connected and consuming.
 *
 * Owns: nothing but the handler; reads every file's fields.
 */
#include "daemon_int.h"

#include <stdio.h>
#include <string.h>

#include "duration.h"
#include "version.h"

/*
 * How far past its due time (ms) the most overdue message the daemon holds
 * is: in the sub-resolution tail, or on the publish channel (queued, in
 * flight, backing off, paused, stuck); 0 for none.  What waits in the
 * broker is not seen until it comes back.
 */
static int64_t
daemon_overdue_ms(const struct daemon *d, int64_t now)
{
	const struct outbox_list *lists[] = {&d->out.queued,   &d->out.inflight,
	                                     &d->out.suspects, &d->out.retry,
	                                     &d->out.paused,   &d->out.stuck};
	const struct outbox_item *it;
	const struct message *m;
	int64_t worst = 0;

	TAILQ_FOREACH(m, &d->held, link)
		if (daemon_overdue_of(m, now) > worst)
			worst = daemon_overdue_of(m, now);
	for (size_t i = 0; i < d->reorder.n; i++) {
		m = d->reorder.heap[i].item;
		if (daemon_overdue_of(m, now) > worst)
			worst = daemon_overdue_of(m, now);
	}
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		TAILQ_FOREACH(it, lists[i], link) {
			m = MESSAGE_OF(it);
			if (daemon_overdue_of(m, now) > worst)
				worst = daemon_overdue_of(m, now);
		}
	return worst;
}

/* How old the newest markers read back are, the older of the streams'. */
static int64_t
daemon_read_age(const struct daemon *d, int64_t now)
{
	int64_t age = 0;

	for (int i = 0; i < DAEMON_STREAMS; i++)
		if (now - d->streams[i].read_at > age)
			age = now - d->streams[i].read_at;
	return age;
}

/*
 * /metrics and /healthz.  Healthy means what a load balancer or systemd
 * would want to know: connected and consuming, not stopping.
 */
int
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
		struct metrics_queue q[METRICS_QUEUES_MAX];
		int64_t now, recent;
		struct metrics_labels l = {
		    .ladder = &d->ladder,
		    .shards = d->topo.shards,
		    .level_queues = d->level_queues,
		    .hold_queues = d->hold_queues,
		    .queues = q,
		    .nqueues = d->nconsumers,
		    .version = CASCADE_VERSION,
		};
		for (unsigned i = 0; i < d->nconsumers; i++)
			q[i] = (struct metrics_queue){
			    router_source_name(d->consumers[i].src),
			    d->consumers[i].queue, d->consumers[i].shard};
		d->m.in_flight = outbox_count(&d->out.inflight) +
		                 xcheck_waiting(&d->xc) +
		                 daemon_gate_inflight(d);
		d->m.held = message_count(&d->held);
		d->m.reorder_waiting = (unsigned)d->reorder.n;
		d->m.reorder_total = d->reorder.held_total;
		d->m.reorder_early =
		    d->reorder.forced_total + d->reorder.full_total;
		d->m.retrying = outbox_count(&d->out.retry);
		d->m.paused = outbox_count(&d->out.paused);
		d->m.queued = outbox_count(&d->out.queued) +
		              outbox_count(&d->out.suspects);
		d->m.stuck = outbox_count(&d->out.stuck);
		d->m.cancel_requests = (unsigned)d->requests.n[REQUESTS_CANCEL];
		for (int k = 0; k < REQUESTS_KINDS; k++)
			d->m.held_ids[k] = d->requests.n[k];
		d->m.held_ids_max = d->cfg->events_max_held_ids;
		now = duration_wall_ms();
		d->m.paced = 0;
		for (size_t k = 0; k < d->pace.n; k++)
			d->m.paced += d->pace.t[k].paced_total;
		d->m.pace_daemons =
		    d->pace.n > 0 ? pace_peers(&d->pace, d->plan.own, now) : 0;
		recent = daemon_overdue_recent(d);
		d->m.overdue_ms = daemon_overdue_ms(d, now);
		if (recent > d->m.overdue_ms)
			d->m.overdue_ms = recent;
		d->m.cancels_read_age_ms =
		    config_events(d->cfg) ? daemon_read_age(d, now) : -1;
		d->m.backing_off = (unsigned)targets_backing_off(
		    &d->targets, duration_mono_ms());
		d->m.connected = d->conn != NULL && !d->broken;
		d->m.consuming = d->m.connected && d->consuming &&
		                 !d->replaying && !d->stopping;
		d->m.blocked = d->out.blocked;
		d->m.native = d->native;
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
