# SPDX-License-Identifier: Apache-2.0
"""Deployment: `make install` puts every file where the man page and the unit
say, the systemd notify protocol works without systemd, and the man pages
render cleanly and document every config key."""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from helpers import BUILD, ROOT

BUILD_ARG = os.environ.get("CASCADE_BUILD", "build")
TOOLS = ("cascade-publish", "cascade-bench", "cascade-ctl")
MANPAGES = ("cascade.8", "cascade-ctl.8", "cascade-console.8",
            "cascade-publish.8")


def clean_env():
    env = dict(os.environ)
    for k in ("CASCADE_BROKER_URL", "CASCADE_BROKER_PASSWORD",
              "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        env.pop(k, None)
    return env


def make(*args):
    """Run make in the source tree on the build the tests use."""
    r = subprocess.run(["make", "--no-print-directory", "-C", ROOT,
                        "BUILD=" + BUILD_ARG, *args],
                       capture_output=True, text=True, timeout=900,
                       env=clean_env())
    assert r.returncode == 0, "make %s failed:\n%s%s" % (
        " ".join(args), r.stdout, r.stderr)
    return r.stdout


def unit_settings(path):
    """The [Service] and [Unit] settings of a unit file: name -> [values]."""
    settings = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;[" or "=" not in line:
                continue
            k, v = line.split("=", 1)
            settings.setdefault(k, []).append(v)
    return settings


def config_keys():
    """(section, name, default) of every X(...) in CONFIG_KEYS."""
    with open(os.path.join(ROOT, "include", "config.h")) as f:
        text = f.read()
    keys = re.findall(r'X\((\w+), (\w+), \w+, "([^"]*)"', text)
    assert len(keys) >= 20, "CONFIG_KEYS not found in include/config.h"
    return keys


def test_make_install_puts_every_file_where_promised(tmp_path):
    dest = str(tmp_path / "root")
    out = make("install", "DESTDIR=" + dest, "PREFIX=/usr")
    sbin = os.path.join(dest, "usr/sbin/cascade")
    ini = os.path.join(dest, "etc/cascade/cascade.ini")
    unit = os.path.join(dest, "usr/lib/systemd/system/cascade.service")
    for path in [sbin, ini, unit] + [
            os.path.join(dest, "usr/bin", t) for t in TOOLS] + [
            os.path.join(dest, "usr/share/man/man8", m) for m in MANPAGES]:
        assert os.path.isfile(path), "%s not installed:\n%s" % (path, out)
    for t in TOOLS:
        assert os.access(os.path.join(dest, "usr/bin", t), os.X_OK)
    assert os.access(sbin, os.X_OK)
    # Nothing under the prefix's own etc, nothing outside DESTDIR's tree.
    assert not os.path.exists(os.path.join(dest, "usr/etc"))
    with open(ini) as a, open(os.path.join(ROOT, "conf/cascade.ini")) as b:
        assert a.read() == b.read()

    # The unit runs the installed binary on the installed config.
    s = unit_settings(unit)
    assert s["ExecStart"] == ["/usr/sbin/cascade -c /etc/cascade/cascade.ini"]
    exec_path = s["ExecStart"][0].split()[0]
    assert os.access(dest + exec_path, os.X_OK)
    assert s["Type"] == ["notify"]
    assert "WatchdogSec" in s and "Restart" in s

    r = subprocess.run([sbin, "--version"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 0 and r.stdout.startswith("cascade "), r
    r = subprocess.run([sbin, "-c", ini, "--check"], capture_output=True,
                       text=True, timeout=10, env=clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "configuration OK" in r.stdout

    # A second install keeps the operator's config.
    with open(ini, "a") as f:
        f.write("; edited by the operator\n")
    out = make("install", "DESTDIR=" + dest, "PREFIX=/usr")
    assert "kept" in out
    with open(ini) as f:
        assert f.read().endswith("; edited by the operator\n")

    # uninstall removes what install put, but not an edited config.
    make("uninstall", "DESTDIR=" + dest, "PREFIX=/usr")
    left = sorted(os.path.relpath(os.path.join(d, f), dest)
                  for d, _, files in os.walk(dest) for f in files)
    assert left == ["etc/cascade/cascade.ini"]


def test_install_elsewhere_rewrites_the_unit_paths(tmp_path):
    """PREFIX other than /usr: config under PREFIX/etc, and the unit (and the
    man page) name the paths where things really went."""
    prefix = str(tmp_path / "opt")
    make("install", "PREFIX=" + prefix)
    unit = os.path.join(prefix, "lib/systemd/system/cascade.service")
    ini = os.path.join(prefix, "etc/cascade/cascade.ini")
    s = unit_settings(unit)
    assert s["ExecStart"] == ["%s/sbin/cascade -c %s" % (prefix, ini)]
    assert os.path.isfile(ini)
    with open(os.path.join(prefix, "share/man/man8/cascade.8")) as f:
        assert ini in f.read()

    analyze = shutil.which("systemd-analyze")
    if analyze is not None:
        env = clean_env()
        env["MANPATH"] = os.path.join(prefix, "share/man") + ":"
        # It checks Documentation=man:... by running man; a machine
        # without man-db (Debian 14's minimal root) cannot, and says
        # "Protocol error".  The man page was checked above.
        args = [analyze, "verify", unit]
        if shutil.which("man") is None:
            args.insert(2, "--man=no")
        r = subprocess.run(args, capture_output=True, text=True, timeout=60,
                           env=env)
        problems = [line for line in (r.stdout + r.stderr).splitlines()
                    if "cascade" in line]
        assert r.returncode == 0 and not problems, r.stdout + r.stderr

    make("uninstall", "PREFIX=" + prefix)
    left = [os.path.join(d, f) for d, _, files in os.walk(prefix)
            for f in files]
    assert left == []


class NotifyListener:
    """A Unix datagram socket standing in for systemd's NOTIFY_SOCKET."""

    def __init__(self, logpath):
        self.dir = tempfile.mkdtemp(prefix="cascade-notify-")
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.05)
        self.logpath = logpath
        self.got = []  # (monotonic time, {name: value}, log had msg=ready)
        self.cond = threading.Condition()
        self.done = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def log_has_ready(self):
        try:
            with open(self.logpath, "rb") as f:
                return b"msg=ready" in f.read()
        except FileNotFoundError:
            return False

    def run(self):
        while not self.done:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            fields = dict(line.split("=", 1) for line in
                          data.decode().split("\n") if "=" in line)
            ready_logged = self.log_has_ready() if "READY" in fields else None
            with self.cond:
                self.got.append((time.monotonic(), fields, ready_logged))
                self.cond.notify_all()

    def with_field(self, name, value=None):
        return [g for g in self.got if name in g[1] and
                (value is None or g[1][name] == value)]

    def pings_after(self, t):
        return [g for g in self.with_field("WATCHDOG", "1") if g[0] > t]

    def wait(self, name, value=None, count=1, timeout=30):
        """The first `count` datagrams that set name (to value)."""
        with self.cond:
            ok = self.cond.wait_for(
                lambda: len(self.with_field(name, value)) >= count, timeout)
            assert ok, "%d %s=%s datagrams after %ss; got %r" % (
                count, name, value, timeout, [g[1] for g in self.got])
            return self.with_field(name, value)[:count]

    def close(self):
        self.done = True
        self.thread.join(5)
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def notify_daemon(daemon_factory, monkeypatch):
    """A daemon started with NOTIFY_SOCKET pointing at a listener."""
    made = []

    def start(**env):
        d = daemon_factory(start=False)
        listener = NotifyListener(d.logpath)
        made.append(listener)
        monkeypatch.setenv("NOTIFY_SOCKET", listener.path)
        monkeypatch.delenv("WATCHDOG_PID", raising=False)
        monkeypatch.delenv("WATCHDOG_USEC", raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        d.start()
        return d, listener

    yield start
    for listener in made:
        listener.close()


def test_sd_notify_ready_watchdog_stopping(notify_daemon):
    d, n = notify_daemon(WATCHDOG_USEC="400000")
    ready = n.wait("READY", "1")[0]
    assert ready[2], "READY=1 arrived before the msg=ready log line"
    assert ready[1].get("STATUS", "").startswith("consuming from amqp://")
    assert "guest:***@" in ready[1]["STATUS"], "STATUS shows the password"
    assert "msg=watchdog interval_ms=400" in d.log()

    # Every 200 ms from the event loop once it runs: four intervals take
    # 0.8 s; allow a loaded machine three times that, and no bunching.
    with n.cond:
        assert n.cond.wait_for(lambda: len(n.pings_after(ready[0])) >= 5, 5), \
            "fewer than 5 WATCHDOG=1 in 5 s after READY=1: %r" % n.got
        pings = n.pings_after(ready[0])[:5]
    span = pings[-1][0] - pings[0][0]
    assert 0.4 < span < 2.5, "4 watchdog intervals took %.2fs" % span

    assert d.stop() == 0, d.log()
    stopping = n.wait("STOPPING", "1", timeout=5)[0]
    assert stopping[0] > ready[0]
    assert len(n.with_field("READY")) == 1


def test_sd_notify_watchdog_only_for_its_own_pid(notify_daemon):
    """WATCHDOG_PID naming another process (here pid 1) means the watchdog is
    not ours: no pings, as sd_watchdog_enabled(3) says."""
    d, n = notify_daemon(WATCHDOG_USEC="400000", WATCHDOG_PID="1")
    n.wait("READY", "1")
    # The watchdog is set up before the first connection, so by the ready
    # line it would have been logged.
    assert "msg=watchdog" not in d.log()
    assert d.stop() == 0, d.log()
    n.wait("STOPPING", "1", timeout=5)
    assert n.with_field("WATCHDOG") == []


def test_unit_stops_after_stop_timeout():
    """systemd's SIGKILL must come after SIGTERM's wait for confirms."""
    def seconds(text):
        m = re.fullmatch(r"(\d+)(ms|s|min|m)?", text)
        assert m, text
        n, unit = int(m.group(1)), m.group(2) or "s"
        return n * {"ms": 0.001, "s": 1, "min": 60, "m": 60}[unit]

    s = unit_settings(os.path.join(ROOT, "conf", "cascade.service"))
    stop_timeout = dict(((sec, k), v) for sec, k, v in
                        config_keys())[("router", "stop_timeout")]
    assert seconds(s["TimeoutStopSec"][0]) > seconds(stop_timeout)
    assert s["Type"] == ["notify"]
    assert seconds(s["WatchdogSec"][0]) > 0


@pytest.mark.parametrize("page", MANPAGES)
def test_man_page_renders_without_warnings(page):
    groff = shutil.which("groff")
    if groff is None:
        pytest.skip("groff is not installed (Debian: groff-base)")
    r = subprocess.run([groff, "-man", "-ww", "-z",
                        os.path.join(ROOT, "conf", page)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def man_sections(page):
    """The text under each .SS heading of a man page, roff escapes undone."""
    with open(os.path.join(ROOT, "conf", page)) as f:
        text = f.read().replace("\\-", "-").replace("\\&", "")
    parts = re.split(r"^\.S[SH] (.*)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_man_page_documents_every_key_with_its_default():
    sections = man_sections("cascade.8")
    missing = []
    for section, name, default in config_keys():
        body = sections.get("[%s]" % section, "")
        m = re.search(r"^\.TP\n\.B %s\n(.*?)(?=^\.TP|\Z)" % name, body,
                      re.M | re.S)
        if m is None:
            missing.append("[%s] %s: not documented" % (section, name))
            continue
        words = "empty" if default == "" else default
        if not re.search(r"Default:\s*\n?(\.BR? )?%s" % re.escape(words),
                         m.group(1)):
            missing.append("[%s] %s: default %r not stated" %
                           (section, name, default))
    retry = sections.get("RETRIES", "")
    for name in ("max_retries", "delays", "backoff", "initial",
                 "multiplier", "max", "jitter"):
        if not re.search(r"^\.TP\n\.B %s\n" % name, retry, re.M):
            missing.append("[retry] %s: not documented" % name)
    assert missing == [], "\n".join(missing)


def contract_section(number):
    """The text of docs/CONTRACT.md's section `number` ("6.2"), up to the
    next heading of the same or a higher level."""
    with open(os.path.join(ROOT, "docs", "CONTRACT.md")) as f:
        text = f.read()
    level = "#" * (number.count(".") + 2)
    m = re.search(r"^%s %s .*?$(.*?)(?=^#{2,%d} |\Z)" %
                  (level, re.escape(number), len(level)), text, re.M | re.S)
    assert m, "docs/CONTRACT.md has no section %s" % number
    return m.group(1)


@pytest.mark.parametrize("tool,section,page", [
    ("cascade", "6.1", "cascade.8"),
    ("cascade-ctl", "6.2", "cascade-ctl.8"),
    ("cascade-publish", "6.3", "cascade-publish.8"),
    ("cascade-console", "6.4", "cascade-console.8"),
])
def test_help_contract_and_man_page_name_the_same_options(tool, section,
                                                          page):
    """A tool's command line is written in three places: its --help, the
    contract and its man page.  They name the same long options, so none
    can drift from the others unseen."""
    r = subprocess.run([os.path.join(BUILD, tool), "--help"],
                       capture_output=True, text=True, timeout=30)
    options = set(re.findall(r"--[a-z][a-z-]+", r.stdout + r.stderr))
    assert options, r
    documented = set(re.findall(r"--[a-z][a-z-]+", contract_section(section)))
    assert options == documented, (
        "--help only: %s; docs/CONTRACT.md section %s only: %s" %
        (sorted(options - documented), section, sorted(documented - options)))
    if page is not None:
        man = "\n".join(man_sections(page).values())
        in_man = set(re.findall(r"--[a-z][a-z-]+", man))
        assert options <= in_man, "not in %s: %s" % (page,
                                                       sorted(options - in_man))


def test_the_test_plan_in_development_md_is_plan_py():
    """docs/development.md shows the plan that conftest.py applies, and
    every integration test module is in it."""
    import plan
    doc = open(os.path.join(ROOT, "docs", "development.md")).read()
    m = re.search(r"<!-- plan\.py: [^\n]*-->\n(.*?)<!-- end of the plan -->",
                  doc, re.S)
    assert m, "docs/development.md has no plan table"
    assert m.group(1) == plan.markdown(), \
        "docs/development.md's plan differs from tests/integration/plan.py"
    here = os.path.dirname(os.path.abspath(__file__))
    modules = {f[:-3] for f in os.listdir(here)
               if f.startswith("test_") and f.endswith(".py")}
    planned = {k.split("::")[0] for k in plan.PLAN}
    assert modules == planned


SPDX = "SPDX-License-Identifier: Apache-2.0"


def our_sources():
    """Every source file of ours that LICENSE covers: the C of src/,
    include/, tools/ and tests/, the integration tests, the scripts under
    tools/ and .ci/ (any file that starts with #!, and tools/benchlib's
    sourced .sh), the Makefile and the console's JS and CSS.  src/vendor/
    keeps its own license."""
    found = [os.path.join(ROOT, "Makefile")]
    rules = (("src", (".c", ".h")), ("include", (".h",)),
             ("tools", (".c", ".h", ".py", ".sh", ".js", ".css")),
             ("tests/unit", (".c", ".h")), ("tests/fuzz", (".c",)),
             ("tests/integration", (".py",)), (".ci", ()))
    for top, exts in rules:
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs
                       if x not in ("vendor", "corpus", "__pycache__")]
            for f in files:
                path = os.path.join(d, f)
                if f.endswith(exts):
                    found.append(path)
                elif top in ("tools", ".ci"):
                    with open(path, "rb") as fh:
                        if fh.read(2) == b"#!":
                            found.append(path)
    return found


def test_every_source_file_names_its_license():
    """LICENSE is the Apache License 2.0 and each of our source files says
    so in its first lines (after a shebang or a shellcheck directive)."""
    with open(os.path.join(ROOT, "LICENSE")) as f:
        assert "Apache License\n                           Version 2.0" \
            in f.read()
    files = our_sources()
    assert len(files) > 200
    missing = []
    for path in files:
        with open(path, errors="replace") as f:
            head = [f.readline() for _ in range(3)]
        if not any(SPDX in line for line in head):
            missing.append(os.path.relpath(path, ROOT))
    assert not missing, "no %r in the first lines of: %s" % (SPDX, missing)


def test_ci_can_install_its_packages_in_one_apt_get():
    """.ci/run installs every package install-deps lists for CI in one
    apt-get, which refuses all of them if any one conflicts with what the
    machine has (NodeSource's nodejs conflicts with Debian's npm).  apt's
    simulation on this machine must resolve them.  CI runs on Debian 12;
    the Debian 13 and 14 roots install their lists one by one."""
    with open("/etc/os-release") as f:
        if "VERSION_CODENAME=bookworm" not in f.read():
            pytest.skip(".ci/run runs on Debian 12")
    pkgs = subprocess.run(["sh", os.path.join(ROOT, "tools", "install-deps"),
                           "--list-ci"], capture_output=True, text=True,
                          check=True).stdout.split()
    assert "gcc" in pkgs and "chromium" in pkgs
    r = subprocess.run(["apt-get", "install", "-s", "-qq", *pkgs],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_the_container_examples_match_the_image_and_the_contract():
    """docs/examples' compose file and Kubernetes manifests, which no test
    here can run (a cluster; a registry), checked for what can be: they
    parse, they build the repository's Containerfile, the config each
    mounts passes `cascade --check`, and their user, ports, probe paths,
    mount paths and variables are the image's and the contract's."""
    import yaml

    ex = os.path.join(ROOT, "docs", "examples")
    with open(os.path.join(ROOT, "conf", "container", "Containerfile")) as f:
        cf = f.read()
    user = re.search(r"^USER (\d+):(\d+)$", cf, re.M).groups()
    exposed = re.search(r"^EXPOSE (.*)$", cf, re.M).group(1).split()
    assert "9464" in exposed
    with open(os.path.join(ROOT, "docs", "CONTRACT.md")) as f:
        contract = f.read()
    for path in ("/healthz", "/metrics"):
        assert "**`%s`**" % path in contract
    env = contract_section("5.2")
    assert "`CASCADE_BROKER_URL`" in env

    def check_config(text, where):
        """The mounted config: it loads (the password from the
        environment, which wins over password_file) and listens for
        probes on every interface at the exposed port."""
        path = os.path.join(tempfile.mkdtemp(), "cascade.ini")
        with open(path, "w") as f:
            f.write(text)
        e = clean_env()
        e["CASCADE_BROKER_PASSWORD"] = "x"
        r = subprocess.run([os.path.join(BUILD, "cascade"), "-c", path,
                            "--check"], capture_output=True, text=True,
                           timeout=30, env=e)
        assert r.returncode == 0, (where, r.stdout, r.stderr)
        assert re.search(r"^listen = :9464$", text, re.M), where
        return re.search(r"^password_file = (\S+)$", text, re.M).group(1)

    with open(os.path.join(ex, "compose.yaml")) as f:
        compose = yaml.safe_load(f)
    c = compose["services"]["cascade"]
    assert c["build"]["dockerfile"] == "conf/container/Containerfile"
    assert os.path.exists(os.path.join(ex, c["build"]["context"],
                                       c["build"]["dockerfile"]))
    assert c["user"] == "%s:%s" % user and c["read_only"] is True
    assert c["ports"] == ["127.0.0.1:9464:9464"]
    cfg = [v.split(":")[0] for v in c["volumes"]
           if v.split(":")[1] == "/etc/cascade/cascade.ini"]
    assert len(cfg) == 1, c["volumes"]
    with open(os.path.join(ex, cfg[0])) as f:
        pw = check_config(f.read(), "compose.yaml's config")
    assert pw == "/run/secrets/" + c["secrets"][0]
    adv = compose["services"]["rabbitmq"]["volumes"][0].split(":")[0]
    assert os.path.exists(os.path.join(ex, adv))

    with open(os.path.join(ex, "kubernetes.yaml")) as f:
        docs = {d["kind"]: d for d in yaml.safe_load_all(f)}
    assert set(docs) == {"Secret", "ConfigMap", "Deployment",
                         "PodDisruptionBudget", "Service", "ServiceMonitor"}
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    assert docs["Deployment"]["spec"]["replicas"] >= 2
    sc = pod["securityContext"]
    assert (str(sc["runAsUser"]), str(sc["runAsGroup"])) == user
    box = pod["containers"][0]
    assert box["securityContext"]["readOnlyRootFilesystem"] is True
    assert box["args"] == ["cascade", "-c", "/etc/cascade/cascade.ini"]
    assert box["ports"] == [{"name": "metrics", "containerPort": 9464}]
    assert box["readinessProbe"]["httpGet"] == {"path": "/healthz",
                                                "port": "metrics"}
    assert box["livenessProbe"]["httpGet"] == {"path": "/metrics",
                                               "port": "metrics"}
    assert [e["name"] for e in box["env"]] == ["CASCADE_BROKER_URL"]
    mounts = {m["name"]: m["mountPath"] for m in box["volumeMounts"]}
    assert mounts["config"] == "/etc/cascade"
    ini = docs["ConfigMap"]["data"]["cascade.ini"]
    pw = check_config(ini, "kubernetes.yaml's ConfigMap")
    vol = [v for v in pod["volumes"] if v["name"] == "broker"][0]
    item = vol["secret"]["items"][0]
    assert pw == mounts["broker"] + "/" + item["path"]
    assert item["key"] in docs["Secret"]["stringData"]
    assert pod["terminationGracePeriodSeconds"] > 10  # stop_timeout
    labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    for kind in ("Service", "PodDisruptionBudget"):
        sel = docs[kind]["spec"]["selector"]
        sel = sel.get("matchLabels", sel)
        assert sel.items() <= labels.items(), (kind, sel, labels)
    assert docs["Deployment"]["spec"]["selector"]["matchLabels"].items() \
        <= labels.items()
    sm = docs["ServiceMonitor"]["spec"]["selector"]["matchLabels"]
    assert sm.items() <= docs["Service"]["metadata"]["labels"].items()
    assert item["mode"] & 0o040 and sc["fsGroup"] == int(user[1])
    svc = docs["Service"]["spec"]["ports"][0]
    assert svc["name"] == "metrics" and svc["port"] == 9464
    assert docs["ServiceMonitor"]["spec"]["endpoints"][0]["port"] == "metrics"
