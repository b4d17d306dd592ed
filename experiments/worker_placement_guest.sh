#!/usr/bin/env bash
# Runs inside the guest (cgroup v2): where a per-client worker's CPU time
# goes. A client limited to 50 ms per 100 ms floods a pipe ("yes"); a
# worker ("cat" to /dev/null) drains it, on the same CPU. Three placements:
#   separate  the worker in a cgroup of its own, nothing charged;
#   inside    the worker moved into the client's cgroup (CRI-O's
#             conmon_cgroup=pod approach);
#   charged   the worker in its own cgroup, its CPU time charged to the
#             client every 100 ms ("USEC PID" to cpu.cfs.borrowing_us).
# Prints the client's and the worker's shares of a CPU and their sum.
#   scripts/vm-run.sh -- experiments/worker_placement_guest.sh [SECONDS]
# Runs only in that guest (scripts/guest-check.sh).
set -euo pipefail
# shellcheck source=scripts/guest-check.sh
source "$(dirname "$0")/../scripts/guest-check.sh"
cfsb_guest_script "${1:-}"

secs=${1:-5}
root=/sys/fs/cgroup
[[ $(stat -fc %T $root) == cgroup2fs ]] || { echo "cgroup v2 only" >&2; exit 2; }
echo +cpu >"$root/cgroup.subtree_control"
client=$root/placement-client
worker=$root/placement-worker
mkdir -p "$client" "$worker"
echo "50000 100000" >"$client/cpu.max"
fifo_dir=$(mktemp -d)
mkfifo "$fifo_dir/pipe"
pids=()
cleanup() {
	kill "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	rmdir "$client" "$worker" 2>/dev/null || true
	rm -rf "$fifo_dir"
}
trap cleanup EXIT

# Without forking in the loops: QEMU TCG makes forks slow and blurs timing.
now() { REPLY=${EPOCHREALTIME/./}; }
usage() {
	local key value
	while read -r key value; do
		[[ $key == usage_usec ]] && break
	done <"$1/cpu.stat"
	REPLY=$value
}
oncpu() { local ns rest; read -r ns rest <"/proc/$1/schedstat"; REPLY=$((ns / 1000)); }
exec 9<>"$fifo_dir/pipe"
nap() { read -rt 0.1 -u 8 || true; }
mkfifo "$fifo_dir/nap"
exec 8<>"$fifo_dir/nap"

# run MODE: starts the pair, measures for $secs, stops them.
run() {
	local mode=$1 cpid wpid c0 w0 t0 c1 w1 t1 last cur
	taskset -c 0 bash -c "echo \$\$ >$client/cgroup.procs; exec yes >$fifo_dir/pipe" &
	cpid=$!
	taskset -c 0 bash -c "echo \$\$ >$([[ $mode == inside ]] && echo "$client" || echo "$worker")/cgroup.procs; exec cat $fifo_dir/pipe >/dev/null" &
	wpid=$!
	pids=("$cpid" "$wpid")
	sleep 1
	oncpu "$wpid"; w0=$REPLY last=$REPLY
	# The client's own CPU: its group's, less the worker's when inside.
	usage "$client"; c0=$REPLY
	now; t0=$REPLY
	t1=$t0
	while ((t1 - t0 < secs * 1000000)); do
		nap
		if [[ $mode == charged ]]; then
			oncpu "$wpid"; cur=$REPLY
			((cur > last)) && echo "$((cur - last)) $wpid" >"$client/cpu.cfs.borrowing_us"
			last=$cur
		fi
		now; t1=$REPLY
	done
	usage "$client"; c1=$REPLY
	oncpu "$wpid"; w1=$REPLY
	kill "$cpid" "$wpid"
	wait "$cpid" "$wpid" 2>/dev/null || true
	local w=$((w1 - w0)) c=$((c1 - c0))
	[[ $mode == inside ]] && c=$((c - w))
	printf '  %-9s %9s %9s %9s\n' "$mode" "$(pct $c $((t1 - t0)))" "$(pct $w $((t1 - t0)))" \
		"$(pct $((c + w)) $((t1 - t0)))"
}
pct() { local p=$(($1 * 100000 / $2)); printf '%d.%02d%%' $((p / 1000)) $((p % 1000 / 10)); }

echo "kernel $(uname -r): client 'yes' limited to 50 ms per 100 ms, worker 'cat' on the same CPU, ${secs} s each"
printf '  %-9s %9s %9s %9s\n' placement client worker sum
for mode in separate inside charged; do
	run "$mode"
done
echo "  (quota: 50%; the client's share excludes the worker's time in every placement)"
