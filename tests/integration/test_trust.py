# SPDX-License-Identifier: Apache-2.0
"""Trust boundaries (issue 34, docs/security.md): what is put into
cascade's own queues and streams by hand, or aimed at them.  Messages
aimed at cascade's streams and queues, hops forged into its return and
holding queues, messages planted in its error queue and requests in
P.requests, and depth bombs in its streams; and that the permissions
docs/security.md gives are enough.  Each attack tried as a real broker
user would, on a private RabbitMQ, asserting what that user, or the one
attacked, would check; the users and daemons are trust.py's.  Records
forged into the streams, and another user's requests and ids, are
test_trust_records.py's."""
import os
import struct
import time

import pika
import pika.exceptions
import pytest

from helpers import ctl, scrape, wait_for
# d, d2, guest, tmp_module, users: fixtures, imported to be used here.
from trust import (alive, arrived, ctl_as, d, d2, envelope, errors, guest,
                   hex16, now_ms, parked_by_id, sample, start_daemon,
                   stop_daemon, tmp_module, users)
from waiting import records, uid, wait_listed


# 1. cascade never delivers into what it owns.

def test_a_target_naming_cascades_own_queues_is_parked_not_delivered(
        d, users, guest):
    """A publisher with write on P only aims messages at cascade's own
    streams and queues, by the default exchange and by name: none lands
    there; each is parked, once, with a reason, as bad_target."""
    p = d.prefix
    targets = [("", p + ".events"), ("", p + ".cancels"),
               ("", p + ".series"), ("", p + ".copies"),
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
              for s in (".events", ".cancels", ".series", ".copies")}
    assert landed == {".events": [], ".cancels": [], ".series": [],
                      ".copies": []}, landed
    # Each parked once, saying why (an x-cascade-error).
    assert all(len(got.get(m, [])) == 1 and got[m][0] for m in mids), \
        "not each parked once with a reason: %s" % {
            m: got.get(m) for m in mids}
    assert sample(d, "cascade_messages_parked_total",
                  reason="bad_target") - before == len(targets)
    assert arrived(guest, q, 1, 0.5) == [], "the CC'd message delivered"
    alive(d)


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

def test_the_documented_permissions_are_enough(broker, tmp_module, guest):
    """docs/security.md: a control user for cascade-ctl (write on P and
    amq.default, read on the streams and P.error, configure nothing),
    named in the daemons' control_users, runs every command, and moves a
    waiting message earlier with its copy; a reader of the streams (read
    on P.events, P.cancels and P.series only) reads them, and not the
    bodies in P.copies."""
    user = "documented-ctl-" + uid("u")
    reader = "documented-reader-" + uid("u")
    d3 = start_daemon(broker, tmp_module,
                      events={"control_users": "guest, " + user})
    p = d3.prefix.replace(".", r"\.")
    broker.ctl("add_user", user, "pw-ctl")
    broker.ctl("set_permissions", "-p", "/", user, "^$",
               r"^(%s|amq\.default)$" % p,
               r"^%s\.(events|cancels|copies|error)$" % p)
    broker.ctl("add_user", reader, "pw-reader")
    broker.ctl("set_permissions", "-p", "/", reader, "^$", "^$",
               r"^%s\.(events|cancels|series)$" % p)
    q = guest.queue()
    mid = uid("moved")
    guest.publish(d3.prefix, q, b"moved whole", {"x-remaining-delay": "1h"},
                  message_id=mid)
    wait_listed(d3, [mid])
    try:
        for args, rc in ((["status"], 0), (["errors"], 0), (["list"], 0),
                         (["cancel", "--force", uid("any")], 0),
                         (["reschedule", "--force", "--delay", "1m",
                           uid("any")], 0),
                         (["reschedule", "--delay", "1s", mid], 0),
                         (["requeue", "--dry-run"], None)):
            r = ctl_as(d3, tmp_module, user, "pw-ctl", *args)
            assert rc is None or r.returncode == rc, (
                args, r.returncode, r.stdout, r.stderr)
            assert "ACCESS_REFUSED" not in r.stdout + r.stderr, r.stderr
        # Moved from an hour to a second: only its copy brings it then.
        got = arrived(guest, q, 1, 10)
        assert [(p_.message_id, bytes(b)) for _, p_, b in got] == \
            [(mid, b"moved whole")], got
        params = pika.URLParameters(broker.url)
        params.credentials = pika.PlainCredentials(reader, "pw-reader")
        conn = pika.BlockingConnection(params)
        try:
            with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
                conn.channel().basic_consume(
                    d3.prefix + ".copies", lambda *a: None,
                    arguments={"x-stream-offset": "first"})
            assert e.value.reply_code == 403, e.value
        finally:
            try:
                conn.close()
            except Exception:
                pass
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
                ch.basic_consume(d3.prefix + stream, on_message,
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
        stop_daemon(d3)


# 1 (cont.): depth bombs.

class RawProperties(pika.BasicProperties):
    """Properties pika sends as given bytes (flags and fields as in a
    content header): pika's own encoder recurses, and a depth bomb is
    deeper than Python's recursion limit."""

    def __init__(self, raw):
        super().__init__()
        self.raw = raw

    def encode(self):
        return [self.raw]


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
