# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench speed: hops/s of cascade, a plain forwarder and DLX alone
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

speed() {
	local rates=${RATES:-1000 2000 3000 4000}
	local secs=${SECONDS_EACH:-10}
	# SPEED_MOVERS: which to run (cascade: with [events], the default;
	# cascade-lean: [events] enabled = no; cascade-native and
	# cascade-native-lean: the same with [topology] mode = native and a
	# 1 s window, RabbitMQ 4.3 only; forward; dlx).
	local movers=${SPEED_MOVERS:-cascade cascade-lean forward dlx}
	echo "| mover | offered msg/s | delivered msg/s | hops/s | hops/msg | p50 late ms | p99 late ms | mover CPU µs/hop | broker CPU µs/hop | broker CPU µs/msg | mover RSS MiB |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
	for rate in $rates; do
		local n=$((rate * secs))
		# 1. cascade, ladder 100ms x2, 4 levels: 1590 ms = 800+400+200+100
		#    ms hops and a held tail of 90 ms, which absorbs the broker's
		#    few ms per hop, so each message takes four hops.  With its
		#    event records (the default) and without ([events] enabled =
		#    no), each on a fresh prefix.
		#    Native: one 800 ms hop, then 790 ms in the holding queue;
		#    its hops/s count the hop and the wait, a broker step each.
		# In the order given, so that an order effect (a broker
		# warming up) can be told from a difference.
		for mover in $movers; do
			case $mover in
			cascade | cascade-lean | cascade-native | \
				cascade-native-lean) ;;
			*) continue ;;
			esac
			local p=c$rate extra=""
			case $mover in
			cascade-lean)
				p=l$rate
				extra=$'[events]\nenabled = no' ;;
			cascade-native)
				p=n$rate
				extra=$'mode = native\nnative_window = 1s' ;;
			cascade-native-lean)
				p=nl$rate
				extra=$'mode = native\nnative_window = 1s\n[events]\nenabled = no' ;;
			esac
			start_daemon "$p" 100ms 2 4 "$extra"
			"$B/cascade-bench" run -p "$p" -q "$p-target" -n $n \
				-r "$rate" -d 1590ms --mover-pid "$daemon_pid" \
				--broker-pid "$beam" \
				--json "$out/speed-$mover-$rate.json" >/dev/null
			stop_daemon
			local hops waits
			hops=$(grep -o 'msg=totals.* hops=[0-9]*' "$dir/$p.log" |
				sed 's/.*hops=//')
			waits=$(grep -o 'msg=totals.* waits=[0-9]*' "$dir/$p.log" |
				sed 's/.*waits=//')
			row "$mover" "$rate" "$out/speed-$mover-$rate.json" \
				"$((hops + ${waits:-0}))"
		done
		case " $movers " in *" forward "*) ;; *) continue ;; esac
		# 2. the plain forwarder over the same four TTL queues.
		"$B/cascade-bench" forward --unit 100ms --hops 4 \
			-q "f$rate.target" 2>"$dir/fwd.log" &
		local fwd=$!
		sleep 1.5
		"$B/cascade-bench" run -m forward -q "f$rate.target" -n $n \
			-r "$rate" -d 1500ms --mover-pid "$fwd" \
			--broker-pid "$beam" --json "$out/speed-forward-$rate.json" \
			>/dev/null
		kill "$fwd"
		wait "$fwd" 2>/dev/null || true
		row forward "$rate" "$out/speed-forward-$rate.json" ""
		case " $movers " in *" dlx "*) ;; *) continue ;; esac
		# 3. the same four TTL queues chained by dead-lettering alone.
		"$B/cascade-bench" run -m dlx --unit 100ms -q "d$rate.target" \
			-n $n -r "$rate" -d 1500ms --broker-pid "$beam" \
			--json "$out/speed-dlx-$rate.json" >/dev/null
		row "DLX only" "$rate" "$out/speed-dlx-$rate.json" ""
		# Each mode gets a clean broker state: drop the hop queues.
		for q in fwd.in fwd.return fwd.delay.0 fwd.delay.1 fwd.delay.2 \
			fwd.delay.3 dlx.delay.0 dlx.delay.1 dlx.delay.2 dlx.delay.3; do
			"$here/tools/rabbitmq-private" ctl "$dir/broker" \
				delete_queue "$q" >/dev/null 2>&1 || true
		done
	done
}

# row MOVER RATE JSON [HOPS]: one table row; HOPS counted by the daemon.
row() {
	/usr/bin/python3 - "$@" <<'PY'
import json, sys
mover, rate, path = sys.argv[1:4]
hops = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None
d = json.load(open(path))
secs = d["seconds"]
n = d["received"]
h = int(hops) if hops else 4 * n
lat = d["lateness_ms"]
def f(x, fmt="%.1f"):
    return "—" if x is None else fmt % x
mc = d["mover_cpu_s"]
bc = d["broker_cpu_s"]
rss = d["mover_rss_max_kib"]
print("| %s | %s | %.0f | %.0f | %.2f | %s | %s | %s | %s | %s | %s |" % (
    mover, rate, n / secs, h / secs, h / max(n, 1), f(lat["p50"]),
    f(lat["p99"]), f(mc * 1e6 / h if mc is not None else None),
    f(bc * 1e6 / h if bc is not None else None),
    f(bc * 1e6 / max(n, 1) if bc is not None else None),
    f(rss / 1024 if rss else None)))
sys.stdout.flush()
PY
}
