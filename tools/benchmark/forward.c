/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `cascade-bench forward`: the plain forwarder that mode forward measures
 * cascade against, what any consumer-based design must do at least.  It
 * runs until it is killed or its connection fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "broker.h"

/* The forwarder's deliveries, by the number of the publish that moves them. */
struct forwarder {
	amqp_connection_state_t conn;
	uint64_t src[BROKER_CONFIRM_WINDOW]; /* delivery tag, by seq % size */
};

/* Its publish confirmed: the delivery may go; refused: it comes again. */
static void
fwd_settled(void *arg, uint64_t seq, int acked)
{
	struct forwarder *fw = arg;
	uint64_t tag = fw->src[seq % BROKER_CONFIRM_WINDOW];

	if (acked)
		amqp_basic_ack(fw->conn, CH_PUB, tag, 0);
	else
		amqp_basic_nack(fw->conn, CH_PUB, tag, 0, 1);
}

/*
 * The plain forwarder.  Consumes fwd.in and fwd.return, publishes each
 * message (confirmed) to the next TTL queue by its x-hops count, or to its
 * target after the last, and acks the source after the confirm.  No other
 * logic.  Returns 1 when it cannot connect or its connection fails (a
 * refused declare exits 1); it does not return otherwise.
 */
int
forward_run(const struct opts *o)
{
	static struct broker_confirms c;
	static struct forwarder fw;
	amqp_connection_state_t conn;
	char err[512], q[128];
	amqp_frame_t f;
	uint64_t tag = 0;
	int64_t hops = 0;
	amqp_basic_properties_t props;
	amqp_bytes_t body = {0, NULL};
	size_t got = 0;
	int stage = 0, st;

	conn = broker_connect(&o->cfg, err, sizeof(err));
	if (conn == NULL) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	fw.conn = conn;
	queues_declare(conn, "fwd.in", o->target_type);
	queues_declare(conn, "fwd.return", o->target_type);
	queues_declare_chain(conn, "fwd.delay", o->hops, o->unit, "fwd.return",
	                     0);
	amqp_basic_qos(conn, CH_PUB, 0, 1000, 0);
	queues_check(conn, "qos");
	if (broker_confirm_select(conn, CH_PUB, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	c.on_settle = fwd_settled;
	c.arg = &fw;
	amqp_basic_consume(conn, CH_PUB, amqp_cstring_bytes("fwd.in"),
	                   amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
	queues_check(conn, "consume");
	amqp_basic_consume(conn, CH_PUB, amqp_cstring_bytes("fwd.return"),
	                   amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
	queues_check(conn, "consume");
	fprintf(stderr, "cascade-bench: forwarder ready pid=%ld\n",
	        (long)getpid());
	for (;;) {
		if (amqp_simple_wait_frame(conn, &f) != AMQP_STATUS_OK)
			return 1;
		switch (broker_confirm_frame(&c, &f, err, sizeof(err))) {
		case -1:
			fprintf(stderr, "cascade-bench: %s\n", err);
			return 1;
		case 1:
			continue;
		}
		if (f.frame_type == AMQP_FRAME_METHOD) {
			if (f.payload.method.id == AMQP_BASIC_DELIVER_METHOD) {
				tag = ((amqp_basic_deliver_t *)
				           f.payload.method.decoded)
				          ->delivery_tag;
				stage = 1;
			}
		} else if (f.frame_type == AMQP_FRAME_HEADER && stage == 1) {
			const amqp_field_value_t *v = NULL;
			props = *(amqp_basic_properties_t *)
			             f.payload.properties.decoded;
			hops = 0;
			for (int i = 0; i < props.headers.num_entries; i++)
				if (props.headers.entries[i].key.len == 6 &&
				    memcmp(props.headers.entries[i].key.bytes,
				           "x-hops", 6) == 0)
					v = &props.headers.entries[i].value;
			if (v != NULL)
				hops = v->value.i64;
			body.len = f.payload.properties.body_size;
			body.bytes = malloc(body.len ? body.len : 1);
			got = 0;
			stage = 2;
		} else if (f.frame_type == AMQP_FRAME_BODY && stage == 2) {
			memcpy((char *)body.bytes + got,
			       f.payload.body_fragment.bytes,
			       f.payload.body_fragment.len);
			got += f.payload.body_fragment.len;
		}
		if (stage == 2 && got == body.len) {
			amqp_table_entry_t h = {
			    amqp_cstring_bytes("x-hops"),
			    {AMQP_FIELD_KIND_I64, {.i64 = hops + 1}}};
			amqp_basic_properties_t out = {0};
			out._flags = AMQP_BASIC_HEADERS_FLAG;
			out.headers.num_entries = 1;
			out.headers.entries = &h;
			if ((unsigned)hops < o->hops)
				snprintf(q, sizeof(q), "fwd.delay.%u",
				         (unsigned)hops);
			else
				snprintf(q, sizeof(q), "%s", o->target);
			/* At most the prefetch of both queues is open. */
			st = broker_confirm_publish(conn, &c, amqp_empty_bytes,
			                            amqp_cstring_bytes(q), 0,
			                            &out, body);
			if (st != AMQP_STATUS_OK) {
				fprintf(stderr, "cascade-bench: publish: %s\n",
				        amqp_error_string2(st));
				return 1;
			}
			fw.src[c.seq % BROKER_CONFIRM_WINDOW] = tag;
			free(body.bytes);
			body.bytes = NULL;
			stage = 0;
			amqp_maybe_release_buffers(conn);
		}
	}
}
