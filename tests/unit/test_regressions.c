/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Regression tests for bugs found while the unit tests were written: each
 * failed on the code as it stood and passes since the fix.
 */
#include "amqp_compat.h"
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "duration.h"
#include "headers.h"
#include "ladder.h"
#include "router.h"

#include "helpers.h"

/*
 * duration_parse: every int64 value of ms that does not overflow must
 * parse.  The digit loop stops at 2^62 / 10, so values between about
 * 4.6e18 and INT64_MAX are called "out of range" although they fit.
 */
Test(bug_duration, int64_max_parses)
{
	int64_t ms = 0;
	const char *why = NULL;
	const char *s = "9223372036854775807";

	cr_assert_eq(duration_parse(s, strlen(s), DURATION_BARE_MS, &ms, &why),
	             0, "\"%s\": %s", s, why ? why : "");
	cr_assert_eq(ms, INT64_MAX);
	s = "5000000000000000000ms";
	cr_assert_eq(
	    duration_parse(s, strlen(s), DURATION_BARE_REJECT, &ms, &why), 0,
	    "\"%s\": %s", s, why ? why : "");
	cr_assert_eq(ms, INT64_C(5000000000000000000));
	s = "-9223372036854775807";
	cr_assert_eq(duration_parse(s, strlen(s), DURATION_BARE_MS, &ms, &why),
	             0, "\"%s\": %s", s, why ? why : "");
	cr_assert_eq(ms, -INT64_MAX);
}

/*
 * headers_epoch_ms: the overflow check (n > (INT64_MAX - 9) / 10) rejects
 * "9223372036854775807", which fits; an I64 header of the same value is
 * accepted, so the two forms disagree.
 */
Test(bug_headers, epoch_string_int64_max)
{
	amqp_field_value_t v;
	int64_t ms = 0;
	const char *why = NULL;

	memset(&v, 0, sizeof(v));
	v.kind = AMQP_FIELD_KIND_UTF8;
	v.value.bytes = amqp_cstring_bytes("9223372036854775807");
	cr_assert_eq(headers_epoch_ms(&v, &ms, &why), 0, "%s", why ? why : "");
	cr_assert_eq(ms, INT64_MAX);
}

static struct config cfg;
static char err[4096];

static void
config_setup(void)
{
	unsetenv("CASCADE_BROKER_URL");
	memset(err, 0, sizeof(err));
}

TestSuite(bug_config, .init = config_setup);

/*
 * config_parse_any: a syntax error is reported only when nothing else
 * went wrong ("rc > 0 && p->errors == 0").  Here the missing ']' on line 1
 * is the real mistake; the file is rejected naming only line 2.
 */
Test(bug_config, syntax_error_reported_with_other_errors)
{
	cr_assert_eq(config_load_string(&cfg, "test.ini",
	                                "[topology\nfactor = 4\n", err,
	                                sizeof(err)),
	             -1);
	cr_assert(strstr(err, "test.ini:1: ") != NULL,
	          "the broken section header on line 1 is not named:\n%s", err);
}

Test(bug_config, syntax_error_after_a_bad_value)
{
	cr_assert_eq(config_load_string(&cfg, "test.ini",
	                                "[topology]\nfactor = 1\nno equals "
	                                "sign here\n",
	                                err, sizeof(err)),
	             -1);
	cr_assert(strstr(err, "test.ini:2: topology.factor") != NULL, "%s",
	          err);
	cr_assert(strstr(err, "test.ini:3: ") != NULL,
	          "the syntax error on line 3 is not reported:\n%s", err);
}

/*
 * config_check: the ladder error takes the line of topology.levels, which
 * is 0 when levels is left at its default, so the message names no line
 * although the culprit (factor) is on line 2.  Since levels defaults to as
 * many as reach max_delay, such a ladder cannot pass the limit: a factor
 * alone is accepted, and the error needs levels, whose line it names.
 */
Test(bug_config, ladder_error_names_a_line)
{
	cr_assert_eq(config_load_string(&cfg, "test.ini",
	                                "[topology]\nfactor = 1000\n", err,
	                                sizeof(err)),
	             0, "%s", err);
	cr_assert_eq(config_levels(&cfg), 3);
	cr_assert_eq(
	    config_load_string(&cfg, "test.ini",
	                       "[topology]\nfactor = 1000\nlevels = 9\n", err,
	                       sizeof(err)),
	    -1);
	cr_assert(strncmp(err, "test.ini:3: ", 12) == 0,
	          "want \"test.ini:3: ...\", got:\n%s", err);
}

/*
 * An unknown section with no keys is accepted silently: inih calls the
 * handler only for key = value lines.  docs/CONTRACT.md section 5: unknown
 * sections are errors.
 */
Test(bug_config, empty_unknown_section)
{
	int rc = config_load_string(&cfg, "test.ini",
	                            "[broker]\nheartbeat = 30s\n[statsd]\n",
	                            err, sizeof(err));

	cr_assert_eq(rc, -1, "[statsd] accepted");
	cr_assert(strstr(err, "test.ini:3: ") != NULL, "%s", err);
	cr_assert(strstr(err, "statsd") != NULL, "%s", err);
}

/*
 * config_check: RabbitMQ refuses exchange and queue names that begin with
 * "amq." (ACCESS_REFUSED), so prefix = amq.delays passes --check and then
 * fails at start-up when the exchange is declared.
 */
Test(bug_config, reserved_amq_prefix)
{
	cr_assert_eq(config_load_string(&cfg, "test.ini",
	                                "[topology]\nprefix = amq.delays\n",
	                                err, sizeof(err)),
	             -1, "prefix amq.delays accepted");
	cr_assert(strstr(err, "test.ini:2: topology.prefix") != NULL, "%s",
	          err);
}

/* Router fixtures. */
static struct ladder ladder;
static struct router_params params;
static amqp_pool_t pool;

static void
router_setup(void)
{
	default_router(&ladder, &params);
	init_amqp_pool(&pool, 4096);
}

static void
router_teardown(void)
{
	empty_amqp_pool(&pool);
}

TestSuite(bug_router, .init = router_setup, .fini = router_teardown);

/*
 * router_props: the user-id property is the broker-checked identity of the
 * publisher, moved into x-cascade-user-id.  When the message also carries
 * an x-cascade-user-id header (set by the publisher, or left over because a
 * consumer re-published a delivered message), the header wins and the real
 * user-id is dropped, so the consumer sees a name the broker never checked.
 */
Test(bug_router, user_id_beats_a_forged_header)
{
	struct tb t = {0};
	amqp_basic_properties_t in, out;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 0);
	tb_str(&t, "x-cascade-user-id", "admin");
	in = props_of(&t);
	in._flags |= AMQP_BASIC_USER_ID_FLAG;
	in.user_id = amqp_cstring_bytes("mallory");
	router_decide(&params, ROUTE_FROM_INGRESS, &in,
	              amqp_cstring_bytes("orders"), NOW, &r);
	cr_assert_eq(r.action, ROUTE_DELIVER);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	expect_hdr_str(&out.headers, "x-cascade-user-id", "mallory");
}

/* The same forgery on the way into the ladder. */
Test(bug_router, user_id_beats_a_forged_header_on_hop)
{
	struct tb t = {0};
	amqp_basic_properties_t in, out;
	struct route r;

	tb_i64(&t, "x-remaining-delay", 5000);
	tb_str(&t, "x-cascade-user-id", "admin");
	in = props_of(&t);
	in._flags |= AMQP_BASIC_USER_ID_FLAG;
	in.user_id = amqp_cstring_bytes("mallory");
	router_decide(&params, ROUTE_FROM_INGRESS, &in,
	              amqp_cstring_bytes("orders"), NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	expect_hdr_str(&out.headers, "x-cascade-user-id", "mallory");
}

/* A publisher's message with a sender-selected CC header. */
static amqp_field_value_t cc_list[1];

static void
cc_message(struct tb *t, amqp_basic_properties_t *in, int64_t delay)
{
	amqp_field_value_t *cc;

	cc_list[0].kind = AMQP_FIELD_KIND_UTF8;
	cc_list[0].value.bytes = amqp_cstring_bytes("audit");
	tb_i64(t, "x-remaining-delay", delay);
	cc = tb_add(t, "CC", AMQP_FIELD_KIND_ARRAY);
	cc->value.array.num_entries = 1;
	cc->value.array.entries = cc_list;
	*in = props_of(t);
}

/*
 * router_props: RabbitMQ routes a message that carries a "CC" header also
 * by each routing key in it (sender-selected distribution).  Hops and parks
 * go to the default exchange, so every hop publish puts a copy of the
 * message straight into the queue named in CC, long before it is due (and
 * a park copies it there too).  Then the delay queue, which has a
 * dead-letter routing key, strips CC on expiry, so the delivery that should
 * carry CC does not: the publisher's header is lost (docs/CONTRACT.md
 * section 2).
 */
Test(bug_router, cc_not_sent_to_a_delay_queue)
{
	struct tb t = {0};
	amqp_basic_properties_t in, out;
	struct route r;

	cc_message(&t, &in, 255000);
	router_decide(&params, ROUTE_FROM_INGRESS, &in,
	              amqp_cstring_bytes("orders"), NOW, &r);
	cr_assert_eq(r.action, ROUTE_HOP);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	cr_assert_null(headers_find(&out.headers, "CC"),
	               "a hop with CC copies the message to queue \"audit\" "
	               "at once");
}

Test(bug_router, cc_not_sent_to_the_error_queue)
{
	struct tb t = {0};
	amqp_basic_properties_t in, out;
	struct route r;

	cc_message(&t, &in, 400 * DAY); /* > max_delay */
	router_decide(&params, ROUTE_FROM_INGRESS, &in,
	              amqp_cstring_bytes("orders"), NOW, &r);
	cr_assert_eq(r.action, ROUTE_PARK);
	cr_assert_eq(router_props(&in, &r, &pool, &out), 0);
	cr_assert_null(headers_find(&out.headers, "CC"),
	               "a parked message with CC is copied to \"audit\"");
}

/* Without CC on the hop, it must still reach the delivery. */
Test(bug_router, cc_restored_at_delivery)
{
	struct tb t = {0};
	amqp_table_entry_t back[32];
	amqp_basic_properties_t in, cur, out;
	struct route r;
	int64_t now = NOW;
	const amqp_field_value_t *v;

	cc_message(&t, &in, 9000);
	router_decide(&params, ROUTE_FROM_INGRESS, &in,
	              amqp_cstring_bytes("orders"), now, &r);
	cur = in;
	while (r.action == ROUTE_HOP) {
		int n = 0;
		cr_assert_eq(router_props(&cur, &r, &pool, &out), 0);
		/* Dead-lettering with a routing key removes CC. */
		for (int i = 0; i < out.headers.num_entries && n < 32; i++)
			if (!bytes_is(out.headers.entries[i].key, "CC"))
				back[n++] = out.headers.entries[i];
		cur = out;
		cur.headers.entries = back;
		cur.headers.num_entries = n;
		now += ladder.ttl[r.level];
		router_decide(&params, ROUTE_FROM_RETURN, &cur,
		              amqp_cstring_bytes("cascade.return"), now, &r);
	}
	cr_assert_eq(r.action, ROUTE_DELIVER, "%s", r.reason);
	cr_assert_eq(router_props(&cur, &r, &pool, &out), 0);
	v = headers_find(&out.headers, "CC");
	cr_assert_not_null(v, "the publisher's CC header was lost");
	cr_assert_eq(v->kind, AMQP_FIELD_KIND_ARRAY);
	cr_assert_eq(v->value.array.num_entries, 1);
}
