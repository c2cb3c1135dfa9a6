# SPDX-License-Identifier: Apache-2.0
"""Native waiting ([topology] mode = native | auto): on RabbitMQ 4.3 a
message waits its last stretch in a holding queue, given back with
x-opt-delivery-time, in one broker step; on older brokers auto keeps the
ladder and native refuses to start (docs/how-it-works.md, "Native
waiting").  Every other test runs in native mode too with
CASCADE_TEST_MODE=native (make test-native)."""
import json
import re
import shutil
import socket
import subprocess
import time
import uuid

import pika
import pytest

from faults import fast_daemon
from helpers import (CASCADE, LATE_SCALE, METRICS, Client, Daemon,
                     broker_version, ctl, free_port, http_get, total,
                     wait_for)


def native_broker(broker):
    return broker_version(broker) >= (4, 3)


@pytest.fixture
def needs_43(broker):
    if not native_broker(broker):
        pytest.skip("native waiting needs RabbitMQ 4.3 or later")


def publish_due(client, target, delays_ms):
    """One message per delay, its due time (epoch ms) in the body."""
    due = {}
    for i, ms in enumerate(delays_ms):
        at = int(time.time() * 1000) + ms
        body = json.dumps({"i": i, "due": at})
        client.publish(target.exchange, "", body.encode(),
                       headers={"x-delay": ms,
                                "x-target-exchange": "",
                                "x-target-routing-key": target.queue})
        due[i] = at
    return due


class Target:
    def __init__(self, daemon, client):
        self.exchange = daemon.prefix
        self.queue = client.queue()


def lateness(got, due):
    """{i: arrival - due in ms} of what arrived."""
    out = {}
    for at, _props, body in got:
        msg = json.loads(body)
        out.setdefault(msg["i"], []).append(at * 1000 - msg["due"])
    return out


def check_arrivals(got, due, late_ms):
    late = lateness(got, due)
    missing = sorted(set(due) - set(late))
    assert not missing, "lost: %s" % missing
    twice = {i: v for i, v in late.items() if len(v) > 1}
    assert not twice, "delivered more than once: %s" % twice
    early = {i: v[0] for i, v in late.items() if v[0] < -1}
    assert not early, "early (ms): %s" % early
    slow = {i: v[0] for i, v in late.items()
            if v[0] > late_ms * LATE_SCALE}
    assert not slow, "later than %d ms: %s" % (late_ms, slow)
    return sorted(v[0] for v in late.values())


def holding_depth(broker, prefix):
    """Messages in the holding queues, held until a time ones included
    (RabbitMQ updates `messages` of a quorum queue every few seconds)."""
    return sum(n[0] for name, n in broker.queue_counts().items()
               if name.startswith(prefix + ".hold"))


def given_back(d, n):
    """Wait until d gave n deliveries back to its holding queue."""
    wait_for(lambda: total(d.metrics(), "cascade_native_returns_total")
             >= n, 10, "%d given back to the holding queue" % n)


def test_native_waits_in_the_holding_queue_one_step_each(broker, needs_43,
                                                         tmp_path):
    """mode = native, a 64 s window: 60 messages of 0.3-2.7 s
    each wait in the holding queue, given back once with their due time,
    and none takes the ladder.  All arrive once, none early, none later
    than 250 ms, and the holding queue is left empty."""
    d = Daemon(broker, str(tmp_path),
               dict(METRICS, topology={"mode": "native",
                                       "native_window": "64s"})).start()
    try:
        assert "msg=wait_mode mode=native" in d.log()
        client = Client(broker)
        t = Target(d, client)
        delays = [300 + 40 * i for i in range(60)]
        due = publish_due(client, t, delays)
        got = client.collect(t.queue, len(due), 30)
        check_arrivals(got, due, 250)
        m = d.metrics()
        assert total(m, "cascade_waits_total") == len(due)
        assert total(m, "cascade_native_returns_total") >= len(due)
        assert total(m, "cascade_hops_total") == 0, "no ladder hop"
        assert m["cascade_wait_mode{mode=\"native\"}"] == 1
        assert holding_depth(broker, d.prefix) == 0
    finally:
        d.stop()


def test_native_a_long_delay_rides_the_ladder_then_waits(broker, needs_43,
                                                         tmp_path):
    """A 1 s window in front of a 100 ms ladder: 4 s delays hop down the
    ladder first, then wait their last second in the holding queue."""
    d = Daemon(broker, str(tmp_path),
               dict(METRICS, topology={"mode": "native",
                                       "native_window": "1s"})).start()
    try:
        client = Client(broker)
        t = Target(d, client)
        due = publish_due(client, t, [4000 + 10 * i for i in range(10)])
        got = client.collect(t.queue, len(due), 30)
        check_arrivals(got, due, 250)
        m = d.metrics()
        assert total(m, "cascade_hops_total") >= len(due)
        assert total(m, "cascade_waits_total") == len(due)
    finally:
        d.stop()


def delivers(broker, d):
    """Two messages through d, on time."""
    client = Client(broker)
    t = Target(d, client)
    due = publish_due(client, t, [500, 900])
    check_arrivals(client.collect(t.queue, 2, 20), due, 500)


def ready_in(d, mode):
    """A ready line of d's in that mode."""
    return re.search(r"msg=ready .* mode=%s\n" % mode, d.log())


def test_auto_chooses_by_what_the_broker_proves(broker, tmp_path):
    """mode = auto: ready at once on the ladder; on RabbitMQ 4.3 the
    canary, in the background, comes back on time and the daemon goes
    native (connected afresh); before 4.3 it stays on the ladder, asking
    no canary.  The log and the metrics say which."""
    d = Daemon(broker, str(tmp_path),
               dict(METRICS, topology={"mode": "auto"})).start()
    try:
        native = native_broker(broker)
        want = "native" if native else "ladder"
        d.wait_log("msg=wait_mode mode=%s" % want)
        wait_for(lambda: ready_in(d, want), 30, "ready in " + want)
        m = d.metrics()
        assert m["cascade_wait_mode{mode=\"%s\"}" % want] == 1
        assert m["cascade_canary_total{answer=\"native\"}"] == native
        assert total(m, "cascade_reconnects_total") == 0, \
            "a change of mode is not a lost connection"
        # The canary's queue is gone.
        assert not [name for name in broker.queue_counts()
                    if ".canary." in name]
        delivers(broker, d)
    finally:
        d.stop()


def watch_http(port, until, timeout):
    """GET /healthz and /metrics every 0.2 s until until() or timeout:
    how long the slowest answer took (each must answer)."""
    slowest, deadline = 0.0, time.time() + timeout
    while not until():
        assert time.time() < deadline, "timed out after %ss" % timeout
        for path in ("/healthz", "/metrics"):
            t0 = time.time()
            try:
                status, _ = http_get("http://127.0.0.1:%d%s" % (port, path))
            except OSError:
                status = None  # not listening yet: before the loop runs
            slowest = max(slowest, time.time() - t0)
            assert status in (None, 200, 503), (path, status)
        time.sleep(0.2)
    return slowest


def test_auto_with_one_connection_allowed_waits_on_the_ladder(broker, needs_43,
                                                            tmp_path):
    """A hosted plan's limit: the daemon's user may open one connection,
    so neither the canary nor native waiting's AMQP 1.0 link can open.  The
    daemon is ready on the ladder within 15 s and delivers; /healthz and
    /metrics answer throughout; the warning says why and what to change."""
    user = "one-conn-" + uuid.uuid4().hex[:8]
    broker.add_user(user, "secret", ".*", ".*", ".*")
    broker.ctl("set_user_limits", user, '{"max-connections": 1}')
    port = free_port()
    url = broker.url.replace("guest:guest@", "%s:secret@" % user)
    d = Daemon(broker, str(tmp_path),
               {"broker": {"url": url}, "topology": {"mode": "auto"},
                "metrics": {"listen": "127.0.0.1:%d" % port}})
    t0 = time.time()
    d.spawn()
    slowest = watch_http(port, lambda: "the canary could not tell" in
                         d.log() and ready_in(d, "ladder"), 15)
    print("ready on the ladder after %.1f s; slowest answer %.2f s" % (
        time.time() - t0, slowest))
    try:
        assert slowest < 2, "the loop was held up %.2f s" % slowest
        assert "max-connections" in d.log()
        m = d.metrics()
        assert m["cascade_wait_mode{mode=\"ladder\"}"] == 1
        assert m["cascade_canary_total{answer=\"unknown\"}"] == 1
        delivers(broker, d)
    finally:
        d.stop()
        broker.delete_user(user)


def test_a_stale_canary_queue_does_not_decide(broker, needs_43, tmp_path):
    """A container restarted keeps its host name and PID 1: the queue a
    killed instance's canary left (P.canary.HOST.1, x-expires 60 s, its
    message still in it) is not the new canary's, which still finds
    that the broker holds a message until its time."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to run the daemon as PID 1")
    d = Daemon(broker, str(tmp_path),
               dict(METRICS, topology={"mode": "auto"}))
    stale = "%s.canary.%s.1" % (d.prefix, socket.gethostname()[:40])
    conn = broker.connect()
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare(stale, durable=True, arguments={
        "x-queue-type": "quorum", "x-expires": 60000})
    ch.basic_publish("", stale, b"cascade canary")
    conn.close()
    d.logfile = open(d.logpath, "ab")
    d.proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--kill-child", CASCADE, "-c",
         d.config], stdout=d.logfile, stderr=subprocess.STDOUT)
    try:
        d.wait_log("msg=wait_mode mode=", 30, count=2)
        assert "msg=wait_mode mode=native" in d.log(), d.log()
        wait_for(lambda: ready_in(d, "native"), 30, "ready in native")
    finally:
        # unshare passes no SIGTERM on; killed, it kills the daemon
        # (--kill-child).
        d.proc.kill()
        d.proc.wait(30)
        d.logfile.close()
        conn = broker.connect()
        conn.channel().queue_delete(stale)
        conn.close()


def test_native_on_an_older_broker_refuses_to_start(broker, tmp_path):
    if native_broker(broker):
        pytest.skip("this broker can wait natively")
    d = Daemon(broker, str(tmp_path), {"topology": {"mode": "native"}})
    d.spawn()
    rc = d.proc.wait(30)
    d.logfile.close()
    assert rc == 1
    assert "native needs RabbitMQ 4.3 or later" in d.log()


def test_native_kill_9_with_messages_held_by_the_queue(broker, needs_43,
                                                      tmp_path):
    """kill -9 while 40 messages wait in the holding queue, given back
    with their due times: the queue keeps them, a new daemon delivers each
    once, none early."""
    d = fast_daemon(broker, tmp_path, topology={"mode": "native"},
                    **METRICS)
    d.start()
    client = Client(broker)
    t = Target(d, client)
    due = publish_due(client, t, [2500 + 20 * i for i in range(40)])
    given_back(d, 40)
    d.kill()
    d.start()
    got = client.collect(t.queue, len(due), 30)
    check_arrivals(got, due, 2000)
    d.stop()


def test_native_sigterm_while_delivering_duplicates_nothing(broker, needs_43,
                                                          tmp_path):
    """SIGTERM while messages come due: what was delivered is accepted
    before the daemon exits, what was not goes back unharmed, and after a
    restart each message has arrived exactly once."""
    d = fast_daemon(broker, tmp_path, topology={"mode": "native"})
    d.start()
    client = Client(broker)
    t = Target(d, client)
    due = publish_due(client, t, [1000 + 10 * i for i in range(150)])
    got = client.collect(t.queue, 40, 10)
    assert d.stop() == 0
    d.start()
    got += client.collect(t.queue, len(due) - len(got), 20)
    time.sleep(1)  # a duplicate would come now
    got += client.drain(t.queue)
    check_arrivals(got, due, 5000)
    d.stop()


FILLER_MARKERS = 30000


@pytest.mark.slow
def test_native_a_cancel_recorded_while_down_holds_at_start(broker, needs_43,
                                                           tmp_path):
    """Two messages wait in the holding queue; the daemon stops, one is
    cancelled, and both come due before it starts again.  The holding
    queue hands them over the moment the daemon connects: the cancelled
    one must still be dropped, for nothing is routed before P.cancels is
    read (the ladder's return queues are consumed only then, too)."""
    d = fast_daemon(broker, tmp_path, topology={"mode": "native"},
                    **METRICS)
    d.start()
    client = Client(broker)
    q = client.queue()
    keep, gone = "keep-%d" % time.time_ns(), "gone-%d" % time.time_ns()
    for mid in (keep, gone):
        client.publish(d.prefix, q, mid.encode(),
                       {"x-remaining-delay": "2s"}, message_id=mid)
    sent = time.time()
    given_back(d, 2)
    assert d.stop() == 0
    # Other readers' markers before the request: reading up to it takes
    # a while, and the holding queue hands over at once.
    ch = client.conn.channel()
    for i in range(FILLER_MARKERS):
        ch.basic_publish("", d.prefix + ".cancels", b"", pika.BasicProperties(
            type="marker", headers={"x-cascade-at": int(time.time() * 1000),
                                    "x-cascade-marker": "elsewhere-%d" % i}))
    ch.close()
    r = ctl(d, "cancel", gone)
    assert gone in r.stdout, (r.stdout, r.stderr)
    time.sleep(max(0, sent + 2.5 - time.time()))
    d.start()
    got = client.collect(q, 1, 20)
    time.sleep(1)  # the cancelled one would come now
    got += client.drain(q)
    assert [p.message_id for _, p, _ in got] == [keep]
    wait_for(lambda: total(d.metrics(), "cascade_cancelled_total") == 1,
             10, "the cancelled message dropped")
    d.stop()


def test_migrating_native_to_ladder_and_back_loses_nothing(broker, needs_43,
                                                          tmp_path):
    """Messages waiting in the holding queue when native daemons give way
    to ladder ones are drained over 0-9-1 and delivered on time; those on
    the ladder when native daemons come back arrive as well."""
    first = fast_daemon(broker, tmp_path, topology={"mode": "native"},
                        **METRICS)
    first.start()
    client = Client(broker)
    t = Target(first, client)
    due = publish_due(client, t, [3000 + 20 * i for i in range(20)])
    given_back(first, 20)
    first.stop()
    ladder = fast_daemon(broker, tmp_path, prefix=first.prefix,
                         topology={"mode": "ladder"})
    ladder.start()
    assert "msg=hold_drain" in ladder.log()
    got = client.collect(t.queue, len(due), 30)
    check_arrivals(got, due, 500)
    # And back: 20 on the ladder, then a native daemon takes over.
    due = publish_due(client, t, [4000 + 20 * i for i in range(20)])
    time.sleep(1)
    ladder.stop()
    native = fast_daemon(broker, tmp_path, prefix=first.prefix,
                         topology={"mode": "native"})
    native.start()
    got = client.collect(t.queue, len(due), 30)
    check_arrivals(got, due, 500)
    native.stop()


def test_a_stranger_in_the_holding_queue_is_parked(broker, needs_43,
                                                   tmp_path):
    """Something published into the holding queue by hand is not an
    envelope: parked in P.error with the reason, nothing else happens."""
    d = Daemon(broker, str(tmp_path), {"topology": {"mode": "native"}})
    d.start()
    try:
        client = Client(broker)
        client.publish("", d.prefix + ".hold", b"hello")
        got = client.collect(d.prefix + ".error", 1, 10)
        assert len(got) == 1
        # Not the daemon's: it carries no user-id (docs/CONTRACT.md 3.5).
        assert "not published by a daemon" in \
            got[0][1].headers["x-cascade-error"]
        assert got[0][2] == b"hello"
    finally:
        d.stop()


# The last commit before native waiting: the release a cluster upgrades
# from, whose daemons know nothing of holding queues or batched records.
PREVIOUS_RELEASE = "cbba36a"


_previous = {}


@pytest.fixture
def previous_cascade(needs_43, tmp_path_factory):
    """build/cascade of PREVIOUS_RELEASE, built once from this
    repository's history (skipped in a checkout without it)."""
    import os
    import subprocess
    if "path" in _previous:
        return _previous["path"]
    repo = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    src = tmp_path_factory.mktemp("previous")
    try:
        archive = subprocess.run(["git", "-C", repo, "archive",
                                  PREVIOUS_RELEASE], capture_output=True)
    except FileNotFoundError:
        pytest.skip("no git here (tools/install-deps installs it)")
    if archive.returncode != 0:
        pytest.skip("no %s in this checkout: %s" %
                    (PREVIOUS_RELEASE, archive.stderr.decode()))
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout,
                   check=True)
    # Not the make running this test's settings (BUILD, WERROR).
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "BUILD")}
    built = subprocess.run(["make", "-s", "-C", str(src), "-j2",
                            "BUILD=build", "build/cascade"],
                           capture_output=True, text=True, timeout=600,
                           env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    _previous["path"] = str(src / "build" / "cascade")
    return _previous["path"]


@pytest.mark.slow
def test_a_previous_release_beside_native_daemons(broker, previous_cascade,
                                                  tmp_path):
    """A daemon of the previous release (the ladder only) and a native one
    on the same queues, as during a rolling upgrade: 200 messages of
    0.2-6 s, shared out between them, each arrives once, none early."""
    import subprocess
    # As docs/operations.md says for an upgrade: the previous release
    # does not sign its hops, and the new daemon takes them for a while.
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                          time.gmtime(time.time() + 3600))
    new = fast_daemon(broker, tmp_path, topology={"mode": "native"},
                      router={"accept_unsigned_until": until})
    new.start()
    old = Daemon(broker, str(tmp_path), {"broker": {"reconnect_max": "1s"}},
                 prefix=new.prefix)
    old.logfile = open(old.logpath, "ab")
    old.proc = subprocess.Popen([previous_cascade, "-c", old.config],
                                stdout=old.logfile,
                                stderr=subprocess.STDOUT)
    try:
        old.wait_log("msg=ready")
        client = Client(broker)
        t = Target(new, client)
        delays = [200 + (i * 29) % 5800 for i in range(200)]
        due = publish_due(client, t, delays)
        got = client.collect(t.queue, len(due), 40)
        check_arrivals(got, due, 1000)
        old_log = old.log()
        assert "msg=totals" not in old_log
    finally:
        old.stop()
        new.stop()
    # Both did some of the work.
    assert "received=0 " not in old.log(), old.log()


@pytest.mark.slow
def test_a_holding_queue_that_appears_is_consumed_within_a_minute(
        broker, needs_43, tmp_path):
    """A daemon on the ladder started before any holding queue existed; a
    native daemon of the same prefix then makes P.hold, takes messages
    into it, and stops (scaled in): the ladder daemon finds P.hold within
    30 s (it looks every 30 s once ready) and delivers what waits there,
    none early, none lost."""
    (tmp_path / "ladder").mkdir()
    (tmp_path / "native").mkdir()
    ladder = Daemon(broker, str(tmp_path / "ladder"),
                    dict(METRICS, topology={"mode": "ladder"})).start()
    native = Daemon(broker, str(tmp_path / "native"),
                    dict(METRICS, topology={"mode": "native",
                                            "native_window": "10m"}),
                    prefix=ladder.prefix).start()
    try:
        client = Client(broker)
        t = Target(ladder, client)
        due = publish_due(client, t, [25000 + 10 * i for i in range(20)])
        wait_for(lambda: total(native.metrics(), "cascade_waits_total") > 0,
                 10, "some waiting in the native daemon's P.hold")
        assert native.stop() == 0
        got = client.collect(t.queue, len(due), 25 + 30 + 15 * LATE_SCALE)
        check_arrivals(got, due, (30 + 5) * 1000)
        assert "msg=hold_drain queues=1 queue=%s.hold" % ladder.prefix in \
            ladder.log(), ladder.log()
    finally:
        ladder.stop()
        native.stop()
