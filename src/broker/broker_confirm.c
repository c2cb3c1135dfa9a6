/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Publisher confirms for the tools, which block while they wait: publishes
 * numbered on their channel, and the acks, nacks and returns the broker
 * sends matched to them.
 */
#include "broker.h"

#include "duration.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

int
broker_confirm_select(amqp_connection_state_t conn, amqp_channel_t ch,
                      struct broker_confirms *c, char *err, size_t errsize)
{
	memset(c, 0, sizeof(*c));
	c->ch = ch;
	amqp_confirm_select(conn, ch);
	return broker_check(conn, "confirm.select", err, errsize);
}

int
broker_confirm_publish(amqp_connection_state_t conn, struct broker_confirms *c,
                       amqp_bytes_t exchange, amqp_bytes_t routing_key,
                       int mandatory, const amqp_basic_properties_t *props,
                       amqp_bytes_t body)
{
	int st;

	if (c->seq - c->low >= BROKER_CONFIRM_WINDOW)
		return AMQP_STATUS_NO_MEMORY;
	st = broker_publish(conn, c->ch, broker_frame_max(conn), exchange,
	                    routing_key, mandatory, props, body);
	/* Numbered even when the send failed: the broker may have it. */
	c->seq++;
	c->open[c->seq % BROKER_CONFIRM_WINDOW] = 1;
	return st;
}

uint64_t
broker_confirm_pending(const struct broker_confirms *c)
{
	return c->seq - c->acked - c->nacked;
}

static void
broker_confirm_settle_one(struct broker_confirms *c, uint64_t seq, int acked)
{
	unsigned char *open = &c->open[seq % BROKER_CONFIRM_WINDOW];

	if (!*open)
		return;
	*open = 0;
	if (acked)
		c->acked++;
	else
		c->nacked++;
	if (c->on_settle != NULL)
		c->on_settle(c->arg, seq, acked);
}

/* basic.ack or basic.nack with tag and multiple. */
static void
broker_confirm_settle(struct broker_confirms *c, uint64_t tag, int multiple,
                      int acked)
{
	/* Settled already, or never published: nothing to do. */
	if (tag <= c->low || tag > c->seq)
		return;
	if (multiple)
		for (uint64_t seq = c->low + 1; seq <= tag; seq++)
			broker_confirm_settle_one(c, seq, acked);
	else
		broker_confirm_settle_one(c, tag, acked);
	while (c->low < c->seq &&
	       !c->open[(c->low + 1) % BROKER_CONFIRM_WINDOW])
		c->low++;
}

/* A returned message's content header and body frames. */
static int
broker_confirm_content(struct broker_confirms *c, const amqp_frame_t *f)
{
	if (c->in_return == 1 && f->frame_type == AMQP_FRAME_HEADER) {
		c->body_left = f->payload.properties.body_size;
		c->in_return = c->body_left > 0 ? 2 : 0;
		return 1;
	}
	if (c->in_return == 2 && f->frame_type == AMQP_FRAME_BODY) {
		size_t n = f->payload.body_fragment.len;
		c->body_left -= n < c->body_left ? n : c->body_left;
		if (c->body_left == 0)
			c->in_return = 0;
		return 1;
	}
	return 0;
}

int
broker_confirm_frame(struct broker_confirms *c, const amqp_frame_t *f,
                     char *err, size_t errsize)
{
	const amqp_method_t *m = &f->payload.method;

	if (f->frame_type == AMQP_FRAME_METHOD &&
	    m->id == AMQP_CONNECTION_CLOSE_METHOD) {
		broker_close_reason(m, err, errsize);
		return -1;
	}
	if (f->channel != c->ch)
		return 0;
	if (f->frame_type != AMQP_FRAME_METHOD)
		return broker_confirm_content(c, f);
	switch (m->id) {
	case AMQP_BASIC_ACK_METHOD: {
		const amqp_basic_ack_t *a = m->decoded;
		broker_confirm_settle(c, a->delivery_tag, a->multiple, 1);
		return 1;
	}
	case AMQP_BASIC_NACK_METHOD: {
		const amqp_basic_nack_t *n = m->decoded;
		broker_confirm_settle(c, n->delivery_tag, n->multiple, 0);
		return 1;
	}
	case AMQP_BASIC_RETURN_METHOD:
		c->returned++;
		c->in_return = 1;
		if (c->on_return != NULL)
			c->on_return(c->arg, m->decoded);
		return 1;
	case AMQP_CHANNEL_CLOSE_METHOD:
		broker_close_reason(m, err, errsize);
		return -1;
	default:
		return 0;
	}
}

int
broker_confirm_wait(amqp_connection_state_t conn, struct broker_confirms *c,
                    uint64_t pending, int timeout_ms, char *err, size_t errsize)
{
	int64_t deadline = duration_mono_ms() + timeout_ms, left;
	struct timeval tv;
	amqp_frame_t f;
	int st;

	while (broker_confirm_pending(c) > pending) {
		if (timeout_ms >= 0) {
			left = deadline - duration_mono_ms();
			if (left <= 0) {
				if (timeout_ms % 1000 == 0)
					snprintf(err, errsize,
					         "no confirm from the broker "
					         "after %ds",
					         timeout_ms / 1000);
				else
					snprintf(err, errsize,
					         "no confirm from the broker "
					         "after %dms",
					         timeout_ms);
				return -1;
			}
			tv.tv_sec = (time_t)(left / 1000);
			tv.tv_usec = (suseconds_t)(left % 1000 * 1000);
		}
		st = amqp_simple_wait_frame_noblock(
		    conn, &f, timeout_ms >= 0 ? &tv : NULL);
		if (st == AMQP_STATUS_TIMEOUT)
			continue;
		if (st != AMQP_STATUS_OK) {
			snprintf(err, errsize, "connection lost: %s",
			         amqp_error_string2(st));
			return -1;
		}
		if (broker_confirm_frame(c, &f, err, errsize) < 0)
			return -1;
		amqp_maybe_release_buffers_on_channel(conn, c->ch);
	}
	return 0;
}
