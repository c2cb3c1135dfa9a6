/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fetch: a waiting message's copy, read again when asked for rather than
 * kept in memory for every message (docs/console-design.md 4): its
 * scheduled record from P.events at its offset, then its copy record
 * from P.copies, from a little before the record's time (an earlier
 * cascade put the copy in the scheduled record itself).  A connection of
 * its own each time, as the console's user: a detail page is rare, and
 * so nothing is shared between the threads that answer.
 */
#include "amqp_compat.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "headers.h"
#include "streamread.h"

struct fetch {
	struct streamread s;
	uint64_t offset;
	amqp_bytes_t id;
	amqp_bytes_t *out;
	int found;
	int64_t at;   /* its scheduled record's x-cascade-at */
	int copyless; /* the record has no copy, and not for a repeat */
	int64_t lead; /* P.copies is read from at - lead to at + lead */
	int64_t max;  /* [events] copy_max_size */
};

/* The leads tried, shortest first: the broker's clock and the daemons'
 * are within a second where they are kept in time (NTP), and the copies
 * of two minutes at a busy hour are a hundred megabytes or more.  A
 * stream's timestamp offset counts whole seconds: 1 s before is 1 to 2 s
 * of copies before the record. */
static const int64_t fetch_leads[] = {1000, EVENTS_COPY_LEAD_MS};

/* The copy e carries, into f->out: 1 (stop reading), -1 out of memory. */
static int
fetch_keep(struct fetch *f, const struct event *e)
{
	if (e->copy.len > 0) {
		if ((f->out->bytes = malloc(e->copy.len)) == NULL)
			return -1;
		memcpy(f->out->bytes, e->copy.bytes, e->copy.len);
		f->out->len = e->copy.len;
	}
	return 1;
}

static int
fetch_event(void *arg, const struct event *e, char *err, size_t size)
{
	struct fetch *f = arg;

	(void)err;
	(void)size;
	/* The record is in the stream message at the offset: past it,
	 * it is not there (the stream's retention took it). */
	if (f->s.resume.last > (int64_t)f->offset)
		return 1;
	if (e->kind != EVENT_SCHEDULED || !headers_bytes_eq(e->id, f->id))
		return 0;
	f->found = 1;
	f->at = e->at;
	/* None is written for a repeat, nor for a body over the limit (as
	 * this config says it: the daemons' should be the same). */
	f->copyless = e->copy.len == 0 && e->every == 0 && e->cron.len == 0 &&
	              e->size < f->max;
	return fetch_keep(f, e);
}

/* One record of P.copies: 1 at the copy, or once past where it would be
 * (written in the same flush as its record: within a few ms). */
static int
fetch_copy_record(void *arg, const struct event *e, char *err, size_t size)
{
	struct fetch *f = arg;

	(void)err;
	(void)size;
	if (e->kind != EVENT_COPY)
		return 0;
	if (e->at > f->at + f->lead)
		return 1;
	if (!headers_bytes_eq(e->id, f->id))
		return 0;
	return fetch_keep(f, e);
}

/* Read the copy record of f from P.copies on cl.  0, or -1 with cl->err. */
static int
fetch_from_copies(struct client *cl, struct console *c, struct fetch *f)
{
	struct client_queue q;

	if (client_inspect(cl, BROKER_CH_CHECK, c->topo.copies, &q) < 0)
		return -1;
	if (q.missing)
		return 0;
	for (size_t i = 0;
	     i < sizeof(fetch_leads) / sizeof(*fetch_leads) && f->out->len == 0;
	     i++) {
		memset(&f->s, 0, sizeof(f->s));
		f->lead = fetch_leads[i];
		f->s.name = c->topo.copies;
		f->s.tag = "cascade-console.fetch";
		f->s.marker = "console-fetch";
		f->s.on_event = fetch_copy_record;
		f->s.arg = f;
		f->s.prefetch = 16;
		f->s.since = f->at > f->lead ? f->at - f->lead : 0;
		if (streamread_run(cl, &f->s) < 0)
			return -1;
	}
	return 0;
}

int
fetch_copy(struct console *c, uint64_t offset, amqp_bytes_t id,
           amqp_bytes_t *out, char *err, size_t size)
{
	struct client cl;
	struct fetch f;
	int rc;

	*out = amqp_empty_bytes;
	memset(&cl, 0, sizeof(cl));
	memset(&f, 0, sizeof(f));
	if (client_open(&cl, &c->cfg, &c->topo) < 0) {
		snprintf(err, size, "%s", cl.err);
		return -1;
	}
	f.offset = offset;
	f.max = c->cfg.events_copy_max_size;
	f.id = id;
	f.out = out;
	f.s.name = c->topo.events;
	f.s.tag = "cascade-console.fetch";
	f.s.marker = "console-fetch";
	f.s.on_event = fetch_event;
	f.s.arg = &f;
	/* The record is in the first message: a few in flight, not the
	 * thousand a catching-up reads, which the channel's close would
	 * have to read and throw away (0.3 s at a million waiting). */
	f.s.prefetch = 4;
	/* No marker: read from the offset on, as after a lost connection. */
	f.s.again = 1;
	events_resume_init(&f.s.resume);
	f.s.resume.last = (int64_t)offset - 1;
	snprintf(f.s.token, sizeof(f.s.token), "-");
	rc = streamread_run(&cl, &f.s);
	if (rc == 0 && f.found && f.copyless)
		rc = fetch_from_copies(&cl, c, &f);
	if (rc < 0)
		snprintf(err, size, "%s", cl.err);
	client_close(&cl);
	if (rc < 0)
		return -1;
	return f.found ? 0 : 1;
}
