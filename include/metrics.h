/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the daemon counts, and the Prometheus text exposition of it.  Pure:
 * the daemon bumps the counters, fills the gauges when asked, and the HTTP
 * module serves what metrics_render writes.
 */
#ifndef CASCADE_METRICS_H
#define CASCADE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "ladder.h"
#include "router.h"
#include "targets.h"

/* Upper bounds of the lateness histogram's buckets, in ms (+Inf follows). */
#define METRICS_LATENESS_BUCKETS_MS                                            \
	1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000,  \
	    60000
#define METRICS_NBUCKETS 15

/* Due within a minute, an hour, a day, or later. */
#define METRICS_NWINDOWS 4

/* The window of a message due `ahead` ms from now. */
int metrics_window(int64_t ahead);

/* The ids a daemon holds from P.cancels ([events] max_held_ids), by kind:
 * requests (cancel, reschedule), claims (unique ids), series (repeats),
 * pauses (of series and targets). */
enum {
	METRICS_HELD_REQUEST,
	METRICS_HELD_CLAIM,
	METRICS_HELD_SERIES,
	METRICS_HELD_PAUSE,
	METRICS_HELD_KINDS
};

/* The kind's name, as in the metrics label. */
const char *metrics_held_name(int kind);

/* The streams records are read from, as the metrics label them:
 * P.events, P.cancels, P.series, P.copies. */
enum {
	METRICS_STREAM_EVENTS,
	METRICS_STREAM_CANCELS,
	METRICS_STREAM_SERIES,
	METRICS_STREAM_COPIES,
	METRICS_STREAMS
};

/* Consumed queues: ingress, retry, requests, a return queue and a holding
 * queue per shard, and as many drained (topology.h). */
#define METRICS_QUEUES_MAX (3 + 3 * LADDER_MAX_SHARDS)

struct metrics {
	/* counters: only ever grow */
	uint64_t received[METRICS_QUEUES_MAX]; /* by metrics_labels.queues */
	/* confirmed hops into shard s's level k, at s * levels + k */
	uint64_t hops[LADDER_MAX_SHARDS * LADDER_MAX_LEVELS];
	/* native: confirmed publishes into shard s's holding queue */
	uint64_t waits[LADDER_MAX_SHARDS];
	/* native: given back to a holding queue with their due time, and
	 * of those, released before it by the queue (clocks apart) */
	uint64_t native_returns;
	uint64_t native_early;
	uint64_t native_relinks; /* holding queue links attached afresh */
	/* auto's canary answers: [0] the ladder, [1] native, [2] could not
	 * tell */
	uint64_t canaries[3];
	uint64_t delivered;
	uint64_t parked[PARK_KINDS];
	uint64_t published; /* every publish, confirmed or not */
	uint64_t confirms;  /* basic.ack from the broker */
	uint64_t nacks;     /* basic.nack: published again later */
	/* a delay level's or holding queue's first publish since connecting
	 * not confirmed within GATE_WAIT_MS: others went round it */
	uint64_t gate_slow;
	uint64_t returns; /* basic.return: unroutable */
	uint64_t held_total;
	/* Deliveries back from the ladder over a second past due, and the
	 * reorder window (reorder.h): held now, held, let out early. */
	uint64_t overdue_returns;
	unsigned reorder_waiting;
	uint64_t reorder_total, reorder_early;
	uint64_t reconnects;
	/* events.h: first sights by how far ahead they are due, records
	 * written, records not written (connection blocked), cancellations
	 * carried out (dropped or parked) */
	uint64_t scheduled[METRICS_NWINDOWS];
	uint64_t events;
	uint64_t events_dropped;
	uint64_t cancelled;
	/* requests.h: waiting messages given a new due time, and requests
	 * refused (their requester may not change the message) */
	uint64_t rescheduled;
	uint64_t superseded;    /* an instance a moved copy replaced, dropped */
	uint64_t duplicates;    /* x-cascade-unique keep: not scheduled */
	uint64_t replaced;      /* x-cascade-unique replace: dropped */
	uint64_t series_stale;  /* a repeat's stale copy, dropped */
	uint64_t series_missed; /* a repeat's occurrences collapsed */
	/* a series' latest record written again before it aged out */
	uint64_t series_refreshed;
	uint64_t requests_refused;
	uint64_t paused_waits;   /* held back by a pause (verdict rules 6, 7) */
	uint64_t paced;          /* deliveries given a later slot (pace.h) */
	unsigned pace_daemons;   /* daemons sharing the paces; 0: none paced */
	uint64_t cancels_stalls; /* P.cancels stopped coming: connected anew */
	/* stream messages skipped: written by a user not cascade's own
	 * (trust.h), by METRICS_STREAM_* */
	uint64_t untrusted[METRICS_STREAMS];
	/* stream messages the AMQP library could not decode, read past */
	uint64_t undecodable[METRICS_STREAMS];
	/* records of P.cancels not held: [events] max_held_ids reached */
	uint64_t held_refused[METRICS_HELD_KINDS];
	/* lateness of each confirmed delivery: published at minus due */
	uint64_t lateness_bucket[METRICS_NBUCKETS]; /* not cumulative */
	uint64_t lateness_count;
	double lateness_sum_ms;
	/* gauges: filled by the daemon just before rendering */
	unsigned in_flight, held, retrying, paused;
	unsigned queued;      /* waiting for the publish channel */
	unsigned stuck;       /* not even a parked copy could be published */
	unsigned backing_off; /* destinations backing off now */
	unsigned cancel_requests; /* cancellations held in memory */
	uint64_t held_ids[METRICS_HELD_KINDS]; /* ids held, by kind */
	uint64_t held_ids_max;                 /* [events] max_held_ids */
	/* how far past its due time the most overdue message held is, ms */
	int64_t overdue_ms;
	/* ms since the newest marker read back from P.cancels and P.series
	 * was written, the older of the two; -1: [events] off, no stream to
	 * read */
	int64_t cancels_read_age_ms;
	int connected, consuming, blocked;
	int native; /* 1: native waiting; 0: the ladder; -1: not chosen */
};

/* A consumed queue, as the exposition labels it. */
struct metrics_queue {
	const char *source; /* router_source_name() */
	const char *queue;
	int shard; /* a shard's return queue; -1: no shard label */
};

/* What the exposition labels levels and sources with. */
struct metrics_labels {
	const struct ladder *ladder;
	unsigned shards;
	const char *const *level_queues; /* shards * ladder->levels names */
	const char *const *hold_queues;  /* shards names */
	const struct metrics_queue *queues;
	unsigned nqueues;
	const char *version;
};

void metrics_observe_lateness(struct metrics *m, int64_t late_ms);

/*
 * The Prometheus text format (version 0.0.4) of m into buf.  Returns the
 * length, or -1 when buf is too small.
 */
int metrics_render(const struct metrics *m, const struct metrics_labels *l,
                   char *buf, size_t size);

/*
 * Prometheus text for the destinations that ever refused a publish (at
 * most TARGETS_RENDER_MAX, the most recently refused): three families,
 * cascade_target_refusals_total, cascade_target_diverted_total and
 * cascade_target_backoff_seconds, labelled exchange and routing_key.
 * Returns the length written, or -1 when buf is too small.
 */
int metrics_render_targets(const struct targets *ts, int64_t now, char *buf,
                           size_t size);

#endif
