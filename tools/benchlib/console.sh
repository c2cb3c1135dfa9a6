# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench console: the console with a million messages waiting
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

# console_start PREFIX: start cascade-console on PREFIX's config (port 0)
# and wait for msg=console_caught_up.  Sets console_pid, console_port,
# console_t0 (the wall clock just before it started, s), console_rss and
# console_hwm (KiB, read at once) and console_cpu (ms).
console_start() {
	local p=$1 log="$dir/console-$1.log"
	: >"$log"
	console_t0=$(date +%s.%N)
	"$B/cascade-console" -c "$dir/$p.ini" --listen 127.0.0.1:0 2>"$log" &
	console_pid=$!
	for _ in $(seq 12000); do
		grep -q "msg=console_caught_up" "$log" && break
		kill -0 "$console_pid" 2>/dev/null || break
		sleep 0.05
	done
	if ! grep -q "msg=console_caught_up" "$log"; then
		cat "$log" >&2
		echo "console: no msg=console_caught_up" >&2
		exit 1
	fi
	console_rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$console_pid/status")
	console_hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$console_pid/status")
	console_cpu=$(($(cpu_ticks "$console_pid") * 1000 / $(getconf CLK_TCK)))
	console_port=$(sed -n 's/.*msg=console_listening port=\([0-9]*\).*/\1/p' \
		"$log" | head -1)
}

console_stop() {
	kill -TERM "$console_pid"
	wait "$console_pid" || true
	console_pid=""
}

# console_caught_up PREFIX: "records waiting ms start_ms" from the log:
# the line's fields and the ms from console_t0 to the line's time stamp.
console_caught_up() {
	/usr/bin/python3 - "$dir/console-$1.log" "$console_t0" <<'PY'
import datetime, re, sys
for line in open(sys.argv[1]):
    if "msg=console_caught_up" in line:
        t = datetime.datetime.fromisoformat(
            line.split()[0].replace("Z", "+00:00")).timestamp()
        f = dict(re.findall(r"(\w+)=(\S+)", line))
        print(f["records"], f["waiting"], f["ms"],
              round((t - float(sys.argv[2])) * 1000))
        break
PY
}

# console_time NAME PATH: PATH timed CONSOLE_TRIES times with curl, as a
# Bearer session; one markdown row: what matched, the answer's size and
# status, p50 and max ms.
console_time() {
	local name=$1 path=$2 tries=${CONSOLE_TRIES:-10} times="" code size t
	local base="http://127.0.0.1:$console_port"
	for _ in $(seq "$tries"); do
		read -r code size t < <(curl -s -o "$dir/answer" \
			-w '%{http_code} %{size_download} %{time_total}\n' \
			-H "Authorization: Bearer $console_token" "$base$path")
		times="$times $t"
	done
	/usr/bin/python3 - "$name" "$path" "$code" "$size" "$dir/answer" \
		"$out/console.json" "$times" <<'PY'
import json, os, statistics, sys
name, path, code, size, answer, out, times = sys.argv[1:8]
t = [float(x) * 1000 for x in times.split()]
matched = "–"
try:
    d = json.load(open(answer))
    matched = d.get("matched", "–")
    if "message" in d:
        matched = "its record at offset %s" % d.get("offset")
except ValueError:
    pass
print("| %s | `%s` | %s | %s | %s | %.1f | %.1f |" % (
    name, path, matched, code, size, statistics.median(t), max(t)))
rows = json.load(open(out)) if os.path.exists(out) else {}
rows.setdefault("requests", []).append(
    {"name": name, "path": path, "status": int(code), "bytes": int(size),
     "matched": matched, "ms": t})
json.dump(rows, open(out, "w"), indent=1)
PY
}

console() {
	local waiting=${CONSOLE_WAITING:-1000000}
	local delivered=${CONSOLE_DELIVERED:-500000}
	local copy=${CONSOLE_COPY_BYTES:-200}
	local n=$((waiting + delivered)) fraction
	fraction=$(/usr/bin/python3 -c "print(repr($delivered / $n))")
	sh "$here/tools/install-deps" curl # the pages are timed with it
	rm -f "$out/console.json"
	echo "RabbitMQ $("$here/tools/rabbitmq-private" ctl "$dir/broker" \
		version 2>/dev/null); $(nproc) cores; load $(cut -d' ' -f1-3 \
		/proc/loadavg) at the start."
	# Two prefixes, their streams declared by a daemon: one left empty
	# (the console's RSS with nothing to hold), one filled.
	start_daemon cempty 2s 2 0
	stop_daemon
	start_daemon console 2s 2 0
	stop_daemon
	echo
	echo "Writing $n messages' records ($delivered of them delivered," \
		"$copy-byte copies) into console.events:"
	"$B/cascade-bench" records -p console --kind scheduled -n "$n" \
		--copy-bytes "$copy" --delivered-fraction "$fraction" \
		| tee "$dir/records.out"
	local sample
	sample=$(sed -n 's/^sample message_id=\([^ ]*\).*/\1/p' "$dir/records.out")

	console_start cempty
	local base_rss=$console_rss
	console_stop

	echo
	echo "load $(cut -d' ' -f1-3 /proc/loadavg) before the console's start."
	# CONSOLE_COLD=yes: the stream read from disk, as a console started
	# long after its records were written finds it (root: the page cache
	# is dropped for the whole machine).
	if [ "${CONSOLE_COLD:-no}" = yes ]; then
		sync
		echo 3 >/proc/sys/vm/drop_caches ||
			{ echo "CONSOLE_COLD=yes needs root (drop_caches)" >&2; exit 1; }
		echo "page cache dropped (CONSOLE_COLD=yes)."
	fi
	local b0 beam_ms
	b0=$(cpu_ticks "$beam")
	console_start console
	beam_ms=$((($(cpu_ticks "$beam") - b0) * 1000 / $(getconf CLK_TCK)))
	local records lwaiting ms start_ms
	read -r records lwaiting ms start_ms < <(console_caught_up console)
	echo
	echo "| | |"
	echo "|---|---|"
	echo "| records read | $records |"
	echo "| waiting | $lwaiting |"
	echo "| start to \`msg=console_caught_up\` | $start_ms ms ($((records * 1000 / (start_ms > 0 ? start_ms : 1))) records/s) |"
	echo "| its \`ms=\` (the reader's own count) | $ms ms |"
	echo "| console CPU at caught-up | $console_cpu ms |"
	echo "| broker CPU from start to caught-up | $beam_ms ms |"
	echo "| RSS at caught-up | $((console_rss / 1024)) MiB (peak $((console_hwm / 1024)) MiB) |"
	echo "| RSS with nothing waiting | $((base_rss / 1024)) MiB |"
	echo "| RSS per waiting message beyond it | $(((console_rss - base_rss) * 1024 / (lwaiting > 0 ? lwaiting : 1))) bytes |"
	/usr/bin/python3 - "$out/console.json" <<PY
import json
json.dump({"waiting": $lwaiting, "records": $records,
           "start_to_caught_up_ms": $start_ms, "reader_ms": $ms,
           "cpu_ms": $console_cpu, "broker_cpu_ms": $beam_ms,
           "cold": "${CONSOLE_COLD:-no}" == "yes",
           "rss_kib": $console_rss,
           "hwm_kib": $console_hwm, "base_rss_kib": $base_rss,
           "copy_bytes": $copy, "delivered": $delivered},
          open("$out/console.json", "w"), indent=1)
PY

	console_token=$(curl -s -X POST -H 'Accept: application/json' \
		--data 'user=guest&password=guest' \
		"http://127.0.0.1:$console_port/login" |
		/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
	# Two messages' cascade ids: the sample's (written half way) and the
	# first page's first (anywhere in the stream).
	local cid first
	cid=$(curl -s -H "Authorization: Bearer $console_token" \
		"http://127.0.0.1:$console_port/waiting?format=json&q=$sample" |
		/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["rows"][0]["cascade_id"])')
	first=$(curl -s -H "Authorization: Bearer $console_token" \
		"http://127.0.0.1:$console_port/waiting?format=json&limit=1" |
		/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["rows"][0]["cascade_id"])')
	echo
	echo "load $(cut -d' ' -f1-3 /proc/loadavg) before the requests;" \
		"${CONSOLE_TRIES:-10} of each with curl:"
	echo
	echo "| request | path | matched | status | bytes | p50 ms | max ms |"
	echo "|---|---|---|---|---|---|---|"
	console_time "first page" "/waiting?format=json"
	console_time "page at offset $((waiting / 2))" \
		"/waiting?format=json&offset=$((waiting / 2))"
	console_time "exact search" "/waiting?format=json&q=$sample"
	console_time "prefix search" \
		"/waiting?format=json&q=${sample:0:8}&prefix=1"
	console_time "target filter (1 of 20)" \
		"/waiting?format=json&target=orders/orders.k3"
	console_time "owner filter (1 of 100)" \
		"/waiting?format=json&owner=user042"
	console_time "HTML first page" "/waiting"
	console_time "one message (reads its copy)" "/waiting/$cid?format=json"
	console_time "another message" "/waiting/$first?format=json"
	echo
	echo "RSS after the requests: $(($(awk '/^VmRSS:/ {print $2}' \
		"/proc/$console_pid/status") / 1024)) MiB; load $(cut -d' ' \
		-f1-3 /proc/loadavg)."
	console_stop
}
