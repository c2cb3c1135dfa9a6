/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reorder window: overdue deliveries in any arrival order leave in due
 * order; on-time ones are never held and overtake none of their target's;
 * nothing waits more than twice the window; a full window lets the first
 * due out; the window is open after a disruption, while overdue ones keep
 * coming, and its holds run on the monotonic clock.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "reorder.h"

#define T0 INT64_C(1700000000000)
#define W 10000
#define KEY 1
#define OTHER 2

static struct reorder r;

static void
setup(void)
{
	cr_assert_eq(reorder_init(&r, W, 1000), 0);
}

static void
teardown(void)
{
	reorder_free(&r);
}

TestSuite(reorder, .init = setup, .fini = teardown);

/* Items are numbers (due times' offsets from T0 in seconds, or indexes),
 * as pointers that are never NULL. */
#define ITEM(s) ((void *)(intptr_t)((s) + 1000))
#define SECS(p) ((int)(intptr_t)(p)-1000)

static void
add(int due_s, int64_t now)
{
	void *out;

	reorder_add(&r, ITEM(due_s), T0 + due_s * 1000, KEY, now, now, &out);
	cr_assert_null(out, "nothing leaves while there is room");
}

Test(reorder, on_time_is_not_overdue_and_a_zero_window_holds_nothing)
{
	struct reorder none;

	cr_assert(!reorder_overdue(&r, T0, T0 - 5000), "early");
	cr_assert(!reorder_overdue(&r, T0, T0), "on time");
	cr_assert(!reorder_overdue(&r, T0, T0 + REORDER_LATE_MS),
	          "a second late");
	cr_assert(reorder_overdue(&r, T0, T0 + REORDER_LATE_MS + 1));
	cr_assert(reorder_overdue(&r, T0, T0 + 180000));
	cr_assert_eq(reorder_init(&none, 0, 1000), 0);
	cr_assert(!reorder_overdue(&none, T0, T0 + 180000));
	reorder_free(&none);
}

/* The delayed-message plugin's restart test's delays, as a restart of
 * the broker gives them back: level by level, seconds apart. */
Test(reorder, the_plugins_restart_case_leaves_in_due_order)
{
	static const int back[] = {1, 3, 5, 2, 4, 10, 15};
	int64_t now = T0 + 20000;
	int want = 0;
	void *p;

	for (size_t i = 0; i < sizeof(back) / sizeof(back[0]); i++) {
		add(back[i], now);
		cr_assert_null(reorder_take(&r, now),
		               "none leaves before the window");
		now += 1000;
	}
	cr_assert_eq(reorder_next_at(&r), T0 + 20000 + W,
	             "the first due, back first, waits its window");
	now = reorder_next_at(&r);
	static const int order[] = {1, 2, 3, 4, 5, 10, 15};
	for (;;) {
		while ((p = reorder_take(&r, now)) != NULL) {
			cr_assert_eq(SECS(p), order[want], "#%d: %d, not %d",
			             want, SECS(p), order[want]);
			want++;
		}
		if (reorder_next_at(&r) == INT64_MAX)
			break;
		cr_assert_gt(reorder_next_at(&r), now);
		now = reorder_next_at(&r);
	}
	cr_assert_eq(want, 7);
	cr_assert_eq(r.held_total, 7);
	cr_assert_eq(r.forced_total, 0);
}

Test(reorder, nothing_leaves_before_its_window)
{
	add(5, T0 + 60000);
	cr_assert_null(reorder_take(&r, T0 + 60000 + W - 1));
	cr_assert_eq(SECS(reorder_take(&r, T0 + 60000 + W)), 5);
	cr_assert_null(reorder_take(&r, T0 + 60000 + W));
	cr_assert_eq(reorder_next_at(&r), INT64_MAX);
}

/* One due later waits for one due earlier that came back after it. */
Test(reorder, a_later_one_waits_for_an_earlier_one_that_came_after_it)
{
	add(8, T0 + 30000);
	add(3, T0 + 30000 + 9000);
	/* 8's window is over, but 3 is still here. */
	cr_assert_null(reorder_take(&r, T0 + 30000 + W));
	cr_assert_eq(reorder_next_at(&r), T0 + 39000 + W);
	cr_assert_eq(SECS(reorder_take(&r, T0 + 39000 + W)), 3);
	cr_assert_eq(SECS(reorder_take(&r, T0 + 39000 + W)), 8);
}

/* A delivery on time lets out the overdue ones for its target due before
 * it, and only those, so it overtakes none; another target's keep their
 * window. */
Test(reorder, one_on_time_lets_out_those_of_its_target_due_before_it)
{
	void *out;

	add(2, T0 + 20000);
	add(12, T0 + 20000);
	add(7, T0 + 20000);
	reorder_add(&r, ITEM(1), T0 + 1000, OTHER, T0 + 20000, T0 + 20000,
	            &out);
	cr_assert_eq(SECS(reorder_take_before(&r, KEY, T0 + 8000)), 2);
	cr_assert_eq(SECS(reorder_take_before(&r, KEY, T0 + 8000)), 7);
	cr_assert_null(reorder_take_before(&r, KEY, T0 + 8000));
	cr_assert_eq(r.n, 2, "12, and the other target's 1");
	cr_assert_null(reorder_take(&r, T0 + 20500), "they keep their window");
	cr_assert_eq(SECS(reorder_take(&r, T0 + 20000 + W)), 1);
	cr_assert_eq(SECS(reorder_take(&r, T0 + 20000 + W)), 12);
	add(4, T0 + 40000);
	add(3, T0 + 40000);
	cr_assert_not_null(reorder_drain(&r));
	cr_assert_not_null(reorder_drain(&r));
	cr_assert_null(reorder_drain(&r));
}

/* A delivery a little late waits only as long as it is late. */
Test(reorder, one_a_little_late_waits_as_long_as_it_is_late)
{
	add(10, T0 + 12500);
	cr_assert_eq(reorder_next_at(&r), T0 + 15000, "2.5 s late: 2.5 s");
	cr_assert_null(reorder_take(&r, T0 + 14999));
	cr_assert_eq(SECS(reorder_take(&r, T0 + 15000)), 10);
	add(10, T0 + 10000 + 3 * W);
	cr_assert_eq(reorder_next_at(&r), T0 + 10000 + 4 * W,
	             "late by three windows: one window");
}

Test(reorder, targets_have_different_keys)
{
	cr_assert_neq(reorder_key("a", 1, "bc", 2),
	              reorder_key("ab", 2, "c", 1));
	cr_assert_neq(reorder_key("", 0, "q", 1), reorder_key("q", 1, "", 0));
	cr_assert_eq(reorder_key("x", 1, "y", 1), reorder_key("x", 1, "y", 1));
}

/* Ever earlier ones, each within the window of the last, cannot keep the
 * first waiting for more than twice the window. */
Test(reorder, an_ever_earlier_chain_holds_none_past_twice_the_window)
{
	int64_t now = T0 + 100000;
	int due = 90, left = 0;
	void *p;

	for (int i = 0; i < 100; i++) {
		add(due--, now);
		now += W / 2;
		while ((p = reorder_take(&r, now)) != NULL)
			left++;
		cr_assert_lt(now - reorder_next_at(&r), 1, "due: none overdue");
	}
	cr_assert_gt(left, 0);
	cr_assert_gt(r.forced_total, 0);
	cr_assert_leq(r.n, 5, "at most those of the last twice the window");
}

Test(reorder, a_full_window_lets_the_first_due_out)
{
	struct reorder small;
	void *out;

	cr_assert_eq(reorder_init(&small, W, 2), 0);
	reorder_add(&small, ITEM(5), T0 + 5000, KEY, T0 + 60000, T0 + 60000,
	            &out);
	cr_assert_null(out);
	reorder_add(&small, ITEM(9), T0 + 9000, KEY, T0 + 60000, T0 + 60000,
	            &out);
	cr_assert_null(out);
	reorder_add(&small, ITEM(7), T0 + 7000, KEY, T0 + 60000, T0 + 60000,
	            &out);
	cr_assert_eq(SECS(out), 5, "the first due of the three goes");
	reorder_add(&small, ITEM(1), T0 + 1000, KEY, T0 + 60000, T0 + 60000,
	            &out);
	cr_assert_eq(SECS(out), 1, "the one coming in, due first, goes");
	cr_assert_eq(small.n, 2);
	cr_assert_eq(small.full_total, 2);
	reorder_free(&small);
}

/* What an entry waits at least: as long as it is late, up to the window. */
static int64_t
hold_of(int64_t due, int64_t arrived)
{
	return arrived - due < W ? arrived - due : W;
}

/*
 * Random arrivals: none waits over twice the window; two that were here
 * together leave in due order; and in a run where none was forced out
 * (as none is when they come back out of order by less than they are
 * late), each waited its hold, and one that came back within another's
 * hold after it, due before it, left before it.
 */
Test(reorder, random_arrivals_keep_the_rule)
{
	enum { N = 400 };
	static int64_t due[N], arrived[N], left[N];
	unsigned seed = 12345;
	int unforced = 0;

	for (int round = 0; round < 20; round++) {
		struct reorder q;
		int64_t now = T0 + 1000000;
		int next = 0, out = 0;
		void *p;

		cr_assert_eq(reorder_init(&q, W, 1000), 0);
		while (out < N) {
			if (next < N && rand_r(&seed) % 3 == 0) {
				void *full;

				/* Even rounds: any due time.  Odd ones: out of
				 * order by less than the window, as a restart
				 * gives them back; none is forced out then. */
				due[next] = round % 2
				                ? now - 5000 - rand_r(&seed) % W
				                : T0 + rand_r(&seed) % 900000;
				arrived[next] = now;
				reorder_add(&q, ITEM(next), due[next], KEY, now,
				            now, &full);
				cr_assert_null(full);
				next++;
			}
			while ((p = reorder_take(&q, now)) != NULL)
				left[SECS(p)] = now, out++;
			now += 1 + (int64_t)(rand_r(&seed) %
			                     (round % 2 ? 4000 : 200));
			if (next == N && reorder_next_at(&q) != INT64_MAX &&
			    reorder_next_at(&q) > now)
				now = reorder_next_at(&q);
		}
		for (int i = 0; i < N; i++) {
			cr_assert_leq(left[i] - arrived[i], 2 * W + 4000);
			for (int j = 0; j < N; j++)
				if (arrived[i] <= left[j] &&
				    arrived[j] <= left[i] && due[i] < due[j])
					cr_assert_leq(
					    left[i], left[j],
					    "round %d: %d, due first, after %d",
					    round, i, j);
		}
		if (q.forced_total == 0) {
			unforced++;
			for (int i = 0; i < N; i++) {
				int64_t hold_i = hold_of(due[i], arrived[i]);

				cr_assert_geq(left[i] - arrived[i], hold_i);
				for (int j = 0; j < N; j++)
					if (due[j] < due[i] &&
					    arrived[j] - arrived[i] <= hold_i)
						cr_assert_leq(
						    left[j], left[i],
						    "round %d: %d before %d",
						    round, j, i);
			}
		}
		reorder_free(&q);
	}
	cr_assert_geq(unforced, 10,
	              "the odd rounds check the window's promise");
}

/* Closed until a disruption; open for a window after it, and a window
 * after the last overdue one held; closed again once returns were on time
 * for a window's length. */
Test(reorder, open_after_a_disruption_until_a_window_with_none_overdue)
{
	struct reorder none;
	int64_t mono = 5000000;
	void *out;

	cr_assert(!reorder_open(&r, mono), "closed before any disruption");
	reorder_disrupted(&r, mono);
	cr_assert(reorder_open(&r, mono));
	cr_assert(reorder_open(&r, mono + W - 1));
	cr_assert(!reorder_open(&r, mono + W), "a window with none overdue");
	cr_assert_eq(r.opened_total, 1);
	mono += W;
	reorder_disrupted(&r, mono);
	reorder_disrupted(&r, mono + 1);
	cr_assert_eq(r.opened_total, 2, "counted once, opened while closed");
	cr_assert(!reorder_open(&r, mono + W + 1));
	/* Overdue ones keep coming back: it stays open. */
	reorder_add(&r, ITEM(1), T0 + 1000, KEY, T0 + 60000, mono + W, &out);
	cr_assert(reorder_open(&r, mono + 2 * W - 1));
	cr_assert(!reorder_open(&r, mono + 2 * W));
	cr_assert_eq(r.opened_total, 2);
	cr_assert_eq(reorder_init(&none, 0, 10), 0);
	reorder_disrupted(&none, mono);
	cr_assert(!reorder_open(&none, mono), "a zero window never opens");
	reorder_free(&none);
}

/* How long an entry waits is counted on the monotonic clock: the wall
 * clock stepping back an hour between its arrival and now changes
 * nothing. */
Test(reorder, a_wall_clock_step_does_not_change_the_hold)
{
	int64_t mono = 7000000;
	void *out;

	/* Back 3 s late by the wall clock: held 3 s by the monotonic. */
	reorder_add(&r, ITEM(10), T0 + 10000, KEY, T0 + 13000, mono, &out);
	cr_assert_eq(reorder_next_at(&r), mono + 3000);
	cr_assert_null(reorder_take(&r, mono + 2999));
	cr_assert_eq(SECS(reorder_take(&r, mono + 3000)), 10);
}
