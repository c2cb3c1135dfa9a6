# SPDX-License-Identifier: Apache-2.0
"""The command line: --check, --version, --help, signals, topology."""
import signal
import subprocess

from helpers import CASCADE, Daemon


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
