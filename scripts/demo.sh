#!/usr/bin/env bash
# The main job: set up, build the patched kernel, boot it and show borrowing
# throttling a CPU hog, on cgroup v2 and v1.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
	cat <<EOF
Usage: ${0##*/} [--cgroup v1|v2|both]

Installs what is missing, builds the patched kernel (scripts/kernel-build.sh),
boots it in QEMU (scripts/vm-run.sh) and runs scripts/demo-in-guest.sh: a CPU
hog with a 50 ms / 100 ms quota, alone, while charged 20 ms per period through
cpu.cfs.borrowing_us, and after a 300 ms charge. Default: both hierarchies.
EOF
}

hierarchies=(v2 v1)
while [[ $# -gt 0 ]]; do
	case $1 in
	--cgroup)
		case ${2:-} in
		v1 | v2) hierarchies=("$2") ;;
		both) hierarchies=(v2 v1) ;;
		*) die "--cgroup takes v1, v2 or both" ;;
		esac
		shift 2
		;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument '$1'" ;;
	esac
done

"$CFSB_ROOT/scripts/kernel-build.sh" --variant patched
for cg in "${hierarchies[@]}"; do
	"$CFSB_ROOT/scripts/vm-run.sh" --cgroup "$cg" -- scripts/demo-in-guest.sh
done
