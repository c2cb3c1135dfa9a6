# SPDX-License-Identifier: Apache-2.0
"""The console in a real browser (docs/console-design.md section 6,
"Browser"): Debian's chromium, driven headless by its chromedriver
through python3-selenium (make deps-browser), against a private RabbitMQ,
a real daemon and build/cascade-console.  What the JSON tests (the other
test_console*.py files) cannot see: the login form and its cookie, the
pages as drawn, the confirm dialog, live redraws without a reload, a
hostile body shown and not run under the CSP, SameSite and Origin against
a real cross-site form, and the layout on a phone.  Screenshots of each
page go to build/console-screenshots/.

One test, in the design's twelve steps, each depending on the ones
before (the messages published in step 1 are acted on in turn); a failure
names its step.  Every wait is on something the page or the broker shows
(WebDriverWait, wait_for), never a sleep."""
import http.server
import os
import re
import shutil
import subprocess
import threading
import time
import uuid

import pytest

from console import con, d, people, tmp_module
from helpers import BUILD, LATE_SCALE, Client, ctl, wait_for, wait_parked
from waiting import LATE, SLACK, listing

pytestmark = pytest.mark.browser

SHOTS = os.path.join(BUILD, "console-screenshots")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# The desktop window (the screenshots docs/images keeps are of it), and a
# phone's (an iPhone 12 to 15's CSS pixels).
DESKTOP = (1280, 800)
# The Waiting page's screenshot: tall enough to show its table too.
TALL = (1280, 1150)
PHONE = (390, 844)
# How long the pages may take to show what the broker already did: a
# record's round trip through P.events and a live redraw (under 1 s by
# the design), on a loaded machine.
SHOW = 10 * LATE_SCALE


# The browser.

def major(argv):
    """The major version in `argv --version` (Chromium 156.0..., or
    ChromeDriver 156.0...): an int, or pytest.fail naming the package."""
    try:
        out = subprocess.run(argv + ["--version"], capture_output=True,
                             text=True, timeout=60).stdout
    except OSError as e:
        pytest.fail("%s: %s: run `make deps-browser` (chromium, "
                    "chromium-driver, python3-selenium)" % (argv[0], e))
    m = re.search(r"(?:Chromium|ChromeDriver) (\d+)\.", out)
    if not m:
        pytest.fail("%s --version said %r: not Debian's chromium or "
                    "chromedriver" % (argv[0], out))
    return int(m.group(1))


@pytest.fixture(scope="module")
def webdriver_module():
    try:
        from selenium import webdriver
    except ImportError:
        pytest.fail("python3-selenium is missing: run `make deps-browser`")
    return webdriver


@pytest.fixture(scope="module")
def browser(webdriver_module):
    """Headless chromium with its browser log kept (for CSP reports).
    Debian's selenium (4.8.3) has no Selenium Manager: the Service names
    Debian's chromedriver, which must be the browser's own version."""
    from selenium.webdriver.chrome.service import Service
    browser_major, driver_major = major([CHROMIUM]), major([CHROMEDRIVER])
    if browser_major != driver_major:
        pytest.fail("chromium is %d but chromedriver is %d: chromedriver "
                    "drives only its own major version; upgrade both "
                    "(apt-get install chromium chromium-driver)" %
                    (browser_major, driver_major))
    options = webdriver_module.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1280,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver_module.Chrome(service=Service(CHROMEDRIVER),
                                  options=options)
    drv.set_window_size(*DESKTOP)
    drv.log_kept = []
    yield drv
    drv.quit()


def browser_log(drv):
    """Every browser console entry so far (get_log drains chromedriver's
    buffer: keep them)."""
    drv.log_kept += drv.get_log("browser")
    return drv.log_kept


def csp_reports(entries):
    return [e for e in entries if "Content Security Policy" in e["message"]]


def wait(drv, until, what, timeout=SHOW):
    """WebDriverWait for until(drv), failing with what and the page."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait
    try:
        return WebDriverWait(drv, timeout, poll_frequency=0.1).until(until)
    except TimeoutException:
        body = drv.find_element("tag name", "body").text[:3000]
        pytest.fail("timed out after %ss waiting for %s at %s; the page "
                    "says:\n%s" % (timeout, what, drv.current_url, body))


def by_id(drv, i):
    return drv.find_element("id", i)


def css(drv, sel):
    return drv.find_elements("css selector", sel)


def shot(drv, name):
    os.makedirs(SHOTS, exist_ok=True)
    assert drv.save_screenshot(os.path.join(SHOTS, name)), name


def status_of_page(drv):
    """The HTTP status of the page the browser shows (Navigation Timing
    Level 2 responseStatus, which Chromium has had since 109)."""
    return drv.execute_script(
        "return performance.getEntriesByType('navigation')[0]"
        ".responseStatus")


def fetch(drv, method, path, form=None):
    """A fetch() from the page, as its script would send it (the session
    cookie, the page's CSRF token in the form): the HTTP status."""
    return drv.execute_async_script("""
        var done = arguments[arguments.length - 1];
        var form = arguments[2];
        var opts = {method: arguments[0], credentials: 'same-origin',
                    headers: {Accept: 'application/json'}};
        if (form) {
            var meta = document.querySelector('meta[name=csrf]');
            form.csrf = meta ? meta.content : '';
            opts.body = new URLSearchParams(form);
        }
        fetch(arguments[1], opts).then(function (r) { done(r.status); },
                                       function (e) { done(String(e)); });
    """, method, path, form)


# The live script redraws #rows whenever the index changes: rows are read
# and their links followed in one script each, never through an element
# kept across calls (it may be gone).
ROWS = """return Array.from(document.querySelectorAll('#rows tr[data-id]'))
    .map(function (tr) { return {mid: tr.cells[0].textContent,
        id: tr.dataset.id, text: tr.textContent}; });"""


def rows_of(drv):
    return drv.execute_script(ROWS)


def row(drv, mid):
    """The row in #rows whose id cell is mid ({mid, id, text}), or
    None."""
    for r in rows_of(drv):
        if r["mid"] == mid:
            return r
    return None


def row_ids(drv):
    return sorted(r["mid"] for r in rows_of(drv))


def open_row(drv, mid):
    """Click the link of mid's row (its id cell)."""
    url = drv.current_url
    clicked = drv.execute_script("""
        var rows = document.querySelectorAll('#rows tr[data-id]');
        for (var i = 0; i < rows.length; i++) {
            var a = rows[i].cells[0].querySelector('a');
            if (rows[i].cells[0].textContent === arguments[0] && a) {
                a.click();
                return true;
            }
        }
        return false;""", mid)
    assert clicked, "no link of %s in #rows: %s" % (mid, rows_of(drv))
    wait(drv, lambda d_: d_.current_url != url, "%s's page to open" % mid)


def log_in(drv, con, user):
    """Through the form at /login, as a person would."""
    drv.delete_all_cookies()
    drv.get(con.url("/login"))
    by_id(drv, "user").send_keys(user.name)
    by_id(drv, "password").send_keys(user.password)
    by_id(drv, "login").click()
    wait(drv, lambda d: css(d, "#whoami") and
         by_id(d, "whoami").text.startswith(user.name),
         "the top bar to name %s after logging in" % user.name)


# The broker users, daemon and console: console.py's fixtures.


@pytest.fixture(scope="module")
def guest(broker):
    c = Client(broker)
    yield c
    c.close()


class Attacker:
    """Another site: an http.server on a port of its own serving one
    page, whose form posts to the console (what a phishing page would
    do)."""

    def __init__(self):
        self.page = b""
        attacker = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(attacker.page)))
                self.end_headers()
                self.wfile.write(attacker.page)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def serve(self, action, fields):
        inputs = "".join('<input type="hidden" name="%s" value="%s">' % kv
                         for kv in fields.items())
        self.page = ('<!doctype html><title>win a prize</title>'
                     '<form id="evil" method="post" action="%s">%s'
                     '<button id="go" type="submit">claim</button></form>'
                     % (action, inputs)).encode()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def attacker():
    a = Attacker()
    yield a
    a.close()


def api(con, user):
    """A script's session of user (a Bearer token)."""
    s = con.session()
    a = s.login(user.name, user.password)
    assert a.status == 200 and s.token, a
    return s


def api_row(s, mid):
    """The /waiting JSON row of message-id mid for session s, or None."""
    a = s.get_json("/waiting", q=mid)
    assert a.status == 200 and isinstance(a.data, dict), a
    return a.data["rows"][0] if a.data["rows"] else None


def test_the_console_in_a_browser(browser, con, d, people, guest, broker,
                                  attacker):
    drv = browser
    ops, alice, bob = people["ops"], people["alice"], people["bob"]
    shutil.rmtree(SHOTS, ignore_errors=True)

    # 1. What waits: alice's a-1 (a body that is a script, a header that
    # is markup), a-2 and a-3, bob's b-1, a cron series of nobody's, and
    # one to a missing exchange, parked no_exchange once due.  Each to a
    # queue of its own, through P, with its publisher's user-id.
    q = {k: guest.queue() for k in ("a-1", "a-2", "a-3", "b-1", "s-1")}
    alice.delayed(d.prefix, q["a-1"], "a-1", "10m",
                  body=b"<script>window.__pwned=1</script>",
                  **{"x-note": "<img src=x onerror=window.__pwned=2>"})
    alice.delayed(d.prefix, q["a-2"], "a-2", "10m")
    alice.delayed(d.prefix, q["a-3"], "a-3", "10m")
    bob.delayed(d.prefix, q["b-1"], "b-1", "10m")
    guest.publish(d.prefix, q["s-1"], b"tick",
                  {"x-cascade-cron": "0 3 * * *"}, message_id="s-1")
    missing = "ex-" + uuid.uuid4().hex[:8]
    # Long enough to take a hop, so that P.events records it (and the
    # console's ring shows it parked).
    guest.publish(d.prefix, "parked-key", b"parked body",
                  {"x-remaining-delay": "1500ms",
                   "x-target-exchange": missing}, message_id="p-1")
    wait_parked(d, 1)
    wait_for(lambda: {"a-1", "a-2", "a-3", "b-1", "s-1"} <=
             {m["message_id"] for m in listing(d)["messages"]}, 15,
             "the five in cascade-ctl list")

    # 2. ops logs in through the form and sees them all.
    log_in(drv, con, ops)
    assert "(control)" in by_id(drv, "whoami").text
    assert drv.current_url.endswith("/waiting"), drv.current_url
    wait(drv, lambda d_: row_ids(d_) == ["a-1", "a-2", "a-3", "b-1", "s-1"],
         "a-1, a-2, a-3, b-1 and s-1 in #rows")
    assert by_id(drv, "waiting").text == "5"
    drv.set_window_size(*TALL)
    shot(drv, "waiting.png")
    drv.set_window_size(*DESKTOP)

    # 3. Found by its message-id, opened: the script is text, not run.
    by_id(drv, "f-q").send_keys("a-1")
    by_id(drv, "search").submit()
    wait(drv, lambda d_: "q=a-1" in d_.current_url and
         row_ids(d_) == ["a-1"], "the search for a-1 to show it alone")
    assert by_id(drv, "matched").text == "1"
    a1 = row(drv, "a-1")["id"]
    open_row(drv, "a-1")
    wait(drv, lambda d_: css(d_, "#body"), "a-1's page")
    assert drv.current_url == con.url("/waiting/" + a1)
    assert by_id(drv, "body").text == "<script>window.__pwned=1</script>"
    headers = {tr.find_element("tag name", "th").text:
               tr.find_element("tag name", "td").text
               for tr in css(drv, "#headers tr")}
    assert headers.get("x-note") == "<img src=x onerror=window.__pwned=2>", \
        headers
    assert drv.execute_script("return window.__pwned") is None
    assert css(drv, "#body script, #headers img") == []
    entries = browser_log(drv)
    assert [e for e in entries if e["level"] == "SEVERE"] == [], entries
    drv.set_window_size(*TALL)
    shot(drv, "message.png")
    drv.set_window_size(*DESKTOP)

    # 4. Cancelled, the confirm accepted: it leaves the list, and the
    # daemon dropped it.
    from selenium.webdriver.support import expected_conditions as EC
    by_id(drv, "cancel").click()
    dialog = wait(drv, EC.alert_is_present(), "the cancel confirm")
    assert dialog.text == "Cancel this message?"
    dialog.accept()
    wait(drv, lambda d_: "/waiting?done=cancel" in d_.current_url,
         "the answer to the cancel")
    wait(drv, lambda d_: row(d_, "a-1") is None,
         "a-1 to leave #rows (live, as the daemon cancels it)")
    d.wait_log('msg=cancelled message_id="a-1"', timeout=SHOW)
    assert api_row(api(con, ops), "a-1") is None

    # 5. a-2 rescheduled by a delay: it arrives then, not ten minutes on.
    drv.get(con.url("/waiting?q=a-2"))
    wait(drv, lambda d_: row(d_, "a-2") is not None, "a-2 found")
    open_row(drv, "a-2")
    wait(drv, lambda d_: css(d_, "#reschedule-form"), "a-2's page")
    by_id(drv, "delay").send_keys("3s")
    asked = time.time()
    by_id(drv, "reschedule").click()
    wait(drv, lambda d_: "/waiting?done=reschedule" in d_.current_url,
         "the answer to the reschedule")
    answered = time.time()
    got = guest.collect(q["a-2"], 1, 3 + (LATE + 2) * LATE_SCALE +
                        (answered - asked))
    assert len(got) == 1 and got[0][1].message_id == "a-2", got
    assert got[0][0] >= asked + 3 - SLACK, "a-2 came %.3fs early" % (
        asked + 3 - got[0][0])

    # 6. The series paused and resumed from its page.
    def press(what, shown):
        """s-1's button what on its page, then /series shows it so."""
        open_row(drv, "s-1")
        wait(drv, lambda d_: css(d_, "#series-form #" + what),
             "s-1's " + what)
        by_id(drv, what).click()
        wait(drv, lambda d_: "/series?done=" + what in d_.current_url,
             "the answer to the " + what)
        wait(drv, lambda d_: row(d_, "s-1") is not None and
             ("paused" in row(d_, "s-1")["text"]) == shown,
             "s-1 shown %s" % ("paused" if shown else "running"))

    drv.get(con.url("/series"))
    wait(drv, lambda d_: row(d_, "s-1") is not None, "s-1 on /series")
    shot(drv, "series.png")
    press("pause", True)
    press("resume", False)

    # 6b. Paused by its message-id with cascade-ctl, as x-cascade-pause
    # may name it, and resumed from the page, which names it by its
    # cascade id: lifted (issue 47), as cascade-ctl list --series says.
    assert ctl(d, "pause", "s-1").stdout.strip() == "s-1: paused"
    drv.get(con.url("/series"))
    wait(drv, lambda d_: row(d_, "s-1") is not None and
         "paused" in row(d_, "s-1")["text"], "s-1 shown paused by ctl")
    press("resume", False)
    series = {m["id"]: m for m in listing(d, "--series")["messages"]}
    assert series["s-1"]["repeat"]["paused"] is False, series["s-1"]

    # 7. P.error read, the exchange declared, the parked message requeued
    # from its row: it arrives.
    drv.get(con.url("/parked"))
    wait(drv, lambda d_: "p-1" in by_id(d_, "recent").text,
         "p-1 in the parked records")
    by_id(drv, "read-errors").click()
    wait(drv, lambda d_: css(d_, "#error-rows") and
         "p-1" in by_id(d_, "error-rows").text, "p-1 read from P.error")
    assert "does not exist" in by_id(drv, "error-rows").text
    shot(drv, "parked.png")
    guest.ch.exchange_declare(missing, "direct")
    q_parked = guest.queue()
    guest.ch.queue_bind(q_parked, missing, "parked-key")
    forms = [f for f in css(drv, "#error-rows form.requeue-one")
             if f.find_element("name", "message_id")
             .get_attribute("value") == "p-1"]
    assert len(forms) == 1, by_id(drv, "error-rows").text
    forms[0].find_element("tag name", "button").click()
    wait(drv, lambda d_: css(d_, "#requeued"), "the answer to the requeue")
    assert by_id(drv, "requeued").text == "Requeued 1, left 0.", \
        drv.page_source[:3000]
    got = guest.collect(q_parked, 1, 10 * LATE_SCALE)
    assert [(p.message_id, b) for _, p, b in got] == \
        [("p-1", b"parked body")], got
    wait_parked(d, 0)

    # 8. Health.
    drv.get(con.url("/health"))
    wait(drv, lambda d_: css(d_, "#console-state"), "the health page")
    assert "caught up" in by_id(drv, "console-state").text
    shot(drv, "health.png")

    # 9. Live: a message published now shows up on the open page, which
    # is not reloaded (the mark set on it stays).
    drv.get(con.url("/waiting"))
    wait(drv, lambda d_: row(d_, "a-3") is not None, "/waiting drawn")
    drv.execute_script("window.__mark = 1")
    guest.publish(d.prefix, guest.queue(), b"live",
                  {"x-remaining-delay": "10m"}, message_id="live-1")
    wait(drv, lambda d_: row(d_, "live-1") is not None,
         "live-1 drawn without a reload", timeout=3 * LATE_SCALE)
    assert drv.execute_script("return window.__mark") == 1
    a3, b1 = row(drv, "a-3")["id"], row(drv, "b-1")["id"]

    # 10. bob sees his own only; alice's a-3 is not found for him, to
    # GET or to cancel (with his own CSRF token).
    log_in(drv, con, bob)
    assert "(control)" not in by_id(drv, "whoami").text
    wait(drv, lambda d_: row_ids(d_) == ["b-1"], "b-1 alone in bob's #rows")
    assert by_id(drv, "waiting").text == "1"
    drv.get(con.url("/waiting/" + a3))
    assert status_of_page(drv) == 404
    assert css(drv, "#body, #cancel-form") == []
    assert fetch(drv, "GET", "/waiting/" + a3) == 404
    assert fetch(drv, "POST", "/waiting/%s/cancel" % a3, {}) == 404
    assert fetch(drv, "POST", "/waiting/%s/reschedule" % a3,
                 {"delay": "1s"}) == 404
    assert fetch(drv, "POST", "/series/%s/pause" % a3, {}) == 404

    # 11. Cross-site: another site's form posting a cancel of b-1 while
    # bob is logged in.  From another port of 127.0.0.1 (the same site:
    # the cookie goes, with bob's real CSRF token even) the Origin is
    # refused; from localhost (another site) the SameSite cookie does not
    # go at all.
    drv.get(con.url("/waiting"))
    token = drv.execute_script(
        "return document.querySelector('meta[name=csrf]').content")
    assert token
    for host, refusals in (("127.0.0.1", (403,)), ("localhost", (401, 403))):
        attacker.serve(con.url("/waiting/%s/cancel" % b1), {"csrf": token})
        drv.get("http://%s:%d/" % (host, attacker.port))
        by_id(drv, "go").click()
        wait(drv, lambda d_: d_.current_url.startswith(con.origin),
             "the cross-site post to land on the console")
        assert status_of_page(drv) in refusals, (host, drv.page_source)
    drv.get(con.url("/waiting"))
    wait(drv, lambda d_: css(d_, "#rows"), "bob's /waiting")
    assert row_ids(drv) == ["b-1"], "bob's session ended: " + \
        drv.page_source[:2000]
    b1_row = api_row(api(con, ops), "b-1")
    assert b1_row is not None and not b1_row["cancel_pending"], b1_row
    assert 'msg=cancelled message_id="b-1"' not in d.log()

    # 12. A phone: ops's list fits its width.
    log_in(drv, con, ops)
    drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": PHONE[0], "height": PHONE[1], "deviceScaleFactor": 1,
        "mobile": True})
    try:
        for path, name in (("/waiting", "waiting-phone.png"),
                           ("/waiting/" + a3, None), ("/series", None),
                           ("/parked?read=1", None), ("/health", None)):
            drv.get(con.url(path))
            wait(drv, lambda d_: css(d_, "main"), path)
            width = drv.execute_script("return window.innerWidth")
            scroll = drv.execute_script(
                "return document.documentElement.scrollWidth")
            assert width == PHONE[0], width
            assert scroll <= width, "%s overflows a %d px phone: %d px" % (
                path, width, scroll)
            if name:
                assert row(drv, "a-3") is not None
                shot(drv, name)
    finally:
        drv.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    # No page ran into its CSP (an inline script, style or handler
    # refused); this log does show such a refusal (checked last, as it
    # adds one).
    entries = browser_log(drv)
    assert csp_reports(entries) == [], entries
    drv.execute_script("var s = document.createElement('script');"
                       "s.textContent = 'window.__inline = 1';"
                       "document.head.appendChild(s);")
    assert drv.execute_script("return window.__inline") is None
    wait(drv, lambda d_: csp_reports(browser_log(d_)),
         "the browser log to report the refused inline script", timeout=5)
