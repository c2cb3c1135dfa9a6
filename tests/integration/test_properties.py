# SPDX-License-Identifier: Apache-2.0
"""What arrives is the message the publisher sent, intact."""
import os

from helpers import METRICS, total, wait_for


def test_properties_body_and_user_headers_intact(client, daemon):
    q = client.queue()
    headers = {
        "x-remaining-delay": "300ms",
        "x-target-routing-key": q,
        "x-death": [{"queue": "elsewhere", "reason": "expired", "count": 1}],
        "x-first-death-queue": "elsewhere",
        "x-last-death-reason": "expired",
        "tenant": "acme",
        "attempt": 3,
        "nested": {"a": 1, "b": [1, 2, "three"]},
        "flag": True,
    }
    props = dict(content_type="application/json", content_encoding="gzip",
                 delivery_mode=2, priority=7, correlation_id="corr-1",
                 reply_to="replies", expiration="60000", message_id="m-1",
                 timestamp=1700000000, type="order.created", app_id="shop")
    client.publish(daemon.prefix, "ignored-routing-key", b'{"order": 42}',
                   headers, **props)
    got = client.collect(q, 1, timeout=10)
    assert got, "lost"
    _, p, body = got[0]
    assert body == b'{"order": 42}'
    for k, v in props.items():
        assert getattr(p, k) == v, k
    assert p.headers == {"tenant": "acme", "attempt": 3,
                         "nested": {"a": 1, "b": [1, 2, "three"]},
                         "flag": True}
    assert p.user_id is None


def test_user_id_kept_in_header(client, daemon):
    q = client.queue()
    client.publish(daemon.prefix, q, b"u", {"x-remaining-delay": 200},
                   user_id="guest")
    got = client.collect(q, 1, timeout=10)
    assert got
    _, p, _ = got[0]
    assert p.user_id is None
    assert p.headers == {"x-cascade-user-id": "guest"}


def test_expiration_held_back_during_the_delay(client, daemon):
    """A per-message TTL shorter than the delay must not expire the message
    on the way; it is restored at delivery."""
    q = client.queue()
    client.publish(daemon.prefix, q, b"e", {"x-remaining-delay": 1500},
                   expiration="500")
    got = client.collect(q, 1, timeout=10)
    assert got, "expired on the way"
    assert got[0][1].expiration == "500"


def test_eight_mebibyte_body(client, daemon):
    q = client.queue()
    body = os.urandom(8 * 1024 * 1024)
    t0 = client.publish(daemon.prefix, q, body, {"x-remaining-delay": "1s"})
    got = client.collect(q, 1, timeout=30)
    assert got, "lost"
    assert got[0][2] == body
    assert got[0][0] - t0 >= 1.0 - 0.001


def test_target_exchange_of_another_type(client, daemon):
    ex = "topic-" + daemon.prefix
    client.ch.exchange_declare(ex, "topic")
    q = client.queue()
    client.ch.queue_bind(q, ex, "orders.*.created")
    t0 = client.publish(daemon.prefix, "anything", b"t",
                        {"x-remaining-delay": 400, "x-target-exchange": ex,
                         "x-target-routing-key": "orders.eu.created"})
    got = client.collect(q, 1, timeout=10)
    assert got, "lost"
    assert got[0][0] - t0 >= 0.4 - 0.001
    assert got[0][1].headers is None or not any(
        k.startswith("x-") for k in got[0][1].headers)


def test_default_target_exchange(client, daemon_factory):
    ex = "direct-" + os.urandom(4).hex()
    client.ch.exchange_declare(ex, "direct")
    q = client.queue()
    client.ch.queue_bind(q, ex, "rk")
    d = daemon_factory({"router": {"default_target_exchange": ex}})
    client.publish(d.prefix, "rk", b"d", {"x-remaining-delay": 200})
    got = client.collect(q, 1, timeout=10)
    assert got and got[0][2] == b"d"


def test_cc_header_routes_at_delivery_not_on_the_way(client,
                                                     daemon_factory):
    """RabbitMQ copies a message to the queues named in its CC header
    (sender-selected distribution).  The copy must happen at delivery, as
    the publisher meant, not on every hop into a delay queue."""
    daemon = daemon_factory(METRICS)
    q = client.queue()
    audit = client.queue()
    t0 = client.publish(daemon.prefix, q, b"cc", {"x-remaining-delay": 3000,
                                                  "CC": [audit]})
    # Once the broker has confirmed a hop, a copy that hop made is in the
    # CC queue already.
    wait_for(lambda: total(daemon.metrics(), "cascade_hops_total") >= 1, 10,
             "the first hop")
    assert client.drain(audit) == [], "copied to the CC queue before due"
    main = client.collect(q, 1, timeout=10)
    copy = client.collect(audit, 1, timeout=5)
    assert main and copy
    assert main[0][0] - t0 >= 3.0 - 0.001
    assert main[0][1].headers == {"CC": [audit]}
