/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The AMQP 1.0 consumer's links and deliveries (amqp1.h): one receiving
 * link per holding queue, attached with the credit granted so far, and
 * detached and attached afresh when idle (the detached one retiring until
 * the broker's detach); a delivery read frame by frame and handed on whole;
 * and its settling, accepted, released or modified with
 * x-opt-delivery-time.  The connection that carries them is amqp1.c's
 * (amqp1_int.h).
 */
#include "amqp1_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <proton/codec.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/link.h>
#include <proton/session.h>
#include <proton/terminus.h>

#include "duration.h"

static struct amqp1_link *
amqp1_link_of(struct amqp1 *c, const pn_link_t *l, unsigned *index)
{
	for (unsigned i = 0; i < c->nlinks; i++)
		if (c->links[i].pn == l) {
			*index = i;
			return &c->links[i];
		}
	return NULL;
}

int
amqp1_retiring(struct amqp1 *c, const pn_link_t *l, int forget)
{
	for (unsigned i = 0; i < c->nretiring; i++)
		if (c->retiring[i] == l) {
			if (forget)
				c->retiring[i] = c->retiring[--c->nretiring];
			return 1;
		}
	return 0;
}

/*
 * A delivery on a link we detached: dropped, the broker returns it.  Not
 * settled: a settle with no outcome is a disposition without a state,
 * which RabbitMQ 4.3 answers by ending the session ("Unrecognised state:
 * undefined"); the delivery goes with the link when the broker's detach
 * comes.
 */
static void
amqp1_drop_delivery(pn_delivery_t *d)
{
	pn_link_t *l = pn_delivery_link(d);
	char scratch[4096];

	while (pn_link_recv(l, scratch, sizeof(scratch)) > 0)
		;
	if (!pn_delivery_partial(d))
		pn_link_advance(l);
}

int
amqp1_read_delivery(struct amqp1 *c, pn_delivery_t *d)
{
	pn_link_t *l = pn_delivery_link(d);
	struct amqp1_link *lk;
	struct amqp1_delivery dv;
	unsigned index;
	size_t len;

	lk = amqp1_link_of(c, l, &index);
	if (lk == NULL && pn_delivery_readable(d) && amqp1_retiring(c, l, 0)) {
		amqp1_drop_delivery(d);
		return 0;
	}
	if (lk == NULL || !pn_delivery_readable(d))
		return 0;
	for (;;) {
		size_t pending = pn_delivery_pending(d);
		if (pending == 0)
			break;
		if (lk->len + pending > lk->cap) {
			size_t cap = lk->cap ? lk->cap : 4096;
			char *nb;
			while (cap < lk->len + pending)
				cap *= 2;
			nb = realloc(lk->buf, cap);
			if (nb == NULL)
				return -1;
			lk->buf = nb;
			lk->cap = cap;
		}
		ssize_t n = pn_link_recv(l, lk->buf + lk->len, pending);
		if (n <= 0)
			break;
		lk->len += (size_t)n;
	}
	if (pn_delivery_partial(d))
		return 0;
	pn_link_advance(l);
	if (pn_delivery_settled(d)) {
		/* Sent settled: nothing of ours to settle. */
		pn_delivery_settle(d);
		lk->len = 0;
		return 0;
	}
	c->unsettled++;
	lk->unsettled++;
	dv.pn = d;
	dv.gen = c->gen;
	len = lk->len;
	lk->len = 0;
	c->h->delivery(c->ctx, index, dv, lk->buf, len);
	return 0;
}

void
amqp1_address(const char *queue, char *out, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = (size_t)snprintf(out, size, "/queues/");

	for (const unsigned char *q = (const unsigned char *)queue;
	     *q != '\0' && o + 4 < size; q++) {
		if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
		    (*q >= '0' && *q <= '9') || *q == '-' || *q == '.' ||
		    *q == '_' || *q == '~') {
			out[o++] = (char)*q;
		} else {
			out[o++] = '%';
			out[o++] = hex[*q >> 4];
			out[o++] = hex[*q & 15];
		}
	}
	out[o] = '\0';
}

void
amqp1_link_open(struct amqp1 *c, unsigned i)
{
	struct amqp1_link *lk = &c->links[i];
	char name[64];
	pn_link_t *l;

	snprintf(name, sizeof(name), "cascade-hold-%u-%u", i, c->relinks);
	l = pn_receiver(c->session, name);
	pn_terminus_set_address(pn_link_source(l), lk->address);
	/* At least once: the broker sends unsettled, we settle. */
	pn_link_set_snd_settle_mode(l, PN_SND_UNSETTLED);
	pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
	pn_link_open(l);
	if (c->credit > 0)
		pn_link_flow(l, (int)c->credit);
	lk->pn = l;
	lk->len = 0;
	lk->unsettled = 0;
	lk->opened = duration_mono_ms();
}

unsigned
amqp1_links_relink(struct amqp1 *c, int64_t age_ms)
{
	int64_t now = duration_mono_ms();
	unsigned n = 0;

	if (c == NULL || c->failed || c->detaching)
		return 0;
	for (unsigned i = 0; i < c->nlinks; i++) {
		struct amqp1_link *lk = &c->links[i];

		if (lk->unsettled > 0 || lk->len > 0 ||
		    now - lk->opened < age_ms ||
		    c->nretiring >= AMQP1_MAX_LINKS)
			continue;
		pn_link_close(lk->pn);
		c->retiring[c->nretiring++] = lk->pn;
		c->relinks++;
		amqp1_link_open(c, i);
		n++;
	}
	return n;
}

void
amqp1_links_flow(struct amqp1 *c, unsigned credit)
{
	c->credit += credit;
	for (unsigned i = 0; i < c->nlinks; i++)
		pn_link_flow(c->links[i].pn, (int)credit);
}

/* The delivery dv names, when it is of this connection and still open. */
static pn_delivery_t *
amqp1_live(struct amqp1 *c, struct amqp1_delivery dv)
{
	if (c == NULL || c->failed || dv.gen != c->gen || dv.pn == NULL)
		return NULL;
	return dv.pn;
}

static void
amqp1_settle(struct amqp1 *c, pn_delivery_t *d, uint64_t outcome)
{
	pn_link_t *l = pn_delivery_link(d);
	struct amqp1_link *lk;
	unsigned index;

	pn_delivery_update(d, outcome);
	pn_delivery_settle(d);
	c->unsettled--;
	if ((lk = amqp1_link_of(c, l, &index)) != NULL && lk->unsettled > 0)
		lk->unsettled--;
	pn_link_flow(l, 1);
}

void
amqp1_accept(struct amqp1 *c, struct amqp1_delivery dv)
{
	pn_delivery_t *d = amqp1_live(c, dv);

	if (d != NULL)
		amqp1_settle(c, d, PN_ACCEPTED);
}

void
amqp1_release(struct amqp1 *c, struct amqp1_delivery dv)
{
	pn_delivery_t *d = amqp1_live(c, dv);

	if (d != NULL)
		amqp1_settle(c, d, PN_RELEASED);
}

void
amqp1_delay(struct amqp1 *c, struct amqp1_delivery dv, int64_t due_ms)
{
	pn_delivery_t *d = amqp1_live(c, dv);
	pn_disposition_t *disp;
	pn_data_t *ann;

	if (d == NULL)
		return;
	disp = pn_delivery_local(d);
	/* Not failed: the delivery count stays, so the delivery limit never
	 * drops a message that only waits. */
	pn_disposition_set_failed(disp, false);
	pn_disposition_set_undeliverable(disp, false);
	ann = pn_disposition_annotations(disp);
	pn_data_clear(ann);
	pn_data_put_map(ann);
	pn_data_enter(ann);
	pn_data_put_symbol(
	    ann, pn_bytes(strlen(AMQP1_DELIVERY_TIME), AMQP1_DELIVERY_TIME));
	pn_data_put_timestamp(ann, due_ms);
	pn_data_exit(ann);
	amqp1_settle(c, d, PN_MODIFIED);
}

unsigned
amqp1_unsettled(const struct amqp1 *c)
{
	return c ? c->unsettled : 0;
}
