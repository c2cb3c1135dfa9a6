/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer: cron_parse on any bytes (a header's); what parses steps
 * forward, strictly, from an instant the input picks, in UTC and in a
 * zone with daylight saving, and counts what it stepped.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "zone.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LIMIT INT64_C(253402300799999)

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct zone berlin;
	static int loaded;
	struct cron c;
	char err[160];
	int64_t t, a, u;
	uint32_t seed = 0;

	if (!loaded) {
		loaded = zone_load(&berlin, "Europe/Berlin", 13, NULL, err,
		                   sizeof(err)) == 0
		             ? 1
		             : -1;
	}
	if (cron_parse(&c, (const char *)data, size, err, sizeof(err)) < 0)
		return 0;
	for (size_t i = 0; i < size; i++)
		seed = seed * 31 + data[i];
	/* From somewhere in 1970 to 2100. */
	a = (int64_t)(seed % 4102444800u) * 1000 + seed % 1000;
	for (int z = 0; z < 2; z++) {
		const struct zone *zp = z && loaded == 1 ? &berlin : NULL;
		t = a;
		for (int k = 1; k <= 5; k++) {
			u = cron_next(&c, zp, t, LIMIT);
			if (u < 0)
				break;
			if (u <= t || u % 1000 != 0)
				abort(); /* strictly later, whole seconds */
			t = u;
			/* Counting over a short span only: it costs days. */
			if (t - a < INT64_C(400) * 86400000 &&
			    cron_count(&c, zp, a, t) != k)
				abort();
		}
	}
	return 0;
}
