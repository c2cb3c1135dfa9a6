# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench full-target: a target full for minutes beside a healthy one
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

full_target() {
	local secs=${FULL_SECONDS:-300} rate=${FULL_RATE:-100}
	local refused=${FULL_REFUSED:-2000}
	# The shipped ladder and backoff (2 s x 4, target_backoff_max 1m).
	start_daemon full 2s 4 12 "[metrics]
listen ="
	"$here/tools/bench-full-target" "$url" full "$daemon_pid" "$secs" \
		"$rate" "$refused" "$out/full-target.json"
	echo "connection losses: $(grep -c "msg=connection_lost" "$dir/full.log" || true)"
	stop_daemon
}
