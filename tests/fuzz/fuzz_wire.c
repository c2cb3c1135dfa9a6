/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer: bytes from the broker through the wire filter, cut as the
 * first byte says (as a socket might cut them).  What comes out must
 * split into the same frames as went in, and every basic content header
 * it lets go of, the library must decode.
 */
#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wirefilter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t
get32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	       (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* Count whole frames in b[0..n); check each basic content header. */
static size_t
frames(const unsigned char *b, size_t n, int decode)
{
	size_t at = 0, count = 0;

	while (n - at >= 8) {
		uint32_t size = get32(b + at + 3);
		if (size > n - at - 8)
			break;
		if (decode && b[at] == AMQP_FRAME_HEADER && size >= 14 &&
		    b[at + 7] == 0 && b[at + 8] == 60 &&
		    b[at + 7 + size] == 0xce) {
			amqp_pool_t pool;
			void *props;
			init_amqp_pool(&pool, 4096);
			if (amqp_decode_properties(
			        60, &pool,
			        (amqp_bytes_t){size - 12,
			                       (void *)(b + at + 7 + 12)},
			        &props) == AMQP_STATUS_BAD_AMQP_DATA)
				abort();
			empty_amqp_pool(&pool);
		}
		at += 8 + size;
		count++;
	}
	return count;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wirestream s;
	unsigned char *out, *tmp;
	size_t cut, olen = 0, ocap;

	if (size < 1)
		return 0;
	cut = (size_t)data[0] + 1;
	data++;
	size--;
	ocap = size * 2 + 4096;
	out = malloc(ocap);
	tmp = malloc(cut);
	if (out == NULL || tmp == NULL)
		abort();
	wirestream_init(&s);
	for (size_t at = 0; at < size; at += cut) {
		size_t n = size - at < cut ? size - at : cut;
		ssize_t w;

		memcpy(tmp, data + at, n);
		w = wirestream_filter(&s, tmp, n);
		if (w < 0 || (size_t)w > n)
			abort();
		if (olen + (size_t)w + wirestream_pending(&s) > ocap) {
			ocap = (olen + (size_t)w + wirestream_pending(&s)) * 2;
			if ((out = realloc(out, ocap)) == NULL)
				abort();
		}
		memcpy(out + olen, tmp, (size_t)w);
		olen += (size_t)w;
		while (wirestream_pending(&s) > 0)
			olen += wirestream_take(&s, out + olen, ocap - olen);
	}
	/* As many whole frames out as in: none lost, none made. */
	if (frames(out, olen, 1) != frames(data, size, 0))
		abort();
	wirestream_free(&s);
	free(out);
	free(tmp);
	return 0;
}
