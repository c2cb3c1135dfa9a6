/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cascade-console: a browser console and JSON API over what waits
 * (docs/CONTRACT.md 7.11, docs/console-design.md).  One reader thread
 * follows P.events into an index (cindex.h) and the requests in force
 * (requests.h); libmicrohttpd answers each HTTP connection on a thread of
 * its own, reading the index under one lock, and acts on the broker
 * through the logged-in user's own connection.
 *
 * Files: main.c (options, start, stop), reader.c (the stream), web.c
 * (HTTP, the gate), web_routes.c (the routes), web_login.c (sessions,
 * login; web_int.h is what the three web files share), page.c (the layout,
 * rows as HTML and JSON), waiting.c, waiting_message.c (one message),
 * series.c, parked.c, health.c (the pages), act.c (the actions), fetch.c
 * (a record's copy read again by offset), ctl.c (cascade-ctl's
 * questions).
 */
#ifndef CASCADE_CONSOLE_H
#define CASCADE_CONSOLE_H

#include "amqp_compat.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cindex.h"
#include "client.h"
#include "config.h"
#include "html.h"
#include "idmap.h"
#include "ladder.h"
#include "ratelimit.h"
#include "requests.h"
#include "topology.h"
#include "websession.h"

#define PROG "cascade-console"

/* A POST body larger than this is refused (413). */
#define CONSOLE_BODY_MAX (16 * 1024)
/* An answer larger than this is cut off (500): 500 rows fit many times. */
#define CONSOLE_ANSWER_MAX (8 * 1024 * 1024)
#define CONSOLE_ROWS_DEFAULT 50
#define CONSOLE_ROWS_MAX 500
/* Parked records kept for the Parked page, newest last. */
#define CONSOLE_PARKED_RING 1000
/* Series details held (a repeat's schedule); past it, shown as plain. */
#define CONSOLE_SERIES_MAX (1u << 20)
/* A long-poll of /changes answers after this long without a change. */
#define CONSOLE_POLL_MS 25000
/* HTTP connections at once; each is a thread.  And from one address:
 * behind a proxy, all come from it, so a proxy's limits are the ones that
 * matter there. */
#define CONSOLE_CONNECTIONS 128
#define CONSOLE_PER_IP 64
/* Sessions one user may hold: a new login ends their own oldest. */
#define CONSOLE_USER_SESSIONS 8
/* Bytes of a body shown in a message's page. */
#define CONSOLE_PREVIEW 4096
/*
 * cascade-ctl's questions (/ctl/list, /ctl/count: ctl.c): the tokens of
 * the last markers read that were not the reader's own, each of at most
 * this many bytes (a longer one is not kept: no cascade-ctl writes one);
 * how long a question waits for its marker; how long after it was read a
 * marker is honoured; rows answered at most.
 */
#define CONSOLE_MARKS 256
#define CONSOLE_MARK_MAX 64
#define CONSOLE_MARK_WAIT_MS 10000
#define CONSOLE_MARK_TTL_MS 60000
#define CONSOLE_CTL_ROWS_MAX 50000

/* A repeat's schedule, for the Series page: by cascade id. */
struct cseries {
	int64_t every, occurrence;
	uint8_t cron_len, tz_len;
	char text[]; /* cron, then tz */
};

/* A parked record, for the Parked page's ring. */
struct cparked {
	int64_t at;
	char id[64], message_id[128], exchange[128], routing_key[128];
	char owner[128], reason[128];
	uint8_t id_len, mid_len, ex_len, rk_len, owner_len, reason_len;
	int has_mid, has_owner;
};

/* A session's broker connection, shared by its requests. */
struct csess {
	pthread_mutex_t mu; /* one request on the connection at a time */
	int refs;           /* under console.sess_lock */
	int dead;           /* left the store: closed when refs is 0 */
	atomic_int broken;  /* the broker closed it: the session is over */
	struct client cl;
};

struct console {
	struct config cfg;
	struct ladder ladder;
	struct topology topo;
	char own_user[256];
	char listen[256];

	/* The index and what goes with it: under lock. */
	pthread_mutex_t lock;
	pthread_cond_t changed; /* version moved, or stopping */
	struct cindex ix;
	struct requests req;
	struct idmap series; /* cascade id -> struct cseries */
	uint64_t series_refused;
	uint64_t requests_refused; /* not held: at [events] max_held_ids */
	struct cparked *ring;
	size_t ring_next, ring_n;
	atomic_uint_least64_t version; /* written under lock; read anywhere */
	int caught_up;
	uint64_t records, untrusted;
	int64_t live_ms;       /* wall time of the last record or tick */
	char reader_err[512];  /* the reader's last error, "" if none */
	int64_t reader_err_ms; /* its wall time */
	/* The markers read (CONSOLE_MARKS), the newest at marks_next - 1:
	 * a ring, so that input only pushes older ones out. */
	char marks[CONSOLE_MARKS][CONSOLE_MARK_MAX];
	uint8_t mark_len[CONSOLE_MARKS];
	int64_t mark_at[CONSOLE_MARKS]; /* monotonic ms it was read */
	size_t marks_next;

	/* Sessions and logins: under sess_lock. */
	pthread_mutex_t sess_lock;
	struct websession_store sessions;
	struct ratelimit rl;

	/* The web side. */
	void *mhd;
	int port;
	int secure; /* public_url is https */
	char origin[300];
	char hostbuf[6][300];
	const char *hosts[6];
	size_t nhosts;

	atomic_int stop;
	pthread_t reader;
};

/* reader.c */
int reader_start(struct console *c);
void reader_stop(struct console *c);

/* web.c */
int web_start(struct console *c, char *err, size_t size);
void web_stop(struct console *c);

/* What a handler answers. */
struct answer {
	int status;
	int json; /* the asker wants JSON */
	const char *type;
	struct hbuf body;
	char location[1024]; /* 303 */
	char cookie[512];    /* Set-Cookie */
	char cookie2[512];
	char allow[32];
	int retry_after;
	int cache; /* immutable asset */
};

/* A request as the handlers see it. */
struct ask {
	struct console *c;
	void *conn; /* MHD's */
	const char *method, *path;
	const char *rest; /* the path after a route's prefix: the id */
	size_t rest_len;
	struct websession *s; /* NULL: none */
	char user[WEBSESSION_USER_MAX + 1];
	int control;
	struct csess *cs; /* the session's connection, referenced */
	char csrf[WEBSESSION_HEX_SIZE];
	const struct form_field *form;
	size_t nform;
	int64_t now;
	char client_ip[64];
};

/*
 * After a failed request on a session's connection: when the connection
 * itself no longer answers, the session is over (401 from then on: log
 * in again).  Call with cs->mu held.
 */
void console_check_conn(struct csess *cs);

/* A query argument (GET) or NULL. */
const char *ask_arg(const struct ask *a, const char *name);
/* A form field (POST) or NULL. */
const char *ask_field(const struct ask *a, const char *name);

/* page.c: a page's frame, and errors. */
void page_head(struct ask *a, struct answer *r, const char *title,
               const char *live);
void page_foot(struct answer *r);
void answer_error(struct ask *a, struct answer *r, int status, const char *code,
                  const char *message);
void answer_json_start(struct answer *r);
/* The row of slot as JSON (the index locked). */
void page_row_json(struct console *c, struct hbuf *b, uint32_t slot,
                   int64_t now);
/* The row of slot as a table row (the index locked). */
void page_row_html(struct console *c, struct hbuf *b, uint32_t slot,
                   int64_t now, const char *columns);
/* The TARGET text as list shows it. */
void page_target(struct hbuf *b, amqp_bytes_t exchange, amqp_bytes_t key);
void page_time(struct hbuf *b, int64_t ms, int64_t now);
/* May the session see this row?  (control, or its owner) */
int console_visible(const struct ask *a, const struct cindex_row *row);
/* The state of a row from the requests in force (the index locked). */
struct rowstate {
	int cancel_pending, rescheduled, paused;
	int64_t due;
};
void console_rowstate(struct console *c, const struct cindex_row *row,
                      int64_t now, struct rowstate *st);
/* The series details of a row, or NULL (the index locked). */
const struct cseries *console_series(struct console *c,
                                     const struct cindex_row *row);

/* The slot of the waiting message whose cascade id is id, when a may see
 * it; -1 when none (the index locked). */
int64_t console_find(struct console *c, struct ask *a, amqp_bytes_t id);

/* slots[0..n) in the index's order, due then first seen (the index
 * locked): for the few rows a search by name or the series gather.  -1
 * out of memory (slots as they were). */
int console_sort_slots(struct console *c, uint32_t *slots, uint32_t n);

/* The handlers. */
void page_waiting(struct ask *a, struct answer *r);
void page_message(struct ask *a, struct answer *r);
void page_series(struct ask *a, struct answer *r);
void page_parked(struct ask *a, struct answer *r);
void page_health(struct ask *a, struct answer *r);
void act_cancel(struct ask *a, struct answer *r);
void act_reschedule(struct ask *a, struct answer *r);
void act_series(struct ask *a, struct answer *r, int resume);
void act_target(struct ask *a, struct answer *r, int resume);
void act_requeue(struct ask *a, struct answer *r);
/* ctl.c: cascade-ctl's list and cancel, from the index (ctlwire.h). */
void ctl_list(struct ask *a, struct answer *r);
void ctl_count(struct ask *a, struct answer *r);

/* fetch.c: the copy of id, whose scheduled record is at offset in
 * P.events, read again from P.copies (or that record, written by an
 * earlier cascade), into out (the caller frees out->bytes). */
int fetch_copy(struct console *c, uint64_t offset, amqp_bytes_t id,
               amqp_bytes_t *out, char *err, size_t size);

#endif
