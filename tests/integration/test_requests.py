# SPDX-License-Identifier: Apache-2.0
"""Changing what waits (docs/CONTRACT.md sections 7.3 and 7.5): reschedule
with cascade-ctl and with the x-cascade-reschedule header, who may cancel
or reschedule a message, with two real broker users on a private RabbitMQ,
and bursts of requests.  Unique ids and repeats are in
test_unique_and_repeats.py."""
import struct
import time

import pika
import pytest

from helpers import ctl, parked, status, total, wait_for, wait_parked
# users: a fixture, imported to be used here.
from waiting import (SHORT, expect_nothing, expect_on_time, ids, ladder,
                     listing, on_time, publish, records, uid, users,
                     wait_listed)


def requests(d):
    """The requests recorded in P.cancels (cancel and reschedule)."""
    return [r for r in records(d.broker, d.prefix + ".cancels")
            if r.type in ("cancel", "reschedule")]


def arrivals(client, q, n, timeout):
    """{message-id: arrival time} of up to n messages."""
    return {p.message_id: t for t, p, _ in client.collect(q, n, timeout)}


@pytest.mark.slow
def test_reschedule_later_with_ctl_is_not_delivered_at_the_old_time(
        client, daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    moved, kept = uid("moved"), uid("kept")
    t0, _ = publish(client, d, q, moved, 4)
    publish(client, d, q, kept, 4)
    wait_listed(d, [moved, kept])

    r = ctl(d, "reschedule", "--delay", "8s", moved)
    asked = time.time()
    assert moved in r.stdout and "rescheduled 1 waiting message" in r.stdout, \
        r.stdout
    assert asked < t0 + 2.5, "the machine was too slow for this test"
    # list shows the new time.
    row = [m for m in listing(d)["messages"] if m["id"] == moved][0]
    assert abs(row["due_ms"] / 1000.0 - (asked + 8)) < 1.0, row

    got = arrivals(client, q, 1, 6)
    assert list(got) == [kept], got
    got = arrivals(client, q, 1, 8)
    assert list(got) == [moved], got
    # ctl's new time is taken when it runs, a little before `asked`.
    on_time(got, moved, asked - 0.5 + 8)
    assert total(d.metrics(), "cascade_rescheduled_total") >= 1
    assert status(d)["error"]["messages"] == 0

    # Nothing waits with this id any more: exit 1, nothing recorded.
    # Its "delivered" record follows the delivery by up to one batch
    # (50 ms, docs/CONTRACT.md section 7.4): ask once list says so.
    wait_for(lambda: moved not in ids(listing(d)), 10,
             "%s gone from cascade-ctl list" % moved)
    before = len(requests(d))
    r = ctl(d, "reschedule", "--delay", "1m", moved, rc=1)
    assert "not recorded" in r.stderr
    assert len(requests(d)) == before
    ctl(d, "reschedule", "--at", "not-a-time", moved, rc=2)
    ctl(d, "reschedule", moved, rc=2)


@pytest.mark.slow
def test_reschedule_earlier_with_ctl_arrives_at_the_new_time(
        client, daemon_factory):
    """A message deep in a long delay level, moved earlier twice: a copy
    due at the new time goes out each time, and the instances it
    replaces (the first copy, the original in its 16 s level) are
    dropped when they come back, so it arrives once, whole, on time."""
    # 1s, 2s, 4s, 8s, 16s: 30 s takes the 16 s level first.
    d = daemon_factory(ladder("1s", 2, 5))
    q = client.queue()
    mid, other = uid("sooner"), uid("other")
    t0, _ = publish(client, d, q, mid, 30, body=b"the body",
                    **{"x-app": "kept"})
    publish(client, d, q, other, 19)
    wait_listed(d, [mid, other])

    r = ctl(d, "reschedule", "--delay", "10s", mid)
    assert "rescheduled 1 waiting message" in r.stdout, r.stdout
    r = ctl(d, "reschedule", "--delay", "3s", mid)
    asked = time.time()
    assert "rescheduled 1 waiting message" in r.stdout, r.stdout
    assert asked < t0 + 6, "the machine was too slow for this test"
    row = [m for m in listing(d)["messages"] if m["id"] == mid][0]
    assert abs(row["due_ms"] / 1000.0 - (asked + 3)) < 1.0, row

    got = client.collect(q, 1, 6)
    assert [p.message_id for _, p, _ in got] == [mid], got
    on_time({mid: got[0][0]}, mid, asked - 0.5 + 3)
    _, props, body = got[0]
    assert body == b"the body" and props.headers == {"x-app": "kept"}, \
        (body, props.headers)
    # The first copy (back by asked + 8) and the original (back by
    # t0 + 16) are dropped; the other message keeps its time.
    expect_nothing(client, [q], t0 + 18)
    wait_for(lambda: total(d.metrics(), "cascade_superseded_total") == 2,
             5, "both superseded instances dropped")
    assert mid not in [m["id"] for m in listing(d)["messages"]]
    rs = [r for r in requests(d) if r.type == "reschedule"]
    cid = rs[0].headers.get("x-cascade-superseded")
    assert cid and [r.headers.get("x-cascade-superseded") for r in rs] == \
        [cid, cid], [vars(r) for r in rs]
    got = arrivals(client, q, 1, t0 + 19 + 3 - time.time())
    assert list(got) == [other], got
    on_time(got, other, t0 + 19)
    assert status(d)["error"]["messages"] == 0


@pytest.mark.slow
def test_reschedule_earlier_with_the_header(client, daemon_factory):
    """The same from any client: the daemon that takes the request reads
    P.events as cascade-ctl does and publishes the copy itself."""
    d = daemon_factory(ladder("1s", 2, 5))
    q = client.queue()
    mid, other = uid("sooner"), uid("other")
    t0, _ = publish(client, d, q, mid, 30)
    publish(client, d, q, other, 19)
    wait_listed(d, [mid, other])
    # Sent twice, as a publisher that retries would: the second one, a
    # moment later, wins, and the message arrives once.
    client.publish(d.prefix, q, b"ignored",
                   {"x-cascade-reschedule": mid, "x-remaining-delay": "8s"})
    asked = client.publish(d.prefix, q, b"ignored",
                           {"x-cascade-reschedule": mid,
                            "x-remaining-delay": "4s"})
    assert asked < t0 + 6, "the machine was too slow for this test"
    got = arrivals(client, q, 1, 7)
    assert list(got) == [mid], got
    on_time(got, mid, asked + 4)
    # The first copy (back by + 8 s) and the original (back from its
    # 16 s level) are dropped; the other one keeps its time, and nothing
    # arrives twice.
    expect_nothing(client, [q], t0 + 18)
    assert total(d.metrics(), "cascade_superseded_total") == 2
    got = arrivals(client, q, 1, t0 + 19 + 3 - time.time())
    assert list(got) == [other], got
    on_time(got, other, t0 + 19)
    rs = requests(d)
    assert [r.headers["x-cascade-reschedule"] for r in rs] == [mid, mid]
    # Written by the daemon as itself, naming who asked (nobody here),
    # each with the cascade id it copied, in the order they came.
    assert all(r.user_id == "guest" and
               r.headers["x-cascade-requester"] == "" for r in rs), \
        [vars(r) for r in rs]
    assert [len(r.headers["x-cascade-superseded"]) for r in rs] == \
        [16, 16], [vars(r) for r in rs]
    assert rs[0].headers["x-cascade-at"] < rs[1].headers["x-cascade-at"]
    assert status(d)["error"]["messages"] == 0


def test_a_waiting_messages_copy_is_in_p_copies_not_in_p_events(
        client, daemon_factory):
    """The copy a reschedule needs (docs/CONTRACT.md 7.4) is a `copy`
    record in P.copies, beside the scheduled record in P.events, which
    carries no body: a reader of what waits reads no bodies.  A message
    over [events] copy_max_size has none."""
    d = daemon_factory()
    q = client.queue()
    mid, big = uid("copied"), uid("big")
    publish(client, d, q, mid, 3600, body=b"the body", **{"x-app": "kept"})
    publish(client, d, q, big, 3600, body=b"x" * 70000)
    wait_listed(d, [mid, big])
    sched = {r.message_id: r for r in records(d.broker, d.prefix + ".events")
             if r.type == "scheduled"}
    assert sorted(sched) == sorted([mid, big]), sched
    assert [r for r in sched.values()
            if "x-cascade-message" in r.headers] == [], sched
    copies = [r for r in records(d.broker, d.prefix + ".copies")
              if r.type == "copy"]
    assert [r.headers["x-cascade-id"] for r in copies] == \
        [sched[mid].headers["x-cascade-id"]], [vars(r) for r in copies]
    env = copies[0].headers["x-cascade-message"]
    # The envelope of docs/CONTRACT.md 3.6: the message as its first hop
    # published it, properties and body.
    assert env[:5] == b"CSCE\x01" and env.endswith(b"the body"), env[:64]
    n = struct.unpack(">I", env[5:9])[0]
    inner = pika.spec.BasicProperties()
    inner.decode(env[9:9 + n])
    assert inner.message_id == mid and inner.headers["x-app"] == "kept", \
        vars(inner)


def test_a_reschedule_without_a_time_is_parked(client, daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    client.publish(d.prefix, q, b"", {"x-cascade-reschedule": "x"})
    wait_parked(d, 1)
    assert "missing delay header" in parked(d)["messages"][0]["reason"]


@pytest.mark.slow
def test_another_user_cannot_cancel_or_reschedule_a_message(
        client, daemon_factory, users):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    alice = users(uid("alice"), d.prefix)
    bob = users(uid("bob"), d.prefix)
    mine, theirs = uid("alice-msg"), uid("bob-msg")
    t0 = alice.publish(q, {"x-remaining-delay": "5s"}, mine)
    t1 = bob.publish(q, {"x-remaining-delay": "5s"}, theirs)
    wait_listed(d, [mine, theirs])

    # bob asks to cancel alice's message, with his user-id and without
    # one, and to reschedule it: all refused when a daemon sees it.
    bob.publish(q, {"x-cascade-cancel": mine})
    bob.publish(q, {"x-cascade-cancel": mine}, user_id=False)
    bob.publish(q, {"x-cascade-reschedule": mine,
                    "x-remaining-delay": "1s"})
    # alice may reschedule her own message.
    asked = alice.publish(q, {"x-cascade-reschedule": mine,
                              "x-remaining-delay": "3s"})
    # alice may not cancel bob's.
    alice.publish(q, {"x-cascade-cancel": theirs})
    assert asked < t0 + 2.5, "the machine was too slow for this test"

    got = arrivals(client, q, 2, 9)
    assert sorted(got) == sorted([mine, theirs]), got
    on_time(got, mine, asked + 3)
    on_time(got, theirs, t1 + 5)
    # Each refused request is parked once with the reason, and counted.
    wait_parked(d, 4)
    reasons = sorted(m["reason"] for m in parked(d)["messages"])
    assert all(r.startswith("not permitted: user '") for r in reasons), \
        reasons
    assert sum("'%s' may not cancel message '%s'" % (bob.name, mine) in r
               for r in reasons) == 1, reasons
    assert sum("'(none)' may not cancel message '%s'" % mine in r
               for r in reasons) == 1, reasons
    assert sum("'%s' may not reschedule message '%s'" % (bob.name, mine)
               in r for r in reasons) == 1, reasons
    assert sum("'%s' may not cancel message '%s'" % (alice.name, theirs)
               in r for r in reasons) == 1, reasons
    assert total(d.metrics(), "cascade_requests_refused_total") == 4
    assert total(d.metrics(), "cascade_cancelled_total") == 0

    # The user cascade-ctl logs in as (a control user) may touch both.
    third = uid("alice-3")
    t3 = alice.publish(q, {"x-remaining-delay": "3s"}, third)
    wait_listed(d, [third])
    r = ctl(d, "cancel", third)
    assert "cancelled 1 waiting message" in r.stdout
    expect_nothing(client, [q], t3 + 3 + 1.5)
    assert total(d.metrics(), "cascade_cancelled_total") == 1

def burst(client, d, n, tag):
    """n reschedule requests, each for an id that names nothing; the ids.
    Published without waiting for each confirm, as a busy client would."""
    conn = d.broker.connect()
    try:
        ch = conn.channel()
        names = ["%s-%d" % (tag, i) for i in range(n)]
        for name in names:
            ch.basic_publish(d.prefix, "", b"", pika.BasicProperties(
                headers={"x-cascade-reschedule": name,
                         "x-remaining-delay": "5s"}))
        # A confirmed publish on a channel of its own, after them: they
        # are all in P.ingress once it is confirmed (one connection keeps
        # their order).
        ch.confirm_delivery()
        ch.basic_publish(d.prefix, "", b"", pika.BasicProperties(
            headers={"x-cascade-reschedule": tag + "-last",
                     "x-remaining-delay": "5s"}), mandatory=True)
        return names + [tag + "-last"]
    finally:
        conn.close()


def recorded(d, names):
    """How many of names have a reschedule record in P.cancels."""
    got = {r.headers.get("x-cascade-reschedule") for r in requests(d)
           if r.type == "reschedule"}
    return len(got & set(names))


@pytest.mark.slow
def test_a_burst_of_reschedule_requests_leaves_plain_messages_on_time(
        client, daemon_factory):
    """1,000 requests, each waiting for a reading of P.events, behind a
    prefetch of 5: they wait in P.requests, not in the ingress prefetch,
    so plain messages published after them arrive on time."""
    d = daemon_factory(ladder(*SHORT, router={"prefetch": "5"}))
    q = client.queue()
    names = burst(client, d, 1000, uid("burst"))
    sent = {}
    for i in range(5):
        mid = uid("plain")
        sent[mid] = publish(client, d, q, mid, 1.5)
    # Held behind the requests, as before P.requests, they came 20 s and
    # more late; 1,000 requests are also real work for a 2-core machine
    # that runs other tests beside this one.
    expect_on_time(client, q, sent, timeout=10, late=4)
    # Every request is recorded in the end, once each (no daemon died).
    wait_for(lambda: recorded(d, names) == len(names), 120,
             "every request recorded")
    assert len([r for r in requests(d) if r.type == "reschedule"]) == \
        len(names)
    assert status(d)["error"]["messages"] == 0
    m = d.metrics()
    moved = sum(v for k, v in m.items() if k.startswith(
        'cascade_messages_received_total{source="requests",'))
    assert moved == len(names), m


def test_reschedule_requests_survive_kill_9_mid_burst(client,
                                                      daemon_factory):
    """Killed while requests wait in P.requests (and some in P.ingress):
    started again, the daemon records every one; none is lost (some may
    be recorded twice: requests are delivered at least once)."""
    d = daemon_factory(ladder(*SHORT, router={"prefetch": "20"}))
    # Enough that the kill, after the tenth is recorded, comes before the
    # last: a daemon that ran free recorded 300 in the moment between.
    names = burst(client, d, 1000, uid("killed"))
    d.wait_log("msg=cancel_recorded", 30, count=10)
    d.kill()
    assert recorded(d, names) < len(names), \
        "every request was recorded before the kill: nothing tested"
    d.start()
    wait_for(lambda: recorded(d, names) == len(names), 120,
             "every request recorded after the restart")
    assert status(d)["error"]["messages"] == 0
