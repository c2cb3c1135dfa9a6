# SPDX-License-Identifier: Apache-2.0
"""The console (docs/CONTRACT.md section 7.11): build/cascade-console
against a private RabbitMQ and a real daemon, as a script (Bearer) and as
a browser (cookie, CSRF token, Origin) use it.  Three broker users with
the rights docs/security.md gives: `ops`, a control user (the cascade-ctl
line, tagged impersonator, named in [events] control_users), and the
publishers `alice` and `bob` (write on P only).  One daemon, one console
and one session per user serve each module (console.py); the tests that
need their own (expiry, logout, the rate limit) make them.  Here: logging
in and out, health, who sees what, listing and live changes; the actions
are test_console_actions.py's, the gate's refusals and hostile data
test_console_gate.py's, cascade-ctl through the console
test_console_ctl.py's."""
import json
import re
import threading
import time
import urllib.parse

import pytest

from console import (Console, FORM, alice, anon, bob, browser, con, d, guest,
                     iso, mids, ops, paused, people, refused, rows,
                     _the_console_is_alive, tmp_module, untouched, wait_row,
                     waiting)
from helpers import LATE_SCALE, http_get, loopback6, wait_for
from trust import User, config_as, now_ms
from waiting import listing, uid


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
