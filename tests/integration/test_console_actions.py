# SPDX-License-Identifier: Apache-2.0
"""The console's actions (docs/CONTRACT.md section 7.11), each as a
publisher and as a control user: cancel, reschedule later and earlier,
pause and resume a series or a target, and the Parked page's reads and
requeues, each checked in the records it leaves and in what arrives.
The users, daemon and console are console.py's (see test_console.py)."""
import json
import time
import uuid

import pytest

from console import (Console, alice, anon, bob, con, d, daemon_user, guest,
                     mids, ok, ops, paused, people, refused, requests_of,
                     _the_console_is_alive, tmp_module, wait_row)
from helpers import Daemon, LATE_SCALE, ctl, wait_for
from trust import now_ms
from waiting import (LATE, SHORT, SLACK, expect_nothing, ladder, listing,
                     records, uid)


# Actions.

def test_a_publisher_cancels_through_p(d, alice, guest, broker):
    """alice's cancel is published to P with her user-id: the daemon
    records it (as itself, naming her) and the message never arrives."""
    q = guest.queue()
    mid = uid("a-cancel")
    t0 = alice.account.delayed(d.prefix, q, mid, "3s")
    cid = wait_row(alice, mid)["cascade_id"]
    ok(alice.post("/waiting/%s/cancel" % cid), "cancel", cid)
    expect_nothing(guest, [q], t0 + 3 + LATE * LATE_SCALE)
    rs = requests_of(d, "cancel", cid)
    assert [(r.user_id, r.headers.get("x-cascade-requester"))
            for r in rs] == [(daemon_user(broker), alice.account.name)], \
        [vars(r) for r in rs]


def test_a_control_user_cancels_directly(d, ops, people, guest):
    """ops' cancel of alice's message is written by the console into
    P.cancels (and P.events) as ops, as cascade-ctl writes it."""
    q = guest.queue()
    mid = uid("o-cancel")
    t0 = people["alice"].delayed(d.prefix, q, mid, "3s")
    cid = wait_row(ops, mid)["cascade_id"]
    ok(ops.post("/waiting/%s/cancel" % cid), "cancel", cid)
    # Recorded before the answer: list shows it pending at once.
    row = [m for m in listing(d)["messages"] if m["id"] == mid]
    assert row == [] or row[0]["cancel_pending"] is True, row
    expect_nothing(guest, [q], t0 + 3 + LATE * LATE_SCALE)
    assert [r.user_id for r in requests_of(d, "cancel", cid)] == \
        [ops.account.name]


def test_a_cancel_shows_pending_in_the_row(d, ops, guest):
    q = guest.queue()
    mid = uid("pending")
    anon(guest, d, q, mid, "1h")
    cid = wait_row(ops, mid)["cascade_id"]
    ok(ops.post("/waiting/%s/cancel" % cid), "cancel", cid)
    wait_row(ops, mid, 5, lambda r: r["cancel_pending"] is True)


def test_a_publisher_reschedules_later_through_p(d, alice, guest):
    q = guest.queue()
    mid = uid("a-later")
    alice.account.delayed(d.prefix, q, mid, "10m")
    cid = wait_row(alice, mid)["cascade_id"]
    asked = time.time()
    ok(alice.post("/waiting/%s/reschedule" % cid, delay="20m"),
       "reschedule", cid)
    # Once the daemon has recorded it and its copy is in P.events.
    row = wait_row(alice, mid, 15, lambda r: r["rescheduled"] is True)
    assert abs(row["due_ms"] / 1000.0 - (asked + 1200)) < 5, (row, asked)


def test_a_control_user_reschedules_later_through_p(d, ops, guest):
    q = guest.queue()
    mid = uid("o-later")
    anon(guest, d, q, mid, "10m")
    cid = wait_row(ops, mid)["cascade_id"]
    at = now_ms() + 1800 * 1000
    ok(ops.post("/waiting/%s/reschedule" % cid, at=str(at)), "reschedule",
       cid)
    row = wait_row(ops, mid, 5, lambda r: r["rescheduled"] is True)
    assert row["due_ms"] == at, row
    # Through P, as every reschedule (CONTRACT 7.11): a daemon records
    # it, naming ops as the requester.
    rs = requests_of(d, "reschedule", cid)
    assert [(r.headers.get("x-cascade-requester"),
             r.headers["x-cascade-due"]) for r in rs] == \
        [(ops.account.name, at)], [vars(r) for r in rs]


def earlier(d, s, publisher, guest, anonymous):
    """A message due in a minute, moved by s to 2 s from now: it arrives
    then, once (the instance still waiting is dropped when it comes
    back, within the 4 s level)."""
    q = guest.queue()
    mid = uid("earlier")
    if anonymous:
        anon(guest, d, q, mid, "60s", **{"x-app": "kept"})
    else:
        publisher.delayed(d.prefix, q, mid, "60s", body=b"the body")
    cid = wait_row(s, mid)["cascade_id"]
    asked = time.time()
    ok(s.post("/waiting/%s/reschedule" % cid, delay="2s"), "reschedule",
       cid)
    # The new time is the console's now + 2 s: between these two.
    answered = time.time()
    got = guest.collect(q, 1, 2 + LATE * LATE_SCALE + 1)
    assert [p.message_id for _, p, _ in got] == [mid], got
    assert got[0][0] >= asked + 2 - SLACK, \
        "%.3f s early" % (asked + 2 - got[0][0])
    assert got[0][0] < answered + 2 + LATE * LATE_SCALE, \
        "%.3f s late" % (got[0][0] - answered - 2)
    expect_nothing(guest, [q], time.time() + 5)
    return got[0]


@pytest.mark.slow
def test_a_publisher_reschedules_earlier_and_it_arrives(d, alice, guest):
    _, props, body = earlier(d, alice, alice.account, guest, False)
    assert body == b"the body"


@pytest.mark.slow
def test_a_control_user_reschedules_earlier_and_it_arrives(d, ops, guest):
    _, props, body = earlier(d, ops, None, guest, True)
    assert props.headers == {"x-app": "kept"}, props.headers


def pause_and_resume(d, s, owner, guest, mid):
    """owner's series, paused and resumed by session s: /series shows
    it."""
    q = guest.queue()
    owner.delayed(d.prefix, q, mid, "1h", **{"x-cascade-every": "1h"})
    row = wait_row(s, mid, series=True)
    assert row["repeat"]["every_ms"] == 3600000 and paused(row) is False, \
        row
    cid = row["cascade_id"]
    ok(s.post("/series/%s/pause" % cid), "pause", cid)
    wait_row(s, mid, 15, lambda r: paused(r) is True, series=True)
    ok(s.post("/series/%s/resume" % cid), "resume", cid)
    wait_row(s, mid, 15, lambda r: paused(r) is False, series=True)
    return cid


def test_the_series_page_shows_the_soonest_500_of_600(broker, tmp_module,
                                                      people, guest):
    """Of 600 series, /series counts all 600 and shows the 500 soonest,
    soonest first (it once kept the first 500 its map gave, then sorted
    those)."""
    prefix = "t" + uuid.uuid4().hex[:8]
    controls = "%s, %s" % (daemon_user(broker), people["ops"].name)
    dd = Daemon(broker, tmp_module,
                ladder(*SHORT, events={"control_users": controls}),
                prefix).start()
    try:
        q = guest.queue()
        # Published in an order unlike their due order (7919 is prime).
        for k in ((i * 7919) % 600 for i in range(600)):
            guest.publish(prefix, q, b"s",
                          {"x-remaining-delay": "%dm" % (k + 10),
                           "x-cascade-every": "1d"},
                          message_id="s-%03d" % k)
        c = Console(dd, tmp_module).start()
        try:
            s = c.session()
            assert s.login(people["ops"].name,
                           people["ops"].password).status == 200
            last = {}

            def all_there():
                last["a"] = s.get_json("/series")
                return last["a"].status == 200 and \
                    last["a"].data.get("waiting") == 600

            wait_for(all_there, 30, lambda: "600 series: %r" % last)
            got = mids(last["a"].data["rows"])
            assert got == ["s-%03d" % k for k in range(500)], got
        finally:
            assert c.stop() == 0, c.log()[-3000:]
    finally:
        assert dd.stop() == 0, dd.log()[-3000:]


def test_a_publisher_pauses_and_resumes_their_series(d, alice, guest):
    pause_and_resume(d, alice, alice.account, guest, uid("a-series"))


def test_a_control_user_pauses_and_resumes_any_series(d, ops, people,
                                                      guest):
    cid = pause_and_resume(d, ops, people["bob"], guest, uid("o-series"))
    assert [r.user_id for r in requests_of(d, "pause", cid)] == \
        [ops.account.name]


def test_a_pause_made_by_message_id_is_resumed_from_the_console(
        d, ops, alice, people, guest):
    """A series paused by its message-id (cascade-ctl pause, as
    x-cascade-pause may name it) shows paused, and the console's resume,
    which names the series by its cascade id, lifts it, with the control
    user's own pause made meanwhile: the copies come again.  A resume of
    a series that is not paused says that nothing changed (409); a
    publisher cannot lift a control user's pause (403)."""
    q = guest.queue()
    mid = uid("by-mid")
    people["bob"].delayed(d.prefix, q, mid, "1s", **{"x-cascade-every": "1s"})
    assert len(guest.collect(q, 1, 10 * LATE_SCALE)) == 1
    ctl(d, "pause", mid)
    wait_row(ops, mid, 15, lambda r: paused(r) is True, series=True)
    time.sleep(2)  # a copy already on its way may still arrive
    guest.drain(q)
    # The paused copy waits as the same copy: its cascade id stays.
    cid = wait_row(ops, mid, series=True)["cascade_id"]
    ok(ops.post("/series/%s/pause" % cid), "pause", cid)
    ok(ops.post("/series/%s/resume" % cid), "resume", cid)
    wait_row(ops, mid, 15, lambda r: paused(r) is False, series=True)
    got = guest.collect(q, 1, 10 * LATE_SCALE)
    assert [p.message_id for _, p, _ in got] == [mid], got
    ctl(d, "cancel", mid)

    mine = uid("alice-by-mid")
    alice.account.delayed(d.prefix, q, mine, "1h",
                          **{"x-cascade-every": "1h"})
    cid = wait_row(alice, mine, series=True)["cascade_id"]
    ctl(d, "pause", mine)
    wait_row(alice, mine, 15, lambda r: paused(r) is True, series=True)
    refused(alice.post("/series/%s/resume" % cid), 403, "forbidden")
    assert paused(wait_row(ops, mine, series=True)) is True
    ok(ops.post("/series/%s/resume" % cid), "resume", cid)
    refused(ops.post("/series/%s/resume" % cid), 409, "not_paused")
    ctl(d, "cancel", mine)


def test_only_a_control_user_pauses_a_target(d, ops, alice, guest):
    q = guest.queue()
    target = "amq.default/" + q
    refused(alice.post("/targets/pause", target=target), 403, "forbidden")
    refused(alice.post("/targets/resume", target=target), 403, "forbidden")
    for kind in ("pause", "resume"):
        a = ops.post("/targets/" + kind, target=target)
        assert a.status == 200 and a.data.get("ok") is True and \
            a.data.get("kind") == kind, a
    refused(ops.post("/targets/resume", target=target), 409, "not_paused")
    rs = [(r.type, r.user_id) for r in records(d.broker,
                                               d.prefix + ".cancels")
          if q in str((r.headers or {}).get("x-cascade-pause-target", "")) +
          str((r.headers or {}).get("x-cascade-resume-target", ""))]
    assert rs == [("pause", ops.account.name),
                  ("resume", ops.account.name)], rs


# Parked.

def test_parked_shows_reads_and_requeues(d, ops, alice, bob, guest):
    """A message to an exchange that does not exist is parked: the ring
    shows it to ops and its owner, not to bob; reading P.error is for
    control users; requeued by message-id once the exchange exists, it
    arrives, still alice's."""
    ex, mid = uid("ex-late"), uid("parked")
    alice.account.delayed(d.prefix, "orders", mid, "2s",
                          **{"x-target-exchange": ex})

    def ring(s):
        a = s.get_json("/parked")
        assert a.status == 200, a
        return json.dumps(a.data)
    wait_for(lambda: mid in ring(ops), 15,
             lambda: "%s in ops' /parked ring: %s" % (mid, ring(ops)))
    assert mid in ring(alice)
    assert mid not in ring(bob)
    refused(alice.get_json("/parked", read="1"), 403, "forbidden")
    a = ops.get_json("/parked", read="1")
    assert a.status == 200 and mid in json.dumps(a.data), a

    guest.ch.exchange_declare(ex, "direct")
    q = guest.queue()
    guest.ch.queue_bind(q, ex, "orders")
    refused(alice.post("/parked/requeue", message_id=mid), 403, "forbidden")
    a = ops.post("/parked/requeue", message_id=mid)
    assert a.status == 200 and a.data["requeued"] == 1, a
    got = guest.collect(q, 1, 5)
    assert [p.message_id for _, p, _ in got] == [mid], got
    assert got[0][1].headers.get("x-cascade-user-id") == alice.account.name
