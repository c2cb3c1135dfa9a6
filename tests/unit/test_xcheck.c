/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Target-exchange lookups: one declare per exchange however many messages
 * wait, answers in the order sent, and how long an answer is believed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "xcheck.h"

static struct xcheck x;
static struct outbox_item items[6];
static int freed[6];

static void
setup(void)
{
	xcheck_init(&x);
	memset(items, 0, sizeof(items));
	memset(freed, 0, sizeof(freed));
}

static void
free_item(struct outbox_item *it, void *ctx)
{
	(void)ctx;
	freed[it - items]++;
}

static amqp_bytes_t
b(const char *s)
{
	return amqp_cstring_bytes(s);
}

TestSuite(xcheck, .init = setup);

Test(xcheck, unknown_until_answered_then_believed_for_the_ttl)
{
	const char *why;

	cr_assert_eq(xcheck_find(&x, b("orders"), 0, &why), XCHECK_UNKNOWN);
	xcheck_add(&x, b("orders"), NULL, 1000);
	cr_assert_eq(xcheck_find(&x, b("orders"), 1000, &why), XCHECK_EXISTS);
	cr_assert_null(why);
	cr_assert_eq(xcheck_find(&x, b("order"), 1000, &why), XCHECK_UNKNOWN);
	cr_assert_eq(
	    xcheck_find(&x, b("orders"), 1000 + XCHECK_TTL_MS - 1, &why),
	    XCHECK_EXISTS);
	cr_assert_eq(xcheck_find(&x, b("orders"), 1000 + XCHECK_TTL_MS, &why),
	             XCHECK_UNKNOWN);
}

Test(xcheck, a_refusal_replaces_the_answer_that_it_exists)
{
	const char *why;

	xcheck_add(&x, b("logs"), NULL, 0);
	xcheck_add(&x, b("other"), NULL, 0);
	xcheck_add(&x, b("logs"), "403 ACCESS_REFUSED - write access", 5);
	cr_assert_eq(xcheck_find(&x, b("logs"), 6, &why), XCHECK_REFUSED);
	cr_assert_str_eq(why, "403 ACCESS_REFUSED - write access");
	cr_assert_eq(xcheck_find(&x, b("other"), 6, &why), XCHECK_EXISTS);
	/* The refusal is believed from when it was seen. */
	cr_assert_eq(xcheck_find(&x, b("logs"), 4 + XCHECK_TTL_MS, &why),
	             XCHECK_REFUSED);
}

Test(xcheck, the_cache_keeps_the_newest_when_full)
{
	char name[16];
	const char *why;

	for (int i = 0; i <= XCHECK_CACHE; i++) {
		snprintf(name, sizeof(name), "x%d", i);
		xcheck_add(&x, b(name), NULL, 0);
	}
	cr_assert_eq(xcheck_find(&x, b("x0"), 1, &why), XCHECK_UNKNOWN);
	cr_assert_eq(xcheck_find(&x, b("x1"), 1, &why), XCHECK_EXISTS);
	snprintf(name, sizeof(name), "x%d", XCHECK_CACHE);
	cr_assert_eq(xcheck_find(&x, b(name), 1, &why), XCHECK_EXISTS);
}

Test(xcheck, messages_for_one_exchange_share_one_lookup)
{
	struct xcheck_lookup *lk;
	int oom;

	lk = xcheck_wait(&x, b("a"), &items[0], &oom);
	cr_assert_not_null(lk, "the first message needs a declare");
	cr_assert_null(xcheck_wait(&x, b("a"), &items[1], &oom),
	               "the second waits on the same one");
	cr_assert_not(oom);
	cr_assert_not_null(xcheck_wait(&x, b("b"), &items[2], &oom));
	cr_assert_eq(xcheck_waiting(&x), 3);
	cr_assert_eq(outbox_count(&lk->waiters), 2);
	cr_assert_eq(TAILQ_FIRST(&lk->waiters), &items[0]);
}

Test(xcheck, answers_come_in_the_order_declares_were_sent)
{
	struct xcheck_lookup *a, *bb;
	int oom;

	a = xcheck_wait(&x, b("a"), &items[0], &oom);
	bb = xcheck_wait(&x, b("b"), &items[1], &oom);
	cr_assert_null(xcheck_answered(&x), "nothing sent: a stray reply");
	cr_assert_eq(xcheck_unsent(&x), a);
	a->sent = 1;
	cr_assert_eq(xcheck_unsent(&x), bb);
	bb->sent = 1;
	cr_assert_null(xcheck_unsent(&x));
	cr_assert_eq(xcheck_answered(&x), a);
	xcheck_free(a);
	cr_assert_eq(xcheck_answered(&x), bb);
	xcheck_free(bb);
	cr_assert_null(xcheck_answered(&x));
}

Test(xcheck, declares_after_a_failed_one_are_sent_again)
{
	struct xcheck_lookup *a, *bb;
	int oom;

	a = xcheck_wait(&x, b("missing"), &items[0], &oom);
	bb = xcheck_wait(&x, b("b"), &items[1], &oom);
	a->sent = bb->sent = 1;
	/* 404 for "missing" closes the channel; the broker drops "b". */
	cr_assert_eq(xcheck_answered(&x), a);
	xcheck_free(a);
	xcheck_unsend(&x);
	cr_assert_eq(xcheck_unsent(&x), bb);
}

Test(xcheck, drop_frees_every_waiter_once)
{
	int oom;

	xcheck_wait(&x, b("a"), &items[0], &oom);
	xcheck_wait(&x, b("a"), &items[1], &oom);
	xcheck_wait(&x, b("b"), &items[2], &oom);
	xcheck_drop(&x, free_item, NULL);
	cr_assert_eq(freed[0] + freed[1] + freed[2], 3);
	cr_assert_eq(freed[0] * freed[1] * freed[2], 1);
	cr_assert_eq(xcheck_waiting(&x), 0);
	cr_assert(TAILQ_EMPTY(&x.lookups));
}

Test(xcheck, the_default_exchange_and_long_names_are_handled)
{
	char big[300];
	const char *why;
	int oom;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	/* Not a valid AMQP name (over 255 bytes): never cached. */
	xcheck_add(&x, b(big), NULL, 0);
	cr_assert_eq(xcheck_find(&x, b(big), 1, &why), XCHECK_UNKNOWN);
	cr_assert_null(xcheck_wait(&x, b(big), &items[0], &oom));
	cr_assert(oom);
	xcheck_add(&x, b(""), NULL, 0);
	cr_assert_eq(xcheck_find(&x, b(""), 1, &why), XCHECK_EXISTS);
}
