/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cascade-bench's private declarations: the options every part reads
 * (main.c fills them), the body each message carries, and each file's
 * entry points.
 *
 *   main.c     the command line and the dispatch
 *   run.c      `run`: publish, consume the target, report
 *   fill.c     `fill`: publish N messages due hours to days later, with
 *              message-ids, for owners and targets; consume nothing
 *   forward.c  `forward`: the plain forwarder of mode forward
 *   records.c  `records`: P.series filled as a long repeat leaves it,
 *              or P.events as daemons leave it with N messages waiting
 *   queues.c   the queues both declare: the target, the TTL chains
 *   proc.c     CPU and RSS from /proc, finding beam.smp
 *   stats.c    the delay distributions, percentiles, the plot
 *   ids.c      `ids`: the memory a daemon spends per id it holds
 *   cindex.c   `cindex`: the console's index, its memory and its speed
 */
#ifndef CASCADE_BENCH_H
#define CASCADE_BENCH_H

#include "amqp_compat.h"
#include <stdint.h>

#include "config.h"

#define CH_PUB 1
#define CH_SUB 2
/* Unconfirmed publishes; at most BROKER_CONFIRM_WINDOW. */
#define WINDOW 2000

enum mode {
	MODE_CASCADE, /* publish to the cascade exchange */
	MODE_FORWARD, /* publish to fwd.in; `forward` moves the messages */
	MODE_DLX,     /* publish into a chain of TTL queues, no consumer */
};

enum { DIST_FIXED_OR_RANGE, DIST_UNIFORM, DIST_LOGUNIFORM };

struct opts {
	enum mode mode;
	const char *prefix;
	const char *target;
	const char *target_type; /* quorum (default) or classic */
	const char *json;
	const char *stream;  /* records: series or cancels */
	const char *kind;    /* records: scheduled (P.events); NULL: stream */
	unsigned copy_bytes; /* records --kind scheduled: each copy's size */
	double delivered;    /* records --kind scheduled: fraction ended */
	const char *plot;
	uint64_t count;
	double rate; /* messages/s; 0: as fast as confirms allow */
	int64_t delay_lo, delay_hi;
	int dist;      /* DIST_FIXED_OR_RANGE, DIST_UNIFORM, DIST_LOGUNIFORM */
	uint64_t seed; /* --dist's generator */
	int64_t at_ms; /* --at: every message due at the start + this, ms
	                  (x-deliver-at); -1: --delay or --dist */
	unsigned hops; /* hops per message, for hops/s */
	unsigned size;
	int64_t unit; /* TTL of the shortest queue of the chains, ms */
	long mover_pid, broker_pid;
	int64_t idle_ms;       /* give up when nothing arrives for this long */
	const char *lateness;  /* run: each arrival's lateness, ms, a line */
	const char *arrivals;  /* run: each arrival's sent, due, arrival ms */
	int64_t deadline_ms;   /* run: stop publishing after this; 0: never */
	int64_t reconnect_ms;  /* run: connect again for up to this; 0: no */
	unsigned targets;      /* fill: target queues Q.t0 .. Q.t{T-1} */
	int target_set;        /* -q given (fill: Q; default bench) */
	const char *owner_tag; /* fill: message-ids' first part */
	struct config cfg;
};

/* The head of every body: lateness is measured on arrival from it. */
struct payload {
	uint64_t id;
	int64_t due_us;
};

/* run.c */
int run_measure(const struct opts *o);

/* fill.c */
int fill_run(const struct opts *o);

/* ids.c */
int ids_main(int argc, char *argv[]);
int cron_main(int argc, char *argv[]);

/* cindex.c */
int cindex_main(int argc, char *argv[]);

/* forward.c */
int forward_run(const struct opts *o);

/* records.c */
int records_write(const struct opts *o);

/* queues.c */
int queues_check(amqp_connection_state_t conn, const char *what);
void queues_declare(amqp_connection_state_t conn, const char *name,
                    const char *type);
void queues_declare_chain(amqp_connection_state_t conn, const char *base,
                          unsigned hops, int64_t unit, const char *target,
                          int chain);

/* proc.c */
double proc_cpu(long pid);
long proc_rss_kib(long pid);
long proc_find_beam(void);

/* stats.c */
/* splitmix64's step: x mixed into a well-spread 64-bit value. */
uint64_t stats_mix64(uint64_t x);
int stats_parse_dist(struct opts *o, const char *arg);
int64_t stats_draw_delay(const struct opts *o, uint64_t *state);
void stats_sort(int64_t *v, uint64_t n);
double stats_percentile(const int64_t *v, uint64_t n, double p);
void stats_plot(const char *file, const int64_t *v, uint64_t n);

#endif
