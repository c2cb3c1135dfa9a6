/*
 * `cascade-bench records`: fill P.series (--stream series, the default) or
 * P.cancels (--stream cancels, where versions before P.series wrote them)
 * with what a long-running repeat leaves there, encoded by the daemon's
 * own code (events_props), so that a daemon's reading of the streams at
 * connect can be timed (tools/bench replay).
 *
 * --count N series records of one series of every 1 s, occurrences 2 to
 * N + 1, due over the N seconds before now, each with a fresh token: what
 * a daemon writes as it delivers a day of a one-second series (N =
 * 86400).  Each is still in force (x-cascade-until: its due time plus a
 * day), so a reader folds every one into its map, as after a real day.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "broker.h"
#include "duration.h"
#include "events.h"

int
records_write(const struct opts *o)
{
	static char err[512];
	char user[256], series[17], token[17], stream[300];
	struct broker_confirms c;
	amqp_connection_state_t conn;
	amqp_pool_t pool;
	int64_t now = duration_wall_ms();

	conn = broker_connect(&o->cfg, err, sizeof(err));
	if (conn == NULL) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	if (config_broker_user(&o->cfg, user, sizeof(user)) < 0)
		user[0] = '\0';
	if (getenv("CASCADE_BROKER_URL") != NULL &&
	    config_url_user(getenv("CASCADE_BROKER_URL"), user, sizeof(user)) <
	        0)
		user[0] = '\0';
	snprintf(stream, sizeof(stream), "%s.%s", o->prefix, o->stream);
	if (broker_confirm_select(conn, CH_PUB, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	events_new_id(series);
	init_amqp_pool(&pool, 4096);
	for (uint64_t k = 2; k < o->count + 2; k++) {
		struct event e;
		amqp_basic_properties_t props;
		int64_t due = now - (int64_t)(o->count + 1 - k) * 1000;

		memset(&e, 0, sizeof(e));
		e.kind = EVENT_SERIES;
		e.at = due - 1000; /* when occurrence k - 1 went out */
		e.id = amqp_cstring_bytes(series);
		e.occurrence = (int64_t)k;
		events_new_id(token);
		e.token = amqp_cstring_bytes(token);
		e.until = due + 86400000;
		e.writer = amqp_cstring_bytes(user);
		if (events_props(&e, &pool, &props) < 0 ||
		    (broker_confirm_pending(&c) >= WINDOW &&
		     broker_confirm_wait(conn, &c, WINDOW / 2, 30000, err,
		                         sizeof(err)) < 0) ||
		    broker_confirm_publish(
		        conn, &c, amqp_empty_bytes, amqp_cstring_bytes(stream),
		        0, &props, amqp_empty_bytes) != AMQP_STATUS_OK) {
			fprintf(stderr,
			        "cascade-bench: record %" PRIu64 ": %s\n", k,
			        err[0] ? err : "publish failed");
			return 1;
		}
		recycle_amqp_pool(&pool);
	}
	if (broker_confirm_wait(conn, &c, 0, 60000, err, sizeof(err)) < 0) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	empty_amqp_pool(&pool);
	printf("wrote %" PRIu64 " series records of series %s to %s "
	       "(%" PRIu64 " acked, %" PRIu64 " nacked)\n",
	       o->count, series, stream, c.acked, c.nacked);
	return c.nacked > 0;
}
