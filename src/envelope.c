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
	amqp_basic_properties_t copy = *props;
	amqp_bytes_t room;
	int n;
	size_t len;

	if (cap < ENVELOPE_HEAD)
		return 0;
	room.bytes = out + ENVELOPE_HEAD;
	room.len = cap - ENVELOPE_HEAD;
	/* rabbitmq-c takes the properties by a non-const pointer only. */
	n = amqp_encode_properties(AMQP_BASIC_CLASS, &copy, room);
	if (n < 0)
		return 0;
	len = ENVELOPE_HEAD + (size_t)n;
	if (cap - len < body.len)
		return 0;
	memcpy(out, envelope_magic, sizeof(envelope_magic));
	out[4] = 1;
	out[5] = (char)((unsigned)n >> 24);
	out[6] = (char)((unsigned)n >> 16);
	out[7] = (char)((unsigned)n >> 8);
	out[8] = (char)(unsigned)n;
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
	amqp_bytes_t enc;
	void *decoded = NULL;
	size_t n;

	if (in.len < ENVELOPE_HEAD ||
	    memcmp(b, envelope_magic, sizeof(envelope_magic)) != 0) {
		*why = "not a cascade envelope";
		return -1;
	}
	if (b[4] != 1) {
		*why = "a cascade envelope of an unknown version";
		return -1;
	}
	n = (size_t)b[5] << 24 | (size_t)b[6] << 16 | (size_t)b[7] << 8 |
	    (size_t)b[8];
	if (n < 2 || n > in.len - ENVELOPE_HEAD) {
		*why = "a cascade envelope cut short";
		return -1;
	}
	enc.bytes = (char *)in.bytes + ENVELOPE_HEAD;
	enc.len = n;
	if (amqp_decode_properties(AMQP_BASIC_CLASS, pool, enc, &decoded) < 0 ||
	    decoded == NULL) {
		*why = "a cascade envelope whose properties do not decode";
		return -1;
	}
	*props = *(amqp_basic_properties_t *)decoded;
	/* rabbitmq-c does not say how much it read: the properties must
	 * take the whole length, or the body would start in the wrong place.
	 */
	if (headers_props_size(props) != n) {
		*why = "a cascade envelope whose properties length is wrong";
		return -1;
	}
	body->bytes = (char *)in.bytes + ENVELOPE_HEAD + n;
	body->len = in.len - ENVELOPE_HEAD - n;
	*why = NULL;
	return 0;
}
