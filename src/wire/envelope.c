/* SPDX-License-Identifier: Apache-2.0 */
/* A message kept whole inside another's body: see envelope.h. */
#include "envelope.h"

#include <stdint.h>
#include <string.h>

#include "headers.h"

static const char envelope_magic[4] = {'C', 'S', 'C', 'E'};

size_t
envelope_bound(const amqp_basic_properties_t *props, size_t body_len)
{
	/* headers_props_size counts the content header's property part. */
	return ENVELOPE_HEAD + headers_props_size(props) + 16 + body_len;
}

size_t
envelope_encode(const amqp_basic_properties_t *props, amqp_bytes_t body,
                char *out, size_t cap)
{
	size_t len;

	if (cap < ENVELOPE_HEAD)
		return 0;
	len = headers_props_put(props, out + 5, cap - 5);
	if (len == 0 || cap - 5 - len < body.len)
		return 0;
	memcpy(out, envelope_magic, sizeof(envelope_magic));
	out[4] = 1;
	len += 5;
	if (body.len > 0)
		memcpy(out + len, body.bytes, body.len);
	return len + body.len;
}

int
envelope_decode(amqp_bytes_t in, amqp_pool_t *pool,
                amqp_basic_properties_t *props, amqp_bytes_t *body,
                const char **why)
{
	const unsigned char *b = in.bytes;
	amqp_bytes_t rest;
	size_t used = 0;

	if (in.len < ENVELOPE_HEAD ||
	    memcmp(b, envelope_magic, sizeof(envelope_magic)) != 0) {
		*why = "not a cascade envelope";
		return -1;
	}
	if (b[4] != 1) {
		*why = "a cascade envelope of an unknown version";
		return -1;
	}
	rest.bytes = (char *)in.bytes + 5;
	rest.len = in.len - 5;
	switch (headers_props_get(rest, pool, props, &used)) {
	case 0:
		break;
	case HEADERS_PROPS_SHORT:
		*why = "a cascade envelope cut short";
		return -1;
	case HEADERS_PROPS_UNDECODABLE:
		*why = "a cascade envelope whose properties do not decode";
		return -1;
	case HEADERS_PROPS_BOUND:
		*why = "a cascade envelope whose headers nest too deep or hold "
		       "too many fields";
		return -1;
	default:
		*why = "a cascade envelope whose properties length is wrong";
		return -1;
	}
	body->bytes = (char *)rest.bytes + used;
	body->len = rest.len - used;
	*why = NULL;
	return 0;
}
