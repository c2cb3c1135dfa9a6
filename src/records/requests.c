/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The request state, every kind in one map (requests.h): the map's
 * entries by kind, their counts, the one prune, the trust check (who asks
 * in a record) and the reading of a record of any kind.  What each kind's
 * entries say is requests_kinds.c's.
 */
#include "requests_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "trust.h"

/* Free one entry of kind, a whole list. */
static void
free_entry(int kind, void *value)
{
	if (kind == REQUESTS_CANCEL) {
		for (struct cancel *k = value, *next; k != NULL; k = next) {
			next = k->next;
			cancel_free(k);
		}
	} else if (kind == REQUESTS_CLAIM) {
		for (struct claim *k = value, *next; k != NULL; k = next) {
			next = k->next;
			free(k);
		}
	} else if (kind == REQUESTS_PAUSE) {
		for (struct pause *k = value, *next; k != NULL; k = next) {
			next = k->next;
			free(k);
		}
	} else {
		free(value);
	}
}

void
requests_init(struct requests *r)
{
	memset(r, 0, sizeof(*r));
	idmap_init(&r->map);
}

static int
free_one(amqp_bytes_t key, void *value, void *ctx)
{
	(void)ctx;
	free_entry(key_kind(key), value);
	return 0;
}

void
requests_free(struct requests *r)
{
	size_t cursor = 0;

	(void)idmap_walk(&r->map, &cursor, r->map.cap, free_one, NULL);
	idmap_free(&r->map, NULL);
	memset(r, 0, sizeof(*r));
}

int
requests_kind(enum event_kind k)
{
	switch (k) {
	case EVENT_CANCEL:
	case EVENT_RESCHEDULE:
		return REQUESTS_CANCEL;
	case EVENT_CLAIM:
		return REQUESTS_CLAIM;
	case EVENT_SERIES:
		return REQUESTS_SERIES;
	case EVENT_PAUSE:
	case EVENT_RESUME:
		return REQUESTS_PAUSE;
	default:
		return -1;
	}
}

size_t
requests_held(const struct requests *r)
{
	return r->n[REQUESTS_CANCEL] + r->n[REQUESTS_CLAIM] +
	       r->n[REQUESTS_SERIES] + r->n[REQUESTS_PAUSE];
}

/* Drop the lapsed requests of one list; what is left of it. */
static struct cancel *
cancels_lapsed(struct cancel *head, int64_t now)
{
	struct cancel **pp = &head, *k;

	while ((k = *pp) != NULL) {
		if (k->until <= now) {
			*pp = k->next;
			cancel_free(k);
		} else {
			pp = &k->next;
		}
	}
	return head;
}

/* Drop the lapsed claims of one message-id, counting them off n. */
static struct claim *
claims_lapsed(struct claim *head, int64_t now, size_t *n)
{
	struct claim **pp = &head, *k;

	while ((k = *pp) != NULL) {
		if (k->until <= now) {
			*pp = k->next;
			free(k);
			(*n)--;
		} else {
			pp = &k->next;
		}
	}
	return head;
}

struct prune {
	struct requests *r;
	int64_t now;
};

/* Drop the lapsed part of one entry, of any kind; 1 when none is left. */
static int
lapsed(amqp_bytes_t key, void *value, void *ctx)
{
	struct prune *p = ctx;
	int kind = key_kind(key);
	void *left;

	if (kind == REQUESTS_CANCEL) {
		left = cancels_lapsed(value, p->now);
	} else if (kind == REQUESTS_CLAIM) {
		left = claims_lapsed(value, p->now, &p->r->n[kind]);
	} else if (kind == REQUESTS_PAUSE) {
		left = requests_pauses_lapsed(value, p->now, &p->r->n[kind]);
	} else if (((struct series_head *)value)->until > p->now) {
		left = value;
	} else {
		free(value);
		left = NULL;
	}
	if (left == NULL) {
		/* Claims are counted by scope, pauses by requester, the
		 * others by id. */
		if (kind != REQUESTS_CLAIM && kind != REQUESTS_PAUSE)
			p->r->n[kind]--;
		return 1;
	}
	if (left != value)
		*idmap_ref(&p->r->map, key) = left;
	return 0;
}

size_t
requests_prune(struct requests *r, int64_t now)
{
	struct prune p = {r, now};

	idmap_each(&r->map, lapsed, &p);
	return r->map.n;
}

void
requests_requester(const struct config *cfg, struct event *e,
                   amqp_bytes_t own_user, amqp_bytes_t *by, int *control)
{
	int trusted = trust_writer(cfg, own_user, e->writer);

	/* Copies are published by a daemon or a control user only: anyone
	 * else's list would only grow what is held. */
	if (!trusted)
		e->superseded = amqp_empty_bytes;

	*by = e->has_requester && trusted ? e->requester : e->writer;
	*control = config_control_user(cfg, *by);
}

int
requests_new(const struct requests *r, const struct event *e,
             amqp_bytes_t scope)
{
	switch (requests_kind(e->kind)) {
	case REQUESTS_CANCEL:
		return entry_get(r, REQUESTS_CANCEL, e->cancel) == NULL;
	case REQUESTS_CLAIM:
		return claim_in_scope(entry_get(r, REQUESTS_CLAIM, e->cancel),
		                      scope) == NULL;
	case REQUESTS_SERIES:
		return entry_get(r, REQUESTS_SERIES, e->id) == NULL;
	case REQUESTS_PAUSE:
		return requests_pause_new(r, e, scope);
	default:
		return 0;
	}
}

/*
 * A claim read, of a message published by scope: who holds the id now.
 * The loser is cancelled by its cascade id only, and only within scope: a
 * claim that names another message's id takes nothing from it.
 */
static int
claim_read(struct requests *r, const struct event *e, amqp_bytes_t scope)
{
	struct claim_verdict v;
	struct event loser;

	if (requests_claim(r, e, scope, &v) < 0)
		return -1;
	memset(&loser, 0, sizeof(loser));
	loser.kind = EVENT_CANCEL;
	loser.at = e->at;
	if (v.lost) {
		/* The claimant is dropped where it is seen. */
		loser.cancel = e->id;
		loser.until = e->until;
		loser.cancel_reason = CANCEL_DUPLICATE;
	} else if (v.replaced) {
		loser.cancel = amqp_cstring_bytes(v.old_id);
		loser.until = claim_margin(v.old_due);
		loser.cancel_reason = CANCEL_REPLACED;
	} else {
		return 0;
	}
	return requests_add(r, &loser, scope, 0);
}

int
requests_read(struct requests *r, struct event *e, amqp_bytes_t by, int control,
              int hold_it, int64_t now)
{
	switch (requests_kind(e->kind)) {
	case REQUESTS_CANCEL:
		/* A unique id's holder holds it no more, or until later. */
		if (e->kind == EVENT_CANCEL)
			requests_claims_cancelled(r, e->cancel, e->at, by,
			                          control);
		else
			requests_claims_rescheduled(r, e->cancel, e->due, by,
			                            control);
		return hold_it ? requests_add(r, e, by, control) : 0;
	case REQUESTS_CLAIM:
		/* A claim's scope is its publisher's, whoever writes. */
		return hold_it ? claim_read(r, e, by) : 0;
	case REQUESTS_SERIES:
		/* Written by a clock ahead of ours, it was written when read
		 * at the latest: taken as younger, it could age out before
		 * it is written again. */
		return hold_it ? requests_series_add(r, e->id, e->occurrence,
		                                     e->token, e->until,
		                                     e->at < now ? e->at : now)
		               : 0;
	case REQUESTS_PAUSE:
		return requests_pause_read(r, e, by, control, hold_it);
	default:
		return 0;
	}
}
