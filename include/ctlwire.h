/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctlwire: the lines cascade-console answers cascade-ctl in
 * (docs/CONTRACT.md 7.11, /ctl/list and /ctl/count), written by the
 * console and read by ctl, so that list and cancel can answer from the
 * console's index instead of reading P.events.  In the library so that
 * both sides, and the unit tests, use one definition.
 *
 * An answer is lines ending in a newline, each of fields separated by
 * tabs; the first field names the line.  A field from a record is
 * escaped so that it holds no tab, newline or backslash: \t, \n, \\, and
 * \xHH (two lower-case hexadecimal digits) for every other byte below
 * 0x20 and for 0x7f; other bytes pass as they are.  The last line is
 * "end", so that an answer cut short is never taken for a whole one.
 *
 *   list  VERSION  MATCHING  TOTAL  SHOWN  MINUTE  HOUR  DAY  LATER
 *   row   CASCADE_ID  MESSAGE_ID  EXCHANGE  ROUTING_KEY  DUE_MS  SEEN_MS
 *         SIZE  CANCEL_PENDING  RESCHEDULED  REPEAT  EVERY_MS  CRON  TZ
 *         OCCURRENCE  PAUSED                      (SHOWN of them)
 *   end
 *
 *   count  VERSION  N  LAST_DUE_MS
 *   end
 *
 * An empty MESSAGE_ID, CRON or TZ is none; SEEN_MS 0 is unknown; the
 * flags are 0 or 1.  Pure code.
 */
#ifndef CASCADE_CTLWIRE_H
#define CASCADE_CTLWIRE_H

#include "amqp_compat.h"
#include <stddef.h>
#include <stdint.h>

#include "html.h"
#include "waiting.h"

#define CTLWIRE_VERSION 1
/* The windows list counts by (metrics_window): minute, hour, day, later. */
#define CTLWIRE_WINDOWS 4

/* s[0..n) as one field, escaped, onto b. */
void ctlwire_field(struct hbuf *b, const void *s, size_t n);

/*
 * Undo ctlwire_field in place: s[0..*n) becomes the bytes it stood for,
 * *n their count.  -1 for a backslash that starts no escape, or a byte
 * that should have been escaped (s is then not to be used).
 */
int ctlwire_unescape(char *s, size_t *n);

/* The first line of a list answer. */
struct ctlwire_head {
	uint64_t matching;                /* waiting that pass the filters */
	uint64_t total;                   /* waiting in all */
	uint64_t shown;                   /* rows that follow */
	uint64_t counts[CTLWIRE_WINDOWS]; /* of the matching, by due window */
};

void ctlwire_list_head(struct hbuf *b, const struct ctlwire_head *h);
/* One row: w's fields as list prints them (due is the one in force). */
void ctlwire_list_row(struct hbuf *b, const struct waiting *w);
/* The count answer's line. */
void ctlwire_count(struct hbuf *b, uint64_t n, int64_t last_due);
/* The last line of every answer. */
void ctlwire_end(struct hbuf *b);

/* A list answer, read. */
struct ctlwire_list {
	struct ctlwire_head head;
	/* head.shown rows, each malloc'd, its bytes pointing into the
	 * answer's text (which must outlive them); free with
	 * ctlwire_list_free. */
	struct waiting **rows;
};

/*
 * Read the list answer text[0..len), unescaping it in place, into l:
 * every line as above and nothing else, the rows' count SHOWN, the
 * windows' sum MATCHING, MATCHING at most TOTAL.  0, or -1 with a static
 * reason in *why (l then holds nothing to free).
 */
int ctlwire_parse_list(char *text, size_t len, struct ctlwire_list *l,
                       const char **why);
void ctlwire_list_free(struct ctlwire_list *l);

/* Read the count answer text[0..len).  0, or -1 with *why. */
int ctlwire_parse_count(char *text, size_t len, uint64_t *n, int64_t *last_due,
                        const char **why);

#endif
