/* SPDX-License-Identifier: Apache-2.0 */
/* Counters and their Prometheus text exposition. */
#include "metrics.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

/* A counter labelled by stream: P.events, P.cancels, P.series,
 * P.copies. */
static void
out_streams(struct out *o, const char *name, const char *help,
            const uint64_t v[METRICS_STREAMS])
{
	static const char *const streams[METRICS_STREAMS] = {
	    "events", "cancels", "series", "copies"};

	out_head(o, name, "counter", help);
	for (int i = 0; i < METRICS_STREAMS; i++)
		out_printf(o, "%s{stream=\"%s\"} %" PRIu64 "\n", name,
		           streams[i], v[i]);
}

static const char *const windows[METRICS_NWINDOWS] = {"minute", "hour", "day",
                                                      "later"};

const char *
metrics_held_name(int kind)
{
	static const char *const names[METRICS_HELD_KINDS] = {
	    "request", "claim", "series", "pause"};

	return kind >= 0 && kind < METRICS_HELD_KINDS ? names[kind] : "?";
}

int
metrics_window(int64_t ahead)
{
	if (ahead <= 60000)
		return 0;
	if (ahead <= 3600000)
		return 1;
	return ahead <= 86400000 ? 2 : 3;
}

int
metrics_render(const struct metrics *m, const struct metrics_labels *l,
               char *buf, size_t size)
{
	struct out o = {buf, size, 0, 0};
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
	for (unsigned i = 0; i < l->nqueues; i++) {
		const struct metrics_queue *q = &l->queues[i];
		out_printf(&o,
		           "cascade_messages_received_total{source=\"%s\","
		           "queue=\"%s\"",
		           q->source, q->queue);
		if (q->shard >= 0)
			out_printf(&o, ",shard=\"%d\"", q->shard);
		out_printf(&o, "} %" PRIu64 "\n", m->received[i]);
	}

	out_head(&o, "cascade_hops_total", "counter",
	         "Confirmed publishes into each delay level, by shard.");
	for (unsigned s = 0; s < l->shards; s++)
		for (unsigned k = 0; k < l->ladder->levels; k++) {
			unsigned i = s * l->ladder->levels + k;
			out_printf(
			    &o,
			    "cascade_hops_total{shard=\"%u\",level=\"%u\","
			    "queue=\"%s\",ttl_ms=\"%" PRId64 "\"} %" PRIu64
			    "\n",
			    s, k, l->level_queues[i], l->ladder->ttl[k],
			    m->hops[i]);
		}

	out_head(&o, "cascade_waits_total", "counter",
	         "Confirmed publishes into each holding queue (native "
	         "waiting), by shard.");
	for (unsigned s = 0; s < l->shards && l->hold_queues != NULL; s++)
		out_printf(&o,
		           "cascade_waits_total{shard=\"%u\",queue=\"%s\"} "
		           "%" PRIu64 "\n",
		           s, l->hold_queues[s], m->waits[s]);
	out_one(&o, "cascade_native_returns_total", "counter",
	        "Deliveries given back to a holding queue with their due "
	        "time (x-opt-delivery-time).",
	        m->native_returns);
	out_one(&o, "cascade_native_relinks_total", "counter",
	        "Links to the holding queues detached and attached again "
	        "while quiet, which returns a delivery RabbitMQ lost on its "
	        "way to this daemon.",
	        m->native_relinks);
	out_one(&o, "cascade_native_early_total", "counter",
	        "Deliveries a holding queue released before their due time "
	        "by this daemon's clock (the broker's clock is ahead).",
	        m->native_early);
	out_head(&o, "cascade_canary_total", "counter",
	         "auto's canary, by its answer: native (a quorum queue held "
	         "it until its time), ladder (released it early), unknown "
	         "(it could not tell: refused, limited, timed out).");
	out_printf(&o, "cascade_canary_total{answer=\"native\"} %" PRIu64 "\n",
	           m->canaries[1]);
	out_printf(&o, "cascade_canary_total{answer=\"ladder\"} %" PRIu64 "\n",
	           m->canaries[0]);
	out_printf(&o, "cascade_canary_total{answer=\"unknown\"} %" PRIu64 "\n",
	           m->canaries[2]);
	out_head(&o, "cascade_wait_mode", "gauge",
	         "1 for how messages wait now: ladder or native "
	         "([topology] mode); none before the first connection.");
	out_printf(&o, "cascade_wait_mode{mode=\"ladder\"} %d\n",
	           m->native == 0);
	out_printf(&o, "cascade_wait_mode{mode=\"native\"} %d\n",
	           m->native == 1);

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
	out_one(&o, "cascade_queue_not_answering_total", "counter",
	        "Times a delay level or holding queue did not confirm its "
	        "first publish since connecting within a second (RabbitMQ "
	        "waits for a quorum queue's leader); the messages for it "
	        "went to the levels below it meanwhile.",
	        m->gate_slow);
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
	out_one(&o, "cascade_overdue_returns_total", "counter",
	        "Deliveries that came back from the ladder over a second past "
	        "their due time (a broker restart, a node's loss).",
	        m->overdue_returns);
	out_one(&o, "cascade_reorder_messages", "gauge",
	        "Overdue deliveries waiting in the reorder window to leave in "
	        "due order.",
	        (uint64_t)m->reorder_waiting);
	out_one(&o, "cascade_reorder_total", "counter",
	        "Overdue deliveries that waited in the reorder window.",
	        m->reorder_total);
	out_one(&o, "cascade_reorder_early_total", "counter",
	        "Deliveries let out of the reorder window before it ended: "
	        "one had waited twice the window, or it was full.",
	        m->reorder_early);
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

	out_head(&o, "cascade_scheduled_total", "counter",
	         "Messages that started waiting, by how far ahead they were "
	         "due.");
	for (int i = 0; i < METRICS_NWINDOWS; i++)
		out_printf(
		    &o, "cascade_scheduled_total{due_in=\"%s\"} %" PRIu64 "\n",
		    windows[i], m->scheduled[i]);
	out_one(&o, "cascade_events_total", "counter",
	        "Records written to the events stream.", m->events);
	out_one(&o, "cascade_events_dropped_total", "counter",
	        "Records not written because the broker blocked the "
	        "connection.",
	        m->events_dropped);
	out_one(&o, "cascade_cancelled_total", "counter",
	        "Waiting messages cancelled (dropped, or parked with "
	        "--park).",
	        m->cancelled);
	out_one(&o, "cascade_rescheduled_total", "counter",
	        "Waiting messages given a new due time by a reschedule "
	        "request.",
	        m->rescheduled);
	out_one(&o, "cascade_superseded_total", "counter",
	        "Instances of rescheduled messages dropped because "
	        "cascade-ctl reschedule published a copy due at the new "
	        "time.",
	        m->superseded);
	out_one(&o, "cascade_duplicates_total", "counter",
	        "Messages with x-cascade-unique: keep not scheduled, because "
	        "a message of their publisher with their message-id was "
	        "waiting.",
	        m->duplicates);
	out_one(&o, "cascade_replaced_total", "counter",
	        "Waiting messages dropped because a message with "
	        "x-cascade-unique: replace took their message-id.",
	        m->replaced);
	out_one(&o, "cascade_series_stale_total", "counter",
	        "Stale copies of a repeat (left by a crash) dropped, so that "
	        "the series does not fork.",
	        m->series_stale);
	out_one(&o, "cascade_series_missed_total", "counter",
	        "Occurrences of repeats not delivered: missed (an outage, a "
	        "start in the past) and collapsed into a later delivery.",
	        m->series_missed);
	out_one(&o, "cascade_series_refreshed_total", "counter",
	        "Repeats' latest series records written again into P.series "
	        "before [events] series_window let them age out.",
	        m->series_refreshed);
	out_one(&o, "cascade_requests_refused_total", "counter",
	        "Requests refused: a cancel or reschedule whose requester "
	        "may not change the message (each is parked), a pause or "
	        "resume whose requester may not make it (each is logged).",
	        m->requests_refused);
	out_one(&o, "cascade_paused_waits_total", "counter",
	        "Deliveries held back by a pause: a due copy of a paused "
	        "series sent to wait for its next occurrence, or a delivery "
	        "to a paused target sent round the ladder.",
	        m->paused_waits);
	out_one(&o, "cascade_paced_total", "counter",
	        "Deliveries to a paced target ([target ...] pace) given a "
	        "slot later than they came due.",
	        m->paced);
	out_one(&o, "cascade_pace_daemons", "gauge",
	        "Daemons sharing the paces (each takes pace / this), from "
	        "their markers in the last 5 minutes; 0: no target paced.",
	        (uint64_t)m->pace_daemons);
	out_one(&o, "cascade_cancel_requests", "gauge",
	        "Cancellations held in memory until their messages come by.",
	        (uint64_t)m->cancel_requests);
	out_head(&o, "cascade_held_ids", "gauge",
	         "Ids held in memory from P.cancels, by kind: requests "
	         "(cancel, reschedule), claims (unique ids), series "
	         "(repeats).");
	for (int i = 0; i < METRICS_HELD_KINDS; i++)
		out_printf(&o, "cascade_held_ids{kind=\"%s\"} %" PRIu64 "\n",
		           metrics_held_name(i), m->held_ids[i]);
	out_one(&o, "cascade_held_ids_max", "gauge",
	        "[events] max_held_ids: the most ids held in all.",
	        m->held_ids_max);
	out_head(&o, "cascade_held_ids_refused_total", "counter",
	         "Records read from P.cancels that would have added an id "
	         "and were not held: [events] max_held_ids was reached.");
	for (int i = 0; i < METRICS_HELD_KINDS; i++)
		out_printf(&o,
		           "cascade_held_ids_refused_total{kind=\"%s\"} "
		           "%" PRIu64 "\n",
		           metrics_held_name(i), m->held_refused[i]);
	out_head(&o, "cascade_overdue_seconds", "gauge",
	         "How far past its due time the most overdue message this "
	         "daemon holds (publishing, backing off, paused, stuck) or "
	         "published in the last 30 to 60 s is; 0: none.");
	out_printf(&o, "cascade_overdue_seconds %.3f\n",
	           (double)m->overdue_ms / 1000.);
	if (m->cancels_read_age_ms >= 0) {
		out_head(&o, "cascade_cancellations_read_age_seconds", "gauge",
		         "How old the newest marker this daemon wrote into "
		         "P.cancels and read back is: how far behind its "
		         "view of cancellations may be (one is written every "
		         "2 minutes).");
		out_printf(&o, "cascade_cancellations_read_age_seconds %.3f\n",
		           (double)m->cancels_read_age_ms / 1000.);
		out_one(&o, "cascade_cancellations_stalls_total", "counter",
		        "Times a probe marker written into P.cancels did not "
		        "come back within 30 s, so the daemon connected "
		        "again to read the stream afresh.",
		        m->cancels_stalls);
		out_streams(&o, "cascade_records_untrusted_total",
		            "Records and batches read from P.events, "
		            "P.cancels, P.series and P.copies and skipped: "
		            "written by a "
		            "user that is neither the daemon's nor one of "
		            "[events] control_users.",
		            m->untrusted);
		out_streams(
		    &o, "cascade_records_undecodable_total",
		    "Stream messages of P.events, P.cancels, P.series and "
		    "P.copies "
		    "this AMQP library could not decode (headers nested "
		    "over 100 deep): the connection was lost on each, and "
		    "the reading went on past it.",
		    m->undecodable);
	}

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

/* A label value: backslash, double quote and line feed escaped. */
static void
out_label(struct out *o, const char *s, size_t len)
{
	for (size_t i = 0; i < len && !o->full; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\\' || c == '"')
			out_printf(o, "\\%c", c);
		else if (c == '\n')
			out_printf(o, "\\n");
		else
			out_printf(o, "%c", c);
	}
}

static int
by_last_refused(const void *a, const void *b)
{
	const struct target *x = *(const struct target *const *)a;
	const struct target *y = *(const struct target *const *)b;

	return (x->last_refused < y->last_refused) -
	       (x->last_refused > y->last_refused);
}

int
metrics_render_targets(const struct targets *ts, int64_t now, char *buf,
                       size_t size)
{
	static const struct {
		const char *name, *type, *help;
	} fam[] = {
	    {"cascade_target_refusals_total", "counter",
	     "Publishes the destination refused (basic.nack)."},
	    {"cascade_target_diverted_total", "counter",
	     "Messages sent round the ladder while the destination "
	     "backed off."},
	    {"cascade_target_backoff_seconds", "gauge",
	     "How long the destination still backs off; 0: accepting."},
	};
	const struct target *list[TARGETS_RENDER_MAX];
	const struct target **all;
	struct out o = {buf, size, 0, 0};
	size_t n = 0;

	if (size == 0)
		return -1;
	buf[0] = '\0';
	all = ts->n ? malloc(ts->n * sizeof(*all)) : NULL;
	if (ts->n && all == NULL)
		return -1;
	for (size_t i = 0; i < ts->n; i++)
		all[i] = &ts->t[i];
	if (ts->n > 0)
		qsort(all, ts->n, sizeof(*all), by_last_refused);
	for (size_t i = 0; i < ts->n && n < TARGETS_RENDER_MAX; i++)
		list[n++] = all[i];
	free(all);
	for (size_t f = 0; f < 3; f++) {
		out_printf(&o, "# HELP %s %s\n# TYPE %s %s\n", fam[f].name,
		           fam[f].help, fam[f].name, fam[f].type);
		for (size_t i = 0; i < n; i++) {
			const struct target *t = list[i];
			out_printf(&o, "%s{exchange=\"", fam[f].name);
			out_label(&o, t->exchange, t->exchange_len);
			out_printf(&o, "\",routing_key=\"");
			out_label(&o, t->routing_key, t->routing_key_len);
			if (f == 0)
				out_printf(&o, "\"} %" PRIu64 "\n",
				           t->refused_total);
			else if (f == 1)
				out_printf(&o, "\"} %" PRIu64 "\n",
				           t->diverted_total);
			else
				out_printf(&o, "\"} %.3f\n",
				           t->refusals && now < t->until
				               ? (double)(t->until - now) /
				                     1000.0
				               : 0.0);
		}
	}
	return o.full ? -1 : (int)o.len;
}
