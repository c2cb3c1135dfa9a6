/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus exposition: what a scraper and an operator read. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ladder.h"
#include "metrics.h"

static char out[65536];

/* One shard, as the daemon labels it, or two. */
static int
render_shards(const struct metrics *m, unsigned shards)
{
	static struct ladder l;
	static const char *const one[] = {"c.delay.2000", "c.delay.8000"};
	static const char *const two[] = {"c.delay.2000.s0", "c.delay.8000.s0",
	                                  "c.delay.2000.s1", "c.delay.8000.s1"};
	static const struct metrics_queue q1[] = {{"ingress", "c.ingress", -1},
	                                          {"retry", "c.retry", -1},
	                                          {"return", "c.return", 0}};
	static const struct metrics_queue q2[] = {
	    {"ingress", "c.ingress", -1},
	    {"retry", "c.retry", -1},
	    {"return", "c.return.s0", 0},
	    {"return", "c.return.s1", 1},
	    {"return", "c.return", -1}}; /* drained */
	const char *why;
	struct metrics_labels labels = {
	    .ladder = &l,
	    .shards = shards,
	    .level_queues = shards > 1 ? two : one,
	    .queues = shards > 1 ? q2 : q1,
	    .nqueues = shards > 1 ? 5 : 3,
	    .version = "9.9",
	};

	cr_assert_eq(ladder_init(&l, 2000, 4, 2, &why), 0);
	return metrics_render(m, &labels, out, sizeof(out));
}

static int
render(const struct metrics *m)
{
	return render_shards(m, 1);
}

#define expect_line(s)                                                         \
	cr_assert(strstr(out, s "\n") != NULL, "no line %s in:\n%s", s, out)

Test(metrics, counters_with_labels)
{
	struct metrics m;

	memset(&m, 0, sizeof(m));
	m.received[0] = 5;
	m.received[2] = 7;
	m.hops[1] = 3;
	m.delivered = 4;
	m.parked[PARK_not_allowed] = 2;
	m.in_flight = 9;
	m.connected = 1;
	cr_assert_gt(render(&m), 0);
	expect_line("cascade_info{version=\"9.9\"} 1");
	expect_line("cascade_connected 1");
	expect_line("cascade_messages_received_total{source=\"ingress\","
	            "queue=\"c.ingress\"} 5");
	expect_line("cascade_messages_received_total{source=\"return\","
	            "queue=\"c.return\",shard=\"0\"} 7");
	expect_line("cascade_hops_total{shard=\"0\",level=\"1\","
	            "queue=\"c.delay.8000\",ttl_ms=\"8000\"} 3");
	expect_line("cascade_hops_total{shard=\"0\",level=\"0\","
	            "queue=\"c.delay.2000\",ttl_ms=\"2000\"} 0");
	expect_line("cascade_messages_delivered_total 4");
	expect_line("cascade_messages_parked_total{reason=\"not_allowed\"} 2");
	expect_line("cascade_messages_parked_total{reason=\"bad_header\"} 0");
	expect_line("cascade_publishes_in_flight 9");
	expect_line("# TYPE cascade_lateness_seconds histogram");
}

Test(metrics, held_ids_by_kind_the_cap_and_records_not_held)
{
	struct metrics m;

	memset(&m, 0, sizeof(m));
	m.held_ids[METRICS_HELD_REQUEST] = 12;
	m.held_ids[METRICS_HELD_CLAIM] = 3;
	m.held_ids_max = 1000000;
	m.held_refused[METRICS_HELD_SERIES] = 4;
	m.parked[PARK_too_many_ids] = 2;
	cr_assert_gt(render(&m), 0);
	expect_line("# TYPE cascade_held_ids gauge");
	expect_line("cascade_held_ids{kind=\"request\"} 12");
	expect_line("cascade_held_ids{kind=\"claim\"} 3");
	expect_line("cascade_held_ids{kind=\"series\"} 0");
	expect_line("cascade_held_ids_max 1000000");
	expect_line("# TYPE cascade_held_ids_refused_total counter");
	expect_line("cascade_held_ids_refused_total{kind=\"request\"} 0");
	expect_line("cascade_held_ids_refused_total{kind=\"series\"} 4");
	expect_line("cascade_messages_parked_total{reason=\"too_many_ids\"} 2");
}

/* Shards: hops by shard and level, each return queue with its shard, a
 * drained one without. */
Test(metrics, shard_labels)
{
	struct metrics m;

	memset(&m, 0, sizeof(m));
	m.received[3] = 6;
	m.received[4] = 2;
	m.hops[2 + 1] = 5; /* shard 1, level 1 */
	cr_assert_gt(render_shards(&m, 2), 0);
	expect_line("cascade_hops_total{shard=\"1\",level=\"1\","
	            "queue=\"c.delay.8000.s1\",ttl_ms=\"8000\"} 5");
	expect_line("cascade_hops_total{shard=\"0\",level=\"1\","
	            "queue=\"c.delay.8000.s0\",ttl_ms=\"8000\"} 0");
	expect_line("cascade_messages_received_total{source=\"return\","
	            "queue=\"c.return.s1\",shard=\"1\"} 6");
	expect_line("cascade_messages_received_total{source=\"return\","
	            "queue=\"c.return\"} 2");
}

Test(metrics, every_sample_has_help_and_type)
{
	struct metrics m;
	const char *line = out;
	char family[128] = "";

	memset(&m, 0, sizeof(m));
	cr_assert_gt(render(&m), 0);
	while (*line) {
		const char *nl = strchr(line, '\n');
		size_t n = strcspn(line, "{ ");
		cr_assert_not_null(nl);
		if (strncmp(line, "# TYPE ", 7) == 0) {
			snprintf(family, sizeof(family), "%.*s",
			         (int)strcspn(line + 7, " "), line + 7);
		} else if (line[0] != '#') {
			cr_assert(strncmp(line, family, strlen(family)) == 0 &&
			              strlen(family) > 0,
			          "sample %.*s outside its family %s", (int)n,
			          line, family);
		}
		line = nl + 1;
	}
}

Test(metrics, lateness_histogram_is_cumulative)
{
	struct metrics m;

	memset(&m, 0, sizeof(m));
	metrics_observe_lateness(&m, 0);
	metrics_observe_lateness(&m, 3);
	metrics_observe_lateness(&m, 3);
	metrics_observe_lateness(&m, 75);
	metrics_observe_lateness(&m, 120000); /* beyond the last bucket */
	metrics_observe_lateness(&m, -4);     /* counted as on time */
	cr_assert_gt(render(&m), 0);
	expect_line("cascade_lateness_seconds_bucket{le=\"0.001\"} 2");
	expect_line("cascade_lateness_seconds_bucket{le=\"0.005\"} 4");
	expect_line("cascade_lateness_seconds_bucket{le=\"0.1\"} 5");
	expect_line("cascade_lateness_seconds_bucket{le=\"60\"} 5");
	expect_line("cascade_lateness_seconds_bucket{le=\"+Inf\"} 6");
	expect_line("cascade_lateness_seconds_count 6");
	expect_line("cascade_lateness_seconds_sum 120.081");
}

Test(metrics, too_small_a_buffer_fails)
{
	struct metrics m;
	static struct ladder l;
	const char *why;
	const char *const names[] = {"q"};
	const struct metrics_queue q[] = {{"ingress", "a", -1}};
	struct metrics_labels labels = {.ladder = &l,
	                                .shards = 1,
	                                .level_queues = names,
	                                .queues = q,
	                                .nqueues = 1,
	                                .version = "1"};
	char small[64];

	memset(&m, 0, sizeof(m));
	cr_assert_eq(ladder_init(&l, 2000, 4, 1, &why), 0);
	cr_assert_eq(metrics_render(&m, &labels, small, sizeof(small)), -1);
}

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "listen.h"

Test(httpd, parse_listen)
{
	char host[64], port[8];
	const char *why;

	cr_assert_eq(listen_parse("127.0.0.1:9464", host, sizeof(host), port,
	                          sizeof(port), &why),
	             0);
	cr_assert_str_eq(host, "127.0.0.1");
	cr_assert_str_eq(port, "9464");
	cr_assert_eq(listen_parse("[::1]:80", host, sizeof(host), port,
	                          sizeof(port), &why),
	             0);
	cr_assert_str_eq(host, "::1");
	cr_assert_eq(
	    listen_parse(":80", host, sizeof(host), port, sizeof(port), &why),
	    0);
	cr_assert_str_empty(host);
	/* Port 0: any free one, which the daemon logs. */
	cr_assert_eq(listen_parse("host:0", host, sizeof(host), port,
	                          sizeof(port), &why),
	             0);
	cr_assert_eq(listen_parse("host:-1", host, sizeof(host), port,
	                          sizeof(port), &why),
	             -1);
	cr_assert_eq(listen_parse("host:65536", host, sizeof(host), port,
	                          sizeof(port), &why),
	             -1);
	cr_assert_eq(listen_parse("host:80x", host, sizeof(host), port,
	                          sizeof(port), &why),
	             -1);
}

/* Does a TCP connection to addr (IPv4 or IPv6), port open? */
static int
connects(const char *addr, int port)
{
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;
	int v6 = strchr(addr, ':') != NULL, fd, ok;

	memset(&s6, 0, sizeof(s6));
	memset(&s4, 0, sizeof(s4));
	s6.sin6_family = AF_INET6;
	s6.sin6_port = htons((uint16_t)port);
	s4.sin_family = AF_INET;
	s4.sin_port = htons((uint16_t)port);
	cr_assert_eq(v6 ? inet_pton(AF_INET6, addr, &s6.sin6_addr)
	                : inet_pton(AF_INET, addr, &s4.sin_addr),
	             1);
	fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	ok = v6 ? connect(fd, (struct sockaddr *)&s6, sizeof(s6)) == 0
	        : connect(fd, (struct sockaddr *)&s4, sizeof(s4)) == 0;
	close(fd);
	return ok;
}

/* listen_open(listen): its socket's family and the loopbacks it answers
 * on, then the socket closed. */
static void
listens_on(const char *listen, int v6, int on4, int on6)
{
	char err[256];
	int fd, port = -1, is6 = -1;

	fd = listen_open(listen, 1, &port, &is6, err, sizeof(err));
	cr_assert_geq(fd, 0, "%s: %s", listen, err);
	cr_assert_gt(port, 0, "%s", listen);
	cr_assert_eq(is6, v6, "%s", listen);
	cr_assert_eq(connects("127.0.0.1", port), on4, "%s on 127.0.0.1",
	             listen);
	cr_assert_eq(connects("::1", port), on6, "%s on ::1", listen);
	close(fd);
}

/* An empty host is both families (one dual-stack socket), an address its
 * own family only; a taken port and a name where numbers are asked for
 * are refused with the listen address in the reason. */
Test(httpd, listen_open_families)
{
	char err[256], taken[32];
	int fd, port, v6;

	fd = socket(AF_INET6, SOCK_STREAM, 0);
	if (fd < 0)
		cr_skip_test("no IPv6 on this host: %s", strerror(errno));
	close(fd);
	if (!connects("::1", 1) && errno == EADDRNOTAVAIL)
		cr_skip_test("no ::1 on this host");
	listens_on(":0", 1, 1, 1);
	listens_on("0.0.0.0:0", 0, 1, 0);
	listens_on("[::]:0", 1, 0, 1);
	listens_on("127.0.0.1:0", 0, 1, 0);
	listens_on("[::1]:0", 1, 0, 1);

	fd = listen_open("0.0.0.0:0", 1, &port, &v6, err, sizeof(err));
	cr_assert_geq(fd, 0, "%s", err);
	snprintf(taken, sizeof(taken), ":%d", port);
	cr_assert_eq(listen_open(taken, 1, &port, &v6, err, sizeof(err)), -1);
	cr_assert(strstr(err, "cannot listen on :") == err, "%s", err);
	close(fd);
	cr_assert_eq(
	    listen_open("localhost:0", 1, &port, &v6, err, sizeof(err)), -1);
	cr_assert(strncmp(err, "localhost:0: ", 13) == 0, "%s", err);
}

/* The largest layout, 64 shards of 39 levels (1 ms x 2^38 is the longest
 * ladder under 10 years) with 200-character prefixes, fits the 2 MiB the
 * HTTP server gives /metrics. */
Test(metrics, largest_layout_fits)
{
	static struct metrics m;
	static char names[64 * 64][256], big[2 * 1024 * 1024];
	static const char *levels[64 * 64];
	static struct metrics_queue q[2 + 64];
	static struct ladder l;
	char prefix[201];
	const char *why;
	struct metrics_labels labels = {.ladder = &l,
	                                .shards = 64,
	                                .level_queues = levels,
	                                .queues = q,
	                                .nqueues = 2 + 64,
	                                .version = "1"};

	memset(prefix, 'p', 200);
	prefix[200] = '\0';
	cr_assert_eq(ladder_init(&l, 1, 2, 39, &why), 0);
	for (unsigned i = 0; i < 64 * 39; i++) {
		snprintf(names[i], sizeof(names[i]), "%s.delay.%lld.s%u",
		         prefix, (long long)l.ttl[i % 39], i / 39);
		levels[i] = names[i];
	}
	for (unsigned i = 0; i < 2 + 64; i++)
		q[i] =
		    (struct metrics_queue){i < 2 ? "ingress" : "return",
		                           names[i], i < 2 ? -1 : (int)i - 2};
	cr_assert_gt(metrics_render(&m, &labels, big, sizeof(big)), 0);
}

/* How current the reading of P.cancels is, in seconds (no sample when
 * there is no P.cancels: [events] enabled = no); how overdue the most
 * overdue message is. */
Test(metrics, cancellations_read_age)
{
	struct metrics m;

	memset(&m, 0, sizeof(m));
	m.cancels_read_age_ms = 125250;
	m.untrusted[METRICS_STREAM_EVENTS] = 3;
	m.undecodable[METRICS_STREAM_CANCELS] = 2;
	m.undecodable[METRICS_STREAM_SERIES] = 5;
	cr_assert_gt(render(&m), 0);
	expect_line("cascade_cancellations_read_age_seconds 125.250");
	expect_line("cascade_records_untrusted_total{stream=\"events\"} 3");
	expect_line("cascade_records_untrusted_total{stream=\"cancels\"} 0");
	expect_line("cascade_records_undecodable_total{stream=\"cancels\"} 2");
	expect_line("cascade_records_undecodable_total{stream=\"series\"} 5");
	expect_line("cascade_records_untrusted_total{stream=\"series\"} 0");
	m.overdue_ms = 61500;
	m.cancels_read_age_ms = -1;
	cr_assert_gt(render(&m), 0);
	cr_assert_null(strstr(out, "cascade_cancellations_read_age_seconds"));
	expect_line("cascade_overdue_seconds 61.500");
}
