/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cascade-publish: publish one delayed message, or one per line of stdin,
 * to cascade's exchange, with publisher confirms.
 *
 *   cascade-publish --delay 90s -r orders --body hello
 *   seq 100 | cascade-publish --at 2026-12-01T09:00:00Z -r orders
 *   cascade-publish --cron '0 9 * * MON-FRI' --tz Europe/Berlin -r reports
 */
#include "amqp_compat.h"
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "config.h"
#include "cron.h"
#include "duration.h"
#include "when.h"

#define MAX_HEADERS 64
/* Publishes awaiting a confirm; at most BROKER_CONFIRM_WINDOW. */
#define WINDOW 1000

static void
usage(FILE *fp)
{
	fprintf(
	    fp,
	    "usage: cascade-publish (--delay DURATION | --at TIME | --cron "
	    "EXPR) [options]\n"
	    "                       [--body TEXT]\n"
	    "\n"
	    "Without --body, publishes one message per line of stdin.\n"
	    "\n"
	    "  -d, --delay DURATION    90s, 250ms, 15m, 2h, 3d (ms if bare)\n"
	    "  -a, --at TIME           2026-12-01T09:00:00Z (UTC, or +HH:MM), "
	    "or epoch ms\n"
	    "      --cron EXPR         repeat at the times of a cron "
	    "expression (x-cascade-cron);\n"
	    "                          with --delay or --at: not before "
	    "then\n"
	    "      --tz ZONE           the cron expression's IANA time zone "
	    "(default UTC)\n"
	    "      --every DURATION    repeat every DURATION "
	    "(x-cascade-every)\n"
	    "      --times N           repeat N times in all "
	    "(x-cascade-times)\n"
	    "  -e, --exchange NAME     target exchange (x-target-exchange)\n"
	    "  -r, --routing-key KEY   routing key (the target queue for "
	    "the default exchange)\n"
	    "  -H, --header K=V        a header of the message; repeatable\n"
	    "  -b, --body TEXT         the message body\n"
	    "  -c, --config FILE       take the broker URL and prefix from "
	    "cascade's config\n"
	    "  -p, --prefix NAME       cascade's exchange (default: the "
	    "config's, or cascade)\n"
	    "  -h, --help              print this help and exit\n"
	    "\n"
	    "CASCADE_BROKER_URL, when set, overrides the URL, and "
	    "CASCADE_BROKER_PASSWORD\ngives the password.\n");
}

static void
put_str(amqp_table_entry_t *h, int *n, const char *key, const char *value)
{
	h[*n].key = amqp_cstring_bytes(key);
	h[*n].value.kind = AMQP_FIELD_KIND_UTF8;
	h[*n].value.value.bytes = amqp_cstring_bytes(value);
	(*n)++;
}

/*
 * A repeat's headers: --cron and --tz (checked here as the daemon checks
 * them, so a typo is told now and not parked later), or --every, and
 * --times.  -1 after saying why.
 */
static int
publish_repeat(const char *cron, const char *tz, const char *every,
               const char *times, amqp_table_entry_t *h, int *n)
{
	struct cron c;
	struct zone z;
	char err[200], *end;
	long long k;

	if (cron != NULL) {
		if (cron_parse(&c, cron, strlen(cron), err, sizeof(err)) < 0) {
			fprintf(stderr, "cascade-publish: --cron: %s\n", err);
			return -1;
		}
		put_str(h, n, "x-cascade-cron", cron);
	}
	if (tz != NULL) {
		if (zone_load(&z, tz, strlen(tz), NULL, err, sizeof(err)) < 0) {
			fprintf(stderr, "cascade-publish: --tz %s: %s\n", tz,
			        err);
			return -1;
		}
		zone_free(&z);
		put_str(h, n, "x-cascade-tz", tz);
	}
	if (every != NULL)
		put_str(h, n, "x-cascade-every", every);
	if (times != NULL) {
		k = strtoll(times, &end, 10);
		if (*times == '\0' || *end != '\0' || k < 1) {
			fprintf(stderr,
			        "cascade-publish: --times %s: not a number of "
			        "1 or more\n",
			        times);
			return -1;
		}
		h[*n].key = amqp_cstring_bytes("x-cascade-times");
		h[*n].value.kind = AMQP_FIELD_KIND_I64;
		h[*n].value.value.i64 = k;
		(*n)++;
	}
	return 0;
}

static void
pub_settled(void *arg, uint64_t seq, int acked)
{
	(void)arg;
	(void)seq;
	if (!acked)
		fprintf(stderr, "cascade-publish: the broker refused a "
		                "message (nack)\n");
}

static void
pub_returned(void *arg, const amqp_basic_return_t *r)
{
	(void)arg;
	fprintf(stderr,
	        "cascade-publish: unroutable: %.*s (is cascade "
	        "running with this prefix?)\n",
	        (int)r->reply_text.len, (const char *)r->reply_text.bytes);
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
	    {"delay", required_argument, NULL, 'd'},
	    {"at", required_argument, NULL, 'a'},
	    {"exchange", required_argument, NULL, 'e'},
	    {"routing-key", required_argument, NULL, 'r'},
	    {"header", required_argument, NULL, 'H'},
	    {"body", required_argument, NULL, 'b'},
	    {"config", required_argument, NULL, 'c'},
	    {"prefix", required_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {"cron", required_argument, NULL, 'C'},
	    {"tz", required_argument, NULL, 'Z'},
	    {"every", required_argument, NULL, 'E'},
	    {"times", required_argument, NULL, 'T'},
	    {NULL, 0, NULL, 0},
	};
	static struct config cfg;
	static char err[8192];
	static struct broker_confirms c;
	amqp_table_entry_t hdr[MAX_HEADERS + 7];
	amqp_basic_properties_t props;
	amqp_connection_state_t conn;
	const char *delay = NULL, *at = NULL, *exchange = NULL, *rk = "";
	const char *body = NULL, *path = NULL, *prefix = NULL, *why;
	const char *cron = NULL, *tz = NULL, *every = NULL, *times = NULL;
	char *line = NULL;
	size_t cap = 0;
	int nh = 0, ch, rc = 1;
	int64_t ms = 0;
	ssize_t n;

	config_defaults(&cfg);
	while ((ch = getopt_long(argc, argv, "d:a:e:r:H:b:c:p:h", longopts,
	                         NULL)) != -1) {
		switch (ch) {
		case 'd':
			delay = optarg;
			break;
		case 'a':
			at = optarg;
			break;
		case 'e':
			exchange = optarg;
			break;
		case 'r':
			rk = optarg;
			break;
		case 'H': {
			char *eq = strchr(optarg, '=');
			if (eq == NULL || eq == optarg || nh == MAX_HEADERS) {
				fprintf(stderr,
				        "cascade-publish: --header wants K=V: "
				        "%s\n",
				        optarg);
				return 2;
			}
			*eq = '\0';
			hdr[nh].key = amqp_cstring_bytes(optarg);
			hdr[nh].value.kind = AMQP_FIELD_KIND_UTF8;
			hdr[nh].value.value.bytes = amqp_cstring_bytes(eq + 1);
			nh++;
			break;
		}
		case 'b':
			body = optarg;
			break;
		case 'c':
			path = optarg;
			break;
		case 'p':
			prefix = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'C':
			cron = optarg;
			break;
		case 'Z':
			tz = optarg;
			break;
		case 'E':
			every = optarg;
			break;
		case 'T':
			times = optarg;
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || (delay != NULL && at != NULL) ||
	    (cron == NULL && delay == NULL && at == NULL)) {
		fprintf(stderr, "cascade-publish: give one of --delay and "
		                "--at (with --cron, at most one)\n");
		usage(stderr);
		return 2;
	}
	if ((cron != NULL && every != NULL) || (tz != NULL && cron == NULL) ||
	    (times != NULL && cron == NULL && every == NULL)) {
		fprintf(stderr, "cascade-publish: --cron or --every, not both; "
		                "--tz goes with --cron, --times with either\n");
		return 2;
	}
	if (publish_repeat(cron, tz, every, times, hdr, &nh) < 0)
		return 2;
	if (path != NULL) {
		if (config_load(&cfg, path, err, sizeof(err)) < 0) {
			fputs(err, stderr);
			return 2;
		}
	} else if (config_load_string(&cfg, "environment", "", err,
	                              sizeof(err)) < 0) {
		/* No file: the defaults, and CASCADE_BROKER_URL and
		 * CASCADE_BROKER_PASSWORD checked as the daemon checks them. */
		fputs(err, stderr);
		return 2;
	}
	if (delay != NULL) {
		if (duration_parse(delay, strlen(delay), DURATION_BARE_MS, &ms,
		                   &why) < 0) {
			fprintf(stderr, "cascade-publish: --delay %s: %s\n",
			        delay, why);
			return 2;
		}
		hdr[nh].key = amqp_cstring_bytes("x-remaining-delay");
	} else if (at != NULL) {
		char twhy[128];
		if (when_parse_absolute(at, &ms, twhy, sizeof(twhy)) < 0) {
			fprintf(stderr,
			        "cascade-publish: --at %s: not a time like "
			        "2026-12-01T09:00:00Z or epoch ms (%s)\n",
			        at, twhy);
			return 2;
		}
		hdr[nh].key = amqp_cstring_bytes("x-deliver-at");
	}
	if (delay != NULL || at != NULL) {
		hdr[nh].value.kind = AMQP_FIELD_KIND_I64;
		hdr[nh].value.value.i64 = ms;
		nh++;
	}
	if (exchange != NULL) {
		hdr[nh].key = amqp_cstring_bytes("x-target-exchange");
		hdr[nh].value.kind = AMQP_FIELD_KIND_UTF8;
		hdr[nh].value.value.bytes = amqp_cstring_bytes(exchange);
		nh++;
	}
	if (prefix == NULL)
		prefix = cfg.topology_prefix;

	conn = broker_connect(&cfg, err, sizeof(err));
	if (conn == NULL) {
		fprintf(stderr, "cascade-publish: %s\n", err);
		return 1;
	}
	if (broker_confirm_select(conn, BROKER_CH_WORK, &c, err, sizeof(err)) <
	    0) {
		fprintf(stderr, "cascade-publish: %s\n", err);
		goto out;
	}
	c.on_settle = pub_settled;
	c.on_return = pub_returned;
	memset(&props, 0, sizeof(props));
	props._flags = AMQP_BASIC_HEADERS_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
	props.delivery_mode = 2;
	props.headers.num_entries = nh;
	props.headers.entries = hdr;

	for (;;) {
		amqp_bytes_t b;
		if (body != NULL) {
			b = amqp_cstring_bytes(body);
		} else {
			n = getline(&line, &cap, stdin);
			if (n < 0)
				break;
			if (n > 0 && line[n - 1] == '\n')
				line[--n] = '\0';
			b.bytes = line;
			b.len = (size_t)n;
		}
		if (broker_confirm_publish(conn, &c, amqp_cstring_bytes(prefix),
		                           amqp_cstring_bytes(rk), 1, &props,
		                           b) != AMQP_STATUS_OK) {
			fprintf(stderr, "cascade-publish: publish failed\n");
			goto out;
		}
		if (broker_confirm_wait(conn, &c, WINDOW, -1, err,
		                        sizeof(err)) < 0)
			goto lost;
		if (body != NULL)
			break;
	}
	if (broker_confirm_wait(conn, &c, 0, -1, err, sizeof(err)) < 0)
		goto lost;
	if (c.nacked == 0 && c.returned == 0)
		rc = 0;
	fprintf(stderr,
	        "cascade-publish: %" PRIu64 " published, %" PRIu64
	        " confirmed, %" PRIu64 " refused, %" PRIu64 " unroutable\n",
	        c.seq, c.acked, c.nacked, c.returned);
	goto out;
lost:
	fprintf(stderr, "cascade-publish: %s\n", err);
out:
	free(line);
	amqp_destroy_connection(conn);
	return rc;
}
