/* SPDX-License-Identifier: Apache-2.0 */
/* Bounds on AMQP 0-9-1 properties before rabbitmq-c decodes them. */
#include "wirecheck.h"

#include <stdint.h>

#define WIRE_STR_(x) #x
#define WIRE_STR(x) WIRE_STR_(x)
#define WIRE_TOO_DEEP                                                          \
	"headers nested deeper than cascade reads (" WIRE_STR(                 \
	    WIRECHECK_DEPTH_MAX) ")"
#define WIRE_TOO_MANY                                                          \
	"more header fields than cascade reads (" WIRE_STR(                    \
	    WIRECHECK_FIELDS_MAX) ")"

/* One open table or array: where it ends, and which it is. */
struct wire_level {
	size_t end;
	int table;
};

static uint32_t
wire_u32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	       (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/*
 * The fixed size of a field value of kind k after its kind octet, as
 * rabbitmq-c's amqp_table.c reads it; -1 for the kinds with a length of
 * their own (S x A F) and for kinds it does not know.
 */
static int
wire_fixed_size(unsigned char k)
{
	switch (k) {
	case AMQP_FIELD_KIND_VOID:
		return 0;
	case AMQP_FIELD_KIND_BOOLEAN:
	case AMQP_FIELD_KIND_I8:
	case AMQP_FIELD_KIND_U8:
		return 1;
	case AMQP_FIELD_KIND_I16:
	case AMQP_FIELD_KIND_U16:
		return 2;
	case AMQP_FIELD_KIND_I32:
	case AMQP_FIELD_KIND_U32:
	case AMQP_FIELD_KIND_F32:
		return 4;
	case AMQP_FIELD_KIND_DECIMAL:
		return 5; /* scale octet, 32-bit value */
	case AMQP_FIELD_KIND_I64:
	case AMQP_FIELD_KIND_U64:
	case AMQP_FIELD_KIND_F64:
	case AMQP_FIELD_KIND_TIMESTAMP:
		return 8;
	default:
		return -1;
	}
}

/* How deep and how many: cascade's own bounds, or the library's. */
struct wire_bounds {
	int depth;     /* containers open at once, the headers table one */
	size_t fields; /* field values at every depth */
	const char *too_deep;
};

static const struct wire_bounds wire_cascade = {
    WIRECHECK_DEPTH_MAX, WIRECHECK_FIELDS_MAX, WIRE_TOO_DEEP};
static const struct wire_bounds wire_library = {
    WIRECHECK_LIBRARY_DEPTH, SIZE_MAX,
    "nested deeper than rabbitmq-c decodes (" WIRE_STR(
        WIRECHECK_LIBRARY_DEPTH) ")"};

/*
 * Walk the fields of one table (table set) or array whose contents are
 * b[o..end), itself depth containers deep, within bd.  Every value must lie
 * inside the table or array that holds it: stricter than rabbitmq-c, which
 * checks only the end of the whole buffer, and what every encoder writes.
 */
static int
wire_walk(const unsigned char *b, size_t o, size_t end, int table, int depth,
          const struct wire_bounds *bd, const char **why)
{
	struct wire_level stack[WIRECHECK_LIBRARY_DEPTH];
	size_t fields = 0;
	int top = 1;
	uint32_t n;

	if (depth < 1 || depth > bd->depth) {
		*why = bd->too_deep;
		return WIRECHECK_BOUND;
	}
	stack[0].end = end;
	stack[0].table = table;
	while (top > 0) {
		size_t e = stack[top - 1].end;
		unsigned char k;
		int fixed;

		if (o == e) {
			top--;
			continue;
		}
		if (stack[top - 1].table) {
			unsigned char keylen = b[o++];
			if (keylen > e - o)
				goto short_;
			o += keylen;
		}
		if (o == e)
			goto short_;
		k = b[o++];
		if (++fields > bd->fields) {
			*why = WIRE_TOO_MANY;
			return WIRECHECK_BOUND;
		}
		fixed = wire_fixed_size(k);
		if (fixed >= 0) {
			if ((size_t)fixed > e - o)
				goto short_;
			o += (size_t)fixed;
			continue;
		}
		if (k != AMQP_FIELD_KIND_UTF8 && k != AMQP_FIELD_KIND_BYTES &&
		    k != AMQP_FIELD_KIND_ARRAY && k != AMQP_FIELD_KIND_TABLE) {
			*why = "a header field of an unknown kind";
			return WIRECHECK_MALFORMED;
		}
		if (e - o < 4)
			goto short_;
		n = wire_u32(b + o);
		o += 4;
		if (n > e - o)
			goto short_;
		if (k == AMQP_FIELD_KIND_UTF8 || k == AMQP_FIELD_KIND_BYTES) {
			o += n;
			continue;
		}
		if (depth + top - 1 == bd->depth) {
			*why = bd->too_deep;
			return WIRECHECK_BOUND;
		}
		stack[top].end = o + n;
		stack[top].table = k == AMQP_FIELD_KIND_TABLE;
		top++;
	}
	return 0;
short_:
	*why = "a header length runs past its end";
	return WIRECHECK_MALFORMED;
}

/* The field table at b[*off] (its 4-byte size first), within len. */
static int
wire_table(const unsigned char *b, size_t len, size_t *off,
           const struct wire_bounds *bd, const char **why)
{
	size_t o = *off;
	uint32_t n;
	int st;

	if (len - o < 4 || (n = wire_u32(b + o)) > len - o - 4) {
		*why = "a header length runs past its end";
		return WIRECHECK_MALFORMED;
	}
	o += 4;
	if ((st = wire_walk(b, o, o + n, 1, 1, bd, why)) < 0)
		return st;
	*off = o + n;
	return 0;
}

int
wirecheck_value(const void *buf, size_t off, size_t end, unsigned char kind,
                size_t *next, const char **why)
{
	const unsigned char *b = buf;
	int fixed = wire_fixed_size(kind);
	uint32_t n;

	if (fixed >= 0) {
		if ((size_t)fixed > end - off)
			goto short_;
		*next = off + (size_t)fixed;
		return 0;
	}
	if (kind != AMQP_FIELD_KIND_UTF8 && kind != AMQP_FIELD_KIND_BYTES &&
	    kind != AMQP_FIELD_KIND_ARRAY && kind != AMQP_FIELD_KIND_TABLE) {
		*why = "a header field of an unknown kind";
		return WIRECHECK_MALFORMED;
	}
	if (end - off < 4 || (n = wire_u32(b + off)) > end - off - 4)
		goto short_;
	*next = off + 4 + n;
	if (kind == AMQP_FIELD_KIND_UTF8 || kind == AMQP_FIELD_KIND_BYTES)
		return 0;
	/* Its contents, two containers deep: the headers table, then it. */
	return wire_walk(b, off + 4, *next, kind == AMQP_FIELD_KIND_TABLE, 2,
	                 &wire_library, why) < 0;
short_:
	*why = "a header length runs past its end";
	return WIRECHECK_MALFORMED;
}

/* The properties in b[0..len), within bd. */
static int
wire_props(const unsigned char *b, size_t len, size_t *used,
           const struct wire_bounds *bd, const char **why)
{
	/* The basic properties in their wire order, from flag bit 15 down. */
	static const struct {
		uint16_t flag;
		char form; /* s: short string, t: table, 1: octet, 8: 64 bits */
	} order[] = {
	    {AMQP_BASIC_CONTENT_TYPE_FLAG, 's'},
	    {AMQP_BASIC_CONTENT_ENCODING_FLAG, 's'},
	    {AMQP_BASIC_HEADERS_FLAG, 't'},
	    {AMQP_BASIC_DELIVERY_MODE_FLAG, '1'},
	    {AMQP_BASIC_PRIORITY_FLAG, '1'},
	    {AMQP_BASIC_CORRELATION_ID_FLAG, 's'},
	    {AMQP_BASIC_REPLY_TO_FLAG, 's'},
	    {AMQP_BASIC_EXPIRATION_FLAG, 's'},
	    {AMQP_BASIC_MESSAGE_ID_FLAG, 's'},
	    {AMQP_BASIC_TIMESTAMP_FLAG, '8'},
	    {AMQP_BASIC_TYPE_FLAG, 's'},
	    {AMQP_BASIC_USER_ID_FLAG, 's'},
	    {AMQP_BASIC_APP_ID_FLAG, 's'},
	    {AMQP_BASIC_CLUSTER_ID_FLAG, 's'},
	};
	size_t o = 2;
	uint16_t flags;
	int st;

	if (len < 2)
		goto short_;
	flags = (uint16_t)(b[0] << 8 | b[1]);
	/* rabbitmq-c 0.11 shifts a second flag word into undefined behaviour
	 * (a 16-bit word promoted to int, shifted by 16 or more). */
	if (flags & 1) {
		*why = "a second property flag word";
		return WIRECHECK_MALFORMED;
	}
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		if (!(flags & order[i].flag))
			continue;
		switch (order[i].form) {
		case 's':
			if (o == len || b[o] > len - o - 1)
				goto short_;
			o += 1 + (size_t)b[o];
			break;
		case 't':
			if ((st = wire_table(b, len, &o, bd, why)) < 0)
				return st;
			break;
		case '1':
			if (o == len)
				goto short_;
			o++;
			break;
		default:
			if (len - o < 8)
				goto short_;
			o += 8;
			break;
		}
	}
	*used = o;
	return 0;
short_:
	*why = "a property runs past the end";
	return WIRECHECK_MALFORMED;
}

int
wirecheck_props(const void *buf, size_t len, size_t *used, const char **why)
{
	return wire_props(buf, len, used, &wire_cascade, why);
}

int
wirecheck_props_library(const void *buf, size_t len, size_t *used,
                        const char **why)
{
	return wire_props(buf, len, used, &wire_library, why);
}

/* One open decoded table or array, and the next of its values to see. */
struct value_level {
	const amqp_table_t *table; /* or NULL for an array */
	const amqp_array_t *array;
	int next;
};

int
wirecheck_table(const amqp_table_t *t, const char **why)
{
	struct value_level stack[WIRECHECK_DEPTH_MAX];
	size_t fields = 0;
	int depth = 1;

	if (t == NULL)
		return 0;
	stack[0].table = t;
	stack[0].array = NULL;
	stack[0].next = 0;
	while (depth > 0) {
		struct value_level *l = &stack[depth - 1];
		const amqp_field_value_t *v;
		int n = l->table != NULL ? l->table->num_entries
		                         : l->array->num_entries;

		if (l->next >= n) {
			depth--;
			continue;
		}
		v = l->table != NULL ? &l->table->entries[l->next].value
		                     : &l->array->entries[l->next];
		l->next++;
		if (++fields > WIRECHECK_FIELDS_MAX) {
			*why = WIRE_TOO_MANY;
			return WIRECHECK_BOUND;
		}
		if (v->kind != AMQP_FIELD_KIND_TABLE &&
		    v->kind != AMQP_FIELD_KIND_ARRAY)
			continue;
		if (depth == WIRECHECK_DEPTH_MAX) {
			*why = WIRE_TOO_DEEP;
			return WIRECHECK_BOUND;
		}
		stack[depth].table =
		    v->kind == AMQP_FIELD_KIND_TABLE ? &v->value.table : NULL;
		stack[depth].array =
		    v->kind == AMQP_FIELD_KIND_ARRAY ? &v->value.array : NULL;
		stack[depth].next = 0;
		depth++;
	}
	return 0;
}
