/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: duration_parse on any bytes; format round-trips what parses. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why;
	char buf[64];
	int64_t ms, again;

	if (duration_parse((const char *)data, size, DURATION_BARE_MS, &ms,
	                   &why) == 0) {
		duration_format(ms, buf, sizeof(buf));
		if (duration_parse(buf, strlen(buf), DURATION_BARE_REJECT,
		                   &again, &why) != 0 ||
		    again != ms)
			abort(); /* what we print must read back the same */
	}
	return 0;
}
