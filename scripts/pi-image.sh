#!/usr/bin/env bash
# docs/raspberry-pi.md followed to the letter where QEMU can stand in for
# the board: the guide's kernel, installed as the guide installs it on an
# SD card with a Debian 12 arm64 system, booted by QEMU's Raspberry Pi
# machine with the card's own files, where the selftests run as the guide
# runs them on the board.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
	cat <<EOF
Usage: ${0##*/} [--stop-after rootfs|kernel|image] [--jobs N] [--suites "SUITE..."]
                [--icount SHIFT|none] [--timeout SEC] [--results DIR]

Steps (each reused when its inputs did not change), under
$CFSB_CACHE/pi-image:
  rootfs  a Debian 12 arm64 base system made once by debootstrap (systemd,
          udev, kmod; debootstrap's second stage runs under qemu-user-static);
  kernel  the guide's build: scripts/kernel-build.sh --arch arm64 --config rpi4
          (arm64's defconfig, kernel/config/rpi4.config, Kconfig.fragment
          and kernel/config/kunit.config; about an hour on two CPUs the
          first time);
  image   sd.img, a 4 GiB SD card (QEMU takes only powers of two) with an MBR
          as Raspberry Pi OS has: 1, the boot partition (FAT32) with the
          guide's Image-cfsb, bcm2711-rpi-4-b-cfsb.dtb, config.txt (the
          guide's three lines) and cmdline.txt (Raspberry Pi OS bookworm's,
          with the guide's cgroup_enable=memory cgroup_memory=1); 2, the root
          file system (ext4) with the modules copied as the guide copies them,
          the selftests cross-built (make -C selftests CC=aarch64-linux-gnu-gcc)
          and a oneshot unit that runs scripts/pi-image-in-guest.sh; 3, a
          raw partition the unit writes its results to;
  boot    qemu-system-aarch64 -machine raspi3b (TCG, 4 Cortex-A53, 1 GiB).
          QEMU 7.2 (Debian 12) has no Raspberry Pi 4 machine, so the same
          kernel boots with the Pi 3 B's device tree, bcm2837-rpi-3-b.dtb,
          from the same build and the same card: the kernel's BCM283x
          platform, mailbox, firmware, clock, pin control and mini UART
          drivers run as on the board; the Pi 4's own (its SD host EMMC2,
          GENET, PCIe, GIC-400) do not. QEMU cannot run the board's
          firmware: the script does its part, taking the kernel named by
          config.txt and cmdline.txt from the card's boot partition, and
          replacing console=serial0 as the firmware does (by the mini UART
          on the GPIO header, ttyS1, whose output is the console log).
          systemd brings the system up and the unit runs the suites; the
          results are unpacked into the results directory and summarised.
          The run fails if a suite failed, the kernel reported a problem,
          the booted kernel is not the card's, it ran no KUnit suite at
          boot, a new group has no cpu.cfs.borrowing_us, the modules are
          not where the kernel looks, or the boot did not finish.

Options:
  --stop-after S   stop after step S
  --jobs N         parallel make jobs for the kernel (default: nproc)
  --suites "S..."  selftests/run-in-guest.sh suites (default "kunit borrowing
                   test_cpu"; test_cpu, upstream's, is listed, not counted:
                   its timing bounds can fail under emulation on any kernel)
  --icount SHIFT   the guest's clock counts instructions, each 2^SHIFT ns
                   (QEMU -icount; default 0). On a board, time passes for
                   a CPU only while it runs; under TCG the 4 vCPUs take
                   turns on one host thread while the wall clock runs on,
                   and a quota test reads a vCPU's wait as the group's lost
                   runtime (with none: a group given 500 ms a second used
                   433 in one second, in one run of two). none: the wall
                   clock
  --timeout SEC    the boot's limit (default 3600)
  --results DIR    where the results go (default results/pi-image in the
                   checkout)
Needs root (debootstrap, chroot). One kernel build at a time: the kernel
step takes scripts/kernel-build.sh's lock.
Environment: CFSB_CACHE (default ~/.cache/cfs-borrowing).
EOF
}

stop_after="" jobs=$(nproc) suites="kunit borrowing test_cpu" timeout=3600 icount=0
results=$CFSB_ROOT/results/pi-image
while [[ $# -gt 0 ]]; do
	case $1 in
	--stop-after) stop_after=${2:?}; shift 2 ;;
	--jobs) jobs=${2:?}; shift 2 ;;
	--suites) suites=${2:?}; shift 2 ;;
	--timeout) timeout=${2:?}; shift 2 ;;
	--icount) icount=${2:?}; shift 2 ;;
	--results) results=${2:?}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument '$1'" ;;
	esac
done
case $stop_after in
"" | rootfs | kernel | image) ;;
*) die "--stop-after takes rootfs, kernel or image" ;;
esac
[[ $KERNEL_BASE == 6.12 ]] || die "the guide's kernel is the 6.12 series"
[[ $jobs =~ ^[1-9][0-9]*$ && $timeout =~ ^[1-9][0-9]*$ ]] || die "--jobs and --timeout take positive integers"
[[ $icount == none || $icount =~ ^([0-9]|10)$ ]] || die "--icount takes a shift from 0 to 10, or none"
[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot)"

LOG_TIME_OF_DAY=1
dir=$CFSB_CACHE/pi-image
build=$(kernel_build_dir patched arm64 rpi4)
# What a Raspberry Pi OS-like system needs to come up with systemd, and
# what the selftests' runner uses (stdbuf is coreutils').
PI_PACKAGES=(systemd systemd-sysv udev dbus kmod procps iproute2 util-linux e2fsprogs)
# The card's MBR disk identifier: root=PARTUUID=<it>-02, as Raspberry Pi OS
# names its root.
disk_id=cfb0b0b0
card_mib=4096 boot_mib=256 results_mib=64

mkdir -p "$dir"
# shellcheck source=scripts/image-lib.sh
source "$CFSB_ROOT/scripts/image-lib.sh"

# --- rootfs ---------------------------------------------------------------
base=$dir/rootfs-$GUEST_ROOTFS_SUITE-arm64-base
ensure_base_rootfs() {
	local want="$GUEST_ROOTFS_SUITE minbase ${PI_PACKAGES[*]}"
	[[ -f $base/.cfsb-rootfs && $(cat "$base/.cfsb-rootfs") == "$want" ]] && return 0
	log "making the arm64 base system in $base (debootstrap, a few minutes)"
	debootstrap_arch arm64 "$base" "$dir/debootstrap.log" "$want" "${PI_PACKAGES[@]}"
	log "made the base system ($(du -sm "$base" | cut -f1) MB)"
}

# --- image ----------------------------------------------------------------
rootfs=$dir/rootfs
bootfs=$dir/boot
card=$dir/sd.img
sel=$CFSB_ROOT/.build/selftests-6.12-arm64

# install_boot_files: the boot partition's files, as the guide installs
# them ($boot in docs/raspberry-pi.md), and the Pi 3 B's device tree that
# QEMU's machine needs.
install_boot_files() {
	local dts=$build/arch/arm64/boot/dts/broadcom
	rm -rf "$bootfs" && mkdir -p "$bootfs"
	cp "$build/arch/arm64/boot/Image" "$bootfs/Image-cfsb"
	cp "$dts/bcm2711-rpi-4-b.dtb" "$bootfs/bcm2711-rpi-4-b-cfsb.dtb"
	cp "$dts/bcm2837-rpi-3-b.dtb" "$bootfs/bcm2837-rpi-3-b-cfsb.dtb"
	cat >"$bootfs/config.txt" <<-EOF
		# Written by scripts/pi-image.sh as docs/raspberry-pi.md says.
		[all]
		arm_64bit=1
		kernel=Image-cfsb
		device_tree=bcm2711-rpi-4-b-cfsb.dtb
	EOF
	echo "console=serial0,115200 console=tty1 root=PARTUUID=$disk_id-02 rootfstype=ext4" \
		"fsck.repair=yes rootwait cgroup_enable=memory cgroup_memory=1" >"$bootfs/cmdline.txt"
}

# install_checkout: what the guide runs on the board, at the checkout's
# layout under /opt/cfs-borrowing (the scripts find the builds relative to
# themselves).
install_checkout() {
	local dst=$rootfs/opt/cfs-borrowing f
	for f in scripts/guest-check.sh scripts/pi-image-in-guest.sh selftests/run-in-guest.sh; do
		install -D -m 0755 "$CFSB_ROOT/$f" "$dst/$f"
	done
	for f in "$sel"/*; do
		install -D -m 0755 "$f" "$dst/.build/selftests/${f##*/}"
	done
}

make_image() {
	local release root_mib boot_start root_start results_start
	release=$(cat "$build/include/config/kernel.release")
	[[ -d $build/modules-root/lib/modules/$release ]] || die "no modules for $release in $build/modules-root"
	rm -rf "$rootfs"
	cp -a "$base" "$rootfs"
	rm -f "$rootfs/.cfsb-rootfs"
	echo cfsb-pi >"$rootfs/etc/hostname"
	printf '127.0.0.1 localhost\n127.0.1.1 cfsb-pi\n' >"$rootfs/etc/hosts"
	printf 'PARTUUID=%s-02 / ext4 defaults 0 1\n' "$disk_id" >"$rootfs/etc/fstab"
	ln -sf /lib/systemd/system/multi-user.target "$rootfs/etc/systemd/system/default.target"
	# QEMU has no VideoCore: the staging driver for its message service
	# (vchiq) finds no firmware behind the mailbox, and its sync thread
	# faulted on an unmapped slot in one boot of three. A board has the
	# firmware; this card, made for QEMU, keeps the module from loading.
	printf '# scripts/pi-image.sh: QEMU emulates no VideoCore\nblacklist vchiq\n' \
		>"$rootfs/etc/modprobe.d/cfsb-qemu-no-videocore.conf"
	# The guide: cp -r $b/modules-root/lib/modules/* $root/lib/modules/
	mkdir -p "$rootfs/lib/modules"
	cp -r "$build/modules-root/lib/modules/"* "$rootfs/lib/modules/"
	install_boot_files
	install_checkout
	image_test_unit "$rootfs" cfsb-pi-tests "cfs-borrowing selftests (docs/raspberry-pi.md)" \
		"/opt/cfs-borrowing/scripts/pi-image-in-guest.sh /dev/mmcblk0p3 $suites" CFSB_GUEST_ANYWHERE=1

	# The partitions are made as files and copied into the card: no loop
	# device, no mount.
	boot_start=1 root_start=$((1 + boot_mib))
	root_mib=$((card_mib - root_start - results_mib))
	results_start=$((root_start + root_mib))
	rm -f "$card" "$dir/boot.vfat" "$dir/root.ext4"
	mkfs.vfat -F 32 -n BOOTFS -C "$dir/boot.vfat" $((boot_mib * 1024)) >/dev/null
	mcopy -i "$dir/boot.vfat" -s "$bootfs"/* ::
	mkfs.ext4 -q -F -L rootfs -d "$rootfs" "$dir/root.ext4" "${root_mib}M" >/dev/null ||
		die "mkfs.ext4 -d $rootfs failed"
	truncate -s "${card_mib}M" "$card"
	sfdisk -q "$card" <<-EOF
		label: dos
		label-id: 0x$disk_id
		unit: sectors
		start=$((boot_start * 2048)), size=$((boot_mib * 2048)), type=c
		start=$((root_start * 2048)), size=$((root_mib * 2048)), type=83
		start=$((results_start * 2048)), size=$((results_mib * 2048)), type=da
	EOF
	dd if="$dir/boot.vfat" of="$card" bs=1M seek="$boot_start" conv=notrunc,sparse status=none
	dd if="$dir/root.ext4" of="$card" bs=1M seek="$root_start" conv=notrunc,sparse status=none
	rm -f "$dir/boot.vfat" "$dir/root.ext4"
	log "image: $card ($card_mib MB; $release; root file system $(du -sm "$rootfs" | cut -f1) MB)"
}

selftests_and_image() {
	ensure_packages dosfstools mtools fdisk
	make -s -C "$CFSB_ROOT/selftests" KSRC="$(kernel_tree stock)" OUT="$sel" CC="$(arch_cross_compile arm64)gcc"
	make_image
}

# --- boot -----------------------------------------------------------------
# from_card FILE: FILE of the card's boot partition, read back from the
# card (what the firmware would read), into the run directory.
from_card() {
	mcopy -o -i "$card@@$((1024 * 1024))" "::$1" "$run/$1" || die "the card's boot partition has no $1"
}

run=$dir/run
boot_image() {
	local qemu cmdline kernel dtb
	rm -rf "$run" && mkdir -p "$run"
	from_card config.txt
	from_card cmdline.txt
	kernel=$(sed -n 's/^kernel=//p' "$run/config.txt" | tail -1)
	[[ -n $kernel ]] || die "config.txt names no kernel"
	from_card "$kernel"
	# config.txt names the Pi 4's tree; the emulated board is a Pi 3 B.
	from_card bcm2837-rpi-3-b-cfsb.dtb
	dtb=$run/bcm2837-rpi-3-b-cfsb.dtb
	# serial0 is the UART on the GPIO header, the mini UART (ttyS1 here:
	# the device tree's alias serial1); the PL011 serves Bluetooth.
	cmdline=$(sed 's/console=serial0,/console=ttyS1,/' "$run/cmdline.txt")
	qemu=(qemu-system-aarch64 -machine raspi3b -accel "tcg,thread=${CFSB_TCG_THREAD:-single}"
		-display none -monitor none -no-reboot
		-kernel "$run/$kernel" -dtb "$dtb" -append "$cmdline panic=-1"
		-drive "file=$card,if=sd,format=raw"
		-serial "file:$run/uart0.log" -serial "file:$run/console.log")
	[[ $icount == none ]] || qemu+=(-icount "shift=$icount")
	log "booting the card (QEMU raspi3b, TCG; console: $run/console.log)"
	image_boot "$run/qemu.out" "$run/console.log" "${qemu[@]}"
	# (Through a file: tar stops reading at the archive's end.)
	dd if="$card" of="$run/results.tar" bs=1M skip="$((card_mib - results_mib))" count="$results_mib" status=none
	tar -C "$results" -xf "$run/results.tar" 2>/dev/null ||
		{ tail -30 "$run/console.log" >&2; die "no results on the results partition (QEMU exit $qemu_rc): see $results/console.log"; }
}

# summarise: the results, a line each; fails on a failure.
summarise() {
	local status=0 release
	release=$(cat "$build/include/config/kernel.release")
	image_summary pi-image '(Kernel panic|BUG:|WARNING:|Oops|Unable to handle kernel|Call trace:)' || status=1
	grep -qx "kernel $release" "$results/info" || { log "the booted kernel is not the card's $release"; status=1; }
	grep -q '^kunit yes' "$results/info" || { log "the guide's kernel ran no KUnit suite at boot"; status=1; }
	grep -q '^modules-dir yes' "$results/info" || { log "the card's modules are not where the kernel looks"; status=1; }
	echo "times: ${stage_times[*]}"
	return "$status"
}

stage rootfs ensure_base_rootfs
stage kernel "$CFSB_ROOT/scripts/kernel-build.sh" --arch arm64 --config rpi4 --jobs "$jobs"
stage image selftests_and_image
stage boot boot_image
summarise
