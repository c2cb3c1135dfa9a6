/* SPDX-License-Identifier: Apache-2.0 */
/* waiting: P.events folded, filtered, sorted and counted by id. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "headers.h"
#include "waiting.h"

static struct waiting_fold f;

static void
setup(void)
{
	waiting_fold_init(&f);
}

static void
teardown(void)
{
	waiting_fold_free(&f);
}

static void
put(enum event_kind kind, const char *id, const char *mid, int64_t due,
    int64_t at, const char *ex, const char *key)
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
	cr_assert_eq(waiting_fold_event(&f, &e), 0);
}

static void
sched(const char *id, const char *mid, int64_t due, const char *ex,
      const char *key)
{
	put(EVENT_SCHEDULED, id, mid, due, 1, ex, key);
}

/* The names of the selected rows, joined by spaces. */
static const char *
names(const struct waiting_filter *flt)
{
	static char out[256];
	struct waiting_rows r;

	cr_assert_eq(waiting_select(&f, flt, 0, &r), 0);
	out[0] = '\0';
	for (size_t i = 0; i < r.n; i++) {
		amqp_bytes_t n = waiting_name(r.w[i]);
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%.*s",
		         i ? " " : "", (int)n.len, (const char *)n.bytes);
	}
	free(r.w);
	return out;
}

TestSuite(waiting, .init = setup, .fini = teardown);

Test(waiting, fold_scheduled_and_ended)
{
	struct waiting_filter all;

	waiting_filter_init(&all);
	sched("c1", "m1", 300, NULL, "q");
	sched("c2", NULL, 100, NULL, "q");
	sched("c3", "m3", 200, NULL, "q");
	put(EVENT_DELIVERED, "c3", NULL, 0, 2, NULL, NULL);
	cr_assert_str_eq(names(&all), "c2 m1");
	cr_assert_eq(f.records, 4);
}

Test(waiting, an_end_before_its_schedule_wins)
{
	struct waiting_filter all;

	waiting_filter_init(&all);
	put(EVENT_PARKED, "c1", NULL, 0, 2, NULL, NULL);
	sched("c1", "m1", 300, NULL, "q");
	put(EVENT_CANCELLED, "c2", NULL, 0, 2, NULL, NULL);
	sched("c2", "m2", 300, NULL, "q");
	sched("c2", "m2", 300, NULL, "q"); /* a copy: it is waiting now */
	cr_assert_str_eq(names(&all), "m2");
}

Test(waiting, the_later_record_wins)
{
	struct waiting_filter all;
	struct waiting_rows r;

	waiting_filter_init(&all);
	sched("c1", "m1", 300, NULL, "q");
	sched("c1", "m1", 50, NULL, "q");
	cr_assert_eq(waiting_select(&f, &all, 0, &r), 0);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.w[0]->due, 50);
	free(r.w);
}

Test(waiting, sorted_by_due_then_seen_then_id)
{
	struct waiting_filter all;

	waiting_filter_init(&all);
	put(EVENT_SCHEDULED, "b", NULL, 10, 5, NULL, "q");
	put(EVENT_SCHEDULED, "a", NULL, 10, 5, NULL, "q");
	put(EVENT_SCHEDULED, "c", NULL, 10, 4, NULL, "q");
	put(EVENT_SCHEDULED, "d", NULL, 5, 9, NULL, "q");
	cr_assert_str_eq(names(&all), "d c a b");
}

Test(waiting, due_bounds)
{
	struct waiting_filter flt;

	sched("a", NULL, 100, NULL, "q");
	sched("b", NULL, 200, NULL, "q");
	sched("c", NULL, 300, NULL, "q");
	waiting_filter_init(&flt);
	cr_assert_eq(waiting_filter_set(&flt), 0);
	flt.due_after = 200;
	cr_assert_str_eq(names(&flt), "b c");
	flt.due_before = 300;
	cr_assert_str_eq(names(&flt), "b");
	cr_assert_eq(waiting_filter_set(&flt), 1);
}

Test(waiting, target_names_exchange_or_exchange_and_key)
{
	struct waiting_filter flt;
	struct waiting_rows r;

	sched("a", NULL, 1, "orders", "eu");
	sched("b", NULL, 2, "orders", "us");
	sched("c", NULL, 3, "", "q");
	sched("d", NULL, 4, "amq.default", "q/x");
	sched("e", NULL, 5, "a/b", "c");
	waiting_filter_init(&flt);
	flt.target = "orders";
	cr_assert_str_eq(names(&flt), "a b");
	flt.target = "orders/us";
	cr_assert_str_eq(names(&flt), "b");
	flt.target = "amq.default";
	cr_assert_str_eq(names(&flt), "c d");
	flt.target = "";
	cr_assert_str_eq(names(&flt), "c d");
	flt.target = "/q";
	cr_assert_str_eq(names(&flt), "c");
	flt.target = "amq.default/q/x";
	cr_assert_str_eq(names(&flt), "d");
	flt.target = "a/b/c";
	cr_assert_str_eq(names(&flt), "e");
	flt.target = "a";
	cr_assert_str_eq(names(&flt), "");
	cr_assert_eq(waiting_select(&f, &flt, 0, &r), 0);
	cr_assert_eq(r.total, 5);
	free(r.w);
}

Test(waiting, cancel_pending)
{
	struct waiting_filter all;
	struct waiting_rows r;
	struct event e;

	waiting_filter_init(&all);
	sched("c1", "m1", 300, NULL, "q");
	sched("c2", "m2", 300, NULL, "q");
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_CANCEL;
	e.cancel = amqp_cstring_bytes("m2");
	e.until = 1000;
	cr_assert_eq(waiting_fold_event(&f, &e), 0);
	cr_assert_eq(waiting_select(&f, &all, 999, &r), 0);
	cr_assert_eq(r.n, 2);
	cr_assert_eq(r.w[0]->cancel_pending, 0);
	cr_assert_eq(r.w[1]->cancel_pending, 1);
	free(r.w);
	cr_assert_eq(waiting_select(&f, &all, 1001, &r), 0);
	cr_assert_eq(r.w[1]->cancel_pending, 0);
	free(r.w);
}

Test(waiting, a_reschedule_shows_the_new_due_time_and_order)
{
	struct waiting_filter all;
	struct waiting_rows r;
	struct event e;

	waiting_filter_init(&all);
	sched("c1", "m1", 300, NULL, "q");
	sched("c2", "m2", 500, NULL, "q");
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_RESCHEDULE;
	e.cancel = amqp_cstring_bytes("m2");
	e.due = 100;
	e.at = 50;
	e.until = 1000;
	cr_assert_eq(waiting_fold_event(&f, &e), 0);
	cr_assert_eq(waiting_select(&f, &all, 60, &r), 0);
	cr_assert_eq(r.n, 2);
	cr_assert(
	    headers_bytes_eq(r.w[0]->message_id, amqp_cstring_bytes("m2")));
	cr_assert_eq(r.w[0]->due, 100);
	cr_assert_eq(r.w[0]->rescheduled, 1);
	cr_assert_eq(r.w[1]->due, 300);
	free(r.w);
}

Test(waiting, count_by_message_id_or_cascade_id)
{
	int64_t last = -1;

	sched("c1", "order-1", 300, NULL, "q");
	sched("c2", "order-1", 500, NULL, "q");
	sched("c3", "order-2", 100, NULL, "q");
	cr_assert_eq(waiting_count_id(&f, amqp_cstring_bytes("order-1"), &last),
	             2);
	cr_assert_eq(last, 500);
	cr_assert_eq(waiting_count_id(&f, amqp_cstring_bytes("c3"), &last), 1);
	cr_assert_eq(last, 100);
	cr_assert_eq(waiting_count_id(&f, amqp_cstring_bytes("order"), &last),
	             0);
	cr_assert_eq(last, 0);
}

Test(waiting, name_is_message_id_else_cascade_id)
{
	struct waiting_filter all;

	waiting_filter_init(&all);
	sched("c1", "", 1, NULL, "q");
	sched("c2", "m2", 2, NULL, "q");
	cr_assert_str_eq(names(&all), "c1 m2");
	cr_assert(waiting_exchange_is_default(amqp_cstring_bytes("")));
	cr_assert(
	    waiting_exchange_is_default(amqp_cstring_bytes("amq.default")));
	cr_assert(!waiting_exchange_is_default(amqp_cstring_bytes("x")));
}

/* A scheduled record with a copy, kept for id "order-1". */
static const struct waiting *
copied(int64_t due)
{
	static const amqp_bytes_t want[] = {{7, "order-1"}};
	struct waiting **ws;
	const struct waiting *w;
	struct event e;

	f.want = want;
	f.nwant = 1;
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_SCHEDULED;
	e.id = amqp_cstring_bytes("c1");
	e.message_id = amqp_cstring_bytes("order-1");
	e.due = due;
	e.at = 1000;
	e.copy = amqp_cstring_bytes("the message");
	cr_assert_eq(waiting_fold_event(&f, &e), 0);
	cr_assert_eq(waiting_named(&f, amqp_cstring_bytes("order-1"), &ws), 1);
	w = ws[0];
	free(ws);
	cr_assert_eq(w->copy.len, 11);
	return w;
}

/* A copy record of P.copies for cascade id id. */
static void
copy_record(const char *id, const char *message)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = EVENT_COPY;
	e.id = amqp_cstring_bytes(id);
	e.copy = amqp_cstring_bytes(message);
	cr_assert_eq(waiting_fold_event(&f, &e), 0);
}

static void repeat(const char *id, const char *mid, const char *owner,
                   int64_t every, const char *cron, const char *tz,
                   int64_t occurrence, int64_t due);

/* How many messages id names need a copy for a move to due made at `at`
 * by a control user, that they have not got (bodies under 64 KiB). */
static uint64_t
copyless(const char *id, int64_t due, int64_t at, int64_t *seen)
{
	return waiting_copyless(&f, amqp_cstring_bytes(id), due, at,
	                        amqp_cstring_bytes("guest"), 1, 65536, seen);
}

Test(waiting, a_copy_record_gives_a_wanted_message_its_copy)
{
	static const amqp_bytes_t want[] = {{7, "order-1"}};
	struct waiting **ws;
	int64_t seen = 0;

	f.want = want;
	f.nwant = 1;
	sched("c1", "order-1", 50000, NULL, "q");
	sched("c2", "order-2", 60000, NULL, "q");
	cr_assert_eq(copyless("order-1", 10000, 2000, &seen), 1);
	copy_record("c2", "not wanted");
	copy_record("c9", "of nothing waiting");
	copy_record("c1", "the message");
	cr_assert_eq(copyless("order-1", 10000, 2000, &seen), 0);
	cr_assert_eq(waiting_named(&f, amqp_cstring_bytes("order-1"), &ws), 1);
	cr_assert_eq(ws[0]->copy.len, 11);
	cr_assert_eq(memcmp(ws[0]->copy.bytes, "the message", 11), 0);
	/* The rest of it as its scheduled record said. */
	cr_assert_eq(ws[0]->due, 50000);
	cr_assert_eq(ws[0]->recorded_due, 50000);
	cr_assert(
	    headers_bytes_eq(ws[0]->routing_key, amqp_cstring_bytes("q")));
	/* Now it is copied as one that carried its copy was. */
	cr_assert(waiting_needs_copy(&f, ws[0], 10000, 2000,
	                             amqp_cstring_bytes("guest"), 1));
	free(ws);
	/* A second copy of it changes nothing. */
	copy_record("c1", "another");
	cr_assert_eq(waiting_named(&f, amqp_cstring_bytes("order-1"), &ws), 1);
	cr_assert_eq(ws[0]->copy.len, 11);
	free(ws);
	cr_assert_eq(waiting_named(&f, amqp_cstring_bytes("order-2"), &ws), 1);
	cr_assert_eq(ws[0]->copy.len, 0, "order-2 is not wanted");
	free(ws);
}

Test(waiting, the_copies_to_read_are_those_a_move_needs_from_the_first_seen)
{
	static const amqp_bytes_t want[] = {{7, "order-1"}};
	struct event e;
	int64_t seen = 0;

	f.want = want;
	f.nwant = 1;
	for (int i = 0; i < 3; i++) {
		char id[8];
		snprintf(id, sizeof(id), "c%d", i);
		memset(&e, 0, sizeof(e));
		e.kind = EVENT_SCHEDULED;
		e.id = amqp_cstring_bytes(id);
		e.message_id = amqp_cstring_bytes("order-1");
		e.due = 90000;
		e.at = 3000 - i * 1000;
		e.size = 100;
		cr_assert_eq(waiting_fold_event(&f, &e), 0);
	}
	cr_assert_eq(copyless("order-1", 10000, 5000, &seen), 3);
	cr_assert_eq(seen, 1000);
	/* A move later, or to when it comes back by anyway: no copy. */
	cr_assert_eq(copyless("order-1", 95000, 5000, &seen), 0);
	cr_assert_eq(copyless("order-1", 10000, 89500, &seen), 0);
	/* Bodies at the limit or over it have none to read. */
	cr_assert_eq(waiting_copyless(&f, amqp_cstring_bytes("order-1"), 10000,
	                              5000, amqp_cstring_bytes("guest"), 1, 100,
	                              &seen),
	             0);
	/* Nor has a repeat (first seen at 1). */
	repeat("r1", "order-1", NULL, 60000, NULL, NULL, 1, 90000);
	cr_assert_eq(copyless("order-1", 10000, 5000, &seen), 3);
	cr_assert_eq(seen, 1000);
}

static void
request(int64_t due, int64_t at, const char *superseded)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = EVENT_RESCHEDULE;
	e.cancel = amqp_cstring_bytes("order-1");
	e.due = due;
	e.at = at;
	e.until = 1000000;
	e.superseded = amqp_cstring_bytes(superseded);
	cr_assert_eq(waiting_fold_event(&f, &e), 0);
}

Test(waiting, a_copy_is_made_when_the_instance_comes_back_after_the_new_time)
{
	const struct waiting *w = copied(60000);
	amqp_bytes_t ctl = amqp_cstring_bytes("ctl");

	/* Earlier than it comes back, and not within a second: yes. */
	cr_assert(waiting_needs_copy(&f, w, 20000, 5000, ctl, 1));
	/* Later, or due within the margin: the request alone will do. */
	cr_assert_not(waiting_needs_copy(&f, w, 70000, 5000, ctl, 1));
	cr_assert_not(waiting_needs_copy(&f, w, 20000, 59500, ctl, 1));
	/* First seen after the request: not for it. */
	cr_assert_not(waiting_needs_copy(&f, w, 20000, 999, ctl, 1));
	/* Another user's message (it has none here: anyone may). */
	cr_assert(waiting_needs_copy(&f, w, 20000, 5000, amqp_empty_bytes, 0));
}

Test(waiting, a_message_moved_later_without_a_copy_comes_back_by_its_new_time)
{
	const struct waiting *w = copied(60000);
	amqp_bytes_t ctl = amqp_cstring_bytes("ctl");

	/* Moved to 90 s: it comes back by 60 s and waits again until 90. */
	request(90000, 2000, "");
	cr_assert(waiting_needs_copy(&f, w, 70000, 5000, ctl, 1));
	cr_assert_not(waiting_needs_copy(&f, w, 95000, 5000, ctl, 1));
}

Test(waiting, once_copied_the_copy_decides)
{
	const struct waiting *w = copied(60000);
	amqp_bytes_t ctl = amqp_cstring_bytes("ctl");

	/* Copied to 30 s at 2 s: a later move copies again (the copy
	 * would come back at 30 s), unless the copy is due within 1 s. */
	request(30000, 2000, "c1");
	cr_assert(waiting_needs_copy(&f, w, 40000, 5000, ctl, 1));
	cr_assert(waiting_needs_copy(&f, w, 10000, 5000, ctl, 1));
	cr_assert_not(waiting_needs_copy(&f, w, 10000, 29500, ctl, 1));
}

/* A repeat's copy: an interval (every > 0) or a cron series, owned. */
static void
repeat(const char *id, const char *mid, const char *owner, int64_t every,
       const char *cron, const char *tz, int64_t occurrence, int64_t due)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = EVENT_SCHEDULED;
	e.id = amqp_cstring_bytes(id);
	e.message_id = amqp_cstring_bytes(mid ? mid : "");
	e.owner = amqp_cstring_bytes(owner ? owner : "");
	e.due = due;
	e.at = 1;
	e.routing_key = amqp_cstring_bytes("q");
	e.every = every;
	e.cron = amqp_cstring_bytes(cron ? cron : "");
	e.tz = amqp_cstring_bytes(tz ? tz : "");
	e.occurrence = occurrence;
	cr_assert_eq(waiting_fold_event(&f, &e), 0);
}

/* A pause or resume of series name, as cascade-ctl writes it (the
 * record's user-id is writer), at 10, in force until 1000. */
static void
pause_record(enum event_kind kind, const char *name, const char *writer)
{
	struct event e;

	memset(&e, 0, sizeof(e));
	e.kind = kind;
	e.cancel = amqp_cstring_bytes(name);
	e.writer = amqp_cstring_bytes(writer);
	e.at = 10;
	e.until = 1000;
	cr_assert_eq(waiting_fold_event(&f, &e), 0);
}

/* The row named name, selected at now (the fold's own). */
static const struct waiting *
row(const char *name, int64_t now)
{
	struct waiting_rows r;
	struct waiting_filter flt;
	const struct waiting *w = NULL;

	waiting_filter_init(&flt);
	cr_assert_eq(waiting_select(&f, &flt, now, &r), 0);
	for (size_t i = 0; i < r.n; i++)
		if (headers_bytes_eq(waiting_name(r.w[i]),
		                     amqp_cstring_bytes(name)))
			w = r.w[i];
	free(r.w);
	cr_assert_not_null(w, "%s not listed", name);
	return w;
}

Test(waiting, a_repeats_row_carries_its_schedule)
{
	struct waiting_filter flt;
	struct waiting_rows r;
	const struct waiting *w;

	repeat("c1", "hourly", NULL, 3600000, NULL, NULL, 4, 300);
	repeat("c2", "weekdays", NULL, 0, "0 9 * * 1-5", "Europe/Berlin", 1,
	       200);
	repeat("c3", "nightly", NULL, 0, "0 3 * * *", NULL, 12, 400);
	sched("c4", "plain", 100, NULL, "q");
	w = row("hourly", 0);
	cr_assert_eq(w->repeat, 1);
	cr_assert_eq(w->every, 3600000);
	cr_assert_eq(w->occurrence, 4);
	cr_assert_eq(w->cron.len, 0);
	w = row("weekdays", 0);
	cr_assert_eq(w->repeat, 1);
	cr_assert_eq(w->every, 0);
	cr_assert(headers_key_is(w->cron, "0 9 * * 1-5"));
	cr_assert(headers_key_is(w->tz, "Europe/Berlin"));
	cr_assert_eq(w->occurrence, 1);
	w = row("nightly", 0);
	cr_assert(headers_key_is(w->cron, "0 3 * * *"));
	cr_assert_eq(w->tz.len, 0);
	w = row("plain", 0);
	cr_assert_eq(w->repeat, 0);
	cr_assert_eq(w->paused, 0);
	/* --series: the repeats only, and counted among themselves. */
	waiting_filter_init(&flt);
	flt.series = 1;
	cr_assert_str_eq(names(&flt), "weekdays hourly nightly");
	cr_assert_eq(waiting_filter_set(&flt), 0, "series is not a bound");
	flt.due_before = 300;
	cr_assert_str_eq(names(&flt), "weekdays");
	cr_assert_eq(waiting_select(&f, &flt, 0, &r), 0);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.total, 3, "of the repeats, not of all four");
	free(r.w);
}

Test(waiting, a_pause_marks_a_series_paused_and_a_resume_lifts_it)
{
	struct config cfg;

	config_defaults(&cfg);
	snprintf(cfg.broker_url, sizeof(cfg.broker_url),
	         "amqp://cascade:pw@127.0.0.1:5672/%%2f");
	f.cfg = &cfg;
	snprintf(f.own_user, sizeof(f.own_user), "cascade");
	repeat("c1", "hourly", "alice", 3600000, NULL, NULL, 2, 300);
	repeat("c2", "weekdays", "alice", 0, "0 9 * * 1-5", NULL, 1, 200);
	cr_assert_eq(row("hourly", 20)->paused, 0);
	/* By message-id, by its owner. */
	pause_record(EVENT_PAUSE, "hourly", "alice");
	cr_assert_eq(row("hourly", 20)->paused, 1);
	cr_assert_eq(row("weekdays", 20)->paused, 0);
	/* A pause lapses at its until. */
	cr_assert_eq(row("hourly", 1000)->paused, 0);
	/* Bob may not lift alice's pause; she may. */
	pause_record(EVENT_RESUME, "hourly", "bob");
	cr_assert_eq(row("hourly", 20)->paused, 1);
	pause_record(EVENT_RESUME, "hourly", "alice");
	cr_assert_eq(row("hourly", 20)->paused, 0);
	/* By cascade id, by a control user (ctl as the broker user). */
	pause_record(EVENT_PAUSE, "c2", "cascade");
	cr_assert_eq(row("weekdays", 20)->paused, 1);
	pause_record(EVENT_RESUME, "c2", "cascade");
	cr_assert_eq(row("weekdays", 20)->paused, 0);
}

Test(waiting, a_pause_by_a_user_who_may_not_change_the_series_does_not_hold)
{
	struct config cfg;
	struct event e;

	config_defaults(&cfg);
	snprintf(cfg.broker_url, sizeof(cfg.broker_url),
	         "amqp://cascade:pw@127.0.0.1:5672/%%2f");
	f.cfg = &cfg;
	snprintf(f.own_user, sizeof(f.own_user), "cascade");
	repeat("c1", "hourly", "alice", 3600000, NULL, NULL, 2, 300);
	pause_record(EVENT_PAUSE, "hourly", "bob");
	cr_assert_eq(row("hourly", 20)->paused, 0);
	/* Relayed by a daemon for bob: still bob's. */
	memset(&e, 0, sizeof(e));
	e.kind = EVENT_PAUSE;
	e.cancel = amqp_cstring_bytes("hourly");
	e.writer = amqp_cstring_bytes("cascade");
	e.requester = amqp_cstring_bytes("bob");
	e.has_requester = 1;
	e.at = 10;
	e.until = 1000;
	cr_assert_eq(waiting_fold_event(&f, &e), 0);
	cr_assert_eq(row("hourly", 20)->paused, 0);
	/* Relayed for alice: hers. */
	e.requester = amqp_cstring_bytes("alice");
	cr_assert_eq(waiting_fold_event(&f, &e), 0);
	cr_assert_eq(row("hourly", 20)->paused, 1);
}
