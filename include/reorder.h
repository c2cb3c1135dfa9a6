/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reorder window: deliveries that come back from the ladder past their
 * due time (after a broker restart, a node's loss, a partition, the
 * daemon's own downtime) wait here a little, and leave in due-time order.
 *
 * Why they come back out of order.  Every level of the ladder is a queue of
 * its own, dead-lettered by a worker of its own.  After a restart each
 * level's worker starts when its queue has a leader, and a message it could
 * not hand to the return queue (no leader there yet) waits for that
 * worker's resend timer (RabbitMQ's
 * dead_letter_worker_publisher_confirm_timeout).  So the levels give back
 * what fell due while the broker was down in batches, level after level,
 * seconds or minutes apart: a message due at 1 s can come back after one
 * due at 10 s.
 *
 * When it holds.  Only after a disruption this daemon saw: it connected
 * (its first connection, or again after a broker restart or a lost
 * connection), or a delivery came to it redelivered (another daemon, or
 * this one, had it when it stopped or lost its connection).  A disruption
 * opens the window for `window` ms, and every overdue delivery that comes
 * back while it is open keeps it open for `window` ms more: it closes once
 * returns have been on time for a window's length.  With the window
 * closed nothing is held: a burst that came due together and comes back
 * late behind its own backlog in the return queue goes as fast as the
 * daemon moves it, as with a window of 0.
 *
 * The rule.  A delivery is overdue when it comes back more than
 * REORDER_LATE_MS after its due time.  While the window is open, an
 * overdue delivery waits as long as it is late already, and at most
 * `window` ms (its hold), and then until no delivery due before it is
 * still here: the delivery due first leaves first (ties in arrival
 * order).  So an overdue delivery that comes back within another's hold
 * after it, and is due before it, leaves before it.  The stragglers of a
 * restart are late by the restart and more, so they wait the whole
 * window; the messages a daemon held when it stopped for a second or two
 * come back a second or two late, and wait that long.  No delivery waits
 * more than twice the window: once the one here longest has waited that
 * long, the window lets out, in due order, everything due up to it.  When
 * `max` are here, the one due first leaves before another comes in.
 *
 * Deliveries on time are never held.  Before one goes out, the overdue
 * ones for the same target (its key: exchange and routing key) due before
 * it leave (reorder_take_before), so that it does not overtake them; those
 * for other targets keep waiting.
 *
 * Two clocks.  Due times are Unix ms (the wall clock: how late a delivery
 * is); how long an entry has waited, and how long the window stays open,
 * are monotonic ms, so a step of the wall clock neither holds an entry
 * longer nor lets it out early.
 *
 * Pure code: no sockets, no clock; times are arguments.  The caller owns
 * what the entries point to.
 */
#ifndef CASCADE_REORDER_H
#define CASCADE_REORDER_H

#include <stddef.h>
#include <stdint.h>

/* Later than this past its due time when it comes back: overdue.  The
 * ladder's last hop brings a message back before its due time (the tail
 * is held in memory); a return queue with a backlog can make it a little
 * late, which is not a reason to hold it. */
#define REORDER_LATE_MS 1000
/* The window's bounds (the config's [router] reorder_window). */
#define REORDER_WINDOW_MAX_MS 600000

struct reorder_entry {
	int64_t due;     /* Unix ms */
	int64_t arrived; /* monotonic ms */
	int64_t until;   /* arrived + its hold, monotonic ms */
	uint64_t seq;    /* arrival order, for ties */
	uint64_t key;    /* its target (reorder_key) */
	void *item;
};

struct reorder {
	struct reorder_entry *heap; /* a binary heap by (due, seq) */
	size_t n, max;
	int64_t window;       /* ms; 0: nothing is held */
	int64_t open_until;   /* monotonic ms: open before it; 0: closed */
	int64_t disrupted_at; /* monotonic ms of the last disruption; 0 */
	uint64_t seq;
	uint64_t opened_total; /* disruptions that opened a closed window */
	uint64_t held_total;   /* deliveries held */
	uint64_t forced_total; /* let out because one waited twice the window */
	uint64_t full_total;   /* let out because max were held */
};

/* window in ms (0 holds nothing), max entries at most (at least 1).
 * Returns 0, or -1 when out of memory. */
int reorder_init(struct reorder *r, int64_t window, size_t max);
void reorder_free(struct reorder *r);

/* A disruption at monotonic `mono` (a connection made, a redelivery):
 * the window is open for `window` ms from now. */
void reorder_disrupted(struct reorder *r, int64_t mono);

/* Is the window open at monotonic `mono`? */
int reorder_open(const struct reorder *r, int64_t mono);

/* Is a delivery due at `due` (Unix ms) coming back at `now` (Unix ms) late
 * enough to be overdue?  Never when the window is 0. */
int reorder_overdue(const struct reorder *r, int64_t due, int64_t now);

/* A target's key: its exchange and routing key, hashed.  Two targets that
 * share one only let out each other's deliveries early. */
uint64_t reorder_key(const void *exchange, size_t exchange_len,
                     const void *routing_key, size_t routing_key_len);

/*
 * Hold item, due at `due` (Unix ms), for the target `key`, arriving at
 * `now` (Unix ms) and `mono` (monotonic ms); the window stays open for
 * `window` ms from `mono`.  When max entries are held already, the one
 * due first (perhaps item itself) is not held but given back in *out to
 * go now; otherwise *out is NULL.
 */
void reorder_add(struct reorder *r, void *item, int64_t due, uint64_t key,
                 int64_t now, int64_t mono, void **out);

/* The next entry that may leave at monotonic `mono`, or NULL: the one due
 * first, once it has waited its hold, or once the one here longest has
 * waited twice the window. */
void *reorder_take(struct reorder *r, int64_t mono);

/* Before a delivery on time for the target `key`, due at `due`, goes out:
 * the first due of that target's entries due no later, or NULL. */
void *reorder_take_before(struct reorder *r, uint64_t key, int64_t due);

/* Any entry, or NULL: to give them all back (a stop, a lost connection). */
void *reorder_drain(struct reorder *r);

/* When reorder_take next gives something: monotonic ms, or INT64_MAX
 * when nothing is held. */
int64_t reorder_next_at(const struct reorder *r);

#endif
