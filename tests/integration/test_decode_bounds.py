# SPDX-License-Identifier: Apache-2.0
"""Depth bombs: headers nested as deep as one frame holds, a batch record
and an envelope nested 200,000 deep.  rabbitmq-c 0.11 decodes nested
tables by unbounded recursion; the daemon and cascade-ctl must neither
crash nor stall on any of them (docs/CONTRACT.md section 4.4)."""
import datetime
import json
import re
import resource
import struct
import subprocess
import threading
import time
import uuid

import pika
import pytest

from helpers import LATE_SCALE, broker_version, ctl, parked, target, \
    wait_for, wait_parked

# What the daemon and cascade-ctl negotiate (src/broker/broker_connect.c asks 131072, and
# so does RabbitMQ's default), and pika too: RabbitMQ takes a frame payload
# up to frame_max bytes from a publisher.
FRAME_MAX = 131072
HEADER_FIXED = 12  # class id, weight, body size before the properties
DEPTH_MAX = 16  # include/wirecheck.h


def nested(levels, kind, key=b"k"):
    """Basic properties (flags on) with headers {key: levels nested tables
    ("F") or arrays ("A"), the last empty}: written flat, not by
    recursion."""
    per = 7 if kind == b"F" else 5
    inner = per * levels - (2 if kind == b"F" else 0)
    table_len = 1 + len(key) + inner
    out = bytearray(struct.pack(">HIB", 0x2000, table_len, len(key)) + key)
    left = inner
    for i in range(levels):
        left -= 5
        out += kind + struct.pack(">I", left)
        if kind == b"F" and i + 1 < levels:
            out += b"\x01k"
            left -= 2
    assert left == 0 and len(out) == 6 + table_len
    return bytes(out)


def deepest(kind):
    """The most levels whose content header fits in one frame."""
    room = FRAME_MAX - HEADER_FIXED - 8  # flags, table size, key
    return (room + 2) // 7 if kind == b"F" else room // 5


class Raw(pika.BasicProperties):
    """Properties pika sends as given bytes (pika encodes by recursion)."""

    def __init__(self, raw):
        super().__init__()
        self.raw = raw

    def encode(self):
        return [self.raw]


def publish_raw(broker, exchange, key, raw, body=b""):
    conn = broker.connect()
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish(exchange, key, body, Raw(raw), mandatory=True)
    finally:
        if conn.is_open:
            conn.close()


def alive_and_ready(d):
    assert d.proc.poll() is None, "cascade died (%s):\n%s" % (
        d.proc.returncode, d.log()[-3000:])
    r = ctl(d, "list", rc=None)
    assert r.returncode >= 0, "cascade-ctl list died by signal %d" % (
        -r.returncode)
    assert r.returncode == 0, (r.stdout, r.stderr)


def delayed_arrives(client, d):
    ex, q = target(client)
    mid = uuid.uuid4().hex
    client.publish(d.prefix, "orders", b"after", {
        "x-delay": 200, "x-target-exchange": ex}, message_id=mid)
    got = client.collect(q, 1, timeout=10)
    assert [p.message_id for _, p, _ in got] == [mid], d.log()[-3000:]


LIBRARY_DEPTH = 101  # include/wirecheck.h: what every rabbitmq-c decodes
REFUSED = "nested deeper than rabbitmq-c decodes (%d)" % LIBRARY_DEPTH


def log_times(d, needle):
    """The wall-clock times (s) of d's log lines holding needle."""
    out = []
    for line in d.log().splitlines():
        if needle in line:
            ts = line.split(" ", 1)[0]
            out.append(datetime.datetime.strptime(
                ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                    tzinfo=datetime.timezone.utc).timestamp())
    return out


def test_deepest_header_that_fits_is_parked(client, daemon):
    """The deepest headers one frame holds, an array and a table:
    rabbitmq-c 0.14 and later refuse them (and with them the connection),
    0.11 would decode them by recursion.  The wire filter refuses both
    before the library sees them, on every version: each is rejected, the
    broker dead-letters it whole into P.error, and no connection is lost
    (docs/CONTRACT.md section 4.4)."""
    d = daemon
    for kind in (b"A", b"F"):
        raw = nested(deepest(kind), kind)
        assert HEADER_FIXED + len(raw) <= FRAME_MAX
        assert HEADER_FIXED + len(nested(deepest(kind) + 1, kind)) > \
            FRAME_MAX
        publish_raw(d.broker, d.prefix, "orders", raw, b"bomb")
    # one level more, and RabbitMQ refuses the frame
    with pytest.raises(pika.exceptions.AMQPConnectionError):
        publish_raw(d.broker, d.prefix, "orders",
                    nested(deepest(b"A") + 1, b"A"), b"too big")
    # What takes the time here is RabbitMQ's own, growing with the square
    # of the depth (see bomb()): dead-lettering the deepest headers into
    # P.error took over 20 s under make check-full's sanitized run beside
    # a soak, with the daemon's refusal long done.  The wait is a limit,
    # not a bound: it scales with the load (promptness is the traffic
    # test's, test_header_bombs_among_steady_traffic_cost_no_connection).
    wait_parked(d, 2, timeout=20 * LATE_SCALE)
    log = d.log()
    assert "msg=connection_lost" not in log, log[-3000:]
    assert log.count(REFUSED) == 2, log[-3000:]
    errors = parked(d)["messages"]
    assert len(errors) == 2, errors
    for e in errors:
        assert "could not decode its headers" in e["reason"], e
        assert e["refused"] == "header 'k': " + REFUSED, e
        assert e["body"] == "bomb", e
    alive_and_ready(d)
    delayed_arrives(client, d)


def bomb(i):
    """The i-th bomb of a run: arrays and tables in turn, 200 and 1,000
    levels deep.  Deeper ones are test_deepest_header_that_fits_is_parked's:
    RabbitMQ 4 itself takes time over each that grows with the square of
    its depth before it hands it to any consumer (`amqp-get` of one from a
    quorum queue on 4.3.6, no daemon running: 1,000 levels 41 ms, 5,000
    142 ms, 26,000 2.6 s, the connection's set-up included), and the
    messages behind it in the queue wait as long: that would time the
    broker, not cascade."""
    kind = (b"A", b"F")[i % 2]
    return nested((200, 1000)[i // 2 % 2], kind)


def arrivals(broker, q, n, timeout, out):
    """Consume n messages from q on a connection of its own, each
    message-id with the time it arrived into out: a thread's body, so that
    arrival is timed as it happens, not when the publisher is done."""
    conn = broker.connect()
    ch = conn.channel()

    def on_message(ch, method, props, body):
        out[props.message_id] = time.time()
        ch.basic_ack(method.delivery_tag)

    ch.basic_consume(q, on_message)
    deadline = time.time() + timeout
    while len(out) < n and time.time() < deadline:
        conn.process_data_events(time_limit=0.05)
    conn.close()


def steady(client, d, ex, q, bombs, n=40, every=5):
    """n messages of 1 s, one every 50 ms, with a bomb from another
    publisher after each every-th when bombs: each message's lateness (s),
    sorted, and the times the broker confirmed the bombs."""
    sent, bombed, got = {}, [], {}
    consumer = threading.Thread(target=arrivals,
                                args=(d.broker, q, n, 30, got))
    consumer.start()
    hostile = d.broker.connect() if bombs else None
    try:
        ch = hostile.channel() if bombs else None
        if bombs:
            ch.confirm_delivery()
        for i in range(n):
            mid = "steady-%d-%s" % (i, uuid.uuid4().hex[:6])
            sent[mid] = client.publish(d.prefix, "orders", b"m", {
                "x-delay": 1000, "x-target-exchange": ex}, message_id=mid)
            if bombs and i % every == every - 1:
                ch.basic_publish(d.prefix, "orders", b"bomb",
                                 Raw(bomb(len(bombed))), mandatory=True)
                bombed.append(time.time())  # the broker has it
            time.sleep(0.05)
    finally:
        if hostile is not None:
            hostile.close()
        consumer.join()
    assert sorted(got) == sorted(sent), d.log()[-3000:]
    late = sorted(got[m] - (sent[m] + 1.0) for m in sent)
    assert late[0] >= -0.005, "early by %.3f s" % -late[0]
    return late, bombed


def p99(late):
    return late[min(len(late) - 1, int(len(late) * 0.99))]


def test_header_bombs_among_steady_traffic_cost_no_connection(client,
                                                              daemon):
    """Headers nested 200 and 1,000 levels deep, arrays and tables, sent
    among steady traffic by a publisher: every bomb is parked within 1 s
    of the broker confirming it,
    no connection is lost, and the other messages come as late as in the
    same run without bombs: p99 within twice, or 100 ms more (times
    LATE_SCALE).  With 40 messages p99 is the latest of them, so one stall
    of a loaded machine decides it: make check saw 191 ms against 81 ms
    calm on 2026-11-29 with 0 connections lost, and 100 ms bounded it
    there.  What the test is for costs far more: a bomb that closes the
    connection made the others late by 0.5 to 4.4 s (issue 46)."""
    d = daemon
    ex, q = target(client)
    calm, _ = steady(client, d, ex, q, bombs=False)
    late, bombed = steady(client, d, ex, q, bombs=True)
    wait_parked(d, len(bombed))
    parked_at = log_times(d, "msg=parked")
    assert len(parked_at) == len(bombed), d.log()[-3000:]
    waits = [round(p - b, 3) for p, b in zip(parked_at, bombed)]
    slowest = max(waits)
    assert slowest <= 1.0 * LATE_SCALE, \
        "bombs parked %s s after the broker confirmed them" % waits
    log = d.log()
    assert "msg=connection_lost" not in log, log[-3000:]
    assert log.count(REFUSED) == len(bombed), log[-3000:]
    print("p99 lateness: %.3f s calm, %.3f s with %d bombs; slowest park "
          "%.3f s" % (p99(calm), p99(late), len(bombed), slowest))
    assert p99(late) <= max(2 * p99(calm), p99(calm) + 0.1 * LATE_SCALE), \
        (p99(calm), p99(late))
    alive_and_ready(d)


def test_a_daemon_started_with_a_small_stack_survives_the_deepest_header(
        client, daemon_factory):
    """rabbitmq-c 0.11 decodes a header frame recursively before cascade
    sees it: the deepest one needs about 4 MiB of stack.  Started under
    `ulimit -s 2048`, the daemon raises its own limit first
    (src/wire/stackroom.c), and lives."""
    d = daemon_factory(start=False)

    def small_stack():
        _, hard = resource.getrlimit(resource.RLIMIT_STACK)
        resource.setrlimit(resource.RLIMIT_STACK, (2 << 20, hard))

    d.preexec = small_stack
    d.start()
    publish_raw(d.broker, d.prefix, "orders", nested(deepest(b"A"), b"A"),
                b"bomb")
    wait_parked(d, 1)
    alive_and_ready(d)
    delayed_arrives(client, d)


def test_just_past_the_bound_is_parked_and_at_it_delivered(client, daemon):
    d = daemon
    publish_raw(d.broker, d.prefix, "orders", nested(DEPTH_MAX - 1, b"A"),
                b"at")
    publish_raw(d.broker, d.prefix, "orders", nested(DEPTH_MAX, b"F"),
                b"past")
    wait_parked(d, 2)
    reasons = sorted(str(e) for e in parked(d)["messages"])
    # at the bound its headers are read, and it is parked for want of a
    # delay header (it has none); one past, for its depth
    assert sum("nested deeper" in r for r in reasons) == 1, reasons
    assert sum("missing delay header" in r for r in reasons) == 1, reasons
    alive_and_ready(d)
    delayed_arrives(client, d)


def stream_write(broker, stream, props, body=b""):
    conn = broker.connect()
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("", stream, body, props, mandatory=True)
    finally:
        conn.close()


def test_batch_and_envelope_bombs_in_the_stream(client, daemon_factory,
                                                broker):
    d = daemon_factory()
    user = d.broker.url.split("//")[1].split(":")[0]
    deep = nested(200000, b"A")
    # a batch whose one record nests 200,000 deep, as the daemon's user
    stream_write(broker, d.prefix + ".events", pika.BasicProperties(
        type="batch", delivery_mode=2, user_id=user,
        headers={"x-cascade-records": 1}),
        struct.pack(">I", len(deep)) + deep)
    # a scheduled record whose copy is an envelope nesting as deep as
    # fits in the record's own header frame
    cid = uuid.uuid4().hex[:16]
    deep = nested((FRAME_MAX - HEADER_FIXED - 512) // 5, b"A")
    envelope = b"CSCE\x01" + struct.pack(">I", len(deep)) + deep + b"body"
    now = time.time()
    stream_write(broker, d.prefix + ".events", pika.BasicProperties(
        type="scheduled", delivery_mode=2, user_id=user,
        message_id="bomb-1",
        headers={"x-cascade-id": cid,
                 "x-cascade-at": int(now * 1000),
                 "x-cascade-due": int(now * 1000) + 3600000,
                 "x-cascade-exchange": "",
                 "x-cascade-routing-key": "nowhere",
                 "x-cascade-size": 4,
                 "x-cascade-message": envelope}))
    # every reader of P.events: a restarted daemon, list, a reschedule
    # that needs the copy
    d.stop()
    d.start()
    alive_and_ready(d)
    # sooner than its recorded time: only a copy can bring it then
    r = ctl(d, "reschedule", "--delay", "1m", "bomb-1", rc=None)
    assert r.returncode >= 0, "cascade-ctl reschedule died by signal"
    wait_for(lambda: "does not decode" in r.stderr + r.stdout or
             "reschedule_copy_undecodable" in d.log(), 15,
             lambda: "the copy's decoding refused: %s %s\n%s" % (
                 r.stdout, r.stderr, d.log()[-3000:]))
    alive_and_ready(d)
    delayed_arrives(client, d)


def stream_keeps_nested_headers(broker):
    """Whether a header nested over 100 deep, forged into a stream, reaches
    a reader: RabbitMQ before 4.0 drops every nested value from a stream
    message's headers."""
    return broker_version(broker) >= (4, 0)


def test_ctl_reads_past_an_undecodable_message_in_the_events_stream(
        client, daemon):
    """Two messages nested 200 deep, forged into P.events between two
    scheduled records by a user with write on amq.default: list and
    cancel still read every record after them, and exit 0
    (docs/CONTRACT.md sections 4.4 and 7.2).  With RabbitMQ 4 the wire
    filter refuses them (on every rabbitmq-c): cascade-ctl reads on past
    each on the same connection and says so once.  RabbitMQ 3.x drops the
    nested header, and they are messages like any other that are not
    records."""
    d = daemon
    ex, _ = target(client)
    before, after = ("%s-%s" % (w, uuid.uuid4().hex[:8])
                     for w in ("before", "after"))
    hour = {"x-delay": 3600000, "x-target-exchange": ex}
    client.publish(d.prefix, "orders", b"1", hour, message_id=before)
    listed = {}

    def lists(mid):
        listed["r"] = r = ctl(d, "list", "--json", rc=None)
        assert r.returncode == 0, (r.stdout, r.stderr)
        return mid in [m["id"] for m in json.loads(r.stdout)["messages"]]
    wait_for(lambda: lists(before), 15, "%s in cascade-ctl list" % before)
    # Two, one after the other: the second is read past too.  RabbitMQ 4
    # keeps a nested header in a stream only under an x- key (as an AMQP
    # 1.0 message annotation).
    for _ in range(2):
        publish_raw(d.broker, "", d.prefix + ".events",
                    nested(200, b"A", b"x-bomb"))
    client.publish(d.prefix, "orders", b"2", hour, message_id=after)
    wait_for(lambda: lists(after), 15,
             lambda: "%s in cascade-ctl list: %s" % (after, listed["r"]))
    r = listed["r"]
    assert sorted(m["id"] for m in json.loads(r.stdout)["messages"]) == \
        sorted([before, after]), r.stdout
    c = ctl(d, "cancel", after)
    assert "%s: cancelled 1 waiting message" % after in c.stdout, c.stdout
    skips = stream_keeps_nested_headers(d.broker)
    for err in (r.stderr, c.stderr):
        if skips:
            assert re.fullmatch(
                r"cascade-ctl: skipped 2 undecodable message\(s\) in "
                r"%s\.events at offset \d+ and later: [^\n]*\n" % d.prefix,
                err), err
            assert "new connections" not in err, err
        else:
            assert err == "", err
