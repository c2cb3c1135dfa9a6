/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A complete message, sorted by what it is, from the 0-9-1 frames
 * (daemon_wire) or a holding queue over AMQP 1.0 (daemon_hold): a record
 * read from P.cancels or P.series goes to the replay, one read from
 * P.events for a reading to the scan, a basic.return to its publish; a
 * delivery back from cascade's own queues is checked for who put it
 * there and opened from its envelope; a request from P.requests waits for
 * the next reading; the redelivery guard parks what was handed out too
 * often; and a delivery is judged (daemon_flow), now or once the
 * connection is unblocked.
 *
 * Owns: nothing.
 * Calls into: daemon_replay (records), daemon_scan (requests and their
 * readings), daemon_open (who put it there, envelopes), daemon_flow
 * (routing), daemon_publish (returns, parks).
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <stdint.h>

void
daemon_message_done(struct daemon *d, struct message *m)
{
	if (m->kind == MESSAGE_RECORD && !m->discard) {
		daemon_record(d, m);
		return;
	}
	if (m->kind == MESSAGE_READING && !m->discard) {
		daemon_scan_message(d, m);
		return;
	}
	if (m->kind == MESSAGE_DELIVERY || m->kind == MESSAGE_HELD)
		d->m.received[m->consumer]++;
	if (m->kind == MESSAGE_RETURN) {
		d->m.returns++;
		daemon_match_return(d, m);
		message_free(m);
		return;
	}
	if (m->discard) {
		/* Not acked: the broker gives it to another consumer. */
		message_free(m);
		return;
	}
	/* Back from cascade's own queues: put there by a daemon? */
	if ((m->src == ROUTE_FROM_RETURN || m->src == ROUTE_FROM_HOLD) &&
	    daemon_forged(d, m))
		return;
	/* A holding queue's message is an envelope: open it; so is a
	 * request's in P.requests. */
	if (m->src == ROUTE_FROM_HOLD && daemon_unwrap(d, m) < 0)
		return;
	if (m->src == ROUTE_FROM_REQUESTS && daemon_scan_open(d, m) < 0)
		return;
	if (m->redelivered &&
	    (m->src == ROUTE_FROM_HOLD || m->src == ROUTE_FROM_REQUESTS
	         ? router_guard_count(
	               m->src, &m->props, m->routing_key, m->delivery_count,
	               d->cfg->router_max_redeliveries, &m->route)
	         : router_guard(m->src, &m->props, m->routing_key,
	                        d->cfg->router_max_redeliveries, &m->route))) {
		m->routed = 1;
		daemon_publish(d, m);
		return;
	}
	if (d->out.blocked) {
		outbox_pause(&d->out, &m->out);
		return;
	}
	daemon_take(d, m);
}

void
daemon_take(struct daemon *d, struct message *m)
{
	/* A request from P.requests waits for the next reading of
	 * P.events; the rest is judged. */
	if (m->src == ROUTE_FROM_REQUESTS) {
		daemon_scan_take(d, m);
		return;
	}
	daemon_route(d, m);
}
