# SPDX-License-Identifier: Apache-2.0
"""cascade-ctl status: the broker's dead-letter re-send timeout
(dead_letter_worker_publisher_confirm_timeout, advanced.config only), read
from the management API's /api/config/effective, which RabbitMQ has from
3.12; on 3.10 and without the management plugin it is reported unknown.

Two private brokers of the module's own carry the management plugin, one
at RabbitMQ's default (180000) and one at conf/advanced.config's (10000):
the plugin takes some 15 s to boot, so the tests on them are slow.  The
others use the session broker (no management plugin) and a fake
management API, and stay in the fast tier."""
import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

from helpers import BROKER_SCRIPT, CTL, wait_for

KEY = "dead_letter_worker_publisher_confirm_timeout"
LINE = "dead-letter re-send after a broker restart: "
WARNING = ("cascade-ctl: warning: the broker's "
           "dead_letter_worker_publisher_confirm_timeout is RabbitMQ's "
           "default, 180 s: after a broker restart, messages that fell "
           "due meanwhile can arrive 3 minutes late or more, and out of "
           "order, the more often the more quorum queues the broker "
           "holds; set it in advanced.config (conf/advanced.config: 10 s)")
CONSEQUENCE = ("at RabbitMQ's default, 180 s, messages that fell due "
               "during a broker restart can arrive 3 minutes late or more, "
               "and out of order, the more often the more quorum queues "
               "the broker holds")


class MgmtBroker:
    """A private broker with the management plugin at .mgmt_url (no
    credentials in it: guest, the AMQP URL's, is an administrator)."""

    def __init__(self, directory, url, mgmt_url):
        self.dir, self.url, self.mgmt_url = directory, url, mgmt_url
        self.version = None

    def get(self, path, auth="guest:guest"):
        req = urllib.request.Request(self.mgmt_url + path)
        req.add_header("Authorization", "Basic " +
                       base64.b64encode(auth.encode()).decode())
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.read().decode()

    def ctl(self, *args):
        return subprocess.run([BROKER_SCRIPT, "ctl", self.dir, *args],
                              check=True, capture_output=True, text=True,
                              timeout=120)

    def has_effective(self):
        """RabbitMQ 3.12 and later serve /api/config/effective."""
        major, minor = (int(x) for x in self.version.split(".")[:2])
        return (major, minor) >= (3, 12)


def start_mgmt_broker(directory, confirm_timeout):
    env = dict(os.environ, RABBITMQ_PRIVATE_PLUGINS="rabbitmq_management",
               RABBITMQ_PRIVATE_DLX_CONFIRM_TIMEOUT=str(confirm_timeout))
    return subprocess.Popen([BROKER_SCRIPT, "start", directory], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def env_value(directory, name):
    with open(os.path.join(directory, "env")) as f:
        for line in f:
            if line.startswith(name + "="):
                return line.split("=", 1)[1].strip().strip("'")
    raise AssertionError("no %s in %s/env" % (name, directory))


@pytest.fixture(scope="module")
def mgmt_brokers():
    """{180000: broker, 10000: broker}, booted side by side."""
    top = tempfile.mkdtemp(prefix="cascade-dlx-")
    dirs = {ms: os.path.join(top, str(ms)) for ms in (180000, 10000)}
    procs = {ms: start_mgmt_broker(d, ms) for ms, d in dirs.items()}
    brokers = {}
    try:
        for ms, p in procs.items():
            out, err = p.communicate(timeout=180)
            if p.returncode != 0:
                pytest.fail("private RabbitMQ with management did not "
                            "start: " + err)
            b = MgmtBroker(dirs[ms], out.strip(),
                           env_value(dirs[ms], "MGMT_URL"))
            brokers[ms] = b

            def overview(b=b):
                try:
                    b.version = json.loads(
                        b.get("/api/overview"))["rabbitmq_version"]
                    return True
                except OSError:
                    return False

            wait_for(overview, 60, "the management API of " + b.mgmt_url)
        yield brokers
    finally:
        for d in dirs.values():
            subprocess.run([BROKER_SCRIPT, "stop", d], capture_output=True,
                           timeout=120)
        shutil.rmtree(top, ignore_errors=True)


def status(url, *args, management=None, env_management=None, password=None,
           config=None):
    """cascade-ctl status against url; (CompletedProcess, seconds)."""
    env = dict(os.environ)
    for k in ("CASCADE_BROKER_URL", "CASCADE_MANAGEMENT_URL",
              "CASCADE_BROKER_PASSWORD"):
        env.pop(k, None)
    if url is not None:
        env["CASCADE_BROKER_URL"] = url
    if env_management is not None:
        env["CASCADE_MANAGEMENT_URL"] = env_management
    if password is not None:
        env["CASCADE_BROKER_PASSWORD"] = password
    argv = [CTL]
    if config is not None:
        argv += ["-c", config]
    argv.append("status")
    if management is not None:
        argv += ["--management", management]
    started = time.time()
    r = subprocess.run(argv + list(args), capture_output=True, text=True,
                       timeout=60, env=env)
    elapsed = time.time() - started
    # No cascade ran on these brokers: every queue is missing, which status
    # reports on stderr with exit status 0, whatever the timeout's fate.
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r, elapsed


def dlx_line(r):
    last = r.stdout.rstrip("\n").splitlines()[-1]
    assert last.startswith(LINE), r.stdout
    return last[len(LINE):]


def assert_unknown(r, *words):
    line = dlx_line(r)
    assert line.startswith("unknown ("), line
    assert CONSEQUENCE in line, line
    for w in words:
        assert w in line, line
    assert "warning: the broker's" not in r.stderr, r.stderr


@pytest.mark.slow
def test_default_timeout_warns(mgmt_brokers):
    """180000 (RabbitMQ's default) from CASCADE_MANAGEMENT_URL, with the
    broker URL's user and password: the line, and a warning."""
    b = mgmt_brokers[180000]
    r, _ = status(b.url, env_management=b.mgmt_url)
    j, _ = status(b.url, "--json", env_management=b.mgmt_url)
    s = json.loads(j.stdout)
    if b.has_effective():
        assert dlx_line(r) == "180s (%s, RabbitMQ's default)" % KEY
        assert WARNING in r.stderr.splitlines(), r.stderr
        assert s["dlx_confirm_timeout_ms"] == 180000
        assert s["dlx_confirm_timeout_source"] == "management"
        assert WARNING in j.stderr.splitlines(), j.stderr
    else:
        assert_unknown(r, b.mgmt_url, "RabbitMQ " + b.version,
                       "only from 3.12")
        assert s["dlx_confirm_timeout_ms"] is None
        assert "only from 3.12" in s["dlx_confirm_timeout_source"]
        assert "warning: the broker's" not in j.stderr
    # The fields status had before are all still there.
    for k in ("prefix", "exchange", "shards", "levels", "ladder_messages",
              "ingress", "return", "retry", "error", "returns",
              "draining", "draining_messages", "missing", "targets"):
        assert k in s, k


@pytest.mark.slow
def test_ten_seconds_no_warning(mgmt_brokers):
    """10000 (conf/advanced.config's) from --management: 10s, no
    warning; --management wins over CASCADE_MANAGEMENT_URL."""
    b = mgmt_brokers[10000]
    other = mgmt_brokers[180000]
    r, _ = status(b.url, management=b.mgmt_url,
                  env_management=other.mgmt_url)
    j, _ = status(b.url, "--json", management=b.mgmt_url)
    s = json.loads(j.stdout)
    if b.has_effective():
        assert dlx_line(r) == "10s (%s)" % KEY
        assert s["dlx_confirm_timeout_ms"] == 10000
        assert s["dlx_confirm_timeout_source"] == "management"
    else:
        assert_unknown(r, "RabbitMQ " + b.version, "only from 3.12")
        assert s["dlx_confirm_timeout_ms"] is None
    assert "warning: the broker's" not in r.stderr + j.stderr


@pytest.mark.slow
def test_password_from_the_environment(mgmt_brokers):
    """CASCADE_BROKER_PASSWORD replaces the URL's password for the
    management API as for the AMQP connection."""
    b = mgmt_brokers[10000]
    wrong = b.url.replace("guest:guest@", "guest:wrong@")
    assert wrong != b.url
    r, _ = status(wrong, env_management=b.mgmt_url, password="guest")
    if b.has_effective():
        assert dlx_line(r) == "10s (%s)" % KEY
    else:
        assert_unknown(r, "only from 3.12")


@pytest.mark.slow
def test_not_an_administrator_is_unknown(mgmt_brokers):
    """The API shows the config to administrators only: a monitoring
    user, or a wrong password, leaves it unknown, without a warning."""
    b = mgmt_brokers[180000]
    b.ctl("add_user", "dlx-monitor", "pw")
    b.ctl("set_user_tags", "dlx-monitor", "monitoring")
    host = b.mgmt_url[len("http://"):]
    r, _ = status(b.url, management="http://dlx-monitor:pw@" + host)
    w, _ = status(b.url, management="http://guest:wrong@" + host)
    if b.has_effective():
        assert_unknown(r, "user dlx-monitor is not an administrator")
        assert_unknown(w, "refused user guest")
    else:
        assert_unknown(r, "only from 3.12")
        assert_unknown(w, "only from 3.12")


def test_no_management_plugin_is_unknown_quickly(broker):
    """The session broker has no management plugin: by default status
    asks http://127.0.0.1:15672 with the broker URL's credentials."""
    s = socket.socket()
    try:
        if s.connect_ex(("127.0.0.1", 15672)) == 0:
            pytest.skip("something listens on 127.0.0.1:15672")
    finally:
        s.close()
    r, elapsed = status(broker.url)
    assert_unknown(r, "no management API at http://127.0.0.1:15672")
    assert elapsed < 5, elapsed
    j, _ = status(broker.url, "--json")
    s = json.loads(j.stdout)
    assert s["dlx_confirm_timeout_ms"] is None
    assert "http://127.0.0.1:15672" in s["dlx_confirm_timeout_source"]
    # An empty URL: not asked at all.
    r, _ = status(broker.url, management="")
    assert_unknown(r, "not asked")


def test_a_silent_management_port_times_out(broker):
    """A listener that never answers: unknown after about 2 s."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    try:
        r, elapsed = status(broker.url,
                            management="http://127.0.0.1:%d" % port)
    finally:
        srv.close()
    assert_unknown(r, "no answer within 2 s")
    assert elapsed < 5, elapsed


def test_management_url_checked_on_the_command_line(broker):
    env = dict(os.environ, CASCADE_BROKER_URL=broker.url)
    for bad in ("https://127.0.0.1:15671", "ftp://x", "http://:15672",
                "http://h:port"):
        r = subprocess.run([CTL, "status", "--management", bad],
                           capture_output=True, text=True, timeout=30,
                           env=env)
        assert r.returncode == 2, (bad, r.stderr)
        assert "cascade-ctl: --management: " in r.stderr
    r = subprocess.run([CTL, "errors", "--management", "http://h"],
                       capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 2 and "not valid for errors" in r.stderr


# Slow: a TLS broker of its own takes 9 s to start.
@pytest.mark.slow
def test_amqps_broker_is_not_asked(tls_broker, tmp_path):
    """An amqps:// broker URL: status does not guess where its management
    API is (nor speaks https) and says so."""
    config = tmp_path / "tls.ini"
    config.write_text("[broker]\nurl = %s\ntls_ca_file = %s\n" %
                      (tls_broker.tls_url, tls_broker.ca))
    r, elapsed = status(None, config=str(config))
    assert_unknown(r, "amqps broker", "--management")
    assert elapsed < 5, elapsed


class FakeManagement:
    """An HTTP server on loopback answering every GET with .status and
    .body (text/plain); .seen holds (path, Authorization) of each."""

    def __init__(self, port=0):
        import http.server
        import threading
        fake = self
        self.status, self.body, self.seen = 200, "", []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                fake.seen.append((self.path,
                                  self.headers.get("Authorization")))
                body = fake.body.encode()
                self.send_response(fake.status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", port), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_management():
    f = FakeManagement()
    yield f
    f.close()


ENV_OTHER_APPS = """[{amqp_client,[{prefer_ipv6,false}]},
 {khepri,[{note,"a string with {braces}, ] and \\"quotes\\""},
          {'quoted atom',{dead_letter_worker_publisher_confirm_timeout,1}}]},
 {rabbit,
     [{auth_mechanisms,['PLAIN','AMQPLAIN']},
      {data_dir,"/var/lib/rabbitmq/{x}"},
%s
      {default_user,<<"guest">>}]},
 {rabbitmq_management,[{dead_letter_worker_publisher_confirm_timeout,2}]}]
"""


@pytest.mark.parametrize("entry,ms", [
    ("      {dead_letter_worker_publisher_confirm_timeout,10000},", 10000),
    ("      {dead_letter_worker_publisher_confirm_timeout,\n"
     "          2500},", 2500),
    ("      {dead_letter_worker_publisher_confirm_timeout,180000},", 180000),
    ("", 180000),  # absent: RabbitMQ's default
])
def test_only_the_rabbit_application_counts(broker, fake_management, entry,
                                            ms):
    """The key is read from rabbit's environment only, whatever the other
    applications and strings hold; without it the default applies."""
    fake_management.body = ENV_OTHER_APPS % entry
    r, _ = status(broker.url, management=fake_management.url)
    j, _ = status(broker.url, "--json", management=fake_management.url)
    shown = "%ds" % (ms // 1000) if ms % 1000 == 0 else "%dms" % ms
    if ms == 180000:
        assert dlx_line(r) == "180s (%s, RabbitMQ's default)" % KEY
        assert WARNING in r.stderr.splitlines(), r.stderr
    else:
        assert dlx_line(r) == "%s (%s)" % (shown, KEY)
        assert "warning: the broker's" not in r.stderr
    assert json.loads(j.stdout)["dlx_confirm_timeout_ms"] == ms


def test_credentials_and_path_prefix(broker, fake_management):
    """By default the broker URL's user and password (basic auth); a
    --management URL's own, percent-decoded, win; a path prefix is kept."""
    fake_management.body = ENV_OTHER_APPS % ""
    status(broker.url, management=fake_management.url)
    status(broker.url,
           management=fake_management.url.replace(
               "http://", "http://ad%40min:p%3Ass%2Fw@") + "/rabbitmq/")
    assert fake_management.seen == [
        ("/api/config/effective",
         "Basic " + base64.b64encode(b"guest:guest").decode()),
        ("/rabbitmq/api/config/effective",
         "Basic " + base64.b64encode(b"ad@min:p:ss/w").decode())]


def test_an_answer_that_is_not_the_config_is_unknown(broker,
                                                     fake_management):
    fake_management.body = "<html>login</html>"
    r, _ = status(broker.url, management=fake_management.url)
    assert_unknown(r, "not RabbitMQ's app env")
    fake_management.status, fake_management.body = 500, \
        '{"error":"internal","reason":"boom"}'
    r, _ = status(broker.url, management=fake_management.url)
    assert_unknown(r, "HTTP 500 boom")


def test_default_url_is_checked_against_the_amqp_port(broker):
    """By default status asks HOST:15672, which may be another broker's
    (a system RabbitMQ beside a private one): unless rabbit's
    tcp_listeners hold the AMQP port it connected to, it is not believed."""
    try:
        fake = FakeManagement(15672)
    except OSError:
        pytest.skip("127.0.0.1:15672 is taken")
    port = int(broker.url.rsplit(":", 1)[1].split("/", 1)[0])
    try:
        fake.body = ENV_OTHER_APPS % (
            '      {tcp_listeners,[{"127.0.0.1",5672}]},\n'
            '      {dead_letter_worker_publisher_confirm_timeout,10000},')
        r, _ = status(broker.url)
        assert_unknown(r, "http://127.0.0.1:15672 belongs to another node",
                       "port %d" % port)
        fake.body = ENV_OTHER_APPS % (
            '      {tcp_listeners,[{"127.0.0.1",%d}]},\n'
            '      {dead_letter_worker_publisher_confirm_timeout,10000},'
            % port)
        r, _ = status(broker.url)
        assert dlx_line(r) == "10s (%s)" % KEY
        # Given explicitly, the URL is believed.
        fake.body = ENV_OTHER_APPS % (
            '      {tcp_listeners,[5672]},\n'
            '      {dead_letter_worker_publisher_confirm_timeout,10000},')
        r, _ = status(broker.url, management="http://127.0.0.1:15672")
        assert dlx_line(r) == "10s (%s)" % KEY
        # Each of the three asked with the broker's credentials.  The port
        # is the machine's, so a test run beside this one (make check runs
        # several) may ask it too: more than three, never other ones.
        seen = [a for _, a in fake.seen]
        assert len(seen) >= 3 and set(seen) == {
            "Basic " + base64.b64encode(b"guest:guest").decode()}
    finally:
        fake.close()
