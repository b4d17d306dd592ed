#!/usr/bin/env bash
# The main job: set up, build the patched kernel and nerdctl, boot the kernel
# and show a noisy container's logging CPU charged back to it, on cgroup v2
# and v1 (or, with --kernel-only, borrowing throttling a plain CPU hog).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
	cat <<EOF
Usage: ${0##*/} [--cgroup v1|v2|both] [--kernel-only] [--no-study]

Installs what is missing, builds the patched kernel (scripts/kernel-build.sh),
the patched nerdctl (scripts/nerdctl-build.sh) and the images
(scripts/build_images.py), boots the kernel in QEMU (scripts/vm-run.sh) and
runs scripts/demo-containers-in-guest.sh there: containerd, runc and nerdctl
run a container that floods its stdout with 'yes' under a 50 ms / 100 ms
quota, with the logging process's charging off, in process mode and in
thread mode; it prints the logger's CPU, the container's and the charged
share. Default: both hierarchies.

Then it runs the reference study's experiments in their quick tier
(experiments/noisy_logging.sh --quick, about 20 minutes: the stock kernel
too) and prints where the report and the plots are.

--kernel-only  no containers: scripts/demo-in-guest.sh shows a CPU hog with
               a 50 ms / 100 ms quota, alone, while charged 20 ms per period
               through cpu.cfs.borrowing_us, and after a 300 ms charge (on
               each hierarchy of --cgroup: v2, then v1, by default).
--no-study     skip the quick study.
EOF
}

HIERARCHIES=(v2 v1) guest_demo=scripts/demo-containers-in-guest.sh study=1
while [[ $# -gt 0 ]]; do
	case $1 in
	--cgroup) hierarchies_arg "${2:-}"; shift 2 ;;
	--kernel-only) guest_demo=scripts/demo-in-guest.sh study=0; shift ;;
	--no-study) study=0; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument '$1'" ;;
	esac
done

"$CFSB_ROOT/scripts/kernel-build.sh" --variant patched
if [[ $guest_demo == scripts/demo-containers-in-guest.sh ]]; then
	ensure_packages "${CONTAINER_PACKAGES[@]}"
	"$CFSB_ROOT/scripts/nerdctl-build.sh"
	python3 "$CFSB_ROOT/scripts/build_images.py" "$CFSB_ROOT/.build/images" >/dev/null
fi
for cg in "${HIERARCHIES[@]}"; do
	"$CFSB_ROOT/scripts/vm-run.sh" --cgroup "$cg" -- "$guest_demo"
done
if ((study)); then
	"$CFSB_ROOT/experiments/noisy_logging.sh" --quick >/dev/null
	echo
	echo "The reference study, quick tier (results/noisy_logging/quick/report.md):"
	sed -n '/^## Targets/,/^## [^T]/p' "$CFSB_ROOT/results/noisy_logging/quick/report.md" | sed '$d'
	echo "Report: results/noisy_logging/quick/report.md; plots: results/noisy_logging/quick/plots/"
fi
