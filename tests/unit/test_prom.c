/* SPDX-License-Identifier: Apache-2.0 */
/* prom_targets_parse: the per-target samples of the daemon's /metrics. */
#include <criterion/criterion.h>
#include <string.h>

#include "prom.h"

Test(prom, three_samples_one_row)
{
	char text[] =
	    "# HELP cascade_target_refusals_total refusals\n"
	    "cascade_published_total 12\n"
	    "cascade_target_refusals_total{exchange=\"orders\",routing_key="
	    "\"eu\"} 7\n"
	    "cascade_target_diverted_total{exchange=\"orders\",routing_key="
	    "\"eu\"} 2\n"
	    "cascade_target_backoff_seconds{exchange=\"orders\",routing_key="
	    "\"eu\"} 1.5\n"
	    "cascade_target_refusals_total{exchange=\"\",routing_key="
	    "\"q\"} 1\n";
	struct prom_target t[4];

	cr_assert_eq(prom_targets_parse(text, t, 4), 2);
	cr_assert_str_eq(t[0].exchange, "orders");
	cr_assert_str_eq(t[0].routing_key, "eu");
	cr_assert_float_eq(t[0].refusals, 7, 1e-9);
	cr_assert_float_eq(t[0].diverted, 2, 1e-9);
	cr_assert_float_eq(t[0].backoff, 1.5, 1e-9);
	cr_assert_str_eq(t[1].exchange, "");
	cr_assert_str_eq(t[1].routing_key, "q");
	cr_assert_float_eq(t[1].refusals, 1, 1e-9);
	cr_assert_float_eq(t[1].diverted, 0, 1e-9);
}

Test(prom, label_escapes)
{
	char text[] = "cascade_target_refusals_total{exchange=\"a\\\"b\\\\c\","
	              "routing_key=\"x\\ny\"} 3\n";
	struct prom_target t[1];

	cr_assert_eq(prom_targets_parse(text, t, 1), 1);
	cr_assert_str_eq(t[0].exchange, "a\"b\\c");
	cr_assert_str_eq(t[0].routing_key, "x\ny");
}

Test(prom, malformed_lines_and_max)
{
	char text[] = "cascade_target_refusals_total{routing_key=\"x\"} 1\n"
	              "cascade_target_refusals_total{exchange=\"a\"} 1\n"
	              "cascade_target_refusals_total{exchange=\"a\",routing_"
	              "key=\"unterminated} 1\n"
	              "cascade_target_refusals_total{exchange=\"a\",routing_"
	              "key=\"1\"} 1\n"
	              "cascade_target_refusals_total{exchange=\"a\",routing_"
	              "key=\"2\"} 1\n";
	struct prom_target t[1];

	cr_assert_eq(prom_targets_parse(text, t, 1), 1);
	cr_assert_str_eq(t[0].routing_key, "1");
}

Test(prom, empty)
{
	char text[] = "";
	struct prom_target t[1];

	cr_assert_eq(prom_targets_parse(text, t, 1), 0);
}

Test(prom, the_wait_mode_is_the_sample_at_one)
{
	cr_assert_str_eq(
	    prom_wait_mode("# x\ncascade_wait_mode{mode=\"ladder\"} "
	                   "0\ncascade_wait_mode{mode=\"native\"} "
	                   "1\n"),
	    "native");
	cr_assert_str_eq(
	    prom_wait_mode("# x\ncascade_wait_mode{mode=\"ladder\"} "
	                   "1\ncascade_wait_mode{mode=\"native\"} "
	                   "0\n"),
	    "ladder");
	cr_assert_null(prom_wait_mode("# x\ncascade_wait_mode{mode=\"ladder\"} "
	                              "0\ncascade_wait_mode{mode=\"native\"} "
	                              "0\n"));
	cr_assert_null(prom_wait_mode("cascade_info{version=\"1\"} 1\n"));
}

/* An unlabelled sample's value; not its prefix's, not a labelled one's. */
Test(prom, a_value_of_its_own)
{
	static const char text[] = "# HELP cascade_overdue_returns_total x\n"
	                           "cascade_overdue_returns_total_x 9\n"
	                           "cascade_overdue_returns_total 42\n"
	                           "cascade_reorder_messages{shard=\"1\"} 3\n"
	                           "cascade_bad nope\n";
	double v = -1;

	cr_assert_eq(prom_value(text, "cascade_overdue_returns_total", &v), 1);
	cr_assert_float_eq(v, 42.0, 1e-9);
	cr_assert_eq(prom_value(text, "cascade_reorder_messages", &v), 0);
	cr_assert_eq(prom_value(text, "cascade_bad", &v), 0);
	cr_assert_eq(prom_value(text, "cascade_missing", &v), 0);
}
