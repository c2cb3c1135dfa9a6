# SPDX-License-Identifier: Apache-2.0
"""What the tests of what waits share (test_events.py, test_requests.py,
test_unique_and_repeats.py, test_schedules.py, test_trust.py,
test_trust_records.py): a small ladder, cascade-ctl list, the records in the streams P.events,
P.cancels and P.series, publishing a delayed message and checking when it
arrives, a series' copies collected through kills, and other broker
users (the fixture users, which a test module
imports to use).  As helpers.py, shared by the test files, which import
from here, never from one another."""
import json
import time
import uuid

import pika
import pytest

from helpers import LATE_SCALE, METRICS, ctl, wait_for


SLACK = 0.002  # due times are whole ms: the daemon may round 1 ms down
LATE = 1.5  # generous: the tail is held, a message is a few ms late


def ladder(resolution, factor, levels, **sections):
    """Config sections: a small ladder, /metrics on a port of its own."""
    s = {"topology": {"resolution": resolution, "factor": str(factor),
                      "levels": str(levels)}}
    s.update(METRICS)
    for k, v in sections.items():
        s.setdefault(k, {}).update(v)
    return s


# 500ms, 1s, 2s, 4s: a delay of 5 s hops into the 4 s level, then back.
SHORT = ("500ms", 2, 4)


def uid(name):
    return "%s-%s" % (name, uuid.uuid4().hex[:8])


def listing(d, *args):
    """`cascade-ctl list --json` as a dict."""
    return json.loads(ctl(d, "list", "--json", *args).stdout)


def ids(lst):
    return [m["id"] for m in lst["messages"]]


def wait_listed(d, want, timeout=15):
    """Poll list until it shows (at least) the ids want; the listing."""
    last = {}

    def seen():
        last["l"] = listing(d)
        return set(want) <= set(ids(last["l"]))
    wait_for(seen, timeout, "%s in cascade-ctl list" % sorted(want))
    return last["l"]


def unbatch(props, body):
    """The records of one stream message: itself, or those of a batch
    (docs/CONTRACT.md section 7.4: [4-byte length][properties as an AMQP
    0-9-1 content header encodes them], one after the other)."""
    if props.type != "batch":
        return [props]
    out, off = [], 0
    while off < len(body):
        n = int.from_bytes(body[off:off + 4], "big")
        p = pika.spec.BasicProperties()
        p.decode(body[off + 4:off + 4 + n])
        out.append(p)
        off += 4 + n
    assert len(out) == props.headers["x-cascade-records"]
    return out


def records(broker, stream, timeout=20):
    """Every record now in stream, as pika properties.  Writes a marker
    (a record of the format) and reads from the first offset until it
    comes back, so everything written before it has been read."""
    conn = broker.connect()
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        token = uuid.uuid4().hex
        ch.basic_publish("", stream, b"", pika.BasicProperties(
            type="marker", delivery_mode=2,
            headers={"x-cascade-marker": "test-" + token,
                     "x-cascade-at": int(time.time() * 1000)}),
            mandatory=True)
        ch.basic_qos(prefetch_count=500)
        got, done = [], []

        def on_message(ch, method, props, body):
            for r in unbatch(props, body):
                h = r.headers or {}
                if r.type == "marker":
                    if h.get("x-cascade-marker") == "test-" + token:
                        done.append(True)
                else:
                    got.append(r)
            ch.basic_ack(method.delivery_tag)

        ch.basic_consume(stream, on_message,
                         arguments={"x-stream-offset": "first"})
        deadline = time.time() + timeout
        while not done and time.time() < deadline:
            conn.process_data_events(time_limit=0.1)
        assert done, "the marker did not come back from " + stream
        return got
    finally:
        try:
            conn.close()
        except Exception:
            pass


def events(d, kind=None):
    rs = records(d.broker, d.prefix + ".events")
    return [r for r in rs if kind is None or r.type == kind]


def expect_on_time(client, q, sent, timeout=30, late=LATE):
    """sent: {message-id: (time published, delay s)}.  They all arrive in
    q, not early and late by less than late (s); nothing else does."""
    got = client.collect(q, len(sent), timeout)
    arrived = {p.message_id: t for t, p, _ in got}
    assert sorted(arrived) == sorted(sent), (sorted(arrived), sorted(sent))
    for mid, (t0, delay) in sent.items():
        late_s = arrived[mid] - t0 - delay
        assert late_s >= -SLACK, "%s delivered %.3fs early" % (mid, -late_s)
        assert late_s < late * LATE_SCALE, \
            "%s delivered %.3fs late" % (mid, late_s)


def expect_nothing(client, queues, until):
    """Nothing arrives in any of queues up to time until (Unix s)."""
    for q in queues:
        got = client.collect(q, 1, max(0.1, until - time.time()))
        got += client.drain(q)
        assert got == [], "delivered to %s: %s" % (
            q, [(p.message_id, b) for _, p, b in got])


def publish(client, d, q, mid, delay, body=None, **headers):
    """A delayed message to queue q; (time published, delay s)."""
    h = {"x-remaining-delay": "%dms" % (delay * 1000)}
    h.update(headers)
    props = {"message_id": mid} if mid is not None else {}
    t = client.publish(d.prefix, q, body or (mid or "x").encode(), h,
                       **props)
    return t, delay


def on_time(arrived, mid, due):
    late = arrived[mid] - due
    assert late >= -SLACK, "%s delivered %.3fs early" % (mid, -late)
    assert late < LATE, "%s delivered %.3fs late" % (mid, late)


class User:
    """A connection as another broker user, publishing with its user-id
    (RabbitMQ refuses a user-id that is not the connection's user)."""

    def __init__(self, broker, name, prefix):
        broker.ctl("add_user", name, "pw-" + name, check=False)
        # May publish to cascade's exchange only.
        broker.ctl("set_permissions", "-p", "/", name, "^$",
                   "^%s$" % prefix, "^$")
        params = pika.URLParameters(broker.url)
        params.credentials = pika.PlainCredentials(name, "pw-" + name)
        self.name = name
        self.conn = pika.BlockingConnection(params)
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()
        self.prefix = prefix

    def publish(self, key, headers, mid=None, user_id=True, body=b"body"):
        """A confirmed publish: the time it was sent, before the confirm,
        which can come back after the daemon has read it (so a time taken
        after it is no lower bound of a due time: a fresh make check saw
        a rescheduled message 3 ms "early" against it)."""
        props = pika.BasicProperties(
            headers=headers, message_id=mid,
            user_id=self.name if user_id else None)
        sent = time.time()
        self.ch.basic_publish(self.prefix, key, body, props,
                              mandatory=True)
        return sent

    def close(self):
        self.conn.close()


@pytest.fixture
def users(broker):
    made = []

    def make(name, prefix):
        u = User(broker, name, prefix)
        made.append(u)
        return u
    yield make
    for u in made:
        u.close()
        broker.ctl("delete_user", u.name, check=False)


def series_through_kills(client, d, q, mids, times, after=8):
    """Collect q while d is killed with -9 every 1.7 s, three times, each
    restarted at once, then `after` s more, and 3 s more in which a fork
    would go on delivering; check that each series of mids (times
    occurrences each) neither forked nor lost one: every occurrence
    arrives, or is counted in the x-cascade-missed of the one after it
    (a restart may outlast an interval); one may arrive twice around a
    kill (at-least-once), never a second series."""
    got = []
    for _ in range(3):
        got += client.collect(q, 1000, 1.7)
        d.kill()
        d.start()
    got += client.collect(q, 1000, after)
    got += client.collect(q, 1000, 3)
    for mid in mids:
        seen = [(p.headers["x-cascade-occurrence"],
                 p.headers.get("x-cascade-missed", 0))
                for _, p, _ in got if p.message_id == mid]
        covered = set()
        for k, missed in seen:
            covered.update(range(k - missed, k + 1))
        assert covered == set(range(1, times + 1)), (mid, sorted(seen))
        assert len(seen) <= times + 3, (mid, sorted(seen))
