#!/bin/busybox sh
# shellcheck shell=dash
# /init of the initramfs with which scripts/vm-run.sh boots Debian's own
# kernel (ensure_debian_kernel in scripts/lib.sh copies this file into its
# initrd.img; it is no entry point). Debian builds virtio-9p as modules, so
# the kernel cannot mount the guest's root by itself: this loads the
# modules listed in /modules/order, mounts the root the kernel command line
# names (root=, rootfstype=9p, rootflags=) read-only and hands over to its
# init=, as PID 1, with the environment the kernel gave it.
bb=/bin/busybox

# fail WHY: say it on the console and power off (vm-run.sh reports a
# guest that stopped without running its command).
fail() {
	echo "initramfs: $*" >/dev/console
	$bb poweroff -f
	exit 1
}

# Only as the PID 1 of a kernel booted with this initramfs.
if [ "$$" -ne 1 ] || [ ! -f /modules/order ]; then
	echo "${0##*/}: refusing to run: it is the /init of the initramfs scripts/vm-run.sh boots Debian's kernel with" >&2
	exit 3
fi

$bb mkdir -p /proc
$bb mount -t proc proc /proc || fail "cannot mount /proc"
while read -r module; do
	$bb insmod "/modules/$module" || fail "cannot load $module"
done </modules/order

root="" flags="" init=""
# shellcheck disable=SC2013 # words, not lines: the command line is one line
for arg in $($bb cat /proc/cmdline); do
	case $arg in
	root=*) root=${arg#root=} ;;
	rootflags=*) flags=${arg#rootflags=} ;;
	init=*) init=${arg#init=} ;;
	esac
done
if [ -z "$root" ] || [ -z "$init" ]; then
	fail "no root= or init= on the kernel command line"
fi

$bb mkdir -p /newroot
$bb mount -t 9p -o "ro${flags:+,$flags}" "$root" /newroot || fail "cannot mount $root"
# The new init mounts /proc itself, and tells from it that it is the init=.
$bb umount /proc
exec $bb switch_root /newroot "$init"
