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
