/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A queue's first publish since connecting, alone on a channel of its
 * own: what goes as the probe, what waits for it and for how long, and
 * what a confirm, a nack, a return or a channel's close lets go on.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "gate.h"

#define B(s) amqp_cstring_bytes(s)

static struct gate_slot s;
static struct outbox_item a, b, c;
static struct gate_limit lim;

/* it for the one queue, at mono ms. */
#define TAKE(it, mono) gate_take(&lim, &s, 1, 0, (it), (mono))

static void
fresh(void)
{
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&c, 0, sizeof(c));
	gate_reset(&s);
	gate_limit_init(&lim);
}

/* The channel opened and in confirm mode, as the broker answers. */
static void
channel_ready(void)
{
	gate_opened(&s);
	gate_selected(&s);
}

/* The first message for a fresh queue at 1000 ms, its channel made ready,
 * and it published as the probe at 1010 ms. */
static void
probe_out(void)
{
	cr_assert_eq(TAKE(&a, 1000), GATE_WAIT_OPEN);
	channel_ready();
	cr_assert_eq(gate_next_probe(&s), &a);
	cr_assert_eq(TAKE(&a, 1005), GATE_PROBE);
	gate_sent(&s, &a, B(""), B("p.delay.2048000"), 1010);
}

TestSuite(gate, .init = fresh);

Test(gate, the_first_publish_waits_for_its_channel_and_goes_alone)
{
	cr_assert_eq(TAKE(&a, 1000), GATE_WAIT_OPEN);
	cr_assert_eq(s.state, GATE_PROBING);
	cr_assert_eq(s.channel, GATE_CH_OPENING);
	/* A second while it opens: it waits too, and nothing more is sent. */
	cr_assert_eq(TAKE(&b, 1001), GATE_WAIT);
	cr_assert_null(gate_next_probe(&s));
	gate_opened(&s);
	cr_assert_eq(s.channel, GATE_CH_SELECTING);
	cr_assert_null(gate_next_probe(&s));
	gate_selected(&s);
	/* The first in line is the probe; the second stays. */
	cr_assert_eq(gate_next_probe(&s), &a);
	cr_assert_eq(TAKE(&a, 1005), GATE_PROBE);
	gate_sent(&s, &a, B(""), B("q"), 1006);
	cr_assert_eq(a.seq, 1);
	cr_assert_null(gate_next_probe(&s));
	cr_assert_eq(gate_inflight(&s), 2);
}

Test(gate, the_probes_confirm_opens_the_queue_to_the_publish_channel)
{
	struct outbox_item *probe = NULL;
	int was_slow = -1;

	probe_out();
	cr_assert_eq(TAKE(&b, 1020), GATE_WAIT);
	cr_assert_eq(gate_confirm(&s, 1, 0, 0, &probe, &was_slow), GATE_PROVEN);
	cr_assert_eq(probe, &a);
	cr_assert_eq(was_slow, 0);
	cr_assert_eq(s.state, GATE_OPEN);
	/* Its channel is closed again; what waited is the caller's to send. */
	cr_assert_eq(s.channel, GATE_CH_CLOSING);
	cr_assert_eq(TAILQ_FIRST(&s.waiters), &b);
	TAILQ_REMOVE(&s.waiters, &b, link);
	gate_close_ok(&s);
	cr_assert_eq(s.channel, GATE_CH_CLOSED);
	cr_assert_eq(TAKE(&c, 1030), GATE_PASS);
	cr_assert_eq(gate_inflight(&s), 0);
	cr_assert_eq(gate_due(&s), INT64_MAX);
}

Test(gate, a_confirm_not_for_the_probe_changes_nothing)
{
	struct outbox_item *probe = NULL;
	int was_slow = 0;

	probe_out();
	cr_assert_eq(gate_confirm(&s, 7, 0, 0, &probe, &was_slow),
	             GATE_NOT_PROBE);
	cr_assert_eq(gate_confirm(&s, 0, 1, 0, &probe, &was_slow),
	             GATE_NOT_PROBE);
	cr_assert_null(probe);
	cr_assert_eq(s.state, GATE_PROBING);
	cr_assert_eq(s.probe, &a);
	/* A multiple ack that covers it is its confirm. */
	cr_assert_eq(gate_confirm(&s, 3, 1, 0, &probe, &was_slow), GATE_PROVEN);
	cr_assert_eq(probe, &a);
}

Test(gate, a_nack_leaves_it_unproven_and_the_next_publish_probes_again)
{
	struct outbox_item *probe = NULL;
	int was_slow = 0;

	probe_out();
	cr_assert_eq(TAKE(&b, 1020), GATE_WAIT);
	cr_assert_eq(gate_confirm(&s, 1, 0, 1, &probe, &was_slow),
	             GATE_REFUSED);
	cr_assert_eq(s.state, GATE_UNPROVEN);
	cr_assert_eq(s.channel, GATE_CH_READY);
	TAILQ_REMOVE(&s.waiters, &b, link);
	/* Its channel is still ready: the next one goes as the probe. */
	cr_assert_eq(TAKE(&c, 5000), GATE_PROBE);
	gate_sent(&s, &c, B(""), B("q"), 5001);
	cr_assert_eq(c.seq, 2);
	cr_assert_eq(gate_due(&s), 5001 + GATE_WAIT_MS);
}

Test(gate, a_returned_probe_is_refused_not_proven)
{
	struct outbox_item *probe = NULL;
	int was_slow = 0;

	probe_out();
	cr_assert_eq(gate_returned(&s, B(""), B("other"), "312 NO_ROUTE"), 0);
	cr_assert_eq(
	    gate_returned(&s, B(""), B("p.delay.2048000"), "312 NO_ROUTE"), 1);
	cr_assert_str_eq(a.return_text, "312 NO_ROUTE");
	/* Once: a second return is not the probe's. */
	cr_assert_eq(gate_returned(&s, B(""), B("p.delay.2048000"), "x"), 0);
	cr_assert_eq(gate_confirm(&s, 1, 0, 0, &probe, &was_slow),
	             GATE_REFUSED);
	cr_assert_eq(s.state, GATE_UNPROVEN);
}

Test(gate, what_waits_waits_a_second_from_the_probes_publish)
{
	probe_out();
	/* Nothing waits on a queue not probing, nor before the probe is out. */
	cr_assert_eq(gate_due(&s), 1010 + GATE_WAIT_MS);
	cr_assert_eq(TAKE(&b, 1500), GATE_WAIT);
	cr_assert_eq(gate_due(&s), 1010 + GATE_WAIT_MS);
	/* The wait is up: slow, said once. */
	cr_assert_eq(gate_slow(&s), 1);
	cr_assert_eq(gate_slow(&s), 0);
	/* Slow with something waiting: due at once (the caller sends it
	 * round); with nothing waiting, not due at all. */
	cr_assert_eq(gate_due(&s), 1010 + GATE_WAIT_MS);
	TAILQ_REMOVE(&s.waiters, &b, link);
	cr_assert_eq(gate_due(&s), INT64_MAX);
	cr_assert_eq(TAKE(&c, 9000), GATE_WAIT);
	cr_assert_eq(gate_due(&s), 1010 + GATE_WAIT_MS);
}

Test(gate, while_its_channel_opens_it_waits_five_seconds_then_one)
{
	struct gate_slot other;

	gate_reset(&other);
	cr_assert_eq(TAKE(&a, 1000), GATE_WAIT_OPEN);
	/* No probe out yet: the channel's open and select, bounded too. */
	cr_assert_eq(gate_due(&s), 1000 + GATE_OPEN_WAIT_MS);
	channel_ready();
	cr_assert_eq(gate_next_probe(&s), &a);
	cr_assert_eq(TAKE(&a, 4000), GATE_PROBE);
	gate_sent(&s, &a, B(""), B("q"), 4000);
	cr_assert_eq(gate_due(&s), 4000 + GATE_WAIT_MS);
	cr_assert_eq(gate_due(&other), INT64_MAX);
}

Test(gate, the_wait_starts_again_when_the_connection_is_unblocked)
{
	probe_out();
	gate_unblocked(&s, 60000);
	cr_assert_eq(gate_due(&s), 60000 + GATE_WAIT_MS);
	/* Not once it was said to be slow: what waits goes round at once. */
	gate_slow(&s);
	gate_unblocked(&s, 90000);
	cr_assert_eq(s.since, 60000);
}

Test(gate, the_answer_after_it_was_slow_says_so)
{
	struct outbox_item *probe = NULL;
	int was_slow = 0;

	probe_out();
	gate_slow(&s);
	cr_assert_eq(gate_confirm(&s, 1, 0, 0, &probe, &was_slow), GATE_PROVEN);
	cr_assert_eq(was_slow, 1);
	cr_assert_eq(s.slow, 0);
}

Test(gate, the_brokers_close_of_its_channel_blames_the_probe_alone)
{
	probe_out();
	cr_assert_eq(TAKE(&b, 1020), GATE_WAIT);
	cr_assert_eq(gate_closed(&s), &a);
	cr_assert_eq(s.state, GATE_UNPROVEN);
	cr_assert_eq(s.channel, GATE_CH_CLOSED);
	cr_assert_null(s.probe);
	/* What waited is still there, for the caller to send again; the next
	 * publish opens the channel again. */
	cr_assert_eq(TAILQ_FIRST(&s.waiters), &b);
	TAILQ_REMOVE(&s.waiters, &b, link);
	cr_assert_eq(TAKE(&b, 2000), GATE_WAIT_OPEN);
	/* Closed with no probe out: nothing to blame. */
	TAILQ_REMOVE(&s.waiters, &b, link);
	cr_assert_null(gate_closed(&s));
}

Test(gate, a_close_of_a_proven_channel_keeps_it_open)
{
	struct outbox_item *probe = NULL;
	int was_slow = 0;

	probe_out();
	gate_confirm(&s, 1, 0, 0, &probe, &was_slow);
	cr_assert_null(gate_closed(&s));
	cr_assert_eq(s.state, GATE_OPEN);
	cr_assert_eq(TAKE(&b, 2000), GATE_PASS);
}

static unsigned freed;
static void
count_free(struct outbox_item *it, void *ctx)
{
	(void)it;
	(void)ctx;
	freed++;
}

Test(gate, a_stop_gives_back_what_waits_and_a_lost_connection_all)
{
	probe_out();
	TAKE(&b, 1020);
	TAKE(&c, 1030);
	freed = 0;
	gate_drop(&s, count_free, NULL, 1);
	cr_assert_eq(freed, 2);
	cr_assert_eq(gate_inflight(&s), 1);
	gate_drop(&s, count_free, NULL, 0);
	cr_assert_eq(freed, 3);
	cr_assert_eq(gate_inflight(&s), 0);
	cr_assert_eq(s.state, GATE_UNPROVEN);
	cr_assert_eq(s.channel, GATE_CH_CLOSED);
}

Test(gate, with_no_channel_left_an_unproven_queue_goes_ungated)
{
	lim.room = 0;
	cr_assert_eq(TAKE(&a, 1000), GATE_PASS);
	cr_assert_eq(s.state, GATE_UNPROVEN);
	cr_assert_eq(s.channel, GATE_CH_CLOSED);
	cr_assert_eq(gate_inflight(&s), 0);
	/* Once a channel may open, it is gated again. */
	lim.room = 1;
	cr_assert_eq(TAKE(&a, 2000), GATE_WAIT_OPEN);
	/* Its channel is its own now: what follows waits for its probe. */
	lim.room = 0;
	cr_assert_eq(TAKE(&b, 2001), GATE_WAIT);
}

Test(gate, a_queue_with_its_channel_still_open_probes_again_without_room)
{
	struct outbox_item *probe = NULL;
	int was_slow = 0;

	probe_out();
	gate_confirm(&s, 1, 0, 1, &probe, &was_slow);
	lim.room = 0;
	cr_assert_eq(TAKE(&b, 3000), GATE_PROBE);
}

/* Four queues; slot i's state as the broker answered. */
static struct gate_slot g[4];

static void
four(enum gate_channel c0, enum gate_channel c1, enum gate_channel c2,
     enum gate_channel c3)
{
	enum gate_channel ch[4] = {c0, c1, c2, c3};

	for (unsigned i = 0; i < 4; i++) {
		gate_reset(&g[i]);
		g[i].channel = ch[i];
		g[i].state =
		    ch[i] == GATE_CH_CLOSED ? GATE_UNPROVEN : GATE_PROBING;
	}
}

Test(gate, the_room_counts_every_channel_not_closed)
{
	struct outbox_item x;

	lim.room = 2;
	lim.serial = 1;
	four(GATE_CH_READY, GATE_CH_CLOSING, GATE_CH_CLOSED, GATE_CH_CLOSED);
	/* Both taken (one closing once proven): it waits for room. */
	cr_assert_eq(gate_take(&lim, g, 4, 2, &x, 100), GATE_WAIT);
	cr_assert_eq(g[2].channel, GATE_CH_CLOSED);
	cr_assert_eq(gate_next_open(&lim, g, 4), -1);
	cr_assert_eq(gate_due(&g[2]), 100 + GATE_OPEN_WAIT_MS);
	/* The closing one closed: it opens, alone. */
	gate_close_ok(&g[1]);
	cr_assert_eq(gate_next_open(&lim, g, 4), 2);
	cr_assert_eq(g[2].channel, GATE_CH_OPENING);
	cr_assert_eq(gate_next_open(&lim, g, 4), -1);
	TAILQ_REMOVE(&g[2].waiters, &x, link);
}

Test(gate, with_no_room_at_all_every_queue_goes_ungated)
{
	struct outbox_item x;

	lim.room = 0;
	lim.serial = 1;
	four(GATE_CH_CLOSED, GATE_CH_CLOSED, GATE_CH_CLOSED, GATE_CH_CLOSED);
	cr_assert_eq(gate_take(&lim, g, 4, 3, &x, 0), GATE_PASS);
	cr_assert_eq(g[3].state, GATE_UNPROVEN);
	cr_assert_eq(gate_next_open(&lim, g, 4), -1);
}

Test(gate, a_close_not_over_an_opening_channel_teaches_nothing)
{
	four(GATE_CH_READY, GATE_CH_CLOSED, GATE_CH_CLOSED, GATE_CH_CLOSED);
	cr_assert_eq(gate_limit_met(&lim, g, 4), 0);
	cr_assert_eq(lim.room, UINT_MAX);
	cr_assert_eq(lim.serial, 0);
}

Test(gate, the_first_limit_met_keeps_the_channels_in_use)
{
	/* Two in use, one closing (maybe freed already), two opening. */
	four(GATE_CH_READY, GATE_CH_SELECTING, GATE_CH_CLOSING,
	     GATE_CH_OPENING);
	cr_assert_eq(gate_limit_met(&lim, g, 4), 1);
	cr_assert_eq(lim.room, 2);
	cr_assert_eq(lim.serial, 1);
}

Test(gate, opens_that_went_together_keep_one_channel_the_first_time)
{
	/* Their open-oks may not have come before the close. */
	four(GATE_CH_OPENING, GATE_CH_OPENING, GATE_CH_OPENING, GATE_CH_CLOSED);
	cr_assert_eq(gate_limit_met(&lim, g, 4), 1);
	cr_assert_eq(lim.room, 1);
	/* One at a time from now on: with one opening, the next waits for
	 * its open-ok, then opens. */
	four(GATE_CH_OPENING, GATE_CH_CLOSED, GATE_CH_CLOSED, GATE_CH_CLOSED);
	lim.room = 3;
	{
		struct outbox_item x;
		cr_assert_eq(gate_take(&lim, g, 4, 1, &x, 0), GATE_WAIT);
		cr_assert_eq(g[1].channel, GATE_CH_CLOSED);
		cr_assert_eq(gate_next_open(&lim, g, 4), -1);
		gate_opened(&g[0]);
		cr_assert_eq(gate_next_open(&lim, g, 4), 1);
		TAILQ_REMOVE(&g[1].waiters, &x, link);
	}
}

Test(gate, every_later_limit_met_lowers_it_down_to_none)
{
	lim.room = 1;
	lim.serial = 1;
	four(GATE_CH_OPENING, GATE_CH_CLOSED, GATE_CH_CLOSED, GATE_CH_CLOSED);
	cr_assert_eq(gate_limit_met(&lim, g, 4), 1);
	cr_assert_eq(lim.room, 0);
	/* Opening one at a time, none in use: none. */
	lim.room = 3;
	four(GATE_CH_OPENING, GATE_CH_CLOSED, GATE_CH_CLOSED, GATE_CH_CLOSED);
	cr_assert_eq(gate_limit_met(&lim, g, 4), 1);
	cr_assert_eq(lim.room, 0);
	/* Lower each time, even when the channels in use say otherwise. */
	lim.room = 2;
	four(GATE_CH_READY, GATE_CH_READY, GATE_CH_OPENING, GATE_CH_CLOSED);
	cr_assert_eq(gate_limit_met(&lim, g, 4), 1);
	cr_assert_eq(lim.room, 1);
}

Test(gate, channel_max_leaves_room_for_some_queues_or_none)
{
	/* Channels 16 .. 2047: every one of 25. */
	cr_assert_eq(gate_room(2047, 16, 25), 25);
	/* 0: the protocol's 65535. */
	cr_assert_eq(gate_room(0, 16, 25), 25);
	cr_assert_eq(gate_room(-1, 16, 70000), 65520);
	/* 20: channels 16 to 20, five queues. */
	cr_assert_eq(gate_room(20, 16, 25), 5);
	cr_assert_eq(gate_room(16, 16, 25), 1);
	cr_assert_eq(gate_room(15, 16, 25), 0);
	cr_assert_eq(gate_room(1, 16, 25), 0);
}
