/* SPDX-License-Identifier: Apache-2.0 */
/* Cron expressions and their instants in a zone (cron.h). */
#include "cron.h"

#include <stdio.h>
#include <string.h>

#define DAY 86400
/* The Gregorian calendar repeats every 400 years, to the weekday. */
#define CYCLE_DAYS INT64_C(146097)
#define NONE INT64_MIN

enum field_index { F_SEC, F_MIN, F_HOUR, F_DOM, F_MONTH, F_DOW, F_COUNT };

struct field {
	const char *name;
	int lo, hi;
	const char *const *names; /* three letters each, from lo */
};

static const char *const month_names[] = {"JAN", "FEB", "MAR", "APR",
                                          "MAY", "JUN", "JUL", "AUG",
                                          "SEP", "OCT", "NOV", "DEC"};
static const char *const day_names[] = {"SUN", "MON", "TUE", "WED",
                                        "THU", "FRI", "SAT"};

static const struct field fields[F_COUNT] = {
    {"second", 0, 59, NULL},       {"minute", 0, 59, NULL},
    {"hour", 0, 23, NULL},         {"day-of-month", 1, 31, NULL},
    {"month", 1, 12, month_names}, {"day-of-week", 0, 7, day_names},
};

static const struct {
	const char *name, *expr;
} macros[] = {
    {"@yearly", "0 0 0 1 1 *"},  {"@annually", "0 0 0 1 1 *"},
    {"@monthly", "0 0 0 1 * *"}, {"@weekly", "0 0 0 * * 0"},
    {"@daily", "0 0 0 * * *"},   {"@midnight", "0 0 0 * * *"},
    {"@hourly", "0 0 * * * *"},
};

static int64_t
fdiv(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* A civil date from days since 1970-01-01 (H. Hinnant's). */
struct civil {
	int64_t y;
	unsigned m, d, wday, mdays;
};

static int
leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static void
civil_from_days(int64_t z, struct civil *c)
{
	static const unsigned char len[] = {31, 28, 31, 30, 31, 30,
	                                    31, 31, 30, 31, 30, 31};
	int64_t era, y;
	unsigned doe, yoe, doy, mp;

	z += 719468;
	era = fdiv(z, CYCLE_DAYS);
	doe = (unsigned)(z - era * CYCLE_DAYS);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	y = (int64_t)yoe + era * 400;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	c->d = doy - (153 * mp + 2) / 5 + 1;
	c->m = mp < 10 ? mp + 3 : mp - 9;
	c->y = y + (c->m <= 2);
	/* 1970-01-01 was a Thursday. */
	c->wday = (unsigned)(((z - 719468) % 7 + 7 + 4) % 7);
	c->mdays = len[c->m - 1] + (c->m == 2 && leap(c->y));
}

/* The first bit of mask at or after from, below n; -1 when none. */
static int
next_bit(uint64_t mask, int from, int n)
{
	if (from >= n || from >= 64)
		return -1;
	mask &= ~UINT64_C(0) << from;
	if (n < 64)
		mask &= (UINT64_C(1) << n) - 1;
	return mask == 0 ? -1 : __builtin_ctzll(mask);
}

static uint64_t
below(int k)
{
	return k <= 0 ? 0 : k >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << k) - 1;
}

/*
 * Parsing.
 */

static int
fail(char *err, size_t errlen, int f, const char *item, size_t len,
     const char *why)
{
	snprintf(err, errlen, "%s field '%.*s': %s", fields[f].name,
	         (int)(len > 40 ? 40 : len), item, why);
	return -1;
}

/* A value of field f at *p (digits, or a name): 0 with *v, or -1. */
static int
parse_value(int f, const char **p, const char *end, int *v)
{
	const char *s = *p;
	int n = 0, i, k;

	if (s < end && *s >= '0' && *s <= '9') {
		for (i = 0; s < end && *s >= '0' && *s <= '9'; s++, i++) {
			if (i >= 4)
				return -1;
			n = n * 10 + (*s - '0');
		}
		*v = n;
		*p = s;
		return 0;
	}
	if (fields[f].names == NULL || end - s < 3)
		return -1;
	/* Seven day names (7 is a number only), twelve month names. */
	for (i = 0; i < (f == F_DOW ? 7 : 12); i++) {
		const char *name = fields[f].names[i];
		for (k = 0; k < 3; k++)
			if ((s[k] & ~0x20) != name[k])
				break;
		if (k == 3) {
			*v = fields[f].lo + i;
			*p = s + 3;
			return 0;
		}
	}
	return -1;
}

/* One item of field f, [s, end), into *mask; extensions into c. */
static int
parse_item(struct cron *c, int f, const char *s, const char *end,
           uint64_t *mask, char *err, size_t errlen)
{
	const struct field *fd = &fields[f];
	const char *p = s;
	size_t len = (size_t)(end - s);
	int a, b, step = 1, v;
	char why[64];

	if (f == F_DOM && len == 1 && *s == 'L') {
		c->dom_last = 1;
		return 0;
	}
	if (f == F_DOM && len == 2 && s[0] == 'L' && s[1] == 'W') {
		c->dom_last_near = 1;
		return 0;
	}
	if (*p == '*' || (*p == '?' && (f == F_DOM || f == F_DOW))) {
		a = fd->lo;
		b = f == F_DOW ? 6 : fd->hi;
		p++;
	} else {
		if (parse_value(f, &p, end, &a) < 0)
			return fail(err, errlen, f, s, len,
			            "expected a value, *, or a range");
		if (a < fd->lo || a > fd->hi) {
			snprintf(why, sizeof(why), "%d is out of range %d-%d",
			         a, fd->lo, fd->hi);
			return fail(err, errlen, f, s, len, why);
		}
		b = a;
		if (p == end)
			goto range;
		if (f == F_DOM && *p == 'W' && p + 1 == end) {
			c->dom_near |= (uint32_t)1 << a;
			return 0;
		}
		if (f == F_DOW && *p == 'L' && p + 1 == end) {
			c->dow_last |= (uint8_t)(1u << (a % 7));
			return 0;
		}
		if (f == F_DOW && *p == '#') {
			p++;
			if (parse_value(f, &p, end, &v) < 0 || p != end ||
			    v < 1 || v > 5)
				return fail(err, errlen, f, s, len,
				            "# must be followed by 1 to 5");
			c->dow_nth[a % 7] |= (uint8_t)(1u << (v - 1));
			return 0;
		}
		if (*p == '-') {
			p++;
			if (parse_value(f, &p, end, &b) < 0)
				return fail(err, errlen, f, s, len,
				            "a range needs an end");
			if (b < fd->lo || b > fd->hi) {
				snprintf(why, sizeof(why),
				         "%d is out of range %d-%d", b, fd->lo,
				         fd->hi);
				return fail(err, errlen, f, s, len, why);
			}
			if (b < a)
				return fail(
				    err, errlen, f, s, len,
				    "a range must not wrap (write two)");
		} else if (*p == '/') {
			b = f == F_DOW ? 6 : fd->hi;
		}
	}
	if (p < end && *p == '/') {
		p++;
		if (parse_value(F_SEC, &p, end, &step) < 0 || step < 1 ||
		    step > fd->hi - fd->lo + 1)
			return fail(err, errlen, f, s, len,
			            "a step must be 1 or more, within the "
			            "field's range");
	}
range:
	if (p != end)
		return fail(err, errlen, f, s, len, "unexpected characters");
	for (v = a; v <= b; v += step)
		*mask |= UINT64_C(1) << (f == F_DOW ? v % 7 : v);
	return 0;
}

static int
parse_field(struct cron *c, int f, const char *s, const char *end, char *err,
            size_t errlen)
{
	uint64_t mask = 0;
	const char *item = s, *q;

	if (f == F_DOM)
		c->dom_any = *s == '*' || *s == '?';
	if (f == F_DOW)
		c->dow_any = *s == '*' || *s == '?';
	if (f == F_HOUR)
		c->interval = *s == '*';
	for (q = s; q <= end; q++) {
		if (q < end && *q != ',')
			continue;
		if (q == item)
			return fail(err, errlen, f, s, (size_t)(end - s),
			            "an empty item");
		if (parse_item(c, f, item, q, &mask, err, errlen) < 0)
			return -1;
		item = q + 1;
	}
	/* 7/2 and the like: a field that names nothing never fires. */
	if (mask == 0 &&
	    !(f == F_DOM && (c->dom_last || c->dom_last_near || c->dom_near)) &&
	    !(f == F_DOW && (c->dow_last || c->dow_nth[0] || c->dow_nth[1] ||
	                     c->dow_nth[2] || c->dow_nth[3] || c->dow_nth[4] ||
	                     c->dow_nth[5] || c->dow_nth[6])))
		return fail(err, errlen, f, s, (size_t)(end - s),
		            "names no value");
	switch (f) {
	case F_SEC:
		c->sec = mask;
		break;
	case F_MIN:
		c->min = mask;
		break;
	case F_HOUR:
		c->hour = (uint32_t)mask;
		break;
	case F_DOM:
		c->dom = (uint32_t)mask;
		break;
	case F_MONTH:
		c->month = (uint16_t)mask;
		break;
	default:
		c->dow = (uint8_t)mask;
		break;
	}
	return 0;
}

static int64_t match_from(const struct cron *c, int64_t lo, int64_t hi);

int
cron_parse(struct cron *c, const char *s, size_t len, char *err, size_t errlen)
{
	const char *start[F_COUNT], *stop[F_COUNT], *p, *end;
	size_t i, n = 0;
	int f, first;

	memset(c, 0, sizeof(*c));
	if (len == 0 || len > CRON_EXPR_MAX) {
		snprintf(err, errlen, "must be 1 to %d bytes", CRON_EXPR_MAX);
		return -1;
	}
	for (i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) {
			snprintf(err, errlen,
			         "byte %zu: not a printable ASCII character",
			         i + 1);
			return -1;
		}
	if (s[0] == '@') {
		for (i = 0; i < sizeof(macros) / sizeof(macros[0]); i++)
			if (strlen(macros[i].name) == len &&
			    strncmp(macros[i].name, s, len) == 0)
				return cron_parse(c, macros[i].expr,
				                  strlen(macros[i].expr), err,
				                  errlen);
		snprintf(err, errlen,
		         "'%.*s': not one of @yearly, @annually, @monthly, "
		         "@weekly, @daily, @midnight, @hourly (intervals: "
		         "x-cascade-every)",
		         (int)(len > 40 ? 40 : len), s);
		return -1;
	}
	for (p = s, end = s + len; p < end;) {
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (p == end)
			break;
		if (n == F_COUNT) {
			snprintf(err, errlen,
			         "expected 5 or 6 fields, found more");
			return -1;
		}
		start[n] = p;
		while (p < end && *p != ' ' && *p != '\t')
			p++;
		stop[n++] = p;
	}
	if (n != 5 && n != 6) {
		snprintf(err, errlen, "expected 5 or 6 fields, found %zu", n);
		return -1;
	}
	first = n == 5 ? F_MIN : F_SEC;
	c->sec = 1; /* five fields: at second 0 */
	for (f = first; f < F_COUNT; f++)
		if (parse_field(c, f, start[f - first], stop[f - first], err,
		                errlen) < 0)
			return -1;
	if (match_from(c, 0, CYCLE_DAYS * DAY) == NONE) {
		snprintf(err, errlen,
		         "never fires: no day matches its day-of-month, "
		         "month and day-of-week in any year");
		return -1;
	}
	return 0;
}

/*
 * Matching local times: seconds since 1970-01-01T00:00 on the zone's
 * clock.
 */

/* The weekday nearest day n of c's month, within it (nW); 0: none. */
static unsigned
near_weekday(const struct civil *c, unsigned n)
{
	unsigned w;

	if (n > c->mdays)
		return 0;
	w = (c->wday + 35 + n - c->d) % 7;
	if (w == 6)
		return n == 1 ? 3 : n - 1;
	if (w == 0)
		return n == c->mdays ? n - 2 : n + 1;
	return n;
}

static int
day_matches(const struct cron *cr, const struct civil *c)
{
	int dm, wm;
	unsigned n, last;
	uint32_t near;

	if (!((cr->month >> c->m) & 1))
		return 0;
	dm = (cr->dom >> c->d) & 1;
	if (!dm && cr->dom_last)
		dm = c->d == c->mdays;
	if (!dm && cr->dom_last_near) {
		last = (c->wday + 35 + c->mdays - c->d) % 7;
		dm = c->d == c->mdays - (last == 6 ? 1 : last == 0 ? 2 : 0);
	}
	for (near = cr->dom_near; !dm && near != 0; near &= near - 1) {
		n = (unsigned)__builtin_ctz(near);
		dm = near_weekday(c, n) == c->d;
	}
	wm = (cr->dow >> c->wday) & 1;
	if (!wm && ((cr->dow_last >> c->wday) & 1))
		wm = c->d + 7 > c->mdays;
	if (!wm)
		wm = (cr->dow_nth[c->wday] >> ((c->d - 1) / 7)) & 1;
	if (cr->dom_any || cr->dow_any)
		return dm && wm;
	return dm || wm;
}

/* The first second of the day at or after tod that c names; -1: none. */
static int
first_tod(const struct cron *c, int tod)
{
	int h0 = tod / 3600, m0 = tod / 60 % 60, s0 = tod % 60, h, m, s;

	for (h = next_bit(c->hour, h0, 24); h >= 0;
	     h = next_bit(c->hour, h + 1, 24))
		for (m = next_bit(c->min, h == h0 ? m0 : 0, 60); m >= 0;
		     m = next_bit(c->min, m + 1, 60)) {
			s = next_bit(c->sec, h == h0 && m == m0 ? s0 : 0, 60);
			if (s >= 0)
				return h * 3600 + m * 60 + s;
		}
	return -1;
}

/* How many seconds of a day below tod (0 to DAY) c names. */
static int64_t
tod_below(const struct cron *c, int tod)
{
	int h = tod / 3600, m = tod / 60 % 60, s = tod % 60;
	int64_t ns = __builtin_popcountll(c->sec),
	        nm = __builtin_popcountll(c->min), n;

	if (tod >= DAY)
		return __builtin_popcount(c->hour) * nm * ns;
	n = __builtin_popcountll(c->hour & below(h)) * nm * ns;
	if ((c->hour >> h) & 1) {
		n += __builtin_popcountll(c->min & below(m)) * ns;
		if ((c->min >> m) & 1)
			n += __builtin_popcountll(c->sec & below(s));
	}
	return n;
}

/*
 * The first local second in [lo, hi) that c names, looking no further
 * than one calendar cycle; NONE when there is none.
 */
static int64_t
match_from(const struct cron *c, int64_t lo, int64_t hi)
{
	int64_t day = fdiv(lo, DAY), stop = day + CYCLE_DAYS + 1;
	int tod = (int)(lo - day * DAY), t;
	struct civil cv;

	for (; day <= stop && day * DAY < hi; tod = 0) {
		civil_from_days(day, &cv);
		if (!((c->month >> cv.m) & 1)) {
			day += cv.mdays - cv.d + 1;
			continue;
		}
		if (day_matches(c, &cv) && (t = first_tod(c, tod)) >= 0)
			return day * DAY + t < hi ? day * DAY + t : NONE;
		day++;
	}
	return NONE;
}

/* How many local seconds in [lo, hi) c names. */
static int64_t
count_local(const struct cron *c, int64_t lo, int64_t hi)
{
	int64_t day = fdiv(lo, DAY), n = 0, a, b;
	struct civil cv;

	while (day * DAY < hi) {
		civil_from_days(day, &cv);
		if (!((c->month >> cv.m) & 1)) {
			day += cv.mdays - cv.d + 1;
			continue;
		}
		if (day_matches(c, &cv)) {
			a = lo > day * DAY ? lo - day * DAY : 0;
			b = hi < (day + 1) * DAY ? hi - day * DAY : DAY;
			n += tod_below(c, (int)b) - tod_below(c, (int)a);
		}
		day++;
	}
	return n;
}

/*
 * Instants: the zone's offsets, span by span.
 */

struct span {
	int64_t start, end; /* [start, end), Unix s */
	int32_t off;        /* in force in it */
	int32_t before;     /* in force just before start (off when none) */
};

static void
span_at(const struct zone *z, int64_t t, struct span *s)
{
	if (z == NULL) {
		s->start = INT64_MIN;
		s->end = INT64_MAX;
		s->off = s->before = 0;
		return;
	}
	s->off = zone_offset(z, t, &s->start, &s->end);
	s->before = s->start == INT64_MIN
	                ? s->off
	                : zone_offset(z, s->start - 1, NULL, NULL);
}

/* A fixed time of day that the clocks skipped at the span's start fires
 * at its first instant. */
static int
gap_fires(const struct cron *c, const struct span *s)
{
	return !c->interval && s->before < s->off &&
	       match_from(c, s->start + s->before, s->start + s->off) != NONE;
}

/* The first local second of the span, from t on, that may fire: a fixed
 * time repeated at its start fired in the pass before. */
static int64_t
span_local_from(const struct cron *c, const struct span *s, int64_t t)
{
	int64_t lo = t + s->off;

	if (!c->interval && s->before > s->off && lo < s->start + s->before)
		lo = s->start + s->before;
	return lo;
}

/* The most spans a search crosses: two a year for 2,000 years. */
#define SPANS_MAX 4096

int64_t
cron_next(const struct cron *c, const struct zone *z, int64_t after,
          int64_t limit)
{
	int64_t t = fdiv(after, 1000) + 1, lim = fdiv(limit, 1000), hi, m;
	struct span s;
	int i;

	for (i = 0; i < SPANS_MAX && t <= lim; i++) {
		span_at(z, t, &s);
		if (t == s.start && gap_fires(c, &s))
			return t * 1000;
		hi = s.end > lim ? lim + 1 : s.end;
		m = match_from(c, span_local_from(c, &s, t), hi + s.off);
		if (m != NONE)
			return (m - s.off) * 1000;
		if (s.end > lim || s.end <= t)
			break;
		t = s.end;
	}
	return -1;
}

int64_t
cron_count(const struct cron *c, const struct zone *z, int64_t a, int64_t b)
{
	int64_t t = fdiv(a, 1000) + 1, last = fdiv(b, 1000), n = 0, lo, hi, k;
	struct span s;
	int gap;

	while (t <= last) {
		span_at(z, t, &s);
		gap = t == s.start && gap_fires(c, &s);
		n += gap;
		hi = (s.end > last ? last + 1 : s.end) + s.off;
		lo = span_local_from(c, &s, t);
		if (lo < hi) {
			k = count_local(c, lo, hi);
			/* The gap's firing is the span's first instant:
			 * once. */
			if (gap && lo == t + s.off &&
			    count_local(c, lo, lo + 1) == 1)
				k--;
			n += k;
		}
		if (s.end > last || s.end <= t)
			break;
		t = s.end;
	}
	return n;
}

int64_t
cron_nth(const struct cron *c, const struct zone *z, int64_t a, int64_t n,
         int64_t b)
{
	int64_t lo, hi, mid, t = a;

	if (n <= 16) {
		while (n-- > 0 && t >= 0)
			t = cron_next(c, z, t, b);
		return t;
	}
	/* The smallest second s with n firings in (a, s]. */
	lo = fdiv(a, 1000) + 1;
	hi = fdiv(b, 1000);
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (cron_count(c, z, a, mid * 1000) >= n)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo * 1000;
}
