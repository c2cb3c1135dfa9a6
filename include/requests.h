/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The request state a daemon (or cascade-ctl list) holds, read from
 * P.cancels and P.series (events.h): each kind of it in one id map, with
 * one prune, one count per kind and one trust check.  Pure code.
 *
 * The kinds (enum requests_kind):
 *
 *   - requests: the cancellations and reschedules held for an id, each
 *     until it lapses, with who asked (struct cancel, a list per id);
 *   - claims: which waiting message holds each unique id
 *     (x-cascade-unique) in each publisher's scope (struct claim, a list
 *     of scopes per message-id);
 *   - series: the latest record of each repeat, which tells its live copy
 *     (struct series_head, one per series id);
 *   - pauses: the series and targets paused, each until resumed (struct
 *     pause, one per series or target).
 *
 * A key is the kind's byte, then the id (at most REQUESTS_ID_MAX bytes,
 * as events_parse bounds every id read): a cancel of message-id "x" and a
 * series "x" are two entries.  Every entry lapses at its `until`, and
 * requests_prune forgets every kind's in one walk.
 *
 * Who may change a waiting message: a request takes effect on a message
 * whose owner (the user-id it was published with, which RabbitMQ checked)
 * is the requester, on a message published without a user-id, or on any
 * message when the requester is one of [events] control_users.  Any other
 * match is refused: the caller parks the request once and counts it.
 *
 * Unique ids: a unique id belongs to its publisher: the key is the pair
 * (scope, message-id), where the scope is the user-id the message was
 * published with (which RabbitMQ checked); messages published without one
 * share the anonymous scope (empty).  Alice's "inv-1" and Bob's "inv-1"
 * are two ids.  The two parts are held apart (a list of scopes per
 * message-id, each with its own length), never run together into one
 * string.  A daemon records a claim (events.h) for every message with
 * x-cascade-unique before it first waits.  Every daemon reads the claims
 * in the stream's order and judges each the same way, by the time it was
 * recorded, not by its own clock:
 *
 *   - no message holds the id in the claimant's scope (none did, or its
 *     due time has passed, or it was cancelled): the claimant holds it;
 *   - keep: the claimant loses, and is dropped as a duplicate;
 *   - replace: the holder is replaced (dropped when next seen) and the
 *     claimant holds the id.  Holder and claimant share a scope, so one
 *     publisher only ever replaces its own message.
 *
 * So where two daemons race, the first claim in the stream wins for keep
 * and the last for replace, and every daemon agrees.  A loss becomes a
 * cancellation of the loser's cascade id only, bound to the claimant's
 * scope: a claim names no message-id it could take from anyone.
 *
 * Repeats (x-cascade-every; schedule.h says when each is due): when a
 * daemon delivers occurrence k of a series, it publishes the copy for
 * occurrence k + 1 with a fresh token, then records (series, k + 1,
 * token) in P.series, then acknowledges occurrence k.  A crash anywhere
 * in between leaves at most one extra copy, which the records tell apart:
 * a copy of an occurrence below the latest recorded one, or of the latest
 * with another token, is stale and dropped where it is seen.  So a series
 * never forks, and no occurrence is lost (a crash before the record only
 * delivers occurrence k twice, as any delivery may be).
 */
#ifndef CASCADE_REQUESTS_H
#define CASCADE_REQUESTS_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "events.h"
#include "idmap.h"

/* The longest id held: a key is one byte more. */
#define REQUESTS_ID_MAX EVENTS_ID_MAX

/* The kinds, in the order of cascade_held_ids' (METRICS_HELD_*). */
enum requests_kind {
	REQUESTS_CANCEL, /* cancel, reschedule: struct cancel, by id */
	REQUESTS_CLAIM,  /* unique ids: struct claim, by message-id */
	REQUESTS_SERIES, /* repeats: struct series_head, by series id */
	REQUESTS_PAUSE,  /* pauses: struct pause, by series or target */
	REQUESTS_KINDS
};

struct requests {
	struct idmap map; /* (kind, id) -> that kind's entry */
	/* Held, by kind: ids for requests and series, (scope, message-id)
	 * pairs for claims. */
	size_t n[REQUESTS_KINDS];
};

void requests_init(struct requests *r);
void requests_free(struct requests *r);

/* The kind that holds records of kind k (EVENT_*), or -1: none. */
int requests_kind(enum event_kind k);

/* Held in all, every kind. */
size_t requests_held(const struct requests *r);

/* Forget every kind's entries that lapsed by now, in one walk; how many
 * entries the map has left. */
size_t requests_prune(struct requests *r, int64_t now);

/*
 * Who asks in record e, and whether that user may change every message.
 * A record's user-id (its writer) was checked by RabbitMQ.  A daemon that
 * relays a request published to P writes it as itself and names the
 * requester in x-cascade-requester; that is believed only from a control
 * user or from own_user (the reader's own login), and so is its
 * x-cascade-superseded list, which is cleared in e otherwise.  For a
 * claim, by is the claimant's scope.  by points into e.
 */
void requests_requester(const struct config *cfg, struct event *e,
                        amqp_bytes_t own_user, amqp_bytes_t *by, int *control);

/*
 * Whether record e (a request, a claim in scope, a series record) would
 * add an entry not held yet.
 */
int requests_new(const struct requests *r, const struct event *e,
                 amqp_bytes_t scope);

/*
 * Record e, read and in force at now, from by (requests_requester): what
 * it says, into r.  A request moves the holders of its message-id's
 * claims (requests_claims_cancelled, _rescheduled), and is held unless
 * hold is 0 (past the cap).  A claim is judged (requests_claim), and its
 * loser cancelled by cascade id.  A series record is held as written at
 * e->at, or at now when that is later (a clock ahead of ours).  A pause
 * or resume as requests_pause_read: 1 when refused.  -1 out of memory.
 */
int requests_read(struct requests *r, struct event *e, amqp_bytes_t by,
                  int control, int hold, int64_t now);

/*
 * Requests: cancellations and reschedules.
 *
 * Why a cancellation: asked for, or made from a claim that lost: a
 * duplicate, or a replaced message.  One made from a claim names the
 * loser's cascade id and is matched by cascade id only (never by
 * message-id), and only on a message of the claim's scope (by, not
 * control): a claim takes nothing from another publisher.
 */
enum cancel_reason { CANCEL_ASKED, CANCEL_DUPLICATE, CANCEL_REPLACED };

/* One request held for an id, allocated to its size. */
struct cancel {
	struct cancel *next; /* another request for the same id */
	int64_t due;         /* reschedule: the new due time, Unix ms */
	int64_t at;          /* when it was recorded, Unix ms */
	int64_t until;       /* it lapses then, Unix ms */
	/*
	 * Reschedules that published copies (events.h): the cascade ids
	 * copied, each with the time of the latest request that copied it
	 * (requests.c).  An instance of one of them copied before that time
	 * is superseded.
	 */
	char *superseded;
	uint32_t superseded_len;
	uint32_t by_len;
	unsigned kind : 4;           /* EVENT_CANCEL or EVENT_RESCHEDULE */
	unsigned reason : 2;         /* enum cancel_reason */
	unsigned park : 1;           /* cancel: park rather than drop */
	unsigned control : 1;        /* from a control user: any message */
	unsigned refusal_parked : 1; /* refused here once: parked, not again */
	char by[]; /* the requester's user-id, not terminated; empty: none */
};

/* What the requests held say about one message. */
struct cancel_match {
	const struct cancel *cancel;     /* a cancellation in force */
	const struct cancel *reschedule; /* the latest reschedule in force */
	struct cancel *refused; /* one it may not apply, not parked yet */
};

/*
 * Hold request e (EVENT_CANCEL or EVENT_RESCHEDULE, for e->cancel_reason)
 * for e->cancel, from by.  The same kind and reason from the same
 * requester replaces the one held (the later record wins; the longer
 * lifetime is kept).  -1 out of memory, or an id longer than
 * REQUESTS_ID_MAX, or a requester or list longer than UINT32_MAX bytes.
 */
int requests_add(struct requests *r, const struct event *e, amqp_bytes_t by,
                 int control);

/*
 * The requests in force at now for a message named message_id or
 * cascade_id, published by owner (empty: no user-id) and first seen at
 * since (Unix ms; 0: unknown, before any request).  A reschedule applies
 * to messages first seen before it was recorded; a cancel to any; one
 * made from a claim only by cascade_id and only when permitted (it is
 * never refused).  Returns 1 when out holds anything.
 */
int requests_match(struct requests *r, amqp_bytes_t message_id,
                   amqp_bytes_t cascade_id, amqp_bytes_t owner, int64_t since,
                   int64_t now, struct cancel_match *out);

/*
 * Whether the instance of cascade_id copied at copied (x-cascade-copied;
 * 0: the original), published by owner, is superseded at now: a
 * reschedule its requester may make, named by its message_id or
 * cascade_id, published a newer copy of it, due at the new time.  The
 * caller drops it.
 */
int requests_superseded(struct requests *r, amqp_bytes_t message_id,
                        amqp_bytes_t cascade_id, amqp_bytes_t owner,
                        int64_t copied, int64_t now);

/* Whether request k may change a message published by owner. */
int requests_permitted(const struct cancel *k, amqp_bytes_t owner);

/*
 * Whether a request by `by` (control: one of [events] control_users) may
 * change a message published by owner: its own, one published without a
 * user-id, or any for a control user (section 7.6 of docs/CONTRACT.md).
 */
int requests_may_change(amqp_bytes_t owner, amqp_bytes_t by, int control);

/*
 * Claims: unique ids.
 */

/* A cascade id is 16 hexadecimal digits (events_new_id). */
#define CLAIM_ID_MAX 16

/* The holder of one message-id in one scope, allocated to its size. */
struct claim {
	struct claim *next; /* the same message-id in another scope */
	int64_t due;   /* the holder's due time: it holds the id until then */
	int64_t until; /* forgotten after this */
	uint32_t scope_len;
	uint8_t id_len;
	char id[CLAIM_ID_MAX + 1]; /* the holder's cascade id */
	char scope[];              /* its publisher's user-id; not terminated */
};

/* What one claim decided. */
struct claim_verdict {
	int won;      /* the claimant holds the id */
	int lost;     /* it does not: a duplicate of the holder (keep) */
	int replaced; /* it took the id from old_id */
	char old_id[CLAIM_ID_MAX + 1];
	int64_t old_due;
};

/*
 * Judge claim e (EVENT_CLAIM) of a message published by scope (its
 * user-id; empty: anonymous).  A claim whose cascade id is empty or
 * longer than CLAIM_ID_MAX (none a daemon writes) is ignored: neither won
 * nor lost.  -1 out of memory, or a message-id longer than
 * REQUESTS_ID_MAX.
 */
int requests_claim(struct requests *r, const struct event *e,
                   amqp_bytes_t scope, struct claim_verdict *v);

/* The holder of message_id in scope at now, or NULL. */
const struct claim *requests_holder(const struct requests *r,
                                    amqp_bytes_t scope, amqp_bytes_t message_id,
                                    int64_t now);

/*
 * A cancel of message_id recorded at `at` by `by` (control: one of
 * [events] control_users): its holders hold it no more, in every scope
 * by may change (its own, the anonymous one; control: all).
 */
void requests_claims_cancelled(struct requests *r, amqp_bytes_t message_id,
                               int64_t at, amqp_bytes_t by, int control);

/* A reschedule of message_id by `by`: its holders hold it until due, in
 * every scope by may change. */
void requests_claims_rescheduled(struct requests *r, amqp_bytes_t message_id,
                                 int64_t due, amqp_bytes_t by, int control);

/*
 * Series: repeats' live copies.
 */

/* The latest record of one series, allocated to its token's size. */
struct series_head {
	int64_t occurrence; /* the latest recorded */
	int64_t until;      /* forgotten after this */
	/* When the latest record was last written, Unix ms: its newest
	 * x-cascade-at (the refresh writes it again, below). */
	int64_t written;
	uint32_t token_len;
	char token[]; /* not terminated */
};

/*
 * A record written at `at` (Unix ms): occurrence of series id has token.
 * -1 out of memory, or an id longer than REQUESTS_ID_MAX, or a token
 * longer than UINT32_MAX bytes.
 */
int requests_series_add(struct requests *r, amqp_bytes_t id, int64_t occurrence,
                        amqp_bytes_t token, int64_t until, int64_t at);

/* The latest record of series id, or NULL. */
const struct series_head *requests_series_head(const struct requests *r,
                                               amqp_bytes_t id);

/* Is the copy (occurrence, token) of series id a stale one? */
int requests_series_stale(const struct requests *r, amqp_bytes_t id,
                          int64_t occurrence, amqp_bytes_t token);

/*
 * The refresh.  P.series keeps records for [events] series_window only, and
 * a series whose latest record aged out while it lives could no longer tell
 * a stale copy.  So every daemon writes the latest record of each series it
 * holds again once that record is old: written at or before `stale` (a
 * quarter of the window ago) with its until still after now.  A record
 * another daemon wrote again, read back, makes it fresh here too, so one
 * daemon's refresh serves all.
 *
 * requests_series_refresh goes on from *cursor through at most `slots`
 * slots of the map (idmap_walk: a tick's work is bounded however many ids
 * are held, of any kind) and hands at most `max` old records to write,
 * which writes one again and returns 0 (the record is then taken as
 * written now; one lost on the way is written again a quarter window
 * later), or -1 to stop.  Returns how many it wrote.
 */
#define REQUESTS_REFRESH_SLOTS 16384
#define REQUESTS_REFRESH_MAX 500
size_t requests_series_refresh(struct requests *r, size_t *cursor, size_t slots,
                               size_t max, int64_t stale, int64_t now,
                               int (*write)(amqp_bytes_t id,
                                            const struct series_head *h,
                                            void *ctx),
                               void *ctx);

/*
 * Pauses (docs/CONTRACT.md 7.10).  A pause names a series (its cascade id
 * or its message-id) or a target (EXCHANGE, every routing key, or
 * EXCHANGE/KEY; "/KEY" and "amq.default/KEY" are the default exchange),
 * and holds until a resume of the same name, or until it lapses ([events]
 * max_age after it was recorded).  Each requester's pause of a name is
 * its own (a list per name): another user's pause neither replaces nor
 * lifts it.  A series' pause takes effect on the messages its requester
 * may change (requests_permitted's rule); a resume lifts its requester's
 * own pause, a control user's every pause of the name.  A target's pause
 * is a control user's only.
 */

/* One requester's pause of a name, allocated to the requester's size. */
struct pause {
	struct pause *next; /* another requester's pause of the same name */
	int64_t at;         /* recorded, Unix ms */
	int64_t until;      /* it lapses then, Unix ms */
	uint32_t by_len;
	unsigned control : 1; /* from a control user */
	char by[];            /* the requester's user-id, not terminated */
};

/*
 * Read pause or resume record e from by (control: one of [events]
 * control_users).  0 taken (a pause held or renewed, unless hold is 0:
 * past the cap; a pause lifted), 1 refused (a target's by anyone but a
 * control user; a resume by a user who holds no pause of the name while
 * another does: nothing changes), -1 out of memory.
 */
int requests_pause_read(struct requests *r, const struct event *e,
                        amqp_bytes_t by, int control, int hold);

/*
 * Is the series whose cascade id is id, or whose message-id is
 * message_id, published by owner, paused at now by a requester who may
 * change it?
 */
int requests_series_paused(const struct requests *r, amqp_bytes_t id,
                           amqp_bytes_t message_id, amqp_bytes_t owner,
                           int64_t now);

/*
 * The names under which the series (id, message_id, owner) is paused at
 * now, as requests_series_paused counts pauses: REQUESTS_BY_ID for its
 * cascade id, REQUESTS_BY_MESSAGE_ID for its message-id, 0 when it is not
 * paused.  *others is set when a pause counted is one that a resume by
 * `by` (a control user when control) would not lift: another publisher's
 * or a control user's.  The console and cascade-ctl resume each name
 * returned, so that a resume lifts what a Series page shows as paused
 * however the pause named the series.
 */
#define REQUESTS_BY_ID 1u
#define REQUESTS_BY_MESSAGE_ID 2u
unsigned requests_series_pauses(const struct requests *r, amqp_bytes_t id,
                                amqp_bytes_t message_id, amqp_bytes_t owner,
                                amqp_bytes_t by, int control, int64_t now,
                                int *others);

/*
 * Is a pause of the target named as a pause names it (EXCHANGE or
 * EXCHANGE/KEY, amq.default written either way) in force at now?
 */
int requests_target_held(const struct requests *r, amqp_bytes_t name,
                         int64_t now);

/* Is a delivery to exchange with routing_key paused at now? */
int requests_target_paused(const struct requests *r, amqp_bytes_t exchange,
                           amqp_bytes_t routing_key, int64_t now);

#endif
