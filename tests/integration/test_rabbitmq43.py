# SPDX-License-Identifier: Apache-2.0
"""What RabbitMQ 4.3 changes for cascade, on the real broker (and held to
on 3.10 and 4.0 alike where it applies): the consumer timeout enforced
inside quorum queues, Khepri as the metadata store, the delivery-limit
rules and the deprecated features (docs/CONTRACT.md section 9)."""
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from helpers import (BROKER_SCRIPT, Broker, Client, Daemon, broker_version,
                     ctl, wait_for)


@pytest.fixture(scope="module")
def timeout_broker():
    """A broker of its own, where only cascade and durable queues run,
    whose consumers time out after 5 s (`consumer_timeout`, RabbitMQ's
    default is 30 min)."""
    directory = tempfile.mkdtemp(prefix="cascade-ct-")
    env = dict(os.environ, RABBITMQ_PRIVATE_CONF="consumer_timeout = 5000")
    out = subprocess.run([BROKER_SCRIPT, "start", directory], check=True,
                         capture_output=True, text=True, timeout=150, env=env)
    b = Broker(directory, out.stdout.strip())
    yield b
    subprocess.run([BROKER_SCRIPT, "stop", directory], capture_output=True,
                   timeout=120)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.slow
def test_consumer_timeout_loses_nothing_and_sticks_nothing(timeout_broker,
                                                           tmp_path):
    """consumer_timeout = 5 s, and the daemon holds longer than that: 20
    messages whose tails (6-7.5 s on an 8 s resolution) wait in its memory,
    and 20 more for a target that refuses them for 12 s.  RabbitMQ 4.3
    takes the held deliveries back from inside the quorum queue after 5 s
    (older brokers check on a 60 s channel tick, so may not): the daemon
    reconnects and holds them again.  All 40 arrive, none early, none
    later than 10 s past due, and the broker is left with nothing
    unacknowledged."""
    broker = timeout_broker
    version = broker_version(broker)
    d = Daemon(broker, str(tmp_path), {
        "topology": {"resolution": "8s", "factor": "2", "levels": "3"},
        "router": {"target_backoff_max": "2s", "max_redeliveries": "1000"},
    })
    d.start()
    client = Client(broker)
    # Durable: this broker also answers the deprecated-features check.
    held_target = "held-" + d.prefix
    full_target = "full-" + d.prefix
    try:
        client.ch.queue_declare(held_target, durable=True)
        client.ch.queue_declare(full_target, durable=True, arguments={
            "x-max-length": 1, "x-overflow": "reject-publish"})
        client.publish("", full_target, b"blocker")
        now = time.time()
        due = {}
        for i in range(20):
            at = now + 6 + 1.5 * i / 20
            body = b"held-%d" % i
            due[body] = at
            client.publish(d.prefix, held_target, body,
                           {"x-deliver-at": int(at * 1000)})
        for i in range(20):
            body = b"refused-%d" % i
            due[body] = now
            client.publish(d.prefix, full_target, body,
                           {"x-remaining-delay": 0})

        got = client.collect(held_target, 20, 25)
        # The refusing target takes them again once it has room.
        time.sleep(max(0.0, now + 12 - time.time()))
        assert [b for _, _, b in client.drain(full_target)] == [b"blocker"]
        got += client.collect(full_target, 20, 40)

        bodies = [b for _, _, b in got]
        assert set(bodies) == set(due), \
            "missing: %s" % sorted(set(due) - set(bodies))
        for t, _, b in got:
            assert t >= due[b] - 0.001, "%s early by %.3f s" % (b, due[b] - t)
        late = [(b, t - due[b]) for t, _, b in got
                if b.startswith(b"held") and t - due[b] > 10]
        assert not late, late

        if version >= (4, 3):
            # The timeout did happen: the broker cancelled a consumer
            # that held deliveries past 5 s (cascade announces
            # consumer_cancel_notify), and the daemon consumed again.
            assert "cancelled by the broker" in d.log(), d.log()[-3000:]
            assert d.log().count("msg=ready") >= 2

        # Nothing left unacknowledged or waiting anywhere.
        def settled():
            rows = [n for name, n in broker.queue_counts().items()
                    if name.startswith(d.prefix + ".") and
                    name.split(".")[-1] not in ("events", "cancels",
                                                "series", "copies")]
            return rows and all(n[1] == 0 and n[2] == 0 for n in rows)

        # A quorum queue's counts change at its tick, every few seconds;
        # each look is an erl_call (helpers.Broker.eval).
        wait_for(settled, 30, "every cascade queue empty and acknowledged",
                 every=0.5)
    finally:
        for q in (held_target, full_target):
            client.ch.queue_delete(q)
        client.close()
        d.stop()


def test_metadata_store(broker, daemon, client):
    """RabbitMQ 4.3 keeps its metadata in Khepri only (Mnesia is gone);
    4.0 in Mnesia unless khepri_db was enabled.  cascade's declarations,
    its target-exchange lookups (a passive exchange.declare that fails
    with 404 on a missing exchange) and its deliveries work on either."""
    version = broker_version(broker)
    flags = broker.ctl("list_feature_flags", "name", "state").stdout
    khepri = re.search(r"^khepri_db\s+enabled", flags, re.M) is not None
    if version >= (4, 3):
        assert khepri, flags
    elif version < (4, 0):
        assert "khepri_db" not in flags

    target = client.queue()
    client.publish(daemon.prefix, target, b"on-time",
                   {"x-remaining-delay": 300})
    client.publish(daemon.prefix, "x", b"lost-exchange",
                   {"x-remaining-delay": 300,
                    "x-target-exchange": "no-such-exchange"})
    assert [b for _, _, b in client.collect(target, 1, 10)] == [b"on-time"]
    wait_for(lambda: "no-such-exchange" in daemon.log(), 10,
             "the missing exchange parked")
    parked = client.collect(daemon.prefix + ".error", 1, 10)
    assert [b for _, _, b in parked] == [b"lost-exchange"]
    assert "does not exist" in parked[0][1].headers["x-cascade-error"]


def test_delivery_limit_arguments(broker, daemon):
    """From 4.0 a quorum queue drops (or dead-letters) a message returned
    past its delivery limit, 20 by default; cascade declares the queues it
    consumes with x-delivery-limit = -1 (unlimited).  3.10 would read -1
    as "drop at once", so there it is left out."""
    version = broker_version(broker)
    out = broker.ctl("list_queues", "name", "arguments",
                     "--no-table-headers", "--quiet").stdout
    args = {}
    for line in out.splitlines():
        name, _, rest = line.partition("\t")
        if name.startswith(daemon.prefix + "."):
            args[name] = rest
    for q in ("ingress", "return", "retry", "error"):
        name = "%s.%s" % (daemon.prefix, q)
        assert name in args, out
        has = re.search(r"x-delivery-limit\D+-1\b", args[name]) is not None
        assert has == (version >= (4, 0)), (name, args[name])
    for name, a in args.items():
        if ".delay." in name:
            # Nothing consumes a delay queue: it needs no limit.
            assert "x-delivery-limit" not in a, (name, a)


# Slow: a broker of its own, where nothing but cascade has run.
@pytest.mark.slow
def test_no_deprecated_feature_is_used(timeout_broker, tmp_path):
    """`rabbitmq-diagnostics check_if_any_deprecated_features_are_used`
    passes on a broker where cascade alone runs, its topology declared and
    its commands used.  (`rabbitmqctl list_deprecated_features --used`
    cannot tell: on 4.0.5 and 4.3.6 it prints an empty list whatever is
    used.)  The check is shown to fail for a transient non-exclusive queue,
    the one such feature it detects, which 4.3.6 still accepts."""
    broker = timeout_broker
    version = broker_version(broker)
    if version < (4, 0):
        r = broker.ctl("list_deprecated_features", check=False)
        assert r.returncode != 0  # 3.10 has no deprecated features yet
        return
    d = Daemon(broker, str(tmp_path))
    d.start()
    client = Client(broker)
    target = "durable-" + d.prefix
    try:
        client.ch.queue_declare(target, durable=True)
        client.publish(d.prefix, target, b"x", {"x-remaining-delay": 200})
        assert [b for _, _, b in client.collect(target, 1, 10)] == [b"x"]
        for cmd in (["status"], ["list"], ["errors"]):
            ctl(d, *cmd)

        def check():
            return subprocess.run(
                [BROKER_SCRIPT, "diag", broker.dir,
                 "check_if_any_deprecated_features_are_used"],
                capture_output=True, text=True, timeout=120)

        r = check()
        assert r.returncode == 0, r.stdout + r.stderr
        client.ch.queue_declare("transient-" + d.prefix, durable=False)
        try:
            r = check()
            assert r.returncode != 0 and "transient" in \
                (r.stdout + r.stderr), r.stdout + r.stderr
        finally:
            client.ch.queue_delete("transient-" + d.prefix)
    finally:
        client.ch.queue_delete(target)
        client.close()
        d.stop()
