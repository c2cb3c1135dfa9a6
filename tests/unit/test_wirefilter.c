/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wirefilter: the frame stream from the broker, split into frames however
 * the socket cut it, with content headers the library cannot decode
 * rewritten and everything else passed as it came.  What comes out is
 * decoded with rabbitmq-c's own amqp_decode_properties.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "wirecheck.h"
#include "wirefilter.h"

struct buf {
	unsigned char *b;
	size_t len, cap;
};

static void
put(struct buf *o, const void *p, size_t n)
{
	if (n == 0)
		return; /* p may be an empty buffer's NULL */
	if (o->len + n > o->cap) {
		o->cap = (o->len + n) * 2 + 64;
		o->b = realloc(o->b, o->cap);
		cr_assert_not_null(o->b);
	}
	memcpy(o->b + o->len, p, n);
	o->len += n;
}

static void
put8(struct buf *o, unsigned v)
{
	unsigned char c = (unsigned char)v;
	put(o, &c, 1);
}

static void
put16(struct buf *o, unsigned v)
{
	put8(o, v >> 8);
	put8(o, v);
}

static void
put32(struct buf *o, uint32_t v)
{
	put16(o, v >> 16);
	put16(o, v & 0xffff);
}

static void
put64(struct buf *o, uint64_t v)
{
	put32(o, (uint32_t)(v >> 32));
	put32(o, (uint32_t)v);
}

static void
frame(struct buf *o, unsigned type, unsigned ch, const void *p, size_t n)
{
	put8(o, type);
	put16(o, ch);
	put32(o, (uint32_t)n);
	put(o, p, n);
	put8(o, 0xce);
}

/*
 * A content header's payload: class 60, body size, and properties with a
 * message-id and headers {x-stream-offset: 42, k: nest arrays (or tables)
 * one in another, the last empty}.  With nest 0, k is a plain string.
 */
static void
header_payload(struct buf *o, size_t nest, unsigned char kind,
               uint64_t body_size)
{
	struct buf t = {0}, v = {0};

	/* k's value, from the inside out: each level wraps the last. */
	if (nest == 0) {
		put8(&v, 'S');
		put32(&v, 2);
		put(&v, "ok", 2);
	}
	for (size_t i = 0; i < nest; i++) {
		struct buf w = {0};
		put8(&w, kind);
		if (kind == 'F' && v.len > 0) {
			put32(&w, (uint32_t)(v.len + 2));
			put8(&w, 1);
			put8(&w, 'k');
		} else {
			put32(&w, (uint32_t)v.len);
		}
		put(&w, v.b, v.len);
		free(v.b);
		v = w;
	}
	put8(&t, 15);
	put(&t, "x-stream-offset", 15);
	put8(&t, 'l');
	put64(&t, 42);
	put8(&t, 1);
	put8(&t, 'k');
	put(&t, v.b, v.len);

	put16(o, 60);
	put16(o, 0);
	put64(o, body_size);
	put16(o, AMQP_BASIC_HEADERS_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG);
	put32(o, (uint32_t)t.len);
	put(o, t.b, t.len);
	put8(o, 5);
	put(o, "mid-1", 5);
	free(t.b);
	free(v.b);
}

/* A method frame, a header frame with payload hp, a body, a heartbeat. */
static void
stream_of(struct buf *s, const struct buf *hp)
{
	static const unsigned char method[] = {0, 60, 0, 60, 1, 'x', 0, 0, 0,
	                                       0, 0,  0, 0,  1, 0,   0, 0};
	frame(s, 1, 1, method, sizeof(method));
	frame(s, 2, 1, hp->b, hp->len);
	frame(s, 3, 1, "body", 4);
	frame(s, 8, 0, "", 0);
}

/* s through a filter, chop bytes at a time (as a socket might): out. */
static void
filter(const struct buf *s, size_t chop, struct buf *out, uint64_t *refused)
{
	struct wirestream w;
	unsigned char *tmp = malloc(chop);

	cr_assert_not_null(tmp);
	wirestream_init(&w);
	for (size_t at = 0; at < s->len; at += chop) {
		size_t n = s->len - at < chop ? s->len - at : chop;
		unsigned char drain[333];
		ssize_t got;

		memcpy(tmp, s->b + at, n);
		got = wirestream_filter(&w, tmp, n);
		cr_assert_geq(got, 0);
		put(out, tmp, (size_t)got);
		while (wirestream_pending(&w) > 0)
			put(out, drain,
			    wirestream_take(&w, drain, sizeof(drain)));
	}
	cr_assert_eq(wirestream_pending(&w), 0);
	*refused = w.refused;
	wirestream_free(&w);
	free(tmp);
}

/* The n-th frame of s: its type, payload and size. */
static const unsigned char *
nth(const struct buf *s, int n, unsigned *type, uint32_t *size)
{
	size_t at = 0;

	for (;;) {
		const unsigned char *f = s->b + at;
		cr_assert_leq(at + 8, s->len);
		*type = f[0];
		*size = (uint32_t)f[3] << 24 | (uint32_t)f[4] << 16 |
		        (uint32_t)f[5] << 8 | f[6];
		cr_assert_eq(f[7 + *size], 0xce);
		if (n-- == 0)
			return f + 7;
		at += 8 + *size;
	}
}

static const size_t chops[] = {1, 2, 7, 8, 13, 100, 4096, 1 << 20};

Test(wirefilter, frames_that_decode_pass_as_they_came_however_cut)
{
	struct buf hp = {0}, s = {0};

	header_payload(&hp, 20, 'A', 4);
	stream_of(&s, &hp);
	for (size_t i = 0; i < sizeof(chops) / sizeof(chops[0]); i++) {
		struct buf out = {0};
		uint64_t refused;
		filter(&s, chops[i], &out, &refused);
		cr_assert_eq(refused, 0);
		cr_assert_eq(out.len, s.len, "cut by %zu", chops[i]);
		cr_assert_eq(memcmp(out.b, s.b, s.len), 0, "cut by %zu",
		             chops[i]);
		free(out.b);
	}
	free(hp.b);
	free(s.b);
}

/* The header frame in out, decoded by rabbitmq-c: its properties. */
static amqp_basic_properties_t *
decoded(const struct buf *out, amqp_pool_t *pool, uint64_t *body_size)
{
	unsigned type;
	uint32_t size;
	const unsigned char *p = nth(out, 1, &type, &size);
	void *props = NULL;

	cr_assert_eq(type, 2);
	*body_size = 0;
	for (int i = 0; i < 8; i++)
		*body_size = *body_size << 8 | p[4 + i];
	cr_assert_eq(
	    amqp_decode_properties(
	        60, pool, (amqp_bytes_t){size - 12, (void *)(p + 12)}, &props),
	    0);
	return props;
}

static const amqp_field_value_t *
find(const amqp_table_t *t, const char *key)
{
	for (int i = 0; i < t->num_entries; i++)
		if (t->entries[i].key.len == strlen(key) &&
		    memcmp(t->entries[i].key.bytes, key, strlen(key)) == 0)
			return &t->entries[i].value;
	return NULL;
}

Test(wirefilter, a_header_too_deep_for_the_library_is_refused_and_the_rest_kept)
{
	for (int k = 0; k < 2; k++) {
		unsigned char kind = k ? 'F' : 'A';
		struct buf hp = {0}, s = {0};

		/* The headers table and 100 more decode; 101 more do not. */
		header_payload(&hp, WIRECHECK_LIBRARY_DEPTH, kind, 4);
		stream_of(&s, &hp);
		for (size_t i = 0; i < sizeof(chops) / sizeof(chops[0]); i++) {
			struct buf out = {0};
			amqp_pool_t pool;
			amqp_basic_properties_t *p;
			amqp_bytes_t why;
			uint64_t refused, body_size;
			unsigned type;
			uint32_t size;
			const amqp_field_value_t *off;

			filter(&s, chops[i], &out, &refused);
			cr_assert_eq(refused, 1);
			init_amqp_pool(&pool, 4096);
			p = decoded(&out, &pool, &body_size);
			cr_assert_eq(body_size, 4);
			cr_assert_eq(wirefilter_refused(p, &why), 1);
			cr_assert_eq(why.len,
			             strlen("header 'k': nested deeper than "
			                    "rabbitmq-c decodes (101)"));
			cr_assert_eq(
			    memcmp(why.bytes, "header 'k': nested", 18), 0);
			cr_assert_null(find(&p->headers, "k"));
			off = find(&p->headers, "x-stream-offset");
			cr_assert_not_null(off);
			cr_assert_eq(off->value.i64, 42);
			cr_assert(p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG);
			cr_assert_eq(p->message_id.len, 5);
			/* The method and body frames as they were. */
			nth(&out, 2, &type, &size);
			cr_assert_eq(type, 3);
			cr_assert_eq(size, 4);
			nth(&out, 3, &type, &size);
			cr_assert_eq(type, 8);
			empty_amqp_pool(&pool);
			free(out.b);
		}
		free(hp.b);
		free(s.b);
	}
}

Test(wirefilter, one_level_less_is_the_library_s_to_decode)
{
	struct buf hp = {0}, s = {0}, out = {0};
	uint64_t refused;

	header_payload(&hp, WIRECHECK_LIBRARY_DEPTH - 1, 'A', 0);
	stream_of(&s, &hp);
	filter(&s, 5, &out, &refused);
	cr_assert_eq(refused, 0);
	cr_assert_eq(out.len, s.len);
	free(hp.b);
	free(s.b);
	free(out.b);
}

Test(wirefilter, properties_that_cannot_be_read_become_the_marker_alone)
{
	struct buf hp = {0}, s = {0}, out = {0};
	amqp_pool_t pool;
	amqp_basic_properties_t *p;
	amqp_bytes_t why;
	uint64_t refused, body_size;

	header_payload(&hp, 3, 'A', 7);
	hp.b[12 + 2 + 3] += 100; /* the table's size past the end */
	stream_of(&s, &hp);
	filter(&s, 3, &out, &refused);
	cr_assert_eq(refused, 1);
	init_amqp_pool(&pool, 4096);
	p = decoded(&out, &pool, &body_size);
	cr_assert_eq(body_size, 7);
	cr_assert_eq(p->_flags, AMQP_BASIC_HEADERS_FLAG);
	cr_assert_eq(p->headers.num_entries, 1);
	cr_assert_eq(wirefilter_refused(p, &why), 1);
	cr_assert_eq(memcmp(why.bytes, "its properties: ", 16), 0);
	empty_amqp_pool(&pool);
	free(hp.b);
	free(s.b);
	free(out.b);
}

Test(wirefilter, a_marker_a_publisher_wrote_is_not_believed)
{
	amqp_table_entry_t e = {
	    .key = amqp_cstring_bytes(WIREFILTER_MARKER),
	    .value = {.kind = AMQP_FIELD_KIND_UTF8,
	              .value.bytes = amqp_cstring_bytes(
	                  "0000000000000000 header 'k': forged")}};
	amqp_basic_properties_t p = {._flags = AMQP_BASIC_HEADERS_FLAG,
	                             .headers = {1, &e}};
	amqp_bytes_t why = {0, NULL};

	cr_assert_eq(wirefilter_refused(&p, &why), 0);
	cr_assert_eq(why.len, 0);
}
