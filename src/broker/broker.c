/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What connections share: the broker's replies and closes in words, its
 * version, the check of the last RPC; a publish in frames of frame_max and
 * a closed channel opened again.  Connection set-up is broker_connect.c's,
 * the tools' confirms broker_confirm.c's.
 */
#include "broker.h"

#include "headers.h"

#include <stdio.h>
#include <string.h>

void
broker_close_reason(const amqp_method_t *m, char *err, size_t size)
{
	if (m->id == AMQP_CHANNEL_CLOSE_METHOD) {
		const amqp_channel_close_t *cl = m->decoded;
		snprintf(err, size, "channel closed by the broker: %u %.*s",
		         cl->reply_code, (int)cl->reply_text.len,
		         (const char *)cl->reply_text.bytes);
	} else {
		const amqp_connection_close_t *cl = m->decoded;
		snprintf(err, size, "connection closed by the broker: %u %.*s",
		         cl->reply_code, (int)cl->reply_text.len,
		         (const char *)cl->reply_text.bytes);
	}
}

void
broker_reply_string(amqp_rpc_reply_t r, const char *what, char *buf,
                    size_t size)
{
	switch (r.reply_type) {
	case AMQP_RESPONSE_NORMAL:
		snprintf(buf, size, "%s: ok", what);
		return;
	case AMQP_RESPONSE_NONE:
		snprintf(buf, size, "%s: no reply", what);
		return;
	case AMQP_RESPONSE_LIBRARY_EXCEPTION:
		snprintf(buf, size, "%s: %s", what,
		         amqp_error_string2(r.library_error));
		return;
	case AMQP_RESPONSE_SERVER_EXCEPTION:
		if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
			amqp_connection_close_t *c = r.reply.decoded;
			snprintf(buf, size, "%s: connection closed: %u %.*s",
			         what, c->reply_code, (int)c->reply_text.len,
			         (const char *)c->reply_text.bytes);
		} else if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
			amqp_channel_close_t *c = r.reply.decoded;
			snprintf(buf, size, "%s: channel closed: %u %.*s", what,
			         c->reply_code, (int)c->reply_text.len,
			         (const char *)c->reply_text.bytes);
		} else {
			snprintf(buf, size, "%s: unexpected method 0x%08x",
			         what, r.reply.id);
		}
		return;
	}
	snprintf(buf, size, "%s: unknown reply", what);
}

int
broker_reply_code(amqp_connection_state_t conn)
{
	amqp_rpc_reply_t r = amqp_get_rpc_reply(conn);

	if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION)
		return 0;
	if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD)
		return ((amqp_channel_close_t *)r.reply.decoded)->reply_code;
	if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD)
		return ((amqp_connection_close_t *)r.reply.decoded)->reply_code;
	return 0;
}

int
broker_version(amqp_connection_state_t conn)
{
	const amqp_table_t *p = amqp_get_server_properties(conn);
	const amqp_field_value_t *v = headers_find(p, "version");
	amqp_bytes_t b;
	int part[2] = {0, 0}, k = 0;

	if (v == NULL || headers_string(v, &b) < 0)
		return 0;
	for (size_t i = 0; i < b.len && i < 12 && k < 2; i++) {
		char c = ((const char *)b.bytes)[i];
		if (c == '.') {
			k++;
			continue;
		}
		if (c < '0' || c > '9' || part[k] > 99)
			break;
		part[k] = part[k] * 10 + (c - '0');
	}
	return part[0] * 1000 + part[1];
}

int
broker_major_version(amqp_connection_state_t conn)
{
	return broker_version(conn) / 1000;
}

int
broker_check(amqp_connection_state_t conn, const char *what, char *err,
             size_t errsize)
{
	amqp_rpc_reply_t r = amqp_get_rpc_reply(conn);

	if (r.reply_type == AMQP_RESPONSE_NORMAL)
		return 0;
	broker_reply_string(r, what, err, errsize);
	return -1;
}

int
broker_frame_max(amqp_connection_state_t conn)
{
	return amqp_get_frame_max(conn) / BROKER_FRAME_READ_FACTOR;
}

int
broker_publish(amqp_connection_state_t conn, amqp_channel_t ch, int frame_max,
               amqp_bytes_t exchange, amqp_bytes_t routing_key, int mandatory,
               const amqp_basic_properties_t *props, amqp_bytes_t body)
{
	/* 7 bytes of frame header and the frame-end octet. */
	size_t room = (size_t)frame_max - 8, off = 0;
	amqp_basic_publish_t m;
	amqp_frame_t f;
	int st;

	memset(&m, 0, sizeof(m));
	m.exchange = exchange;
	m.routing_key = routing_key;
	m.mandatory = (amqp_boolean_t)mandatory;
	st = amqp_send_method(conn, ch, AMQP_BASIC_PUBLISH_METHOD, &m);
	if (st != AMQP_STATUS_OK)
		return st;
	memset(&f, 0, sizeof(f));
	f.frame_type = AMQP_FRAME_HEADER;
	f.channel = ch;
	f.payload.properties.class_id = AMQP_BASIC_CLASS;
	f.payload.properties.body_size = body.len;
	f.payload.properties.decoded = (void *)props;
	st = amqp_send_frame(conn, &f);
	while (st == AMQP_STATUS_OK && off < body.len) {
		size_t n = body.len - off < room ? body.len - off : room;
		f.frame_type = AMQP_FRAME_BODY;
		f.payload.body_fragment.bytes = (char *)body.bytes + off;
		f.payload.body_fragment.len = n;
		off += n;
		st = amqp_send_frame(conn, &f);
	}
	return st;
}

int
broker_channel_reopen(amqp_connection_state_t conn, amqp_channel_t ch,
                      char *err, size_t errsize)
{
	amqp_channel_close_ok_t ok = {0};
	int st;

	st = amqp_send_method(conn, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
	if (st != AMQP_STATUS_OK) {
		snprintf(err, errsize, "channel.close-ok: %s",
		         amqp_error_string2(st));
		return -1;
	}
	amqp_channel_open(conn, ch);
	return broker_check(conn, "channel.open", err, errsize);
}
