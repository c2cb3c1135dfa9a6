/* SPDX-License-Identifier: Apache-2.0 */
/* Messages the daemon holds, recycled: see message.h. */
#include "message.h"

#include <stdlib.h>
#include <string.h>

static struct message_list message_spare =
    TAILQ_HEAD_INITIALIZER(message_spare);
static unsigned message_nspare;

struct message *
message_new(void)
{
	struct message *m = TAILQ_FIRST(&message_spare);
	amqp_pool_t pool;
	char *buf;
	size_t cap;

	if (m == NULL) {
		m = calloc(1, sizeof(*m));
		if (m == NULL)
			return NULL;
		init_amqp_pool(&m->pool, 1024);
		return m;
	}
	TAILQ_REMOVE(&message_spare, m, link);
	message_nspare--;
	pool = m->pool;
	buf = m->buf;
	cap = m->buf_cap;
	memset(m, 0, sizeof(*m));
	m->pool = pool;
	m->buf = buf;
	m->buf_cap = cap;
	return m;
}

static void
message_destroy(struct message *m)
{
	empty_amqp_pool(&m->pool);
	free(m->buf);
	free(m);
}

void
message_free(struct message *m)
{
	if (m == NULL)
		return;
	if (message_nspare >= MESSAGE_SPARE_MAX) {
		message_destroy(m);
		return;
	}
	recycle_amqp_pool(&m->pool);
	if (m->buf_cap > MESSAGE_BUF_KEEP) {
		free(m->buf);
		m->buf = NULL;
		m->buf_cap = 0;
	}
	TAILQ_INSERT_HEAD(&message_spare, m, link);
	message_nspare++;
}

void
message_free_item(struct outbox_item *it, void *ctx)
{
	(void)ctx;
	message_free(MESSAGE_OF(it));
}

void
message_spare_free(void)
{
	struct message *m;

	while ((m = TAILQ_FIRST(&message_spare)) != NULL) {
		TAILQ_REMOVE(&message_spare, m, link);
		message_destroy(m);
	}
	message_nspare = 0;
}

unsigned
message_count(const struct message_list *l)
{
	const struct message *m;
	unsigned n = 0;

	TAILQ_FOREACH(m, l, link)
		n++;
	return n;
}

unsigned
message_spare_count(void)
{
	return message_nspare;
}

int
message_body(struct message *m, size_t len)
{
	if (len > m->buf_cap) {
		char *buf = malloc(len);
		if (buf == NULL)
			return -1;
		free(m->buf);
		m->buf = buf;
		m->buf_cap = len;
	}
	m->body.bytes = m->buf;
	m->body.len = len;
	m->body_got = 0;
	return 0;
}

int
message_append(struct message *m, amqp_bytes_t fragment)
{
	if (fragment.len > m->body.len - m->body_got)
		return -1;
	if (fragment.len > 0)
		memcpy((char *)m->body.bytes + m->body_got, fragment.bytes,
		       fragment.len);
	m->body_got += fragment.len;
	return m->body_got == m->body.len;
}

amqp_bytes_t
message_dup(struct message *m, amqp_bytes_t b)
{
	amqp_bytes_t out = {0, NULL};

	if (b.len == 0)
		return out;
	out.bytes = amqp_pool_alloc(&m->pool, b.len);
	if (out.bytes == NULL)
		return out;
	memcpy(out.bytes, b.bytes, b.len);
	out.len = b.len;
	return out;
}

int
message_set_props(struct message *m, const amqp_basic_properties_t *p)
{
	amqp_basic_properties_t *q = &m->props;

	*q = *p;
#define DUP(flag, field)                                                       \
	if (p->_flags & (flag)) {                                              \
		q->field = message_dup(m, p->field);                           \
		if (p->field.len && q->field.bytes == NULL)                    \
			return -1;                                             \
	}
	DUP(AMQP_BASIC_CONTENT_TYPE_FLAG, content_type)
	DUP(AMQP_BASIC_CONTENT_ENCODING_FLAG, content_encoding)
	DUP(AMQP_BASIC_CORRELATION_ID_FLAG, correlation_id)
	DUP(AMQP_BASIC_REPLY_TO_FLAG, reply_to)
	DUP(AMQP_BASIC_EXPIRATION_FLAG, expiration)
	DUP(AMQP_BASIC_MESSAGE_ID_FLAG, message_id)
	DUP(AMQP_BASIC_TYPE_FLAG, type)
	DUP(AMQP_BASIC_USER_ID_FLAG, user_id)
	DUP(AMQP_BASIC_APP_ID_FLAG, app_id)
	DUP(AMQP_BASIC_CLUSTER_ID_FLAG, cluster_id)
#undef DUP
	if (p->_flags & AMQP_BASIC_HEADERS_FLAG)
		if (amqp_table_clone(&p->headers, &q->headers, &m->pool) !=
		    AMQP_STATUS_OK)
			return -1;
	return 0;
}
