# SPDX-License-Identifier: Apache-2.0
"""Seeing and cancelling what waits (docs/CONTRACT.md section 7):
cascade-ctl list and cancel, the x-cascade-cancel header, the streams
P.events and P.cancels, against the real daemon on a private RabbitMQ."""
import datetime
import os
import re
import time

import pika
import pika.exceptions
import pytest

from faults import fast_daemon, start_cluster, stop_cluster
from helpers import (METRICS, Client, Daemon, ctl, parked, status, target,
                     total, wait_for, wait_parked, wait_status)
from waiting import (LATE, SHORT, SLACK, events, expect_nothing,
                     expect_on_time, ids, ladder, listing, publish, records,
                     uid, wait_listed)


# 1s, 2s, 4s, 8s.
ONE_TO_8 = ("1s", 2, 4)


def restart(d):
    """Start d again: start() waits for a ready line of the new run."""
    return d.start()


def said_count(r, mid, n):
    """cancel's output has a line naming mid and n matches."""
    return any(mid in line and re.search(r"\b%d\b" % n,
                                         line.replace(mid, ""))
               for line in (r.stdout + r.stderr).splitlines())


def iso_ms(s):
    """Unix ms of an ISO 8601 UTC time."""
    dt = datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
    assert dt.utcoffset() == datetime.timedelta(0), s
    return round(dt.timestamp() * 1000)


def as_ms(v):
    """A time given as Unix ms or as ISO 8601."""
    return v if isinstance(v, int) else iso_ms(v)


def iso(t):
    """t (Unix seconds) as ISO 8601 UTC, whole seconds."""
    return datetime.datetime.fromtimestamp(
        int(t), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cancel_requests(d):
    return [r for r in records(d.broker, d.prefix + ".cancels")
            if r.type == "cancel"]


def cascade_ids(d, message_id):
    """The cascade ids of the scheduled records of message_id."""
    return [r.headers["x-cascade-id"] for r in events(d, "scheduled")
            if r.message_id == message_id]


def metric(d, name):
    return total(d.metrics(), name)


@pytest.mark.slow
def test_list_shows_what_waits_with_filters_and_json(client,
                                                     daemon_factory):
    d = daemon_factory(ladder("1s", 2, 5))  # 1s .. 16s
    ex1, q1 = target(client, key="k1")
    client.ch.queue_bind(q1, ex1, "k2")
    ex2, _ = target(client, key="k1")
    q = client.queue()
    a, b, dd, e = uid("a"), uid("b"), uid("d"), uid("e")
    sent = {}

    def put(name, mid, delay, body, ex=None, key=None):
        h = {"x-remaining-delay": delay}
        if ex:
            h["x-target-exchange"] = ex
        if key:
            h["x-target-routing-key"] = key
        props = {"message_id": mid} if mid else {}
        t = client.publish(d.prefix, q, body, h, **props)
        sent[name] = (t, delay, len(body))

    put("a", a, 40000, b"a" * 11, ex1, "k1")
    put("b", b, 30 * 60000, b"b" * 22, ex1, "k2")
    put("c", None, 3 * 3600000, b"c" * 33)  # no message-id
    put("d", dd, 10000, b"d" * 44)
    put("e", e, 3 * 86400000, b"e" * 55, ex2, "k1")
    published = time.time()

    wait_for(lambda: listing(d)["waiting"] >= 5, 10,
             "5 messages in cascade-ctl list")
    lst = listing(d)
    assert lst["waiting"] == 5 and lst["shown"] == 5, lst
    ms = lst["messages"]
    assert len(ms) == 5
    dues = [m["due_ms"] for m in ms]
    assert dues == sorted(dues), "not in due order: %s" % ms
    by = {}
    for m in ms:
        by[m["message_id"] or "c"] = m
    assert set(by) == {a, b, "c", dd, e}, ms
    names = {a: "a", b: "b", "c": "c", dd: "d", e: "e"}
    want = {"a": (ex1, "k1"), "b": (ex1, "k2"), "c": ("", q),
            "d": ("", q), "e": (ex2, "k1")}
    for key, m in by.items():
        name = names[key]
        t0, delay, size = sent[name]
        assert (m["exchange"], m["routing_key"]) == want[name], m
        assert m["size"] == size, m
        # Stamped when the daemon first saw it, after it was published.
        assert t0 * 1000 + delay - 1 <= m["due_ms"] <= \
            published * 1000 + delay + 2000, (m, t0)
        assert abs(as_ms(m["due"]) - m["due_ms"]) < 1000, m
        seen = as_ms(m["first_seen"])
        assert t0 * 1000 - 1 <= seen <= published * 1000 + 2000, m
        assert m["cancel_pending"] is False, m
        if name == "c":
            assert not m["message_id"] and m["cascade_id"], m
            assert m["id"] == m["cascade_id"], m
        else:
            assert m["id"] == m["message_id"] == key, m
            assert m["cascade_id"] and m["cascade_id"] != key, m
    assert lst["counts"] == {"minute": 2, "hour": 1, "day": 1,
                             "later": 1}, lst["counts"]
    cid = by["c"]["cascade_id"]

    m = d.metrics()
    sched = {k: v for k, v in m.items()
             if k.startswith("cascade_scheduled_total{")}
    windows = {re.search(r'due_in="(\w+)"', k).group(1): v
               for k, v in sched.items()}
    assert windows == {"minute": 2, "hour": 1, "day": 1, "later": 1}, sched

    # The text says the same.
    text = ctl(d, "list").stdout
    for x in (a, b, dd, e, cid, ex1, ex2, "k2"):
        assert x in text, (x, text)

    # Filters.
    assert sorted(ids(listing(d, "--target", ex1))) == sorted([a, b])
    assert ids(listing(d, "--target", ex1 + "/k1")) == [a]
    assert ids(listing(d, "--target", ex2)) == [e]
    assert ids(listing(d, "--target", ex1 + "/nope")) == []
    assert ids(listing(d, "--target", "amq.default/" + q)) == [dd, cid]
    assert ids(listing(d, "--due-before", "10m")) == [dd, a]
    assert ids(listing(d, "--due-after", "10m")) == [b, cid, e]
    assert ids(listing(d, "--due-after", "1h", "--due-before", "1d")) == [
        cid]
    between = (by[dd]["due_ms"] + by[a]["due_ms"]) / 2000  # Unix s
    assert ids(listing(d, "--due-before", iso(between))) == [dd]
    assert ids(listing(d, "--due-after", str(int(between * 1000)))) == [
        a, b, cid, e]
    two = listing(d, "--limit", "2")
    assert two["waiting"] == 5 and two["shown"] == 2, two
    assert ids(two) == [dd, a]

    # Delivered: gone from the list.
    got = client.collect(q, 1, timeout=20)
    assert [p.message_id for _, p, _ in got] == [dd]
    wait_for(lambda: dd not in ids(listing(d)), 10,
             "the delivered message to leave the list")
    lst = listing(d)
    assert sorted(ids(lst)) == sorted([a, b, cid, e])
    assert lst["waiting"] == 4
    assert lst["counts"] == {"minute": 1, "hour": 1, "day": 1, "later": 1}

    # And agrees with status once they all sit in delay levels.
    wait_for(lambda: status(d)["ladder_messages"] == 4 ==
             listing(d)["waiting"], 20,
             "status and list agreeing on 4 waiting")


def test_list_shows_the_messages_of_every_daemon(client, broker, tmp_path,
                                                 daemon_factory):
    """Messages first seen by one daemon, by the other, and by both at
    once: one list shows them all, whichever daemons run, or none."""
    cfg = ladder(*ONE_TO_8, router={"prefetch": "1"})
    a = daemon_factory(cfg)
    # The second daemon: same prefix, a config and log of its own.
    os.makedirs(str(tmp_path / "b"))
    b = Daemon(broker, str(tmp_path / "b"), cfg, prefix=a.prefix)
    q = client.queue()
    batch = [[uid("a%d" % i) for i in range(5)],
             [uid("b%d" % i) for i in range(5)],
             [uid("ab%d" % i) for i in range(10)]]
    ingress = 'cascade_messages_received_total{source="ingress",' \
        'queue="%s.ingress"}' % a.prefix
    try:
        for mid in batch[0]:
            publish(client, a, q, mid, 300)
        wait_listed(a, batch[0])
        assert a.metrics()[ingress] == 5

        b.start()
        assert a.stop() == 0
        for mid in batch[1]:
            publish(client, b, q, mid, 300)
        wait_listed(b, batch[0] + batch[1])
        assert b.metrics()[ingress] == 5

        restart(a)
        for mid in batch[2]:
            publish(client, a, q, mid, 300)
        everything = batch[0] + batch[1] + batch[2]
        lst = wait_listed(a, everything)
        assert sorted(ids(lst)) == sorted(everything)
        assert lst["waiting"] == 20
        wait_for(lambda: a.metrics()[ingress] + b.metrics()[ingress] == 15,
                 10, "both daemons' first sights in /metrics")
        print("batch 3: daemon a %d, daemon b %d" % (
            a.metrics()[ingress], b.metrics()[ingress] - 5))

        assert a.stop() == 0 and b.stop() == 0
        lst = listing(a)
        assert sorted(ids(lst)) == sorted(everything)
        assert lst["waiting"] == 20
    finally:
        rc = b.stop()
        assert rc in (0, None), b.log()


def test_cancel_with_ctl_is_never_delivered(client, daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    keep = {uid("keep1"): 5, uid("keep2"): 6}
    gone = {uid("gone1"): 5, uid("gone2"): 6}
    sent = {mid: publish(client, d, q, mid, delay)
            for mid, delay in list(keep.items()) + list(gone.items())}
    wait_listed(d, sent)

    r = ctl(d, "cancel", *gone)
    for g in gone:
        assert said_count(r, g, 1), (r.stdout, r.stderr)
    assert time.time() < min(t for t, _ in sent.values()) + 3.5, \
        "the machine was too slow for this test"
    pending = {m["id"]: m["cancel_pending"] for m in listing(d)["messages"]}
    assert all(pending[g] for g in gone) and \
        not any(pending[k] for k in keep), pending

    expect_on_time(client, q, {k: sent[k] for k in keep})
    expect_nothing(client, [q], max(t + dl for t, dl in sent.values()) + 3)
    assert status(d)["error"]["messages"] == 0
    wait_for(lambda: listing(d)["waiting"] == 0, 10, "an empty list")
    assert metric(d, "cascade_cancelled_total") == 2
    assert metric(d, "cascade_cancel_requests") == 2

    # One record each: the request, and what became of each message.
    reqs = cancel_requests(d)
    assert sorted(r.headers["x-cascade-cancel"] for r in reqs) == \
        sorted(gone)
    assert not any(r.headers.get("x-cascade-cancel-park") for r in reqs)
    assert all(r.headers["x-cascade-until"] > time.time() * 1000
               for r in reqs)
    ev = events(d)
    cid = {r.headers["x-cascade-id"]: r.message_id for r in ev
           if r.type == "scheduled"}
    ends = sorted((cid[r.headers["x-cascade-id"]], r.type) for r in ev
                  if r.type in ("delivered", "parked", "cancelled"))
    # A copy of each request, for list's "cancel pending".
    assert sorted(r.headers["x-cascade-cancel"] for r in ev
                  if r.type == "cancel") == sorted(gone)
    assert ends == sorted([(g, "cancelled") for g in gone] +
                          [(k, "delivered") for k in keep]), ends

    # An id nothing waits for: a warning, nothing recorded, exit 1.
    nope = uid("nope")
    r = ctl(d, "cancel", nope, rc=1)
    assert nope in r.stdout + r.stderr
    assert len(cancel_requests(d)) == 2
    # Unless --force.
    ctl(d, "cancel", "--force", nope)
    assert [r.headers["x-cascade-cancel"] for r in cancel_requests(d)
            if r.headers["x-cascade-cancel"] == nope] == [nope]


def test_cancel_with_the_header_is_never_delivered(client, daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    keep, gone = uid("keep"), uid("gone")
    sent = {keep: publish(client, d, q, keep, 5),
            gone: publish(client, d, q, gone, 5)}
    wait_listed(d, sent)
    # A request, not a delayed message: to the target queue's routing
    # key, so a request taken for a message would show up there.
    client.publish(d.prefix, q, b"ignored", {"x-cascade-cancel": gone})
    wait_for(lambda: [r.headers["x-cascade-cancel"]
                      for r in cancel_requests(d)] == [gone], 10,
             "the request in %s.cancels" % d.prefix)
    assert time.time() < sent[gone][0] + 3.5, \
        "the machine was too slow for this test"

    expect_on_time(client, q, {keep: sent[keep]})
    expect_nothing(client, [q], sent[gone][0] + 5 + 3)
    assert status(d)["error"]["messages"] == 0
    wait_for(lambda: listing(d)["waiting"] == 0, 10, "an empty list")
    assert metric(d, "cascade_cancelled_total") == 1
    assert [r.headers["x-cascade-id"] for r in events(d, "cancelled")] == \
        cascade_ids(d, gone)


def test_cancel_park_moves_it_to_the_error_queue(client, daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    keep, by_ctl, by_header = uid("keep"), uid("ctl"), uid("header")
    sent = {keep: publish(client, d, q, keep, 5)}
    for mid in (by_ctl, by_header):
        sent[mid] = publish(client, d, q, mid, 5, body=b"body of " +
                            mid.encode(), tenant="acme")
    wait_listed(d, sent)
    ctl(d, "cancel", "--park", by_ctl)
    client.publish(d.prefix, "", b"", {"x-cascade-cancel": by_header,
                                       "x-cascade-cancel-park": True})
    assert time.time() < sent[keep][0] + 3.5, \
        "the machine was too slow for this test"

    expect_on_time(client, q, {keep: sent[keep]})
    wait_parked(d, 2)
    e = parked(d)
    assert sorted(m["message_id"] for m in e["messages"]) == sorted(
        [by_ctl, by_header])
    assert all(m["reason"] == "cancelled" for m in e["messages"]), e
    got = client.drain(d.prefix + ".error")
    assert len(got) == 2
    for _, p, body in got:
        assert p.headers["x-cascade-error"] == "cancelled"
        assert p.headers["tenant"] == "acme"
        assert body == b"body of " + p.message_id.encode()
    expect_nothing(client, [q], sent[keep][0] + 5 + 2)
    wait_for(lambda: listing(d)["waiting"] == 0, 10, "an empty list")
    assert metric(d, "cascade_cancelled_total") == 2


@pytest.mark.slow
def test_cancel_survives_a_daemon_restart(client, daemon_factory):
    """Cancelled while it waits in the 8 s level, and the daemon that got
    the request stops before the message comes back: the next daemon
    reads the request from P.cancels and drops it."""
    d = daemon_factory(ladder(*ONE_TO_8))
    q = client.queue()
    keep, gone = uid("keep"), uid("gone")
    sent = {keep: publish(client, d, q, keep, 10),
            gone: publish(client, d, q, gone, 10)}
    wait_status(d, lambda s: s["levels"][3]["messages"] == 2, timeout=10,
                what="both messages in the 8 s level")
    wait_listed(d, sent)
    ctl(d, "cancel", gone)
    assert d.stop() == 0
    assert time.time() < sent[gone][0] + 7, \
        "the machine was too slow for this test"
    assert status(d)["levels"][3]["messages"] == 2  # not back yet
    restart(d)
    assert metric(d, "cascade_cancel_requests") == 1

    expect_on_time(client, q, {keep: sent[keep]})
    expect_nothing(client, [q], sent[gone][0] + 10 + 3)
    assert status(d)["error"]["messages"] == 0
    assert metric(d, "cascade_cancelled_total") == 1
    wait_for(lambda: listing(d)["waiting"] == 0, 10, "an empty list")


def test_cancel_while_no_daemon_runs(client, daemon_factory):
    d = daemon_factory(ladder(*ONE_TO_8))
    q = client.queue()
    keep, gone = uid("keep"), uid("gone")
    sent = {keep: publish(client, d, q, keep, 6),
            gone: publish(client, d, q, gone, 6)}
    wait_listed(d, sent)
    assert d.stop() == 0
    r = ctl(d, "cancel", gone)
    assert said_count(r, gone, 1), (r.stdout, r.stderr)
    restart(d)
    assert metric(d, "cascade_cancel_requests") == 1

    got = client.collect(q, 1, timeout=20)
    assert [p.message_id for _, p, _ in got] == [keep]
    assert got[0][0] >= sent[keep][0] + 6 - SLACK
    expect_nothing(client, [q], sent[gone][0] + 6 + 3)
    assert status(d)["error"]["messages"] == 0
    assert metric(d, "cascade_cancelled_total") == 1


def test_cancel_every_message_with_the_id(client, daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q1, q2 = client.queue(), client.queue()
    dup, keep = uid("dup"), uid("keep")
    sent = {keep: publish(client, d, q1, keep, 5)}
    t1 = publish(client, d, q1, dup, 5)
    t2 = publish(client, d, q2, dup, 6)
    wait_listed(d, [keep, dup])
    wait_for(lambda: ids(listing(d)).count(dup) == 2, 10,
             "both copies of %s in the list" % dup)
    copies = [m for m in listing(d)["messages"] if m["message_id"] == dup]
    assert len({m["cascade_id"] for m in copies}) == 2, copies
    assert sorted(m["routing_key"] for m in copies) == sorted([q1, q2])

    r = ctl(d, "cancel", dup)
    assert said_count(r, dup, 2), (r.stdout, r.stderr)
    assert time.time() < t1[0] + 3.5, "the machine was too slow"
    expect_on_time(client, q1, sent)
    expect_nothing(client, [q1, q2], t2[0] + 6 + 3)
    assert metric(d, "cascade_cancelled_total") == 2
    assert status(d)["error"]["messages"] == 0


def test_cancel_before_publish(client, daemon_factory):
    """--force, and the header, record a request for an id not seen yet:
    a message published afterwards with that id is dropped at first
    sight."""
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    forced, headed, keep = uid("forced"), uid("headed"), uid("keep")
    r = ctl(d, "cancel", forced, rc=1)
    assert forced in r.stdout + r.stderr
    assert cancel_requests(d) == []
    ctl(d, "cancel", "--force", forced)
    client.publish(d.prefix, "", b"", {"x-cascade-cancel": headed})
    wait_for(lambda: len(cancel_requests(d)) == 2, 10,
             "both requests in %s.cancels" % d.prefix)
    # The daemon tails P.cancels: it holds both before they are needed.
    for mid in (forced, headed):
        d.wait_log('msg=cancellation id="%s"' % mid, timeout=10)

    sent = {mid: publish(client, d, q, mid, 2)
            for mid in (forced, headed, keep)}
    expect_on_time(client, q, {keep: sent[keep]})
    expect_nothing(client, [q], sent[forced][0] + 2 + 3)
    assert status(d)["error"]["messages"] == 0
    assert listing(d)["waiting"] == 0
    assert metric(d, "cascade_cancelled_total") == 2


def test_cancel_in_a_long_level_takes_effect_when_it_comes_back(
        client, daemon_factory):
    """A message cannot be taken out of the middle of a queue: cancelled
    while it waits in the 8 s level, it is marked pending in the list and
    dropped when it comes back, with its `cancelled` record then."""
    d = daemon_factory(ladder(*ONE_TO_8))
    q = client.queue()
    gone = uid("gone")
    t0, _ = publish(client, d, q, gone, 60)
    wait_status(d, lambda s: s["levels"][3]["messages"] == 1, timeout=10,
                what="the message in the 8 s level")
    wait_listed(d, [gone])
    ctl(d, "cancel", gone)
    cancelled_at = time.time()
    assert cancelled_at < t0 + 5, "the machine was too slow for this test"

    [m] = listing(d)["messages"]
    assert m["id"] == gone and m["cancel_pending"] is True, m
    assert events(d, "cancelled") == []
    s = status(d)
    assert s["levels"][3]["messages"] == 1, \
        "back from the 8 s level already: the machine was too slow"

    wait_for(lambda: events(d, "cancelled"), 20, "the cancelled record")
    [r] = events(d, "cancelled")
    assert r.headers["x-cascade-id"] == m["cascade_id"]
    # Not at the request, when the message came back: at least 8 s after
    # it entered the level, which was after it was published.
    at = r.headers["x-cascade-at"] / 1000
    assert at >= t0 + 8 - 0.2, (at - t0, at - cancelled_at)

    assert listing(d)["waiting"] == 0
    s = wait_status(d, lambda s: s["ladder_messages"] == 0 and
                    s["return"]["messages"] == 0,
                    what="the ladder and the return queue empty")
    assert s["ladder_messages"] == 0 and s["error"]["messages"] == 0, s
    assert client.drain(q) == []
    assert metric(d, "cascade_cancelled_total") == 1
    assert metric(d, "cascade_held_messages") == 0


def test_events_off_list_says_so_and_delays_still_work(client,
                                                       daemon_factory):
    d = daemon_factory(ladder(*SHORT, events={"enabled": "no"}))
    r = ctl(d, "list", rc=1)
    assert "events" in r.stderr, r.stderr
    ch = client.conn.channel()
    try:
        ch.queue_declare(d.prefix + ".events", passive=True)
        assert False, "P.events declared with [events] enabled = no"
    except pika.exceptions.ChannelClosedByBroker as e:
        assert e.reply_code == 404
    q = client.queue()
    mid = uid("m")
    sent = {mid: publish(client, d, q, mid, 1.5)}
    expect_on_time(client, q, sent)


def stream_member(stream):
    """Erlang: Pid, stream's member on the node that evaluates it."""
    return ('{ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, '
            '<<"%s">>)), #{name := S} = amqqueue:get_type_state(Q), '
            '{ok, Pid} = rabbit_stream_coordinator:local_pid(S)' % stream)


def port_of(url):
    return url.rsplit(":", 1)[1].split("/")[0]


def connected_to(d, nodes):
    """The node d's last ready line names."""
    ready = [line for line in d.log().splitlines() if "msg=ready" in line]
    return [b for b in nodes if ":%s/" % port_of(b.url) in ready[-1]][0]


# The stall is seen within 2 x 15 s of the request; the daemon then
# connects again and reads P.cancels afresh.
DUE_S = 55


@pytest.mark.cluster
def test_a_stalled_reading_of_cancellations_recovers(tmp_path):
    """RabbitMQ can stop feeding a stream consumer without a word (seen on
    4.3.6 after a partition: both daemons read no cancellation for minutes,
    and cancelled messages were delivered).  Here the P.cancels member on
    the daemon's node is suspended, so its reading stalls while the stream
    goes on taking records on the other nodes.  A request recorded then
    must still take effect before its message is due: the daemon's probe
    marker does not come back, it says so, and connects to its next node,
    where it reads the request."""
    _, nodes = start_cluster()
    try:
        a, b, c = nodes
        first = fast_daemon(a, tmp_path, broker={"url": a.url}, **METRICS)
        first.start()  # every leader on a
        assert first.stop() == 0
        d = fast_daemon(b, tmp_path, prefix=first.prefix,
                        broker={"url": "%s, %s" % (b.url, c.url)},
                        **METRICS)
        d.start()
        on = connected_to(d, [b, c])
        client = Client(a)
        q = client.queue()
        keep, gone = uid("keep"), uid("gone")
        sent = {keep: publish(client, d, q, keep, DUE_S),
                gone: publish(client, d, q, gone, DUE_S)}
        member = stream_member(d.prefix + ".cancels")
        # The first daemon wrote to the same log: count from here.
        readies = d.log().count("msg=ready")
        on.eval(member + ", sys:suspend(Pid), ok.")
        try:
            client.publish(d.prefix, "", b"", {"x-cascade-cancel": gone})
            d.wait_log("msg=cancellations_stalled", 60)
            d.wait_log("msg=ready", 30, count=readies + 1)
        finally:
            on.eval(member + ", sys:resume(Pid), ok.", check=False)
        assert connected_to(d, [b, c]) is not on
        assert metric(d, "cascade_cancellations_stalls_total") == 1
        assert metric(d, "cascade_cancel_requests") == 1
        got = client.collect(q, 1, sent[keep][0] + DUE_S + LATE - time.time())
        assert [p.message_id for _, p, _ in got] == [keep]
        expect_nothing(client, [q], sent[gone][0] + DUE_S + 3)
        assert metric(d, "cascade_cancelled_total") == 1
        assert d.stop() == 0
        client.close()
    finally:
        stop_cluster(nodes)
