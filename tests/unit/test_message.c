/* SPDX-License-Identifier: Apache-2.0 */
/* Messages: assembly from frames, deep copies, recycling. */
#include <criterion/criterion.h>
#include <string.h>

#include "message.h"

static void
teardown(void)
{
	message_spare_free();
}

TestSuite(message, .fini = teardown);

Test(message, body_is_assembled_from_fragments_and_overflow_refused)
{
	struct message *m = message_new();

	cr_assert_not_null(m);
	cr_assert_eq(message_body(m, 10), 0);
	cr_assert_eq(message_append(m, amqp_cstring_bytes("hello")), 0);
	cr_assert_eq(message_append(m, amqp_cstring_bytes("wor!!")), 1);
	cr_assert_eq(memcmp(m->body.bytes, "hellowor!!", 10), 0);
	cr_assert_eq(message_append(m, amqp_cstring_bytes("x")), -1,
	             "more than the content header announced");
	message_free(m);
}

Test(message, an_empty_body_is_complete_at_once)
{
	struct message *m = message_new();

	cr_assert_eq(message_body(m, 0), 0);
	cr_assert_eq(m->body.len, 0);
	cr_assert_eq(message_append(m, amqp_empty_bytes), 1);
	message_free(m);
}

Test(message, properties_survive_the_frame_pool)
{
	amqp_pool_t frame;
	amqp_basic_properties_t p;
	amqp_table_entry_t e;
	struct message *m = message_new();
	char *id, *key;

	init_amqp_pool(&frame, 256);
	memset(&p, 0, sizeof(p));
	id = amqp_pool_alloc(&frame, 6);
	memcpy(id, "id-123", 6);
	key = amqp_pool_alloc(&frame, 17);
	memcpy(key, "x-remaining-delay", 17);
	p._flags = AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_HEADERS_FLAG;
	p.message_id.bytes = id;
	p.message_id.len = 6;
	e.key.bytes = key;
	e.key.len = 17;
	e.value.kind = AMQP_FIELD_KIND_I64;
	e.value.value.i64 = 90000;
	p.headers.num_entries = 1;
	p.headers.entries = &e;
	cr_assert_eq(message_set_props(m, &p), 0);
	/* The next frame overwrites the connection's pool. */
	memset(id, '?', 6);
	memset(key, '?', 17);
	empty_amqp_pool(&frame);
	e.value.value.i64 = 1;
	cr_assert_eq(m->props.message_id.len, 6);
	cr_assert_eq(memcmp(m->props.message_id.bytes, "id-123", 6), 0);
	cr_assert_eq(m->props.headers.num_entries, 1);
	cr_assert_eq(memcmp(m->props.headers.entries[0].key.bytes,
	                    "x-remaining-delay", 17),
	             0);
	cr_assert_eq(m->props.headers.entries[0].value.value.i64, 90000);
	message_free(m);
}

Test(message, recycled_message_is_cleared_but_keeps_its_buffer)
{
	struct message *m = message_new(), *again;
	char *buf;

	message_body(m, 1000);
	buf = m->buf;
	m->routed = 1;
	m->out.seq = 9;
	m->route.action = ROUTE_PARK;
	message_free(m);
	cr_assert_eq(message_spare_count(), 1);
	again = message_new();
	cr_assert_eq(again, m, "reused, not allocated");
	cr_assert_eq(message_spare_count(), 0);
	cr_assert_eq(again->buf, buf);
	cr_assert_eq(again->buf_cap, 1000);
	cr_assert_eq(again->routed, 0);
	cr_assert_eq(again->out.seq, 0);
	cr_assert_eq(again->route.action, ROUTE_HOP);
	cr_assert_eq(again->body.len, 0);
	message_free(again);
}

Test(message, large_buffers_are_not_kept)
{
	struct message *m = message_new();

	message_body(m, MESSAGE_BUF_KEEP + 1);
	message_free(m);
	m = message_new();
	cr_assert_null(m->buf);
	cr_assert_eq(m->buf_cap, 0);
	message_free(m);
}

Test(message, spare_list_is_bounded)
{
	static struct message *ms[MESSAGE_SPARE_MAX + 10];

	for (int i = 0; i < MESSAGE_SPARE_MAX + 10; i++)
		cr_assert_not_null(ms[i] = message_new());
	for (int i = 0; i < MESSAGE_SPARE_MAX + 10; i++)
		message_free(ms[i]);
	cr_assert_eq(message_spare_count(), MESSAGE_SPARE_MAX);
}

Test(message, outbox_item_leads_back_to_its_message)
{
	struct message *m = message_new();

	cr_assert_eq(MESSAGE_OF(&m->out), m);
	message_free(m);
}
