/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer: zone_parse on any bytes; bytes that do not start "TZif" are
 * also tried as the footer of a minimal image, to reach the POSIX TZ
 * parser and the rule directly.  A zone that parses must answer every
 * instant with a span that holds it, asked again from its start gives the
 * same span, and whose ends are changes of offset.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zone.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_at(const struct zone *z, int64_t t)
{
	int64_t s, e, s2, e2;
	int32_t off = zone_offset(z, t, &s, &e);

	if (off < -25 * 3600 || off > 25 * 3600 || s > t || t >= e)
		abort();
	if (s > -ZONE_T_LIMIT) {
		if (zone_offset(z, s, &s2, &e2) != off || s2 != s || e2 != e)
			abort(); /* the same span from its start */
		if (zone_offset(z, s - 1, NULL, NULL) == off)
			abort(); /* a start is a change */
	}
	if (e <= ZONE_T_LIMIT) {
		if (zone_offset(z, e - 1, NULL, NULL) != off)
			abort();
		if (zone_offset(z, e, NULL, NULL) == off)
			abort(); /* an end is a change */
	}
}

static void
check(const struct zone *z, const uint8_t *data, size_t size)
{
	static const int64_t fixed[] = {
	    -ZONE_T_LIMIT,         INT64_C(-2208988800), 0,
	    INT64_C(1000000000),   INT64_C(2140045200),  INT64_C(4102444800),
	    INT64_C(253402300799), ZONE_T_LIMIT};
	int64_t t;
	size_t i;

	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		check_at(z, fixed[i]);
	/* and two instants taken from the input's last bytes */
	for (i = 0; i + 8 <= size && i < 16; i += 8) {
		memcpy(&t, data + size - 8 - i, 8);
		check_at(z, t % (ZONE_T_LIMIT + 1));
	}
}

/* A version 2 image with no transitions, one type (UTC) and the footer. */
static size_t
footer_image(unsigned char *buf, const uint8_t *data, size_t size)
{
	size_t n = 0;

	memset(buf, 0, 2 * 44 + 10);
	memcpy(buf, "TZif2", 5);
	memcpy(buf + 44, "TZif2", 5);
	buf[44 + 39] = 1; /* one type */
	buf[44 + 43] = 4; /* four bytes of abbreviations */
	n = 2 * 44 + 6 + 4;
	buf[n++] = '\n';
	memcpy(buf + n, data, size);
	n += size;
	buf[n++] = '\n';
	return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char buf[512];
	struct zone z;
	char err[256];

	if (zone_parse(&z, data, size, err, sizeof(err)) == 0) {
		check(&z, data, size);
		zone_free(&z);
	}
	if (size < 4 || memcmp(data, "TZif", 4) == 0 || size > 256)
		return 0;
	if (zone_parse(&z, buf, footer_image(buf, data, size), err,
	               sizeof(err)) == 0) {
		check(&z, data, size);
		zone_free(&z);
	}
	return 0;
}
