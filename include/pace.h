/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pacing a target: at most so many deliveries a second to one exchange (any
 * routing key) or one exchange and routing key, across every daemon that
 * runs, as [target EXCHANGE[/KEY]] pace = 200/s in the config says.  A
 * delivery over the pace is not dropped: it waits for a later slot, and
 * deliveries go out in the order they came due.  Pure code: no sockets, no
 * clock; times are arguments, in Unix ms.
 *
 * How the cap is shared.  The daemons do not talk to each other about
 * slots: each takes pace/D, D being the number of daemons that wrote a
 * marker into the shared stream within the last PACE_PEER_TTL_MS (5
 * minutes), itself included.  Every daemon writes a marker every 2 minutes
 * and at each connect, so a daemon that starts is counted at once by all
 * (each share shrinks before it delivers much), and one that stops is
 * counted for up to 5 minutes more, during which the others deliver less
 * than the pace, never more.  The caller feeds the markers it reads to
 * pace_peer_seen and asks pace_peers for D before each slot.
 *
 * How exact it is.  A daemon's slots for a target are spaced exactly
 * 1000 * D / pace ms apart (the fraction of a millisecond is kept, so fast
 * paces do not drift), and a delivery goes out at its slot give or take the
 * daemon's hold timer.  With D daemons the total is the sum of D shares,
 * which is the pace while every daemon has deliveries waiting, and less
 * when some have none (an idle daemon's share is not lent to the others).
 * When D changes, the shares follow within a marker period.  A target that
 * has been idle starts again from the delivery at hand: it earns no burst
 * beyond one slot (a token bucket of depth 1).
 */
#ifndef CASCADE_PACE_H
#define CASCADE_PACE_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#define PACE_TARGETS_MAX 64 /* [target ...] sections with a pace */
#define PACE_PEERS_MAX 256  /* daemons remembered */
/* A daemon not heard from for this long is gone. */
#define PACE_PEER_TTL_MS 300000
#define PACE_RATE_MAX 100000.0 /* per second */
#define PACE_TOKEN_MAX 64      /* bytes of a daemon's marker token */

struct pace_target {
	char exchange[256];
	uint8_t exchange_len;
	char routing_key[256];
	uint8_t routing_key_len;
	int any_key;  /* no /KEY: every routing key of the exchange */
	double per_s; /* the pace, deliveries a second, for all daemons */
	/*
	 * The next free slot, Unix ms: next_free whole ms plus next_frac, in
	 * [0, 1), so that spacings below a millisecond add up exactly.  0: no
	 * slot handed out yet.
	 */
	int64_t next_free;
	double next_frac;
	uint64_t paced_total;     /* deliveries given a later slot than asked */
	uint64_t delivered_total; /* slots handed out */
};

/* A daemon heard from: its marker token and when it was last read. */
struct pace_peer {
	char token[PACE_TOKEN_MAX];
	uint8_t token_len;
	int64_t heard; /* Unix ms */
};

/* No pointers inside: a struct pace may be copied (struct config holds one). */
struct pace {
	struct pace_target t[PACE_TARGETS_MAX];
	size_t n;
	struct pace_peer peers[PACE_PEERS_MAX];
	size_t npeers;
};

/* No targets, no peers. */
void pace_init(struct pace *p);

/*
 * "200/s", "30/m", "5/h", "0.5/s" (blanks around the slash allowed): the
 * rate per second, in (0, PACE_RATE_MAX] and at least 1/h.  0, or -1 with
 * *why.
 */
int pace_parse_rate(const char *s, double *per_s, const char **why);

/*
 * A rate as the config would write it: "200/s", "30/m", "5/h" (the first
 * unit that makes it a whole number), else "0.123457/s".
 */
void pace_format_rate(double per_s, char *out, size_t size);

/*
 * Add target "EXCHANGE[/KEY]" (target[0..len), split at the first '/':
 * "/q" is the default exchange with routing key q, "ex/a/b" exchange ex
 * with key a/b, "ex" every key of ex) paced at per_s.  0, or -1 with *why:
 * too many targets, an exchange or key longer than 255 bytes, or the same
 * target given twice.
 */
int pace_add(struct pace *p, const char *target, size_t len, double per_s,
             const char **why);

/*
 * The pace for a delivery to exchange/routing_key: an exact exchange and
 * key entry first, else the exchange's any-key entry; NULL when not paced.
 */
struct pace_target *pace_find(struct pace *p, amqp_bytes_t exchange,
                              amqp_bytes_t routing_key);

/*
 * Reserve the next slot for a delivery due at or before now, with daemons
 * daemons sharing the pace (each gets per_s / daemons; 0 counts as 1).
 * Returns the slot's time, never before now: the next free slot, or now if
 * that has passed (the target was idle: no credit is kept beyond the one
 * slot).  The slot after it is 1000 * daemons / per_s ms later.  Counts
 * delivered_total, and paced_total when the slot is later than now.
 */
int64_t pace_slot(struct pace_target *t, int64_t now, unsigned daemons);

/*
 * A daemon's marker token (e.g. "daemon-1234-ab12cd34ef56aa00") read at
 * `at`: remember it, or when it was heard if it is known (a new token takes
 * a free entry, or the oldest one's when full).  Tokens not starting with
 * "daemon-", or longer than PACE_TOKEN_MAX bytes, are ignored.
 */
void pace_peer_seen(struct pace *p, amqp_bytes_t token, int64_t at);

/* Was the daemon whose marker token this is heard from within
 * PACE_PEER_TTL_MS before now? */
int pace_peer_live(const struct pace *p, amqp_bytes_t token, int64_t now);

/*
 * How many daemons were heard from within PACE_PEER_TTL_MS before now,
 * counting own (the caller's token), which is always counted, once,
 * whether heard or not.  At least 1.
 */
unsigned pace_peers(const struct pace *p, amqp_bytes_t own, int64_t now);

#endif
