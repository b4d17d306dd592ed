# shellcheck shell=bash
# What the tools' test scripts share (sourced, not run): TAP lines, running
# the tool under test ($bin), and cgroups with or without a quota.

# shellcheck source=scripts/guest-check.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/guest-check.sh"

n=0 failed=0
# test_mode ARG: the script's mode (host, guest or stock) into $mode, after
# --help (the script's header). guest and stock make groups at the root of
# the hierarchy: in the guest only.
test_mode() {
	case $1 in
	-h | --help) awk '/^# Tests of/, /^# Expects/' "$0" | cut -c3-; exit 0 ;;
	host) ;;
	guest | stock) cfsb_guest_only ;;
	*) echo "usage: ${0##*/} host|guest|stock (--help)" >&2; exit 2 ;;
	esac
	# shellcheck disable=SC2034 # the caller reads it
	mode=$1
}
# check NAME CONDITION: one TAP line; the last run's output on failure.
check() {
	n=$((n + 1))
	if eval "$2"; then
		echo "ok $n $1"
	else
		echo "not ok $n $1 # exit $rc: ${out:0:300}"
		failed=$((failed + 1))
	fi
}
info() { echo "# info: $*"; }
# run_mode MODE: the TAP stream of the script's MODE_tests (host, guest or
# stock), and whether they all passed.
run_mode() {
	echo "TAP version 13"
	case $1 in
	host | guest | stock) "$1_tests" ;;
	*) echo "Bail out! unknown mode $1"; exit 2 ;;
	esac
	echo "1..$n"
	[[ $failed -eq 0 ]]
}
# run ARG...: $bin's output (stdout and stderr) in $out, status in $rc.
run() { out=$("${bin:?}" "$@" 2>&1) && rc=0 || rc=$?; }

cpu_root() { [[ -e /sys/fs/cgroup/cgroup.controllers ]] && echo /sys/fs/cgroup || echo /sys/fs/cgroup/cpu; }
# make_group NAME [QUOTA_US]: a cgroup under the cpu root, with QUOTA_US per
# 100 ms when given.
make_group() {
	local dir
	dir=$(cpu_root)/$1
	mkdir -p "$dir"
	[[ -z ${2:-} ]] || group_quota "$dir" "$2"
}
# group_quota DIR QUOTA_US: QUOTA_US per 100 ms for the group at DIR.
group_quota() {
	if [[ -e $1/cpu.max ]]; then
		echo "$2 100000" >"$1/cpu.max"
	else
		echo 100000 >"$1/cpu.cfs_period_us"
		echo "$2" >"$1/cpu.cfs_quota_us"
	fi
}

# counters DIR: the group's CPU time (us) into U, its periods and
# throttled periods (cpu.stat: what cAdvisor, and so kubelet, exports as
# container_cpu_cfs_periods_total and ..._throttled_periods_total) into P
# and T, what the kernel counted as charged (us; 0 without
# cpu.cfs.borrowing_us) into K, with bash's builtins (forks are slow in the
# guest under load). A kernel that counts what is outstanding counts every
# charge as borrowed, the first series counted the dropped part apart.
# shellcheck disable=SC2034 # the callers read them
counters() {
	local key v borrowed=0 dropped=0 outstanding=0
	U=0 P=0 T=0
	while read -r key v; do
		case $key in
		usage_usec) U=$v ;;
		nr_periods) P=$v ;;
		nr_throttled) T=$v ;;
		borrowed_usec) borrowed=$v ;;
		borrowed_time) borrowed=$((v / 1000)) ;;
		borrow_dropped_usec) dropped=$v ;;
		borrow_dropped_time) dropped=$((v / 1000)) ;;
		borrow_outstanding_usec | borrow_outstanding_time) outstanding=1 ;;
		esac
	done <"$1/cpu.stat"
	# v1: cpuacct mounted with cpu (cpu,cpuacct), in ns.
	if [[ -f $1/cpuacct.usage ]]; then
		read -r v <"$1/cpuacct.usage"
		U=$((v / 1000))
	fi
	K=$((borrowed + (outstanding ? 0 : dropped)))
}
# process_runtime PID: CPU time of a process and all its threads (ns).
process_runtime() {
	local t sum=0 v
	for t in /proc/"$1"/task/*/schedstat; do
		read -r v _ <"$t" && sum=$((sum + v))
	done
	echo "$sum"
}
