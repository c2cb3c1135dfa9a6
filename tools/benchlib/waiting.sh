# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench waiting: a full installation with N messages waiting
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.  It uses console_start, console_caught_up,
# console_time and console_stop of console.sh.
#
# Nothing here holds one value per waiting message: the fill's publishers
# (cascade-bench fill) keep none, its progress is a line a second in a
# file, and the only per-message data read back are the trickle's
# arrivals (WAITING_TRICKLE_RATE a second).

# The step running, for the message when one fails.
waiting_step=setup
waiting_finished=""
waiting_pids=""

waiting_exit() {
	local rc=$?
	if [ -z "$waiting_finished" ]; then
		echo "waiting: step \"$waiting_step\" failed (exit status" \
			"$rc); files in $dir are removed on exit" >&2
		for f in "$dir"/waiting.log "$dir"/fill*.err; do
			[ -s "$f" ] || continue
			echo "--- tail of $f" >&2
			tail -n 5 "$f" >&2
		done
	fi
	for p in $waiting_pids $(cat "$dir/trickle.pid" 2>/dev/null); do
		kill "$p" 2>/dev/null || true
	done
	cleanup
}

waiting_fail() {
	echo "waiting: step \"$waiting_step\": $*" >&2
	exit 1
}

now_s() { date +%s.%N; }

# ms_between T0 T1: (T1 - T0) in whole ms.
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%d", (b - a) * 1000 }'; }

# wj KEY=JSON...: set each dotted KEY of the results to the JSON value.
wj() {
	/usr/bin/python3 - "$wres" "$@" <<'PY'
import json, sys
f = sys.argv[1]
d = json.load(open(f))
for a in sys.argv[2:]:
    k, v = a.split("=", 1)
    cur = d
    *path, last = k.split(".")
    for p in path:
        cur = cur.setdefault(p, {})
    cur[last] = json.loads(v)
json.dump(d, open(f, "w"), indent=1)
PY
}

# waiting_report SECTION RESULT ARGS...: a step's table, from what it
# left in the run's directory.
waiting_report() {
	/usr/bin/python3 "$here/tools/benchlib/waiting_report.py" "$@"
}

# rss_kib PID
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# log_time LOG MSG AFTER: the Unix time (s) of the first line of LOG
# with msg=MSG stamped at AFTER or later; empty when there is none.
log_time() {
	/usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import datetime, sys
log, msg, after = sys.argv[1], sys.argv[2], float(sys.argv[3])
for line in open(log, errors="replace"):
    f = line.split()
    if len(f) < 3 or "msg=" + msg not in f:
        continue
    try:
        t = datetime.datetime.fromisoformat(
            f[0].replace("Z", "+00:00")).timestamp()
    except ValueError:
        continue
    if t >= after:
        print("%.3f" % t)
        break
PY
}

# The daemon's /metrics, one line: fill messages scheduled (due in an
# hour or more: the trickle's are due within a minute), deliveries
# received from P.ingress.
waiting_metrics() {
	{ curl -s --max-time 2 "http://127.0.0.1:$wmport/metrics" || true; } | awk '
	/^cascade_scheduled_total\{due_in="(hour|day|later)"\}/ { m += $2 }
	/^cascade_messages_received_total\{source="ingress"/ { r += $2 }
	END { printf "%d %d", m, r }'
}

# The machine's side of a poll: "TOTAL IDLE IOWAIT STEAL" ticks of all
# cores (/proc/stat) and the pressure stalls' totals, "CPU_SOME_US
# IO_SOME_US" (/proc/pressure; 0 without it): whether something outside
# the broker and the daemon took the cores or the disk.
waiting_machine() {
	awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i
		printf "%d %d %d %d", t, $5, $6, $9; exit }' /proc/stat
	for f in cpu io; do
		awk -F'total=' '/^some/ { printf " %s", $2; found = 1 }
		END { if (!found) printf " 0" }' "/proc/pressure/$f" 2>/dev/null ||
			printf ' 0'
	done
}

# Twice a second until killed: "UNIX_S SCHEDULED INGRESS_RECEIVED
# BEAM_TICKS DAEMON_TICKS TOTAL IDLE IOWAIT STEAL CPU_SOME_US IO_SOME_US"
# into $dir/polls.
waiting_poll() {
	local b d m
	while :; do
		m=$(waiting_metrics)
		b=$(cpu_ticks "$beam" 2>/dev/null || echo 0)
		d=$(cpu_ticks "$daemon_pid" 2>/dev/null || echo 0)
		echo "$(now_s) $m $b $d $(waiting_machine)" >>"$dir/polls"
		sleep 0.5
	done
}

# waiting_chunk NAME SECONDS [cascade-bench run options]: one chunk of
# the trickle to wait.trickle, publishing for SECONDS, then waiting for
# its arrivals: $dir/trickle-NAME.{json,err,lat,arr}.  It succeeds
# whatever arrived (judged after); the chunk's pid is in $dir/trickle.pid.
waiting_chunk() {
	local name=$1 secs=$2 n
	shift 2
	n=$(awk -v r="$wtrate" -v s="$secs" 'BEGIN { printf "%d", r * s * 2 + 100 }')
	"$B/cascade-bench" run -p waiting -q wait.trickle -n "$n" \
		-r "$wtrate" --dist "$wtdist" --deadline "${secs}s" \
		--idle "$wtidle" --lateness "$dir/trickle-$name.lat" \
		--arrivals "$dir/trickle-$name.arr" "$@" \
		>"$dir/trickle-$name.json" 2>"$dir/trickle-$name.err" &
	echo $! >"$dir/trickle.pid"
	wait $! || true
	rm -f "$dir/trickle.pid"
}

# The list_queues count of P.ingress (ready and unacked).
waiting_ingress() {
	{ "$here/tools/rabbitmq-private" ctl "$dir/broker" list_queues name \
		messages 2>/dev/null || true; } |
		awk '$1 == "waiting.ingress" {print $2}'
}

# waiting_cancelled NAME ID: did cascade-ctl's NAME say it cancelled one
# waiting message with id ID?  Into the results as ctl.NAME.ok.
waiting_cancelled() {
	if grep -q "^$2: cancelled 1 waiting message" "$dir/ctl-$1.out"; then
		wj "ctl.$1.ok=true"
	else
		echo
		echo "**cancel did not say it cancelled 1 waiting message:**" \
			"$(cat "$dir/ctl-$1.out" "$dir/ctl-$1.err")"
		wj "ctl.$1.ok=false"
	fi
}

# waiting_ctl NAME ARGS...: cascade-ctl -c $wctl_ini ARGS, timed by
# /usr/bin/time (wall s, max RSS KiB) when it is installed, else by the
# shell and /proc; its output in $dir/ctl-NAME.out.  One markdown row;
# into the results as ctl.NAME.
waiting_ctl() {
	local name=$1 t0 t1 rc=0 wall rss peak pid
	shift
	if [ -x /usr/bin/time ]; then
		# The wall time by the shell's clock (time's %e is in 10 ms).
		t0=$(now_s)
		/usr/bin/time -f '%M' -o "$dir/ctl-$name.time" \
			"$B/cascade-ctl" -c "$wctl_ini" "$@" \
			>"$dir/ctl-$name.out" 2>"$dir/ctl-$name.err" || rc=$?
		t1=$(now_s)
		wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
		rss=$(tail -n 1 "$dir/ctl-$name.time")
	else
		# No /usr/bin/time (apt package time): the shell's clock and
		# VmHWM read from /proc until it exits.
		t0=$(now_s)
		"$B/cascade-ctl" -c "$wctl_ini" "$@" >"$dir/ctl-$name.out" \
			2>"$dir/ctl-$name.err" &
		pid=$! rss=0
		while kill -0 "$pid" 2>/dev/null; do
			peak=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" \
				2>/dev/null || echo 0)
			[ "${peak:-0}" -gt "$rss" ] && rss=$peak
			sleep 0.05
		done
		wait "$pid" || rc=$?
		t1=$(now_s)
		wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
	fi
	/usr/bin/python3 - "$wres" "$name" "$rc" "$wall" "$rss" \
		"$dir/ctl-$name.out" "$*" <<'PY'
import json, sys
res, name, rc, wall, rss, outf, args = sys.argv[1:8]
out = open(outf, errors="replace").read().splitlines()
first = out[0] if out else ""
d = json.load(open(res))
d.setdefault("ctl", {})[name] = {
    "args": args, "exit": int(rc), "wall_ms": round(float(wall) * 1000),
    "max_rss_kib": int(rss), "first_line": first, "lines": len(out)}
json.dump(d, open(res, "w"), indent=1)
print("| `cascade-ctl %s`%s | %d | %.0f | %.1f | %s |" % (
    args, " (prefix wempty, nothing waiting)" if name.endswith("_empty")
    else "", int(rc), float(wall) * 1000, int(rss) / 1024, first))
PY
	[ "$rc" -le 1 ] || waiting_fail "cascade-ctl $* exited $rc: $(tail -n 3 \
		"$dir/ctl-$name.err")"
}

# waiting_snapshot TAG: the broker's memory_breakdown and list_queues as
# JSON, and RSS and disk use, in $dir/{memory,queues,sizes}-TAG.*.
waiting_snapshot() {
	local tag=$1 mn
	mn=$(find "$dir/broker/mnesia" -mindepth 1 -maxdepth 1 -type d | head -1)
	"$here/tools/rabbitmq-private" diag "$dir/broker" memory_breakdown \
		--unit bytes --formatter json >"$dir/memory-$tag.json" \
		2>/dev/null || waiting_fail "rabbitmq-diagnostics memory_breakdown"
	"$here/tools/rabbitmq-private" ctl "$dir/broker" list_queues name type \
		messages memory --formatter json >"$dir/queues-$tag.json" \
		2>/dev/null || waiting_fail "list_queues"
	{
		echo "beam_rss_kib $(rss_kib "$beam")"
		echo "daemon_rss_kib $(rss_kib "$daemon_pid")"
		echo "disk_quorum $(du -sb "$mn/quorum" | cut -f1)"
		echo "disk_streams $(du -sb "$mn/stream" | cut -f1)"
		echo "disk_events $(du -sbc "$mn"/stream/__waiting_events_* |
			tail -n 1 | cut -f1)"
		echo "disk_copies $(du -sbc "$mn"/stream/__waiting_copies_* \
			2>/dev/null | tail -n 1 | cut -f1)"
		echo "disk_node $(du -sb "$dir/broker/mnesia" | cut -f1)"
	} >"$dir/sizes-$tag.txt"
}

waiting() {
	local n=${WAITING_N:-1000000} dist=${WAITING_DIST:-loguniform:1h:30d}
	local owners=${WAITING_OWNERS:-4} targets=${WAITING_TARGETS:-5}
	local chunk=${WAITING_TRICKLE_CHUNK:-60} after=${WAITING_AFTER:-120}
	local wout=${WAITING_OUT:-$out}
	wtrate=${WAITING_TRICKLE_RATE:-20}
	wtdist=${WAITING_TRICKLE_DIST:-uniform:2s:30s}
	wtidle=${WAITING_TRICKLE_IDLE:-15m}
	mkdir -p "$wout"
	# curl asks the daemon's /metrics and the console: a Debian root or a
	# minimal machine may not have it.
	sh "$here/tools/install-deps" curl
	wres=$dir/waiting.json
	echo '{}' >"$wres"
	trap waiting_exit EXIT
	set -E
	trap 'waiting_fail "a command failed (line $LINENO)"' ERR

	local port=${url##*@127.0.0.1:}
	port=${port%%/*}
	local version hz
	hz=$(getconf CLK_TCK)
	version=$("$here/tools/rabbitmq-private" ctl "$dir/broker" version \
		2>/dev/null)
	if [ "$owners" -lt 1 ] || [ "$n" -lt "$owners" ]; then
		waiting_fail "WAITING_OWNERS from 1 to WAITING_N"
	fi

	# The disk it will take: about WAITING_DISK_PER_MSG bytes a message
	# in the node's directory (quorum logs, P.events, P.copies;
	# measured at 20,000), refused beyond what is free.
	waiting_step="disk check"
	local per=${WAITING_DISK_PER_MSG:-4500} free
	free=$(df -B1 --output=avail "$dir" | tail -1)
	if [ $((n * per)) -gt "$free" ] && [ "${WAITING_FORCE:-}" != yes ]; then
		waiting_fail "$n messages need about $((n * per / 1000000)) MB" \
			"in $dir, $((free / 1000000)) MB free (WAITING_FORCE=yes" \
			"to try anyway)"
	fi

	echo "# tools/bench waiting: $n messages waiting"
	echo
	echo "RabbitMQ $version; $(nproc) cores; load $(cut -d' ' -f1-3 \
		/proc/loadavg) at the start; $n messages ($dist) from $owners" \
		"owners to $targets targets; a trickle of $wtrate msg/s" \
		"($wtdist) beside."
	wj "n=$n" "dist=\"$dist\"" "owners=$owners" "targets=$targets" \
		"trickle_rate=$wtrate" "trickle_dist=\"$wtdist\"" \
		"rabbitmq=\"$version\"" "cores=$(nproc)" \
		"load_at_start=\"$(cut -d' ' -f1-3 /proc/loadavg)\""

	# The console's RSS on an empty prefix (as console.sh's baseline),
	# before anything waits.
	waiting_step="console baseline"
	start_daemon wempty 2s 2 0 "[metrics]
listen ="
	stop_daemon
	console_start wempty
	local console_base=$console_rss
	console_stop

	# The daemon: the default ladder (2 s x 2, levels 0: as many as reach
	# [router] max_delay, 365d by default, so 30 d fits), the default
	# mode (auto), /metrics on a port of its own.
	waiting_step="daemon start"
	wmport=$("$here/tools/rabbitmq-private" port)
	# [topology] max_length (1000000 by default) caps each level; the
	# fill puts up to about an eighth of N in one (log-uniform 1h-30d:
	# 10.5 % a level), so above 8 million it is raised to N / 8.
	local maxlen=${WAITING_MAX_LENGTH:-}
	if [ -z "$maxlen" ] && [ $((n / 8)) -gt 1000000 ]; then
		maxlen=$((n / 8))
		echo "[topology] max_length = $maxlen (the default, 1000000 a" \
			"level, is too few for $n)."
	fi
	local extra="${maxlen:+max_length = $maxlen
}[metrics]
listen = 127.0.0.1:$wmport"
	start_daemon waiting 2s 2 0 "$extra"
	local mode levels
	levels=$(sed -n 's/.*msg=ready .* levels=\([0-9]*\).*/\1/p' \
		"$dir/waiting.log" | head -1)
	echo "The daemon: $levels levels of 2 s x 2, [topology] mode auto;" \
		"/metrics at 127.0.0.1:$wmport."
	wj "levels=$levels" "max_length=${maxlen:-1000000}" \
		"fill_rate_per_owner=${WAITING_FILL_RATE:-0}"
	local p
	for p in waiting wempty; do
		printf '[broker]\nurl = %s\n[topology]\nprefix = %s\n' "$url" "$p" \
			>"$dir/ctl-$p.ini"
	done

	# 1. The owners: broker users with the default user's permissions
	# on the vhost (configure, write, read: .*).  Publishers need write
	# on the exchange P (CONTRACT 3.5, docs/operations.md); the fill
	# also declares its targets.  Each message carries its owner's
	# user-id, which RabbitMQ checks against the connection's user, and
	# which makes it theirs (CONTRACT 7.6): the daemon's user (guest,
	# the default control user) may cancel any.
	waiting_step="1 owners"
	local i
	for i in $(seq "$owners"); do
		"$here/tools/rabbitmq-private" ctl "$dir/broker" add_user \
			"owner$i" "owner$i" >/dev/null 2>&1 ||
			waiting_fail "add_user owner$i"
		"$here/tools/rabbitmq-private" ctl "$dir/broker" \
			set_permissions -p / "owner$i" '.*' '.*' '.*' \
			>/dev/null 2>&1 || waiting_fail "set_permissions owner$i"
	done
	echo
	echo "## 1. Owners"
	echo
	echo "owner1 .. owner$owners, password = name, permissions .* .* .*" \
		"on /; each publishes its share with its user-id."

	# 2. The fill, with the trickle beside it.
	waiting_step="2 fill"
	waiting_snapshot before
	local share=$((n / owners)) t0 b0 d0 pids=""
	: >"$dir/polls"
	t0=$(now_s)
	b0=$(cpu_ticks "$beam")
	d0=$(cpu_ticks "$daemon_pid")
	echo "$t0 0 0 $b0 $d0" >>"$dir/polls"
	waiting_poll &
	local poll_pid=$!
	waiting_pids="$waiting_pids $poll_pid"
	for i in $(seq "$owners"); do
		local k=$share
		[ "$i" -eq "$owners" ] && k=$((n - share * (owners - 1)))
		CASCADE_BROKER_URL=${url/guest:guest@/owner$i:owner$i@} \
			"$B/cascade-bench" fill -p waiting -q wait -n "$k" \
			--dist "$dist" --seed "$i" --targets "$targets" \
			--owner-tag "owner$i" ${WAITING_FILL_RATE:+--rate \
			"$WAITING_FILL_RATE"} >"$dir/fill$i.json" \
			2>"$dir/fill$i.err" &
		pids="$pids $!"
	done
	waiting_pids="$waiting_pids $pids"
	rm -f "$dir/fill.done"
	(
		k=0
		while [ ! -e "$dir/fill.done" ]; do
			k=$((k + 1))
			waiting_chunk "fill$k" "$chunk"
		done
	) &
	local trickle_pid=$!
	waiting_pids="$waiting_pids $trickle_pid"
	local failed=""
	i=0
	for p in $pids; do
		i=$((i + 1))
		wait "$p" || failed="$failed owner$i"
	done
	local t_pub
	t_pub=$(now_s)
	[ -z "$failed" ] || waiting_fail "cascade-bench fill failed for$failed:" \
		"$(tail -q -n 2 "$dir"/fill*.err)"
	echo "publishers done after $(ms_between "$t0" "$t_pub") ms;" \
		"waiting for P.ingress to empty" >&2
	# Until every message has been moved (scheduled: the daemon's
	# count of the fill's, due an hour or more ahead) and P.ingress is
	# empty but for the trickle (at most a second of it).  rabbitmqctl
	# costs the machine most of a second of CPU: it is asked only once
	# all are scheduled, or when the count has not moved for 30 s (some
	# parked); WAITING_STALL (600) s without one scheduled fails.
	local ing moved t_empty="" thr last=-1 changed=$SECONDS
	local stall=${WAITING_STALL:-600}
	thr=$(awk -v r="$wtrate" 'BEGIN { printf "%d", r < 1 ? 1 : r }')
	while :; do
		kill -0 "$daemon_pid" 2>/dev/null ||
			waiting_fail "the daemon exited: $(tail -n 3 "$dir/waiting.log")"
		moved=$(tail -n 1 "$dir/polls" | cut -d' ' -f2)
		moved=${moved:-0}
		if [ "$moved" -ne "$last" ]; then
			last=$moved changed=$SECONDS
		fi
		if [ "$moved" -ge "$n" ] || [ $((SECONDS - changed)) -ge 30 ]; then
			ing=$(waiting_ingress)
			if [ -n "$ing" ] && [ "$ing" -le "$thr" ]; then
				t_empty=$(now_s)
				break
			fi
		fi
		if [ $((SECONDS - changed)) -ge "$stall" ]; then
			waiting_fail "none scheduled for ${stall}s ($moved of $n;" \
				"P.ingress holds ${ing:-?}): delay levels full" \
				"(WAITING_MAX_LENGTH)? See $dir/waiting.log"
		fi
		sleep 2
	done
	sleep 1 # a poll after it
	touch "$dir/fill.done"
	# The mode auto chose (a canary decides native after msg=ready).
	mode=$({ curl -s --max-time 2 "http://127.0.0.1:$wmport/metrics" ||
		true; } | sed -n 's/^cascade_wait_mode{mode="\([a-z]*\)"} 1$/\1/p')
	wj "mode=\"${mode:-unknown}\""
	kill "$poll_pid" 2>/dev/null || true
	wait "$poll_pid" 2>/dev/null || true
	echo
	echo "## 2. The fill"
	echo
	echo "The daemon waits in mode ${mode:-unknown}."
	echo
	waiting_report fill "$wres" "$dir" "$n" "$owners" "$t0" "$t_pub" \
		"$t_empty" "$hz"

	# 3. The trickle: the chunk running ends, then WAITING_AFTER s more.
	waiting_step="3 trickle"
	echo "waiting for the trickle's last chunk during the fill" >&2
	wait "$trickle_pid" || true
	waiting_chunk after "$after"
	echo
	echo "## 3. The trickle ($wtrate msg/s, $wtdist, to wait.trickle)"
	echo
	local t_done
	t_done=$(/usr/bin/python3 -c 'import json, sys
print(float(sys.argv[2]) + json.load(open(sys.argv[1]))["fill"]["seconds"])' \
		"$wres" "$t0")
	waiting_report trickle "$wres" "$dir" "$t_done"
	echo
	echo "Minute by minute (the trickle by its due minute; the cores and the"
	echo "pressure stalls of the whole machine, /proc/stat and /proc/pressure):"
	echo
	waiting_report minutes "$wres" "$dir" "$t0" "$t_done" "$(getconf CLK_TCK)"

	# 4. Sizes.
	waiting_step="4 sizes"
	waiting_snapshot after
	echo
	echo "## 4. Sizes with $n waiting"
	echo
	waiting_report sizes "$wres" "$dir" "$n"

	# 5. cascade-ctl: its first page, a target, and a cancel of one id
	# of a million (the middle of the second owner's fill), each reading
	# P.events (--from-stream: no console is asked; step 6 asks one).
	waiting_step="5 cascade-ctl"
	local co=$((owners >= 2 ? 2 : 1)) cid
	cid="owner$co-$co-$(((share + 1) / 2))"
	echo
	echo "## 5. cascade-ctl"
	echo
	echo "| command | exit | wall ms | max RSS MiB | first line |"
	echo "|---|---|---|---|---|"
	# What a list costs with nothing waiting: the prefix wempty.
	wctl_ini=$dir/ctl-wempty.ini waiting_ctl list_empty list --from-stream \
		--limit 20
	wctl_ini=$dir/ctl-waiting.ini
	waiting_ctl list list --from-stream --limit 20
	waiting_ctl list_target list --from-stream \
		--target amq.default/wait.t3 --limit 20
	waiting_ctl cancel cancel --from-stream "$cid"
	waiting_cancelled cancel "$cid"

	# 6. The console.
	waiting_step="6 console"
	# The broker's CPU and the machine's while it catches up: whether
	# the console, the broker's sending or the disk bounds it.
	local cb0 cm0 cb1 cm1
	cb0=$(cpu_ticks "$beam")
	cm0=$(waiting_machine)
	console_start waiting
	cb1=$(cpu_ticks "$beam")
	cm1=$(waiting_machine)
	local records lwaiting cms start_ms
	read -r records lwaiting cms start_ms < <(console_caught_up waiting)
	console_token=$(curl -s -X POST -H 'Accept: application/json' \
		--data 'user=guest&password=guest' \
		"http://127.0.0.1:$console_port/login" |
		/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])') ||
		waiting_fail "the console's login as guest"
	echo
	echo "## 6. The console"
	echo
	echo "| | |"
	echo "|---|---|"
	echo "| records read | $records |"
	echo "| waiting | $lwaiting |"
	echo "| start to \`msg=console_caught_up\` | $start_ms ms ($((records * 1000 / (start_ms > 0 ? start_ms : 1))) records/s) |"
	echo "| console CPU at caught-up | $console_cpu ms |"
	local cbroker cmach
	cbroker=$(((cb1 - cb0) * 1000 / $(getconf CLK_TCK)))
	# cores busy, iowait (% of all cores), I/O stall (% of the time)
	cmach=$(awk -v a="$cm0" -v b="$cm1" -v ms="$start_ms" 'BEGIN {
		split(a, x, " "); split(b, y, " "); t = y[1] - x[1]
		if (t <= 0) t = 1
		printf "%.0f %.1f %.1f", 100 - (y[2] - x[2]) * 100 / t,
			(y[3] - x[3]) * 100 / t,
			(ms > 0 ? (y[6] - x[6]) / ms / 10 : 0) }')
	echo "| broker CPU from start to caught-up | $cbroker ms |"
	echo "| the machine meanwhile: cores busy, iowait, I/O stall | $(echo "$cmach" |
		awk '{printf "%s %%, %s %%, %s %% of the time", $1, $2, $3}') |"
	echo "| RSS at caught-up | $((console_rss / 1024)) MiB (peak $((console_hwm / 1024)) MiB) |"
	echo "| RSS on an empty prefix | $((console_base / 1024)) MiB |"
	echo "| RSS per waiting message beyond it | $(((console_rss - console_base) * 1024 / (lwaiting > 0 ? lwaiting : 1))) bytes |"
	wj "console.records=$records" "console.waiting=$lwaiting" \
		"console.start_to_caught_up_ms=$start_ms" \
		"console.reader_ms=$cms" "console.cpu_ms=$console_cpu" \
		"console.rss_kib=$console_rss" "console.hwm_kib=$console_hwm" \
		"console.base_rss_kib=$console_base" \
		"console.broker_cpu_ms=$cbroker"
	echo
	echo "| request | path | matched | status | bytes | p50 ms | max ms |"
	echo "|---|---|---|---|---|---|---|"
	# console_time writes its rows into $out/console.json: here a file
	# of this run's, read back.
	mkdir -p "$dir/console-out"
	rm -f "$dir/console-out/console.json"
	out=$dir/console-out console_time "first page" "/waiting?format=json"
	out=$dir/console-out console_time "search by message-id" \
		"/waiting?format=json&q=owner1-1-$(((share + 2) / 3))"
	out=$dir/console-out console_time "target filter (1 of $targets)" \
		"/waiting?format=json&target=amq.default/wait.t3"
	out=$dir/console-out console_time "owner filter (1 of $owners)" \
		"/waiting?format=json&owner=owner1"
	wj "console.requests=$(/usr/bin/python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["requests"]))' "$dir/console-out/console.json")"
	# cascade-ctl list and cancel again, answered from the console's
	# index ([console] listen names it: CONTRACT 7.2).
	printf '[broker]\nurl = %s\n[topology]\nprefix = waiting\n[console]\nlisten = 127.0.0.1:%s\n' \
		"$url" "$console_port" >"$dir/ctl-console.ini"
	local cid2="owner1-1-$(((share + 1) / 2))"
	echo
	echo "cascade-ctl with \`[console] listen\` naming the console:"
	echo
	echo "| command | exit | wall ms | max RSS MiB | first line |"
	echo "|---|---|---|---|---|"
	wctl_ini=$dir/ctl-console.ini
	waiting_ctl list_console list --limit 20
	waiting_ctl list_target_console list --target amq.default/wait.t3 \
		--limit 20
	waiting_ctl cancel_console cancel "$cid2"
	waiting_cancelled cancel_console "$cid2"
	# The console logs each question (msg=console_ctl kind status ms);
	# a status other than 200, or none, and cascade-ctl read the stream.
	local asked
	asked=$(grep "msg=console_ctl" "$dir/console-waiting.log" |
		sed 's/.* kind=\([a-z]*\) status=\([0-9]*\) rows=\([0-9]*\) ms=\([0-9]*\).*/\1 \2 (\3 rows, \4 ms)/' |
		paste -sd ';' - || true)
	echo
	echo "The console's log of those questions (kind, status): ${asked:-none}."
	wj "ctl.console_questions=\"${asked:-none}\""
	console_stop

	# 7. The daemon's restart.
	waiting_step="7 daemon restart"
	stop_daemon
	cp "$dir/waiting.log" "$dir/waiting-1.log"
	local t_start t_ready
	t_start=$(now_s)
	start_daemon waiting 2s 2 0 "$extra"
	t_ready=$(log_time "$dir/waiting.log" ready "$t_start")
	[ -n "$t_ready" ] || waiting_fail "no msg=ready in the daemon's log"
	local restart_ms
	restart_ms=$(ms_between "$t_start" "$t_ready")
	echo
	echo "## 7. The daemon's restart"
	echo
	echo "start to \`msg=ready\`: $restart_ms ms" \
		"($(grep -o 'cancellations=[0-9]*' "$dir/waiting.log" | tail -1)" \
		"held); RSS at ready $(($(rss_kib "$daemon_pid") / 1024)) MiB."
	wj "daemon_restart.start_to_ready_ms=$restart_ms"

	# 8. The whole broker's restart, with a trickle chunk that connects
	# again (cascade-bench run --reconnect): it publishes before the
	# stop and after the node is back, and counts every arrival.
	waiting_step="8 broker restart"
	local lead=${WAITING_RESTART_LEAD:-35}
	# Its publishing spans the lead, then WAITING_RESTART_AFTER s more:
	# the outage (two minutes at 10M on 3.10) and what follows it, so
	# that messages due after msg=ready say when deliveries are on time.
	(waiting_chunk restart $((lead + ${WAITING_RESTART_AFTER:-240})) \
		--reconnect 30m) &
	local rchunk=$!
	waiting_pids="$waiting_pids $rchunk"
	sleep "$lead"
	local s0 s1 r1 note="" beam_old=$beam
	s0=$(now_s)
	"$here/tools/rabbitmq-private" stop "$dir/broker" ||
		waiting_fail "rabbitmq-private stop"
	s1=$(now_s)
	kill -0 "$beam_old" 2>/dev/null && waiting_fail "beam.smp still runs"
	if ! "$here/tools/rabbitmq-private" restart "$dir/broker" \
		>/dev/null 2>"$dir/restart.err"; then
		# Its own wait gives up after 90 s; the node may still be
		# booting (recovering its queues): wait for it here.
		note="rabbitmq-private restart gave up ($(tail -n 1 \
			"$dir/restart.err")); waited with rabbitmqctl await_startup"
		echo "$note" >&2
		local until=$((SECONDS + ${WAITING_RESTART_WAIT:-3600}))
		until "$here/tools/rabbitmq-private" ctl "$dir/broker" \
			await_startup --timeout 10 >/dev/null 2>&1; do
			[ $SECONDS -lt $until ] ||
				waiting_fail "the node did not start again"
			sleep 2
		done
	fi
	r1=$(now_s)
	beam=$(cat "$dir/broker/pid")
	# The daemon connects again on its own (backoff up to [broker]
	# reconnect_max, 30 s by default).
	local r_ready=""
	for _ in $(seq 6000); do
		r_ready=$(log_time "$dir/waiting.log" ready "$s1")
		[ -n "$r_ready" ] && break
		kill -0 "$daemon_pid" 2>/dev/null ||
			waiting_fail "the daemon exited: $(tail -n 3 "$dir/waiting.log")"
		sleep 0.5
	done
	[ -n "$r_ready" ] || waiting_fail "the daemon was not ready again"
	echo "broker back; waiting for the trickle's chunk" >&2
	wait "$rchunk" || true
	echo
	echo "## 8. The whole broker's restart with $n waiting"
	echo
	waiting_report restart "$wres" "$dir" "$s0" "$s1" "$r1" "$r_ready" \
		"$note"

	# 9. The summary.
	waiting_step="9 summary"
	cp "$wres" "$wout/waiting-$n.json"
	# The logs, for what the tables cannot say (the broker's at info:
	# when each queue came up after its restart).
	cp "$dir/waiting.log" "$wout/waiting-$n-daemon.log" 2>/dev/null || true
	cat "$dir"/broker/log/*.log >"$wout/waiting-$n-broker.log" 2>/dev/null || true
	echo
	echo "## Summary ($wout/waiting-$n.json)"
	echo
	waiting_report summary "$wres"
	trap - ERR
	waiting_finished=yes
}
