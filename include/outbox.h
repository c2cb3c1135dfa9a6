/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The publishes of one channel in confirm mode, and what waits for it.
 *
 * An item is one message to publish.  It is on at most one list at a time:
 *
 *   queued    the channel is not open yet, or a probe is on
 *   inflight  published, its confirm not yet in, in sequence order
 *   suspects  published before the channel was closed by one of them
 *   retry     refused; published again from memory at retry_at
 *   paused    the connection is blocked (connection.blocked)
 *   stuck     not even a parked copy could be published
 *
 * Confirms (basic.ack, basic.nack, with or without multiple) are matched by
 * sequence number.  A basic.return has none: returns come in publish order,
 * before the confirm of the same message, so a return names the first
 * unconfirmed, unreturned publish to the same exchange and routing key for
 * which the caller's test says the content is the same.
 *
 * When the broker closes the channel over a publish, that publish is the
 * only one in flight, or else it is found by probing: the publishes that
 * were in flight become suspects and are published again one at a time,
 * each after the previous one was confirmed, until one closes the channel
 * alone.  Everything else waits in queued meanwhile.
 *
 * Pure code: the caller does the sending and passes in the clock.
 */
#ifndef CASCADE_OUTBOX_H
#define CASCADE_OUTBOX_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

struct outbox_item {
	TAILQ_ENTRY(outbox_item) link;
	uint64_t seq;             /* publish sequence number, in flight */
	int suspect;              /* published alone, to find a culprit */
	amqp_bytes_t exchange;    /* published to */
	amqp_bytes_t routing_key; /* published with */
	int returned;             /* a basic.return named it */
	char return_text[160];    /* "312 NO_ROUTE" */
	int64_t retry_at;         /* monotonic ms, on the retry list */
	unsigned retries;         /* retries from memory so far */
};

TAILQ_HEAD(outbox_list, outbox_item);

struct outbox {
	struct outbox_list queued, inflight, suspects, retry, paused, stuck;
	uint64_t last_seq; /* of the newest publish since confirm.select */
	int ready;         /* the channel is open and in confirm mode */
	int probing;       /* suspects are being published one by one */
	int blocked;       /* connection.blocked: nothing may be sent */
};

/* Retries from memory back off from OUTBOX_RETRY_MIN_MS to ..._MAX_MS. */
#define OUTBOX_RETRY_MIN_MS 200
#define OUTBOX_RETRY_MAX_MS 10000

/* The item on a list that embeds it as `member` in a `type`. */
#define OUTBOX_CONTAINER(item, type, member)                                   \
	((type *)(void *)((char *)(item)-offsetof(type, member)))

void outbox_init(struct outbox *o);

/* Called for every item when lists are dropped. */
typedef void (*outbox_free_fn)(struct outbox_item *it, void *ctx);

/* Empty every list, the channel gone: each item goes to free_item. */
void outbox_drop(struct outbox *o, outbox_free_fn free_item, void *ctx);

/* Empty one list (retry, paused, stuck when stopping). */
void outbox_drop_list(struct outbox_list *l, outbox_free_fn free_item,
                      void *ctx);

/* Items on a list. */
unsigned outbox_count(const struct outbox_list *l);

/*
 * The channel is open in confirm mode (confirm.select-ok): sequence numbers
 * start again at 1, and queued items may be sent.
 */
void outbox_open(struct outbox *o);

/* May it be published now?  Else outbox_queue it. */
int outbox_may_send(const struct outbox *o, const struct outbox_item *it);

/* Wait for the channel (or for the probe to finish). */
void outbox_queue(struct outbox *o, struct outbox_item *it);

/* It was published to exchange / routing_key: in flight, numbered. */
void outbox_sent(struct outbox *o, struct outbox_item *it,
                 amqp_bytes_t exchange, amqp_bytes_t routing_key);

/*
 * The next item to publish now, taken off its list, or NULL: while probing
 * the next suspect once nothing is in flight (when there is none left, the
 * probe ends and *probe_done is set), else the oldest queued item.
 */
struct outbox_item *outbox_next(struct outbox *o, int *probe_done);

/*
 * A confirm for tag (multiple: and every lower one) came in: the next item
 * it settles, taken off inflight, or NULL when there is none left.  Call
 * until NULL; items published meanwhile have higher numbers and are not
 * taken.
 */
struct outbox_item *outbox_confirmed(struct outbox *o, uint64_t tag,
                                     int multiple);

/* Same content as published?  The caller's test for a basic.return. */
typedef int (*outbox_same_fn)(const struct outbox_item *it, void *ctx);

/*
 * A basic.return to exchange / routing_key with text: the item it names
 * is marked returned (its confirm comes next), or NULL when none matches.
 */
struct outbox_item *outbox_returned(struct outbox *o, amqp_bytes_t exchange,
                                    amqp_bytes_t routing_key, const char *text,
                                    outbox_same_fn same, void *ctx);

enum outbox_close {
	OUTBOX_CLOSE_FAIL,    /* not caused by a publish: give up the
	                         connection */
	OUTBOX_CLOSE_CULPRIT, /* the culprit is in *culprit */
	OUTBOX_CLOSE_PROBE,   /* in flight become suspects: probing */
};

/*
 * The broker closed the channel; by_publish when basic.publish caused it.
 * The channel is not ready until outbox_open.  Publishes in flight lost
 * their confirms: with one, it is the culprit; with several, they become
 * suspects, ahead of any older ones, in publish order.
 */
enum outbox_close outbox_closed(struct outbox *o, int by_publish,
                                struct outbox_item **culprit);

/*
 * Publish it again later, from memory, with jittered exponential backoff
 * (unit: a number in [0, 1)).  Returns the wait in ms.
 */
int64_t outbox_retry_later(struct outbox *o, struct outbox_item *it,
                           int64_t now, double unit);

/* The next item whose retry is due at now, taken off retry, or NULL. */
struct outbox_item *outbox_retry_due(struct outbox *o, int64_t now);

/* When the first retry is due (monotonic ms), INT64_MAX for none. */
int64_t outbox_retry_next(const struct outbox *o);

/* Hold it while the connection is blocked. */
void outbox_pause(struct outbox *o, struct outbox_item *it);

/* The next paused item, taken off paused, once unblocked; or NULL. */
struct outbox_item *outbox_resume(struct outbox *o);

/* Keep it, unacked, until the connection ends: nothing can publish it. */
void outbox_stuck(struct outbox *o, struct outbox_item *it);

/* Nothing in flight, queued or suspect: a stop may finish. */
int outbox_settled(const struct outbox *o);

#endif
