/* SPDX-License-Identifier: Apache-2.0 */
/* Records of what waits, and the cancellations a daemon holds: events.h. */
#include "events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "headers.h"

static const char *const kind_names[EVENT_KINDS] = {
    "scheduled", "delivered",  "parked", "cancelled", "cancel",
    "marker",    "reschedule", "claim",  "duplicate", "series",
    "pause",     "resume",     "copy",
};

/* A pause or resume's header, by kind and whether it names a target. */
static const char *
pause_header(enum event_kind kind, int target)
{
	if (kind == EVENT_PAUSE)
		return target ? "x-cascade-pause-target" : "x-cascade-pause";
	return target ? "x-cascade-resume-target" : "x-cascade-resume";
}

/* A repeat's schedule, on its copy's scheduled record: none for a
 * message that is not one. */
static void
events_put_repeat(amqp_table_t *t, const struct event *e)
{
	if (e->cron.len > 0) {
		headers_put_bytes(t, "x-cascade-cron", e->cron);
		if (e->tz.len > 0)
			headers_put_bytes(t, "x-cascade-tz", e->tz);
	} else if (e->every > 0) {
		headers_put_i64(t, "x-cascade-every", e->every);
	} else {
		return;
	}
	headers_put_i64(t, "x-cascade-occurrence", e->occurrence);
}

const char *
events_kind_name(enum event_kind kind)
{
	return (unsigned)kind < EVENT_KINDS ? kind_names[kind] : "unknown";
}

/* At most 12 headers per record: a scheduled one has up to 11. */
#define EVENT_HEADERS 12

int
events_props(const struct event *e, amqp_pool_t *pool,
             amqp_basic_properties_t *out)
{
	amqp_table_t *t = &out->headers;

	memset(out, 0, sizeof(*out));
	out->_flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_TYPE_FLAG |
	              AMQP_BASIC_HEADERS_FLAG;
	out->delivery_mode = 2;
	out->type = amqp_cstring_bytes(events_kind_name(e->kind));
	if (e->message_id.len > 0) {
		out->_flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
		out->message_id = e->message_id;
	}
	if (e->writer.len > 0) {
		out->_flags |= AMQP_BASIC_USER_ID_FLAG;
		out->user_id = e->writer;
	}
	t->entries = amqp_pool_alloc(pool, EVENT_HEADERS * sizeof(*t->entries));
	if (t->entries == NULL)
		return -1;
	t->num_entries = 0;
	headers_put_i64(t, "x-cascade-at", e->at);
	switch (e->kind) {
	case EVENT_SCHEDULED:
		headers_put_bytes(t, "x-cascade-id", e->id);
		headers_put_i64(t, "x-cascade-due", e->due);
		headers_put_bytes(t, "x-cascade-exchange", e->exchange);
		headers_put_bytes(t, "x-cascade-routing-key", e->routing_key);
		headers_put_i64(t, "x-cascade-size", e->size);
		if (e->owner.len > 0)
			headers_put_bytes(t, "x-cascade-user-id", e->owner);
		if (e->copy.len > 0) {
			amqp_field_value_t copy = {AMQP_FIELD_KIND_BYTES, {0}};
			copy.value.bytes = e->copy;
			headers_put_value(t, "x-cascade-message", &copy);
		}
		events_put_repeat(t, e);
		break;
	case EVENT_PARKED:
		headers_put_bytes(t, "x-cascade-id", e->id);
		headers_put_bytes(t, "x-cascade-error", e->reason);
		break;
	case EVENT_COPY: {
		amqp_field_value_t copy = {AMQP_FIELD_KIND_BYTES, {0}};
		copy.value.bytes = e->copy;
		headers_put_bytes(t, "x-cascade-id", e->id);
		headers_put_value(t, "x-cascade-message", &copy);
		break;
	}
	case EVENT_DELIVERED:
	case EVENT_CANCELLED:
		headers_put_bytes(t, "x-cascade-id", e->id);
		break;
	case EVENT_CANCEL: {
		amqp_field_value_t park = {AMQP_FIELD_KIND_BOOLEAN, {0}};
		park.value.boolean = e->park != 0;
		headers_put_bytes(t, "x-cascade-cancel", e->cancel);
		headers_put_value(t, "x-cascade-cancel-park", &park);
		headers_put_i64(t, "x-cascade-until", e->until);
		if (e->has_requester)
			headers_put_bytes(t, "x-cascade-requester",
			                  e->requester);
		break;
	}
	case EVENT_RESCHEDULE:
		headers_put_bytes(t, "x-cascade-reschedule", e->cancel);
		headers_put_i64(t, "x-cascade-due", e->due);
		headers_put_i64(t, "x-cascade-until", e->until);
		if (e->has_requester)
			headers_put_bytes(t, "x-cascade-requester",
			                  e->requester);
		if (e->superseded.len > 0)
			headers_put_bytes(t, "x-cascade-superseded",
			                  e->superseded);
		break;
	case EVENT_MARKER:
		headers_put_bytes(t, "x-cascade-marker", e->marker);
		break;
	case EVENT_CLAIM:
		headers_put_bytes(t, "x-cascade-claim", e->cancel);
		headers_put_bytes(t, "x-cascade-id", e->id);
		headers_put_i64(t, "x-cascade-due", e->due);
		headers_put_i64(t, "x-cascade-until", e->until);
		headers_put_bytes(
		    t, "x-cascade-unique",
		    amqp_cstring_bytes(e->replace ? "replace" : "keep"));
		headers_put_bytes(t, "x-cascade-requester", e->requester);
		break;
	case EVENT_DUPLICATE:
		headers_put_bytes(t, "x-cascade-id", e->id);
		break;
	case EVENT_SERIES:
		headers_put_bytes(t, "x-cascade-series", e->id);
		headers_put_i64(t, "x-cascade-occurrence", e->occurrence);
		headers_put_bytes(t, "x-cascade-token", e->token);
		headers_put_i64(t, "x-cascade-until", e->until);
		break;
	case EVENT_PAUSE:
	case EVENT_RESUME:
		headers_put_bytes(t, pause_header(e->kind, e->target),
		                  e->cancel);
		headers_put_i64(t, "x-cascade-until", e->until);
		if (e->has_requester)
			headers_put_bytes(t, "x-cascade-requester",
			                  e->requester);
		break;
	default:
		return -1;
	}
	return 0;
}

/* A string header into *out; -1 when absent or not a string. */
static int
get_str(const amqp_table_t *h, const char *key, amqp_bytes_t *out)
{
	const amqp_field_value_t *v = headers_find(h, key);

	return v != NULL && headers_string(v, out) == 0 ? 0 : -1;
}

static int
get_i64(const amqp_table_t *h, const char *key, int64_t *out)
{
	const amqp_field_value_t *v = headers_find(h, key);

	return v != NULL && headers_integer(v, out) == 1 ? 0 : -1;
}

amqp_bytes_t
events_owner(const amqp_basic_properties_t *p, int fresh)
{
	amqp_bytes_t owner = amqp_empty_bytes;

	/* On first sight a publisher's own x-cascade-user-id proves
	 * nothing: only the user-id RabbitMQ checked counts. */
	if (!fresh && get_str(headers_of(p), "x-cascade-user-id", &owner) == 0)
		return owner;
	if (p->_flags & AMQP_BASIC_USER_ID_FLAG)
		owner = p->user_id;
	return owner;
}

static int
time_ok(int64_t t)
{
	return t >= 0 && t <= EVENTS_TIME_MAX;
}

static int
id_ok(amqp_bytes_t b)
{
	return b.len <= EVENTS_ID_MAX;
}

/*
 * The fields of a parsed record within bounds (events.h): what a reader
 * later adds, subtracts or compares cannot overflow.
 */
static int
events_bounded(const struct event *e)
{
	if (!time_ok(e->at) || !time_ok(e->due) || !time_ok(e->until))
		return -1;
	if (e->size < 0 || e->size > EVENTS_COUNT_MAX || e->occurrence < 0 ||
	    e->occurrence > EVENTS_COUNT_MAX || e->every < 0 ||
	    e->every > EVENTS_COUNT_MAX)
		return -1;
	if (!id_ok(e->id) || !id_ok(e->message_id) || !id_ok(e->cancel) ||
	    !id_ok(e->token) || !id_ok(e->requester) || !id_ok(e->writer) ||
	    !id_ok(e->owner) || !id_ok(e->exchange) || !id_ok(e->routing_key) ||
	    !id_ok(e->marker) || !id_ok(e->cron) || !id_ok(e->tz) ||
	    e->superseded.len > EVENTS_SUPERSEDED_MAX)
		return -1;
	return 0;
}

static int events_fields(const amqp_basic_properties_t *p, struct event *e);

int
events_parse(const amqp_basic_properties_t *p, struct event *e)
{
	if (events_fields(p, e) < 0 || events_bounded(e) < 0) {
		memset(e, 0, sizeof(*e));
		return -1;
	}
	return 0;
}

static int
events_fields(const amqp_basic_properties_t *p, struct event *e)
{
	const amqp_table_t *h;
	const amqp_field_value_t *v;
	int k;

	memset(e, 0, sizeof(*e));
	if (!(p->_flags & AMQP_BASIC_TYPE_FLAG) ||
	    !(p->_flags & AMQP_BASIC_HEADERS_FLAG))
		return -1;
	h = &p->headers;
	for (k = 0; k < EVENT_KINDS; k++)
		if (headers_key_is(p->type, kind_names[k]))
			break;
	if (k == EVENT_KINDS)
		return -1;
	e->kind = (enum event_kind)k;
	if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
		e->message_id = p->message_id;
	if (p->_flags & AMQP_BASIC_USER_ID_FLAG)
		e->writer = p->user_id;
	(void)get_i64(h, "x-cascade-at", &e->at);
	switch (e->kind) {
	case EVENT_SCHEDULED:
		if (get_str(h, "x-cascade-id", &e->id) < 0 ||
		    get_i64(h, "x-cascade-due", &e->due) < 0)
			return -1;
		(void)get_str(h, "x-cascade-exchange", &e->exchange);
		(void)get_str(h, "x-cascade-routing-key", &e->routing_key);
		(void)get_i64(h, "x-cascade-size", &e->size);
		(void)get_str(h, "x-cascade-user-id", &e->owner);
		(void)get_str(h, "x-cascade-message", &e->copy);
		(void)get_i64(h, "x-cascade-every", &e->every);
		(void)get_str(h, "x-cascade-cron", &e->cron);
		(void)get_str(h, "x-cascade-tz", &e->tz);
		(void)get_i64(h, "x-cascade-occurrence", &e->occurrence);
		return 0;
	case EVENT_COPY:
		if (get_str(h, "x-cascade-id", &e->id) < 0 || e->id.len == 0 ||
		    get_str(h, "x-cascade-message", &e->copy) < 0 ||
		    e->copy.len == 0)
			return -1;
		return 0;
	case EVENT_PARKED:
		(void)get_str(h, "x-cascade-error", &e->reason);
		/* fall through */
	case EVENT_DELIVERED:
	case EVENT_CANCELLED:
		return get_str(h, "x-cascade-id", &e->id);
	case EVENT_CANCEL:
		if (get_str(h, "x-cascade-cancel", &e->cancel) < 0 ||
		    e->cancel.len == 0 ||
		    get_i64(h, "x-cascade-until", &e->until) < 0)
			return -1;
		v = headers_find(h, "x-cascade-cancel-park");
		e->park = v != NULL && v->kind == AMQP_FIELD_KIND_BOOLEAN &&
		          v->value.boolean;
		e->has_requester =
		    get_str(h, "x-cascade-requester", &e->requester) == 0;
		return 0;
	case EVENT_RESCHEDULE:
		if (get_str(h, "x-cascade-reschedule", &e->cancel) < 0 ||
		    e->cancel.len == 0 ||
		    get_i64(h, "x-cascade-due", &e->due) < 0 ||
		    get_i64(h, "x-cascade-until", &e->until) < 0)
			return -1;
		e->has_requester =
		    get_str(h, "x-cascade-requester", &e->requester) == 0;
		(void)get_str(h, "x-cascade-superseded", &e->superseded);
		return 0;
	case EVENT_MARKER:
		return get_str(h, "x-cascade-marker", &e->marker);
	case EVENT_CLAIM: {
		amqp_bytes_t u;
		if (get_str(h, "x-cascade-claim", &e->cancel) < 0 ||
		    e->cancel.len == 0 ||
		    get_str(h, "x-cascade-id", &e->id) < 0 ||
		    get_i64(h, "x-cascade-due", &e->due) < 0 ||
		    get_i64(h, "x-cascade-until", &e->until) < 0 ||
		    get_str(h, "x-cascade-unique", &u) < 0)
			return -1;
		e->replace = headers_key_is(u, "replace");
		e->has_requester =
		    get_str(h, "x-cascade-requester", &e->requester) == 0;
		return 0;
	}
	case EVENT_DUPLICATE:
		(void)get_str(h, "x-cascade-id", &e->id);
		return 0;
	case EVENT_PAUSE:
	case EVENT_RESUME:
		e->target = headers_find(h, pause_header(e->kind, 1)) != NULL;
		if (get_str(h, pause_header(e->kind, e->target), &e->cancel) <
		        0 ||
		    e->cancel.len == 0 ||
		    get_i64(h, "x-cascade-until", &e->until) < 0)
			return -1;
		e->has_requester =
		    get_str(h, "x-cascade-requester", &e->requester) == 0;
		return 0;
	case EVENT_SERIES:
		if (get_str(h, "x-cascade-series", &e->id) < 0 ||
		    e->id.len == 0 ||
		    get_i64(h, "x-cascade-occurrence", &e->occurrence) < 0 ||
		    get_str(h, "x-cascade-token", &e->token) < 0 ||
		    get_i64(h, "x-cascade-until", &e->until) < 0)
			return -1;
		return 0;
	default:
		return -1;
	}
}

void
events_of(enum event_kind kind, const struct route *r,
          const amqp_basic_properties_t *props, size_t body_len, int64_t now,
          struct event *e)
{
	memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->at = now;
	e->id = r->id;
	if (props->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
		e->message_id = props->message_id;
	if (kind == EVENT_SCHEDULED) {
		e->due = r->due;
		e->exchange = r->exchange;
		e->routing_key = r->routing_key;
		e->size = (int64_t)body_len;
		e->owner = events_owner(props, r->fresh);
		if (r->repeat) {
			e->every = r->cron.len > 0 ? 0 : r->every;
			e->cron = r->cron;
			e->tz = r->tz;
			e->occurrence = r->occurrence;
		}
	} else if (kind == EVENT_PARKED) {
		e->reason = amqp_cstring_bytes(r->reason);
	}
}

/* The request headers a message published to P may carry, one of. */
static const struct {
	const char *header;
	enum event_kind kind;
	int target;
	const char *what;
} request_headers[] = {
    {"x-cascade-cancel", EVENT_CANCEL, 0, "the message-id to cancel"},
    {"x-cascade-reschedule", EVENT_RESCHEDULE, 0,
     "the message-id to reschedule"},
    {"x-cascade-pause", EVENT_PAUSE, 0, "the series to pause"},
    {"x-cascade-resume", EVENT_RESUME, 0, "the series to resume"},
    {"x-cascade-pause-target", EVENT_PAUSE, 1,
     "the target to pause, EXCHANGE[/KEY]"},
    {"x-cascade-resume-target", EVENT_RESUME, 1,
     "the target to resume, EXCHANGE[/KEY]"},
};

#define REQUEST_HEADERS (sizeof(request_headers) / sizeof(request_headers[0]))

int
events_is_request(const amqp_basic_properties_t *props)
{
	const amqp_table_t *h = headers_of(props);

	for (size_t i = 0; i < REQUEST_HEADERS; i++)
		if (headers_find(h, request_headers[i].header) != NULL)
			return 1;
	return 0;
}

int
events_request(const amqp_basic_properties_t *props, int64_t until, int64_t now,
               struct event *e, const char **why)
{
	static char buf[160];
	const amqp_table_t *h = headers_of(props);
	const amqp_field_value_t *v = NULL, *f;
	size_t i, found = REQUEST_HEADERS;

	memset(e, 0, sizeof(*e));
	e->at = now;
	e->until = until;
	for (i = 0; i < REQUEST_HEADERS; i++) {
		if ((f = headers_find(h, request_headers[i].header)) == NULL)
			continue;
		if (v != NULL) {
			snprintf(buf, sizeof(buf),
			         "%s and %s: one request per message",
			         request_headers[found].header,
			         request_headers[i].header);
			*why = buf;
			return -1;
		}
		v = f;
		found = i;
	}
	if (v == NULL) {
		*why = "no request header";
		return -1;
	}
	e->kind = request_headers[found].kind;
	e->target = request_headers[found].target;
	if (headers_string(v, &e->cancel) < 0 || e->cancel.len == 0 ||
	    e->cancel.len > 255) {
		snprintf(buf, sizeof(buf),
		         "%s: must be a string of 1 to 255 bytes (%s)",
		         request_headers[found].header,
		         request_headers[found].what);
		*why = buf;
		return -1;
	}
	if (props->_flags & AMQP_BASIC_USER_ID_FLAG)
		e->requester = props->user_id;
	e->has_requester = 1;
	v = headers_find(h, "x-cascade-cancel-park");
	e->park = e->kind == EVENT_CANCEL && v != NULL &&
	          v->kind == AMQP_FIELD_KIND_BOOLEAN && v->value.boolean;
	*why = NULL;
	return 0;
}

int
events_request_props(const struct event *e, amqp_pool_t *pool,
                     amqp_basic_properties_t *out)
{
	amqp_table_t *t = &out->headers;
	size_t i;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < REQUEST_HEADERS; i++)
		if (request_headers[i].kind == e->kind &&
		    request_headers[i].target == (e->target != 0))
			break;
	/* What events_request would refuse is not built. */
	if (i == REQUEST_HEADERS || e->cancel.len == 0 ||
	    e->cancel.len > EVENTS_ID_MAX || e->requester.len > EVENTS_ID_MAX ||
	    (e->kind == EVENT_RESCHEDULE && !time_ok(e->due)))
		return -1;
	out->_flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_HEADERS_FLAG;
	out->delivery_mode = 2;
	if (e->requester.len > 0) {
		out->_flags |= AMQP_BASIC_USER_ID_FLAG;
		out->user_id = e->requester;
	}
	t->entries = amqp_pool_alloc(pool, 2 * sizeof(*t->entries));
	if (t->entries == NULL)
		return -1;
	t->num_entries = 0;
	headers_put_bytes(t, request_headers[i].header, e->cancel);
	if (e->kind == EVENT_CANCEL && e->park) {
		amqp_field_value_t park = {AMQP_FIELD_KIND_BOOLEAN, {0}};
		park.value.boolean = 1;
		headers_put_value(t, "x-cascade-cancel-park", &park);
	}
	/* Read as a delayed message's due time is (router.c). */
	if (e->kind == EVENT_RESCHEDULE)
		headers_put_i64(t, "x-deliver-at", e->due);
	return 0;
}

void
events_new_id(char out[17])
{
	static uint64_t seed, counter;
	uint64_t x;

	if (seed == 0) {
		/* From the kernel: splitmix64 is invertible, and a seed of the
		 * clock and pid would let anyone who reads one id (a marker
		 * in a stream) predict the next. */
		if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed)) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			seed = ((uint64_t)ts.tv_sec * 1000000000u +
			        (uint64_t)ts.tv_nsec) ^
			       ((uint64_t)getpid() << 32) ^
			       (uint64_t)(uintptr_t)&ts;
		}
		seed |= 1;
	}
	/* splitmix64 of seed + counter: distinct for 2^64 ids per process. */
	x = seed + UINT64_C(0x9e3779b97f4a7c15) * ++counter;
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	x ^= x >> 31;
	snprintf(out, 17, "%016llx", (unsigned long long)x);
}

int
events_is_batch(const amqp_basic_properties_t *p)
{
	return (p->_flags & AMQP_BASIC_TYPE_FLAG) &&
	       headers_key_is(p->type, EVENTS_BATCH_TYPE);
}

int
events_batch_add(char **buf, size_t *len, size_t *cap,
                 const amqp_basic_properties_t *p)
{
	size_t need = 4 + headers_props_size(p), n;

	if (*len + need > *cap) {
		size_t c = *cap ? *cap : 4096;
		char *nb;
		while (c < *len + need)
			c *= 2;
		if ((nb = realloc(*buf, c)) == NULL)
			return -1;
		*buf = nb;
		*cap = c;
	}
	n = headers_props_put(p, *buf + *len, *cap - *len);
	if (n == 0)
		return -1;
	*len += n;
	return 0;
}

int
events_batch_next(amqp_bytes_t body, size_t *off, amqp_pool_t *pool,
                  amqp_basic_properties_t *p)
{
	amqp_bytes_t rest;
	size_t used = 0;

	if (*off >= body.len)
		return 0;
	rest.bytes = (char *)body.bytes + *off;
	rest.len = body.len - *off;
	if (headers_props_get(rest, pool, p, &used) != 0)
		return -1;
	*off += used;
	return 1;
}

int
events_superseded_next(amqp_bytes_t list, size_t *off, amqp_bytes_t *id)
{
	const char *p = list.bytes;

	while (*off < list.len) {
		size_t start = *off;
		while (*off < list.len && p[*off] != ',')
			(*off)++;
		id->bytes = (void *)(p + start);
		id->len = *off - start;
		if (*off < list.len)
			(*off)++;
		if (id->len > 0 && id->len < 256)
			return 1;
	}
	return 0;
}

void
events_superseded_append(char *buf, size_t *len, amqp_bytes_t id)
{
	/* Cascade ids are 16 hex digits: no commas. */
	if (*len > 0)
		buf[(*len)++] = ',';
	memcpy(buf + *len, id.bytes, id.len);
	*len += id.len;
}

void
events_resume_init(struct events_resume *r)
{
	r->last = -1;
	r->base = -2;
	r->steps = 0;
	r->from = -1;
}

void
events_resume_read(struct events_resume *r, const amqp_basic_properties_t *p)
{
	int64_t off;

	if (get_i64(headers_of(p), "x-stream-offset", &off) == 0 && off >= 0 &&
	    off > r->last && off < INT64_MAX / 2)
		r->last = off;
}

int64_t
events_resume_skip(struct events_resume *r)
{
	if (r->base == r->last) {
		r->steps++;
	} else {
		r->base = r->last;
		r->steps = 1;
	}
	r->from = r->last + 1 + r->steps;
	return r->from;
}

void
events_stream_offset(int64_t from, amqp_table_entry_t *arg)
{
	memset(arg, 0, sizeof(*arg));
	arg->key = amqp_cstring_bytes("x-stream-offset");
	if (from < 0) {
		arg->value.kind = AMQP_FIELD_KIND_UTF8;
		arg->value.value.bytes = amqp_cstring_bytes("first");
	} else {
		arg->value.kind = AMQP_FIELD_KIND_I64;
		arg->value.value.i64 = from;
	}
}

void
events_stream_since(int64_t from, int64_t since, amqp_table_entry_t *arg)
{
	events_stream_offset(from, arg);
	if (from < 0 && since > 0) {
		arg->value.kind = AMQP_FIELD_KIND_TIMESTAMP;
		arg->value.value.u64 = (uint64_t)(since / 1000);
	}
}
