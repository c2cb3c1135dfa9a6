/*
 * cascade-ctl: look at a running cascade's queues, and send parked messages
 * back once the cause of their parking is fixed; list the messages waiting
 * and cancel them.
 *
 *   cascade-ctl -c /etc/cascade/cascade.ini status [--management URL] [--json]
 *   cascade-ctl -c cascade.ini errors [--limit N] [--json]
 *   cascade-ctl -c cascade.ini requeue [--limit N] [--reason TEXT] [--dry-run]
 *   cascade-ctl -c cascade.ini list [--target EXCHANGE[/KEY]]
 *                               [--due-before T] [--due-after T] [--json]
 *   cascade-ctl -c cascade.ini cancel [--park] [--force] ID...
 *
 * Everything it learns comes from the broker (passive queue.declare,
 * basic.get, and the streams P.events and P.cancels; status also asks the
 * management API for one setting): it works whether the daemon runs or not.
 */
#include "amqp_compat.h"
#include <errno.h>
#include <openssl/evp.h>
#include <getopt.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "broker.h"
#include "config.h"
#include "duration.h"
#include "cancels.h"
#include "events.h"
#include "headers.h"
#include "listen.h"
#include "idmap.h"
#include "json.h"
#include "ladder.h"
#include "metrics.h"
#include "park.h"
#include "topology.h"

#define PROG "cascade-ctl"
#define ERRORS_LIMIT 100 /* messages `errors` shows by default */
#define BODY_PREVIEW 60  /* bytes of each body `errors` shows */
#define CONFIRM_MS 30000 /* how long a publish may wait for its confirm */
#define WORN 10 /* x-delivery-count worth a warning: see delivery_count */
#define GIVE_BACK_WAIT_MS 5000 /* see ctl_give_back */
#define GIVE_BACK_POLL_MS 20
#define KEY_MAX 256 /* shortstr: routing keys, exchange names */

struct ctl {
	struct config cfg;
	struct ladder ladder;
	struct topology topo;
	amqp_connection_state_t conn;
	int json;
	int dry_run;
	uint64_t limit; /* 0: the command's default */
	const char *reason;
	/* list: the filters; unset bounds are INT64_MIN / INT64_MAX */
	const char *target; /* EXCHANGE[/KEY], or NULL */
	int64_t due_before, due_after;
	/* cancel */
	int park, force;
	char **ids;
	int nids;
	int64_t now; /* Unix ms, read once at start */
	/* status: --management, or NULL; the broker URL connected to */
	const char *management;
	char url[CONFIG_STR_MAX];
	/* requeue: BROKER_CH_WORK; list and cancel: BROKER_CH_PUB */
	struct broker_confirms confirms;
	char unroutable[1024];   /* what the last basic.return said */
	int64_t most_deliveries; /* highest x-delivery-count seen */
	char err[8192];
};

/* One queue as a passive declare saw it. */
struct qinfo {
	const char *name;
	int64_t ttl; /* delay levels only, else -1 */
	int shard;   /* a shard's delay or return queue, else -1 */
	int missing;
	uint32_t messages, consumers;
};

/* What a usage error prints: the synopsis, not the whole help. */
static void
usage_short(void)
{
	fprintf(stderr,
	        "usage: " PROG " [-c FILE] "
	        "status|errors|requeue|list|cancel [options] [ID...]; " PROG
	        " --help for more\n");
}

static void
usage(FILE *fp)
{
	fprintf(
	    fp,
	    "usage: " PROG " [-c FILE] COMMAND [options]\n"
	    "\n"
	    "commands:\n"
	    "  status              each delay level and the ingress, return, "
	    "retry and\n"
	    "                      error queues: TTL, messages waiting, "
	    "consumers; the\n"
	    "                      broker's dead-letter re-send timeout "
	    "(management API)\n"
	    "  errors              the parked messages in P.error with their "
	    "reasons;\n"
	    "                      they stay in the queue\n"
	    "  requeue             send parked messages back through "
	    "cascade's exchange,\n"
	    "                      with their target and due time, once the "
	    "cause is fixed\n"
	    "  list                every message waiting, from the stream "
	    "P.events: id,\n"
	    "                      due time, target, size, first seen; "
	    "soonest first\n"
	    "  cancel ID...        cancel the waiting messages whose "
	    "message-id (or cascade\n"
	    "                      id) is ID: they are never delivered\n"
	    "\n"
	    "options:\n"
	    "  -c, --config FILE   cascade's config: broker URL, prefix, "
	    "ladder\n"
	    "                      (default: the built-in defaults)\n"
	    "  -j, --json          status, errors, list: one JSON object\n"
	    "  -n, --limit N       errors: show at most N (default %d); "
	    "requeue: at most N;\n"
	    "                      list: print at most N rows (default: "
	    "all)\n"
	    "  -r, --reason TEXT   requeue: only messages whose "
	    "x-cascade-error contains TEXT\n"
	    "      --dry-run       requeue: say what would be sent, send "
	    "nothing\n"
	    "      --target EXCHANGE[/KEY]\n"
	    "                      list: only messages for this exchange "
	    "(amq.default or\n"
	    "                      empty: the default exchange) and routing "
	    "key\n"
	    "      --due-before TIME, --due-after TIME\n"
	    "                      list: only messages due before TIME, or "
	    "at TIME or later;\n"
	    "                      TIME is 2026-11-23T09:00:00Z, Unix ms, or "
	    "a duration from\n"
	    "                      now (10m, 2h, -5m)\n"
	    "      --park          cancel: park the messages in P.error "
	    "(reason \"cancelled\")\n"
	    "                      instead of dropping them\n"
	    "      --force         cancel: record the cancellation even when "
	    "no waiting\n"
	    "                      message has the id (yet)\n"
	    "      --management URL\n"
	    "                      status: the broker's management API, where "
	    "status reads\n"
	    "                      its dead-letter re-send timeout (RabbitMQ "
	    "3.12 or later,\n"
	    "                      as an administrator):\n"
	    "                      http://[USER:PASS@]HOST[:PORT][/PREFIX], "
	    "PORT by default\n"
	    "                      15672; without it, HOST, user and password "
	    "of an amqp://\n"
	    "                      broker URL; empty: not asked\n"
	    "  -h, --help          this text\n"
	    "\n"
	    "CASCADE_BROKER_URL, when set, overrides the URL, and "
	    "CASCADE_BROKER_PASSWORD\n"
	    "gives the password.  CASCADE_MANAGEMENT_URL, when set, is "
	    "--management's\n"
	    "default.\n"
	    "\n"
	    "Exit status: 0 done, 1 error (broker, config, a message not "
	    "requeued), 2 usage.\n"
	    "cancel: 0 every ID recorded, 1 an ID named no waiting message "
	    "(not recorded),\n"
	    "2 usage or an error.\n",
	    ERRORS_LIMIT);
}

/*
 * Output helpers
 */

static void
json_str(FILE *fp, const char *s)
{
	json_write(fp, s, strlen(s));
}

/* The first max bytes of b, printable ASCII with C escapes, in out. */
static void
escape_preview(amqp_bytes_t b, size_t max, char *out, size_t size)
{
	const unsigned char *s = b.bytes;
	size_t o = 0;

	for (size_t i = 0; i < b.len && i < max && o + 5 < size; i++) {
		unsigned char ch = s[i];
		if (ch == '\\' || ch == '"')
			o += (size_t)snprintf(out + o, size - o, "\\%c", ch);
		else if (ch == '\n')
			o += (size_t)snprintf(out + o, size - o, "\\n");
		else if (ch == '\t')
			o += (size_t)snprintf(out + o, size - o, "\\t");
		else if (ch == '\r')
			o += (size_t)snprintf(out + o, size - o, "\\r");
		else if (ch < 0x20 || ch >= 0x7f)
			o += (size_t)snprintf(out + o, size - o, "\\x%02x", ch);
		else
			out[o++] = (char)ch;
	}
	if (b.len > max && o + 4 < size)
		o += (size_t)snprintf(out + o, size - o, "...");
	out[o] = '\0';
}

/* Epoch ms as ISO 8601 UTC with milliseconds. */
static void
format_time(int64_t ms, char *buf, size_t size)
{
	time_t s = (time_t)(ms / 1000);
	int frac = (int)(ms % 1000);
	struct tm tm;
	char day[32];

	if (frac < 0) {
		frac += 1000;
		s--;
	}
	if (gmtime_r(&s, &tm) == NULL ||
	    strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
		snprintf(buf, size, "%" PRId64 "ms", ms);
		return;
	}
	snprintf(buf, size, "%s.%03dZ", day, frac);
}

/* A shortstr into a C string (names are at most 255 bytes). */
static void
copy_key(amqp_bytes_t b, char *out)
{
	size_t n = b.len < KEY_MAX - 1 ? b.len : KEY_MAX - 1;

	if (n > 0)
		memcpy(out, b.bytes, n);
	out[n] = '\0';
}

/*
 * Broker helpers
 */

/*
 * The broker closed channel ch (its reply is in r): say why in err, answer
 * with close-ok and open the channel again.  Returns the reply code, or -1
 * when the channel cannot be opened again.
 */
static int
ctl_channel_closed(struct ctl *c, amqp_channel_t ch, amqp_rpc_reply_t r,
                   const char *what)
{
	amqp_channel_close_t *cl = r.reply.decoded;
	int code = cl->reply_code;

	broker_reply_string(r, what, c->err, sizeof(c->err));
	if (broker_channel_reopen(c->conn, ch, c->err, sizeof(c->err)) < 0)
		return -1;
	return code;
}

/*
 * Passive declare of q->name on ch: its counts, or q->missing when the
 * broker has no such queue (404, which closes the channel: it is opened
 * again).  Returns -1 with c->err on any other failure.
 */
static int
ctl_inspect(struct ctl *c, amqp_channel_t ch, struct qinfo *q)
{
	amqp_queue_declare_ok_t *ok;
	amqp_rpc_reply_t r;
	char what[TOPOLOGY_NAME_MAX + 32];

	snprintf(what, sizeof(what), "queue %s", q->name);
	ok = amqp_queue_declare(c->conn, ch, amqp_cstring_bytes(q->name), 1, 0,
	                        0, 0, amqp_empty_table);
	if (ok != NULL) {
		q->missing = 0;
		q->messages = ok->message_count;
		q->consumers = ok->consumer_count;
		amqp_maybe_release_buffers(c->conn);
		return 0;
	}
	r = amqp_get_rpc_reply(c->conn);
	if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
	    r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
		int code = ctl_channel_closed(c, ch, r, what);
		amqp_maybe_release_buffers(c->conn);
		if (code == AMQP_NOT_FOUND) {
			q->missing = 1;
			q->messages = q->consumers = 0;
			return 0;
		}
		return -1;
	}
	broker_reply_string(r, what, c->err, sizeof(c->err));
	return -1;
}

/* The error queue's message count; -1 with c->err when it is missing. */
static int
ctl_error_count(struct ctl *c, uint32_t *count)
{
	struct qinfo q = {c->topo.error, -1, -1, 0, 0, 0};

	if (ctl_inspect(c, BROKER_CH_CHECK, &q) < 0)
		return -1;
	if (q.missing) {
		snprintf(c->err, sizeof(c->err),
		         "queue %s does not exist: has cascade run with this "
		         "config (prefix %s)?",
		         q.name, c->cfg.topology_prefix);
		return -1;
	}
	*count = q.messages;
	return 0;
}

/*
 * How often a quorum queue has handed the message out before.  Each look
 * with `errors` counts on RabbitMQ before 4.3, and from 4.0 a quorum queue
 * drops a message past its delivery-limit (20 unless set).
 */
static int
delivery_count(const amqp_basic_properties_t *p, int64_t *n)
{
	const amqp_field_value_t *v;

	if (!(p->_flags & AMQP_BASIC_HEADERS_FLAG))
		return 0;
	v = headers_find(&p->headers, "x-delivery-count");
	return v != NULL && headers_integer(v, n) == 1;
}

/*
 * One message from the error queue, unacked: 1 and *tag, *rk, *m; 0 when
 * the queue is empty; -1 with c->err.  The caller destroys *m.
 */
static int
ctl_get(struct ctl *c, uint64_t *tag, char *rk, amqp_message_t *m)
{
	amqp_basic_get_ok_t *g;
	amqp_rpc_reply_t r;
	int64_t n;

	r = amqp_basic_get(c->conn, BROKER_CH_WORK,
	                   amqp_cstring_bytes(c->topo.error), 0);
	if (r.reply_type != AMQP_RESPONSE_NORMAL) {
		broker_reply_string(r, "basic.get", c->err, sizeof(c->err));
		return -1;
	}
	if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
		return 0;
	g = r.reply.decoded;
	*tag = g->delivery_tag;
	copy_key(g->routing_key, rk);
	r = amqp_read_message(c->conn, BROKER_CH_WORK, m, 0);
	if (r.reply_type != AMQP_RESPONSE_NORMAL) {
		broker_reply_string(r, "read message", c->err, sizeof(c->err));
		return -1;
	}
	amqp_maybe_release_buffers(c->conn);
	if (delivery_count(&m->properties, &n) && n > c->most_deliveries)
		c->most_deliveries = n;
	return 1;
}

/*
 * Give back every unacked message up to tag, in order, uncounted as a
 * failed delivery (basic.nack, unlike basic.reject, does not raise a quorum
 * queue's delivery-count on RabbitMQ 4.3 and later).
 *
 * Then wait until the queue shows the held messages ready again.  basic.nack
 * has no reply, and a quorum queue applies it through its log after we may
 * have gone: `cascade-ctl errors && cascade-ctl requeue` would otherwise find
 * them still held and requeue nothing.  Fewer may come back when somebody
 * else consumes P.error meanwhile, so the wait is bounded.
 */
static int
ctl_give_back(struct ctl *c, uint64_t tag, uint64_t held)
{
	const struct timespec pause = {0, GIVE_BACK_POLL_MS * 1000000L};
	uint32_t before, now;
	int64_t until;

	if (tag == 0)
		return 0;
	if (ctl_error_count(c, &before) < 0)
		return -1;
	if (amqp_basic_nack(c->conn, BROKER_CH_WORK, tag, 1, 1) !=
	    AMQP_STATUS_OK) {
		snprintf(c->err, sizeof(c->err), "basic.nack failed");
		return -1;
	}
	until = duration_mono_ms() + GIVE_BACK_WAIT_MS;
	for (;;) {
		if (ctl_error_count(c, &now) < 0)
			return -1;
		if ((uint64_t)now >= (uint64_t)before + held)
			return 0;
		if (duration_mono_ms() >= until) {
			fprintf(stderr,
			        PROG
			        ": warning: %s shows %" PRIu32
			        " ready, %" PRIu64 " expected, %d s after "
			        "giving the messages back: is something else "
			        "consuming it?\n",
			        c->topo.error, now, (uint64_t)before + held,
			        GIVE_BACK_WAIT_MS / 1000);
			return 0;
		}
		nanosleep(&pause, NULL);
	}
}

static amqp_bytes_t
message_id(const amqp_basic_properties_t *p)
{
	return (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) ? p->message_id
	                                                : amqp_empty_bytes;
}

/* Whether the parked message's original routing key was lost. */
static int
ctl_rk_unknown(const struct ctl *c, const struct park_target *t)
{
	return t->routing_key_parked &&
	       t->routing_key.len == strlen(c->topo.error) &&
	       memcmp(t->routing_key.bytes, c->topo.error,
	              t->routing_key.len) == 0;
}

/*
 * status
 */

static void
status_json_queue(const struct qinfo *q)
{
	printf("{\"queue\":");
	json_str(stdout, q->name);
	if (q->shard >= 0)
		printf(",\"shard\":%d", q->shard);
	if (q->ttl >= 0)
		printf(",\"ttl_ms\":%" PRId64, q->ttl);
	if (q->missing)
		printf(
		    ",\"missing\":true,\"messages\":null,\"consumers\":null}");
	else
		printf(",\"missing\":false,\"messages\":%" PRIu32
		       ",\"consumers\":%" PRIu32 "}",
		       q->messages, q->consumers);
}

static void
status_json_queues(const char *key, const struct qinfo *q, unsigned n)
{
	printf(",\"%s\":[", key);
	for (unsigned i = 0; i < n; i++) {
		if (i > 0)
			putchar(',');
		status_json_queue(&q[i]);
	}
	putchar(']');
}

/* ms in the largest unit it reaches, to one decimal: "8.5m", "97.1d". */
static void
format_about(int64_t ms, char *buf, size_t size)
{
	static const struct {
		const char *unit;
		int64_t ms;
	} units[] = {
	    {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};
	int64_t tenths;

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (ms < units[i].ms)
			continue;
		tenths = (ms * 10 + units[i].ms / 2) / units[i].ms;
		if (tenths % 10 == 0)
			snprintf(buf, size, "%" PRId64 "%s", tenths / 10,
			         units[i].unit);
		else
			snprintf(buf, size, "%" PRId64 ".%d%s", tenths / 10,
			         (int)(tenths % 10), units[i].unit);
		return;
	}
	snprintf(buf, size, "%" PRId64 "ms", ms);
}

/*
 * Targets that refused deliveries: the daemon keeps them in memory only,
 * so status asks the daemon at [metrics] listen for its /metrics.
 */
#define TARGETS_SHOWN 50
#define METRICS_MAX (3 * 1024 * 1024) /* the daemon sends up to 2 MiB */

struct refusing {
	char exchange[KEY_MAX], routing_key[KEY_MAX];
	double refusals, diverted, backoff;
};

/*
 * A small HTTP/1.0 client: the daemon's /metrics, and the broker's
 * management API (see status_dlx).
 */
#define HTTP_TIMEOUT_S 2 /* to connect, and for each read: never hangs */

/* A socket connected to ai, its timeouts set; -1 with errno. */
static int
http_connect(const struct addrinfo *ai)
{
	struct timeval tv = {HTTP_TIMEOUT_S, 0};
	int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol), e;

	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/*
 * GET path from host:port into a malloc'd string: the body after the
 * headers, the status code in *status.  auth, when not NULL, is the
 * base64 of "user:password" (basic authentication).  At most max bytes of
 * answer are read.  NULL with why when there is no HTTP answer.
 */
static char *
http_get(const char *host, const char *port, const char *path, const char *auth,
         size_t max, int *status, char *why, size_t whysize)
{
	char req[2048];
	struct addrinfo hints, *res = NULL, *ai;
	char *buf = NULL, *body;
	size_t len = 0;
	ssize_t n = 0;
	int fd = -1, rc, err = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if ((rc = getaddrinfo(host, port, &hints, &res)) != 0) {
		snprintf(why, whysize, "%s", gai_strerror(rc));
		return NULL;
	}
	/* Every address in turn: "localhost" can be ::1 first, with the
	 * server on 127.0.0.1 only. */
	for (ai = res; ai != NULL && fd < 0; ai = ai->ai_next)
		if ((fd = http_connect(ai)) < 0)
			err = errno;
	freeaddrinfo(res);
	if (fd < 0) {
		/* connect gives up after SO_SNDTIMEO with EINPROGRESS */
		if (err == EINPROGRESS || err == EAGAIN || err == ETIMEDOUT)
			snprintf(why, whysize, "no answer within %d s",
			         HTTP_TIMEOUT_S);
		else
			snprintf(why, whysize, "%s", strerror(err));
		return NULL;
	}
	rc = snprintf(req, sizeof(req),
	              "GET %s HTTP/1.0\r\nHost: %s%s%s:%s\r\n%s%s%s\r\n", path,
	              strchr(host, ':') ? "[" : "", host,
	              strchr(host, ':') ? "]" : "", port,
	              auth ? "Authorization: Basic " : "", auth ? auth : "",
	              auth ? "\r\n" : "");
	if (rc < 0 || (size_t)rc >= sizeof(req) ||
	    send(fd, req, (size_t)rc, MSG_NOSIGNAL) != rc ||
	    (buf = malloc(max + 1)) == NULL) {
		snprintf(why, whysize, "cannot ask");
		goto fail;
	}
	while (len < max && (n = read(fd, buf + len, max - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	if (len == 0) {
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			snprintf(why, whysize, "no answer within %d s",
			         HTTP_TIMEOUT_S);
		else
			snprintf(why, whysize, "no answer");
		goto fail;
	}
	body = strstr(buf, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.", 7) != 0 || len < 12 || buf[8] != ' ' ||
	    sscanf(buf + 9, "%3d", status) != 1 || body == NULL) {
		snprintf(why, whysize, "not an HTTP answer");
		goto fail;
	}
	memmove(buf, body + 4, strlen(body + 4) + 1);
	close(fd);
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

/* GET /metrics from listen into a malloc'd string; NULL with why. */
static char *
metrics_fetch(const char *listen, char *why, size_t whysize)
{
	char host[256], port[16], *text;
	const char *perr;
	int status = 0;

	if (listen_parse(listen, host, sizeof(host), port, sizeof(port),
	                 &perr) < 0) {
		snprintf(why, whysize, "%s", perr);
		return NULL;
	}
	if (strcmp(port, "0") == 0) {
		snprintf(why, whysize,
		         "port 0: the daemon logs the port it "
		         "took (msg=metrics_listening)");
		return NULL;
	}
	text = http_get(host, port, "/metrics", NULL, METRICS_MAX, &status, why,
	                whysize);
	if (text == NULL) {
		char detail[128];
		snprintf(detail, sizeof(detail), "%.120s", why);
		snprintf(why, whysize, "no daemon answers there (%s)", detail);
		return NULL;
	}
	if (status != 200) {
		snprintf(why, whysize, "no /metrics there");
		free(text);
		return NULL;
	}
	return text;
}

/* A quoted label value at *p (after the opening quote), unescaped. */
static int
label_value(const char **p, char *out, size_t size)
{
	const char *s = *p;
	size_t n = 0;

	for (; *s && *s != '"'; s++) {
		char c = *s;
		if (c == '\\' && s[1] != '\0') {
			c = *++s == 'n' ? '\n' : *s;
		}
		if (n + 1 < size)
			out[n++] = c;
	}
	if (*s != '"')
		return -1;
	out[n] = '\0';
	*p = s + 1;
	return 0;
}

/* The cascade_target_* samples of a /metrics text, one row per target. */
static size_t
targets_parse(char *text, struct refusing *t, size_t max)
{
	static const char *const names[] = {"cascade_target_refusals_total{",
	                                    "cascade_target_diverted_total{",
	                                    "cascade_target_backoff_seconds{"};
	size_t count = 0;

	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		struct refusing r;
		const char *p = NULL;
		size_t f, i;
		for (f = 0; f < 3 && p == NULL; f++)
			if (strncmp(line, names[f], strlen(names[f])) == 0)
				p = line + strlen(names[f]);
		if (p == NULL || strncmp(p, "exchange=\"", 10) != 0)
			continue;
		p += 10;
		if (label_value(&p, r.exchange, sizeof(r.exchange)) < 0 ||
		    strncmp(p, ",routing_key=\"", 14) != 0)
			continue;
		p += 14;
		if (label_value(&p, r.routing_key, sizeof(r.routing_key)) < 0 ||
		    strncmp(p, "} ", 2) != 0)
			continue;
		for (i = 0; i < count; i++)
			if (strcmp(t[i].exchange, r.exchange) == 0 &&
			    strcmp(t[i].routing_key, r.routing_key) == 0)
				break;
		if (i == count) {
			if (count == max)
				continue;
			t[count] = r;
			t[count].refusals = t[count].diverted = 0;
			t[count].backoff = 0;
			count++;
		}
		double v = strtod(p + 2, NULL);
		if (f == 1)
			t[i].refusals = v;
		else if (f == 2)
			t[i].diverted = v;
		else
			t[i].backoff = v;
	}
	return count;
}

/* The targets section of status: text, or a JSON member. */
static void
status_targets(const struct ctl *c)
{
	static struct refusing t[TARGETS_SHOWN];
	const char *listen = c->cfg.metrics_listen;
	char why[256] = "[metrics] listen is empty", *text = NULL;
	size_t n = 0;

	if (listen[0] != '\0')
		text = metrics_fetch(listen, why, sizeof(why));
	if (text != NULL)
		n = targets_parse(text, t, TARGETS_SHOWN);
	free(text);
	if (c->json) {
		printf(",\"targets\":");
		if (text == NULL) {
			printf("null");
			return;
		}
		putchar('[');
		for (size_t i = 0; i < n; i++) {
			printf("%s{\"exchange\":", i ? "," : "");
			json_str(stdout, t[i].exchange);
			printf(",\"routing_key\":");
			json_str(stdout, t[i].routing_key);
			printf(",\"refusals\":%.0f,\"diverted\":%.0f,"
			       "\"backoff_seconds\":%.3f}",
			       t[i].refusals, t[i].diverted, t[i].backoff);
		}
		putchar(']');
		return;
	}
	if (text == NULL) {
		printf("\nrefusing targets: unknown (the daemon's /metrics at "
		       "%s: %s)\n",
		       listen[0] ? listen : "-", why);
		return;
	}
	if (n == 0) {
		printf("\nno target has refused a delivery (daemon at %s)\n",
		       listen);
		return;
	}
	printf("\ntargets that refused deliveries (daemon at %s):\n", listen);
	printf("%-24s %-24s %10s %10s %9s\n", "exchange", "routing key",
	       "refusals", "diverted", "backoff");
	for (size_t i = 0; i < n; i++)
		printf("%-24s %-24s %10.0f %10.0f %8.1fs\n",
		       t[i].exchange[0] ? t[i].exchange : "(default)",
		       t[i].routing_key, t[i].refusals, t[i].diverted,
		       t[i].backoff);
}

/*
 * The broker's dead-letter re-send timeout.  Each hop out of a delay queue
 * is the queue's at-least-once dead-letter worker; a message it could not
 * hand over (a node restarting its quorum queues) is sent again only
 * dead_letter_worker_publisher_confirm_timeout later, an app env key of
 * rabbit that only advanced.config sets.  The management API shows the
 * node's app env at /api/config/effective (RabbitMQ 3.12 and later, to
 * administrators), as Erlang terms.
 */
#define DLX_KEY "dead_letter_worker_publisher_confirm_timeout"
#define DLX_DEFAULT_MS 180000 /* RabbitMQ's, when advanced.config is silent */
#define MGMT_PORT "15672"
#define MGMT_MAX (1024 * 1024) /* the app env of every application */
#define DLX_CONSEQUENCE                                                        \
	"at RabbitMQ's default, 180 s, messages that were expiring can "       \
	"arrive up to 3 minutes late after a broker restart; set "             \
	"dead_letter_worker_publisher_confirm_timeout in advanced.config "     \
	"(conf/advanced.config: 10 s)"

/* Where the management API is, and who asks it. */
struct mgmt {
	char host[256], port[16];
	char path[1024]; /* the prefix, if any, and /api/config/effective */
	char shown[800]; /* http://HOST:PORT/PREFIX, without credentials */
	char user[256], pass[CONFIG_STR_MAX];
};

static int
hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Percent-decode s[0..n) into out; -1 on a bad escape or no room. */
static int
url_decode(const char *s, size_t n, char *out, size_t size)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int ch = (unsigned char)s[i];
		if (ch == '%') {
			if (i + 2 >= n || hex_digit(s[i + 1]) < 0 ||
			    hex_digit(s[i + 2]) < 0)
				return -1;
			ch = hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]);
			i += 2;
		}
		if (ch == 0 || o + 1 >= size)
			return -1;
		out[o++] = (char)ch;
	}
	out[o] = '\0';
	return 0;
}

/* m->shown and m->path from m->host, m->port and the prefix. */
static void
mgmt_finish(struct mgmt *m, const char *prefix, size_t prefixlen)
{
	int v6 = strchr(m->host, ':') != NULL;

	while (prefixlen > 0 && prefix[prefixlen - 1] == '/')
		prefixlen--;
	snprintf(m->shown, sizeof(m->shown), "http://%s%s%s:%s%.*s",
	         v6 ? "[" : "", m->host, v6 ? "]" : "", m->port, (int)prefixlen,
	         prefix);
	snprintf(m->path, sizeof(m->path), "%.*s/api/config/effective",
	         (int)prefixlen, prefix);
}

/*
 * http://[USER[:PASSWORD]@]HOST[:PORT][/PREFIX] into m (USER and PASSWORD
 * percent-encoded; PORT by default 15672, the management plugin's).  The
 * user and password are left as they were when the URL has none.  0, or
 * -1 with why.
 */
static int
mgmt_parse(const char *url, struct mgmt *m, const char **why)
{
	const char *p = url + 7, *at, *host, *end, *colon;
	size_t hostlen;

	if (strncmp(url, "https://", 8) == 0) {
		*why = "https is not supported: give the management plugin's "
		       "http listener";
		return -1;
	}
	if (strncmp(url, "http://", 7) != 0 || url[strcspn(url, " \t\r\n")]) {
		*why = "not an http:// URL";
		return -1;
	}
	/* The last @ ends the credentials: a password may hold / or @. */
	at = strrchr(p, '@');
	if (at != NULL) {
		const char *sep = memchr(p, ':', (size_t)(at - p));
		size_t ulen = sep ? (size_t)(sep - p) : (size_t)(at - p);
		if (url_decode(p, ulen, m->user, sizeof(m->user)) < 0 ||
		    url_decode(sep ? sep + 1 : at,
		               sep ? (size_t)(at - sep - 1) : 0, m->pass,
		               sizeof(m->pass)) < 0) {
			*why = "bad percent-encoding in the user or password";
			return -1;
		}
		p = at + 1;
	}
	end = p + strcspn(p, "/?#");
	if (*p == '[') {
		host = p + 1;
		colon = memchr(p, ']', (size_t)(end - p));
		if (colon == NULL) {
			*why = "no ] after the IPv6 address";
			return -1;
		}
		hostlen = (size_t)(colon - host);
		colon = colon + 1 < end && colon[1] == ':' ? colon + 1 : NULL;
	} else {
		host = p;
		colon = memchr(p, ':', (size_t)(end - p));
		hostlen = colon ? (size_t)(colon - p) : (size_t)(end - p);
	}
	if (hostlen == 0 || hostlen >= sizeof(m->host)) {
		*why = "no host";
		return -1;
	}
	memcpy(m->host, host, hostlen);
	m->host[hostlen] = '\0';
	if (colon != NULL) {
		size_t plen = (size_t)(end - colon - 1);
		if (plen == 0 || plen >= sizeof(m->port) ||
		    strspn(colon + 1, "0123456789") < plen) {
			*why = "bad port";
			return -1;
		}
		memcpy(m->port, colon + 1, plen);
		m->port[plen] = '\0';
	} else {
		snprintf(m->port, sizeof(m->port), "%s", MGMT_PORT);
	}
	if (end[strcspn(end, "?#")] != '\0') {
		*why = "a query or fragment: give the URL up to the port, "
		       "or the path prefix";
		return -1;
	}
	if (strlen(end) > 512) {
		*why = "path prefix too long";
		return -1;
	}
	mgmt_finish(m, end, strlen(end));
	return 0;
}

/*
 * The atom at s, bare or quoted, if it is name and a comma follows: what
 * comes after the comma; else NULL.
 */
static const char *
atom_comma(const char *s, const char *name)
{
	size_t n = strlen(name);
	int quoted = *s == '\'';

	s += quoted;
	if (strncmp(s, name, n) != 0)
		return NULL;
	s += n;
	if (quoted && *s++ != '\'')
		return NULL;
	s += strspn(s, " \t\r\n");
	return *s == ',' ? s + 1 : NULL;
}

/* The closing quote of the Erlang string or quoted atom at s, or NULL. */
static const char *
erl_skip_quoted(const char *s)
{
	char q = *s++;

	for (; *s != q; s++) {
		if (*s == '\\' && s[1] != '\0')
			s++;
		if (*s == '\0')
			return NULL;
	}
	return s;
}

#define ERL_SPACE " \t\r\n"

/*
 * In the text of /api/config/effective, [{App, [{Key, Value}, ...]},
 * ...] (or rabbit's list alone): where the value of key in rabbit's list
 * starts, or NULL when it has no key.  *rabbit: is there a rabbit
 * application?  What is in strings and quoted atoms is no structure.
 */
static const char *
rabbit_env_find(const char *s, const char *key, int *rabbit)
{
	int depth = 0, in_rabbit = 0;
	const char *v;

	*rabbit = 0;
	for (; *s != '\0'; s++) {
		switch (*s) {
		case '"':
		case '\'':
			if ((s = erl_skip_quoted(s)) == NULL)
				return NULL;
			break;
		case '{':
			depth++;
			v = s + 1 + strspn(s + 1, ERL_SPACE);
			if (depth == 2 && atom_comma(v, "rabbit") != NULL)
				*rabbit = in_rabbit = 1;
			else if (((depth == 4 && in_rabbit) ||
			          (depth == 2 && !*rabbit)) &&
			         (v = atom_comma(v, key)) != NULL)
				return v + strspn(v, ERL_SPACE);
			break;
		case '[':
			depth++;
			break;
		case '}':
		case ']':
			if (--depth < 2)
				in_rabbit = 0;
			break;
		default:
			break;
		}
	}
	return NULL;
}

/*
 * DLX_KEY in the text of /api/config/effective: 1 with *ms when rabbit's
 * list has it, 0 when it has it not (RabbitMQ's default applies), -1 when
 * there is no rabbit application or the value is not a number of ms.
 */
static int
dlx_timeout_parse(const char *s, int64_t *ms)
{
	int rabbit;
	const char *v = rabbit_env_find(s, DLX_KEY, &rabbit);
	char *end;

	if (v == NULL)
		return rabbit ? 0 : -1;
	if (*v < '0' || *v > '9')
		return -1;
	errno = 0;
	*ms = (int64_t)strtoll(v, &end, 10);
	end += strspn(end, ERL_SPACE);
	return errno == 0 && *end == '}' ? 1 : -1;
}

/*
 * Does rabbit's tcp_listeners in the text of /api/config/effective, such
 * as [5672] or [{"127.0.0.1",5672}], hold port?  1 also when it cannot be
 * told (no such key).
 */
static int
env_listens_on(const char *s, int port)
{
	int rabbit, depth = 0;
	const char *v = rabbit_env_find(s, "tcp_listeners", &rabbit);

	for (const char *p = v; p != NULL && *p != '\0'; p++) {
		if (*p == '"' || *p == '\'') {
			if ((p = erl_skip_quoted(p)) == NULL)
				return 1;
		} else if (*p == '[' || *p == '{') {
			depth++;
		} else if (*p == ']' || *p == '}') {
			if (depth-- == 0)
				return 0; /* the end of {tcp_listeners, ...} */
		} else if (*p >= '0' && *p <= '9' &&
		           (p == v || strchr("[{, \t\r\n", p[-1]) != NULL)) {
			char *end;
			long n = strtol(p, &end, 10);
			if (n == port)
				return 1;
			p = end - 1;
		}
	}
	return 1;
}

/* The value of "reason" in a management API error, or "". */
static void
mgmt_reason(const char *body, char *out, size_t size)
{
	const char *p = strstr(body, "\"reason\":\"");
	size_t n = 0;

	if (p != NULL) {
		p += 10;
		n = strcspn(p, "\"\\");
	}
	snprintf(out, size, "%.*s", (int)n, p ? p : "");
}

/*
 * DLX_KEY from the management API: --management, CASCADE_MANAGEMENT_URL,
 * or by default http://HOST:15672 of the amqp:// URL connected to, with
 * its user and password.  0 with *ms, or -1 with why in a few words.
 */
static int
dlx_confirm_timeout(const struct ctl *c, int64_t *ms, char *why, size_t whysize)
{
	static struct mgmt m;
	const char *url = c->management, *perr;
	const char *version = "";
	char auth[(sizeof(m.user) + sizeof(m.pass) + 2) / 3 * 4 + 8];
	char userpass[sizeof(m.user) + sizeof(m.pass) + 1], reason[128];
	char *text, vbuf[64];
	const amqp_field_value_t *vf;
	amqp_bytes_t vb;
	int status = 0, rc, has_effective = 0, amqp_port = 0;
	size_t n;

	memset(&m, 0, sizeof(m));
	if (url == NULL)
		url = getenv("CASCADE_MANAGEMENT_URL");
	if (url != NULL && url[0] == '\0') {
		snprintf(why, whysize,
		         "not asked: the management URL is empty");
		return -1;
	}
	/* The broker's user and password, unless the URL gives others. */
	{
		struct amqp_connection_info info;
		char copy[CONFIG_STR_MAX];
		snprintf(copy, sizeof(copy), "%s", c->url);
		if (amqp_parse_url(copy, &info) != AMQP_STATUS_OK) {
			snprintf(why, whysize, "bad broker URL");
			return -1;
		}
		if (url == NULL && info.ssl) {
			snprintf(why, whysize,
			         "amqps broker: give its management API with "
			         "--management http://HOST:15672");
			return -1;
		}
		amqp_port = info.port;
		snprintf(m.user, sizeof(m.user), "%s", info.user);
		snprintf(m.pass, sizeof(m.pass), "%s",
		         c->cfg.broker_password_set ? c->cfg.broker_password
		                                    : info.password);
		if (url == NULL) {
			snprintf(m.host, sizeof(m.host), "%s", info.host);
			snprintf(m.port, sizeof(m.port), "%s", MGMT_PORT);
			mgmt_finish(&m, "", 0);
		}
	}
	if (url != NULL && mgmt_parse(url, &m, &perr) < 0) {
		snprintf(why, whysize, "management URL: %s", perr);
		return -1;
	}
	snprintf(userpass, sizeof(userpass), "%s:%s", m.user, m.pass);
	/* Basic authentication: OpenSSL's base64, padded, one line. */
	n = strlen(userpass);
	if ((n + 2) / 3 * 4 + 1 > sizeof(auth)) {
		snprintf(why, whysize, "credentials too long");
		return -1;
	}
	EVP_EncodeBlock((unsigned char *)auth, (const unsigned char *)userpass,
	                (int)n);
	text = http_get(m.host, m.port, m.path, auth, MGMT_MAX, &status, why,
	                whysize);
	if (text == NULL) {
		snprintf(reason, sizeof(reason), "%.120s", why);
		snprintf(why, whysize, "no management API at %s: %s", m.shown,
		         reason);
		return -1;
	}
	vf = headers_find(amqp_get_server_properties(c->conn), "version");
	if (vf != NULL && headers_string(vf, &vb) == 0 && vb.len < 32) {
		unsigned major = 0, minor = 0;
		snprintf(vbuf, sizeof(vbuf), "RabbitMQ %.*s", (int)vb.len,
		         (const char *)vb.bytes);
		version = vbuf;
		if (sscanf(vbuf, "RabbitMQ %u.%u", &major, &minor) == 2)
			has_effective =
			    major > 3 || (major == 3 && minor >= 12);
	}
	if (status == 200) {
		rc = dlx_timeout_parse(text, ms);
		/* HOST:15672 may be another broker's, one on the standard
		 * ports beside this one: its listeners tell. */
		if (rc >= 0 && url == NULL &&
		    !env_listens_on(text, amqp_port)) {
			free(text);
			snprintf(why, whysize,
			         "%s belongs to another node (none of its "
			         "tcp_listeners is port %d): give --management",
			         m.shown, amqp_port);
			return -1;
		}
		free(text);
		if (rc == 0)
			*ms = DLX_DEFAULT_MS;
		if (rc >= 0)
			return 0;
		snprintf(why, whysize, "%s%s: not RabbitMQ's app env", m.shown,
		         m.path);
		return -1;
	}
	mgmt_reason(text, reason, sizeof(reason));
	free(text);
	if (status == 404 && version[0] != '\0' && !has_effective)
		snprintf(why, whysize,
		         "%s: no /api/config/effective in %s, only from 3.12",
		         m.shown, version);
	else if (status == 404 && version[0] != '\0')
		snprintf(why, whysize,
		         "%s: no /api/config/effective, which %s has: another "
		         "path prefix?",
		         m.shown, version);
	else if (status == 404)
		snprintf(
		    why, whysize,
		    "%s: no /api/config/effective (RabbitMQ 3.12 and later)",
		    m.shown);
	else if ((status == 401 || status == 403) &&
	         (strstr(reason, "administrator") != NULL ||
	          strstr(reason, "management user") != NULL))
		snprintf(why, whysize, "%s: user %s is not an administrator",
		         m.shown, m.user);
	else if (status == 401 || status == 403)
		snprintf(why, whysize, "%s refused user %s (HTTP %d%s%s)",
		         m.shown, m.user, status, reason[0] ? ": " : "",
		         reason);
	else
		snprintf(why, whysize, "%s: HTTP %d%s%s", m.shown, status,
		         reason[0] ? " " : "", reason);
	return -1;
}

/* The last line of status, or its JSON members; a warning at the default. */
static void
status_dlx(const struct ctl *c)
{
	int64_t ms = 0;
	char why[4096], shown[32];
	int known = dlx_confirm_timeout(c, &ms, why, sizeof(why)) == 0;

	if (c->json) {
		printf(",\"dlx_confirm_timeout_ms\":");
		if (known)
			printf("%" PRId64, ms);
		else
			printf("null");
		printf(",\"dlx_confirm_timeout_source\":");
		json_str(stdout, known ? "management" : why);
	} else if (known) {
		if (ms % 1000 == 0)
			snprintf(shown, sizeof(shown), "%" PRId64 "s",
			         ms / 1000);
		else
			snprintf(shown, sizeof(shown), "%" PRId64 "ms", ms);
		printf(
		    "\ndead-letter re-send after a broker restart: %s (" DLX_KEY
		    "%s)\n",
		    shown, ms == DLX_DEFAULT_MS ? ", RabbitMQ's default" : "");
	} else {
		printf("\ndead-letter re-send after a broker restart: unknown "
		       "(%s); " DLX_CONSEQUENCE "\n",
		       why);
	}
	if (known && ms == DLX_DEFAULT_MS) {
		fflush(stdout);
		fprintf(stderr, PROG
		        ": warning: the broker's " DLX_KEY " is RabbitMQ's "
		        "default, 180 s: after a broker restart, messages "
		        "that were expiring can arrive up to 3 minutes "
		        "late; set it in advanced.config "
		        "(conf/advanced.config: 10 s)\n");
	}
}

#define STATUS_ROW "%-8s %-*s %10s %7s %10s %10s\n"

static void
status_text_queue(const struct qinfo *q, const char *label, int width)
{
	char ttl[32] = "-", about[32] = "-", messages[16], consumers[16];

	if (q->ttl >= 0) {
		duration_format(q->ttl, ttl, sizeof(ttl));
		format_about(q->ttl, about, sizeof(about));
	}
	if (q->missing) {
		snprintf(messages, sizeof(messages), "missing");
		snprintf(consumers, sizeof(consumers), "-");
	} else {
		snprintf(messages, sizeof(messages), "%" PRIu32, q->messages);
		snprintf(consumers, sizeof(consumers), "%" PRIu32,
		         q->consumers);
	}
	printf(STATUS_ROW, label, width, q->name, ttl, about, messages,
	       consumers);
}

/*
 * A shard with messages in its ladder and no daemon on its return queue:
 * they wait there until one consumes it ([topology] consume_shards).
 */
static unsigned
status_unconsumed(const struct qinfo *levels, const struct qinfo *ret,
                  unsigned n, unsigned shards)
{
	unsigned bad = 0;

	for (unsigned s = 0; s < shards; s++) {
		uint64_t waiting = 0;
		for (unsigned k = 0; k < n; k++)
			waiting += levels[s * n + k].messages;
		if (ret[s].missing || ret[s].consumers > 0 ||
		    waiting + ret[s].messages == 0)
			continue;
		if (shards > 1)
			fprintf(stderr,
			        PROG
			        ": warning: %s has no consumer and shard %u "
			        "holds %" PRIu64 " messages: is a daemon "
			        "running, and does some daemon's [topology] "
			        "consume_shards include %u?\n",
			        ret[s].name, s, waiting + ret[s].messages, s);
		else
			fprintf(stderr,
			        PROG
			        ": warning: %s has no consumer and the ladder "
			        "holds %" PRIu64 " messages: is a daemon "
			        "running?\n",
			        ret[s].name, waiting + ret[s].messages);
		bad++;
	}
	return bad;
}

static int
ctl_status(struct ctl *c)
{
	static const char *const labels[] = {"ingress", "return", "retry",
	                                     "error"};
	const struct topology *t = &c->topo;
	unsigned n = t->levels, shards = t->shards, nlevels = shards * n;
	unsigned missing = 0;
	struct qinfo *levels, *rets, other[4];
	uint64_t waiting = 0;
	char res[32], url[CONFIG_STR_MAX];
	int width = 5;

	/* every shard's levels, their return queues, then a former
	 * layout's drained return queues and the delay queues that feed them */
	unsigned ndrain = t->drains * (n + 1), all = nlevels + shards + ndrain;
	uint64_t draining = 0;

	levels = calloc(all, sizeof(*levels));
	if (levels == NULL) {
		snprintf(c->err, sizeof(c->err), "out of memory");
		return -1;
	}
	rets = levels + nlevels;
	for (unsigned i = 0; i < nlevels; i++)
		levels[i] = (struct qinfo){t->delay[i],
		                           c->ladder.ttl[i % n],
		                           shards > 1 ? (int)(i / n) : -1,
		                           0,
		                           0,
		                           0};
	for (unsigned s = 0; s < shards; s++)
		rets[s] = (struct qinfo){
		    t->ret[s], -1, shards > 1 ? (int)s : -1, 0, 0, 0};
	for (unsigned i = 0; i < t->drains; i++)
		rets[shards + i] = (struct qinfo){t->drain[i], -1, -1, 0, 0, 0};
	for (unsigned i = 0; i < t->drains * n; i++)
		rets[shards + t->drains + i] = (struct qinfo){
		    t->drain_delay[i], c->ladder.ttl[i % n], -1, 0, 0, 0};
	for (unsigned i = 0; i < all; i++) {
		if (ctl_inspect(c, BROKER_CH_CHECK, &levels[i]) < 0) {
			free(levels);
			return -1;
		}
		if (i < nlevels)
			waiting += levels[i].messages;
		if (i >= nlevels + shards)
			draining += levels[i].messages; /* gone is drained */
		else
			missing += (unsigned)levels[i].missing;
	}
	other[0] = (struct qinfo){t->ingress, -1, -1, 0, 0, 0};
	other[1] = rets[0];
	other[2] = (struct qinfo){t->retry, -1, -1, 0, 0, 0};
	other[3] = (struct qinfo){t->error, -1, -1, 0, 0, 0};
	for (int i = 0; i < 4; i++) {
		if (i != 1 && ctl_inspect(c, BROKER_CH_CHECK, &other[i]) < 0) {
			free(levels);
			return -1;
		}
		if (i != 1)
			missing += (unsigned)other[i].missing;
	}

	if (c->json) {
		printf("{\"prefix\":");
		json_str(stdout, c->cfg.topology_prefix);
		printf(",\"exchange\":");
		json_str(stdout, t->exchange);
		printf(",\"shards\":%u", shards);
		/* every shard's levels, shard by shard */
		status_json_queues("levels", levels, nlevels);
		printf(",\"ladder_messages\":%" PRIu64, waiting);
		for (int i = 0; i < 4; i++) {
			printf(",\"%s\":", labels[i]);
			status_json_queue(&other[i]);
		}
		status_json_queues("returns", rets, shards);
		status_json_queues("draining", rets + shards, ndrain);
		printf(",\"draining_messages\":%" PRIu64, draining);
		printf(",\"missing\":%u", missing);
		status_targets(c);
		status_dlx(c);
		printf("}\n");
	} else {
		for (unsigned i = 0; i < all; i++)
			if ((int)strlen(levels[i].name) > width)
				width = (int)strlen(levels[i].name);
		for (int i = 0; i < 4; i++)
			if ((int)strlen(other[i].name) > width)
				width = (int)strlen(other[i].name);
		duration_format(c->ladder.ttl[0], res, sizeof(res));
		config_mask_url(c->cfg.broker_url, url, sizeof(url));
		printf("exchange %s on %s: %u delay levels from %s, factor "
		       "%" PRIu64,
		       t->exchange, url, n, res, c->cfg.topology_factor);
		if (shards > 1)
			printf(", %u shards", shards);
		printf("\n");
		for (unsigned s = 0; s < shards; s++) {
			if (shards > 1)
				printf("\nshard %u\n", s);
			else
				putchar('\n');
			printf(STATUS_ROW, "level", width, "queue", "ttl",
			       "about", "messages", "consumers");
			for (unsigned k = 0; k < n; k++) {
				char label[16];
				snprintf(label, sizeof(label), "%u", k);
				status_text_queue(&levels[s * n + k], label,
				                  width);
			}
			if (shards > 1)
				status_text_queue(&rets[s], "return", width);
		}
		putchar('\n');
		for (int i = 0; i < 4; i++)
			if (i != 1 || shards == 1)
				status_text_queue(&other[i], labels[i], width);
		for (unsigned i = 0; i < ndrain; i++)
			status_text_queue(&rets[shards + i], "draining", width);
		printf("\n%" PRIu64 " message%s waiting in the ladder, %" PRIu32
		       " parked in %s\n",
		       waiting, waiting == 1 ? "" : "s", other[3].messages,
		       other[3].name);
		/* Ready messages only: a daemon may still hold some, and
		 * the broker's dead-letter worker others (README). */
		if (t->drains > 0)
			printf("%" PRIu64 " ready in the former layout "
			       "([topology] drain_shards)%s\n",
			       draining,
			       draining == 0
			           ? ": once rabbitmqctl list_queues shows no "
			             "messages in these queues, unacknowledged "
			             "included, drain_shards can go"
			           : "");
		status_targets(c);
		status_dlx(c);
	}
	status_unconsumed(levels, rets, n, shards);
	free(levels);
	if (missing > 0)
		fprintf(stderr,
		        PROG ": %u queue%s missing: has cascade run with this "
		             "config (prefix %s)?\n",
		        missing, missing == 1 ? " is" : "s are",
		        c->cfg.topology_prefix);
	return 0;
}

/*
 * errors
 */

static void
errors_text(const struct ctl *c, uint64_t i, const amqp_message_t *m,
            const struct park_target *t)
{
	const amqp_basic_properties_t *p = &m->properties;
	amqp_bytes_t id = message_id(p);
	char due[64], body[BODY_PREVIEW * 4 + 8];
	int64_t n;

	if (t->reason.len > 0)
		printf("#%" PRIu64 " %.*s\n", i, (int)t->reason.len,
		       (const char *)t->reason.bytes);
	else
		printf("#%" PRIu64 " (no x-cascade-error)\n", i);
	if (t->has_exchange)
		printf("   target:     exchange '%.*s'", (int)t->exchange.len,
		       (const char *)t->exchange.bytes);
	else
		printf("   target:     default exchange ([router] "
		       "default_target_exchange)");
	if (ctl_rk_unknown(c, t))
		printf(", routing key not recorded\n");
	else
		printf(", routing key '%.*s'\n", (int)t->routing_key.len,
		       (const char *)t->routing_key.bytes);
	if (t->retry_gave_up)
		printf("   work queue: %.*s\n", (int)t->queue.len,
		       (const char *)t->queue.bytes);
	if (id.len > 0)
		printf("   message-id: %.*s\n", (int)id.len,
		       (const char *)id.bytes);
	if (t->has_due) {
		format_time(t->due, due, sizeof(due));
		printf("   due:        %s\n", due);
	}
	if (delivery_count(p, &n) && n > 0)
		printf("   handed out: %" PRId64 " time%s before "
		       "(x-delivery-count)\n",
		       n, n == 1 ? "" : "s");
	escape_preview(m->body, BODY_PREVIEW, body, sizeof(body));
	printf("   body:       %zu bytes \"%s\"\n", m->body.len, body);
}

static void
errors_json(const struct ctl *c, uint64_t i, const amqp_message_t *m,
            const struct park_target *t)
{
	const amqp_basic_properties_t *p = &m->properties;
	amqp_bytes_t id = message_id(p), head;
	char due[64];
	int64_t n;

	if (i > 1)
		putchar(',');
	printf("{\"reason\":");
	json_write(stdout, t->reason.bytes, t->reason.len);
	printf(",\"exchange\":");
	if (t->has_exchange)
		json_write(stdout, t->exchange.bytes, t->exchange.len);
	else
		printf("null");
	printf(",\"routing_key\":");
	if (ctl_rk_unknown(c, t))
		printf("null");
	else
		json_write(stdout, t->routing_key.bytes, t->routing_key.len);
	printf(",\"queue\":");
	if (t->retry_gave_up)
		json_write(stdout, t->queue.bytes, t->queue.len);
	else
		printf("null");
	printf(",\"message_id\":");
	if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
		json_write(stdout, id.bytes, id.len);
	else
		printf("null");
	if (t->has_due) {
		format_time(t->due, due, sizeof(due));
		printf(",\"due\":\"%s\",\"due_ms\":%" PRId64, due, t->due);
	} else {
		printf(",\"due\":null,\"due_ms\":null");
	}
	if (delivery_count(p, &n))
		printf(",\"delivery_count\":%" PRId64, n);
	else
		printf(",\"delivery_count\":null");
	/* The bytes themselves: JSON has its own escapes. */
	head = m->body;
	if (head.len > BODY_PREVIEW)
		head.len = BODY_PREVIEW;
	printf(",\"body_bytes\":%zu,\"body\":", m->body.len);
	json_write(stdout, head.bytes, head.len);
	putchar('}');
}

static int
ctl_errors(struct ctl *c)
{
	uint64_t limit = c->limit ? c->limit : ERRORS_LIMIT, shown = 0;
	uint64_t tag, last = 0;
	struct park_target t;
	amqp_message_t m;
	uint32_t total;
	char rk[KEY_MAX];
	int got, rc = 0;

	if (ctl_error_count(c, &total) < 0)
		return -1;
	if (c->json) {
		printf("{\"queue\":");
		json_str(stdout, c->topo.error);
		printf(",\"total\":%" PRIu32 ",\"messages\":[", total);
	} else {
		printf("%s: %" PRIu32 " parked message%s\n", c->topo.error,
		       total, total == 1 ? "" : "s");
	}
	while (shown < limit) {
		got = ctl_get(c, &tag, rk, &m);
		if (got < 0) {
			rc = -1;
			break;
		}
		if (got == 0)
			break;
		last = tag;
		shown++;
		park_target(&m.properties, amqp_cstring_bytes(rk), &t);
		if (c->json)
			errors_json(c, shown, &m, &t);
		else
			errors_text(c, shown, &m, &t);
		amqp_destroy_message(&m);
	}
	if (c->json)
		printf("],\"shown\":%" PRIu64 "}\n", shown);
	else if (shown < total)
		printf("(%" PRIu64 " of %" PRIu32 " shown; --limit N shows "
		       "more)\n",
		       shown, total);
	/* Every message stays where it was; a lost connection, too, would
	 * give them back. */
	if (rc == 0 && ctl_give_back(c, last, shown) < 0)
		rc = -1;
	return rc;
}

/*
 * requeue
 */

/* basic.return: the publish reached no queue. */
static void
ctl_returned(void *arg, const amqp_basic_return_t *r)
{
	struct ctl *c = arg;

	snprintf(c->unroutable, sizeof(c->unroutable),
	         "unroutable: %.*s (is %s bound to %s?)",
	         (int)r->reply_text.len, (const char *)r->reply_text.bytes,
	         c->topo.ingress, c->topo.exchange);
}

/* One line about a message: what was done, its target and its reason. */
static void
requeue_line(const struct ctl *c, const char *verb, const amqp_message_t *m,
             const struct park_target *t, const char *note)
{
	amqp_bytes_t id = message_id(&m->properties);
	char due[64];

	printf("%-13s message-id=%.*s", verb, id.len ? (int)id.len : 1,
	       id.len ? (const char *)id.bytes : "-");
	if (t->has_exchange)
		printf(" exchange='%.*s'", (int)t->exchange.len,
		       (const char *)t->exchange.bytes);
	else
		printf(" exchange=(default)");
	if (ctl_rk_unknown(c, t))
		printf(" routing_key=(not recorded)");
	else
		printf(" routing_key='%.*s'", (int)t->routing_key.len,
		       (const char *)t->routing_key.bytes);
	if (t->has_due) {
		format_time(t->due, due, sizeof(due));
		printf(" due=%s", due);
	}
	printf(" reason=\"%.*s\"", (int)t->reason.len,
	       (const char *)t->reason.bytes);
	if (note != NULL)
		printf(" (%s)", note);
	putchar('\n');
}

/* Whether the message's x-cascade-error contains c->reason. */
static int
reason_matches(const struct ctl *c, amqp_bytes_t reason)
{
	size_t n = strlen(c->reason);

	if (n == 0)
		return 1;
	for (size_t i = 0; i + n <= reason.len; i++)
		if (memcmp((const char *)reason.bytes + i, c->reason, n) == 0)
			return 1;
	return 0;
}

/* A passive declare of cascade's exchange P; -1 with c->err. */
static int
ctl_exchange_exists(struct ctl *c)
{
	amqp_rpc_reply_t r;
	char what[TOPOLOGY_NAME_MAX + 32];

	snprintf(what, sizeof(what), "exchange %s", c->topo.exchange);
	amqp_exchange_declare(
	    c->conn, BROKER_CH_CHECK, amqp_cstring_bytes(c->topo.exchange),
	    amqp_cstring_bytes("fanout"), 1, 0, 0, 0, amqp_empty_table);
	r = amqp_get_rpc_reply(c->conn);
	if (r.reply_type == AMQP_RESPONSE_NORMAL)
		return 0;
	if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
	    r.reply.id == AMQP_CHANNEL_CLOSE_METHOD &&
	    ctl_channel_closed(c, BROKER_CH_CHECK, r, what) == AMQP_NOT_FOUND)
		snprintf(c->err, sizeof(c->err),
		         "exchange %s does not exist: has cascade run with "
		         "this config (prefix %s)?",
		         c->topo.exchange, c->cfg.topology_prefix);
	else if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION ||
	         r.reply.id != AMQP_CHANNEL_CLOSE_METHOD)
		broker_reply_string(r, what, c->err, sizeof(c->err));
	return -1;
}

/*
 * Publish one parked message to P with its restored properties and wait for
 * the confirm: 0 sent, 1 refused (why), -1 with c->err.
 */
static int
ctl_resend(struct ctl *c, const amqp_message_t *m, const char *rk, char *why,
           size_t size)
{
	amqp_basic_properties_t props;
	struct park_target t;
	amqp_pool_t pool;
	uint64_t nacked = c->confirms.nacked, returned = c->confirms.returned;
	int st, rc;

	init_amqp_pool(&pool, 4096);
	park_target(&m->properties, amqp_cstring_bytes(rk), &t);
	if (park_requeue_props(&m->properties, amqp_cstring_bytes(rk), &pool,
	                       &props) < 0) {
		empty_amqp_pool(&pool);
		snprintf(c->err, sizeof(c->err), "out of memory");
		return -1;
	}
	/* P is a fanout: the routing key only names the target for people
	 * looking at the ingress queue; x-target-routing-key decides. */
	st = broker_confirm_publish(c->conn, &c->confirms,
	                            amqp_cstring_bytes(c->topo.exchange),
	                            t.routing_key, 1, &props, m->body);
	empty_amqp_pool(&pool);
	if (st != AMQP_STATUS_OK) {
		snprintf(c->err, sizeof(c->err), "publish: %s",
		         amqp_error_string2(st));
		return -1;
	}
	rc = broker_confirm_wait(c->conn, &c->confirms, 0, CONFIRM_MS, c->err,
	                         sizeof(c->err));
	amqp_maybe_release_buffers(c->conn);
	if (rc < 0)
		return -1;
	if (c->confirms.nacked > nacked) {
		snprintf(why, size, "the broker refused the publish (nack)");
		return 1;
	}
	if (c->confirms.returned > returned) {
		snprintf(why, size, "%s", c->unroutable);
		return 1;
	}
	return 0;
}

static int
ctl_requeue(struct ctl *c)
{
	uint64_t todo, done, sent = 0, would = 0, left = 0, failed = 0;
	uint64_t tag, last = 0;
	struct park_target t;
	amqp_message_t m;
	uint32_t total;
	char rk[KEY_MAX], why[1024];
	int got, st, rc = 0;

	if (ctl_error_count(c, &total) < 0)
		return -1;
	if (ctl_exchange_exists(c) < 0)
		return -1;
	if (!c->dry_run) {
		if (broker_confirm_select(c->conn, BROKER_CH_WORK, &c->confirms,
		                          c->err, sizeof(c->err)) < 0)
			return -1;
		c->confirms.on_return = ctl_returned;
		c->confirms.arg = c;
	}
	/* Only what is there now: a message parked again meanwhile goes to
	 * the back of the queue and is not taken twice. */
	todo = total;
	if (c->limit > 0 && c->limit < todo)
		todo = c->limit;

	for (done = 0; done < todo; done++) {
		got = ctl_get(c, &tag, rk, &m);
		if (got <= 0) {
			rc = got;
			break;
		}
		park_target(&m.properties, amqp_cstring_bytes(rk), &t);
		if (c->reason != NULL && !reason_matches(c, t.reason)) {
			/* Held unacked until the end, so that the next get
			 * does not return it again. */
			last = tag;
			left++;
			requeue_line(c, "left", &m, &t,
			             "reason does not match");
		} else if (ctl_rk_unknown(c, &t)) {
			last = tag;
			left++;
			failed++;
			requeue_line(c, "left", &m, &t,
			             "its routing key was not recorded when "
			             "it was parked");
		} else if (c->dry_run) {
			last = tag;
			would++;
			requeue_line(c, "would requeue", &m, &t, NULL);
		} else {
			st = ctl_resend(c, &m, rk, why, sizeof(why));
			if (st < 0) {
				amqp_destroy_message(&m);
				rc = -1;
				break;
			}
			if (st == 0) {
				/* Confirmed: only now may it leave P.error. */
				if (amqp_basic_ack(c->conn, BROKER_CH_WORK, tag,
				                   0) != AMQP_STATUS_OK) {
					snprintf(c->err, sizeof(c->err),
					         "basic.ack failed");
					amqp_destroy_message(&m);
					rc = -1;
					break;
				}
				sent++;
				requeue_line(c, "requeued", &m, &t, NULL);
			} else {
				last = tag;
				left++;
				failed++;
				requeue_line(c, "left", &m, &t, why);
			}
		}
		amqp_destroy_message(&m);
	}
	/* The nack covers only the messages not acked: those left. */
	if (rc == 0 && ctl_give_back(c, last, left + would) < 0)
		rc = -1;
	if (c->dry_run)
		printf("dry run: would requeue %" PRIu64 ", left %" PRIu64 "\n",
		       would, left);
	else
		printf("requeued %" PRIu64 ", left %" PRIu64 "\n", sent, left);
	if (rc == 0 && failed > 0) {
		snprintf(c->err, sizeof(c->err),
		         "%" PRIu64 " message%s could not be requeued", failed,
		         failed == 1 ? "" : "s");
		rc = -1;
	}
	return rc;
}

/*
 * list and cancel: the streams P.events and P.cancels (events.h)
 */

#define STREAM_PREFETCH 1000 /* records in flight per stream consumer */
#define STREAM_ACK_EVERY 250 /* ack (multiple) after this many records */
/* No record for this long before reaching our marker: give up.  An idle
 * limit, not a total one, so that a long stream may take its time. */
#define STREAM_IDLE_MS 30000
/* A cancellation of waiting messages holds this long past their due time. */
#define CANCEL_MARGIN_MS 86400000LL

/* A message still waiting: its scheduled record, copied. */
struct waiting {
	int64_t due, size, seen; /* seen: x-cascade-at, 0 unknown */
	amqp_bytes_t id, message_id, exchange, routing_key; /* in data */
	int cancel_pending;
	char data[];
};

/* What the streams say, folded. */
struct fold {
	struct idmap waiting; /* cascade id -> struct waiting */
	struct idmap ended;   /* cascade ids whose end came before scheduled */
	struct cancels cancels;
	uint64_t records;
};

struct stream {
	const char *name;
	const char *tag; /* our consumer tag */
	char marker[64]; /* the token of the marker we wrote */
	int reached;
};

/* The value of `ended`: idmap_get's NULL means absent. */
static char ended_mark;

static void
fold_init(struct fold *f)
{
	memset(f, 0, sizeof(*f));
	idmap_init(&f->waiting);
	idmap_init(&f->ended);
	cancels_init(&f->cancels);
}

static void
fold_free(struct fold *f)
{
	idmap_free(&f->waiting, free);
	idmap_free(&f->ended, NULL);
	cancels_free(&f->cancels);
}

static amqp_bytes_t
waiting_copy(char **p, amqp_bytes_t b)
{
	amqp_bytes_t out = {b.len, *p};

	if (b.len > 0)
		memcpy(*p, b.bytes, b.len);
	*p += b.len;
	return out;
}

static struct waiting *
waiting_new(const struct event *e)
{
	size_t n = e->id.len + e->message_id.len + e->exchange.len +
	           e->routing_key.len;
	struct waiting *w = malloc(sizeof(*w) + n + 1);
	char *p;

	if (w == NULL)
		return NULL;
	p = w->data;
	w->due = e->due;
	w->size = e->size;
	w->seen = e->at;
	w->cancel_pending = 0;
	w->id = waiting_copy(&p, e->id);
	w->message_id = waiting_copy(&p, e->message_id);
	w->exchange = waiting_copy(&p, e->exchange);
	w->routing_key = waiting_copy(&p, e->routing_key);
	return w;
}

/*
 * One record of P.events into f (a cancellation request: its copy, for
 * "cancel pending").  An end record whose scheduled one
 * has not been read (it aged out of the stream, or came late) is
 * remembered, so that a late scheduled record does not list a message
 * that is gone.  -1 out of memory.
 */
static int
fold_event(struct fold *f, const struct event *e)
{
	struct waiting *w;
	void *old;

	f->records++;
	switch (e->kind) {
	case EVENT_CANCEL:
		return cancels_add(&f->cancels, e->cancel, e->park, e->until);
	case EVENT_SCHEDULED:
		if (idmap_del(&f->ended, e->id) != NULL)
			return 0;
		if ((w = waiting_new(e)) == NULL)
			return -1;
		if (idmap_put(&f->waiting, e->id, w, &old) < 0) {
			free(w);
			return -1;
		}
		free(old); /* the same id again: the later record wins */
		return 0;
	case EVENT_DELIVERED:
	case EVENT_PARKED:
	case EVENT_CANCELLED:
		if ((w = idmap_del(&f->waiting, e->id)) != NULL) {
			free(w);
			return 0;
		}
		return idmap_put(&f->ended, e->id, &ended_mark, &old);
	default:
		return 0;
	}
}

/* The broker's channel.close or connection.close in words. */
static void
close_reason(const amqp_method_t *m, char *err, size_t size)
{
	if (m->id == AMQP_CHANNEL_CLOSE_METHOD) {
		const amqp_channel_close_t *cl = m->decoded;
		snprintf(err, size, "channel closed by the broker: %u %.*s",
		         cl->reply_code, (int)cl->reply_text.len,
		         (const char *)cl->reply_text.bytes);
	} else {
		const amqp_connection_close_t *cl = m->decoded;
		snprintf(err, size, "connection closed by the broker: %u %.*s",
		         cl->reply_code, (int)cl->reply_text.len,
		         (const char *)cl->reply_text.bytes);
	}
}

/* Whether stream name exists; -1 with c->err when not, or on an error. */
static int
ctl_stream_exists(struct ctl *c, const char *name)
{
	struct qinfo q = {name, -1, -1, 0, 0, 0};

	if (ctl_inspect(c, BROKER_CH_CHECK, &q) < 0)
		return -1;
	if (q.missing) {
		snprintf(c->err, sizeof(c->err),
		         "no stream %s: is [events] enabled = yes and has the "
		         "daemon run with this configuration?",
		         name);
		return -1;
	}
	return 0;
}

/* basic.return of a record: its stream is gone. */
static void
ctl_record_returned(void *arg, const amqp_basic_return_t *r)
{
	struct ctl *c = arg;

	snprintf(c->unroutable, sizeof(c->unroutable),
	         "unroutable: %.*s (was the stream deleted?)",
	         (int)r->reply_text.len, (const char *)r->reply_text.bytes);
}

/*
 * Append e to stream (exchange "", routing key the stream) and wait for
 * the broker's confirm: then it is in the stream, durably.  -1 with
 * c->err.
 */
static int
ctl_record(struct ctl *c, const char *stream, const struct event *e)
{
	amqp_basic_properties_t props;
	amqp_pool_t pool;
	uint64_t nacked, returned;
	int st;

	if (c->confirms.ch != BROKER_CH_PUB) {
		if (broker_confirm_select(c->conn, BROKER_CH_PUB, &c->confirms,
		                          c->err, sizeof(c->err)) < 0)
			return -1;
		c->confirms.on_return = ctl_record_returned;
		c->confirms.arg = c;
	}
	nacked = c->confirms.nacked;
	returned = c->confirms.returned;
	init_amqp_pool(&pool, 1024);
	if (events_props(e, &pool, &props) < 0) {
		empty_amqp_pool(&pool);
		snprintf(c->err, sizeof(c->err), "out of memory");
		return -1;
	}
	st = broker_confirm_publish(c->conn, &c->confirms, amqp_empty_bytes,
	                            amqp_cstring_bytes(stream), 1, &props,
	                            amqp_empty_bytes);
	empty_amqp_pool(&pool);
	if (st != AMQP_STATUS_OK) {
		snprintf(c->err, sizeof(c->err), "publish to %s: %s", stream,
		         amqp_error_string2(st));
		return -1;
	}
	if (broker_confirm_wait(c->conn, &c->confirms, 0, CONFIRM_MS, c->err,
	                        sizeof(c->err)) < 0)
		return -1;
	amqp_maybe_release_buffers(c->conn);
	if (c->confirms.returned > returned) {
		snprintf(c->err, sizeof(c->err), "%s: %s", stream,
		         c->unroutable);
		return -1;
	}
	if (c->confirms.nacked > nacked) {
		snprintf(c->err, sizeof(c->err),
		         "%s: the broker refused the record (nack)", stream);
		return -1;
	}
	return 0;
}

/* basic.consume of a stream from its first record. */
static int
ctl_stream_consume(struct ctl *c, const struct stream *s)
{
	amqp_table_entry_t arg;
	amqp_table_t args = {1, &arg};
	amqp_rpc_reply_t r;
	char what[TOPOLOGY_NAME_MAX + 32];

	arg.key = amqp_cstring_bytes("x-stream-offset");
	arg.value.kind = AMQP_FIELD_KIND_UTF8;
	arg.value.value.bytes = amqp_cstring_bytes("first");
	if (amqp_basic_consume(
	        c->conn, BROKER_CH_WORK, amqp_cstring_bytes(s->name),
	        amqp_cstring_bytes(s->tag), 0, 0, 0, args) != NULL)
		return 0;
	r = amqp_get_rpc_reply(c->conn);
	snprintf(what, sizeof(what), "read stream %s", s->name);
	broker_reply_string(r, what, c->err, sizeof(c->err));
	return -1;
}

/*
 * A frame that is not a delivery came while reading: a close or a
 * consumer cancelled by the broker (its stream deleted) is an error.
 */
static int
ctl_stream_frame(struct ctl *c)
{
	amqp_frame_t f;
	int st;

	if ((st = amqp_simple_wait_frame(c->conn, &f)) != AMQP_STATUS_OK) {
		snprintf(c->err, sizeof(c->err), "reading the streams: %s",
		         amqp_error_string2(st));
		return -1;
	}
	if (f.frame_type != AMQP_FRAME_METHOD)
		return 0;
	switch (f.payload.method.id) {
	case AMQP_CHANNEL_CLOSE_METHOD:
		if (f.channel != BROKER_CH_WORK)
			return 0;
		/* fall through */
	case AMQP_CONNECTION_CLOSE_METHOD:
		close_reason(&f.payload.method, c->err, sizeof(c->err));
		return -1;
	case AMQP_BASIC_CANCEL_METHOD: {
		const amqp_basic_cancel_t *k = f.payload.method.decoded;
		snprintf(c->err, sizeof(c->err),
		         "the broker stopped our reading (consumer %.*s): was "
		         "the stream deleted?",
		         (int)k->consumer_tag.len,
		         (const char *)k->consumer_tag.bytes);
		return -1;
	}
	default:
		return 0;
	}
}

/*
 * Read the streams s[0..n) from their first record up to a marker of ours,
 * written (and confirmed) first: so every record written before we began
 * is read.  Records after the marker are not folded: f is what the
 * streams held at one moment.  -1 with c->err.
 */
static int
ctl_streams_read(struct ctl *c, struct stream *s, int n, struct fold *f)
{
	uint64_t last = 0, acked = 0;
	struct event e;
	char id[17];
	int left = n, which;

	for (int i = 0; i < n; i++) {
		if (ctl_stream_exists(c, s[i].name) < 0)
			return -1;
	}
	for (int i = 0; i < n; i++) {
		events_new_id(id);
		snprintf(s[i].marker, sizeof(s[i].marker), "ctl-%d-%s",
		         (int)getpid(), id);
		memset(&e, 0, sizeof(e));
		e.kind = EVENT_MARKER;
		e.at = duration_wall_ms();
		e.marker = amqp_cstring_bytes(s[i].marker);
		if (ctl_record(c, s[i].name, &e) < 0)
			return -1;
	}
	/* Streams want a prefetch and manual acks. */
	amqp_basic_qos(c->conn, BROKER_CH_WORK, 0, STREAM_PREFETCH, 0);
	if (broker_check(c->conn, "basic.qos", c->err, sizeof(c->err)) < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		if (ctl_stream_consume(c, &s[i]) < 0)
			return -1;
	}
	while (left > 0) {
		struct timeval tv = {STREAM_IDLE_MS / 1000, 0};
		amqp_envelope_t env;
		amqp_rpc_reply_t r;

		amqp_maybe_release_buffers(c->conn);
		r = amqp_consume_message(c->conn, &env, &tv, 0);
		if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
		    r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
			if (ctl_stream_frame(c) < 0)
				return -1;
			continue;
		}
		if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
		    r.library_error == AMQP_STATUS_TIMEOUT) {
			for (which = 0; which < n && s[which].reached; which++)
				;
			snprintf(c->err, sizeof(c->err),
			         "nothing came from stream %s for %ds before "
			         "the marker written at start (%" PRIu64
			         " records read)",
			         s[which].name, STREAM_IDLE_MS / 1000,
			         f->records);
			return -1;
		}
		if (r.reply_type != AMQP_RESPONSE_NORMAL) {
			broker_reply_string(r, "reading the streams", c->err,
			                    sizeof(c->err));
			return -1;
		}
		for (which = 0; which < n; which++)
			if (headers_key_is(env.consumer_tag, s[which].tag))
				break;
		if (which < n && !s[which].reached &&
		    events_parse(&env.message.properties, &e) == 0) {
			if (e.kind == EVENT_MARKER) {
				if (headers_key_is(e.marker, s[which].marker)) {
					s[which].reached = 1;
					left--;
				}
			} else if (fold_event(f, &e) < 0) {
				amqp_destroy_envelope(&env);
				snprintf(c->err, sizeof(c->err),
				         "out of memory after %" PRIu64
				         " records",
				         f->records);
				return -1;
			}
		}
		last = env.delivery_tag;
		amqp_destroy_envelope(&env);
		if (last - acked >= STREAM_ACK_EVERY) {
			if (amqp_basic_ack(c->conn, BROKER_CH_WORK, last, 1) !=
			    AMQP_STATUS_OK) {
				snprintf(c->err, sizeof(c->err),
				         "basic.ack failed");
				return -1;
			}
			acked = last;
		}
	}
	/* Stop the deliveries: what came after the markers is not wanted. */
	amqp_channel_close(c->conn, BROKER_CH_WORK, AMQP_REPLY_SUCCESS);
	return broker_check(c->conn, "channel.close", c->err, sizeof(c->err));
}

/* Fold P.events (list does not read P.cancels: see ctl_cancel). */
static int
ctl_fold(struct ctl *c, struct fold *f)
{
	struct stream s;

	memset(&s, 0, sizeof(s));
	s.name = c->topo.events;
	s.tag = "cascade-ctl.events";
	return ctl_streams_read(c, &s, 1, f);
}

/* The default exchange, by either of its names. */
static int
exchange_is_default(amqp_bytes_t b)
{
	return b.len == 0 || headers_key_is(b, "amq.default");
}

static int
exchange_eq(amqp_bytes_t a, amqp_bytes_t b)
{
	if (exchange_is_default(a) || exchange_is_default(b))
		return exchange_is_default(a) && exchange_is_default(b);
	return a.len == b.len && memcmp(a.bytes, b.bytes, a.len) == 0;
}

/* memcmp's equality, for empty bytes too (whose pointer may be NULL). */
static int
mem_eq(const void *a, const void *b, size_t n)
{
	return n == 0 || memcmp(a, b, n) == 0;
}

/* Whether t is "<name>/<key>". */
static int
target_is(const char *t, size_t tlen, amqp_bytes_t name, amqp_bytes_t key)
{
	return tlen == name.len + 1 + key.len &&
	       mem_eq(t, name.bytes, name.len) && t[name.len] == '/' &&
	       mem_eq(t + name.len + 1, key.bytes, key.len);
}

/*
 * Whether w passes list's filters.  --target T matches a message whose
 * exchange is T, or whose "exchange/routing key" is T: exchange names and
 * keys may hold slashes themselves, so T is not split at one.
 */
static int
list_match(const struct ctl *c, const struct waiting *w)
{
	if (w->due >= c->due_before || w->due < c->due_after)
		return 0;
	if (c->target != NULL) {
		size_t n = strlen(c->target);
		amqp_bytes_t t = {n, (void *)c->target};
		if (exchange_eq(t, w->exchange))
			return 1;
		if (!exchange_is_default(w->exchange))
			return target_is(c->target, n, w->exchange,
			                 w->routing_key);
		return target_is(c->target, n, amqp_empty_bytes,
		                 w->routing_key) ||
		       target_is(c->target, n,
		                 amqp_cstring_bytes("amq.default"),
		                 w->routing_key);
	}
	return 1;
}

/* The rows list prints, gathered by list_gather. */
struct rows {
	const struct ctl *c;
	const struct fold *f;
	struct waiting **w;
	size_t n, cap, total;
	int oom;
};

static int
list_gather(amqp_bytes_t key, void *value, void *ctx)
{
	struct rows *r = ctx;
	struct waiting *w = value, **grown;

	(void)key;
	r->total++;
	if (!list_match(r->c, w) || r->oom)
		return 0;
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 256;
		if ((grown = realloc(r->w, cap * sizeof(*grown))) == NULL) {
			r->oom = 1;
			return 0;
		}
		r->w = grown;
		r->cap = cap;
	}
	w->cancel_pending = cancels_find(&r->f->cancels, w->message_id, w->id,
	                                 r->c->now) != NULL;
	r->w[r->n++] = w;
	return 0;
}

static int
bytes_cmp(amqp_bytes_t a, amqp_bytes_t b)
{
	size_t n = a.len < b.len ? a.len : b.len;
	int d = n ? memcmp(a.bytes, b.bytes, n) : 0;

	return d ? d : (a.len > b.len) - (a.len < b.len);
}

/* Soonest due first; then first seen, then id, so the order is stable. */
static int
list_cmp(const void *pa, const void *pb)
{
	const struct waiting *a = *(struct waiting *const *)pa;
	const struct waiting *b = *(struct waiting *const *)pb;

	if (a->due != b->due)
		return a->due < b->due ? -1 : 1;
	if (a->seen != b->seen)
		return a->seen < b->seen ? -1 : 1;
	return bytes_cmp(a->id, b->id);
}

/* What a row calls the message: its message-id, else its cascade id. */
static amqp_bytes_t
waiting_name(const struct waiting *w)
{
	return w->message_id.len > 0 ? w->message_id : w->id;
}

/* b for a terminal: control bytes and backslashes escaped, UTF-8 kept. */
static void
printable(amqp_bytes_t b, char *out, size_t size)
{
	const unsigned char *s = b.bytes;
	size_t o = 0;

	for (size_t i = 0; i < b.len && o + 5 < size; i++) {
		if (s[i] < 0x20 || s[i] == 0x7f || s[i] == '\\')
			o += (size_t)snprintf(out + o, size - o, "\\x%02x",
			                      s[i]);
		else
			out[o++] = (char)s[i];
	}
	out[o] = '\0';
}

/* "exchange/key", the default exchange as amq.default (as --target). */
static void
format_target(const struct waiting *w, char *out, size_t size)
{
	char ex[KEY_MAX * 4 + 8], key[KEY_MAX * 4 + 8];

	printable(w->exchange, ex, sizeof(ex));
	printable(w->routing_key, key, sizeof(key));
	snprintf(out, size, "%s/%s",
	         exchange_is_default(w->exchange) ? "amq.default" : ex, key);
}

/* How far from now: "in 3m12s", "3s ago", "now"; two units at most. */
static void
format_relative(int64_t delta, char *buf, size_t size)
{
	int64_t s = (delta < 0 ? -delta : delta) / 1000;
	char span[48];

	if (s == 0) {
		snprintf(buf, size, "now");
		return;
	}
	if (s >= 86400)
		snprintf(span, sizeof(span), "%" PRId64 "d", s / 86400);
	else if (s >= 3600)
		snprintf(span, sizeof(span), "%" PRId64 "h", s / 3600);
	else if (s >= 60)
		snprintf(span, sizeof(span), "%" PRId64 "m", s / 60);
	else
		snprintf(span, sizeof(span), "%" PRId64 "s", s);
	/* The next unit down, unless it is zero. */
	if (s >= 86400 && s % 86400 / 3600)
		snprintf(span + strlen(span), sizeof(span) - strlen(span),
		         "%" PRId64 "h", s % 86400 / 3600);
	else if (s >= 3600 && s < 86400 && s % 3600 / 60)
		snprintf(span + strlen(span), sizeof(span) - strlen(span),
		         "%" PRId64 "m", s % 3600 / 60);
	else if (s >= 60 && s < 3600 && s % 60)
		snprintf(span + strlen(span), sizeof(span) - strlen(span),
		         "%" PRId64 "s", s % 60);
	snprintf(buf, size, delta < 0 ? "%s ago" : "in %s", span);
}

static const char *const window_names[METRICS_NWINDOWS] = {"minute", "hour",
                                                           "day", "later"};

static void
list_json(const struct rows *r, size_t shown,
          const uint64_t counts[METRICS_NWINDOWS])
{
	char due[64], seen[64];

	printf("{\"waiting\":%zu,\"shown\":%zu,\"messages\":[", r->n, shown);
	for (size_t i = 0; i < shown; i++) {
		const struct waiting *w = r->w[i];
		amqp_bytes_t name = waiting_name(w);
		format_time(w->due, due, sizeof(due));
		printf("%s{\"id\":", i ? "," : "");
		json_write(stdout, name.bytes, name.len);
		printf(",\"message_id\":");
		if (w->message_id.len > 0)
			json_write(stdout, w->message_id.bytes,
			           w->message_id.len);
		else
			printf("null");
		printf(",\"cascade_id\":");
		json_write(stdout, w->id.bytes, w->id.len);
		printf(",\"due\":\"%s\",\"due_ms\":%" PRId64 ",\"exchange\":",
		       due, w->due);
		json_write(stdout, w->exchange.bytes, w->exchange.len);
		printf(",\"routing_key\":");
		json_write(stdout, w->routing_key.bytes, w->routing_key.len);
		printf(",\"size\":%" PRId64, w->size);
		if (w->seen > 0) {
			format_time(w->seen, seen, sizeof(seen));
			printf(
			    ",\"first_seen\":\"%s\",\"first_seen_ms\":%" PRId64,
			    seen, w->seen);
		} else {
			printf(",\"first_seen\":null,\"first_seen_ms\":null");
		}
		printf(",\"cancel_pending\":%s}",
		       w->cancel_pending ? "true" : "false");
	}
	printf("],\"counts\":{");
	for (int k = 0; k < METRICS_NWINDOWS; k++)
		printf("%s\"%s\":%" PRIu64, k ? "," : "", window_names[k],
		       counts[k]);
	printf("}}\n");
}

#define NAME_TEXT (KEY_MAX * 4 + 8)      /* an id or key, printable */
#define TARGET_TEXT (NAME_TEXT * 2 + 16) /* exchange/key */

static void
list_text(const struct ctl *c, const struct rows *r, size_t shown,
          const uint64_t counts[METRICS_NWINDOWS])
{
	char name[NAME_TEXT], target[TARGET_TEXT], due[64], seen[64], rel[64];
	int wid = 2, wtarget = 6;

	if (c->target != NULL || c->due_before != INT64_MAX ||
	    c->due_after != INT64_MIN)
		printf("%zu of %zu message%s waiting in %s match\n", r->n,
		       r->total, r->total == 1 ? "" : "s", c->topo.events);
	else
		printf("%zu message%s waiting in %s\n", r->n,
		       r->n == 1 ? "" : "s", c->topo.events);
	for (size_t i = 0; i < shown; i++) {
		printable(waiting_name(r->w[i]), name, sizeof(name));
		format_target(r->w[i], target, sizeof(target));
		if ((int)strlen(name) > wid)
			wid = (int)strlen(name);
		if ((int)strlen(target) > wtarget)
			wtarget = (int)strlen(target);
	}
	if (shown > 0)
		printf("%-*s  %-24s  %-10s  %-*s  %10s  %s\n", wid, "ID", "DUE",
		       "", wtarget, "TARGET", "SIZE", "FIRST SEEN");
	for (size_t i = 0; i < shown; i++) {
		const struct waiting *w = r->w[i];
		printable(waiting_name(w), name, sizeof(name));
		format_target(w, target, sizeof(target));
		format_time(w->due, due, sizeof(due));
		format_relative(w->due - c->now, rel, sizeof(rel));
		if (w->seen > 0)
			format_time(w->seen, seen, sizeof(seen));
		else
			snprintf(seen, sizeof(seen), "-");
		printf("%-*s  %-24s  %-10s  %-*s  %10" PRId64 "  %s%s\n", wid,
		       name, due, rel, wtarget, target, w->size, seen,
		       w->cancel_pending ? "  cancel pending" : "");
	}
	if (shown < r->n)
		printf("(%zu of %zu shown, %zu left out; --limit N shows "
		       "more)\n",
		       shown, r->n, r->n - shown);
	printf("due in <1m: %" PRIu64 ", 1m-1h: %" PRIu64 ", 1h-1d: %" PRIu64
	       ", >1d: %" PRIu64 "\n",
	       counts[0], counts[1], counts[2], counts[3]);
}

static int
ctl_list(struct ctl *c)
{
	uint64_t counts[METRICS_NWINDOWS] = {0};
	struct rows r;
	struct fold f;
	size_t shown;
	int rc = -1;

	memset(&r, 0, sizeof(r));
	fold_init(&f);
	if (ctl_fold(c, &f) < 0)
		goto out;
	r.c = c;
	r.f = &f;
	idmap_each(&f.waiting, list_gather, &r);
	if (r.oom) {
		snprintf(c->err, sizeof(c->err), "out of memory");
		goto out;
	}
	if (r.n > 1)
		qsort(r.w, r.n, sizeof(*r.w), list_cmp);
	/* Overdue counts as due within the minute, as in /metrics. */
	for (size_t i = 0; i < r.n; i++)
		counts[metrics_window(r.w[i]->due - c->now)]++;
	shown = c->limit > 0 && c->limit < r.n ? (size_t)c->limit : r.n;
	if (c->json)
		list_json(&r, shown, counts);
	else
		list_text(c, &r, shown, counts);
	rc = 0;
out:
	free(r.w);
	fold_free(&f);
	return rc;
}

/* How many waiting messages an id names (message-id or cascade id). */
struct matching {
	amqp_bytes_t id;
	uint64_t n;
	int64_t last_due; /* the latest due time among them */
};

static int
cancel_count(amqp_bytes_t key, void *value, void *ctx)
{
	struct matching *m = ctx;
	const struct waiting *w = value;

	(void)key;
	if (bytes_cmp(w->message_id, m->id) == 0 ||
	    bytes_cmp(w->id, m->id) == 0) {
		m->n++;
		if (w->due > m->last_due)
			m->last_due = w->due;
	}
	return 0;
}

/*
 * Record a cancel request in P.cancels for each id that names a waiting
 * message (or for every id, with --force).  0 every id recorded, 1 an id
 * named nothing and was not recorded, -1 with c->err.
 */
static int
ctl_cancel(struct ctl *c)
{
	struct fold f;
	struct event e;
	int rc = -1, unmatched = 0;

	fold_init(&f);
	if (ctl_fold(c, &f) < 0 || ctl_stream_exists(c, c->topo.cancels) < 0)
		goto out;
	for (int i = 0; i < c->nids; i++) {
		struct matching m = {amqp_cstring_bytes(c->ids[i]), 0, 0};
		idmap_each(&f.waiting, cancel_count, &m);
		if (m.n == 0 && !c->force) {
			fprintf(stderr,
			        PROG ": no waiting message has id %s; not "
			             "recorded (use --force to cancel it "
			             "before it is published)\n",
			        c->ids[i]);
			unmatched = 1;
			continue;
		}
		memset(&e, 0, sizeof(e));
		e.kind = EVENT_CANCEL;
		e.at = duration_wall_ms();
		e.cancel = m.id;
		e.park = c->park;
		/*
		 * Until a day after the latest of the messages it matched is
		 * due (they come by then at the latest, unless a target
		 * refuses them); before publishing (--force), as long as a
		 * message may wait.  Not longer: a later message that reuses
		 * the id is not cancelled.
		 */
		e.until = m.n > 0 ? (m.last_due > e.at ? m.last_due : e.at) +
		                        CANCEL_MARGIN_MS
		                  : e.at + config_events_max_age(&c->cfg);
		if (ctl_record(c, c->topo.cancels, &e) < 0)
			goto out;
		/* A copy in P.events, for list's "cancel pending": list does
		 * not read P.cancels, which every daemon replays. */
		if (ctl_record(c, c->topo.events, &e) < 0)
			goto out;
		if (m.n == 0)
			printf("%s: recorded; no waiting message has it yet\n",
			       c->ids[i]);
		else
			printf("%s: cancelled %" PRIu64
			       " waiting message%s%s\n",
			       c->ids[i], m.n, m.n == 1 ? "" : "s",
			       c->park ? " (to be parked)" : "");
		fflush(stdout);
	}
	rc = unmatched;
out:
	fold_free(&f);
	return rc;
}

/*
 * A time on the command line: ISO 8601 (2026-11-23T09:00:00Z, a fraction
 * and an offset +HH:MM allowed), Unix ms, or a duration from now ("10m",
 * "-5m").  -1 when it is none of them.
 */
static int
parse_when(const char *s, int64_t now, int64_t *out)
{
	static const char form[] = "dddd-dd-ddTdd:dd:dd";
	size_t n = strlen(s);
	const char *p, *why;
	struct tm tm;
	int64_t ms, frac = 0, scale = 100;
	char *end;
	int i, oh, om;

	if (n > 0 && strspn(s, "0123456789") == n) {
		errno = 0;
		ms = strtoll(s, &end, 10);
		if (errno != 0)
			return -1;
		*out = ms;
		return 0;
	}
	for (i = 0; form[i] != '\0'; i++)
		if (form[i] == 'd' ? s[i] < '0' || s[i] > '9' : s[i] != form[i])
			break;
	if (form[i] == '\0') {
		memset(&tm, 0, sizeof(tm));
		tm.tm_year = atoi(s) - 1900;
		tm.tm_mon = atoi(s + 5) - 1;
		tm.tm_mday = atoi(s + 8);
		tm.tm_hour = atoi(s + 11);
		tm.tm_min = atoi(s + 14);
		tm.tm_sec = atoi(s + 17);
		if (tm.tm_mon > 11 || tm.tm_mon < 0 || tm.tm_mday < 1 ||
		    tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
		    tm.tm_sec > 60)
			return -1;
		p = s + 19;
		if (*p == '.') {
			if (p[1] < '0' || p[1] > '9')
				return -1;
			for (p++; *p >= '0' && *p <= '9'; p++) {
				frac += (*p - '0') * scale;
				scale /= 10;
			}
		}
		ms = (int64_t)timegm(&tm) * 1000 + frac;
		if (strcmp(p, "Z") == 0) {
			*out = ms;
			return 0;
		}
		if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':' &&
		    sscanf(p + 1, "%2d:%2d", &oh, &om) == 2 && oh < 24 &&
		    om < 60) {
			*out = ms - (*p == '+' ? 1 : -1) *
			                ((int64_t)oh * 3600 + om * 60) * 1000;
			return 0;
		}
		return -1;
	}
	if (duration_parse(s, n, DURATION_BARE_REJECT, &ms, &why) < 0)
		return -1;
	*out = now + ms;
	return 0;
}

/*
 * main
 */

static int
parse_limit(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long n;

	if (*s < '0' || *s > '9')
		return -1;
	n = strtoull(s, &end, 10);
	if (*end != '\0' || n == 0)
		return -1;
	*out = n;
	return 0;
}

/* Which options a command takes, as a bit each. */
enum {
	OK_JSON = 1 << 0,
	OK_LIMIT = 1 << 1,
	OK_REQUEUE = 1 << 2, /* --reason, --dry-run */
	OK_FILTER = 1 << 3,  /* --target, --due-before, --due-after */
	OK_CANCEL = 1 << 4,  /* --park, --force */
	OK_MGMT = 1 << 5,    /* --management */
};

static const struct command {
	const char *name;
	int (*run)(struct ctl *);
	int options;
	int error_status; /* on an error; 2 for cancel, where 1 says more */
} commands[] = {
    {"status", ctl_status, OK_JSON | OK_MGMT, 1},
    {"errors", ctl_errors, OK_JSON | OK_LIMIT, 1},
    {"requeue", ctl_requeue, OK_LIMIT | OK_REQUEUE, 1},
    {"list", ctl_list, OK_JSON | OK_LIMIT | OK_FILTER, 1},
    {"cancel", ctl_cancel, OK_CANCEL, 2},
};

int
main(int argc, char *argv[])
{
	enum {
		OPT_DRY_RUN = 256,
		OPT_TARGET,
		OPT_DUE_BEFORE,
		OPT_DUE_AFTER,
		OPT_PARK,
		OPT_FORCE,
		OPT_MANAGEMENT,
	};
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"json", no_argument, NULL, 'j'},
	    {"limit", required_argument, NULL, 'n'},
	    {"reason", required_argument, NULL, 'r'},
	    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
	    {"target", required_argument, NULL, OPT_TARGET},
	    {"due-before", required_argument, NULL, OPT_DUE_BEFORE},
	    {"due-after", required_argument, NULL, OPT_DUE_AFTER},
	    {"park", no_argument, NULL, OPT_PARK},
	    {"force", no_argument, NULL, OPT_FORCE},
	    {"management", required_argument, NULL, OPT_MANAGEMENT},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static struct ctl c;
	const struct command *cmd = NULL;
	const char *path = NULL, *why;
	int ch, rc, used = 0;

	config_defaults(&c.cfg);
	c.now = duration_wall_ms();
	c.due_before = INT64_MAX;
	c.due_after = INT64_MIN;
	while ((ch = getopt_long(argc, argv, "c:jn:r:h", longopts, NULL)) !=
	       -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'j':
			c.json = 1;
			used |= OK_JSON;
			break;
		case 'n':
			if (parse_limit(optarg, &c.limit) < 0) {
				fprintf(stderr,
				        PROG ": --limit wants a positive "
				             "integer: %s\n",
				        optarg);
				return 2;
			}
			used |= OK_LIMIT;
			break;
		case 'r':
			c.reason = optarg;
			used |= OK_REQUEUE;
			break;
		case OPT_DRY_RUN:
			c.dry_run = 1;
			used |= OK_REQUEUE;
			break;
		case OPT_TARGET:
			c.target = optarg;
			used |= OK_FILTER;
			break;
		case OPT_DUE_BEFORE:
		case OPT_DUE_AFTER:
			if (parse_when(optarg, c.now,
			               ch == OPT_DUE_BEFORE
			                   ? &c.due_before
			                   : &c.due_after) < 0) {
				fprintf(stderr,
				        PROG
				        ": %s wants a time: "
				        "2026-11-23T09:00:00Z, Unix ms, or "
				        "a duration from now such as 10m: "
				        "%s\n",
				        ch == OPT_DUE_BEFORE ? "--due-before"
				                             : "--due-after",
				        optarg);
				return 2;
			}
			used |= OK_FILTER;
			break;
		case OPT_PARK:
			c.park = 1;
			used |= OK_CANCEL;
			break;
		case OPT_FORCE:
			c.force = 1;
			used |= OK_CANCEL;
			break;
		case OPT_MANAGEMENT: {
			static struct mgmt m;
			const char *perr;
			if (optarg[0] != '\0' &&
			    mgmt_parse(optarg, &m, &perr) < 0) {
				fprintf(stderr, PROG ": --management: %s\n",
				        perr);
				return 2;
			}
			c.management = optarg;
			used |= OK_MGMT;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage_short();
			return 2;
		}
	}
	if (optind == argc) {
		fprintf(stderr, PROG ": which command?\n");
		usage_short();
		return 2;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[optind], commands[i].name) == 0)
			cmd = &commands[i];
	if (cmd == NULL) {
		fprintf(stderr, PROG ": unknown command %s\n", argv[optind]);
		usage_short();
		return 2;
	}
	c.ids = argv + optind + 1;
	c.nids = argc - optind - 1;
	if (cmd->run == ctl_cancel) {
		if (c.nids == 0) {
			fprintf(stderr, PROG ": cancel: which id?\n");
			usage_short();
			return 2;
		}
		for (int i = 0; i < c.nids; i++) {
			size_t n = strlen(c.ids[i]);
			if (n == 0 || n > 255) {
				fprintf(stderr,
				        PROG ": cancel: an id has 1 to 255 "
				             "bytes (a message-id): '%s'\n",
				        c.ids[i]);
				return 2;
			}
		}
	} else if (c.nids > 0) {
		fprintf(stderr, PROG ": one command at a time\n");
		usage_short();
		return 2;
	}
	if (used & ~cmd->options) {
		fprintf(stderr, PROG ": option not valid for %s\n", cmd->name);
		usage_short();
		return 2;
	}

	if (path != NULL) {
		if (config_load(&c.cfg, path, c.err, sizeof(c.err)) < 0) {
			fputs(c.err, stderr);
			return cmd->error_status;
		}
	} else if (config_load_string(&c.cfg, "environment", "", c.err,
	                              sizeof(c.err)) < 0) {
		/* No file: the defaults, and CASCADE_BROKER_URL and
		 * CASCADE_BROKER_PASSWORD checked as the daemon checks them. */
		fputs(c.err, stderr);
		return cmd->error_status;
	}
	if (ladder_init(&c.ladder, c.cfg.topology_resolution,
	                c.cfg.topology_factor, config_levels(&c.cfg),
	                &why) < 0) {
		fprintf(stderr, PROG ": ladder: %s\n", why);
		return cmd->error_status;
	}
	if (topology_names(&c.topo, c.cfg.topology_prefix, &c.ladder,
	                   (unsigned)c.cfg.topology_shards,
	                   (unsigned)c.cfg.topology_drain_shards) < 0) {
		fprintf(stderr, PROG ": out of memory\n");
		return cmd->error_status;
	}

	/* Keeps the URL it connected to: status asks that broker's
	 * management API. */
	c.conn = broker_connect_which(&c.cfg, c.url, sizeof(c.url), c.err,
	                              sizeof(c.err));
	if (c.conn == NULL) {
		fprintf(stderr, PROG ": %s\n", c.err);
		return cmd->error_status;
	}
	rc = cmd->run(&c);
	topology_free(&c.topo);
	fflush(stdout);
	if (rc < 0)
		fprintf(stderr, PROG ": %s\n", c.err);
	if (c.most_deliveries >= WORN)
		fprintf(stderr,
		        PROG ": warning: parked messages were handed out up to "
		             "%" PRId64 " times (x-delivery-count); from "
		             "RabbitMQ 4.0 a quorum queue drops a message past "
		             "its delivery-limit (default 20), and before 4.3 "
		             "every look with errors counts: give %s a "
		             "delivery-limit policy or a dead-letter target\n",
		        c.most_deliveries, c.topo.error);
	/* A clean close: the broker has handled every ack and nack first. */
	amqp_connection_close(c.conn, AMQP_REPLY_SUCCESS);
	amqp_destroy_connection(c.conn);
	return rc < 0 ? cmd->error_status : rc;
}
