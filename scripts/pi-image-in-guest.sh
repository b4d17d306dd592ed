#!/usr/bin/env bash
# Runs once at boot of the Raspberry Pi SD card image that
# scripts/pi-image.sh makes (its unit cfsb-pi-tests.service, with
# CFSB_GUEST_ANYWHERE=1: that image is a machine there to be tested): the
# selftests as docs/raspberry-pi.md runs them on the board, then a tar of
# the results, written raw to the results partition for the host to read.
#
#   pi-image-in-guest.sh RESULTS_DEVICE SUITE...
#
# RESULTS_DEVICE: the card's third partition (/dev/mmcblk0p3). SUITE...:
# selftests/run-in-guest.sh's suites. Besides their TAP files the results
# hold "info" (the kernel, the board's model, the cgroup hierarchy, whether
# a new group has cpu.cfs.borrowing_us, whether KUnit ran at boot, the
# modules' directory, failed units, times) and the boot's journal. Runs
# only where scripts/guest-check.sh allows.
set -uo pipefail
# shellcheck source=scripts/guest-check.sh
source "$(dirname "$0")/guest-check.sh"
cfsb_guest_script "${1:-}"

dev=${1:?usage: pi-image-in-guest.sh RESULTS_DEVICE SUITE...}
shift
[[ -b $dev ]] || { echo "pi-image-in-guest.sh: $dev is not a block device" >&2; exit 2; }
checkout=$(cd "$(dirname "$0")/.." && pwd)
r=/var/lib/cfsb-results

# borrowing_file: 1 if a new group of the cpu controller has the kernel's
# file (no group has it before the controller is enabled for its children,
# and the root never has it), 0 if not.
borrowing_file() {
	local root=/sys/fs/cgroup d
	[[ -e $root/cgroup.controllers ]] || root=/sys/fs/cgroup/cpu
	d=$root/cfsb-probe
	mkdir -p "$d" || { echo 0; return; }
	[[ -e $root/cgroup.subtree_control ]] && echo +cpu >"$root/cgroup.subtree_control"
	if [[ -e $d/cpu.cfs.borrowing_us ]]; then echo 1; else echo 0; fi
	rmdir "$d"
}

rm -rf "$r" && mkdir -p "$r"
read -r up _ </proc/uptime
{
	echo "kernel $(uname -r)"
	echo "model $(tr -d '\0' </proc/device-tree/model 2>/dev/null || echo unknown)"
	echo "cmdline $(cat /proc/cmdline)"
	echo "init $(cat /proc/1/comm)"
	echo "cpus $(nproc)"
	echo "uptime-at-start $up"
	echo "hierarchy $(stat -fc %T /sys/fs/cgroup)"
	echo "borrowing-file $(borrowing_file)"
	echo "kunit $(if [[ -d /sys/kernel/debug/kunit ]]; then echo yes; else echo no; fi)"
	echo "modules-dir $(if [[ -d /lib/modules/$(uname -r)/kernel ]]; then echo yes; else echo no; fi)"
	echo "failed-units $(systemctl list-units --failed --plain --no-legend | awk '{print $1}' | paste -sd, -)"
} >"$r/info"
t0=$(date +%s)
"$checkout/selftests/run-in-guest.sh" "$r/selftests" "$@" >"$r/selftests.log" 2>&1
echo $? >"$r/selftests.status"
echo "selftests-seconds $(($(date +%s) - t0))" >>"$r/info"
lsmod >"$r/lsmod.txt"
journalctl -b --no-pager >"$r/journal.txt" 2>&1
tar -C "$r" -cf "$dev" . && sync
echo "pi-image-in-guest.sh: selftests exit $(cat "$r/selftests.status"), results on $dev"
