/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cascade-ctl's private declarations: the broker session every command
 * shares (session.c, stream.c, over the library's client.h), the command
 * table's entry (main.c), each command's entry points, and the output
 * helpers (format.c).
 *
 * Everything cascade-ctl learns comes from the broker (passive
 * queue.declare, basic.get, and the streams P.events, P.cancels and, for
 * a reschedule's copies, P.copies; status
 * also asks the daemon's /metrics and the management API for one
 * setting): it works whether the daemon runs or not.  list and cancel ask
 * a cascade-console on this machine first, when one runs (console.c).
 */
#ifndef CASCADE_CTL_H
#define CASCADE_CTL_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "client.h"
#include "config.h"
#include "ctlwire.h"
#include "events.h"
#include "ladder.h"
#include "park.h"
#include "topology.h"
#include "waiting.h"

#define PROG "cascade-ctl"
#define ERRORS_LIMIT 100 /* messages `errors` shows by default */
#define WORN 10          /* x-delivery-count worth a warning: see client_get */
#define KEY_MAX CLIENT_KEY_MAX

/*
 * The session: the configuration read, the topology it names, and one
 * connection (client.h), for one command.  Each command keeps its own
 * options in its own file.
 */
struct ctl {
	struct config cfg;
	struct ladder ladder;
	struct topology topo;
	int64_t now;      /* Unix ms, read once at start */
	struct client cl; /* its err says why a command failed */
	/* list, cancel: --from-stream, never a console's index */
	int from_stream;
	/* The last reading of P.events (stream_fold): how long, how many
	 * records; and why a console reached did not answer ("" none). */
	int64_t stream_ms;
	uint64_t stream_records;
	char console_why[256];
};

/* One queue as a passive declare saw it. */
struct qinfo {
	const char *name;
	int64_t ttl; /* delay levels only, else -1 */
	int shard;   /* a shard's delay or return queue, else -1 */
	int missing;
	uint32_t messages, consumers;
};

/*
 * The command grammar, as data.  A command names the options it takes;
 * main.c parses the command line once against every command's options,
 * then hands each one given to the command's option function, or refuses
 * it as not valid for this command.
 */
struct ctl_option {
	const char *name; /* long name, without "--" */
	int letter;       /* short option, or 0 */
	int has_arg;      /* getopt's no_argument / required_argument */
};

struct ctl_command {
	const char *name;
	const struct ctl_option *options; /* ends with a NULL name */
	/* One option of ours: 0, or -1 having said why (exit status 2). */
	int (*option)(struct ctl *c, const char *name, const char *arg);
	/* The operands after the command: 0, or -1 having said why (2),
	 * CTL_USAGE when the synopsis should follow.  NULL: the command
	 * takes none. */
	int (*operands)(int n, char **v);
	/* The command, connected: 0, a command's own status >0, or -1 with
	 * c->err. */
	int (*run)(struct ctl *c);
	int error_status; /* on an error; 2 for cancel, where 1 says more */
	int broker;       /* 1: run connected; 0: the config alone (health) */
};

/* Each command: status.c, errors.c, requeue.c, list.c, cancel.c. */
extern const struct ctl_option status_options[], errors_options[],
    requeue_options[], list_options[], cancel_options[], reschedule_options[],
    pause_options[], health_options[];
int health_option(struct ctl *c, const char *name, const char *arg);
int health_run(struct ctl *c);
int pause_option(struct ctl *c, const char *name, const char *arg);
int pause_operands(int n, char **v);
int resume_operands(int n, char **v);
int pause_run(struct ctl *c);
int resume_run(struct ctl *c);
int status_option(struct ctl *c, const char *name, const char *arg);
int errors_option(struct ctl *c, const char *name, const char *arg);
int requeue_option(struct ctl *c, const char *name, const char *arg);
int list_option(struct ctl *c, const char *name, const char *arg);
int cancel_option(struct ctl *c, const char *name, const char *arg);
int reschedule_option(struct ctl *c, const char *name, const char *arg);
int reschedule_operands(int n, char **v);
int reschedule_run(struct ctl *c);
int cancel_operands(int n, char **v);
int status_run(struct ctl *c);
int errors_run(struct ctl *c);
int requeue_run(struct ctl *c);
int list_run(struct ctl *c);
int cancel_run(struct ctl *c);

/* An operands function's "wrong, and main.c prints the synopsis". */
#define CTL_USAGE (-2)

/* args.c: --limit N, a positive integer; -1 having said why. */
int ctl_parse_limit(const char *s, uint64_t *out);
/* args.c: ids given to cmd, each 1 to 255 bytes (what: "a message-id");
 * -1 having said why. */
int ctl_check_ids(const char *cmd, int n, char **v, const char *what);

/*
 * session.c: the broker session.
 */

/*
 * Read the config (path, or NULL: the defaults and the environment), name
 * the topology and connect (client_open).  -1 having said why on stderr.
 */
int session_open(struct ctl *c, const char *path);
/* The config and topology alone, for a command that needs no broker;
 * session_close after it too. */
int session_config(struct ctl *c, const char *path);
/* A clean close: the broker has handled every ack and nack first. */
void session_close(struct ctl *c);
/* client_inspect of q->name on ch into q; -1 with c->cl.err. */
int session_inspect(struct ctl *c, amqp_channel_t ch, struct qinfo *q);
/* client_give_back, its warning on stderr.  -1 with c->cl.err. */
int session_give_back(struct ctl *c, uint64_t tag, uint64_t held);
/*
 * A fold of P.events that judges requests as the daemons do (requests.h):
 * by the config's control_users and the broker user ctl logs in as.
 */
void session_fold_init(struct ctl *c, struct waiting_fold *f);

/*
 * stream.c: reading P.events and P.copies.
 */

/*
 * Fold P.events from its first record up to a marker written (and
 * confirmed) first: what the stream held at one moment.  A message the
 * AMQP library cannot decode costs the connection: it is connected again
 * and reads on past it, and says so on stderr.  How long it took in
 * c->stream_ms.  -1 with c->cl.err.
 */
int stream_fold(struct ctl *c, struct waiting_fold *f);

/*
 * After stream_fold, for a reschedule of ids to due: the copies it needs
 * (waiting_copyless) that the scheduled records did not carry, from
 * P.copies, read from a minute before the earliest of those messages was
 * first seen up to a marker.  None needed, or no P.copies (a cascade
 * before it kept the copies in P.events): 0 at once.  -1 with c->cl.err.
 */
int stream_fold_copies(struct ctl *c, struct waiting_fold *f, char **ids,
                       int nids, int64_t due);

/*
 * console.c: list's and cancel's answers from a running cascade-console
 * (docs/CONTRACT.md 7.11), asked at [console] listen when that is this
 * machine; -1 whenever it does not answer in full, and the caller reads
 * the stream instead, as without one.
 */

/* A list answer: its rows point into text. */
struct console_answer {
	struct ctlwire_list list;
	char *text;
};

/* list's rows that pass flt, at most limit of them (0: all); 0 with a,
 * to free with console_answer_free, or -1. */
int console_list(struct ctl *c, const struct waiting_filter *flt,
                 uint64_t limit, struct console_answer *a);
void console_answer_free(struct console_answer *a);
/* For each of ids[0..n): how many waiting messages it names and the
 * latest due time among them, as waiting_count_id counts.  0, or -1. */
int console_count(struct ctl *c, char **ids, int n, uint64_t *count,
                  int64_t *last_due);
/* After a reading of P.events of over CONSOLE_HINT_MS: a line on stderr
 * on how long it took, and that a console would answer at once. */
#define CONSOLE_HINT_MS 5000
void console_hint(const struct ctl *c);

/*
 * format.c: output helpers.
 */

#define NAME_TEXT (KEY_MAX * 4 + 8)      /* an id or key, printable */
#define TARGET_TEXT (NAME_TEXT * 2 + 16) /* exchange/key */

/* b for a terminal column: control bytes and backslashes escaped. */
void format_name(amqp_bytes_t b, char *out, size_t size);
/* "exchange/key", the default exchange as amq.default (as --target). */
void format_target(const struct waiting *w, char *out, size_t size);
/* A repeat's schedule for a column: every 1h, or cron "0 9 * * 1-5". */
void format_schedule(const struct waiting *w, char *out, size_t size);
/*
 * A row's "repeat" as a JSON member to stdout, after a comma: null for a
 * plain message, else {"every_ms", "cron", "tz", "occurrence", "paused"}
 * (every_ms null for a cron series, cron and tz null when not set).
 */
void format_json_repeat(const struct waiting *w);
/*
 * A time as two JSON members to stdout, after a comma:
 * ,"KEY":"2026-11-23T09:00:00.000Z","KEY_ms":MS, or both null when the
 * time is not present.
 */
void format_json_time(const char *key, int present, int64_t ms);

/*
 * dlx.c: the broker's dead-letter re-send timeout, from the management
 * API at url (--management; NULL: CASCADE_MANAGEMENT_URL, else the broker
 * URL's host).  0 with *ms, or -1 with why in a few words.
 */
int dlx_confirm_timeout(const struct ctl *c, const char *url, int64_t *ms,
                        char *why, size_t whysize);

#endif
