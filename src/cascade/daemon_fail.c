/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one way the daemon gives its connection up: daemon_fail says why,
 * once, marks it broken, stops the watchers that use it, and arms the
 * teardown (daemon_conn.c's on_teardown, set on the teardown timer when
 * the daemon starts) for a fresh loop iteration, so that no caller walks
 * a list it frees.  Every file may fail the connection, so this one calls
 * no other file of the daemon's.
 *
 * Owns: nothing (broken, url_next and the teardown timer are
 * daemon_conn's).
 */
#include "daemon_int.h"

#include <ev.h>
#include <systemd/sd-daemon.h>

#include "log.h"

/*
 * Stop using the connection, and tear it down from a fresh loop iteration
 * so that no caller walks a list we free.
 */
void
daemon_teardown_soon(struct daemon *d)
{
	if (d->broken)
		return;
	d->broken = 1;
	d->url_next++;
	ev_io_stop(d->loop, &d->io);
	ev_idle_stop(d->loop, &d->more);
	ev_timer_stop(d->loop, &d->heartbeat);
	ev_timer_stop(d->loop, &d->replay);
	ev_timer_stop(d->loop, &d->probe_check);
	ev_timer_stop(d->loop, &d->series_refresh);
	ev_timer_set(&d->teardown, 0., 0.);
	ev_timer_start(d->loop, &d->teardown);
}

/* The connection is unusable: say why, once, and what the broker gets back. */
void
daemon_fail(struct daemon *d, const char *why)
{
	if (d->broken)
		return;
	/* What we drop is redelivered by the broker: say how much. */
	log_error("connection_lost",
	          " reason=\"%s\" in_flight=%u held=%u retrying=%u paused=%u"
	          " queued=%u",
	          why, outbox_count(&d->out.inflight), message_count(&d->held),
	          outbox_count(&d->out.retry), outbox_count(&d->out.paused),
	          outbox_count(&d->out.queued) +
	              outbox_count(&d->out.suspects));
	sd_notifyf(0, "STATUS=reconnecting: %s", why);
	daemon_teardown_soon(d);
}
