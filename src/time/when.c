/* SPDX-License-Identifier: Apache-2.0 */
/*
 * when: command-line times in, ISO 8601 out.  The date is checked against
 * the calendar here, not left to timegm, which silently turns 2026-02-31
 * into a day in March.
 */
#include "when.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "duration.h"

static int
when_leap(int year)
{
	return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

/* Days in month mon (1-12) of year. */
static int
when_month_days(int year, int mon)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30,
	                             31, 31, 30, 31, 30, 31};

	return mon == 2 && when_leap(year) ? 29 : days[mon - 1];
}

/* The two digits at s as a number. */
static int
when_2(const char *s)
{
	return (s[0] - '0') * 10 + (s[1] - '0');
}

int
when_parse_absolute(const char *s, int64_t *out, char *why, size_t whysize)
{
	static const char form[] = "dddd-dd-ddTdd:dd:dd";
	size_t n = strlen(s);
	const char *p;
	struct tm tm;
	int64_t ms, frac = 0, scale = 100;
	char *end;
	int i, year, mon, day, oh, om;

	if (n > 0 && strspn(s, "0123456789") == n) {
		errno = 0;
		ms = strtoll(s, &end, 10);
		if (errno != 0) {
			snprintf(why, whysize, "Unix ms out of range");
			return -1;
		}
		*out = ms;
		return 0;
	}
	for (i = 0; form[i] != '\0'; i++)
		if (form[i] == 'd' ? s[i] < '0' || s[i] > '9' : s[i] != form[i])
			break;
	if (form[i] != '\0') {
		snprintf(why, whysize,
		         "not 2026-11-23T09:00:00Z (ISO 8601) nor Unix ms");
		return -1;
	}
	year = (int)strtol(s, NULL, 10);
	mon = when_2(s + 5);
	day = when_2(s + 8);
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = year - 1900;
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	tm.tm_hour = when_2(s + 11);
	tm.tm_min = when_2(s + 14);
	tm.tm_sec = when_2(s + 17);
	if (mon < 1 || mon > 12) {
		snprintf(why, whysize, "no month %02d", mon);
		return -1;
	}
	if (day < 1 || day > when_month_days(year, mon)) {
		snprintf(why, whysize, "no day %02d in %04d-%02d", day, year,
		         mon);
		return -1;
	}
	if (tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60) {
		snprintf(why, whysize, "no time of day %.8s", s + 11);
		return -1;
	}
	p = s + 19;
	if (*p == '.') {
		if (p[1] < '0' || p[1] > '9') {
			snprintf(why, whysize, "no digit after the '.'");
			return -1;
		}
		for (p++; *p >= '0' && *p <= '9'; p++) {
			frac += (*p - '0') * scale;
			scale /= 10;
		}
	}
	ms = (int64_t)timegm(&tm) * 1000 + frac;
	if (strcmp(p, "Z") == 0) {
		*out = ms;
		return 0;
	}
	if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':' &&
	    sscanf(p + 1, "%2d:%2d", &oh, &om) == 2 && oh < 24 && om < 60) {
		*out = ms - (*p == '+' ? 1 : -1) *
		                ((int64_t)oh * 3600 + om * 60) * 1000;
		return 0;
	}
	snprintf(why, whysize, "no Z or +HH:MM after the time");
	return -1;
}

int
when_parse(const char *s, int64_t now, int64_t *out, char *why, size_t whysize)
{
	const char *dwhy;
	int64_t ms;

	size_t n = strlen(s);

	/* Unix ms, or what looks like a date: its own error says more
	 * than "not a duration". */
	if ((n > 0 && strspn(s, "0123456789") == n) ||
	    (n > 4 && strspn(s, "0123456789") == 4 && s[4] == '-'))
		return when_parse_absolute(s, out, why, whysize);
	if (duration_parse(s, n, DURATION_BARE_REJECT, &ms, &dwhy) < 0) {
		snprintf(why, whysize, "neither a time nor a duration");
		return -1;
	}
	if ((ms > 0 && now > INT64_MAX - ms) ||
	    (ms < 0 && now < INT64_MIN - ms)) {
		snprintf(why, whysize, "too far from now");
		return -1;
	}
	*out = now + ms;
	return 0;
}

void
when_format(int64_t ms, char *buf, size_t size)
{
	time_t s = (time_t)(ms / 1000);
	int frac = (int)(ms % 1000);
	struct tm tm;
	char day[32];

	if (frac < 0) {
		frac += 1000;
		s--;
	}
	if (gmtime_r(&s, &tm) == NULL ||
	    strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
		snprintf(buf, size, "%" PRId64 "ms", ms);
		return;
	}
	snprintf(buf, size, "%s.%03dZ", day, frac);
}

void
when_relative(int64_t delta, char *buf, size_t size)
{
	int64_t a = delta < 0 ? -delta : delta;
	char span[48];

	if (a < 1000) {
		snprintf(buf, size, "now");
		return;
	}
	duration_format_as(a, DURATION_SPAN, span, sizeof(span));
	snprintf(buf, size, delta < 0 ? "%s ago" : "in %s", span);
}
