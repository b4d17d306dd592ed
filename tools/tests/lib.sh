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
	[[ -n ${2:-} ]] || return 0
	if [[ -e $dir/cpu.max ]]; then
		echo "$2 100000" >"$dir/cpu.max"
	else
		echo 100000 >"$dir/cpu.cfs_period_us"
		echo "$2" >"$dir/cpu.cfs_quota_us"
	fi
}

# process_runtime PID: CPU time of a process and all its threads (ns).
process_runtime() {
	local t sum=0 v
	for t in /proc/"$1"/task/*/schedstat; do
		read -r v _ <"$t" && sum=$((sum + v))
	done
	echo "$sum"
}
