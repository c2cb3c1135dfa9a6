/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Points in time as people write them on a command line, and as the tools
 * print them: ISO 8601 in UTC with milliseconds.  The clock is an
 * argument; no I/O.
 */
#ifndef CASCADE_WHEN_H
#define CASCADE_WHEN_H

#include <stddef.h>
#include <stdint.h>

/* Room for when_format's and when_relative's output. */
#define WHEN_TEXT_MAX 64

/*
 * An absolute time: ISO 8601 (2026-11-23T09:00:00Z, with a fraction of a
 * second and an offset +HH:MM or -HH:MM allowed instead of Z) or Unix ms
 * (digits only).  The date must exist: 2026-02-31, hour 24 or minute 60
 * are refused (a leap second, :60, is taken as the next second).  0 with
 * *out in Unix ms, or -1 with why (a few words) in why[0..whysize).
 */
int when_parse_absolute(const char *s, int64_t *out, char *why, size_t whysize);

/*
 * when_parse_absolute's forms, or a duration from now as duration_parse
 * reads it with a unit ("10m", "-5m", "2h").  0 with *out, or -1 with why.
 */
int when_parse(const char *s, int64_t now, int64_t *out, char *why,
               size_t whysize);

/* Unix ms as 2026-11-23T09:00:00.000Z ("<ms>ms" beyond gmtime's range). */
void when_format(int64_t ms, char *buf, size_t size);

/*
 * How far a time is from now, delta = then - now: "in 3m12s", "3s ago",
 * "now" within a second; two units at most (duration.h's DURATION_SPAN).
 */
void when_relative(int64_t delta, char *buf, size_t size);

#endif
