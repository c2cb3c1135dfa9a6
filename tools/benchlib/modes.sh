# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench modes: ladder against native waiting, side by side
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

# modes: side by side, ladder and native waiting, one delay distribution.
modes() {
	local rows=${MODES_ROWS:-ladder native:64s}
	local res=${MODES_RESOLUTION:-2s}
	local rate=${MODES_RATE:-300}
	local secs=${SECONDS_EACH:-60}
	local dist=${MODES_DIST:-uniform:0:10m}
	local events=${MODES_EVENTS:-yes}
	local reps=${MODES_REPEAT:-1}
	local n=$((rate * secs)) seq=0
	echo "RabbitMQ $("$here/tools/rabbitmq-private" ctl "$dir/broker" \
		version 2>/dev/null), $dist, $rate msg/s for ${secs}s ($n" \
		"messages) per row, resolution $res x 2, [events] enabled =" \
		"$events, queues quorum."
	echo
	echo "| run | mode | window | hops/msg | waits/msg | returns/msg | broker CPU µs/msg | daemon CPU µs/msg | p50 late ms | p99 late ms | p99.9 late ms | max late ms | lost | early |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for rep in $(seq "$reps"); do
		for row in $rows; do
			local mode=${row%%:*} window=${row#*:}
			[ "$mode" = "$row" ] && window=-
			seq=$((seq + 1))
			local p=md$seq ini="mode = $mode"
			[ "$window" != - ] && ini="$ini
native_window = $window"
			start_daemon "$p" "$res" 2 0 "$ini
[events]
enabled = $events
[metrics]
listen = 127.0.0.1:0"
			if [ "$mode" = native ] && ! grep -q "mode=native" \
				"$dir/$p.log"; then
				echo "$p: not native:" >&2
				cat "$dir/$p.log" >&2
				exit 1
			fi
			local port i0 i1
			port=$(grep -o 'msg=metrics_listening.*port=[0-9]*' \
				"$dir/$p.log" | grep -o '[0-9]*$')
			i0=$(cpu_ticks "$beam")
			sleep 10
			i1=$(cpu_ticks "$beam")
			local js=$out/modes-$rep-$mode-$window.json
			"$B/cascade-bench" run -p "$p" -q "$p-target" -n "$n" \
				-r "$rate" --dist "$dist" --seed "$rep" \
				--mover-pid "$daemon_pid" --broker-pid "$beam" \
				--idle 20s --json "$js.run" >/dev/null \
				2>"$dir/run.err" || true
			/usr/bin/python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' \
				"http://127.0.0.1:$port/metrics" >"$dir/$p.prom"
			stop_daemon
			delete_queues "$p"
			/usr/bin/python3 - "$js" "$rep" "$mode" "$window" "$dist" \
				"$((i1 - i0))" "$(getconf CLK_TCK)" "$dir/$p.prom" \
				<<'PY'
import json, sys
js, rep, mode, window, dist, idle, tck, prom = sys.argv[1:9]
d = json.load(open(js + ".run"))
m = {}
for line in open(prom):
    if line.startswith("#") or not line.strip():
        continue
    k, v = line.rsplit(" ", 1)
    name = k.split("{")[0]
    m[name] = m.get(name, 0) + float(v)
n = max(d["received"], 1)
idle_per_s = int(idle) / int(tck) / 10.0
# The idle time between the last arrival and the end of the run (--idle)
# is counted too: take it off with the broker's idle rate.
bc = d["broker_cpu_s"] - idle_per_s * d["seconds"]
row = {"rep": int(rep), "mode": mode, "window": window, "dist": dist,
       "delivered": d["received"], "lost": d["lost"], "early": d["early"],
       "hops_per_msg": m.get("cascade_hops_total", 0) / n,
       "waits_per_msg": m.get("cascade_waits_total", 0) / n,
       "returns_per_msg": m.get("cascade_native_returns_total", 0) / n,
       "broker_cpu_us_per_msg": bc * 1e6 / n,
       "broker_idle_cpu_per_s": idle_per_s,
       "daemon_cpu_us_per_msg": d["mover_cpu_s"] * 1e6 / n,
       "lateness_ms": d["lateness_ms"], "seconds": d["seconds"]}
json.dump(row, open(js, "w"), indent=1)
L = d["lateness_ms"]
print("| %d | %s | %s | %.2f | %.2f | %.2f | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f | %d | %d |" % (
    int(rep), mode, window, row["hops_per_msg"], row["waits_per_msg"],
    row["returns_per_msg"], row["broker_cpu_us_per_msg"],
    row["daemon_cpu_us_per_msg"], L["p50"], L["p99"], L["p999"],
    L.get("max", float("nan")), d["lost"], d["early"]))
sys.stdout.flush()
PY
			rm -f "$js.run"
		done
	done
}
