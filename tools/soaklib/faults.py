# SPDX-License-Identifier: Apache-2.0
"""The faults: the seeded schedule, and Faults, the part of Soak that
injects each one and undoes it."""
import json
import os
import random
import subprocess
import threading
import time

import pika
from helpers import CTL

from .cluster import Partition
from .settings import CANCEL_AHEAD, DURATION, FAULT_EVERY, log
from .traffic import connect


# The alert each fault should raise when it lasts long enough, and how
# long that is: the rule's `for`, one scrape and evaluation, and margin.
EXPECT = {
    "kill9": ("CascadeDown", 60 + 20),
    "broker_restart": ("CascadeNotConsuming", 120 + 20),
    "target_full": ("CascadeTargetRefusing", 300 + 20),
    "poison": ("CascadeMessagesParked", 0),
}
WEIGHTS = [("kill9", 3), ("sigterm", 3), ("node_stop", 2),
           ("broker_restart", 1), ("partition", 2), ("target_full", 1),
           ("poison", 2), ("cancel", 3)]


def resource(f):
    """What a fault occupies: faults of one resource do not overlap."""
    if "daemon" in f:
        return "daemon%d" % f["daemon"]
    if f["kind"] in ("node_stop", "partition", "broker_restart"):
        return "nodes"
    if f["kind"] == "target_full":
        return "target"
    return f["kind"]


def schedule(rnd, ndaemons):
    """The faults: [{t, kind, duration, daemon or node}], from rnd only.
    Node faults (stop, restart, partition) do not overlap; nor do two
    faults of one daemon, nor two fills."""
    faults = []
    # A quiet start and end: a sixth of a short run, 20 and 30 s of a long
    # one; in a short run no fault outlasts a quarter of it.
    t = min(20.0, DURATION / 6)
    last = DURATION - min(30.0, DURATION / 6)
    cap = DURATION / 4 if DURATION < 600 else DURATION
    busy = {}  # resource -> when it is free again
    kinds = [k for k, w in WEIGHTS for _ in range(w)]
    while True:
        t += rnd.expovariate(1.0 / FAULT_EVERY)
        if t > last:
            return faults
        kind = rnd.choice(kinds)
        f = {"kind": kind, "duration": 0}
        if kind in ("kill9", "sigterm"):
            f["daemon"] = rnd.randrange(ndaemons)
            f["duration"] = round(rnd.uniform(5, 100) if kind == "kill9"
                                  else rnd.uniform(1, 10), 1)
            res = "daemon%d" % f["daemon"]
        elif kind in ("node_stop", "partition"):
            f["node"] = rnd.randrange(3)
            f["duration"] = round(rnd.uniform(10, 60) if kind == "node_stop"
                                  else rnd.uniform(20, 90), 1)
            res = "nodes"
        elif kind == "broker_restart":
            f["duration"] = round(rnd.uniform(5, 160), 1)
            res = "nodes"
        elif kind == "target_full":
            f["duration"] = round(rnd.uniform(60, min(400, DURATION / 2)),
                                  1)
            res = "target"
        else:
            f["count"] = rnd.randint(5, 30)
            res = kind
        f["duration"] = min(f["duration"], round(cap, 1))
        start = max(t, busy.get(res, 0))
        if start > last:
            continue
        f["t"] = round(start, 1)
        busy[res] = start + f["duration"] + 5
        if kind == "broker_restart":
            # every node: nothing else on the nodes, nor the daemons'
            # own faults, needs to wait for it
            busy["nodes"] = busy[res]
        faults.append(f)


def plan_faults(rnd, ndaemons):
    return sorted(schedule(rnd, ndaemons), key=lambda f: f["t"])


class Faults:
    """Soak's faults: run_fault() runs one of the plan, faults() each at
    its time."""

    def run_fault(self, f):
        # The plan keeps faults of one resource apart; a stop or start
        # that takes longer than planned must not make them overlap (two
        # nodes down would pause the third).
        with self.locks[resource(f)]:
            if self.stopping.is_set():
                return
            rec = dict(f, start=time.time(), ok=True)
            self.faultlog.append(rec)
            kind = f["kind"]
            log("fault %s %s", kind, json.dumps(
                {k: v for k, v in f.items() if k not in ("kind", "t")}))
            try:
                getattr(self, "fault_" + kind)(rec)
            except Exception as e:
                rec["ok"] = False
                rec["error"] = repr(e)
                log("fault %s failed: %r", kind, e)
            rec["end"] = time.time()

    def hold(self, f):
        """The fault's duration, or less when the soak is stopped."""
        self.stopping.wait(f["duration"])

    def fault_kill9(self, f):
        s = self.daemons[f["daemon"]]
        s.kill()
        try:
            self.hold(f)
        finally:
            s.start()

    def fault_sigterm(self, f):
        s = self.daemons[f["daemon"]]
        try:
            rc = s.term()
            if rc not in (0, None):
                raise RuntimeError("SIGTERM: exit status %s" % rc)
            self.hold(f)
        finally:
            s.start()

    def fault_node_stop(self, f):
        b = self.cluster.nodes[f["node"]]
        self.cluster.stop_node(b)
        try:
            self.hold(f)
        finally:
            self.cluster.start_node(b)

    def fault_broker_restart(self, f):
        for b in self.cluster.nodes:
            self.cluster.stop_node(b)
        self.hold(f)
        # together: each waits for the others to load its metadata
        failed = []

        def start(b):
            try:
                self.cluster.start_node(b)
            except Exception as e:
                failed.append("node %d: %s" % (b.index, e))
        ts = [threading.Thread(target=start, args=(b,))
              for b in self.cluster.nodes]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if failed:
            raise RuntimeError("; ".join(failed))

    def fault_partition(self, f):
        b = self.cluster.nodes[f["node"]]
        # rabbitmqctl (the root group) cannot reach it meanwhile
        self.cluster.down.add(b.index)
        try:
            with Partition(self.cluster, b):
                self.hold(f)
        finally:
            self.cluster.down.discard(b.index)

    def fault_target_full(self, f):
        """Stop consuming soak.full and fill it to its max-length: the
        broker refuses (reject-publish) what cascade delivers to it."""
        chk = self.checkers["soak.full"]
        chk.pause()
        try:
            conn, _ = connect(self.cluster.urls())
            ch = conn.channel()
            ch.confirm_delivery()
            for _ in range(10 * self.full_max):
                self.fill_seq += 1
                try:
                    ch.basic_publish("", "soak.full", b"filler",
                                     pika.BasicProperties(
                                         message_id="filler-%d" %
                                         self.fill_seq),
                                     mandatory=True)
                except pika.exceptions.NackError:
                    break
            depth = ch.queue_declare("soak.full", passive=True)
            f["depth"] = depth.method.message_count
            conn.close()
            if f["depth"] < self.full_max:
                raise RuntimeError("soak.full holds %d of %d after the "
                                   "fill" % (f["depth"], self.full_max))
            self.hold(f)
        finally:
            chk.resume()

    def burst(self, items):
        """Publish each (id, props, body) to P with confirms, through
        whichever node answers, retrying through a node or broker fault
        for up to five minutes (a whole-broker restart took 117 s on a
        loaded 2-core machine, and a burst 10 s after it gave up at two
        minutes); then each confirmed id."""
        done = []
        deadline = time.time() + 300
        node = 0
        while len(done) < len(items):
            try:
                conn, node = connect(self.cluster.urls(), node)
                ch = conn.channel()
                ch.confirm_delivery()
                for mid, props, body in items[len(done):]:
                    ch.basic_publish(self.prefix, "soak.q", body, props)
                    done.append(mid)
                conn.close()
            except Exception:
                if time.time() > deadline or self.stopping.is_set():
                    raise
                node += 1
                time.sleep(1)
        return done

    def fault_poison(self, f):
        items = []
        for _ in range(f["count"]):
            self.poison_seq += 1
            mid = "poison-%d" % self.poison_seq
            items.append((mid, pika.BasicProperties(
                message_id=mid, headers={"x-remaining-delay": "soon"}),
                b"poison"))
        for mid in self.burst(items):
            self.ledger.poison.add(mid)

    def fault_cancel(self, f):
        """Cancel up to count messages due CANCEL_AHEAD s or more from
        now: most by a header request, two with cascade-ctl."""
        now_ms = time.time() * 1000
        with self.ledger.lock:
            pick = [mid for mid, r in self.ledger.msgs.items()
                    if r["confirmed"] and r["target"] == "soak.q" and
                    r["due"] > now_ms + CANCEL_AHEAD * 1000 and
                    mid not in self.ledger.cancelled and
                    mid not in self.ledger.ctl_asked]
        pick = random.Random(f["t"]).sample(pick, min(len(pick),
                                                      f["count"]))
        by_ctl, by_header = pick[:2], pick[2:]
        for mid in self.burst([(mid, pika.BasicProperties(
                headers={"x-cascade-cancel": mid}), b"")
                for mid in by_header]):
            self.ledger.cancelled[mid] = time.time()
        if by_ctl:
            env = dict(os.environ)
            env.pop("CASCADE_BROKER_URL", None)
            r = subprocess.run([CTL, "-c", self.daemons[0].d.config,
                                "cancel", *by_ctl], capture_output=True,
                               text=True, timeout=120, env=env)
            # 1: no waiting message had one of the ids yet (still in
            # P.ingress while no daemon ran), 2: the broker went away
            # (another fault): not recorded, as the contract says.
            # P.cancels tells which were (report()).
            self.ledger.ctl_asked.update(by_ctl)
            f["ctl"] = "%d %s" % (r.returncode,
                                  r.stderr.strip().splitlines()[-1]
                                  if r.stderr.strip() else "")
        f["cancelled"] = len(by_header)

    def faults(self, plan):
        for f in plan:
            wait = self.t0 + f["t"] - time.time()
            if self.stopping.wait(max(0, wait)):
                return
            t = threading.Thread(target=self.run_fault, args=(f,),
                                 daemon=True)
            t.start()
            self.threads.append(t)
