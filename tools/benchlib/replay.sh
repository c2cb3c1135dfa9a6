# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench replay: a daemon's start after a day of a one-second repeat
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

# A start of the daemon on prefix $1 (declared, records written): the ms
# from msg=reading_cancellations to msg=ready, RSS KiB, CPU ms, one line.
replay_start() {
	local p=$1 log="$dir/$1.log"
	: >"$log"
	"$B/cascade" -c "$dir/$p.ini" 2>"$log" &
	daemon_pid=$!
	for _ in $(seq 1200); do
		grep -q "msg=ready" "$log" && break
		sleep 0.05
	done
	grep -q "msg=ready" "$log" || { cat "$log" >&2; exit 1; }
	local rss ticks
	rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$daemon_pid/status")
	ticks=$(cpu_ticks "$daemon_pid")
	stop_daemon
	/usr/bin/python3 - "$log" "$rss" "$ticks" "$(getconf CLK_TCK)" <<'PY'
import datetime, sys
log, rss, ticks, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def at(msg):
    for line in open(log):
        if " msg=%s " % msg in line or line.rstrip().endswith(" msg=%s" % msg):
            t = line.split()[0].replace("Z", "+00:00")
            return datetime.datetime.fromisoformat(t).timestamp()
    sys.exit("no msg=%s in %s" % (msg, log))
print("%d %d %d" % (round((at("ready") - at("reading_cancellations")) * 1000),
                    rss, round(ticks * 1000 / hz)))
PY
}

replay() {
	local counts=${REPLAY_COUNTS:-0 86400 345600}
	local repeat=${REPLAY_REPEAT:-3}
	local stream=${REPLAY_STREAM:-series}
	echo "| series records in P.$stream | replay ms (each start) | records/s (best) | daemon RSS MiB at ready | daemon CPU ms at ready |"
	echo "|---|---|---|---|---|"
	for n in $counts; do
		local p=r$stream$n
		# Declares the streams (and writes its markers), then stops.
		start_daemon "$p" 2s 2 0
		stop_daemon
		if [ "$n" -gt 0 ]; then
			"$B/cascade-bench" records -p "$p" --stream "$stream" \
				-n "$n" >&2
		fi
		local times="" best="" rsss="" cpus="" ms rss cpu
		for _ in $(seq "$repeat"); do
			read -r ms rss cpu < <(replay_start "$p")
			times="$times${times:+ / }$ms"
			rsss="$rsss${rsss:+ / }$((rss / 1024))"
			cpus="$cpus${cpus:+ / }$cpu"
			if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then
				best=$ms
			fi
		done
		local rate="–"
		[ "$n" -gt 0 ] && rate=$((n * 1000 / (best > 0 ? best : 1)))
		echo "| $n | $times | $rate | $rsss | $cpus |"
	done
}
