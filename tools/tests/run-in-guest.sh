#!/usr/bin/env bash
# Runs the tools' test suites inside the guest (scripts/vm-run.sh), one
# boot for all of them, and keeps each suite's TAP output in RESULTS_DIR.
#   run-in-guest.sh RESULTS_DIR SUITE...
# Suites: cgborrow and borrowd (on the patched kernel), borrowd-hierarchy
# (borrowd's tests whose code reads the cgroup hierarchy: borrowd.sh guest
# hierarchy, into borrowd.tap), cgborrow-stock and borrowd-stock (the stock
# kernel's "lacks the feature" errors and borrowd's quota mode).
# Runs only in that guest (scripts/guest-check.sh).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/guest-check.sh
source "$here/../../scripts/guest-check.sh"
cfsb_guest_script "${1:-}"
results=${1:?usage: run-in-guest.sh RESULTS_DIR SUITE...}
shift
mkdir -p "$results"

run_suite() {
	local name=$1
	shift
	echo "# ---- $name ($(uname -r), cgroup $(stat -fc %T /sys/fs/cgroup)) ----"
	"$@" 2>&1 | tee "$results/$name.tap"
	return "${PIPESTATUS[0]}"
}

status=0
for suite in "$@"; do
	case $suite in
	cgborrow) run_suite cgborrow "$here/cgborrow.sh" guest || status=1 ;;
	cgborrow-stock) run_suite cgborrow-stock "$here/cgborrow.sh" stock || status=1 ;;
	borrowd) run_suite borrowd "$here/borrowd.sh" guest || status=1 ;;
	borrowd-hierarchy) run_suite borrowd "$here/borrowd.sh" guest hierarchy || status=1 ;;
	borrowd-stock) run_suite borrowd-stock "$here/borrowd.sh" stock || status=1 ;;
	*) echo "unknown suite $suite" >&2; status=2 ;;
	esac
done
exit $status
