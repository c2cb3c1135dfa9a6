# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench callgrind: instructions per hop under valgrind
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

callgrind() {
	local n=${CALLGRIND_MESSAGES:-4000}
	cat >"$dir/cg.ini" <<INI
[topology]
prefix = cg
resolution = 10ms
factor = 2
levels = 4
[router]
# Hop whenever a level fits: with the default 250ms margin every 159ms
# delay would be held in memory and no hop measured.
tail_margin = 0ms
${CALLGRIND_INI:-}
INI
	valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" \
		"$B/cascade" -c "$dir/cg.ini" 2>"$dir/cg.log" &
	daemon_pid=$!
	for _ in $(seq 600); do
		grep -q "msg=ready" "$dir/cg.log" && break
		sleep 0.1
	done
	"$B/cascade-bench" run -p cg -q cg-target -n "$n" -r 200 -d 159ms \
		>/dev/null
	stop_daemon
	local hops ir
	hops=$(grep -o 'msg=totals.* hops=[0-9]*' "$dir/cg.log" | sed 's/.*hops=//')
	ir=$(grep -o 'Collected : [0-9]*' "$dir/cg.log" | grep -o '[0-9]*$' ||
		grep '^summary:' "$out/callgrind.out" | awk '{print $2}')
	echo "instructions: $ir for $hops hops and $n deliveries:" \
		"$((ir / (hops + n))) per publish (hop or delivery)"
	# sed, not head: head exits early and pipefail would fail the run.
	callgrind_annotate "$out/callgrind.out" 2>/dev/null | sed -n 1,30p
}
