# SPDX-License-Identifier: Apache-2.0
"""Publishers nobody here wrote can use cascade."""
import subprocess
import time

from helpers import PUBLISH


def test_amqp_publish_from_amqp_tools(broker, client, daemon):
    q = client.queue()
    t0 = time.time()
    subprocess.run(["amqp-publish", "--url", broker.url, "-e", daemon.prefix,
                    "-r", q, "-H", "x-remaining-delay: 1s", "-b", "hello"],
                   check=True, timeout=30)
    got = client.collect(q, 1, timeout=10)
    assert got, "lost"
    assert got[0][2] == b"hello"
    assert got[0][0] - t0 >= 1.0 - 0.001


def test_cascade_publish_tool(broker, client, daemon):
    q = client.queue()
    env = {"CASCADE_BROKER_URL": broker.url, "PATH": "/usr/bin:/bin"}
    t0 = time.time()
    r = subprocess.run([PUBLISH, "-p", daemon.prefix, "--delay", "700ms",
                        "-r", q, "-H", "kind=test"], input="one\ntwo\n",
                       capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    got = client.collect(q, 2, timeout=10)
    assert sorted(b for _, _, b in got) == [b"one", b"two"]
    assert all(t - t0 >= 0.7 - 0.001 for t, _, _ in got)
    assert got[0][1].headers == {"kind": "test"}
    bad = subprocess.run([PUBLISH, "--delay", "5 parsecs", "-r", q],
                         capture_output=True, text=True, env=env, timeout=30)
    assert bad.returncode == 2 and "--delay" in bad.stderr
