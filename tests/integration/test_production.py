# SPDX-License-Identifier: Apache-2.0
"""Running cascade in production (docs/CONTRACT.md sections 5, 11 and 12):
/metrics and /healthz, the target policy, JSON logs, and credentials that
never sit in the INI file, with the RabbitMQ permissions docs/operations.md
documents."""
import json
import os
import socket
import subprocess
import urllib.error
import urllib.request
import uuid

import pytest

from helpers import (CASCADE, Daemon, ctl, free_port, http_get, loopback6,
                     metrics_daemon, scrape, wait_for)


def launch(d):
    """Start d without waiting for its ready line."""
    d.logfile = open(d.logpath, "ab")
    d.proc = subprocess.Popen([CASCADE, "-c", d.config], stdout=d.logfile,
                              stderr=subprocess.STDOUT)


def test_metrics_counters_move_as_messages_flow(client, daemon_factory):
    d, url = metrics_daemon(daemon_factory)
    before = scrape(url)
    assert before["cascade_connected"] == 1
    assert before["cascade_consuming"] == 1
    assert before["cascade_messages_delivered_total"] == 0
    levels = [k for k in before if k.startswith("cascade_hops_total{")]
    assert len(levels) == 8, levels
    assert 'cascade_hops_total{shard="0",level="0",queue="%s.delay.100",' \
        'ttl_ms="100"}' \
        % d.prefix in before

    q = client.queue()
    for i in range(5):
        client.publish(d.prefix, q, b"m%d" % i, {"x-remaining-delay": 700})
    client.publish(d.prefix, q, b"lost", {"x-remaining-delay": 100,
                                          "x-target-exchange":
                                          "nowhere-" + d.prefix})
    client.publish(d.prefix, q, b"bad", {"x-remaining-delay": "soon"})
    got = client.collect(q, 5, timeout=20)
    assert len(got) == 5

    def settled():
        m = scrape(url)
        return (m["cascade_messages_delivered_total"] == 5 and
                m['cascade_messages_parked_total{reason="no_exchange"}'] == 1)
    wait_for(settled, 10, "5 delivered and 1 parked in /metrics")
    m = scrape(url)
    ingress = 'cascade_messages_received_total{source="ingress",' \
        'queue="%s.ingress"}' % d.prefix
    ret = 'cascade_messages_received_total{source="return",' \
        'queue="%s.return",shard="0"}' % d.prefix
    assert m[ingress] == 7
    assert m['cascade_messages_parked_total{reason="bad_header"}'] == 1
    # 700 ms on a 100 ms x 2 ladder with the 250 ms tail margin: one hop
    # of 400 ms, then the rest held; every hop came back through return.
    # Native waiting (make test-native): one wait each in the holding
    # queue instead, and nothing held.
    hops = sum(v for k, v in m.items() if k.startswith("cascade_hops_total"))
    waits = sum(v for k, v in m.items()
                if k.startswith("cascade_waits_total"))
    assert hops + waits >= 5, m
    assert m[ret] == hops
    assert m["cascade_held_total"] >= 5 or waits >= 5
    assert m["cascade_lateness_seconds_count"] == 5
    assert m['cascade_lateness_seconds_bucket{le="+Inf"}'] == 5
    assert m["cascade_confirms_total"] >= hops + 7
    assert m["cascade_publishes_in_flight"] == 0
    assert m["cascade_held_messages"] == 0
    assert m["cascade_reconnects_total"] == 0


def test_healthz_and_unknown_paths(daemon_factory):
    d, url = metrics_daemon(daemon_factory)
    assert http_get(url + "/healthz") == (200, "ok\n")
    status, body = http_get(url + "/nope")
    assert status == 404 and "/metrics" in body
    req = urllib.request.Request(url + "/metrics", method="POST", data=b"x")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 405


def test_an_empty_host_listens_on_ipv4_and_ipv6(daemon_factory):
    """`[metrics] listen = :PORT` is every interface of both families (one
    dual-stack socket, docs/CONTRACT.md section 5.3): /healthz and /metrics
    answer on 127.0.0.1 and on [::1], as a probe on an IPv6-only cluster
    needs, and cascade-ctl health still finds the daemon on loopback.
    That 0.0.0.0 and [::] keep to one family each: test_metrics.c."""
    if not loopback6():
        pytest.skip("this machine has no ::1 (IPv6 loopback)")
    port = free_port()
    d = daemon_factory({"metrics": {"listen": ":%d" % port}})
    assert "msg=metrics_listening listen=:%d port=%d" % (port, port) in \
        d.log()
    for host in ("127.0.0.1", "[::1]"):
        url = "http://%s:%d" % (host, port)
        assert http_get(url + "/healthz") == (200, "ok\n"), host
        assert scrape(url)["cascade_connected"] == 1, host
    assert ctl(d, "health").stdout == "ok\n"


def test_metrics_port_in_use_is_a_clear_start_up_error(broker, tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        d = Daemon(broker, str(tmp_path),
                   {"metrics": {"listen": "127.0.0.1:%d" % port}})
        rc = subprocess.run([CASCADE, "-c", d.config], stderr=subprocess.PIPE,
                            text=True, timeout=30)
        assert rc.returncode == 1
        assert "metrics_listen_failed" in rc.stderr
        assert "127.0.0.1:%d" % port in rc.stderr
    finally:
        s.close()


def test_disallowed_target_is_parked_with_a_reason(client, daemon_factory):
    allowed = "shop-" + uuid.uuid4().hex[:6]
    d = daemon_factory({"router": {"allowed_targets": allowed + ".*"}})
    ok_ex, bad_ex = allowed + ".orders", "admin-" + d.prefix
    ok_q, bad_q = client.queue(), client.queue()
    for ex, q in ((ok_ex, ok_q), (bad_ex, bad_q)):
        client.ch.exchange_declare(ex, "fanout")
        client.ch.queue_bind(q, ex)
    client.publish(d.prefix, "k", b"fine", {"x-remaining-delay": 200,
                                             "x-target-exchange": ok_ex})
    client.publish(d.prefix, "k", b"sneaky", {"x-remaining-delay": 200,
                                               "x-target-exchange": bad_ex})
    # The default exchange (amq.default) is not in the list either.
    client.publish(d.prefix, bad_q, b"by-name", {"x-remaining-delay": 0})
    got = client.collect(ok_q, 1, timeout=10)
    assert [b for _, _, b in got] == [b"fine"]
    parked = client.collect(d.prefix + ".error", 2, timeout=10)
    reasons = {b: p.headers["x-cascade-error"] for _, p, b in parked}
    assert set(reasons) == {b"sneaky", b"by-name"}
    assert "'%s'" % bad_ex in reasons[b"sneaky"]
    assert "allowed_targets" in reasons[b"sneaky"]
    assert "''" in reasons[b"by-name"]
    assert client.drain(bad_q) == []
    assert "msg=parked" in d.log()


def test_json_logs_one_object_per_line(client, daemon_factory):
    d = daemon_factory({"log": {"format": "json"}}, start=False)
    launch(d)
    d.wait_log('"msg":"ready"')
    client.publish(d.prefix, "k", b"x", {"x-remaining-delay": "nope"})
    d.wait_log('"msg":"parked"')
    assert d.stop() == 0
    events = [json.loads(line) for line in d.log().splitlines() if line]
    msgs = [e["msg"] for e in events]
    assert "ready" in msgs and "parked" in msgs and "totals" in msgs
    parked = events[msgs.index("parked")]
    assert "x-remaining-delay" in parked["reason"]
    totals = events[msgs.index("totals")]
    assert totals["parked"] == 1 and totals["received"] == 1
    for e in events:
        assert {"ts", "level", "msg"} <= set(e)


def test_log_level_warn_hides_info(client, daemon_factory, broker, tmp_path):
    d = daemon_factory({"log": {"level": "warn"}}, start=False)
    # No `ready` line at this level: wait on the queue's consumer instead.
    launch(d)

    def consuming():
        try:
            ch = broker.connect().channel()
            return ch.queue_declare(d.prefix + ".ingress",
                                    passive=True).method.consumer_count == 1
        except Exception:
            return False
    wait_for(consuming, 30, "the daemon to consume")
    client.publish(d.prefix, "k", b"x", {})
    d.wait_log("msg=parked")
    assert d.stop() == 0
    log = d.log()
    assert "level=info" not in log and " info " not in log, log


def user_daemon(broker, daemon_factory, tmp_path, user, password, perms,
                sections=None, start=True):
    broker.add_user(user, password, *perms)
    pwfile = tmp_path / ("pw-" + user)
    pwfile.write_text(password + "\n")
    host = broker.url.split("@", 1)[1]
    s = {"broker": {"url": "amqp://%s@%s" % (user, host),
                    "password_file": str(pwfile)}}
    for k, v in (sections or {}).items():
        s.setdefault(k, {}).update(v)
    return daemon_factory(s, start=start)


def test_least_privilege_user_with_password_file(broker, client,
                                                 daemon_factory, tmp_path):
    """The set_permissions line of docs/operations.md is enough, and the
    password comes from password_file, never from the INI file or the
    log."""
    user = "cascade-" + uuid.uuid4().hex[:6]
    password = "pw-" + uuid.uuid4().hex
    prefix = "t" + uuid.uuid4().hex[:8]
    target = "orders-" + prefix
    # docs/CONTRACT.md section 3.5: configure, write, read for prefix P and
    # target exchanges T.
    p = r"^%s(\..*)?$" % prefix
    perms = [p, r"^(%s(\..*)?|amq\.default|orders-.*)$" % prefix, p]
    client.ch.exchange_declare(target, "fanout")
    q = client.queue()
    client.ch.queue_bind(q, target)
    d = user_daemon(broker, daemon_factory, tmp_path, user, password, perms,
                    {"topology": {"prefix": prefix},
                     "router": {"allowed_targets": "orders-*"}})
    client.publish(prefix, "k", b"hello", {"x-remaining-delay": 300,
                                            "x-target-exchange": target})
    got = client.collect(q, 1, timeout=15)
    assert [b for _, _, b in got] == [b"hello"]
    with open(d.config) as f:
        assert password not in f.read()
    assert password not in d.log()
    broker.delete_user(user)


def test_wrong_password_is_logged_without_the_password(broker,
                                                       daemon_factory,
                                                       tmp_path):
    user = "cascade-" + uuid.uuid4().hex[:6]
    d = user_daemon(broker, daemon_factory, tmp_path, user, "right-pw",
                    [".*", ".*", ".*"], start=False)
    (tmp_path / ("pw-" + user)).write_text("wrong-pw\n")
    launch(d)
    d.wait_log("msg=connect_failed", timeout=30)
    d.wait_log("msg=reconnect_scheduled", timeout=30)
    log = d.log()
    assert "ACCESS_REFUSED" in log or "login" in log, log
    assert "wrong-pw" not in log and "right-pw" not in log
    assert d.stop() == 0
    broker.delete_user(user)


def test_password_from_the_environment(broker, client, daemon_factory,
                                       tmp_path, monkeypatch):
    user = "cascade-" + uuid.uuid4().hex[:6]
    broker.add_user(user, "env-pw", ".*", ".*", ".*")
    host = broker.url.split("@", 1)[1]
    monkeypatch.setenv("CASCADE_BROKER_PASSWORD", "env-pw")
    d = daemon_factory({"broker": {"url": "amqp://%s@%s" % (user, host)}})
    q = client.queue()
    client.publish(d.prefix, q, b"env", {"x-remaining-delay": 100})
    assert len(client.collect(q, 1, timeout=10)) == 1
    assert "env-pw" not in d.log()
    broker.delete_user(user)


def test_tools_take_the_password_from_the_environment(broker, client, daemon):
    """Without -c, cascade-publish and cascade-ctl take the URL and the
    password from the environment, as the daemon does: a URL without a
    password works, a wrong password is refused and not printed."""
    user = "tool-" + uuid.uuid4().hex[:6]
    password = "pw-" + uuid.uuid4().hex
    broker.add_user(user, password, ".*", ".*", ".*")
    host = broker.url.split("@", 1)[1]
    env = {"PATH": "/usr/bin:/bin",
           "CASCADE_BROKER_URL": "amqp://%s@%s" % (user, host),
           "CASCADE_BROKER_PASSWORD": password}
    build = os.path.dirname(CASCADE)
    q = client.queue()
    r = subprocess.run([os.path.join(build, "cascade-publish"),
                        "-p", daemon.prefix, "--delay", "10ms", "-r", q],
                       input="via env\n", capture_output=True, text=True,
                       env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    got = client.collect(q, 1, timeout=10)
    assert [b for _, _, b in got] == [b"via env"]

    ctl = [os.path.join(build, "cascade-ctl"), "status"]
    r = subprocess.run(ctl, capture_output=True, text=True, env=env,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert "amqp://%s@" % user in r.stdout and password not in r.stdout

    env["CASCADE_BROKER_PASSWORD"] = "wrong-" + password
    r = subprocess.run(ctl, capture_output=True, text=True, env=env,
                       timeout=30)
    assert r.returncode == 1
    assert password not in r.stdout + r.stderr
    broker.delete_user(user)


def test_metrics_on_port_0_takes_a_free_port_and_logs_it(daemon_factory):
    """No free-port race for whoever starts many daemons at once."""
    import re
    d = daemon_factory({"metrics": {"listen": "127.0.0.1:0"}})
    port = int(re.search(r"msg=metrics_listening listen=127.0.0.1:0 "
                         r"port=(\d+)", d.log()).group(1))
    assert port > 0
    assert http_get("http://127.0.0.1:%d/healthz" % port)[0] == 200
