/* SPDX-License-Identifier: Apache-2.0 */
/* Exchange and queue declarations: docs/CONTRACT.md section 3. */
#include "topology.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "log.h"

/* name of queue base (P.return, P.delay.<ttl>) in a layout of shards */
static void
shard_name(char *out, const char *base, unsigned shards, unsigned s)
{
	if (shards > 1)
		snprintf(out, TOPOLOGY_NAME_MAX, "%.240s.s%u", base, s);
	else
		snprintf(out, TOPOLOGY_NAME_MAX, "%s", base);
}

int
topology_names(struct topology *t, const char *prefix, const struct ladder *l,
               unsigned shards, unsigned drain_shards)
{
	char ret[TOPOLOGY_NAME_MAX], delay[TOPOLOGY_NAME_MAX],
	    hold[TOPOLOGY_NAME_MAX];
	size_t drains = drain_shards > 0 ? drain_shards : 1;
	unsigned former[LADDER_MAX_SHARDS];

	memset(t, 0, sizeof(*t));
	if (shards > LADDER_MAX_SHARDS || drain_shards > LADDER_MAX_SHARDS)
		return -1; /* config_load bounds both */
	snprintf(t->exchange, sizeof(t->exchange), "%s", prefix);
	snprintf(t->ingress, sizeof(t->ingress), "%s.ingress", prefix);
	snprintf(t->error, sizeof(t->error), "%s.error", prefix);
	snprintf(t->retry, sizeof(t->retry), "%s.retry", prefix);
	snprintf(t->events, sizeof(t->events), "%s.events", prefix);
	snprintf(t->cancels, sizeof(t->cancels), "%s.cancels", prefix);
	snprintf(t->series, sizeof(t->series), "%s.series", prefix);
	snprintf(t->copies, sizeof(t->copies), "%s.copies", prefix);
	snprintf(t->requests, sizeof(t->requests), "%s.requests", prefix);
	t->levels = l->levels;
	t->shards = shards > 0 ? shards : 1;
	t->ret = calloc(t->shards, sizeof(*t->ret));
	t->hold = calloc(t->shards, sizeof(*t->hold));
	t->delay = calloc((size_t)t->shards * t->levels, sizeof(*t->delay));
	t->drain = calloc(drains, sizeof(*t->drain));
	t->drain_delay = calloc(drains * t->levels, sizeof(*t->drain_delay));
	if (t->ret == NULL || t->hold == NULL || t->delay == NULL ||
	    t->drain == NULL || t->drain_delay == NULL) {
		topology_free(t);
		return -1;
	}
	snprintf(ret, sizeof(ret), "%.200s.return", prefix);
	snprintf(hold, sizeof(hold), "%.200s.hold", prefix);
	for (unsigned s = 0; s < t->shards; s++) {
		shard_name(t->ret[s], ret, t->shards, s);
		shard_name(t->hold[s], hold, t->shards, s);
	}
	/* A former layout's shards that this one has not: former[i] is
	 * drained queue i's shard there. */
	for (unsigned s = 0; s < drain_shards; s++) {
		if (!ladder_shard_drained(drain_shards, t->shards, s))
			continue;
		former[t->drains] = s;
		shard_name(t->drain[t->drains++], ret, drain_shards, s);
	}
	t->drain_sharded = drain_shards > 1;
	for (unsigned k = 0; k < l->levels; k++) {
		snprintf(delay, sizeof(delay), "%.200s.delay.%" PRId64, prefix,
		         l->ttl[k]);
		for (unsigned s = 0; s < t->shards; s++)
			shard_name(t->delay[s * t->levels + k], delay,
			           t->shards, s);
		for (unsigned i = 0; i < t->drains; i++)
			shard_name(t->drain_delay[i * t->levels + k], delay,
			           drain_shards, former[i]);
	}
	return 0;
}

void
topology_free(struct topology *t)
{
	free(t->ret);
	free(t->hold);
	free(t->delay);
	free(t->drain);
	free(t->drain_delay);
	t->ret = NULL;
	t->delay = NULL;
	t->drain = NULL;
	t->drain_delay = NULL;
}

static void
arg_str(amqp_table_entry_t *e, const char *key, const char *value)
{
	e->key = amqp_cstring_bytes(key);
	e->value.kind = AMQP_FIELD_KIND_UTF8;
	e->value.value.bytes = amqp_cstring_bytes(value);
}

static void
arg_i64(amqp_table_entry_t *e, const char *key, int64_t value)
{
	e->key = amqp_cstring_bytes(key);
	e->value.kind = AMQP_FIELD_KIND_I64;
	e->value.value.i64 = value;
}

static int
topology_queue(amqp_connection_state_t conn, amqp_channel_t ch,
               const char *name, amqp_table_t args, char *err, size_t errsize)
{
	char what[TOPOLOGY_NAME_MAX + 32];

	amqp_queue_declare(conn, ch, amqp_cstring_bytes(name), 0, 1, 0, 0,
	                   args);
	snprintf(what, sizeof(what), "declare queue %s", name);
	if (broker_check(conn, what, err, errsize) == 0)
		return 0;
	return broker_reply_code(conn) == AMQP_PRECONDITION_FAILED
	           ? TOPOLOGY_MISMATCH
	           : -1;
}

/* The broker closed ch over a failed declare: open it again. */
static int
topology_reopen(amqp_connection_state_t conn, amqp_channel_t ch, char *err,
                size_t errsize)
{
	amqp_channel_close_ok_t ok = {0};

	if (amqp_send_method(conn, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) !=
	    AMQP_STATUS_OK) {
		snprintf(err, errsize, "cannot reopen channel %u", ch);
		return -1;
	}
	amqp_channel_open(conn, ch);
	return broker_check(conn, "channel.open", err, errsize);
}

/*
 * The policy that gives an existing queue the arguments e[0..n), as JSON
 * with its double quotes escaped for a log line's quoted value.
 */
static void
topology_policy(char *buf, size_t size, const amqp_table_entry_t *e, int n)
{
	size_t j = 0;

	/* Each argument x-KEY is the policy key KEY. */
	j += (size_t)snprintf(buf, size, "{");
	for (int i = 0; i < n && j < size; i++) {
		const char *k = (const char *)e[i].key.bytes + 2;
		int klen = (int)e[i].key.len - 2;
		if (e[i].value.kind == AMQP_FIELD_KIND_I64)
			j += (size_t)snprintf(
			    buf + j, size - j, "%s\\\"%.*s\\\":%" PRId64,
			    i ? "," : "", klen, k, e[i].value.value.i64);
		else
			j += (size_t)snprintf(
			    buf + j, size - j, "%s\\\"%.*s\\\":\\\"%.*s\\\"",
			    i ? "," : "", klen, k,
			    (int)e[i].value.value.bytes.len,
			    (const char *)e[i].value.value.bytes.bytes);
	}
	if (j < size)
		snprintf(buf + j, size - j, "}");
}

/*
 * A queue cascade consumes (to_error: ingress, return, retry, requests) or the
 * error queue.  A consumed queue dead-letters what cascade rejects, or the
 * broker gives up on, into P.error (at least once on quorum queues), so that a
 * message the daemon's AMQP library cannot even decode has a way out; on
 * RabbitMQ 4.x every one of them also has no delivery limit.  A queue that
 * an older cascade made without these arguments stays as it is (they cannot
 * change on an existing queue) and a warning gives the policy that adds
 * them.  *safe is 1 when rejecting a message parks it.
 */
static int
topology_consumed(amqp_connection_state_t conn, amqp_channel_t ch,
                  const struct topology *t, const char *name, int to_error,
                  int quorum, int v4, int sharded, int *safe, char *err,
                  size_t errsize)
{
	amqp_table_entry_t e[7];
	char policy[512];
	int n = 0, rc;

	*safe = 0;
	if (quorum)
		arg_str(&e[n++], "x-queue-type", "quorum");
	if (quorum && sharded)
		arg_str(&e[n++], "x-queue-leader-locator", "client-local");
	int plain = n;
	if (to_error) {
		arg_str(&e[n++], "x-dead-letter-exchange", "");
		arg_str(&e[n++], "x-dead-letter-routing-key", t->error);
		if (quorum) {
			arg_str(&e[n++], "x-dead-letter-strategy",
			        "at-least-once");
			arg_str(&e[n++], "x-overflow", "reject-publish");
		}
	}
	if (quorum && v4)
		arg_i64(&e[n++], "x-delivery-limit", -1);
	if (n == plain)
		return topology_queue(conn, ch, name, (amqp_table_t){n, e}, err,
		                      errsize);
	rc = topology_queue(conn, ch, name, (amqp_table_t){n, e}, err, errsize);
	if (rc == 0)
		*safe = to_error;
	if (rc != TOPOLOGY_MISMATCH)
		return rc;
	if (topology_reopen(conn, ch, err, errsize) < 0)
		return -1;
	rc = topology_queue(conn, ch, name, (amqp_table_t){plain, e}, err,
	                    errsize);
	if (rc < 0)
		return rc;
	topology_policy(policy, sizeof(policy), e + plain, n - plain);
	log_warn("queue_arguments",
	         " queue=%s reason=\"declared by an older cascade without "
	         "%s: it keeps working; a policy adds them\" fix=\"rabbitmqctl "
	         "set_policy --apply-to queues cascade-%s '^%s$' '%s'\"",
	         name,
	         to_error ? "a dead-letter target (P.error) for what cannot be "
	                    "read, nor, on RabbitMQ 4.x, x-delivery-limit -1"
	                  : "x-delivery-limit -1 (RabbitMQ 4.x drops a "
	                    "message returned 20 times)",
	         name, name, policy);
	return 0;
}

/*
 * A stream of records (events.h): durable, replicated like a quorum queue,
 * its records kept for max_age.  With segment > 0 its segment files are
 * that many bytes at most: a stream drops old records only a whole
 * segment at a time, and RabbitMQ's default segment (500 MB) would hold
 * weeks of P.series' records past its window.  One that exists with
 * other arguments keeps them (arguments cannot change on a declared
 * queue), with a warning.
 */
static int
topology_stream(amqp_connection_state_t conn, amqp_channel_t ch,
                const char *name, int64_t max_age, int64_t segment, char *err,
                size_t errsize)
{
	amqp_table_entry_t e[3];
	char age[32];
	int n = 0, rc;

	/* Streams take a retention in Y, M, D, h, m or s. */
	snprintf(age, sizeof(age), "%" PRId64 "s", (max_age + 999) / 1000);
	arg_str(&e[n++], "x-queue-type", "stream");
	arg_str(&e[n++], "x-max-age", age);
	if (segment > 0)
		arg_i64(&e[n++], "x-stream-max-segment-size-bytes", segment);
	rc = topology_queue(conn, ch, name, (amqp_table_t){n, e}, err, errsize);
	if (rc != TOPOLOGY_MISMATCH)
		return rc;
	if (topology_reopen(conn, ch, err, errsize) < 0)
		return -1;
	amqp_queue_declare(conn, ch, amqp_cstring_bytes(name), 1, 0, 0, 0,
	                   amqp_empty_table);
	if (broker_check(conn, "declare stream (passive)", err, errsize) < 0) {
		/* Not a stream we can use at all: say what the broker said. */
		return TOPOLOGY_MISMATCH;
	}
	log_warn("stream_arguments",
	         " queue=%s reason=\"declared with other arguments: it keeps "
	         "its own (wanted x-max-age %s%s)\" fix=\"set [events] %s to "
	         "match, or delete the stream (its records go with it) and "
	         "restart\"",
	         name, age,
	         segment > 0 ? ", x-stream-max-segment-size-bytes" : "",
	         segment > 0 ? "series_window" : "max_age");
	return 0;
}

/*
 * Shard s: its return queue, then its delay queues, which dead-letter
 * into it.  *safe as for topology_consumed, about the return queue.
 */
static int
topology_shard(amqp_connection_state_t conn, amqp_channel_t ch,
               const struct config *cfg, const struct topology *t,
               const struct ladder *l, unsigned s, int *safe, char *err,
               size_t errsize)
{
	amqp_table_entry_t e[8];
	int quorum = cfg->topology_queue_type == QUEUE_TYPE_QUORUM;
	int v4 = broker_major_version(conn) >= 4;
	int rc;

	if ((rc = topology_consumed(conn, ch, t, t->ret[s], 1, quorum, v4,
	                            t->shards > 1, safe, err, errsize)) < 0)
		return rc;
	for (unsigned k = 0; k < l->levels; k++) {
		int n = 0;
		arg_i64(&e[n++], "x-message-ttl", l->ttl[k]);
		arg_str(&e[n++], "x-dead-letter-exchange", "");
		arg_str(&e[n++], "x-dead-letter-routing-key", t->ret[s]);
		arg_i64(&e[n++], "x-max-length",
		        (int64_t)cfg->topology_max_length);
		arg_str(&e[n++], "x-overflow", "reject-publish");
		if (quorum) {
			arg_str(&e[n++], "x-queue-type", "quorum");
			arg_str(&e[n++], "x-dead-letter-strategy",
			        "at-least-once");
		}
		if (quorum && t->shards > 1)
			arg_str(&e[n++], "x-queue-leader-locator",
			        "client-local");
		if ((rc = topology_queue(conn, ch, topology_delay(t, s, k),
		                         (amqp_table_t){n, e}, err, errsize)) <
		    0)
			return rc;
	}
	return 0;
}

int
topology_declare(amqp_connection_state_t conn, amqp_channel_t ch,
                 const struct config *cfg, const struct topology *t,
                 const struct ladder *l, int reject_parks[ROUTE_SOURCES],
                 char *err, size_t errsize)
{
	/* Classic queues are declared without x-queue-type, as clients
	 * that predate quorum queues do, so either form matches. */
	int quorum = cfg->topology_queue_type == QUEUE_TYPE_QUORUM;
	int v4 = broker_major_version(conn) >= 4, none, safe;
	char what[TOPOLOGY_NAME_MAX + 32];
	int rc;

	amqp_exchange_declare(conn, ch, amqp_cstring_bytes(t->exchange),
	                      amqp_cstring_bytes("fanout"), 0, 1, 0, 0,
	                      amqp_empty_table);
	snprintf(what, sizeof(what), "declare exchange %s", t->exchange);
	if (broker_check(conn, what, err, errsize) < 0)
		return -1;
	if ((rc = topology_consumed(conn, ch, t, t->error, 0, quorum, v4, 0,
	                            &none, err, errsize)) < 0 ||
	    (rc = topology_consumed(conn, ch, t, t->ingress, 1, quorum, v4, 0,
	                            &reject_parks[ROUTE_FROM_INGRESS], err,
	                            errsize)) < 0)
		return rc;
	amqp_queue_bind(conn, ch, amqp_cstring_bytes(t->ingress),
	                amqp_cstring_bytes(t->exchange), amqp_empty_bytes,
	                amqp_empty_table);
	snprintf(what, sizeof(what), "bind queue %s", t->ingress);
	if (broker_check(conn, what, err, errsize) < 0)
		return -1;

	/* Work queues dead-letter rejected messages to P.retry. */
	amqp_exchange_declare(conn, ch, amqp_cstring_bytes(t->retry),
	                      amqp_cstring_bytes("fanout"), 0, 1, 0, 0,
	                      amqp_empty_table);
	snprintf(what, sizeof(what), "declare exchange %s", t->retry);
	if (broker_check(conn, what, err, errsize) < 0)
		return -1;
	if ((rc = topology_consumed(conn, ch, t, t->retry, 1, quorum, v4, 0,
	                            &reject_parks[ROUTE_FROM_RETRY], err,
	                            errsize)) < 0)
		return rc;
	amqp_queue_bind(conn, ch, amqp_cstring_bytes(t->retry),
	                amqp_cstring_bytes(t->retry), amqp_empty_bytes,
	                amqp_empty_table);
	snprintf(what, sizeof(what), "bind queue %s", t->retry);
	if (broker_check(conn, what, err, errsize) < 0)
		return -1;

	/* Requests wait for a reading of P.events in a queue of their own,
	 * off ingress (daemon_scan.c); consumed like the others. */
	if (config_events(cfg) &&
	    ((rc = topology_stream(conn, ch, t->events,
	                           config_events_max_age(cfg), 0, err,
	                           errsize)) < 0 ||
	     (rc = topology_stream(conn, ch, t->cancels,
	                           config_events_max_age(cfg), 0, err,
	                           errsize)) < 0 ||
	     (rc = topology_stream(conn, ch, t->copies,
	                           config_events_max_age(cfg), 0, err,
	                           errsize)) < 0 ||
	     (rc = topology_stream(
	          conn, ch, t->series, cfg->events_series_window,
	          TOPOLOGY_SERIES_SEGMENT, err, errsize)) < 0 ||
	     (rc = topology_consumed(conn, ch, t, t->requests, 1, quorum, v4, 0,
	                             &reject_parks[ROUTE_FROM_REQUESTS], err,
	                             errsize)) < 0))
		return rc;

	reject_parks[ROUTE_FROM_RETURN] = 1;
	for (unsigned s = 0; s < t->shards; s++) {
		if ((rc = topology_shard(conn, ch, cfg, t, l, s, &safe, err,
		                         errsize)) < 0)
			return rc;
		reject_parks[ROUTE_FROM_RETURN] &= safe;
	}
	for (unsigned i = 0; i < t->drains; i++) {
		if ((rc = topology_consumed(conn, ch, t, t->drain[i], 1, quorum,
		                            v4, t->drain_sharded, &safe, err,
		                            errsize)) < 0)
			return rc;
		reject_parks[ROUTE_FROM_RETURN] &= safe;
	}
	return 0;
}

/* Does queue name exist?  1 yes, 0 no (ch is open again), -1 failed. */
static int
topology_exists(amqp_connection_state_t conn, amqp_channel_t ch,
                const char *name, char *err, size_t errsize)
{
	amqp_queue_declare(conn, ch, amqp_cstring_bytes(name), 1, 0, 0, 0,
	                   amqp_empty_table);
	if (broker_check(conn, "declare queue (passive)", err, errsize) == 0)
		return 1;
	if (broker_reply_code(conn) != AMQP_NOT_FOUND)
		return -1;
	return topology_reopen(conn, ch, err, errsize) < 0 ? -1 : 0;
}

int
topology_declare_hold(amqp_connection_state_t conn, amqp_channel_t ch,
                      const struct config *cfg, const struct topology *t,
                      char *err, size_t errsize)
{
	amqp_table_entry_t e[8];
	int rc;

	for (unsigned s = 0; s < t->shards; s++) {
		int n = 0;
		arg_str(&e[n++], "x-queue-type", "quorum");
		arg_str(&e[n++], "x-dead-letter-exchange", "");
		arg_str(&e[n++], "x-dead-letter-routing-key", t->error);
		arg_str(&e[n++], "x-dead-letter-strategy", "at-least-once");
		arg_i64(&e[n++], "x-max-length",
		        (int64_t)cfg->topology_max_length);
		arg_str(&e[n++], "x-overflow", "reject-publish");
		/* A message that takes AMQP 1.0 sessions down (one a client
		 * put there with a decimal header) never reaches the daemon's
		 * redelivery guard: the broker parks it after this many. */
		arg_i64(&e[n++], "x-delivery-limit", TOPOLOGY_HOLD_LIMIT);
		if (t->shards > 1)
			arg_str(&e[n++], "x-queue-leader-locator",
			        "client-local");
		if ((rc = topology_queue(conn, ch, t->hold[s],
		                         (amqp_table_t){n, e}, err, errsize)) <
		    0)
			return rc;
	}
	return 0;
}

int
topology_hold_present(amqp_connection_state_t conn, amqp_channel_t ch,
                      const struct topology *t, int *present, unsigned *n,
                      char *err, size_t errsize)
{
	*n = 0;
	for (unsigned s = 0; s < t->shards; s++) {
		int rc = topology_exists(conn, ch, t->hold[s], err, errsize);
		if (rc < 0)
			return -1;
		present[s] = rc;
		*n += (unsigned)rc;
	}
	return 0;
}

unsigned
topology_place(amqp_connection_state_t conn, amqp_channel_t ch,
               const struct config *cfg, const struct topology *t,
               const struct ladder *l)
{
	unsigned n = config_broker_url_count(cfg), placed = 0;
	char url[CONFIG_STR_MAX], masked[CONFIG_STR_MAX], err[512];
	amqp_connection_state_t node;
	uint64_t missing = 0;
	int safe, rc;

	if (t->shards < 2 || n < 2)
		return 0;
	/* Only shards not declared yet: a queue that exists keeps its
	 * place, and a daemon's start costs no connections. */
	for (unsigned s = 0; s < t->shards; s++) {
		if ((rc = topology_exists(conn, ch, t->ret[s], err,
		                          sizeof(err))) < 0)
			return 0; /* topology_declare will say why */
		if (rc == 0)
			missing |= UINT64_C(1) << s;
	}
	/* One connection per node that has shards to place. */
	for (unsigned u = 0; u < n && u < t->shards && missing != 0; u++) {
		int any = 0;
		for (unsigned s = u; s < t->shards; s += n)
			any |= (int)(missing >> s & 1);
		if (!any || config_broker_url(cfg, u, url, sizeof(url)) < 0)
			continue;
		config_mask_url(url, masked, sizeof(masked));
		if ((node = broker_connect_url(cfg, url, err, sizeof(err))) ==
		    NULL) {
			log_warn("shard_placement", " url=%s reason=\"%s\"",
			         masked, err);
			continue;
		}
		for (unsigned s = u; s < t->shards; s += n) {
			if (!(missing >> s & 1))
				continue;
			if (topology_shard(node, BROKER_CH_WORK, cfg, t, l, s,
			                   &safe, err, sizeof(err)) < 0) {
				log_warn("shard_placement",
				         " shard=%u url=%s reason=\"%s\"", s,
				         masked, err);
				break;
			}
			placed++;
		}
		amqp_connection_close(node, AMQP_REPLY_SUCCESS);
		amqp_destroy_connection(node);
	}
	return placed;
}

int
topology_of_config(struct topology *t, struct ladder *l,
                   const struct config *cfg, const char **why)
{
	if (ladder_init(l, cfg->topology_resolution, cfg->topology_factor,
	                config_levels(cfg), why) < 0)
		return -1;
	if (topology_names(t, cfg->topology_prefix, l,
	                   (unsigned)cfg->topology_shards,
	                   (unsigned)cfg->topology_drain_shards) < 0) {
		*why = "out of memory";
		return -1;
	}
	return 0;
}
