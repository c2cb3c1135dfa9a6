/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tz database reader (zone.h) on files built by hand: slim tables,
 * merged transitions and the footer's forms; glibc's localtime as a
 * second opinion on real zones and on footers alone; then refusals of bad
 * names and bad files, every truncation of a real one, huge counts and
 * bad footers.  The tz database's own transitions are test_zone.c's.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp, setenv */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "zone.h"
#include "zone_helpers.h"

/* ---- images built by hand ---- */

struct tzif {
	size_t times;
	const int64_t *at;
	const uint8_t *idx;
	size_t types;
	const int32_t *utoff;
	const uint8_t *isdst; /* NULL: none */
	uint32_t leaps;       /* that many records of zeros */
	const char *footer;   /* without its newlines */
};

static size_t
put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
	return 4;
}

static size_t
header(unsigned char *p, const struct tzif *t)
{
	memset(p, 0, 44);
	memcpy(p, "TZif2", 5);
	put32(p + 28, t->leaps);
	put32(p + 32, (uint32_t)t->times);
	put32(p + 36, (uint32_t)t->types);
	put32(p + 40, (uint32_t)(4 * t->types)); /* "AAA\0" each */
	return 44;
}

/* A version 2 image (an empty version 1 block) into buf; its length. */
static size_t
build(unsigned char *buf, size_t size, const struct tzif *t)
{
	size_t n = 0, i;

	cr_assert_lt(100 + 13 * t->times + 10 * t->types + 12 * t->leaps +
	                 strlen(t->footer),
	             size);
	memset(buf, 0, 44);
	memcpy(buf, "TZif2", 5);
	n = 44;
	n += header(buf + n, t);
	for (i = 0; i < t->times; i++) {
		n += put32(buf + n, (uint32_t)((uint64_t)t->at[i] >> 32));
		n += put32(buf + n, (uint32_t)t->at[i]);
	}
	for (i = 0; i < t->times; i++)
		buf[n++] = t->idx[i];
	for (i = 0; i < t->types; i++) {
		n += put32(buf + n, (uint32_t)t->utoff[i]);
		buf[n++] = t->isdst ? t->isdst[i] : 0;
		buf[n++] = (unsigned char)(4 * i);
	}
	for (i = 0; i < t->types; i++) {
		memcpy(buf + n, "AAA", 4);
		n += 4;
	}
	memset(buf + n, 0, 12 * t->leaps);
	n += 12 * t->leaps;
	n += (size_t)sprintf((char *)buf + n, "\n%s\n", t->footer);
	return n;
}

static void
parse_ok(struct zone *z, const unsigned char *buf, size_t len)
{
	char err[256] = "";

	cr_assert_eq(zone_parse(z, buf, len, err, sizeof(err)), 0, "%s", err);
}

/* Refused, with a reason that says corrupt and mentions `about`. */
static void
parse_refused(const unsigned char *buf, size_t len, const char *about)
{
	struct zone z;
	char err[256] = "";

	cr_assert_eq(zone_parse(&z, buf, len, err, sizeof(err)), -1,
	             "accepted; wanted \"%s\"", about);
	cr_assert(strstr(err, "corrupt tz file: ") == err, "reason: %s", err);
	cr_assert(strstr(err, about) != NULL, "reason \"%s\", not \"%s\"", err,
	          about);
	zone_free(&z); /* harmless */
}

/* A footer alone: no transitions, the rule for every instant. */
static void
footer_zone(struct zone *z, const char *footer)
{
	static const int32_t utoff[] = {0};
	struct tzif t = {0, NULL, NULL, 1, utoff, NULL, 0, footer};
	unsigned char buf[512];

	parse_ok(z, buf, build(buf, sizeof(buf), &t));
}

/*
 * A slim Berlin: the table ends in 1996 with a change of abbreviation
 * alone (CEST -> CET -> "CET" again), the rule after it.
 */
Test(zone_rule, a_slim_table_and_a_merged_last_transition)
{
	static const int64_t at[] = {INT64_C(828234000), INT64_C(846378000),
	                             INT64_C(849398400)};
	static const uint8_t idx[] = {1, 0, 2};
	static const int32_t utoff[] = {3600, 7200, 3600};
	static const uint8_t isdst[] = {0, 1, 0};
	struct tzif t = {3,     at,    idx, 3,
	                 utoff, isdst, 0,   "CET-1CEST,M3.5.0,M10.5.0/3"};
	unsigned char buf[512];
	struct zone z;

	parse_ok(&z, buf, build(buf, sizeof(buf), &t));
	cr_assert_eq(z.count, 2, "the third transition changes no offset");
	expect_span(&z, INT64_C(804556800), 3600, INT64_MIN,
	            INT64_C(828234000));
	expect_span(&z, INT64_C(828234000), 7200, INT64_C(828234000),
	            INT64_C(846378000));
	/* in the table, after its last change of offset */
	expect_span(&z, INT64_C(846378000), 3600, INT64_C(846378000),
	            INT64_C(859683600));
	/* after the table: the same span, ended by the rule */
	expect_span(&z, INT64_C(853286400), 3600, INT64_C(846378000),
	            INT64_C(859683600));
	expect_span(&z, INT64_C(859683600), 7200, INT64_C(859683600),
	            INT64_C(877827600)); /* 1997-10-26T01Z */
	zone_free(&z);
}

/*
 * A table with no daylight time from 1990 to its end in December 1996:
 * the rule's changes before the table's end are not the zone's, so the
 * span of January 1997 starts in 1990.
 */
Test(zone_rule, the_rule_does_not_reach_back_into_the_table)
{
	static const int64_t at[] = {INT64_C(631152000), INT64_C(849398400)};
	static const uint8_t idx[] = {1, 2};
	static const int32_t utoff[] = {0, 3600, 3600};
	struct tzif t = {2,     at,   idx, 3,
	                 utoff, NULL, 0,   "CET-1CEST,M3.5.0,M10.5.0/3"};
	unsigned char buf[512];
	struct zone z;

	parse_ok(&z, buf, build(buf, sizeof(buf), &t));
	expect_span(&z, INT64_C(853286400), 3600, INT64_C(631152000),
	            INT64_C(859683600));
	expect_span(&z, INT64_C(846378000), 3600, INT64_C(631152000),
	            INT64_C(859683600));
	zone_free(&z);
}

Test(zone_rule, footer_forms)
{
	struct zone z;

	/* Mm.w.d with negative times: both changes at 01:00 UTC. */
	footer_zone(&z, "<-03>3<-02>,M3.5.0/-2,M10.5.0/-1");
	expect_span(&z, INT64_C(1909094400), -7200, INT64_C(1901149200),
	            INT64_C(1919293200));
	expect_span(&z, INT64_C(1901149199), -10800, INT64_C(1887843600),
	            INT64_C(1901149200));
	zone_free(&z);
	/* A fixed offset: one span for all time. */
	footer_zone(&z, "<+10>-10");
	expect_span(&z, INT64_C(1909094400), 36000, INT64_MIN, INT64_MAX);
	zone_free(&z);
	footer_zone(&z, "<+0545>-5:45");
	expect_span(&z, -ZONE_T_LIMIT, 20700, INT64_MIN, INT64_MAX);
	zone_free(&z);
	/* Daylight time all year (RFC 8536 3.3.1): EDT for ever. */
	footer_zone(&z, "EST5EDT,0/0,J365/25");
	expect_span(&z, INT64_C(1894665600), -14400, INT64_MIN, INT64_MAX);
	expect_span(&z, INT64_C(1909094400), -14400, INT64_MIN, INT64_MAX);
	zone_free(&z);
	/* No rule given: glibc's, the US one. */
	footer_zone(&z, "EST5EDT");
	expect_span(&z, INT64_C(1780272000), -14400, INT64_C(1772953200),
	            INT64_C(1793512800));
	zone_free(&z);
	/* Jn (no Feb 29) and n (counting it) in a leap year: 2028. */
	footer_zone(&z, "AAA0BBB,J60/0,59/0");
	cr_assert_eq(zone_offset(&z, INT64_C(1835481600), NULL, NULL), 3600,
	             "J60 is March 1 (2028-03-01T00Z)");
	cr_assert_eq(zone_offset(&z, INT64_C(1835481599), NULL, NULL), 0);
	zone_free(&z);
}

/* ---- glibc's localtime as a second opinion ---- */

static long
glibc_offset(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	cr_assert_not_null(localtime_r(&tt, &tm));
	return tm.tm_gmtoff;
}

/*
 * Every span from `from` to `to`, walked end to end: glibc agrees on its
 * first and last second and at points inside, and disagrees just outside.
 */
static void
cross_check(const struct zone *z, const char *tz, int64_t from, int64_t to)
{
	int64_t t = from, s, e, u;
	int32_t off;
	int spans = 0;

	setenv("TZ", tz, 1);
	tzset();
	while (t < to) {
		off = zone_offset(z, t, &s, &e);
		cr_assert(s <= t && t < e, "%s: %lld outside its span", tz,
		          (long long)t);
		for (u = t; u < e && u < to; u += 86400 * 3 + 3607)
			cr_assert_eq(glibc_offset(u), off, "%s at %lld", tz,
			             (long long)u);
		if (s >= from)
			cr_assert_neq(glibc_offset(s - 1), off,
			              "%s: no change at %lld", tz,
			              (long long)s);
		if (e != INT64_MAX) {
			cr_assert_eq(glibc_offset(e - 1), off, "%s: %lld", tz,
			             (long long)e - 1);
			cr_assert_neq(glibc_offset(e), off,
			              "%s: no change at %lld", tz,
			              (long long)e);
		}
		t = e;
		spans++;
	}
	cr_assert_gt(spans, 0);
}

Test(zone_glibc, zones_from_1970_to_2300)
{
	static const char *const names[] = {
	    "Europe/Berlin",     "America/New_York", "Australia/Lord_Howe",
	    "Asia/Kolkata",      "Asia/Jerusalem",   "America/Nuuk",
	    "Europe/Dublin",     "America/Santiago", "Pacific/Chatham",
	    "Africa/Casablanca", "Antarctica/Troll", "Asia/Gaza",
	    "America/Sao_Paulo", "Pacific/Auckland", "Africa/Cairo"};
	char tz[96];
	struct zone z;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		load(&z, names[i]);
		snprintf(tz, sizeof(tz), ":%s", names[i]);
		cross_check(&z, tz, T1970, T2300);
		zone_free(&z);
	}
}

Test(zone_glibc, footers_from_1970_to_2300)
{
	static const char *const footers[] = {
	    "CET-1CEST,M3.5.0,M10.5.0/3",
	    "EST5EDT,M3.2.0,M11.1.0",
	    "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0",
	    "<+10>-10",
	    "IST-2IDT,M3.4.4/26,M10.5.0",
	    "<-03>3<-02>,M3.5.0/-2,M10.5.0/-1",
	    "EET-2EEST,M3.4.4/50,M10.4.4/50",
	    "<-04>4<-03>,M9.1.6/24,M4.1.6/24",
	    "<+1245>-12:45<+1345>,M9.5.0/2:45,M4.1.0/3:45",
	    "IST-1GMT0,M10.5.0,M3.5.0/1",
	    "<+00>0<+02>-2,M3.5.0/1,M10.5.0/3",
	    "NST3:30NDT,M3.2.0,M11.1.0",
	    "AAA3BBB,J60/-100,300/150",
	};
	struct zone z;
	size_t i;

	for (i = 0; i < sizeof(footers) / sizeof(footers[0]); i++) {
		footer_zone(&z, footers[i]);
		cross_check(&z, footers[i], T1970, T2300);
		zone_free(&z);
	}
}

/* ---- refusals ---- */

static void
name_refused(const char *name, size_t len, const char *about)
{
	struct zone z;
	char err[256] = "";

	cr_assert_eq(zone_load(&z, name, len, NULL, err, sizeof(err)), -1,
	             "\"%.*s\" accepted", (int)len, name);
	cr_assert(strstr(err, about) != NULL, "\"%.*s\": \"%s\", not \"%s\"",
	          (int)len, name, err, about);
	zone_free(&z);
}

Test(zone_refused, bad_names)
{
	const char *bad = "not a valid zone name: ";
	char name[ZONE_NAME_MAX + 2];

	name_refused("../etc/passwd", 13, bad);
	name_refused("../etc/passwd", 13, "'.'");
	name_refused("/etc/passwd", 11, "starts with '/'");
	name_refused("Europe//Berlin", 14, "empty component");
	name_refused("Europe/", 7, "ends with '/'");
	name_refused(".x", 2, "'.'");
	name_refused("Europe/.Berlin", 14, "'.'");
	name_refused("", 0, "empty");
	name_refused("Europe/Ber lin", 14, "only letters");
	name_refused("Europe/Berlin\0x", 15, "only letters");
	name_refused("Europe\\Berlin", 13, "only letters");
	memcpy(name, "Europe/", 7);
	memset(name + 7, 'a', sizeof(name) - 7);
	name_refused(name, 64, "unknown zone"); /* valid, and not a zone */
	name_refused(name, 65, "longer than 64");
}

Test(zone_refused, unknown_zones)
{
	name_refused("Nowhere/City", 12, "unknown zone");
	name_refused("Europe", 6, "unknown zone"); /* a directory */
	name_refused("Europe/Berlin/x", 15, "unknown zone");
	name_refused("zone1970", 8, "unknown zone");
	/* Debian 12's tzdata has them, later ones put them in tzdata-legacy */
	if (access(ZONEINFO "/right/Europe/Berlin", F_OK) == 0)
		name_refused("right/Europe/Berlin", 19, "leap seconds");
	name_refused("leapseconds", 11, "not a TZif file");
}

/* TZDIR: used when absolute; a FIFO in it is no zone and no hang. */
Test(zone_refused, tzdir_and_a_fifo)
{
	char dir[] = "/tmp/test_zone.XXXXXX", path[128], err[256];
	static const int32_t utoff[] = {-3600};
	struct tzif t = {0, NULL, NULL, 1, utoff, NULL, 0, "<-01>1"};
	unsigned char buf[512];
	size_t n = build(buf, sizeof(buf), &t);
	struct zone z;
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/Test", dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/Test/Zone", dir);
	f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(buf, 1, n, f), n);
	fclose(f);
	snprintf(path, sizeof(path), "%s/Test/Fifo", dir);
	cr_assert_eq(mkfifo(path, 0600), 0);
	setenv("TZDIR", dir, 1);
	cr_assert_eq(zone_load(&z, "Test/Zone", 9, NULL, err, sizeof(err)), 0,
	             "%s", err);
	cr_assert_eq(zone_offset(&z, 0, NULL, NULL), -3600);
	zone_free(&z);
	name_refused("Test/Fifo", 9, "unknown zone");
	name_refused("Europe/Berlin", 13, "unknown zone");
	setenv("TZDIR", "relative", 1);
	load(&z, "Europe/Berlin");
	zone_free(&z);
	unlink(path);
	snprintf(path, sizeof(path), "%s/Test/Zone", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/Test", dir);
	rmdir(path);
	rmdir(dir);
}

static size_t
read_zone(const char *name, unsigned char *buf, size_t size)
{
	char path[256];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), ZONEINFO "/%s", name);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	n = fread(buf, 1, size, f);
	fclose(f);
	cr_assert_lt(n, size);
	return n;
}

Test(zone_refused, every_truncation_of_a_real_file)
{
	static unsigned char buf[8192];
	size_t n = read_zone("Europe/Berlin", buf, sizeof(buf)), len;
	struct zone z;
	char err[256];

	for (len = 0; len < n; len++) {
		cr_assert_eq(zone_parse(&z, buf, len, err, sizeof(err)), -1,
		             "%zu of %zu bytes accepted", len, n);
		cr_assert(strstr(err, "corrupt tz file: ") == err, "%s", err);
	}
	parse_ok(&z, buf, n);
	zone_free(&z);
	buf[n] = 'x';
	parse_refused(buf, n + 1, "bytes after the footer");
}

static uint32_t
get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* Each of the six counts of either header, huge or merely too large. */
Test(zone_refused, huge_counts)
{
	static unsigned char buf[8192], copy[8192];
	static const uint32_t huge[] = {UINT32_C(0xffffffff),
	                                UINT32_C(0x10000000), UINT32_C(4000)};
	size_t n = read_zone("Europe/Berlin", buf, sizeof(buf)), i, h, k;
	size_t hdr[2];

	/* the version 1 data: times, types, chars, leaps, isstd, isut */
	hdr[0] = 0;
	hdr[1] = 44 + 5 * get32(buf + 32) + 6 * get32(buf + 36) +
	         get32(buf + 40) + 8 * get32(buf + 28) + get32(buf + 24) +
	         get32(buf + 20);
	cr_assert_eq(memcmp(buf + hdr[1], "TZif", 4), 0);
	for (h = 0; h < 2; h++)
		for (i = 0; i < 6; i++)
			for (k = 0; k < 3; k++) {
				memcpy(copy, buf, n);
				put32(copy + hdr[h] + 20 + 4 * i, huge[k]);
				parse_refused(copy, n, "larger than the file");
			}
	memcpy(copy, buf, n);
	copy[4] = 0;
	parse_refused(copy, n, "version 1");
}

Test(zone_refused, bad_tables)
{
	static const int64_t at[] = {100, 200, 300};
	static const int64_t same[] = {100, 200, 200};
	static const int64_t far[] = {100, 200, INT64_C(1) << 60};
	static const uint8_t idx[] = {1, 0, 1};
	static const uint8_t bad_idx[] = {1, 0, 2};
	static const int32_t utoff[] = {0, 3600};
	static const int32_t huge[] = {0, 90001};
	static const uint8_t isdst[] = {0, 2};
	unsigned char buf[1024];
	struct tzif t = {3, at, idx, 2, utoff, NULL, 0, ""};
	struct zone z;

	parse_ok(&z, buf, build(buf, sizeof(buf), &t));
	expect_span(&z, 250, 0, 200, 300);
	zone_free(&z);
	t.idx = bad_idx;
	parse_refused(buf, build(buf, sizeof(buf), &t), "type index");
	t.idx = idx;
	t.at = same;
	parse_refused(buf, build(buf, sizeof(buf), &t), "strictly increasing");
	t.at = far;
	parse_refused(buf, build(buf, sizeof(buf), &t), "time out of range");
	t.at = at;
	t.utoff = huge;
	parse_refused(buf, build(buf, sizeof(buf), &t), "25 hours");
	t.utoff = utoff;
	t.isdst = isdst;
	parse_refused(buf, build(buf, sizeof(buf), &t), "isdst");
	t.isdst = NULL;
	t.leaps = 1;
	parse_refused(buf, build(buf, sizeof(buf), &t), "leap seconds");
	t.leaps = 0;
	t.types = 0;
	t.times = 0;
	parse_refused(buf, build(buf, sizeof(buf), &t), "no local time types");
	t.types = 2;
	t.times = 3;
	t.footer = "<+02>-2"; /* +2 after 300, where the table says +1 */
	parse_refused(buf, build(buf, sizeof(buf), &t), "disagrees");
}

Test(zone_refused, bad_footers)
{
	static const char *const bad[] = {
	    "CET-1CEST,M3.5.0",             /* one rule */
	    "CET-1CEST,M3.5.0,",            /* an empty one */
	    "CET-1CEST,M13.5.0,M10.5.0",    /* month 13 */
	    "CET-1CEST,M3.6.0,M10.5.0",     /* week 6 */
	    "CET-1CEST,M3.5.7,M10.5.0",     /* day 7 */
	    "CET-1CEST,J0,J100",            /* J is 1..365 */
	    "CET-1CEST,366,J100",           /* n is 0..365 */
	    "CET-1CEST,M3.5.0/168,M10.5.0", /* past 167 hours */
	    "CET-25",                       /* past 24 hours */
	    "CET-1:60",                     /* 60 minutes */
	    "CET",                          /* no offset */
	    "CE-1",                         /* a two-letter name */
	    "<+10-10",                      /* unterminated < */
	    "<+1>-1",                       /* too short inside <> */
	    "CET-1 ",                       /* trailing */
	    "CET-1CEST-1:00x,M3.5.0,M10.5.0",
	    "AAA-24:59:59BBB", /* daylight time past 25 hours */
	    "CET-1CEST,M3.5.0,M10.5.0/3\r",
	    "CET-99999999999999999999",
	};
	static const int32_t utoff[] = {0};
	struct tzif t = {0, NULL, NULL, 1, utoff, NULL, 0, NULL};
	unsigned char buf[512];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t.footer = bad[i];
		parse_refused(buf, build(buf, sizeof(buf), &t), "footer");
	}
	t.footer = "CET-1\nCET-1"; /* a newline inside */
	parse_refused(buf, build(buf, sizeof(buf), &t), "after the footer");
}
