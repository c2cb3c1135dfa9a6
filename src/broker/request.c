/* SPDX-License-Identifier: Apache-2.0 */
/*
 * request: building and writing the records that cancel, reschedule,
 * pause and resume (include/request.h).
 */
#include "amqp_compat.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "headers.h"
#include "request.h"

void
request_event(struct event *e, enum event_kind kind, amqp_bytes_t id, int park,
              int64_t due, uint64_t n, int64_t last_due, int64_t at,
              int64_t max_age)
{
	memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->at = at;
	e->cancel = id;
	e->park = park;
	e->due = due;
	if (due > last_due)
		last_due = due;
	e->until = n > 0 ? (last_due > at ? last_due : at) + REQUEST_MARGIN_MS
	                 : at + max_age;
}

void
request_pause_event(struct event *e, int resume, amqp_bytes_t name, int target,
                    int64_t at, int64_t max_age)
{
	memset(e, 0, sizeof(*e));
	e->kind = resume ? EVENT_RESUME : EVENT_PAUSE;
	e->at = at;
	e->until = at + max_age;
	e->cancel = name;
	e->target = target;
}

/* Whether headers key is one a copy gets afresh. */
static int
request_copy_drops(amqp_bytes_t key)
{
	return headers_key_is(key, "x-cascade-due") ||
	       headers_key_is(key, "x-cascade-copied") ||
	       headers_key_is(key, "x-remaining-delay");
}

/*
 * Publish w again from its copy, due at due, as a copy made at `at`, into
 * the first shard's return queue: a daemon routes it from there as a
 * message back from a delay level.  0, or -1 with cl->err.
 */
static int
request_copy(struct client *cl, const struct waiting *w, int64_t due,
             int64_t at)
{
	amqp_basic_properties_t props;
	amqp_bytes_t body;
	amqp_table_t h;
	amqp_pool_t pool;
	const char *why;
	int rc = -1;

	init_amqp_pool(&pool, 4096);
	if (envelope_decode(w->copy, &pool, &props, &body, &why) < 0) {
		snprintf(cl->err, sizeof(cl->err),
		         "the copy of %.*s in %s does not decode: %s",
		         (int)w->id.len, (const char *)w->id.bytes,
		         cl->topo->events, why);
		goto out;
	}
	if (headers_filter((props._flags & AMQP_BASIC_HEADERS_FLAG)
	                       ? &props.headers
	                       : NULL,
	                   request_copy_drops, 2, &pool, &h) < 0) {
		snprintf(cl->err, sizeof(cl->err), "out of memory");
		goto out;
	}
	headers_put_i64(&h, "x-cascade-due", due);
	headers_put_i64(&h, "x-cascade-copied", at);
	props.headers = h;
	props._flags |= AMQP_BASIC_HEADERS_FLAG;
	/* As a control user: the daemons take from a return queue only
	 * what their own users put there (trust.h). */
	props._flags |= AMQP_BASIC_USER_ID_FLAG;
	props.user_id = amqp_cstring_bytes(cl->user);
	rc = client_publish(cl, cl->topo->ret[0], &props, body);
out:
	empty_amqp_pool(&pool);
	return rc;
}

int
request_copies(struct client *cl, struct waiting_fold *f, amqp_bytes_t id,
               int64_t due, struct event *e, amqp_pool_t *pool)
{
	struct waiting **ws;
	char *ids;
	size_t len = 0;
	long n;
	int rc = 0, control;

	if (cl->user[0] == '\0')
		return 0;
	control = config_control_user(cl->cfg, amqp_cstring_bytes(cl->user));
	if ((n = waiting_named(f, id, &ws)) <= 0) {
		if (n < 0)
			snprintf(cl->err, sizeof(cl->err), "out of memory");
		return n < 0 ? -1 : 0;
	}
	if ((ids = amqp_pool_alloc(pool, (size_t)n * 256)) == NULL) {
		free(ws);
		snprintf(cl->err, sizeof(cl->err), "out of memory");
		return -1;
	}
	for (long i = 0; i < n && rc == 0; i++) {
		const struct waiting *w = ws[i];

		if (!waiting_needs_copy(f, w, due, e->at,
		                        amqp_cstring_bytes(cl->user), control))
			continue;
		if ((rc = request_copy(cl, w, due, e->at)) < 0)
			break;
		events_superseded_append(ids, &len, w->id);
	}
	e->superseded = (amqp_bytes_t){len, ids};
	free(ws);
	return rc;
}

int
request_record(struct client *cl, const struct event *e)
{
	if (client_record(cl, cl->topo->cancels, e) < 0)
		return -1;
	return client_record(cl, cl->topo->events, e);
}

int
request_publish_to_p(struct client *cl, const struct event *e)
{
	struct event own = *e;
	amqp_basic_properties_t props;
	amqp_pool_t pool;
	int rc;

	/* Signed as the login, which RabbitMQ checks: the daemon judges
	 * the request by it (requests.h). */
	own.requester = amqp_cstring_bytes(cl->user);
	init_amqp_pool(&pool, 512);
	if (events_request_props(&own, &pool, &props) < 0) {
		empty_amqp_pool(&pool);
		snprintf(cl->err, sizeof(cl->err),
		         "%s of \"%.*s\": not a request that can be published "
		         "to %s",
		         events_kind_name(e->kind),
		         (int)(e->cancel.len > 255 ? 255 : e->cancel.len),
		         (const char *)e->cancel.bytes, cl->topo->exchange);
		return -1;
	}
	rc = client_publish_exchange(cl, cl->topo->exchange, &props,
	                             amqp_empty_bytes);
	empty_amqp_pool(&pool);
	return rc;
}
