#!/usr/bin/env bash
# The CFS period timer's cost when many groups owe borrowing: the time the
# CPUs spend in sched_cfs_period_timer(), from the hrtimer_expire_entry and
# hrtimer_expire_exit tracepoints (trace clock x86-tsc: TSC cycles), over a
# window of SECONDS, in three cases:
#   busy     one group with a quota and a spinner in it, nothing charged
#            (the timer every bandwidth-limited, running group has);
#   idle     GROUPS idle groups with a quota, nothing charged (their
#            timers have stopped);
#   charged  the same GROUPS idle groups, each charged its bound (one
#            second's worth of its quota): each timer runs until the debt
#            is paid, and each refill scans every online CPU (the floor).
# Prints, per case, the callbacks per second, the mean TSC cycles per
# callback and the share of all CPUs' time spent in the callbacks; it
# asserts nothing.
#
#   bench_period_timer_guest.sh [GROUPS [SECONDS]]    (defaults: 500 groups, 1 s)
#
# Runs in the guest of scripts/vm-run.sh only (scripts/guest-check.sh), on
# cgroup v2 and x86 (the TSC trace clock), as root; e.g. with 16 vCPUs on
# the instruction clock, where a cycle is an emulated instruction's share:
#   scripts/vm-run.sh --icount 0 --cpus 16 --kernel IMAGE --cgroup v2 -- \
#       selftests/bench_period_timer_guest.sh 500 1
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/guest-check.sh
source "$here/../scripts/guest-check.sh"
cfsb_guest_script "${1:-}"

groups=${1:-500}
seconds=${2:-1}
[[ $groups =~ ^[1-9][0-9]*$ && $seconds =~ ^[1-9][0-9]*$ ]] ||
	{ echo "usage: ${0##*/} [GROUPS [SECONDS]]" >&2; exit 2; }
root=/sys/fs/cgroup
tr=/sys/kernel/tracing
bench=$root/bench_period_timer
quota_us=50000 period_us=100000
bound_us=$((quota_us * 1000000 / period_us))

[[ -f $root/cgroup.controllers ]] || { echo "${0##*/}: cgroup v2 only" >&2; exit 2; }
[[ -d $tr/events ]] || mount -t tracefs tracefs "$tr"
addr=$(awk '$3 == "sched_cfs_period_timer" { print $1; exit }' /proc/kallsyms)
[[ -n $addr && $addr != 0000000000000000 ]] ||
	{ echo "${0##*/}: no address for sched_cfs_period_timer in /proc/kallsyms" >&2; exit 2; }
grep -qw x86-tsc "$tr/trace_clock" || { echo "${0##*/}: no x86-tsc trace clock" >&2; exit 2; }

spinner=0
cleanup() {
	echo 0 >"$tr/tracing_on"
	echo 0 >"$tr/events/timer/hrtimer_expire_entry/enable"
	echo 0 >"$tr/events/timer/hrtimer_expire_exit/enable"
	echo 0 >"$tr/events/timer/hrtimer_expire_entry/filter"
	((spinner > 0)) && kill -9 "$spinner" 2>/dev/null
	wait 2>/dev/null || true
	local g
	for g in "$bench"/*/; do rmdir "$g" 2>/dev/null || true; done
	rmdir "$bench" 2>/dev/null || true
}
trap cleanup EXIT

mkdir "$bench"
echo +cpu >"$bench/cgroup.subtree_control"
for ((i = 0; i < groups; i++)); do
	mkdir "$bench/g$i"
	echo "$quota_us $period_us" >"$bench/g$i/cpu.max"
done

echo x86-tsc >"$tr/trace_clock"
echo 8192 >"$tr/buffer_size_kb"
echo "function == 0x$addr" >"$tr/events/timer/hrtimer_expire_entry/filter"

# window NAME: trace SECONDS and print NAME's line: the exits are matched
# to the entries of the period timer on the same CPU and hrtimer.
window() {
	echo 0 >"$tr/tracing_on"
	: >"$tr/trace"
	echo 1 >"$tr/events/timer/hrtimer_expire_entry/enable"
	echo 1 >"$tr/events/timer/hrtimer_expire_exit/enable"
	echo 1 >"$tr/tracing_on"
	sleep "$seconds"
	echo 0 >"$tr/tracing_on"
	awk -v name="$1" -v secs="$seconds" -v cpus="$(nproc)" -v khz="$tsc_khz" '
		/hrtimer_expire_(entry|exit):/ {
			for (i = 1; i <= NF; i++) {
				if ($i ~ /^\[[0-9]+\]$/) cpu = $i
				if ($i ~ /^[0-9]+:$/) ts = substr($i, 1, length($i) - 1)
				if ($i ~ /^hrtimer=/) t = $i
			}
			key = cpu " " t
			if (/hrtimer_expire_entry:/) { start[key] = ts; next }
			if (key in start) { n++; cycles += ts - start[key]; delete start[key] }
		}
		END {
			per = n ? cycles / n : 0
			printf "%-8s %7.0f callbacks/s %9.0f cycles per callback %8.4f %% of %d CPUs\n",
				name, n / secs, per, 100 * cycles / (secs * cpus * khz * 1000), cpus
		}' "$tr/trace"
}

tsc_khz=$(awk -F': *' '/^cpu MHz/ { printf "%d", $2 * 1000; exit }' /proc/cpuinfo)
echo "# $(uname -r), $(nproc) CPUs, TSC $tsc_khz kHz; $groups groups at $quota_us/$period_us us, ${seconds} s windows"

# One running, limited group: the timer of any busy group.
(
	echo "$BASHPID" >"$bench/g0/cgroup.procs"
	exec sh -c 'while :; do :; done'
) &
spinner=$!
sleep 1
window busy
kill -9 "$spinner"
wait "$spinner" 2>/dev/null || true
spinner=0
sleep 1
window idle

# Every group owes its bound; then the timers run until it is paid.
for ((i = 0; i < groups; i++)); do
	echo "$bound_us" >"$bench/g$i/cpu.cfs.borrowing_us"
done
window charged
owed=0
for ((i = 0; i < groups; i++)); do
	owed=$((owed + $(cat "$bench/g$i/cpu.cfs.borrowing_us")))
done
echo "# still owed after the charged window: $((owed / 1000)) ms in all"
