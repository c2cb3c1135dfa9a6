# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench records-cost: what the P.events records cost at saturation
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

# records_cost: RECORDS_N messages of 1,590 ms on a 100 ms x 2 ladder of 4
# levels (as tools/bench speed), published as fast as confirms allow and
# counted end to end, once per variant in RECORDS_VARIANTS (yes: [events]
# enabled = yes, the default; nocopy: the same with copy_max_size = 0; no:
# enabled = no), RECORDS_PAIRS times, the variants' order turned by one
# each round so that none always runs first.  Each run on a fresh prefix,
# its queues deleted after.  One row per run, then per variant the median
# of the rate it moved relative to `no` in the same round, and the CPU per
# message of the broker and of the daemon.
records_cost() {
	local n=${RECORDS_N:-20000} pairs=${RECORDS_PAIRS:-9}
	local variants=${RECORDS_VARIANTS:-yes no} seq=0
	local rows=$out/records-cost.rows
	: >"$rows"
	echo "RabbitMQ $("$here/tools/rabbitmq-private" ctl "$dir/broker" \
		version 2>/dev/null); $(nproc) cores; $n messages of 1590 ms per" \
		"run, as fast as confirms allow; ladder 100ms x 2, 4 levels;" \
		"[topology] mode as the broker's default (auto)."
	echo
	echo "| round | variant | delivered msg/s | hops/msg | p50 late ms | p99 late ms | broker CPU µs/msg | daemon CPU µs/msg | lost | early |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	local -a v
	read -r -a v <<<"$variants"
	for round in $(seq "$pairs"); do
		# Rotate: round r starts with variant r mod k.
		local k=${#v[@]} order=()
		for i in $(seq 0 $((k - 1))); do
			order+=("${v[$(((round + i) % k))]}")
		done
		for variant in "${order[@]}"; do
			seq=$((seq + 1))
			local p=rc$seq ev
			case $variant in
			yes) ev="enabled = yes" ;;
			nocopy) ev=$'enabled = yes\ncopy_max_size = 0' ;;
			no) ev="enabled = no" ;;
			*) echo "records-cost: unknown variant $variant" >&2; exit 2 ;;
			esac
			start_daemon "$p" 100ms 2 4 "[events]
$ev
[metrics]
listen ="
			"$B/cascade-bench" run -p "$p" -q "$p-target" -n "$n" \
				-d 1590ms --mover-pid "$daemon_pid" \
				--broker-pid "$beam" --json "$dir/rc.json" \
				>/dev/null 2>"$dir/run.err" || true
			stop_daemon
			local hops waits
			hops=$(grep -o 'msg=totals.* hops=[0-9]*' "$dir/$p.log" |
				sed 's/.*hops=//')
			waits=$(grep -o 'msg=totals.* waits=[0-9]*' "$dir/$p.log" |
				sed 's/.*waits=//')
			delete_queues "$p"
			/usr/bin/python3 - "$round" "$variant" "$dir/rc.json" \
				"$((${hops:-0} + ${waits:-0}))" "$rows" <<'PY'
import json, sys
rnd, variant, path, hops, rows = sys.argv[1:6]
d = json.load(open(path))
n = max(d["received"], 1)
lat = d["lateness_ms"]
row = {"round": int(rnd), "variant": variant, "rate": d["msgs_per_s"],
       "hops_per_msg": int(hops) / n, "p50": lat["p50"], "p99": lat["p99"],
       "broker_us": d["broker_cpu_s"] * 1e6 / n,
       "daemon_us": d["mover_cpu_s"] * 1e6 / n,
       "lost": d["lost"], "early": d["early"]}
with open(rows, "a") as f:
    f.write(json.dumps(row) + "\n")
print("| %d | %s | %.0f | %.2f | %.0f | %.0f | %.1f | %.1f | %d | %d |" % (
    row["round"], variant, row["rate"], row["hops_per_msg"], row["p50"],
    row["p99"], row["broker_us"], row["daemon_us"], row["lost"],
    row["early"]))
sys.stdout.flush()
PY
		done
	done
	echo
	/usr/bin/python3 - "$rows" "$out/records-cost.json" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r["round"], {})[r["variant"]] = r
variants = sorted({r["variant"] for r in rows}, key=lambda v: v != "no")
print("| variant | rate / no, median (min-max) | broker CPU µs/msg, median | daemon CPU µs/msg, median | lost | early |")
print("|---|---|---|---|---|---|")
summary = {}
for v in variants:
    mine = [r for r in rows if r["variant"] == v]
    ratios = [b[v]["rate"] / b["no"]["rate"] for b in by.values()
              if v in b and "no" in b and b["no"]["rate"] > 0]
    med = statistics.median(ratios) if ratios else float("nan")
    summary[v] = {"rate_ratio_median": med,
                  "rate_ratio_min": min(ratios) if ratios else None,
                  "rate_ratio_max": max(ratios) if ratios else None,
                  "broker_us_median": statistics.median(r["broker_us"] for r in mine),
                  "daemon_us_median": statistics.median(r["daemon_us"] for r in mine),
                  "lost": sum(r["lost"] for r in mine),
                  "early": sum(r["early"] for r in mine)}
    s = summary[v]
    print("| %s | %.0f %% (%.0f-%.0f %%) | %.1f | %.1f | %d | %d |" % (
        v, med * 100, (s["rate_ratio_min"] or 0) * 100,
        (s["rate_ratio_max"] or 0) * 100, s["broker_us_median"],
        s["daemon_us_median"], s["lost"], s["early"]))
json.dump({"rows": rows, "summary": summary}, open(sys.argv[2], "w"),
          indent=1)
PY
}
