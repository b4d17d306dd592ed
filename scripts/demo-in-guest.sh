#!/usr/bin/env bash
# Runs inside the guest (scripts/demo.sh): a CPU hog in a cgroup with a
# 50 ms / 100 ms quota, first alone, then while a writer charges it 20 ms of
# borrowed CPU time per period, then after one 300 ms charge. Prints the
# hog's share of a CPU in each phase and the cgroup's borrowing statistics.
set -euo pipefail

root=/sys/fs/cgroup
if [[ $(stat -fc %T $root) == cgroup2fs ]]; then
	hier=v2
	cg=$root/borrowing-demo
	mkdir -p "$cg"
	echo "50000 100000" >"$cg/cpu.max"
	usage() { awk '$1 == "usage_usec" { print $2 }' "$cg/cpu.stat"; }
else
	hier=v1
	cg=$root/cpu/borrowing-demo
	mkdir -p "$cg"
	echo 100000 >"$cg/cpu.cfs_period_us"
	echo 50000 >"$cg/cpu.cfs_quota_us"
	usage() { echo $(($(cat "$cg/cpuacct.usage") / 1000)); }
fi

taskset -c 0 bash -c 'while :; do :; done' &
hog=$!
trap 'kill $hog 2>/dev/null; wait 2>/dev/null; rmdir "$cg"' EXIT
echo "$hog" >"$cg/cgroup.procs"
sleep 0.5

# share SECONDS [CHARGE_US]: the hog's share of a CPU, in percent, over
# SECONDS while CHARGE_US is charged every 100 ms.
share() {
	local secs=$1 charge=${2:-0} u0 t0 u1 t1 i
	u0=$(usage)
	t0=$(date +%s%N)
	for ((i = 0; i < secs * 10; i++)); do
		[[ $charge -gt 0 ]] && echo "$charge" >"$cg/cpu.cfs.borrowing_us"
		sleep 0.1
	done
	u1=$(usage)
	t1=$(date +%s%N)
	echo $(((u1 - u0) * 100000 / ((t1 - t0) / 1000)))
}
pct() { printf '%d.%03d%%' $(($1 / 1000)) $(($1 % 1000)); }

echo "cgroup $hier, kernel $(uname -r): a CPU hog limited to 50 ms per 100 ms period"
alone=$(share 3)
echo "  alone:                            $(pct "$alone") of a CPU (quota: 50%)"
charged=$(share 3 20000)
echo "  charged 20 ms per period:         $(pct "$charged") of a CPU (expected 50% - 20% = 30%)"
u0=$(usage)
echo 300000 >"$cg/cpu.cfs.borrowing_us"
sleep 0.5
echo "  after a 300 ms charge: $(($(usage) - u0)) us used in the next 500 ms, $(cat "$cg/cpu.cfs.borrowing_us") us still owed"
sleep 0.5
after=$(share 2)
echo "  once paid off:                    $(pct "$after") of a CPU"
echo "  cpu.stat:"
grep -E 'borrow' "$cg/cpu.stat" | sed 's/^/    /'
