/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What each kind of request state says (requests.h): the requests held
 * by id and which messages they change, the claims on unique ids and
 * their holders, the latest record of each series and its refresh.  The
 * map itself is requests.c's.
 */
#include "requests_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/*
 * A superseded list: entries of [length byte][id][8 bytes: the time of
 * the latest request that copied it, Unix ms, host order].
 */
#define SUPERSEDED_AT 8

/* When list (of len bytes) says id was last copied; 0: it does not. */
static int64_t
superseded_at(const char *list, size_t len, amqp_bytes_t id)
{
	size_t off = 0;

	while (off < len) {
		size_t n = (unsigned char)list[off];
		int64_t at;
		if (off + 1 + n + SUPERSEDED_AT > len)
			return 0;
		if (n == id.len && memcmp(list + off + 1, id.bytes, n) == 0) {
			memcpy(&at, list + off + 1 + n, sizeof(at));
			return at;
		}
		off += 1 + n + SUPERSEDED_AT;
	}
	return 0;
}

/*
 * Take the cascade ids of e's x-cascade-superseded into k's list, each
 * with e's time when it is later than the one held.  -1 out of memory.
 */
static int
superseded_add(struct cancel *k, const struct event *e)
{
	size_t need = k->superseded_len, off = 0;
	amqp_bytes_t id;
	char *list;

	while (events_superseded_next(e->superseded, &off, &id))
		need += 1 + id.len + SUPERSEDED_AT;
	if (need == k->superseded_len)
		return 0;
	if (need > UINT32_MAX || (list = realloc(k->superseded, need)) == NULL)
		return -1;
	k->superseded = list;
	off = 0;
	while (events_superseded_next(e->superseded, &off, &id)) {
		size_t at_off = 0;
		/* Held already: the later time. */
		while (at_off < k->superseded_len) {
			size_t n = (unsigned char)list[at_off];
			if (n == id.len &&
			    memcmp(list + at_off + 1, id.bytes, n) == 0)
				break;
			at_off += 1 + n + SUPERSEDED_AT;
		}
		if (at_off < k->superseded_len) {
			int64_t at;
			memcpy(&at, list + at_off + 1 + id.len, sizeof(at));
			if (e->at > at)
				memcpy(list + at_off + 1 + id.len, &e->at,
				       sizeof(e->at));
			continue;
		}
		list[at_off] = (char)id.len;
		memcpy(list + at_off + 1, id.bytes, id.len);
		memcpy(list + at_off + 1 + id.len, &e->at, sizeof(e->at));
		k->superseded_len += (uint32_t)(1 + id.len + SUPERSEDED_AT);
	}
	return 0;
}

int
requests_add(struct requests *r, const struct event *e, amqp_bytes_t by,
             int control)
{
	void **head = entry_ref(r, REQUESTS_CANCEL, e->cancel);
	struct cancel *k, *n;

	for (k = head != NULL ? *head : NULL; k != NULL; k = k->next) {
		if (k->kind != e->kind || k->reason != e->cancel_reason ||
		    k->control != (control != 0) ||
		    !same_bytes(by, k->by, k->by_len))
			continue;
		if (e->at >= k->at) {
			k->park = e->park != 0;
			k->due = e->due;
			k->at = e->at;
		}
		if (e->until > k->until)
			k->until = e->until;
		return e->kind == EVENT_RESCHEDULE ? superseded_add(k, e) : 0;
	}
	/* Sized to its requester: by starts inside sizeof's padding. */
	if (by.len > UINT32_MAX ||
	    (n = malloc(offsetof(struct cancel, by) + by.len)) == NULL)
		return -1;
	memset(n, 0, offsetof(struct cancel, by));
	n->kind = (unsigned)e->kind;
	n->reason = (unsigned)e->cancel_reason;
	n->park = e->park != 0;
	n->control = control != 0;
	n->due = e->due;
	n->at = e->at;
	n->until = e->until;
	n->by_len = (uint32_t)by.len;
	if (by.len > 0)
		memcpy(n->by, by.bytes, by.len);
	if (e->kind == EVENT_RESCHEDULE && superseded_add(n, e) < 0) {
		cancel_free(n);
		return -1;
	}
	if (head != NULL) {
		n->next = *head;
		*head = n;
		return 0;
	}
	if (entry_put(r, REQUESTS_CANCEL, e->cancel, n) < 0) {
		cancel_free(n);
		return -1;
	}
	r->n[REQUESTS_CANCEL]++;
	return 0;
}

/*
 * The requests of one id's list that apply to a message published by
 * owner.  by_message_id: the id is the message's message-id (not its
 * cascade id), which a cancellation made from a claim never names.
 */
static void
match_list(struct cancel *k, int by_message_id, amqp_bytes_t owner,
           int64_t since, int64_t now, struct cancel_match *out)
{
	for (; k != NULL; k = k->next) {
		int applies, permitted;

		if (k->until <= now)
			continue;
		applies = k->kind == EVENT_CANCEL || k->at >= since;
		if (!applies)
			continue;
		permitted = requests_permitted(k, owner);
		if (k->reason != CANCEL_ASKED && (by_message_id || !permitted))
			continue; /* a claim's, not for this message */
		if (!permitted) {
			if (!k->refusal_parked && out->refused == NULL)
				out->refused = k;
			continue;
		}
		if (k->kind == EVENT_CANCEL) {
			if (out->cancel == NULL || k->park)
				out->cancel = k;
		} else if (out->reschedule == NULL ||
		           k->at > out->reschedule->at) {
			out->reschedule = k;
		}
	}
}

int
requests_match(struct requests *r, amqp_bytes_t message_id,
               amqp_bytes_t cascade_id, amqp_bytes_t owner, int64_t since,
               int64_t now, struct cancel_match *out)
{
	memset(out, 0, sizeof(*out));
	if (r->n[REQUESTS_CANCEL] == 0)
		return 0;
	/* A message-id that is also its cascade id is looked up once, as
	 * the cascade id. */
	if (message_id.len > 0 &&
	    !same_bytes(message_id, cascade_id.bytes, cascade_id.len))
		match_list(entry_get(r, REQUESTS_CANCEL, message_id), 1, owner,
		           since, now, out);
	if (cascade_id.len > 0)
		match_list(entry_get(r, REQUESTS_CANCEL, cascade_id), 0, owner,
		           since, now, out);
	return out->cancel != NULL || out->reschedule != NULL ||
	       out->refused != NULL;
}

static int
superseded_in(const struct cancel *k, amqp_bytes_t cascade_id,
              amqp_bytes_t owner, int64_t copied, int64_t now)
{
	for (; k != NULL; k = k->next)
		if (k->until > now && requests_permitted(k, owner) &&
		    copied < superseded_at(k->superseded, k->superseded_len,
		                           cascade_id))
			return 1;
	return 0;
}

int
requests_superseded(struct requests *r, amqp_bytes_t message_id,
                    amqp_bytes_t cascade_id, amqp_bytes_t owner, int64_t copied,
                    int64_t now)
{
	if (r->n[REQUESTS_CANCEL] == 0 || cascade_id.len == 0)
		return 0;
	if (message_id.len > 0 &&
	    superseded_in(entry_get(r, REQUESTS_CANCEL, message_id), cascade_id,
	                  owner, copied, now))
		return 1;
	return superseded_in(entry_get(r, REQUESTS_CANCEL, cascade_id),
	                     cascade_id, owner, copied, now);
}

int
requests_may_change(amqp_bytes_t owner, amqp_bytes_t by, int control)
{
	return control || owner.len == 0 || same_bytes(owner, by.bytes, by.len);
}

int
requests_permitted(const struct cancel *k, amqp_bytes_t owner)
{
	amqp_bytes_t by = {k->by_len, (void *)k->by};

	return requests_may_change(owner, by, k->control);
}

/* Whether a request by `by` (control: any) may change k's holder. */
static int
may_change(const struct claim *k, amqp_bytes_t by, int control)
{
	return control || k->scope_len == 0 ||
	       same_bytes(by, k->scope, k->scope_len);
}

static void
hold(struct claim *k, const struct event *e)
{
	k->id_len = (uint8_t)e->id.len;
	memcpy(k->id, e->id.bytes, e->id.len);
	k->id[e->id.len] = '\0';
	k->due = e->due;
	k->until = claim_margin(e->due);
}

int
requests_claim(struct requests *r, const struct event *e, amqp_bytes_t scope,
               struct claim_verdict *v)
{
	void **head = entry_ref(r, REQUESTS_CLAIM, e->cancel);
	struct claim *k = head != NULL ? claim_in_scope(*head, scope) : NULL;

	memset(v, 0, sizeof(*v));
	if (e->id.len == 0 || e->id.len > CLAIM_ID_MAX ||
	    scope.len > UINT32_MAX)
		return 0; /* not a daemon's claim: nothing to judge */
	if (k == NULL) {
		/* Sized to its scope: scope starts inside sizeof's padding. */
		if ((k = malloc(offsetof(struct claim, scope) + scope.len)) ==
		    NULL)
			return -1;
		memset(k, 0, offsetof(struct claim, scope));
		k->scope_len = (uint32_t)scope.len;
		if (scope.len > 0)
			memcpy(k->scope, scope.bytes, scope.len);
		if (head != NULL) {
			k->next = *head;
			*head = k;
		} else if (entry_put(r, REQUESTS_CLAIM, e->cancel, k) < 0) {
			free(k);
			return -1;
		}
		r->n[REQUESTS_CLAIM]++;
		hold(k, e);
		v->won = 1;
		return 0;
	}
	/* The same message's claim again (written twice), or one after
	 * nothing waits with the id any more: it holds. */
	if (same_bytes(e->id, k->id, k->id_len) || k->due <= e->at) {
		hold(k, e);
		v->won = 1;
		return 0;
	}
	if (!e->replace) {
		v->lost = 1;
		return 0;
	}
	/* Same scope: a publisher replaces its own message (requests.h). */
	v->replaced = 1;
	memcpy(v->old_id, k->id, sizeof(v->old_id));
	v->old_due = k->due;
	hold(k, e);
	v->won = 1;
	return 0;
}

const struct claim *
requests_holder(const struct requests *r, amqp_bytes_t scope,
                amqp_bytes_t message_id, int64_t now)
{
	const struct claim *k;

	if (message_id.len == 0)
		return NULL;
	k = claim_in_scope(entry_get(r, REQUESTS_CLAIM, message_id), scope);
	return k != NULL && k->due > now ? k : NULL;
}

void
requests_claims_cancelled(struct requests *r, amqp_bytes_t message_id,
                          int64_t at, amqp_bytes_t by, int control)
{
	for (struct claim *k = entry_get(r, REQUESTS_CLAIM, message_id);
	     k != NULL; k = k->next)
		if (may_change(k, by, control) && k->due > at)
			k->due = at;
}

void
requests_claims_rescheduled(struct requests *r, amqp_bytes_t message_id,
                            int64_t due, amqp_bytes_t by, int control)
{
	for (struct claim *k = entry_get(r, REQUESTS_CLAIM, message_id);
	     k != NULL; k = k->next) {
		if (!may_change(k, by, control))
			continue;
		k->due = due;
		if (claim_margin(due) > k->until)
			k->until = claim_margin(due);
	}
}

/* h, or a copy of it sized for token; NULL out of memory (h stays). */
static struct series_head *
sized(struct series_head *h, amqp_bytes_t token)
{
	struct series_head *n;

	if (h != NULL && h->token_len == token.len)
		return h;
	if ((n = realloc(h, offsetof(struct series_head, token) + token.len)) ==
	    NULL)
		return NULL;
	if (h == NULL)
		memset(n, 0, offsetof(struct series_head, token));
	return n;
}

static int
same_token(const struct series_head *h, amqp_bytes_t token)
{
	return same_bytes(token, h->token, h->token_len);
}

int
requests_series_add(struct requests *r, amqp_bytes_t id, int64_t occurrence,
                    amqp_bytes_t token, int64_t until, int64_t at)
{
	void **head = entry_ref(r, REQUESTS_SERIES, id);
	struct series_head *h = head != NULL ? *head : NULL, *n;

	if (token.len > UINT32_MAX || id.len > REQUESTS_ID_MAX)
		return -1;
	if (h != NULL && occurrence < h->occurrence)
		return 0; /* an older record read late: the later stands */
	/* The same record again (a refresh): only its age changes. */
	if (h != NULL && occurrence == h->occurrence && same_token(h, token)) {
		if (at > h->written)
			h->written = at;
		if (until > h->until)
			h->until = until;
		return 0;
	}
	if ((n = sized(h, token)) == NULL)
		return -1;
	if (head != NULL) {
		*head = n;
	} else if (entry_put(r, REQUESTS_SERIES, id, n) < 0) {
		free(n);
		return -1;
	} else {
		r->n[REQUESTS_SERIES]++;
	}
	n->occurrence = occurrence;
	n->written = at;
	n->token_len = (uint32_t)token.len;
	if (token.len > 0)
		memcpy(n->token, token.bytes, token.len);
	if (until > n->until)
		n->until = until;
	return 0;
}

const struct series_head *
requests_series_head(const struct requests *r, amqp_bytes_t id)
{
	return entry_get(r, REQUESTS_SERIES, id);
}

int
requests_series_stale(const struct requests *r, amqp_bytes_t id,
                      int64_t occurrence, amqp_bytes_t token)
{
	const struct series_head *h;

	if (id.len == 0 || (h = entry_get(r, REQUESTS_SERIES, id)) == NULL)
		return 0;
	if (occurrence < h->occurrence)
		return 1;
	return occurrence == h->occurrence && !same_token(h, token);
}

struct refresh {
	int64_t stale, now;
	size_t max, wrote;
	int (*write)(amqp_bytes_t id, const struct series_head *h, void *ctx);
	void *ctx;
};

/* One entry of the walk: a series head written again when old and in
 * force; 1 stops. */
static int
refresh_one(amqp_bytes_t key, void *value, void *ctx)
{
	struct refresh *f = ctx;
	struct series_head *h = value;

	if (key_kind(key) != REQUESTS_SERIES || h->written > f->stale ||
	    h->until <= f->now)
		return 0;
	if (f->write(key_id(key), h, f->ctx) < 0)
		return 1;
	h->written = f->now;
	return ++f->wrote >= f->max;
}

size_t
requests_series_refresh(struct requests *r, size_t *cursor, size_t slots,
                        size_t max, int64_t stale, int64_t now,
                        int (*write)(amqp_bytes_t id,
                                     const struct series_head *h, void *ctx),
                        void *ctx)
{
	struct refresh f = {stale, now, max, 0, write, ctx};

	if (max == 0)
		return 0;
	(void)idmap_walk(&r->map, cursor, slots, refresh_one, &f);
	return f.wrote;
}
