# SPDX-License-Identifier: Apache-2.0
"""Trust boundaries (issue 34, docs/security.md): records forged into
cascade's streams, and one user's requests and ids against another's
messages.  Who may cancel, and a user-id RabbitMQ refuses; unique ids
that belong to their publisher; claim, series, batch and scheduled
records believed only from cascade's own writers; a repeat that cannot
flood.  Each attack tried as a real broker user would, on a private
RabbitMQ, asserting what that user, or the one attacked, would check;
the users and daemons are trust.py's.  What is put into cascade's own
queues by hand is test_trust.py's."""
import time

import pika
import pika.exceptions
import pytest

from helpers import ctl, total, wait_for
# d, d2, guest, tmp_module, users: fixtures, imported to be used here.
from trust import (INT64_MAX, alive, arrived, d, d2, envelope, errors, guest,
                   hex16, now_ms, sample, scheduled, tmp_module,
                   untrusted_logged, users)
from waiting import LATE, SLACK, records, uid, wait_listed


# 10. Requests: who may cancel (CONTRACT 7.6, existing behaviour).

def test_another_user_cannot_cancel_a_message_or_claim_its_user_id(
        d, users, guest):
    alice, bob = users["p_only"], users["p_default"]
    q = guest.queue()
    # RabbitMQ itself refuses a user-id that is not the connection's.
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        bob.publish(d.prefix, q, b"", {"x-cascade-cancel": "anything"},
                    user_id=alice.name)
    assert e.value.reply_code == 406, e.value

    mid = uid("alice-msg")
    t0 = alice.delayed(d.prefix, q, mid, "2s")
    wait_listed(d, [mid])
    bob.publish(d.prefix, q, b"", {"x-cascade-cancel": mid},
                user_id=bob.name)
    got = arrived(guest, q, 1, 2 + LATE + 1)
    assert [p.message_id for _, p, _ in got] == [mid], got
    assert got[0][0] - (t0 + 2) > -SLACK
    # The request (which has no message-id of its own) is parked, once.
    refused = "not permitted: user '%s' may not cancel message '%s'" % (
        bob.name, mid)
    last = {}

    def parked_once():
        last["r"] = [m["reason"] for m in errors(d)
                     if m["reason"] and mid in m["reason"]]
        return last["r"]
    wait_for(parked_once, 5, "bob's request parked")
    assert len(last["r"]) == 1 and last["r"][0].startswith(refused), \
        last["r"]


# 4. Unique ids belong to their publisher.

def test_two_users_keep_the_same_unique_id_and_both_are_delivered(
        d, users, guest):
    a, b = users["p_only"], users["p_default"]
    q = guest.queue()
    mid = uid("inv-1")
    a.delayed(d.prefix, q, mid, "2s", body=b"from a",
              **{"x-cascade-unique": "keep"})
    wait_listed(d, [mid])
    b.delayed(d.prefix, q, mid, "1s", body=b"from b",
              **{"x-cascade-unique": "keep"})
    got = arrived(guest, q, 2, 2 + LATE + 1)
    assert sorted(bytes(body) for _, _, body in got) == [
        b"from a", b"from b"], got
    assert sorted(p.headers["x-cascade-user-id"] for _, p, _ in got) == \
        sorted([a.name, b.name])


# 2. Records are believed only from cascade's own writers.

def test_forged_claims_do_not_drop_another_users_plain_message(
        d, users, guest):
    """Two claim records for one unique id, the second naming another
    user's message-id as its cascade id: that message, which is not
    unique at all, is delivered on time."""
    victim = users["p_only"]
    q = guest.queue()
    mid = uid("plain")
    before = sample(d, "cascade_records_untrusted_total", stream="cancels")
    t0 = victim.delayed(d.prefix, q, mid, "2s")
    key = uid("claimed")
    for attacker in (users["p_default"], users["everything"]):
        for cid in (hex16(), mid):
            attacker.record(d.prefix + ".cancels", "claim", {
                "x-cascade-claim": key, "x-cascade-id": cid,
                "x-cascade-due": now_ms() + 60000,
                "x-cascade-until": now_ms() + 3600000,
                "x-cascade-unique": "keep",
                "x-cascade-requester": ""}, message_id=key)
    got = arrived(guest, q, 1, 2 + LATE + 1)
    assert [p.message_id for _, p, _ in got] == [mid], \
        "the plain message was dropped"
    late = got[0][0] - (t0 + 2)
    assert -SLACK < late < LATE, late
    assert sample(d, "cascade_records_untrusted_total",
                  stream="cancels") - before >= 4
    alive(d)


def test_a_forged_series_record_does_not_stop_a_repeat(d, users, guest):
    owner, attacker = users["p_only"], users["p_default"]
    q = guest.queue()
    mid = uid("every")
    t0 = owner.delayed(d.prefix, q, mid, "2s", **{"x-cascade-every": "1s",
                                                  "x-cascade-times": 3})
    rows = [m for m in wait_listed(d, [mid])["messages"]
            if m["id"] == mid]
    cid = rows[0]["cascade_id"]
    assert cid, rows
    # A later occurrence, with a token of the attacker's: every copy of
    # the real series would look stale.  In P.series, where the daemons
    # write them, and in P.cancels, where earlier versions did.
    for stream in (".series", ".cancels"):
        attacker.record(d.prefix + stream, "series", {
            "x-cascade-series": cid, "x-cascade-occurrence": 1000,
            "x-cascade-token": "forged",
            "x-cascade-until": now_ms() + 3600000})
    got = arrived(guest, q, 3, 2 + 2 + LATE + 1.5)
    assert [p.headers.get("x-cascade-occurrence") for _, p, _ in got] == \
        [1, 2, 3], got
    assert got[0][0] - (t0 + 2) > -SLACK
    assert total(d.metrics(), "cascade_series_stale_total") == 0


def test_a_forged_batch_does_not_deliver_an_attackers_body_as_alice(
        d, users, guest):
    """A batch of scheduled records written into P.events by a user with
    write on amq.default (and by one with write on everything), each
    carrying a copy of a body the attacker wrote, owned by 'alice'; then
    a reschedule to now, through P: nothing of it reaches alice's
    queue."""
    q = guest.queue()
    before = sample(d, "cascade_records_untrusted_total", stream="events")
    forged = []
    for attacker in (users["p_default"], users["everything"]):
        fid, cid = uid("forged"), hex16()
        due = now_ms() + 60000
        body = b"pay mallory, signed alice (" + fid.encode() + b")"
        inner = pika.BasicProperties(message_id=fid, delivery_mode=2,
                                     headers={
            "x-cascade-due": due, "x-cascade-exchange": "",
            "x-cascade-routing-key": q, "x-cascade-id": cid,
            "x-cascade-user-id": "alice",
            "x-cascade-since": now_ms() - 1000})
        # Owned by nobody on the outside, so anyone may reschedule it.
        attacker.batch(d.prefix + ".events", [scheduled(
            fid, cid, due, "", q, copy=envelope(inner, body),
            at=now_ms() - 1000)])
        forged.append((attacker, fid, body))
    for attacker, fid, _ in forged:
        attacker.publish(d.prefix, q, b"", {"x-cascade-reschedule": fid,
                                            "x-remaining-delay": "1s"},
                         user_id=attacker.name)
    got = arrived(guest, q, 1, 4)
    assert got == [], "delivered: %s" % [
        (bytes(b), p.headers) for _, p, b in got]
    assert sample(d, "cascade_records_untrusted_total",
                  stream="events") - before >= 2
    # Once per writer (and stream, at most), not once per record.
    for attacker, _, _ in forged:
        assert 1 <= untrusted_logged(d, attacker.name) <= 2, \
            d.log()[-3000:]


def test_a_forged_copy_in_p_copies_is_skipped_unread(d, users, guest):
    """A user with write on amq.default writes a copy record into
    P.copies for alice's waiting message, carrying a body of their own;
    then alice moves the message earlier through P.  The daemon reads
    P.copies for it and skips the forged batch (its writer is not
    cascade's, counted in cascade_records_untrusted_total{stream=
    "copies"}); the message arrives at its new time, whole, once."""
    alice, attacker = users["p_only"], users["p_default"]
    q = guest.queue()
    mid = uid("moved")
    t0 = alice.delayed(d.prefix, q, mid, "30s", body=b"alice's own")
    wait_listed(d, [mid])
    cid = [r.headers["x-cascade-id"]
           for r in records(d.broker, d.prefix + ".events")
           if r.type == "scheduled" and r.message_id == mid][0]
    before = sample(d, "cascade_records_untrusted_total", stream="copies")
    dropped = total(d.metrics(), "cascade_superseded_total")
    inner = pika.BasicProperties(message_id=mid, delivery_mode=2, headers={
        "x-cascade-due": now_ms() + 30000, "x-cascade-exchange": "",
        "x-cascade-routing-key": q, "x-cascade-id": cid,
        "x-cascade-user-id": alice.name})
    attacker.batch(d.prefix + ".copies", [pika.BasicProperties(
        type="copy", delivery_mode=2, headers={
            "x-cascade-id": cid, "x-cascade-at": now_ms(),
            "x-cascade-message": envelope(inner, b"pay mallory")})])
    asked = alice.publish(d.prefix, q, b"", {"x-cascade-reschedule": mid,
                                             "x-remaining-delay": "2s"},
                          user_id=alice.name)
    assert asked < t0 + 14, "the machine was too slow for this test"
    got = arrived(guest, q, 1, 12)
    assert [(p.message_id, bytes(b)) for _, p, b in got] == \
        [(mid, b"alice's own")], [(p.message_id, bytes(b)[:40])
                                  for _, p, b in got]
    assert got[0][0] - (asked + 2) > -SLACK and \
        got[0][0] - (asked + 2) < LATE, (got[0][0], asked)
    assert sample(d, "cascade_records_untrusted_total",
                  stream="copies") > before
    # The original is dropped when it next comes back from the ladder
    # (its longest level is 4 s), and nothing else arrives.
    wait_for(lambda: total(d.metrics(), "cascade_superseded_total") >
             dropped, 8, "the original dropped as superseded")
    assert arrived(guest, q, 1, 1) == []


def test_cancel_is_not_fooled_by_a_forged_due_time_near_int64_max(
        d, users, guest):
    """cascade-ctl cancel sizes how long a request holds by the latest
    due time among the messages it names.  A forged scheduled record due
    near INT64_MAX must not make it say "cancelled" while the real message
    is delivered."""
    owner = users["p_only"]
    q = guest.queue()
    mid = uid("victim")
    t0 = owner.delayed(d.prefix, q, mid, "3s")
    wait_listed(d, [mid])
    users["p_default"].record(d.prefix + ".events", "scheduled", {
        "x-cascade-id": hex16(), "x-cascade-due": INT64_MAX - 1,
        "x-cascade-exchange": "", "x-cascade-routing-key": q,
        "x-cascade-size": 1}, message_id=mid)
    r = ctl(d, "cancel", mid, rc=None)
    got = arrived(guest, q, 1, max(0.5, t0 + 3 + LATE - time.time()))
    delivered = [p.message_id for _, p, _ in got] == [mid]
    said = "cascade-ctl said (exit %d): %s%s; the message was %s" % (
        r.returncode, r.stdout, r.stderr,
        "delivered" if delivered else "not delivered")
    if r.returncode == 0:
        assert "cancelled 1 waiting message" in r.stdout and \
            not delivered, said
    else:
        # It may say the id named nothing it could cancel; then the
        # message goes on, as it did before.
        assert r.returncode == 1 and "not recorded" in r.stderr and \
            delivered, said


# 3. Repeats cannot flood.

def test_a_repeat_first_due_in_1970_delivers_once_not_a_flood(
        d, users, guest):
    """x-deliver-at: 1 with every 1s: the missed occurrences collapse
    into one delivery that says how many were missed, then one a
    second."""
    owner = users["p_only"]
    q = guest.queue()
    mid = uid("flood")
    owner.publish(d.prefix, q, b"tick", {"x-deliver-at": 1,
                                         "x-cascade-every": "1s"},
                  message_id=mid, user_id=owner.name)
    try:
        got = arrived(guest, q, 50, 2.5)
    finally:
        ctl(d, "cancel", "--force", mid, rc=None)
        # Let what is still on its way arrive before the next test.
        wait_for(lambda: arrived(guest, q, 1000, 1.0) == [], 30,
                 "the repeat to stop after its cancel")
    assert 1 <= len(got) <= 4, "%d deliveries in 2.5 s" % len(got)
    missed = got[0][1].headers.get("x-cascade-missed")
    assert isinstance(missed, int) and missed > 1000000, got[0][1].headers
