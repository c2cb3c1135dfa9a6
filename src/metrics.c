/* Counters and their Prometheus text exposition. */
#include "metrics.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const double lateness_bounds_ms[METRICS_NBUCKETS] = {
    METRICS_LATENESS_BUCKETS_MS};

void
metrics_observe_lateness(struct metrics *m, int64_t late_ms)
{
	size_t i;

	if (late_ms < 0)
		late_ms = 0; /* never early; a clock step could say otherwise */
	for (i = 0; i < METRICS_NBUCKETS; i++)
		if ((double)late_ms <= lateness_bounds_ms[i])
			break;
	if (i < METRICS_NBUCKETS)
		m->lateness_bucket[i]++;
	m->lateness_count++;
	m->lateness_sum_ms += (double)late_ms;
}

/* Appends to a buffer; a write that does not fit marks the whole as failed. */
struct out {
	char *buf;
	size_t size, len;
	int full;
};

static void out_printf(struct out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
out_printf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->size - o->len) {
		o->full = 1;
		return;
	}
	o->len += (size_t)n;
}

static void
out_head(struct out *o, const char *name, const char *type, const char *help)
{
	out_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
out_one(struct out *o, const char *name, const char *type, const char *help,
        uint64_t v)
{
	out_head(o, name, type, help);
	out_printf(o, "%s %" PRIu64 "\n", name, v);
}

int
metrics_render(const struct metrics *m, const struct metrics_labels *l,
               char *buf, size_t size)
{
	struct out o = {buf, size, 0, 0};
	static const char *const sources[METRICS_NSOURCES] = {
	    "ingress", "return", "retry"};
	uint64_t cumulative = 0;

	if (size == 0)
		return -1;
	buf[0] = '\0';
	out_head(&o, "cascade_info", "gauge", "Version of the running daemon.");
	out_printf(&o, "cascade_info{version=\"%s\"} 1\n", l->version);
	out_one(&o, "cascade_connected", "gauge",
	        "1 while connected to the broker.", (uint64_t)m->connected);
	out_one(&o, "cascade_consuming", "gauge",
	        "1 while consuming ingress, return and retry.",
	        (uint64_t)m->consuming);
	out_one(&o, "cascade_blocked", "gauge",
	        "1 while the broker has blocked the connection "
	        "(connection.blocked).",
	        (uint64_t)m->blocked);

	out_head(&o, "cascade_messages_received_total", "counter",
	         "Deliveries received, by the queue they came from.");
	for (int i = 0; i < METRICS_NSOURCES; i++)
		out_printf(&o,
		           "cascade_messages_received_total{source=\"%s\","
		           "queue=\"%s\"} %" PRIu64 "\n",
		           sources[i], l->source_queues[i], m->received[i]);

	out_head(&o, "cascade_hops_total", "counter",
	         "Confirmed publishes into each delay level.");
	for (unsigned k = 0; k < l->ladder->levels; k++)
		out_printf(&o,
		           "cascade_hops_total{level=\"%u\",queue=\"%s\","
		           "ttl_ms=\"%" PRId64 "\"} %" PRIu64 "\n",
		           k, l->level_queues[k], l->ladder->ttl[k],
		           m->hops[k]);

	out_one(&o, "cascade_messages_delivered_total", "counter",
	        "Messages published to their target and confirmed.",
	        m->delivered);

	out_head(&o, "cascade_messages_parked_total", "counter",
	         "Messages moved to the error queue, by reason.");
	for (int i = 0; i < PARK_KINDS; i++)
		out_printf(&o,
		           "cascade_messages_parked_total{reason=\"%s\"} "
		           "%" PRIu64 "\n",
		           router_park_name((enum park_kind)i), m->parked[i]);

	out_one(&o, "cascade_publishes_total", "counter",
	        "Publishes sent (hops, deliveries, parks, publishes again).",
	        m->published);
	out_one(&o, "cascade_confirms_total", "counter",
	        "Publishes the broker confirmed (basic.ack).", m->confirms);
	out_one(&o, "cascade_nacks_total", "counter",
	        "Publishes the broker refused (basic.nack); the destination "
	        "backs off and the message goes round the ladder again.",
	        m->nacks);
	out_one(&o, "cascade_returns_total", "counter",
	        "Publishes returned unroutable (basic.return).", m->returns);
	out_one(&o, "cascade_publishes_in_flight", "gauge",
	        "Publishes waiting for the broker's confirm.",
	        (uint64_t)m->in_flight);
	out_one(&o, "cascade_held_messages", "gauge",
	        "Messages held in memory for the sub-resolution tail.",
	        (uint64_t)m->held);
	out_one(&o, "cascade_held_total", "counter",
	        "Messages that were held for the sub-resolution tail.",
	        m->held_total);
	out_one(&o, "cascade_retrying_messages", "gauge",
	        "Nacked publishes waiting to be published again.",
	        (uint64_t)m->retrying);
	out_one(&o, "cascade_paused_messages", "gauge",
	        "Deliveries held unrouted while the broker pushes back.",
	        (uint64_t)m->paused);
	out_one(&o, "cascade_queued_messages", "gauge",
	        "Routed messages waiting while the publish channel reopens "
	        "after the broker closed it.",
	        (uint64_t)m->queued);
	out_one(&o, "cascade_stuck_messages", "gauge",
	        "Messages not even a parked copy of could be published; "
	        "they return to their queue on reconnect.",
	        (uint64_t)m->stuck);
	out_one(&o, "cascade_targets_backing_off", "gauge",
	        "Targets and delay queues that refused publishes and back "
	        "off now.",
	        (uint64_t)m->backing_off);
	out_one(&o, "cascade_reconnects_total", "counter",
	        "Connections lost and set up again.", m->reconnects);

	out_head(&o, "cascade_lateness_seconds", "histogram",
	         "How late each delivery was published, against its due "
	         "time.");
	for (int i = 0; i < METRICS_NBUCKETS; i++) {
		cumulative += m->lateness_bucket[i];
		out_printf(&o,
		           "cascade_lateness_seconds_bucket{le=\"%g\"} "
		           "%" PRIu64 "\n",
		           lateness_bounds_ms[i] / 1000.0, cumulative);
	}
	out_printf(&o,
	           "cascade_lateness_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
	           "cascade_lateness_seconds_sum %.3f\n"
	           "cascade_lateness_seconds_count %" PRIu64 "\n",
	           m->lateness_count, m->lateness_sum_ms / 1000.0,
	           m->lateness_count);
	return o.full ? -1 : (int)o.len;
}
