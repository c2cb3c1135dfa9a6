/*
 * Pauses (requests.h): which series and targets are paused, by whom.  A
 * pause's key is the kind's byte, then 'S' and a series' id or
 * message-id, or 'T' and a target, EXCHANGE[/KEY].
 */
#include "requests_int.h"

#include <stdlib.h>
#include <string.h>

/* The kind byte, the form byte, and up to 255 bytes of name (events.h
 * bounds every id read); a target's lookup builds EXCHANGE/KEY, which
 * may be longer, and so matches no pause. */
#define PAUSE_NAME_MAX 255

struct pause_key {
	unsigned char b[2 + PAUSE_NAME_MAX];
	amqp_bytes_t key;
};

/* The key of name in form ('S', 'T'); 0 when too long to be held. */
static int
pause_key(struct pause_key *k, char form, amqp_bytes_t name)
{
	if (name.len > PAUSE_NAME_MAX)
		return 0;
	k->b[0] = REQUESTS_PAUSE;
	k->b[1] = (unsigned char)form;
	if (name.len > 0)
		memcpy(k->b + 2, name.bytes, name.len);
	k->key.bytes = k->b;
	k->key.len = 2 + name.len;
	return 1;
}

/* The pause on name in form, in force at now, or NULL. */
static const struct pause *
pause_find(const struct requests *r, char form, amqp_bytes_t name, int64_t now)
{
	struct pause_key k;
	const struct pause *p;

	if (r->n[REQUESTS_PAUSE] == 0 || !pause_key(&k, form, name))
		return NULL;
	p = idmap_get(&r->map, k.key);
	return p != NULL && p->until > now ? p : NULL;
}

int
requests_pause_read(struct requests *r, const struct event *e, amqp_bytes_t by,
                    int control, int hold)
{
	struct pause_key k;
	struct pause *p, **ref;
	void *prev;

	if (e->target && !control)
		return 1;
	if (!pause_key(&k, e->target ? 'T' : 'S', e->cancel) ||
	    by.len > UINT32_MAX)
		return 1; /* events_parse bounds ids: none such is read */
	ref = (struct pause **)idmap_ref(&r->map, k.key);
	if (e->kind == EVENT_RESUME) {
		if (ref == NULL)
			return 0;
		/* Only who paused it, or a control user, lifts a pause. */
		if (!control && !same_bytes(by, (*ref)->by, (*ref)->by_len))
			return 1;
		free(*ref);
		(void)idmap_del(&r->map, k.key);
		r->n[REQUESTS_PAUSE]--;
		return 0;
	}
	/* A pause held already is taken by the later record: it lasts from
	 * then, and is that requester's. */
	if (ref == NULL && !hold)
		return 0;
	if ((p = malloc(sizeof(*p) + by.len)) == NULL)
		return -1;
	p->at = e->at;
	p->until = e->until;
	p->by_len = (uint32_t)by.len;
	p->control = control != 0;
	if (by.len > 0)
		memcpy(p->by, by.bytes, by.len);
	if (ref != NULL) {
		free(*ref);
		*ref = p;
		return 0;
	}
	if (idmap_put(&r->map, k.key, p, &prev) < 0) {
		free(p);
		return -1;
	}
	r->n[REQUESTS_PAUSE]++;
	return 0;
}

/* May a pause by p's requester hold a message published by owner? */
static int
pause_permitted(const struct pause *p, amqp_bytes_t owner)
{
	return p->control || owner.len == 0 ||
	       same_bytes(owner, p->by, p->by_len);
}

int
requests_series_paused(const struct requests *r, amqp_bytes_t id,
                       amqp_bytes_t message_id, amqp_bytes_t owner, int64_t now)
{
	const struct pause *p;

	if (id.len > 0 && (p = pause_find(r, 'S', id, now)) != NULL &&
	    pause_permitted(p, owner))
		return 1;
	return message_id.len > 0 &&
	       (p = pause_find(r, 'S', message_id, now)) != NULL &&
	       pause_permitted(p, owner);
}

int
requests_target_paused(const struct requests *r, amqp_bytes_t exchange,
                       amqp_bytes_t routing_key, int64_t now)
{
	unsigned char buf[PAUSE_NAME_MAX + 1];
	amqp_bytes_t name;

	if (r->n[REQUESTS_PAUSE] == 0)
		return 0;
	if (pause_find(r, 'T', exchange, now) != NULL)
		return 1;
	if (exchange.len + 1 + routing_key.len > PAUSE_NAME_MAX)
		return 0;
	if (exchange.len > 0)
		memcpy(buf, exchange.bytes, exchange.len);
	buf[exchange.len] = '/';
	if (routing_key.len > 0)
		memcpy(buf + exchange.len + 1, routing_key.bytes,
		       routing_key.len);
	name.bytes = buf;
	name.len = exchange.len + 1 + routing_key.len;
	return pause_find(r, 'T', name, now) != NULL;
}
