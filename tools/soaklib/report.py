# SPDX-License-Identifier: Apache-2.0
"""The report: Report, the part of Soak that counts what arrived against
the ledger, reads P.cancels and the parked messages, and checks the
alerts; and the verdict on a report."""
import json
import os
import subprocess
import time

from faults import dead_letter_backlog
from helpers import CTL

from .faults import EXPECT
from .settings import LATE_BOUND, MINUTES, MODE, RATE, SEED, log
from .traffic import connect


class Report:
    """Soak's report: report() once the run has drained."""

    def cancel_records(self):
        """{id: when its cancellation was recorded in P.cancels (s)}: a
        request published to P takes effect from then (CONTRACT 7.3),
        not from its publish, which may wait in P.ingress while no daemon
        runs."""
        conn, _ = connect(self.cluster.urls())
        ch = conn.channel()
        ch.basic_qos(prefetch_count=1000)
        got = {}
        last = [time.time()]

        def on_record(c, m, p, b):
            h = p.headers or {}
            mid = h.get("x-cascade-cancel")
            if p.type == "cancel" and mid is not None:
                mid = mid.decode() if isinstance(mid, bytes) else mid
                at = h.get("x-cascade-at", 0) / 1000.0
                got[mid] = min(got.get(mid, at), at)
            c.basic_ack(m.delivery_tag)
            last[0] = time.time()

        ch.basic_consume(self.prefix + ".cancels", on_record,
                         arguments={"x-stream-offset": "first"})
        while time.time() - last[0] < 3:
            conn.process_data_events(time_limit=0.5)
        conn.close()
        return got

    def parked(self):
        env = dict(os.environ)
        env.pop("CASCADE_BROKER_URL", None)
        r = subprocess.run([CTL, "-c", self.daemons[0].d.config, "errors",
                            "--json", "--limit", "1000000"],
                           capture_output=True, text=True, timeout=300,
                           env=env)
        if r.returncode != 0:
            r = subprocess.run([CTL, "-c", self.daemons[0].d.config,
                                "errors", "--json"], capture_output=True,
                               text=True, timeout=300, env=env)
        try:
            return {m["message_id"]: m["reason"] for m in
                    json.loads(r.stdout)["messages"]}
        except (ValueError, KeyError):
            log("cascade-ctl errors: %s", r.stderr.strip())
            return {}

    def cancelled_logged(self):
        """The message ids some daemon logged as cancelled (dropped)."""
        ids = set()
        for s in self.daemons:
            for line in s.d.log().splitlines():
                if "msg=cancelled " in line and 'message_id="' in line:
                    ids.add(line.split('message_id="', 1)[1].split('"')[0])
        return ids

    def report(self):
        parked = self.parked()
        msgs = self.ledger.msgs
        counts = {}  # id -> [arrival times], the checker's redeliveries out
        redelivered = wrong_target = bad_body = 0
        for q, c in self.checkers.items():
            for t, mid, again, body in c.arrivals:
                if mid not in msgs:
                    continue
                if msgs[mid]["target"] != q:
                    wrong_target += 1
                if body != b"soak " + mid.encode():
                    bad_body += 1
                if again and mid in counts:
                    # the checker's own connection dropped before its ack
                    redelivered += 1
                    continue
                counts.setdefault(mid, []).append(t)
        early, late, late_full = [], [], []
        for mid, ts in counts.items():
            r = msgs[mid]
            first = min(ts)
            lat = first * 1000 - r["due"]
            if lat < -1:
                early.append((mid, round(lat), r["kind"]))
            (late if r["target"] == "soak.q" else late_full).append(
                lat / 1000.0)
        late.sort()
        late_full.sort()

        def pct(xs, p):
            if not xs:
                return None
            return round(xs[min(len(xs) - 1, int(p * len(xs)))], 3)

        def dist(xs):
            return {"p50": pct(xs, 0.5), "p90": pct(xs, 0.9),
                    "p99": pct(xs, 0.99), "p999": pct(xs, 0.999),
                    "max": round(xs[-1], 3) if xs else None,
                    "beyond_bound": sum(1 for x in xs if x > LATE_BOUND)}

        confirmed = {m for m, r in msgs.items() if r["confirmed"]}
        # P.cancels is the truth: what cascade-ctl or a publish recorded
        recorded = {m: at for m, at in self.cancel_records().items()
                    if m in msgs}
        cancelled = set(recorded)
        asked = set(self.ledger.cancelled)
        # Delivered more than a second after its request was recorded,
        # and due later than that: the request was not honoured.
        cancelled_delivered = sorted(
            mid for mid in cancelled & set(counts)
            if min(counts[mid]) > recorded[mid] + 1 and
            msgs[mid]["due"] / 1000.0 > recorded[mid] + 1)
        # Due before its request was recorded (no daemon ran): it may
        # arrive, or be dropped if a daemon had it still.
        cancelled_too_late = sorted(
            mid for mid in cancelled
            if msgs[mid]["due"] / 1000.0 <= recorded[mid] + 1)
        # a request the broker confirmed in P, never recorded
        not_recorded = sorted(asked - cancelled)
        parked_sent = {m: parked[m] for m in confirmed if m in parked}
        # A cancelled message that did not arrive must have been dropped
        # by a daemon (msg=cancelled); one that was not is lost.
        dropped = self.cancelled_logged()
        lost = sorted(confirmed - set(counts) - set(parked) -
                      (cancelled & dropped))
        stranded = {}
        if lost:
            backlog = dead_letter_backlog(self.cluster.up(), self.prefix,
                                          echo=False)
            stranded = {q: v for q, v in backlog.items() if any(v)}
        poison_parked = {m: parked[m] for m in self.ledger.poison
                         if m in parked}
        fault_kinds = {}
        for f in self.faultlog:
            fault_kinds[f["kind"]] = fault_kinds.get(f["kind"], 0) + 1
        conn_lost = []
        for s in self.daemons:
            for line in s.d.log().splitlines():
                if "msg=connection_lost" in line:
                    conn_lost.append("daemon%d %s" % (s.index, line))
        rss = {"daemon%d" % s.index: {
            "samples": len(s.rss),
            "first_kB": s.rss[0][1] if s.rss else None,
            "max_kB": max(k for _, k in s.rss) if s.rss else None,
            "last_kB": s.rss[-1][1] if s.rss else None,
            "series": [(round(t - self.t0), k) for t, k in s.rss]}
            for s in self.daemons}
        r = {
            "seed": SEED, "minutes": MINUTES, "mode": MODE,
            "rabbitmq": self.rabbitmq_version(),
            "rate": RATE,
            "published": len(msgs),
            "published_per_s": round(len(msgs) / self.published_s, 1),
            "unconfirmed": len(msgs) - len(confirmed),
            "arrived": len(counts),
            "delivered_once": sum(1 for ts in counts.values()
                                  if len(ts) == 1),
            "delivered_more_than_once": sum(1 for ts in counts.values()
                                            if len(ts) > 1),
            "duplicates": sum(len(ts) - 1 for ts in counts.values()),
            "early": len(early), "early_ids": early[:20],
            "early_check_blind_s": self.blind(),
            "late_s": dist(late), "late_s_full_target": dist(late_full),
            "late_bound_s": LATE_BOUND,
            "checker_redeliveries": redelivered,
            "wrong_target": wrong_target, "bad_body": bad_body,
            "parked": len(parked_sent),
            "parked_reasons": sorted(set(parked_sent.values())),
            "cancelled": len(cancelled),
            "cancelled_but_delivered": cancelled_delivered,
            "cancel_recorded_after_due": len(cancelled_too_late),
            "cancel_not_recorded": not_recorded,
            "poison": len(self.ledger.poison),
            "poison_parked": len(poison_parked),
            "lost": len(lost), "lost_ids": lost[:20],
            "broker_holds_for_dead_lettering": stranded,
            "faults": fault_kinds,
            "faults_failed": [f for f in self.faultlog if not f["ok"]],
            "connection_lost": len(conn_lost),
            "rss": rss,
        }
        if self.prom:
            r["alerts"] = self.check_alerts()
        return r, conn_lost

    def rabbitmq_version(self):
        """The server's, not the CLI's."""
        out = self.cluster.up().ctl("eval", "rabbit_misc:version().",
                                    check=False).stdout
        return out.strip().strip('"')

    def blind(self):
        """Seconds in which a checker had no connection: a delivery then
        is timed when the checker comes back, so an early one could pass
        unseen."""
        total = 0.0
        for c in self.checkers.values():
            # failures 0.3 s apart are one outage
            runs = []
            for t in sorted(c.offline):
                if runs and t - runs[-1][1] < 5:
                    runs[-1][1] = t
                else:
                    runs.append([t, t])
            total += sum(hi - lo + 0.3 for lo, hi in runs)
        return round(total, 1)

    def firing(self, end):
        """{(alertname, instance): [(from, to)]} over the run."""
        data = self.prom_query('ALERTS{alertstate="firing"}',
                               "query_range", start=self.t0, end=end,
                               step=5)
        spans = {}
        for series in data["result"]:
            key = (series["metric"]["alertname"],
                   series["metric"].get("instance", ""))
            runs = []
            for ts, _ in series["values"]:
                ts = float(ts)
                if runs and ts - runs[-1][1] <= 10:
                    runs[-1][1] = ts
                else:
                    runs.append([ts, ts])
            spans[key] = runs
        return spans

    def check_alerts(self):
        """Each fault that lasted long enough raised its alert, and none
        is firing once all is well again (waiting for the slowest rules,
        whose windows are 5 minutes)."""
        log("waiting for every alert to clear")
        deadline = time.time() + 420
        still = []
        while time.time() < deadline:
            still = self.prom_query('ALERTS{alertstate="firing"}')["result"]
            if not still:
                break
            time.sleep(10)
        spans = self.firing(time.time())
        expected = []
        for f in self.faultlog:
            if f["kind"] not in EXPECT or not f["ok"]:
                continue
            alert, need = EXPECT[f["kind"]]
            down = f["duration"]
            if down < need:
                continue
            inst = (self.daemons[f["daemon"]].instance if "daemon" in f
                    else None)
            hit = any(
                a == alert and (inst is None or i == inst) and
                lo <= f["end"] + 90 and hi >= f["start"]
                for (a, i), runs in spans.items() for lo, hi in runs)
            expected.append({"fault": f["kind"], "at": round(
                f["start"] - self.t0), "duration": f["duration"],
                "alert": alert, "fired": hit})
        fired = []
        for (a, i), runs in sorted(spans.items()):
            for lo, hi in runs:
                fired.append({"alert": a, "instance": i,
                              "from": round(lo - self.t0),
                              "to": round(hi - self.t0),
                              "during": sorted({
                                  f["kind"] for f in self.faultlog
                                  if f["start"] <= hi and
                                  f["end"] + 120 >= lo})})
        ages = self.prom_query(
            "max_over_time(cascade_cancellations_read_age_seconds[%ds])"
            % int(time.time() - self.t0 + 60))["result"]
        return {"expected": expected, "fired": fired,
                "still_firing": [s["metric"] for s in still],
                "cancellations_read_age_max_s": {
                    a["metric"].get("instance", ""): float(a["value"][1])
                    for a in ages}}


def verdict(r):
    bad = []
    if r["lost"]:
        held = sum(v[2] + v[3] for v in
                   r["broker_holds_for_dead_lettering"].values())
        bad.append("%d lost%s" % (r["lost"], (
            " (RabbitMQ's dead-letter workers still hold %d expired "
            "messages)" % held) if held else ""))
    if r["early"]:
        bad.append("%d early" % r["early"])
    if r["cancelled_but_delivered"]:
        bad.append("%d delivered after their cancellation" %
                   len(r["cancelled_but_delivered"]))
    if r["cancel_not_recorded"]:
        bad.append("%d cancellations confirmed but never recorded" %
                   len(r["cancel_not_recorded"]))
    if r["parked"]:
        # nothing the soak publishes is bad, and refused_park_after is 0
        bad.append("%d parked (%s)" % (r["parked"],
                                       ", ".join(r["parked_reasons"])))
    if r["wrong_target"] or r["bad_body"]:
        bad.append("%d delivered to the wrong target, %d with another "
                   "body" % (r["wrong_target"], r["bad_body"]))
    if r["faults_failed"]:
        bad.append("%d faults could not be injected or undone: %s" % (
            len(r["faults_failed"]), "; ".join(
                "%s: %s" % (f["kind"], f.get("error"))
                for f in r["faults_failed"])))
    if r["poison"] != r["poison_parked"]:
        bad.append("%d of %d poison messages not parked" %
                   (r["poison"] - r["poison_parked"], r["poison"]))
    a = r.get("alerts")
    if a:
        for e in a["expected"]:
            if not e["fired"]:
                bad.append("%s at %d s (%d s) did not raise %s" %
                           (e["fault"], e["at"], e["duration"], e["alert"]))
        if a["still_firing"]:
            bad.append("alerts still firing after recovery: %s" %
                       a["still_firing"])
    return bad
