# SPDX-License-Identifier: Apache-2.0
"""Never stuck (docs/CONTRACT.md section 4): one full target or one poison
message must not hold up the others, and must not take the connection
down."""
import json
import random
import sys
import time
import uuid

import pika
import pytest

from helpers import LATE_SCALE, ctl, metrics_daemon, scrape, wait_for

FRAME_MAX = 131072


def quorum_queue(client, **arguments):
    name = "q-" + uuid.uuid4().hex[:8]
    arguments["x-queue-type"] = "quorum"
    client.ch.queue_declare(name, durable=True, arguments=arguments)
    return name


def first_copies(client, queue, count, timeout):
    """{body: (arrival time, props)} of each body's first copy, until
    count different bodies arrived or timeout.  A duplicate, which
    at-least-once allows (a publish channel closed by a poison message is
    followed by publishing the unconfirmed messages again, parks as well
    as deliveries), is not counted."""
    got = {}
    deadline = time.time() + timeout
    while len(got) < count and time.time() < deadline:
        for t, p, b in client.collect(queue, count - len(got),
                                      max(0.1, deadline - time.time())):
            got.setdefault(b, (t, p))
    return got


def consume_timed(client, queue, count, timeout):
    """{body: first arrival time} (first_copies)."""
    return {b: t for b, (t, _) in
            first_copies(client, queue, count, timeout).items()}


def parked(client, prefix, count, timeout=10):
    """{message body: x-cascade-error} of what is parked in P.error
    (first_copies)."""
    return {b: (p.headers or {}).get("x-cascade-error") for b, (_, p) in
            first_copies(client, prefix + ".error", count, timeout).items()}


def assert_connection_kept(d):
    log = d.log()
    assert "connection_lost" not in log, log[-3000:]
    assert "msg=ready" in log and log.count("msg=ready") == 1, log[-3000:]


def test_full_target_holds_up_no_other_target(client, daemon_factory):
    """A quorum target with x-max-length 10 and reject-publish gets
    200 messages due now; 100 for a healthy target
    published next (half due now, half in 1.5-2 s) arrive on time while
    it stays full, and the 200 arrive, once each, when it drains."""
    d, url = metrics_daemon(daemon_factory,
                            router={"target_backoff_max": "2s"})
    full = quorum_queue(client, **{"x-max-length": 10,
                                   "x-overflow": "reject-publish"})
    healthy = quorum_queue(client)
    for i in range(200):
        client.publish(d.prefix, full, b"f%d" % i, {"x-remaining-delay": 0})
    wait_for(lambda: scrape(url).get(
        'cascade_target_refusals_total{exchange="",routing_key="%s"}' %
        full, 0) > 0, 10, "refusals of the full target in /metrics")
    due = {}
    for i in range(100):
        delay = 0 if i < 50 else random.randint(1500, 2000)
        body = b"h%d" % i
        due[body] = time.time() + delay / 1000.0
        client.publish(d.prefix, healthy, body,
                       {"x-remaining-delay": delay})
    got = consume_timed(client, healthy, 100, 20)
    assert len(got) == 100, "only %d of 100 healthy messages arrived" % \
        len(got)
    late = sorted(got[b] - due[b] for b in got)
    assert late[0] > -0.005, "early by %.3f s" % -late[0]
    # On time while the other target is full: well within a second
    # (before the fix none of them arrived in 40 s).
    assert late[-1] < 1.5 * LATE_SCALE, \
        "healthy target late by up to %.3f s" % late[-1]
    m = scrape(url)
    key = '{exchange="",routing_key="%s"}' % full
    assert m["cascade_target_refusals_total" + key] > 0
    assert m["cascade_target_diverted_total" + key] > 0
    assert m.get("cascade_target_refusals_total"
                 '{exchange="",routing_key="%s"}' % healthy) is None
    # Overdue, going round the ladder: seen as they pass through.
    assert m["cascade_overdue_seconds"] > 0
    # The refused ones wait in the ladder, not in the daemon.
    assert m["cascade_retrying_messages"] == 0
    assert m["cascade_paused_messages"] == 0
    # An operator sees which target is the problem.
    status = json.loads(ctl(d, "status", "--json").stdout)
    refusing = {t["routing_key"]: t for t in status["targets"]}
    assert refusing[full]["refusals"] > 0 and refusing[full]["diverted"] > 0
    assert healthy not in refusing
    assert full in ctl(d, "status").stdout
    drained = {}
    deadline = time.time() + 30
    while len(drained) < 200 and time.time() < deadline:
        for _, _, b in client.collect(full, 200 - len(drained), 0.5):
            drained[b] = drained.get(b, 0) + 1
    assert len(drained) == 200, "%d of 200 refused messages arrived" % \
        len(drained)
    assert_connection_kept(d)


def test_refused_park_after_parks_with_the_reason(client, daemon_factory):
    d = daemon_factory({"router": {"target_backoff_max": "400ms",
                                   "refused_park_after": "1s"}})
    full = client.queue(**{"x-max-length": 1,
                           "x-overflow": "reject-publish"})
    client.publish(d.prefix, full, b"fits", {"x-remaining-delay": 0})
    client.publish(d.prefix, full, b"refused", {"x-remaining-delay": 0})
    got = parked(client, d.prefix, 1, 15)
    assert list(got) == [b"refused"], got
    reason = got[b"refused"]
    assert "refused it for" in reason and full in reason, reason
    assert [b for _, _, b in client.drain(full)] == [b"fits"]


def test_refused_names_parked_and_the_connection_kept(client,
                                                      daemon_factory):
    """Exchange names the broker refuses: not UTF-8 (RabbitMQ closes the
    connection over it), internal, amq.rabbitmq.trace; and a name ending
    in a line feed, which does not exist.  Each is parked with a reason;
    the well-formed messages after each arrive."""
    d = daemon_factory()
    target = client.queue()
    internal = "internal-" + d.prefix
    client.ch.exchange_declare(internal, "direct", internal=True)
    names = {
        b"utf8": (b"\xff\xfebilling".decode("latin-1"), "UTF-8"),
        b"internal": (internal, "internal exchange"),
        b"trace": ("amq.rabbitmq.trace", "internal exchange"),
        b"lf": ("billing\n", "does not exist"),
    }
    for body, (name, _) in names.items():
        headers = {"x-remaining-delay": 0, "x-target-exchange": name}
        if body == b"utf8":
            # pika sends str as UTF-8: send the raw bytes instead.
            headers["x-target-exchange"] = b"\xff\xfebilling"
        client.publish(d.prefix, target, body, headers)
        for i in range(5):
            client.publish(d.prefix, target, body + b"-ok%d" % i,
                           {"x-remaining-delay": 0})
    got = consume_timed(client, target, 20, 15)
    assert len(got) == 20, sorted(got)
    reasons = parked(client, d.prefix, 4)
    for body, (_, words) in names.items():
        assert words in (reasons.get(body) or ""), reasons
    assert_connection_kept(d)


def test_poison_among_many_in_flight_is_found_alone(client, daemon_factory):
    """Three messages for an internal exchange among 300 in flight: only
    those three are parked, every other arrives."""
    d = daemon_factory()
    target = client.queue()
    internal = "internal-" + d.prefix
    client.ch.exchange_declare(internal, "direct", internal=True)
    poison = {50, 51, 150}
    for i in range(300):
        headers = {"x-remaining-delay": 0}
        if i in poison:
            headers["x-target-exchange"] = internal
        client.publish(d.prefix, target, b"m%d" % i, headers)
    got = consume_timed(client, target, 400, 8)
    want = {b"m%d" % i for i in range(300) if i not in poison}
    assert want <= set(got), sorted(want - set(got))[:10]
    assert not set(got) - want
    reasons = parked(client, d.prefix, 3)
    assert set(reasons) == {b"m%d" % i for i in poison}, reasons
    assert_connection_kept(d)


def header_frame_size(headers, **props):
    """Bytes of the content-header frame pika sends for these properties:
    7 of frame header, 12 of class, weight and body size, the encoded
    properties, the frame-end octet."""
    props = pika.BasicProperties(headers=headers, **props).encode()
    return 8 + 12 + len(b"".join(props) if isinstance(props, list)
                          else props)


def padded(delay, frame, **props):
    """Headers with a delay whose content-header frame, with props, is
    frame bytes."""
    h = {"x-remaining-delay": delay, "pad": ""}
    h["pad"] = "x" * (frame - header_frame_size(h, **props))
    assert header_frame_size(h, **props) == frame
    return h


@pytest.mark.slow
def test_header_frames_at_and_around_frame_max(client, daemon_factory):
    """Frames of frame_max - 100 .. frame_max + 8 (RabbitMQ accepts 8 bytes
    past frame_max from a publisher), delivered now or after a hop: each is
    delivered or parked with a reason, the connection stays up, and the
    well-formed messages behind them arrive."""
    d = daemon_factory()
    target = client.queue()
    sizes = [FRAME_MAX - 100, FRAME_MAX - 1, FRAME_MAX, FRAME_MAX + 8]
    sent = []
    for frame in sizes:
        for delay in (0, 1000):  # 1000: a hop, not only a held tail
            body = b"big-%d-%d" % (frame, delay)
            client.publish(d.prefix, target, body, padded(delay, frame))
            sent.append(body)
            client.publish(d.prefix, target, body + b"-ok",
                           {"x-remaining-delay": delay})
    got = consume_timed(client, target, 2 * len(sent), 10)
    assert {b + b"-ok" for b in sent} <= set(got), \
        sorted({b + b"-ok" for b in sent} - set(got))
    missing = [b for b in sent if b not in got]
    reasons = parked(client, d.prefix, len(missing))
    assert set(reasons) == set(missing), (reasons, missing)
    for b in missing:
        assert "properties too large" in reasons[b], reasons[b]
    # After a hop cascade's own headers no longer fit.
    assert b"big-%d-1000" % FRAME_MAX in missing
    # Due now, the routing headers come off: the frame fits again.
    assert b"big-%d-0" % FRAME_MAX in got
    assert b"big-%d-0" % (FRAME_MAX + 8) in got
    assert_connection_kept(d)


def test_parked_copy_too_large_names_the_dropped_headers(client,
                                                         daemon_factory):
    d = daemon_factory()
    target = client.queue()
    props = {"content_type": "text/plain", "message_id": "big-1"}
    client.publish(d.prefix, target, b"big", padded(1000, FRAME_MAX, **props),
                   **props)
    got = client.collect(d.prefix + ".error", 1, 10)
    assert len(got) == 1
    _, p, body = got[0]
    assert body == b"big" and p.message_id == "big-1"
    assert p.content_type == "text/plain"
    h = p.headers
    assert "properties too large" in h["x-cascade-error"]
    assert "pad" not in h
    assert "pad, x-remaining-delay (" in h["x-cascade-dropped-headers"]
    assert "did not fit in one frame" in h["x-cascade-dropped-headers"]
    assert_connection_kept(d)


@pytest.mark.slow
def test_deeply_nested_headers_do_not_stall_the_others(client,
                                                       daemon_factory):
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100000)  # pika encodes and decodes recursively
    try:
        deeply_nested(client, daemon_factory)
    finally:
        sys.setrecursionlimit(limit)


def deeply_nested(client, daemon_factory):
    d = daemon_factory()
    target = client.queue()
    for delay in (0, 1000):
        deep = "leaf"
        for _ in range(5000):
            deep = [deep]
        client.publish(d.prefix, target, b"deep-%d" % delay,
                       {"x-remaining-delay": delay, "deep": deep})
        for i in range(5):
            client.publish(d.prefix, target, b"ok-%d-%d" % (delay, i),
                           {"x-remaining-delay": delay})
    got = consume_timed(client, target, 12, 10)
    ok = {b"ok-%d-%d" % (delay, i) for delay in (0, 1000) for i in range(5)}
    assert ok <= set(got), sorted(ok - set(got))
    missing = {b"deep-0", b"deep-1000"} - set(got)
    assert missing == {b"deep-0", b"deep-1000"}, \
        "a header nested 5,000 deep was delivered"
    # No rabbitmq-c decodes more than 101 levels (0.14 and later refuse
    # them, 0.11 recurses): the wire filter refuses such a header before
    # the library sees it, the daemon rejects the message, and P.ingress
    # dead-letters it, whole, into P.error, with no connection lost
    # (docs/CONTRACT.md section 4.4).
    parked_now = client.collect(d.prefix + ".error", len(missing), 15)
    assert {b for _, _, b in parked_now} == missing
    for _, p, _ in parked_now:
        assert p.headers["x-death"][0]["reason"] == "rejected", p.headers
        assert p.headers["deep"], p.headers  # whole, as it came
    assert d.log().count("nested deeper than rabbitmq-c decodes") == 2
    assert_connection_kept(d)


def test_redelivered_too_often_is_parked(broker, client, daemon_factory):
    """A message that went back to its quorum queue unsettled 12 times
    (as if the daemons holding it died each time) is parked with the
    count, not handed to a daemon once more."""
    d = daemon_factory({"router": {"max_redeliveries": "10"},
                        "topology": {"queue_type": "quorum"}})
    assert d.stop() == 0
    target = client.queue()
    client.publish(d.prefix, target, b"poison", {"x-remaining-delay": 0})
    client.publish(d.prefix, target, b"fine", {"x-remaining-delay": 0})
    ingress = d.prefix + ".ingress"
    for _ in range(12):
        ch = client.conn.channel()
        ch.basic_qos(prefetch_count=1)
        method, _, body = ch.basic_get(ingress)
        assert body == b"poison"
        ch.close()  # unacked: back to the queue, counted
        # A quorum queue takes it back through its log, after close-ok.
        deadline = time.time() + 15
        while True:
            ok = client.ch.queue_declare(ingress, passive=True).method
            if ok.message_count == 2 and ok.consumer_count == 0:
                break
            assert time.time() < deadline, ok
            time.sleep(0.02)
    d.start()
    reasons = parked(client, d.prefix, 1)
    assert "seen 12 times without being settled" in reasons[b"poison"], \
        reasons
    assert [b for _, _, b in client.collect(target, 1, 10)] == [b"fine"]
