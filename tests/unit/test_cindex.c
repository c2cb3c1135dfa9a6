/* SPDX-License-Identifier: Apache-2.0 */
/* cindex: the console's index, against tables and against waiting.h. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cindex.h"
#include "waiting.h"

static struct cindex ix;

static void
setup(void)
{
	cr_assert_eq(cindex_init(&ix, 0, 0), 0);
}

static void
teardown(void)
{
	cindex_free(&ix);
}

static void
put(enum event_kind kind, const char *id, const char *mid, int64_t due,
    int64_t at, const char *ex, const char *key, const char *owner)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = kind;
	e.id = amqp_cstring_bytes(id);
	e.message_id = amqp_cstring_bytes(mid ? mid : "");
	e.due = due;
	e.at = at;
	e.size = 5;
	e.exchange = amqp_cstring_bytes(ex ? ex : "");
	e.routing_key = amqp_cstring_bytes(key ? key : "");
	e.owner = amqp_cstring_bytes(owner ? owner : "");
	cr_assert_eq(cindex_fold_event(&ix, &e, 7), 0);
}

static void
sched(const char *id, const char *mid, int64_t due, const char *ex,
      const char *key, const char *owner)
{
	put(EVENT_SCHEDULED, id, mid, due, 1, ex, key, owner);
}

/* The names of a page, joined by spaces, and its total after a '|'. */
static const char *
page(const struct cindex_query *q, uint32_t offset, uint32_t limit)
{
	static char out[512];
	uint32_t slots[64], n, total;
	struct cindex_row r;

	cr_assert_eq(cindex_page(&ix, q, offset, limit, slots, &n, &total), 0);
	out[0] = '\0';
	for (uint32_t i = 0; i < n; i++) {
		amqp_bytes_t b;
		cindex_row(&ix, slots[i], &r);
		b = r.message_id.len ? r.message_id : r.id;
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%.*s",
		         i ? " " : "", (int)b.len, (const char *)b.bytes);
	}
	snprintf(out + strlen(out), sizeof(out) - strlen(out), "|%" PRIu32,
	         total);
	return out;
}

/* Five messages of two owners and three targets. */
static void
fill(void)
{
	sched("c1", "m1", 300, "ex", "k1", "alice");
	sched("c2", NULL, 100, "", "q", "bob");
	sched("c3", "m3", 200, "amq.default", "q", "alice");
	sched("00000000000000a4", "inv-4", 400, "ex", "k2", NULL);
	sched("00000000000000a5", "inv-5", 200, "ex", "", "alice");
}

TestSuite(cindex, .init = setup, .fini = teardown);

Test(cindex, page_in_due_order_with_offsets)
{
	struct cindex_query q;

	cindex_query_init(&q);
	fill();
	/* due 200 twice, seen alike: by id, 0000…a5 before c3 */
	cr_assert_str_eq(page(&q, 0, 10), "c2 inv-5 m3 m1 inv-4|5");
	cr_assert_str_eq(page(&q, 1, 2), "inv-5 m3|5");
	cr_assert_str_eq(page(&q, 4, 2), "inv-4|5");
	cr_assert_str_eq(page(&q, 5, 2), "|5");
	cr_assert_eq(cindex_count(&ix), 5);
	cr_assert_eq(cindex_rank(&ix, 200), 1);
	cr_assert_eq(cindex_rank(&ix, 201), 3);
}

Test(cindex, a_moved_message_is_paged_at_its_new_due)
{
	struct cindex_query q;
	struct cindex_row r;
	uint32_t slots[4];

	cindex_query_init(&q);
	fill();
	cr_assert_eq(cindex_named(&ix, amqp_cstring_bytes("m1"), slots, 4), 1);
	cr_assert_eq(cindex_move(&ix, slots[0], 50), 0);
	cr_assert_str_eq(page(&q, 0, 10), "m1 c2 inv-5 m3 inv-4|5");
	cindex_row(&ix, slots[0], &r);
	cr_assert(r.moved);
	cr_assert_eq(r.due, 50);
	cr_assert_eq(cindex_rank(&ix, 100), 1);
	cr_assert_eq(cindex_move(&ix, slots[0], 1000), 0);
	cr_assert_str_eq(page(&q, 0, 10), "c2 inv-5 m3 inv-4 m1|5");
	/* ended, it leaves the order as any message does */
	put(EVENT_DELIVERED, "c1", "m1", 0, 2, NULL, NULL, NULL);
	cr_assert_str_eq(page(&q, 0, 10), "c2 inv-5 m3 inv-4|4");
}

Test(cindex, later_record_wins_and_ends_remove)
{
	struct cindex_query q;

	cindex_query_init(&q);
	fill();
	put(EVENT_SCHEDULED, "c2", "m2", 500, 9, "", "q", "bob");
	put(EVENT_DELIVERED, "c1", NULL, 0, 10, NULL, NULL, NULL);
	put(EVENT_PARKED, "00000000000000a4", NULL, 0, 10, NULL, NULL, NULL);
	cr_assert_str_eq(page(&q, 0, 10), "inv-5 m3 m2|3");
	put(EVENT_CANCELLED, "c3", NULL, 0, 10, NULL, NULL, NULL);
	put(EVENT_DUPLICATE, "00000000000000a5", NULL, 0, 10, NULL, NULL, NULL);
	cr_assert_str_eq(page(&q, 0, 10), "m2|1");
	cr_assert_eq(cindex_stats(&ix).waiting, 1);
}

Test(cindex, an_end_before_its_scheduled_is_remembered)
{
	struct cindex_query q;

	cindex_query_init(&q);
	put(EVENT_DELIVERED, "c9", NULL, 0, 10, NULL, NULL, NULL);
	cr_assert_eq(cindex_stats(&ix).ended, 1);
	sched("c9", "m9", 100, "", "q", NULL);
	cr_assert_str_eq(page(&q, 0, 10), "|0");
	cr_assert_eq(cindex_stats(&ix).ended, 0);
	/* Once: the same id scheduled again is listed. */
	sched("c9", "m9", 100, "", "q", NULL);
	cr_assert_str_eq(page(&q, 0, 10), "m9|1");
}

Test(cindex, ends_are_bounded_oldest_first_and_pruned_by_age)
{
	cindex_free(&ix);
	cr_assert_eq(cindex_init(&ix, 0, 2), 0);
	put(EVENT_DELIVERED, "e1", NULL, 0, 10, NULL, NULL, NULL);
	put(EVENT_DELIVERED, "e2", NULL, 0, 20, NULL, NULL, NULL);
	put(EVENT_DELIVERED, "e3", NULL, 0, 30, NULL, NULL, NULL);
	cr_assert_eq(cindex_stats(&ix).ended, 2);
	cr_assert_eq(cindex_stats(&ix).ended_evicted, 1);
	sched("e1", NULL, 100, "", "q", NULL); /* forgotten: listed */
	cr_assert_eq(cindex_count(&ix), 1);
	cindex_prune_ended(&ix, 25);
	cr_assert_eq(cindex_stats(&ix).ended, 1);
	sched("e2", NULL, 100, "", "q", NULL); /* pruned: listed */
	sched("e3", NULL, 100, "", "q", NULL); /* remembered: not */
	cr_assert_eq(cindex_count(&ix), 2);
	cr_assert_eq(cindex_stats(&ix).ended, 0);
}

Test(cindex, filter_by_owner)
{
	struct cindex_query q;

	cindex_query_init(&q);
	fill();
	q.owner = "alice";
	cr_assert_str_eq(page(&q, 0, 10), "inv-5 m3 m1|3");
	cr_assert_str_eq(page(&q, 1, 1), "m3|3");
	q.owner = "";
	cr_assert_str_eq(page(&q, 0, 10), "inv-4|1");
	q.owner = "mallory";
	cr_assert_str_eq(page(&q, 0, 10), "|0");
}

Test(cindex, filter_by_target_as_waiting_match)
{
	static const struct {
		const char *target, *want;
	} rows[] = {
	    {"ex", "inv-5 m1 inv-4|3"},
	    {"ex/k1", "m1|1"},
	    {"ex/", "inv-5|1"},
	    {"", "c2 m3|2"},
	    {"amq.default", "c2 m3|2"},
	    {"amq.default/q", "c2 m3|2"},
	    {"/q", "c2 m3|2"},
	    {"ex/k3", "|0"},
	    {"nope", "|0"},
	};
	struct cindex_query q;

	cindex_query_init(&q);
	fill();
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		q.target = rows[i].target;
		cr_assert_str_eq(page(&q, 0, 10), rows[i].want, "target %s",
		                 rows[i].target);
	}
}

Test(cindex, filter_by_due_range)
{
	static const struct {
		int64_t after, before;
		const char *want;
	} rows[] = {
	    {INT64_MIN, INT64_MAX, "c2 inv-5 m3 m1 inv-4|5"},
	    {200, INT64_MAX, "inv-5 m3 m1 inv-4|4"},
	    {INT64_MIN, 300, "c2 inv-5 m3|3"},
	    {200, 201, "inv-5 m3|2"},
	    {201, 300, "|0"},
	    {500, 100, "|0"},
	};
	struct cindex_query q;

	cindex_query_init(&q);
	fill();
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		q.due_after = rows[i].after;
		q.due_before = rows[i].before;
		cr_assert_str_eq(page(&q, 0, 10), rows[i].want, "row %zu", i);
	}
	q.due_after = 200;
	q.due_before = INT64_MAX;
	q.owner = "alice";
	cr_assert_str_eq(page(&q, 0, 10), "inv-5 m3 m1|3");
}

Test(cindex, filter_by_id_or_message_id_prefix)
{
	static const struct {
		const char *prefix, *want;
	} rows[] = {
	    {"inv-", "inv-5 inv-4|2"},
	    {"m", "m3 m1|2"},
	    {"c", "c2 m3 m1|3"},
	    {"00000000000000a", "inv-5 inv-4|2"},
	    {"00000000000000a4", "inv-4|1"},
	    {"x", "|0"},
	    {"", "c2 inv-5 m3 m1 inv-4|5"},
	};
	struct cindex_query q;

	cindex_query_init(&q);
	fill();
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		q.prefix = rows[i].prefix;
		cr_assert_str_eq(page(&q, 0, 10), rows[i].want, "prefix %s",
		                 rows[i].prefix);
	}
}

Test(cindex, named_by_id_or_message_id)
{
	uint32_t slots[4];
	struct cindex_row r;

	fill();
	sched("c7", "inv-4", 50, "", "q", NULL);
	cr_assert_eq(cindex_named(&ix, amqp_cstring_bytes("inv-4"), slots, 4),
	             2);
	cr_assert_eq(cindex_named(&ix, amqp_cstring_bytes("c1"), slots, 4), 1);
	cindex_row(&ix, slots[0], &r);
	cr_assert_eq(r.due, 300);
	cr_assert_eq(r.offset, 7);
	cr_assert_eq(r.exchange.len, 2);
	cr_assert_eq(r.routing_key.len, 2);
	cr_assert_eq(r.owner.len, 5);
	cr_assert_eq(
	    cindex_named(&ix, amqp_cstring_bytes("00000000000000a5"), slots, 4),
	    1);
	cr_assert_eq(cindex_named(&ix, amqp_cstring_bytes("none"), slots, 4),
	             0);
}

Test(cindex, histogram_by_windows)
{
	const int64_t now = 1000000000, M = 60000, H = 60 * M, D = 24 * H;
	struct cindex_histogram h;
	struct cindex_query q;

	sched("a", NULL, now - 1, "", "q", "alice");
	sched("b", NULL, now, "", "q", "alice");
	sched("c", NULL, now + 90 * 1000, "", "q", "bob");
	sched("d", NULL, now + 2 * H, "", "q", "alice");
	sched("e", NULL, now + 3 * D, "", "q", "alice");
	sched("f", NULL, now + 8 * D, "", "q", "alice");
	for (int pass = 0; pass < 2; pass++) {
		cindex_query_init(&q);
		q.owner = pass ? "alice" : NULL;
		cindex_histogram(&ix, pass ? &q : NULL, now, &h);
		cr_assert_eq(h.late, 1);
		cr_assert_eq(h.hour[0], 1);
		cr_assert_eq(h.hour[1], pass ? 0 : 1);
		cr_assert_eq(h.day[0], pass ? 1 : 2);
		cr_assert_eq(h.day[2], 1);
		cr_assert_eq(h.week[0], pass ? 2 : 3);
		cr_assert_eq(h.week[3], 1);
		cr_assert_eq(h.later, 1);
	}
	(void)M;
}

Test(cindex, windows_as_list_counts_them)
{
	/* list's windows (metrics_window): overdue and up to 1 min, then
	 * up to 1 h, 1 d, later; each bound inclusive. */
	const int64_t now = 1000000000, M = 60000, H = 60 * M, D = 24 * H;
	const int64_t edges[3] = {now + M + 1, now + H + 1, now + D + 1};
	struct cindex_query q;
	uint32_t w[4];

	sched("a", NULL, now - 5, "", "q", "alice");
	sched("b", NULL, now + M, "", "q", "alice");
	sched("c", NULL, now + M + 1, "ex", "k", "bob");
	sched("d", NULL, now + H, "", "q", "alice");
	sched("e", NULL, now + D + 1, "ex", "k", "alice");
	for (int pass = 0; pass < 2; pass++) {
		cindex_query_init(&q);
		q.target = pass ? "amq.default/q" : NULL;
		cr_assert_eq(cindex_windows(&ix, &q, edges, 3, w), 0);
		cr_assert_eq(w[0], 2);
		cr_assert_eq(w[1], pass ? 1 : 2);
		cr_assert_eq(w[2], 0);
		cr_assert_eq(w[3], pass ? 0 : 1);
	}
	/* due bounds cut the windows, by ranks and by a walk alike */
	for (int pass = 0; pass < 2; pass++) {
		cindex_query_init(&q);
		q.due_after = now + M;
		q.due_before = now + H;
		q.owner = pass ? "bob" : NULL;
		cr_assert_eq(cindex_windows(&ix, &q, edges, 3, w), 0);
		cr_assert_eq(w[0], pass ? 0 : 1);
		cr_assert_eq(w[1], 1);
		cr_assert_eq(w[2] + w[3], 0);
	}
	cr_assert_eq(cindex_windows(&ix, NULL, edges, 3, w), 0);
	cr_assert_eq(w[0] + w[1] + w[2] + w[3], 5);
	/* a page and its windows in one walk: cindex_page's, the same */
	for (int pass = 0; pass < 2; pass++) {
		uint32_t slots[2], n, total;
		struct cindex_row r;
		cindex_query_init(&q);
		q.target = pass ? "ex/k" : NULL;
		cr_assert_eq(cindex_page_windows(&ix, &q, 1, slots, &n, &total,
		                                 edges, 3, w),
		             0);
		cr_assert_eq(n, 1);
		cr_assert_eq(total, pass ? 2 : 5);
		cr_assert_str_eq(page(&q, 0, 1), pass ? "c|2" : "a|5");
		cindex_row(&ix, slots[0], &r);
		cr_assert_eq(r.id.len, 1);
		cr_assert_eq(((const char *)r.id.bytes)[0], pass ? 'c' : 'a');
		cr_assert_eq(w[0], pass ? 0 : 2);
		cr_assert_eq(w[1], pass ? 1 : 2);
		cr_assert_eq(w[3], 1);
	}
}

Test(cindex, caps_refuse_and_count)
{
	char id[32], owner[32];

	cindex_free(&ix);
	cr_assert_eq(cindex_init(&ix, 3, 0), 0);
	for (int i = 0; i < 5; i++) {
		snprintf(id, sizeof(id), "id%d", i);
		sched(id, NULL, i, "", "q", NULL);
	}
	cr_assert_eq(cindex_count(&ix), 3);
	cr_assert_eq(cindex_stats(&ix).refused, 2);
	cindex_free(&ix);
	cr_assert_eq(cindex_init(&ix, 0, 0), 0);
	ix.users.max = 2;
	for (int i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "id%d", i);
		snprintf(owner, sizeof(owner), "u%d", i);
		sched(id, NULL, i, "", "q", owner);
	}
	cr_assert_eq(cindex_stats(&ix).users, 2);
	cr_assert_eq(cindex_stats(&ix).refused, 1);
	/* A user whose last message goes frees room for another. */
	put(EVENT_DELIVERED, "id0", NULL, 0, 1, NULL, NULL, NULL);
	sched("id9", NULL, 9, "", "q", "u9");
	cr_assert_eq(cindex_stats(&ix).users, 2);
	cr_assert_eq(cindex_count(&ix), 2);
}

Test(cindex, arena_compaction_keeps_every_string)
{
	char id[32], mid[64];
	struct cindex_query q;

	ix.compact_min = 0;
	for (int i = 0; i < 2000; i++) {
		snprintf(id, sizeof(id), "id-%d", i);
		snprintf(mid, sizeof(mid), "message-%d", i);
		sched(id, mid, i, "", "q", NULL);
	}
	for (int i = 0; i < 2000; i += 2) {
		snprintf(id, sizeof(id), "id-%d", i);
		put(EVENT_DELIVERED, id, NULL, 0, 1, NULL, NULL, NULL);
	}
	cr_assert_gt(cindex_stats(&ix).compactions, 0);
	cindex_query_init(&q);
	q.prefix = "message-199";
	cr_assert_str_eq(page(&q, 0, 10), "message-199 message-1991 "
	                                  "message-1993 message-1995 "
	                                  "message-1997 message-1999|6");
	q.prefix = "id-1999";
	cr_assert_str_eq(page(&q, 0, 10), "message-1999|1");
}

/* A small generator, the same stream on every run. */
static uint64_t
next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * The same random records into cindex and into waiting.h's fold: adds,
 * re-adds (the later wins), ends before and after their scheduled, over
 * 10,000 ids of both shapes (16 hex digits, and text), with ties of due
 * and seen so the id decides; both must list the same messages in the
 * same order.
 */
Test(cindex, agrees_with_the_waiting_fold)
{
	struct waiting_fold f;
	struct waiting_filter all;
	struct waiting_rows rows;
	struct cindex_query q;
	uint32_t *slots, n, total;
	uint64_t s = 88172645463325252u;
	char id[32], mid[32];

	waiting_fold_init(&f);
	cindex_query_init(&q);
	waiting_filter_init(&all);
	for (int i = 0; i < 200000; i++) {
		uint64_t r = next(&s), k = r % 10000;
		struct event e;
		memset(&e, 0, sizeof(e));
		if (k & 1)
			snprintf(id, sizeof(id), "%016" PRIx64,
			         k * UINT64_C(0x9e3779b97f4a7c15));
		else
			snprintf(id, sizeof(id), "id-%" PRIu64, k);
		snprintf(mid, sizeof(mid), "m-%" PRIu64, (r >> 20) % 3000);
		e.id = amqp_cstring_bytes(id);
		e.kind = (r >> 40) % 3   ? EVENT_SCHEDULED
		         : (r >> 44) & 1 ? EVENT_DELIVERED
		                         : EVENT_CANCELLED;
		e.message_id =
		    (r >> 50) & 1 ? amqp_cstring_bytes(mid) : amqp_empty_bytes;
		e.due = (int64_t)((r >> 24) % 50);
		e.at = (int64_t)((r >> 32) % 4);
		e.exchange = amqp_cstring_bytes("ex");
		e.routing_key = amqp_cstring_bytes("k");
		cr_assert_eq(cindex_fold_event(&ix, &e, (uint64_t)i), 0);
		cr_assert_eq(waiting_fold_event(&f, &e), 0);
	}
	cr_assert_eq(waiting_select(&f, &all, 0, &rows), 0);
	cr_assert_gt(rows.n, 1000);
	cr_assert_eq(cindex_count(&ix), rows.n);
	cr_assert_eq(cindex_stats(&ix).ended, f.ended.n);
	slots = malloc(rows.n * sizeof(*slots));
	cr_assert_eq(
	    cindex_page(&ix, &q, 0, (uint32_t)rows.n, slots, &n, &total), 0);
	cr_assert_eq(n, rows.n);
	for (size_t i = 0; i < rows.n; i++) {
		struct cindex_row r;
		cindex_row(&ix, slots[i], &r);
		cr_assert_eq(r.id.len, rows.w[i]->id.len, "row %zu", i);
		cr_assert_eq(memcmp(r.id.bytes, rows.w[i]->id.bytes, r.id.len),
		             0, "row %zu", i);
		cr_assert_eq(r.due, rows.w[i]->due);
		cr_assert_eq(r.message_id.len, rows.w[i]->message_id.len);
	}
	free(slots);
	free(rows.w);
	waiting_fold_free(&f);
}

/*
 * The memory a message costs (not timed): 100,000 messages with 36-byte
 * message-ids (a UUID's length), 20 targets and 100 owners, the heap
 * grown (mallinfo2) divided by their number.
 */
Test(cindex, under_200_bytes_a_message)
{
	const uint32_t N = 100000;
	char id[32], mid[48], key[16], owner[16];
	struct mallinfo2 a, b;
	double per;

	cindex_free(&ix);
	a = mallinfo2();
	cr_assert_eq(cindex_init(&ix, 0, 0), 0);
	for (uint32_t i = 0; i < N; i++) {
		struct event e;
		memset(&e, 0, sizeof(e));
		snprintf(id, sizeof(id), "%016" PRIx64,
		         (uint64_t)i * UINT64_C(0x9e3779b97f4a7c15));
		snprintf(mid, sizeof(mid), "%08x-0000-4000-8000-%012x", i,
		         i * 7919u);
		snprintf(key, sizeof(key), "q%u", i % 20);
		snprintf(owner, sizeof(owner), "u%u", i % 100);
		e.kind = EVENT_SCHEDULED;
		e.id = amqp_cstring_bytes(id);
		e.message_id = amqp_cstring_bytes(mid);
		e.due = (int64_t)(((uint64_t)i * 2654435761u) % 604800000u);
		e.at = i;
		e.routing_key = amqp_cstring_bytes(key);
		e.owner = amqp_cstring_bytes(owner);
		cr_assert_eq(e.message_id.len, 36);
		cr_assert_eq(cindex_fold_event(&ix, &e, i), 0);
	}
	b = mallinfo2();
	per = (double)((b.uordblks + b.hblkhd) - (a.uordblks + a.hblkhd)) / N;
	cr_log_info("cindex: %.1f bytes a message at %u", per, N);
	cr_assert_lt(per, 200.0, "%.1f bytes a message", per);
}
