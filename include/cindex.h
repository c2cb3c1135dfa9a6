/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The console's index of what waits (docs/console-design.md, section 2):
 * the records of P.events (events.h) folded as waiting.h folds them, but
 * held in under 200 bytes a message at a million and kept in due order,
 * so that a page, a count by due window or a search answers in
 * microseconds to tens of milliseconds rather than by sorting everything
 * on each request as waiting_select does.
 *
 * Each message is a 48-byte entry in slabs that never move; its
 * message-id (and a cascade id that is not 16 hexadecimal digits) is in
 * an arena of length-prefixed strings that is compacted when a quarter of
 * it is garbage; two open-addressing hashes find an entry by cascade id
 * and by message-id, each place 8 bytes: the slot and 32 bits of its
 * hash, so that growing a table or probing past others reads no entry;
 * a two-level tree of sorted blocks keeps the order waiting_select sorts
 * by (due, first seen, id) with a count per block, so offset N is found
 * without walking N rows; the directory keeps each block's last due, so
 * that finding a block reads no entry.  Folding a record costs a few
 * cache misses, not tens: a console catching up on ten million is bound
 * by the broker's sending.
 *
 * Everything input can grow is capped, and what the caps turned away is
 * counted (struct cindex_stats) for the caller to export.  Requests
 * (cancel, reschedule, pause, resume) are not folded here yet: the row's
 * due is the scheduled record's.  Pure code: no I/O, no locks (the
 * console holds one around it).
 */
#ifndef CASCADE_CINDEX_H
#define CASCADE_CINDEX_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "events.h"

/* A message, or a remembered end (CINDEX_F_ENDED). */
struct cindex_entry {
	int64_t due;  /* Unix ms; for an end: when it was folded (its at) */
	int64_t seen; /* x-cascade-at, 0 unknown */
	/* 16 hex digits as a number; with CINDEX_F_ID_TEXT: an arena ref */
	uint64_t cid;
	/* low 48 bits: the stream offset of its scheduled record;
	 * high 16: CINDEX_F_* */
	uint64_t off_flags;
	uint32_t size;   /* body bytes, saturated at UINT32_MAX */
	uint32_t mid;    /* arena ref of the message-id; 0: none */
	uint32_t target; /* index into the target table; end: FIFO prev */
	uint32_t owner;  /* index into the user table; end: FIFO next */
};

#define CINDEX_F_REPEAT (UINT64_C(1) << 48)
#define CINDEX_F_ID_TEXT (UINT64_C(1) << 49)
#define CINDEX_F_ENDED (UINT64_C(1) << 50)
#define CINDEX_F_FREE (UINT64_C(1) << 51)
#define CINDEX_F_MOVED (UINT64_C(1) << 52) /* a reschedule set its due */
#define CINDEX_OFFSET_MASK ((UINT64_C(1) << 48) - 1)

/* Entries per slab: a slab is never moved, so a slot's address holds. */
#define CINDEX_SLAB (1u << 16)

/* What the caps turned away, and what the index holds: for /metrics. */
struct cindex_stats {
	uint64_t records;       /* folded */
	uint64_t waiting;       /* messages held */
	uint64_t ended;         /* ends held whose scheduled is not seen */
	uint64_t ended_evicted; /* ends forgotten: the cap, or the age */
	uint64_t refused;       /* scheduled records not held (caps) */
	uint64_t arena_bytes;   /* in the arena's chunks */
	uint64_t arena_garbage; /* of them, freed and not yet compacted */
	uint64_t compactions;
	uint64_t targets, users; /* distinct ones held */
};

/* An interned string with the number of entries that name it. */
struct cindex_name {
	unsigned char *s; /* [u8 exchange length][exchange][key], or a user */
	uint32_t len;
	uint32_t count; /* 0: the slot is free for reuse */
};

struct cindex_names {
	struct cindex_name *v;
	uint32_t n, cap, max; /* v[0] is the empty name, never freed */
	uint32_t *hash;       /* index + 1; 0 empty */
	uint32_t hcap;
	uint32_t free_head; /* a free index + 1, chained through len */
};

/* Slots a block of the order holds; split when full, merged when small. */
#define CINDEX_BLOCK_MAX 512u

/* A block of the order: slots sorted by (due, seen, id), each slot's due
 * beside it, so that a search within the block reads an entry only when
 * two dues are equal. */
struct cindex_block {
	uint32_t n;
	uint32_t slot[CINDEX_BLOCK_MAX];
	int64_t due[CINDEX_BLOCK_MAX];
};

struct cindex {
	struct cindex_entry **slab;
	uint32_t nslab, slab_cap;
	uint32_t used;      /* slots ever handed out */
	uint32_t free_head; /* a free slot + 1, chained through cid */
	uint32_t max_waiting, max_ended;
	/* the arena: chunks of CINDEX_CHUNK bytes, a ref is chunk << 20 |
	 * offset, 0 is none */
	unsigned char **chunk;
	uint32_t nchunk, chunk_cap, chunk_fill;
	uint64_t compact_min; /* garbage before a compaction is considered */
	/* the hashes: (32 bits of the hash) << 32 | slot + 1, 0 empty;
	 * linear probing */
	uint64_t *id_hash, *mid_hash;
	uint32_t id_cap, mid_cap, id_n, mid_n;
	uint64_t seed;
	/* the order */
	struct cindex_block **block;
	int64_t *block_last; /* each block's last due: the search reads it */
	uint32_t nblock, block_cap;
	/* the ends, oldest first (slot + 1; 0 none) */
	uint32_t end_oldest, end_newest;
	struct cindex_names targets, users;
	struct cindex_stats stats;
};

#define CINDEX_CHUNK (1u << 20)
/* The defaults of cindex_init's caps. */
#define CINDEX_MAX_WAITING (1u << 25)
#define CINDEX_MAX_ENDED (1u << 20)
#define CINDEX_MAX_NAMES (1u << 16)

/*
 * An empty index holding at most max_waiting messages and max_ended
 * ends (0: the defaults above).  -1 out of memory.
 */
int cindex_init(struct cindex *ix, uint32_t max_waiting, uint32_t max_ended);
void cindex_free(struct cindex *ix);

/*
 * One record of P.events, read at stream offset `offset`, into ix:
 * scheduled adds a message (the same cascade id again: the later record
 * wins), delivered / parked / cancelled / duplicate remove it.  An end
 * whose scheduled record has not been read is remembered, so that a
 * scheduled record read later is not listed, exactly as waiting_fold
 * does; at most max_ended are, the oldest forgotten first (counted in
 * ended_evicted), and cindex_prune_ended forgets those older than a time.
 * A scheduled record the caps turn away (max_waiting, CINDEX_MAX_NAMES
 * distinct targets or users live, an id or message-id over 255 bytes) is
 * counted in refused.  Requests and markers are counted only.  -1 out of
 * memory (ix unchanged but for the count).
 */
int cindex_fold_event(struct cindex *ix, const struct event *e,
                      uint64_t offset);

/* Forget the remembered ends folded before `before` (Unix ms). */
void cindex_prune_ended(struct cindex *ix, int64_t before);

/* The counts for /metrics, arena figures current. */
struct cindex_stats cindex_stats(const struct cindex *ix);

/* A message, as a page shows it: views into ix, valid until it changes. */
struct cindex_row {
	uint32_t slot;
	int64_t due, seen, size;
	uint64_t offset;
	int repeat;
	int moved;       /* its due is a reschedule's (cindex_move) */
	amqp_bytes_t id; /* in id_text when it is 16 hex digits */
	amqp_bytes_t message_id, exchange, routing_key, owner;
	char id_text[17];
};

/* The row of slot (from a page or cindex_named). */
void cindex_row(const struct cindex *ix, uint32_t slot, struct cindex_row *r);

/*
 * Give the message in slot the due time a reschedule set, keeping the
 * order (due, first seen, id) true: a page shows it where it now waits.
 * -1 out of memory (the entry is then at its old place).
 */
int cindex_move(struct cindex *ix, uint32_t slot, int64_t due);

/* Messages waiting, in all. */
uint32_t cindex_count(const struct cindex *ix);

/* How many messages are due before t (Unix ms). */
uint32_t cindex_rank(const struct cindex *ix, int64_t t);

/*
 * A search.  An unset bound is INT64_MIN / INT64_MAX; a NULL string
 * matches everything.  owner is x-cascade-user-id as the record carries
 * it ("" for messages published without one): the console sets it to the
 * session's user for a user who is not a control user, who sees only
 * their own.  target is EXCHANGE[/KEY] as waiting_match reads it.  prefix
 * matches the start of the cascade id or of the message-id.
 */
struct cindex_query {
	int64_t due_after, due_before; /* due_after <= due < due_before */
	const char *owner;
	const char *target;
	const char *prefix;
};

void cindex_query_init(struct cindex_query *q);

/*
 * The messages matching q in due order (due, first seen, id: the order
 * of waiting_select), from the offset-th on, at most limit of them, into
 * slots; how many there are in *n, and how many match in all in *total.
 * With only due bounds it costs a few binary searches; an owner, target
 * or prefix is a walk over the range.  -1 out of memory.
 */
int cindex_page(const struct cindex *ix, const struct cindex_query *q,
                uint32_t offset, uint32_t limit, uint32_t *slots, uint32_t *n,
                uint32_t *total);

/*
 * The messages id names, as cascade id or message-id, into slots (at
 * most max); how many there are (more than max when more).
 */
uint32_t cindex_named(const struct cindex *ix, amqp_bytes_t id, uint32_t *slots,
                      uint32_t max);

/* The waiting message whose cascade id is id (its slot), or -1. */
int64_t cindex_find(const struct cindex *ix, amqp_bytes_t id);

/* Counts by due window from now, for the Waiting page's histogram. */
struct cindex_histogram {
	uint32_t late;     /* due before now */
	uint32_t hour[60]; /* minute i from now */
	uint32_t day[24];  /* hour i from now */
	uint32_t week[7];  /* day i from now */
	uint32_t later;    /* a week or more from now */
};

/*
 * The histogram of the messages matching q (NULL: all) at now.  Without a
 * q or with due bounds only, 93 rank queries; else one walk.
 */
void cindex_histogram(const struct cindex *ix, const struct cindex_query *q,
                      int64_t now, struct cindex_histogram *h);

/*
 * How many messages matching q (NULL: all) are due in each of the n + 1
 * windows that the ascending times edges[0..n) cut: counts[0] those due
 * before edges[0], counts[k] those due at edges[k - 1] or later and
 * before edges[k], counts[n] those due at edges[n - 1] or later.  With
 * due bounds only, rank queries; else one walk.  -1 out of memory
 * (counts zero).
 */
int cindex_windows(const struct cindex *ix, const struct cindex_query *q,
                   const int64_t *edges, size_t n, uint32_t *counts);

/*
 * cindex_page from the first match (at most limit into slots, how many in
 * *n, all that match in *total) and cindex_windows of the same query (n
 * edges) at once: with an owner, target or prefix, one walk instead of
 * two.  -1 out of memory.
 */
int cindex_page_windows(const struct cindex *ix, const struct cindex_query *q,
                        uint32_t limit, uint32_t *slots, uint32_t *n,
                        uint32_t *total, const int64_t *edges, size_t nedges,
                        uint32_t *counts);

#endif
