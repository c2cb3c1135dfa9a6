/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon's /metrics text (Prometheus exposition format, metrics.h)
 * read back: the per-target samples cascade-ctl status shows.  Pure code;
 * fetching the text is the caller's.
 */
#ifndef CASCADE_PROM_H
#define CASCADE_PROM_H

#include <stddef.h>

#define PROM_NAME_MAX 256 /* a shortstr and its NUL */

/* One target that refused deliveries, from its three samples. */
struct prom_target {
	char exchange[PROM_NAME_MAX], routing_key[PROM_NAME_MAX];
	double refusals, diverted, backoff;
};

/*
 * The cascade_target_refusals_total, cascade_target_diverted_total and
 * cascade_target_backoff_seconds samples of text, one row per
 * {exchange, routing_key}, in the order first seen, at most max (later
 * targets are left out); label values unescaped.  A sample a row lacks is
 * 0.  text is cut into lines in place.  Returns the number of rows.
 */
size_t prom_targets_parse(char *text, struct prom_target *t, size_t max);

/*
 * How the daemon's messages wait, from its cascade_wait_mode samples:
 * "ladder", "native", or NULL when neither is 1 (not connected yet, or an
 * older daemon).  Call before prom_targets_parse, which cuts text.
 */
const char *prom_wait_mode(const char *text);

/*
 * The value of the unlabelled sample `name` in text (a counter or gauge of
 * its own, as cascade_overdue_returns_total): 1 and *v, or 0 when text
 * has none (an older daemon) or it is not a number.  Call before
 * prom_targets_parse, which cuts text.
 */
int prom_value(const char *text, const char *name, double *v);

#endif
