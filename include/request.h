/* SPDX-License-Identifier: Apache-2.0 */
/*
 * request: the records that ask the daemons to change what waits (cancel,
 * reschedule, pause, resume: docs/CONTRACT.md 7.3, 7.5, 7.10), built and
 * written as a control user writes them, into P.cancels where the daemons
 * read them and P.events where list does; or, for a publisher, who may
 * not write there, published to P for a daemon to record.  In the library so
 * that cascade-ctl and the console make the same requests from the same code:
 * the same lifetimes, the same copies for a reschedule made earlier.
 */
#ifndef CASCADE_REQUEST_H
#define CASCADE_REQUEST_H

#include "amqp_compat.h"
#include <stdint.h>

#include "client.h"
#include "events.h"
#include "waiting.h"

/* A cancellation of waiting messages holds this long past their due time. */
#define REQUEST_MARGIN_MS 86400000LL

/*
 * A cancel (kind EVENT_CANCEL, park: have them parked) or reschedule
 * (EVENT_RESCHEDULE, to due) of id, made at `at`, into *e.  n waiting
 * messages have the id, the latest due at last_due.  It holds until a day
 * after the latest of them is due (they come by then at the latest,
 * unless a target refuses them), or, naming none yet, as long as a
 * message may wait (max_age): not longer, so that a later message
 * reusing the id is not cancelled.  The strings are id's.
 */
void request_event(struct event *e, enum event_kind kind, amqp_bytes_t id,
                   int park, int64_t due, uint64_t n, int64_t last_due,
                   int64_t at, int64_t max_age);
/*
 * A pause (or, resume set, a resume) of the series named (its message-id
 * or cascade id) or, target set, of the target EXCHANGE[/KEY], made at
 * `at`, held as long as a message may wait (max_age), into *e.
 */
void request_pause_event(struct event *e, int resume, amqp_bytes_t name,
                         int target, int64_t at, int64_t max_age);

/*
 * For the reschedule e of id to due: publish a copy, due then, of each
 * waiting message in f it names that would come back to a daemon after
 * due (it waits in a delay level or holding queue until its own time),
 * when its scheduled record carries one, into the first shard's return
 * queue as cl->user.  Their cascade ids go into e->superseded, from pool:
 * only messages cl->user may change (requests.h).  0, or -1 with cl->err,
 * e->superseded then naming the copies already sent.
 */
int request_copies(struct client *cl, struct waiting_fold *f, amqp_bytes_t id,
                   int64_t due, struct event *e, amqp_pool_t *pool);

/* e into P.cancels, then its copy into P.events.  -1 with cl->err. */
int request_record(struct client *cl, const struct event *e);

/*
 * A publisher's way to make request e (from request_event or
 * request_pause_event: kind, target, e->cancel, e->park, e->due): they
 * may write to P only (docs/security.md), so e goes as a message
 * published to P with the request header (events_request_props) and
 * user-id cl->user, and the broker's confirm is awaited.  A daemon takes
 * it from there (CONTRACT 7.3, 7.5, 7.10): it holds for [events] max_age
 * whatever e->until says, a reschedule's time is checked against
 * max_delay then and its copies are made by that daemon, and a target's
 * pause by anyone but a control user is parked.  -1 with cl->err (a
 * refusal by the broker, or nothing bound to P: is cascade running?).
 */
int request_publish_to_p(struct client *cl, const struct event *e);

#endif
