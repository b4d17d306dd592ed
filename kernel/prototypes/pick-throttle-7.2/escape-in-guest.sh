#!/usr/bin/env bash
# A group limited to 20 ms per 100 ms (cgroup v2), and two spinning threads
# of one process pinned to one CPU, in the group itself or in a child of it:
# the group's CPU time per second over 3 s, ROUNDS rounds of each. Where a
# thread picked after its throttled sibling runs unthrottled (Linux 7.2.13),
# the child's rounds go far above the quota, or to 0 while the overrun is
# paid back.
#
#   escape-in-guest.sh [ROUNDS]
#
# Runs only in the guest of scripts/vm-run.sh (scripts/guest-check.sh), from
# the host:
#   scripts/vm-run.sh --kernel IMAGE -- kernel/prototypes/pick-throttle-7.2/escape-in-guest.sh 3
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/guest-check.sh
source "$here/../../../scripts/guest-check.sh"
cfsb_guest_script "${1:-}"
rounds=${1:-3}
cg=/sys/fs/cgroup
spin=/tmp/spinner
gcc -O1 -pthread -o "$spin" "$here/spinner.c"
echo +cpu >"$cg/cgroup.subtree_control"
use() { sed -n 's/^usage_usec //p' "$cg/L/cpu.stat"; }
for r in $(seq "$rounds"); do
	for where in group child; do
		mkdir "$cg/L"
		echo "20000 100000" >"$cg/L/cpu.max"
		dir=$cg/L
		if [[ $where == child ]]; then
			echo +cpu >"$cg/L/cgroup.subtree_control"
			mkdir "$cg/L/C"
			dir=$cg/L/C
		fi
		taskset -c 1 "$spin" "$dir" 2 &
		pid=$!
		sleep 1
		a=$(use)
		sleep 3
		b=$(use)
		echo "round $r, threads in the $where: $(((b - a) / 3)) us per second (quota 200000)"
		kill "$pid"
		wait "$pid" 2>/dev/null || true
		if [[ $where == child ]]; then
			rmdir "$cg/L/C"
			echo -cpu >"$cg/L/cgroup.subtree_control"
		fi
		rmdir "$cg/L"
	done
done
