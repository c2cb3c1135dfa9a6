# SPDX-License-Identifier: Apache-2.0
"""cascade-ctl: status of the ladder, the parked messages and their requeue,
against the real daemon on a private RabbitMQ."""
import datetime
import json
import subprocess
import time
import uuid

import pytest

from helpers import (CTL, PUBLISH, ctl, parked, status, target, wait_parked,
                     wait_status)


def test_status_lists_the_ladder_and_where_a_message_waits(client, daemon):
    s = status(daemon)
    p = daemon.prefix
    ttls = [100 * 2 ** k for k in range(8)]  # the fast test ladder
    assert [lv["queue"] for lv in s["levels"]] == [
        "%s.delay.%d" % (p, t) for t in ttls]
    assert [lv["ttl_ms"] for lv in s["levels"]] == ttls
    assert all(lv["messages"] == 0 and lv["consumers"] == 0 and
               not lv["missing"] for lv in s["levels"])
    assert s["ingress"]["queue"] == p + ".ingress"
    assert s["return"]["queue"] == p + ".return"
    assert s["retry"]["queue"] == p + ".retry"
    assert s["error"]["queue"] == p + ".error"
    assert s["requests"]["queue"] == p + ".requests"
    assert s["ingress"]["consumers"] == 1
    assert s["requests"]["consumers"] == 1
    assert s["return"]["consumers"] == 1
    assert s["error"]["consumers"] == 0
    assert s["ladder_messages"] == 0 and s["missing"] == 0

    # 60 s is more than the top level, 12.8 s: the first hop is the top.
    q = client.queue()
    client.publish(p, q, b"later", {"x-remaining-delay": "60s"})
    s = wait_status(daemon, lambda s: s["ladder_messages"] == 1, timeout=10,
                    what="the message in the ladder")
    assert [lv["messages"] for lv in s["levels"]] == [0] * 7 + [1], s
    assert s["ladder_messages"] == 1

    out = ctl(daemon, "status").stdout
    for lv in s["levels"]:
        assert lv["queue"] in out
    for name in ("ingress", "return", "retry", "error", "requests"):
        assert "%s.%s" % (p, name) in out
    assert "12800ms" in out
    assert "1 message waiting in the ladder" in out


def test_status_says_which_queues_are_missing(daemon_factory):
    d = daemon_factory(start=False)  # nothing declared for its prefix
    r = ctl(d, "status", "--json")
    s = json.loads(r.stdout)
    assert all(lv["missing"] for lv in s["levels"])
    assert s["ingress"]["missing"] and s["error"]["missing"]
    assert s["requests"]["missing"]
    # 8 levels; ingress, return, retry, error, requests
    assert s["missing"] == 8 + 5
    assert "missing" in r.stderr
    assert "missing" in ctl(d, "status").stdout
    r = ctl(d, "errors", rc=1)
    assert d.prefix + ".error does not exist" in r.stderr


def test_errors_lists_a_parked_message_and_leaves_it(client, daemon):
    ex = "ex-" + uuid.uuid4().hex[:8]  # does not exist
    sent = client.publish(daemon.prefix, "orders", b"payload \x01 " * 10,
                          {"x-remaining-delay": 1000,
                           "x-target-exchange": ex},
                          message_id="m-1")
    wait_parked(daemon, 1)

    text = ctl(daemon, "errors").stdout
    assert "1 parked message" in text
    assert "target exchange '%s' does not exist" % ex in text
    assert "exchange '%s', routing key 'orders'" % ex in text
    assert "message-id: m-1" in text
    assert "payload \\x01 payload" in text

    e = parked(daemon)
    assert e["total"] == 1 and e["shown"] == 1
    m = e["messages"][0]
    assert ex in m["reason"] and "does not exist" in m["reason"]
    assert m["exchange"] == ex and m["routing_key"] == "orders"
    assert m["message_id"] == "m-1" and m["queue"] is None
    assert m["body_bytes"] == 100 and m["body"] == ("payload \x01 " * 6)[:60]
    due = datetime.datetime.strptime(m["due"], "%Y-%m-%dT%H:%M:%S.%fZ")
    due = due.replace(tzinfo=datetime.timezone.utc).timestamp()
    assert abs(due - (sent + 1)) < 1, (due, sent)
    assert m["due_ms"] == round(due * 1000)

    # Still there, and shown again the same (but for the count of looks
    # a quorum queue keeps).
    ok = client.ch.queue_declare(daemon.prefix + ".error", passive=True)
    assert ok.method.message_count == 1
    again = parked(daemon)["messages"]
    for x in again + e["messages"]:
        x.pop("delivery_count")
    assert again == e["messages"]


def test_errors_writes_no_publisher_byte_to_the_terminal_raw(client, daemon):
    """A message-id and routing key holding ESC, BEL, CR and LF, parked
    for a bad delay (issue 47): every line `errors` prints escapes them as
    `list` does, so a publisher can neither colour nor retitle the
    operator's terminal, nor print a line of its own."""
    evil = "escp\x1b[31mRED\x1b]0;title\x07\r\nFAKE-LINE"
    client.ch.queue_declare("")
    client.ch.basic_publish(daemon.prefix, evil, b"body",
                            __import__("pika").BasicProperties(
                                headers={"x-remaining-delay": "soon" + evil},
                                message_id=evil))
    wait_parked(daemon, 1)
    out = ctl(daemon, "errors").stdout
    raw = [c for c in out if ord(c) < 0x20 and c != "\n" or c == "\x7f"]
    assert raw == [], repr(out)
    lines = out.splitlines()
    assert not any(line.startswith("FAKE-LINE") for line in lines), out
    escaped = "escp\\x1b[31mRED\\x1b]0;title\\x07\\x0d\\x0aFAKE-LINE"
    assert "message-id: " + escaped in out, out
    assert "routing key '%s'" % escaped in out, out
    # The reason names the value refused, escaped as a quoted string.
    assert '#1 x-remaining-delay "soonescp\\x1b[31mRED\\x1b]0;title' \
        '\\x07\\r\\nFAKE-LINE": ' in out, out


def test_requeue_right_after_errors_takes_every_message(client, daemon):
    # `errors` gives its look back with a nack, which a quorum queue applies
    # through its log: the next command must still find every message.
    ex = "ex-" + uuid.uuid4().hex[:8]
    for i in range(20):
        client.publish(daemon.prefix, "orders", b"m%d" % i,
                       {"x-remaining-delay": 0, "x-target-exchange": ex})
    wait_parked(daemon, 20)
    client.ch.exchange_declare(ex, "direct")
    q = client.queue()
    client.ch.queue_bind(q, ex, "orders")

    assert "20 parked messages" in ctl(daemon, "errors").stdout
    assert "requeued 20, left 0" in ctl(daemon, "requeue").stdout
    got = client.collect(q, 20, timeout=15)
    assert sorted(m[2] for m in got) == sorted(b"m%d" % i for i in range(20))


def test_requeue_delivers_once_the_target_exists(client, daemon):
    ex = "ex-" + uuid.uuid4().hex[:8]
    client.publish(daemon.prefix, "orders", b"hello",
                   {"x-remaining-delay": 1000, "x-target-exchange": ex,
                    "tenant": "acme", "n": 7},
                   message_id="m-1", correlation_id="c-1",
                   content_type="text/plain", expiration="60000",
                   delivery_mode=2)
    wait_parked(daemon, 1)
    client.ch.exchange_declare(ex, "direct")
    q = client.queue()
    client.ch.queue_bind(q, ex, "orders")

    r = ctl(daemon, "requeue")
    assert "requeued 1, left 0" in r.stdout
    got = client.collect(q, 1, timeout=15)
    assert len(got) == 1
    _, props, body = got[0]
    assert body == b"hello"
    assert props.headers == {"tenant": "acme", "n": 7}
    assert props.message_id == "m-1" and props.correlation_id == "c-1"
    assert props.content_type == "text/plain"
    assert props.expiration == "60000"
    assert props.delivery_mode == 2
    assert status(daemon)["error"]["messages"] == 0


@pytest.mark.slow
def test_requeue_keeps_a_due_time_still_ahead(client, daemon_factory):
    """Parked on the way (here: its target was no longer allowed when it
    came back from a delay queue), then requeued before its due time: it
    waits for the rest of its delay, not a moment less."""
    ladder = {"topology": {"resolution": "1s", "factor": "2",
                           "levels": "3"}}  # 1s, 2s, 4s
    a = daemon_factory(ladder)
    ex, q = target(client)
    sent = client.publish(a.prefix, "orders", b"on time",
                          {"x-remaining-delay": "15s",
                           "x-target-exchange": ex})
    due = sent + 15
    # The first hop is the 4 s level; take the daemon away meanwhile.
    wait_status(a, lambda s: s["levels"][2]["messages"] == 1, timeout=10,
                what="the message in the 4 s level")
    assert a.stop() == 0
    b = daemon_factory({**ladder, "router": {"allowed_targets": "amq.*"}},
                       prefix=a.prefix)
    wait_parked(b, 1)
    assert b.stop() == 0
    m = parked(b)["messages"][0]
    assert "allowed" in m["reason"]
    assert abs(m["due_ms"] / 1000 - due) < 1

    c = daemon_factory(ladder, prefix=a.prefix)
    requeued = time.time()
    r = ctl(c, "requeue")
    assert "requeued 1, left 0" in r.stdout
    assert requeued < due - 2, "the machine was too slow for this test"
    got = client.collect(q, 1, timeout=30)
    assert len(got) == 1 and got[0][2] == b"on time"
    assert got[0][0] >= due, "delivered %.3fs early" % (due - got[0][0])
    assert got[0][1].headers in (None, {})


@pytest.mark.parametrize("queue_type", ["quorum", "classic"])
def test_requeue_with_reason_leaves_the_others(client, daemon_factory,
                                               queue_type):
    daemon = daemon_factory({"topology": {"queue_type": queue_type}})
    exs = ["ex-a-" + uuid.uuid4().hex[:8], "ex-b-" + uuid.uuid4().hex[:8]]
    for i, ex in enumerate(exs):
        client.publish(daemon.prefix, "orders", b"m%d" % i,
                       {"x-remaining-delay": 1000, "x-target-exchange": ex},
                       message_id="m%d" % i)
    wait_parked(daemon, 2)
    queues = []
    for ex in exs:
        client.ch.exchange_declare(ex, "direct")
        queues.append(client.queue())
        client.ch.queue_bind(queues[-1], ex, "orders")

    # A dry run sends nothing.  (The two were due within a millisecond of
    # each other, so they may have been parked in either order.)
    r = ctl(daemon, "requeue", "--dry-run")
    assert "would requeue 2, left 0" in r.stdout
    assert sorted(m["message_id"] for m in parked(daemon)["messages"]) == [
        "m0", "m1"]

    r = ctl(daemon, "requeue", "--reason", "'%s'" % exs[0])
    assert "requeued 1, left 1" in r.stdout
    got = client.collect(queues[0], 1, timeout=15)
    assert [b for _, _, b in got] == [b"m0"]
    e = parked(daemon)
    assert [m["message_id"] for m in e["messages"]] == ["m1"]
    assert exs[1] in e["messages"][0]["reason"]
    assert client.drain(queues[1]) == []

    r = ctl(daemon, "requeue", "--reason", "no such reason")
    assert "requeued 0, left 1" in r.stdout
    assert parked(daemon)["total"] == 1


def test_requeue_sends_a_retry_that_gave_up_back_to_its_queue(client,
                                                              daemon_factory):
    d = daemon_factory({"retry": {"max_retries": "0"}})
    work = client.queue(**{"x-dead-letter-exchange": d.prefix + ".retry"})
    client.publish("", work, b"job", {"tenant": "acme"}, message_id="j1")
    m, _, _ = client.ch.basic_get(work)
    client.ch.basic_reject(m.delivery_tag, requeue=False)
    wait_parked(d, 1)
    e = parked(d)["messages"][0]
    assert e["queue"] == work and "gave up" in e["reason"]

    r = ctl(d, "requeue")
    assert "requeued 1, left 0" in r.stdout
    got = client.collect(work, 1, timeout=15)
    assert len(got) == 1 and got[0][2] == b"job"
    assert got[0][1].headers == {"tenant": "acme"}
    assert got[0][1].message_id == "j1"


def test_requeue_never_misroutes_a_message_without_its_routing_key(
        client, daemon):
    """Delivered straight from ingress, a message whose target is missing
    is parked with the publisher's own headers; without
    x-target-routing-key none of them says which routing key it had, and
    the error queue's name is the routing key it has there.  The daemon
    records the publisher's key (x-cascade-routing-key) when it parks a
    message on first sight, so the requeue sends it to its target by that
    key, and nowhere else."""
    ex = "ex-" + uuid.uuid4().hex[:8]
    client.publish(daemon.prefix, "orders", b"now",
                   {"x-remaining-delay": 0, "x-target-exchange": ex})
    wait_parked(daemon, 1)
    client.ch.exchange_declare(ex, "direct")
    q = client.queue()
    client.ch.queue_bind(q, ex, "orders")
    # Where a requeue that took the error queue's routing key would go.
    stray = client.queue()
    client.ch.queue_bind(stray, ex, daemon.prefix + ".error")

    m = parked(daemon)["messages"][0]
    assert m["exchange"] == ex and m["routing_key"] == "orders", m
    r = ctl(daemon, "requeue")
    assert "requeued 1, left 0" in r.stdout
    got = client.collect(q, 1, timeout=15)
    assert [b for _, _, b in got] == [b"now"]
    s = wait_status(daemon, lambda s: s["error"]["messages"] == 0,
                    what="the error queue empty after the requeue")
    assert s["error"]["messages"] == 0, s["error"]
    assert client.drain(stray) == []


def test_requeue_leaves_a_message_whose_routing_key_was_not_recorded(
        client, daemon):
    """A parked message that names its target exchange but no routing key
    (here put into the error queue by hand, as a cascade from before the
    key was recorded left it) is not guessed at: requeue leaves it in
    P.error and exits 1."""
    ex, q = target(client)
    error = daemon.prefix + ".error"
    client.publish("", error, b"old",
                   {"x-target-exchange": ex,
                    "x-cascade-error": "target exchange '%s' does not "
                                       "exist" % ex})
    wait_parked(daemon, 1)
    m = parked(daemon)["messages"][0]
    assert m["exchange"] == ex and m["routing_key"] is None, m

    r = ctl(daemon, "requeue", rc=1)
    assert "not recorded" in r.stdout and "left 1" in r.stdout
    wait_parked(daemon, 1)
    assert parked(daemon)["messages"][0]["routing_key"] is None
    assert client.drain(q) == []


def test_usage_errors_exit_2(daemon_factory):
    d = daemon_factory(start=False)
    assert ctl(d, rc=2).stderr
    assert "unknown command" in ctl(d, "frobnicate", rc=2).stderr
    assert ctl(d, "status", "--reason", "x", rc=2).stderr
    assert ctl(d, "errors", "--limit", "0", rc=2).stderr
    r = subprocess.run([CTL, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "requeue" in r.stdout


def test_a_date_that_does_not_exist_is_refused(daemon):
    """2026-02-31 is not 3 March: list and cascade-publish say so and exit
    2; 29 February of a leap year is a date."""
    d = daemon
    for bad, day in (("2026-02-31T09:00:00Z", "no day 31 in 2026-02"),
                     ("2025-02-29T00:00:00Z", "no day 29 in 2025-02"),
                     ("2026-04-31T00:00:00Z", "no day 31 in 2026-04")):
        assert day in ctl(d, "list", "--due-before", bad, rc=2).stderr
        r = subprocess.run([PUBLISH, "-c", d.config, "--at", bad, "--body",
                            "x"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and day in r.stderr, r
    assert ctl(d, "list", "--due-after", "2028-02-29T00:00:00Z").returncode == 0
