# SPDX-License-Identifier: Apache-2.0
"""docs/clients.md's snippets, run with the real clients: the page cannot
drift from what works.

Each snippet sits between `<!-- snippet: CLIENT-KIND -->` and
`<!-- /snippet -->` in docs/clients.md, as one fenced program.  The test
substitutes its own values for the spellings the page lists (its table
"in the snippets / becomes in the test"):

  guest:guest@localhost:5672   the test broker's user:password@host:port
  cascade (a whole word)       the daemon's prefix (the exchange P)
  orders                       a fresh queue
  order-42                     a fresh message-id
  90s, 90000                   1s, 1000 (3s, 3000 in the cancel test, which
                               must cancel the message before it is due)
  1h                           1s (the repeat: first in 1 s, then every 1 s)

and runs the program: python3 for pika, kombu and Qpid Proton; node for
amqplib (0.10, installed from npm once into build/node, which the Debian
roots share); Go's amqp091-go
from Debian's golang-github-rabbitmq-amqp091-go-dev (built offline with
GO111MODULE=off, GOPATH=/usr/share/gocode); rabbitmq-c compiled with cc
(with <amqp.h> and <amqp_tcp_socket.h> for rabbitmq-c before 0.12, as the
page says).  Then it checks what a user would: the message arrives after its
delay at its queue with its body; the absolute time is honoured; the repeat
delivers three numbered occurrences and no fourth; the cancel leaves the
delayed message undelivered while another one in the same queue arrives.
A client missing here (no node or npm, no go) is a skip that says so.
"""
import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import uuid

import pytest

from helpers import BUILD, LATE_SCALE, ROOT, broker_version

# Some 40 s of real clients (builds, npm, waits): make test-slow, which
# make check runs on every broker of the plan; make test stays fast.
pytestmark = pytest.mark.slow

DOC = os.path.join(ROOT, "docs", "clients.md")
LATE = 3.0 * LATE_SCALE
SLACK = 0.005
AMQPLIB = "amqplib@0.10"
GOCODE = "/usr/share/gocode"

KINDS = ("delay", "at", "repeat", "cancel")
CLIENTS_091 = ("pika", "kombu", "amqplib", "go", "c")


def snippets():
    """{name: source} of every snippet in docs/clients.md."""
    with open(DOC) as f:
        text = f.read()
    found = {}
    for m in re.finditer(r"<!-- snippet: ([\w-]+) -->\n```\w+\n(.*?)```\n"
                         r"<!-- /snippet -->", text, re.S):
        assert m.group(1) not in found, "two snippets named " + m.group(1)
        found[m.group(1)] = m.group(2)
    return found


def test_every_client_has_its_four_snippets():
    names = set(snippets())
    want = {"%s-%s" % (c, k) for c in CLIENTS_091 + ("proton",)
            for k in KINDS}
    assert names == want, (sorted(want - names), sorted(names - want))


def substitute(source, broker, prefix, queue, mid, seconds):
    out = source.replace('"90s"', '"%ds"' % seconds)
    out = out.replace("90000", str(seconds * 1000))
    out = out.replace('"1h"', '"1s"')
    assert not re.search(r"\b90|1h", out), out
    u = urllib.parse.urlparse(broker.url)
    netloc = "%s:%s@%s:%d" % (u.username, u.password, u.hostname, u.port)
    out = out.replace("guest:guest@localhost:5672", netloc)
    out = re.sub(r"(?<![\w-])cascade(?![\w-])", prefix, out)
    out = re.sub(r"\borders\b", queue, out)
    out = out.replace("order-42", mid)
    return out


def npm_amqplib():
    """The directory holding node_modules/amqplib, installed once."""
    if not shutil.which("node"):
        pytest.skip("no node here (tools/install-deps lists nodejs)")
    # Under the repository's build/, whatever BUILD is: the Debian roots
    # (tools/debian-root) see the same directory, so one install serves
    # them all (amqplib is JavaScript only), and they go without npm.
    prefix = os.path.join(ROOT, "build", "node")
    os.makedirs(prefix, exist_ok=True)
    with open(os.path.join(prefix, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.isdir(os.path.join(prefix, "node_modules",
                                          "amqplib")):
            if not shutil.which("npm"):
                pytest.skip("no amqplib in build/node and no npm here to "
                            "install it (make node-clients, on the host)")
            r = subprocess.run(
                ["npm", "install", "--prefix", prefix, "--cache",
                 os.path.join(ROOT, "build", "npm-cache"), "--no-audit", "--no-fund",
                 "--ignore-scripts", AMQPLIB],
                capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr
    return prefix


def build(client, source, tmp):
    """The command that runs the snippet (compiled first when it must be)."""
    if client in ("pika", "kombu", "proton"):
        path = os.path.join(tmp, "snippet.py")
        with open(path, "w") as f:
            f.write(source)
        return [sys.executable, path], None
    if client == "amqplib":
        prefix = npm_amqplib()
        path = os.path.join(tmp, "snippet.js")
        with open(path, "w") as f:
            f.write(source)
        return ["node", path], {"NODE_PATH": os.path.join(prefix,
                                                          "node_modules")}
    if client == "go":
        if not shutil.which("go") or not os.path.isdir(os.path.join(
                GOCODE, "src", "github.com", "rabbitmq", "amqp091-go")):
            pytest.skip("no go or no golang-github-rabbitmq-amqp091-go-dev "
                        "here (tools/install-deps lists them)")
        path = os.path.join(tmp, "snippet.go")
        with open(path, "w") as f:
            f.write(source)
        env = dict(os.environ, GO111MODULE="off", GOFLAGS="",
                   GOPATH=os.path.join(BUILD, "go") + ":" + GOCODE,
                   GOCACHE=os.path.join(BUILD, "go-cache"))
        exe = os.path.join(tmp, "snippet")
        # One build at a time: the first compiles the standard library and
        # amqp091-go into the cache (some 60 s under make check's load),
        # and the others, waiting, take them from it in a few seconds.
        # Side by side, each compiled them all again.
        os.makedirs(env["GOCACHE"], exist_ok=True)
        with open(os.path.join(env["GOCACHE"], ".cascade-lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            r = subprocess.run(["go", "build", "-o", exe, path], env=env,
                               capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return [exe], None
    assert client == "c", client
    if not os.path.exists("/usr/include/rabbitmq-c/amqp.h"):
        source = source.replace("<rabbitmq-c/amqp.h>", "<amqp.h>")
        source = source.replace("<rabbitmq-c/tcp_socket.h>",
                                "<amqp_tcp_socket.h>")
    path = os.path.join(tmp, "snippet.c")
    with open(path, "w") as f:
        f.write(source)
    exe = os.path.join(tmp, "snippet")
    r = subprocess.run(["cc", "-Wall", "-Werror", "-o", exe, path,
                        "-lrabbitmq"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return [exe], None


class Snippet:
    """One snippet of the page, substituted, built and ready to run."""

    def __init__(self, name, broker, daemon, queue, tmp, seconds=1,
                 mid=None):
        client = name.split("-")[0]
        self.mid = mid or "m-" + uuid.uuid4().hex[:8]
        source = substitute(snippets()[name], broker, daemon.prefix, queue,
                            self.mid, seconds)
        d = os.path.join(str(tmp), name)
        os.makedirs(d, exist_ok=True)
        self.argv, env = build(client, source, d)
        self.env = dict(os.environ, **(env or {}))
        self.name = name

    def run(self):
        r = subprocess.run(self.argv, env=self.env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, "%s exited %d:\n%s%s" % (
            self.name, r.returncode, r.stdout, r.stderr)


def check(kind, name, broker, client, daemon, tmp_path):
    q = client.queue()
    if kind in ("delay", "at"):
        s = Snippet(name, broker, daemon, q, tmp_path)
        t0 = time.time()
        s.run()
        t1 = time.time()
        got = client.collect(q, 1, timeout=1 + LATE + 5)
        assert got, "%s: nothing arrived at %s" % (name, q)
        t, props, body = got[0]
        assert body == b"hello", body
        assert t0 + 1 - SLACK <= t < t1 + 1 + LATE, (t - t0, t1 - t0)
        if kind == "delay":
            assert props.message_id == s.mid, props
        return
    if kind == "repeat":
        s = Snippet(name, broker, daemon, q, tmp_path)
        t0 = time.time()
        s.run()
        got = client.collect(q, 3, timeout=3 + LATE + 5)
        occurrences = [(p.headers or {}).get("x-cascade-occurrence")
                       for _, p, _ in got]
        assert occurrences == [1, 2, 3], occurrences
        assert [b for _, _, b in got] == [b"hello"] * 3
        # Occurrence k is due k s after the publish; a late one does not
        # move the next (the series keeps its times), so only each one's
        # earliest time is bounded, not the gaps between them.
        for k, (t, _, _) in enumerate(got, 1):
            assert t >= t0 + k - SLACK, [t - t0 for t, _, _ in got]
        assert client.collect(q, 1, timeout=1.5) == [], "a fourth occurrence"
        return
    assert kind == "cancel", kind
    # The page's delayed message, with the message-id the cancel names, in
    # 8 s; the cancel; and a message of the test's own to the same queue,
    # which must still arrive.  What is checked is that the cancellation
    # was read before the message was due (two clients' start-up took 6 s
    # on a loaded machine: a fixed 3 s was missed), then that only the
    # control message comes until the delayed one's time has passed.
    client_name = name.split("-")[0]
    delay = 8
    delayed = Snippet(client_name + "-delay", broker, daemon, q, tmp_path,
                      seconds=delay)
    cancel = Snippet(name, broker, daemon, q, tmp_path, mid=delayed.mid)
    t0 = time.time()
    delayed.run()
    cancel.run()
    daemon.wait_log('msg=cancellation id="%s"' % delayed.mid, delay)
    assert time.time() < t0 + delay, "the cancellation came after its time"
    client.publish(daemon.prefix, q, b"control",
                   headers={"x-remaining-delay": "1s"})
    got = client.collect(q, 2, timeout=max(0, t0 + delay - time.time()) +
                         LATE)
    assert [b for _, _, b in got] == [b"control"], got


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("client_name", CLIENTS_091)
def test_a_0_9_1_client_snippet_does_what_the_page_says(
        broker, client, daemon, tmp_path, client_name, kind):
    check(kind, "%s-%s" % (client_name, kind), broker, client, daemon,
          tmp_path)


@pytest.mark.parametrize("kind", KINDS)
def test_a_qpid_proton_snippet_does_what_the_page_says(
        broker, client, daemon, tmp_path, kind):
    if broker_version(broker) < (4, 0):
        pytest.skip("AMQP 1.0 addresses (/exchanges/...) need RabbitMQ 4.0")
    check(kind, "proton-" + kind, broker, client, daemon, tmp_path)
