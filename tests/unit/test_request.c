/* SPDX-License-Identifier: Apache-2.0 */
/*
 * request_event and request_pause_event: how long a request holds, the
 * rule cascade-ctl and the console share (CONTRACT 7.3, 7.10).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "request.h"

#define AT INT64_C(1795424400000) /* 2026-11-23T09:00:00Z */
#define MAX_AGE INT64_C(31622400000)
#define DAY REQUEST_MARGIN_MS

Test(request, cancel_holds_a_day_past_the_latest_due)
{
	struct event e;

	request_event(&e, EVENT_CANCEL, amqp_cstring_bytes("a"), 1, 0, 2,
	              AT + 5000, AT, MAX_AGE);
	cr_assert_eq(e.kind, EVENT_CANCEL);
	cr_assert_eq(e.at, AT);
	cr_assert_eq(e.park, 1);
	cr_assert_eq(e.due, 0);
	cr_assert_eq(e.until, AT + 5000 + DAY);
	cr_assert(e.cancel.len == 1 && memcmp(e.cancel.bytes, "a", 1) == 0);
	cr_assert_eq(e.superseded.len, 0);
}

Test(request, overdue_messages_hold_a_day_from_now)
{
	struct event e;

	request_event(&e, EVENT_CANCEL, amqp_cstring_bytes("a"), 0, 0, 1,
	              AT - 5000, AT, MAX_AGE);
	cr_assert_eq(e.until, AT + DAY);
}

Test(request, reschedule_later_holds_past_the_new_time)
{
	struct event e;

	request_event(&e, EVENT_RESCHEDULE, amqp_cstring_bytes("a"), 0,
	              AT + 9000, 1, AT + 5000, AT, MAX_AGE);
	cr_assert_eq(e.kind, EVENT_RESCHEDULE);
	cr_assert_eq(e.due, AT + 9000);
	cr_assert_eq(e.until, AT + 9000 + DAY);
}

Test(request, naming_nothing_yet_holds_max_age)
{
	struct event e;

	request_event(&e, EVENT_CANCEL, amqp_cstring_bytes("a"), 0, 0, 0, 0, AT,
	              MAX_AGE);
	cr_assert_eq(e.until, AT + MAX_AGE);
}

Test(request, pause_and_resume)
{
	struct event e;

	request_pause_event(&e, 0, amqp_cstring_bytes("x/k"), 1, AT, MAX_AGE);
	cr_assert_eq(e.kind, EVENT_PAUSE);
	cr_assert_eq(e.target, 1);
	cr_assert_eq(e.until, AT + MAX_AGE);
	request_pause_event(&e, 1, amqp_cstring_bytes("s"), 0, AT, MAX_AGE);
	cr_assert_eq(e.kind, EVENT_RESUME);
	cr_assert_eq(e.target, 0);
}

/*
 * request_publish_to_p builds the request before it touches the broker:
 * what P would not take as a request is refused with words, unsent.
 */
Test(request, publish_to_p_refuses_what_is_no_request)
{
	static struct client cl;
	static struct topology topo;
	struct event e;

	strcpy(topo.exchange, "cascade");
	cl.topo = &topo;
	strcpy(cl.user, "alice");
	request_event(&e, EVENT_CANCEL, amqp_empty_bytes, 0, 0, 0, 0, AT,
	              MAX_AGE);
	cr_assert_eq(request_publish_to_p(&cl, &e), -1);
	cr_assert_str_eq(cl.err, "cancel of \"\": not a request that can be "
	                         "published to cascade");
	e.kind = EVENT_SCHEDULED;
	e.cancel = amqp_cstring_bytes("a");
	cr_assert_eq(request_publish_to_p(&cl, &e), -1);
	cr_assert_str_eq(cl.err, "scheduled of \"a\": not a request that can "
	                         "be published to cascade");
}
