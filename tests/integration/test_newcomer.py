# SPDX-License-Identifier: Apache-2.0
"""A newcomer's first run, as the README tells it (make test-newcomer).

A fresh minimal Debian root (mmdebstrap, then git and make only: what the
README asks for before its two commands), a clone of this repository's
HEAD in it, `make run` there until the daemon says ready, the README's
first example run as it stands in a second shell, and Ctrl-C.  Nothing of
the host's build, packages or environment reaches the root, so a missing
install step or a flag read before the packages were installed fails here
as it would on the newcomer's machine.

Needs root and Debian's mirror; NEWCOMER_SUITE picks the release
(bookworm, trixie or forky).  About ten minutes, most of it apt.
"""
import os
import re
import signal
import subprocess
import tempfile
import time

import pytest

from helpers import ROOT

pytestmark = pytest.mark.newcomer

DEBIAN_ROOT = os.path.join(ROOT, "tools", "debian-root")
SUITE = os.environ.get("NEWCOMER_SUITE", "bookworm")
README = os.path.join(ROOT, "README.md")
MARKER = "<!-- tests/integration/test_newcomer.py runs this block as it stands -->"


def readme_block():
    """The shell block that follows the marker in the README."""
    with open(README) as f:
        text = f.read()
    at = text.find(MARKER)
    assert at >= 0, "README.md has lost the marked example block"
    m = re.compile(r"```sh\n(.*?)```", re.S).search(text, at)
    assert m and m.start() - at - len(MARKER) < 3, \
        "the marker is not right above a ```sh block"
    return m.group(1)


def procs_in(root):
    """Pids of the processes whose root directory is root (or below)."""
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            r = os.readlink("/proc/%s/root" % p)
        except OSError:
            continue
        if r == root or r.startswith(root + "/"):
            pids.append(int(p))
    return pids


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return "?"


@pytest.fixture
def fresh_root():
    if os.geteuid() != 0:
        pytest.fail("make test-newcomer builds a Debian root: run it as root")
    base = tempfile.mkdtemp(prefix="cascade-newcomer-", dir="/var/tmp")
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "CASCADE_DEBIAN_ROOTS": base,
        "CASCADE_DEBIAN_BARE": "1",
        "CASCADE_DEBIAN_CLANG": "0",
    }
    for k in ("CASCADE_DEBIAN_MIRROR", "http_proxy", "https_proxy"):
        if k in os.environ:
            env[k] = os.environ[k]
    root = os.path.join(os.path.realpath(base), SUITE)
    # The package test's bare root of the suite (tools/deb/test: the same
    # mmdebstrap minbase with git and make), when make check's roots part
    # built it: a copy is as fresh a machine, without a second build
    # beside it (some 80 s of a fresh make check).
    bare = os.path.join(os.environ.get("CASCADE_DEBIAN_ROOTS") or
                        "/var/cache/cascade", "deb-bare", SUITE)
    if os.path.exists(os.path.join(bare, ".cascade-root")):
        subprocess.run(["cp", "-a", bare, root], check=True, timeout=600)
    try:
        yield root, env
    finally:
        for pid in procs_in(root):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)
        subprocess.run(["rm", "-rf", "--one-file-system", base])


def test_make_run_on_a_fresh_machine_delivers_the_readme_example(fresh_root):
    root, env = fresh_root
    block = readme_block()
    t0 = time.time()
    built = subprocess.run([DEBIAN_ROOT, SUITE], env=env, capture_output=True,
                           text=True, timeout=1200)
    assert built.returncode == 0, built.stderr
    # What the newcomer has: a clone.  HEAD, not the working tree.
    subprocess.run(["git", "clone", "-q", ROOT,
                    os.path.join(root, "root", "cascade")], check=True,
                   timeout=120)
    t_root = time.time() - t0

    log_path = os.path.join(root, "root", "make-run.log")
    log = open(log_path, "wb")
    run = subprocess.Popen(
        [DEBIAN_ROOT, SUITE, "run", "sh", "-c",
         "cd /root/cascade && exec make run"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True)

    def output():
        with open(log_path, "rb") as f:
            return f.read().decode(errors="replace")

    try:
        deadline = time.time() + 1500
        while "msg=ready" not in output():
            if run.poll() is not None:
                pytest.fail("the first `make run` exited with %s before the "
                            "daemon was ready:\n%s" %
                            (run.returncode, output()[-6000:]))
            if time.time() > deadline:
                pytest.fail("no msg=ready from `make run` after 25 min:\n" +
                            output()[-6000:])
            time.sleep(1)
        t_ready = time.time() - t0 - t_root
        out = output()
        assert "undefined reference" not in out
        assert re.search(r"cascade-run: broker at amqp://\S+:\d+/", out), out
        assert os.path.exists(os.path.join(root, "root", "cascade", "build",
                                           "run.env"))

        # The README's block, in a second shell of the same machine.
        second = subprocess.run(
            [DEBIAN_ROOT, SUITE, "run", "bash", "-c",
             "cd /root/cascade && set -e\n" + block],
            env=env, capture_output=True, text=True, timeout=180)
        assert second.returncode == 0, \
            "the README's example failed:\n%s\n%s\n--- make run:\n%s" % (
                second.stdout, second.stderr, output()[-3000:])
        lines = second.stdout.strip().splitlines()
        assert lines and lines[-1].strip() == "hello", second.stdout
        # cascade-ctl status saw the daemon's ladder on that broker.
        assert "cascade.delay.2000" in second.stdout, second.stdout
    finally:
        if run.poll() is None:
            # Ctrl-C in make run's terminal.
            os.killpg(run.pid, signal.SIGINT)
            try:
                run.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait()
                pytest.fail("make run did not stop 120 s after Ctrl-C:\n" +
                            output()[-3000:])
        log.close()

    # Ctrl-C stopped the daemon and the private broker, and took back
    # build/run.env, which would name a broker that is gone.
    time.sleep(1)
    left = [(p, comm(p)) for p in procs_in(root)]
    assert not [p for p in left if p[1] in ("beam.smp", "cascade")], left
    assert not os.path.exists(os.path.join(root, "root", "cascade", "build",
                                           "run.env"))
    print("newcomer %s: root and clone %.0f s, make run to ready %.0f s" %
          (SUITE, t_root, t_ready))
