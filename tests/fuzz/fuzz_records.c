/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer: a body from a stream or a holding queue, as anyone who can
 * write there could forge it, read the three ways cascade reads one: as a
 * batch of records (each parsed, and its copy decoded as an envelope), as
 * an envelope, as framed properties, and as an AMQP 1.0 message from a
 * holding queue.  Whatever properties decode must
 * be within wirecheck's bounds and encode again to the length they took.
 */
#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "amqp1.h"
#include "envelope.h"
#include "events.h"
#include "headers.h"
#include "wirecheck.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decoded properties hold to the bounds, and encode as long as read. */
static void
fuzz_check(const amqp_basic_properties_t *p, size_t used)
{
	static char buf[1 << 20];
	const char *why;

	if ((p->_flags & AMQP_BASIC_HEADERS_FLAG) &&
	    wirecheck_table(&p->headers, &why) != 0)
		abort();
	if (used - 4 > sizeof(buf) - 4)
		return;
	if (headers_props_put(p, buf, sizeof(buf)) != used)
		abort();
}

static void
fuzz_envelope(amqp_bytes_t in, amqp_pool_t *pool)
{
	amqp_basic_properties_t p;
	amqp_bytes_t body;
	const char *why;

	if (envelope_decode(in, pool, &p, &body, &why) == 0) {
		if (body.len > in.len || (const char *)body.bytes + body.len !=
		                             (const char *)in.bytes + in.len)
			abort();
		fuzz_check(&p, in.len - body.len - 5);
	} else if (why == NULL) {
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	amqp_bytes_t in = {size, (void *)data};
	amqp_basic_properties_t p;
	amqp_pool_t pool;
	size_t off = 0, used = 0;
	int got;

	init_amqp_pool(&pool, 4096);
	while ((got = events_batch_next(in, &off, &pool, &p)) > 0) {
		struct event e;
		if (off > size)
			abort();
		if (events_parse(&p, &e) == 0 && e.copy.len > 0)
			fuzz_envelope(e.copy, &pool);
		recycle_amqp_pool(&pool);
	}
	recycle_amqp_pool(&pool);
	fuzz_envelope(in, &pool);
	recycle_amqp_pool(&pool);
	if (headers_props_get(in, &pool, &p, &used) == 0) {
		if (used > size)
			abort();
		fuzz_check(&p, used);
	}
	/* As a holding queue's delivery comes over AMQP 1.0. */
	{
		struct amqp1_message msg;
		const char *why;
		if (amqp1_parse((const char *)data, size, &msg, &why) == 0 &&
		    (msg.body_len > size ||
		     msg.user_id_len >= sizeof(msg.user_id)))
			abort();
	}
	empty_amqp_pool(&pool);
	return 0;
}
