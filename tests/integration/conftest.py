# SPDX-License-Identifier: Apache-2.0
"""Integration fixtures: a private RabbitMQ for the session and the real
daemon from a temp config, started and awaited on its `ready` line."""
import os
import shutil
import subprocess
import tempfile

import pytest

import plan
from faults import kill_fast_daemons
from helpers import (BROKER_SCRIPT, DAEMONS, Broker, Certs, Client, Daemon,
                     TlsBroker, delete_queues)

# Modules whose fixtures start brokers of their own for the module: under
# pytest-xdist (make's TEST_JOBS) each runs in one worker, which starts
# them once.  (The test_console* modules are not: each one's daemon and
# console start in a second or two, so each worker starting its own beats
# running a module all in one.)
ONE_WORKER = ("test_ctl_dlx", "test_faults", "test_rabbitmq43",
              "test_restart_order", "test_tls", "test_trust",
              "test_trust_records")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "cluster: starts several RabbitMQ nodes (make "
        "test-cluster); make test leaves it out")
    config.addinivalue_line(
        "markers", "slow: one broker, but over 10 s (make test-slow); make "
        "test leaves it out so that it stays a few minutes")
    config.addinivalue_line(
        "markers", "soak: tools/soak for a minute on a cluster of its own "
        "(make test-soak); needs root")
    config.addinivalue_line(
        "markers", "newcomer: a fresh Debian root, make run in it (make "
        "test-newcomer); needs root and Debian's mirror")
    config.addinivalue_line(
        "markers", "image: runs the container image under podman (make "
        "test-image, which builds it); needs root")
    config.addinivalue_line(
        "markers", "browser: drives Debian's chromium through selenium "
        "(make test-browser, which installs them); make test leaves it out")
    config.addinivalue_line(
        "markers", "xdist_group(name): pytest-xdist runs the group's tests "
        "in one worker (--dist loadgroup)")


def pytest_collection_modifyitems(config, items):
    """Every test module must be in the test plan (plan.py); with
    CASCADE_TEST_RUN set (make check), only what the plan gives that run
    is kept."""
    run = os.environ.get("CASCADE_TEST_RUN", "")
    if run and run not in plan.RUNS:
        raise pytest.UsageError("CASCADE_TEST_RUN=%s: not one of %s" %
                                (run, ", ".join(plan.RUNS)))
    keep, drop = [], []
    for item in items:
        module = item.module.__name__
        try:
            runs = plan.runs_of(module, item.originalname)
        except KeyError:
            raise pytest.UsageError(
                "%s is not in tests/integration/plan.py: say where it runs "
                "and why" % module)
        if module in ONE_WORKER:
            item.add_marker(pytest.mark.xdist_group(module))
        (keep if not run or run in runs else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


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


@pytest.fixture(autouse=True)
def _no_fast_daemon_outlives_its_test():
    """A failed assertion must not leave a daemon of fast_daemon's
    retrying forever.  Then the queues of the daemons the test made are
    deleted (helpers.delete_queues; a module's own daemons, made before
    its first test, keep theirs until its broker stops)."""
    before = len(DAEMONS)
    yield
    kill_fast_daemons()
    delete_queues(DAEMONS[before:])


@pytest.fixture
def client(broker):
    c = Client(broker)
    yield c
    c.close()


@pytest.fixture(scope="session")
def tls_broker():
    directory = tempfile.mkdtemp(prefix="cascade-tls-")
    os.makedirs(os.path.join(directory, "certs"))
    certs = Certs(os.path.join(directory, "certs"))
    env = dict(os.environ, RABBITMQ_PRIVATE_TLS=certs.dir)
    node = os.path.join(directory, "node")
    try:
        out = subprocess.run([BROKER_SCRIPT, "start", node], check=True,
                             capture_output=True, text=True, timeout=150,
                             env=env)
    except subprocess.CalledProcessError as e:
        pytest.fail("private RabbitMQ with TLS did not start: " + e.stderr)
    lines = out.stdout.split()
    assert len(lines) == 2 and lines[1].startswith(
        "amqps://guest:guest@localhost:"), out.stdout
    b = TlsBroker(node, lines[0], lines[1], certs)
    yield b
    subprocess.run([BROKER_SCRIPT, "stop", node], capture_output=True,
                   timeout=120)
    shutil.rmtree(directory, ignore_errors=True)
