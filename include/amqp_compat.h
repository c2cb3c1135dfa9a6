/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rabbitmq-c's headers under the name each version wants: 0.14 and later
 * (Debian 13 has 0.15) moved them to <rabbitmq-c/...> and warn on the old
 * names, which 0.11 (Debian 12) alone has.
 */
#ifndef CASCADE_AMQP_COMPAT_H
#define CASCADE_AMQP_COMPAT_H

#if defined(__has_include)
#if __has_include(<rabbitmq-c/amqp.h>)
#define CASCADE_RABBITMQ_C_NEW_HEADERS 1
#endif
#endif

#ifdef CASCADE_RABBITMQ_C_NEW_HEADERS
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/framing.h>
#else
#include <amqp.h>
#include <amqp_framing.h>
#endif

#endif
