/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tz database reader (zone.h) on Debian's tzdata: known transitions,
 * written as literals worked out with Python's zoneinfo (an independent
 * reader), the footer's rule past the table, and every file of the
 * database.  Files built by hand, glibc's cross-check and refusals are
 * test_zone_files.c's.  Needs Debian's tzdata in /usr/share/zoneinfo.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "zone.h"
#include "zone_helpers.h"

struct change {
	int64_t at;
	int32_t off; /* from at on */
};

/*
 * Consecutive transitions of a zone: at each, just before it and just
 * before the next, the offset and the span between them.
 */
static void
expect_changes(const char *name, const struct change *c, size_t n)
{
	struct zone z;
	size_t i;

	load(&z, name);
	for (i = 0; i + 1 < n; i++) {
		expect_span(&z, c[i].at, c[i].off, c[i].at, c[i + 1].at);
		expect_span(&z, c[i + 1].at - 1, c[i].off, c[i].at,
		            c[i + 1].at);
		cr_assert_neq(zone_offset(&z, c[i].at - 1, NULL, NULL),
		              c[i].off, "%s: %lld is a change", name,
		              (long long)c[i].at);
	}
	zone_free(&z);
}

#define CHANGES(name, ...)                                                     \
	do {                                                                   \
		static const struct change c_[] = {__VA_ARGS__};               \
		expect_changes(name, c_, sizeof(c_) / sizeof(c_[0]));          \
	} while (0)

Test(zone_table, berlin_2026_2027)
{
	CHANGES("Europe/Berlin", {INT64_C(1774746000), 7200}, /* 03-29 01Z */
	        {INT64_C(1792890000), 3600},                  /* 10-25 01Z */
	        {INT64_C(1806195600), 7200},                  /* 27-03-28 */
	        {INT64_C(1824944400), 3600});                 /* 27-10-31 */
}

Test(zone_table, new_york_2026_2027)
{
	CHANGES("America/New_York", {INT64_C(1772953200), -14400}, /* 03-08 */
	        {INT64_C(1793512800), -18000},                     /* 11-01 */
	        {INT64_C(1805007600), -14400},  /* 27-03-14 */
	        {INT64_C(1825567200), -18000}); /* 27-11-07 */
}

/* Southern hemisphere, a 30-minute shift: +11 in summer, +10:30 else. */
Test(zone_table, lord_howe_2026_2027)
{
	CHANGES("Australia/Lord_Howe",
	        {INT64_C(1775314800), 37800},  /* 2026-04-04T15:00Z */
	        {INT64_C(1791041400), 39600},  /* 2026-10-03T15:30Z */
	        {INT64_C(1806764400), 37800},  /* 2027-04-03T15:00Z */
	        {INT64_C(1822491000), 39600}); /* 2027-10-02T15:30Z */
}

/* Hours past 24 (M3.4.4/26) and rules given at -1:00 and 0:00 local. */
Test(zone_table, jerusalem_and_nuuk)
{
	CHANGES("Asia/Jerusalem", {INT64_C(1774569600), 10800}, /* 03-27 */
	        {INT64_C(1792882800), 7200},                    /* 10-24 23Z */
	        {INT64_C(1806019200), 10800}, {INT64_C(1824937200), 7200});
	CHANGES("America/Nuuk", {INT64_C(1774746000), -3600},
	        {INT64_C(1792890000), -7200}, {INT64_C(1806195600), -3600},
	        {INT64_C(1824944400), -7200});
	/* Negative daylight saving: IST (+1) in summer is "standard". */
	CHANGES("Europe/Dublin", {INT64_C(1774746000), 3600},
	        {INT64_C(1792890000), 0}, {INT64_C(1806195600), 3600},
	        {INT64_C(1824944400), 0});
}

Test(zone_table, kolkata_has_not_changed_since_1945)
{
	struct zone z;

	load(&z, "Asia/Kolkata");
	expect_span(&z, INT64_C(1780272000), 19800, INT64_C(-764145000),
	            INT64_MAX);
	expect_span(&z, INT64_C(-764145001), 23400, INT64_C(-862637400),
	            INT64_C(-764145000));
	zone_free(&z);
}

Test(zone_table, utc_needs_no_file)
{
	struct zone z;
	char err[128];

	cr_assert_eq(zone_load(&z, "UTC", 3, "/nonexistent", err, sizeof(err)),
	             0, "%s", err);
	expect_span(&z, 0, 0, INT64_MIN, INT64_MAX);
	expect_span(&z, ZONE_T_LIMIT, 0, INT64_MIN, INT64_MAX);
	zone_free(&z);
	load(&z, "Etc/UTC"); /* the file */
	expect_span(&z, INT64_C(1780272000), 0, INT64_MIN, INT64_MAX);
	zone_free(&z);
}

/* Past the table (2037 in Debian's fat files): the footer's rule. */
Test(zone_rule, the_year_2100)
{
	CHANGES("Europe/Berlin", {INT64_C(4109878800), 7200}, /* 03-28 01Z */
	        {INT64_C(4128627600), 3600});                 /* 10-31 01Z */
	CHANGES("America/New_York", {INT64_C(4108690800), -14400},
	        {INT64_C(4129250400), -18000});
	CHANGES("Australia/Lord_Howe", {INT64_C(4110447600), 37800},
	        {INT64_C(4126174200), 39600});
}

/* The table's last change (2037-10-25) and the rule's first (2038-03-28)
 * bound one span. */
Test(zone_rule, the_span_across_the_end_of_the_table)
{
	struct zone z;

	load(&z, "Europe/Berlin");
	cr_assert_eq(z.rule_from, INT64_C(2140045200), "a fat file to 2037");
	expect_span(&z, INT64_C(2143238400), 3600, INT64_C(2140045200),
	            INT64_C(2153350800));
	expect_span(&z, INT64_C(2140045200), 3600, INT64_C(2140045200),
	            INT64_C(2153350800));
	expect_span(&z, INT64_C(2140045199), 7200, INT64_C(2121901200),
	            INT64_C(2140045200));
	expect_span(&z, INT64_C(2153350800), 7200, INT64_C(2153350800),
	            INT64_C(2172099600));
	zone_free(&z);
}

/* ---- the whole tz database ---- */

static int loaded, refused;

static int
visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	const char *name = path + strlen(ZONEINFO) + 1;
	unsigned char magic[4] = {0};
	char err[256] = "";
	struct zone z;
	FILE *f;
	int rc;

	(void)st;
	(void)ftw;
	if (type != FTW_F)
		return 0;
	f = fopen(path, "rb");
	if (f == NULL || fread(magic, 1, 4, f) != 4 ||
	    memcmp(magic, "TZif", 4) != 0) {
		if (f != NULL)
			fclose(f);
		return 0;
	}
	fclose(f);
	rc = zone_load(&z, name, strlen(name), NULL, err, sizeof(err));
	if (strncmp(name, "right/", 6) == 0) {
		cr_expect_eq(rc, -1, "%s: leap seconds accepted", name);
		cr_expect(strstr(err, "leap seconds") != NULL, "%s: %s", name,
		          err);
		refused++;
	} else {
		cr_expect_eq(rc, 0, "%s: %s", name, err);
		loaded++;
	}
	zone_free(&z);
	return 0;
}

/* Every zone Debian installs loads, and only the "right/" ones do not. */
Test(zone_database, every_file_loads)
{
	unsetenv("TZDIR");
	cr_assert_eq(nftw(ZONEINFO, visit, 32, FTW_PHYS), 0);
	cr_assert_gt(loaded, 300, "%d zones", loaded);
}
