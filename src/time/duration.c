/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Duration parsing and formatting shared by the config, the headers and
 * the tools: one units table for both directions.
 */
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
#define NUNITS (sizeof(units) / sizeof(units[0]))

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

/* The largest unit that divides ms exactly (ms itself for 0). */
static size_t
duration_exact_unit(int64_t ms, size_t largest)
{
	size_t u = largest + 1;

	if (ms == 0)
		return 0;
	while (u-- > 1)
		if (ms % units[u].ms == 0)
			break;
	return u;
}

/* ms in the largest unit it reaches, rounded to a tenth: "8.5m". */
static void
duration_about(int64_t ms, char *buf, size_t size)
{
	size_t u = NUNITS;
	int64_t tenths;

	while (u-- > 1)
		if (ms >= units[u].ms)
			break;
	if (u == 0) {
		snprintf(buf, size, "%" PRId64 "ms", ms);
		return;
	}
	tenths = (ms * 10 + units[u].ms / 2) / units[u].ms;
	if (tenths % 10 == 0)
		snprintf(buf, size, "%" PRId64 "%s", tenths / 10,
		         units[u].name);
	else
		snprintf(buf, size, "%" PRId64 ".%d%s", tenths / 10,
		         (int)(tenths % 10), units[u].name);
}

/* Whole seconds in at most two units, the second left out when zero. */
static void
duration_span(int64_t ms, char *buf, size_t size)
{
	int64_t s = ms / 1000;
	size_t u = NUNITS;

	while (u-- > 2)
		if (s * 1000 >= units[u].ms)
			break;
	if (u < 1)
		u = 1;
	{
		int64_t big = s * 1000 / units[u].ms;
		int64_t rest =
		    u > 1 ? s * 1000 % units[u].ms / units[u - 1].ms : 0;
		if (rest != 0)
			snprintf(buf, size, "%" PRId64 "%s%" PRId64 "%s", big,
			         units[u].name, rest, units[u - 1].name);
		else
			snprintf(buf, size, "%" PRId64 "%s", big,
			         units[u].name);
	}
}

void
duration_format_as(int64_t ms, enum duration_style style, char *buf,
                   size_t size)
{
	size_t u;

	switch (style) {
	case DURATION_ABOUT:
		duration_about(ms, buf, size);
		return;
	case DURATION_SPAN:
		duration_span(ms, buf, size);
		return;
	case DURATION_SECONDS:
		u = ms % 1000 == 0 ? 1 : 0;
		break;
	case DURATION_EXACT:
	default:
		u = duration_exact_unit(ms, NUNITS - 1);
		break;
	}
	snprintf(buf, size, "%" PRId64 "%s", ms / units[u].ms, units[u].name);
}

void
duration_format(int64_t ms, char *buf, size_t size)
{
	duration_format_as(ms, DURATION_EXACT, buf, size);
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
