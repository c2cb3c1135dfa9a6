"""The fault suite: every message arrives, none early, through crashes,
broker restarts, cut connections, full queues, two daemons and a node of a
three-node cluster going away.  Each test publishes a few hundred messages
with delays over several ladder levels, injects its fault while they are in
flight, and counts what arrives."""
import glob
import json
import os
import random
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid

import pika
import pytest

from helpers import (BROKER_SCRIPT, METRICS, Broker, Daemon, http_get,
                     wait_for)

SLACK_MS = 1
# After the last message arrived: how long cascade's queues may take to
# empty, a copy still on its way going through the whole ladder (12.8 s).
SETTLE_S = 30
RESULTS = os.environ.get("CASCADE_FAULT_LOG")


def start_broker(name=None, cookie=None):
    directory = tempfile.mkdtemp(prefix="cascade-fault-")
    env = dict(os.environ)
    if cookie:
        env["RABBITMQ_PRIVATE_COOKIE"] = cookie
    args = [BROKER_SCRIPT, "start", directory] + ([name] if name else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True,
                         timeout=150, env=env)
    return Broker(directory, out.stdout.strip())


def stop_broker(b):
    subprocess.run([BROKER_SCRIPT, "stop", b.dir], capture_output=True,
                   timeout=120)


def restart_broker(b):
    subprocess.run([BROKER_SCRIPT, "restart", b.dir], check=True,
                   capture_output=True, timeout=150)


@pytest.fixture(scope="module")
def fault_broker():
    """A broker of this module's own: these tests stop and start it."""
    b = start_broker()
    yield b
    stop_broker(b)
    shutil.rmtree(b.dir, ignore_errors=True)


def publish_batch(url, prefix, queue, n, lo_ms=200, hi_ms=6000):
    """n messages with delays spread over the ladder; {id: (sent, delay)}."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare(queue, durable=True)
    rnd = random.Random(n)
    sent = {}
    for i in range(n):
        delay = rnd.randint(lo_ms, hi_ms)
        mid = "%s-%d" % (queue, i)
        sent[mid] = (time.time(), delay)
        ch.basic_publish(prefix, queue, b"m",
                         pika.BasicProperties(message_id=mid,
                                              delivery_mode=2,
                                              headers={"x-remaining-delay":
                                                       delay}))
    conn.close()
    return sent


class Collector(threading.Thread):
    """Consumes the target queue in the background, reconnecting through
    broker restarts, and records every arrival (duplicates included)."""

    def __init__(self, url, queue):
        super().__init__(daemon=True)
        self.url, self.queue = url, queue
        self.arrivals = []
        self.stopping = False

    def run(self):
        while not self.stopping:
            try:
                conn = pika.BlockingConnection(pika.URLParameters(self.url))
                ch = conn.channel()
                ch.queue_declare(self.queue, durable=True)

                def on_message(c, m, p, b):
                    self.arrivals.append((time.time(), p.message_id))
                    c.basic_ack(m.delivery_tag)

                ch.basic_consume(self.queue, on_message)
                while not self.stopping:
                    conn.process_data_events(time_limit=0.05)
                conn.close()
            except Exception:
                time.sleep(0.3)

    def arrived(self):
        return {mid for _, mid in self.arrivals}

    def wait_for(self, ids, timeout, settled=None):
        """Consume until every id in ids has arrived or timeout seconds
        passed.  Then, when they all arrived and settled is given, until
        settled() says no copy can still be on its way (see idle()), so
        that the report counts late duplicates too; at most SETTLE_S."""
        deadline = time.time() + timeout
        while time.time() < deadline and not ids <= self.arrived():
            time.sleep(0.1)
        if settled is not None and ids <= self.arrived():
            deadline = time.time() + SETTLE_S
            while not settled():
                if time.time() > deadline:
                    print("cascade's queues still hold messages %d s after "
                          "the last arrival: the report may miss "
                          "duplicates" % SETTLE_S)
                    break
                time.sleep(0.2)
        self.stopping = True
        self.join(10)


def in_flight(col, sent, share=0.1, timeout=30):
    """Wait until a share of the batch has arrived, so that the fault that
    follows hits the daemon with the rest in flight: on the way in, in
    delay queues, held in memory."""
    want = max(1, int(len(sent) * share))
    wait_for(lambda: len(col.arrived()) >= want, timeout,
             "%d of %d messages to arrive" % (want, len(sent)))
    assert len(col.arrived()) < len(sent), "all arrived before the fault"


def report(name, sent, arrivals):
    seen = {}
    early = 0
    worst = 0.0
    for t, mid in arrivals:
        seen[mid] = seen.get(mid, 0) + 1
        t0, delay = sent[mid]
        late = (t - t0) * 1000 - delay
        if late < -SLACK_MS:
            early += 1
        worst = max(worst, late)
    r = {"fault": name, "messages": len(sent),
         "lost": len(set(sent) - set(seen)), "early": early,
         "duplicates": sum(c - 1 for c in seen.values()),
         "max_late_ms": round(worst)}
    print(json.dumps(r))
    if RESULTS:
        with open(RESULTS, "a") as f:
            f.write(json.dumps(r) + "\n")
    return r


# Per quorum queue, from this node's own replica: messages ready, checked
# out to a consumer, expired and waiting for the queue's at-least-once
# dead-letter worker (num_discarded), and handed to that worker but not yet
# confirmed by the dead-letter target (num_discard_checked_out).
DLX_OVERVIEW = """
[begin
   {RaName, _} = amqqueue:get_pid(Q),
   O = case catch ra:local_query({RaName, node()},
                                 fun rabbit_fifo:overview/1) of
           {ok, {_, M}, _} -> M;
           _ -> #{}
       end,
   {element(4, amqqueue:get_name(Q)),
    [maps:get(K, O, -1) || K <- [num_ready_messages, num_checked_out,
                                 num_discarded, num_discard_checked_out]]}
 end
 || Q <- rabbit_amqqueue:list(), amqqueue:get_type(Q) =:= rabbit_quorum_queue].
"""


# Every process a quorum queue's state refers to (its consumers, and the
# dead-letter worker it has handed messages to), whether each is alive, and
# the dead-letter workers each node's supervisor runs.
DLX_PIDS = """
{ok, AQ} = rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, <<"%s">>)),
{RaName, _} = amqqueue:get_pid(AQ),
{ok, {_, S}, _} = ra:local_query({RaName, node()}, fun(X) -> X end),
F = fun G(T) when is_pid(T) -> [T];
        G(T) when is_tuple(T) -> G(tuple_to_list(T));
        G([H | T]) -> G(H) ++ G(T);
        G(T) when is_map(T) -> G(maps:to_list(T));
        G(_) -> [] end,
{[{P, node(P), rpc:call(node(P), erlang, is_process_alive, [P])}
  || P <- lists:usort(F(S))],
 [{N, catch rpc:call(N, supervisor, which_children, [rabbit_fifo_dlx_sup])}
  || N <- [node() | nodes()]]}.
"""


def dead_letter_backlog(node, prefix, echo=True):
    """{queue: (ready, checked_out, discarded, discard_checked_out)} for the
    quorum queues named prefix.*, or {} when the node cannot say; -1 for a
    number it cannot say."""
    out = node.ctl("eval", DLX_OVERVIEW, check=False).stdout
    if echo:
        print(out)
    found = {}
    for name, nums in re.findall(r'\{<<"([^"]+)">>,\s*\[([-\d,\s]+)\]\}',
                                 out):
        if name.startswith(prefix + "."):
            found[name] = tuple(int(n) for n in nums.split(","))
    return found


def idle(node, prefix, queue):
    """Whether no copy of a message can still reach queue, as the broker
    sees it: the quorum queues cascade consumes hold nothing (ready, checked
    out to the daemon, or expired and with the dead-letter worker), and
    queue holds nothing its consumer has not acked.  A message the daemon
    holds or publishes is unacked in the queue it came from."""
    feeding = {k: v for k, v in dead_letter_backlog(node, prefix,
                                                    echo=False).items()
               if not k.endswith(".error")}
    if not feeding or any(n != 0 for v in feeding.values() for n in v):
        return False
    # Counts ready and unacked, and is current for a classic queue.
    out = node.ctl("list_queues", "-q", "--no-table-headers", "name",
                   "messages", check=False).stdout
    return [queue, "0"] in [line.split() for line in out.splitlines()]


def check(r, node, d, queue, sent, col, brokers=None):
    """None early, none lost.  A shortfall that the broker's own
    dead-letter backlog accounts for is RabbitMQ's, not cascade's: an
    expected failure that names the queues (see stalled_in_broker)."""
    assert r["early"] == 0, r
    if r["lost"]:
        stalled_in_broker(r, node, d, queue, sent, col, brokers or [node])
    assert r["lost"] == 0, r


def stalled_in_broker(r, node, d, queue, sent, col, brokers):
    """Print where the missing messages are; xfail when every one is held
    by the at-least-once dead-letter worker of one of cascade's quorum
    queues.  Seen on RabbitMQ 3.10.8 after a node of three stopped: the
    messages stay checked out to a live worker that neither forwards nor
    re-sends them (for 6 minutes and more), so cascade has nothing to
    consume.  They are in the broker, not lost."""
    print(node.ctl("list_queues", "name", "type", "messages",
                   "messages_ready", "messages_unacknowledged", "leader",
                   "online").stdout)
    print(d.log()[-6000:])
    for b in brokers:
        for log in glob.glob(os.path.join(b.dir, "log", "*.log")):
            with open(log, errors="replace") as f:
                for line in f:
                    if re.search(r"dlx|dead.letter", line, re.I):
                        print(os.path.basename(log), line.rstrip())
    backlog = dead_letter_backlog(node, d.prefix)
    held = {q: v for q, v in backlog.items() if v[2] + v[3] > 0}
    stranded = sum(v[2] + v[3] for v in held.values())
    linger = float(os.environ.get("CASCADE_STALL_LINGER", "0"))
    if stranded >= r["lost"] and linger > 0:
        # Diagnosis by hand, not CI: do the held messages come out later,
        # e.g. after the worker's 180 s confirm timeout?  And which worker
        # holds them?
        missing = set(sent) - {mid for _, mid in col.arrivals}
        late = Collector(node.url, queue)
        late.start()
        t0 = time.time()
        late.wait_for(missing, timeout=linger)
        got = {mid for _, mid in late.arrivals} & missing
        print("linger: %d of %d missing arrived within %.0f s" % (
            len(got), len(missing), time.time() - t0))
        dead_letter_backlog(node, d.prefix)
        for name in held:
            print(name, node.ctl("eval", DLX_PIDS % name,
                                 check=False).stdout)
    if stranded >= r["lost"]:
        pytest.xfail("RabbitMQ left %d expired messages with its "
                     "dead-letter worker (%d missing): %s"
                     % (stranded, r["lost"], held))


_daemons = []


@pytest.fixture(autouse=True)
def _no_daemon_outlives_its_test():
    """A failed assertion must not leave a daemon retrying forever."""
    yield
    while _daemons:
        _daemons.pop().kill()


def fast_daemon(node, tmp_path, prefix=None, **sections):
    s = {"broker": {"reconnect_max": "1s"}}
    for k, v in sections.items():
        s.setdefault(k, {}).update(v)
    d = Daemon(node, str(tmp_path), s, prefix)
    _daemons.append(d)
    return d


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


@pytest.mark.slow
def test_broker_stopped_and_started(fault_broker, tmp_path):
    d = fast_daemon(fault_broker, tmp_path, **METRICS).start()
    assert healthz(d) == 200
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
    restart_broker(fault_broker)
    d.wait_log("msg=ready", timeout=60, count=2)
    back = time.time()
    assert healthz(d) == 200
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


def start_cluster():
    """Three private nodes, a, b and c, joined into one cluster: (tag,
    nodes); their names are cascade-TAG-a@localhost and so on."""
    cookie = uuid.uuid4().hex.upper()[:20]
    tag = uuid.uuid4().hex[:6]
    nodes = [start_broker("cascade-%s-%s" % (tag, n), cookie)
             for n in "abc"]
    first = "cascade-%s-a@localhost" % tag
    for b in nodes[1:]:
        b.ctl("stop_app")
        b.ctl("join_cluster", first)
        b.ctl("start_app")
    return tag, nodes


def stop_cluster(nodes):
    for b in nodes:
        stop_broker(b)
        shutil.rmtree(b.dir, ignore_errors=True)


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
