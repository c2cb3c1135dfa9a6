# SPDX-License-Identifier: Apache-2.0
"""Every header form a publisher may use."""
import datetime
import time

SLACK_MS = 1


def NOW():
    return int(time.time() * 1000)


def deliver_all(client, daemon, cases, timeout=10):
    """cases: {message_id: (headers, expected delay ms)}; returns arrivals."""
    q = client.queue()
    sent = {}
    for mid, (headers, delay) in cases.items():
        sent[mid] = (client.publish(daemon.prefix, q, mid.encode(), headers,
                                    message_id=mid), delay)
    got = client.collect(q, len(cases), timeout)
    arrived = {p.message_id: t for t, p, _ in got}
    assert set(arrived) == set(cases), "lost: %s" % (set(cases) - set(arrived))
    for mid, t in arrived.items():
        t0, delay = sent[mid]
        if isinstance(delay, tuple):  # ("at", epoch ms): absolute due time
            t0, delay = delay[1] / 1000.0, 0
        ms = (t - t0) * 1000
        assert ms >= delay - SLACK_MS, "%s early: %.1f ms < %d" % (mid, ms,
                                                                  delay)
        assert ms <= delay + 200, "%s late: %.1f ms for %d" % (mid, ms, delay)
    return got


def test_integer_and_string_forms(client, daemon):
    # One clock reading for the header and the check: two could differ by
    # a stall of the test's own process, and a message on time would look
    # early by that much.
    at = NOW() + 300
    deliver_all(client, daemon, {
        "int32": ({"x-remaining-delay": 300}, 300),
        "big-int64": ({"x-remaining-delay": 2 ** 40,
                       "x-deliver-at": at}, ("at", at)),
        "string-bare": ({"x-remaining-delay": "500"}, 500),
        "string-ms": ({"x-remaining-delay": "250ms"}, 250),
        "string-s": ({"x-remaining-delay": "1s"}, 1000),
        "string-blank": ({"x-remaining-delay": " 2s "}, 2000),
        "bytes": ({"x-remaining-delay": b"600ms"}, 600),
        "zero": ({"x-remaining-delay": 0}, 0),
        "negative": ({"x-remaining-delay": -5000}, 0),
        "negative-string": ({"x-remaining-delay": "-1m"}, 0),
        "x-delay-alias": ({"x-delay": 700}, 700),
        "x-delay-string": ({"x-delay": "800ms"}, 800),
    })


def test_x_deliver_at(client, daemon):
    now = NOW()
    deliver_all(client, daemon, {
        "at": ({"x-deliver-at": now + 1200}, ("at", now + 1200)),
        "at-string": ({"x-deliver-at": str(now + 900)}, ("at", now + 900)),
        "at-past": ({"x-deliver-at": now - 60000}, 0),
        "at-wins": ({"x-deliver-at": now + 500,
                     "x-remaining-delay": "1h", "x-delay": "1h"},
                    ("at", now + 500)),
    })


def test_amqp_timestamp_deliver_at(client, daemon):
    # pika sends a datetime as an AMQP timestamp, in whole seconds.
    at = datetime.datetime.fromtimestamp(int(time.time()) + 2,
                                         tz=datetime.timezone.utc)
    q = client.queue()
    t0 = client.publish(daemon.prefix, q, b"ts", {"x-deliver-at": at})
    got = client.collect(q, 1, timeout=10)
    assert got
    assert got[0][0] >= at.timestamp() - SLACK_MS / 1000
    assert got[0][0] - t0 < 3.5


def test_x_remaining_delay_wins_over_x_delay(client, daemon):
    deliver_all(client, daemon, {
        "both": ({"x-remaining-delay": 300, "x-delay": "1h"}, 300),
    })
