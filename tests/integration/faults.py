# SPDX-License-Identifier: Apache-2.0
"""The fault suite's harness (test_faults.py, test_shards.py's cluster
test, and the tests that kill or restart a daemon or a node of their own):
brokers of a test's own and clusters of them, daemons that reconnect fast,
batches of messages consumed in the background, and the report of what
arrived.  As helpers.py, shared by the test files, which import from here,
never from one another."""
import glob
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid

import pika
import pytest

from helpers import BROKER_SCRIPT, Broker, Daemon


SLACK_MS = 1  # report(): due times are whole ms, so 1 ms early is on time
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


def stop_broker_as_a_service(b):
    """Stop the node as Debian's rabbitmq-server.service does (ExecStop=
    rabbitmqctl stop: rabbit:stop_and_halt), and wait for its VM to exit.
    stop_broker sends SIGTERM (init:stop) and spares a CLI VM."""
    subprocess.run([BROKER_SCRIPT, "service-stop", b.dir],
                   capture_output=True, timeout=150)


def own_broker():
    """The body of a module's fixture for a broker of its own, which its
    tests stop and start: started, given, then stopped and removed."""
    b = start_broker()
    yield b
    stop_broker(b)
    shutil.rmtree(b.dir, ignore_errors=True)


def restart_broker(b):
    subprocess.run([BROKER_SCRIPT, "restart", b.dir], check=True,
                   capture_output=True, timeout=150)


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
                # Two erl_calls, each a round trip to the node; the
                # queues' counts change at their ticks, every few seconds.
                time.sleep(0.5)
        self.stopping = True
        self.join(10)


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
    out = node.eval(DLX_OVERVIEW, check=False) or ""
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
    return node.queue_counts().get(queue, (None,))[0] == 0


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
            print(name, node.eval(DLX_PIDS % name, check=False))
    if stranded >= r["lost"]:
        pytest.xfail("RabbitMQ left %d expired messages with its "
                     "dead-letter worker (%d missing): %s"
                     % (stranded, r["lost"], held))


_daemons = []


def fast_daemon(node, tmp_path, prefix=None, **sections):
    """A Daemon on node that reconnects within 1 s, not started; killed
    after the test by conftest's kill_fast_daemons fixture, so that a
    failed assertion does not leave it retrying forever."""
    s = {"broker": {"reconnect_max": "1s"}}
    for k, v in sections.items():
        s.setdefault(k, {}).update(v)
    d = Daemon(node, str(tmp_path), s, prefix)
    _daemons.append(d)
    return d


def kill_fast_daemons():
    """Kill every daemon fast_daemon made that still runs."""
    while _daemons:
        _daemons.pop().kill()


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
