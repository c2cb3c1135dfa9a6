/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stream: folding P.events (events.h) for list, cancel and reschedule,
 * and P.copies for reschedule's copies: read by the library
 * (streamread.h) up to a marker of ours, and what the reading skipped
 * said on stderr.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "duration.h"
#include "escape.h"
#include "streamread.h"

/* One record into the fold. */
static int
stream_fold_event(void *arg, const struct event *e, char *err, size_t size)
{
	struct waiting_fold *f = arg;

	if (waiting_fold_event(f, e) < 0) {
		snprintf(err, size, "out of memory after %" PRIu64 " records",
		         f->records);
		return -1;
	}
	return 0;
}

/* What the reading of s read past, on stderr. */
static void
stream_said(const struct streamread *s)
{
	if (s->skipped > 0)
		fprintf(stderr,
		        PROG ": skipped %" PRId64 " undecodable message(s) in "
		             "%s at offset %" PRId64 "%s: headers this AMQP "
		             "library cannot decode (see docs/CONTRACT.md "
		             "section 4.4)%s\n",
		        s->skipped, s->name, s->first_skipped,
		        s->skipped > 1 ? " and later" : "",
		        s->reconnects > 0 ? "; the library refused some: read "
		                            "past on new connections"
		                          : "");
	if (s->untrusted > 0) {
		char who[ESCAPE_MAX_FACTOR * 64 + 4];
		escape_bytes(s->untrusted_writer, strlen(s->untrusted_writer),
		             64, ESCAPE_QUOTED, who, sizeof(who));
		fprintf(stderr,
		        "cascade-ctl: skipped %" PRIu64 " record(s) written "
		        "by users that are neither cascade's nor [events] "
		        "control_users (the first by \"%s\"); see "
		        "docs/security.md\n",
		        s->untrusted, who);
	}
}

/* A reading of stream name into the fold f, each record by on_event, up
 * to a marker of cascade-ctl's. */
static void
stream_reading(struct streamread *s, const char *name, const char *tag,
               int (*on_event)(void *, const struct event *, char *, size_t),
               struct waiting_fold *f)
{
	memset(s, 0, sizeof(*s));
	s->name = name;
	s->tag = tag;
	s->marker = "ctl";
	s->on_event = on_event;
	s->arg = f;
}

/* list does not read P.cancels: see cancel_run. */
int
stream_fold(struct ctl *c, struct waiting_fold *f)
{
	struct streamread s;
	int64_t start = duration_mono_ms();
	int rc;

	stream_reading(&s, c->topo.events, "cascade-ctl.events",
	               stream_fold_event, f);
	rc = streamread_run(&c->cl, &s);
	c->stream_ms = duration_mono_ms() - start;
	c->stream_records = s.records;
	/* Said once the marker is read, even should the close fail. */
	if (s.reached)
		stream_said(&s);
	return rc;
}

/* One record of P.copies into the fold: copies only. */
static int
stream_fold_copy(void *arg, const struct event *e, char *err, size_t size)
{
	return e->kind == EVENT_COPY ? stream_fold_event(arg, e, err, size) : 0;
}

int
stream_fold_copies(struct ctl *c, struct waiting_fold *f, char **ids, int nids,
                   int64_t due)
{
	amqp_bytes_t by = amqp_cstring_bytes(c->cl.user);
	int control = config_control_user(&c->cfg, by);
	int64_t at = duration_wall_ms(), seen = 0, first;
	struct client_queue q;
	struct streamread s;
	uint64_t n = 0;

	/* Without a user of its own it copies nothing (request_copies). */
	if (c->cl.user[0] == '\0')
		return 0;
	for (int i = 0; i < nids; i++)
		if (waiting_copyless(f, amqp_cstring_bytes(ids[i]), due, at, by,
		                     control, c->cfg.events_copy_max_size,
		                     &first) > 0 &&
		    (n++ == 0 || first < seen))
			seen = first;
	if (n == 0)
		return 0;
	/* Written by a cascade before P.copies, its copies are in
	 * P.events, read already. */
	if (client_inspect(&c->cl, BROKER_CH_CHECK, c->topo.copies, &q) < 0)
		return -1;
	if (q.missing)
		return 0;
	stream_reading(&s, c->topo.copies, "cascade-ctl.copies",
	               stream_fold_copy, f);
	s.since = seen > EVENTS_COPY_LEAD_MS ? seen - EVENTS_COPY_LEAD_MS : 0;
	if (streamread_run(&c->cl, &s) < 0)
		return -1;
	if (s.reached)
		stream_said(&s);
	return 0;
}
