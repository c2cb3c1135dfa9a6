/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What test_zone.c and test_zone_files.c share: where Debian's tzdata is,
 * two instants, loading a zone and checking one span of it.  Static
 * inline, so a file that leaves one unused is not warned.
 */
#ifndef CASCADE_TEST_ZONE_HELPERS_H
#define CASCADE_TEST_ZONE_HELPERS_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "zone.h"

#define ZONEINFO "/usr/share/zoneinfo"
#define T1970 INT64_C(0)
#define T2300 INT64_C(10413792000)

static inline void
load(struct zone *z, const char *name)
{
	char err[256] = "";

	cr_assert_eq(zone_load(z, name, strlen(name), NULL, err, sizeof(err)),
	             0, "%s: %s", name, err);
	cr_assert_str_eq(z->name, name);
}

/* zone_offset(t) is off over exactly [start, end). */
static inline void
expect_span(const struct zone *z, int64_t t, int32_t off, int64_t start,
            int64_t end)
{
	int64_t s = 7, e = 7;
	int32_t got = zone_offset(z, t, &s, &e);

	cr_assert_eq(got, off, "%s at %lld: offset %d, want %d", z->name,
	             (long long)t, got, off);
	cr_assert_eq(s, start, "%s at %lld: start %lld, want %lld", z->name,
	             (long long)t, (long long)s, (long long)start);
	cr_assert_eq(e, end, "%s at %lld: end %lld, want %lld", z->name,
	             (long long)t, (long long)e, (long long)end);
}

#endif
