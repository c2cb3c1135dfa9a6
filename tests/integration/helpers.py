# SPDX-License-Identifier: Apache-2.0
"""What the integration tests share besides fixtures (those are in
conftest.py): the paths of the build; the broker, daemon and client
wrappers; waiting, and how late a slow build may be; scraping /metrics;
cascade-ctl run against a daemon's config; and the test PKI.  The fault
suite's harness (brokers and clusters of a test's own, daemons that
reconnect fast, batches consumed in the background, the report of what
arrived) is in faults.py; what the tests of what waits share (a small
ladder, the listing, the records in the streams) in waiting.py; the trust
tests' users, daemons and forged records in trust.py.  Test modules import
from these, never from one another."""
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pika
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("CASCADE_BUILD", "build"))
CASCADE = os.path.join(BUILD, "cascade")
PUBLISH = os.path.join(BUILD, "cascade-publish")
BROKER_SCRIPT = os.path.join(ROOT, "tools", "rabbitmq-private")
CTL = os.path.join(BUILD, "cascade-ctl")


class Broker:
    def __init__(self, directory, url):
        self.dir = directory
        self.url = url

    def ctl(self, *args, check=True):
        return subprocess.run([BROKER_SCRIPT, "ctl", self.dir, *args],
                              check=check, capture_output=True, text=True,
                              timeout=120)

    def connect(self):
        return pika.BlockingConnection(pika.URLParameters(self.url))

    def eval(self, expr, timeout=60, check=True):
        """The value of Erlang expr on the node (expressions apart by
        commas, a full stop at the end or not), printed as `rabbitmqctl
        eval` prints it (~p); with check=False, None when it failed.

        Through erl_call (Erlang's erl_interface, in erlang-base), a C
        program that joins the node's distribution for one call: each
        rabbitmqctl starts an Erlang VM of its own and loads the CLI, 0.4
        to 1 s of CPU, and make check's polls of queues and its users
        made and deleted by the hundred were a share of a saturated
        machine's time.  erl_call prints an Erlang term its own way
        (binaries as #Bin<...>), so the node writes ~p's text to a file
        here and the call reads it."""
        env = {}
        with open(os.path.join(self.dir, "env")) as f:
            for line in f:
                m = re.match(r"(\w+)='?([^']*)'?$", line.strip())
                if m:
                    env[m.group(1)] = m.group(2)
        with open(os.path.join(self.dir, ".erlang.cookie")) as f:
            cookie = f.read().strip()
        out = os.path.join(self.dir, "eval-%s.out" % uuid.uuid4().hex[:12])
        body = expr.strip()
        if body.endswith("."):
            body = body[:-1]
        form = ("CascadeEvalResult = begin %s end, ok = file:write_file("
                "\"%s\", io_lib:format(\"~p~n\", [CascadeEvalResult])), "
                "ok.\n" % (body, out))
        r = subprocess.run([ERL_CALL, "-c", cookie, "-sname", env["NODE"],
                            "-timeout", str(timeout), "-e"], input=form,
                           capture_output=True, text=True,
                           timeout=timeout + 10)
        try:
            if r.returncode == 0 and r.stdout.strip() == "{ok, ok}":
                with open(out) as f:
                    return f.read()
        finally:
            if os.path.exists(out):
                os.unlink(out)
        if check:
            raise AssertionError("erl_call on %s failed: %s%s" % (
                env["NODE"], r.stdout, r.stderr))
        return None

    def add_user(self, name, password, configure=None, write=None,
                 read=None, tags=()):
        """A user (with permissions on / when given, and tags): what
        rabbitmqctl add_user, set_permissions and set_user_tags do, the
        same calls, in one erl_call."""
        calls = ["rabbit_auth_backend_internal:add_user(%s, %s, %s)" % (
            erl_bin(name), erl_bin(password), ACTING)]
        if configure is not None:
            calls.append("rabbit_auth_backend_internal:set_permissions("
                         "%s, <<\"/\">>, %s, %s, %s, %s)" % (
                             erl_bin(name), erl_bin(configure),
                             erl_bin(write), erl_bin(read), ACTING))
        if tags:
            calls.append(set_tags_call(name, tags))
        out = self.eval("[%s]" % ", ".join(calls))
        assert re.fullmatch(r"\[ok(,\s*ok)*\]\s*", out), out

    def set_user_tags(self, name, *tags):
        out = self.eval(set_tags_call(name, tags))
        assert out.strip() == "ok", out

    def delete_user(self, name):
        """rabbitmqctl delete_user, without its failure when none is."""
        self.eval("rabbit_auth_backend_internal:delete_user(%s, %s)" % (
            erl_bin(name), ACTING), check=False)

    def alive(self):
        """Whether the node's VM runs (its pid file names a beam.smp)."""
        try:
            with open(os.path.join(self.dir, "pid")) as f:
                pid = f.read().strip()
            with open("/proc/%s/comm" % pid) as f:
                return f.read().strip() == "beam.smp"
        except (OSError, ValueError):
            return False

    def queue_counts(self):
        """{name: (messages, messages_ready, messages_unacknowledged)} of
        every queue of the virtual host /, as rabbitmqctl list_queues
        shows them (a quorum queue's as of its last tick, every few
        seconds); -1 where the queue cannot say."""
        out = self.eval(QUEUE_COUNTS)
        return {name: tuple(int(n) for n in nums.split(","))
                for name, nums in re.findall(
                    r'\{<<"([^"]+)">>,\s*\[([-\d,\s]+)\]\}', out)}


ERL_CALL = "erl_call"
# Who the tests' changes to users are logged as (rabbitmqctl's are
# <<"rmq-cli">>).
ACTING = '<<"cascade-tests">>'
QUEUE_COUNTS = """
[begin
   I = case catch rabbit_amqqueue:info(Q, [messages, messages_ready,
                                         messages_unacknowledged]) of
           L when is_list(L) -> L;
           _ -> []
       end,
   {element(4, amqqueue:get_name(Q)),
    [case proplists:get_value(K, I) of N when is_integer(N) -> N; _ -> -1 end
     || K <- [messages, messages_ready, messages_unacknowledged]]}
 end
 || Q <- rabbit_amqqueue:list(<<"/">>)]
"""


# Deletes, in a process of the node's own (the call returns at once), the
# queues of the virtual host / whose names start with one of Ps, as
# queue.delete does.
DELETE_QUEUES = """
Ps = [%s],
spawn(fun() ->
  [catch rabbit_amqqueue:delete(Q, false, false, <<"cascade-tests">>)
   || Q <- rabbit_amqqueue:list(<<"/">>),
      lists:any(fun(P) ->
                    N = element(4, amqqueue:get_name(Q)),
                    binary:longest_common_prefix([N, P]) =:= byte_size(P)
                end, Ps)]
end),
ok
"""


def delete_queues(daemons):
    """Delete the queues (the ladder, the return queues, the streams...:
    every queue named PREFIX.*) of each of daemons that no longer runs,
    on its broker when that still runs.

    A test's daemon leaves some 13 quorum queues and 3 streams that
    nothing uses again, and make check's session brokers gathered some
    2,000 each: every quorum queue ticks every few seconds, so an idle
    broker then spent 15 % of a core on them, on a machine the whole
    check keeps busy."""
    by = {}
    for d in daemons:
        if d.proc is None or d.proc.poll() is not None:
            by.setdefault(d.broker.dir, (d.broker, set()))[1].add(d.prefix)
    for b, prefixes in by.values():
        if b.alive():
            b.eval(DELETE_QUEUES % ", ".join(erl_bin(p + ".")
                                             for p in sorted(prefixes)),
                   timeout=10, check=False)


def set_tags_call(name, tags):
    """Erlang: give user name the tags (rabbitmqctl set_user_tags)."""
    return "rabbit_auth_backend_internal:set_tags(%s, [%s], %s)" % (
        erl_bin(name), ", ".join("'%s'" % t for t in tags), ACTING)


def erl_bin(text):
    """text as an Erlang binary literal."""
    return "<<\"%s\">>" % text.replace("\\", "\\\\").replace('"', '\\"')


_versions = {}


def broker_version(broker):
    """(major, minor) of the broker's RabbitMQ, asked once per node: each
    rabbitmqctl starts an Erlang VM, a second or two of CPU under make
    check's load (a fixture that asked for every test of test_native was
    a quarter of the rabbitmqctl time sampled in one run)."""
    if broker.dir not in _versions:
        out = broker.eval("rabbit_misc:version()").strip().strip('"')
        m = re.match(r"(\d+)\.(\d+)", out)
        assert m, out
        _versions[broker.dir] = int(m.group(1)), int(m.group(2))
    return _versions[broker.dir]


def wait_for(predicate, timeout, what, every=0.1):
    """Poll predicate every `every` seconds until it is true; fail naming
    what after timeout seconds (what may be a function, asked then: it can
    say what was last seen).  Tests wait on what they can observe, never a
    bare sleep."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(every)
    pytest.fail("timed out after %ss waiting for %s" %
                (timeout, what() if callable(what) else what))


def http_get(url):
    """(status, body) of a GET; errors are answers too."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(url):
    """The Prometheus text at url/metrics as {'name{labels}': value}."""
    status, body = http_get(url + "/metrics")
    assert status == 200, body
    samples = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def total(samples, name):
    """The sum of metric name over all its labels."""
    return sum(v for k, v in samples.items()
               if k == name or k.startswith(name + "{"))


# A daemon that serves /metrics on a port the kernel picks (no free-port
# race); Daemon.metrics() finds it in the log.
METRICS = {"metrics": {"listen": "127.0.0.1:0"}}


FAST = {
    # CASCADE_TEST_MODE=native|auto: the whole suite in that waiting mode
    # (make test-native), unless a test sets its own; the last second in
    # a holding queue, so that a longer delay takes the ladder first.
    # Without it, the ladder: the default, auto, waits natively on 4.3,
    # and the 4.3.6 ladder run is there for the ladder's hops.
    "topology": dict({"resolution": "100ms", "factor": "2", "levels": "8"},
                     **({"mode": os.environ["CASCADE_TEST_MODE"],
                         "native_window": "1s"}
                        if os.environ.get("CASCADE_TEST_MODE") else
                        {"mode": "ladder"})),
    # Many daemons run at once: none on the default metrics port.
    "metrics": {"listen": ""},
}


def write_config(path, url, sections):
    with open(path, "w") as f:
        for section, keys in sections.items():
            f.write("[%s]\n" % section)
            for k, v in keys.items():
                f.write("%s = %s\n" % (k, v))
            f.write("\n")


# Every Daemon made, in order (conftest deletes the queues of a test's).
DAEMONS = []


class Daemon:
    """The real build/cascade, from a temp config with a unique prefix."""

    def __init__(self, broker, tmpdir, sections=None, prefix=None):
        if not os.access(CASCADE, os.X_OK):
            pytest.fail("%s is missing: run `make` first" % CASCADE)
        self.broker = broker
        self.prefix = prefix or "t" + uuid.uuid4().hex[:8]
        merged = {"broker": {"url": broker.url, "heartbeat": "5s"}}
        for section, keys in FAST.items():
            merged.setdefault(section, {}).update(keys)
        merged["topology"]["prefix"] = self.prefix
        for section, keys in (sections or {}).items():
            merged.setdefault(section, {}).update(keys)
        # Native waiting needs quorum queues: with classic ones the test
        # mode asks for auto, which keeps the ladder.
        if merged["topology"].get("queue_type") == "classic" and \
                merged["topology"].get("mode") == "native" and \
                "mode" not in (sections or {}).get("topology", {}):
            merged["topology"]["mode"] = "auto"
        self.config = os.path.join(tmpdir, self.prefix + ".ini")
        write_config(self.config, broker.url, merged)
        self.logpath = os.path.join(tmpdir, self.prefix + ".log")
        self.proc = None
        # Another build's daemon, to measure against (tools, by hand).
        self.binary = CASCADE
        DAEMONS.append(self)
        # Run in the child before the daemon (a resource limit, say).
        self.preexec = None

    def spawn(self):
        """Start without waiting for `ready` (it may never come)."""
        self.logfile = open(self.logpath, "ab")
        env = dict(os.environ)
        env.pop("CASCADE_BROKER_URL", None)
        self.proc = subprocess.Popen([self.binary, "-c", self.config],
                                     stdout=self.logfile,
                                     stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=self.preexec)
        return self

    def start(self, timeout=30):
        # A restart appends to the same log: wait for a ready line of its
        # own, not the last run's.
        before = self.log().count("msg=ready") if \
            os.path.exists(self.logpath) else 0
        self.spawn()
        self.wait_log("msg=ready", timeout, count=before + 1)
        return self

    def log(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def metrics_url(self):
        """Where a daemon started with METRICS serves /metrics: the port
        it logged last (a restart binds another)."""
        ports = re.findall(r"msg=metrics_listening listen=\S+ port=(\d+)",
                           self.log())
        assert ports, "no msg=metrics_listening: start it with METRICS\n" + \
            self.log()
        return "http://127.0.0.1:%s" % ports[-1]

    def metrics(self):
        """Its /metrics now, as scrape() gives them."""
        return scrape(self.metrics_url())

    def wait_log(self, needle, timeout=30, count=1):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.log().count(needle) >= count:
                return
            if self.proc is not None and self.proc.poll() is not None:
                pytest.fail("cascade exited with %s before %r:\n%s" %
                            (self.proc.returncode, needle, self.log()))
            time.sleep(0.05)
        pytest.fail("no %r in cascade's log after %ss:\n%s" %
                    (needle, timeout, self.log()))

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("cascade did not exit %ss after signal %s" %
                        (timeout, sig))
        self.logfile.close()
        return rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
            self.logfile.close()


class Client:
    """A pika publisher/consumer with confirms, as a user would write."""

    def __init__(self, broker):
        self.conn = broker.connect()
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()

    def queue(self, name=None, **arguments):
        name = name or "q-" + uuid.uuid4().hex[:8]
        self.ch.queue_declare(name, arguments=arguments or None)
        return name

    def publish(self, exchange, routing_key, body, headers=None, **props):
        sent = time.time()
        self.ch.basic_publish(exchange, routing_key, body,
                              pika.BasicProperties(headers=headers, **props),
                              mandatory=True)
        return sent

    def collect(self, queue, count, timeout):
        """Up to count messages from queue: (arrival time, props, body)."""
        got = []

        def on_message(ch, method, props, body):
            got.append((time.time(), props, body))
            ch.basic_ack(method.delivery_tag)

        tag = self.ch.basic_consume(queue, on_message)
        deadline = time.time() + timeout
        while len(got) < count and time.time() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        self.ch.basic_cancel(tag)
        return got

    def drain(self, queue):
        """Everything now in queue, without waiting."""
        got = []
        while True:
            m, p, b = self.ch.basic_get(queue, auto_ack=True)
            if m is None:
                return got
            got.append((time.time(), p, b))

    def close(self):
        try:
            self.conn.close()
        except Exception:
            pass


def target(client, kind="direct", key="orders"):
    """A new exchange with a queue bound to it by key."""
    ex = "ex-" + uuid.uuid4().hex[:8]
    client.ch.exchange_declare(ex, kind)
    q = client.queue()
    client.ch.queue_bind(q, ex, key)
    return ex, q


def ctl(d, *args, rc=0):
    """Run cascade-ctl with d's config; check its exit status."""
    env = dict(os.environ)
    env.pop("CASCADE_BROKER_URL", None)
    r = subprocess.run([CTL, "-c", d.config, *args], capture_output=True,
                       text=True, timeout=120, env=env)
    if rc is not None:
        assert r.returncode == rc, (r.returncode, r.stdout, r.stderr)
    return r


def status(d):
    return json.loads(ctl(d, "status", "--json").stdout)


def wait_status(d, pred, timeout=20, what="cascade-ctl status to match"):
    """Poll `status --json` until pred(status) holds: that status.  As
    wait_for, fail the test after timeout seconds, naming what, with the
    last status seen."""
    last = [None]

    def matches():
        last[0] = status(d)
        return pred(last[0])

    wait_for(matches, timeout,
             lambda: "%s; last status: %s" % (what, json.dumps(last[0])))
    return last[0]


def wait_parked(d, n, timeout=20):
    """Wait until d's error queue holds n messages, and no more."""
    s = wait_status(d, lambda s: s["error"]["messages"] >= n, timeout,
                    "%d parked message(s) in the error queue" % n)
    assert s["error"]["messages"] == n, s["error"]


def parked(d):
    return json.loads(ctl(d, "errors", "--json").stdout)


def free_port():
    """A TCP port on loopback that nothing is bound to now, below the
    kernel's ephemeral range, as the private brokers' ports are (see
    tools/rabbitmq-private): a client's connection cannot take it before
    whatever it is for listens on it."""
    return int(subprocess.run([BROKER_SCRIPT, "port"], check=True,
                              capture_output=True, text=True,
                              timeout=30).stdout)


def loopback6():
    """Whether this machine has IPv6's loopback, ::1 (a socket binds it):
    without it a test of both families skips, saying so."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def metrics_daemon(daemon_factory, start=True, **sections):
    """A daemon serving /metrics, and the URL to scrape.  On a port of its
    own, not 0: cascade-ctl status reads the targets from the address in
    the config, and some tests restart the daemon and scrape it again."""
    port = free_port()
    s = {"metrics": {"listen": "127.0.0.1:%d" % port}}
    for k, v in sections.items():
        s.setdefault(k, {}).update(v)
    d = daemon_factory(s, start=start)
    return d, "http://127.0.0.1:%d" % port


# How much later than a test's bound a message may come in a slow build or
# on a loaded machine: CASCADE_TEST_LATE_SCALE is 3 under ASan and UBSan
# (the Makefile sets it with SANITIZER), which make the daemon some three
# times slower; CASCADE_TEST_LOAD_SCALE is 2 in tools/check, whose two
# lanes run four tests and their brokers on two cores, where a stall of a
# few hundred ms now and then delays every message in flight at once.
# Bounds on lateness only: early is wrong in every build.
LATE_SCALE = float(os.environ.get("CASCADE_TEST_LATE_SCALE") or 1) * \
    float(os.environ.get("CASCADE_TEST_LOAD_SCALE") or 1)


# TLS: certificates made with the openssl command, and a second private
# broker with a TLS listener, started only by the tests that ask for it.

def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True, text=True, timeout=60)


def make_ca(directory, name, cn):
    """A self-signed CA: name.pem and name.key in directory."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "30",
            "-subj", "/CN=" + cn, "-keyout", name + ".key",
            "-out", name + ".pem",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            cwd=directory)


def make_leaf(directory, name, ca, cn, extensions):
    """A certificate for cn signed by the CA ca: name.pem and name.key."""
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=" + cn,
            "-keyout", name + ".key", "-out", name + ".csr", cwd=directory)
    with open(os.path.join(directory, name + ".ext"), "w") as f:
        f.write("basicConstraints = CA:FALSE\n")
        f.write("keyUsage = critical,digitalSignature\n")
        for line in extensions:
            f.write(line + "\n")
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem",
            "-CAkey", ca + ".key", "-set_serial", "0x" + uuid.uuid4().hex,
            "-days", "30", "-extfile", name + ".ext", "-out", name + ".pem",
            cwd=directory)


class Certs:
    """Paths of the test PKI: .ca, .wrong_ca (an unrelated CA), the
    broker's .server_cert/.server_key (SAN DNS:localhost only) and
    .server_ip_cert/.server_ip_key (SAN DNS:localhost and IP:127.0.0.1),
    .client_cert/.client_key signed by .ca, and .wrong_client_cert/
    .wrong_client_key signed by .wrong_ca."""

    def __init__(self, directory):
        self.dir = directory
        make_ca(directory, "ca", "cascade test CA")
        make_ca(directory, "wrong-ca", "unrelated test CA")
        server = ["extendedKeyUsage = serverAuth"]
        make_leaf(directory, "server", "ca", "localhost",
                  server + ["subjectAltName = DNS:localhost"])
        make_leaf(directory, "server-ip", "ca", "localhost",
                  server + ["subjectAltName = DNS:localhost,IP:127.0.0.1"])
        client = ["extendedKeyUsage = clientAuth"]
        make_leaf(directory, "client", "ca", "cascade test client", client)
        make_leaf(directory, "wrong-client", "wrong-ca",
                  "cascade untrusted client", client)
        p = lambda name: os.path.join(directory, name)  # noqa: E731
        self.ca, self.wrong_ca = p("ca.pem"), p("wrong-ca.pem")
        self.server_cert, self.server_key = p("server.pem"), p("server.key")
        self.server_ip_cert = p("server-ip.pem")
        self.server_ip_key = p("server-ip.key")
        self.client_cert, self.client_key = p("client.pem"), p("client.key")
        self.wrong_client_cert = p("wrong-client.pem")
        self.wrong_client_key = p("wrong-client.key")


class TlsBroker(Broker):
    """A private broker with a TLS listener (verify_peer, client
    certificate optional) at .tls_url (host localhost); .url is its plain
    AMQP URL, .certs the test PKI (see Certs), also as attributes."""

    def __init__(self, directory, url, tls_url, certs):
        super().__init__(directory, url)
        self.tls_url = tls_url
        self.tls_port = int(tls_url.rsplit(":", 1)[1].split("/", 1)[0])
        self.certs = certs
        for k, v in vars(certs).items():
            if k != "dir":
                setattr(self, k, v)

    def amqps_url(self, host="localhost", port=None):
        return "amqps://guest:guest@%s:%d/%%2f" % (host,
                                                    port or self.tls_port)

    def add_tls_listener(self, certfile=None, keyfile=None,
                         fail_if_no_peer_cert=False):
        """Another TLS listener on 127.0.0.1 with the same CA and other
        options, started in the running node (no restart): its port."""
        port = free_port()
        opts = "[{cacertfile, \"%s\"}, {certfile, \"%s\"}, " \
               "{keyfile, \"%s\"}, {verify, verify_peer}, " \
               "{fail_if_no_peer_cert, %s}]" % (
                   self.ca, certfile or self.server_cert,
                   keyfile or self.server_key,
                   "true" if fail_if_no_peer_cert else "false")
        out = self.eval("rabbit_networking:start_ssl_listener("
                        "{\"127.0.0.1\", %d}, %s, 1)." % (port, opts))
        assert out.strip() == "ok", out
        return port
