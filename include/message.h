/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A message the daemon holds: a delivery (or a basic.return) assembled from
 * its method, content-header and body frames, its route, and its publish.
 *
 * Messages are recycled: with its pool pages and body buffer kept, a
 * message costs no allocation in the steady state.  At most
 * MESSAGE_SPARE_MAX wait for reuse; body buffers above MESSAGE_BUF_KEEP
 * are freed rather than kept.
 */
#ifndef CASCADE_MESSAGE_H
#define CASCADE_MESSAGE_H

#include "amqp_compat.h"
#include <ev.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "amqp1.h"
#include "outbox.h"
#include "router.h"

#define MESSAGE_SPARE_MAX 4096
#define MESSAGE_BUF_KEEP (64 * 1024)

/* What a message is, from where it came: set once, when it is made. */
enum message_kind {
	MESSAGE_DELIVERY, /* basic.deliver from a queue of messages */
	MESSAGE_HELD,     /* from a holding queue over AMQP 1.0: settled
	                     there (dv), not acked */
	MESSAGE_RECORD,   /* basic.deliver from a stream the daemon replays
	                     (P.cancels, P.series: stream says which) */
	MESSAGE_READING,  /* basic.deliver from P.events for a reading of
	                     reschedules (daemon_scan.c) */
	MESSAGE_RETURN,   /* a basic.return */
	MESSAGE_MADE,     /* made by the daemon: a refused request's copy to
	                     park; nothing to settle */
	MESSAGE_COPY,     /* made by the daemon: a copy a reschedule
	                     publishes (daemon_scan.c); nothing to settle */
};

struct message {
	/* The delivery, as it came. */
	enum message_kind kind;
	enum route_source src; /* which consumer it came from */
	unsigned consumer;     /* the daemon's consumer, by index */
	int redelivered;       /* basic.deliver's flag */
	int discard;           /* arrived while stopping: never routed */
	/* MESSAGE_RECORD: 1 + the index of its stream (daemon_int.h). */
	int stream;
	/* A repeat's delivery (requests.h): 1 delivered, its next copy is
	 * going out; 2 that copy is out, its record is going out. */
	int series_step;
	int unrecorded; /* given an id; its scheduled record is written when
	                  its first hop is confirmed */
	/*
	 * A reschedule published to P that moves messages earlier
	 * (daemon_scan.c): scan_current, a MESSAGE_READING of the reading
	 * under way; scan_serial names a request waiting for its copies, and
	 * a MESSAGE_COPY names its request; superseded is the request's list.
	 */
	int scan_current;
	int scan_counted; /* a request in the reading's recording count */
	uint64_t scan_serial;
	unsigned copies_pending;
	amqp_bytes_t superseded;
	uint64_t delivery_tag;
	uint64_t ack_index;       /* in the daemon's acks */
	struct amqp1_delivery dv; /* MESSAGE_HELD */
	uint32_t delivery_count;  /* a holding queue's count of failures */
	int64_t delivery_time;    /* the time it was last given back with */
	amqp_bytes_t exchange;
	amqp_bytes_t routing_key;
	amqp_basic_properties_t props;
	amqp_bytes_t body; /* points into buf */
	size_t body_got;   /* bytes of body read so far */
	int have_header;
	int refused;           /* its content header was refused on the wire
	                          (wirefilter.h): its marker says why */
	char return_text[160]; /* a basic.return's reply */

	/* Where it goes (router.h); routed once set. */
	int routed;
	int reordered; /* past the reorder window's check (daemon_reorder.c) */
	struct route route;

	/* Its publish; the outbox's lists link it. */
	struct outbox_item out;
	/* ROUTE_WAIT, ROUTE_REQUEST: the envelope published (envelope.h), from
	 * pool */
	amqp_bytes_t envelope;
	int64_t published_at; /* wall-clock ms of the last publish */

	/* The tail held in memory (and the spare list) link it here. */
	TAILQ_ENTRY(message) link;
	ev_timer hold;
	void *owner; /* for the hold timer's callback */

	/* Kept when the message is recycled. */
	char *buf;
	size_t buf_cap;
	amqp_pool_t pool;
};

TAILQ_HEAD(message_list, message);

/* A delivery from a holding queue that is still its own, not a repeat's
 * next copy going out: a wait gives it back there (amqp1_delay). */
static inline int
message_in_holding(const struct message *m)
{
	return m->kind == MESSAGE_HELD && !m->series_step;
}

/* The message an outbox item belongs to. */
#define MESSAGE_OF(item) OUTBOX_CONTAINER(item, struct message, out)

/* A cleared message, recycled when one is spare.  NULL out of memory. */
struct message *message_new(void);

/* Back to the spare list (or freed): NULL is ignored. */
void message_free(struct message *m);

/* The same, for outbox_drop and friends. */
void message_free_item(struct outbox_item *it, void *ctx);

/* Free every spare message: at exit, so leak checkers see nothing. */
void message_spare_free(void);

/* Messages on a list linked by `link` (held, spare). */
unsigned message_count(const struct message_list *l);

/* Spare messages waiting for reuse. */
unsigned message_spare_count(void);

/* Room for a body of len bytes in m->body.  -1 out of memory. */
int message_body(struct message *m, size_t len);

/*
 * Append a body fragment.  -1 when it would overflow the size the content
 * header announced; 1 when the body is now complete, else 0.
 */
int message_append(struct message *m, amqp_bytes_t fragment);

/* Copy b into m's pool.  {0, NULL} for empty b or out of memory. */
amqp_bytes_t message_dup(struct message *m, amqp_bytes_t b);

/*
 * Deep-copy decoded properties (from the connection's frame pool, which
 * the next frame reuses) into m's pool.  -1 out of memory.
 */
int message_set_props(struct message *m, const amqp_basic_properties_t *p);

#endif
