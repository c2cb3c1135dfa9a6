/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon's private header: the one struct every src/daemon*.c file
 * shares, and the functions they call across files.  Not part of the
 * library: only the daemon's files include it (and tests/unit that link
 * one of them with stubs for the others).
 *
 * The daemon is cut along its jobs, one file each, and its files call
 * down, never up (make check-calls): read from the top.  What a file below
 * must hand back up goes through a watcher its caller set (the teardown
 * timer, the scan's settle timer), as libev's callbacks do.
 *
 *   daemon.c          run, consumers, signals, stop, watchdog
 *   daemon_http.c     /metrics and /healthz
 *   daemon_conn.c     connect, teardown, reconnect
 *   daemon_wire.c     0-9-1 frames in: drain, assembly, the method switch,
 *                     channel close (the only file that knows frames)
 *   daemon_hold.c     native waiting: the choice of mode, the holding
 *                     queues over AMQP 1.0, their deliveries in
 *   daemon_canary.c   auto's canary, in a thread of its own
 *   daemon_answer.c   what comes back of a publish: confirms and the next
 *                     step, nacks, lookups answered, retries due, resumes
 *   daemon_sort.c     a complete message by what it is: a record, a
 *                     return, a request, a delivery to judge
 *   daemon_scan.c     reschedules published to P: a reading of P.events,
 *                     copies
 *   daemon_replay.c   the replay of P.cancels and P.series at connect and
 *                     their reading after, probes
 *   daemon_flow.c     a delivery judged once (verdict.h) and the verdict
 *                     carried out: publish, drop, hold, retry, look up;
 *                     overdue ones back from the ladder in due order
 *   daemon_series.c   repeats: the next copy, the refresh of P.series
 *   daemon_events.c   records in P.events; requests published to P; what
 *                     the request state says of a message; drops
 *   daemon_open.c     what comes back from cascade's queues: who put it
 *                     there, its envelope opened
 *   daemon_consume.c  consume the queues once the streams are read; ready
 *   daemon_ids.c      the request state held (requests.h): records read
 *                     into it, its prune, [events] max_held_ids
 *   daemon_publish.c  publish, returns matched, parks, retries queued,
 *                     acks, exchange lookups sent
 *   daemon_gate.c     each delay level's and holding queue's first
 *                     publish since connecting, alone on its own channel
 *   daemon_outgoing.c records, envelopes and the signature a publish
 *                     carries
 *   daemon_fail.c     daemon_fail: the one way the connection is given up
 * docs/how-it-works.md follows one message through them.
 */
#ifndef CASCADE_DAEMON_INT_H
#define CASCADE_DAEMON_INT_H

#include "amqp_compat.h"
#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "acks.h"
#include "amqp1.h"
#include "config.h"
#include "events.h"
#include "gate.h"
#include "ladder.h"
#include "message.h"
#include "metrics.h"
#include "outbox.h"
#include "park.h"
#include "reorder.h"
#include "plan.h"
#include "requests.h"
#include "router.h"
#include "targets.h"
#include "topology.h"
#include "trust.h"
#include "verdict.h"
#include "waiting.h"
#include "xcheck.h"

/* The struct that embeds member `member`, at `p`, is a `type`. */
#define CONTAINER_OF(p, type, member)                                          \
	((type *)(void *)((char *)(p)-offsetof(type, member)))

/* The daemon that embeds the watcher w as its field `field` (libev). */
#define DAEMON_OF(w, field) CONTAINER_OF(w, struct daemon, field)

/* Reads P.cancels and P.series (events.h) on the work channel as well. */
#define CANCELS_TAG "cancels"
#define SERIES_TAG "series"

/*
 * The streams every daemon reads from their first record when it connects,
 * each to a marker of its own, before it consumes anything
 * (daemon_replay.c), and then keeps reading: P.cancels (requests, claims,
 * and the series records of versions before P.series) and P.series
 * (repeats' series records, daemon_series.c).
 */
enum daemon_stream { STREAM_CANCELS, STREAM_SERIES, DAEMON_STREAMS };

struct stream_reading {
	const char *name;  /* d->topo.cancels, d->topo.series */
	const char *tag;   /* its consumer tag */
	int metric;        /* METRICS_STREAM_* */
	int replaying;     /* read from the start; its marker not back yet */
	uint64_t replayed; /* records read while replaying */
	struct events_resume resume; /* past what cannot be decoded */
	/* When the newest marker of ours read back was written (wall ms; the
	 * start before the first): how current what it holds is. */
	int64_t read_at;
	/* The oldest probe marker written and not read back yet (its `at`,
	 * wall ms; 0: none). */
	int64_t probe_at;
};

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
	/* A holding queue: over AMQP 1.0 (native), over 0-9-1 to drain it
	 * (ladder mode, when it exists), or not at all (off). */
	int amqp1;
	int off;
};

struct daemon {
	/* daemon.c: the loop, what the configuration fixed, stopping. */
	struct ev_loop *loop;
	const struct config *cfg;
	struct ladder ladder;
	struct topology topo;
	struct router_params rp;
	/* shard s's delay queue of level k at s * levels + k (plan.h) */
	const char *level_queues[LADDER_MAX_SHARDS * LADDER_MAX_LEVELS];
	/* What the work channel consumes (daemon_consumers). */
	struct consumer consumers[METRICS_QUEUES_MAX];
	unsigned nconsumers;
	ev_timer stop_timer;
	ev_signal sigterm, sigint;
	ev_timer watchdog; /* systemd's WatchdogSec, when it is set */
	int stopping;
	int exit_code;
	struct metrics m; /* every file counts here */

	/* daemon_conn.c: the connection and its recovery. */
	amqp_connection_state_t conn;
	int broken; /* connection failed; teardown pending */
	int consuming;
	int check_open; /* BROKER_CH_CHECK usable */
	int frame_max;
	/* Rejecting a delivery from this source parks it (topology.h). */
	int reject_parks[ROUTE_SOURCES];
	char url[CONFIG_STR_MAX]; /* the broker's, password masked */
	unsigned reconnects;
	ev_timer reconnect;
	ev_timer teardown;
	int notified_ready;   /* told systemd READY=1 */
	unsigned consume_oks; /* awaited before saying ready */
	unsigned urls;        /* how many [broker] url holds */
	unsigned url_next;    /* the next to try, modulo urls */

	/* daemon_wire.c: frames in. */
	struct message *assembling;
	ev_io io;
	ev_idle more; /* frames left in rabbitmq-c's buffer */
	ev_timer heartbeat;

	/* daemon_publish.c: publishes, confirms, retries, acks. */
	struct outbox out; /* publishes on BROKER_CH_PUB */
	struct xcheck xc;  /* target exchanges, BROKER_CH_CHECK */
	struct targets targets;
	/* [target ...] pace: each paced target's slots, and the daemons
	 * heard from (their markers in P.cancels) that share them. */
	struct pace pace;
	struct zone_cache zones; /* cron series' zones (zone.h) */
	struct plan plan;        /* the next publish, given the targets */
	amqp_pool_t scratch;
	struct acks acks;
	unsigned refused;          /* nacks and returns not yet logged */
	int64_t refused_logged_at; /* mono ms */
	ev_timer retry_timer;

	/* daemon_gate.c: each delay level's and holding queue's first
	 * publish since connecting, alone on a channel of its own. */
	struct gate_slot *gate;
	unsigned ngate;       /* slots: shards * levels, then one a shard */
	unsigned gate_usable; /* of them, those the channel_max allows */
	/* A broker's limit of the user's channels, learnt when it closed
	 * a connection over one (for as long as the daemon runs). */
	struct gate_limit gate_limit;
	ev_timer gate_timer;

	/* daemon_flow.c: routing. */
	struct message_list held; /* the sub-resolution tail */
	unsigned next_shard; /* round robin over the shards at first sight */

	/* daemon_flow.c: overdue deliveries back from the ladder, in due
	 * order (reorder.h); overdue returns not yet logged, the worst of
	 * them, and when they were last logged (mono ms). */
	struct reorder reorder;
	ev_timer reorder_timer;
	uint64_t overdue_unlogged;
	int64_t overdue_worst;
	int64_t overdue_logged_at;

	/* daemon_ids.c: the request state read from P.cancels and P.series
	 * (requests, claims, series), pruned when the map has this many
	 * entries. */
	struct requests requests;
	size_t held_prune_at;
	/* [events] max_held_ids reached: when it was last pruned for room,
	 * and when a record not held was last logged (mono ms) */
	int64_t held_pruned_at;
	int64_t held_full_logged;
	/*
	 * daemon_replay.c: P.cancels and P.series read from the start after
	 * connecting; the queues are consumed once the marker written into
	 * each comes back (events.h).  replaying: how many have not yet.
	 * Once consuming, a probe marker is written into each every
	 * CANCELS_PROBE seconds: how many checks the oldest missed, the
	 * check's timer, when one was last written (monotonic ms).
	 */
	struct stream_reading streams[DAEMON_STREAMS];
	int replaying;
	char marker[40];
	ev_timer replay; /* writes the markers again (on_replay) */
	unsigned probe_misses;
	ev_timer probe_check;
	int64_t probe_written;
	/* daemon_series.c: the refresh of series records (requests.h): its
	 * timer and where in the map its next tick goes on. */
	ev_timer series_refresh;
	size_t series_cursor;
	char own_user[256]; /* the broker user it logs in as (requests.h) */
	struct trust_seen untrusted; /* writers logged as untrusted */
	int64_t unsigned_until; /* [router] accept_unsigned_until, Unix ms */
	/* The most overdue message published (ms past due), in this
	 * OVERDUE_SLOT_MS slot of the wall clock and the one before: with what
	 * it holds now, cascade_overdue_seconds. */
	int64_t overdue_slot, overdue_max[2];
	/*
	 * daemon_scan.c: P.events read from its first record to a marker
	 * for the reschedules published to P that wait for it (reading),
	 * then their copies published (copying); queued wait for the next
	 * reading.
	 */
	struct {
		int active;
		char marker[40];
		char tag[48]; /* this reading's consumer tag */
		struct waiting_fold fold;
		amqp_bytes_t *want;
		struct message_list queued, reading, copying;
		uint64_t serial;
		int64_t last_at;    /* the latest request's time, Unix ms */
		unsigned recording; /* requests copied, not yet acked */
		/* Of those, acked since the scan last looked (daemon_ack
		 * counts them and starts settle, whose callback takes them
		 * off recording and starts the next reading). */
		unsigned settled;
		ev_timer settle;
		ev_timer remark;
		struct events_resume resume; /* past what cannot be read */
		/* Reading P.copies (after P.events) for the copies of the
		 * messages the requests name that their scheduled records
		 * do not carry; and past what cannot be read there. */
		int copies;
		struct events_resume copies_resume;
		/* The last reading of P.copies ended on what cannot be
		 * read: the next one goes on past it (once; then afresh,
		 * from its own time). */
		int copies_skipped;
	} scan;
	/* Records not written yet, one message per batch: P.events' and
	 * P.copies' (batch[DAEMON_BATCH_COPIES]), flushed together. */
	struct daemon_batch {
		char *buf;
		size_t len, cap;
		unsigned records;
	} batch[2];
	ev_timer batch_timer;

	/* daemon_hold.c: native waiting. */
	int native; /* -1: not decided yet; 0: the ladder; 1: native */
	/* auto: what the canary last answered (-1: nothing yet), the broker
	 * version it asks of, whether it is to ask once connected, and its
	 * pause after it could not tell. */
	int auto_native;
	int64_t canary_at; /* mono ms of its last answer */
	int canary_version;
	int canary_due;
	ev_timer canary_retry;
	ev_async canary_async; /* daemon_canary.c: the answer is in */
	struct canary_job *canary;
	int switching; /* a teardown to change the waiting mode */
	/* On the ladder: the look for holding queues that appeared, its
	 * timer, its channel's state, the consumer it looks for. */
	ev_timer hold_probe;
	enum {
		PROBE_CLOSED,
		PROBE_OPENING,
		PROBE_IDLE,
		PROBE_ASKING
	} probe_state;
	unsigned probe_at;
	struct amqp1 *a1; /* the holding queues' consumer, when native */
	ev_timer relink;  /* replaces its quiet links now and then */
	unsigned hold_link[AMQP1_MAX_LINKS]; /* link i's consumer index */
	const char *hold_queues[LADDER_MAX_SHARDS]; /* plan.hold_queues */
	int64_t early_logged_at;                    /* mono ms */
	/* daemon_flow.c: the wait before a delivery released early goes
	 * back (ms), and when the last came (mono ms). */
	int64_t early_backoff, early_at;

	/* daemon_http.c */
	struct httpd *httpd;
};

/*
 * daemon_conn.c
 */

/* Set the watchers this file owns (reconnect, teardown). */
void daemon_conn_init(struct daemon *d);
/* How far past its due time (ms) a message on its way is, 0 when it is
 * not; 0 too for what cannot be cascade's lateness: a park or a record
 * (no due time of its own), and a message at first sight (its publisher's
 * x-deliver-at may be long past). */
int64_t daemon_overdue_of(const struct message *m, int64_t now);
/* Note a message published past its due time (daemon_publish.c); how far
 * past due the most overdue one of the last minute or so was (ms). */
#define OVERDUE_SLOT_MS 30000
void daemon_note_overdue(struct daemon *d, int64_t late);
int64_t daemon_overdue_recent(struct daemon *d);

/* Drop the held tail and the reorder window (the broker redelivers
 * them). */
void daemon_drop_held(struct daemon *d);
/* Drop everything held in memory: it is all unacked. */
void daemon_drop_state(struct daemon *d);

/*
 * daemon_fail.c
 */

/* The connection is unusable: log why, drop state from a fresh iteration,
 * reconnect later.  Idempotent until the teardown ran. */
void daemon_fail(struct daemon *d, const char *why);
/* The same without the log line (a connection that never was): stop
 * using it, tear it down from a fresh loop iteration. */
void daemon_teardown_soon(struct daemon *d);

/*
 * daemon_consume.c
 */

/* basic.consume each queue of d->consumers.  0, or -1 with err. */
int daemon_consume_queues(struct daemon *d, char *err, size_t errsize);
/* Consuming: log ready, tell systemd. */
void daemon_ready(struct daemon *d);

/*
 * daemon_wire.c
 */

/* Set the watchers this file owns (io, more, heartbeat). */
void daemon_wire_init(struct daemon *d);
/* Read and handle the frames waiting, then flush acks. */
void daemon_drain(struct daemon *d);

/*
 * daemon_publish.c
 */

/* In [0, 1): retry jitter (router_params.random). */
double daemon_random_unit(void);
/* Publish m as m->route says, or queue, pause, park it.  Takes m. */
void daemon_publish(struct daemon *d, struct message *m);
/* A basic.return: mark the publish it names. */
void daemon_match_return(struct daemon *d, const struct message *r);
/* Park m (router_park) and publish it to P.error.  Takes m. */
void daemon_park(struct daemon *d, struct message *m, enum park_kind kind,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The parked line of m, once P.error confirmed it. */
void daemon_log_park(const struct daemon *d, const struct message *m);
/* A publish refused (why), its destination backing off wait_ms: logged,
 * one line a second at most. */
void daemon_log_refused(struct daemon *d, const struct message *m,
                        const char *why, int64_t wait_ms);
/* m cannot be published as it is: park it, strip it, or leave it stuck. */
void daemon_unpublishable(struct daemon *d, struct message *m,
                          enum park_kind kind, const char *reason);
/* Publish m again later, from memory.  Takes m. */
void daemon_retry_later(struct daemon *d, struct message *m, const char *why);
/* Arm the retry timer for the first retry due. */
void daemon_retry_arm(struct daemon *d);
/* m acked with the next flush.  Takes m. */
void daemon_ack(struct daemon *d, struct message *m);
/* Send the acks settled so far. */
void daemon_flush_acks(struct daemon *d);
/* Wait for a passive declare of m's target exchange.  Takes m. */
void daemon_wait_exchange(struct daemon *d, struct message *m);
/* Send lk's passive declare, when the check channel is open. */
void daemon_lookup_send(struct daemon *d, struct xcheck_lookup *lk);

/*
 * daemon_answer.c
 */

/* Set the watcher this file owns the callback of (retry_timer). */
void daemon_answer_init(struct daemon *d);
/* basic.ack or basic.nack from the broker on the publish channel. */
void daemon_confirm(struct daemon *d, uint64_t tag, int multiple, int nack);
/* The publish channel may take more: send what waited. */
void daemon_pub_kick(struct daemon *d);
/* Route or dispatch what waited while the connection was blocked. */
void daemon_resume(struct daemon *d);
/* The answer to the oldest passive declare. */
void daemon_lookup_done(struct daemon *d, int exists, const char *why);

/*
 * daemon_sort.c
 */

/*
 * A delivery (or a basic.return) fully assembled, from the 0-9-1 frames
 * (whose assembly the caller ended) or from a holding queue over AMQP 1.0
 * (which may arrive while a 0-9-1 delivery is half assembled).  Takes m.
 */
void daemon_message_done(struct daemon *d, struct message *m);
/* A delivery sorted, now or once the connection is unblocked: a request
 * from P.requests to the scan, the rest to daemon_route.  Takes m. */
void daemon_take(struct daemon *d, struct message *m);

/*
 * daemon_open.c
 */

/*
 * m came back from a return or holding queue (its properties still the
 * outer message's): 1 when a daemon did not put it there (trust_hop), and
 * it was parked as not_from_cascade; else 0.
 */
int daemon_forged(struct daemon *d, struct message *m);
/* From a holding queue: its envelope opened into m.  0, or -1 (parked). */
int daemon_unwrap(struct daemon *d, struct message *m);

/*
 * daemon_flow.c
 */

/* Decide m's route from its source and headers, judge it once
 * (verdict.h), and carry out the verdict. */
void daemon_route(struct daemon *d, struct message *m);
/* Publish m as m->route says, given the plan (verdict_dispatch). */
void daemon_dispatch(struct daemon *d, struct message *m);
/* Carry out the verdict on m: the notes it takes (a reschedule, a cancel,
 * first sight's count and id), then what becomes of m.  Takes m. */
void daemon_act(struct daemon *d, struct message *m, const struct verdict *v);
/* The notes of v alone (the last look, which goes on publishing when the
 * verdict lets it). */
void daemon_note(struct daemon *d, struct message *m, const struct verdict *v);
/* Publish m (daemon_publish) after a last look at a delivery
 * (verdict_last_look).  Takes m. */
void daemon_send(struct daemon *d, struct message *m);

/* The reorder window of overdue deliveries back from the ladder (reorder.h,
 * daemon_flow.c). */
void daemon_reorder_init(struct daemon *d);
void daemon_reorder_free(struct daemon *d);
/* A disruption (a connection made): the reorder window opens. */
void daemon_reorder_disrupted(struct daemon *d);
/* Carry out what the plan said. */
/* The broker closed a channel over m's publish: park it alone. */
void daemon_blame(struct daemon *d, struct message *m,
                  const amqp_channel_close_t *c, const char *why);
/* The broker confirmed m's publish (or refused it, when nack). */
void daemon_confirmed(struct daemon *d, struct message *m, int nack);
void daemon_next(struct daemon *d, struct message *m, enum plan_next next,
                 const char *why);

/*
 * daemon_events.c
 */

/* Set the watcher this file owns (the batch). */
void daemon_events_init(struct daemon *d);

/* A confirmed request's copy in P.events. */
void daemon_request_copy(struct daemon *d, const struct message *m);
/* Record what became of m in P.events, when it was recorded waiting. */
void daemon_event(struct daemon *d, const struct message *m,
                  enum event_kind kind);
/*
 * What is known of m, routed, for its verdict (verdict.h): where it came
 * from, and what the request state held says of it (requests.h): the
 * requests in force, a stale copy, and unless last_look
 * (verdict_last_look) its unique id and the cap.  A request its requester
 * may not apply is parked on the way (once) and counted.
 */
void daemon_request_facts(struct daemon *d, struct message *m, int last_look,
                          struct verdict_facts *f);
/* m dropped by its verdict, for why: logged, counted, recorded, acked.
 * Takes m. */
void daemon_dropped(struct daemon *d, struct message *m, enum verdict_drop why);
/*
 * daemon_ids.c: the request state held from P.cancels and P.series
 * (requests.h), and [events] max_held_ids.
 */
/* Ids held in all: requests, claims, series. */
size_t daemon_held(const struct daemon *d);
/*
 * May one more id of kind (REQUESTS_*, which are METRICS_HELD_*) be held?
 * At the limit (config_held_limit) what lapsed is pruned first, at most
 * once a second.
 */
int daemon_held_room(struct daemon *d, int kind);
/*
 * A record of a kind held (requests_kind), read from P.cancels or P.series
 * and in force: who wrote it and who asks, room under the cap for what a
 * user wrote straight into the stream, the record into d->requests, the
 * log line of a request, and now and then a prune.  0, or -1 out of memory
 * with *why set.
 */
int daemon_held_read(struct daemon *d, struct event *e, const char **why);
/*
 * May request e (from P, or taken from P.requests) be held: its id held
 * already, or room under [events] max_held_ids?  0 with r parked
 * (too_many_ids) when not.
 */
int daemon_request_room(struct daemon *d, const struct event *e,
                        struct route *r);

/* m is a request (x-cascade-cancel, x-cascade-reschedule): 1 with its
 * route set to record it (or to park it), for the caller to dispatch. */
int daemon_cancel_request(struct daemon *d, struct message *m);
#define DAEMON_BATCH_EVENTS 0
#define DAEMON_BATCH_COPIES 1
/* Write the batches of P.copies and P.events records now, in that
 * order (a copy is never behind its scheduled record).  An AMQP status. */
int daemon_events_flush(struct daemon *d);
/* Forget the records not written yet (the connection is gone). */
void daemon_events_drop(struct daemon *d);
/* Write a record into P.events or P.copies (batched), P.cancels or
 * P.series. */
int daemon_write(struct daemon *d, const char *stream, const struct event *e);

/*
 * daemon_replay.c
 */

/* Set the watchers this file owns (replay, probe_check). */
void daemon_replay_init(struct daemon *d);
/* A request was recorded in P.cancels: check soon that it is read back. */
void daemon_probe_soon(struct daemon *d);
/*
 * May the stream message m, read from the stream of metrics index stream
 * (METRICS_STREAM_*), be read at all (trust.h)?  0: it is skipped, counted
 * in cascade_records_untrusted_total and its writer logged once.
 */
int daemon_trusted(struct daemon *d, const struct message *m, int stream);
/* The stream a consumer tag reads: 1 + its index in d->streams, or 0. */
int daemon_stream_of_tag(const struct daemon *d, amqp_bytes_t tag);
/* A record read from d->streams[m->stream - 1].  Takes m. */
void daemon_record(struct daemon *d, struct message *m);
/* Read P.cancels and P.series from the start and write the markers.  0,
 * or -1 with err. */
int daemon_replay(struct daemon *d, char *err, size_t errsize);
/* basic.consume of stream from offset from (from its first record when
 * from < 0, or from the broker's time since, Unix ms, when since > 0:
 * events_stream_since), on the work channel, without waiting for the
 * reply. */
int daemon_consume_stream(struct daemon *d, const char *stream, const char *tag,
                          int64_t from, int64_t since);

/*
 * daemon_series.c
 */

/* m, a repeat's copy, was delivered for occurrences it missed: count. */
void daemon_series_missed(struct daemon *d, const struct message *m);

/*
 * m's occurrence was delivered: when the series goes on, route m as the
 * copy for the next one and return 1 (the caller dispatches it); else 0.
 */
int daemon_series_next(struct daemon *d, struct message *m);
/* Set the watcher this file owns (series_refresh). */
void daemon_series_init(struct daemon *d);
/* Both streams are read: (re)arm the refresh, which keeps itself going
 * until the connection fails. */
void daemon_series_start(struct daemon *d);

/*
 * daemon_scan.c
 */

/* Each reading's consumer tag: this, a dot and a serial. */
#define SCAN_TAG "cascade.scan"

void daemon_scan_init(struct daemon *d);
/*
 * A delivery from P.requests: believed only from a daemon's user (or a
 * control user), and opened, the request as its publisher sent it.  0, or
 * -1 when it was parked (not_from_cascade).
 */
int daemon_scan_open(struct daemon *d, struct message *m);
/* A request opened from P.requests: wait for the next reading. */
void daemon_scan_take(struct daemon *d, struct message *m);
/* Reschedule request m (ROUTE_RECORD set): copies first, then recorded. */
void daemon_scan_request(struct daemon *d, struct message *m);
/* A delivery from P.events for the reading under way. */
void daemon_scan_message(struct daemon *d, struct message *m);
/* The copy m was confirmed (ok) or refused. */
void daemon_scan_copied(struct daemon *d, struct message *m, int ok);
/* Whether consumer tag is a reading's; *current: this reading's. */
int daemon_scan_tag(const struct daemon *d, amqp_bytes_t tag, int *current);
/* The connection is gone: drop what waits (the broker redelivers). */
void daemon_scan_drop(struct daemon *d);
/* The stream the reading reads now (P.events, then P.copies), and where
 * it goes on past what cannot be read there. */
const char *daemon_scan_stream(struct daemon *d, struct events_resume **resume);
/* Its METRICS_STREAM_*. */
int daemon_scan_metric(const struct daemon *d);

/*
 * daemon_gate.c
 *
 * A delay level's or holding queue's first publish since connecting goes
 * alone, on that queue's own channel in confirm mode (BROKER_CH_GATE + its
 * slot): why, and the slot's states, in gate.h.  Until the probe is
 * confirmed the others for that queue wait for it, GATE_WAIT_MS at most;
 * then the queue backs off like one that refused (targets.h), and they
 * take a lower level (the ladder, for a holding queue).
 */
int daemon_gate_init(struct daemon *d);
void daemon_gate_free(struct daemon *d);
/* A new connection: every queue unproven, no channel open yet. */
void daemon_gate_connect(struct daemon *d);
/*
 * m is about to be published to exchange "" / routing key: 0 when the
 * publish channel may take it (*ch left), or on *ch as its queue's probe;
 * 1 when the gate took it (it waits for its queue's probe, or went
 * another way).
 */
int daemon_gate_take(struct daemon *d, struct message *m, amqp_channel_t *ch);
/* m was published on gate channel ch (to exchange, routing key). */
void daemon_gate_sent(struct daemon *d, struct message *m, amqp_channel_t ch,
                      amqp_bytes_t exchange, amqp_bytes_t routing_key);
/* channel.open-ok, confirm.select-ok, basic.ack / basic.nack on ch. */
void daemon_gate_opened(struct daemon *d, amqp_channel_t ch);
void daemon_gate_selected(struct daemon *d, amqp_channel_t ch);
void daemon_gate_confirm(struct daemon *d, amqp_channel_t ch, uint64_t tag,
                         int multiple, int nack);
/* The broker closed the connection with reply_code: one over a gate
 * channel past a limit of channels lowers gate_limit, and says so. */
void daemon_gate_conn_closed(struct daemon *d, unsigned reply_code);
/* A channel that waited for room under a limit of channels opens. */
void daemon_gate_open_next(struct daemon *d);
/* channel.close-ok on ch (closed once proven). */
void daemon_gate_close_ok(struct daemon *d, amqp_channel_t ch);
/* The queue of slot i. */
const char *daemon_gate_queue(const struct daemon *d, unsigned i);
/* Proven: its channel ch closed again (channel.close). */
void daemon_gate_close(struct daemon *d, amqp_channel_t ch);
/* The timer (daemon_answer.c's) at the next probe's second. */
void daemon_gate_arm(struct daemon *d);
/* connection.unblocked: the probes' seconds start again. */
void daemon_gate_unblocked(struct daemon *d);
/* What waited for s's probe goes on (replan: routed afresh). */
void daemon_gate_release(struct daemon *d, struct gate_slot *s, int replan);
/* Probes unconfirmed and what waits for them. */
unsigned daemon_gate_inflight(const struct daemon *d);
/* A basic.return of a probe: 1 when one matched. */
int daemon_gate_returned(struct daemon *d, const struct message *r);
/* Nothing waits for a probe nor is one unconfirmed. */
int daemon_gate_settled(const struct daemon *d);
/* Empty the gate: probes and waiters to free_item (the connection gone,
 * or a stop: what waits goes back). */
void daemon_gate_drop(struct daemon *d, outbox_free_fn free_item, void *ctx,
                      int waiters_only);
/* Is ch a gate's channel? */
#define DAEMON_GATE_CHANNEL(d, ch)                                             \
	((ch) >= BROKER_CH_GATE &&                                             \
	 (unsigned)((ch)-BROKER_CH_GATE) < (d)->gate_usable)

/*
 * daemon_hold.c
 */

/* The canary's watchers; at the end, the canary let go. */
void daemon_hold_init(struct daemon *d);
void daemon_hold_free(struct daemon *d);
/*
 * After the topology: the mode for this connection (auto: what the canary
 * last answered, the ladder until it has), then, native, declare the
 * holding queues and consume them over AMQP 1.0; ladder, drain those that
 * exist over 0-9-1.  0, or -1 with err; *fatal when retrying is useless.
 */
int daemon_hold_connect(struct daemon *d, const char *url, char *err,
                        size_t errsize, int *fatal);
/*
 * Drop a message (outbox_drop's callback, ctx the daemon): one from a
 * holding queue goes back released, its delivery count unchanged, rather
 * than with the connection, which would count it as failed.
 */
void daemon_give_back(struct outbox_item *it, void *ctx);
/* Run the AMQP 1.0 connection on the loop (after consuming). */
void daemon_hold_start(struct daemon *d);
/* The probe channel's answers (daemon_wire.c): opened, the queue looked
 * for exists, the broker closed the channel (404: it does not). */
void daemon_hold_probe_opened(struct daemon *d);
void daemon_hold_probe_found(struct daemon *d);
void daemon_hold_probe_closed(struct daemon *d, const amqp_channel_close_t *c);
/* At exit: settle what is settled and close the AMQP 1.0 connection
 * cleanly (bounded).  The caller released what it drops first. */
void daemon_hold_shutdown(struct daemon *d);
/* After a failure: detach the links when the AMQP 1.0 connection still
 * works (bounded), and close it; what it held goes back to the queues. */
void daemon_hold_close(struct daemon *d);

/*
 * daemon_canary.c
 */

/*
 * Ask whether this broker's quorum queues hold a message until its
 * x-opt-delivery-time, in a thread of its own on connections of its own
 * to url: canary_async is sent when the answer is in.  0, or -1 with err
 * (one is running already, no memory, no thread).
 */
int daemon_canary_start(struct daemon *d, const char *url, char *err,
                        size_t errsize);
/* The answer, once canary_async was sent: 1 yes, 0 no (why says it), -1
 * could not tell (why); -2 none yet.  The job is freed. */
int daemon_canary_answer(struct daemon *d, char *why, size_t whysize);
/* At exit: a canary still running frees itself when it ends, unheard. */
void daemon_canary_orphan(struct daemon *d);

/*
 * daemon_outgoing.c: what a publish carries besides the message's own.
 */

/*
 * Publishing into cascade's own queues (a hop, a wait, a return, a park):
 * as the daemon's user, so that what comes back can be told from what
 * someone else put there (trust_hop).
 */
void daemon_sign(const struct daemon *d, amqp_basic_properties_t *p);
/* The record of the request m (ROUTE_RECORD): the same every time, for
 * a basic.return to match it and for its copy in P.events. */
int daemon_request_event(const struct daemon *d, const struct message *m,
                         struct event *e);
/* The claim record of m (ROUTE_CLAIM): the same every time. */
int daemon_claim_event(const struct daemon *d, const struct message *m,
                       struct event *e);
/* A series record (id, occurrence, token, until) written at `at`, as
 * ours: believed from cascade's own users only (trust.h). */
void daemon_series_record(const struct daemon *d, amqp_bytes_t id,
                          int64_t occurrence, amqp_bytes_t token, int64_t until,
                          int64_t at, struct event *e);
/* The series record of m (ROUTE_SERIES): the same every time. */
int daemon_series_event(const struct daemon *d, const struct message *m,
                        struct event *e);
/*
 * A reschedule request from ingress moves into P.requests (ROUTE_REQUEST):
 * the outer message's properties (daemon_enclose_props, and the new due
 * time in x-cascade-due); its body is daemon_enclose of the request's own
 * properties.  0, or -1 out of memory.
 */
int daemon_scan_props(struct daemon *d, const struct message *m,
                      amqp_basic_properties_t *out);
/*
 * An envelope (envelope.h) of inner and content in *body, from d->scratch,
 * kept in m->envelope too.  0; -1 out of memory; -2 inner does not
 * encode.
 */
int daemon_enclose(struct daemon *d, struct message *m,
                   const amqp_basic_properties_t *inner, amqp_bytes_t content,
                   amqp_bytes_t *body);
/* The properties of a message whose body is an envelope: its content
 * type, persistent, and the daemon's user-id (daemon_sign). */
void daemon_enclose_props(const struct daemon *d,
                          amqp_basic_properties_t *outer);
/* The envelope for m's publish to a holding queue, and its outer
 * properties.  0, or -1 out of memory. */
int daemon_wrap(struct daemon *d, struct message *m,
                const amqp_basic_properties_t *inner,
                amqp_basic_properties_t *outer, amqp_bytes_t *body);

/*
 * daemon_http.c
 */

/* The httpd handler: /metrics and /healthz (httpd.h). */
int daemon_http(void *ctx, const char *path, char *buf, size_t size,
                int *status, const char **content_type);

#endif
