# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench rss: the daemon's RSS with many messages waiting
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

rss() {
	local n=${RSS_MESSAGES:-1000000}
	start_daemon rss 2s 4 12 "[router]
prefetch = 1000"
	local before
	before=$(awk '/VmRSS/ {print $2}' "/proc/$daemon_pid/status")
	"$B/cascade-bench" run -p rss -q rss-target -n "$n" -d 1h \
		--mover-pid "$daemon_pid" --broker-pid "$beam" --idle 5s \
		--json "$out/rss.json" >/dev/null || true
	sleep 5
	local after peak
	after=$(awk '/VmRSS/ {print $2}' "/proc/$daemon_pid/status")
	peak=$(awk '/VmHWM/ {print $2}' "/proc/$daemon_pid/status")
	"$here/tools/rabbitmq-private" ctl "$dir/broker" list_queues name \
		messages | grep "^rss\." >&2
	echo "daemon RSS: ${before} KiB idle, ${after} KiB with $n messages" \
		"waiting, peak ${peak} KiB"
	stop_daemon
}
