# SPDX-License-Identifier: Apache-2.0
"""The fault suite: every message arrives, none early, through crashes,
broker restarts, cut connections, full queues, two daemons and a node of a
three-node cluster going away.  Each test publishes a few hundred messages
with delays over several ladder levels, injects its fault while they are in
flight, and counts what arrives."""
import os
import re
import socket
import threading
import time
import uuid

import pika
import pytest

from faults import (Collector, check, fast_daemon, idle, own_broker,
                    publish_batch, report, restart_broker, start_cluster,
                    stop_broker, stop_cluster)
from helpers import LATE_SCALE, METRICS, Broker, ctl, http_get, wait_for


@pytest.fixture(scope="module")
def fault_broker():
    """A broker of this module's own: these tests stop and start it."""
    yield from own_broker()


def in_flight(col, sent, share=0.1, timeout=30):
    """Wait until a share of the batch has arrived, so that the fault that
    follows hits the daemon with the rest in flight: on the way in, in
    delay queues, held in memory."""
    want = max(1, int(len(sent) * share))
    wait_for(lambda: len(col.arrived()) >= want, timeout,
             "%d of %d messages to arrive" % (want, len(sent)))
    assert len(col.arrived()) < len(sent), "all arrived before the fault"


def test_kill_9_and_restart(fault_broker, tmp_path):
    d = fast_daemon(fault_broker, tmp_path).start()
    q = "kill-" + d.prefix
    col = Collector(fault_broker.url, q)
    col.start()
    sent = publish_batch(fault_broker.url, d.prefix, q, 300)
    in_flight(col, sent)
    d.kill()
    time.sleep(2.0)  # the fault: down for 2 s
    d.start()
    col.wait_for(set(sent), timeout=30,
                 settled=lambda: idle(fault_broker, d.prefix, q))
    check(report("kill -9, restart after 2 s", sent, col.arrivals),
          fault_broker, d, q, sent, col)
    assert d.stop() == 0


def test_kill_restart_loop(fault_broker, tmp_path):
    d = fast_daemon(fault_broker, tmp_path).start()
    q = "loop-" + d.prefix
    col = Collector(fault_broker.url, q)
    col.start()
    sent = publish_batch(fault_broker.url, d.prefix, q, 300)
    for i in range(5):
        if i == 0:
            in_flight(col, sent)
        else:
            time.sleep(1.0)  # the fault's rhythm: up (and ready) for 1 s
        d.kill()
        time.sleep(0.3)  # down for 0.3 s
        d.start()
    col.wait_for(set(sent), timeout=30,
                 settled=lambda: idle(fault_broker, d.prefix, q))
    check(report("kill -9 / restart, 5 rounds", sent, col.arrivals),
          fault_broker, d, q, sent, col)
    assert d.stop() == 0


def healthz(d):
    return http_get(d.metrics_url() + "/healthz")[0]


def ctl_health(d):
    """cascade-ctl health, the image's HEALTHCHECK, against d: its exit
    status and what it printed."""
    r = ctl(d, "health", "--metrics",
            d.metrics_url().replace("http://", ""), rc=None)
    return r.returncode, r.stdout.strip()


@pytest.mark.slow
def test_broker_stopped_and_started(fault_broker, tmp_path):
    d = fast_daemon(fault_broker, tmp_path, **METRICS).start()
    assert healthz(d) == 200
    assert ctl_health(d) == (0, "ok")
    q = "restart-" + d.prefix
    # Other quorum queues on the node slow its restart down, as on a
    # shared broker (19 of 300 messages were once seen 180 s late with 130).
    extra = int(os.environ.get("CASCADE_FAULT_EXTRA_QUEUES", "0"))
    if extra:
        conn = fault_broker.connect()
        ch = conn.channel()
        for i in range(extra):
            ch.queue_declare("other-%s-%d" % (d.prefix, i), durable=True,
                             arguments={"x-queue-type": "quorum"})
        conn.close()
    col = Collector(fault_broker.url, q)
    col.start()
    sent = publish_batch(fault_broker.url, d.prefix, q, 300)
    in_flight(col, sent)
    stop_broker(fault_broker)
    # /healthz goes down with the broker (a load balancer or an orchestrator
    # would stop counting on this daemon), stays down while the broker is
    # (here 2 s more), and comes back after it.
    d.wait_log("msg=connection_lost", timeout=30)
    down = time.time() + 2.0
    while time.time() < down:
        assert healthz(d) == 503
        time.sleep(0.2)
    assert ctl_health(d) == (
        1, "unhealthy (HTTP 503): not connected to the broker")
    restart_broker(fault_broker)
    d.wait_log("msg=ready", timeout=60, count=2)
    back = time.time()
    assert healthz(d) == 200
    assert ctl_health(d) == (0, "ok")
    col.wait_for(set(sent), timeout=float(
        os.environ.get("CASCADE_FAULT_WAIT", "60")),
        settled=lambda: idle(fault_broker, d.prefix, q))
    last = max(t for t, _ in col.arrivals)
    print("last arrival %.1f s after the daemon was back" % (last - back))
    check(report("broker stopped and started", sent, col.arrivals),
          fault_broker, d, q, sent, col)
    assert "msg=connection_lost" in d.log()
    assert d.proc.poll() is None, "the daemon exited on a broker failure"
    assert d.stop() == 0


class Proxy(threading.Thread):
    """A TCP proxy on loopback that the test can cut and refuse."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.target = port
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.conns = []
        self.listener = None
        self.lock = threading.Lock()
        self.open_listener()

    def open_listener(self):
        ln = socket.socket()
        ln.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ln.bind(("127.0.0.1", self.port))
        ln.listen(16)
        self.listener = ln
        threading.Thread(target=self.accept, args=(ln,), daemon=True).start()

    def accept(self, ln):
        while True:
            try:
                c, _ = ln.accept()
                u = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                return
            with self.lock:
                self.conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self.pipe, args=(a, b),
                                 daemon=True).start()

    def pipe(self, a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.close()
            except OSError:
                pass

    def cut(self, refuse_for):
        """Drop every connection and refuse new ones for a while."""
        try:  # wakes the thread blocked in accept(), frees the port
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass
            self.conns = []
        time.sleep(refuse_for)
        self.open_listener()


def most_in_a_second(name, col, sent, rate):
    """Once all arrived, none early, none lost: the most deliveries in
    any one second."""
    col.wait_for(set(sent), timeout=60 + len(sent) / rate)
    r = report(name, sent, col.arrivals)
    assert r["early"] == 0 and r["lost"] == 0, r
    at = sorted(t for t, _ in col.arrivals)
    most = max(sum(1 for u in at if t <= u < t + 1) for t in at)
    print("at most %d deliveries in a second, paced at %d/s" % (most, rate))
    return most


def pace_bound(rate):
    """A pace, and what a stall of the machine adds: it releases timers
    together (as in test_schedules' pace tests)."""
    return rate + 2 + rate * (LATE_SCALE - 1) / 2


@pytest.mark.slow
def test_a_paced_target_gets_no_burst_after_a_broker_restart(fault_broker,
                                                             tmp_path):
    """A target paced at 10 a second, 60 messages due 2 to 4 s on, and the
    broker down until they are all due: after it, what comes back overdue
    waits in the reorder window and is let out in due order, and each
    takes its turn at the pace again (docs/CONTRACT.md, sections 2 and
    7.10): no second of deliveries above the pace, none lost, none
    early."""
    rate, n = 10, 60
    q = "paced-restart-" + os.urandom(4).hex()
    d = fast_daemon(fault_broker, tmp_path,
                    **{"target /" + q: {"pace": "%d/s" % rate}}).start()
    col = Collector(fault_broker.url, q)
    col.start()
    sent = publish_batch(fault_broker.url, d.prefix, q, n, 2000, 4000)
    last_due = max(t + delay / 1000 for t, delay in sent.values())
    stop_broker(fault_broker)
    if last_due + 1 > time.time():
        time.sleep(last_due + 1 - time.time())
    restart_broker(fault_broker)
    assert most_in_a_second("paced target, broker stopped and started",
                            col, sent, rate) <= pace_bound(rate)
    assert d.stop() == 0


@pytest.mark.slow
def test_a_paced_target_gets_no_burst_after_a_daemon_restart(fault_broker,
                                                             tmp_path):
    """The default 2 s ladder, a target paced at 10 a second, 100 messages
    due at one instant: most wait on the ladder for their slot.  The daemon
    is killed and started again while they do: what comes back late, its
    slot just past, waits in the reorder window, and is let out taking its
    turn at the pace again, not all at once.  For 5 minutes the restarted
    daemon counts its earlier instance beside itself, whose slots the
    deliveries still hold: up to 1.5 times the pace (docs/CONTRACT.md,
    section 7.10).  Before the window let them out through the pace, 29
    went in one second here."""
    rate, n = 10, 100
    q = "paced-kill-" + os.urandom(4).hex()
    d = fast_daemon(fault_broker, tmp_path,
                    topology={"resolution": "2s", "levels": "6"},
                    **{"target /" + q: {"pace": "%d/s" % rate}}).start()
    col = Collector(fault_broker.url, q)
    col.start()
    conn = pika.BlockingConnection(pika.URLParameters(fault_broker.url))
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare(q, durable=True)
    t0 = time.time()
    due_ms = int(t0 * 1000) + 3000
    sent = {}
    for i in range(n):
        mid = "%s-%d" % (q, i)
        sent[mid] = (t0, due_ms - t0 * 1000)
        ch.basic_publish(d.prefix, q, b"m", pika.BasicProperties(
            message_id=mid, delivery_mode=2,
            headers={"x-deliver-at": due_ms}))
    conn.close()
    wait_for(lambda: len(col.arrived()) >= 20, 30, "20 delivered")
    d.kill()
    time.sleep(1)
    d.start()
    assert most_in_a_second("paced target, daemon killed and started",
                            col, sent, rate) <= pace_bound(1.5 * rate)
    assert d.stop() == 0


def test_connection_cut_and_refused(fault_broker, tmp_path):
    port = int(fault_broker.url.rsplit(":", 1)[1].split("/")[0])
    proxy = Proxy(port)
    via = Broker(fault_broker.dir,
                 "amqp://guest:guest@127.0.0.1:%d/%%2f" % proxy.port)
    d = fast_daemon(via, tmp_path).start()
    q = "cut-" + d.prefix
    col = Collector(fault_broker.url, q)
    col.start()
    sent = publish_batch(fault_broker.url, d.prefix, q, 300)
    in_flight(col, sent)
    proxy.cut(refuse_for=3.0)
    d.wait_log("msg=ready", timeout=30, count=2)
    col.wait_for(set(sent), timeout=30,
                 settled=lambda: idle(fault_broker, d.prefix, q))
    check(report("TCP cut, refused for 3 s", sent, col.arrivals),
          fault_broker, d, q, sent, col)
    assert "msg=connect_failed" in d.log()
    assert d.stop() == 0


def test_full_delay_queues_slow_down_but_keep_everything(fault_broker,
                                                         tmp_path):
    d = fast_daemon(fault_broker, tmp_path,
                    topology={"max_length": "20"}).start()
    q = "full-" + d.prefix
    col = Collector(fault_broker.url, q)
    col.start()
    # All for one level: 800 ms (level 3) plus a held tail.
    sent = publish_batch(fault_broker.url, d.prefix, q, 400, 850, 900)
    col.wait_for(set(sent), timeout=60,
                 settled=lambda: idle(fault_broker, d.prefix, q))
    check(report("max_length 20, 400 messages for one level", sent,
                 col.arrivals), fault_broker, d, q, sent, col)
    assert "msg=publish_refused" in d.log()
    assert d.stop() == 0


def test_a_level_that_does_not_answer_holds_back_no_other(fault_broker,
                                                          tmp_path):
    """A delay level whose quorum queue does not answer: its Raft server's
    process suspended, as while RabbitMQ 3.10 replays a level's log after
    a restart.  RabbitMQ's first publish to a quorum queue from a channel
    waits for the queue's leader (65 s) and holds the channel, and with it
    every hop and delivery behind it.  Short delays beside it arrive on
    time, the daemon names the queue, and the message for that level
    waits in the levels below it until it answers."""
    d = fast_daemon(fault_broker, tmp_path, **METRICS).start()
    level = d.prefix + ".delay.12800"  # the top of the test ladder
    stall = "cascade_test_stall_" + d.prefix
    fault_broker.eval(
        "P = whereis('%%2F_%s'), true = is_pid(P), register(%s, spawn(fun()"
        " -> erlang:suspend_process(P), receive stop -> ok end end)), ok"
        % (level, stall))
    try:
        q, far = "short-" + d.prefix, "far-" + d.prefix
        col = Collector(fault_broker.url, q)
        col.start()
        c = fault_broker.connect()
        ch = c.channel()
        ch.confirm_delivery()
        ch.queue_declare(far, durable=True)
        ch.basic_publish(d.prefix, far, b"far", pika.BasicProperties(
            headers={"x-remaining-delay": 60000}))
        c.close()
        sent = publish_batch(fault_broker.url, d.prefix, q, 60, 300, 3000)
        # Not settled by idle(): it would ask the suspended queue too.
        col.wait_for(set(sent), timeout=30)
        check(report("a level that does not answer", sent, col.arrivals),
              fault_broker, d, q, sent, col)
        late = [at - s - delay / 1000.0
                for at, mid in col.arrivals
                for s, delay in [sent[mid]]]
        assert max(late) < 1.0 * LATE_SCALE, sorted(late)[-5:]
        assert "msg=queue_not_answering queue=%s " % level in d.log()
        assert d.metrics()["cascade_queue_not_answering_total"] >= 1
    finally:
        fault_broker.eval("%s ! stop, ok" % stall, check=False)
    # Answering again: the message for it was neither lost nor delivered.
    wait_for(lambda: "msg=queue_answering queue=%s " % level in d.log() or
             'routing_key="%s"' % level in d.log(), 90,
             "the level's probe to be answered")
    assert d.stop() == 0

    def waiting():
        out = fault_broker.ctl("list_queues", "-q", "name", "messages").stdout
        return sum(int(n) for name, n in
                   (line.split() for line in out.splitlines()
                    if line.startswith(d.prefix + ".delay.")))
    # A quorum queue's count is updated at its tick, every few seconds.
    wait_for(lambda: waiting() == 1, 30, "the message for it in a level")


def test_a_users_channel_limit_costs_a_connection_or_two(fault_broker,
                                                          tmp_path):
    """A hosted plan's limit on the channels of the daemon's user
    (`max-channels`): RabbitMQ answers a channel.open past it by closing
    the whole connection (530 NOT_ALLOWED), and a delay level's first
    publish since connecting opens a channel of its own (section 4.3).
    With room for the daemon's four channels and two more, a backlog
    waiting for the daemon when it starts (its first hops into several
    levels at once) costs the connection twice at most: the daemon learns
    the limit, says so, and opens no more than that from then on, so a
    second batch costs none.  Every message arrives, none early; none
    over a second late in the second batch, and in the first none later
    than the reconnect allows."""
    user = "few-channels-" + uuid.uuid4().hex[:8]
    fault_broker.add_user(user, "secret", ".*", ".*", ".*")
    fault_broker.ctl("set_user_limits", user, '{"max-channels": 6}')
    url = fault_broker.url.replace("guest:guest@", "%s:secret@" % user)
    d = fast_daemon(fault_broker, tmp_path, broker={"url": url}).start()
    # Its topology declared; the first batch waits for it in P.ingress.
    assert d.stop() == 0
    losses = []
    try:
        for run in ("first", "second"):
            q = "limited-%s-%s" % (run, d.prefix)
            col = Collector(fault_broker.url, q)
            col.start()
            sent = publish_batch(fault_broker.url, d.prefix, q, 120, 1500,
                                 7000)
            if run == "first":
                d.start()
            col.wait_for(set(sent), timeout=40,
                         settled=lambda: idle(fault_broker, d.prefix, q))
            check(report("a user's channel limit, %s" % run, sent,
                         col.arrivals), fault_broker, d, q, sent, col)
            late = [at - s - delay / 1000.0
                    for at, mid in col.arrivals
                    for s, delay in [sent[mid]]]
            # The first batch: what was in flight when the connection
            # was lost comes again after the reconnect (1 s at most).
            bound = 1.0 if run == "second" else 2.5
            assert max(late) < bound * LATE_SCALE, sorted(late)[-5:]
            losses.append(re.findall(
                r"msg=connection_lost reason=\"([^\"]*)", d.log()))
        first, both = losses
        assert len(first) <= 2, first
        assert both == first, "lost again once the limit was learnt"
        assert all("530 NOT_ALLOWED" in why for why in both), both
        learnt = [int(n) for n in
                  re.findall(r"msg=channels_limited channels=(\d+) ",
                             d.log())]
        assert len(learnt) == len(both), (learnt, both)
        # Room for two of the gate's channels beside the daemon's four,
        # at last: RabbitMQ counts a user's channels a little after they
        # open (4.0.5 let three through once, then refused a fourth).
        assert learnt == sorted(learnt, reverse=True), learnt
        assert not learnt or learnt[-1] <= 2, learnt
        assert d.stop() == 0
    finally:
        fault_broker.delete_user(user)


def test_two_daemons_one_killed(fault_broker, tmp_path):
    a = fast_daemon(fault_broker, tmp_path).start()
    b = fast_daemon(fault_broker, tmp_path, prefix=a.prefix)
    b.logpath = str(tmp_path / "second.log")
    b.start()
    q = "two-" + a.prefix
    col = Collector(fault_broker.url, q)
    col.start()
    sent = publish_batch(fault_broker.url, a.prefix, q, 400)
    in_flight(col, sent)
    b.kill()
    col.wait_for(set(sent), timeout=30,
                 settled=lambda: idle(fault_broker, a.prefix, q))
    check(report("two daemons, one killed", sent, col.arrivals),
          fault_broker, a, q, sent, col)
    assert "msg=parked" not in a.log() + b.log()
    assert a.stop() == 0


@pytest.mark.cluster
def test_three_node_cluster_one_node_stopped(tmp_path):
    tag, nodes = start_cluster()
    try:
        status = nodes[0].ctl("cluster_status").stdout
        assert all("cascade-%s-%s@localhost" % (tag, n) in status
                   for n in "abc")
        # The daemon knows two nodes; the publisher and the consumer use
        # the third.  The node the daemon is connected to is stopped, so it
        # must go on through the other.
        d = fast_daemon(nodes[0], tmp_path, broker={
            "url": "%s, %s" % (nodes[0].url, nodes[2].url)}).start()
        members = nodes[0].ctl("list_queues", "name", "members").stdout
        assert "cascade-%s-c@localhost" % tag in members
        first_url = re.search(r"msg=ready url=(\S+)", d.log()).group(1)
        port = int(re.search(r":(\d+)/", first_url).group(1))
        victim = [b for b in (nodes[0], nodes[2])
                  if ":%d/" % port in b.url][0]
        q = "cluster-" + d.prefix
        col = Collector(nodes[1].url, q)
        col.start()
        sent = publish_batch(nodes[1].url, d.prefix, q, 300)
        in_flight(col, sent)
        stop_broker(victim)
        d.wait_log("msg=ready", timeout=60, count=2)
        second_url = re.findall(r"msg=ready url=(\S+)", d.log())[1]
        assert second_url != first_url, d.log()
        # Quorum queues whose leader was on the stopped node elect a new
        # one, whose dead-letter worker takes over the expired messages,
        # usually at once.  Give recovery time; when RabbitMQ's worker
        # stalls instead, check() says so (stalled_in_broker).
        col.wait_for(set(sent), timeout=120,
                     settled=lambda: idle(nodes[1], d.prefix, q))
        r = report("3-node cluster, the daemon's node stopped", sent,
                   col.arrivals)
        check(r, nodes[1], d, q, sent, col, nodes)
        assert d.stop() == 0
    finally:
        stop_cluster(nodes)
