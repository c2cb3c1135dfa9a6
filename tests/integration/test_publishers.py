# SPDX-License-Identifier: Apache-2.0
"""The publishers users come from (issue 39): Tanzu RabbitMQ's and
RabbitMQ 4.4's delay headers over AMQP 0-9-1, and an AMQP 1.0 publisher
(Qpid Proton) sending to /exchanges/P with the message annotations
x-opt-delivery-time and x-opt-delivery-delay, or the application property
x-delay (docs/CONTRACT.md section 1)."""
import time
import urllib.parse

import pytest

from helpers import broker_version
from waiting import wait_listed

# How late a delivery may be in these tests, and how early (the clocks of
# the test and of the daemon are one machine's).
LATE = 3.0
SLACK = 0.005


def test_opt_delivery_time_is_a_due_time(client, daemon):
    """cascade waits it out: listed as waiting before it is due (a broker
    that held it in P.ingress itself, as RabbitMQ 4.4's quorum queues may
    for x-opt-delivery-time, would show nothing), then delivered."""
    q = client.queue()
    due = time.time() + 4
    client.publish(daemon.prefix, q, b"at",
                   {"x-opt-delivery-time": int(due * 1000), "keep": "me"},
                   message_id="t-1")
    listed = wait_listed(daemon, ["t-1"], timeout=3)
    assert time.time() < due, "listed only after it was due"
    row = [m for m in listed["messages"] if m["id"] == "t-1"][0]
    assert row["due_ms"] == int(due * 1000), row
    got = client.collect(q, 1, timeout=4 + LATE)
    assert [p.message_id for _, p, _ in got] == ["t-1"], got
    t, props, body = got[0]
    assert due - SLACK <= t < due + LATE, t - due
    assert body == b"at" and props.headers == {"keep": "me"}, props


def test_opt_delivery_delay_is_a_delay(client, daemon):
    q = client.queue()
    t0 = time.time()
    client.publish(daemon.prefix, q, b"in",
                   {"x-opt-delivery-delay": 1200}, message_id="d-1")
    got = client.collect(q, 1, timeout=1.2 + LATE)
    assert got and got[0][0] >= t0 + 1.2 - SLACK, got
    assert not got[0][1].headers, got[0][1].headers


def test_a_time_wins_over_every_delay(client, daemon):
    """x-opt-delivery-time before x-opt-delivery-delay and x-delay, as
    Tanzu reads them; x-remaining-delay after both times."""
    q = client.queue()
    t0 = time.time()
    client.publish(daemon.prefix, q, b"order",
                   {"x-delay": 60000, "x-opt-delivery-delay": 60000,
                    "x-remaining-delay": 60000,
                    "x-opt-delivery-time": int((t0 + 1) * 1000)},
                   message_id="o-1")
    got = client.collect(q, 1, timeout=1 + LATE)
    assert [p.message_id for _, p, _ in got] == ["o-1"], got


def test_a_double_x_delay_as_brighter_sends_it(broker, client, daemon):
    """Brighter writes x-delay as a double (TimeSpan.TotalMilliseconds):
    truncated to whole ms, as the plugin took it."""
    import amqp  # py-amqp (kombu's): pika cannot send a double
    q = client.queue()
    u = urllib.parse.urlparse(broker.url)
    conn = amqp.Connection("%s:%d" % (u.hostname, u.port),
                           userid=urllib.parse.unquote(u.username),
                           password=urllib.parse.unquote(u.password),
                           virtual_host="/")
    conn.connect()
    try:
        t0 = time.time()
        conn.channel().basic_publish(
            amqp.Message(b"dbl", message_id="f-1",
                         application_headers={"x-delay": 1200.9}),
            exchange=daemon.prefix, routing_key=q)
    finally:
        conn.close()
    got = client.collect(q, 1, timeout=1.2 + LATE)
    assert [p.message_id for _, p, _ in got] == ["f-1"], got
    assert got[0][0] >= t0 + 1.2 - SLACK, got[0][0] - t0


def amqp10(broker):
    """A blocking Qpid Proton connection to the broker as its URL's user,
    or a skip before RabbitMQ 4.0 (whose AMQP 1.0 has no /exchanges/
    addresses: the plan runs this on 4.0.5 and 4.3.6)."""
    if broker_version(broker) < (4, 0):
        pytest.skip("AMQP 1.0 addresses (/exchanges/...) need RabbitMQ 4.0")
    from proton.utils import BlockingConnection
    u = urllib.parse.urlparse(broker.url)
    return BlockingConnection(
        "amqp://%s:%d" % (u.hostname, u.port),
        user=urllib.parse.unquote(u.username or "guest"),
        password=urllib.parse.unquote(u.password or "guest"),
        allowed_mechs="PLAIN", sasl_enabled=True, timeout=20)


@pytest.mark.parametrize("how", ["x-opt-delivery-time",
                                 "x-opt-delivery-delay", "x-delay"])
def test_an_amqp10_publisher_gets_its_delay_and_its_message_intact(
        broker, client, daemon, how):
    """Sent to /exchanges/P/Q over AMQP 1.0: delivered to Q after the
    delay, with its properties, application properties and body, to a
    0-9-1 consumer and to an AMQP 1.0 one."""
    from proton import Message
    q = client.queue()
    q10 = client.queue()
    conn = amqp10(broker)
    try:
        t0 = time.time()
        ann, app = {}, {"colour": "blue", "n": 7}
        if how == "x-opt-delivery-time":
            ann[how] = int((t0 + 1.5) * 1000)
        elif how == "x-opt-delivery-delay":
            ann[how] = 1500
        else:
            app[how] = 1500
        for queue, mid in ((q, "a10-" + how), (q10, "b10-" + how)):
            m = Message(body=b"\x00binary body\xff", inferred=True,
                        id=mid, correlation_id="corr-1",
                        content_type="application/octet-stream",
                        annotations=ann, properties=app)
            sender = conn.create_sender("/exchanges/%s/%s" %
                                        (daemon.prefix, queue))
            sender.send(m)
            sender.close()
        got = client.collect(q, 1, timeout=1.5 + LATE)
        assert got, "lost"
        t, props, body = got[0]
        assert t >= t0 + 1.5 - SLACK, t - t0
        assert body == b"\x00binary body\xff"
        assert props.message_id == "a10-" + how
        assert props.correlation_id == "corr-1"
        assert props.content_type == "application/octet-stream"
        headers = props.headers or {}
        assert headers.get("colour") == "blue" and headers.get("n") == 7, \
            headers
        assert not [k for k in headers if k.startswith("x-opt-delivery")
                    or k == "x-delay"], headers
        receiver = conn.create_receiver("/queues/" + q10)
        m = receiver.receive(timeout=1.5 + LATE + 5)
        receiver.accept()
        assert time.time() >= t0 + 1.5 - SLACK
        assert m.body == b"\x00binary body\xff", m.body
        assert m.id == "b10-" + how and m.correlation_id == "corr-1", m
        assert m.properties.get("colour") == "blue", m.properties
        assert m.properties.get("n") == 7, m.properties
    finally:
        conn.close()
