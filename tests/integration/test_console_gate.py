# SPDX-License-Identifier: Apache-2.0
"""What the console refuses and what it escapes (docs/CONTRACT.md section
7.11): the gate's refusals, one test each, hostile message data in HTML
and JSON, the security headers, and what adversarial reviews found, each
kept from coming back.  The users, daemon and console are console.py's
(see test_console.py)."""
import threading
import uuid

import pytest

from console import (CSP, FORM, alice, anon, browser, con, d, guest, mids, ops,
                     people, refused, rows, _the_console_is_alive, tmp_module,
                     untouched, victim, wait_row)
from waiting import uid


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
    """After all of the above (each module's teardowns check its own
    daemon and console too)."""
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
