# SPDX-License-Identifier: Apache-2.0
"""The container image as a user runs it (make test-image).

make test-image builds conf/container/Containerfile unchanged (tools/image
build), on a debian:bookworm-slim that tools/image base made from Debian's
packages when no registry can be reached, and then runs these tests
against a private broker of the module's own: the daemon from the image
delivers a 2 s message on time, stops on SIGTERM with exit status 0 and
nothing lost, its health check turns unhealthy when the broker goes and
healthy when it comes back, the console from the same image serves its
login page, and it all runs read-only as a user that is not root, as
docs/operations.md ("In a container") says.

Containers run under runc with the host's network (podman's crun cannot
start containers on these machines), each with limits the machine allows
(RUN_FLAGS).  Needs root and podman (make test-image installs it).
"""
import json
import os
import re
import resource
import subprocess
import time
import urllib.request
import uuid

import pika
import pytest

from faults import (Collector, check, own_broker, publish_batch, report,
                    restart_broker, stop_broker)
from helpers import LATE_SCALE, free_port, http_get, wait_for

pytestmark = pytest.mark.image

IMAGE = os.environ.get("CASCADE_IMAGE", "localhost/cascade:test")
NOFILE = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
# What a user of these machines gives podman run (docs/operations.md):
# runc, and limits under the machine's hard ones (podman's defaults are
# above them, and runc then fails to set them).
RUN_FLAGS = ["--runtime", "runc", "--network", "host",
             "--ulimit", "nofile=%d:%d" % (NOFILE, NOFILE),
             "--ulimit", "nproc=4096:4096"]
# As documented: no write anywhere, a user that is not root.
LOCKED = ["--read-only", "--read-only-tmpfs=false", "--user", "10001:10001"]


def podman(*args, check=True, timeout=120):
    r = subprocess.run(["podman", *args], capture_output=True, text=True,
                       timeout=timeout)
    if check:
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


@pytest.fixture(scope="module")
def image_broker():
    """A broker of this module's own: the health test stops it."""
    if subprocess.run(["podman", "image", "exists", IMAGE]).returncode:
        pytest.fail("no image %s: run make test-image, which builds it"
                    % IMAGE)
    # What a killed earlier run left running holds ports and brokers.
    left = podman("ps", "-aq", "--filter", "name=^cascade-test-").stdout
    if left.split():
        podman("rm", "-f", *left.split())
    yield from own_broker()


class Container:
    """One container of the image, removed after the test."""

    def __init__(self, *args, env=None, mounts=()):
        self.name = "cascade-test-" + uuid.uuid4().hex[:8]
        self.args = list(args)
        self.env = env or {}
        self.mounts = list(mounts)

    def run(self):
        cmd = ["run", "-d", "--name", self.name, *RUN_FLAGS]
        for k, v in self.env.items():
            cmd += ["-e", "%s=%s" % (k, v)]
        for m in self.mounts:
            cmd += ["-v", m]
        self.started = time.time()
        podman(*cmd, *self.args)
        return self

    def logs(self):
        r = podman("logs", self.name, check=False)
        return r.stdout + r.stderr

    def wait_log(self, needle, timeout=60, count=1):
        wait_for(lambda: self.logs().count(needle) >= count, timeout,
                 "%s in the container's log" % needle, every=0.2)

    def inspect(self):
        return json.loads(podman("inspect", self.name).stdout)[0]

    def health(self):
        """One run of the image's HEALTHCHECK: (exit status, status the
        engine now records)."""
        r = podman("healthcheck", "run", self.name, check=False)
        return r.returncode, self.inspect()["State"]["Health"]["Status"]

    def stop(self, grace=30):
        """SIGTERM, then SIGKILL after grace: the container's exit
        status."""
        podman("stop", "-t", str(grace), self.name, timeout=grace + 60)
        return self.inspect()["State"]["ExitCode"]

    def remove(self):
        podman("rm", "-f", self.name, check=False)


@pytest.fixture
def containers():
    made = []

    def make(*args, **kw):
        c = Container(*args, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.remove()


def no_password(url):
    """The broker's URL without its password: that comes from a secret."""
    return re.sub(r"//([^:@/]+):[^@/]*@", r"//\1@", url)


def test_the_image_is_what_the_docs_say():
    """The image's metadata: a fixed user that is not root, the daemon as
    the command, the health check, the ports; no compiler, no HTTP
    client."""
    i = json.loads(podman("image", "inspect", IMAGE).stdout)[0]
    cfg = i["Config"]
    assert cfg["User"] == "10001:10001"
    assert cfg["Cmd"] == ["cascade", "-c", "/etc/cascade/cascade.ini"]
    assert not cfg.get("Entrypoint")
    assert set(cfg["ExposedPorts"]) == {"9464/tcp", "8080/tcp"}
    assert cfg["StopSignal"] in ("SIGTERM", "15")
    hc = json.loads(podman("inspect", "--type", "image", "--format",
                           "{{json .HealthCheck}}", IMAGE).stdout)
    assert hc["Test"] == ["CMD", "cascade-ctl", "-c",
                          "/etc/cascade/cascade.ini", "health"]
    found = podman("run", "--rm", *RUN_FLAGS, "--entrypoint", "bash", IMAGE,
                   "-c", "for t in gcc cc c99 make ld curl wget nc ncat busybox; do "
                   "command -v $t; done; true").stdout.split()
    assert found == [], found
    print("image %s: %.1f MB" % (IMAGE, i["Size"] / 1e6))


def test_a_2s_message_on_time_and_sigterm_loses_nothing(
        image_broker, containers, tmp_path):
    """No config file at all: the image's own, the URL and the password
    from the environment.  A 2 s message arrives on time; SIGTERM with
    messages in flight exits 0, and a new container delivers every one,
    none early."""
    # The image's own [metrics] listen, :9464, on the host's network:
    # wait while another test holds it (make check's newcomer, test_cli).
    wait_for(lambda: subprocess.run(
        ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9464"],
        capture_output=True).returncode != 0, 120,
        "port 9464, the image's [metrics] listen, to be free", every=1)
    env = {"CASCADE_BROKER_URL": no_password(image_broker.url),
           "CASCADE_BROKER_PASSWORD": "guest"}
    d = containers(*LOCKED, IMAGE, env=env).run()
    d.wait_log("msg=ready")
    ready = time.time() - d.started
    print("the daemon in the image was ready %.2f s after podman run"
          % ready)
    # /healthz on every interface, as the image's config says.
    assert "msg=metrics_listening listen=:9464 " in d.logs(), d.logs()
    assert http_get("http://127.0.0.1:9464/healthz") == (200, "ok\n")
    q = "image-" + uuid.uuid4().hex[:8]
    conn = pika.BlockingConnection(pika.URLParameters(image_broker.url))
    ch = conn.channel()
    ch.queue_declare(q, durable=True)

    def first(timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            _, _, body = ch.basic_get(q, auto_ack=True)
            if body is not None:
                return body, time.time()
            time.sleep(0.005)
        pytest.fail("nothing arrived in %s in %d s" % (q, timeout))

    # A 2 s message, timed from its confirmed publish.
    pub = conn.channel()
    pub.confirm_delivery()
    t0 = time.time()
    pub.basic_publish("cascade", q, b"two seconds", pika.BasicProperties(
        delivery_mode=2, headers={"x-remaining-delay": "2s"}))
    body, t = first()
    assert body == b"two seconds"
    late = t - t0 - 2.0
    print("the 2 s message arrived %.3f s after its due time" % late)
    assert -0.001 <= late <= 0.5 * LATE_SCALE, late
    # One from cascade-publish, run from the same image: not before 2 s
    # after the command started (it sent it later still).
    t0 = time.time()
    podman("run", "--rm", *RUN_FLAGS, *LOCKED, *sum(
        (["-e", "%s=%s" % kv] for kv in env.items()), []), IMAGE,
        "cascade-publish", "--delay", "2s", "-r", q, "--body", "hello")
    body, t = first()
    assert body == b"hello"
    assert t - t0 >= 2.0, t - t0
    conn.close()

    # SIGTERM with a few hundred messages in flight: exit status 0.
    col = Collector(image_broker.url, q + "-batch")
    col.start()
    sent = publish_batch(image_broker.url, "cascade", q + "-batch", 200,
                         lo_ms=500, hi_ms=5000)
    wait_for(lambda: len(col.arrived()) >= 20, 30, "20 arrivals")
    assert len(col.arrived()) < len(sent)
    t_stop = time.time()
    assert d.stop() == 0, d.logs()
    print("podman stop took %.2f s" % (time.time() - t_stop))
    assert "msg=stopping signal=15" in d.logs(), d.logs()
    assert 'msg=stopped reason="all confirms received"' in d.logs(), \
        d.logs()
    # Nothing lost: another container of the image takes over.
    d2 = containers(*LOCKED, IMAGE, env=env).run()
    d2.wait_log("msg=ready")
    col.wait_for(set(sent), timeout=60)
    check(report("SIGTERM of the image's daemon", sent, col.arrivals),
          image_broker, None, q + "-batch", sent, col)
    col.stopping = True
    assert d2.stop() == 0, d2.logs()


def test_the_health_check_follows_the_broker(image_broker, containers,
                                             tmp_path):
    """A mounted config and the password from a mounted secret: healthy
    while connected; unhealthy after the broker goes (three failed checks,
    the image's retries, once its start period of 30 s is over: failures
    in it do not count, and podman 4.3 will not shorten it without a
    command of the test's own); healthy again once it is back."""
    port = free_port()
    prefix = "img" + uuid.uuid4().hex[:6]
    ini = tmp_path / "cascade.ini"
    ini.write_text("[broker]\nurl = %s\npassword_file = "
                   "/run/secrets/cascade-password\nreconnect_max = 1s\n"
                   "heartbeat = 5s\n[topology]\nprefix = %s\n[metrics]\n"
                   "listen = :%d\n" % (no_password(image_broker.url),
                                       prefix, port))
    secret = tmp_path / "password"
    secret.write_text("guest\n")
    for f in (ini, secret):
        os.chmod(f, 0o444)
    d = containers(*LOCKED, IMAGE, mounts=[
        "%s:/etc/cascade/cascade.ini:ro" % ini,
        "%s:/run/secrets/cascade-password:ro" % secret]).run()
    d.wait_log("msg=ready")
    assert d.health() == (0, "healthy")
    assert http_get("http://127.0.0.1:%d/healthz" % port)[0] == 200
    start_period = d.inspect()["Config"]["Healthcheck"]["StartPeriod"] / 1e9
    time.sleep(max(0.0, d.started + start_period + 1 - time.time()))
    stop_broker(image_broker)
    try:
        d.wait_log("msg=connection_lost", timeout=30)
        states = [d.health() for _ in range(3)]
        assert [s[0] for s in states] == [1, 1, 1], states
        assert states[-1][1] == "unhealthy", states
    finally:
        restart_broker(image_broker)
    d.wait_log("msg=ready", timeout=60, count=2)
    assert d.health() == (0, "healthy")
    assert d.stop() == 0, d.logs()


def test_the_console_from_the_image_serves_its_login_page(
        image_broker, containers):
    """The same image runs the console (another command, another user id
    of the kind OpenShift assigns, group 0), read-only."""
    port = free_port()
    env = {"CASCADE_BROKER_URL": image_broker.url}
    c = containers("--read-only", "--read-only-tmpfs=false", "--user",
                   "23456:0", "--no-healthcheck",
                   IMAGE, "cascade-console", "-c",
                   "/etc/cascade/cascade.ini", "--listen",
                   "127.0.0.1:%d" % port, env=env).run()
    url = "http://127.0.0.1:%d/login" % port
    last = []

    def answers():
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                last[:] = [r.status, r.read().decode()]
            return True
        except OSError as e:
            last[:] = [e]
            return False
    wait_for(answers, 30, lambda: "the console's login page: %r\n%s" % (
        last, c.logs()))
    assert last[0] == 200
    assert re.search(r'<input[^>]* name="?password\b', last[1]), \
        last[1][:500]
    assert c.stop() == 0, c.logs()
