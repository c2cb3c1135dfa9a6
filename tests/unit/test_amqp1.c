/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading an AMQP 1.0 message as a holding queue delivers it: its one data
 * section, byte for byte and in place, and the header's delivery count.
 * The messages are encoded by Qpid Proton, as a broker would send them,
 * and by hand where Proton will not write them.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <proton/codec.h>
#include <proton/message.h>

#include "amqp1.h"

#define MIB (1024 * 1024)

/* An encoded message (free its bytes). */
struct encoded {
	char *bytes;
	size_t len;
};

static struct encoded
encode(pn_message_t *m)
{
	pn_rwbytes_t buf = {0, NULL};
	ssize_t n = pn_message_encode2(m, &buf);
	struct encoded e;

	cr_assert_gt(n, 0, "Proton does not encode the message: %zd", n);
	e.bytes = buf.start;
	e.len = (size_t)n;
	return e;
}

/* A message whose body Proton writes as one data section. */
static pn_message_t *
data_message(const char *body, size_t len)
{
	pn_message_t *m = pn_message();

	cr_assert_not_null(m);
	pn_message_set_inferred(m, true);
	cr_assert_eq(
	    pn_data_put_binary(pn_message_body(m), pn_bytes(len, body)), 0);
	return m;
}

static void
put_symbol(pn_data_t *d, const char *s)
{
	pn_data_put_symbol(d, pn_bytes(strlen(s), s));
}

static void
put_string(pn_data_t *d, const char *s)
{
	pn_data_put_string(d, pn_bytes(strlen(s), s));
}

/* Every other section Proton writes, each with something in it. */
static void
fill_sections(pn_message_t *m)
{
	pn_data_t *d;
	pn_msgid_t id;

	/* Header. */
	pn_message_set_durable(m, true);
	pn_message_set_priority(m, 7);
	pn_message_set_ttl(m, 60000);
	pn_message_set_first_acquirer(m, true);
	/* Delivery annotations. */
	d = pn_message_instructions(m);
	pn_data_put_map(d);
	pn_data_enter(d);
	put_symbol(d, "x-opt-instruction");
	put_string(d, "da");
	pn_data_exit(d);
	/* Message annotations, as a quorum queue sets them. */
	d = pn_message_annotations(m);
	pn_data_put_map(d);
	pn_data_enter(d);
	put_symbol(d, "x-opt-delivery-time");
	pn_data_put_timestamp(d, INT64_C(1700000000000));
	put_symbol(d, "x-exchange");
	put_string(d, "");
	put_symbol(d, "x-routing-key");
	put_string(d, "cascade.hold.3");
	pn_data_exit(d);
	/* Properties. */
	id.type = PN_STRING;
	id.u.as_bytes = pn_bytes(5, "msg-1");
	pn_message_set_id(m, id);
	pn_message_set_user_id(m, pn_bytes(5, "guest"));
	pn_message_set_address(m, "/queues/cascade.hold.3");
	pn_message_set_subject(m, "order.paid");
	pn_message_set_reply_to(m, "/queues/replies");
	pn_message_set_content_type(m, "application/vnd.cascade.envelope");
	pn_message_set_creation_time(m, INT64_C(1700000000000));
	pn_message_set_group_id(m, "group");
	pn_message_set_group_sequence(m, 3);
	/* Application properties. */
	d = pn_message_properties(m);
	pn_data_put_map(d);
	pn_data_enter(d);
	put_string(d, "x-remaining-delay");
	pn_data_put_long(d, 90000);
	put_string(d, "tenant");
	put_string(d, "acme");
	put_string(d, "binary");
	pn_data_put_binary(d, pn_bytes(3, "\0\1\2"));
	pn_data_exit(d);
}

/* Where in hay needle is, which must be there exactly once. */
static const char *
find_once(const char *hay, size_t hay_len, const char *needle, size_t len)
{
	const char *at = NULL;

	for (size_t i = 0; len <= hay_len && i <= hay_len - len; i++)
		if (memcmp(hay + i, needle, len) == 0) {
			cr_assert_null(at, "the body is in the message twice");
			at = hay + i;
		}
	cr_assert_not_null(at, "the body is not in the message");
	return at;
}

/* Whether hay holds the len bytes of needle. */
static int
has(struct encoded hay, const char *needle, size_t len)
{
	for (size_t i = 0; len <= hay.len && i <= hay.len - len; i++)
		if (memcmp(hay.bytes + i, needle, len) == 0)
			return 1;
	return 0;
}

/* Parse e, which must succeed with body in place and count. */
static void
expect_parsed(struct encoded e, const char *body, size_t body_len,
              uint32_t count)
{
	struct amqp1_message msg;
	const char *why = "untouched";
	int rc = amqp1_parse(e.bytes, e.len, &msg, &why);

	cr_assert_eq(rc, 0, "refused: %s", why ? why : "(no reason)");
	cr_assert_null(why);
	cr_assert_eq(msg.body_len, body_len, "a body of %zu bytes, want %zu",
	             msg.body_len, body_len);
	cr_assert(msg.body >= e.bytes && msg.body + body_len <= e.bytes + e.len,
	          "the body does not point into the input");
	if (body_len > 0) {
		cr_assert_eq(memcmp(msg.body, body, body_len), 0,
		             "the body's bytes differ");
		cr_assert_eq(msg.body,
		             find_once(e.bytes, e.len, body, body_len),
		             "the body points at the wrong bytes");
	}
	cr_assert_eq(msg.delivery_count, count, "delivery count %u, want %u",
	             msg.delivery_count, count);
}

/* Parsing bytes fails with a reason; it mentions about unless NULL. */
static void
expect_refused(const char *bytes, size_t len, const char *about,
               const char *what)
{
	struct amqp1_message msg;
	const char *why = NULL;

	cr_assert_eq(amqp1_parse(bytes, len, &msg, &why), -1, "%s: parsed",
	             what);
	cr_assert_not_null(why, "%s: no reason", what);
	cr_assert_gt(strlen(why), 0, "%s: an empty reason", what);
	if (about != NULL)
		cr_assert(strstr(why, about) != NULL,
		          "%s: \"%s\" does not mention \"%s\"", what, why,
		          about);
}

Test(amqp1_parse, a_data_body_among_every_section_comes_back_in_place)
{
	static const char body[] = "CSCE\1\0\0\0\2\0\0envelope \xff\0 body";
	uint32_t counts[] = {0, 1, 3, 255, 256, UINT32_MAX};

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		pn_message_t *m = data_message(body, sizeof(body));
		struct encoded e;

		fill_sections(m);
		pn_message_set_delivery_count(m, counts[i]);
		e = encode(m);
		expect_parsed(e, body, sizeof(body), counts[i]);
		free(e.bytes);
		pn_message_free(m);
	}
}

Test(amqp1_parse, a_data_body_alone_has_delivery_count_zero)
{
	pn_message_t *m = data_message("just a body", 11);
	struct encoded e = encode(m);

	expect_parsed(e, "just a body", 11, 0);
	free(e.bytes);
	pn_message_free(m);
}

Test(amqp1_parse, a_header_without_a_delivery_count_means_zero)
{
	pn_message_t *m = data_message("durable", 7);
	struct encoded e;

	/* The header list ends before its delivery-count field. */
	pn_message_set_durable(m, true);
	e = encode(m);
	cr_assert_eq(memcmp(e.bytes, "\x00\x53\x70", 3), 0, "no header first");
	expect_parsed(e, "durable", 7, 0);
	free(e.bytes);
	pn_message_free(m);
}

Test(amqp1_parse, a_header_with_only_a_delivery_count)
{
	pn_message_t *m = data_message("again", 5);
	struct encoded e;

	pn_message_set_delivery_count(m, 3);
	e = encode(m);
	expect_parsed(e, "again", 5, 3);
	free(e.bytes);
	pn_message_free(m);
}

Test(amqp1_parse, an_empty_data_section_is_an_empty_body)
{
	pn_message_t *m = data_message("", 0);
	struct encoded e;

	fill_sections(m);
	e = encode(m);
	expect_parsed(e, "", 0, 0);
	free(e.bytes);
	pn_message_free(m);
}

Test(amqp1_parse, a_one_mib_body_comes_back_in_place)
{
	char *body = malloc(MIB);
	pn_message_t *m;
	struct encoded e;

	cr_assert_not_null(body);
	for (size_t i = 0; i < MIB; i++)
		body[i] = (char)(i * 131 + (i >> 8));
	m = data_message(body, MIB);
	fill_sections(m);
	pn_message_set_delivery_count(m, 2);
	e = encode(m);
	expect_parsed(e, body, MIB, 2);
	free(e.bytes);
	pn_message_free(m);
	free(body);
}

Test(amqp1_parse, a_hand_encoded_data_section)
{
	/* data: 0x00 0x53 0x75, then vbin8 0xa0 <len> <bytes>. */
	static const char vbin8[] = "\x00\x53\x75\xa0\x03"
	                            "a\0c";
	/* The same as vbin32 0xb0 <4-byte len> <bytes>, after a header
	 * list8 [durable true, priority 4, ttl null, first-acquirer false,
	 * delivery-count 5]. */
	static const char vbin32[] = "\x00\x53\x70\xc0\x08\x05\x41\x50\x04"
	                             "\x40\x42\x52\x05"
	                             "\x00\x53\x75\xb0\x00\x00\x00\x03"
	                             "a\0c";
	struct amqp1_message msg;
	const char *why = NULL;

	cr_assert_eq(amqp1_parse(vbin8, sizeof(vbin8) - 1, &msg, &why), 0, "%s",
	             why ? why : "");
	cr_assert_eq(msg.body, vbin8 + 5);
	cr_assert_eq(msg.body_len, 3);
	cr_assert_eq(msg.delivery_count, 0);
	cr_assert_eq(amqp1_parse(vbin32, sizeof(vbin32) - 1, &msg, &why), 0,
	             "%s", why ? why : "");
	cr_assert_eq(msg.body, vbin32 + sizeof(vbin32) - 1 - 3);
	cr_assert_eq(msg.body_len, 3);
	cr_assert_eq(msg.delivery_count, 5);
}

Test(amqp1_parse, an_amqp_value_body_is_refused)
{
	pn_message_t *m = pn_message();
	struct encoded e;

	/* Not inferred: a string body is an amqp-value section. */
	put_string(pn_message_body(m), "a string body");
	fill_sections(m);
	e = encode(m);
	expect_refused(e.bytes, e.len, "not a data section", "amqp-value");
	free(e.bytes);
	pn_message_free(m);
}

Test(amqp1_parse, a_binary_amqp_value_body_is_refused)
{
	pn_message_t *m = pn_message();
	struct encoded e;

	/* Not inferred: even a binary is an amqp-value, not data. */
	pn_data_put_binary(pn_message_body(m), pn_bytes(4, "data"));
	e = encode(m);
	cr_assert(has(e, "\x00\x53\x77", 3),
	          "Proton wrote no amqp-value section");
	expect_refused(e.bytes, e.len, "not a data section",
	               "binary amqp-value");
	free(e.bytes);
	pn_message_free(m);
}

Test(amqp1_parse, an_amqp_sequence_body_is_refused)
{
	/* Hand-encoded: amqp-sequence 0x00 0x53 0x76, then list8
	 * 0xc0 <size> <count> [string "a"]. */
	static const char seq[] = "\x00\x53\x76\xc0\x04\x01\xa1\x01"
	                          "a";

	expect_refused(seq, sizeof(seq) - 1, "not a data section",
	               "amqp-sequence");
}

Test(amqp1_parse, two_data_sections_are_refused)
{
	/* Hand-encoded: Proton writes one data section for one binary. */
	static const char two[] = "\x00\x53\x75\xa0\x01"
	                          "a"
	                          "\x00\x53\x75\xa0\x01"
	                          "b";

	expect_refused(two, sizeof(two) - 1, "several", "two data sections");
}

Test(amqp1_parse, a_message_without_a_body_is_refused)
{
	pn_message_t *m = pn_message();
	struct encoded e;

	fill_sections(m);
	e = encode(m);
	/* Proton writes no body section for an empty body. */
	cr_assert(!has(e, "\x00\x53\x75", 3), "a data section");
	cr_assert(!has(e, "\x00\x53\x77", 3), "an amqp-value section");
	expect_refused(e.bytes, e.len, "no body", "no body");
	free(e.bytes);
	pn_message_free(m);
}

Test(amqp1_parse, an_empty_buffer_is_refused)
{
	expect_refused("", 0, NULL, "empty buffer");
	expect_refused(NULL, 0, NULL, "NULL, 0");
}

/* A string literal and its length, NULs and all. */
#define BYTES(s) s, sizeof(s) - 1

Test(amqp1_parse, garbage_is_refused)
{
	static const struct {
		const char *bytes;
		size_t len;
	} garbage[] = {
	    /* Not AMQP at all. */
	    {BYTES("hello, world")},
	    /* No such type codes. */
	    {BYTES("\xff\xff\xff\xff")},
	    /* A string, not a section. */
	    {BYTES("\xa1\x05hello")},
	    /* A data section with a symbolic descriptor. */
	    {BYTES("\x00\xa3\x10"
	           "amqp:data:binary\xa0\x01x")},
	    /* A data section holding a string. */
	    {BYTES("\x00\x53\x75\xa1\x01x")},
	    /* A vbin8 longer than the bytes left. */
	    {BYTES("\x00\x53\x75\xa0\x10short")},
	    /* A vbin32 longer than the bytes left. */
	    {BYTES("\x00\x53\x75\xb0\x7f\xff\xff\xff")},
	    /* A section descriptor and no value. */
	    {BYTES("\x00\x53\x75")},
	};

	for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
		char what[32];

		snprintf(what, sizeof(what), "garbage[%zu]", i);
		expect_refused(garbage[i].bytes, garbage[i].len, NULL, what);
	}
}

Test(amqp1_parse, a_message_cut_short_is_refused)
{
	static const char body[] = "the body";
	size_t body_len = sizeof(body) - 1;
	pn_message_t *m = data_message(body, body_len);
	struct encoded e;
	const char *end;

	fill_sections(m);
	pn_message_set_delivery_count(m, 1);
	e = encode(m);
	end = find_once(e.bytes, e.len, body, body_len) + body_len;
	/* Cut anywhere before the body's last byte. */
	for (size_t cut = 0; e.bytes + cut < end; cut++)
		expect_refused(e.bytes, cut, NULL, "cut short");
	free(e.bytes);
	pn_message_free(m);
}

/* The time a quorum queue keeps on a message it held: read back. */
Test(amqp1_parse, the_delivery_time_it_was_given_back_with)
{
	static const char body[] = "envelope";
	struct amqp1_message msg;
	const char *why = NULL;
	pn_message_t *m = data_message(body, sizeof(body));
	struct encoded e;

	fill_sections(m); /* x-opt-delivery-time 1700000000000 */
	e = encode(m);
	cr_assert_eq(amqp1_parse(e.bytes, e.len, &msg, &why), 0, "%s",
	             why ? why : "");
	cr_assert_eq(msg.delivery_time, INT64_C(1700000000000));
	free(e.bytes);
	pn_message_free(m);

	m = data_message(body, sizeof(body));
	e = encode(m);
	cr_assert_eq(amqp1_parse(e.bytes, e.len, &msg, &why), 0);
	cr_assert_eq(msg.delivery_time, 0, "never given back with a time");
	free(e.bytes);
	pn_message_free(m);
}
