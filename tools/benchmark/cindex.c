/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `cascade-bench cindex [-n N]`: the console's index of what waits
 * (cindex.h) with N messages, in memory, no broker: the heap it grew per
 * message (mallinfo2), the wall time to fold N scheduled records, the
 * first page, page N/2, a message-id prefix search, an owner's page, a
 * target's page, an exact lookup and the histogram.  Message-ids are 36
 * bytes (a UUID's length), over 20 targets and 100 owners, due within a
 * week.  It measures; it asserts nothing.
 */
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "cindex.h"

static double
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static size_t
heap_now(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* One page of q, timed; prints its total. */
static void
timed_page(const struct cindex *ix, const char *what,
           const struct cindex_query *q, uint32_t offset)
{
	uint32_t slots[50], n, total;
	double t0 = wall_ms(), t1;

	if (cindex_page(ix, q, offset, 50, slots, &n, &total) < 0) {
		printf("%-22s out of memory\n", what);
		return;
	}
	t1 = wall_ms();
	printf("%-22s %9.3f ms  %" PRIu32 " rows of %" PRIu32 "\n", what,
	       t1 - t0, n, total);
}

int
cindex_main(int argc, char *argv[])
{
	uint64_t n = 1000000;
	const int64_t now = INT64_C(1767225600000);
	struct cindex ix;
	struct cindex_query q;
	struct cindex_histogram h;
	struct cindex_stats st;
	char id[32], mid[48], key[16], owner[16];
	uint32_t slots[4];
	size_t before;
	double t0, t1;

	for (int i = 1; i < argc; i++) {
		if ((strcmp(argv[i], "-n") == 0 ||
		     strcmp(argv[i], "--count") == 0) &&
		    i + 1 < argc)
			n = strtoull(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: cascade-bench cindex [-n N]\n");
			return 2;
		}
	}
	if (n == 0 || n > UINT32_MAX / 2) {
		fprintf(stderr, "cascade-bench: cindex: -n from 1\n");
		return 2;
	}
	before = heap_now();
	if (cindex_init(&ix, (uint32_t)n, 0) < 0)
		return 1;
	t0 = wall_ms();
	for (uint64_t i = 0; i < n; i++) {
		struct event e;
		memset(&e, 0, sizeof(e));
		snprintf(id, sizeof(id), "%016" PRIx64,
		         i * UINT64_C(0x9e3779b97f4a7c15));
		snprintf(mid, sizeof(mid),
		         "%08" PRIx64 "-0000-4000-8000-%012" PRIx64, i,
		         i * 7919u);
		snprintf(key, sizeof(key), "q%" PRIu64, i % 20);
		snprintf(owner, sizeof(owner), "u%" PRIu64, i % 100);
		e.kind = EVENT_SCHEDULED;
		e.id = amqp_cstring_bytes(id);
		e.message_id = amqp_cstring_bytes(mid);
		e.due = now + (int64_t)((i * 2654435761u) % 604800000u);
		e.at = now + (int64_t)i;
		e.size = 200;
		e.exchange = amqp_cstring_bytes("orders");
		e.routing_key = amqp_cstring_bytes(key);
		e.owner = amqp_cstring_bytes(owner);
		if (cindex_fold_event(&ix, &e, i) < 0) {
			fprintf(stderr, "cascade-bench: out of memory\n");
			return 1;
		}
	}
	t1 = wall_ms();
	st = cindex_stats(&ix);
	printf("cindex %" PRIu64 " messages, 36-byte message-ids\n", n);
	printf("%-22s %9.1f B/message (heap, mallinfo2)\n", "memory",
	       (double)(heap_now() - before) / (double)n);
	printf("%-22s %9.1f ms  %.0f records/s\n", "add N", t1 - t0,
	       (double)n / ((t1 - t0) / 1e3));
	cindex_query_init(&q);
	timed_page(&ix, "first page", &q, 0);
	timed_page(&ix, "page at N/2", &q, (uint32_t)(n / 2));
	q.due_after = now + 86400000;
	q.due_before = now + 2 * 86400000;
	timed_page(&ix, "due range (1 day)", &q, 0);
	cindex_query_init(&q);
	q.prefix = "0000abc";
	timed_page(&ix, "search (prefix)", &q, 0);
	cindex_query_init(&q);
	q.owner = "u42";
	timed_page(&ix, "owner (1 %)", &q, 0);
	cindex_query_init(&q);
	q.target = "orders/q7";
	timed_page(&ix, "target (5 %)", &q, 0);
	snprintf(mid, sizeof(mid), "%08" PRIx64 "-0000-4000-8000-%012" PRIx64,
	         n / 3, (n / 3) * 7919u);
	t0 = wall_ms();
	(void)cindex_named(&ix, amqp_cstring_bytes(mid), slots, 4);
	t1 = wall_ms();
	printf("%-22s %9.3f ms\n", "exact message-id", t1 - t0);
	t0 = wall_ms();
	cindex_histogram(&ix, NULL, now + 3600000, &h);
	t1 = wall_ms();
	printf("%-22s %9.3f ms  late %" PRIu32 ", next hour %" PRIu32
	       " in its first minute\n",
	       "histogram", t1 - t0, h.late, h.hour[0]);
	cindex_query_init(&q);
	q.owner = "u42";
	t0 = wall_ms();
	cindex_histogram(&ix, &q, now + 3600000, &h);
	t1 = wall_ms();
	printf("%-22s %9.3f ms\n", "histogram (owner)", t1 - t0);
	printf("%-22s %9" PRIu64 " refused, %" PRIu64 " arena bytes\n", "caps",
	       st.refused, st.arena_bytes);
	cindex_free(&ix);
	return 0;
}
