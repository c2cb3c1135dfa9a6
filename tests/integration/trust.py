# SPDX-License-Identifier: Apache-2.0
"""What the trust tests (test_trust.py, test_trust_records.py) share:
each attack is tried as a real broker user would, on a private RabbitMQ.
Three kinds of user, made for each test module (the
fixture users):

- p_only: write on the exchange P only (what docs/operations.md gives a
  publisher);
- p_default: write on P and on amq.default, so on every queue by name;
- everything: write (and read) on everything.

One daemon (the fixture d) serves most tests; a second one (d2), of
another prefix, takes the messages put into its error queue by hand and
the depth bombs, which stay in its streams for good.  A test module
imports the fixtures it uses, and those they use (users: d and d2; d and
d2: tmp_module); each test module has its own.  As helpers.py, shared by
the test files, which import from here, never from one another."""
import json
import os
import struct
import subprocess
import time
import uuid

import pika
import pytest

from helpers import CTL, Client, Daemon, ctl, http_get
from waiting import SHORT, ladder


INT64_MAX = 2 ** 63 - 1


def hex16():
    return uuid.uuid4().hex[:16]


def now_ms():
    return int(time.time() * 1000)


class User:
    """A broker user of the module: a connection, a channel with publisher
    confirms, and the permissions it was made with."""

    def __init__(self, broker, name, configure, write, read):
        self.broker, self.name = broker, name
        self.password = "pw-" + name
        broker.add_user(name, self.password, configure, write, read)
        self.connect()

    def connect(self):
        params = pika.URLParameters(self.broker.url)
        params.credentials = pika.PlainCredentials(self.name, self.password)
        self.conn = pika.BlockingConnection(params)
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()

    def publish(self, exchange, routing_key, body=b"", headers=None,
                props=None, **kw):
        """A confirmed, mandatory publish; raises when the broker refuses.
        kw are pika properties; props replaces them whole.  Returns the
        time it was sent: the daemon cannot have it sooner, while the
        confirm can come back after the daemon has read it (as
        helpers.Client.publish)."""
        if not self.ch.is_open:
            self.ch = self.conn.channel()
            self.ch.confirm_delivery()
        p = props or pika.BasicProperties(headers=headers, **kw)
        sent = time.time()
        self.ch.basic_publish(exchange, routing_key, body, p, mandatory=True)
        return sent

    def delayed(self, prefix, queue, mid, delay, body=None, owned=True,
                **headers):
        """A delayed message to queue through P, with this user's user-id
        (owned) and message-id mid: the time it was published."""
        h = {"x-remaining-delay": delay}
        h.update(headers)
        return self.publish(prefix, queue, body or mid.encode(), h,
                            message_id=mid,
                            user_id=self.name if owned else None)

    def record(self, stream, kind, headers, **kw):
        """A record written straight into stream (docs/CONTRACT.md 7.4)."""
        h = {"x-cascade-at": now_ms()}
        h.update(headers)
        return self.publish("", stream, b"", type=kind, delivery_mode=2,
                            headers=h, **kw)

    def batch(self, stream, records_):
        """A batch of records (pika properties) written into stream."""
        body = b""
        for r in records_:
            enc = b"".join(r.encode())
            body += struct.pack(">I", len(enc)) + enc
        return self.publish("", stream, body, type="batch", delivery_mode=2,
                            user_id=self.name,
                            headers={"x-cascade-records": len(records_),
                                     "x-cascade-at": now_ms()})

    def close(self):
        try:
            self.conn.close()
        except Exception:
            pass


@pytest.fixture(scope="module")
def tmp_module(tmp_path_factory):
    return str(tmp_path_factory.mktemp("trust"))


def start_daemon(broker, tmpdir, **sections):
    d = Daemon(broker, tmpdir, ladder(*SHORT, **sections))
    return d.start()


def stop_daemon(d):
    if d.proc is not None and d.proc.poll() is None:
        rc = d.stop()
        assert rc == 0, "cascade exited %s on SIGTERM:\n%s" % (rc, d.log())


@pytest.fixture(scope="module")
def d(broker, tmp_module):
    """The daemon most tests attack (its user, guest, is the control
    user cascade-ctl logs in as)."""
    daemon = start_daemon(broker, tmp_module)
    yield daemon
    stop_daemon(daemon)


@pytest.fixture(scope="module")
def d2(broker, tmp_module):
    """Another prefix: its error queue and streams take what the tests
    put there by hand."""
    daemon = start_daemon(broker, tmp_module)
    yield daemon
    stop_daemon(daemon)


@pytest.fixture(scope="module")
def users(broker, d, d2):
    """{kind: User}.  The permissions name both prefixes' exchanges P."""
    ps = "(%s|%s)" % (d.prefix, d2.prefix)
    made = {
        "p_only": User(broker, d.prefix + "-p-only", "^$", "^%s$" % ps,
                       "^$"),
        "p_default": User(broker, d.prefix + "-p-default", "^$",
                          r"^(%s|amq\.default)$" % ps, "^$"),
        "everything": User(broker, d.prefix + "-everything", "^$", ".*",
                           ".*"),
    }
    yield made
    for u in made.values():
        u.close()
        broker.delete_user(u.name)


@pytest.fixture(scope="module")
def guest(broker):
    """cascade's own user, as the test's eyes: queues, consuming."""
    c = Client(broker)
    yield c
    c.close()


def sample(d, name, **labels):
    """One sample of d's /metrics (0 when absent)."""
    key = name
    if labels:
        key += "{%s}" % ",".join('%s="%s"' % kv for kv in labels.items())
    return d.metrics().get(key, 0.0)


def errors(d):
    """cascade-ctl errors --json: the parked messages."""
    return json.loads(ctl(d, "errors", "--json", "--limit", "10000")
                      .stdout)["messages"]


def parked_by_id(d, mids):
    """{message-id: [reasons]} of the parked messages among mids."""
    found = {}
    for m in errors(d):
        if m["message_id"] in mids:
            found.setdefault(m["message_id"], []).append(m["reason"])
    return found


def arrived(client, q, n, timeout):
    """Up to n messages from q within timeout: [(time, props, body)]."""
    return client.collect(q, n, timeout)


def alive(d):
    """The daemon runs and answers /metrics."""
    assert d.proc.poll() is None, "cascade died (%s):\n%s" % (
        d.proc.returncode, d.log()[-3000:])
    status, _ = http_get(d.metrics_url() + "/metrics")
    assert status == 200


def config_as(d, tmpdir, user, password):
    """A copy of d's config in tmpdir that logs in as user: its path."""
    config = os.path.join(tmpdir, "%s-%s.ini" % (d.prefix, user))
    with open(d.config) as f:
        text = f.read()
    assert "guest:guest@" in text, text
    with open(config, "w") as f:
        f.write(text.replace("guest:guest@", "%s:%s@" % (user, password)))
    return config


def ctl_as(d, tmpdir, user, password, *args):
    """cascade-ctl with d's config, logged in as user."""
    config = config_as(d, tmpdir, user, password)
    env = dict(os.environ)
    env.pop("CASCADE_BROKER_URL", None)
    return subprocess.run([CTL, "-c", config, *args], capture_output=True,
                          text=True, timeout=120, env=env)


def untrusted_logged(d, writer):
    return sum('msg=record_untrusted' in line and
               'writer="%s"' % writer in line
               for line in d.log().splitlines())


def scheduled(mid, cid, due, exchange, routing_key, owner=None, copy=None,
              at=None):
    """A scheduled record (pika properties) as a daemon writes one."""
    h = {"x-cascade-at": at or now_ms(), "x-cascade-id": cid,
         "x-cascade-due": due, "x-cascade-exchange": exchange,
         "x-cascade-routing-key": routing_key, "x-cascade-size": 0}
    if owner is not None:
        h["x-cascade-user-id"] = owner
    if copy is not None:
        h["x-cascade-message"] = copy
    return pika.BasicProperties(type="scheduled", delivery_mode=2,
                                message_id=mid, headers=h)


def envelope(props, body):
    """A message as a scheduled record's x-cascade-message carries it
    (docs/CONTRACT.md 3.6 and 7.4)."""
    enc = b"".join(props.encode())
    return b"CSCE\x01" + struct.pack(">I", len(enc)) + enc + body
