/* SPDX-License-Identifier: Apache-2.0 */
/* Retry policies: parsing their keys and computing delays. */
#include "retry.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"

enum {
	RETRY_KEY_MAX_RETRIES = 1 << 0,
	RETRY_KEY_DELAYS = 1 << 1,
	RETRY_KEY_BACKOFF = 1 << 2,
	RETRY_KEY_INITIAL = 1 << 3,
	RETRY_KEY_MULTIPLIER = 1 << 4,
	RETRY_KEY_MAX = 1 << 5,
	RETRY_KEY_JITTER = 1 << 6,
};

void
retry_defaults(struct retry_policy *p)
{
	static const int64_t delays[] = {15000, 60000, 600000, 3600000};

	memset(p, 0, sizeof(*p));
	p->max_retries = 5;
	p->backoff = RETRY_BACKOFF_LIST;
	memcpy(p->delays, delays, sizeof(delays));
	p->ndelays = 4;
	p->initial = 1000;
	p->multiplier = 2.0;
	p->max = 3600000;
	p->jitter = 0.0;
}

static int
parse_number(const char *value, double lo, double hi, double *out,
             const char **why)
{
	char *end;

	errno = 0;
	*out = strtod(value, &end);
	if (end == value || *end != '\0' || errno == ERANGE ||
	    !isfinite(*out)) {
		*why = "not a number";
		return -1;
	}
	if (*out < lo || *out > hi) {
		*why = "out of range";
		return -1;
	}
	return 0;
}

static int
parse_delay(const char *s, size_t len, int64_t *ms, const char **why)
{
	if (duration_parse(s, len, DURATION_BARE_REJECT, ms, why) < 0)
		return -1;
	if (*ms < 0 || *ms > INT64_C(315360000000)) {
		*why = "out of range (0ms to 3650d)";
		return -1;
	}
	return 0;
}

int
retry_set(struct retry_policy *p, const char *key, const char *value,
          const char **why)
{
	static const struct {
		const char *name;
		unsigned bit;
	} keys[] = {
	    {"max_retries", RETRY_KEY_MAX_RETRIES},
	    {"delays", RETRY_KEY_DELAYS},
	    {"backoff", RETRY_KEY_BACKOFF},
	    {"initial", RETRY_KEY_INITIAL},
	    {"multiplier", RETRY_KEY_MULTIPLIER},
	    {"max", RETRY_KEY_MAX},
	    {"jitter", RETRY_KEY_JITTER},
	};
	unsigned bit = 0;
	double d;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strcmp(keys[i].name, key) == 0)
			bit = keys[i].bit;
	if (bit == 0)
		return -2;
	if (p->set & bit)
		return -3;

	switch (bit) {
	case RETRY_KEY_MAX_RETRIES:
		if (parse_number(value, 0, 1000, &d, why) < 0 ||
		    d != floor(d)) {
			*why = "must be a whole number from 0 to 1000";
			return -1;
		}
		p->max_retries = (unsigned)d;
		break;
	case RETRY_KEY_DELAYS: {
		const char *s = value;
		unsigned n = 0;
		for (;;) {
			size_t len = strcspn(s, ",");
			if (n == RETRY_MAX_DELAYS) {
				*why = "more than 32 delays";
				return -1;
			}
			if (parse_delay(s, len, &p->delays[n], why) < 0)
				return -1;
			n++;
			if (s[len] == '\0')
				break;
			s += len + 1;
		}
		p->ndelays = n;
		p->backoff = RETRY_BACKOFF_LIST;
		break;
	}
	case RETRY_KEY_BACKOFF:
		if (strcmp(value, "list") == 0)
			p->backoff = RETRY_BACKOFF_LIST;
		else if (strcmp(value, "exponential") == 0)
			p->backoff = RETRY_BACKOFF_EXPONENTIAL;
		else {
			*why = "must be list or exponential";
			return -1;
		}
		break;
	case RETRY_KEY_INITIAL:
		if (parse_delay(value, strlen(value), &p->initial, why) < 0)
			return -1;
		break;
	case RETRY_KEY_MAX:
		if (parse_delay(value, strlen(value), &p->max, why) < 0)
			return -1;
		break;
	case RETRY_KEY_MULTIPLIER:
		if (parse_number(value, 1.0, 100.0, &p->multiplier, why) < 0) {
			*why = "must be a number from 1 to 100";
			return -1;
		}
		break;
	case RETRY_KEY_JITTER:
		if (parse_number(value, 0.0, 1.0, &p->jitter, why) < 0) {
			*why = "must be a fraction from 0 to 1";
			return -1;
		}
		break;
	}
	p->set |= bit;
	return 0;
}

struct retry_policy *
retry_section(struct retry_table *t, const char *queue)
{
	struct retry_policy *p;

	for (unsigned i = 0; i < t->n; i++)
		if (strcmp(t->queues[i].queue, queue) == 0)
			return &t->queues[i];
	if (t->n == RETRY_MAX_POLICIES || strlen(queue) >= RETRY_QUEUE_MAX)
		return NULL;
	p = &t->queues[t->n++];
	memset(p, 0, sizeof(*p));
	memcpy(p->queue, queue, strlen(queue) + 1);
	return p;
}

void
retry_inherit(struct retry_table *t)
{
	const struct retry_policy *d = &t->def;

	for (unsigned i = 0; i < t->n; i++) {
		struct retry_policy *p = &t->queues[i];
		if (!(p->set & RETRY_KEY_MAX_RETRIES))
			p->max_retries = d->max_retries;
		/* A section that picks its kind of backoff keeps it. */
		if (!(p->set & (RETRY_KEY_DELAYS | RETRY_KEY_BACKOFF)))
			p->backoff = d->backoff;
		if (!(p->set & RETRY_KEY_DELAYS)) {
			memcpy(p->delays, d->delays, sizeof(p->delays));
			p->ndelays = d->ndelays;
		}
		if (!(p->set & RETRY_KEY_INITIAL))
			p->initial = d->initial;
		if (!(p->set & RETRY_KEY_MULTIPLIER))
			p->multiplier = d->multiplier;
		if (!(p->set & RETRY_KEY_MAX))
			p->max = d->max;
		if (!(p->set & RETRY_KEY_JITTER))
			p->jitter = d->jitter;
	}
}

int
retry_check(const struct retry_policy *p, const char **why)
{
	if ((p->set & RETRY_KEY_DELAYS) && (p->set & RETRY_KEY_BACKOFF) &&
	    p->backoff == RETRY_BACKOFF_EXPONENTIAL) {
		*why = "give either delays or backoff = exponential, not both";
		return -1;
	}
	if (p->backoff == RETRY_BACKOFF_EXPONENTIAL && p->max < p->initial) {
		*why = "max is shorter than initial";
		return -1;
	}
	return 0;
}

const struct retry_policy *
retry_find(const struct retry_table *t, amqp_bytes_t queue)
{
	for (unsigned i = 0; i < t->n; i++) {
		const struct retry_policy *p = &t->queues[i];
		if (strlen(p->queue) == queue.len &&
		    memcmp(p->queue, queue.bytes, queue.len) == 0)
			return p;
	}
	return &t->def;
}

int64_t
retry_delay(const struct retry_policy *p, unsigned n, double u)
{
	double base;

	if (n == 0)
		n = 1;
	if (p->backoff == RETRY_BACKOFF_LIST) {
		if (p->ndelays == 0)
			return 0;
		return p->delays[(n <= p->ndelays ? n : p->ndelays) - 1];
	}
	base = (double)p->initial * pow(p->multiplier, (double)(n - 1));
	if (base > (double)p->max || !isfinite(base))
		base = (double)p->max;
	if (u < 0.0)
		u = 0.0;
	if (u >= 1.0)
		u = 0.999999;
	return (int64_t)(base * (1.0 - p->jitter * u));
}
