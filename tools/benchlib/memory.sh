# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench memory: the broker's memory per waiting message, per mode
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

# memory: MEMORY_MESSAGES waiting MEMORY_DELAY each, per mode: the memory
# RabbitMQ gives for cascade's queues, and beam.smp's RSS, over the
# messages.  Each row on fresh queues, deleted after.
memory() {
	local rows=${MEMORY_ROWS:-ladder native:64s native:2h}
	local n=${MEMORY_MESSAGES:-100000} delay=${MEMORY_DELAY:-1h} seq=0
	echo "RabbitMQ $("$here/tools/rabbitmq-private" ctl "$dir/broker" \
		version 2>/dev/null), $n messages waiting $delay each."
	echo
	echo "| mode | window | where they wait | queue memory MB | bytes/msg | beam RSS growth MB | bytes/msg (RSS) |"
	echo "|---|---|---|---|---|---|---|"
	for row in $rows; do
		local mode=${row%%:*} window=${row#*:}
		[ "$mode" = "$row" ] && window=-
		seq=$((seq + 1))
		local p=mem$seq ini="mode = $mode"
		[ "$window" != - ] && ini="$ini
native_window = $window"
		start_daemon "$p" 2s 2 0 "$ini
[metrics]
listen ="
		local rss0 rss1 where mem
		rss0=$(awk '/VmRSS/ {print $2}' "/proc/$beam/status")
		"$B/cascade-bench" run -p "$p" -q "$p-target" -n "$n" \
			-d "$delay" --idle 20s >/dev/null 2>"$dir/run.err" || true
		sleep 10
		rss1=$(awk '/VmRSS/ {print $2}' "/proc/$beam/status")
		# The queues that hold them: delay levels with messages, or the
		# holding queue (whose held messages `messages` leaves out).
		"$here/tools/rabbitmq-private" ctl "$dir/broker" list_queues \
			name messages memory 2>/dev/null | grep "^$p\." \
			>"$dir/$p.queues"
		where=$(awk '$2 > 0 || $1 ~ /\.hold/ {printf "%s%s", s, $1; s=","}' \
			"$dir/$p.queues")
		mem=$(awk '{m += $3} END {print m}' "$dir/$p.queues")
		stop_daemon
		delete_queues "$p"
		/usr/bin/python3 -c '
import sys
mode, window, where, mem, n, rss0, rss1 = sys.argv[1:8]
mem, n = int(mem), int(n)
grow = (int(rss1) - int(rss0)) * 1024
print("| %s | %s | %s | %.1f | %.0f | %.1f | %.0f |" % (mode, window, where,
      mem / 1e6, mem / n, grow / 1e6, grow / n))' \
			"$mode" "$window" "$where" "$mem" "$n" "$rss0" "$rss1"
	done
}
