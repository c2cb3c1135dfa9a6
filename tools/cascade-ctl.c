/*
 * cascade-ctl: look at a running cascade's queues, and send parked messages
 * back once the cause of their parking is fixed.
 *
 *   cascade-ctl -c /etc/cascade/cascade.ini status [--json]
 *   cascade-ctl -c cascade.ini errors [--limit N] [--json]
 *   cascade-ctl -c cascade.ini requeue [--limit N] [--reason TEXT] [--dry-run]
 *
 * Everything it learns comes from the broker (passive queue.declare and
 * basic.get): it works whether the daemon runs or not.
 */
#include "amqp_compat.h"
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
#include "headers.h"
#include "httpd.h"
#include "json.h"
#include "ladder.h"
#include "park.h"
#include "topology.h"

#define PROG "cascade-ctl"
#define ERRORS_LIMIT 100 /* messages `errors` shows by default */
#define BODY_PREVIEW 60  /* bytes of each body `errors` shows */
#define CONFIRM_MS 30000 /* how long a publish may wait for its confirm */
#define WORN 10     /* x-delivery-count worth a warning: see delivery_count */
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
	struct broker_confirms confirms; /* of BROKER_CH_WORK, requeue only */
	char unroutable[1024];           /* what the last basic.return said */
	int64_t most_deliveries;         /* highest x-delivery-count seen */
	char err[8192];
};

/* One queue as a passive declare saw it. */
struct qinfo {
	const char *name;
	int64_t ttl; /* delay levels only, else -1 */
	int missing;
	uint32_t messages, consumers;
};

/* What a usage error prints: the synopsis, not the whole help. */
static void
usage_short(void)
{
	fprintf(stderr, "usage: " PROG " [-c FILE] status|errors|requeue "
	                "[options]; " PROG " --help for more\n");
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
	    "consumers\n"
	    "  errors              the parked messages in P.error with their "
	    "reasons;\n"
	    "                      they stay in the queue\n"
	    "  requeue             send parked messages back through "
	    "cascade's exchange,\n"
	    "                      with their target and due time, once the "
	    "cause is fixed\n"
	    "\n"
	    "options:\n"
	    "  -c, --config FILE   cascade's config: broker URL, prefix, "
	    "ladder\n"
	    "                      (default: the built-in defaults)\n"
	    "  -j, --json          status, errors: one JSON object\n"
	    "  -n, --limit N       errors: show at most N (default %d); "
	    "requeue: at most N\n"
	    "  -r, --reason TEXT   requeue: only messages whose "
	    "x-cascade-error contains TEXT\n"
	    "      --dry-run       requeue: say what would be sent, send "
	    "nothing\n"
	    "  -h, --help          this text\n"
	    "\n"
	    "CASCADE_BROKER_URL, when set, overrides the URL, and "
	    "CASCADE_BROKER_PASSWORD\n"
	    "gives the password.  Exit status: 0 done,\n"
	    "1 error (broker, config, a message not requeued), 2 usage.\n",
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
	struct qinfo q = {c->topo.error, -1, 0, 0, 0};

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

/* Give back every unacked message up to tag, in order, uncounted as a
 * failed delivery (basic.nack, unlike basic.reject, does not raise a quorum
 * queue's delivery-count on RabbitMQ 4.3 and later). */
static int
ctl_give_back(struct ctl *c, uint64_t tag)
{
	if (tag == 0)
		return 0;
	if (amqp_basic_nack(c->conn, BROKER_CH_WORK, tag, 1, 1) !=
	    AMQP_STATUS_OK) {
		snprintf(c->err, sizeof(c->err), "basic.nack failed");
		return -1;
	}
	return 0;
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
#define METRICS_MAX (512 * 1024)

struct refusing {
	char exchange[KEY_MAX], routing_key[KEY_MAX];
	double refusals, diverted, backoff;
};

/* GET /metrics from listen into a malloc'd string; NULL with why. */
static char *
metrics_fetch(const char *listen, char *why, size_t whysize)
{
	char host[256], port[16], req[512];
	const char *perr;
	struct addrinfo hints, *res = NULL;
	struct timeval tv = {2, 0};
	char *buf = NULL, *body;
	size_t len = 0;
	ssize_t n;
	int fd = -1, rc;

	if (httpd_parse_listen(listen, host, sizeof(host), port, sizeof(port),
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
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if ((rc = getaddrinfo(host, port, &hints, &res)) != 0) {
		snprintf(why, whysize, "%s", gai_strerror(rc));
		return NULL;
	}
	fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
		snprintf(why, whysize, "no daemon answers there");
		goto fail;
	}
	snprintf(req, sizeof(req), "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n",
	         host);
	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req) ||
	    (buf = malloc(METRICS_MAX + 1)) == NULL) {
		snprintf(why, whysize, "cannot ask");
		goto fail;
	}
	while (len < METRICS_MAX &&
	       (n = read(fd, buf + len, METRICS_MAX - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	body = strstr(buf, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.", 7) != 0 || strstr(buf, " 200 ") == NULL ||
	    body == NULL) {
		snprintf(why, whysize, "no /metrics there");
		goto fail;
	}
	memmove(buf, body + 4, strlen(body + 4) + 1);
	close(fd);
	freeaddrinfo(res);
	return buf;
fail:
	free(buf);
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	return NULL;
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

static int
ctl_status(struct ctl *c)
{
	static const char *const labels[] = {"ingress", "return", "retry",
	                                     "error"};
	struct qinfo levels[LADDER_MAX_LEVELS], other[4];
	unsigned n = c->topo.levels, missing = 0;
	uint64_t waiting = 0;
	char res[32], url[CONFIG_STR_MAX];
	int width = 5;

	for (unsigned k = 0; k < n; k++) {
		levels[k] =
		    (struct qinfo){c->topo.delay[k], c->ladder.ttl[k], 0, 0, 0};
		if (ctl_inspect(c, BROKER_CH_CHECK, &levels[k]) < 0)
			return -1;
		waiting += levels[k].messages;
		missing += (unsigned)levels[k].missing;
	}
	other[0] = (struct qinfo){c->topo.ingress, -1, 0, 0, 0};
	other[1] = (struct qinfo){c->topo.ret, -1, 0, 0, 0};
	other[2] = (struct qinfo){c->topo.retry, -1, 0, 0, 0};
	other[3] = (struct qinfo){c->topo.error, -1, 0, 0, 0};
	for (int i = 0; i < 4; i++) {
		if (ctl_inspect(c, BROKER_CH_CHECK, &other[i]) < 0)
			return -1;
		missing += (unsigned)other[i].missing;
	}

	if (c->json) {
		printf("{\"prefix\":");
		json_str(stdout, c->cfg.topology_prefix);
		printf(",\"exchange\":");
		json_str(stdout, c->topo.exchange);
		printf(",\"levels\":[");
		for (unsigned k = 0; k < n; k++) {
			if (k > 0)
				putchar(',');
			status_json_queue(&levels[k]);
		}
		printf("],\"ladder_messages\":%" PRIu64, waiting);
		for (int i = 0; i < 4; i++) {
			printf(",\"%s\":", labels[i]);
			status_json_queue(&other[i]);
		}
		printf(",\"missing\":%u", missing);
		status_targets(c);
		printf("}\n");
	} else {
		for (unsigned k = 0; k < n; k++)
			if ((int)strlen(levels[k].name) > width)
				width = (int)strlen(levels[k].name);
		for (int i = 0; i < 4; i++)
			if ((int)strlen(other[i].name) > width)
				width = (int)strlen(other[i].name);
		duration_format(c->ladder.ttl[0], res, sizeof(res));
		config_mask_url(c->cfg.broker_url, url, sizeof(url));
		printf("exchange %s on %s: %u delay levels from %s, factor "
		       "%" PRIu64 "\n\n",
		       c->topo.exchange, url, n, res, c->cfg.topology_factor);
		printf(STATUS_ROW, "level", width, "queue", "ttl", "about",
		       "messages", "consumers");
		for (unsigned k = 0; k < n; k++) {
			char label[16];
			snprintf(label, sizeof(label), "%u", k);
			status_text_queue(&levels[k], label, width);
		}
		putchar('\n');
		for (int i = 0; i < 4; i++)
			status_text_queue(&other[i], labels[i], width);
		printf("\n%" PRIu64 " message%s waiting in the ladder, %" PRIu32
		       " parked in %s\n",
		       waiting, waiting == 1 ? "" : "s", other[3].messages,
		       other[3].name);
		status_targets(c);
	}
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
	if (rc == 0 && ctl_give_back(c, last) < 0)
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
	if (rc == 0 && ctl_give_back(c, last) < 0)
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

int
main(int argc, char *argv[])
{
	enum { OPT_DRY_RUN = 256 };
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"json", no_argument, NULL, 'j'},
	    {"limit", required_argument, NULL, 'n'},
	    {"reason", required_argument, NULL, 'r'},
	    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static struct ctl c;
	const char *path = NULL, *cmd, *why;
	int ch, rc;

	config_defaults(&c.cfg);
	while ((ch = getopt_long(argc, argv, "c:jn:r:h", longopts, NULL)) !=
	       -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'j':
			c.json = 1;
			break;
		case 'n':
			if (parse_limit(optarg, &c.limit) < 0) {
				fprintf(stderr,
				        PROG ": --limit wants a positive "
				             "integer: %s\n",
				        optarg);
				return 2;
			}
			break;
		case 'r':
			c.reason = optarg;
			break;
		case OPT_DRY_RUN:
			c.dry_run = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage_short();
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, PROG ": %s\n",
		        optind == argc ? "which command?"
		                       : "one command at a time");
		usage_short();
		return 2;
	}
	cmd = argv[optind];
	if (strcmp(cmd, "status") != 0 && strcmp(cmd, "errors") != 0 &&
	    strcmp(cmd, "requeue") != 0) {
		fprintf(stderr, PROG ": unknown command %s\n", cmd);
		usage_short();
		return 2;
	}
	if ((c.json && strcmp(cmd, "requeue") == 0) ||
	    (c.limit > 0 && strcmp(cmd, "status") == 0) ||
	    ((c.reason != NULL || c.dry_run) && strcmp(cmd, "requeue") != 0)) {
		fprintf(stderr, PROG ": option not valid for %s\n", cmd);
		usage_short();
		return 2;
	}

	if (path != NULL) {
		if (config_load(&c.cfg, path, c.err, sizeof(c.err)) < 0) {
			fputs(c.err, stderr);
			return 1;
		}
	} else if (config_load_string(&c.cfg, "environment", "", c.err,
	                              sizeof(c.err)) < 0) {
		/* No file: the defaults, and CASCADE_BROKER_URL and
		 * CASCADE_BROKER_PASSWORD checked as the daemon checks them. */
		fputs(c.err, stderr);
		return 1;
	}
	if (ladder_init(&c.ladder, c.cfg.topology_resolution,
	                c.cfg.topology_factor, (unsigned)c.cfg.topology_levels,
	                &why) < 0) {
		fprintf(stderr, PROG ": ladder: %s\n", why);
		return 1;
	}
	topology_names(&c.topo, c.cfg.topology_prefix, &c.ladder);

	c.conn = broker_connect(&c.cfg, c.err, sizeof(c.err));
	if (c.conn == NULL) {
		fprintf(stderr, PROG ": %s\n", c.err);
		return 1;
	}
	if (strcmp(cmd, "status") == 0)
		rc = ctl_status(&c);
	else if (strcmp(cmd, "errors") == 0)
		rc = ctl_errors(&c);
	else
		rc = ctl_requeue(&c);
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
	return rc < 0 ? 1 : 0;
}
