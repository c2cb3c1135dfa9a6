# SPDX-License-Identifier: Apache-2.0
"""cascade-ctl list and cancel answered from the console's index
(docs/CONTRACT.md sections 7.2, 7.3 and 7.11: /ctl/list, /ctl/count): the
same answers as reading P.events, what was recorded just before a
question, and reading the stream when no console answers.  The users,
daemon and console are console.py's (see test_console.py)."""
import json
import os
import re
import subprocess
import threading
import time
import urllib.parse
import uuid

import pytest

from console import (Console, anon, con, d, guest, ops, people, refused,
                     requests_of, _the_console_is_alive, tmp_module, wait_row)
from helpers import CTL, LATE_SCALE, ctl
from trust import User, config_as, now_ms
from waiting import LATE, expect_nothing, listing, uid, wait_listed


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
