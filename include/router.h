/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The routing decision for one message, and the properties it is published
 * with.  Pure code: the daemon feeds it a delivery and the clock, and carries
 * out what comes back.
 */
#ifndef CASCADE_ROUTER_H
#define CASCADE_ROUTER_H

#include "amqp_compat.h"
#include <stdarg.h>
#include <stdint.h>

#include "ladder.h"
#include "retry.h"
#include "zone.h"

/*
 * Native waiting: due within this many ms, a message is held in memory (as
 * a tail, when hold_tail) rather than given to a holding queue: a broker
 * step would take about as long, and a message due now then goes out
 * without the headers a wait adds.
 */
#define ROUTER_NATIVE_HOLD_MS 20

struct router_params {
	const struct ladder *ladder;
	int64_t max_delay;
	amqp_bytes_t default_exchange;
	int hold_tail; /* below ttl[0]: hold in memory instead of level 0 */
	/*
	 * With hold_tail, the last hop through the broker is planned to come
	 * back this many ms before the due time, to absorb the broker's
	 * latency; the rest is held.  0: hop whenever a level fits.
	 */
	int64_t tail_margin;
	/*
	 * [topology] mode = native: a message with at most this many ms
	 * left waits in its shard's holding queue (ROUTE_WAIT) rather than
	 * on the ladder.  0: the ladder alone.
	 */
	int64_t native_window;
	/*
	 * [topology] prefix: the exchange of that name and every exchange,
	 * queue and stream named prefix.* are cascade's own, and never a
	 * target (router_own_target).  Empty: no check.
	 */
	amqp_bytes_t own_prefix;
	/* May a message be delivered to this exchange?  NULL: any. */
	int (*allowed)(const void *ctx, amqp_bytes_t exchange);
	const void *allowed_ctx;
	const struct retry_table *retry;
	double (*random)(void); /* uniform in [0, 1), for retry jitter */
	/* Cron series' zones, loaded once (zone.h); NULL: read each time. */
	struct zone_cache *zones;
};

/*
 * The kinds of consumed queue: ROUTE_FROM_<KIND>, named <name> in the
 * metrics' source label.  The one list of them.
 *   INGRESS: first sight: read the publisher's headers
 *   RETURN:  back from a delay queue: read our own state
 *   RETRY:   dead-lettered by a work queue: retry it
 *   HOLD:    from a holding queue (amqp1.h), due or on first sight there:
 *            read our own state, as from a return queue
 *   REQUESTS: a reschedule request moved off ingress to wait for a
 *            reading of P.events (daemon_scan.c), in an envelope
 */
#define ROUTER_SOURCES(X)                                                      \
	X(INGRESS, ingress)                                                    \
	X(RETURN, return )                                                     \
	X(RETRY, retry)                                                        \
	X(HOLD, hold)                                                          \
	X(REQUESTS, requests)

enum route_source {
#define SOURCE_ENUM(kind, name) ROUTE_FROM_##kind,
	ROUTER_SOURCES(SOURCE_ENUM)
#undef SOURCE_ENUM
	    ROUTE_SOURCES
};

/* The source's name, as in the metrics label. */
const char *router_source_name(enum route_source src);

enum route_action {
	ROUTE_HOP,     /* publish to delay level `level` */
	ROUTE_DELIVER, /* publish to exchange / routing_key */
	ROUTE_PARK,    /* publish to the error queue with `reason` */
	ROUTE_HOLD,    /* keep in memory `left` ms, then step again */
	ROUTE_RECORD,  /* a cancellation request: record it (events.h) */
	ROUTE_WAIT,    /* wait in shard's holding queue until due (native) */
	ROUTE_CLAIM, /* x-cascade-unique: record its claim first (requests.h) */
	ROUTE_SERIES,  /* a repeat's next copy is out: record it (requests.h) */
	ROUTE_RETURN,  /* to its shard's return queue: a repeat's next copy
	                  due within a resolution step, held from there */
	ROUTE_REQUEST, /* a reschedule request: into P.requests, to wait
	                  there for a reading of P.events (daemon_scan.c) */
};

/* x-cascade-unique (requests.h). */
enum route_unique { UNIQUE_NONE, UNIQUE_KEEP, UNIQUE_REPLACE };

/* Why a message was parked, for counting; the reason text says more. */
#define ROUTER_PARK_KINDS(X)                                                   \
	X(bad_header)                                                          \
	X(max_delay)                                                           \
	X(not_allowed)                                                         \
	X(no_exchange)                                                         \
	X(unroutable)                                                          \
	X(retries_exhausted)                                                   \
	X(not_from_cascade)                                                    \
	X(refused)                                                             \
	X(too_large)                                                           \
	X(redelivered)                                                         \
	X(broker_refused)                                                      \
	X(undecodable)                                                         \
	X(cancelled)                                                           \
	X(not_permitted)                                                       \
	X(bad_target)                                                          \
	X(too_many_ids)

enum park_kind {
#define PARK_ENUM(name) PARK_##name,
	ROUTER_PARK_KINDS(PARK_ENUM)
#undef PARK_ENUM
	    PARK_KINDS
};

/* The kind's name, as in the metrics label. */
const char *router_park_name(enum park_kind kind);

struct route {
	enum route_action action;
	int level;
	unsigned shard; /* [topology] shards: whose delay queues it takes */
	int64_t due;    /* Unix epoch ms */
	int64_t left;   /* delay left after this hop, ms */
	amqp_bytes_t exchange;
	amqp_bytes_t routing_key;
	amqp_bytes_t expiration; /* the publisher's, held back until delivery */
	int has_expiration;
	unsigned attempt; /* retry attempt to stamp; 0: leave as it is */
	int fresh;        /* first sight: the publisher's own headers */
	amqp_bytes_t in_routing_key; /* the key it was published with */
	amqp_bytes_t queue; /* work queue that gave up, recorded on park */
	enum park_kind park;
	char reason[256];
	/*
	 * Its target refused it (or was backing off) this many times, the
	 * first at refused_since (Unix epoch ms): kept in x-cascade-refused
	 * and x-cascade-refused-since while it goes round the ladder again.
	 */
	unsigned refused;
	int64_t refused_since;
	/* x-cascade-slot: its paced target's slot for it (pace.h), Unix ms,
	 * reserved once and kept while it waits for it; 0: none.  slot_by
	 * (x-cascade-slot-by): the daemon process that reserved it, whose
	 * slots only it honours. */
	int64_t slot;
	amqp_bytes_t slot_by;
	/*
	 * x-cascade-back: when the hop it comes back from was to give it back,
	 * Unix ms (now plus the level's TTL; its due time in a holding queue):
	 * what it is late against when it comes back (the reorder window,
	 * reorder.h), so that a wait on purpose (a pace's slot, a paused or
	 * refusing target) is not taken for the broker's delay; 0: unknown (a
	 * message of a daemon before it).  Read on return, set at each hop.
	 */
	int64_t back;
	/* Parking: only cascade's own headers, the publisher's do not fit. */
	int strip_headers;
	/* x-cascade-id: the message's own, while it waits (events.h) */
	amqp_bytes_t id;
	/* x-cascade-since: first seen, Unix ms, while it waits; 0 unknown.
	 * A reschedule applies to messages first seen before it. */
	int64_t since;
	/* x-cascade-copied: this instance is a copy cascade-ctl reschedule
	 * published at this time, Unix ms (events.h); 0 the original */
	int64_t copied;
	/* ROUTE_RECORD of a reschedule request: the new due time, Unix ms */
	int64_t request_due;
	enum route_unique unique; /* x-cascade-unique, kept while it waits */
	/*
	 * A repeat (schedule.h), of one of two kinds: an interval (every >
	 * 0: the k-th copy, occurrence, is due at first + (k - 1) * every)
	 * or a cron series (cron: x-cascade-cron, in zone tz, empty: UTC;
	 * each occurrence the next instant it names).  times (0: no limit)
	 * and until (0: none) end it.  at: the occurrence's scheduled time.
	 * token tells this copy from a stale one.  catch_up_all:
	 * x-cascade-catch-up: all.  missed: at delivery, how many
	 * occurrences after this copy's it skips (it delivers occurrence +
	 * missed, scheduled at deliver_at).
	 */
	int repeat; /* either kind */
	int64_t every, times, until, first, occurrence, missed, at, deliver_at;
	int catch_up_all;
	amqp_bytes_t token, cron, tz;
};

/*
 * Decide where a message goes.  Bytes in *r point into props, routing_key or
 * params: they live as long as those do.
 */
void router_decide(const struct router_params *p, enum route_source src,
                   const amqp_basic_properties_t *props,
                   amqp_bytes_t routing_key, int64_t now, struct route *r);

/*
 * Is exchange / routing_key one of cascade's own, for prefix P: the
 * exchange P or P.*, or the default exchange ("" or "amq.default") with
 * the routing key P or P.* (every queue and stream cascade declares, for
 * any shard or former layout)?  cascade never delivers there: it would
 * write into its own queues and streams with its own rights.
 */
int router_own_target(amqp_bytes_t prefix, amqp_bytes_t exchange,
                      amqp_bytes_t routing_key);

/*
 * A repeat just delivered occurrence r->occurrence + r->missed at now: its
 * next copy.  1 with r->occurrence, r->at and r->due set to it (due no
 * sooner than the pace after now, schedule.h) and r->missed 0, or with r
 * parked when that copy cannot wait (a cron series whose next occurrence
 * is further than max_delay and a day away, or whose zone is gone); 0
 * with r untouched when r is not a repeat or its series ends (times,
 * until).
 */
int router_series_next(const struct router_params *p, struct route *r,
                       int64_t now);

/*
 * A copy of a paused series, due at now: r->due moves to the series' next
 * occurrence after now, the copy kept as it is (its occurrence, scheduled
 * time and token: delivered later it counts what it missed).  0 when the
 * series ends before one (times, until); 1 with r parked when its state
 * cannot be read (its zone gone).
 */
int router_series_skip(const struct router_params *p, struct route *r,
                       int64_t now);

/*
 * The delay headers of a first sight (x-deliver-at, x-opt-delivery-time,
 * x-remaining-delay, x-opt-delivery-delay, x-delay: the first present)
 * into r->due, from now.  0, or -1 with r parked (bad header,
 * beyond max_delay).
 */
int router_read_due(const struct router_params *p, const amqp_table_t *h,
                    int64_t now, struct route *r);

/*
 * From r->due and the clock, the next step only: deliver, or the hop and
 * what is left after it.  A message published again after a nack takes this
 * step afresh without reading its headers again, so its due time stays.
 */
void router_step(const struct router_params *p, struct route *r, int64_t now);

/* The same on the ladder alone: when the holding queue refuses. */
void router_ladder_step(const struct router_params *p, struct route *r,
                        int64_t now);

/*
 * A hop to level with r->due kept: r->left from the clock.  For a level
 * lower than router_step chose (a refusing queue above it) or a diverted
 * delivery.
 */
void router_hop(const struct router_params *p, struct route *r, int level,
                int64_t now);

/* Turn a delivery into a parked message: set ROUTE_PARK and the reason. */
void router_park(struct route *r, enum park_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void router_vpark(struct route *r, enum park_kind kind, const char *fmt,
                  va_list ap) __attribute__((format(printf, 3, 0)));

/*
 * Park as bad_header, naming the header and the value it held, so that an
 * operator reading P.error can tell whose typo it was: "key \"value\":
 * why" for a string (escaped, its first 48 bytes), "key 42: why" for an
 * integer, "key (a field of kind 'x'): why" for another kind, or "key:
 * why" when v is NULL.
 */
void router_park_header(struct route *r, const char *key,
                        const amqp_field_value_t *v, const char *why);

/*
 * The guard against the unknown poison: a delivery seen max times or more
 * without being settled (its daemons crashed or lost the connection while
 * they held it) is parked before it can take them down once more.  Quorum
 * queues count in x-delivery-count; classic queues do not count.  Returns
 * 1 with r set to park it, else 0 and r untouched.
 */
int router_guard(enum route_source src, const amqp_basic_properties_t *props,
                 amqp_bytes_t routing_key, uint64_t max, struct route *r);

/* The same with the count n given: a holding queue's, over AMQP 1.0. */
int router_guard_count(enum route_source src,
                       const amqp_basic_properties_t *props,
                       amqp_bytes_t routing_key, uint64_t n, uint64_t max,
                       struct route *r);

/*
 * The properties to publish with for r: routing headers dropped, our state
 * added on a hop, expiration held back and restored at delivery, user-id kept
 * as x-cascade-user-id.  Tables come from pool.  Returns -1 out of memory.
 */
int router_props(const amqp_basic_properties_t *in, const struct route *r,
                 amqp_pool_t *pool, amqp_basic_properties_t *out);

#endif
