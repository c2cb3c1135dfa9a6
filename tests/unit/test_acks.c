/* SPDX-License-Identifier: Apache-2.0 */
/* Batched acks: what goes on the wire for each order of settling. */
#include <criterion/criterion.h>

#include "acks.h"

struct wire {
	uint64_t tag[64];
	int multiple[64];
	int n;
};

static int
record(void *ctx, uint64_t tag, int multiple)
{
	struct wire *w = ctx;

	w->tag[w->n] = tag;
	w->multiple[w->n] = multiple;
	w->n++;
	return 0;
}

static void
push_tags(struct acks *a, uint64_t first, int n, uint64_t *index)
{
	for (int i = 0; i < n; i++)
		cr_assert_eq(acks_push(a, first + (uint64_t)i, &index[i]), 0);
}

Test(acks, settled_in_order_is_one_multiple_ack)
{
	struct acks a;
	struct wire w = {0};
	uint64_t idx[5];

	acks_init(&a);
	push_tags(&a, 1, 5, idx);
	for (int i = 0; i < 5; i++)
		acks_settle(&a, idx[i]);
	cr_assert_eq(acks_flush(&a, record, &w), 0);
	cr_assert_eq(w.n, 1);
	cr_assert_eq(w.tag[0], 5);
	cr_assert_eq(w.multiple[0], 1);
	cr_assert_eq(acks_outstanding(&a), 0);
	acks_free(&a);
}

Test(acks, settled_behind_an_older_one_goes_alone_and_never_twice)
{
	struct acks a;
	struct wire w = {0};
	uint64_t idx[4];

	acks_init(&a);
	push_tags(&a, 10, 4, idx); /* tags 10..13; 10 is held */
	acks_settle(&a, idx[1]);
	acks_settle(&a, idx[2]);
	acks_flush(&a, record, &w);
	cr_assert_eq(w.n, 2);
	cr_assert(w.tag[0] == 11 && !w.multiple[0]);
	cr_assert(w.tag[1] == 12 && !w.multiple[1]);
	/* The held one settles: the multiple ack names 10, never 11 or 12,
	 * which the broker no longer knows. */
	acks_settle(&a, idx[0]);
	acks_flush(&a, record, &w);
	cr_assert_eq(w.n, 3);
	cr_assert(w.tag[2] == 10 && w.multiple[2]);
	acks_settle(&a, idx[3]);
	acks_flush(&a, record, &w);
	cr_assert_eq(w.n, 4);
	cr_assert(w.tag[3] == 13 && w.multiple[3]);
	cr_assert_eq(acks_outstanding(&a), 0);
	acks_free(&a);
}

/* A delivery the daemon rejected (its headers refused on the wire) is
 * settled already: nothing is sent for it, and the run at the front
 * passes it, so the next multiple ack covers its neighbours. */
Test(acks, a_rejected_one_sends_nothing_and_holds_up_nothing)
{
	struct acks a;
	struct wire w = {0};
	uint64_t idx[3];

	acks_init(&a);
	push_tags(&a, 1, 3, idx);
	acks_rejected(&a, idx[1]);
	acks_settle(&a, idx[0]);
	acks_settle(&a, idx[2]);
	cr_assert_eq(acks_flush(&a, record, &w), 0);
	cr_assert_eq(w.n, 1);
	cr_assert_eq(w.tag[0], 3);
	cr_assert_eq(w.multiple[0], 1);
	cr_assert_eq(acks_outstanding(&a), 0);
	/* Alone at the front, it is passed too, with nothing sent. */
	push_tags(&a, 4, 1, idx);
	acks_rejected(&a, idx[0]);
	cr_assert_eq(acks_flush(&a, record, &w), 0);
	cr_assert_eq(w.n, 1);
	cr_assert_eq(acks_outstanding(&a), 0);
	acks_free(&a);
}

Test(acks, nothing_settled_sends_nothing)
{
	struct acks a;
	struct wire w = {0};
	uint64_t idx[3];

	acks_init(&a);
	push_tags(&a, 1, 3, idx);
	acks_flush(&a, record, &w);
	cr_assert_eq(w.n, 0);
	cr_assert_eq(acks_outstanding(&a), 3);
	acks_free(&a);
}

Test(acks, grows_past_its_first_ring_keeping_order)
{
	struct acks a;
	struct wire w = {0};
	static uint64_t idx[5000];

	acks_init(&a);
	push_tags(&a, 1, 5000, idx);
	for (int i = 4999; i >= 0; i--) /* settle newest first */
		if (i != 0)
			acks_settle(&a, idx[i]);
	acks_settle(&a, idx[0]);
	/* 4999 single acks would not fit the recorder: count instead. */
	cr_assert_eq(acks_flush(&a, record, &w), 0);
	cr_assert_eq(w.n, 1);
	cr_assert_eq(w.tag[0], 5000);
	acks_free(&a);
}

Test(acks, reset_forgets_the_old_channel)
{
	struct acks a;
	struct wire w = {0};
	uint64_t idx[2], old;

	acks_init(&a);
	push_tags(&a, 1, 2, idx);
	old = idx[1];
	acks_reset(&a);
	push_tags(&a, 1, 1, idx);
	acks_settle(&a, old); /* a message from before the reset */
	acks_settle(&a, idx[0]);
	acks_flush(&a, record, &w);
	cr_assert_eq(w.n, 1);
	cr_assert(w.tag[0] == 1 && w.multiple[0]);
	acks_free(&a);
}
