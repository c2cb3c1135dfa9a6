# SPDX-License-Identifier: Apache-2.0
"""amqps:// against a real RabbitMQ TLS listener: the CA, tls_verify, client
certificates, the host-name check and --check's errors, as a user would try
them. The broker (tls_broker) and its certificates are made once per
session; each test runs its own daemon with a unique prefix."""
import re
import signal
import subprocess
import time

import pytest

from helpers import CASCADE, Client, Daemon

READY_TIMEOUT = 60      # a loaded 2-core machine
FAIL_TIMEOUT = 60       # time to see the retries of a refused connection
SLACK_MS = 1            # due times are whole ms


class TlsDaemon(Daemon):
    def lines(self, msg):
        return [line for line in self.log().splitlines()
                if " msg=%s " % msg in line + " "]


@pytest.fixture
def tls_daemon(tls_broker, tmp_path):
    """make(url, **broker_keys): a daemon on url with those [broker] keys,
    spawned, not awaited. Each must exit 0 on SIGTERM at the end."""
    made = []

    def make(url, **broker):
        broker["url"] = url
        d = TlsDaemon(tls_broker, str(tmp_path), {"broker": broker})
        made.append(d)
        return d.spawn()

    yield make
    for d in made:
        if d.proc is not None and d.proc.poll() is None:
            rc = d.stop()
            assert rc == 0, "cascade exited %s on SIGTERM:\n%s" % (rc, d.log())


def assert_ready(d):
    d.wait_log("msg=ready", READY_TIMEOUT)
    ready = d.lines("ready")[0]
    assert " url=amqps://" in ready, ready
    assert "connect_failed" not in d.log(), d.log()


def assert_refused(d, *words):
    """Not ready, at least 3 connect_failed lines (so it keeps retrying and
    has not exited) whose reason holds every word; then SIGTERM: exit 0."""
    d.wait_log("msg=connect_failed", FAIL_TIMEOUT, count=3)
    assert d.proc.poll() is None, d.log()
    assert "msg=ready" not in d.log(), d.log()
    for line in d.lines("connect_failed"):
        m = re.search(r' reason="([^"]*)"', line)
        assert m, line
        reason = m.group(1).lower()
        for w in words:
            assert w in reason, "%r not in: %s" % (w, line)
    assert "guest:guest" not in d.log(), "password in the log:\n" + d.log()
    started = time.time()
    rc = d.stop(signal.SIGTERM, timeout=30)
    assert rc == 0, "exit %s on SIGTERM while not connected:\n%s" % (
        rc, d.log())
    assert time.time() - started < 15, "slow to stop: %.1fs" % (
        time.time() - started)
    return d.lines("connect_failed")[0]


def test_right_ca_ready_and_delivers_after_delay(tls_broker, tls_daemon):
    d = tls_daemon(tls_broker.tls_url, tls_ca_file=tls_broker.ca)
    assert_ready(d)
    client = Client(tls_broker)  # the publisher may use plain AMQP
    try:
        q = client.queue()
        sent = client.publish(d.prefix, q, b"over tls",
                              {"x-remaining-delay": "1500ms"},
                              message_id="tls-1")
        got = client.collect(q, 1, timeout=30)
    finally:
        client.close()
    assert len(got) == 1, "not delivered:\n" + d.log()
    arrived, props, body = got[0]
    assert body == b"over tls" and props.message_id == "tls-1"
    late_ms = (arrived - sent) * 1000 - 1500
    assert late_ms >= -SLACK_MS, "early by %.1f ms" % -late_ms
    assert late_ms < 5000, "late by %.0f ms" % late_ms
    # The daemon's connection really is the TLS one.
    rows = tls_broker.ctl("list_connections", "-q", "ssl", "client_properties")
    mine = [r for r in rows.stdout.splitlines() if "pid %d" % d.proc.pid in r]
    assert mine and mine[0].split()[0] == "true", rows.stdout


def test_wrong_ca_never_ready_keeps_retrying_and_stops_cleanly(
        tls_broker, tls_daemon):
    d = tls_daemon(tls_broker.tls_url, tls_ca_file=tls_broker.wrong_ca)
    line = assert_refused(d, "cert", "verif")
    print(line)


def test_wrong_ca_with_tls_verify_no_is_ready(tls_broker, tls_daemon):
    d = tls_daemon(tls_broker.tls_url, tls_ca_file=tls_broker.wrong_ca,
                   tls_verify="no")
    assert_ready(d)


def test_default_is_system_ca_store_so_private_ca_is_refused(
        tls_broker, tls_daemon):
    """Without tls_ca_file the system store is used, and verification is on
    by default: a broker certificate from a private CA is refused."""
    d = tls_daemon(tls_broker.tls_url)
    assert_refused(d, "cert", "verif")


def test_client_certificate_is_presented(tls_broker, tls_daemon):
    d = tls_daemon(tls_broker.tls_url, tls_ca_file=tls_broker.ca,
                   tls_cert_file=tls_broker.client_cert,
                   tls_key_file=tls_broker.client_key)
    assert_ready(d)
    rows = tls_broker.ctl("list_connections", "-q", "peer_cert_subject",
                          "client_properties")
    mine = [r for r in rows.stdout.splitlines() if "pid %d" % d.proc.pid in r]
    assert mine and "CN=cascade test client" in mine[0], rows.stdout


@pytest.fixture(scope="module")
def cert_required_port(tls_broker):
    """A listener with fail_if_no_peer_cert = true, in the same node."""
    return tls_broker.add_tls_listener(fail_if_no_peer_cert=True)


def test_broker_requiring_client_cert_accepts_ours(
        tls_broker, tls_daemon, cert_required_port):
    d = tls_daemon(tls_broker.amqps_url(port=cert_required_port),
                   tls_ca_file=tls_broker.ca,
                   tls_cert_file=tls_broker.client_cert,
                   tls_key_file=tls_broker.client_key)
    assert_ready(d)


@pytest.mark.parametrize("client_cert", ["none", "untrusted"])
def test_broker_requiring_client_cert_refuses(
        tls_broker, tls_daemon, cert_required_port, client_cert):
    keys = {"tls_ca_file": tls_broker.ca}
    if client_cert == "untrusted":
        keys.update(tls_cert_file=tls_broker.wrong_client_cert,
                    tls_key_file=tls_broker.wrong_client_key)
    d = tls_daemon(tls_broker.amqps_url(port=cert_required_port), **keys)
    # With TLS 1.3 the broker's refusal arrives after the client's side of
    # the handshake: rabbitmq-c reports it at login as an SSL error, with
    # OpenSSL's reason appended when the alert was read rather than reset.
    line = assert_refused(d, "ssl")
    print(line)


def test_host_name_not_in_certificate_is_refused(tls_broker, tls_daemon):
    """The broker's certificate names only DNS:localhost: reaching it as
    127.0.0.1 fails verification, although the chain is good."""
    d = tls_daemon(tls_broker.amqps_url(host="127.0.0.1"),
                   tls_ca_file=tls_broker.ca)
    line = assert_refused(d, "verif")
    print(line)


def test_host_name_mismatch_with_tls_verify_no_is_ready(tls_broker,
                                                        tls_daemon):
    d = tls_daemon(tls_broker.amqps_url(host="127.0.0.1"),
                   tls_ca_file=tls_broker.ca, tls_verify="no")
    assert_ready(d)


def test_ip_address_in_certificate_san_is_accepted(tls_broker, tls_daemon):
    """A certificate with IP:127.0.0.1 in its SAN verifies for
    amqps://127.0.0.1 (rabbitmq-c's own host check reads DNS names only;
    the daemon lets OpenSSL check IP addresses)."""
    port = tls_broker.add_tls_listener(certfile=tls_broker.server_ip_cert,
                                       keyfile=tls_broker.server_ip_key)
    d = tls_daemon(tls_broker.amqps_url(host="127.0.0.1", port=port),
                   tls_ca_file=tls_broker.ca)
    assert_ready(d)


def check(tmp_path, text):
    path = str(tmp_path / "cascade.ini")
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([CASCADE, "-c", path, "--check"], capture_output=True,
                       text=True, timeout=30)
    return path, r


def test_check_tls_file_with_plain_url_names_file_line_key(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    path, r = check(tmp_path, "[broker]\n"
                    "url = amqp://guest:guest@127.0.0.1:5672/%%2f\n"
                    "tls_ca_file = %s\n" % ca)
    assert r.returncode != 0, r.stdout
    # File, line and key; the words may change, the point (no amqps://) not.
    m = re.search(r"^%s:3: broker\.tls_ca_file: (.*)$" % re.escape(path),
                  r.stderr, re.M)
    assert m and "amqps://" in m.group(1), r.stderr


def test_check_missing_tls_ca_file_names_it(tmp_path):
    missing = str(tmp_path / "no-such-ca.pem")
    path, r = check(tmp_path, "[broker]\n"
                    "url = amqps://guest:guest@localhost:5671/%%2f\n"
                    "heartbeat = 30s\n"
                    "tls_ca_file = %s\n" % missing)
    assert r.returncode != 0, r.stdout
    assert "%s:4: broker.tls_ca_file: %s: No such file or directory" % (
        path, missing) in r.stderr, r.stderr
