/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The outbox: which publish a confirm, a nack or a return settles, what is
 * sent after the channel closes, and when retries come due.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "outbox.h"

#define N 8

static struct outbox o;
static struct outbox_item items[N];
static int freed[N];

static void
setup(void)
{
	outbox_init(&o);
	memset(items, 0, sizeof(items));
	memset(freed, 0, sizeof(freed));
	outbox_open(&o);
}

static int
idx(const struct outbox_item *it)
{
	return it == NULL ? -1 : (int)(it - items);
}

static void
send(int i, const char *exchange, const char *key)
{
	cr_assert(outbox_may_send(&o, &items[i]), "item %d may be sent", i);
	outbox_sent(&o, &items[i], amqp_cstring_bytes(exchange),
	            amqp_cstring_bytes(key));
}

static void
free_item(struct outbox_item *it, void *ctx)
{
	(void)ctx;
	freed[idx(it)]++;
}

TestSuite(outbox, .init = setup);

Test(outbox, publishes_are_numbered_from_one_after_open)
{
	send(0, "", "q");
	send(1, "", "q");
	cr_assert_eq(items[0].seq, 1);
	cr_assert_eq(items[1].seq, 2);
	/* The channel reopens: the broker numbers from 1 again. */
	outbox_open(&o);
	send(2, "", "q");
	cr_assert_eq(items[2].seq, 1);
}

Test(outbox, single_ack_settles_only_its_publish_out_of_order)
{
	for (int i = 0; i < 3; i++)
		send(i, "", "q");
	cr_assert_eq(idx(outbox_confirmed(&o, 2, 0)), 1);
	cr_assert_null(outbox_confirmed(&o, 2, 0));
	cr_assert_eq(outbox_count(&o.inflight), 2);
	cr_assert_eq(idx(outbox_confirmed(&o, 3, 0)), 2);
	cr_assert_eq(idx(outbox_confirmed(&o, 1, 0)), 0);
	cr_assert(outbox_settled(&o));
}

Test(outbox, multiple_ack_settles_every_lower_number_in_order)
{
	for (int i = 0; i < 5; i++)
		send(i, "", "q");
	cr_assert_eq(idx(outbox_confirmed(&o, 2, 0)), 1);
	/* multiple up to 4: 1, 3, 4 (2 was confirmed alone), not 5 */
	cr_assert_eq(idx(outbox_confirmed(&o, 4, 1)), 0);
	cr_assert_eq(idx(outbox_confirmed(&o, 4, 1)), 2);
	cr_assert_eq(idx(outbox_confirmed(&o, 4, 1)), 3);
	cr_assert_null(outbox_confirmed(&o, 4, 1));
	cr_assert_eq(outbox_count(&o.inflight), 1);
}

Test(outbox, publish_during_a_multiple_ack_is_not_settled_by_it)
{
	struct outbox_item *it;
	int settled = 0;

	send(0, "", "q");
	send(1, "", "q");
	while ((it = outbox_confirmed(&o, 2, 1)) != NULL) {
		settled++;
		/* A nacked message goes out again at once (a lower level). */
		if (settled == 1)
			send(2, "", "q.lower");
	}
	cr_assert_eq(settled, 2);
	cr_assert_eq(items[2].seq, 3);
	cr_assert_eq(outbox_count(&o.inflight), 1);
}

Test(outbox, confirm_for_an_unknown_number_settles_nothing)
{
	send(0, "", "q");
	cr_assert_null(outbox_confirmed(&o, 7, 0));
	cr_assert_null(outbox_confirmed(&o, 0, 1));
	cr_assert_eq(outbox_count(&o.inflight), 1);
}

static int
same_body(const struct outbox_item *it, void *ctx)
{
	return idx(it) == *(int *)ctx;
}

Test(outbox, return_names_the_first_unreturned_publish_with_same_route)
{
	int want = 2;

	send(0, "x", "a");
	send(1, "x", "b");
	send(2, "x", "a");
	send(3, "x", "a");
	/* Exchange and key pick 0, 2 and 3; the content test picks 2. */
	cr_assert_eq(idx(outbox_returned(&o, amqp_cstring_bytes("x"),
	                                 amqp_cstring_bytes("a"),
	                                 "312 NO_ROUTE", same_body, &want)),
	             2);
	cr_assert(items[2].returned);
	cr_assert_str_eq(items[2].return_text, "312 NO_ROUTE");
	cr_assert_not(items[0].returned);
	/* Without a content test: the oldest, skipping the returned one. */
	cr_assert_eq(
	    idx(outbox_returned(&o, amqp_cstring_bytes("x"),
	                        amqp_cstring_bytes("a"), "312", NULL, NULL)),
	    0);
	cr_assert_eq(
	    idx(outbox_returned(&o, amqp_cstring_bytes("x"),
	                        amqp_cstring_bytes("a"), "312", NULL, NULL)),
	    3);
	cr_assert_null(outbox_returned(&o, amqp_cstring_bytes("x"),
	                               amqp_cstring_bytes("a"), "312", NULL,
	                               NULL));
	/* Different exchange, same key: no match. */
	cr_assert_null(outbox_returned(&o, amqp_cstring_bytes("y"),
	                               amqp_cstring_bytes("b"), "312", NULL,
	                               NULL));
	/* The returned publish is still settled by its confirm. */
	cr_assert_eq(idx(outbox_confirmed(&o, 3, 0)), 2);
}

Test(outbox, not_open_means_queued_then_sent_in_order)
{
	struct outbox_item *it;
	int done;

	outbox_init(&o);
	cr_assert_not(outbox_may_send(&o, &items[0]));
	outbox_queue(&o, &items[0]);
	outbox_queue(&o, &items[1]);
	cr_assert_null(outbox_next(&o, &done));
	outbox_open(&o);
	it = outbox_next(&o, &done);
	cr_assert_eq(idx(it), 0);
	cr_assert_not(done);
	cr_assert_eq(idx(outbox_next(&o, &done)), 1);
	cr_assert_null(outbox_next(&o, &done));
}

Test(outbox, close_not_caused_by_a_publish_gives_up_the_connection)
{
	struct outbox_item *culprit;

	send(0, "", "q");
	cr_assert_eq(outbox_closed(&o, 0, &culprit), OUTBOX_CLOSE_FAIL);
	cr_assert_null(culprit);
	cr_assert_not(o.ready);
}

Test(outbox, close_with_one_publish_in_flight_names_it)
{
	struct outbox_item *culprit;

	send(0, "amq.rabbitmq.trace", "k");
	items[0].returned = 1;
	cr_assert_eq(outbox_closed(&o, 1, &culprit), OUTBOX_CLOSE_CULPRIT);
	cr_assert_eq(idx(culprit), 0);
	cr_assert_not(culprit->returned);
	cr_assert(outbox_settled(&o));
	cr_assert_not(o.probing);
	cr_assert_not(outbox_may_send(&o, &items[1]));
}

Test(outbox, close_with_several_in_flight_probes_them_one_at_a_time)
{
	struct outbox_item *culprit, *it;
	int done;

	for (int i = 0; i < 3; i++)
		send(i, "x", "k");
	cr_assert_eq(outbox_closed(&o, 1, &culprit), OUTBOX_CLOSE_PROBE);
	cr_assert_null(culprit);
	cr_assert_eq(outbox_count(&o.suspects), 3);
	/* Messages routed meanwhile wait behind the probe. */
	outbox_open(&o);
	cr_assert_not(outbox_may_send(&o, &items[5]));
	outbox_queue(&o, &items[5]);

	/* The first suspect goes alone... */
	it = outbox_next(&o, &done);
	cr_assert_eq(idx(it), 0);
	cr_assert(outbox_may_send(&o, it));
	outbox_sent(&o, it, amqp_cstring_bytes("x"), amqp_cstring_bytes("k"));
	cr_assert_null(outbox_next(&o, &done), "one suspect at a time");
	/* ...and the next once it is confirmed. */
	cr_assert_eq(idx(outbox_confirmed(&o, 1, 0)), 0);
	it = outbox_next(&o, &done);
	cr_assert_eq(idx(it), 1);
	outbox_sent(&o, it, amqp_cstring_bytes("x"), amqp_cstring_bytes("k"));

	/* The second closes the channel alone: it is the culprit. */
	cr_assert_eq(outbox_closed(&o, 1, &culprit), OUTBOX_CLOSE_CULPRIT);
	cr_assert_eq(idx(culprit), 1);
	outbox_open(&o);
	it = outbox_next(&o, &done);
	cr_assert_eq(idx(it), 2);
	cr_assert_not(done);
	outbox_sent(&o, it, amqp_cstring_bytes("x"), amqp_cstring_bytes("k"));
	cr_assert_eq(idx(outbox_confirmed(&o, 1, 0)), 2);

	/* No suspect left: the probe ends, the queue drains. */
	it = outbox_next(&o, &done);
	cr_assert(done);
	cr_assert_eq(idx(it), 5);
	cr_assert_not(o.probing);
	cr_assert(outbox_may_send(&o, &items[6]));
}

Test(outbox, suspects_keep_publish_order_and_forget_returns)
{
	struct outbox_item *culprit, *it;
	int i = 0;

	for (int k = 0; k < 4; k++)
		send(k, "x", "k");
	items[2].returned = 1;
	cr_assert_eq(outbox_closed(&o, 1, &culprit), OUTBOX_CLOSE_PROBE);
	TAILQ_FOREACH(it, &o.suspects, link) {
		cr_assert_eq(idx(it), i, "suspect %d is item %d", i, idx(it));
		cr_assert_not(it->returned, "a return died with the channel");
		i++;
	}
	cr_assert_eq(i, 4);
	cr_assert_eq(outbox_count(&o.inflight), 0);
}

Test(outbox, retries_back_off_exponentially_with_jitter_and_a_cap)
{
	int64_t w;

	w = outbox_retry_later(&o, &items[0], 1000, 0.0);
	cr_assert_eq(w, OUTBOX_RETRY_MIN_MS);
	cr_assert_eq(items[0].retry_at, 1000 + OUTBOX_RETRY_MIN_MS);
	TAILQ_REMOVE(&o.retry, &items[0], link);
	w = outbox_retry_later(&o, &items[0], 1000, 0.0);
	cr_assert_eq(w, 2 * OUTBOX_RETRY_MIN_MS);
	TAILQ_REMOVE(&o.retry, &items[0], link);
	/* Jitter takes off up to a fifth. */
	w = outbox_retry_later(&o, &items[0], 1000, 0.999);
	cr_assert(w > 4 * OUTBOX_RETRY_MIN_MS * 4 / 5 &&
	          w <= 4 * OUTBOX_RETRY_MIN_MS);
	TAILQ_REMOVE(&o.retry, &items[0], link);
	for (int i = 0; i < 20; i++) {
		w = outbox_retry_later(&o, &items[0], 1000, 0.0);
		TAILQ_REMOVE(&o.retry, &items[0], link);
	}
	cr_assert_eq(w, OUTBOX_RETRY_MAX_MS);
}

Test(outbox, retries_come_due_by_time_not_by_order)
{
	outbox_retry_later(&o, &items[0], 0, 0.0); /* at 200 */
	items[1].retries = 3;
	outbox_retry_later(&o, &items[1], 0, 0.0);   /* at 1600 */
	outbox_retry_later(&o, &items[2], 100, 0.0); /* at 300 */
	cr_assert_eq(outbox_retry_next(&o), 200);
	cr_assert_null(outbox_retry_due(&o, 199));
	cr_assert_eq(idx(outbox_retry_due(&o, 350)), 0);
	cr_assert_eq(idx(outbox_retry_due(&o, 350)), 2);
	cr_assert_null(outbox_retry_due(&o, 350));
	cr_assert_eq(outbox_retry_next(&o), 1600);
	o.blocked = 1;
	cr_assert_null(outbox_retry_due(&o, 5000), "nothing while blocked");
	o.blocked = 0;
	cr_assert_eq(idx(outbox_retry_due(&o, 5000)), 1);
	cr_assert_eq(outbox_retry_next(&o), INT64_MAX);
}

Test(outbox, blocked_connection_pauses_until_unblocked)
{
	int done;

	o.blocked = 1;
	cr_assert_not(outbox_may_send(&o, &items[0]));
	outbox_pause(&o, &items[0]);
	outbox_pause(&o, &items[1]);
	cr_assert_null(outbox_resume(&o));
	cr_assert_null(outbox_next(&o, &done));
	o.blocked = 0;
	cr_assert_eq(idx(outbox_resume(&o)), 0);
	cr_assert_eq(idx(outbox_resume(&o)), 1);
	cr_assert_null(outbox_resume(&o));
}

Test(outbox, drop_frees_every_item_on_every_list_once)
{
	struct outbox_item *culprit;
	int done;

	send(0, "", "q");
	send(1, "", "q");
	outbox_closed(&o, 1, &culprit); /* 0, 1 suspects */
	outbox_open(&o);
	outbox_sent(&o, outbox_next(&o, &done), amqp_cstring_bytes(""),
	            amqp_cstring_bytes("q")); /* 0 in flight, 1 suspect */
	outbox_queue(&o, &items[2]);
	outbox_retry_later(&o, &items[4], 0, 0.0);
	outbox_pause(&o, &items[5]);
	outbox_stuck(&o, &items[6]);
	cr_assert_not(outbox_settled(&o));
	outbox_drop(&o, free_item, NULL);
	for (int i = 0; i < N; i++)
		cr_assert_eq(freed[i], i == 3 || i == 7 ? 0 : 1,
		             "item %d freed %d times", i, freed[i]);
	cr_assert(outbox_settled(&o));
	cr_assert_not(o.ready);
	cr_assert_not(o.probing);
}

Test(outbox, a_suspect_paused_or_queued_is_a_suspect_no_more)
{
	struct outbox_item *culprit, *it;
	int done;

	send(0, "x", "k");
	send(1, "x", "k");
	outbox_closed(&o, 1, &culprit);
	outbox_open(&o);
	it = outbox_next(&o, &done);
	cr_assert(it->suspect);
	/* The connection is blocked before it goes out: paused... */
	o.blocked = 1;
	outbox_pause(&o, it);
	o.blocked = 0;
	it = outbox_resume(&o);
	/* ...it may not jump the probe while another is in flight. */
	cr_assert_not(it->suspect);
	outbox_sent(&o, outbox_next(&o, &done), amqp_cstring_bytes("x"),
	            amqp_cstring_bytes("k"));
	cr_assert_not(outbox_may_send(&o, it));
	outbox_queue(&o, it);
	cr_assert_not(it->suspect);
}
