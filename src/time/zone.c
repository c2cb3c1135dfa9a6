/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tz database reader (zone.h): TZif files by RFC 8536, the POSIX TZ
 * string of their footer, and the span of an offset across both.
 */
#include "zone.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ZONE_DIR "/usr/share/zoneinfo"
#define FILE_MAX (256 * 1024)
#define OFFSET_MAX (25 * 3600)    /* |UTC offset|, seconds */
#define AT_MAX (INT64_C(1) << 59) /* |transition|: zic's own lower bound */
#define DAY INT64_C(86400)
#define RULE_TIME_MAX_H 167 /* RFC 8536's extension of POSIX's 24 */
/* The Gregorian calendar repeats every 400 years, and so does a rule: a
 * rule unchanged for that long never changes. */
#define RULE_YEARS 401

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* ---- the calendar: proleptic Gregorian, days since 1970-01-01 ---- */

static int64_t
floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static int
is_leap(int64_t y)
{
	return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

/* H. Hinnant's days_from_civil: valid far beyond any year used here. */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy;

	y -= m <= 2;
	era = floor_div(y, 400);
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

/* The (UTC) year of instant t. */
static int64_t
year_of(int64_t t)
{
	int64_t z = floor_div(t, DAY) + 719468;
	int64_t era = floor_div(z, 146097), doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);

	return era * 400 + yoe + ((5 * doy + 2) / 153 >= 10);
}

static int
month_days(int64_t y, int m)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30,
	                             31, 31, 30, 31, 30, 31};

	return days[m - 1] + (m == 2 && is_leap(y));
}

/* ---- the footer's rule ---- */

/* The instant of change c in year y, its local time read at offset utoff. */
static int64_t
change_at(const struct zone_change *c, int64_t y, int32_t utoff)
{
	int64_t day, first;
	int wday;

	if (c->kind == 'J') {
		day = days_from_civil(y, 1, 1) + c->day - 1 +
		      (c->day >= 60 && is_leap(y));
	} else if (c->kind == 'N') {
		day = days_from_civil(y, 1, 1) + c->day;
	} else {
		first = days_from_civil(y, c->month, 1);
		/* 1970-01-01 was a Thursday (4). */
		wday = (int)(first + 4 - floor_div(first + 4, 7) * 7);
		day = first + (c->day - wday + 7) % 7 + (c->week - 1) * 7;
		while (day >= first + month_days(y, c->month))
			day -= 7;
	}
	return day * DAY + c->seconds - utoff;
}

/* The rule's offset at t: as glibc reads it, by t's UTC year. */
static int32_t
rule_at(const struct zone_rule *r, int64_t t)
{
	int64_t y, s, e;

	if (!r->has_dst)
		return r->std;
	y = year_of(t);
	s = change_at(&r->start, y, r->std);
	e = change_at(&r->end, y, r->dst);
	if (s <= e ? (t >= s && t < e) : (t < e || t >= s))
		return r->dst;
	return r->std;
}

/*
 * Where rule_at may change within year y, ascending: the year's start
 * (rule_at takes a new year's changes there) and the two changes when they
 * fall inside the year.
 */
static int
rule_breaks(const struct zone_rule *r, int64_t y, int64_t c[3])
{
	int64_t y0 = days_from_civil(y, 1, 1) * DAY;
	int64_t y1 = days_from_civil(y + 1, 1, 1) * DAY;
	int64_t s = change_at(&r->start, y, r->std);
	int64_t e = change_at(&r->end, y, r->dst), tmp;
	int n = 0;

	c[n++] = y0;
	if (s > y0 && s < y1)
		c[n++] = s;
	if (e > y0 && e < y1 && e != s)
		c[n++] = e;
	if (n == 3 && c[1] > c[2]) {
		tmp = c[1];
		c[1] = c[2];
		c[2] = tmp;
	}
	return n;
}

/* The first instant after t at which the rule's offset is not cur. */
static int64_t
rule_next(const struct zone_rule *r, int64_t t, int32_t cur)
{
	int64_t c[3], y = year_of(t);
	int n, i, k;

	if (!r->has_dst)
		return INT64_MAX;
	for (k = 0; k <= RULE_YEARS; k++) {
		n = rule_breaks(r, y + k, c);
		for (i = 0; i < n; i++)
			if (c[i] > t && rule_at(r, c[i]) != cur)
				return c[i];
	}
	return INT64_MAX;
}

/*
 * The instant at or before t from which the rule's offset has been cur;
 * found rather than lo, where the rule begins: then `earlier`.
 */
static int64_t
rule_prev(const struct zone_rule *r, int64_t t, int32_t cur, int64_t lo,
          int64_t earlier)
{
	int64_t c[3], y = year_of(t);
	int n, i, k;

	if (!r->has_dst)
		return earlier;
	for (k = 0; k <= RULE_YEARS; k++) {
		n = rule_breaks(r, y - k, c);
		for (i = n - 1; i >= 0; i--) {
			if (c[i] > t)
				continue;
			if (c[i] <= lo)
				return earlier;
			if (rule_at(r, c[i] - 1) != cur)
				return c[i];
		}
	}
	return earlier;
}

/* ---- the footer: a POSIX TZ string ---- */

struct tzs {
	const char *s;
	size_t i, n;
};

static int
tz_peek(const struct tzs *p)
{
	return p->i < p->n ? (unsigned char)p->s[p->i] : -1;
}

/* 0 when the next character is c, taken. */
static int
tz_eat(struct tzs *p, int c)
{
	if (tz_peek(p) != c)
		return -1;
	p->i++;
	return 0;
}

static int
is_alpha(int c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static int
is_digit(int c)
{
	return c >= '0' && c <= '9';
}

/* A name: three or more letters, or <...> of letters, digits, + and -. */
static int
tz_name(struct tzs *p)
{
	size_t from;
	int c;

	if (tz_peek(p) == '<') {
		from = ++p->i;
		while ((c = tz_peek(p)) != -1 &&
		       (is_alpha(c) || is_digit(c) || c == '+' || c == '-'))
			p->i++;
		if (tz_peek(p) != '>' || p->i - from < 3)
			return -1;
		p->i++;
		return 0;
	}
	from = p->i;
	while (is_alpha(tz_peek(p)))
		p->i++;
	return p->i - from >= 3 ? 0 : -1;
}

/* Decimal digits, at least one, the value within [min, max]. */
static int
tz_num(struct tzs *p, int min, int max, int *v)
{
	size_t from = p->i;

	*v = 0;
	while (is_digit(tz_peek(p)) && *v <= max)
		*v = *v * 10 + (p->s[p->i++] - '0');
	return p->i > from && *v >= min && *v <= max ? 0 : -1;
}

/* [+-]hh[:mm[:ss]] with hh at most max_h, into seconds. */
static int
tz_hms(struct tzs *p, int max_h, int32_t *secs)
{
	int sign = tz_eat(p, '-') == 0 ? -1 : 1, h, ms[2] = {0, 0}, k;

	if (sign == 1)
		tz_eat(p, '+');
	if (tz_num(p, 0, max_h, &h) != 0)
		return -1;
	for (k = 0; k < 2 && tz_eat(p, ':') == 0; k++)
		if (tz_num(p, 0, 59, &ms[k]) != 0)
			return -1;
	*secs = sign * (h * 3600 + ms[0] * 60 + ms[1]);
	return 0;
}

/* Jn, n or Mm.w.d, then an optional /time (02:00 when none). */
static int
tz_change(struct tzs *p, struct zone_change *c)
{
	int a = 0, b = 0, d = 0;

	c->kind =
	    (char)(tz_peek(p) == 'J' || tz_peek(p) == 'M' ? p->s[p->i++] : 'N');
	if (c->kind == 'J' && tz_num(p, 1, 365, &a) != 0)
		return -1;
	if (c->kind == 'N' && tz_num(p, 0, 365, &a) != 0)
		return -1;
	if (c->kind == 'M') {
		if (tz_num(p, 1, 12, &a) != 0 || tz_eat(p, '.') != 0 ||
		    tz_num(p, 1, 5, &b) != 0 || tz_eat(p, '.') != 0 ||
		    tz_num(p, 0, 6, &d) != 0)
			return -1;
		c->month = (int8_t)a;
		c->week = (int8_t)b;
		a = d;
	}
	c->day = (int16_t)a;
	c->seconds = 7200;
	if (tz_eat(p, '/') == 0)
		return tz_hms(p, RULE_TIME_MAX_H, &c->seconds);
	return 0;
}

/* std offset [dst [offset] [,start[/time],end[/time]]]; NULL or why not. */
static const char *
tz_parse(const char *s, size_t n, struct zone_rule *r)
{
	struct tzs p = {s, 0, n};
	struct tzs us = {"M3.2.0,M11.1.0", 0, 14}; /* glibc's default rule */
	int32_t off;

	memset(r, 0, sizeof(*r));
	if (tz_name(&p) != 0)
		return "footer: bad standard-time name";
	if (tz_hms(&p, 24, &off) != 0)
		return "footer: bad standard-time offset";
	r->std = r->dst = -off;
	if (p.i == p.n)
		return NULL;
	if (tz_name(&p) != 0)
		return "footer: bad daylight-time name";
	r->dst = r->std + 3600;
	if (p.i < p.n && tz_peek(&p) != ',') {
		if (tz_hms(&p, 24, &off) != 0)
			return "footer: bad daylight-time offset";
		r->dst = -off;
	}
	if (p.i == p.n)
		p = us;
	else
		p.i++; /* the ',' */
	if (tz_change(&p, &r->start) != 0 || tz_eat(&p, ',') != 0)
		return "footer: bad start of daylight time";
	if (tz_change(&p, &r->end) != 0)
		return "footer: bad end of daylight time";
	if (p.i != p.n)
		return "footer: trailing characters";
	if (r->dst < -OFFSET_MAX || r->dst > OFFSET_MAX)
		return "footer: daylight-time offset beyond 25 hours";
	r->has_dst = r->dst != r->std;
	/* RFC 8536 3.3.1: from January 1 00:00 to December 31 24:00 plus
	 * the daylight saving is daylight time all year. */
	if (((r->start.kind == 'J' && r->start.day == 1) ||
	     (r->start.kind == 'N' && r->start.day == 0)) &&
	    r->start.seconds == 0 && r->end.kind == 'J' && r->end.day == 365 &&
	    r->end.seconds == 86400 + r->dst - r->std) {
		r->std = r->dst;
		r->has_dst = 0;
	}
	return NULL;
}

/* ---- TZif ---- */

static uint32_t
be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* Signed: the casts wrap in gcc and clang (implementation-defined). */
#define be32s(p) ((int32_t)be32(p))

static int64_t
be64(const unsigned char *p)
{
	return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

struct tzif_header {
	int version;
	uint32_t isut, isstd, leap, times, types, chars;
	uint64_t size; /* of the data block after the header */
};

#define HEADER_SIZE 44

/* The header at p (left bytes to the end); its data block must fit. */
static const char *
tzif_header(const unsigned char *p, size_t left, uint64_t tsize,
            struct tzif_header *h)
{
	if (left < HEADER_SIZE)
		return "truncated header";
	if (memcmp(p, "TZif", 4) != 0)
		return "not a TZif file";
	h->version = p[4];
	h->isut = be32(p + 20);
	h->isstd = be32(p + 24);
	h->leap = be32(p + 28);
	h->times = be32(p + 32);
	h->types = be32(p + 36);
	h->chars = be32(p + 40);
	h->size = h->times * (tsize + 1) + h->types * UINT64_C(6) + h->chars +
	          h->leap * (tsize + 4) + h->isstd + h->isut;
	if (h->size > left - HEADER_SIZE)
		return "counts larger than the file";
	return NULL;
}

/* The v2+ data at p (h's block, then the footer to the file's end). */
static const char *
tzif_check(const struct tzif_header *h, const unsigned char *p, size_t left,
           struct zone_rule *rule, int *has_rule)
{
	const unsigned char *idx = p + 8 * (size_t)h->times;
	const unsigned char *types = idx + h->times;
	const unsigned char *flags = types + 6 * (size_t)h->types + h->chars;
	const unsigned char *foot = p + h->size, *nl;
	const char *why;
	size_t i;
	int32_t utoff;

	if (h->types == 0)
		return "no local time types";
	if (h->leap != 0)
		return "leap seconds are not supported";
	if ((h->isstd != 0 && h->isstd != h->types) ||
	    (h->isut != 0 && h->isut != h->types))
		return "indicator counts differ from the type count";
	for (i = 0; i < h->types; i++) {
		utoff = be32s(types + 6 * i);
		if (utoff < -OFFSET_MAX || utoff > OFFSET_MAX)
			return "UTC offset beyond 25 hours";
		if (types[6 * i + 4] > 1)
			return "isdst is neither 0 nor 1";
		if (types[6 * i + 5] >= h->chars)
			return "abbreviation index out of range";
	}
	for (i = 0; i < (size_t)h->isstd + h->isut; i++)
		if (flags[i] > 1)
			return "indicator is neither 0 nor 1";
	for (i = 0; i < h->times; i++) {
		if (idx[i] >= h->types)
			return "transition type index out of range";
		if (be64(p + 8 * i) < -AT_MAX || be64(p + 8 * i) > AT_MAX)
			return "transition time out of range";
		if (i > 0 && be64(p + 8 * i) <= be64(p + 8 * (i - 1)))
			return "transitions not strictly increasing";
	}
	left -= (size_t)h->size;
	if (left < 2 || foot[0] != '\n')
		return "missing footer";
	nl = memchr(foot + 1, '\n', left - 1);
	if (nl == NULL)
		return "unterminated footer";
	if ((size_t)(nl - foot) + 1 != left)
		return "bytes after the footer";
	*has_rule = nl - foot > 1;
	if (*has_rule &&
	    (why = tz_parse((const char *)foot + 1, (size_t)(nl - foot) - 1,
	                    rule)) != NULL)
		return why;
	if (*has_rule && h->times > 0 &&
	    rule_at(rule, be64(p + 8 * (h->times - 1))) !=
	        be32s(types + 6 * idx[h->times - 1]))
		return "footer disagrees with the last transition";
	return NULL;
}

void
zone_free(struct zone *z)
{
	free(z->at);
	memset(z, 0, sizeof(*z));
}

int
zone_parse(struct zone *z, const unsigned char *buf, size_t len, char *err,
           size_t errlen)
{
	struct tzif_header h;
	const unsigned char *p, *idx, *types;
	const char *why;
	size_t i, n = 0, skip;
	int32_t cur, off;

	memset(z, 0, sizeof(*z));
	if (len > FILE_MAX)
		return fail(err, errlen,
		            "corrupt tz file: larger than 256 KiB");
	why = tzif_header(buf, len, 4, &h);
	if (why == NULL && h.version < '2')
		why = "version 1, no 64-bit data";
	if (why != NULL)
		return fail(err, errlen, "corrupt tz file: %s", why);
	skip = HEADER_SIZE + (size_t)h.size;
	p = buf + skip;
	why = tzif_header(p, len - skip, 8, &h);
	if (why == NULL)
		why = tzif_check(&h, p + HEADER_SIZE, len - skip - HEADER_SIZE,
		                 &z->rule, &z->has_rule);
	if (why != NULL) {
		memset(z, 0, sizeof(*z));
		return fail(err, errlen, "corrupt tz file: %s", why);
	}
	p += HEADER_SIZE;
	idx = p + 8 * (size_t)h.times;
	types = idx + h.times;
	cur = z->before = be32s(types);
	z->rule_from = INT64_MIN;
	if (h.times > 0) {
		z->rule_from = be64(p + 8 * (h.times - 1));
		z->at = malloc(h.times * (sizeof(int64_t) + sizeof(int32_t)));
		if (z->at == NULL) {
			zone_free(z);
			return fail(err, errlen, "out of memory");
		}
		z->off = (int32_t *)(z->at + h.times);
	}
	for (i = 0; i < h.times; i++) {
		off = be32s(types + 6 * idx[i]);
		if (off != cur) {
			z->at[n] = be64(p + 8 * i);
			z->off[n++] = cur = off;
		}
	}
	z->count = n;
	return 0;
}

/* ---- names and files ---- */

/* NULL when name[0..len) is a relative path of [A-Za-z0-9_+-] parts. */
static const char *
name_check(const char *s, size_t len)
{
	size_t i;
	int c, first;

	if (len == 0)
		return "empty";
	if (len > ZONE_NAME_MAX)
		return "longer than 64 bytes";
	if (s[0] == '/')
		return "starts with '/'";
	for (i = 0; i < len; i++) {
		c = (unsigned char)s[i];
		first = i == 0 || s[i - 1] == '/';
		if (c == '/' && first)
			return "empty component ('//')";
		if (c == '/' && i == len - 1)
			return "ends with '/'";
		if (c == '.' && first)
			return "a component starts with '.'";
		if (c != '/' && c != '_' && c != '+' && c != '-' &&
		    !is_alpha(c) && !is_digit(c))
			return "only letters, digits, '_', '+', '-' and '/' "
			       "are allowed";
	}
	return NULL;
}

int
zone_load(struct zone *z, const char *name, size_t len, const char *dir,
          char *err, size_t errlen)
{
	char path[PATH_MAX];
	const char *why = name_check(name, len);
	unsigned char *buf;
	struct stat st;
	size_t got = 0, cap;
	ssize_t r;
	int fd, rc;

	memset(z, 0, sizeof(*z));
	if (why != NULL)
		return fail(err, errlen, "not a valid zone name: %s", why);
	if (len == 3 && memcmp(name, "UTC", 3) == 0) {
		memcpy(z->name, "UTC", 4);
		return 0;
	}
	if (dir == NULL) {
		dir = getenv("TZDIR");
		if (dir == NULL || dir[0] != '/')
			dir = ZONE_DIR;
	}
	if ((size_t)snprintf(path, sizeof(path), "%s/%.*s", dir, (int)len,
	                     name) >= sizeof(path))
		return fail(err, errlen, "zone directory path too long");
	/* O_NONBLOCK: a FIFO planted in the directory must not hang us. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
		return fail(err, errlen, "unknown zone");
	if (fd < 0)
		return fail(err, errlen, "cannot open %s: %s", path,
		            strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(err, errlen, "unknown zone");
	}
	if (st.st_size > FILE_MAX) {
		close(fd);
		return fail(err, errlen,
		            "corrupt tz file: larger than 256 KiB");
	}
	cap = (size_t)st.st_size + 1; /* one more: a file that grew */
	buf = malloc(cap);
	if (buf == NULL) {
		close(fd);
		return fail(err, errlen, "out of memory");
	}
	while (got < cap && (r = read(fd, buf + got, cap - got)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = errno;
			free(buf);
			close(fd);
			return fail(err, errlen, "cannot read %s: %s", path,
			            strerror(rc));
		}
		got += (size_t)r;
	}
	close(fd);
	if (got == cap)
		rc = fail(err, errlen, "tz file changed while read");
	else
		rc = zone_parse(z, buf, got, err, errlen);
	free(buf);
	if (rc == 0)
		memcpy(z->name, name, len);
	return rc;
}

int32_t
zone_offset(const struct zone *z, int64_t t, int64_t *start, int64_t *end)
{
	int64_t s, e, earlier = z->count ? z->at[z->count - 1] : INT64_MIN;
	size_t lo = 0, hi = z->count, mid;
	int32_t off;

	if (t < -ZONE_T_LIMIT)
		t = -ZONE_T_LIMIT;
	if (t > ZONE_T_LIMIT)
		t = ZONE_T_LIMIT;
	if (z->has_rule && t >= z->rule_from) {
		off = rule_at(&z->rule, t);
		s = rule_prev(&z->rule, t, off, z->rule_from, earlier);
		e = rule_next(&z->rule, t, off);
	} else {
		while (lo < hi) {
			mid = lo + (hi - lo) / 2;
			if (z->at[mid] <= t)
				lo = mid + 1;
			else
				hi = mid;
		}
		off = lo ? z->off[lo - 1] : z->before;
		s = lo ? z->at[lo - 1] : INT64_MIN;
		if (lo < z->count)
			e = z->at[lo];
		else if (z->has_rule)
			e = rule_next(&z->rule, z->rule_from, off);
		else
			e = INT64_MAX;
	}
	if (start != NULL)
		*start = s;
	if (end != NULL)
		*end = e;
	return off;
}
