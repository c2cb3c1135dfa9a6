#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The report of `tools/bench waiting` (benchlib/waiting.sh): each section
reads what the step left in the run's directory, adds its figures to the
result file (the first argument) and prints its table.

  waiting_report.py SECTION RESULT ARGS...
"""
import glob, json, math, sys


def fill(argv):
    """The fill: the publishers' rates, the time until every message was
    scheduled, the broker's and the daemon's CPU per message, and the
    tenths."""
    res, d, n, owners, t0, t_pub, t_empty, hz = argv[1:9]
    n, owners, t0, t_pub, t_empty, hz = (int(n), int(owners), float(t0),
        float(t_pub), float(t_empty), int(hz))
    fills = []
    for i in range(1, owners + 1):
        try:
            fills.append(json.loads(open("%s/fill%d.json" % (d, i)).read()))
        except ValueError:
            fills.append(None)
    # The polls, one pass: when each tenth had left P.ingress (been
    # scheduled; interpolated between the two polls around it), and the CPU
    # at the first poll with all of them.
    tenths, done, first, prev = [None] * 10, None, None, None
    with open(d + "/polls") as f:
        for line in f:
            p = line.split()
            if len(p) < 5:
                continue
            t, m, b, dm = float(p[0]), int(p[1]), int(p[3]), int(p[4])
            if first is None:
                first = prev = (t, 0, b, dm)
            for k in range(10):
                want = (k + 1) * n / 10
                if tenths[k] is None and m >= want:
                    f0 = (want - prev[1]) / (m - prev[1]) if m > prev[1] else 1
                    tenths[k] = prev[0] + f0 * (t - prev[0]) - t0
            if done is None and m >= n:
                done = (t, m, b, dm)
            prev = (t, m, b, dm)
    if done is None:
        done = prev
    secs = tenths[9] if tenths[9] is not None else done[0] - t0
    r = json.load(open(res))
    out = {
        "publishers": fills,
        "publish_seconds": round(t_pub - t0, 3),
        "scheduled": done[1],
        "poll_seconds": round(done[0] - t0, 3),
        "seconds": round(secs, 3),
        "ingress_empty_seconds": round(t_empty - t0, 3),
        "msgs_per_s": round(n / secs, 1),
        "tenths_seconds": [None if x is None else round(x, 1) for x in tenths],
        "broker_cpu_s": round((done[2] - first[2]) / hz, 2),
        "daemon_cpu_s": round((done[3] - first[3]) / hz, 2),
    }
    out["broker_cpu_us_per_msg"] = round(out["broker_cpu_s"] * 1e6 / n, 1)
    out["daemon_cpu_us_per_msg"] = round(out["daemon_cpu_s"] * 1e6 / n, 1)
    r["fill"] = out
    json.dump(r, open(res, "w"), indent=1)
    print("| | |")
    print("|---|---|")
    print("| publishers (%d, in parallel) | %s |" % (owners, ", ".join(
        "%s msg/s" % f["msgs_per_s"] if f else "failed" for f in fills)))
    print("| publishers' wall time | %.1f s |" % (t_pub - t0))
    print("| start to all %d scheduled (the daemon's count, polled twice a second) | %.1f s |" % (n, secs))
    print("| start to P.ingress empty (list_queues poll) | %.1f s |" % (t_empty - t0))
    print("| sustained rate | %.0f msg/s |" % (n / secs))
    print("| broker CPU | %.1f s, %.0f µs/msg |" % (out["broker_cpu_s"],
          out["broker_cpu_us_per_msg"]))
    print("| daemon CPU | %.1f s, %.0f µs/msg |" % (out["daemon_cpu_s"],
          out["daemon_cpu_us_per_msg"]))
    if done[1] < n:
        print("| **only scheduled** | %d of %d |" % (done[1], n))
    print()
    print("| tenth | scheduled by (s) | msg/s in that tenth |")
    print("|---|---|---|")
    prev = 0.0
    for k, x in enumerate(tenths):
        if x is None:
            print("| %d %% | – | – |" % ((k + 1) * 10))
            continue
        print("| %d %% | %.2f | %s |" % ((k + 1) * 10, x, "%.0f" % (
            (n / 10) / (x - prev)) if x > prev else "–"))
        prev = x


def trickle(argv):
    """The trickle's lateness during the fill and after it, merged from the
    --lateness files."""
    res, d, t_done = argv[1], argv[2], float(argv[3]) * 1000

    def pct(v, p):
        if not v:
            return None
        v = sorted(v)
        i = max(0, math.ceil(p * len(v)) - 1)
        return v[min(i, len(v) - 1)]

    def chunks(pattern):
        tot = {"chunks": 0, "published": 0, "received": 0, "lost": 0,
               "early": 0, "duplicates": 0, "failed": 0, "each": []}
        for f in sorted(glob.glob(d + "/" + pattern + ".json")):
            tot["chunks"] += 1
            try:
                j = json.loads(open(f).read())
            except ValueError:
                tot["failed"] += 1
                continue
            tot["each"].append(j)
            tot["published"] += j["messages"]
            tot["received"] += j["received"]
            tot["lost"] += j["lost"]
            tot["early"] += j["early"]
            tot["duplicates"] += j["duplicates"]
        return tot

    # By when they were published: into P.ingress behind the fill's
    # backlog, or after it had been moved.
    during, later = [], []
    for f in glob.glob(d + "/trickle-fill*.arr") + [d + "/trickle-after.arr"]:
        try:
            for line in open(f):
                sent, due, at = (int(x) for x in line.split())
                (during if sent <= t_done else later).append(at - due)
        except OSError:
            pass
    merged = []
    for f in glob.glob(d + "/trickle-fill*.lat") + [d + "/trickle-after.lat"]:
        try:
            merged += [int(x) for x in open(f)]
        except OSError:
            pass
    r = json.load(open(res))
    t = {"fill_chunks": chunks("trickle-fill*"), "after_chunk": chunks("trickle-after")}
    rows = [("published during the fill", during),
            ("published after it", later),
            ("all (the --lateness files merged)", merged)]
    print("| trickle messages | n | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|")
    for name, v in rows:
        s = {"n": len(v), "p50": pct(v, .5), "p99": pct(v, .99),
             "max": max(v) if v else None}
        t[name.split(" (")[0].replace(" ", "_")] = s
        print("| %s | %d | %s | %s | %s |" % (name, len(v), *(
            "–" if s[k] is None else s[k] for k in ("p50", "p99", "max"))))
    print()
    for k in ("fill_chunks", "after_chunk"):
        c = t[k]
        print("%s: %d chunk(s), %d published, %d received, %d lost, %d early, "
              "%d duplicates%s" % (k.replace("_", " "), c["chunks"],
              c["published"], c["received"], c["lost"], c["early"],
              c["duplicates"], ", %d FAILED (see its .err)" % c["failed"]
              if c["failed"] else ""))
    r["trickle"] = t
    json.dump(r, open(res, "w"), indent=1)


def minutes(argv):
    """The fill minute by minute: the trickle due in each minute (its p99
    and max lateness), the rate scheduled, the broker's and the daemon's
    CPU, and the whole machine's: iowait and steal of all cores, and the
    share of the minute some task stalled for a core or for the disk
    (/proc/pressure).  What a bad minute shares with the machine."""
    res, d, t0, t_done, hz = argv[1], argv[2], float(argv[3]), \
        float(argv[4]), int(argv[5])
    late = {}
    for f in glob.glob(d + "/trickle-fill*.arr"):
        try:
            for line in open(f):
                sent, due, at = (int(x) for x in line.split())
                if sent <= t_done * 1000:
                    late.setdefault(int((due / 1000 - t0) // 60), []).append(
                        at - due)
        except (OSError, ValueError):
            pass
    polls = []
    with open(d + "/polls") as f:
        for line in f:
            p = line.split()
            if len(p) >= 11:
                polls.append([float(p[0])] + [int(x) for x in p[1:11]])
    rows, k = [], 0
    while t0 + 60 * k < t_done:
        lo, hi = t0 + 60 * k, t0 + 60 * (k + 1)
        inside = [p for p in polls if lo <= p[0] < hi]
        v = sorted(late.get(k, []))
        row = {"minute": k + 1, "trickle_n": len(v),
               "trickle_p99_ms": v[max(0, math.ceil(.99 * len(v)) - 1)]
               if v else None, "trickle_max_ms": v[-1] if v else None}
        if len(inside) >= 2:
            a, b = inside[0], inside[-1]
            dt, tot = b[0] - a[0], (b[5] - a[5]) or 1
            row.update({
                "scheduled_per_s": round((b[1] - a[1]) / dt),
                "broker_cpu_pct": round((b[3] - a[3]) * 100 / hz / dt),
                "daemon_cpu_pct": round((b[4] - a[4]) * 100 / hz / dt),
                "busy_pct": round(100 - (b[6] - a[6]) * 100 / tot),
                "iowait_pct": round((b[7] - a[7]) * 100 / tot, 1),
                "steal_pct": round((b[8] - a[8]) * 100 / tot, 1),
                "cpu_stall_pct": round((b[9] - a[9]) / dt / 1e4, 1),
                "io_stall_pct": round((b[10] - a[10]) / dt / 1e4, 1)})
        rows.append(row)
        k += 1
    r = json.load(open(res))
    r["minutes"] = rows
    json.dump(r, open(res, "w"), indent=1)
    cols = ("trickle_n", "trickle_p99_ms", "trickle_max_ms", "scheduled_per_s",
            "broker_cpu_pct", "daemon_cpu_pct", "busy_pct", "iowait_pct",
            "steal_pct", "cpu_stall_pct", "io_stall_pct")
    print("| minute | trickle n | p99 ms | max ms | scheduled/s | broker % | "
          "daemon % | cores busy % | iowait % | steal % | CPU stall % | "
          "I/O stall % |")
    print("|" + "---|" * (len(cols) + 1))
    for row in rows:
        print("| %d | %s |" % (row["minute"], " | ".join(
            "–" if row.get(c) is None else str(row[c]) for c in cols)))


def sizes(argv):
    """The broker's memory and disk, and the daemon's RSS, before the fill
    and now, per waiting message."""
    res, d, n = argv[1], argv[2], int(argv[3])

    def snap(tag):
        s = dict(l.split() for l in open("%s/sizes-%s.txt" % (d, tag)))
        s = {k: int(v) for k, v in s.items()}
        s["beam_rss"] = s.pop("beam_rss_kib") * 1024
        s["daemon_rss"] = s.pop("daemon_rss_kib") * 1024
        mem = {k: v["bytes"] for k, v in
               json.load(open("%s/memory-%s.json" % (d, tag))).items()}
        parts = {
            "quorum_queue_procs": mem.get("quorum_queue_procs", 0)
            + mem.get("quorum_queue_dlx_procs", 0),
            "quorum_ets": mem.get("quorum_ets", 0),
            "binary": mem.get("binary", 0),
            "code": mem.get("code", 0),
        }
        unalloc = (mem.get("reserved_unallocated", 0)
                   + mem.get("allocated_unused", 0))
        parts["other"] = sum(mem.values()) - sum(parts.values()) - unalloc
        parts["unallocated"] = unalloc
        for k, v in parts.items():
            s["memory_" + k] = v
        qs = [x for x in json.load(open("%s/queues-%s.json" % (d, tag)))
              if x["name"].startswith("waiting.")]
        s["queues_memory"] = sum(x.get("memory") or 0 for x in qs)
        s["queues"] = len(qs)
        s["messages_in_delay_queues"] = sum(
            x.get("messages") or 0 for x in qs
            if x["name"].startswith(("waiting.delay.", "waiting.hold")))
        return s

    b, a = snap("before"), snap("after")
    r = json.load(open(res))
    r["sizes"] = {"before_fill": b, "after": a,
                  "growth_per_msg": {k: round((a[k] - b[k]) / n, 1) for k in a}}
    json.dump(r, open(res, "w"), indent=1)
    rows = [("beam.smp RSS", "beam_rss"),
            ("memory_breakdown: quorum queue procs (and their dlx workers)",
             "memory_quorum_queue_procs"),
            ("memory_breakdown: quorum ETS", "memory_quorum_ets"),
            ("memory_breakdown: binaries", "memory_binary"),
            ("memory_breakdown: code", "memory_code"),
            ("memory_breakdown: other", "memory_other"),
            ("memory_breakdown: reserved, unallocated", "memory_unallocated"),
            ("list_queues memory of the %d waiting.* queues" % a["queues"],
             "queues_memory"),
            ("disk: quorum (ra WAL and segments)", "disk_quorum"),
            ("disk: streams", "disk_streams"),
            ("disk: of which waiting.events", "disk_events"),
            ("disk: of which waiting.copies", "disk_copies"),
            ("disk: the node's directory", "disk_node"),
            ("daemon RSS", "daemon_rss")]
    print("| what | before the fill MB | now MB | growth per waiting message, bytes |")
    print("|---|---|---|---|")
    for name, k in rows:
        print("| %s | %.1f | %.1f | %.0f |" % (name, b[k] / 1e6, a[k] / 1e6,
                                              (a[k] - b[k]) / n))
    print()
    print("%d messages in the delay queues now (the fill's %d, less the "
          "cancelled or parked, plus the trickle's in flight)."
          % (a["messages_in_delay_queues"], n))


def restart(argv):
    """The whole broker's restart: how long until the daemon was ready and
    the trickle delivered again, and how late what fell due meanwhile was."""
    res, d, s0, s1, r1, ready, note = argv[1:8]
    s0, s1, r1, ready = (float(x) * 1000 for x in (s0, s1, r1, ready))

    def pct(v, p):
        if not v:
            return None
        v = sorted(v)
        return v[min(len(v) - 1, max(0, math.ceil(p * len(v)) - 1))]

    try:
        j = json.loads(open(d + "/trickle-restart.json").read())
    except ValueError:
        j = None
    first_after, fell, after = None, [], []
    try:
        for line in open(d + "/trickle-restart.arr"):
            sent, due, at = (int(x) for x in line.split())
            if at >= s1 and (first_after is None or at < first_after):
                first_after = at
            if s0 <= due <= ready:
                fell.append(at - due)
            elif due > ready:
                after.append((due, at - due))
    except OSError:
        pass
    # On time again: from the due time of the last message due after
    # msg=ready that came more than a second late (the trickle's bound).
    late = [due for due, ms in after if ms > 1000]
    on_time = round(max(late) - r1) if late else round(ready - r1)
    out = {"stop_ms": round(s1 - s0), "node_start_ms": round(r1 - s1),
           "stop_to_daemon_ready_ms": round(ready - s0),
           "node_started_to_daemon_ready_ms": round(ready - r1),
           "node_started_to_first_trickle_ms":
           None if first_after is None else round(first_after - r1),
           "fell_due_while_down": {"n": len(fell), "p50": pct(fell, .5),
                                   "p99": pct(fell, .99),
                                   "max": max(fell) if fell else None},
           "due_after_ready": {"n": len(after),
                               "p50": pct([ms for _, ms in after], .5),
                               "p99": pct([ms for _, ms in after], .99),
                               "max": max(ms for _, ms in after)
                               if after else None},
           "node_started_to_on_time_ms": on_time,
           "chunk": j, "note": note or None}
    r = json.load(open(res))
    r["broker_restart"] = out
    json.dump(r, open(res, "w"), indent=1)
    f = out["fell_due_while_down"]
    print("| | |")
    print("|---|---|")
    print("| `rabbitmq-private stop` | %.1f s |" % ((s1 - s0) / 1000))
    print("| `rabbitmq-private restart` (the node's start) | %.1f s |" % ((r1 - s1) / 1000))
    print("| node started to the daemon's `msg=ready` | %.1f s |" % ((ready - r1) / 1000))
    print("| node started to the first trickle arrival | %s |" % (
        "none" if first_after is None else "%.1f s" % ((first_after - r1) / 1000)))
    print("| trickle messages due from the stop to `msg=ready` | %d |" % f["n"])
    print("| their lateness p50 / p99 / max | %s / %s / %s ms |" % (
        f["p50"], f["p99"], f["max"]))
    a = out["due_after_ready"]
    print("| trickle messages due after `msg=ready` | %d |" % a["n"])
    print("| their lateness p50 / p99 / max | %s / %s / %s ms |" % (
        a["p50"], a["p99"], a["max"]))
    print("| node started to the trickle on time again (due from then on, "
          "none over 1 s late) | %.1f s |" % (on_time / 1000))
    if j:
        print("| the chunk: published, received, lost, early, in doubt, reconnects | %d, %d, %d, %d, %d, %d |" % (
            j["messages"], j["received"], j["lost"], j["early"],
            j["in_doubt"], j["reconnects"]))
    else:
        print("| the chunk | **failed** (see trickle-restart.err) |")
    if note:
        print()
        print(note)


def summary(argv):
    """The summary table of the result file."""
    r = json.load(open(argv[1]))
    n, f, t, s, c, b = (r["n"], r["fill"], r["trickle"], r["sizes"],
                        r.get("console", {}), r["broker_restart"])
    ctl = r.get("ctl", {})
    g = s["growth_per_msg"]
    def lat(x):
        if x["n"] == 0:
            return "none"
        return "%s / %s / %s ms (%d)" % (x["p50"], x["p99"], x["max"], x["n"])
    rows = [
        ("messages waiting", "%d (%s, %d owners, %d targets; mode %s)" % (
            n, r["dist"], r["owners"], r["targets"], r["mode"])),
        ("fill: time, sustained rate", "%.1f s, %.0f msg/s" % (f["seconds"], f["msgs_per_s"])),
        ("fill: broker / daemon CPU per message", "%.0f / %.0f µs" % (
            f["broker_cpu_us_per_msg"], f["daemon_cpu_us_per_msg"])),
        ("trickle published during the fill: p50 / p99 / max (n)", lat(t["published_during_the_fill"])),
        ("trickle published after it: p50 / p99 / max (n)", lat(t["published_after_it"])),
        ("trickle lost / early", "%d / %d" % (
            t["fill_chunks"]["lost"] + t["after_chunk"]["lost"],
            t["fill_chunks"]["early"] + t["after_chunk"]["early"])),
        ("beam.smp RSS growth per waiting message", "%.0f bytes" % g["beam_rss"]),
        ("list_queues memory growth per waiting message", "%.0f bytes" % g["queues_memory"]),
        ("disk growth per waiting message (quorum + streams)", "%.0f + %.0f bytes" % (
            g["disk_quorum"], g["disk_streams"])),
        ("daemon RSS", "%.1f MiB" % (s["after"]["daemon_rss"] / 2**20)),
    ]
    for k in ("list_empty", "list", "list_target", "cancel", "list_console",
              "list_target_console", "cancel_console"):
        if k in ctl:
            rows.append(("cascade-ctl %s%s: wall, max RSS" % (
                         ctl[k]["args"], " (nothing waiting)" if k == "list_empty"
                         else " (the console's index)" if k.endswith("_console")
                         else ""),
                         "%d ms, %.0f MiB" % (ctl[k]["wall_ms"], ctl[k]["max_rss_kib"] / 1024)))
    if c:
        rows.append(("console: caught up, RSS per waiting message",
                     "%d ms, %.0f bytes" % (c["start_to_caught_up_ms"],
                     (c["rss_kib"] - c["base_rss_kib"]) * 1024 / max(1, c["waiting"]))))
    rows.append(("daemon restart to msg=ready", "%d ms" % r["daemon_restart"]["start_to_ready_ms"]))
    rows.append(("broker restart: node start, then daemon ready, first trickle",
                 "%.1f s, +%.1f s, +%s" % (b["node_start_ms"] / 1000,
                 b["node_started_to_daemon_ready_ms"] / 1000,
                 "–" if b["node_started_to_first_trickle_ms"] is None
                 else "%.1f s" % (b["node_started_to_first_trickle_ms"] / 1000))))
    rows.append(("trickle due from the broker's stop to msg=ready: p50 / p99 / max (n)",
                 lat(b["fell_due_while_down"])))
    if "due_after_ready" in b:
        rows.append(("trickle due after msg=ready: p50 / p99 / max (n)",
                     lat(b["due_after_ready"])))
        rows.append(("broker restart: node start to the trickle on time again",
                     "%.1f s" % (b["node_started_to_on_time_ms"] / 1000)))
    print("| | |")
    print("|---|---|")
    for k, v in rows:
        print("| %s | %s |" % (k, v))


SECTIONS = {"fill": fill, "trickle": trickle, "minutes": minutes, "sizes": sizes,
            "restart": restart, "summary": summary}


if __name__ == "__main__":
    SECTIONS[sys.argv[1]]([sys.argv[0]] + sys.argv[2:])
