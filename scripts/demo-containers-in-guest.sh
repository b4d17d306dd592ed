#!/usr/bin/env bash
# Runs inside the guest (scripts/demo.sh): a container running `yes` with a
# 50 ms / 100 ms quota floods its logging process. The container, containerd
# and the logging process share CPU 0, as in the reference study. For each
# charging mode of the logging process (off, process, thread) it prints the
# logger's CPU (A), the part charged to the container (B), the container's
# own CPU (C), and what the container cost in all (A + C) against its quota.
#
#   scripts/vm-run.sh [--cgroup v1|v2] -- scripts/demo-containers-in-guest.sh
#
# DEMO_SECONDS: each mode's window (default 10). Runs only in that guest
# (scripts/guest-check.sh).
set -euo pipefail
# shellcheck source=scripts/guest-check.sh
source "$(dirname "$0")/guest-check.sh"
cfsb_guest_script "${1:-}"
# shellcheck source=scripts/container-stack.sh
source "$(dirname "$0")/container-stack.sh"

secs=${DEMO_SECONDS:-10}
cs_start --cpus 0
cs_load_images busybox
trap cs_stop EXIT

echo "cgroup $(cs_hierarchy), kernel $(uname -r): 'yes' in a container limited to 50 ms per 100 ms,"
echo "its logging process on the same CPU; shares of one CPU over $secs s:"
printf '  %-13s %10s %10s %11s %9s %9s %9s\n' cpu-charge "logger A" "charged B" "container C" "B + C" "A + C" "B / A"
for mode in off process thread; do
	id=$(cs_run -d --cpuset-cpus 0 --cpu-quota 50000 --cpu-period 100000 \
		--log-opt "cpu-charge=$mode" cfsb/busybox yes)
	# The logging process's own start (a Go program, slow under
	# emulation) is charged when the container's cgroup appears; let
	# that debt be paid before measuring the steady state.
	cs_nap 5
	cs_measure "$id" "$secs"
	read -r a b c <<<"$REPLY"
	printf '  %-13s %9s%% %9s%% %10s%% %8s%% %8s%% %8s%%\n' "$mode" "$(cs_pct "$a")" "$(cs_pct "$b")" \
		"$(cs_pct "$c")" "$(cs_pct $((b + c)))" "$(cs_pct $((a + c)))" "$(cs_pct $((a ? b * 10000 / a : 0)))"
	cs_nerdctl rm -f "$id" >/dev/null
done
echo "  (quota: 50%; off: the logging escapes the quota, A + C near a whole CPU;"
echo "   process: the logger is charged and paced, A + C within the quota; thread:"
echo "   the copying threads are charged, the logger is not paced and escapes as with off)"
