/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The messages still waiting, as the stream P.events tells them
 * (events.h): its records folded into one table, filtered and sorted the
 * way cascade-ctl list shows them, and counted by id the way cancel
 * matches them.  Pure code: the records come from the caller.
 */
#ifndef CASCADE_WAITING_H
#define CASCADE_WAITING_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "idmap.h"
#include "requests.h"

/* A message still waiting: its scheduled record, copied. */
struct waiting {
	int64_t due, size, seen; /* seen: x-cascade-at, 0 unknown */
	amqp_bytes_t id, message_id, exchange, routing_key; /* in data */
	amqp_bytes_t owner;                                 /* in data */
	/* The message, as its copy record in P.copies (or, written by an
	 * earlier version, its scheduled record) carries it, when its id
	 * is one the fold was asked to keep (want): in data; else empty. */
	amqp_bytes_t copy;
	int64_t recorded_due; /* the scheduled record's due time */
	/*
	 * A repeat's copy (events.h): its interval in ms, or its cron
	 * expression and zone (in data; empty: UTC), and the occurrence it
	 * is for; those before it were delivered or missed.
	 */
	int repeat;
	int64_t every, occurrence;
	amqp_bytes_t cron, tz;
	int cancel_pending; /* set by waiting_select */
	int rescheduled;    /* due is a reschedule's (waiting_select) */
	int paused; /* a repeat whose series is paused (waiting_select) */
	char data[];
};

/* What the records say, folded. */
struct waiting_fold {
	struct idmap waiting; /* cascade id -> struct waiting */
	struct idmap ended;   /* cascade ids whose end came before scheduled */
	struct requests requests; /* the requests copied into P.events */
	uint64_t records;
	/* Who may change what (requests.h): NULL, every request counts. */
	const struct config *cfg;
	char own_user[256];
	/* Keep the copies of the messages these ids name (NULL: none). */
	const amqp_bytes_t *want;
	size_t nwant;
};

void waiting_fold_init(struct waiting_fold *f);
void waiting_fold_free(struct waiting_fold *f);

/*
 * One record into f: scheduled adds a message (the same id again: the
 * later record wins), delivered / parked / cancelled removes it, a cancel
 * request is held for "cancel pending", a pause or resume for "paused"
 * (judged as the daemons judge them: requests.h).  An end whose scheduled
 * record has not been read (it aged out of the stream, or comes later) is
 * remembered, so that a late scheduled record does not list a message
 * that is gone.  Markers and unknown kinds are counted only.  -1 out of
 * memory.
 */
int waiting_fold_event(struct waiting_fold *f, const struct event *e);

/*
 * How many messages waiting in f that id names a reschedule to due, made
 * at `at` by `by` (control: a control user), would copy (as
 * waiting_needs_copy says) and have no copy yet, not counting repeats
 * and bodies of max_size bytes or more ([events] copy_max_size), which
 * have none.  Their copy records in P.copies were written when each was
 * first seen: the earliest of those times into *seen (Unix ms), when
 * there is one.  A copy record (waiting_fold_event) gives one its copy.
 * 0 also when out of memory.
 */
uint64_t waiting_copyless(struct waiting_fold *f, amqp_bytes_t id, int64_t due,
                          int64_t at, amqp_bytes_t by, int control,
                          int64_t max_size, int64_t *seen);

/* list's filters; an unset bound is INT64_MIN / INT64_MAX. */
struct waiting_filter {
	const char *target; /* EXCHANGE[/KEY], or NULL */
	int64_t due_before, due_after;
	int series; /* repeats only (list --series): not a bound, a kind */
};

/* No filter: every message passes. */
void waiting_filter_init(struct waiting_filter *flt);

/* Whether flt has a bound or a target (series is neither). */
int waiting_filter_set(const struct waiting_filter *flt);

/*
 * Whether w passes flt: due_after <= due < due_before, and --target T
 * names its exchange, or its "exchange/routing key".  Exchange names and
 * keys may hold slashes themselves, so T is not split at one; the default
 * exchange answers to "" and to "amq.default".
 */
int waiting_match(const struct waiting_filter *flt, const struct waiting *w);

/* The rows list prints: the waiting messages that pass, soonest first. */
struct waiting_rows {
	struct waiting **w; /* the fold's own; free only the array */
	size_t n;
	/* Messages waiting, before the bounds and target (with series:
	 * repeats only), so "n of total match" counts like with like. */
	size_t total;
};

/*
 * The messages of f that pass flt into r, each marked cancel_pending when
 * a request in force at now names it, and a repeat paused when a pause in
 * force at now holds its series; sorted by due time, then first seen,
 * then id, so the order is stable.  -1 out of memory (r empty).
 */
int waiting_select(struct waiting_fold *f, const struct waiting_filter *flt,
                   int64_t now, struct waiting_rows *r);

/* What a row calls the message: its message-id, else its cascade id. */
amqp_bytes_t waiting_name(const struct waiting *w);

/* The default exchange, by either of its names ("" or amq.default). */
int waiting_exchange_is_default(amqp_bytes_t b);

/*
 * How many waiting messages id names (as message-id or cascade id), and
 * the latest due time among them in *last_due (0 when none).
 */
uint64_t waiting_count_id(struct waiting_fold *f, amqp_bytes_t id,
                          int64_t *last_due);

/*
 * A message due within this many ms of a reschedule is not copied: it
 * comes back to a daemon by then, which reads the request first (within
 * milliseconds of its confirm) and gives it the new time.
 */
#define WAITING_COPY_MARGIN_MS 1000

/*
 * Whether a reschedule of w to due, recorded at `at` by `by` (control:
 * one of [events] control_users), publishes a copy of it due then
 * (events.h): when its record carries one, its cascade id fits in
 * x-cascade-superseded (1 to 255 bytes), the requester may change it,
 * and the instance waiting would come back to a daemon after due and
 * not within WAITING_COPY_MARGIN_MS.
 */
int waiting_needs_copy(struct waiting_fold *f, const struct waiting *w,
                       int64_t due, int64_t at, amqp_bytes_t by, int control);

/*
 * The waiting messages id names (as message-id or cascade id) in a
 * malloc'd array of the fold's own in *out (free only the array); how
 * many.  -1 out of memory.
 */
long waiting_named(struct waiting_fold *f, amqp_bytes_t id,
                   struct waiting ***out);

#endif
