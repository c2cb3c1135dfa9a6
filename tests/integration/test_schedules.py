"""Schedules people say (docs/CONTRACT.md section 7.10): cron with a time
zone, pause and resume of a series and of a target, and pacing a target.
Against the real daemon on a private RabbitMQ."""
import datetime
import subprocess
import time
import zoneinfo

import pytest

from helpers import PUBLISH, parked, wait_parked
from waiting import LATE, SHORT, SLACK, expect_nothing, ladder, uid


def cron(client, d, q, mid, expr, **more):
    h = {"x-cascade-cron": expr}
    h.update(more)
    return client.publish(d.prefix, q, b"tick", h, message_id=mid)


def own_headers(props):
    return sorted(h for h in props.headers or {} if h.startswith("x-cascade-"))


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
    # On the even seconds, the first at or after the publish, 2 s apart.
    assert at[0] % 2000 == 0 and t0 * 1000 <= at[0] < t0 * 1000 + 2000, at
    assert [b - a for a, b in zip(at, at[1:])] == [2000] * 3, at
    for t, p, _ in got:
        assert p.message_id == mid
        late = t - p.headers["x-cascade-scheduled"] / 1000
        assert -SLACK <= late < LATE, late
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
    assert -SLACK <= arrived - t < LATE, arrived - t
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
        "x-cascade-cron: hour field '25': 25 is out of range 0-23",
        "x-cascade-tz: unknown zone",
        "x-cascade-tz: not a valid zone name: a component starts with '.'",
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
    got = []
    for _ in range(3):
        got += client.collect(q, 1000, 1.7)
        d.kill()
        d.start()
    got += client.collect(q, 1000, 8)
    got += client.collect(q, 1000, 3)  # a fork would go on delivering
    for mid in mids:
        occ = sorted(p.headers["x-cascade-occurrence"] for _, p, _ in got
                     if p.message_id == mid)
        # Every occurrence arrives, or is counted missed in the one after
        # it (a restart may take longer than a second); around a kill one
        # may arrive twice (at-least-once); never a second series.
        seen = {p.headers["x-cascade-occurrence"]:
                p.headers.get("x-cascade-missed", 0)
                for _, p, _ in got if p.message_id == mid}
        covered = set()
        for k, missed in seen.items():
            covered.update(range(k - missed, k + 1))
        assert covered == set(range(1, 9)), (mid, occ, seen)
        assert len(occ) <= 8 + 3, (mid, occ)
