/* SPDX-License-Identifier: Apache-2.0 */
/* Repeats' schedules: when each occurrence is due (schedule.h). */
#include "schedule.h"

int
schedule_check(const struct schedule *p, int64_t k, int64_t max_every,
               const char **why)
{
	int64_t due;

	if (p->every < SCHEDULE_EVERY_MIN || p->every > max_every)
		*why = "x-cascade-every: out of range";
	else if (p->first < 0 || p->first > SCHEDULE_TIME_MAX)
		*why = "x-cascade-first: out of range";
	else if (p->times < 0)
		*why = "x-cascade-times: out of range";
	else if (p->until < 0 || p->until > SCHEDULE_TIME_MAX)
		*why = "x-cascade-until: out of range";
	else if (!schedule_at(p, k, &due))
		*why = "x-cascade-occurrence: out of range";
	else
		return 0;
	return -1;
}

int
schedule_at(const struct schedule *p, int64_t k, int64_t *due)
{
	int64_t off, t;

	if (k < 1 || p->every <= 0 || (p->times > 0 && k > p->times))
		return 0;
	if (__builtin_mul_overflow(k - 1, p->every, &off) ||
	    __builtin_add_overflow(p->first, off, &t) || t > SCHEDULE_TIME_MAX)
		return 0;
	if (k > 1 && p->until > 0 && t > p->until)
		return 0;
	*due = t;
	return 1;
}

int64_t
schedule_last(const struct schedule *p, int64_t t)
{
	int64_t n;

	if (p->every <= 0 || p->first < 0 || t < p->first)
		return 0;
	if (t > SCHEDULE_TIME_MAX)
		t = SCHEDULE_TIME_MAX;
	/* 0 <= first <= t: no overflow. */
	n = (t - p->first) / p->every + 1;
	if (p->times > 0 && n > p->times)
		n = p->times;
	if (p->until > 0) {
		int64_t u = p->until < p->first
		                ? 1
		                : (p->until - p->first) / p->every + 1;
		if (n > u)
			n = u;
	}
	return n;
}

int64_t
schedule_start(const struct schedule *p, int64_t now)
{
	int64_t d, k, due;

	if (p->all || p->first >= now - SCHEDULE_GRACE_MS)
		return p->first;
	/* The smallest k with first + (k - 1) * every >= now - grace. */
	d = now - SCHEDULE_GRACE_MS - p->first;
	k = 2 + (d - 1) / p->every;
	return schedule_at(p, k, &due) ? due : now;
}

int64_t
schedule_deliver_as(const struct schedule *p, int64_t k, int64_t now)
{
	int64_t j = schedule_last(p, now);

	if (j <= k)
		return k;
	if (!p->all)
		return j;
	return j - k >= SCHEDULE_CATCH_UP_MAX ? j - SCHEDULE_CATCH_UP_MAX + 1
	                                      : k;
}

int
schedule_next(const struct schedule *p, int64_t k, int64_t now, int64_t *next,
              int64_t *due)
{
	int64_t t;

	if (k < 1 || k == INT64_MAX || !schedule_at(p, k + 1, &t))
		return 0;
	*next = k + 1;
	*due = t > now + SCHEDULE_PACE_MS ? t : now + SCHEDULE_PACE_MS;
	return 1;
}

static int64_t
cron_limit(const struct schedule_cron *p)
{
	return p->until > 0 && p->until < SCHEDULE_TIME_MAX ? p->until
	                                                    : SCHEDULE_TIME_MAX;
}

int64_t
schedule_cron_first(const struct schedule_cron *p, int64_t from)
{
	if (from < 0 || from > SCHEDULE_TIME_MAX)
		return -1;
	return cron_next(p->cron, p->zone, from - 1, cron_limit(p));
}

void
schedule_cron_deliver_as(const struct schedule_cron *p, int64_t k, int64_t at,
                         int64_t now, int64_t *missed, int64_t *as)
{
	int64_t lim = cron_limit(p), m, skip;

	if (now < lim)
		lim = now;
	m = at < lim ? cron_count(p->cron, p->zone, at, lim) : 0;
	if (p->times > 0 && m > p->times - k)
		m = p->times - k > 0 ? p->times - k : 0;
	/* Collapse: the last due.  Catch up: k itself, unless more than
	 * SCHEDULE_CATCH_UP_MAX are owed (schedule_deliver_as). */
	skip = !p->all                      ? m
	       : m >= SCHEDULE_CATCH_UP_MAX ? m - SCHEDULE_CATCH_UP_MAX + 1
	                                    : 0;
	*missed = skip;
	*as = skip > 0 ? cron_nth(p->cron, p->zone, at, skip, lim) : at;
}

int
schedule_cron_next(const struct schedule_cron *p, int64_t j, int64_t at,
                   int64_t now, int64_t *next_at, int64_t *due)
{
	int64_t t;

	if (j < 1 || j == INT64_MAX || (p->times > 0 && j >= p->times))
		return 0;
	t = cron_next(p->cron, p->zone, at, cron_limit(p));
	if (t < 0)
		return 0;
	*next_at = t;
	*due = t > now + SCHEDULE_PACE_MS ? t : now + SCHEDULE_PACE_MS;
	return 1;
}
