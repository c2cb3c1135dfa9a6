/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Room on the main thread's stack for the decoders cascade does not own.
 * rabbitmq-c 0.11 (Debian 12) decodes nested header tables recursively
 * with no depth bound, and Qpid Proton-C decodes nested AMQP 1.0 values
 * recursively up to its 65,535 nodes: the deepest message a broker hands
 * over needs about 4 MiB (a header frame of 128 KiB) or 6.5 MiB (an
 * AMQP 1.0 section) of stack, against a default limit of 8 MiB, which
 * larger frames (a sanitizer, another compiler) eat into.  Linux grows
 * the main thread's stack up to the limit in force when it faults, so
 * raising the soft limit at start gives that room.
 */
#ifndef CASCADE_STACKROOM_H
#define CASCADE_STACKROOM_H

#include <stddef.h>

/* The soft limit cascade asks for. */
#define STACKROOM_BYTES ((size_t)64 << 20)

/*
 * Raise RLIMIT_STACK's soft limit to at least bytes (as far as the hard
 * limit allows).  The limit in force, or 0 when it could not be read.
 */
size_t stackroom_raise(size_t bytes);

#endif
