/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RabbitMQ's management API, the pure parts: where it is (an http:// URL
 * taken apart), and what /api/config/effective says (the app env as
 * Erlang terms).  cascade-ctl status reads the broker's dead-letter
 * re-send timeout there.  No I/O: the caller does the HTTP.
 */
#ifndef CASCADE_MGMT_H
#define CASCADE_MGMT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define MGMT_PORT "15672" /* the management plugin's */
/* The app env key of rabbit that delays a dead-letter re-send. */
#define MGMT_DLX_KEY "dead_letter_worker_publisher_confirm_timeout"
#define MGMT_DLX_DEFAULT_MS                                                    \
	180000 /* RabbitMQ's, when advanced.config is silent */

/* Where the management API is, and who asks it. */
struct mgmt {
	char host[256], port[16];
	char path[1024]; /* the prefix, if any, and /api/config/effective */
	char shown[800]; /* http://HOST:PORT/PREFIX, without credentials */
	char user[256], pass[CONFIG_STR_MAX];
};

/*
 * http://[USER[:PASSWORD]@]HOST[:PORT][/PREFIX] into m (USER and PASSWORD
 * percent-encoded; PORT by default MGMT_PORT; HOST a name, an IPv4
 * address or [IPv6]).  m->user and m->pass are left as they were when the
 * URL has none.  0, or -1 with why (a static string).
 */
int mgmt_parse(const char *url, struct mgmt *m, const char **why);

/*
 * m->shown and m->path from m->host, m->port and the path prefix
 * prefix[0..prefixlen) (trailing slashes dropped).
 */
void mgmt_finish(struct mgmt *m, const char *prefix, size_t prefixlen);

/*
 * MGMT_DLX_KEY in the text of /api/config/effective ([{App, [{Key,
 * Value}, ...]}, ...], or rabbit's list alone): 1 with *ms when rabbit's
 * list has it, 0 when it has not (RabbitMQ's default applies), -1 when
 * there is no rabbit application or the value is not a number of ms.
 */
int mgmt_dlx_timeout(const char *env, int64_t *ms);

/*
 * Does rabbit's tcp_listeners in the text of /api/config/effective, such
 * as [5672] or [{"127.0.0.1",5672}], hold port?  1 also when it cannot be
 * told (no such key).
 */
int mgmt_listens_on(const char *env, int port);

/* The value of "reason" in a management API error body, or "". */
void mgmt_reason(const char *body, char *out, size_t size);

#endif
