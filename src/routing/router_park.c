/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The names of parkings and sources, and parking a route with its reason
 * (router.h): what every file of the router, and the verdict, call.
 */
#include "router.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"
#include "headers.h"

const char *
router_park_name(enum park_kind kind)
{
	static const char *const names[] = {
#define PARK_NAME(name) #name,
	    ROUTER_PARK_KINDS(PARK_NAME)
#undef PARK_NAME
	};

	return (unsigned)kind < PARK_KINDS ? names[kind] : "unknown";
}

const char *
router_source_name(enum route_source src)
{
	static const char *const names[] = {
#define SOURCE_NAME(kind, name) #name,
	    ROUTER_SOURCES(SOURCE_NAME)
#undef SOURCE_NAME
	};

	return (unsigned)src < ROUTE_SOURCES ? names[src] : "unknown";
}

void
router_vpark(struct route *r, enum park_kind kind, const char *fmt, va_list ap)
{
	r->action = ROUTE_PARK;
	r->park = kind;
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
}

void
router_park(struct route *r, enum park_kind kind, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	router_vpark(r, kind, fmt, ap);
	va_end(ap);
}

void
router_park_header(struct route *r, const char *key,
                   const amqp_field_value_t *v, const char *why)
{
	char value[ESCAPE_MAX_FACTOR * 48 + 8];
	amqp_bytes_t b;
	int64_t n;

	if (v == NULL)
		value[0] = '\0';
	else if (headers_string(v, &b) == 0) {
		value[0] = ' ';
		value[1] = '"';
		escape_bytes(b.bytes, b.len, 48, ESCAPE_QUOTED, value + 2,
		             sizeof(value) - 3);
		strcat(value, "\"");
	} else if (headers_integer(v, &n) == 1)
		snprintf(value, sizeof(value), " %" PRId64, n);
	else
		snprintf(value, sizeof(value), " (a field of kind '%c')",
		         v->kind >= 0x21 && v->kind < 0x7f ? v->kind : '?');
	router_park(r, PARK_bad_header, "%s%s: %s", key, value, why);
}
