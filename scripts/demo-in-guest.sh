#!/usr/bin/env bash
# Runs inside the guest (scripts/demo.sh): a CPU hog in a cgroup with a
# 50 ms / 100 ms quota, first alone, then while 20% of the wall time is
# charged to it as borrowed CPU time, then after one 300 ms charge. Prints
# the hog's share of a CPU in each phase and the cgroup's borrowing
# statistics. The loops use bash builtins only: forking is slow in QEMU TCG
# and would blur the timing.
#
#   scripts/vm-run.sh [--cgroup v1|v2] -- scripts/demo-in-guest.sh
#
# Runs only in that guest (scripts/guest-check.sh).
set -euo pipefail
# shellcheck source=scripts/guest-check.sh
source "$(dirname "$0")/guest-check.sh"
cfsb_guest_script "${1:-}"

root=/sys/fs/cgroup
if [[ $(stat -fc %T $root) == cgroup2fs ]]; then
	hier=v2
	cg=$root/borrowing-demo
	mkdir -p "$cg"
	echo "50000 100000" >"$cg/cpu.max"
else
	hier=v1
	cg=$root/cpu/borrowing-demo
	mkdir -p "$cg"
	echo 100000 >"$cg/cpu.cfs_period_us"
	echo 50000 >"$cg/cpu.cfs_quota_us"
fi

# usage: the hog's CPU time in microseconds, into $REPLY.
usage() {
	local key value
	if [[ $hier == v2 ]]; then
		while read -r key value; do
			[[ $key == usage_usec ]] && break
		done <"$cg/cpu.stat"
		REPLY=$value
	else
		read -r value <"$cg/cpuacct.usage"
		REPLY=$((value / 1000))
	fi
}
# now: monotonic-enough wall time in microseconds, into $REPLY.
now() { REPLY=${EPOCHREALTIME/./}; }
# nap: sleep 0.1 s without forking.
fifo=$(mktemp -u /tmp/demo.XXXXXX)
mkfifo "$fifo"
exec 9<>"$fifo"
rm "$fifo"
nap() { read -rt 0.1 -u 9 || true; }

taskset -c 0 bash -c 'while :; do :; done' &
hog=$!
trap 'kill $hog 2>/dev/null; wait 2>/dev/null; rmdir "$cg"' EXIT
echo "$hog" >"$cg/cgroup.procs"
sleep 0.5

# share SECONDS [PERCENT]: the hog's share of a CPU, in thousandths of a
# percent, over SECONDS while PERCENT of the wall time is charged to it
# every ~100 ms.
share() {
	local secs=$1 percent=${2:-0} u0 t0 t charged=0 due
	now; t0=$REPLY
	usage; u0=$REPLY
	t=$t0
	while ((t - t0 < secs * 1000000)); do
		due=$(((t - t0) * percent / 100))
		if ((due > charged)); then
			echo $((due - charged)) >"$cg/cpu.cfs.borrowing_us"
			charged=$due
		fi
		nap
		now; t=$REPLY
	done
	usage
	echo $(((REPLY - u0) * 100000 / (t - t0)))
}
pct() { printf '%d.%03d%%' $(($1 / 1000)) $(($1 % 1000)); }

echo "cgroup $hier, kernel $(uname -r): a CPU hog limited to 50 ms per 100 ms period"
alone=$(share 3)
echo "  alone:                     $(pct "$alone") of a CPU (quota: 50%)"
charged=$(share 3 20)
echo "  charged 20% of wall time:  $(pct "$charged") of a CPU (expected 50% - 20% = 30%)"
echo "  one charge of 300 ms (six periods' quota), then:"
echo "      ms  still owed (us)  hog CPU since (us)"
usage; u0=$REPLY
now; t0=$REPLY
echo 300000 >"$cg/cpu.cfs.borrowing_us"
for _ in 1 2 3 4 5 6 7 8 9 10; do
	nap
	now; t=$REPLY
	usage; u=$REPLY
	read -r owed <"$cg/cpu.cfs.borrowing_us"
	printf '    %4d  %15d  %18d\n' $(((t - t0) / 1000)) "$owed" $((u - u0))
done
after=$(share 2)
echo "  once paid off:             $(pct "$after") of a CPU"
echo "  cpu.stat:"
grep -E 'borrow' "$cg/cpu.stat" | sed 's/^/    /'
