# SPDX-License-Identifier: Apache-2.0
"""Schedules people say (docs/CONTRACT.md section 7.10): cron with a time
zone, pause and resume of a series and of a target, and pacing a target.
Against the real daemon on a private RabbitMQ."""
import datetime
import subprocess
import time
import zoneinfo

import pika
import pytest

from helpers import (LATE_SCALE, PUBLISH, ctl, parked, total, wait_for,
                     wait_parked)
# users: a fixture, imported to be used here.
from waiting import (LATE, SHORT, SLACK, expect_nothing, ladder, listing,
                     series_through_kills, uid, users, wait_listed)


def cron(client, d, q, mid, expr, **more):
    h = {"x-cascade-cron": expr}
    h.update(more)
    return client.publish(d.prefix, q, b"tick", h, message_id=mid)


def own_headers(props):
    return sorted(h for h in props.headers or {} if h.startswith("x-cascade-"))


@pytest.mark.slow
def test_a_six_field_cron_every_2s_delivers_on_the_boundary_numbered(
        client, daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    mid = uid("cron")
    t0 = cron(client, d, q, mid, "*/2 * * * * *", **{"x-cascade-times": 4})
    got = client.collect(q, 4, 14)
    occ = [p.headers["x-cascade-occurrence"] for _, p, _ in got]
    assert occ == [1, 2, 3, 4], occ
    at = [p.headers["x-cascade-scheduled"] for _, p, _ in got]
    # On the even seconds, 2 s apart, the first at or after the daemon
    # saw it: after the publish, and the first boundary after it unless
    # the daemon read it past that boundary (a fresh make check saw a
    # publish 0.4 ms before one, read after it: the next, 2.0004 s on).
    seen_by = t0 * 1000 + 1000 * LATE_SCALE
    assert at[0] % 2000 == 0 and t0 * 1000 <= at[0] < seen_by + 2000, at
    assert [b - a for a, b in zip(at, at[1:])] == [2000] * 3, at
    for t, p, _ in got:
        assert p.message_id == mid
        late = t - p.headers["x-cascade-scheduled"] / 1000
        assert -SLACK <= late < LATE * LATE_SCALE, late
        assert own_headers(p) == ["x-cascade-occurrence",
                                  "x-cascade-scheduled"], p.headers
    expect_nothing(client, [q], time.time() + 3)


def local_in(zone, seconds):
    """A cron expression naming the local time in zone `seconds` from now,
    to the second, and that instant (Unix s)."""
    t = int(time.time()) + seconds
    lt = datetime.datetime.fromtimestamp(t, zoneinfo.ZoneInfo(zone))
    return "%d %d %d %d %d *" % (lt.second, lt.minute, lt.hour, lt.day,
                                 lt.month), t


def test_cron_in_a_zone_from_cascade_publish(client, daemon_factory):
    """--cron with --tz: the local time named fires in that zone (a
    30-minute offset, so UTC or the host's zone would miss it)."""
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    expr, t = local_in("Australia/Lord_Howe", 4)
    r = subprocess.run([PUBLISH, "-c", d.config, "--cron", expr, "--tz",
                        "Australia/Lord_Howe", "-r", q, "--body", "hello"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = client.collect(q, 1, 10)
    assert len(got) == 1, "nothing at %s" % expr
    arrived, p, body = got[0]
    assert body == b"hello"
    assert p.headers["x-cascade-scheduled"] == t * 1000
    assert -SLACK <= arrived - t < LATE * LATE_SCALE, arrived - t
    assert p.headers["x-cascade-occurrence"] == 1


def test_a_bad_expression_or_zone_is_parked_naming_the_field(
        client, daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    cron(client, d, q, uid("bad"), "0 25 * * *")
    cron(client, d, q, uid("bad"), "0 9 * * *",
         **{"x-cascade-tz": "Europe/Berln"})
    cron(client, d, q, uid("bad"), "0 9 * * *",
         **{"x-cascade-tz": "../../etc/passwd"})
    cron(client, d, q, uid("bad"), "0 9 * * *",
         **{"x-cascade-every": "1s"})
    wait_parked(d, 4)
    reasons = sorted(m["reason"] for m in parked(d)["messages"])
    assert reasons == sorted([
        "x-cascade-cron \"0 25 * * *\": hour field '25': 25 is out of "
        "range 0-23",
        "x-cascade-tz \"Europe/Berln\": unknown zone",
        "x-cascade-tz \"../../etc/passwd\": not a valid zone name: a "
        "component starts with '.'",
        "x-cascade-cron and x-cascade-every: a repeat has one or the "
        "other"]), reasons


@pytest.mark.slow
def test_kill_9_while_a_cron_series_runs_neither_forks_nor_loses(
        client, daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    mids = [uid("cron-kill9-%d" % i) for i in range(4)]
    for mid in mids:
        cron(client, d, q, mid, "* * * * * *", **{"x-cascade-times": 8})
    series_through_kills(client, d, q, mids, 8)


def every(client, d, q, mid, interval, delay="1s", **more):
    h = {"x-remaining-delay": delay, "x-cascade-every": interval}
    h.update(more)
    return client.publish(d.prefix, q, b"tick", h, message_id=mid)


def test_pause_holds_a_series_and_resume_releases_what_it_missed(
        client, daemon_factory):
    """Paused with cascade-ctl, resumed from a client through P: nothing
    while paused, then the next occurrence after the resume, standing for
    the ones missed (the default rule), and nothing early."""
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    mid = uid("paused")
    every(client, d, q, mid, "1s")
    got = client.collect(q, 2, 6)
    assert len(got) == 2, got
    r = ctl(d, "pause", mid)
    assert r.stdout.strip() == "%s: paused" % mid, r.stdout
    paused = time.time()
    # The copy going out at that instant may still arrive; then nothing.
    held = client.collect(q, 10, 4)
    assert len(held) <= 1, held
    # As the user who paused it (cascade-ctl's, the daemon's here): an
    # anonymous resume would be refused.
    me = pika.URLParameters(d.broker.url).credentials.username
    client.publish(d.prefix, q, b"", {"x-cascade-resume": mid}, user_id=me)
    resumed = time.time()
    got = client.collect(q, 1, 1 + 3)
    assert len(got) == 1, "nothing after the resume"
    t, p, _ = got[0]
    missed = p.headers.get("x-cascade-missed", 0)
    # Paused for about 4 s of a 1 s series: at least three missed.
    assert missed >= 3, p.headers
    assert p.headers["x-cascade-scheduled"] / 1000 <= t + SLACK
    assert t > resumed - SLACK and t - paused > 3.5, (t, paused)
    ctl(d, "cancel", mid)
    m = d.metrics()
    assert total(m, "cascade_paused_waits_total") >= 3, m


def test_pause_holds_a_target_and_resume_releases_all_of_it(
        client, daemon_factory):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    t0 = time.time()
    for i in range(20):
        client.publish(d.prefix, q, b"%d" % i,
                       {"x-remaining-delay": "%dms" % (1000 + 50 * i)},
                       message_id="m%d" % i)
    r = ctl(d, "pause", "--target", "/" + q)
    assert r.stdout.strip() == "target /%s: paused" % q, r.stdout
    expect_nothing(client, [q], t0 + 4)
    ctl(d, "resume", "--target", "/" + q)
    resumed = time.time()
    r = ctl(d, "resume", "--target", "/" + q)
    assert r.stdout.strip() == \
        "target /%s: not paused; nothing recorded" % q, r.stdout
    got = client.collect(q, 20, 10)
    assert sorted(p.message_id for _, p, _ in got) == \
        sorted("m%d" % i for i in range(20)), got
    # Held back round the ladder: none before the resume, all soon after.
    assert all(resumed - SLACK < t < resumed + 5 * LATE_SCALE
               for t, _, _ in got), \
        [t - resumed for t, _, _ in got]
    assert total(d.metrics(), "cascade_paused_waits_total") >= 20


def test_only_a_control_user_pauses_a_target(client, daemon_factory, users):
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    eve = users("eve", d.prefix)
    eve.publish(q, {"x-cascade-pause-target": "/" + q})
    wait_parked(d, 1)
    assert parked(d)["messages"][0]["reason"] == (
        "x-cascade-pause-target: only [events] control_users may pause "
        "or resume a target")
    # Her own series she may pause, through P.
    mid = uid("eve")
    eve.publish(q, {"x-remaining-delay": "1s", "x-cascade-every": "1s"},
                mid=mid)
    got = client.collect(q, 1, 5)
    assert len(got) == 1
    eve.publish(q, {"x-cascade-pause": mid})
    client.collect(q, 10, 1.5)  # the one in flight
    expect_nothing(client, [q], time.time() + 3)


def paced_daemon(daemon_factory, q, rate, prefix=None):
    return daemon_factory(ladder(*SHORT, **{"target /" + q: {"pace": rate}}),
                          prefix=prefix)


def publish_due_burst(client, d, q, n, first_ms=1500):
    """n messages due 1 ms apart from first_ms on: (due time, id) each."""
    t0 = time.time()
    due = []
    for i in range(n):
        mid = "m%03d" % i
        client.publish(d.prefix, q, b"x",
                       {"x-remaining-delay": "%dms" % (first_ms + i)},
                       message_id=mid)
        due.append((t0 + (first_ms + i) / 1000, mid))
    return due


def check_paced(got, due, n, rate, span):
    assert len(got) == n, "%d of %d arrived" % (len(got), n)
    arrived = [p.message_id for _, p, _ in got]
    # In the order they came due: but a delivery that comes back from the
    # ladder after its slot (a loaded broker: CI's lanes share two cores)
    # goes when it comes, so a few may pass a neighbour (CONTRACT 7.10).
    # How far: the slots a return 100 ms late (times LATE_SCALE) lets
    # pass, at least 2 (a CI run of 2026-11-29 saw one pass 4 at 20/s).
    order = {mid: i for i, (_, mid) in enumerate(due)}
    moved = [(i, mid) for i, mid in enumerate(arrived)
             if abs(order[mid] - i) > 0]
    far = max(2, round(rate * 0.1 * LATE_SCALE))
    assert len(moved) <= n // 20 and \
        all(abs(order[mid] - i) <= far for i, mid in moved), (moved, arrived)
    at = [t for t, _, _ in got]
    # Over about n / rate seconds, never more than the pace in a second.
    assert span * 0.9 <= at[-1] - at[0] <= span * 1.25 * LATE_SCALE, \
        at[-1] - at[0]
    # A stall of the whole machine (CI's lanes share two cores) releases
    # the timers it held up together: allowed for, as lateness is.
    most = max(sum(1 for u in at if t <= u < t + 1) for t in at)
    assert most <= rate + 2 + rate * (LATE_SCALE - 1) / 2, most
    # Late, never early.
    for (t, p, _), (d, mid) in zip(got, due):
        assert t >= d - SLACK, (mid, t - d)


@pytest.mark.slow
def test_a_target_paced_at_20_a_second_gets_200_in_10_s_in_due_order(
        client, daemon_factory):
    q = "q-pace-" + uid("")[-8:]
    client.queue(q)
    d = paced_daemon(daemon_factory, q, "20/s")
    due = publish_due_burst(client, d, q, 200)
    got = client.collect(q, 200, 25)
    check_paced(got, due, 200, 20, 199 / 20)
    m = d.metrics()
    assert total(m, "cascade_paced_total") >= 190, m
    assert total(m, "cascade_pace_daemons") == 1


@pytest.mark.slow
def test_two_daemons_share_a_pace(client, daemon_factory):
    """Each takes half: together they keep to the pace."""
    q = "q-pace-" + uid("")[-8:]
    client.queue(q)
    d1 = paced_daemon(daemon_factory, q, "20/s")
    d2 = paced_daemon(daemon_factory, q, "20/s", prefix=d1.prefix)
    time.sleep(1)  # each reads the other's marker at its connect or soon
    publish_due_burst(client, d1, q, 100)
    got = client.collect(q, 100, 25)
    assert len(got) == 100, len(got)
    at = sorted(t for t, _, _ in got)
    assert 99 / 20 * 0.9 <= at[-1] - at[0] <= 99 / 20 * 1.3 * LATE_SCALE, \
        at[-1] - at[0]
    most = max(sum(1 for u in at if t <= u < t + 1) for t in at)
    assert most <= 22 + 20 * (LATE_SCALE - 1) / 2, most
    for d in (d1, d2):
        assert total(d.metrics(), "cascade_pace_daemons") == 2


def next_local(zone, hour, weekdays, after):
    """The first instant (Unix ms) at or after `after` (Unix s) that is
    hour:00:00 local time in zone on one of weekdays (0 Monday)."""
    tz = zoneinfo.ZoneInfo(zone)
    day = datetime.datetime.fromtimestamp(after, tz).date()
    for n in range(8):
        d = day + datetime.timedelta(days=n)
        t = datetime.datetime(d.year, d.month, d.day, hour, tzinfo=tz)
        if d.weekday() in weekdays and t.timestamp() >= after:
            return int(t.timestamp()) * 1000
    raise AssertionError("no weekday in a week")


def test_list_series_shows_schedule_zone_next_and_paused(
        client, daemon_factory):
    """list --series: one row per series (its live copy), with its
    schedule, zone, next occurrence and whether it is paused; --json gives
    every row a repeat object, null for a plain message.  A pause by
    cascade-ctl shows at once; a resume published to P, once a daemon has
    relayed its copy into P.events."""
    d = daemon_factory(ladder(*SHORT))
    q = client.queue()
    hourly, weekdays, plain = uid("hourly"), uid("weekdays"), uid("plain")
    t0 = every(client, d, q, hourly, "1h", delay="1h")
    t1 = cron(client, d, q, weekdays, "0 9 * * 1-5",
              **{"x-cascade-tz": "Europe/Berlin"})
    client.publish(d.prefix, q, b"once", {"x-remaining-delay": "1h"},
                   message_id=plain)
    rows = {m["id"]: m for m in wait_listed(d, [hourly, weekdays,
                                                plain])["messages"]}
    assert rows[plain]["repeat"] is None, rows[plain]

    def series():
        lst = listing(d, "--series")
        return lst, {m["id"]: m for m in lst["messages"]}

    lst, rows = series()
    assert lst["waiting"] == 2 and sorted(rows) == sorted([hourly, weekdays])
    h, w = rows[hourly], rows[weekdays]
    assert h["repeat"] == {"every_ms": 3600000, "cron": None, "tz": None,
                           "occurrence": 1, "paused": False}, h
    assert abs(h["due_ms"] / 1000 - (t0 + 3600)) < 2, (h["due_ms"], t0)
    assert w["repeat"] == {"every_ms": None, "cron": "0 9 * * 1-5",
                           "tz": "Europe/Berlin", "occurrence": 1,
                           "paused": False}, w
    # The first 09:00 in Berlin on a weekday after the publish.
    assert w["due_ms"] == next_local("Europe/Berlin", 9, range(5), t1), w
    for m in (h, w):
        assert m["exchange"] == "" and m["routing_key"] == q, m

    r = ctl(d, "pause", weekdays)
    assert r.stdout.strip() == "%s: paused" % weekdays, r.stdout
    _, rows = series()
    assert rows[weekdays]["repeat"]["paused"] is True, rows[weekdays]
    assert rows[hourly]["repeat"]["paused"] is False, rows[hourly]

    text = ctl(d, "list", "--series").stdout.splitlines()
    assert text[0] == "2 series waiting in %s.events" % d.prefix, text
    assert text[1].split() == ["ID", "SCHEDULE", "ZONE", "NEXT",
                               "OCCURRENCE", "PAUSED", "TARGET"], text
    line = {ln.split()[0]: ln for ln in text[2:]}
    assert sorted(line) == sorted([hourly, weekdays]), text
    assert 'cron "0 9 * * 1-5"  Europe/Berlin' in line[weekdays], text
    assert line[weekdays].split()[-3:] == ["1", "paused",
                                           "amq.default/" + q], text
    assert "every 1h" in line[hourly] and " UTC " in line[hourly], text
    assert line[hourly].split()[-2:] == ["1", "amq.default/" + q], text
    assert "in 59m" in line[hourly] or "in 1h" in line[hourly], text

    # Resumed through P, as the user who paused it: the daemon relays
    # the request into P.cancels, and its copy into P.events.
    me = pika.URLParameters(d.broker.url).credentials.username
    client.publish(d.prefix, q, b"", {"x-cascade-resume": weekdays},
                   user_id=me)
    wait_for(lambda: not series()[1][weekdays]["repeat"]["paused"], 15,
             "the relayed resume in list --series")

    # cascade-ctl says when it changes nothing, and records nothing then.
    r = ctl(d, "resume", weekdays)
    assert r.stdout.strip() == "%s: not paused; nothing recorded" % \
        weekdays, r.stdout
    r = ctl(d, "pause", "no-such-series", rc=2)
    assert "no waiting series you may change has 'no-such-series'" in \
        r.stderr, r.stderr
    ctl(d, "pause", weekdays)
    # Paused by its message-id, resumed by its cascade id: lifted.
    cid = series()[1][weekdays]["cascade_id"]
    r = ctl(d, "resume", cid)
    assert r.stdout.strip() == "%s: resumed" % cid, r.stdout
    assert series()[1][weekdays]["repeat"]["paused"] is False
