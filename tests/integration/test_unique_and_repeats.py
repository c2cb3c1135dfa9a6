# SPDX-License-Identifier: Apache-2.0
"""Unique ids and repeats (docs/CONTRACT.md sections 7.7 and 7.8):
x-cascade-unique keep and replace, raced by two daemons and between two
users; series with x-cascade-every, their records in P.series and the
refresh of those; the cap on the ids held; a repeat first due in 1970.
Against the real daemon on a private RabbitMQ."""
import time

import pika
import pytest

from helpers import ctl, parked, total, wait_for, wait_parked
# users: a fixture, imported to be used here.
from waiting import (LATE, SHORT, SLACK, events, expect_nothing, ladder,
                     listing, on_time, records, series_through_kills, uid,
                     users, wait_listed)


def unique(client, d, q, mid, mode, delay, body):
    """A message with x-cascade-unique; (time published, delay s)."""
    t = client.publish(d.prefix, q, body,
                       {"x-remaining-delay": "%dms" % (delay * 1000),
                        "x-cascade-unique": mode}, message_id=mid)
    return t, delay


@pytest.mark.slow
def test_unique_keep_and_replace(client, daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    kept, swapped = uid("keep"), uid("replace")
    t_keep, _ = unique(client, d, q, kept, "keep", 3, b"first")
    wait_listed(d, [kept])
    unique(client, d, q, kept, "keep", 2, b"second")      # a duplicate
    unique(client, d, q, swapped, "replace", 4, b"old")
    wait_listed(d, [swapped])
    t_new, _ = unique(client, d, q, swapped, "replace", 2, b"new")
    got = client.collect(q, 3, 8)
    bodies = sorted((p.message_id, bytes(b)) for _, p, b in got)
    assert bodies == sorted([(kept, b"first"), (swapped, b"new")]), bodies
    at = {p.message_id: t for t, p, _ in got}
    on_time(at, kept, t_keep + 3)
    on_time(at, swapped, t_new + 2)
    expect_nothing(client, [q], t_new + 4 + 2)
    m = d.metrics()
    assert total(m, "cascade_duplicates_total") == 1
    assert total(m, "cascade_replaced_total") == 1
    assert [r.message_id for r in events(d, "duplicate")] == [kept]
    # Once the first has been delivered, the id is free again.
    unique(client, d, q, kept, "keep", 1, b"third")
    got = client.collect(q, 1, 5)
    assert [bytes(b) for _, _, b in got] == [b"third"], got
    # Without a message-id it is refused with the reason.
    client.publish(d.prefix, q, b"x", {"x-remaining-delay": "1s",
                                       "x-cascade-unique": "keep"})
    wait_parked(d, 1)
    assert "no message-id" in parked(d)["messages"][0]["reason"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["keep", "replace"])
def test_unique_race_between_two_daemons(client, daemon_factory, mode):
    """Two daemons take the two copies of each id at the same moment:
    every daemon judges the claims in the stream's order, so exactly one
    of each pair arrives, and the right one."""
    d1 = daemon_factory(ladder(*SHORT))
    d2 = daemon_factory(ladder(*SHORT), prefix=d1.prefix)
    q = client.queue()
    pairs = [uid("race") for _ in range(30)]
    t0 = time.time()
    for mid in pairs:
        unique(client, d1, q, mid, mode, 3, b"a")
        unique(client, d1, q, mid, mode, 3, b"b")
    got = client.collect(q, 60, 12)
    expect_nothing(client, [q], t0 + 3 + 3)
    delivered = sorted(p.message_id for _, p, _ in got)
    assert delivered == sorted(pairs), "lost or twice: %s" % (
        sorted(set(pairs) ^ set(delivered)) or
        [m for m in delivered if delivered.count(m) > 1])
    # Which one: keep, the first claim in P.cancels; replace, the last.
    claims = {}
    for r in records(d1.broker, d1.prefix + ".cancels"):
        if r.type == "claim":
            claims.setdefault(r.headers["x-cascade-claim"], []).append(
                r.headers["x-cascade-id"])
    won = {m: (c[0] if mode == "keep" else c[-1]) for m, c in claims.items()}
    ends = {r.headers["x-cascade-id"]: r.type for r in events(d1)
            if r.type in ("delivered", "duplicate", "cancelled")}
    for mid in pairs:
        assert ends.get(won[mid]) == "delivered", (mid, claims[mid], ends)
    # Every loser is recorded as such.
    lost = [t for t in ends.values()
            if t == ("duplicate" if mode == "keep" else "cancelled")]
    assert len(lost) == len(pairs), ends


def repeat(client, d, q, mid, delay, every, **more):
    h = {"x-remaining-delay": "%dms" % (delay * 1000),
         "x-cascade-every": every}
    h.update(more)
    return client.publish(d.prefix, q, b"tick", h, message_id=mid)


@pytest.mark.slow
def test_a_series_of_5_every_second_numbered_without_drift(client,
                                                          daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    mid = uid("series")
    t0 = repeat(client, d, q, mid, 1, "1s", **{"x-cascade-times": 5})
    got = client.collect(q, 5, 10)
    occ = [p.headers["x-cascade-occurrence"] for _, p, _ in got]
    assert occ == [1, 2, 3, 4, 5], occ
    for k, (t, p, _) in enumerate(got, 1):
        assert p.message_id == mid
        # Each due at first + (k - 1) s, whatever the lateness before.
        late = t - (t0 + 1 + (k - 1))
        assert -SLACK <= late < LATE, (k, late)
        assert not any(h.startswith("x-cascade-") and
                       h not in ("x-cascade-occurrence",
                                 "x-cascade-scheduled")
                       for h in p.headers), p.headers
    # Each copy says when its occurrence was due: a second apart.
    at = [p.headers["x-cascade-scheduled"] for _, p, _ in got]
    assert [b - a for a, b in zip(at, at[1:])] == [1000] * 4, at
    expect_nothing(client, [q], time.time() + 2.5)
    # One series record per copy after the first, in P.series; none in
    # P.cancels, which keeps records for max_age and is read at connect.
    recs = [r for r in records(d.broker, d.prefix + ".series")
            if r.type == "series"]
    assert [r.headers["x-cascade-occurrence"] for r in recs] == \
        [2, 3, 4, 5], recs
    assert not [r for r in records(d.broker, d.prefix + ".cancels")
                if r.type == "series"]
    # A bad interval is refused with the reason.
    client.publish(d.prefix, q, b"x", {"x-remaining-delay": "1s",
                                       "x-cascade-every": "500ms"},
                   message_id="m")
    wait_parked(d, 1)
    assert "at least 1s" in parked(d)["messages"][0]["reason"]


@pytest.mark.slow
def test_an_endless_series_stops_when_cancelled(client, daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    mid = uid("endless")
    repeat(client, d, q, mid, 1, "1s")
    got = client.collect(q, 3, 6)
    assert len(got) == 3, got
    r = ctl(d, "cancel", mid)
    assert "cancelled 1 waiting message" in r.stdout, r.stdout
    stopped = time.time()
    # The copy being delivered at that instant may still arrive; then
    # nothing, ever.
    late = client.collect(q, 5, 3)
    assert len(late) <= 1, late
    expect_nothing(client, [q], time.time() + 3)
    assert time.time() > stopped + 5
    wait_for(lambda: listing(d)["waiting"] == 0, 10, "an empty list")


@pytest.mark.slow
def test_kill_9_while_a_series_runs_neither_forks_nor_loses(
        client, daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    mids = [uid("kill9-%d" % i) for i in range(4)]
    for mid in mids:
        repeat(client, d, q, mid, 1, "1s", **{"x-cascade-times": 8})
    series_through_kills(client, d, q, mids, 8)


def series_record(d, stream, sid, at, until, occurrence=7, token="tok"):
    """A series record written into stream as the daemon's own user (the
    broker URL's, guest) would: CONTRACT.md 7.8."""
    conn = d.broker.connect()
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("", stream, b"", pika.BasicProperties(
            type="series", delivery_mode=2, user_id="guest",
            headers={"x-cascade-at": at, "x-cascade-series": sid,
                     "x-cascade-occurrence": occurrence,
                     "x-cascade-token": token, "x-cascade-until": until}),
            mandatory=True)
    finally:
        conn.close()


def stream_arguments(d, name):
    """The arguments queue name was declared with, from rabbitmqctl."""
    import json
    out = d.broker.ctl("list_queues", "-q", "--formatter", "json", "name",
                       "arguments").stdout
    for q in json.loads(out):
        if q["name"] == name:
            args = q["arguments"]
            # A list of [key, type, value] on some versions, a map on
            # others.
            if isinstance(args, list):
                return {a[0]: a[-1] for a in args}
            return args
    raise AssertionError("no queue %s in %s" % (name, out))


def test_p_series_keeps_its_window_in_small_segments(daemon_factory):
    """P.series is declared with x-max-age = [events] series_window and
    1 MiB segments (a stream drops whole segments only).  One that exists
    with other arguments is kept, with a warning, as P.events is."""
    d = daemon_factory(ladder(*SHORT, events={"series_window": "2h"}))
    args = stream_arguments(d, d.prefix + ".series")
    assert args.get("x-queue-type") == "stream", args
    assert args.get("x-max-age") == "7200s", args
    assert args.get("x-stream-max-segment-size-bytes") == 1048576, args
    d.stop()
    other = daemon_factory(ladder(*SHORT), start=False)
    conn = d.broker.connect()
    try:
        conn.channel().queue_declare(other.prefix + ".series", durable=True,
                                     arguments={"x-queue-type": "stream",
                                                "x-max-age": "1D"})
    finally:
        conn.close()
    other.start()
    assert "msg=stream_arguments queue=%s.series" % other.prefix in \
        other.log(), other.log()


def refreshed(d, sid):
    """The series records of sid in P.series, as (at, occurrence, token,
    until)."""
    return [(r.headers["x-cascade-at"], r.headers["x-cascade-occurrence"],
             r.headers["x-cascade-token"], r.headers["x-cascade-until"])
            for r in records(d.broker, d.prefix + ".series")
            if r.type == "series" and
            r.headers.get("x-cascade-series") == sid]


def test_an_old_series_record_is_written_again_before_it_ages_out(
        daemon_factory):
    """A series whose latest record was written more than a quarter of
    [events] series_window ago, and is still in force, gets it written
    again into P.series (the refresh, CONTRACT.md 7.8), also one an
    earlier version left in P.cancels; a fresh one, or one no longer in
    force, does not.  The records say when they were written, so an old
    one is made here rather than waited for."""
    d = daemon_factory(ladder(*SHORT, events={"series_window": "1h"}))
    now = int(time.time() * 1000)
    until = now + 3600000
    old, fresh, lapsed, legacy = (uid("old"), uid("fresh"), uid("lapsed"),
                                  uid("legacy"))
    series_record(d, d.prefix + ".series", old, now - 20 * 60000, until)
    series_record(d, d.prefix + ".series", fresh, now - 5 * 60000, until)
    series_record(d, d.prefix + ".series", lapsed, now - 20 * 60000,
                  now - 1000)
    series_record(d, d.prefix + ".cancels", legacy, now - 50 * 60000, until,
                  occurrence=3, token="tok3")
    wait_for(lambda: len(refreshed(d, old)) == 2 and
             len(refreshed(d, legacy)) == 1, 10,
             "the old records written again")
    at, occurrence, token, until_ = refreshed(d, old)[1]
    assert at >= now and (occurrence, token, until_) == (7, "tok", until)
    at, occurrence, token, until_ = refreshed(d, legacy)[0]
    assert at >= now and (occurrence, token, until_) == (3, "tok3", until)
    # Written again once: read back, it is fresh (a tick is 0.5 to 1.5 s).
    time.sleep(1.6)
    assert len(refreshed(d, old)) == 2
    assert len(refreshed(d, fresh)) == 1
    assert len(refreshed(d, lapsed)) == 1
    assert total(d.metrics(), "cascade_series_refreshed_total") == 2
    # A daemon started now reads them back from both streams, held as
    # they were: fresh, so it writes none of them again.
    d.stop()
    d.start()
    time.sleep(1.5)
    m = d.metrics()
    assert m['cascade_held_ids{kind="series"}'] == 3, m
    assert total(m, "cascade_series_refreshed_total") == 0


def test_unique_ids_are_their_publisher_s(client, daemon_factory, users):
    """alice's waiting keep message inv-1 does not make bob's inv-1 a
    duplicate (CONTRACT.md 7.7); within one user it still does."""
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    alice = users(uid("alice"), d.prefix)
    bob = users(uid("bob"), d.prefix)
    mid = uid("inv")
    keep = {"x-remaining-delay": "3s", "x-cascade-unique": "keep"}
    alice.publish(q, keep, mid, body=b"alice")
    wait_for(lambda: total(d.metrics(), "cascade_held_ids{kind=\"claim\"}")
             == 1, 10, "alice's claim held")
    later = dict(keep, **{"x-remaining-delay": "2s"})
    bob.publish(q, later, mid, body=b"bob")
    alice.publish(q, later, mid, body=b"alice again")
    got = client.collect(q, 3, 8)
    who = sorted(bytes(b) for _, _, b in got)
    assert who == [b"alice", b"bob"], who
    m = d.metrics()
    assert total(m, "cascade_duplicates_total") == 1
    assert m["cascade_held_ids{kind=\"claim\"}"] == 2, m


def test_past_max_held_ids_new_ids_are_parked(client, daemon_factory):
    """[events] max_held_ids = 2: two unique messages are held; a third,
    a repeat and a request published to P are parked as too_many_ids;
    a duplicate of a held id is still judged."""
    d = daemon_factory(ladder(*SHORT, events={"max_held_ids": "2"}))
    q = client.queue()
    held = [uid("held") for _ in range(2)]
    for i, mid in enumerate(held):
        unique(client, d, q, mid, "keep", 30, b"x")
        wait_for(lambda: total(d.metrics(),
                               "cascade_held_ids{kind=\"claim\"}") == i + 1,
                 10, "claim %d held" % (i + 1))
    m = d.metrics()
    assert m["cascade_held_ids_max"] == 2, m
    refused = uid("refused")
    unique(client, d, q, refused, "keep", 30, b"x")
    client.publish(d.prefix, q, b"r", {"x-remaining-delay": "30s",
                                       "x-cascade-every": "1m"},
                   message_id=uid("repeat"))
    client.publish(d.prefix, q, b"", {"x-cascade-cancel": uid("nothing")})
    unique(client, d, q, held[0], "keep", 30, b"dup")
    wait_parked(d, 3)
    reasons = [p["reason"] for p in parked(d)["messages"]]
    assert all(r.startswith("too many ids held: 2, and [events] "
                            "max_held_ids is 2") for r in reasons), reasons
    m = d.metrics()
    assert m["cascade_messages_parked_total{reason=\"too_many_ids\"}"] == 3
    wait_for(lambda: total(d.metrics(), "cascade_duplicates_total") == 1,
             10, "the duplicate of a held id dropped")
    assert total(d.metrics(), "cascade_held_ids") == 2


def collect_both(client, q1, q2, timeout):
    """What arrives on q1 and on q2 for timeout s, with arrival times."""
    got = {q1: [], q2: []}
    tags = []
    for q in (q1, q2):
        def on_message(ch, method, props, body, q=q):
            got[q].append((time.time(), props, body))
            ch.basic_ack(method.delivery_tag)
        tags.append(client.ch.basic_consume(q, on_message))
    deadline = time.time() + timeout
    while time.time() < deadline:
        client.conn.process_data_events(time_limit=0.05)
    for tag in tags:
        client.ch.basic_cancel(tag)
    return got[q1], got[q2]


def test_a_repeat_from_1970_does_not_flood(client, daemon_factory):
    """Issue 34: x-deliver-at: 1 with x-cascade-every: 1s delivered every
    occurrence since 1970 back to back.  Now the missed ones collapse into
    one delivery saying how many, and the series goes on once a second;
    with x-cascade-catch-up: all each missed one comes, paced."""
    d = daemon_factory(ladder(*SHORT))
    flood, paced = client.queue(), client.queue()
    t0 = client.publish(d.prefix, flood, b"tick",
                        {"x-deliver-at": 1, "x-cascade-every": "1s"},
                        message_id=uid("flood"))
    start = int(t0) - 30  # 30 to 31 occurrences owed
    client.publish(d.prefix, paced, b"tick",
                   {"x-deliver-at": start * 1000, "x-cascade-every": "1s",
                    "x-cascade-catch-up": "all"}, message_id=uid("paced"))
    client.publish(d.prefix, flood, b"x",
                   {"x-deliver-at": 1, "x-cascade-every": "1s",
                    "x-cascade-catch-up": "some"}, message_id="bad")
    got, caught_up = collect_both(client, flood, paced, 5.5)
    wait_parked(d, 1)
    assert "x-cascade-catch-up" in parked(d)["messages"][0]["reason"]

    # Five seconds: one collapsed delivery, then about one a second.
    assert 4 <= len(got) <= 8, [p.headers for _, p, _ in got]
    first = got[0][1].headers
    missed = first["x-cascade-missed"]
    # Occurrence k is due at 1 + (k - 1) * 1000 ms: about t0 of them.
    assert abs(missed - t0) < 10, (missed, t0)
    occ = [p.headers["x-cascade-occurrence"] for _, p, _ in got]
    assert occ[0] == missed + 1, first
    assert occ == list(range(occ[0], occ[0] + len(occ))), occ
    assert not any("x-cascade-missed" in p.headers for _, p, _ in got[1:])
    assert total(d.metrics(), "cascade_series_missed_total") >= missed
    assert "msg=series_missed" in d.log()
    for t, p, _ in got[1:]:
        due = (1 + (p.headers["x-cascade-occurrence"] - 1) * 1000) / 1000.0
        assert -SLACK <= t - due < LATE, (p.headers, t - due)

    # Each missed one of the other, none twice, none closer than the pace.
    occ = [p.headers["x-cascade-occurrence"] for _, p, _ in caught_up]
    assert occ == list(range(1, len(occ) + 1)), occ
    assert len(occ) >= 30, occ
    assert not any("x-cascade-missed" in p.headers for _, p, _ in caught_up)
    arrived = [t for t, _, _ in caught_up]
    assert arrived[30] - arrived[0] >= 30 * 0.1 - 0.2, arrived
    # A series' records: one per copy, not one per missed occurrence.  The
    # series go on while this reads: the deliveries are counted after the
    # records, so they are at least those the records follow (each copy's
    # record comes after its occurrence's delivery, and one more for each
    # series' first copy).
    recs = [r for r in records(d.broker, d.prefix + ".series")
            if r.type == "series"]
    delivered = total(d.metrics(), "cascade_messages_delivered_total")
    assert delivered >= len(got) + len(caught_up)
    assert len(recs) <= delivered + 2, (len(recs), delivered)
