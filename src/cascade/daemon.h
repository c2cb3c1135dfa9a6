/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The running daemon: one libev loop that consumes ingress and return,
 * routes each delivery and acks it once its next publish is confirmed.
 */
#ifndef CASCADE_DAEMON_H
#define CASCADE_DAEMON_H

#include "config.h"

/*
 * Run until SIGTERM or SIGINT.  Returns the process exit status: 0 after a
 * clean stop, 1 when the broker refuses the topology (arguments differ) or
 * the daemon cannot start.
 */
int daemon_run(const struct config *cfg);

#endif
