/* SPDX-License-Identifier: Apache-2.0 */
/* Publisher confirms for the tools: settling by number, multiple, returns. */
#include <criterion/criterion.h>
#include <string.h>

#include "broker.h"
#include "client.h"

static struct broker_confirms c;
static uint64_t settled[64];
static int oks[64], nsettled, nreturns;
static char err[256];

static void
on_settle(void *arg, uint64_t seq, int acked)
{
	(void)arg;
	if (nsettled < 64) {
		settled[nsettled] = seq;
		oks[nsettled] = acked;
	}
	nsettled++;
}

static void
on_return(void *arg, const amqp_basic_return_t *r)
{
	(void)arg;
	(void)r;
	nreturns++;
}

static void
setup(void)
{
	memset(&c, 0, sizeof(c));
	c.ch = 1;
	c.on_settle = on_settle;
	c.on_return = on_return;
	nsettled = nreturns = 0;
}

/* n publishes, as broker_confirm_publish numbers them. */
static void
sent(int n)
{
	while (n-- > 0) {
		c.seq++;
		c.open[c.seq % BROKER_CONFIRM_WINDOW] = 1;
	}
}

static int
method(amqp_channel_t ch, amqp_method_number_t id, void *decoded)
{
	amqp_frame_t f;

	memset(&f, 0, sizeof(f));
	f.frame_type = AMQP_FRAME_METHOD;
	f.channel = ch;
	f.payload.method.id = id;
	f.payload.method.decoded = decoded;
	return broker_confirm_frame(&c, &f, err, sizeof(err));
}

static int
ack(uint64_t tag, int multiple)
{
	amqp_basic_ack_t a = {tag, (amqp_boolean_t)multiple};
	return method(1, AMQP_BASIC_ACK_METHOD, &a);
}

static int
nack(uint64_t tag, int multiple)
{
	amqp_basic_nack_t n = {tag, (amqp_boolean_t)multiple, 0};
	return method(1, AMQP_BASIC_NACK_METHOD, &n);
}

TestSuite(broker_confirms, .init = setup);

Test(broker_confirms, single_acks_in_any_order)
{
	sent(3);
	cr_assert_eq(ack(2, 0), 1);
	cr_assert_eq(broker_confirm_pending(&c), 2);
	cr_assert_eq(ack(1, 0), 1);
	cr_assert_eq(ack(3, 0), 1);
	cr_assert_eq(broker_confirm_pending(&c), 0);
	cr_assert_eq(c.acked, 3);
	cr_assert_eq(nsettled, 3);
	cr_assert_eq(settled[0], 2);
	cr_assert_eq(settled[1], 1);
	cr_assert_eq(c.low, 3);
}

Test(broker_confirms, multiple_settles_only_what_is_still_open)
{
	sent(5);
	ack(3, 0);
	nack(2, 0);
	ack(4, 1);
	cr_assert_eq(c.acked, 3); /* 3, then 1 and 4 */
	cr_assert_eq(c.nacked, 1);
	cr_assert_eq(nsettled, 4);
	cr_assert_eq(settled[2], 1);
	cr_assert_eq(settled[3], 4);
	cr_assert_eq(broker_confirm_pending(&c), 1);
	nack(5, 1);
	cr_assert_eq(c.nacked, 2);
	cr_assert_eq(oks[4], 0);
	cr_assert_eq(broker_confirm_pending(&c), 0);
}

Test(broker_confirms, repeated_and_unknown_tags_are_ignored)
{
	sent(2);
	ack(1, 0);
	ack(1, 0);
	ack(1, 1);
	ack(9, 0);
	ack(9, 1);
	cr_assert_eq(c.acked, 1);
	cr_assert_eq(nsettled, 1);
}

Test(broker_confirms, a_window_of_publishes_wraps)
{
	for (int i = 0; i < 3; i++) {
		sent(BROKER_CONFIRM_WINDOW);
		ack(c.seq, 1);
		cr_assert_eq(broker_confirm_pending(&c), 0);
	}
	cr_assert_eq(c.acked, 3 * BROKER_CONFIRM_WINDOW);
}

Test(broker_confirms, a_return_and_its_content_are_swallowed)
{
	amqp_basic_return_t r;
	amqp_frame_t f;

	memset(&r, 0, sizeof(r));
	sent(1);
	cr_assert_eq(method(1, AMQP_BASIC_RETURN_METHOD, &r), 1);
	cr_assert_eq(nreturns, 1);
	memset(&f, 0, sizeof(f));
	f.channel = 1;
	f.frame_type = AMQP_FRAME_HEADER;
	f.payload.properties.body_size = 10;
	cr_assert_eq(broker_confirm_frame(&c, &f, err, sizeof(err)), 1);
	f.frame_type = AMQP_FRAME_BODY;
	f.payload.body_fragment.len = 6;
	cr_assert_eq(broker_confirm_frame(&c, &f, err, sizeof(err)), 1);
	f.payload.body_fragment.len = 4;
	cr_assert_eq(broker_confirm_frame(&c, &f, err, sizeof(err)), 1);
	/* The next content is a delivery's: the caller's. */
	f.frame_type = AMQP_FRAME_HEADER;
	cr_assert_eq(broker_confirm_frame(&c, &f, err, sizeof(err)), 0);
	cr_assert_eq(ack(1, 0), 1);
	cr_assert_eq(c.returned, 1);
	cr_assert_eq(c.acked, 1);
}

Test(broker_confirms, other_channels_and_methods_are_the_callers)
{
	amqp_basic_deliver_t d;
	amqp_basic_ack_t a = {1, 0};

	memset(&d, 0, sizeof(d));
	sent(1);
	cr_assert_eq(method(1, AMQP_BASIC_DELIVER_METHOD, &d), 0);
	cr_assert_eq(method(2, AMQP_BASIC_ACK_METHOD, &a), 0);
	cr_assert_eq(c.acked, 0);
}

Test(broker_confirms, closes_are_errors)
{
	amqp_channel_close_t cc = {404, amqp_cstring_bytes("NOT_FOUND - x"), 60,
	                           40};
	amqp_connection_close_t oc = {320, amqp_cstring_bytes("FORCED"), 0, 0};

	cr_assert_eq(method(2, AMQP_CHANNEL_CLOSE_METHOD, &cc), 0);
	cr_assert_eq(method(1, AMQP_CHANNEL_CLOSE_METHOD, &cc), -1);
	cr_assert_str_eq(err,
	                 "channel closed by the broker: 404 NOT_FOUND - x");
	cr_assert_eq(method(0, AMQP_CONNECTION_CLOSE_METHOD, &oc), -1);
	cr_assert_str_eq(err, "connection closed by the broker: 320 FORCED");
}

/*
 * broker_connect_user refuses, before connecting, what PLAIN cannot carry
 * as given; its reasons never repeat the password.  With no URL to try,
 * credentials it accepts get as far as the URLs and no further.
 */
static struct config nourl;

static const char *
login_refusal(amqp_bytes_t user, amqp_bytes_t pass)
{
	char url[CONFIG_STR_MAX];

	cr_assert_null(broker_connect_user(&nourl, user, pass, 0, url,
	                                   sizeof(url), err, sizeof(err)));
	return err;
}

Test(broker_connect_user, refuses_what_plain_cannot_carry)
{
	static char longer[BROKER_CREDENTIAL_MAX + 1];
	amqp_bytes_t nul_user = {3, "a\0b"}, nul_pass = {10, "sekrit\0xyz"};
	amqp_bytes_t alice = amqp_cstring_bytes("alice");

	memset(longer, 'a', sizeof(longer));
	cr_assert_str_eq(login_refusal(nul_user, alice),
	                 "user name: holds a NUL byte");
	cr_assert_str_eq(login_refusal(alice, nul_pass),
	                 "password: holds a NUL byte");
	cr_assert_null(strstr(err, "sekrit"));
	cr_assert_str_eq(login_refusal(amqp_empty_bytes, alice),
	                 "user name: empty");
	cr_assert_str_eq(
	    login_refusal((amqp_bytes_t){sizeof(longer), longer}, alice),
	    "user name: longer than 255 bytes");
	cr_assert_str_eq(
	    login_refusal(alice, (amqp_bytes_t){sizeof(longer), longer}),
	    "password: longer than 255 bytes");
	/* 255 bytes each, and an empty password, are the broker's to
	 * judge. */
	cr_assert_str_eq(
	    login_refusal((amqp_bytes_t){BROKER_CREDENTIAL_MAX, longer},
	                  (amqp_bytes_t){BROKER_CREDENTIAL_MAX, longer}),
	    "no broker URL to connect to");
	cr_assert_str_eq(login_refusal(alice, amqp_empty_bytes),
	                 "no broker URL to connect to");
}

/* client_open_user: the same refusal, and no user taken from it. */
Test(broker_connect_user, client_open_user_keeps_no_refused_user)
{
	static struct client cl;
	static struct topology topo;
	amqp_bytes_t nul_user = {3, "a\0b"};

	strcpy(cl.user, "someone");
	cr_assert_eq(client_open_user(&cl, &nourl, &topo, nul_user,
	                              amqp_cstring_bytes("pw"), 0),
	             -1);
	cr_assert_null(cl.conn);
	cr_assert_str_eq(cl.user, "");
	cr_assert_eq(cl.as_user, 1);
	cr_assert_str_eq(cl.err, "user name: holds a NUL byte");
}
