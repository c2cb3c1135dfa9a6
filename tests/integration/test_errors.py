# SPDX-License-Identifier: Apache-2.0
"""Bad input is parked in P.error with a reason; nothing else is held up."""
import decimal


def test_each_bad_input_parked_while_good_messages_arrive(client,
                                                          daemon_factory):
    d = daemon_factory({"router": {"max_delay": "1m"}})
    target = client.queue()
    lonely = "lonely-" + d.prefix
    client.ch.exchange_declare(lonely, "direct")  # exists, nothing bound
    bad = {
        "missing": ({"tenant": "a"}, "missing"),
        "malformed": ({"x-remaining-delay": "abc"}, "x-remaining-delay"),
        "bad-unit": ({"x-remaining-delay": "5 parsecs"}, "x-remaining-delay"),
        "bool": ({"x-remaining-delay": True}, "x-remaining-delay"),
        "decimal": ({"x-remaining-delay": decimal.Decimal("1.5")},
                    "x-remaining-delay"),
        "bad-x-delay": ({"x-delay": "soon"}, "x-delay"),
        "bad-deliver-at": ({"x-deliver-at": "tomorrow"}, "x-deliver-at"),
        "too-long": ({"x-remaining-delay": "2m"}, "max_delay"),
        "no-exchange": ({"x-remaining-delay": 200,
                         "x-target-exchange": "no-such-" + d.prefix},
                        "does not exist"),
        "unroutable-default": ({"x-remaining-delay": 200,
                                "x-target-routing-key": "no-queue-" +
                                d.prefix}, "unroutable"),
        "unroutable-exchange": ({"x-remaining-delay": 0,
                                 "x-target-exchange": lonely}, "unroutable"),
        "bad-target-type": ({"x-remaining-delay": 0,
                             "x-target-exchange": 42}, "x-target-exchange"),
    }
    good = 0
    for mid, (headers, _) in bad.items():
        client.publish(d.prefix, target, b"good", {"x-remaining-delay": 100},
                       message_id="good-%d" % good)
        good += 1
        client.publish(d.prefix, target, ("bad " + mid).encode(), headers,
                       message_id=mid, content_type="text/plain")
    client.publish(d.prefix, target, b"good", {"x-remaining-delay": 100},
                   message_id="good-%d" % good)
    good += 1

    arrived = client.collect(target, good, timeout=15)
    assert sorted(p.message_id for _, p, _ in arrived) == sorted(
        "good-%d" % i for i in range(good))

    parked = client.collect(d.prefix + ".error", len(bad), timeout=15)
    by_id = {p.message_id: (p, body) for _, p, body in parked}
    assert set(by_id) == set(bad)
    for mid, (_, reason) in bad.items():
        p, body = by_id[mid]
        assert body == ("bad " + mid).encode(), "body changed"
        assert p.content_type == "text/plain"
        why = p.headers.get("x-cascade-error")
        assert isinstance(why, str) and reason in why, (mid, why)
    # One log line per parked message, with its reason (written once the
    # broker confirms the park, which may come after the delivery here).
    d.wait_log("msg=parked", 10, count=len(bad))
    log = d.log()
    assert log.count("msg=parked") == len(bad)
    assert 'reason="target exchange' in log
    # Nothing is left unacked or stuck in the daemon's queues.
    assert client.drain(target) == []


def test_missing_target_exchange_does_not_stop_other_deliveries(
        client, daemon):
    """A publish to a missing exchange would close the work channel; the
    daemon checks first, so the messages after it arrive on time."""
    q = client.queue()
    for i in range(20):
        headers = {"x-remaining-delay": 0}
        if i % 2:
            headers["x-target-exchange"] = "gone-%d-%s" % (i, daemon.prefix)
        client.publish(daemon.prefix, q, b"m%d" % i, headers,
                       message_id=str(i))
    got = client.collect(q, 10, timeout=10)
    assert sorted(int(p.message_id) for _, p, _ in got) == list(range(0, 20,
                                                                      2))
    parked = client.collect(daemon.prefix + ".error", 10, timeout=10)
    assert len(parked) == 10
    assert "connection_lost" not in daemon.log()


def test_a_park_after_the_ladder_logs_its_target_key(client, daemon):
    """Parked when due (its target exchange is gone), back from the
    ladder: the parked line names the key it was going to, not the
    return queue's (docs/CONTRACT.md section 12)."""
    q = client.queue()
    gone = "gone-" + daemon.prefix
    client.publish(daemon.prefix, q, b"late",
                   {"x-remaining-delay": 1000, "x-target-exchange": gone},
                   message_id="late-1")
    [(_, props, _)] = client.collect(daemon.prefix + ".error", 1, timeout=10)
    assert props.message_id == "late-1", props
    daemon.wait_log("msg=parked", 10)
    [line] = [l for l in daemon.log().splitlines() if "msg=parked" in l]
    assert 'routing_key="%s"' % q in line, line
