# SPDX-License-Identifier: Apache-2.0
"""The command line: --check, --version, --help, signals, topology, and
make run (tools/cascade-run)."""
import os
import re
import signal
import socket
import subprocess
import uuid

from helpers import BUILD, CASCADE, ROOT, Daemon, http_get, wait_for


def run(*args, env=None):
    return subprocess.run([CASCADE, *args], capture_output=True, text=True,
                          timeout=30, env=env)


def test_check_good_file_prints_the_ladder(tmp_path):
    path = tmp_path / "good.ini"
    path.write_text("[topology]\nprefix = shop\nresolution = 100ms\n"
                    "factor = 2\nlevels = 8\n")
    r = run("-c", str(path), "--check")
    assert r.returncode == 0, r.stderr
    assert "shop.delay.100 " in r.stdout
    assert "shop.delay.12800 " in r.stdout
    assert r.stdout.count("shop.delay.") == 8
    assert "configuration OK" in r.stdout


def test_check_bad_file_names_file_line_and_key(tmp_path):
    path = tmp_path / "bad.ini"
    path.write_text("[broker]\nheartbeat = 30s\n\n[topology]\nprefix = p\n"
                    "resolution = 2s\nfactor = banana\nbogus = 1\n"
                    "[router]\nmax_delay = 5\n")
    r = run("-c", str(path), "--check")
    assert r.returncode == 1
    assert "%s:7: topology.factor" % path in r.stderr
    assert "%s:8: topology.bogus: unknown key" % path in r.stderr
    assert "%s:10: router.max_delay" % path in r.stderr


def test_check_rejects_a_ladder_past_ten_years(tmp_path):
    path = tmp_path / "long.ini"
    path.write_text("[topology]\nresolution = 1d\nfactor = 10\nlevels = 6\n")
    r = run("-c", str(path), "--check")
    assert r.returncode == 1
    assert ":4: topology.levels" in r.stderr and "10-year" in r.stderr


def test_version_and_help():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("cascade ")
    r = run("--help")
    assert r.returncode == 0 and "--check" in r.stdout


def test_sigterm_and_sigint_exit_zero(daemon_factory):
    for sig in (signal.SIGTERM, signal.SIGINT):
        d = daemon_factory()
        assert d.stop(sig) == 0
        assert "msg=stopped" in d.log()


def test_queue_with_other_arguments_exits_1_naming_it(broker, tmp_path):
    d = Daemon(broker, str(tmp_path), {"topology": {"max_length": "10"}})
    d.start()
    assert d.stop() == 0
    d2 = Daemon(broker, str(tmp_path), {"topology": {"max_length": "20"}},
                prefix=d.prefix)
    d2.logpath = str(tmp_path / "second.log")
    d2.logfile = open(d2.logpath, "ab")
    d2.proc = subprocess.Popen([CASCADE, "-c", d2.config],
                               stdout=d2.logfile, stderr=subprocess.STDOUT)
    assert d2.proc.wait(30) == 1
    log = d2.log()
    assert "msg=topology_mismatch" in log
    assert "x-max-length" in log and d.prefix + ".delay.100" in log


def hold(port):
    """Something listening on 127.0.0.1:port, as another program would
    (None when one already does)."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        s.listen(8)
        return s
    except OSError:
        s.close()
        return None


def test_make_run_moves_taken_ports_and_prints_only_what_runs(broker,
                                                              tmp_path):
    """make run (tools/cascade-run) with 127.0.0.1:9464 and :8080 taken:
    it says which it moved and where; the daemon's /healthz and the
    console answer there, the console's URL printed only once the daemon
    is ready; Ctrl-C stops them, exit 0.  A daemon that cannot start stops
    make run with its status, and no console URL is printed.  Run alone,
    the daemon names the key to change."""
    held = [hold(9464), hold(8080)]
    prefix = "t" + uuid.uuid4().hex[:8]
    conf = tmp_path / "run.ini"
    conf.write_text("[topology]\nprefix = %s\n" % prefix)
    env = dict(os.environ, CASCADE_BROKER_URL=broker.url,
               CASCADE_BUILD=os.path.relpath(BUILD, ROOT))
    run_ = os.path.join(ROOT, "tools", "cascade-run")
    err = tmp_path / "stderr"
    try:
        with open(err, "w") as f:
            p = subprocess.Popen([run_, str(conf)], stdout=subprocess.DEVNULL,
                                 stderr=f, env=env, start_new_session=True)
        try:
            wait_for(lambda: "console at" in err.read_text() or
                     p.poll() is not None, 90,
                     lambda: "make run's console: " + err.read_text())
            text = err.read_text()
            m = re.search(r"127\.0\.0\.1:9464 is taken: \[metrics\] listen = "
                          r"127\.0\.0\.1:(\d+) in ", text)
            c = re.search(r"127\.0\.0\.1:8080 is taken: \[console\] listen = "
                          r"127\.0\.0\.1:(\d+) in ", text)
            assert m and c, text
            assert http_get("http://127.0.0.1:%s/healthz" % m.group(1)) == \
                (200, "ok\n"), text
            url = "http://127.0.0.1:%s/" % c.group(1)
            assert "console at %s " % url in text, text
            assert text.index(" msg=ready") < text.index("console at"), text
            assert http_get(url + "healthz")[0] in (200, 503), text
        finally:
            os.killpg(p.pid, signal.SIGINT)  # Ctrl-C in its terminal
            rc = p.wait(30)
        # The daemon's own stop reaches the terminal: the tee beside it
        # outlives Ctrl-C (bash 5.3 gave it the SIGINT, and the daemon
        # died of SIGPIPE writing its stop, exit 141).
        assert rc == 0, err.read_text()
        assert "msg=stopped" in err.read_text(), err.read_text()

        bad = tmp_path / "bad.ini"
        bad.write_text("[topology]\nprefix = %s\nbogus = 1\n" % prefix)
        r = subprocess.run([run_, str(bad)], capture_output=True, text=True,
                           env=env, timeout=60)
        assert r.returncode == 1, r.stderr
        assert "the daemon stopped (exit status 1) before it was ready" in \
            r.stderr and "console at" not in r.stderr, r.stderr

        alone = tmp_path / "alone.ini"
        alone.write_text("[topology]\nprefix = %s\n[metrics]\n"
                         "listen = 127.0.0.1:9464\n" % prefix)
        r = run("-c", str(alone), env=env)
        assert r.returncode == 1 and "msg=metrics_listen_failed" in \
            r.stderr and "set [metrics] listen to another HOST:PORT" in \
            r.stderr, r.stderr
    finally:
        for s in held:
            if s is not None:
                s.close()
