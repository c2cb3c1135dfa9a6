/* Duration parsing and formatting shared by the config and the headers. */
#include "duration.h"

#include <time.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

struct unit {
	const char *name;
	int64_t ms;
};

/* Longest suffix first is not needed: "ms" is matched whole, never "m". */
static const struct unit units[] = {
    {"ms", 1},          {"s", 1000},         {"m", 60 * 1000},
    {"h", 3600 * 1000}, {"d", 86400 * 1000},
};

static int
is_blank(char c)
{
	return c == ' ' || c == '\t';
}

int
duration_parse(const char *s, size_t len, enum duration_bare bare, int64_t *ms,
               const char **why)
{
	size_t i = 0, end = len, digits;
	int negative = 0;
	uint64_t value = 0, mult = 0;

	while (i < end && is_blank(s[i]))
		i++;
	while (end > i && is_blank(s[end - 1]))
		end--;
	if (i == end) {
		*why = "empty duration";
		return -1;
	}
	if (s[i] == '-' || s[i] == '+') {
		negative = s[i] == '-';
		i++;
	}
	for (digits = 0; i < end && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (value > (UINT64_MAX - d) / 10) {
			*why = "duration out of range";
			return -1;
		}
		value = value * 10 + d;
	}
	if (digits == 0) {
		*why = "duration must start with a number";
		return -1;
	}
	if (i == end) {
		if (bare == DURATION_BARE_REJECT) {
			*why = "duration needs a unit (ms, s, m, h, d)";
			return -1;
		}
		mult = 1;
	} else {
		for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
			size_t n = strlen(units[u].name);
			if (end - i == n &&
			    memcmp(s + i, units[u].name, n) == 0) {
				mult = (uint64_t)units[u].ms;
				break;
			}
		}
		if (mult == 0) {
			*why = "unknown duration unit (use ms, s, m, h, d)";
			return -1;
		}
	}
	if (value > (uint64_t)INT64_MAX / mult) {
		*why = "duration out of range";
		return -1;
	}
	*ms = (int64_t)(value * mult);
	if (negative)
		*ms = -*ms;
	return 0;
}

void
duration_format(int64_t ms, char *buf, size_t size)
{
	size_t u = sizeof(units) / sizeof(units[0]);

	if (ms != 0) {
		while (u-- > 1)
			if (ms % units[u].ms == 0)
				break;
	} else {
		u = 0;
	}
	if (u >= sizeof(units) / sizeof(units[0]))
		u = 0;
	snprintf(buf, size, "%" PRId64 "%s", ms / units[u].ms, units[u].name);
}

static int64_t
clock_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
duration_wall_ms(void)
{
	return clock_ms(CLOCK_REALTIME);
}

int64_t
duration_mono_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}
