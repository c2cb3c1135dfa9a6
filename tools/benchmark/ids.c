/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `cascade-bench ids [-n N]`: the memory a daemon spends per id it holds
 * (requests.h), for each kind.  The request state is filled with N ids of
 * one kind through the functions the daemon calls when it reads P.cancels
 * and P.series, and the heap grown (mallinfo2: bytes malloc handed out,
 * with its chunk overhead) and the resident set grown are divided by N,
 * each kind in a process of its own.  No broker, no timing: the heap
 * numbers are the same on every run of one build.
 */
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "requests.h"

/* Bytes in use on the heap now (arena and mmap'ed chunks). */
static size_t
heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* Resident bytes now, from /proc/self/statm; 0 when unknown. */
static size_t
rss_bytes(void)
{
	unsigned long size, resident;
	FILE *fp = fopen("/proc/self/statm", "r");
	int ok;

	if (fp == NULL)
		return 0;
	ok = fscanf(fp, "%lu %lu", &size, &resident) == 2;
	fclose(fp);
	return ok ? (size_t)resident * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

struct sample {
	size_t heap, rss;
};

static struct sample
sample(void)
{
	struct sample s = {heap_bytes(), rss_bytes()};

	return s;
}

static void
report(const char *what, uint64_t n, struct sample a, struct sample b)
{
	printf("%-8s %10" PRIu64 " ids  heap %7.1f B/id  rss %7.1f B/id\n",
	       what, n, (double)(b.heap - a.heap) / (double)n,
	       b.rss > a.rss ? (double)(b.rss - a.rss) / (double)n : 0.);
}

/* A message-id as publishers write them, 16 bytes: "inv-000000000042". */
static amqp_bytes_t
mid(char buf[32], uint64_t i)
{
	int n = snprintf(buf, 32, "inv-%012" PRIu64, i);

	return (amqp_bytes_t){(size_t)n, buf};
}

/* A cascade id, 16 hexadecimal digits. */
static amqp_bytes_t
cid(char buf[32], uint64_t i)
{
	int n = snprintf(buf, 32, "%016" PRIx64,
	                 (uint64_t)(i * UINT64_C(0x9e3779b97f4a7c15)));

	return (amqp_bytes_t){(size_t)n, buf};
}

static int
fill_claims(uint64_t n)
{
	struct requests c;
	struct claim_verdict v;
	struct sample a, b;
	char m[32], id[32];
	struct event e;

	requests_init(&c);
	a = sample();
	for (uint64_t i = 0; i < n; i++) {
		memset(&e, 0, sizeof(e));
		e.kind = EVENT_CLAIM;
		e.cancel = mid(m, i);
		e.id = cid(id, i);
		e.at = 1;
		e.due = 1000;
		e.until = 2000;
		if (requests_claim(&c, &e, amqp_cstring_bytes("alice"), &v) < 0)
			return -1;
	}
	b = sample();
	report("claims", n, a, b);
	requests_free(&c);
	return 0;
}

static int
fill_cancels(uint64_t n)
{
	struct requests c;
	struct sample a, b;
	char m[32];
	struct event e;

	requests_init(&c);
	a = sample();
	for (uint64_t i = 0; i < n; i++) {
		memset(&e, 0, sizeof(e));
		e.kind = EVENT_CANCEL;
		e.cancel = mid(m, i);
		e.at = 1;
		e.until = 2000;
		if (requests_add(&c, &e, amqp_cstring_bytes("alice"), 0) < 0)
			return -1;
	}
	b = sample();
	report("cancels", n, a, b);
	requests_free(&c);
	return 0;
}

static int
fill_series(uint64_t n)
{
	struct requests s;
	struct sample a, b;
	char id[32], token[32];

	requests_init(&s);
	a = sample();
	for (uint64_t i = 0; i < n; i++)
		if (requests_series_add(&s, cid(id, i), 2, cid(token, i + 1),
		                        2000, 0) < 0)
			return -1;
	b = sample();
	report("series", n, a, b);
	requests_free(&s);
	return 0;
}

int
ids_main(int argc, char *argv[])
{
	uint64_t n = 100000;
	int ch;

	while ((ch = getopt(argc, argv, "n:h")) != -1) {
		switch (ch) {
		case 'n':
			n = strtoull(optarg, NULL, 10);
			break;
		case 'h':
			printf("usage: cascade-bench ids [-n N]\n");
			return 0;
		default:
			fprintf(stderr, "usage: cascade-bench ids [-n N]\n");
			return 2;
		}
	}
	if (n == 0 || n > 100000000) {
		fprintf(stderr, "cascade-bench: ids: -n from 1 to 100000000\n");
		return 2;
	}
	/* Each kind in a process of its own: its resident set grows from
	 * the same start, not into pages another kind freed. */
	for (int k = 0; k < 3; k++) {
		int st;
		pid_t pid = fork();
		if (pid < 0) {
			perror("cascade-bench: fork");
			return 1;
		}
		if (pid == 0) {
			int rc = k == 0   ? fill_claims(n)
			         : k == 1 ? fill_cancels(n)
			                  : fill_series(n);
			fflush(stdout);
			_exit(rc < 0 ? 1 : 0);
		}
		if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0) {
			fprintf(stderr, "cascade-bench: ids: out of memory\n");
			return 1;
		}
	}
	return 0;
}
