# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench factors: hops/msg and CPU per message by ladder factor
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

# factors: hops/msg and CPU per delivered message by ladder factor, over
# two delay distributions scaled to bench time (resolution 100 ms: uniform
# 0-30 s is the 300 steps of 0-10 min at 2 s), against tools/hops-model.
factors() {
	local facts=${FACTORS:-2 3 4}
	local res=${FACTORS_RESOLUTION:-100ms}
	local rate=${FACTORS_RATE:-300}
	local secs=${SECONDS_EACH:-20}
	local dists=${FACTORS_DISTS:-uniform:0:30s loguniform:100ms:51200ms}
	# Rows beyond tail_margin = 0 for every factor: FACTOR:MARGIN.
	local extra=${FACTORS_EXTRA-2:250ms 2:400ms}
	local reps=${FACTORS_REPEAT:-1}
	local events=${FACTORS_EVENTS:-no}
	local n=$((rate * secs)) seq=0
	echo "Resolution $res, $rate msg/s for ${secs}s ($n messages) per row," \
		"[events] enabled = $events, queues quorum; levels: up to the" \
		"largest TTL <= the distribution's max."
	echo
	echo "| run | distribution | factor | levels | tail_margin | hops/msg | model | fitted ms/hop | held/msg | broker CPU µs/msg | daemon CPU µs/msg | broker CPU µs/op | p50 late ms | p99 late ms | p99.9 late ms | lost | early |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for rep in $(seq "$reps"); do
		for dist in $dists; do
			local rows=""
			for f in $facts; do rows="$rows $f:0ms"; done
			for row in $rows $extra; do
				local f=${row%%:*} margin=${row#*:}
				seq=$((seq + 1))
				local p=fx$seq
				local model levels
				model=$("$here/tools/hops-model" --json --dist "$dist" \
					--resolution "$res" --factor "$f" \
					--tail "hold:$margin")
				levels=$(echo "$model" | /usr/bin/python3 -c \
					'import json,sys; print(json.load(sys.stdin)["levels"])')
				start_daemon "$p" "$res" "$f" "$levels" "[router]
tail_margin = $margin
[events]
enabled = $events
[metrics]
listen ="
				# The broker's own CPU with the daemon idle, to
				# tell the work from its background.
				local i0 i1
				i0=$(cpu_ticks "$beam")
				sleep 3
				i1=$(cpu_ticks "$beam")
				local js=$out/factors-$rep-${dist%%:*}-f$f-m$margin.json
				"$B/cascade-bench" run -p "$p" -q "$p-target" -n "$n" \
					-r "$rate" --dist "$dist" --seed "$rep" \
					--mover-pid "$daemon_pid" --broker-pid "$beam" \
					--idle 15s --json "$js.run" >/dev/null 2>"$dir/run.err" ||
					true
				stop_daemon
				delete_queues "$p"
				local totals
				totals=$(grep -o 'msg=totals.*' "$dir/$p.log" || true)
				/usr/bin/python3 - "$js" "$rep" "$dist" "$f" "$levels" \
					"$margin" "$res" "$model" "$totals" \
					"$((i1 - i0))" "$(getconf CLK_TCK)" \
					"$here/tools/hops-model" <<'PY'
import json, subprocess, sys
(js, rep, dist, f, levels, margin, res, model, totals, idle, tck,
 hm) = sys.argv[1:13]
d = json.load(open(js + ".run"))
t = dict(kv.split("=", 1) for kv in totals.split()[1:])
n = max(d["received"], 1)
hops = int(t["hops"])
held = int(t["held"])
m = json.loads(model)
# The broker's time per hop is the measured lateness a hop adds: the
# model again with that latency (hops lost to it are the difference).
lat_model = None
idle_cpu = int(idle) / int(tck) / 3.0
bc = d["broker_cpu_s"]
mc = d["mover_cpu_s"]
ops = hops + 2 * n  # each hop, the ingress and the delivery publish
res_row = {"rep": int(rep), "dist": dist, "factor": int(f),
           "levels": int(levels), "tail_margin": margin,
           "resolution": res, "delivered": d["received"],
           "lost": d["lost"], "early": d["early"],
           "hops": hops, "held": held, "hops_per_msg": hops / n,
           "model_hops_per_msg": m["hops"],
           "broker_cpu_us_per_msg": bc * 1e6 / n,
           "broker_idle_cpu_per_s": idle_cpu,
           "daemon_cpu_us_per_msg": mc * 1e6 / n,
           "broker_cpu_us_per_op": bc * 1e6 / ops,
           "lateness_ms": d["lateness_ms"], "seconds": d["seconds"],
           "bench": d}
# hop latency: what brings the model down to the measured count
lo, hi = 0.0, 50.0
for _ in range(12):
    mid = (lo + hi) / 2
    out = subprocess.run([hm, "--json", "--dist", dist, "--resolution", res,
                          "--factor", f, "--levels", levels, "--tail",
                          "hold:" + margin, "--latency", "%g" % mid,
                          "--samples", "20000"],
                         capture_output=True, text=True).stdout
    h = json.loads(out)["hops"]
    if h > hops / n:
        lo = mid
    else:
        hi = mid
    if hi - lo < 0.5:
        break
res_row["fitted_hop_latency_ms"] = (lo + hi) / 2
json.dump(res_row, open(js, "w"), indent=1)
L = d["lateness_ms"]
print("| %d | %s | %s | %s | %s | %.2f | %.2f | %.1f ms/hop | %.2f | %.0f | %.0f | %.0f | %.1f | %.1f | %.1f | %d | %d |" % (
    int(rep), dist, f, levels, margin, hops / n, m["hops"],
    (lo + hi) / 2, held / n, bc * 1e6 / n, mc * 1e6 / n, bc * 1e6 / ops,
    L["p50"], L["p99"], L["p999"], d["lost"], d["early"]))
sys.stdout.flush()
PY
				rm -f "$js.run"
			done
		done
	done
}
