# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench precision: lateness at a steady rate over a range of delays
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

precision() {
	local rate=${PRECISION_RATE:-1000}
	local maxd=${PRECISION_MAX_DELAY:-10m}
	local secs=${PRECISION_SECONDS:-120}
	# Held tails count against the prefetch: at 1000 msg/s with tails
	# uniform in [0, 2 s) about 1000 are held at once, so give room.
	local mport
	# The plot of the lateness is gnuplot's: installed when missing, as
	# tools/soak installs nftables (every precision run used to say "sh:
	# 1: gnuplot: not found" and draw nothing).
	sh "$here/tools/install-deps" gnuplot-nox
	mport=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	start_daemon prec 2s "${PRECISION_FACTOR:-2}" "${PRECISION_LEVELS:-24}" "queue_type = ${PRECISION_QUEUE_TYPE:-quorum}
mode = ${PRECISION_MODE:-ladder}
[router]
prefetch = ${PRECISION_PREFETCH:-4000}
tail_margin = ${PRECISION_MARGIN:-250ms}
[metrics]
listen = 127.0.0.1:$mport"
	"$B/cascade-bench" run -p prec -q prec-target -n $((rate * secs)) \
		-r "$rate" -d "0-$maxd" --mover-pid "$daemon_pid" \
		--target-type "${PRECISION_TARGET_TYPE:-quorum}" \
		--broker-pid "$beam" --idle 30s --json "$out/precision.json" \
		--plot "$out/precision.png"
	# The daemon's own part: how late it published each delivery, from its
	# lateness histogram; the rest of what the consumer saw is the broker
	# routing the delivery to the target queue and on to the consumer.
	/usr/bin/python3 - "http://127.0.0.1:$mport/metrics" \
		"$out/precision-daemon.json" <<'PY'
import json, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
buckets = []
for line in text.splitlines():
    if line.startswith("cascade_lateness_seconds_bucket"):
        le = line.split('le="')[1].split('"')[0]
        buckets.append((float("inf") if le == "+Inf" else float(le),
                        int(float(line.rsplit(" ", 1)[1]))))
total = buckets[-1][1]
res = {"deliveries": total}
for q in (0.5, 0.9, 0.99, 0.999):
    le = next(b for b, c in buckets if c >= q * total)
    res["p%g" % (q * 100)] = "<= %g ms" % (le * 1000)
res["buckets_ms"] = {("%g" % (b * 1000)): c for b, c in buckets}
json.dump(res, open(sys.argv[2], "w"), indent=1)
print("daemon publish lateness: " + ", ".join(
    "%s %s" % (k, res[k]) for k in ("p50", "p90", "p99", "p99.9")))
PY
	stop_daemon
	grep "msg=totals" "$dir/prec.log" >&2
}
