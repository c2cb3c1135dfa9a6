/* SPDX-License-Identifier: Apache-2.0 */
/* Backpressure per destination: who backs off, for how long, and who not. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "metrics.h"
#include "targets.h"

#define B(s) amqp_cstring_bytes(s)

Test(targets, a_destination_never_refused_may_be_tried)
{
	struct targets ts;

	targets_init(&ts, 100, 1000);
	cr_assert_eq(targets_wait(&ts, B("billing"), B("invoices"), 0), 0);
	targets_free(&ts);
}

Test(targets, a_refusal_backs_off_that_destination_only)
{
	struct targets ts;

	targets_init(&ts, 100, 1000);
	cr_assert_eq(targets_refused(&ts, B(""), B("full"), 5000), 100);
	cr_assert_eq(targets_wait(&ts, B(""), B("full"), 5000), 100);
	cr_assert_eq(targets_wait(&ts, B(""), B("full"), 5060), 40);
	/* Same exchange, other key; same key, other exchange. */
	cr_assert_eq(targets_wait(&ts, B(""), B("healthy"), 5000), 0);
	cr_assert_eq(targets_wait(&ts, B("x"), B("full"), 5000), 0);
	cr_assert_eq(targets_backing_off(&ts, 5000), 1);
	targets_free(&ts);
}

Test(targets, the_backoff_doubles_up_to_the_cap_and_then_probes)
{
	struct targets ts;
	int64_t now = 0, expect[] = {100, 200, 400, 800, 1000, 1000};

	targets_init(&ts, 100, 1000);
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
		cr_assert_eq(targets_refused(&ts, B("e"), B("k"), now),
		             expect[i], "refusal %zu", i);
		/* Over: the next publish is a probe. */
		now += expect[i];
		cr_assert_eq(targets_wait(&ts, B("e"), B("k"), now), 0);
	}
	targets_free(&ts);
}

Test(targets, refusals_of_publishes_already_in_flight_do_not_lengthen_it)
{
	struct targets ts;

	targets_init(&ts, 100, 10000);
	cr_assert_eq(targets_refused(&ts, B("e"), B("k"), 0), 100);
	/* 500 more nacks for publishes sent before the first came back. */
	for (int i = 0; i < 500; i++)
		targets_refused(&ts, B("e"), B("k"), 10);
	cr_assert_eq(targets_wait(&ts, B("e"), B("k"), 10), 90);
	/* The probe after it is refused: twice as long, not 2^500. */
	cr_assert_eq(targets_refused(&ts, B("e"), B("k"), 100), 200);
	targets_free(&ts);
}

Test(targets, an_accepted_publish_clears_the_backoff)
{
	struct targets ts;

	targets_init(&ts, 100, 1000);
	targets_refused(&ts, B("e"), B("k"), 0);
	targets_refused(&ts, B("e"), B("k"), 100);
	targets_accepted(&ts, B("e"), B("k"));
	cr_assert_eq(targets_wait(&ts, B("e"), B("k"), 101), 0);
	/* And the next refusal starts from the first step again. */
	cr_assert_eq(targets_refused(&ts, B("e"), B("k"), 200), 100);
	targets_free(&ts);
}

Test(targets, a_full_table_forgets_the_least_recently_refused)
{
	struct targets ts;
	char name[32];

	targets_init(&ts, 100, 1000);
	for (int i = 0; i < TARGETS_MAX + 10; i++) {
		snprintf(name, sizeof(name), "q%d", i);
		cr_assert_geq(targets_refused(&ts, B(""), B(name), i), 0);
	}
	cr_assert_eq(ts.n, TARGETS_MAX);
	/* The newest is remembered, the oldest made room. */
	snprintf(name, sizeof(name), "q%d", TARGETS_MAX + 9);
	cr_assert_gt(targets_wait(&ts, B(""), B(name), TARGETS_MAX + 9), 0);
	cr_assert_eq(targets_wait(&ts, B(""), B("q0"), TARGETS_MAX + 9), 0);
	targets_free(&ts);
}

Test(targets, metrics_name_the_destination_with_escaped_labels)
{
	struct targets ts;
	char buf[4096];
	int n;

	targets_init(&ts, 1000, 8000);
	targets_refused(&ts, B("bill\"ing"), B("in\nv"), 0);
	targets_refused(&ts, B("bill\"ing"), B("in\nv"), 10);
	targets_diverted(&ts, B("bill\"ing"), B("in\nv"));
	n = metrics_render_targets(&ts, 500, buf, sizeof(buf));
	cr_assert_gt(n, 0);
	cr_assert(strstr(buf, "cascade_target_refusals_total{exchange="
	                      "\"bill\\\"ing\",routing_key=\"in\\nv\"} 2\n"),
	          "%s", buf);
	cr_assert(strstr(buf, "cascade_target_diverted_total{exchange="
	                      "\"bill\\\"ing\",routing_key=\"in\\nv\"} 1\n"),
	          "%s", buf);
	cr_assert(strstr(buf,
	                 "cascade_target_backoff_seconds{exchange="
	                 "\"bill\\\"ing\",routing_key=\"in\\nv\"} 0.500\n"),
	          "%s", buf);
	cr_assert_eq(metrics_render_targets(&ts, 500, buf, 10), -1);
	targets_free(&ts);
}

Test(targets, metrics_of_an_empty_table_are_the_headers_alone)
{
	struct targets ts;
	char buf[1024];

	targets_init(&ts, 100, 1000);
	cr_assert_gt(metrics_render_targets(&ts, 0, buf, sizeof(buf)), 0);
	cr_assert(strstr(buf, "# TYPE cascade_target_refusals_total counter"));
	cr_assert_null(strstr(buf, "{exchange="));
	targets_free(&ts);
}
