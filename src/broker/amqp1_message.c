/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An AMQP 1.0 message read from a delivery's bytes (amqp1_parse, amqp1.h):
 * its sections decoded one by one with Qpid Proton-C's codec, keeping the
 * header's delivery-count, the x-opt-delivery-time annotation, the
 * properties' user-id and the one data section's body.
 */
#include "amqp1.h"

#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include <proton/codec.h>

/* AMQP 1.0 section descriptors (the spec's part 3.2). */
#define SECTION_HEADER 0x70
#define SECTION_MESSAGE_ANNOTATIONS 0x72
#define SECTION_PROPERTIES 0x73
#define SECTION_DATA 0x75
#define SECTION_SEQUENCE 0x76
#define SECTION_VALUE 0x77

/* The header's delivery-count: its fifth field, when present. */
static uint32_t
amqp1_header_count(pn_data_t *d)
{
	uint32_t count = 0;

	if (pn_data_type(d) != PN_LIST)
		return 0;
	pn_data_enter(d);
	for (int i = 0; i < 5 && pn_data_next(d); i++)
		if (i == 4 && pn_data_type(d) == PN_UINT)
			count = pn_data_get_uint(d);
	pn_data_exit(d);
	return count;
}

/* The properties' user-id (their second field), into msg. */
static void
amqp1_properties_user(pn_data_t *d, struct amqp1_message *msg)
{
	if (pn_data_type(d) != PN_LIST)
		return;
	pn_data_enter(d);
	if (pn_data_next(d) && pn_data_next(d) &&
	    pn_data_type(d) == PN_BINARY) {
		pn_bytes_t b = pn_data_get_binary(d);
		if (b.size > 0 && b.size < sizeof(msg->user_id)) {
			memcpy(msg->user_id, b.start, b.size);
			msg->user_id_len = b.size;
		}
	}
	pn_data_exit(d);
}

/* The integer value of key x-opt-delivery-time in an annotations map. */
static int64_t
amqp1_annotation_time(pn_data_t *d)
{
	int64_t t = 0;

	if (pn_data_type(d) != PN_MAP)
		return 0;
	pn_data_enter(d);
	while (pn_data_next(d)) {
		int match = 0;
		if (pn_data_type(d) == PN_SYMBOL) {
			pn_bytes_t k = pn_data_get_symbol(d);
			match =
			    k.size == strlen(AMQP1_DELIVERY_TIME) &&
			    memcmp(k.start, AMQP1_DELIVERY_TIME, k.size) == 0;
		}
		if (!pn_data_next(d))
			break;
		if (!match)
			continue;
		switch (pn_data_type(d)) {
		case PN_TIMESTAMP:
			t = pn_data_get_timestamp(d);
			break;
		case PN_LONG:
			t = pn_data_get_long(d);
			break;
		case PN_ULONG:
			t = (int64_t)pn_data_get_ulong(d);
			break;
		default:
			break;
		}
	}
	pn_data_exit(d);
	return t;
}

int
amqp1_parse(const char *bytes, size_t len, struct amqp1_message *msg,
            const char **why)
{
	pn_data_t *d = pn_data(16);
	size_t off = 0;
	int bodies = 0, rc = -1;

	memset(msg, 0, sizeof(*msg));
	*why = "out of memory";
	if (d == NULL)
		return -1;
	while (off < len) {
		ssize_t n;
		uint64_t code;

		pn_data_clear(d);
		n = pn_data_decode(d, bytes + off, len - off);
		if (n <= 0) {
			*why = "the AMQP 1.0 message does not decode";
			goto out;
		}
		pn_data_rewind(d);
		if (!pn_data_next(d) || pn_data_type(d) != PN_DESCRIBED) {
			*why = "an AMQP 1.0 section is not a described type";
			goto out;
		}
		pn_data_enter(d);
		pn_data_next(d);
		if (pn_data_type(d) != PN_ULONG) {
			*why = "an AMQP 1.0 section has a symbolic descriptor";
			goto out;
		}
		code = pn_data_get_ulong(d);
		pn_data_next(d);
		if (code == SECTION_HEADER) {
			msg->delivery_count = amqp1_header_count(d);
		} else if (code == SECTION_MESSAGE_ANNOTATIONS) {
			msg->delivery_time = amqp1_annotation_time(d);
		} else if (code == SECTION_PROPERTIES) {
			amqp1_properties_user(d, msg);
		} else if (code == SECTION_DATA) {
			pn_bytes_t b;
			if (pn_data_type(d) != PN_BINARY) {
				*why = "an AMQP 1.0 data section is not binary";
				goto out;
			}
			b = pn_data_get_binary(d);
			/* The binary is the section's last bytes: point into
			 * the caller's copy, not the codec's. */
			msg->body = bytes + off + (size_t)n - b.size;
			msg->body_len = b.size;
			bodies++;
		} else if (code == SECTION_SEQUENCE || code == SECTION_VALUE) {
			*why = "the AMQP 1.0 body is not a data section";
			goto out;
		}
		off += (size_t)n;
	}
	if (bodies != 1) {
		*why = bodies ? "the AMQP 1.0 body has several data sections"
		              : "the AMQP 1.0 message has no body";
		goto out;
	}
	rc = 0;
	*why = NULL;
out:
	pn_data_free(d);
	return rc;
}
