/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer: a header table as the broker would send it, decoded by
 * rabbitmq-c, then routed from each source and turned into the properties
 * of the next publish, which must encode again.
 */
#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ladder.h"
#include "retry.h"
#include "router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ladder ladder;
	static struct retry_table retry;
	static int ready;
	struct router_params p;
	amqp_basic_properties_t in, out;
	amqp_pool_t pool;
	amqp_bytes_t encoded = {size, (void *)data};
	size_t offset = 0;
	char buf[1 << 16];
	const char *why;

	if (!ready) {
		ladder_init(&ladder, 100, 2, 8, &why);
		retry_defaults(&retry.def);
		ready = 1;
	}
	memset(&p, 0, sizeof(p));
	p.ladder = &ladder;
	p.max_delay = INT64_C(31536000000);
	p.default_exchange = amqp_empty_bytes;
	p.retry = &retry;
	init_amqp_pool(&pool, 4096);
	memset(&in, 0, sizeof(in));
	if (amqp_decode_table(encoded, &pool, &in.headers, &offset) == 0) {
		in._flags = AMQP_BASIC_HEADERS_FLAG | AMQP_BASIC_USER_ID_FLAG |
		            AMQP_BASIC_EXPIRATION_FLAG;
		in.user_id = amqp_cstring_bytes("guest");
		in.expiration = amqp_cstring_bytes("60000");
		for (int src = 0; src < 3; src++) {
			for (int hold = 0; hold < 2; hold++) {
				struct route r;
				amqp_bytes_t b = {sizeof(buf), buf};
				size_t off = 0;
				p.hold_tail = hold;
				router_decide(&p, (enum route_source)src, &in,
				              amqp_cstring_bytes("rk"),
				              INT64_C(1800000000000), &r);
				if (r.action == ROUTE_HOLD)
					router_step(&p, &r,
					            INT64_C(1800000000000) +
					                r.left);
				if (router_props(&in, &r, &pool, &out) < 0)
					abort();
				if (amqp_encode_table(b, &out.headers, &off) <
				        0 &&
				    out.headers.num_entries > 0 && off == 0)
					abort();
			}
		}
	}
	empty_amqp_pool(&pool);
	return 0;
}
