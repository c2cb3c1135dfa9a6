/* The requests held by id, and who may make them (cancels.h). */
#include "cancels.h"

#include <stdlib.h>
#include <string.h>

/* The map's value for an id: its list, which pruning may shorten. */
struct cancel_set {
	struct cancel *head;
};

static void
free_set(void *value)
{
	struct cancel_set *set = value;
	struct cancel *k, *next;

	for (k = set->head; k != NULL; k = next) {
		next = k->next;
		free(k);
	}
	free(set);
}

void
cancels_init(struct cancels *c)
{
	idmap_init(&c->map);
}

void
cancels_free(struct cancels *c)
{
	idmap_free(&c->map, free_set);
}

static int
same_bytes(amqp_bytes_t a, const char *b, size_t blen)
{
	return a.len == blen && (blen == 0 || memcmp(a.bytes, b, blen) == 0);
}

void
cancels_requester(const struct config *cfg, const struct event *e,
                  amqp_bytes_t own_user, amqp_bytes_t *by, int *control)
{
	int trusted = e->writer.len > 0 &&
	              (config_control_user(cfg, e->writer) ||
	               same_bytes(e->writer, own_user.bytes, own_user.len));

	*by = e->has_requester && trusted ? e->requester : e->writer;
	*control = config_control_user(cfg, *by);
}

int
cancels_add(struct cancels *c, const struct event *e, amqp_bytes_t by,
            int control)
{
	struct cancel_set *set = idmap_get(&c->map, e->cancel);
	struct cancel *k, *n;
	void *prev;

	for (k = set != NULL ? set->head : NULL; k != NULL; k = k->next) {
		if (k->kind != e->kind || k->control != control ||
		    !same_bytes(by, k->by, k->by_len))
			continue;
		if (e->at >= k->at) {
			k->park = e->park;
			k->due = e->due;
			k->at = e->at;
		}
		if (e->until > k->until)
			k->until = e->until;
		return 0;
	}
	if ((n = malloc(sizeof(*n) + by.len + 1)) == NULL)
		return -1;
	memset(n, 0, sizeof(*n));
	n->kind = e->kind;
	n->reason = (enum cancel_reason)e->cancel_reason;
	n->park = e->park;
	n->control = control;
	n->due = e->due;
	n->at = e->at;
	n->until = e->until;
	n->by_len = by.len;
	if (by.len > 0)
		memcpy(n->by, by.bytes, by.len);
	n->by[by.len] = '\0';
	if (set == NULL) {
		if ((set = malloc(sizeof(*set))) == NULL) {
			free(n);
			return -1;
		}
		set->head = NULL;
		if (idmap_put(&c->map, e->cancel, set, &prev) < 0) {
			free(set);
			free(n);
			return -1;
		}
	}
	n->next = set->head;
	set->head = n;
	return 0;
}

static void
match_list(const struct cancel_set *set, amqp_bytes_t owner, int64_t since,
           int64_t now, struct cancel_match *out)
{
	struct cancel *k;

	if (set == NULL)
		return;
	for (k = set->head; k != NULL; k = k->next) {
		int applies, permitted;

		if (k->until <= now)
			continue;
		applies = k->kind == EVENT_CANCEL || k->at >= since;
		if (!applies)
			continue;
		permitted = k->control || owner.len == 0 ||
		            same_bytes(owner, k->by, k->by_len);
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
	if (message_id.len > 0)
		match_list(idmap_get(&c->map, message_id), owner, since, now,
		           out);
	if (cascade_id.len > 0 &&
	    !(cascade_id.len == message_id.len &&
	      memcmp(cascade_id.bytes, message_id.bytes, cascade_id.len) == 0))
		match_list(idmap_get(&c->map, cascade_id), owner, since, now,
		           out);
	return out->cancel != NULL || out->reschedule != NULL ||
	       out->refused != NULL;
}

/* Drop the lapsed requests of one id; 1 when none is left. */
static int
lapsed(amqp_bytes_t key, void *value, void *ctx)
{
	int64_t now = *(const int64_t *)ctx;
	struct cancel_set *set = value;
	struct cancel **pp = &set->head, *k;

	(void)key;
	while ((k = *pp) != NULL) {
		if (k->until <= now) {
			*pp = k->next;
			free(k);
		} else {
			pp = &k->next;
		}
	}
	if (set->head != NULL)
		return 0;
	free(set);
	return 1;
}

size_t
cancels_prune(struct cancels *c, int64_t now)
{
	idmap_each(&c->map, lapsed, &now);
	return c->map.n;
}
