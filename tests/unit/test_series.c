/* SPDX-License-Identifier: Apache-2.0 */
/* Repeats: which copy of a series is the live one (requests.h). */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "requests.h"

static amqp_bytes_t
b(const char *s)
{
	return amqp_cstring_bytes(s);
}

Test(series, a_copy_is_stale_below_the_latest_or_with_another_token)
{
	struct requests s;

	requests_init(&s);
	cr_assert_not(requests_series_stale(&s, b("S"), 1, b("")),
	              "nothing known");
	cr_assert_eq(requests_series_add(&s, b("S"), 2, b("t1"), 1000, 0), 0);
	cr_assert(requests_series_stale(&s, b("S"), 1, b("")),
	          "the delivered one");
	cr_assert_not(requests_series_stale(&s, b("S"), 2, b("t1")));
	/* A crash before the ack: occurrence 1 again, a second copy t2
	 * recorded later; the first copy t1 is now the stale one. */
	requests_series_add(&s, b("S"), 2, b("t2"), 1000, 0);
	cr_assert(requests_series_stale(&s, b("S"), 2, b("t1")));
	cr_assert_not(requests_series_stale(&s, b("S"), 2, b("t2")));
	/* An older record read late changes nothing. */
	requests_series_add(&s, b("S"), 3, b("t3"), 2000, 0);
	requests_series_add(&s, b("S"), 2, b("t2"), 1000, 0);
	cr_assert(requests_series_stale(&s, b("S"), 2, b("t2")));
	cr_assert_not(requests_series_stale(&s, b("S"), 3, b("t3")));
	cr_assert_eq(requests_prune(&s, 1999), 1);
	cr_assert_eq(requests_prune(&s, 2000), 0);
	requests_free(&s);
}

Test(series, a_token_of_any_length_is_held_whole)
{
	struct requests s;
	char long_token[300];

	memset(long_token, 't', sizeof(long_token) - 1);
	long_token[sizeof(long_token) - 1] = '\0';
	requests_init(&s);
	cr_assert_eq(requests_series_add(&s, b("S"), 2, b(long_token), 1000, 0),
	             0);
	cr_assert_not(requests_series_stale(&s, b("S"), 2, b(long_token)));
	/* One byte short is another token, not the same one cut. */
	long_token[298] = '\0';
	cr_assert(requests_series_stale(&s, b("S"), 2, b(long_token)));
	/* A shorter token later: the head is sized again. */
	cr_assert_eq(requests_series_add(&s, b("S"), 3, b("t3"), 2000, 0), 0);
	cr_assert_not(requests_series_stale(&s, b("S"), 3, b("t3")));
	cr_assert(requests_series_stale(&s, b("S"), 3, b("t")));
	cr_assert_eq(requests_prune(&s, 2000), 0);
	requests_free(&s);
}

/* A refresh writer for the tests: notes each id and what it was told. */
struct wrote {
	char ids[8][8];
	int64_t occurrence[8];
	unsigned n;
	int fail;
};

static int
note(amqp_bytes_t id, const struct series_head *h, void *ctx)
{
	struct wrote *w = ctx;

	if (w->fail)
		return -1;
	cr_assert_lt(w->n, 8);
	snprintf(w->ids[w->n], sizeof(w->ids[0]), "%.*s", (int)id.len,
	         (const char *)id.bytes);
	w->occurrence[w->n++] = h->occurrence;
	return 0;
}

/* One pass over the whole map: the ids written, sorted, joined by commas. */
static void
refresh_all(struct requests *s, int64_t stale, int64_t now, struct wrote *w,
            char *out, size_t size)
{
	size_t cursor = 0, j = 0;

	memset(w, 0, sizeof(*w));
	do
		(void)requests_series_refresh(
		    s, &cursor, REQUESTS_REFRESH_SLOTS, REQUESTS_REFRESH_MAX,
		    stale, now, note, w);
	while (cursor != 0);
	/* Slot order is the hash's: sort for the comparison. */
	for (unsigned i = 1; i < w->n; i++)
		for (unsigned k = i;
		     k > 0 && strcmp(w->ids[k - 1], w->ids[k]) > 0; k--) {
			char t[8];
			int64_t o = w->occurrence[k];
			memcpy(t, w->ids[k], sizeof(t));
			memcpy(w->ids[k], w->ids[k - 1], sizeof(t));
			memcpy(w->ids[k - 1], t, sizeof(t));
			w->occurrence[k] = w->occurrence[k - 1];
			w->occurrence[k - 1] = o;
		}
	out[0] = '\0';
	for (unsigned i = 0; i < w->n; i++)
		j += (size_t)snprintf(out + j, size - j, "%s%s", i ? "," : "",
		                      w->ids[i]);
}

/*
 * Which series the refresh writes again (CONTRACT.md 7.8): those whose
 * latest record was written at or before `stale` and are still in force;
 * a record read again later (another daemon's refresh) makes one fresh,
 * an older occurrence read late does not; once written, a series is fresh
 * until it grows old again.
 */
Test(series, the_refresh_writes_old_records_still_in_force)
{
	const int64_t now = 10000000, stale = now - 1000;
	struct requests s;
	struct wrote w;
	char got[128];

	requests_init(&s);
	/* old, in force */
	requests_series_add(&s, b("A"), 2, b("a"), now + 50000, stale - 1);
	/* written exactly at the limit: old */
	requests_series_add(&s, b("B"), 7, b("b"), now + 50000, stale);
	/* fresh */
	requests_series_add(&s, b("C"), 2, b("c"), now + 50000, stale + 1);
	/* old but lapsed: nothing to keep */
	requests_series_add(&s, b("D"), 2, b("d"), now, 0);
	/* old, then its record read again, written later: fresh */
	requests_series_add(&s, b("E"), 3, b("e"), now + 50000, 0);
	requests_series_add(&s, b("E"), 3, b("e"), now + 50000, now - 10);
	/* fresh, then an older occurrence read late: still fresh */
	requests_series_add(&s, b("F"), 4, b("f"), now + 50000, now - 10);
	requests_series_add(&s, b("F"), 3, b("f0"), now + 50000, 0);
	/* old, then a new occurrence written late: fresh */
	requests_series_add(&s, b("G"), 4, b("g"), now + 50000, 0);
	requests_series_add(&s, b("G"), 5, b("g2"), now + 50000, now - 10);
	/* fresh, then a record of the same occurrence with another token
	 * written long ago (a crash's second copy): that one is the latest,
	 * and old */
	requests_series_add(&s, b("H"), 4, b("h"), now + 50000, now - 10);
	requests_series_add(&s, b("H"), 4, b("h2"), now + 50000, 0);

	refresh_all(&s, stale, now, &w, got, sizeof(got));
	cr_assert_str_eq(got, "A,B,H");
	/* What it writes is the latest record: occurrence and token. */
	for (unsigned i = 0; i < w.n; i++) {
		const struct series_head *h =
		    requests_series_head(&s, b(w.ids[i]));
		cr_assert_eq(w.occurrence[i], h->occurrence);
		cr_assert_eq(h->written, now, "taken as written now");
	}
	/* Written: fresh until it grows old again. */
	refresh_all(&s, stale, now, &w, got, sizeof(got));
	cr_assert_str_eq(got, "");
	refresh_all(&s, now + 2000, now + 3000, &w, got, sizeof(got));
	cr_assert_str_eq(got, "A,B,C,E,F,G,H");
	/* A writer that fails leaves the record old, to try again. */
	{
		size_t cursor = 0;
		struct wrote f = {.fail = 1};
		cr_assert_eq(requests_series_refresh(
		                 &s, &cursor, REQUESTS_REFRESH_SLOTS, 10,
		                 now + 9000, now + 9000, note, &f),
		             0);
	}
	refresh_all(&s, now + 9000, now + 9000, &w, got, sizeof(got));
	cr_assert_str_eq(got, "A,B,C,E,F,G,H");
	requests_free(&s);
}

/*
 * The work of a tick is bounded: at most `slots` slots looked at and `max`
 * records written, and the next tick goes on where this one stopped, so
 * that a pass over many ticks writes each old record once.
 */
Test(series, the_refresh_is_bounded_per_tick_and_goes_on_where_it_stopped)
{
	const int64_t now = 10000000;
	struct requests s;
	struct wrote w;
	size_t cursor = 0, total = 0, ticks = 0;
	char id[8];

	requests_init(&s);
	for (int i = 0; i < 40; i++) {
		snprintf(id, sizeof(id), "s%d", i);
		requests_series_add(&s, b(id), 2, b("t"), now + 5000, 0);
	}
	cr_assert_eq(s.map.cap, 128);
	do {
		memset(&w, 0, sizeof(w));
		size_t n = requests_series_refresh(&s, &cursor, 16, 3,
		                                   now - 1000, now, note, &w);
		cr_assert_leq(n, 3);
		total += n;
		ticks++;
	} while (cursor != 0 && ticks < 1000);
	cr_assert_eq(total, 40, "each old record once in a pass");
	/* 128 slots, 16 a tick: at least 8 ticks; 40 records, 3 a tick: at
	 * least 14. */
	cr_assert_geq(ticks, 14);
	memset(&w, 0, sizeof(w));
	cr_assert_eq(requests_series_refresh(&s, &cursor, 128, 100, now - 1000,
	                                     now, note, &w),
	             0, "all fresh now");
	requests_free(&s);
}

/* The walk goes over the one map of every kind: it writes series only,
 * each with its id as the series record names it. */
Test(series, the_refresh_writes_series_heads_only)
{
	const int64_t now = 10000000;
	struct requests s;
	struct claim_verdict v;
	struct event e;
	struct wrote w;
	char got[128];

	requests_init(&s);
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_CANCEL;
	e.cancel = b("A");
	e.until = now + 50000;
	cr_assert_eq(requests_add(&s, &e, b(""), 1), 0);
	e.kind = EVENT_CLAIM;
	e.cancel = b("B");
	e.id = b("0123456789abcdef");
	e.due = now + 50000;
	cr_assert_eq(requests_claim(&s, &e, b(""), &v), 0);
	requests_series_add(&s, b("A"), 2, b("a"), now + 50000, 0);
	requests_series_add(&s, b("C"), 2, b("c"), now + 50000, 0);
	refresh_all(&s, now - 1000, now, &w, got, sizeof(got));
	cr_assert_str_eq(got, "A,C");
	requests_free(&s);
}
