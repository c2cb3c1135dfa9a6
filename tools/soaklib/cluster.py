# SPDX-License-Identifier: Apache-2.0
"""The soak's three-node RabbitMQ cluster, and a partition of one node."""
import os
import shutil
import subprocess
import tempfile
import threading
import uuid

from faults import restart_broker, stop_broker
from helpers import BROKER_SCRIPT, Broker

from .settings import NODE_GID


def sh(*args, check=True, timeout=150, env=None):
    return subprocess.run(list(args), check=check, capture_output=True,
                          text=True, timeout=timeout, env=env)


class Cluster:
    """Three private nodes, each under a group id of its own, with
    pause_minority (RabbitMQ's advice for three nodes) and a short
    net_ticktime, so that a partition is seen in seconds."""

    def __init__(self, tag):
        self.tag = tag
        self.cookie = uuid.uuid4().hex.upper()[:20]
        self.nodes = []
        self.lock = threading.Lock()
        self.down = set()

    def start(self):
        """The three at once (they are apart until joined), then b and c
        joined to a."""
        def one(i, n):
            d = tempfile.mkdtemp(prefix="cascade-soak-")
            env = dict(os.environ,
                       RABBITMQ_PRIVATE_COOKIE=self.cookie,
                       RABBITMQ_PRIVATE_GID=str(NODE_GID + i),
                       RABBITMQ_PRIVATE_CONF="cluster_partition_handling = "
                       "pause_minority\nnet_ticktime = 10")
            try:
                out = sh(BROKER_SCRIPT, "start", d,
                         "cascade-%s-%s" % (self.tag, n), env=env)
            except subprocess.CalledProcessError as e:
                errors.append("node %s: %s" % (n, e.stderr))
                return
            b = Broker(d, out.stdout.strip())
            b.name = "cascade-%s-%s@localhost" % (self.tag, n)
            b.index = i
            b.dist = int(self.env(b)["DIST_PORT"])
            started[i] = b

        started, errors = {}, []
        ts = [threading.Thread(target=one, args=(i, n))
              for i, n in enumerate("abc")]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.nodes = [started[i] for i in sorted(started)]
        if errors:
            raise RuntimeError("; ".join(errors))
        for b in self.nodes[1:]:
            b.ctl("stop_app")
            b.ctl("join_cluster", self.nodes[0].name)
            b.ctl("start_app")

    @staticmethod
    def env(b):
        out = sh(BROKER_SCRIPT, "env", b.dir).stdout
        found = {}
        for line in out.splitlines():
            line = line.replace("export ", "")
            if "=" in line:
                k, v = line.split("=", 1)
                found[k] = v.strip("'")
        return found

    def urls(self):
        return [b.url for b in self.nodes]

    def up(self):
        """A node that runs, for rabbitmqctl."""
        for b in self.nodes:
            if b.index not in self.down:
                return b
        return self.nodes[0]

    def stop_node(self, b):
        self.down.add(b.index)
        stop_broker(b)

    def start_node(self, b):
        try:
            try:
                restart_broker(b)
            except subprocess.CalledProcessError:
                # Started before a majority of its cluster, a node under
                # pause_minority boots paused ("awaiting recovery") and
                # restart's 80 s wait gives up (seen on 4.0.5): it runs
                # once the others are up.  One that is not running at all
                # (seen once on 4.3.6: await_startup exit 69) is stopped
                # for good measure and started once more.
                if b.ctl("await_startup", "--timeout", "300",
                         check=False).returncode != 0:
                    stop_broker(b)
                    restart_broker(b)
        finally:
            self.down.discard(b.index)

    def stop(self):
        ts = [threading.Thread(target=stop_broker, args=(b,))
              for b in self.nodes]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for b in self.nodes:
            shutil.rmtree(b.dir, ignore_errors=True)


class Partition:
    """One node's Erlang distribution cut off from the other two's, on
    loopback only: nftables drops what that node's sockets (its group id)
    send to their distribution ports or from its own, and what others
    (rabbitmqctl too) send to its distribution port.  Under pause_minority
    the cut-off node pauses itself once it sees the partition (net_ticktime
    10 s): it closes its listeners and its clients reconnect to the other
    two; when healed, it rejoins."""

    TABLE = "cascade_soak"

    def __init__(self, cluster, b):
        self.cluster, self.b = cluster, b

    def __enter__(self):
        others = ", ".join(str(o.dist) for o in self.cluster.nodes
                           if o is not self.b)
        gid = NODE_GID + self.b.index
        rules = """
table inet %(t)s {
  chain out {
    type filter hook output priority 0; policy accept;
    meta skgid %(gid)d tcp dport { %(others)s } drop
    meta skgid %(gid)d tcp sport %(dist)d drop
    meta skgid != %(gid)d tcp dport %(dist)d drop
  }
}
""" % {"t": self.TABLE, "gid": gid, "others": others, "dist": self.b.dist}
        subprocess.run(["nft", "-f", "-"], input=rules, text=True,
                       check=True, capture_output=True)
        return self

    def __exit__(self, *exc):
        Partition.heal()

    @classmethod
    def heal(cls):
        subprocess.run(["nft", "delete", "table", "inet", cls.TABLE],
                       capture_output=True)
