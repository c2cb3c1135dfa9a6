"""Integration fixtures: a private RabbitMQ for the session and the real
daemon from a temp config, started and awaited on its `ready` line."""
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

import pika
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("CASCADE_BUILD", "build"))
CASCADE = os.path.join(BUILD, "cascade")
PUBLISH = os.path.join(BUILD, "cascade-publish")
BROKER_SCRIPT = os.path.join(ROOT, "tools", "rabbitmq-private")


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


@pytest.fixture(scope="session")
def broker():
    directory = tempfile.mkdtemp(prefix="cascade-it-")
    try:
        out = subprocess.run([BROKER_SCRIPT, "start", directory], check=True,
                             capture_output=True, text=True, timeout=150)
    except subprocess.CalledProcessError as e:
        pytest.fail("private RabbitMQ did not start: " + e.stderr)
    b = Broker(directory, out.stdout.strip())
    yield b
    subprocess.run([BROKER_SCRIPT, "stop", directory], capture_output=True,
                   timeout=120)
    shutil.rmtree(directory, ignore_errors=True)


FAST = {
    "topology": {"resolution": "100ms", "factor": "2", "levels": "8"},
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
        self.config = os.path.join(tmpdir, self.prefix + ".ini")
        write_config(self.config, broker.url, merged)
        self.logpath = os.path.join(tmpdir, self.prefix + ".log")
        self.proc = None

    def start(self, timeout=30):
        self.logfile = open(self.logpath, "ab")
        env = dict(os.environ)
        env.pop("CASCADE_BROKER_URL", None)
        self.proc = subprocess.Popen([CASCADE, "-c", self.config],
                                     stdout=self.logfile,
                                     stderr=subprocess.STDOUT, env=env)
        self.wait_log("msg=ready", timeout)
        return self

    def log(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

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


@pytest.fixture
def daemon_factory(broker, tmp_path):
    made = []

    def make(sections=None, prefix=None, start=True):
        d = Daemon(broker, str(tmp_path), sections, prefix)
        made.append(d)
        return d.start() if start else d

    yield make
    for d in made:
        if d.proc is not None and d.proc.poll() is None:
            rc = d.stop()
            assert rc == 0, "cascade exited %s on SIGTERM:\n%s" % (rc, d.log())


@pytest.fixture
def daemon(daemon_factory):
    return daemon_factory()


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


@pytest.fixture
def client(broker):
    c = Client(broker)
    yield c
    c.close()


def free_port():
    """A TCP port on loopback that nothing listens on right now."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
