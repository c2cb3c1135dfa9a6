/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the router's files share: router.c reads a message's route,
 * router_repeat.c its repeat (x-cascade-every or x-cascade-cron) and
 * which occurrence a delivery delivers.  Only those two include it.
 */
#ifndef CASCADE_ROUTER_INT_H
#define CASCADE_ROUTER_INT_H

#include "router.h"

/*
 * A repeat's headers: on first sight the publisher's, checked, with the
 * start moved past occurrences missed before now; while it waits our own
 * state.  Every value is bounded before any arithmetic (schedule.h).
 * -1 after parking.
 */
int router_read_repeat(const struct router_params *p, const amqp_table_t *h,
                       int64_t now, struct route *r);

/* Due: deliver, and for a repeat, which occurrence (schedule.h). */
void router_deliver(const struct router_params *p, struct route *r,
                    int64_t now);

#endif
