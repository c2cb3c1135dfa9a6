"""Trust boundaries (issue 34, docs/security.md): each attack tried as a
real broker user would, on a private RabbitMQ, asserting what that user,
or the one attacked, would check.  Three kinds of user, made with
rabbitmqctl for the module:

- p_only: write on the exchange P only (what docs/operations.md gives a
  publisher);
- p_default: write on P and on amq.default, so on every queue by name;
- everything: write (and read) on everything.

One daemon serves most tests; a second one, of another prefix, takes the
messages put into its error queue by hand and the depth bombs, which
stay in its streams for good."""
import json
import os
import struct
import subprocess
import time
import uuid

import pika
import pika.exceptions
import pytest

from helpers import (CTL, Client, Daemon, ctl, http_get, scrape, total,
                     wait_for)
from test_events import (LATE, SHORT, SLACK, ladder, records,
                         wait_listed)

INT64_MAX = 2 ** 63 - 1


def uid(name):
    return "%s-%s" % (name, uuid.uuid4().hex[:8])


def hex16():
    return uuid.uuid4().hex[:16]


def now_ms():
    return int(time.time() * 1000)


class RawProperties(pika.BasicProperties):
    """Properties pika sends as given bytes (flags and fields as in a
    content header): pika's own encoder recurses, and a depth bomb is
    deeper than Python's recursion limit."""

    def __init__(self, raw):
        super().__init__()
        self.raw = raw

    def encode(self):
        return [self.raw]


class User:
    """A broker user of the module: a connection, a channel with publisher
    confirms, and the permissions it was made with."""

    def __init__(self, broker, name, configure, write, read):
        self.broker, self.name = broker, name
        self.password = "pw-" + name
        broker.ctl("add_user", name, self.password)
        broker.ctl("set_permissions", "-p", "/", name, configure, write,
                   read)
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
        kw are pika properties; props replaces them whole."""
        if not self.ch.is_open:
            self.ch = self.conn.channel()
            self.ch.confirm_delivery()
        p = props or pika.BasicProperties(headers=headers, **kw)
        self.ch.basic_publish(exchange, routing_key, body, p, mandatory=True)
        return time.time()

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
        broker.ctl("delete_user", u.name, check=False)


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


def ctl_as(d, tmpdir, user, password, *args):
    """cascade-ctl with d's config, logged in as user."""
    config = os.path.join(tmpdir, "%s-%s.ini" % (d.prefix, user))
    with open(d.config) as f:
        text = f.read()
    with open(config, "w") as f:
        f.write(text.replace("guest:guest@", "%s:%s@" % (user, password)))
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


# 1. cascade never delivers into what it owns.

def test_a_target_naming_cascades_own_queues_is_parked_not_delivered(
        d, users, guest):
    """A publisher with write on P only aims messages at cascade's own
    streams and queues, by the default exchange and by name: none lands
    there; each is parked, once, with a reason, as bad_target."""
    p = d.prefix
    targets = [("", p + ".events"), ("", p + ".cancels"),
               ("", p + ".series"),
               ("", p + ".error"), ("", p + ".ingress"),
               ("amq.default", p + ".cancels"), (p, "anything"),
               (p + ".retry", "")]
    before = sample(d, "cascade_messages_parked_total", reason="bad_target")
    u = users["p_only"]
    mids = []
    for ex, rk in targets:
        mid = uid("aim-%s" % (rk or ex))
        mids.append(mid)
        u.delayed(p, "x", mid, "1s", **{"x-target-exchange": ex,
                                        "x-target-routing-key": rk})
    # The default exchange routes by each CC key as well, at delivery.
    q = guest.queue()
    mid = uid("aim-cc")
    mids.append(mid)
    targets.append(("", "CC"))
    u.delayed(p, q, mid, "1s", **{"CC": [p + ".events", p + ".hold"]})
    # Wait until each is parked, or for 10 s, then check the worst first:
    # did anything land in the streams?
    deadline = time.time() + 10
    while True:
        got = parked_by_id(d, mids)
        if all(got.get(m) for m in mids) or time.time() > deadline:
            break
        time.sleep(0.2)
    # A record has a type (scheduled, parked, ... naming the message by
    # its message-id); the attacker's message itself has none.
    landed = {s: [r.message_id for r in records(d.broker, p + s)
                  if r.message_id in mids and r.type is None]
              for s in (".events", ".cancels", ".series")}
    assert landed == {".events": [], ".cancels": [], ".series": []}, landed
    # Each parked once, saying why (an x-cascade-error).
    assert all(len(got.get(m, [])) == 1 and got[m][0] for m in mids), \
        "not each parked once with a reason: %s" % {
            m: got.get(m) for m in mids}
    assert sample(d, "cascade_messages_parked_total",
                  reason="bad_target") - before == len(targets)
    assert arrived(guest, q, 1, 0.5) == [], "the CC'd message delivered"
    alive(d)


# 10. Requests: who may cancel (CONTRACT 7.6, existing behaviour).

def forged_hop(q, mid):
    """A message as a daemon puts it into a return queue: due now, to q,
    owned by alice."""
    return {"x-cascade-due": now_ms(), "x-cascade-exchange": "",
            "x-cascade-routing-key": q, "x-cascade-id": hex16(),
            "x-cascade-user-id": "alice",
            "x-cascade-since": now_ms() - 1000}


def test_a_hop_forged_into_cascades_own_queues_is_parked(
        d, users, guest, broker, tmp_module):
    """A user with write on amq.default puts messages straight into the
    return queue (and, in native mode, an envelope into the holding
    queue), with a target and x-cascade-user-id: alice, signed as itself
    or not at all.  None is delivered as alice's: each is parked
    not_from_cascade.  A daemon given [router] accept_unsigned_until
    (an upgrade from a cascade that did not sign its hops) takes the
    unsigned one until then, and still parks the one signed by the
    attacker."""
    attacker = users["p_default"]
    q = guest.queue()
    mids = {uid("signed"): attacker.name, uid("unsigned"): None}
    before = sample(d, "cascade_messages_parked_total",
                    reason="not_from_cascade")
    for mid, who in mids.items():
        attacker.publish("", d.prefix + ".return", b"forged",
                         props=pika.BasicProperties(
                             message_id=mid, user_id=who,
                             headers=forged_hop(q, mid)))
    native = os.environ.get("CASCADE_TEST_MODE") == "native"
    if native:
        mid = uid("envelope")
        inner = pika.BasicProperties(message_id=mid,
                                     headers=forged_hop(q, mid))
        attacker.publish("", d.prefix + ".hold", envelope(inner, b"forged"),
                         content_type="application/vnd.cascade.envelope",
                         user_id=attacker.name)
    wait_for(lambda: len(parked_by_id(d, mids)) == len(mids), 15,
             lambda: "forged hops not parked: %s\n%s" % (
                 parked_by_id(d, mids), d.log()[-2000:]))
    for mid, reasons in parked_by_id(d, mids).items():
        assert ("neither a daemon's" if mids[mid] else
                "not published by a daemon") in reasons[0], reasons
    if native:
        # Parked unopened, as it came: named by the reason alone.
        held = d.prefix + '.hold: published by user "%s"' % attacker.name
        wait_for(lambda: any(m["reason"].startswith(held)
                             for m in errors(d)), 15,
                 "the forged envelope parked")
    assert sample(d, "cascade_messages_parked_total",
                  reason="not_from_cascade") - before == \
        len(mids) + (1 if native else 0)
    assert arrived(guest, q, 1, 1) == []
    # The upgrade: unsigned hops taken until the time given.
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                          time.gmtime(time.time() + 3600))
    old = start_daemon(broker, tmp_module,
                       router={"accept_unsigned_until": until})
    try:
        q2 = guest.queue()
        signed, unsigned = uid("signed"), uid("unsigned")
        attacker.publish("", old.prefix + ".return", b"old", props=pika.
                         BasicProperties(message_id=unsigned,
                                         headers=forged_hop(q2, unsigned)))
        attacker.publish("", old.prefix + ".return", b"forged", props=pika.
                         BasicProperties(message_id=signed,
                                         user_id=attacker.name,
                                         headers=forged_hop(q2, signed)))
        got = arrived(guest, q2, 2, 5)
        assert [p.message_id for _, p, _ in got] == [unsigned], got
        wait_for(lambda: signed in parked_by_id(old, {signed}), 10,
                 "the signed forgery parked")
    finally:
        stop_daemon(old)


def test_another_user_cannot_cancel_a_message_or_claim_its_user_id(
        d, users, guest):
    alice, bob = users["p_only"], users["p_default"]
    q = guest.queue()
    # RabbitMQ itself refuses a user-id that is not the connection's.
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        bob.publish(d.prefix, q, b"", {"x-cascade-cancel": "anything"},
                    user_id=alice.name)
    assert e.value.reply_code == 406, e.value

    mid = uid("alice-msg")
    t0 = alice.delayed(d.prefix, q, mid, "2s")
    wait_listed(d, [mid])
    bob.publish(d.prefix, q, b"", {"x-cascade-cancel": mid},
                user_id=bob.name)
    got = arrived(guest, q, 1, 2 + LATE + 1)
    assert [p.message_id for _, p, _ in got] == [mid], got
    assert got[0][0] - (t0 + 2) > -SLACK
    # The request (which has no message-id of its own) is parked, once.
    refused = "not permitted: user '%s' may not cancel message '%s'" % (
        bob.name, mid)
    last = {}

    def parked_once():
        last["r"] = [m["reason"] for m in errors(d)
                     if m["reason"] and mid in m["reason"]]
        return last["r"]
    wait_for(parked_once, 5, "bob's request parked")
    assert len(last["r"]) == 1 and last["r"][0].startswith(refused), \
        last["r"]


# 4. Unique ids belong to their publisher.

def test_two_users_keep_the_same_unique_id_and_both_are_delivered(
        d, users, guest):
    a, b = users["p_only"], users["p_default"]
    q = guest.queue()
    mid = uid("inv-1")
    a.delayed(d.prefix, q, mid, "2s", body=b"from a",
              **{"x-cascade-unique": "keep"})
    wait_listed(d, [mid])
    b.delayed(d.prefix, q, mid, "1s", body=b"from b",
              **{"x-cascade-unique": "keep"})
    got = arrived(guest, q, 2, 2 + LATE + 1)
    assert sorted(bytes(body) for _, _, body in got) == [
        b"from a", b"from b"], got
    assert sorted(p.headers["x-cascade-user-id"] for _, p, _ in got) == \
        sorted([a.name, b.name])


# 2. Records are believed only from cascade's own writers.

def test_forged_claims_do_not_drop_another_users_plain_message(
        d, users, guest):
    """Two claim records for one unique id, the second naming another
    user's message-id as its cascade id: that message, which is not
    unique at all, is delivered on time."""
    victim = users["p_only"]
    q = guest.queue()
    mid = uid("plain")
    before = sample(d, "cascade_records_untrusted_total", stream="cancels")
    t0 = victim.delayed(d.prefix, q, mid, "2s")
    key = uid("claimed")
    for attacker in (users["p_default"], users["everything"]):
        for cid in (hex16(), mid):
            attacker.record(d.prefix + ".cancels", "claim", {
                "x-cascade-claim": key, "x-cascade-id": cid,
                "x-cascade-due": now_ms() + 60000,
                "x-cascade-until": now_ms() + 3600000,
                "x-cascade-unique": "keep",
                "x-cascade-requester": ""}, message_id=key)
    got = arrived(guest, q, 1, 2 + LATE + 1)
    assert [p.message_id for _, p, _ in got] == [mid], \
        "the plain message was dropped"
    late = got[0][0] - (t0 + 2)
    assert -SLACK < late < LATE, late
    assert sample(d, "cascade_records_untrusted_total",
                  stream="cancels") - before >= 4
    alive(d)


def test_a_forged_series_record_does_not_stop_a_repeat(d, users, guest):
    owner, attacker = users["p_only"], users["p_default"]
    q = guest.queue()
    mid = uid("every")
    t0 = owner.delayed(d.prefix, q, mid, "2s", **{"x-cascade-every": "1s",
                                                  "x-cascade-times": 3})
    rows = [m for m in wait_listed(d, [mid])["messages"]
            if m["id"] == mid]
    cid = rows[0]["cascade_id"]
    assert cid, rows
    # A later occurrence, with a token of the attacker's: every copy of
    # the real series would look stale.  In P.series, where the daemons
    # write them, and in P.cancels, where earlier versions did.
    for stream in (".series", ".cancels"):
        attacker.record(d.prefix + stream, "series", {
            "x-cascade-series": cid, "x-cascade-occurrence": 1000,
            "x-cascade-token": "forged",
            "x-cascade-until": now_ms() + 3600000})
    got = arrived(guest, q, 3, 2 + 2 + LATE + 1.5)
    assert [p.headers.get("x-cascade-occurrence") for _, p, _ in got] == \
        [1, 2, 3], got
    assert got[0][0] - (t0 + 2) > -SLACK
    assert total(d.metrics(), "cascade_series_stale_total") == 0


def test_a_forged_batch_does_not_deliver_an_attackers_body_as_alice(
        d, users, guest):
    """A batch of scheduled records written into P.events by a user with
    write on amq.default (and by one with write on everything), each
    carrying a copy of a body the attacker wrote, owned by 'alice'; then
    a reschedule to now, through P: nothing of it reaches alice's
    queue."""
    q = guest.queue()
    before = sample(d, "cascade_records_untrusted_total", stream="events")
    forged = []
    for attacker in (users["p_default"], users["everything"]):
        fid, cid = uid("forged"), hex16()
        due = now_ms() + 60000
        body = b"pay mallory, signed alice (" + fid.encode() + b")"
        inner = pika.BasicProperties(message_id=fid, delivery_mode=2,
                                     headers={
            "x-cascade-due": due, "x-cascade-exchange": "",
            "x-cascade-routing-key": q, "x-cascade-id": cid,
            "x-cascade-user-id": "alice",
            "x-cascade-since": now_ms() - 1000})
        # Owned by nobody on the outside, so anyone may reschedule it.
        attacker.batch(d.prefix + ".events", [scheduled(
            fid, cid, due, "", q, copy=envelope(inner, body),
            at=now_ms() - 1000)])
        forged.append((attacker, fid, body))
    for attacker, fid, _ in forged:
        attacker.publish(d.prefix, q, b"", {"x-cascade-reschedule": fid,
                                            "x-remaining-delay": "1s"},
                         user_id=attacker.name)
    got = arrived(guest, q, 1, 4)
    assert got == [], "delivered: %s" % [
        (bytes(b), p.headers) for _, p, b in got]
    assert sample(d, "cascade_records_untrusted_total",
                  stream="events") - before >= 2
    # Once per writer (and stream, at most), not once per record.
    for attacker, _, _ in forged:
        assert 1 <= untrusted_logged(d, attacker.name) <= 2, \
            d.log()[-3000:]


def test_cancel_is_not_fooled_by_a_forged_due_time_near_int64_max(
        d, users, guest):
    """cascade-ctl cancel sizes how long a request holds by the latest
    due time among the messages it names.  A forged scheduled record due
    near INT64_MAX must not make it say "cancelled" while the real message
    is delivered."""
    owner = users["p_only"]
    q = guest.queue()
    mid = uid("victim")
    t0 = owner.delayed(d.prefix, q, mid, "3s")
    wait_listed(d, [mid])
    users["p_default"].record(d.prefix + ".events", "scheduled", {
        "x-cascade-id": hex16(), "x-cascade-due": INT64_MAX - 1,
        "x-cascade-exchange": "", "x-cascade-routing-key": q,
        "x-cascade-size": 1}, message_id=mid)
    r = ctl(d, "cancel", mid, rc=None)
    got = arrived(guest, q, 1, max(0.5, t0 + 3 + LATE - time.time()))
    delivered = [p.message_id for _, p, _ in got] == [mid]
    said = "cascade-ctl said (exit %d): %s%s; the message was %s" % (
        r.returncode, r.stdout, r.stderr,
        "delivered" if delivered else "not delivered")
    if r.returncode == 0:
        assert "cancelled 1 waiting message" in r.stdout and \
            not delivered, said
    else:
        # It may say the id named nothing it could cancel; then the
        # message goes on, as it did before.
        assert r.returncode == 1 and "not recorded" in r.stderr and \
            delivered, said


# 3. Repeats cannot flood.

def test_a_repeat_first_due_in_1970_delivers_once_not_a_flood(
        d, users, guest):
    """x-deliver-at: 1 with every 1s: the missed occurrences collapse
    into one delivery that says how many were missed, then one a
    second."""
    owner = users["p_only"]
    q = guest.queue()
    mid = uid("flood")
    owner.publish(d.prefix, q, b"tick", {"x-deliver-at": 1,
                                         "x-cascade-every": "1s"},
                  message_id=mid, user_id=owner.name)
    try:
        got = arrived(guest, q, 50, 2.5)
    finally:
        ctl(d, "cancel", "--force", mid, rc=None)
        # Let what is still on its way arrive before the next test.
        wait_for(lambda: arrived(guest, q, 1000, 1.0) == [], 30,
                 "the repeat to stop after its cancel")
    assert 1 <= len(got) <= 4, "%d deliveries in 2.5 s" % len(got)
    missed = got[0][1].headers.get("x-cascade-missed")
    assert isinstance(missed, int) and missed > 1000000, got[0][1].headers


# 1 (cont.): the error queue takes what cascade parks, and only that is
# treated as parked.

def test_requeue_leaves_what_cascade_did_not_park(d2, users, guest):
    """Messages put into P.error by a user with write on amq.default,
    without x-cascade-error: `errors` shows no reason of cascade's for
    them, and `requeue` does not send them on as if cascade had parked
    them (one names a target and an owner)."""
    u = users["p_default"]
    q = guest.queue()
    planted = [uid("planted"), uid("planted")]
    u.publish("", d2.prefix + ".error", b"plain", message_id=planted[0])
    u.publish("", d2.prefix + ".error", b"as alice",
              {"x-target-exchange": "", "x-target-routing-key": q,
               "x-remaining-delay": 0, "x-cascade-user-id": "alice"},
              message_id=planted[1])
    wait_for(lambda: len(parked_by_id(d2, planted)) == 2, 10,
             "both in the error queue")
    rows = {m["message_id"]: m for m in errors(d2)}
    assert [rows[m]["reason"] for m in planted] == ["", ""], rows
    r = ctl(d2, "requeue", rc=None)
    assert "requeued 0" in r.stdout, r.stdout + r.stderr
    assert arrived(guest, q, 1, 2) == []
    assert sorted(parked_by_id(d2, planted)) == sorted(planted)


def test_a_request_put_into_p_requests_by_hand_is_parked(d, users):
    """P.requests takes only what a daemon moved there from P.ingress: a
    reschedule written straight into it by a user with write on
    amq.default, in the daemon's own envelope, is parked
    not_from_cascade and never recorded."""
    u = users["p_default"]
    planted, named = uid("planted"), uid("named")
    inner = b"".join(pika.BasicProperties(
        user_id=u.name, headers={"x-cascade-reschedule": named,
                                 "x-remaining-delay": "1s"}).encode())
    body = b"CSCE\x01" + struct.pack(">I", len(inner)) + inner
    for user_id in (u.name, None):
        u.publish("", d.prefix + ".requests", body,
                  {"x-cascade-due": now_ms() + 1000}, message_id=planted,
                  user_id=user_id,
                  content_type="application/vnd.cascade.envelope")
    wait_for(lambda: len(parked_by_id(d, [planted]).get(planted, [])) == 2,
             10, "both parked")
    assert all("not moved there by a daemon" in r
               for r in parked_by_id(d, [planted])[planted])
    assert [r for r in records(d.broker, d.prefix + ".cancels")
            if (r.headers or {}).get("x-cascade-reschedule") == named] == []
    alive(d)


def test_requeue_keeps_the_owner(d2, users, guest, broker, tmp_module):
    """A message parked on its way (its target exchange did not exist)
    is requeued once the exchange exists: it arrives still its
    publisher's (x-cascade-user-id), or stays parked; never anyone's.
    cascade-ctl publishes it with the owner's user-id, which RabbitMQ
    allows a user tagged impersonator."""
    owner = users["p_only"]
    ex = uid("ex-late")
    mid = uid("owned")
    owner.delayed(d2.prefix, "orders", mid, "1s",
                  **{"x-target-exchange": ex})
    wait_for(lambda: parked_by_id(d2, [mid]).get(mid), 10,
             "the message parked (no exchange)")
    guest.ch.exchange_declare(ex, "direct")
    q = guest.queue()
    guest.ch.queue_bind(q, ex, "orders")

    # guest may not publish as another user: the message stays parked.
    r = ctl(d2, "requeue", "--reason", ex, rc=1)
    line = [x for x in r.stdout.splitlines() if mid in x]
    assert len(line) == 1 and line[0].startswith("left") and \
        owner.name in line[0], r.stdout
    assert "requeued 0," in r.stdout, r.stdout
    assert arrived(guest, q, 1, 1.5) == []
    assert list(parked_by_id(d2, [mid])) == [mid]

    # An operator tagged impersonator may.
    op = d2.prefix + "-operator"
    broker.ctl("add_user", op, "pw-op")
    broker.ctl("set_user_tags", op, "impersonator")
    broker.ctl("set_permissions", "-p", "/", op, ".*", ".*", ".*")
    try:
        r = ctl_as(d2, tmp_module, op, "pw-op", "requeue", "--reason", ex)
        assert r.returncode == 0 and "requeued 1," in r.stdout, \
            (r.returncode, r.stdout, r.stderr)
    finally:
        broker.ctl("delete_user", op, check=False)
    got = arrived(guest, q, 1, 5)
    assert [p.message_id for _, p, _ in got] == [mid], got
    assert got[0][1].headers.get("x-cascade-user-id") == owner.name, \
        got[0][1].headers


# The permissions docs/security.md gives.

def test_the_documented_permissions_are_enough(d2, broker, tmp_module):
    """docs/security.md: a control user for cascade-ctl (write on P and
    amq.default, read on the streams and P.error, configure nothing) runs
    every command; a reader of the streams (read on them only) reads
    them."""
    p = d2.prefix.replace(".", r"\.")
    user, reader = d2.prefix + "-ctl", d2.prefix + "-reader"
    broker.ctl("add_user", user, "pw-ctl")
    broker.ctl("set_permissions", "-p", "/", user, "^$",
               r"^(%s|amq\.default)$" % p,
               r"^%s\.(events|cancels|error)$" % p)
    broker.ctl("add_user", reader, "pw-reader")
    broker.ctl("set_permissions", "-p", "/", reader, "^$", "^$",
               r"^%s\.(events|cancels|series)$" % p)
    try:
        for args, rc in ((["status"], 0), (["errors"], 0), (["list"], 0),
                         (["cancel", "--force", uid("any")], 0),
                         (["reschedule", "--force", "--delay", "1m",
                           uid("any")], 0),
                         (["requeue", "--dry-run"], None)):
            r = ctl_as(d2, tmp_module, user, "pw-ctl", *args)
            # requeue exits 1 for what another test left in P.error.
            assert rc is None or r.returncode == rc, (
                args, r.returncode, r.stdout, r.stderr)
            assert "ACCESS_REFUSED" not in r.stdout + r.stderr, r.stderr
        assert "dry run: would requeue" in r.stdout, r.stdout
        params = pika.URLParameters(broker.url)
        params.credentials = pika.PlainCredentials(reader, "pw-reader")
        for stream in (".events", ".cancels", ".series"):
            got = []

            def on_message(c, m, pr, b, got=got):
                got.append(pr)
                c.basic_ack(m.delivery_tag)

            # A connection per stream: whatever is left unread when it
            # closes, pika nacks, and a stream answers a nack by closing
            # the connection.
            conn = pika.BlockingConnection(params)
            try:
                ch = conn.channel()
                ch.basic_qos(prefetch_count=10)
                ch.basic_consume(d2.prefix + stream, on_message,
                                 arguments={"x-stream-offset": "first"})
                deadline = time.time() + 5
                while not got and time.time() < deadline:
                    conn.process_data_events(time_limit=0.1)
            finally:
                try:
                    conn.close()
                except Exception:
                    pass
            assert got, "nothing read from " + stream
    finally:
        broker.ctl("delete_user", user, check=False)
        broker.ctl("delete_user", reader, check=False)


# 1 (cont.): depth bombs.

def nested_tables(depth):
    """A table entry "a" whose value is a table nesting depth levels
    (each level: key, 'F', 4-byte length), as bytes, built without
    recursion."""
    return b"".join(b"\x01aF" + struct.pack(">I", 7 * (depth - k - 1))
                    for k in range(depth))


def nested_arrays(depth):
    """A field value: an array nesting depth levels ('A', 4-byte
    length; 5 bytes a level)."""
    return b"".join(b"A" + struct.pack(">I", 5 * (depth - k - 1))
                    for k in range(depth))


def shortstr(s):
    b = s.encode()
    return bytes([len(b)]) + b


def longstr_entry(key, value):
    v = value.encode()
    return shortstr(key) + b"S" + struct.pack(">I", len(v)) + v


def long_entry(key, value):
    return shortstr(key) + b"l" + struct.pack(">q", value)


def raw_record(kind, entries):
    """A record's properties as bytes: headers (entries, already
    encoded) and type; property flags 0x2000 | 0x0020."""
    table = b"".join(entries)
    return (struct.pack(">H", 0x2020) + struct.pack(">I", len(table)) +
            table + shortstr(kind))


def test_depth_bombs_in_the_streams_crash_nothing(d2, users, guest):
    """A scheduled record nested 200,000 levels deep in a batch in
    P.events, and a cancel record in P.cancels whose headers nest as deep
    as one frame allows: the daemon reads both (a request published to P
    makes it read each stream past them) and lives; cascade-ctl list
    reads P.events and exits 0."""
    u = users["everything"]
    # P.cancels: one frame is 131,072 bytes; the content header takes 20.
    depth = (131072 - 20 - 200) // 5
    entries = [longstr_entry("x-cascade-cancel", uid("bomb")),
               long_entry("x-cascade-until", now_ms() + 3600000),
               long_entry("x-cascade-at", now_ms()),
               shortstr("x-bomb") + nested_arrays(depth)]
    u.publish("", d2.prefix + ".cancels", b"",
              props=RawProperties(raw_record("cancel", entries)))
    # The daemon reads P.cancels past it: a cancellation published to P
    # after it is read back (msg=cancellation).
    probe = uid("probe")
    guest.publish(d2.prefix, "x", b"", {"x-cascade-cancel": probe})
    d2.wait_log('msg=cancellation id="%s"' % probe, 15)
    alive(d2)

    # P.events: a batch whose one record nests 200,000 tables (1.4 MB).
    rec = raw_record("scheduled", [
        longstr_entry("x-cascade-id", hex16()),
        long_entry("x-cascade-due", now_ms() + 60000),
        long_entry("x-cascade-at", now_ms()),
        shortstr("x-bomb") + b"F" + struct.pack(">I", 7 * 200000) +
        nested_tables(200000)])
    body = struct.pack(">I", len(rec)) + rec
    u.publish("", d2.prefix + ".events", body, type="batch",
              delivery_mode=2, headers={"x-cascade-records": 1,
                                        "x-cascade-at": now_ms()})
    # cascade-ctl list reads P.events from its first record.
    r = ctl(d2, "list", rc=None)
    # A reschedule published to P makes the daemon read P.events.
    probe = uid("probe")
    guest.publish(d2.prefix, "x", b"", {"x-cascade-reschedule": probe,
                                        "x-remaining-delay": "1m"})
    wait_for(lambda: 'msg=reschedule_copies id="%s"' % probe in d2.log()
             or d2.proc.poll() is not None, 15,
             "the daemon to read P.events for the reschedule")
    died = d2.proc.poll()
    assert died is None and r.returncode == 0, \
        "the daemon %s; cascade-ctl list exited %s: %s" % (
            "lives" if died is None else "died (%s)" % died, r.returncode,
            r.stderr[-1000:])
    alive(d2)
    assert scrape(d2.metrics_url())["cascade_connected"] == 1
