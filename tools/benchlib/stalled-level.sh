# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench stalled-level: a delay level that does not answer beside
# short delays that do not need it
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

stalled_level() {
	local secs=${STALL_SECONDS:-150} rate=${STALL_RATE:-20}
	local every=${STALL_LONG_EVERY:-5}
	# The shipped ladder (2 s x 2) and mode.
	start_daemon stall 2s 2 0 "mode = ${STALL_MODE:-auto}
[metrics]
listen ="
	local rc=0
	"$here/tools/bench-stalled-level" "$url" stall "$dir/broker" "$secs" \
		"$rate" "$every" "$out/stalled-level.json" || rc=$?
	echo "the daemon's refusals and reconnections:"
	grep -E "msg=(publish_refused|connection_lost|ready|queue_not_answering|queue_answering)" "$dir/stall.log" |
		cut -c1-240 || true
	stop_daemon
	delete_queues stall
	return "$rc"
}
