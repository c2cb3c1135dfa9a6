/* The requests held by id, and who may make them (cancels.h). */
#include "cancels.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "trust.h"

/* The map's value for an id: its list, whose head idmap_ref changes. */
static void
free_list(void *value)
{
	struct cancel *k, *next;

	for (k = value; k != NULL; k = next) {
		next = k->next;
		free(k->superseded);
		free(k);
	}
}

void
cancels_init(struct cancels *c)
{
	idmap_init(&c->map);
}

void
cancels_free(struct cancels *c)
{
	idmap_free(&c->map, free_list);
}

static int
same_bytes(amqp_bytes_t a, const char *b, size_t blen)
{
	return a.len == blen && (blen == 0 || memcmp(a.bytes, b, blen) == 0);
}

void
cancels_requester(const struct config *cfg, struct event *e,
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
cancels_new(const struct cancels *c, const struct event *e)
{
	return idmap_get(&c->map, e->cancel) == NULL;
}

int
cancels_add(struct cancels *c, const struct event *e, amqp_bytes_t by,
            int control)
{
	void **head = idmap_ref(&c->map, e->cancel), *prev;
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
		free(n->superseded);
		free(n);
		return -1;
	}
	if (head != NULL) {
		n->next = *head;
		*head = n;
	} else if (idmap_put(&c->map, e->cancel, n, &prev) < 0) {
		free(n->superseded);
		free(n);
		return -1;
	}
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
		permitted = cancels_permitted(k, owner);
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
cancels_match(struct cancels *c, amqp_bytes_t message_id,
              amqp_bytes_t cascade_id, amqp_bytes_t owner, int64_t since,
              int64_t now, struct cancel_match *out)
{
	memset(out, 0, sizeof(*out));
	if (c->map.n == 0)
		return 0;
	/* A message-id that is also its cascade id is looked up once, as
	 * the cascade id. */
	if (message_id.len > 0 &&
	    !same_bytes(message_id, cascade_id.bytes, cascade_id.len))
		match_list(idmap_get(&c->map, message_id), 1, owner, since, now,
		           out);
	if (cascade_id.len > 0)
		match_list(idmap_get(&c->map, cascade_id), 0, owner, since, now,
		           out);
	return out->cancel != NULL || out->reschedule != NULL ||
	       out->refused != NULL;
}

static int
superseded_in(const struct cancel *k, amqp_bytes_t cascade_id,
              amqp_bytes_t owner, int64_t copied, int64_t now)
{
	for (; k != NULL; k = k->next)
		if (k->until > now &&
		    (k->control || owner.len == 0 ||
		     same_bytes(owner, k->by, k->by_len)) &&
		    copied < superseded_at(k->superseded, k->superseded_len,
		                           cascade_id))
			return 1;
	return 0;
}

int
cancels_superseded(struct cancels *c, amqp_bytes_t message_id,
                   amqp_bytes_t cascade_id, amqp_bytes_t owner, int64_t copied,
                   int64_t now)
{
	if (c->map.n == 0 || cascade_id.len == 0)
		return 0;
	if (message_id.len > 0 && superseded_in(idmap_get(&c->map, message_id),
	                                        cascade_id, owner, copied, now))
		return 1;
	return superseded_in(idmap_get(&c->map, cascade_id), cascade_id, owner,
	                     copied, now);
}

int
cancels_permitted(const struct cancel *k, amqp_bytes_t owner)
{
	return k->control || owner.len == 0 ||
	       same_bytes(owner, k->by, k->by_len);
}

struct prune {
	struct cancels *c;
	int64_t now;
};

/* Drop the lapsed requests of one id; 1 when none is left. */
static int
lapsed(amqp_bytes_t key, void *value, void *ctx)
{
	struct prune *p = ctx;
	struct cancel *head = value, **pp = &head, *k;

	while ((k = *pp) != NULL) {
		if (k->until <= p->now) {
			*pp = k->next;
			free(k->superseded);
			free(k);
		} else {
			pp = &k->next;
		}
	}
	if (head == NULL)
		return 1;
	if (head != value)
		*idmap_ref(&p->c->map, key) = head;
	return 0;
}

size_t
cancels_prune(struct cancels *c, int64_t now)
{
	struct prune p = {c, now};

	idmap_each(&c->map, lapsed, &p);
	return c->map.n;
}
