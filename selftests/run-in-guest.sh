#!/usr/bin/env bash
# Runs test suites inside the guest (scripts/vm-run.sh) and keeps each
# suite's TAP output in a results directory for scripts/tap_summary.py.
#   run-in-guest.sh [--bin DIR] RESULTS_DIR SUITE...
# --bin: where the test programs are (default .build/selftests; another
# kernel's or architecture's build: make -C selftests OUT=DIR).
# Suites: kunit (the sched_cfs_borrowing KUnit results of this boot),
#         borrowing (test_borrowing), test_cpu (upstream cgroup cpu tests),
#         stress (stress_borrowing, 100000 writes), stress-full (1 million
#         writes, 20 minutes at most), kmemleak (a scan of kmemleak, which
#         must find nothing; on a kernel with CONFIG_DEBUG_KMEMLEAK);
#         on cgroup v1: hybrid (test_borrowing with a cgroup2 mount listed
#         before the cpu hierarchy, as systemd's hybrid mode has one) and
#         cpuset (test_borrowing in a cpuset without CPU 0); on cgroup v2:
#         no-nsdelegate (the permission tests with nsdelegate turned off).
# Runs only in that guest (scripts/guest-check.sh; on a board that is there
# to be tested: CFSB_GUEST_ANYWHERE=1).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/guest-check.sh
source "$here/../scripts/guest-check.sh"
cfsb_guest_script "${1:-}"
bin=$here/../.build/selftests
if [[ ${1:-} == --bin ]]; then
	bin=${2:?--bin needs a directory}
	shift 2
fi
results=${1:?usage: run-in-guest.sh [--bin DIR] RESULTS_DIR SUITE...}
shift
mkdir -p "$results"

run_suite() {
	local name=$1
	shift
	echo "# ---- $name ($(uname -r), cgroup $(stat -fc %T /sys/fs/cgroup)) ----"
	# Line-buffered: the tests fork, and a child must not inherit (and
	# print again) output still sitting in a full stdio buffer.
	local buffering=(stdbuf -oL -eL)
	[[ $(type -t "$1") == function ]] && buffering=()
	"${buffering[@]}" "$@" 2>&1 | tee "$results/$name.tap"
	return "${PIPESTATUS[0]}"
}

# shellcheck disable=SC2317 # called through run_suite
kunit_results() {
	local f=/sys/kernel/debug/kunit/sched_cfs_borrowing/results
	if [[ ! -r $f ]]; then
		echo "not ok 1 sched_cfs_borrowing # the KUnit suite did not run in this kernel"
		return 1
	fi
	cat "$f"
}

# shellcheck disable=SC2317 # called through run_suite
kmemleak_scan() {
	local f=/sys/kernel/debug/kmemleak leaks
	echo "TAP version 13"
	echo "1..1"
	if [[ ! -w $f ]]; then
		echo "not ok 1 kmemleak # no $f in this kernel"
		return 1
	fi
	# Twice: an object is reported once it stayed unreferenced for a scan.
	echo scan >"$f"
	sleep 6
	echo scan >"$f"
	leaks=$(cat "$f")
	if [[ -n $leaks ]]; then
		printf '%s\n' "$leaks" | head -60 | sed 's/^/# /'
		echo "not ok 1 kmemleak: $(grep -c '^unreferenced object' <<<"$leaks") unreferenced objects"
		return 1
	fi
	echo "ok 1 kmemleak: no unreferenced object"
}

# shellcheck disable=SC2317 # called through run_suite
hybrid() {
	if [[ ! -d /sys/fs/cgroup/cpu,cpuacct ]]; then
		echo "1..0 # SKIP a hybrid set-up has the cpu controller on cgroup v1"
		return 0
	fi
	# In a mount namespace of its own: a cgroup2 mount without the cpu
	# controller, then the cpu hierarchy mounted again after it.
	# shellcheck disable=SC2016 # expanded by the inner shell
	unshare -m --propagation private bash -c '
		set -e
		unified=$(mktemp -d)
		umount /sys/fs/cgroup/cpu,cpuacct
		mount -t cgroup2 cgroup2 "$unified"
		mount -t cgroup -o cpu,cpuacct cgroup /sys/fs/cgroup/cpu,cpuacct
		exec "$@"' hybrid "$bin/test_borrowing" \
		-t present_and_zero -t limited_ancestors_owe_too -t worker_names_the_cut
}

# shellcheck disable=SC2317 # called through run_suite
cpuset() {
	local cs=/sys/fs/cgroup/cpuset/borrowing_cpuset_$$ last rc
	last=$(($(nproc --all) - 1))
	if [[ ! -d /sys/fs/cgroup/cpuset ]] || ((last < 1)); then
		echo "1..0 # SKIP needs cgroup v1's cpuset hierarchy and two CPUs"
		return 0
	fi
	# The tests' own cpuset leaves CPU 0 out; their cpu groups do not
	# change it (cgroup v1: another hierarchy).
	mkdir "$cs"
	echo "$last" >"$cs/cpuset.cpus"
	cat /sys/fs/cgroup/cpuset/cpuset.mems >"$cs/cpuset.mems"
	(
		echo "$BASHPID" >"$cs/cgroup.procs"
		exec "$bin/test_borrowing" -t debt_above_quota_throttles_then_is_paid \
			-t every_cpu_progresses_every_period -t charges_reduce_share
	)
	rc=$?
	rmdir "$cs"
	return "$rc"
}

# shellcheck disable=SC2317 # called from no_nsdelegate
nsdelegate_on() {
	grep -q '^cgroup2 /sys/fs/cgroup .*nsdelegate' /proc/mounts
}

# shellcheck disable=SC2317 # called through run_suite
no_nsdelegate() {
	local rc
	if ! nsdelegate_on; then
		echo "1..0 # SKIP needs cgroup v2 mounted on /sys/fs/cgroup with nsdelegate"
		return 0
	fi
	# nsdelegate is the hierarchy's, not a mount's: a remount without it
	# turns it off until the remount with it (naming the source, so that
	# mount(8) does not carry the current options over).
	mount -o remount cgroup2 /sys/fs/cgroup || return 1
	if nsdelegate_on; then
		echo "not ok 1 nsdelegate is still on after a remount without it"
		return 1
	fi
	"$bin/test_borrowing" -t cgroup_namespace_bounds_the_writer \
		-t cgroup_namespace_bounds_the_ids -t the_opener_decides \
		-t delegatee_charges_inside_its_subtree_only
	rc=$?
	mount -o remount,nsdelegate cgroup2 /sys/fs/cgroup || rc=1
	return "$rc"
}

status=0
for suite in "$@"; do
	case $suite in
	kunit) run_suite kunit kunit_results || status=1 ;;
	borrowing) run_suite borrowing "$bin/test_borrowing" || status=1 ;;
	test_cpu) run_suite test_cpu "$bin/test_cpu" || status=1 ;;
	stress) run_suite stress "$bin/stress_borrowing" -n 100000 -t 120 || status=1 ;;
	stress-full) run_suite stress-full "$bin/stress_borrowing" -n 1000000 -t 1200 || status=1 ;;
	kmemleak) run_suite kmemleak kmemleak_scan || status=1 ;;
	hybrid) run_suite hybrid hybrid || status=1 ;;
	cpuset) run_suite cpuset cpuset || status=1 ;;
	no-nsdelegate) run_suite no-nsdelegate no_nsdelegate || status=1 ;;
	*) echo "unknown suite $suite" >&2; status=2 ;;
	esac
done
exit $status
