# SPDX-License-Identifier: Apache-2.0
"""The soak: the cluster, the daemons, the traffic and the faults set up,
run for SOAK_MINUTES, drained and stopped."""
import json
import os
import random
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid

from faults import dead_letter_backlog
from helpers import free_port

from . import settings
from .cluster import Cluster, Partition
from .daemons import Soaked
from .faults import Faults, plan_faults
from .report import Report
from .settings import DURATION, MAX_DELAY, MINUTES, MODE, RATE, RULES, \
    SEED, log
from .traffic import Checker, Ledger, Publisher, connect


class Soak(Faults, Report):
    def __init__(self):
        self.tag = uuid.uuid4().hex[:6]
        self.dir = os.environ.get("SOAK_DIR") or tempfile.mkdtemp(
            prefix="cascade-soak-%d-" % SEED)
        os.makedirs(self.dir, exist_ok=True)
        self.prefix = "soak" + self.tag
        self.ledger = Ledger()
        self.cluster = Cluster(self.tag)
        self.daemons = []
        self.faultlog = []
        self.threads = []
        self.prom = None
        self.t0 = None
        self.targets = ["soak.q", "soak.full"]
        self.full_max = 200
        self.fill_seq = 0
        self.poison_seq = 0
        self.stopping = threading.Event()
        self.locks = {r: threading.Lock() for r in
                      ["daemon0", "daemon1", "nodes", "target", "poison",
                       "cancel"]}

    # the set-up
    def setup(self):
        log("seed %d (SOAK_SEED=%d replays this schedule), %s minutes, "
            "%s msg/s, mode %s, in %s", SEED, SEED, MINUTES, RATE, MODE,
            self.dir)
        Partition.heal()  # a table a killed soak left
        self.cluster.start()
        log("cluster up: %s", ", ".join(b.name for b in self.cluster.nodes))
        for i in range(2):
            s = Soaked(self.cluster, self.dir, self.prefix, i)
            self.daemons.append(s)
            s.start()
            s.d.wait_log("msg=ready", 90)
        conn, _ = connect(self.cluster.urls())
        ch = conn.channel()
        ch.queue_declare("soak.q", durable=True,
                         arguments={"x-queue-type": "quorum"})
        ch.queue_declare("soak.full", durable=True,
                         arguments={"x-queue-type": "quorum",
                                    "x-max-length": self.full_max,
                                    "x-overflow": "reject-publish"})
        conn.close()
        if settings.PROMETHEUS:
            self.start_prometheus()

    def start_prometheus(self):
        self.prom_port = free_port()
        pdir = os.path.join(self.dir, "prometheus")
        os.makedirs(pdir, exist_ok=True)
        cfg = os.path.join(pdir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 5s\n"
                    "  evaluation_interval: 5s\n"
                    "rule_files:\n  - %s\n"
                    "scrape_configs:\n  - job_name: cascade\n"
                    "    scrape_timeout: 4s\n"
                    "    static_configs:\n      - targets: [%s]\n"
                    % (RULES, ", ".join("'%s'" % s.instance
                                        for s in self.daemons)))
        self.prom = subprocess.Popen(
            [settings.PROMETHEUS, "--config.file", cfg,
             "--storage.tsdb.path", os.path.join(pdir, "data"),
             "--web.listen-address", "127.0.0.1:%d" % self.prom_port],
            stdout=open(os.path.join(pdir, "prometheus.log"), "wb"),
            stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if self.prom_query("up")["result"]:
                    log("prometheus on 127.0.0.1:%d", self.prom_port)
                    return
            except Exception:
                pass
            time.sleep(1)
        raise RuntimeError("prometheus did not start: see %s" % pdir)

    def prom_query(self, q, path="query", **params):
        params["query"] = q
        url = "http://127.0.0.1:%d/api/v1/%s?%s" % (
            self.prom_port, path, urllib.parse.urlencode(params))
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read().decode())
        return body["data"]

    # the faults
    def sampler(self):
        while not self.sampling_done:
            for s in self.daemons:
                s.sample_rss()
            time.sleep(10)

    # the run
    def run(self):
        self.setup()
        plan = plan_faults(random.Random(SEED), len(self.daemons))
        with open(os.path.join(self.dir, "schedule.json"), "w") as f:
            json.dump(plan, f, indent=1)
        log("%d faults scheduled: %s", len(plan), ", ".join(
            "%s@%ds" % (f["kind"], f["t"]) for f in plan))
        urls = self.cluster.urls()
        self.checkers = {q: Checker(urls, q) for q in self.targets}
        for c in self.checkers.values():
            c.start()
        pubs = [Publisher("m%d" % i, urls, self.prefix, self.targets,
                          RATE / 2.0, self.ledger, random.Random(SEED + i))
                for i in range(2)]
        self.sampling_done = False
        threading.Thread(target=self.sampler, daemon=True).start()
        self.t0 = time.time()
        for p in pubs:
            p.start()
        injector = threading.Thread(target=self.faults, args=(plan,),
                                    daemon=True)
        injector.start()
        while time.time() < self.t0 + DURATION:
            time.sleep(min(30, self.t0 + DURATION - time.time()))
            log("%d published, %d arrived", len(self.ledger.msgs),
                sum(len(c.arrivals) for c in self.checkers.values()))
        for p in pubs:
            p.stopping = True
        for p in pubs:
            p.join(30)
        self.published_s = time.time() - self.t0
        injector.join()
        for t in self.threads:
            t.join()
        log("publishing stopped and every fault ended; draining")
        for s in self.daemons:  # a daemon a fault left stopped
            if s.d.proc is None or s.d.proc.poll() is not None:
                s.start()
        self.drain()
        self.sampling_done = True

    def expected_ids(self):
        with self.ledger.lock:
            return {mid for mid, r in self.ledger.msgs.items()
                    if r["confirmed"] and mid not in self.ledger.cancelled
                    and mid not in self.ledger.ctl_asked}

    def uncancelled_ids(self):
        recorded = set(self.cancel_records())
        with self.ledger.lock:
            return {mid for mid, r in self.ledger.msgs.items()
                    if r["confirmed"] and mid not in recorded}

    def arrived(self):
        got = set()
        for c in self.checkers.values():
            got.update(a[1] for a in list(c.arrivals))
        return got

    def drain(self):
        """Until every message due has arrived (or the broker holds
        nothing more for the targets), then until cascade's queues are
        empty, so late duplicates are counted too."""
        deadline = time.time() + MAX_DELAY + 300
        said = time.time()
        # first without the ids asked to be cancelled; then without
        # those P.cancels recorded (cascade-ctl records none of an id
        # no daemon had seen yet)
        for want in (self.expected_ids, self.uncancelled_ids):
            want = want()
            while time.time() < deadline:
                missing = want - self.arrived()
                if not missing:
                    break
                if time.time() - said >= 30:
                    log("%d messages still to arrive", len(missing))
                    said = time.time()
                time.sleep(1)
        deadline = time.time() + 60
        while time.time() < deadline and not self.queues_empty():
            time.sleep(1)
        time.sleep(3)
        for c in self.checkers.values():
            c.stopping = True
        for c in self.checkers.values():
            c.join(10)

    def queues_empty(self):
        node = self.cluster.up()
        feeding = {k: v for k, v in
                   dead_letter_backlog(node, self.prefix, echo=False).items()
                   if not k.endswith(".error")}
        if not feeding or any(n > 0 for v in feeding.values() for n in v):
            return False
        out = node.ctl("list_queues", "-q", "--no-table-headers", "name",
                       "messages", check=False).stdout
        rows = [line.split() for line in out.splitlines()]
        return all([q, "0"] in rows for q in self.targets)

    def stop(self):
        """Every fault ended, then everything this soak started stopped;
        each step whatever the one before did."""
        self.stopping.set()
        for t in self.threads:
            t.join(300)
        steps = [Partition.heal]
        for s in self.daemons:
            steps.append(lambda s=s: s.term() if s.d.proc else None)
            steps.append(s.kill)
        if self.prom:
            steps.append(self.prom.kill)
        steps.append(self.cluster.stop)
        for step in steps:
            try:
                step()
            except Exception as e:
                log("cleaning up: %r", e)
