# SPDX-License-Identifier: Apache-2.0
"""One daemon of the soak."""
import os
import signal
import subprocess
import threading
import time

from helpers import Daemon, free_port

from .settings import MODE


class Soaked:
    """One daemon of the soak, its metrics port fixed across restarts."""

    def __init__(self, cluster, workdir, prefix, index):
        self.index = index
        self.port = free_port()
        urls = cluster.urls()
        order = urls[index % 3:] + urls[:index % 3]
        topology = {"resolution": "500ms", "factor": "2", "levels": "0",
                    "shards": "3", "mode": MODE}
        if MODE != "ladder":
            topology["native_window"] = "10m"
        # a directory each: Daemon names its config and log by prefix
        ddir = os.path.join(workdir, "daemon%d" % index)
        os.makedirs(ddir, exist_ok=True)
        self.d = Daemon(cluster.nodes[0], ddir, {
            "broker": {"url": ", ".join(order), "reconnect_max": "5s"},
            "topology": topology,
            "router": {"max_delay": "1h"},
            "metrics": {"listen": "127.0.0.1:%d" % self.port},
        }, prefix)
        self.lock = threading.Lock()
        self.rss = []  # (t, kB)

    @property
    def instance(self):
        return "127.0.0.1:%d" % self.port

    def start(self):
        with self.lock:
            self.d.spawn()

    def kill(self):
        with self.lock:
            self.d.kill()

    def term(self):
        with self.lock:
            p = self.d.proc
            if p is None or p.poll() is not None:
                return None
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = p.wait()
            self.d.logfile.close()
            return rc

    def sample_rss(self):
        p = self.d.proc
        if p is None or p.poll() is not None:
            return
        try:
            with open("/proc/%d/status" % p.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        self.rss.append((time.time(), int(line.split()[1])))
        except OSError:
            pass
