/* SPDX-License-Identifier: Apache-2.0 */
/* Who wrote what cascade reads back: trust.h. */
#include "trust.h"

#include <string.h>

#include "events.h"
#include "headers.h"

amqp_bytes_t
trust_writer_of(const amqp_basic_properties_t *p)
{
	return (p->_flags & AMQP_BASIC_USER_ID_FLAG) ? p->user_id
	                                             : amqp_empty_bytes;
}

int
trust_writer(const struct config *cfg, amqp_bytes_t own_user,
             amqp_bytes_t writer)
{
	if (writer.len == 0)
		return 0;
	if (headers_bytes_eq(writer, own_user))
		return 1;
	return cfg != NULL && config_control_user(cfg, writer);
}

int
trust_stream_message(const struct config *cfg, amqp_bytes_t own_user,
                     const amqp_basic_properties_t *p)
{
	static const char *const anyone[] = {"cancel", "reschedule"};
	static const char *const own[] = {
	    EVENTS_BATCH_TYPE, "scheduled", "delivered", "parked", "cancelled",
	    "duplicate",       "claim",     "series",    "marker", "copy",
	};
	size_t i;

	if (!(p->_flags & AMQP_BASIC_TYPE_FLAG))
		return 1;
	for (i = 0; i < sizeof(anyone) / sizeof(anyone[0]); i++)
		if (headers_key_is(p->type, anyone[i]))
			return 1;
	for (i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (headers_key_is(p->type, own[i]))
			return trust_writer(cfg, own_user, trust_writer_of(p));
	return 1;
}

int
trust_hop(const struct config *cfg, amqp_bytes_t own_user, amqp_bytes_t writer,
          int64_t unsigned_until, int64_t now)
{
	if (writer.len == 0)
		return now < unsigned_until;
	return trust_writer(cfg, own_user, writer);
}

int
trust_first_sight(struct trust_seen *s, amqp_bytes_t writer)
{
	size_t len =
	    writer.len < sizeof(s->name[0]) ? writer.len : sizeof(s->name[0]);

	for (unsigned i = 0; i < s->n; i++)
		if (s->len[i] == len &&
		    (len == 0 || memcmp(s->name[i], writer.bytes, len) == 0))
			return 0;
	if (s->n >= TRUST_SEEN_MAX)
		return 0;
	if (len > 0)
		memcpy(s->name[s->n], writer.bytes, len);
	s->len[s->n++] = (unsigned char)len;
	return 1;
}
