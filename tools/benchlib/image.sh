# shellcheck shell=bash disable=SC2034,SC2154
# SPDX-License-Identifier: Apache-2.0
# tools/bench image: the container image's size, and the daemon's start
# in it: podman run to msg=ready, and to a healthy health check.
# Sourced by tools/bench: its header has the settings; it sets $here, $B,
# $out, $dir, $url and $beam and defines start_daemon, stop_daemon,
# cpu_ticks and delete_queues.

image() {
	local img=${IMAGE_BENCH:-localhost/cascade:test} n=${IMAGE_STARTS:-10}
	local nofile i name t0 ready healthy size base
	podman image exists "$img" || {
		echo "no image $img: make test-image (or make image" \
			"IMAGE=$img) builds it" >&2
		exit 1
	}
	nofile=$(ulimit -Hn)
	size=$(podman image inspect --format '{{.Size}}' "$img")
	base=$(podman image inspect --format '{{.Size}}' \
		docker.io/library/debian:bookworm-slim 2>/dev/null || echo 0)
	echo "image $img: $((size / 1000000)) MB, of which the base" \
		"$((base / 1000000)) MB"
	echo "start  ready_s  healthy_s" | tee "$out/image.txt"
	for i in $(seq "$n"); do
		name=cascade-bench-image-$i
		t0=$(date +%s.%N)
		podman run -d --name "$name" --runtime runc --network host \
			--ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096 \
			--read-only --read-only-tmpfs=false \
			-e CASCADE_BROKER_URL="$url" "$img" \
			cascade -c /etc/cascade/cascade.ini >/dev/null 2>&1
		for _ in $(seq 3000); do
			podman logs "$name" 2>&1 | grep -q msg=ready && break
			sleep 0.02
		done
		podman logs "$name" 2>&1 | grep -q msg=ready || {
			podman logs "$name" >&2
			podman rm -f "$name" >/dev/null 2>&1
			exit 1
		}
		ready=$(date +%s.%N)
		for _ in $(seq 3000); do
			podman healthcheck run "$name" >/dev/null 2>&1 && break
			sleep 0.02
		done
		healthy=$(date +%s.%N)
		podman rm -f -t 30 "$name" >/dev/null 2>&1
		awk -v i="$i" -v a="$t0" -v r="$ready" -v h="$healthy" \
			'BEGIN { printf "%5d  %7.2f  %9.2f\n", i, r - a, h - a }' |
			tee -a "$out/image.txt"
	done
	delete_queues cascade
}
