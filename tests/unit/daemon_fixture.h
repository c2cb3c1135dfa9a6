/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon_* unit tests' fixture (daemon_fixture.c): one daemon on a
 * 100 ms ladder of factor 2, three shards, stubs that record what they
 * are asked to do, and the helpers that make and look at deliveries.
 */
#ifndef CASCADE_TEST_DAEMON_FIXTURE_H
#define CASCADE_TEST_DAEMON_FIXTURE_H

#include <stdint.h>

#include "../../src/cascade/daemon_int.h"

struct tb;

#define MAX_CALLS 16

/* What the stubs were asked to do. */
struct daemon_calls {
	struct message *published[MAX_CALLS];
	int64_t published_at[MAX_CALLS]; /* wall ms */
	unsigned npublished;
	unsigned parks; /* of the published, through daemon_park */
	unsigned retries, waits, records, matched;
	unsigned cancelled, requests;
	unsigned unwrapped;
	unsigned opened, taken; /* from P.requests */
};

extern struct daemon_calls calls;
extern struct daemon d;
extern struct config fixture_cfg;

void daemon_fixture_setup(void);
void daemon_fixture_teardown(void);

/* First sights counted as scheduled (cascade_scheduled_total). */
uint64_t scheduled(void);
/* A delivery from consumer `consumer`, with the headers in t. */
struct message *delivery(unsigned consumer, const char *routing_key,
                         struct tb *t);
/* An ingress delivery asking for `delay` ms. */
struct message *delayed(const char *routing_key, int64_t delay);
/* Run the loop until no hold is left. */
void settle(void);
/* The route of the i-th message published. */
const struct route *published(unsigned i);
/* The reorder window of `ms`, as it is when nothing was disrupted. */
void reorder_window_closed(int64_t ms);
/* The window, open as it is after the daemon connected. */
void reorder_window(int64_t ms);

#endif
