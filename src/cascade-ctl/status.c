/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status: each delay level and the ingress, return, retry and error
 * queues (TTL, messages, consumers), the targets the daemon says refused
 * deliveries, and the broker's dead-letter re-send timeout.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "httpget.h"
#include "duration.h"
#include "json.h"
#include "mgmt.h"
#include "prom.h"

#define TARGETS_SHOWN 50
/* What the default costs (docs/rabbitmq-versions.md, "A broker that holds
 * other queues"): a restarting node brings its quorum queues up one after
 * the other, and a delay level up before the rest keeps what fell due for
 * a whole timeout. */
#define DLX_CONSEQUENCE                                                        \
	"at RabbitMQ's default, 180 s, messages that fell due during a "       \
	"broker restart can arrive 3 minutes late or more, and out of "        \
	"order, the more often the more quorum queues the broker holds; set "  \
	"dead_letter_worker_publisher_confirm_timeout in advanced.config "     \
	"(conf/advanced.config: 10 s)"

/* status's options. */
static struct {
	int json;
	const char *management; /* --management, or NULL */
} opts;

const struct ctl_option status_options[] = {
    {"json", 'j', 0},
    {"management", 0, 1},
    {NULL, 0, 0},
};

int
status_option(struct ctl *c, const char *name, const char *arg)
{
	(void)c;
	if (strcmp(name, "json") == 0) {
		opts.json = 1;
	} else {
		/* Checked now, so that a typo is a usage error (2). */
		static struct mgmt m;
		const char *perr;
		if (arg[0] != '\0' && mgmt_parse(arg, &m, &perr) < 0) {
			fprintf(stderr, PROG ": --management: %s\n", perr);
			return -1;
		}
		opts.management = arg;
	}
	return 0;
}

static void
status_json_queue(const struct qinfo *q)
{
	printf("{\"queue\":");
	json_write_str(stdout, q->name);
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

/* What the daemon's /metrics said of overdue returns (status_targets),
 * for status_dlx's advice: -1 when unknown. */
static double overdue_returns = -1, reorder_waiting = -1;

/* The daemon's overdue returns: text, or JSON members. */
static void
status_overdue(int known, const char *listen)
{
	if (opts.json) {
		printf(",\"overdue_returns\":");
		if (known && overdue_returns >= 0)
			printf("%.0f", overdue_returns);
		else
			printf("null");
		printf(",\"reorder_messages\":");
		if (known && reorder_waiting >= 0)
			printf("%.0f", reorder_waiting);
		else
			printf("null");
		return;
	}
	if (!known || overdue_returns < 0)
		return;
	printf("overdue returns: %.0f since the daemon at %s started (came "
	       "back from the ladder over 1 s past their time)",
	       overdue_returns, listen);
	if (reorder_waiting > 0)
		printf(", %.0f waiting in the reorder window", reorder_waiting);
	printf("\n");
}

/* The targets section of status: text, or a JSON member. */
static void
status_targets(const struct ctl *c)
{
	static struct prom_target t[TARGETS_SHOWN];
	const char *listen = c->cfg.metrics_listen;
	char why[256] = "[metrics] listen is empty", *text = NULL;
	size_t n = 0;

	const char *mode = NULL;

	if (listen[0] != '\0')
		text = httpget_metrics(listen, why, sizeof(why));
	if (text != NULL) {
		mode = prom_wait_mode(text);
		if (!prom_value(text, "cascade_overdue_returns_total",
		                &overdue_returns))
			overdue_returns = -1;
		if (!prom_value(text, "cascade_reorder_messages",
		                &reorder_waiting))
			reorder_waiting = -1;
		n = prom_targets_parse(text, t, TARGETS_SHOWN);
	}
	free(text);
	if (opts.json) {
		status_overdue(text != NULL, listen);
		printf(",\"wait_mode\":");
		json_write_or_null(stdout, mode != NULL, mode,
		                   mode ? strlen(mode) : 0);
		printf(",\"targets\":");
		if (text == NULL) {
			printf("null");
			return;
		}
		putchar('[');
		for (size_t i = 0; i < n; i++) {
			printf("%s{\"exchange\":", i ? "," : "");
			json_write_str(stdout, t[i].exchange);
			printf(",\"routing_key\":");
			json_write_str(stdout, t[i].routing_key);
			printf(",\"refusals\":%.0f,\"diverted\":%.0f,"
			       "\"backoff_seconds\":%.3f}",
			       t[i].refusals, t[i].diverted, t[i].backoff);
		}
		putchar(']');
		return;
	}
	if (text == NULL) {
		printf("\nwaiting mode and refusing targets: unknown (the "
		       "daemon's /metrics at %s: %s)\n",
		       listen[0] ? listen : "-", why);
		return;
	}
	printf("\nwaiting mode: %s (daemon at %s)\n",
	       mode ? mode : "not chosen yet", listen);
	status_overdue(1, listen);
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

/* The last line of status, or its JSON members; a warning at the default. */
static void
status_dlx(const struct ctl *c)
{
	int64_t ms = 0;
	char why[4096], shown[32];
	int known =
	    dlx_confirm_timeout(c, opts.management, &ms, why, sizeof(why)) == 0;

	if (opts.json) {
		printf(",\"dlx_confirm_timeout_ms\":");
		if (known)
			printf("%" PRId64, ms);
		else
			printf("null");
		printf(",\"dlx_confirm_timeout_source\":");
		json_write_str(stdout, known ? "management" : why);
	} else if (known) {
		duration_format_as(ms, DURATION_SECONDS, shown, sizeof(shown));
		printf("\ndead-letter re-send after a broker restart: %s "
		       "(" MGMT_DLX_KEY "%s)\n",
		       shown,
		       ms == MGMT_DLX_DEFAULT_MS ? ", RabbitMQ's default" : "");
	} else {
		printf("\ndead-letter re-send after a broker restart: unknown "
		       "(%s); " DLX_CONSEQUENCE "\n",
		       why);
	}
	/* Deliveries came back overdue, and the timeout is not known to be
	 * short: say what holds them up, and what to set where. */
	if (overdue_returns > 0 && (!known || ms == MGMT_DLX_DEFAULT_MS)) {
		fflush(stdout);
		fprintf(stderr,
		        PROG
		        ": warning: %.0f deliveries came back from the "
		        "ladder overdue; after a broker restart or a node's "
		        "loss RabbitMQ's dead-letter worker resends what it "
		        "could not hand over only after " MGMT_DLX_KEY
		        " (180 s by default): set it in the broker's "
		        "advanced.config (conf/advanced.config: 10 s), or, "
		        "on RabbitMQ 4.3 or later, let messages wait "
		        "natively ([topology] mode = auto)\n",
		        overdue_returns);
	}
	if (known && ms == MGMT_DLX_DEFAULT_MS) {
		fflush(stdout);
		fprintf(stderr, PROG
		        ": warning: the broker's " MGMT_DLX_KEY
		        " is RabbitMQ's "
		        "default, 180 s: after a broker restart, messages "
		        "that fell due meanwhile can arrive 3 minutes late "
		        "or more, and out of order, the more often the more "
		        "quorum queues the broker holds; set it in "
		        "advanced.config (conf/advanced.config: 10 s)\n");
	}
}

#define STATUS_ROW "%-8s %-*s %10s %7s %10s %10s\n"

static void
status_text_queue(const struct qinfo *q, const char *label, int width)
{
	char ttl[32] = "-", about[32] = "-", messages[16], consumers[16];

	if (q->ttl >= 0) {
		duration_format(q->ttl, ttl, sizeof(ttl));
		duration_format_as(q->ttl, DURATION_ABOUT, about,
		                   sizeof(about));
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

int
status_run(struct ctl *c)
{
	static const char *const labels[] = {"ingress", "return", "retry",
	                                     "error", "requests"};
	const struct topology *t = &c->topo;
	unsigned n = t->levels, shards = t->shards, nlevels = shards * n;
	unsigned missing = 0;
	struct qinfo *levels, *rets, other[5], holds[LADDER_MAX_SHARDS];
	/* P.requests: declared with the streams ([events] enabled). */
	int nother = config_events(&c->cfg) ? 5 : 4;
	unsigned nholds = 0;
	uint64_t waiting = 0;
	char res[32], url[CONFIG_STR_MAX];
	int width = 5;

	/* every shard's levels, their return queues, then a former
	 * layout's drained return queues and the delay queues that feed them */
	unsigned ndrain = t->drains * (n + 1), all = nlevels + shards + ndrain;
	uint64_t draining = 0;

	levels = calloc(all, sizeof(*levels));
	if (levels == NULL) {
		snprintf(c->cl.err, sizeof(c->cl.err), "out of memory");
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
		if (session_inspect(c, BROKER_CH_CHECK, &levels[i]) < 0) {
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
	/* Native waiting's holding queues: none in ladder mode. */
	for (unsigned s = 0; s < shards; s++) {
		holds[s] = (struct qinfo){
		    t->hold[s], -1, shards > 1 ? (int)s : -1, 0, 0, 0};
		if (session_inspect(c, BROKER_CH_CHECK, &holds[s]) < 0) {
			free(levels);
			return -1;
		}
		nholds += !holds[s].missing;
	}
	other[0] = (struct qinfo){t->ingress, -1, -1, 0, 0, 0};
	other[1] = rets[0];
	other[2] = (struct qinfo){t->retry, -1, -1, 0, 0, 0};
	other[3] = (struct qinfo){t->error, -1, -1, 0, 0, 0};
	other[4] = (struct qinfo){t->requests, -1, -1, 0, 0, 0};
	for (int i = 0; i < nother; i++) {
		if (i != 1 &&
		    session_inspect(c, BROKER_CH_CHECK, &other[i]) < 0) {
			free(levels);
			return -1;
		}
		if (i != 1)
			missing += (unsigned)other[i].missing;
	}

	if (opts.json) {
		printf("{\"prefix\":");
		json_write_str(stdout, c->cfg.topology_prefix);
		printf(",\"exchange\":");
		json_write_str(stdout, t->exchange);
		printf(",\"shards\":%u", shards);
		/* every shard's levels, shard by shard */
		status_json_queues("levels", levels, nlevels);
		printf(",\"ladder_messages\":%" PRIu64, waiting);
		for (int i = 0; i < nother; i++) {
			printf(",\"%s\":", labels[i]);
			status_json_queue(&other[i]);
		}
		status_json_queues("returns", rets, shards);
		status_json_queues("draining", rets + shards, ndrain);
		status_json_queues("holding", holds, nholds ? shards : 0);
		printf(",\"draining_messages\":%" PRIu64, draining);
		printf(",\"missing\":%u", missing);
		status_targets(c);
		status_dlx(c);
		printf("}\n");
	} else {
		for (unsigned i = 0; i < all; i++)
			if ((int)strlen(levels[i].name) > width)
				width = (int)strlen(levels[i].name);
		for (int i = 0; i < nother; i++)
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
		for (int i = 0; i < nother; i++)
			if (i != 1 || shards == 1)
				status_text_queue(&other[i], labels[i], width);
		for (unsigned i = 0; i < ndrain; i++)
			status_text_queue(&rets[shards + i], "draining", width);
		for (unsigned s = 0; nholds > 0 && s < shards; s++)
			status_text_queue(&holds[s], "holding", width);
		printf("\n%" PRIu64 " message%s waiting in the ladder, %" PRIu32
		       " parked in %s\n",
		       waiting, waiting == 1 ? "" : "s", other[3].messages,
		       other[3].name);
		/* A passive declare counts ready messages only: those a
		 * holding queue keeps until their time are not among them. */
		if (nholds > 0)
			printf("holding queues (native waiting): the messages "
			       "they keep until a time are in rabbitmqctl "
			       "list_queues messages, not above\n");
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
