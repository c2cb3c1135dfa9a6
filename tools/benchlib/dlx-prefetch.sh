# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench dlx-prefetch: one quorum delay queue at saturation, per DLX prefetch
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

# sample_queues DELAY OTHER: every 2 s, of quorum queue DELAY: messages
# expired and waiting for the dead-letter worker, those in its hands (at
# most its prefetch), all its messages; of OTHER: messages ready.
sample_queues() {
	while :; do
		"$here/tools/rabbitmq-private" ctl "$dir/broker" eval "
	F = fun(N) -> {ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<\"/\">>, queue, N)),
		{R, _} = amqqueue:get_pid(Q),
		{ok, {_, O}, _} = ra:local_query({R, node()}, fun rabbit_fifo:overview/1),
		O end,
	D = F(<<\"$1\">>), T = F(<<\"$2\">>),
	io:format(\"~p ~p ~p ~p~n\", [maps:get(num_discarded, D),
		maps:get(num_discard_checked_out, D),
		maps:get(num_messages, D), maps:get(num_ready_messages, T)])." \
			2>/dev/null | head -1
		sleep 2
	done
}

# samples_json FILE: sample_queues' lines as JSON, {"rows": [[4 numbers],
# ...], "max": [the largest of each column, -1 if none]}.
samples_json() {
	/usr/bin/python3 - "$1" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1]):
    try:
        rows.append([int(x) for x in line.split()])
    except ValueError:
        pass
mx = [max((r[i] for r in rows if len(r) == 4), default=-1) for i in range(4)]
print(json.dumps({"rows": rows, "max": mx}))
PY
}

# dlx_prefetch: the hops/s one quorum delay queue takes at saturation, for
# each dead_letter_worker_consumer_prefetch (a broker restart each): a
# one-level ladder, every message K hops round it (delay K.5 steps,
# tail_margin 0), offered faster than it can go.  A message that falls
# behind takes fewer hops (its due time is absolute), so hops/s counted by
# the daemon over the run is what the queue moved.
dlx_prefetch() {
	local prefetches=${DLX_PREFETCHES:-32 128 512}
	local res=${CAPACITY_RESOLUTION:-100ms}
	local k=${CAPACITY_HOPS:-10}
	local rate=${CAPACITY_RATE:-1000}
	local secs=${SECONDS_EACH:-20}
	local reps=${CAPACITY_REPEAT:-1}
	local resms=${res%ms}
	local delay=$((k * resms + resms / 2))
	local n=$((rate * secs)) seq=0
	echo "One quorum delay queue (${res}, levels = 1, tail_margin 0ms," \
		"[events] off), each message ${delay} ms = $k hops round it," \
		"offered $rate msg/s ($((rate * k)) hops/s) for ${secs}s."
	echo
	echo "| run | DLX prefetch | offered hops/s | hops/s | hops/msg | delivered msg/s | broker CPU µs/hop | daemon CPU µs/hop | max expired waiting for DLX | max DLX in flight | max ready in P.return | p50 late ms | p99 late ms |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for rep in $(seq "$reps"); do
		for pf in $prefetches; do
			seq=$((seq + 1))
			local p=cap$seq
			# A broker of its own for each value: the setting is read
			# at boot.
			"$here/tools/rabbitmq-private" stop "$dir/broker" >/dev/null 2>&1 || true
			rm -rf "$dir/broker"
			url=$(RABBITMQ_PRIVATE_DLX_PREFETCH=$pf \
				"$here/tools/rabbitmq-private" start "$dir/broker")
			export CASCADE_BROKER_URL=$url
			beam=$(cat "$dir/broker/pid")
			start_daemon "$p" "$res" 2 1 "[router]
tail_margin = 0ms
prefetch = 4000
[events]
enabled = no
[metrics]
listen ="
			# Sample the delay queue's and P.return's state.
			sample_queues "$p.delay.$resms" "$p.return" >"$dir/sample.log" &
			local sampler=$!
			local js=$out/dlx-prefetch-$rep-$pf.json
			"$B/cascade-bench" run -p "$p" -q "$p-target" -n "$n" \
				-r "$rate" -d "${delay}ms" --mover-pid "$daemon_pid" \
				--broker-pid "$beam" --idle 15s --json "$js.run" \
				>/dev/null 2>"$dir/run.err" || true
			kill "$sampler" 2>/dev/null || true
			wait "$sampler" 2>/dev/null || true
			stop_daemon
			local totals
			totals=$(grep -o 'msg=totals.*' "$dir/$p.log" || true)
			/usr/bin/python3 - "$js" "$rep" "$pf" "$rate" "$k" "$totals" \
				"$(samples_json "$dir/sample.log")" <<'PY'
import json, sys
js, rep, pf, rate, k, totals, samples = sys.argv[1:8]
d = json.load(open(js + ".run"))
t = dict(kv.split("=", 1) for kv in totals.split()[1:])
hops = int(t["hops"])
n = max(d["received"], 1)
secs = d["seconds"]
s = json.loads(samples)
rows, mx = s["rows"], s["max"]
res = {"rep": int(rep), "dlx_prefetch": int(pf), "offered_msgs_per_s":
       int(rate), "hops_per_msg_planned": int(k), "hops": hops,
       "hops_per_s": hops / secs, "hops_per_msg": hops / n,
       "delivered": d["received"], "seconds": secs,
       "broker_cpu_us_per_hop": d["broker_cpu_s"] * 1e6 / max(hops, 1),
       "daemon_cpu_us_per_hop": d["mover_cpu_s"] * 1e6 / max(hops, 1),
       "max_discarded": mx[0], "max_discard_checked_out": mx[1],
       "max_delay_queue_messages": mx[2], "max_return_ready": mx[3],
       "samples": rows, "bench": d}
json.dump(res, open(js, "w"), indent=1)
L = d["lateness_ms"]
print("| %d | %s | %d | %.0f | %.2f | %.0f | %.0f | %.0f | %d | %d | %d | %.0f | %.0f |" % (
    int(rep), pf, int(rate) * int(k), hops / secs, hops / n, n / secs,
    res["broker_cpu_us_per_hop"], res["daemon_cpu_us_per_hop"],
    mx[0], mx[1], mx[3], L["p50"], L["p99"]))
sys.stdout.flush()
PY
			rm -f "$js.run"
			delete_queues "$p"
			# The same queue without the daemon: TTL 100 ms, dead-
			# lettered straight into the target, one hop a message.
			case " ${CAPACITY_MOVERS:-cascade dlx} " in
			*" dlx "*) ;; *) continue ;; esac
			local dn=$((${DLX_ONLY_RATE:-4000} * secs))
			js=$out/dlx-prefetch-dlxonly-$rep-$pf.json
			"$B/cascade-bench" run -m dlx --hops 1 --unit "$res" -d "$res" \
				-q "dl$seq.target" -n "$dn" -r "${DLX_ONLY_RATE:-4000}" \
				--broker-pid "$beam" --json "$js.run" >/dev/null \
				2>"$dir/run.err" &
			local bench=$!
			sleep 2
			sample_queues dlx.delay.0 "dl$seq.target" >"$dir/sample.log" &
			sampler=$!
			wait "$bench" || true
			kill "$sampler" 2>/dev/null || true
			wait "$sampler" 2>/dev/null || true
			/usr/bin/python3 - "$js" "$rep" "$pf" "${DLX_ONLY_RATE:-4000}" \
				"$(samples_json "$dir/sample.log")" <<'PY'
import json, sys
js, rep, pf, rate, samples = sys.argv[1:6]
d = json.load(open(js + ".run"))
s = json.loads(samples)
rows, mx = s["rows"], s["max"]
n = d["received"]
res = {"rep": int(rep), "dlx_prefetch": int(pf), "mover": "dlx only",
       "offered_msgs_per_s": int(rate), "hops_per_s": n / d["seconds"],
       "broker_cpu_us_per_hop": d["broker_cpu_s"] * 1e6 / max(n, 1),
       "max_discarded": mx[0], "max_discard_checked_out": mx[1],
       "max_delay_queue_messages": mx[2], "max_target_ready": mx[3],
       "samples": rows, "bench": d}
json.dump(res, open(js, "w"), indent=1)
L = d["lateness_ms"]
print("| %d, DLX only | %s | %s | %.0f | 1 | %.0f | %.0f | — | %d | %d | (target) %d | %.0f | %.0f |" % (
    int(rep), pf, rate, n / d["seconds"], n / d["seconds"],
    res["broker_cpu_us_per_hop"], mx[0], mx[1], mx[3], L["p50"], L["p99"]))
sys.stdout.flush()
PY
			rm -f "$js.run"
			"$here/tools/rabbitmq-private" ctl "$dir/broker" \
				delete_queue dlx.delay.0 >/dev/null 2>&1 || true
		done
	done
}
