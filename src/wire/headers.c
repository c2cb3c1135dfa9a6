/* SPDX-License-Identifier: Apache-2.0 */
/* Header tables: typed reads, filtered copies, equality. */
#include "headers.h"

#include <string.h>

#include "duration.h"
#include "wirecheck.h"

const amqp_table_t *
headers_of(const amqp_basic_properties_t *props)
{
	return (props->_flags & AMQP_BASIC_HEADERS_FLAG) ? &props->headers
	                                                 : NULL;
}

const amqp_field_value_t *
headers_find(const amqp_table_t *t, const char *key)
{
	size_t n;

	if (t == NULL)
		return NULL;
	n = strlen(key);
	for (int i = 0; i < t->num_entries; i++)
		if (t->entries[i].key.len == n &&
		    memcmp(t->entries[i].key.bytes, key, n) == 0)
			return &t->entries[i].value;
	return NULL;
}

/* Any integer kind as int64; 1 if it is one, 0 if not, -1 if too large. */
int
headers_integer(const amqp_field_value_t *v, int64_t *out)
{
	switch (v->kind) {
	case AMQP_FIELD_KIND_I8:
		*out = v->value.i8;
		return 1;
	case AMQP_FIELD_KIND_U8:
		*out = v->value.u8;
		return 1;
	case AMQP_FIELD_KIND_I16:
		*out = v->value.i16;
		return 1;
	case AMQP_FIELD_KIND_U16:
		*out = v->value.u16;
		return 1;
	case AMQP_FIELD_KIND_I32:
		*out = v->value.i32;
		return 1;
	case AMQP_FIELD_KIND_U32:
		*out = v->value.u32;
		return 1;
	case AMQP_FIELD_KIND_I64:
		*out = v->value.i64;
		return 1;
	case AMQP_FIELD_KIND_U64:
		if (v->value.u64 > (uint64_t)INT64_MAX)
			return -1;
		*out = (int64_t)v->value.u64;
		return 1;
	default:
		return 0;
	}
}

int
headers_string(const amqp_field_value_t *v, amqp_bytes_t *out)
{
	if (v->kind != AMQP_FIELD_KIND_UTF8 && v->kind != AMQP_FIELD_KIND_BYTES)
		return -1;
	*out = v->value.bytes;
	return 0;
}

int
headers_delay(const amqp_field_value_t *v, int64_t *ms, const char **why)
{
	amqp_bytes_t s;

	switch (headers_integer(v, ms)) {
	case 1:
		return 0;
	case -1:
		*why = "out of range";
		return -1;
	}
	/* A float or double, truncated towards zero, as the delayed-message
	 * plugin took it: Brighter sends x-delay as a double.  Checked
	 * against the range before the conversion, which is undefined
	 * outside it (NaN compares false and is refused with it). */
	if (v->kind == AMQP_FIELD_KIND_F32 || v->kind == AMQP_FIELD_KIND_F64) {
		double d = v->kind == AMQP_FIELD_KIND_F32 ? (double)v->value.f32
		                                          : v->value.f64;
		if (!(d > -9.2e18 && d < 9.2e18)) {
			*why = "out of range";
			return -1;
		}
		*ms = (int64_t)d;
		return 0;
	}
	if (headers_string(v, &s) < 0) {
		*why = "must be an integer or a number (ms), or a string such "
		       "as 90s";
		return -1;
	}
	if (memchr(s.bytes, '\0', s.len) != NULL) {
		*why = "malformed duration";
		return -1;
	}
	return duration_parse(s.bytes, s.len, DURATION_BARE_MS, ms, why);
}

int
headers_epoch_ms(const amqp_field_value_t *v, int64_t *ms, const char **why)
{
	amqp_bytes_t s;
	int64_t n = 0;

	if (v->kind == AMQP_FIELD_KIND_TIMESTAMP) {
		/* An AMQP timestamp counts seconds. */
		if (v->value.u64 > (uint64_t)INT64_MAX / 1000) {
			*why = "out of range";
			return -1;
		}
		*ms = (int64_t)v->value.u64 * 1000;
		return 0;
	}
	switch (headers_integer(v, ms)) {
	case 1:
		return 0;
	case -1:
		*why = "out of range";
		return -1;
	}
	if (headers_string(v, &s) < 0 || s.len == 0) {
		*why = "must be an integer (Unix epoch ms)";
		return -1;
	}
	for (size_t i = 0; i < s.len; i++) {
		char c = ((const char *)s.bytes)[i];
		if (c < '0' || c > '9') {
			*why = "must be an integer (Unix epoch ms)";
			return -1;
		}
		if (n > (INT64_MAX - (c - '0')) / 10) {
			*why = "out of range";
			return -1;
		}
		n = n * 10 + (c - '0');
	}
	*ms = n;
	return 0;
}

/*
 * The one table of the headers cascade treats specially: each name (or
 * prefix) and its class.  What becomes of a class on each publish is in
 * header_fates below; everything else is the publisher's and goes
 * everywhere.
 */
static const struct {
	const char *name;
	size_t len;
	int prefix;
	enum header_class cls;
} header_rules[] = {
#define EXACT(s, c)                                                            \
	{                                                                      \
		s, sizeof(s) - 1, 0, c                                         \
	}
#define PREFIX(s, c)                                                           \
	{                                                                      \
		s, sizeof(s) - 1, 1, c                                         \
	}
    /* sender-selected distribution; x-cascade-cc carries CC */
    EXACT("CC", HEADER_DISTRIBUTION),
    EXACT("BCC", HEADER_DISTRIBUTION),
    /* the publisher's request, read on first sight */
    EXACT("x-remaining-delay", HEADER_DELAY),
    EXACT("x-delay", HEADER_DELAY),
    EXACT("x-deliver-at", HEADER_DELAY),
    /* Tanzu RabbitMQ's and RabbitMQ 4.4's, from AMQP 1.0 annotations */
    EXACT("x-opt-delivery-time", HEADER_DELAY),
    EXACT("x-opt-delivery-delay", HEADER_DELAY),
    EXACT("x-target-exchange", HEADER_TARGET),
    EXACT("x-target-routing-key", HEADER_TARGET),
    /* set by the broker on dead-lettering and quorum-queue delivery */
    EXACT("x-death", HEADER_BROKER),
    PREFIX("x-first-death-", HEADER_BROKER),
    PREFIX("x-last-death-", HEADER_BROKER),
    EXACT("x-delivery-count", HEADER_BROKER),
    /* RabbitMQ 4.3: how often a quorum queue handed the message out */
    EXACT("x-acquired-count", HEADER_BROKER),
    /* cascade's own: kept for the publisher and the worker */
    EXACT("x-cascade-user-id", HEADER_USER_ID),
    EXACT("x-cascade-attempt", HEADER_ATTEMPT),
    /* why it was parked: written afresh on each park */
    EXACT("x-cascade-error", HEADER_PARK_NOTE),
    EXACT("x-cascade-dropped-headers", HEADER_PARK_NOTE),
    /* the rest of x-cascade-*: routing state */
    PREFIX("x-cascade-", HEADER_STATE),
#undef EXACT
#undef PREFIX
};

/*
 * What becomes of each class on a hop or delivery, on a park, and when a
 * parked message is sent back (cascade-ctl requeue).  HEADER_ASK: it
 * depends on the message, and the caller decides (see router.c, park.c).
 */
static const enum header_fate header_fates[HEADER_CLASSES][HEADER_USES] = {
    /*                     forward      park         requeue */
    [HEADER_OTHER] = {HEADER_KEEP, HEADER_KEEP, HEADER_KEEP},
    [HEADER_DISTRIBUTION] = {HEADER_DROP, HEADER_DROP, HEADER_DROP},
    [HEADER_DELAY] = {HEADER_DROP, HEADER_KEEP, HEADER_ASK},
    [HEADER_TARGET] = {HEADER_DROP, HEADER_KEEP, HEADER_KEEP},
    [HEADER_BROKER] = {HEADER_DROP, HEADER_DROP, HEADER_DROP},
    [HEADER_USER_ID] = {HEADER_ASK, HEADER_ASK, HEADER_KEEP},
    [HEADER_ATTEMPT] = {HEADER_ASK, HEADER_KEEP, HEADER_ASK},
    [HEADER_PARK_NOTE] = {HEADER_DROP, HEADER_DROP, HEADER_DROP},
    [HEADER_STATE] = {HEADER_DROP, HEADER_KEEP, HEADER_DROP},
};

enum header_class
headers_class(amqp_bytes_t key)
{
	const char *k = key.bytes;

	/* Called for every header of every hop: most are not ours. */
	if (key.len < 2 || (k[0] != 'x' && k[0] != 'C' && k[0] != 'B'))
		return HEADER_OTHER;
	for (size_t i = 0; i < sizeof(header_rules) / sizeof(header_rules[0]);
	     i++) {
		size_t n = header_rules[i].len;
		if ((header_rules[i].prefix ? key.len >= n : key.len == n) &&
		    memcmp(k, header_rules[i].name, n) == 0)
			return header_rules[i].cls;
	}
	return HEADER_OTHER;
}

enum header_fate
headers_fate(amqp_bytes_t key, enum header_use use, enum header_class *cls)
{
	enum header_class c = headers_class(key);

	if (cls != NULL)
		*cls = c;
	return header_fates[c][use];
}

int
headers_is_routing(amqp_bytes_t key)
{
	enum header_class c = headers_class(key);

	/* The user-id and the attempt stay; CC and BCC are the caller's. */
	return c != HEADER_OTHER && c != HEADER_DISTRIBUTION &&
	       header_fates[c][HEADER_FORWARD] == HEADER_DROP;
}

int
headers_filter(const amqp_table_t *in, int (*drop)(amqp_bytes_t key), int extra,
               amqp_pool_t *pool, amqp_table_t *out)
{
	int n = in ? in->num_entries : 0;

	out->num_entries = 0;
	out->entries = NULL;
	if (n + extra == 0)
		return 0;
	out->entries = amqp_pool_alloc(pool, sizeof(amqp_table_entry_t) *
	                                         (size_t)(n + extra));
	if (out->entries == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		if (drop == NULL || !drop(in->entries[i].key))
			out->entries[out->num_entries++] = in->entries[i];
	return 0;
}

void
headers_put_i64(amqp_table_t *t, const char *key, int64_t v)
{
	amqp_table_entry_t *e = &t->entries[t->num_entries++];

	e->key = amqp_cstring_bytes(key);
	e->value.kind = AMQP_FIELD_KIND_I64;
	e->value.value.i64 = v;
}

void
headers_put_bytes(amqp_table_t *t, const char *key, amqp_bytes_t v)
{
	amqp_table_entry_t *e = &t->entries[t->num_entries++];

	e->key = amqp_cstring_bytes(key);
	e->value.kind = AMQP_FIELD_KIND_UTF8;
	e->value.value.bytes = v;
}

void
headers_put_value(amqp_table_t *t, const char *key, const amqp_field_value_t *v)
{
	amqp_table_entry_t *e = &t->entries[t->num_entries++];

	e->key = amqp_cstring_bytes(key);
	e->value = *v;
}

static int value_equal(const amqp_field_value_t *a,
                       const amqp_field_value_t *b);

int
headers_bytes_eq(amqp_bytes_t a, amqp_bytes_t b)
{
	return a.len == b.len &&
	       (a.len == 0 || memcmp(a.bytes, b.bytes, a.len) == 0);
}

static int
value_equal(const amqp_field_value_t *a, const amqp_field_value_t *b)
{
	if (a->kind != b->kind)
		return 0;
	switch (a->kind) {
	case AMQP_FIELD_KIND_BOOLEAN:
		return !a->value.boolean == !b->value.boolean;
	case AMQP_FIELD_KIND_I8:
	case AMQP_FIELD_KIND_U8:
		return a->value.u8 == b->value.u8;
	case AMQP_FIELD_KIND_I16:
	case AMQP_FIELD_KIND_U16:
		return a->value.u16 == b->value.u16;
	case AMQP_FIELD_KIND_I32:
	case AMQP_FIELD_KIND_U32:
		return a->value.u32 == b->value.u32;
	case AMQP_FIELD_KIND_F32:
		return memcmp(&a->value.f32, &b->value.f32, sizeof(float)) == 0;
	case AMQP_FIELD_KIND_I64:
	case AMQP_FIELD_KIND_U64:
	case AMQP_FIELD_KIND_TIMESTAMP:
		return a->value.u64 == b->value.u64;
	case AMQP_FIELD_KIND_F64:
		return memcmp(&a->value.f64, &b->value.f64, sizeof(double)) ==
		       0;
	case AMQP_FIELD_KIND_DECIMAL:
		return a->value.decimal.decimals == b->value.decimal.decimals &&
		       a->value.decimal.value == b->value.decimal.value;
	case AMQP_FIELD_KIND_UTF8:
	case AMQP_FIELD_KIND_BYTES:
		return headers_bytes_eq(a->value.bytes, b->value.bytes);
	case AMQP_FIELD_KIND_TABLE:
		return headers_equal(&a->value.table, &b->value.table);
	case AMQP_FIELD_KIND_ARRAY:
		if (a->value.array.num_entries != b->value.array.num_entries)
			return 0;
		for (int i = 0; i < a->value.array.num_entries; i++)
			if (!value_equal(&a->value.array.entries[i],
			                 &b->value.array.entries[i]))
				return 0;
		return 1;
	case AMQP_FIELD_KIND_VOID:
		return 1;
	default:
		return 0;
	}
}

int
headers_equal(const amqp_table_t *a, const amqp_table_t *b)
{
	int na = a ? a->num_entries : 0, nb = b ? b->num_entries : 0;

	if (na != nb)
		return 0;
	/* In any order: RabbitMQ 4.x sorts the headers it sends by name. */
	for (int i = 0; i < na; i++) {
		int j = i < nb && headers_bytes_eq(a->entries[i].key,
		                                   b->entries[i].key)
		            ? i
		            : 0;
		while (j < nb &&
		       !headers_bytes_eq(a->entries[i].key, b->entries[j].key))
			j++;
		if (j == nb ||
		    !value_equal(&a->entries[i].value, &b->entries[j].value))
			return 0;
	}
	return 1;
}

int
headers_key_is(amqp_bytes_t key, const char *name)
{
	size_t n = strlen(name);

	return key.len == n && (n == 0 || memcmp(key.bytes, name, n) == 0);
}

static size_t headers_value_size(const amqp_field_value_t *v);

size_t
headers_table_size(const amqp_table_t *t)
{
	size_t n = 4;

	if (t == NULL)
		return n;
	for (int i = 0; i < t->num_entries; i++)
		n += 1 + t->entries[i].key.len +
		     headers_value_size(&t->entries[i].value);
	return n;
}

/* The kind octet and the value. */
static size_t
headers_value_size(const amqp_field_value_t *v)
{
	size_t n = 1;

	switch (v->kind) {
	case AMQP_FIELD_KIND_BOOLEAN:
	case AMQP_FIELD_KIND_I8:
	case AMQP_FIELD_KIND_U8:
		return n + 1;
	case AMQP_FIELD_KIND_I16:
	case AMQP_FIELD_KIND_U16:
		return n + 2;
	case AMQP_FIELD_KIND_I32:
	case AMQP_FIELD_KIND_U32:
	case AMQP_FIELD_KIND_F32:
		return n + 4;
	case AMQP_FIELD_KIND_I64:
	case AMQP_FIELD_KIND_U64:
	case AMQP_FIELD_KIND_F64:
	case AMQP_FIELD_KIND_TIMESTAMP:
		return n + 8;
	case AMQP_FIELD_KIND_DECIMAL:
		return n + 5;
	case AMQP_FIELD_KIND_UTF8:
	case AMQP_FIELD_KIND_BYTES:
		return n + 4 + v->value.bytes.len;
	case AMQP_FIELD_KIND_ARRAY:
		n += 4;
		for (int i = 0; i < v->value.array.num_entries; i++)
			n += headers_value_size(&v->value.array.entries[i]);
		return n;
	case AMQP_FIELD_KIND_TABLE:
		return n + headers_table_size(&v->value.table);
	case AMQP_FIELD_KIND_VOID:
	default:
		return n;
	}
}

size_t
headers_props_size(const amqp_basic_properties_t *p)
{
	size_t n = 2; /* one flags word holds basic's 14 properties */
	amqp_flags_t f = p->_flags;

#define SHORTSTR(flag, field)                                                  \
	if (f & (flag))                                                        \
		n += 1 + p->field.len;
	SHORTSTR(AMQP_BASIC_CONTENT_TYPE_FLAG, content_type)
	SHORTSTR(AMQP_BASIC_CONTENT_ENCODING_FLAG, content_encoding)
	SHORTSTR(AMQP_BASIC_CORRELATION_ID_FLAG, correlation_id)
	SHORTSTR(AMQP_BASIC_REPLY_TO_FLAG, reply_to)
	SHORTSTR(AMQP_BASIC_EXPIRATION_FLAG, expiration)
	SHORTSTR(AMQP_BASIC_MESSAGE_ID_FLAG, message_id)
	SHORTSTR(AMQP_BASIC_TYPE_FLAG, type)
	SHORTSTR(AMQP_BASIC_USER_ID_FLAG, user_id)
	SHORTSTR(AMQP_BASIC_APP_ID_FLAG, app_id)
	SHORTSTR(AMQP_BASIC_CLUSTER_ID_FLAG, cluster_id)
#undef SHORTSTR
	if (f & AMQP_BASIC_HEADERS_FLAG)
		n += headers_table_size(&p->headers);
	if (f & AMQP_BASIC_DELIVERY_MODE_FLAG)
		n += 1;
	if (f & AMQP_BASIC_PRIORITY_FLAG)
		n += 1;
	if (f & AMQP_BASIC_TIMESTAMP_FLAG)
		n += 8;
	return n;
}

int
headers_utf8_valid(amqp_bytes_t b)
{
	const unsigned char *s = b.bytes;
	size_t i = 0;

	while (i < b.len) {
		unsigned char c = s[i];
		size_t need;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			need = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			need = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			need = 3;
			cp = c & 0x07;
		} else {
			return 0;
		}
		if (b.len - i <= need)
			return 0;
		for (size_t k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		/* overlong, surrogates, past U+10FFFF */
		if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return 0;
		i += need + 1;
	}
	return 1;
}

size_t
headers_props_put(const amqp_basic_properties_t *p, char *out, size_t cap)
{
	amqp_basic_properties_t copy = *p;
	amqp_bytes_t room;
	int n;

	if (cap < 4)
		return 0;
	room.bytes = out + 4;
	room.len = cap - 4;
	/* rabbitmq-c takes the properties by a non-const pointer only. */
	n = amqp_encode_properties(AMQP_BASIC_CLASS, &copy, room);
	if (n < 0)
		return 0;
	out[0] = (char)((unsigned)n >> 24);
	out[1] = (char)((unsigned)n >> 16);
	out[2] = (char)((unsigned)n >> 8);
	out[3] = (char)(unsigned)n;
	return 4 + (size_t)n;
}

int
headers_props_get(amqp_bytes_t in, amqp_pool_t *pool,
                  amqp_basic_properties_t *p, size_t *used)
{
	const unsigned char *b = in.bytes;
	amqp_bytes_t enc;
	void *decoded = NULL;
	const char *why;
	size_t n, checked;

	if (in.len < 4)
		return HEADERS_PROPS_SHORT;
	n = (size_t)b[0] << 24 | (size_t)b[1] << 16 | (size_t)b[2] << 8 |
	    (size_t)b[3];
	if (n < 2 || n > in.len - 4)
		return HEADERS_PROPS_SHORT;
	enc.bytes = (char *)b + 4;
	enc.len = n;
	/* rabbitmq-c 0.11 decodes nested tables by unbounded recursion:
	 * nothing reaches it that wirecheck has not walked first. */
	switch (wirecheck_props(enc.bytes, enc.len, &checked, &why)) {
	case 0:
		break;
	case WIRECHECK_BOUND:
		return HEADERS_PROPS_BOUND;
	default:
		return HEADERS_PROPS_UNDECODABLE;
	}
	if (checked != n)
		return HEADERS_PROPS_LENGTH;
	if (amqp_decode_properties(AMQP_BASIC_CLASS, pool, enc, &decoded) < 0 ||
	    decoded == NULL)
		return HEADERS_PROPS_UNDECODABLE;
	*p = *(amqp_basic_properties_t *)decoded;
	/* rabbitmq-c does not say how much it read: the properties must
	 * take the whole length, or what follows would start in the wrong
	 * place. */
	if (headers_props_size(p) != n)
		return HEADERS_PROPS_LENGTH;
	*used = 4 + n;
	return 0;
}
