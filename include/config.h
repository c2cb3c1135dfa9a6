/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration file: one table of every key with its type, default and
 * bounds (CONFIG_KEYS below) generates the struct, the defaults, the parser
 * and the dump.  Parsing is pure apart from reading the file.  The
 * sections named by the user's queues and targets, [retry.QUEUE] and
 * [target EXCHANGE[/KEY]], are read by hand (config.c) into tables.
 */
#ifndef CASCADE_CONFIG_H
#define CASCADE_CONFIG_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "ladder.h"
#include "pace.h"
#include "retry.h"

#define CONFIG_STR_MAX 1024

/* ENUM keys hold the index of their value in the key's choices. */
enum queue_type {
	QUEUE_TYPE_QUORUM,
	QUEUE_TYPE_CLASSIC,
};

enum tls_verify {
	TLS_VERIFY_YES,
	TLS_VERIFY_NO,
};

enum log_format {
	LOG_FORMAT_TEXT,
	LOG_FORMAT_JSON,
};

/* [topology] mode: how messages wait (docs/CONTRACT.md section 6). */
enum wait_mode {
	WAIT_LADDER, /* the ladder of delay queues, on every broker */
	WAIT_NATIVE, /* RabbitMQ 4.3's delayed return for the last stretch */
	WAIT_AUTO,   /* native where the broker proves it, else the ladder */
};

enum tail_mode {
	TAIL_HOLD,     /* keep the sub-resolution tail in memory on a timer */
	TAIL_ROUND_UP, /* send it round the shortest queue once more */
};

/*
 * X(section, name, kind, default, min, max, choices, help)
 * kind: STR (text), DUR (duration in ms, unit required), UINT, ENUM (one of
 * the "|"-separated choices, stored as its index).  min and max bound
 * numbers and durations; for STR, max is the length limit.
 */
#define CONFIG_KEYS(X)                                                         \
	X(broker, url, STR, "amqp://guest:guest@127.0.0.1:5672/%2f", 1,        \
	  CONFIG_STR_MAX - 1, NULL,                                            \
	  "AMQP URL, amqps:// for TLS; several (a cluster's nodes), apart by " \
	  "blanks or commas, are tried in turn")                               \
	X(broker, password_file, STR, "", 0, CONFIG_STR_MAX - 1, NULL,         \
	  "file whose first line is the password; replaces the URL's")         \
	X(broker, tls_ca_file, STR, "", 0, CONFIG_STR_MAX - 1, NULL,           \
	  "amqps://: CA certificates (PEM) to verify the broker with")         \
	X(broker, tls_cert_file, STR, "", 0, CONFIG_STR_MAX - 1, NULL,         \
	  "amqps://: client certificate (PEM)")                                \
	X(broker, tls_key_file, STR, "", 0, CONFIG_STR_MAX - 1, NULL,          \
	  "amqps://: client private key (PEM)")                                \
	X(broker, tls_verify, ENUM, "yes", 0, 0, "yes|no",                     \
	  "amqps://: check the broker's certificate and host name")            \
	X(broker, heartbeat, DUR, "30s", 0, 65535000LL, NULL,                  \
	  "AMQP heartbeat; 0s turns it off")                                   \
	X(broker, reconnect_max, DUR, "30s", 100, 3600000LL, NULL,             \
	  "longest wait between two reconnect attempts")                       \
	X(topology, prefix, STR, "cascade", 1, 200, NULL,                      \
	  "name of the exchange and prefix of every queue")                    \
	X(topology, queue_type, ENUM, "quorum", 0, 0, "quorum|classic",        \
	  "type of every queue cascade declares")                              \
	X(topology, resolution, DUR, "2s", 1, 315360000000LL, NULL,            \
	  "TTL of the shortest delay queue")                                   \
	X(topology, factor, UINT, "2", 2, 1000, NULL,                          \
	  "each level's TTL is this many times the one below")                 \
	X(topology, levels, UINT, "0", 0, 64, NULL,                            \
	  "number of delay queues; 0: enough to reach [router] max_delay")     \
	X(topology, max_length, UINT, "1000000", 1, 2147483647LL, NULL,        \
	  "x-max-length of each delay queue")                                  \
	X(topology, shards, UINT, "1", 1, LADDER_MAX_SHARDS, NULL,             \
	  "independent copies of the ladder and return queue; 1: the "         \
	  "unsharded names")                                                   \
	X(topology, consume_shards, STR, "", 0, 255, NULL,                     \
	  "shards whose return queue this daemon consumes (e.g. 0-3, 7); "     \
	  "empty: every shard")                                                \
	X(topology, drain_shards, UINT, "0", 0, LADDER_MAX_SHARDS, NULL,       \
	  "shards of a former layout whose return queues are still "           \
	  "consumed, their messages moved into this one; 0: none")             \
	X(topology, mode, ENUM, "auto", 0, 0, "ladder|native|auto",            \
	  "how messages wait: the ladder of delay queues; native: their last " \
	  "native_window in a RabbitMQ 4.3 holding queue; auto: native when "  \
	  "the broker proves it can")                                          \
	X(topology, native_window, DUR, "10m", 1, 315360000000LL, NULL,        \
	  "native: the delay left from which a message waits in a holding "    \
	  "queue; longer delays ride the ladder until then")                   \
	X(router, prefetch, UINT, "1000", 1, 65535, NULL,                      \
	  "unacked deliveries per consumed queue")                             \
	X(router, max_delay, DUR, "365d", 0, 315360000000LL, NULL,             \
	  "longer delays are parked in the error queue")                       \
	X(router, default_target_exchange, STR, "", 0, 255, NULL,              \
	  "where messages without x-target-exchange go")                       \
	X(router, tail, ENUM, "hold", 0, 0, "hold|round-up",                   \
	  "below one resolution step: hold in memory, or round up")            \
	X(router, tail_margin, DUR, "250ms", 0, 3600000LL, NULL,               \
	  "tail = hold: the last broker hop aims this early; held from there") \
	X(router, reorder_window, DUR, "15s", 0, 300000LL, NULL,               \
	  "deliveries back from the ladder over 1 s late wait as long as "     \
	  "they are late, up to this long, and leave in due order; 0s: none "  \
	  "waits")                                                             \
	X(router, allowed_targets, STR, "*", 0, CONFIG_STR_MAX - 1, NULL,      \
	  "exchange-name patterns cascade may deliver to (, or space apart)")  \
	X(router, accept_unsigned_until, STR, "", 0, 63, NULL,                 \
	  "until this time (ISO 8601 or Unix ms), take back from the return "  \
	  "and holding queues messages without a user-id, as cascade before "  \
	  "this version published them; empty: never")                         \
	X(router, stop_timeout, DUR, "10s", 0, 3600000LL, NULL,                \
	  "how long SIGTERM waits for outstanding confirms")                   \
	X(router, target_backoff_max, DUR, "1m", 1, 86400000LL, NULL,          \
	  "a target that refuses deliveries backs off, doubling up to this")   \
	X(router, refused_park_after, DUR, "0s", 0, 315360000000LL, NULL,      \
	  "park a message its target refused this long; 0s: retry forever")    \
	X(router, max_redeliveries, UINT, "10", 1, 1000000, NULL,              \
	  "park a message redelivered this many times without being settled")  \
	X(events, enabled, ENUM, "yes", 0, 0, "yes|no",                        \
	  "record what waits in P.events and honour P.cancels: cascade-ctl "   \
	  "list and cancel, x-cascade-cancel")                                 \
	X(events, max_age, DUR, "0s", 0, 315360000000LL, NULL,                 \
	  "how long the event streams keep records; 0s: max_delay plus a day") \
	X(events, control_users, STR, "", 0, CONFIG_STR_MAX - 1, NULL,         \
	  "users whose requests may change any message (, or space apart); "   \
	  "empty: [broker] url's user")                                        \
	X(events, copy_max_size, UINT, "65536", 0, 1048576, NULL,              \
	  "bytes: a scheduled record carries a message up to this size, for "  \
	  "an earlier reschedule to the millisecond; 0: no copies")            \
	X(events, max_held_ids, UINT, "1000000", 1, 100000000, NULL,           \
	  "ids held in memory (requests, claims, series); past it new ones "   \
	  "are refused, claims and series first")                              \
	X(events, series_window, DUR, "1d", 3600000LL, 2592000000LL, NULL,     \
	  "how long P.series keeps repeats' records; a daemon writes a "       \
	  "series' record again when a quarter of it has passed")              \
	X(console, listen, STR, "127.0.0.1:8080", 1, 255, NULL,                \
	  "cascade-console: HOST:PORT it serves on; off loopback only "        \
	  "with an https public_url")                                          \
	X(console, public_url, STR, "", 0, 255, NULL,                          \
	  "cascade-console: its address as browsers reach it behind a "        \
	  "proxy (https://host); empty: the listen address")                   \
	X(console, session_idle, DUR, "30m", 1000, 86400000LL, NULL,           \
	  "cascade-console: a session unused this long ends")                  \
	X(console, session_max, DUR, "8h", 1000, 604800000LL, NULL,            \
	  "cascade-console: a session ends this long after its login")         \
	X(console, max_sessions, UINT, "64", 1, 4096, NULL,                    \
	  "cascade-console: sessions at once (each a broker connection)")      \
	X(console, trusted_proxies, STR, "", 0, CONFIG_STR_MAX - 1, NULL,      \
	  "cascade-console: the IP addresses of proxies in front of it (, or " \
	  "space apart), whose X-Forwarded-For names the client for the "      \
	  "login limits; empty: the peer is the client")                       \
	X(console, max_waiting, UINT, "33554432", 1000, 1000000000, NULL,      \
	  "cascade-console: messages its index holds at most (about 90 "       \
	  "bytes each); past it records are refused, counted in /health")      \
	X(console, metrics, STR, "", 0, CONFIG_STR_MAX - 1, NULL,              \
	  "cascade-console: the daemons' [metrics] listen addresses for "      \
	  "the Health page (, or space apart); empty: [metrics] listen")       \
	X(metrics, listen, STR, "127.0.0.1:9464", 0, 255, NULL,                \
	  "HOST:PORT for /metrics and /healthz; empty turns them off")         \
	X(log, level, ENUM, "info", 0, 0,                                      \
	  "debug|info|warn|error" /* enum log_level's order */,                \
	  "lowest level logged")                                               \
	X(log, format, ENUM, "text", 0, 0, "text|json",                        \
	  "text: key=value; json: one object per line")

#define CONFIG_FIELD_STR char
#define CONFIG_FIELD_DUR int64_t
#define CONFIG_FIELD_UINT uint64_t
#define CONFIG_FIELD_ENUM int
#define CONFIG_ARRAY_STR [CONFIG_STR_MAX]
#define CONFIG_ARRAY_DUR
#define CONFIG_ARRAY_UINT
#define CONFIG_ARRAY_ENUM

struct config {
	char path[CONFIG_STR_MAX];
#define CONFIG_DECLARE(sec, name, kind, def, lo, hi, choices, help)            \
	CONFIG_FIELD_##kind sec##_##name CONFIG_ARRAY_##kind;                  \
	int sec##_##name##_line;
	CONFIG_KEYS(CONFIG_DECLARE)
#undef CONFIG_DECLARE
	/* [retry] and [retry.QUEUE]: sections named by the user's queues */
	struct retry_table retry;
	/*
	 * [target EXCHANGE[/KEY]] pace = RATE: the paced targets, in the
	 * file's order, with no slot handed out and no peer heard; pace_line[i]
	 * is the line of target i's section header.  A daemon copies it to
	 * hand out slots (struct pace holds no pointers).
	 */
	struct pace pace;
	int pace_line[PACE_TARGETS_MAX];
	/*
	 * The broker password from CASCADE_BROKER_PASSWORD or, failing that,
	 * [broker] password_file, when either is set; it replaces the URL's.
	 */
	char broker_password[CONFIG_STR_MAX];
	int broker_password_set;
};

/* Fill cfg with every default. */
void config_defaults(struct config *cfg);

/*
 * Read path into cfg (defaults first), apply CASCADE_BROKER_URL, and check
 * every value and the ladder as a whole.  On error returns -1 with every
 * problem, one per line as "FILE:LINE: section.key: why", in err.
 */
int config_load(struct config *cfg, const char *path, char *err,
                size_t errsize);

/* Same, from a string (tests); name stands for the file in messages. */
int config_load_string(struct config *cfg, const char *name, const char *text,
                       char *err, size_t errsize);

/*
 * Is exchange allowed by the patterns of [router] allowed_targets?  Patterns
 * are shell globs (fnmatch); the default exchange "" is named amq.default.
 */
int config_target_allowed(const struct config *cfg, const char *exchange,
                          size_t len);

/*
 * The i-th URL of [broker] url (0-based) into out; -1 past the last.
 * config_load has checked that there is at least one and each parses.
 */
int config_broker_url(const struct config *cfg, unsigned i, char *out,
                      size_t size);

/* How many URLs [broker] url holds. */
unsigned config_broker_url_count(const struct config *cfg);

/*
 * Does this daemon consume shard s's return queue ([topology]
 * consume_shards)?  config_load has checked the list.
 */
int config_shard_consumed(const struct config *cfg, unsigned s);

/*
 * The ladder's levels: [topology] levels, or when it is 0 (the default)
 * as many as reach [router] max_delay: the top TTL is the largest
 * resolution * factor^k not above it (at least one level, at most 64).
 */
unsigned config_levels(const struct config *cfg);

/* [events] enabled = yes. */
int config_events(const struct config *cfg);

/*
 * The user cascade logs in as: the first [broker] url's ("guest" when it
 * names none).  Into out; 0, or -1 when the URL does not parse.
 */
int config_broker_user(const struct config *cfg, char *out, size_t size);
/* The same of one URL. */
int config_url_user(const char *url, char *out, size_t size);

/*
 * Is user one of [events] control_users (by default the broker user), whose
 * requests may change every waiting message?
 */
int config_control_user(const struct config *cfg, amqp_bytes_t user);

/*
 * [router] accept_unsigned_until in Unix ms; 0 when empty (or, for a
 * config not checked, malformed).
 */
int64_t config_unsigned_until(const struct config *cfg);

/*
 * How many ids a daemon may hold from P.cancels ([events] max_held_ids)
 * before a new one of a kind is refused: a request (cancel, reschedule;
 * request nonzero) up to the cap, a claim or a series up to nine tenths of
 * it, leaving the rest to requests, which keep a message from being
 * delivered.
 */
size_t config_held_limit(const struct config *cfg, int request);

/* How long the event streams keep records: [events] max_age, or by
 * default [router] max_delay plus a day (every waiting message's record). */
int64_t config_events_max_age(const struct config *cfg);

/* Broker URL(s) with every password replaced by "***", for logs. */
void config_mask_url(const char *url, char *out, size_t size);

#endif
