# SPDX-License-Identifier: Apache-2.0
"""[topology] shards (docs/CONTRACT.md section 8): S copies of the ladder and
of the return queue, each message kept in one; daemons that take a subset of
the shards; changing S without losing a message; on a cluster, a level's
shards lead on different nodes."""
import re

import pytest

from faults import (Collector, check, fast_daemon, idle, publish_batch,
                    report, start_cluster, stop_cluster)
from helpers import METRICS, ctl, scrape, status, wait_for

SLACK_MS = 1  # due times are whole ms


def publish(client, d, queue, delays):
    """One message per delay (ms); {message_id: (sent, delay)}."""
    sent = {}
    for i, delay in enumerate(delays):
        mid = "%s-%d" % (d.prefix, i)
        sent[mid] = (client.publish(d.prefix, queue, mid.encode(),
                                    {"x-remaining-delay": delay},
                                    message_id=mid), delay)
    return sent


def check_delivered(client, queue, sent, timeout):
    """Every message arrived once, none early."""
    got = client.collect(queue, len(sent), timeout)
    ids = [p.message_id for _, p, _ in got]
    assert sorted(ids) == sorted(sent), "lost: %s" % (set(sent) - set(ids))
    early = {}
    for arrived, props, _ in got:
        t0, delay = sent[props.message_id]
        late = (arrived - t0) * 1000 - delay
        if late < -SLACK_MS:
            early[props.message_id] = late
    assert not early, "delivered early (ms): %s" % early


def hops_by_shard(d):
    """cascade_hops_total summed per shard label."""
    by = {}
    for k, v in scrape(d.metrics_url()).items():
        m = re.match(r'cascade_hops_total\{shard="(\d+)"', k)
        if m:
            by[int(m.group(1))] = by.get(int(m.group(1)), 0) + v
    return by


def queue_names(broker):
    return set(broker.queue_counts())


def test_three_shards_deliver_everything_none_early_each_used(
        broker, client, daemon_factory):
    d = daemon_factory({"topology": {"shards": "3"}, **METRICS})
    q = client.queue()
    # 0 .. 3 s over the 100 ms x 2 ladder: every level below 3.2 s
    sent = publish(client, d, q, [i * 33 for i in range(90)])
    check_delivered(client, q, sent, timeout=20)
    by = hops_by_shard(d)
    assert sorted(by) == [0, 1, 2], by
    assert all(by[s] > 0 for s in by), by
    # Every shard's queues carry the shard; the unsharded names are gone.
    names = queue_names(broker)
    for s in range(3):
        assert "%s.return.s%d" % (d.prefix, s) in names
        assert "%s.delay.100.s%d" % (d.prefix, s) in names
        assert "%s.delay.12800.s%d" % (d.prefix, s) in names
    assert "%s.return" % d.prefix not in names
    assert "%s.delay.100" % d.prefix not in names
    s = status(d)
    assert s["shards"] == 3
    assert [r["queue"] for r in s["returns"]] == [
        "%s.return.s%d" % (d.prefix, i) for i in range(3)]
    assert all(r["consumers"] == 1 for r in s["returns"]), s["returns"]
    assert len(s["levels"]) == 3 * 8
    assert {lv["shard"] for lv in s["levels"]} == {0, 1, 2}
    text = ctl(d, "status").stdout
    assert "shard 2" in text and "3 shards" in text
    assert d.stop() == 0


def test_daemons_split_the_shards(broker, client, daemon_factory):
    a = daemon_factory({"topology": {"shards": "3", "consume_shards": "0"},
                        **METRICS})
    b = daemon_factory({"topology": {"shards": "3",
                                     "consume_shards": "1-2"}, **METRICS},
                       prefix=a.prefix, start=False)
    b.logpath = b.logpath.replace(".log", "-b.log")
    b.start()
    s = status(a)
    assert [r["consumers"] for r in s["returns"]] == [1, 1, 1], s["returns"]
    q = client.queue()
    sent = publish(client, a, q, [200 + i * 20 for i in range(60)])
    check_delivered(client, q, sent, timeout=20)

    def returns(d):
        got = {}
        for k, v in scrape(d.metrics_url()).items():
            m = re.match(r'cascade_messages_received_total\{source="return",'
                         r'queue="[^"]+",shard="(\d+)"\}', k)
            if m:
                got[int(m.group(1))] = v
        return got

    ra, rb = returns(a), returns(b)
    assert sorted(ra) == [0] and ra[0] > 0, ra
    assert sorted(rb) == [1, 2] and rb[1] > 0 and rb[2] > 0, rb
    assert a.stop() == 0 and b.stop() == 0


def test_a_shard_nobody_consumes_is_named_by_status(client, daemon_factory):
    d = daemon_factory({"topology": {"shards": "2", "consume_shards": "0"}})
    q = client.queue()
    publish(client, d, q, [5000 + i for i in range(20)])
    wait_for(lambda: status(d)["ladder_messages"] == 20, 10,
             "20 messages in the ladder")
    # shard 1's return queue has no consumer: status warns, naming it
    r = ctl(d, "status")
    assert "%s.return.s1 has no consumer" % d.prefix in r.stderr, r.stderr
    assert "consume_shards" in r.stderr
    assert d.stop() == 0


@pytest.mark.slow
def test_changing_shards_drains_the_former_layout(broker, client,
                                                  daemon_factory):
    # One shard: the unsharded names.  Stopped with messages in its
    # ladder, then started with three shards, draining the old return
    # queue: every message arrives, none early.
    d = daemon_factory()
    q = client.queue()
    # Long enough to be still in the old ladder once the restart is done.
    sent = publish(client, d, q, [8000 + i * 25 for i in range(40)])
    wait_for(lambda: status(d)["ladder_messages"] == 40, 10,
             "40 messages in the one-shard ladder")
    assert d.stop() == 0
    with open(d.config, "a") as f:
        f.write("[topology]\nshards = 3\ndrain_shards = 1\n")
    # the second [topology] section adds keys to the first
    d.start()
    s = status(d)
    assert s["draining"][0]["queue"] == "%s.return" % d.prefix
    assert s["draining"][0]["consumers"] == 1
    assert [x["queue"] for x in s["draining"][1:]] == [
        "%s.delay.%d" % (d.prefix, 100 * 2 ** k) for k in range(8)]
    assert s["draining_messages"] > 0
    check_delivered(client, q, sent, timeout=20)
    wait_for(lambda: status(d)["draining_messages"] == 0, 10,
             "the former layout drained")
    assert "0 ready in the former layout" in ctl(d, "status").stdout
    names = queue_names(broker)
    assert "%s.delay.100.s0" % d.prefix in names

    def old_layout_holds():
        # ready and unacked; a quorum queue refreshes these every few
        # seconds, hence the wait
        out = broker.ctl("list_queues", "name", "messages").stdout
        return [line for line in out.splitlines()
                if len(line.split()) == 2 and line.split()[1] != "0" and
                re.fullmatch(re.escape(d.prefix) + r"\.(delay\.\d+|return)",
                             line.split()[0])]

    wait_for(lambda: not old_layout_holds(), 20,
             "the former layout's queues empty in list_queues")
    assert d.stop() == 0


@pytest.mark.cluster
def test_a_levels_shards_lead_on_different_nodes(tmp_path):
    _, nodes = start_cluster()
    try:
        d = fast_daemon(nodes[0], tmp_path,
                        topology={"shards": "3"},
                        broker={"url": ", ".join(b.url for b in nodes)})
        d.start()
        out = nodes[0].ctl("list_queues", "name", "leader").stdout
        leaders = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0].startswith(d.prefix + "."):
                leaders[parts[0]] = parts[1]
        for ttl in [100 * 2 ** k for k in range(8)] + [None]:
            base = ("%s.delay.%d" % (d.prefix, ttl) if ttl
                    else "%s.return" % d.prefix)
            on = [leaders["%s.s%d" % (base, s)] for s in range(3)]
            assert len(set(on)) == 3, (base, on)
        assert "msg=shards_placed" in d.log()
        # and messages go through them, published and consumed on a
        # node of their own
        q = "shards-" + d.prefix
        col = Collector(nodes[1].url, q)
        col.start()
        sent = publish_batch(nodes[1].url, d.prefix, q, 90, 100, 2000)
        col.wait_for(set(sent), timeout=60,
                     settled=lambda: idle(nodes[1], d.prefix, q))
        check(report("3 shards on 3 nodes", sent, col.arrivals), nodes[1],
              d, q, sent, col, nodes)
        assert d.stop() == 0
    finally:
        stop_cluster(nodes)
