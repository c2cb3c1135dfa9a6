# SPDX-License-Identifier: Apache-2.0
"""What the console tests (test_console*.py) share: build/cascade-console
started from a daemon's configuration on a port the kernel picks, and a
stdlib HTTP client of it, as a script (a Bearer token from the JSON login)
or as a browser (the form login, its cookie and CSRF token) would use it
(docs/CONTRACT.md section 7.11).  As helpers.py, shared by the test files,
which import from here, never from one another."""
import datetime
import html.parser
import http.client
import json
import os
import re
import signal
import subprocess
import time
import urllib.parse
import uuid

import pika
import pytest

from helpers import BUILD, CTL, Client, Daemon, wait_for
from trust import User
from waiting import SHORT, ladder, records, uid

CONSOLE = os.path.join(BUILD, "cascade-console")

# docs/CONTRACT.md 7.11: on every answer.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; "
       "img-src 'self'; connect-src 'self'; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")

FORM = "application/x-www-form-urlencoded"


class Console:
    """build/cascade-console (or `cascade-ctl console`, ctl=True) with the
    configuration of a daemon (a helpers.Daemon, or the path of a config
    file), plus the sections given (console={"session_idle": "2s"}), in a
    file of its own: the daemon never reads the [console] section.  It
    listens on 127.0.0.1 (or where listen says), on a port the kernel
    picks, which it logs (msg=console_listening ... port=N)."""

    def __init__(self, daemon_or_config, tmpdir, ctl=False,
                 listen="127.0.0.1:0", **sections):
        binary = CTL if ctl else CONSOLE
        if not os.access(binary, os.X_OK):
            pytest.fail("%s is missing: run `make` first" % binary)
        base = getattr(daemon_or_config, "config", daemon_or_config)
        with open(base) as f:
            text = f.read()
        n = 1
        while True:
            stem = os.path.join(tmpdir, "%s-console-%d" % (
                os.path.basename(base).rsplit(".", 1)[0], n))
            if not os.path.exists(stem + ".ini"):
                break
            n += 1
        self.config = stem + ".ini"
        self.logpath = stem + ".log"
        with open(self.config, "w") as f:
            f.write(text.rstrip("\n") + "\n\n")
            for section, keys in sections.items():
                f.write("[%s]\n" % section)
                for k, v in keys.items():
                    f.write("%s = %s\n" % (k, v))
                f.write("\n")
        self.ctl = ctl
        self.listen = listen
        self.proc = None
        self.port = None

    def start(self, timeout=60, ready=True):
        """Once it listens, and (ready) /healthz answers 200."""
        self.logfile = open(self.logpath, "ab")
        env = dict(os.environ)
        env.pop("CASCADE_BROKER_URL", None)
        if self.ctl:
            argv = [CTL, "-c", self.config, "console", "--listen",
                    self.listen]
        else:
            argv = [CONSOLE, "-c", self.config, "--listen", self.listen]
        # Its log is its standard error (and anything on standard out).
        self.proc = subprocess.Popen(argv, stdout=self.logfile,
                                     stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + timeout
        while self.port is None:
            for line in self.log().splitlines():
                if "msg=console_listening" in line:
                    m = re.search(r"\bport=(\d+)", line)
                    assert m, "no port= in %r" % line
                    self.port = int(m.group(1))
            if self.port is not None:
                break
            self._alive("msg=console_listening")
            if time.time() > deadline:
                self.kill()
                pytest.fail("no msg=console_listening in %ss:\n%s" %
                            (timeout, self.log()))
            time.sleep(0.05)
        self.origin = "http://127.0.0.1:%d" % self.port
        if not ready:
            return self
        # 503 until it has read P.events up to its marker.
        last = None
        while time.time() < deadline:
            self._alive("/healthz 200")
            try:
                last = self.request("GET", "/healthz", timeout=5)
                if last.status == 200:
                    return self
            except OSError as e:
                last = e
            time.sleep(0.1)
        self.kill()
        pytest.fail("/healthz did not answer 200 in %ss (last: %s):\n%s" % (
            timeout, getattr(last, "status", last), self.log()))

    def _alive(self, waiting_for):
        if self.proc.poll() is not None:
            pytest.fail("cascade-console exited with %s before %s:\n%s" %
                        (self.proc.returncode, waiting_for, self.log()))

    def log(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def url(self, path):
        return self.origin + path

    def request(self, method, path, body=None, headers=None, timeout=30):
        """One HTTP request as given (no cookies, no token): an Answer."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                          timeout=timeout)
        try:
            if isinstance(body, str):
                body = body.encode()
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return Answer.of(r, r.read())
        finally:
            conn.close()

    def session(self):
        return Session(self)

    def stop(self, timeout=20):
        """SIGTERM; its exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail("cascade-console did not exit %ss after SIGTERM:\n%s"
                        % (timeout, self.log()[-3000:]))
        self.logfile.close()
        return rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
            self.logfile.close()


class Answer(tuple):
    """(status, headers, data): data is the parsed JSON when the answer is
    JSON, else the text.  .raw is the body's bytes, .text its text,
    .header(name) one header (None when absent), .headers_all(name) all
    of one name."""

    def __new__(cls, status, headers, data):
        return super().__new__(cls, (status, headers, data))

    status = property(lambda self: self[0])
    headers = property(lambda self: self[1])
    data = property(lambda self: self[2])

    @classmethod
    def of(cls, response, raw):
        text = raw.decode("utf-8", errors="replace")
        data = text
        ctype = response.getheader("Content-Type") or ""
        if "json" in ctype:
            try:
                data = json.loads(text)
            except ValueError:
                data = text
        a = cls(response.status, response.msg, data)
        a.raw, a.text = raw, text
        return a

    def header(self, name):
        return self.headers.get(name)

    def headers_all(self, name):
        return self.headers.get_all(name) or []

    @property
    def error(self):
        """The refusal's code ({"error": CODE}), or None."""
        return self.data.get("error") if isinstance(self.data, dict) \
            else None

    def __repr__(self):
        return "Answer(%s, %s, %r)" % (self.status, dict(self.headers),
                                       self.text[:2000])


class _Inputs(html.parser.HTMLParser):
    """The <input name value> and <meta name content> of a page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.inputs, self.metas = {}, {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and a.get("name"):
            self.inputs.setdefault(a["name"], a.get("value") or "")
        elif tag == "meta" and a.get("name"):
            self.metas.setdefault(a["name"], a.get("content") or "")

    handle_startendtag = handle_starttag


def page_fields(text):
    """({input name: value}, {meta name: content}) of an HTML page."""
    p = _Inputs()
    p.feed(text)
    return p.inputs, p.metas


class Session:
    """A client of one console: logged in as a script (login: the token,
    sent as Authorization: Bearer) or as a browser (login_form: its
    cookies, and the CSRF token of its pages, sent with each POST along
    with Origin).  Answers JSON unless asked for a page (page=True)."""

    def __init__(self, console):
        self.console = console
        self.token = None
        self.cookies = {}
        self.cookie_paths = {}
        self.set_cookies = {}   # name: the whole Set-Cookie line, last seen
        self.csrf = None
        self.user = None
        self.login_answer = None

    # The wire.

    def _keep_cookies(self, answer):
        for line in answer.headers_all("Set-Cookie"):
            pair = line.split(";", 1)[0]
            name, _, value = pair.partition("=")
            name = name.strip()
            self.set_cookies[name] = line
            attrs = line.lower()
            path = "/"
            for attr in line.split(";")[1:]:
                k, _, v = attr.strip().partition("=")
                if k.lower() == "path" and v.startswith("/"):
                    path = v
            if value == "" or "max-age=0" in attrs or \
                    "expires=thu, 01 jan 1970" in attrs:
                self.cookies.pop(name, None)
                self.cookie_paths.pop(name, None)
            else:
                self.cookies[name] = value.strip()
                self.cookie_paths[name] = path

    def _cookies_for(self, path):
        """The cookies a browser sends to path (by their Path)."""
        path = path.split("?", 1)[0]
        out = []
        for name, value in self.cookies.items():
            p = self.cookie_paths.get(name, "/")
            if path == p or path.startswith(p.rstrip("/") + "/"):
                out.append("%s=%s" % (name, value))
        return "; ".join(out)

    def raw(self, method, path, body=None, headers=None, cookie=True,
            bearer=True, page=False, timeout=30):
        """One request with this session's cookies and token (unless told
        not to send them) and the headers given, which win (Host, Origin,
        Referer, Content-Type, Accept...)."""
        h = {"Accept": "text/html" if page else "application/json"}
        if bearer and self.token:
            h["Authorization"] = "Bearer " + self.token
        if cookie and self._cookies_for(path):
            h["Cookie"] = self._cookies_for(path)
        for k, v in (headers or {}).items():
            for old in [x for x in h if x.lower() == k.lower()]:
                del h[old]
            if v is not None:
                h[k] = v
        a = self.console.request(method, path, body, h, timeout=timeout)
        self._keep_cookies(a)
        return a

    def get(self, path, page=False, headers=None, **kw):
        return self.raw("GET", path, headers=headers, page=page, **kw)

    def get_json(self, path, **query):
        """GET path (with query, urlencoded) answered as JSON."""
        if query:
            path += ("&" if "?" in path else "?") + \
                urllib.parse.urlencode(query)
        return self.raw("GET", path)

    def post(self, path, _headers=None, _csrf=True, _origin=True,
             _page=False, **fields):
        """POST path with fields as a form.  From a browser session, the
        CSRF token (field csrf) and Origin go with it unless _csrf or
        _origin is False; _headers win over both."""
        if self.cookies and self.csrf and _csrf and "csrf" not in fields:
            fields["csrf"] = self.csrf
        h = {"Content-Type": FORM}
        if self.cookies and _origin:
            h["Origin"] = self.console.origin
        h.update(_headers or {})
        body = urllib.parse.urlencode(fields)
        return self.raw("POST", path, body, h, page=_page)

    # Logging in.

    def login(self, user, password):
        """As a script: POST /login with Accept: application/json; the
        token is then sent as Authorization: Bearer."""
        a = self.raw("POST", "/login",
                     urllib.parse.urlencode({"user": user,
                                             "password": password}),
                     {"Content-Type": FORM}, cookie=False, bearer=False)
        self.login_answer = a
        if a.status == 200 and isinstance(a.data, dict):
            self.token = a.data.get("token")
            self.user = user
        return a

    def login_form(self, user, password, next=None, host=None):
        """As a browser: GET /login (its pre token, field and cookie),
        POST the form from the console's origin, keep the session cookie,
        and take the CSRF token from a page (<meta name="csrf">, else a
        hidden csrf field).  The POST's answer.  next: the page to come
        back to (?next=); host: the Host the browser names, and the
        origin it posts from (http://host)."""
        path = "/login"
        if next is not None:
            path += "?" + urllib.parse.urlencode({"next": next})
        extra = {"Host": host} if host else {}
        origin = "http://" + host if host else self.console.origin
        form = self.raw("GET", path, page=True, bearer=False,
                        headers=extra)
        assert form.status == 200, form
        inputs, _ = page_fields(form.text)
        assert "pre" in inputs, "no hidden pre field in /login:\n" + \
            form.text[:3000]
        a = self.raw("POST", path,
                     urllib.parse.urlencode({"user": user,
                                             "password": password,
                                             "pre": inputs["pre"]}),
                     dict({"Content-Type": FORM, "Origin": origin},
                          **extra), page=True, bearer=False)
        self.login_answer = a
        if a.status in (200, 302, 303) and self.cookies:
            self.user = user
            self.csrf = self.read_csrf(a)
        return a

    def read_csrf(self, answer=None):
        """The CSRF token of a page (the answer given, else /waiting)."""
        for a in ([answer] if answer is not None else []) + [None]:
            if a is None:
                a = self.get("/waiting", page=True)
            if a.status != 200 or not isinstance(a.data, str):
                continue
            inputs, metas = page_fields(a.text)
            token = metas.get("csrf") or inputs.get("csrf")
            if token:
                return token
        return None

    def logout(self):
        a = self.post("/logout")
        return a


# The fixtures of a module that tests the console: the broker users
# (docs/security.md's lines), a daemon whose control users include ops,
# and the console.  Import them into the test module.

@pytest.fixture(scope="module")
def tmp_module(tmp_path_factory):
    return str(tmp_path_factory.mktemp("console"))


def daemon_user(broker):
    return pika.URLParameters(broker.url).credentials.username


@pytest.fixture(scope="module")
def d(broker, tmp_module):
    """The daemon; its control users are its own (cascade-ctl's) and
    ops, whose records the console writes as ops."""
    prefix = "t" + uuid.uuid4().hex[:8]
    controls = "%s, %s-ops" % (daemon_user(broker), prefix)
    daemon = Daemon(broker, tmp_module,
                    ladder(*SHORT, events={"control_users": controls}),
                    prefix).start()
    yield daemon
    # A daemon that died during the module's tests fails it here, as the
    # console does in con's teardown, whichever test was last.
    assert daemon.proc.poll() is None, (
        "cascade died during the module (exit status %s):\n%s" % (
            daemon.proc.returncode, daemon.log()[-5000:]))
    rc = daemon.stop()
    assert rc == 0, "cascade exited %s on SIGTERM:\n%s" % (rc, daemon.log())


@pytest.fixture(scope="module")
def people(broker, d):
    """{role: trust.User} for ops, alice and bob (docs/security.md's
    lines: the control user's for cascade-ctl, the publisher's)."""
    p = d.prefix
    made = {
        "ops": User(broker, p + "-ops", "^$", r"^(%s|amq\.default)$" % p,
                    r"^%s\.(events|cancels|copies|error)$" % p),
        "alice": User(broker, p + "-alice", "^$", "^%s$" % p, "^$"),
        "bob": User(broker, p + "-bob", "^$", "^%s$" % p, "^$"),
    }
    # To requeue a publisher's parked message as its owner.
    broker.set_user_tags(made["ops"].name, "impersonator")
    yield made
    for u in made.values():
        u.close()
        broker.delete_user(u.name)


@pytest.fixture(scope="module")
def con(d, tmp_module, people):
    c = Console(d, tmp_module).start()
    yield c
    rc = c.stop()
    assert rc == 0, "cascade-console exited %s on SIGTERM:\n%s" % (
        rc, c.log()[-5000:])


# A module's sessions, one per user, and what the tests do with them.

@pytest.fixture(autouse=True)
def _the_console_is_alive(request):
    """A console that died in an earlier test fails each later one with
    its exit status and log, not with a refused connection."""
    if "con" in request.fixturenames:
        c = request.getfixturevalue("con")
        if c.proc.poll() is not None:
            pytest.fail("cascade-console died in an earlier test (exit "
                        "status %s):\n%s" % (c.proc.returncode,
                                             c.log()[-3000:]))
    yield


def logged_in(con, user):
    s = con.session()
    a = s.login(user.name, user.password)
    if a.status != 200 or not s.token:
        pytest.fail("login as %s: %r\n%s" % (user.name, a, con.log()[-3000:]))
    s.account = user
    return s


@pytest.fixture(scope="module")
def ops(con, people):
    return logged_in(con, people["ops"])


@pytest.fixture(scope="module")
def alice(con, people):
    return logged_in(con, people["alice"])


@pytest.fixture(scope="module")
def bob(con, people):
    return logged_in(con, people["bob"])


@pytest.fixture(scope="module")
def browser(con, people):
    """ops logged in through the form, as a browser: the cookie and the
    CSRF token of the pages."""
    s = con.session()
    a = s.login_form(people["ops"].name, people["ops"].password)
    if not s.cookies.get("cascade_session") or not s.csrf:
        pytest.fail("form login as ops: cookies %s, csrf %r: %r" % (
            s.cookies, s.csrf, a))
    s.account = people["ops"]
    return s


@pytest.fixture(scope="module")
def guest(broker):
    """The daemon's user, as the test's eyes: queues, consuming, and
    messages published without a user-id."""
    c = Client(broker)
    yield c
    c.close()


# What the tests share.

def refused(a, status, code):
    """a is the refusal status with {"error": code, "message": TEXT}."""
    assert (a.status, a.error) == (status, code), a
    assert isinstance(a.data.get("message"), str) and a.data["message"], a


def ok(a, kind, cid):
    """An action's answer: {"ok": true, "kind", "id"}."""
    assert a.status == 200 and isinstance(a.data, dict), a
    assert (a.data.get("ok"), a.data.get("kind"), a.data.get("id")) == \
        (True, kind, cid), a


def waiting(s, **query):
    """The JSON of /waiting for session s, all rows (limit 500)."""
    query.setdefault("limit", 500)
    a = s.get_json("/waiting", **query)
    assert a.status == 200 and isinstance(a.data, dict), a
    return a.data


def rows(s, **query):
    return waiting(s, **query)["rows"]


def mids(rows_):
    return [r["message_id"] for r in rows_]


def series_rows(s):
    a = s.get_json("/series", limit=500)
    assert a.status == 200 and isinstance(a.data, dict), a
    # "the repeats, as list --series": rows as /waiting's.
    return a.data["rows"] if "rows" in a.data else a.data["messages"]


def wait_row(s, mid, timeout=10, pred=None, series=False):
    """The row of message-id mid in s's /waiting (or /series), once it is
    there (and pred(row) holds)."""
    found, last = {}, {}

    def seen():
        rs = series_rows(s) if series else rows(s)
        for r in rs:
            if r["message_id"] == mid:
                last["r"] = r
                if pred is None or pred(r):
                    found["r"] = r
                    return True
        return False
    wait_for(seen, timeout, lambda: "%s in %s's %s%s (last row: %s)" % (
        mid, s.user, "/series" if series else "/waiting",
        "" if pred is None else " as wanted", last.get("r")))
    return found["r"]


def paused(row):
    rep = row.get("repeat")
    return rep["paused"] if rep else row.get("paused")


def anon(guest, d, q, mid, delay="10m", **headers):
    """A delayed message published without a user-id (control users
    only see it)."""
    h = {"x-remaining-delay": delay}
    h.update(headers)
    return guest.publish(d.prefix, q, mid.encode(), h, message_id=mid)


def requests_of(d, kind, cid):
    """The request records of kind naming cid in P.cancels."""
    header = {"cancel": "x-cascade-cancel", "reschedule":
              "x-cascade-reschedule", "pause": "x-cascade-pause",
              "resume": "x-cascade-resume"}[kind]
    return [r for r in records(d.broker, d.prefix + ".cancels")
            if r.type == kind and (r.headers or {}).get(header) == cid]


def iso(t):
    return datetime.datetime.fromtimestamp(
        t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@pytest.fixture
def victim(d, guest, ops):
    """A message of nobody's waiting an hour: the target of refused
    POSTs, which must leave it as it was."""
    q = guest.queue()
    mid = uid("victim")
    anon(guest, d, q, mid, "1h")
    return wait_row(ops, mid)


def untouched(ops, row):
    now = wait_row(ops, row["message_id"])
    assert (now["cancel_pending"], now["rescheduled"], now["due_ms"]) == \
        (False, False, row["due_ms"]), now
