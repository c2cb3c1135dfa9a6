/* Exchange and queue declarations with the contract's arguments. */
#include "topology.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "broker.h"

void
topology_names(struct topology *t, const char *prefix, const struct ladder *l)
{
	snprintf(t->exchange, sizeof(t->exchange), "%s", prefix);
	snprintf(t->ingress, sizeof(t->ingress), "%s.ingress", prefix);
	snprintf(t->ret, sizeof(t->ret), "%s.return", prefix);
	snprintf(t->error, sizeof(t->error), "%s.error", prefix);
	snprintf(t->retry, sizeof(t->retry), "%s.retry", prefix);
	t->levels = l->levels;
	for (unsigned k = 0; k < l->levels; k++)
		snprintf(t->delay[k], sizeof(t->delay[k]), "%s.delay.%" PRId64,
			 prefix, l->ttl[k]);
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
	return broker_check(conn, what, err, errsize);
}

int
topology_declare(amqp_connection_state_t conn, amqp_channel_t ch,
		 const struct config *cfg, const struct topology *t,
		 const struct ladder *l, char *err, size_t errsize)
{
	amqp_table_entry_t e[8];
	amqp_table_t plain = {0, e}, args;
	int quorum = cfg->topology_queue_type == QUEUE_TYPE_QUORUM;
	char what[TOPOLOGY_NAME_MAX + 32];

	/* Classic queues are declared without x-queue-type, as clients
	 * that predate quorum queues do, so either form matches. */
	if (quorum) {
		arg_str(&e[0], "x-queue-type", "quorum");
		plain.num_entries = 1;
	}

	amqp_exchange_declare(conn, ch, amqp_cstring_bytes(t->exchange),
			      amqp_cstring_bytes("fanout"), 0, 1, 0, 0,
			      amqp_empty_table);
	snprintf(what, sizeof(what), "declare exchange %s", t->exchange);
	if (broker_check(conn, what, err, errsize) < 0)
		return -1;
	if (topology_queue(conn, ch, t->ingress, plain, err, errsize) < 0 ||
	    topology_queue(conn, ch, t->ret, plain, err, errsize) < 0 ||
	    topology_queue(conn, ch, t->error, plain, err, errsize) < 0)
		return -1;
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
	if (broker_check(conn, what, err, errsize) < 0 ||
	    topology_queue(conn, ch, t->retry, plain, err, errsize) < 0)
		return -1;
	amqp_queue_bind(conn, ch, amqp_cstring_bytes(t->retry),
			amqp_cstring_bytes(t->retry), amqp_empty_bytes,
			amqp_empty_table);
	snprintf(what, sizeof(what), "bind queue %s", t->retry);
	if (broker_check(conn, what, err, errsize) < 0)
		return -1;

	for (unsigned k = 0; k < l->levels; k++) {
		int n = 0;
		arg_i64(&e[n++], "x-message-ttl", l->ttl[k]);
		arg_str(&e[n++], "x-dead-letter-exchange", "");
		arg_str(&e[n++], "x-dead-letter-routing-key", t->ret);
		arg_i64(&e[n++], "x-max-length",
			(int64_t)cfg->topology_max_length);
		arg_str(&e[n++], "x-overflow", "reject-publish");
		if (quorum) {
			arg_str(&e[n++], "x-queue-type", "quorum");
			arg_str(&e[n++], "x-dead-letter-strategy",
				"at-least-once");
		}
		args.num_entries = n;
		args.entries = e;
		if (topology_queue(conn, ch, t->delay[k], args, err, errsize) <
		    0)
			return -1;
	}
	return 0;
}
