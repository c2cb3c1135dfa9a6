# SPDX-License-Identifier: Apache-2.0
"""What RabbitMQ 4.x changed, held to on 3.10 and 4.x alike
(docs/CONTRACT.md section 9).

On 4.0-4.2 a quorum queue counts every return of a message (basic.nack
with requeue, or a channel closed while holding it) and, past its delivery
limit of 20, drops it when it has no dead-letter target.  Nothing cascade
holds or parks may be lost that way."""
import json
import os
import re
import shlex
import signal
import time

import pytest

from helpers import ctl, metrics_daemon, scrape, wait_for


@pytest.mark.slow
def test_daemon_killed_25_times_while_holding_messages_loses_none(
        client, daemon_factory):
    """50 messages held in the daemon's memory (a 25 s tail on a 40 s
    resolution) while it is killed with SIGKILL 25 times: each kill returns
    them to P.ingress.  All 50 arrive, once each, never early."""
    sections = {"topology": {"resolution": "40s", "factor": "2",
                             "levels": "2"},
                # The redelivery guard would park them at 10: this test is
                # about the broker's limit, not ours.
                "router": {"max_redeliveries": "1000"}}
    d, url = metrics_daemon(daemon_factory, **sections)
    target = client.queue()
    due = time.time() + 25
    for i in range(50):
        client.publish(d.prefix, target, b"m%d" % i,
                       {"x-deliver-at": int(due * 1000)})
    def held():
        try:
            return scrape(url).get("cascade_held_messages")
        except OSError:  # not listening yet
            return None

    for kill in range(25):
        wait_for(lambda: held() == 50, 20,
                 "50 held messages before kill %d" % (kill + 1))
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait()
        d.logfile.close()
        d.start()
    got = client.collect(target, 60, due - time.time() + 15)
    bodies = [b for _, _, b in got]
    assert sorted(set(bodies)) == sorted(b"m%d" % i for i in range(50)), \
        "%d of 50 arrived" % len(set(bodies))
    assert len(bodies) == 50, "duplicates: %d" % (len(bodies) - 50)
    assert min(t for t, _, _ in got) >= due - 0.001


def test_reading_errors_any_number_of_times_leaves_them_parked(
        client, daemon):
    for i in range(3):
        client.publish(daemon.prefix, "nowhere", b"bad-%d" % i,
                       {"x-remaining-delay": "soon"})
    wait_for(lambda: json.loads(ctl(daemon, "status", "--json").stdout)
             ["error"]["messages"] == 3, 10, "3 parked messages")
    for _ in range(25):
        out = json.loads(ctl(daemon, "errors", "--json").stdout)
        assert len(out["messages"]) == 3, out
    assert json.loads(ctl(daemon, "status", "--json").stdout)[
        "error"]["messages"] == 3


def test_consumer_cancelled_by_the_broker_consumes_again(client, daemon):
    """A broker-sent basic.cancel (here: P.return deleted under the daemon;
    on 4.3 also the consumer timeout) is logged with the consumer and the
    daemon consumes again, never going quiet."""
    client.ch.queue_delete(daemon.prefix + ".return")
    daemon.wait_log("consumer return cancelled by the broker", timeout=15)
    daemon.wait_log("msg=ready", timeout=30, count=2)
    target = client.queue()
    client.publish(daemon.prefix, target, b"after", {"x-remaining-delay": 500})
    got = client.collect(target, 1, 10)
    assert [b for _, _, b in got] == [b"after"]


def test_queues_of_an_older_cascade_keep_working(broker, client,
                                                 daemon_factory):
    """Queues an older cascade declared (x-queue-type only) cannot take
    the new arguments: the daemon keeps them, says which policy adds them,
    and that policy is accepted by the broker."""
    d = daemon_factory(start=False)
    for q in ("ingress", "return", "retry", "error"):
        client.ch.queue_declare("%s.%s" % (d.prefix, q), durable=True,
                                arguments={"x-queue-type": "quorum"})
    d.start()
    target = client.queue()
    client.publish(d.prefix, target, b"old", {"x-remaining-delay": 300})
    assert [b for _, _, b in client.collect(target, 1, 10)] == [b"old"]
    fixes = re.findall(r'msg=queue_arguments queue=(\S+) .* fix="(.*)"$',
                       d.log(), re.M)
    queues = {q for q, _ in fixes}
    assert {d.prefix + ".ingress", d.prefix + ".return",
            d.prefix + ".retry"} <= queues, d.log()
    for _, fix in fixes:
        args = shlex.split(fix.replace('\\"', '"'))
        assert args[:2] == ["rabbitmqctl", "set_policy"]
        broker.ctl(*args[1:])
    out = broker.ctl("list_queues", "name", "policy").stdout
    for q in queues:
        assert re.search(r"^%s\s+cascade-%s$" % (re.escape(q), re.escape(q)),
                         out, re.M), out
