/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What comes back from cascade's own queues, checked and opened before it
 * is judged: put there by a daemon (trust_hop: its user-id is a daemon's
 * or a control user's), and a holding queue's envelope opened into the
 * message inside it.  What fails either is parked as not_from_cascade.
 *
 * Owns: nothing.
 * Calls into: daemon_publish (park).
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <stdint.h>

#include "duration.h"
#include "envelope.h"
#include "escape.h"
#include "headers.h"

int
daemon_forged(struct daemon *d, struct message *m)
{
	amqp_bytes_t writer = trust_writer_of(&m->props);
	char who[ESCAPE_MAX_FACTOR * 64 + 4];

	if (trust_hop(d->cfg, amqp_cstring_bytes(d->own_user), writer,
	              d->unsigned_until, duration_wall_ms())) {
		/* Checked: the signature is not the publisher's user-id,
		 * which travels in x-cascade-user-id. */
		m->props._flags &= ~AMQP_BASIC_USER_ID_FLAG;
		return 0;
	}
	escape_bytes(writer.bytes, writer.len, 64, ESCAPE_QUOTED, who,
	             sizeof(who));
	m->routed = 1;
	if (writer.len == 0)
		daemon_park(d, m, PARK_not_from_cascade,
		            "%s: no user-id: not published by a daemon (one "
		            "from an earlier cascade is taken only with "
		            "[router] accept_unsigned_until)",
		            d->consumers[m->consumer].queue);
	else
		daemon_park(d, m, PARK_not_from_cascade,
		            "%s: published by user \"%s\", neither a daemon's "
		            "nor one of [events] control_users",
		            d->consumers[m->consumer].queue, who);
	return 1;
}

int
daemon_unwrap(struct daemon *d, struct message *m)
{
	amqp_basic_properties_t props;
	amqp_bytes_t body;
	const amqp_field_value_t *v;
	const char *why;
	int64_t n;

	/* Drained over 0-9-1, the count is the outer message's. */
	v = (m->props._flags & AMQP_BASIC_HEADERS_FLAG)
	        ? headers_find(&m->props.headers, "x-delivery-count")
	        : NULL;
	if (m->kind != MESSAGE_HELD && v != NULL &&
	    headers_integer(v, &n) == 1 && n > 0)
		m->delivery_count = (uint32_t)n;
	if (envelope_decode(m->body, &m->pool, &props, &body, &why) < 0) {
		m->routed = 1;
		daemon_park(d, m, PARK_not_from_cascade, "holding queue %s: %s",
		            d->consumers[m->consumer].queue, why);
		return -1;
	}
	m->props = props;
	m->body = body;
	return 0;
}
