# SPDX-License-Identifier: Apache-2.0
"""Backoff retries: a worker rejects, cascade brings the message back."""
import time

from helpers import LATE_SCALE

SLACK = 0.001
LATE = 0.2 * LATE_SCALE  # the lateness bound of the fast test ladder


def run_worker(broker, queues, fail_times, duration):
    """Consume queues, reject each message `fail_times` times, then ack.
    Returns [(time, queue, message_id, attempt header)]."""
    conn = broker.connect()
    ch = conn.channel()
    seen = []
    counts = {}

    def on_message(chan, method, props, body):
        attempt = (props.headers or {}).get("x-cascade-attempt")
        seen.append((time.time(), method.routing_key, props.message_id,
                     attempt, props, body))
        n = counts.get(props.message_id, 0)
        counts[props.message_id] = n + 1
        if n < fail_times:
            chan.basic_reject(method.delivery_tag, requeue=False)
        else:
            chan.basic_ack(method.delivery_tag)

    for q in queues:
        ch.basic_consume(q, on_message)
    end = time.time() + duration
    while time.time() < end:
        conn.process_data_events(time_limit=0.05)
    conn.close()
    return seen


def work_queue(client, prefix, name=None):
    return client.queue(name, **{"x-dead-letter-exchange": prefix + ".retry"})


def test_list_policy_attempts_and_give_up(broker, client, daemon_factory):
    d = daemon_factory({"retry": {"max_retries": "3",
                                  "delays": "300ms, 600ms"}})
    q = work_queue(client, d.prefix)
    client.publish("", q, b"job", {"tenant": "a"}, message_id="j1",
                   content_type="text/plain")
    seen = run_worker(broker, [q], fail_times=10, duration=3.5)
    assert [a for _, _, _, a, _, _ in seen] == [None, 1, 2, 3]
    gaps = [seen[i + 1][0] - seen[i][0] for i in range(3)]
    for gap, want in zip(gaps, [0.3, 0.6, 0.6]):
        assert want - SLACK <= gap <= want + LATE, (gaps, want)
    for _, _, _, _, props, body in seen:
        assert body == b"job" and props.content_type == "text/plain"
        assert props.headers.get("tenant") == "a"
        assert not any(k.startswith("x-death") or k == "x-cascade-due"
                       for k in props.headers)
    parked = client.collect(d.prefix + ".error", 1, timeout=5)
    assert parked, "the last rejection was not parked"
    headers = parked[0][1].headers
    assert headers["x-cascade-error"] == "gave up after 3 retries"
    assert headers["x-cascade-queue"] == q
    assert parked[0][2] == b"job"


def test_worker_that_succeeds_stops_the_retries(broker, client,
                                                daemon_factory):
    d = daemon_factory({"retry": {"delays": "200ms"}})
    q = work_queue(client, d.prefix)
    client.publish("", q, b"job", message_id="j2")
    seen = run_worker(broker, [q], fail_times=2, duration=2.0)
    assert [a for _, _, _, a, _, _ in seen] == [None, 1, 2]
    assert client.drain(d.prefix + ".error") == []


def test_per_queue_policy_wins_over_default(broker, client, daemon_factory):
    special = "special-" + str(int(time.time() * 1000))
    d = daemon_factory({"retry": {"max_retries": "2", "delays": "700ms"},
                        "retry." + special: {"max_retries": "1",
                                             "delays": "200ms"}})
    q_special = work_queue(client, d.prefix, special)
    q_plain = work_queue(client, d.prefix)
    client.publish("", q_special, b"s", message_id="s")
    client.publish("", q_plain, b"p", message_id="p")
    seen = run_worker(broker, [q_special, q_plain], fail_times=10,
                      duration=2.5)
    by = {}
    for t, rk, mid, attempt, _, _ in seen:
        by.setdefault(mid, []).append((t, attempt))
    # The special queue's own policy: one retry after 200 ms.
    assert [a for _, a in by["s"]] == [None, 1]
    assert 0.2 - SLACK <= by["s"][1][0] - by["s"][0][0] <= 0.2 + LATE
    # A queue with no section of its own: the default, 700 ms, twice.
    assert [a for _, a in by["p"]] == [None, 1, 2]
    for i in (1, 2):
        gap = by["p"][i][0] - by["p"][i - 1][0]
        assert 0.7 - SLACK <= gap <= 0.7 + LATE
    parked = client.collect(d.prefix + ".error", 2, timeout=5)
    reasons = {p.message_id: p.headers["x-cascade-error"]
               for _, p, _ in parked}
    assert reasons == {"s": "gave up after 1 retries",
                       "p": "gave up after 2 retries"}


def test_exponential_backoff_with_jitter_within_bounds(broker, client,
                                                       daemon_factory):
    d = daemon_factory({"retry": {"max_retries": "4",
                                  "backoff": "exponential",
                                  "initial": "200ms", "multiplier": "2",
                                  "max": "1s", "jitter": "0.5"}})
    queues = [work_queue(client, d.prefix) for _ in range(3)]
    for i, q in enumerate(queues):
        client.publish("", q, b"x", message_id=str(i))
    seen = run_worker(broker, queues, fail_times=10, duration=4.5)
    by = {}
    for t, _, mid, attempt, _, _ in seen:
        by.setdefault(mid, []).append((t, attempt))
    for mid, arrivals in by.items():
        assert [a for _, a in arrivals] == [None, 1, 2, 3, 4], arrivals
        for n in range(1, 5):
            base = min(1.0, 0.2 * 2 ** (n - 1))
            gap = arrivals[n][0] - arrivals[n - 1][0]
            assert base * 0.5 - SLACK <= gap <= base + LATE, (mid, n, gap)


def test_worker_can_ask_for_one_specific_delay(broker, client, daemon):
    """A worker that wants a given delay republishes to P itself."""
    q = client.queue()
    t0 = client.publish(daemon.prefix, q, b"again",
                        {"x-remaining-delay": "500ms"})
    got = client.collect(q, 1, timeout=5)
    assert got and got[0][0] - t0 >= 0.5 - SLACK
