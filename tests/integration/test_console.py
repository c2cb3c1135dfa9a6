# SPDX-License-Identifier: Apache-2.0
"""The console (docs/CONTRACT.md section 7.11): build/cascade-console
against a private RabbitMQ and a real daemon, as a script (Bearer) and as
a browser (cookie, CSRF token, Origin) use it.  Three broker users with
the rights docs/security.md gives: `ops`, a control user (the cascade-ctl
line, tagged impersonator, named in [events] control_users), and the
publishers `alice` and `bob` (write on P only).  One daemon, one console
and one session per user serve the module; the tests that need their own
(expiry, logout, the rate limit) make them.  Last, cascade-ctl list and
cancel answered from the console's index (/ctl/list, /ctl/count)."""
import datetime
import json
import os
import re
import subprocess
import threading
import time
import urllib.parse
import uuid

import pytest

from console import (CSP, FORM, Console, con, d, daemon_user, people,
                     tmp_module)
from helpers import (CTL, LATE_SCALE, Client, Daemon, ctl, http_get,
                     loopback6, wait_for)
from trust import User, config_as, now_ms
from waiting import (LATE, SHORT, SLACK, expect_nothing, ladder, listing,
                     records, uid, wait_listed)


# The module's broker users, daemon and console: console.py's fixtures
# (d, people, con), shared with the browser test.

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


# Logging in and out.

def test_healthz_answers_ok_without_a_session(con):
    a = con.request("GET", "/healthz")
    assert (a.status, a.text.strip()) == (200, "ok"), a


def test_an_empty_host_serves_ipv4_and_ipv6(d, tmp_module):
    """`--listen :PORT` (as [console] listen) is every interface of both
    families, one dual-stack socket (docs/CONTRACT.md section 5.3): the
    console answers on 127.0.0.1 and on [::1].  Off loopback it wants an
    https:// public_url."""
    if not loopback6():
        pytest.skip("this machine has no ::1 (IPv6 loopback)")
    c = Console(d, tmp_module, listen=":0",
                console={"public_url": "https://console.example"}).start()
    try:
        for host in ("127.0.0.1", "[::1]"):
            status, body = http_get("http://%s:%d/healthz" % (host, c.port))
            assert (status, body.strip()) == (200, "ok"), (host, body)
    finally:
        assert c.stop() == 0, c.log()[-3000:]


def test_health_shows_the_console_and_its_daemon(d, tmp_module, people):
    """/health as JSON: the console caught up with nothing refused and no
    reader error, and the daemon's /metrics (at [console] metrics) read:
    connected, in its waiting mode; the totals, held messages and targets
    refusing deliveries only for a control user (docs/CONTRACT.md section
    7.11)."""
    listen = d.metrics_url().split("//", 1)[1]
    c = Console(d, tmp_module, console={"metrics": listen}).start()
    try:
        for who in ("ops", "alice"):
            s = c.session()
            assert s.login(people[who].name,
                           people[who].password).status == 200
            a = s.get_json("/health")
            assert a.status == 200 and isinstance(a.data, dict), a
            h = a.data["console"]
            assert h["caught_up"] is True and h["reader_error"] is None, h
            [daemon] = a.data["daemons"]
            assert daemon["metrics"] == listen and "error" not in daemon, \
                daemon
            assert daemon["connected"] is True, daemon
            assert daemon["mode"] in ("ladder", "native"), daemon
            if who == "alice":
                assert set(h) == PUBLISHER_HEALTH, h
                assert set(daemon) == {"metrics", "mode", "connected"}, \
                    daemon
                continue
            assert set(h) == PUBLISHER_HEALTH | {
                "records", "version", "sessions", "untrusted_skipped",
                "ended_held", "refused", "arena_bytes", "requests_refused",
                "series_refused", "known_clients", "known_evicted"}, h
            assert (h["refused"], h["series_refused"]) == (0, 0), h
            assert h["sessions"] >= 1, h
            assert daemon["refusing"] == [] and daemon["held"] >= 0, daemon
            page = s.get("/health", page=True)
            assert page.status == 200 and \
                "<dd id=reader-error>none</dd>" in page.text, page
    finally:
        assert c.stop() == 0, c.log()[-3000:]


PUBLISHER_HEALTH = {"caught_up", "live_age_ms", "waiting", "reader_error"}


def test_a_publishers_health_counts_only_theirs(alice, ops, mixed):
    """A publisher's /health counts their own waiting messages, the number
    their Waiting page shows, and none of the totals that count everyone's
    (records, sessions, the index, skipped writers); a control user's
    counts every message."""
    h = alice.get_json("/health").data["console"]
    assert set(h) == PUBLISHER_HEALTH, h
    assert h["waiting"] == waiting(alice)["waiting"] >= 3, h
    assert ops.get_json("/health").data["console"]["waiting"] > \
        h["waiting"] + 1
    page = alice.get("/health", page=True)
    assert page.status == 200, page
    assert "<dd id=health-waiting>%d</dd>" % h["waiting"] in page.text, \
        page.text
    for total in ("records read", "Sessions", "Records skipped", "Index",
                  "<th>Held</th>"):
        assert total not in page.text, (total, page.text)


def test_a_reader_that_cannot_read_says_why(broker, d, tmp_module, people,
                                            ops):
    """A console whose user may not read P.events: /healthz stays 503 and
    says the reader failed, not why (anyone may ask it), and /health,
    behind a login, says why."""
    blind = User(broker, d.prefix + "-blind", "^$", "^$", "^$")
    try:
        config = config_as(d, tmp_module, blind.name, blind.password)
        c = Console(config, tmp_module).start(ready=False)
        try:
            last = []

            def failed():
                last[:] = [c.request("GET", "/healthz")]
                return "the reader failed" in last[0].text

            wait_for(failed, 20, lambda: "/healthz to say so: %r" % last)
            a = last[0]
            assert a.status == 503, a
            assert a.text.startswith("catching up: 0 records read"), a
            assert "ACCESS_REFUSED" not in a.text and \
                d.prefix not in a.text, a
            s = c.session()
            assert s.login(ops.account.name,
                           ops.account.password).status == 200
            h = s.get_json("/health").data["console"]
            assert h["caught_up"] is False, h
            # 3.10.8 refuses the stream's read (ACCESS_REFUSED); 4.3.6
            # answers its passive declare with NOT_FOUND.
            err = h["reader_error"]
            assert err and ("ACCESS_REFUSED" in err["message"] or
                            d.prefix + ".events" in err["message"]), h
            assert abs(err["at_ms"] - now_ms()) < 30000, err
            page = s.get("/health", page=True)
            assert page.status == 200 and "<dd id=reader-error>" in \
                page.text and "<dd id=reader-error>none" not in page.text, \
                page
        finally:
            c.stop()
    finally:
        blind.close()
        broker.delete_user(blind.name)


def reader_port(broker, c):
    """The broker-side peer port of c's oldest connection, its reader's
    (each of c's connections names its pid in its connection_name), or
    None."""
    out = broker.ctl("list_connections", "peer_port", "connected_at",
                     "client_properties").stdout
    mine = []
    for line in out.splitlines():
        f = line.split("\t", 2)
        if len(f) == 3 and re.search(r"pid %d\b" % c.proc.pid, f[2]):
            mine.append((int(f[1]), f[0]))
    return min(mine)[1] if mine else None


def test_header_bombs_in_the_events_stream_cost_the_reader_no_connection(
        broker, con, d, guest, ops):
    """Two messages whose headers nest 200 arrays deep, forged into
    P.events (under an x- name, which RabbitMQ 4 keeps in a stream): the
    console's reader reads past them on the connection it has (the wire
    filter, docs/CONTRACT.md section 4.4), and what is published after
    them is listed.  Before the filter, rabbitmq-c 0.14 and later lost the
    reader's connection on each."""
    from test_decode_bounds import nested, publish_raw
    wait_for(lambda: reader_port(broker, con), 10,
             "the console's connections in list_connections")
    before = reader_port(broker, con)
    for _ in range(2):
        publish_raw(d.broker, "", d.prefix + ".events",
                    nested(200, b"A", b"x-bomb"))
    mid = uid("after-bombs")
    anon(guest, d, "orders", mid)
    wait_row(ops, mid, timeout=15)
    after = reader_port(broker, con)
    assert after == before, "the reader connected again: port %s, then %s" \
        % (before, after)
    h = ops.get_json("/health").data["console"]
    assert h["caught_up"] is True and h["reader_error"] is None, h


def test_root_is_a_redirect_to_waiting(con):
    a = con.request("GET", "/")
    assert a.status == 303 and \
        (a.header("Location") or "").endswith("/waiting"), a


def test_json_login_gives_a_token(ops, alice, people):
    for s, control in ((ops, True), (alice, False)):
        data = s.login_answer.data
        assert set(data) >= {"token", "user", "control", "expires_ms"}, data
        assert (data["user"], data["control"]) == \
            (s.account.name, control), data
        assert isinstance(data["expires_ms"], int) and \
            data["expires_ms"] > 0, data
    assert ops.token != alice.token


def test_a_bearer_session_is_answered(ops):
    a = ops.get_json("/waiting", limit=1)
    assert a.status == 200 and a.data["caught_up"] is True, a


def test_form_login_sets_the_session_cookie(browser):
    a = browser.login_answer
    assert a.status in (200, 303), a
    line = browser.set_cookies["cascade_session"]
    attrs = [x.strip().lower() for x in line.split(";")[1:]]
    assert "httponly" in attrs and "samesite=strict" in attrs and \
        "path=/" in attrs, line
    assert "secure" not in attrs, "Secure without an https public_url: " + \
        line
    assert browser.get_json("/waiting", limit=1).status == 200


def test_a_wrong_password_is_401(con, people):
    s = con.session()
    a = s.login(people["bob"].name, "not-" + people["bob"].password)
    refused(a, 401, "no_session")
    assert s.token is None and not s.cookies.get("cascade_session"), a


def test_the_sixth_failed_login_is_429_with_retry_after(con, people):
    """Five failures for one user from one address, then 429 until the
    window passes; others still log in (no lockout)."""
    s = con.session()
    name = uid("nobody")
    for n in range(5):
        refused(s.login(name, "wrong-%d" % n), 401, "no_session")
    a = s.login(name, "wrong-5")
    refused(a, 429, "rate_limited")
    retry = a.header("Retry-After") or ""
    assert retry.isdigit() and 0 < int(retry) <= 300, a
    other = con.session()
    assert other.login(people["alice"].name,
                       people["alice"].password).status == 200


def login_from(c, client, user, password):
    """A JSON login through a proxy at 127.0.0.1 that names client in
    X-Forwarded-For."""
    return c.session().raw(
        "POST", "/login",
        urllib.parse.urlencode({"user": user, "password": password}),
        {"Content-Type": FORM, "X-Forwarded-For": client}, cookie=False,
        bearer=False)


def test_strangers_failures_do_not_refuse_a_correct_login(d, tmp_module,
                                                         people):
    """Behind a trusted proxy, each client's failures hold back that client
    only: 20 failed logins with made-up names from one client, and the
    control user's correct login from another goes through (and from the
    proxy itself, a client of its own); 5 wrong passwords for alice from
    one client, and her correct login from another goes through, while
    that client waits (docs/CONTRACT.md section 7.11; which peers'
    X-Forwarded-For is read: test_webgate.c)."""
    c = Console(d, tmp_module,
                console={"trusted_proxies": "127.0.0.1"}).start()
    try:
        ops_, alice_ = people["ops"], people["alice"]
        for n in range(20):
            a = login_from(c, "198.51.100.66", uid("nobody%d" % n), "x")
            assert a.status == 401, (n, a)
        refused(login_from(c, "198.51.100.66", ops_.name, ops_.password),
                429, "rate_limited")
        assert login_from(c, "198.51.100.10", ops_.name,
                          ops_.password).status == 200
        assert c.session().login(ops_.name, ops_.password).status == 200
        for n in range(5):
            refused(login_from(c, "198.51.100.67", alice_.name,
                               "wrong-%d" % n), 401, "no_session")
        a = login_from(c, "198.51.100.67", alice_.name, alice_.password)
        refused(a, 429, "rate_limited")
        assert 0 < int(a.header("Retry-After")) <= 300, a
        assert login_from(c, "198.51.100.68", alice_.name,
                          alice_.password).status == 200
        assert "from=198.51.100.67" in c.log(), c.log()[-2000:]
    finally:
        assert c.stop() == 0, c.log()[-3000:]


def test_one_users_logins_push_out_no_other_users_known_client(
        d, tmp_module, people):
    """Issue 55: a publisher's credentials ship with every app, so anyone
    can log in as alice, here from 264 clients (the /64s of one IPv6 /56,
    and 8 more).  She keeps her latest 8; the control user's client stays
    known.  Then 300 failed logins from 15 other clients reach the ceiling:
    a new client waits, the control user from where they logged in before
    does not, nor alice from her latest client, while alice from her first
    and from the control user's client wait (docs/CONTRACT.md section
    7.11)."""
    c = Console(d, tmp_module,
                console={"trusted_proxies": "127.0.0.1"}).start()
    try:
        ops_, alice_ = people["ops"], people["alice"]
        a = login_from(c, "198.51.100.10", ops_.name, ops_.password)
        assert a.status == 200, a
        ops_s = c.session()
        ops_s.token = a.data["token"]
        nets = ["2001:db8:0:%x::1" % (0xab00 + i) for i in range(264)]
        for net in nets:
            a = login_from(c, net, alice_.name, alice_.password)
            assert a.status == 200, (net, a)
        h = ops_s.get_json("/health").data["console"]
        assert (h["known_clients"], h["known_evicted"]) == (1 + 8, 0), h

        # 20 failures from each of 15 clients (5 for each of 4 made-up
        # names): 300, side by side so that they all fall in one minute.
        got = []

        def fail_from(k):
            for n in range(20):
                got.append(login_from(c, "192.0.2.%d" % (k + 1),
                                      "nobody-%d-%d" % (k, n // 5),
                                      "x").status)
        threads = [threading.Thread(target=fail_from, args=(k,))
                   for k in range(15)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert got == [401] * 300, got
        # Refusals count nothing; a success takes back its own count, one
        # of the 300, so one more failure fills the ceiling again.
        refused(login_from(c, "198.51.100.11", ops_.name, ops_.password),
                429, "rate_limited")
        refused(login_from(c, nets[0], alice_.name, alice_.password), 429,
                "rate_limited")
        refused(login_from(c, "198.51.100.10", alice_.name,
                           alice_.password), 429, "rate_limited")
        assert login_from(c, "198.51.100.10", ops_.name,
                          ops_.password).status == 200
        assert login_from(c, "192.0.2.100", "nobody", "x").status == 401
        refused(login_from(c, "198.51.100.12", ops_.name, ops_.password),
                429, "rate_limited")
        assert login_from(c, nets[-1], alice_.name,
                          alice_.password).status == 200
    finally:
        assert c.stop() == 0, c.log()[-3000:]


def test_no_session_is_401(con, d):
    s = con.session()
    for path in ("/waiting", "/waiting?format=json", "/series", "/parked",
                 "/changes?after=0", "/waiting/0123456789abcdef"):
        refused(s.get(path), 401, "no_session")
    refused(s.post("/waiting/0123456789abcdef/cancel"), 401, "no_session")
    s.token = "0" * 64
    refused(s.get("/waiting"), 401, "no_session")
    s.token = None
    s.cookies["cascade_session"] = "0" * 64
    s.cookie_paths["cascade_session"] = "/"
    refused(s.get("/waiting"), 401, "no_session")


def test_logout_ends_a_bearer_session(con, people):
    s = con.session()
    assert s.login(people["bob"].name, people["bob"].password).status == 200
    assert s.get("/waiting").status == 200
    a = s.logout()
    assert a.status in (200, 303), a
    refused(s.get("/waiting"), 401, "no_session")


def test_logout_ends_a_cookie_session(con, people):
    s = con.session()
    s.login_form(people["alice"].name, people["alice"].password)
    assert s.csrf and s.get("/waiting").status == 200, s.cookies
    cookie = s.cookies["cascade_session"]
    a = s.logout()
    assert a.status in (200, 303), a
    # The cookie it had, sent again, is no session any more.
    s.cookies["cascade_session"] = cookie
    s.cookie_paths["cascade_session"] = "/"
    refused(s.get("/waiting"), 401, "no_session")


@pytest.mark.slow
def test_an_idle_session_ends_after_session_idle(d, tmp_module, people):
    c = Console(d, tmp_module, console={"session_idle": "2s"}).start()
    try:
        s = c.session()
        assert s.login(people["alice"].name,
                       people["alice"].password).status == 200
        time.sleep(1.2)
        # Used: its idle time starts again.
        assert s.get("/waiting").status == 200
        time.sleep(1.2)
        assert s.get("/waiting").status == 200
        time.sleep(3)
        refused(s.get("/waiting"), 401, "no_session")
    finally:
        rc = c.stop()
    assert rc == 0, c.log()[-3000:]


def test_cascade_ctl_console_runs_it(d, tmp_module):
    c = Console(d, tmp_module, ctl=True).start()
    try:
        assert c.request("GET", "/healthz").status == 200
    finally:
        rc = c.stop()
    assert rc == 0, c.log()[-3000:]


# Who sees what.

@pytest.fixture(scope="module")
def mixed(d, people, guest, ops):
    """alice's a1 and a2 and her series, bob's b1, and n1 published
    without a user-id: ({key: message-id}, {key: ops' row})."""
    q = guest.queue()
    m = {k: uid(k) for k in ("a1", "a2", "as", "b1", "n1")}
    alice_, bob_ = people["alice"], people["bob"]
    alice_.delayed(d.prefix, q, m["a1"], "10m")
    alice_.delayed(d.prefix, q, m["a2"], "20m")
    alice_.delayed(d.prefix, q, m["as"], "1h", **{"x-cascade-every": "1h"})
    bob_.delayed(d.prefix, q, m["b1"], "10m")
    anon(guest, d, q, m["n1"])
    return m, {k: wait_row(ops, v) for k, v in m.items()}


def test_a_publisher_sees_only_their_own(alice, bob, mixed):
    m, _ = mixed
    view = waiting(alice)
    seen = set(mids(view["rows"]))
    assert {m["a1"], m["a2"], m["as"]} <= seen, seen
    assert not {m["b1"], m["n1"]} & seen, seen
    assert {r["owner"] for r in view["rows"]} == {alice.account.name}
    assert view["waiting"] == len(view["rows"]), view["waiting"]
    assert m["b1"] in mids(rows(bob)) and \
        not {m["a1"], m["a2"], m["n1"]} & set(mids(rows(bob)))


def test_a_control_user_sees_every_message(ops, people, mixed):
    m, _ = mixed
    owners = {r["message_id"]: r["owner"] for r in rows(ops)}
    assert {k: owners.get(v) for k, v in m.items()} == {
        "a1": people["alice"].name, "a2": people["alice"].name,
        "as": people["alice"].name, "b1": people["bob"].name, "n1": None}


def test_another_users_message_is_404_on_get_and_every_post(
        ops, alice, bob, mixed):
    m, row = mixed
    a1, series = row["a1"]["cascade_id"], row["as"]["cascade_id"]
    refused(bob.get("/waiting/" + a1), 404, "not_found")
    refused(bob.post("/waiting/%s/cancel" % a1), 404, "not_found")
    refused(bob.post("/waiting/%s/cancel" % a1, park="1"), 404, "not_found")
    refused(bob.post("/waiting/%s/reschedule" % a1, delay="1m"), 404,
            "not_found")
    refused(bob.post("/series/%s/pause" % series), 404, "not_found")
    refused(bob.post("/series/%s/resume" % series), 404, "not_found")
    assert rows(bob, q=m["a1"]) == [] and rows(bob, q=a1) == []
    # A message published without a user-id: control users only.
    refused(alice.get("/waiting/" + row["n1"]["cascade_id"]), 404,
            "not_found")
    # The same answer as for an id nothing has.
    refused(bob.get("/waiting/" + "0123456789abcdef"), 404, "not_found")
    untouched(ops, row["a1"])
    assert paused(wait_row(ops, m["as"], series=True)) is False


def test_a_publisher_sees_their_own_message_in_full(alice, mixed):
    m, row = mixed
    a = alice.get("/waiting/" + row["a1"]["cascade_id"])
    assert a.status == 200 and m["a1"] in json.dumps(a.data), a


def test_the_owner_filter_for_control_users(ops, people, mixed):
    m, _ = mixed
    got = rows(ops, owner=people["alice"].name)
    assert {m["a1"], m["a2"], m["as"]} <= set(mids(got)), mids(got)
    assert {r["owner"] for r in got} == {people["alice"].name}


# Listing.

@pytest.fixture(scope="module")
def seven(d, guest, ops):
    """Seven messages of nobody's to a queue of their own, due 10 s
    apart from 10 minutes on: (target, message-ids in due order, the
    time published)."""
    q = guest.queue()
    ms = [uid("page%d" % i) for i in range(7)]
    t0 = time.time()
    for i, mid in enumerate(ms):
        anon(guest, d, q, mid, "%ds" % (600 + 10 * i))
    for mid in ms:
        wait_row(ops, mid)
    return "amq.default/" + q, ms, t0


def test_paging_by_offset_and_limit(ops, seven):
    target, ms, _ = seven
    pages = [waiting(ops, target=target, limit=3, offset=o)
             for o in (0, 3, 6)]
    assert [mids(p["rows"]) for p in pages] == [ms[0:3], ms[3:6], ms[6:]]
    assert [(p["matched"], p["offset"]) for p in pages] == \
        [(7, 0), (7, 3), (7, 6)], [(p["matched"], p["offset"])
                                   for p in pages]
    assert pages[0]["waiting"] >= 7


def test_rows_are_list_json_rows(ops, seven):
    """The rows' fields are list --json's, plus owner and rescheduled."""
    target, ms, _ = seven
    row = rows(ops, target=target, limit=1)[0]
    assert set(row) >= {"id", "message_id", "cascade_id", "due", "due_ms",
                        "exchange", "routing_key", "owner", "size",
                        "first_seen", "first_seen_ms", "cancel_pending",
                        "rescheduled", "repeat"}, row
    q = target.split("/", 1)[1]
    assert (row["id"], row["message_id"], row["exchange"],
            row["routing_key"], row["owner"], row["repeat"],
            row["cancel_pending"], row["rescheduled"]) == \
        (ms[0], ms[0], "", q, None, None, False, False), row
    assert len(row["cascade_id"]) == 16 and \
        int(row["cascade_id"], 16) >= 0, row


def test_search_is_exact_by_message_id_and_by_cascade_id(ops, seven):
    _, ms, _ = seven
    row = wait_row(ops, ms[2])
    by_mid = waiting(ops, q=ms[2])
    assert (mids(by_mid["rows"]), by_mid["matched"]) == ([ms[2]], 1)
    assert mids(rows(ops, q=row["cascade_id"])) == [ms[2]]
    # Exact: the start of an id matches nothing without prefix=1.
    assert rows(ops, q=ms[2][:-3]) == []
    assert rows(ops, q=row["cascade_id"][:10]) == []


def test_search_by_prefix(ops, seven):
    _, ms, _ = seven
    row = wait_row(ops, ms[4])
    assert mids(rows(ops, q=ms[4][:-3], prefix="1")) == [ms[4]]
    assert ms[4] in mids(rows(ops, q=row["cascade_id"][:10], prefix="1"))
    # Every seven share "page".
    common = ms[0].split("-")[0][:4]
    assert set(ms) <= set(mids(rows(ops, q=common, prefix="1")))


def test_the_target_filter(ops, seven):
    target, ms, _ = seven
    assert mids(rows(ops, target=target)) == ms
    assert mids(rows(ops, target="/" + target.split("/", 1)[1])) == ms
    assert rows(ops, target="amq.default/no-such-queue-" + uid("x")) == []
    assert {t["routing_key"]: t["waiting"]
            for t in waiting(ops)["targets"]
            if t["exchange"] in ("", "amq.default")}.get(target.split("/", 1)[1]) == 7


def test_the_due_range_filter(ops, seven):
    target, ms, t0 = seven
    # Due at t0 + 600, 610, ... 660 (each a little later than that).
    after, before = int((t0 + 625) * 1000), int((t0 + 645) * 1000)
    assert mids(rows(ops, target=target, after=after, before=before)) == \
        ms[3:5]
    assert mids(rows(ops, target=target, after=iso(t0 + 645))) == ms[5:]
    assert mids(rows(ops, target=target, before=iso(t0 + 615))) == ms[:2]


def test_counts_are_cascade_ctl_lists(d, ops, seven):
    """counts (and waiting) for a control user are list --json's."""
    last = {}
    for _ in range(5):
        lst = listing(d)
        view = waiting(ops, limit=1)
        last = {"ctl": (lst["waiting"], lst["counts"]),
                "console": (view["waiting"], view["counts"])}
        if last["ctl"] == last["console"]:
            break
        time.sleep(0.5)
    assert last["ctl"] == last["console"], last


def test_the_histogram_and_format_json(con, ops, seven):
    a = ops.raw("GET", "/waiting?format=json&limit=1",
                headers={"Accept": "text/html"})
    assert a.status == 200 and isinstance(a.data, dict), a
    h = a.data["histogram"]
    assert (len(h["hour"]), len(h["day"]), len(h["week"])) == (60, 24, 7), h
    # The seven are due 10 to 11 minutes from their publish.
    assert sum(h["hour"][9:12]) >= 7, h["hour"]


# Live.

def test_changes_answers_soon_after_a_publish(d, ops, guest):
    q = guest.queue()
    for _ in range(3):
        v = waiting(ops, limit=1)["version"]
        box = {}

        def poll(v=v, box=box):
            box["a"] = ops.get_json("/changes", after=v)
            box["t"] = time.time()
        th = threading.Thread(target=poll, daemon=True)
        th.start()
        time.sleep(0.5)
        if th.is_alive():
            break
        th.join()   # the version moved by itself: again
    else:
        pytest.fail("/changes answered at once three times: %r" % box["a"])
    mid = uid("live")
    sent = anon(guest, d, q, mid)
    th.join(10)
    assert not th.is_alive(), "/changes?after=%d: no answer 10 s after a " \
        "publish" % v
    a = box["a"]
    assert a.status == 200 and a.data["version"] > v, a
    assert box["t"] - sent < 2 * LATE_SCALE, box["t"] - sent
    wait_row(ops, mid, timeout=max(0.5, sent + 2 * LATE_SCALE - time.time()))


# Actions.

def test_a_publisher_cancels_through_p(d, alice, guest, broker):
    """alice's cancel is published to P with her user-id: the daemon
    records it (as itself, naming her) and the message never arrives."""
    q = guest.queue()
    mid = uid("a-cancel")
    t0 = alice.account.delayed(d.prefix, q, mid, "3s")
    cid = wait_row(alice, mid)["cascade_id"]
    ok(alice.post("/waiting/%s/cancel" % cid), "cancel", cid)
    expect_nothing(guest, [q], t0 + 3 + LATE * LATE_SCALE)
    rs = requests_of(d, "cancel", cid)
    assert [(r.user_id, r.headers.get("x-cascade-requester"))
            for r in rs] == [(daemon_user(broker), alice.account.name)], \
        [vars(r) for r in rs]


def test_a_control_user_cancels_directly(d, ops, people, guest):
    """ops' cancel of alice's message is written by the console into
    P.cancels (and P.events) as ops, as cascade-ctl writes it."""
    q = guest.queue()
    mid = uid("o-cancel")
    t0 = people["alice"].delayed(d.prefix, q, mid, "3s")
    cid = wait_row(ops, mid)["cascade_id"]
    ok(ops.post("/waiting/%s/cancel" % cid), "cancel", cid)
    # Recorded before the answer: list shows it pending at once.
    row = [m for m in listing(d)["messages"] if m["id"] == mid]
    assert row == [] or row[0]["cancel_pending"] is True, row
    expect_nothing(guest, [q], t0 + 3 + LATE * LATE_SCALE)
    assert [r.user_id for r in requests_of(d, "cancel", cid)] == \
        [ops.account.name]


def test_a_cancel_shows_pending_in_the_row(d, ops, guest):
    q = guest.queue()
    mid = uid("pending")
    anon(guest, d, q, mid, "1h")
    cid = wait_row(ops, mid)["cascade_id"]
    ok(ops.post("/waiting/%s/cancel" % cid), "cancel", cid)
    wait_row(ops, mid, 5, lambda r: r["cancel_pending"] is True)


def test_a_publisher_reschedules_later_through_p(d, alice, guest):
    q = guest.queue()
    mid = uid("a-later")
    alice.account.delayed(d.prefix, q, mid, "10m")
    cid = wait_row(alice, mid)["cascade_id"]
    asked = time.time()
    ok(alice.post("/waiting/%s/reschedule" % cid, delay="20m"),
       "reschedule", cid)
    # Once the daemon has recorded it and its copy is in P.events.
    row = wait_row(alice, mid, 15, lambda r: r["rescheduled"] is True)
    assert abs(row["due_ms"] / 1000.0 - (asked + 1200)) < 5, (row, asked)


def test_a_control_user_reschedules_later_through_p(d, ops, guest):
    q = guest.queue()
    mid = uid("o-later")
    anon(guest, d, q, mid, "10m")
    cid = wait_row(ops, mid)["cascade_id"]
    at = now_ms() + 1800 * 1000
    ok(ops.post("/waiting/%s/reschedule" % cid, at=str(at)), "reschedule",
       cid)
    row = wait_row(ops, mid, 5, lambda r: r["rescheduled"] is True)
    assert row["due_ms"] == at, row
    # Through P, as every reschedule (CONTRACT 7.11): a daemon records
    # it, naming ops as the requester.
    rs = requests_of(d, "reschedule", cid)
    assert [(r.headers.get("x-cascade-requester"),
             r.headers["x-cascade-due"]) for r in rs] == \
        [(ops.account.name, at)], [vars(r) for r in rs]


def earlier(d, s, publisher, guest, anonymous):
    """A message due in a minute, moved by s to 2 s from now: it arrives
    then, once (the instance still waiting is dropped when it comes
    back, within the 4 s level)."""
    q = guest.queue()
    mid = uid("earlier")
    if anonymous:
        anon(guest, d, q, mid, "60s", **{"x-app": "kept"})
    else:
        publisher.delayed(d.prefix, q, mid, "60s", body=b"the body")
    cid = wait_row(s, mid)["cascade_id"]
    asked = time.time()
    ok(s.post("/waiting/%s/reschedule" % cid, delay="2s"), "reschedule",
       cid)
    # The new time is the console's now + 2 s: between these two.
    answered = time.time()
    got = guest.collect(q, 1, 2 + LATE * LATE_SCALE + 1)
    assert [p.message_id for _, p, _ in got] == [mid], got
    assert got[0][0] >= asked + 2 - SLACK, \
        "%.3f s early" % (asked + 2 - got[0][0])
    assert got[0][0] < answered + 2 + LATE * LATE_SCALE, \
        "%.3f s late" % (got[0][0] - answered - 2)
    expect_nothing(guest, [q], time.time() + 5)
    return got[0]


@pytest.mark.slow
def test_a_publisher_reschedules_earlier_and_it_arrives(d, alice, guest):
    _, props, body = earlier(d, alice, alice.account, guest, False)
    assert body == b"the body"


@pytest.mark.slow
def test_a_control_user_reschedules_earlier_and_it_arrives(d, ops, guest):
    _, props, body = earlier(d, ops, None, guest, True)
    assert props.headers == {"x-app": "kept"}, props.headers


def pause_and_resume(d, s, owner, guest, mid):
    """owner's series, paused and resumed by session s: /series shows
    it."""
    q = guest.queue()
    owner.delayed(d.prefix, q, mid, "1h", **{"x-cascade-every": "1h"})
    row = wait_row(s, mid, series=True)
    assert row["repeat"]["every_ms"] == 3600000 and paused(row) is False, \
        row
    cid = row["cascade_id"]
    ok(s.post("/series/%s/pause" % cid), "pause", cid)
    wait_row(s, mid, 15, lambda r: paused(r) is True, series=True)
    ok(s.post("/series/%s/resume" % cid), "resume", cid)
    wait_row(s, mid, 15, lambda r: paused(r) is False, series=True)
    return cid


def test_the_series_page_shows_the_soonest_500_of_600(broker, tmp_module,
                                                      people, guest):
    """Of 600 series, /series counts all 600 and shows the 500 soonest,
    soonest first (it once kept the first 500 its map gave, then sorted
    those)."""
    prefix = "t" + uuid.uuid4().hex[:8]
    controls = "%s, %s" % (daemon_user(broker), people["ops"].name)
    dd = Daemon(broker, tmp_module,
                ladder(*SHORT, events={"control_users": controls}),
                prefix).start()
    try:
        q = guest.queue()
        # Published in an order unlike their due order (7919 is prime).
        for k in ((i * 7919) % 600 for i in range(600)):
            guest.publish(prefix, q, b"s",
                          {"x-remaining-delay": "%dm" % (k + 10),
                           "x-cascade-every": "1d"},
                          message_id="s-%03d" % k)
        c = Console(dd, tmp_module).start()
        try:
            s = c.session()
            assert s.login(people["ops"].name,
                           people["ops"].password).status == 200
            last = {}

            def all_there():
                last["a"] = s.get_json("/series")
                return last["a"].status == 200 and \
                    last["a"].data.get("waiting") == 600

            wait_for(all_there, 30, lambda: "600 series: %r" % last)
            got = mids(last["a"].data["rows"])
            assert got == ["s-%03d" % k for k in range(500)], got
        finally:
            assert c.stop() == 0, c.log()[-3000:]
    finally:
        assert dd.stop() == 0, dd.log()[-3000:]


def test_a_publisher_pauses_and_resumes_their_series(d, alice, guest):
    pause_and_resume(d, alice, alice.account, guest, uid("a-series"))


def test_a_control_user_pauses_and_resumes_any_series(d, ops, people,
                                                      guest):
    cid = pause_and_resume(d, ops, people["bob"], guest, uid("o-series"))
    assert [r.user_id for r in requests_of(d, "pause", cid)] == \
        [ops.account.name]


def test_a_pause_made_by_message_id_is_resumed_from_the_console(
        d, ops, alice, people, guest):
    """A series paused by its message-id (cascade-ctl pause, as
    x-cascade-pause may name it) shows paused, and the console's resume,
    which names the series by its cascade id, lifts it, with the control
    user's own pause made meanwhile: the copies come again.  A resume of
    a series that is not paused says that nothing changed (409); a
    publisher cannot lift a control user's pause (403)."""
    q = guest.queue()
    mid = uid("by-mid")
    people["bob"].delayed(d.prefix, q, mid, "1s", **{"x-cascade-every": "1s"})
    assert len(guest.collect(q, 1, 10 * LATE_SCALE)) == 1
    ctl(d, "pause", mid)
    wait_row(ops, mid, 15, lambda r: paused(r) is True, series=True)
    time.sleep(2)  # a copy already on its way may still arrive
    guest.drain(q)
    # The paused copy waits as the same copy: its cascade id stays.
    cid = wait_row(ops, mid, series=True)["cascade_id"]
    ok(ops.post("/series/%s/pause" % cid), "pause", cid)
    ok(ops.post("/series/%s/resume" % cid), "resume", cid)
    wait_row(ops, mid, 15, lambda r: paused(r) is False, series=True)
    got = guest.collect(q, 1, 10 * LATE_SCALE)
    assert [p.message_id for _, p, _ in got] == [mid], got
    ctl(d, "cancel", mid)

    mine = uid("alice-by-mid")
    alice.account.delayed(d.prefix, q, mine, "1h",
                          **{"x-cascade-every": "1h"})
    cid = wait_row(alice, mine, series=True)["cascade_id"]
    ctl(d, "pause", mine)
    wait_row(alice, mine, 15, lambda r: paused(r) is True, series=True)
    refused(alice.post("/series/%s/resume" % cid), 403, "forbidden")
    assert paused(wait_row(ops, mine, series=True)) is True
    ok(ops.post("/series/%s/resume" % cid), "resume", cid)
    refused(ops.post("/series/%s/resume" % cid), 409, "not_paused")
    ctl(d, "cancel", mine)


def test_only_a_control_user_pauses_a_target(d, ops, alice, guest):
    q = guest.queue()
    target = "amq.default/" + q
    refused(alice.post("/targets/pause", target=target), 403, "forbidden")
    refused(alice.post("/targets/resume", target=target), 403, "forbidden")
    for kind in ("pause", "resume"):
        a = ops.post("/targets/" + kind, target=target)
        assert a.status == 200 and a.data.get("ok") is True and \
            a.data.get("kind") == kind, a
    refused(ops.post("/targets/resume", target=target), 409, "not_paused")
    rs = [(r.type, r.user_id) for r in records(d.broker,
                                               d.prefix + ".cancels")
          if q in str((r.headers or {}).get("x-cascade-pause-target", "")) +
          str((r.headers or {}).get("x-cascade-resume-target", ""))]
    assert rs == [("pause", ops.account.name),
                  ("resume", ops.account.name)], rs


# Parked.

def test_parked_shows_reads_and_requeues(d, ops, alice, bob, guest):
    """A message to an exchange that does not exist is parked: the ring
    shows it to ops and its owner, not to bob; reading P.error is for
    control users; requeued by message-id once the exchange exists, it
    arrives, still alice's."""
    ex, mid = uid("ex-late"), uid("parked")
    alice.account.delayed(d.prefix, "orders", mid, "2s",
                          **{"x-target-exchange": ex})

    def ring(s):
        a = s.get_json("/parked")
        assert a.status == 200, a
        return json.dumps(a.data)
    wait_for(lambda: mid in ring(ops), 15,
             lambda: "%s in ops' /parked ring: %s" % (mid, ring(ops)))
    assert mid in ring(alice)
    assert mid not in ring(bob)
    refused(alice.get_json("/parked", read="1"), 403, "forbidden")
    a = ops.get_json("/parked", read="1")
    assert a.status == 200 and mid in json.dumps(a.data), a

    guest.ch.exchange_declare(ex, "direct")
    q = guest.queue()
    guest.ch.queue_bind(q, ex, "orders")
    refused(alice.post("/parked/requeue", message_id=mid), 403, "forbidden")
    a = ops.post("/parked/requeue", message_id=mid)
    assert a.status == 200 and a.data["requeued"] == 1, a
    got = guest.collect(q, 1, 5)
    assert [p.message_id for _, p, _ in got] == [mid], got
    assert got[0][1].headers.get("x-cascade-user-id") == alice.account.name


# The gate's refusals (docs/CONTRACT.md 7.11's table), one each.

def test_400_a_bad_delay_or_time(ops, victim):
    cid = victim["cascade_id"]
    refused(ops.post("/waiting/%s/reschedule" % cid, delay="soon"), 400,
            "bad_request")
    refused(ops.post("/waiting/%s/reschedule" % cid,
                     at="2026-02-31T00:00:00Z"), 400, "bad_request")
    refused(ops.get_json("/waiting", after="yesterday-ish"), 400,
            "bad_request")
    untouched(ops, victim)


def test_400_a_field_twice(ops, victim):
    a = ops.raw("POST", "/waiting/%s/reschedule" % victim["cascade_id"],
                "delay=1h&delay=2h", {"Content-Type": FORM})
    refused(a, 400, "bad_request")
    untouched(ops, victim)


def test_400_an_id_over_255_bytes(ops):
    refused(ops.post("/waiting/%s/cancel" % ("a" * 300)), 400,
            "bad_request")


def test_400_a_cookie_and_a_bearer_token(browser, ops):
    a = browser.raw("GET", "/waiting",
                    headers={"Authorization": "Bearer " + ops.token})
    refused(a, 400, "bad_request")


def test_403_a_cookie_post_without_the_csrf_token(browser, ops, victim):
    path = "/waiting/%s/cancel" % victim["cascade_id"]
    refused(browser.post(path, _csrf=False), 403, "forbidden")
    refused(browser.post(path, csrf="0" * len(browser.csrf)), 403,
            "forbidden")
    untouched(ops, victim)


def test_403_a_cookie_post_from_another_origin(browser, ops, victim):
    path = "/waiting/%s/cancel" % victim["cascade_id"]
    refused(browser.post(path, _headers={"Origin": "http://evil.example"}),
            403, "forbidden")
    # Without Origin, Referer decides; without both, refused.
    refused(browser.post(path, _headers={
        "Origin": None, "Referer": "http://evil.example/waiting"}), 403,
        "forbidden")
    refused(browser.post(path, _headers={
        "Origin": None, "Referer": browser.console.origin + ".evil.example/"
    }), 403, "forbidden")
    refused(browser.post(path, _headers={"Origin": None}), 403, "forbidden")
    untouched(ops, victim)


def test_a_cookie_post_with_csrf_and_origin_is_taken(browser):
    """The control for the 403s: the same session, with its token (as a
    field or X-CSRF-Token) and the console's Origin (or Referer)."""
    target = "amq.default/" + uid("nothing")
    a = browser.post("/targets/pause", _csrf=False,
                     _headers={"X-CSRF-Token": browser.csrf},
                     target=target)
    assert a.status == 200 and a.data.get("ok") is True, a
    a = browser.post("/targets/resume", target=target, _headers={
        "Origin": None, "Referer": browser.console.origin + "/waiting"})
    assert a.status == 200 and a.data.get("ok") is True, a


def test_404_no_such_path_or_id(ops):
    refused(ops.get_json("/no-such-page"), 404, "not_found")
    refused(ops.get_json("/waiting/0123456789abcdef"), 404, "not_found")
    refused(ops.post("/waiting/0123456789abcdef/cancel"), 404, "not_found")


def allow(a):
    return {m.strip().upper() for m in (a.header("Allow") or "").split(",")}


def test_405_with_allow(con, ops):
    a = ops.raw("GET", "/logout")
    refused(a, 405, "method")
    assert "POST" in allow(a) and "GET" not in allow(a), a
    a = ops.raw("DELETE", "/waiting")
    refused(a, 405, "method")
    assert "GET" in allow(a) and "POST" not in allow(a), a
    a = ops.raw("POST", "/healthz", "", {"Content-Type": FORM})
    refused(a, 405, "method")
    assert "GET" in allow(a), a
    a = ops.raw("GET", "/targets/pause")
    refused(a, 405, "method")
    assert allow(a) == {"POST"}, a


def test_413_a_body_over_16_kib(ops):
    target = "amq.default/" + "a" * (17 * 1024)
    a = ops.raw("POST", "/targets/pause", "target=" + target,
                {"Content-Type": FORM})
    refused(a, 413, "too_large")


def test_415_a_body_that_is_not_a_form(ops, victim):
    a = ops.raw("POST", "/waiting/%s/reschedule" % victim["cascade_id"],
                '{"delay": "1h"}', {"Content-Type": "application/json"})
    refused(a, 415, "not_a_form")
    untouched(ops, victim)


def test_421_a_host_not_the_consoles(con, ops):
    json_ = {"Accept": "application/json"}
    refused(con.request("GET", "/healthz",
                        headers=dict(json_, Host="evil.example")),
            421, "bad_host")
    refused(ops.raw("GET", "/waiting",
                    headers={"Host": "evil.example:%d" % con.port}),
            421, "bad_host")
    refused(con.request("GET", "/healthz",
                        headers=dict(json_, Host="127.0.0.1:1")),
            421, "bad_host")
    for host in ("localhost:%d" % con.port, "127.0.0.1:%d" % con.port):
        a = con.request("GET", "/healthz", headers={"Host": host})
        assert a.status == 200, (host, a)


def test_the_gate_judges_the_host_first(con, ops, browser):
    """In the contract's order: a foreign Host is 421 whatever else is
    wrong with the request (its method, its body, its credentials)."""
    evil = {"Host": "evil.example"}
    refused(ops.raw("POST", "/targets/pause", '{"target": "/x"}',
                    dict(evil, **{"Content-Type": "application/json"})),
            421, "bad_host")
    refused(ops.raw("POST", "/targets/pause",
                    "target=/" + "a" * (17 * 1024),
                    dict(evil, **{"Content-Type": FORM})), 421, "bad_host")
    refused(ops.raw("GET", "/logout", headers=evil), 421, "bad_host")
    refused(browser.raw("GET", "/waiting", headers=dict(
        evil, Authorization="Bearer " + ops.token)), 421, "bad_host")


def test_the_gate_judges_the_method_before_the_body(ops):
    """405 comes second: a GET-only path refuses a POST with Allow, whatever
    its body."""
    a = ops.raw("POST", "/waiting", '{"x": 1}',
                {"Content-Type": "application/json"})
    refused(a, 405, "method")
    assert "GET" in allow(a), a


# Hostile data.

HOSTILE_BODY = b"<script>alert(1)</script>"


@pytest.fixture(scope="module")
def hostile(d, people, guest, alice):
    """alice's message whose message-id holds "<>& and a quote, whose body
    is a script and whose header an <img onerror>: (message-id, cascade
    id)."""
    q = guest.queue()
    mid = "x\"<>&'-" + uuid.uuid4().hex[:8]
    people["alice"].delayed(d.prefix, q, mid, "1h", body=HOSTILE_BODY,
                            **{"x-note": "<img src=x onerror=alert(2)>"})
    return mid, wait_row(alice, mid)["cascade_id"]


def test_a_hostile_message_is_escaped_in_html(alice, hostile):
    mid, cid = hostile
    a = alice.get("/waiting/" + cid, page=True)
    assert a.status == 200 and "text/html" in a.header("Content-Type"), a
    assert "<script>alert" not in a.text and "<img src=x" not in a.text, \
        a.text
    assert "&lt;script&gt;alert(1)" in a.text, a.text
    assert "\"<>&'" not in a.text and "&lt;&gt;&amp;" in a.text, a.text
    page = alice.get("/waiting?q=" + cid, page=True)
    assert page.status == 200 and "\"<>&'" not in page.text and \
        "&lt;&gt;&amp;" in page.text, page.text


def test_a_hostile_message_is_valid_json(alice, hostile):
    mid, cid = hostile
    a = alice.get("/waiting/" + cid)
    assert a.status == 200 and isinstance(a.data, dict), a
    strings = []

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, str):
            strings.append(v)
    walk(a.data)
    assert mid in strings, strings
    assert mid in mids(rows(alice, q=mid))


def test_json_carries_no_raw_angle_bracket_of_a_message(alice, hostile):
    """docs/console-design.md section 3: JSON escapes < > & as well
    (CONTRACT 7.11: every byte of a message is escaped in JSON)."""
    _, cid = hostile
    a = alice.get("/waiting/" + cid)
    assert "<script" not in a.text and "<img" not in a.text, a.text


def test_every_answer_carries_the_security_headers(con, ops, alice,
                                                   hostile):
    _, cid = hostile
    answers = {
        "/healthz": con.request("GET", "/healthz"),
        "/login page": con.request("GET", "/login",
                                   headers={"Accept": "text/html"}),
        "/waiting json": ops.get_json("/waiting", limit=1),
        "/waiting page": ops.get("/waiting", page=True),
        "detail page": alice.get("/waiting/" + cid, page=True),
        "detail json": alice.get("/waiting/" + cid),
        "404": ops.get_json("/no-such-page"),
        "401": con.session().get("/waiting"),
        "405": ops.raw("GET", "/logout"),
        "421": con.request("GET", "/healthz",
                           headers={"Host": "evil.example"}),
    }
    bad = {}
    for what, a in answers.items():
        got = (a.header("Content-Security-Policy"),
               a.header("X-Content-Type-Options"),
               a.header("X-Frame-Options"), a.header("Referrer-Policy"))
        if got != (CSP, "nosniff", "DENY", "same-origin"):
            bad[what] = got
    assert bad == {}, bad
    no_store = {what: answers[what].header("Cache-Control")
                for what in ("/login page", "/waiting json", "/waiting page",
                             "detail page", "detail json")}
    assert set(no_store.values()) == {"no-store"}, no_store


def test_the_console_still_runs(con, d):
    """After all of the above."""
    assert con.proc.poll() is None, con.log()[-3000:]
    assert d.proc.poll() is None, d.log()[-3000:]


# What an adversarial review found, each kept from coming back.

def test_a_message_id_of_control_bytes_opens_and_the_console_lives(
        d, people, guest, alice, con):
    """200 control bytes escape to more than 4 KiB: the page still shows
    them, as text, and the console goes on."""
    q = guest.queue()
    mid = "\x01" * 200 + uuid.uuid4().hex[:8]
    people["alice"].delayed(d.prefix, q, mid, "1h")
    cid = wait_row(alice, mid)["cascade_id"]
    a = alice.get("/waiting/" + cid, page=True)
    assert a.status == 200 and "<span class=ctl>\\x01</span>" in a.text, a
    assert con.proc.poll() is None
    assert alice.get("/waiting/" + cid).status == 200


@pytest.mark.parametrize("nxt", ["/\t/evil.example/x", "//evil.example",
                                 "/\\evil.example", "https://evil.example",
                                 "/waiting\r\nSet-Cookie: x=1"])
def test_a_login_never_sends_the_browser_elsewhere(con, people, nxt):
    s = con.session()
    a = s.login_form(people["bob"].name, people["bob"].password, next=nxt)
    assert a.status == 303 and a.header("Location") == "/waiting", a


def test_a_login_comes_back_to_a_page_of_ours(con, people):
    s = con.session()
    a = s.login_form(people["bob"].name, people["bob"].password,
                     next="/series?x=1")
    assert a.status == 303 and a.header("Location") == "/series?x=1", a


def test_an_exact_search_counts_only_what_the_user_may_see(alice, ops, d,
                                                           guest):
    """bob's and nobody's messages are not in alice's histogram, with or
    without a search."""
    anon(guest, d, guest.queue(), uid("not-alices"), "10m")
    data = alice.get_json("/waiting", q="no-such-message-id").data
    h = data["histogram"]
    assert (data["matched"], h["late"] + sum(h["hour"]) + sum(h["day"]) +
            sum(h["week"]) + h["later"]) == (0, 0), data
    mine = alice.get_json("/waiting").data
    assert sum(mine["histogram"]["week"]) + mine["histogram"]["later"] + \
        mine["histogram"]["late"] == mine["waiting"], mine


def test_logins_made_at_once_meet_the_limit_too(con):
    """Twelve wrong logins for one user at the same moment: at most five
    reach the broker (401), the rest are 429."""
    name = uid("parallel")
    got = []

    def one(n):
        got.append(con.session().login(name, "wrong-%d" % n).status)
    threads = [threading.Thread(target=one, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(got).count(401) <= 5 and len(got) == 12 and \
        set(got) <= {401, 429}, got


def test_a_stale_cookie_on_a_post_is_401(con, victim):
    s = con.session()
    s.cookies["cascade_session"] = "0" * 64
    a = s.raw("POST", "/waiting/%s/cancel" % victim["cascade_id"], "",
              {"Content-Type": FORM, "Accept": "application/json"})
    refused(a, 401, "no_session")


def test_a_form_posted_from_localhost_is_ours(con, people):
    """The console answers at localhost:PORT as at 127.0.0.1:PORT: a form
    posted from there is not another site's."""
    s = con.session()
    a = s.login_form(people["bob"].name, people["bob"].password,
                     host="localhost:%d" % con.port)
    assert a.status == 303, a


# cascade-ctl list and cancel answered from the index (docs/CONTRACT.md
# 7.2, 7.3 and 7.11: /ctl/list, /ctl/count).

def ctl_config(d, tmpdir, listen, base=None):
    """A copy of d's configuration (or of base) whose [console] listen is
    listen: cascade-ctl asks the console there first."""
    with open(base or d.config) as f:
        text = f.read()
    path = os.path.join(tmpdir, "ctl-%s.ini" % uuid.uuid4().hex[:8])
    with open(path, "w") as f:
        f.write(text.rstrip("\n") + "\n\n[console]\nlisten = %s\n" % listen)
    return path


def ctl_with(config, *args, rc=0):
    """cascade-ctl with config; its exit status checked."""
    env = dict(os.environ)
    env.pop("CASCADE_BROKER_URL", None)
    r = subprocess.run([CTL, "-c", config, *args], capture_output=True,
                       text=True, timeout=120, env=env)
    if rc is not None:
        assert r.returncode == rc, (r.returncode, r.stdout, r.stderr)
    return r


def answered(c, kind, status=200):
    """How many cascade-ctl questions of kind c answered with status."""
    return sum("msg=console_ctl kind=%s status=%d " % (kind, status) in line
               for line in c.log().splitlines())


def no_rel(text):
    """list's text without its relative column ("in 2m47s"), the one part
    that depends on the moment it ran."""
    return re.sub(r"(\.\d{3}Z)  (?:now|in \S+|\S+ ago) *  ", r"\1  ",
                  text)


@pytest.fixture(scope="module")
def via(d, con, tmp_module):
    """d's configuration with [console] listen at con."""
    return ctl_config(d, tmp_module, "127.0.0.1:%d" % con.port)


def fake(ops, d, mid, due, cid=None, ex="", key="q", **headers):
    """A scheduled record written straight into P.events by ops (a control
    user: trusted), of a message no daemon holds, so that it waits, as
    recorded, until ended(): its cascade id."""
    cid = cid or uuid.uuid4().hex[:16]
    h = {"x-cascade-id": cid, "x-cascade-due": due,
         "x-cascade-exchange": ex, "x-cascade-routing-key": key,
         "x-cascade-size": 42}
    h.update(headers)
    kw = {"message_id": mid} if mid is not None else {}
    ops.account.record(d.prefix + ".events", "scheduled", h,
                       user_id=ops.account.name, **kw)
    return cid


def ended(ops, d, cids):
    for cid in cids:
        ops.account.record(d.prefix + ".events", "delivered",
                           {"x-cascade-id": cid}, user_id=ops.account.name)


def same_listing(d, via, con, *args):
    """list through the console and from the stream, the same (as JSON,
    and as text but for the relative column): the listing.  Asked again
    when the state moved between the two (another test's message
    delivered)."""
    last = None
    for _ in range(5):
        before = answered(con, "list")
        by_console = json.loads(ctl_with(via, "list", "--json",
                                         *args).stdout)
        assert answered(con, "list") == before + 1, \
            "the console did not answer:\n" + con.log()[-3000:]
        by_stream = json.loads(ctl_with(via, "list", "--json",
                                        "--from-stream", *args).stdout)
        assert answered(con, "list") == before + 1
        text_console = ctl_with(via, "list", *args).stdout
        text_stream = ctl_with(via, "list", "--from-stream", *args).stdout
        last = (by_console, by_stream, text_console, text_stream)
        if by_console == by_stream and \
                no_rel(text_console) == no_rel(text_stream):
            return by_console
        time.sleep(0.5)
    assert last[0] == last[1]
    assert no_rel(last[2]) == no_rel(last[3]), "%s\n----\n%s" % last[2:]


def test_ctl_list_through_the_console_is_list_from_the_stream(
        d, con, via, ops, guest):
    """Every kind of row (ids, keys and exchanges that need escaping, no
    message-id, no first-seen time, repeats by interval and by cron,
    paused, cancel pending, rescheduled, real messages) and every filter:
    list through the console prints what list --from-stream prints."""
    now = now_ms()
    q = uid("ctlq")
    M = 60000
    cids = [
        fake(ops, d, uid("tab\there"), now + 20 * M, key=q),
        fake(ops, d, uid("nl\nback\\slash\x7f-\u00e9"), now + 40 * M,
             key=q, ex="ex\tweird/slash"),
        fake(ops, d, None, now + 3 * 60 * M, key=q),
        fake(ops, d, uid("unseen"), now + 26 * 60 * M, key=q,
             **{"x-cascade-at": 0}),
        fake(ops, d, uid("every"), now + 50 * M, key=q,
             **{"x-cascade-every": 3600000, "x-cascade-occurrence": 4}),
        None,
    ]
    cron_mid = uid("cron")
    cids[5] = fake(ops, d, cron_mid, now + 5 * 60 * M, key=q,
                   **{"x-cascade-cron": "0 9 * * 1-5",
                      "x-cascade-tz": "Europe/Berlin",
                      "x-cascade-occurrence": 1})
    pending, moved = uid("pending"), uid("moved")
    cids.append(fake(ops, d, pending, now + 30 * M, key=q))
    cids.append(fake(ops, d, moved, now + 35 * M, key=q))
    real = uid("real")
    anon(guest, d, q, real, "10m")
    try:
        wait_listed(d, [real])
        # A cancel no daemon applies (none holds the message): pending
        # for good; a reschedule; a pause of the cron series.
        ctl(d, "cancel", "--from-stream", pending)
        ctl(d, "reschedule", "--delay", "2h", moved)
        ctl(d, "pause", cron_mid)
        mine = same_listing(d, via, con, "--target", "amq.default/" + q)
        rows_ = {m["id"]: m for m in mine["messages"]}
        assert mine["waiting"] == 8, mine
        assert rows_[pending]["cancel_pending"] is True, mine
        assert rows_[moved]["due_ms"] > now + 100 * M, mine
        assert rows_[cron_mid]["repeat"]["paused"] is True, mine
        assert rows_[cron_mid]["repeat"]["tz"] == "Europe/Berlin", mine
        assert rows_[cids[2]]["message_id"] is None, mine
        assert rows_[real]["first_seen_ms"] is not None, mine
        same_listing(d, via, con, "--target", "ex\tweird/slash")
        same_listing(d, via, con, "--target", "")
        same_listing(d, via, con)
        same_listing(d, via, con, "--limit", "3")
        same_listing(d, via, con, "--limit", "2", "--target",
                     "amq.default/" + q, "--due-after", "25m",
                     "--due-before", "4h")
        # --series is read from the stream (section 7.2).
        before = answered(con, "list")
        assert cron_mid in ctl_with(via, "list", "--series").stdout
        assert answered(con, "list") == before
    finally:
        ended(ops, d, cids)


def test_ctl_list_through_the_console_has_what_was_recorded_just_before(
        d, con, via, ops):
    """A record written an instant before list runs is in the console's
    answer: the console answers once it has read the marker cascade-ctl
    wrote after it."""
    q = uid("ctlq")
    before = answered(con, "list")
    sessions = ops.get_json("/health").data["console"]["sessions"]
    for _ in range(3):
        mid = uid("just-before")
        cid = fake(ops, d, mid, now_ms() + 3600000, key=q)
        try:
            got = json.loads(ctl_with(via, "list", "--json", "--target",
                                      "amq.default/" + q).stdout)
            assert [m["id"] for m in got["messages"]] == [mid], got
        finally:
            ended(ops, d, [cid])
        q = uid("ctlq")
    assert answered(con, "list") == before + 3, con.log()[-3000:]
    # No session: the marker is the credential, and no password is sent.
    assert ops.get_json("/health").data["console"]["sessions"] == sessions
    assert "msg=console_login" not in con.log().split(
        "kind=list", 1)[-1]


def test_a_ctl_question_waits_for_its_marker(d, con, ops, broker):
    """/ctl/list answers, with no session, only once the console has read
    the marker it names, with what was recorded before it.  The marker is
    the credential: one written by a user who is not cascade's own is
    never honoured (504 after 10 s), and a question naming such a user is
    403 at once."""
    q = uid("ctlq")
    token = "test-" + uuid.uuid4().hex
    query = urllib.parse.urlencode({
        "marker": token, "stream": d.prefix + ".events", "now": now_ms(),
        "user": ops.account.name, "limit": 0,
        "target": "amq.default/" + q})
    box = {}
    nobody = con.session()  # never logged in

    def ask():
        t = time.time()
        box["a"] = nobody.get("/ctl/list?" + query)
        box["took"] = time.time() - t
    t = threading.Thread(target=ask)
    t.start()
    time.sleep(1)
    mid = uid("waited-for")
    cid = fake(ops, d, mid, now_ms() + 3600000, key=q)
    ops.account.record(d.prefix + ".events", "marker",
                       {"x-cascade-marker": token},
                       user_id=ops.account.name)
    t.join(15)
    try:
        a = box["a"]
        assert a.status == 200 and box["took"] >= 1, (box, a)
        lines = a.text.split("\n")
        head = lines[0].split("\t")
        assert [head[k] for k in (0, 1, 2, 4)] == ["list", "1", "1", "1"], a
        assert lines[1].split("\t")[1:3] == [cid, mid], a
        assert lines[2:] == ["end", ""], a
    finally:
        ended(ops, d, [cid])
    # A user who may write into P.events (through amq.default) but is
    # not cascade's own: its marker is skipped, and naming it is 403.
    forger = User(broker, d.prefix + "-forger", "^$", r"^amq\.default$",
                  r"^%s\.events$" % d.prefix)
    try:
        forged = "forged-" + uuid.uuid4().hex
        forger.record(d.prefix + ".events", "marker",
                      {"x-cascade-marker": forged}, user_id=forger.name)
        ask_forged = {"marker": forged, "id": "x",
                      "stream": d.prefix + ".events", "now": now_ms()}
        refused(nobody.get("/ctl/count?" + urllib.parse.urlencode(
            dict(ask_forged, user=forger.name))), 403, "not_trusted")
        t = time.time()
        refused(nobody.get("/ctl/count?" + urllib.parse.urlencode(
            dict(ask_forged, user=ops.account.name))), 504,
            "marker_timeout")
        assert 9 < time.time() - t < 20
    finally:
        forger.close()
        broker.delete_user(forger.name)


def test_ctl_cancel_through_the_console(d, con, via, guest, ops):
    """cancel counts from the console's index and records the request as
    ever: the message is not delivered.  One a reschedule moved is
    counted from the stream (the index keeps no recorded due time)."""
    q = guest.queue()
    mid = uid("c-cancel")
    t0 = anon(guest, d, q, mid, "8s")
    wait_row(ops, mid)
    before = answered(con, "count")
    r = ctl_with(via, "cancel", mid)
    assert r.stdout == "%s: cancelled 1 waiting message\n" % mid, r
    assert answered(con, "count") == before + 1, con.log()[-3000:]
    assert len(requests_of(d, "cancel", mid)) == 1
    expect_nothing(guest, [q], t0 + 8 + LATE * LATE_SCALE)
    assert mid not in [m["id"] for m in listing(d)["messages"]]
    # One moved by a reschedule: the console says 503, ctl reads on.
    moved = uid("c-moved")
    cid = fake(ops, d, moved, now_ms() + 3600000)
    try:
        ctl(d, "reschedule", "--delay", "2h", moved)
        wait_row(ops, moved, pred=lambda row: row["rescheduled"])
        refusals = answered(con, "count", 503)
        r = ctl_with(via, "cancel", moved)
        assert r.stdout == "%s: cancelled 1 waiting message\n" % moved, r
        assert answered(con, "count", 503) == refusals + 1
    finally:
        ended(ops, d, [cid])
    # An id nothing has: not recorded, as from the stream.
    r = ctl_with(via, "cancel", uid("nothing"), rc=1)
    assert "no waiting message has id" in r.stderr, r


def test_ctl_reads_the_stream_when_no_console_answers(d, con, tmp_module,
                                                      broker, ops):
    """A console stopped, or one that would show ctl's user only their
    own messages (not a control user): list and cancel read the stream,
    and print what they print without one."""
    q = uid("ctlq")
    mid = uid("fallback")
    cid = fake(ops, d, mid, now_ms() + 3600000, key=q)
    viewer = None
    try:
        other = Console(d, tmp_module).start()
        config = ctl_config(d, tmp_module, "127.0.0.1:%d" % other.port)
        mine = ["list", "--json", "--target", "amq.default/" + q]
        first = json.loads(ctl_with(config, *mine).stdout)
        assert [m["id"] for m in first["messages"]] == [mid], first
        assert answered(other, "list") == 1, other.log()[-3000:]
        assert other.stop() == 0
        assert json.loads(ctl_with(config, *mine).stdout) == \
            json.loads(ctl_with(config, *mine, "--from-stream").stdout)
        r = ctl_with(config, "cancel", uid("nothing"), rc=1)
        assert "no waiting message has id" in r.stderr, r
        # Not a control user: read on P.events and write on amq.default
        # (for its markers), as one who may only look might be given.
        viewer = User(broker, d.prefix + "-viewer", "^$",
                      r"^amq\.default$", r"^%s\.(events|cancels)$" %
                      d.prefix)
        config = ctl_config(d, tmp_module, "127.0.0.1:%d" % con.port,
                            base=config_as(d, tmp_module, viewer.name,
                                           viewer.password))
        before = answered(con, "list")
        got = json.loads(ctl_with(config, *mine).stdout)
        assert [m["id"] for m in got["messages"]] == [mid], got
        assert answered(con, "list") == before
        assert answered(con, "list", 403) >= 1
    finally:
        ended(ops, d, [cid])
        if viewer is not None:
            viewer.close()
            broker.delete_user(viewer.name)
