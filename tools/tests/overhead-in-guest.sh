#!/usr/bin/env bash
# borrowd's own CPU with N idle containers, in the guest (scripts/vm-run.sh
# on the patched kernel): each "container" is Podman's metadata for a
# sleeping init process in a cgroup of its own with a quota, and a sleeping
# conmon, so that borrowd finds N workers, scans the metadata every second
# and looks at each worker every 100 ms, as it would on a node.
#
#   overhead-in-guest.sh [--seconds S] N...      (default: 10 100 500)
set -uo pipefail

secs=10
while [[ $# -gt 0 ]]; do
	case $1 in
	--seconds) secs=$2; shift 2 ;;
	-h | --help) sed -n '2,8p' "$0" | cut -c3-; exit 0 ;;
	-*) echo "unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[[ $# -gt 0 ]] || set -- 10 100 500

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/guest-check.sh
source "$root/scripts/guest-check.sh"
cfsb_guest_only
# shellcheck source=tools/tests/lib.sh
source "$root/tools/tests/lib.sh"
bin=$root/.build/tools/borrowd
run=$(mktemp -d)
cg=/sys/fs/cgroup
[[ -e $cg/cgroup.controllers ]] || cg=/sys/fs/cgroup/cpu
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$run"
}
trap cleanup EXIT


made=0
echo "# kernel $(uname -r), cgroup $(stat -fc %T /sys/fs/cgroup); borrowd's CPU over ${secs} s"
printf '%10s %12s %14s\n' containers "CPU (ms/s)" "per 100 (ms/s)"
for n in "$@"; do
	for ((; made < n; made++)); do
		id=$(printf 'c%063d' "$made")
		dir=$run/containers/storage/overlay-containers/$id/userdata
		mkdir -p "$dir" "$cg/ovh-$made"
		if [[ -e $cg/ovh-$made/cpu.max ]]; then
			echo "50000 100000" >"$cg/ovh-$made/cpu.max"
		else
			echo 50000 >"$cg/ovh-$made/cpu.cfs_quota_us"
		fi
		# conmon, and its child the container's init (borrowd takes a
		# conmon that is the parent of the container's first process).
		bash -c 'sleep 3600 & echo $! >"$1"; exec sleep 3600' _ "$dir/pidfile.new" &
		pids+=("$!")
		echo "$!" >"$dir/conmon.pid"
		until [[ -s $dir/pidfile.new ]]; do sleep 0.01; done
		mv "$dir/pidfile.new" "$dir/pidfile"
		pids+=("$(cat "$dir/pidfile")")
		cat "$dir/pidfile" >"$cg/ovh-$made/cgroup.procs"
	done
	CGBORROW_RUNDIR=$run taskset -c 1 "$bin" --engines podman >"$run/borrowd.log" 2>&1 &
	bpid=$!
	# Started when it has found every worker.
	for ((i = 0; i < 300; i++)); do
		[[ $(grep -c "works for" "$run/borrowd.log") -ge $n ]] && break
		sleep 0.1
	done
	r0=$(process_runtime "$bpid")
	sleep "$secs"
	r1=$(process_runtime "$bpid")
	kill -TERM "$bpid"
	wait "$bpid"
	ms=$(((r1 - r0) / 1000 / secs))
	printf '%10d %12s %14s\n' "$n" "$((ms / 1000)).$(printf %03d $((ms % 1000)))" \
		"$(python3 -c "print(f'{$ms / 1000 * 100 / $n:.3f}')")"
done
