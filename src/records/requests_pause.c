/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pauses (requests.h): which series and targets are paused, by whom.  A
 * pause's key is the kind's byte, then 'S' and a series' id or
 * message-id, or 'T' and a target, EXCHANGE[/KEY] with the default
 * exchange written empty; its entry, a list of each requester's pause.
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

/* The default exchange's other name. */
#define AMQ_DEFAULT "amq.default"
#define AMQ_DEFAULT_LEN (sizeof(AMQ_DEFAULT) - 1)

/* A target name with amq.default written as the empty name it is. */
static amqp_bytes_t
target_name(amqp_bytes_t t)
{
	if (t.len >= AMQ_DEFAULT_LEN &&
	    memcmp(t.bytes, AMQ_DEFAULT, AMQ_DEFAULT_LEN) == 0 &&
	    (t.len == AMQ_DEFAULT_LEN ||
	     ((const char *)t.bytes)[AMQ_DEFAULT_LEN] == '/')) {
		t.bytes = (char *)t.bytes + AMQ_DEFAULT_LEN;
		t.len -= AMQ_DEFAULT_LEN;
	}
	return t;
}

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

/* The pauses of name in form, or NULL. */
static const struct pause *
pause_list(const struct requests *r, char form, amqp_bytes_t name)
{
	struct pause_key k;

	if (r->n[REQUESTS_PAUSE] == 0 || !pause_key(&k, form, name))
		return NULL;
	return idmap_get(&r->map, k.key);
}

static int
pause_by(const struct pause *p, amqp_bytes_t by)
{
	return same_bytes(by, p->by, p->by_len);
}

int
requests_pause_new(const struct requests *r, const struct event *e,
                   amqp_bytes_t by)
{
	const struct pause *p;

	if (e->kind != EVENT_PAUSE)
		return 0;
	p = pause_list(r, e->target ? 'T' : 'S',
	               e->target ? target_name(e->cancel) : e->cancel);
	for (; p != NULL; p = p->next)
		if (pause_by(p, by))
			return 0;
	return 1;
}

/* A resume by `by` (control: lifts every pause of the name). */
static int
pause_lift(struct requests *r, struct pause **ref, amqp_bytes_t key,
           amqp_bytes_t by, int control)
{
	struct pause **pp = ref, *p;
	int lifted = 0;

	while ((p = *pp) != NULL) {
		if (control || pause_by(p, by)) {
			*pp = p->next;
			free(p);
			r->n[REQUESTS_PAUSE]--;
			lifted = 1;
		} else {
			pp = &p->next;
		}
	}
	if (*ref == NULL)
		(void)idmap_del(&r->map, key);
	return lifted ? 0 : 1;
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
	if (!pause_key(&k, e->target ? 'T' : 'S',
	               e->target ? target_name(e->cancel) : e->cancel) ||
	    by.len > UINT32_MAX)
		return 1; /* events_parse bounds ids: none such is read */
	ref = (struct pause **)idmap_ref(&r->map, k.key);
	if (e->kind == EVENT_RESUME)
		return ref == NULL ? 0 : pause_lift(r, ref, k.key, by, control);
	/* The same requester's again: renewed, from this record on. */
	for (p = ref != NULL ? *ref : NULL; p != NULL; p = p->next)
		if (pause_by(p, by)) {
			p->at = e->at;
			p->until = e->until;
			p->control = control != 0;
			return 0;
		}
	if (!hold)
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
		p->next = *ref;
		*ref = p;
	} else {
		p->next = NULL;
		if (idmap_put(&r->map, k.key, p, &prev) < 0) {
			free(p);
			return -1;
		}
	}
	r->n[REQUESTS_PAUSE]++;
	return 0;
}

/* Drop the lapsed pauses of one name, counting them off *n. */
struct pause *
requests_pauses_lapsed(struct pause *head, int64_t now, size_t *n)
{
	struct pause **pp = &head, *p;

	while ((p = *pp) != NULL) {
		if (p->until <= now) {
			*pp = p->next;
			free(p);
			(*n)--;
		} else {
			pp = &p->next;
		}
	}
	return head;
}

int
requests_series_paused(const struct requests *r, amqp_bytes_t id,
                       amqp_bytes_t message_id, amqp_bytes_t owner, int64_t now)
{
	int others;

	return requests_series_pauses(r, id, message_id, owner,
	                              amqp_empty_bytes, 1, now, &others) != 0;
}

unsigned
requests_series_pauses(const struct requests *r, amqp_bytes_t id,
                       amqp_bytes_t message_id, amqp_bytes_t owner,
                       amqp_bytes_t by, int control, int64_t now, int *others)
{
	const struct pause *p;
	unsigned names = 0;

	*others = 0;
	for (int i = 0; i < 2; i++) {
		amqp_bytes_t name = i == 0 ? id : message_id;
		if (name.len == 0)
			continue;
		/* In force, and by one who may change the message. */
		for (p = pause_list(r, 'S', name); p != NULL; p = p->next) {
			amqp_bytes_t pauser = {p->by_len, (void *)p->by};

			if (p->until <= now ||
			    !requests_may_change(owner, pauser, p->control))
				continue;
			names |=
			    i == 0 ? REQUESTS_BY_ID : REQUESTS_BY_MESSAGE_ID;
			if (!control && !pause_by(p, by))
				*others = 1;
		}
	}
	return names;
}

/* Is a pause of target name in force at now? */
static int
target_in_force(const struct requests *r, amqp_bytes_t name, int64_t now)
{
	for (const struct pause *p = pause_list(r, 'T', name); p != NULL;
	     p = p->next)
		if (p->until > now)
			return 1;
	return 0;
}

int
requests_target_held(const struct requests *r, amqp_bytes_t name, int64_t now)
{
	return target_in_force(r, target_name(name), now);
}

int
requests_target_paused(const struct requests *r, amqp_bytes_t exchange,
                       amqp_bytes_t routing_key, int64_t now)
{
	unsigned char buf[PAUSE_NAME_MAX + 1];
	amqp_bytes_t name;

	if (r->n[REQUESTS_PAUSE] == 0)
		return 0;
	exchange = target_name(exchange);
	if (target_in_force(r, exchange, now))
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
	return target_in_force(r, name, now);
}
