/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The queues a run and the forwarder declare on CH_PUB: a plain durable
 * queue (the target, fwd.in, fwd.return) and a chain of TTL queues that
 * dead-letter onward (mode dlx) or back to a queue the forwarder consumes
 * (mode forward).
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "broker.h"

/*
 * The reply to the last synchronous method on conn: 0 when it succeeded;
 * else says what failed, naming what, and exits 1.  Only for set-up, before
 * anything is measured: a benchmark whose queues cannot be declared has
 * nothing to report.
 */
int
queues_check(amqp_connection_state_t conn, const char *what)
{
	char err[512];

	if (broker_check(conn, what, err, sizeof(err)) == 0)
		return 0;
	fprintf(stderr, "cascade-bench: %s\n", err);
	exit(1);
}

/* A plain durable queue, of type quorum or classic; exits 1 if refused. */
void
queues_declare(amqp_connection_state_t conn, const char *name, const char *type)
{
	amqp_table_entry_t e = {
	    amqp_cstring_bytes("x-queue-type"),
	    {AMQP_FIELD_KIND_UTF8, {.bytes = amqp_cstring_bytes(type)}}};
	amqp_table_t args = {1, &e};

	amqp_queue_declare(conn, CH_PUB, amqp_cstring_bytes(name), 0, 1, 0, 0,
	                   args);
	queues_check(conn, name);
}

/*
 * TTL queues base.0 .. base.(hops-1) with TTLs unit*2^(hops-1) .. unit ms,
 * as a cascade ladder walks them for a delay of unit*(2^hops - 1) ms.  With
 * chain set each dead-letters into the next and the last into target (the
 * broker alone moves the message); without, each dead-letters into target
 * (a consumer moves it on).  Quorum queues, dead-lettering at least once,
 * which the broker does only for queues that reject publishes when full.
 * Exits 1 if one is refused.
 */
void
queues_declare_chain(amqp_connection_state_t conn, const char *base,
                     unsigned hops, int64_t unit, const char *target, int chain)
{
	char name[128], next[128];

	for (unsigned k = 0; k < hops; k++) {
		amqp_table_entry_t e[6];
		amqp_table_t args = {6, e};
		snprintf(name, sizeof(name), "%s.%u", base, k);
		if (chain && k + 1 < hops)
			snprintf(next, sizeof(next), "%s.%u", base, k + 1);
		else
			snprintf(next, sizeof(next), "%s", target);
		e[0].key = amqp_cstring_bytes("x-queue-type");
		e[0].value.kind = AMQP_FIELD_KIND_UTF8;
		e[0].value.value.bytes = amqp_cstring_bytes("quorum");
		e[1].key = amqp_cstring_bytes("x-message-ttl");
		e[1].value.kind = AMQP_FIELD_KIND_I64;
		e[1].value.value.i64 = unit << (hops - 1 - k);
		e[2].key = amqp_cstring_bytes("x-dead-letter-exchange");
		e[2].value.kind = AMQP_FIELD_KIND_UTF8;
		e[2].value.value.bytes = amqp_cstring_bytes("");
		e[3].key = amqp_cstring_bytes("x-dead-letter-routing-key");
		e[3].value.kind = AMQP_FIELD_KIND_UTF8;
		e[3].value.value.bytes = amqp_cstring_bytes(next);
		e[4].key = amqp_cstring_bytes("x-dead-letter-strategy");
		e[4].value.kind = AMQP_FIELD_KIND_UTF8;
		e[4].value.value.bytes = amqp_cstring_bytes("at-least-once");
		e[5].key = amqp_cstring_bytes("x-overflow");
		e[5].value.kind = AMQP_FIELD_KIND_UTF8;
		e[5].value.value.bytes = amqp_cstring_bytes("reject-publish");
		amqp_queue_declare(conn, CH_PUB, amqp_cstring_bytes(name), 0, 1,
		                   0, 0, args);
		queues_check(conn, name);
	}
}
