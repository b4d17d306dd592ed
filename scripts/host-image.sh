#!/usr/bin/env bash
# The patched kernel as a user installs it on a real x86_64 machine, tested
# end to end in QEMU: a Debian package of the kernel built from Debian 12's
# own configuration, installed into a Debian 12 disk image, booted with the
# image's initramfs and systemd, where the selftests and the container demo
# run.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
	cat <<EOF
Usage: ${0##*/} [--stop-after debian-config|rootfs|config|build|image] [--jobs N]
                [--suites "SUITE..."] [--demo-seconds N] [--cpus N] [--mem SIZE]
                [--timeout SEC] [--debug-info] [--results DIR]

What a user does on a real x86_64 host, in steps (each reused when its
inputs did not change), under $CFSB_CACHE/host-image:
  debian-config  Debian's own configuration: /boot/config-* of Debian 12's
                 kernel package for the same version, linux-image-$KERNEL_BASE_VERSION+deb12-amd64
                 ($KERNEL_SOURCE_PKG_VERSION, from bookworm-security), fetched with apt-get
                 download (nothing is installed);
  rootfs         a Debian 12 base root filesystem made once by debootstrap
                 (systemd, initramfs-tools, containerd, runc), kept there;
  config         in the patched tree (scripts/kernel-build.sh prepares it),
                 build directory build-x86_64-debian: Debian's configuration
                 merged with Kconfig.fragment (production options only: not
                 kernel/config/kunit.config, so no test runs at boot), the
                 certificate options emptied as docs/install.md says, modules
                 signed with the build's own key, LOCALVERSION -cfsb-amd64.
                 Modules are trimmed with make localmodconfig to the list of
                 modules the QEMU machine and the tests need (virtio, ext4,
                 overlay, bridge, veth, netfilter, ...; in this script): all of
                 Debian's takes hours on two CPUs. Built-in options stay
                 Debian's; those that only existed under a module that went
                 are listed in the build directory's builtins-dropped.txt.
                 Debug information (and so BTF) is off unless --debug-info;
  build          make bindeb-pkg (nice, ccache): linux-image-*.deb and
                 linux-headers-*.deb, moved to host-image/debs/;
  image          a copy of the base with the linux-image package installed by
                 dpkg (Debian's hooks make the initramfs), the selftests
                 (make -C selftests), the patched nerdctl
                 (scripts/nerdctl-build.sh) and the images
                 (scripts/build_images.py), and a oneshot unit that runs them:
                 disk.img (ext4);
  boot           QEMU (TCG) boots the image's own /boot/vmlinuz-* and
                 /boot/initrd.img-* with root=/dev/vda and systemd as init;
                 the unit runs selftests/run-in-guest.sh (CFSB_GUEST_ANYWHERE=1)
                 and scripts/demo-containers-in-guest.sh, writes a tar of the
                 results to a second virtio disk and powers off. The results
                 are unpacked into the results directory and summarised; the
                 run fails if a suite or the demo failed, the kernel reported a
                 problem, or the boot did not finish.

Options:
  --stop-after S   stop after step S
  --jobs N         parallel make jobs (default: nproc)
  --suites "S..."  selftests/run-in-guest.sh suites (default "borrowing
                   stress test_cpu"; test_cpu, upstream's, is listed, not
                   counted: its timing bounds can fail under emulation on any
                   kernel)
  --demo-seconds N each charging mode's window in the demo (default 10)
  --cpus N, --mem SIZE  the QEMU machine (default 2, 2G)
  --timeout SEC    the boot's limit (default 3600)
  --debug-info     keep Debian's debug information and BTF (needs pahole;
                   a longer build and a linux-image-*-dbg package)
  --results DIR    where the results go (default results/host-image in the
                   checkout)
Needs root (debootstrap, chroot, dpkg in the image). One kernel build at a
time: it takes scripts/kernel-build.sh's lock for the build.
Environment: CFSB_CACHE (default ~/.cache/cfs-borrowing).
EOF
}

stop_after="" jobs=$(nproc) suites="borrowing stress test_cpu" demo_seconds=10 cpus=2 mem=2G
timeout=3600 debug_info=0 results=$CFSB_ROOT/results/host-image
while [[ $# -gt 0 ]]; do
	case $1 in
	--stop-after) stop_after=${2:?}; shift 2 ;;
	--jobs) jobs=${2:?}; shift 2 ;;
	--suites) suites=${2:?}; shift 2 ;;
	--demo-seconds) demo_seconds=${2:?}; shift 2 ;;
	--cpus) cpus=${2:?}; shift 2 ;;
	--mem) mem=${2:?}; shift 2 ;;
	--timeout) timeout=${2:?}; shift 2 ;;
	--debug-info) debug_info=1; shift ;;
	--results) results=${2:?}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument '$1'" ;;
	esac
done
case $stop_after in
"" | debian-config | rootfs | config | build | image) ;;
*) die "--stop-after takes debian-config, rootfs, config, build or image" ;;
esac
[[ $KERNEL_BASE == 6.12 ]] || die "Debian 12's kernel configuration is for the 6.12 base"
[[ $jobs =~ ^[1-9][0-9]*$ && $cpus =~ ^[1-9][0-9]*$ && $demo_seconds =~ ^[1-9][0-9]*$ ]] ||
	die "--jobs, --cpus and --demo-seconds take positive integers"
[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot, dpkg in the image)"

LOG_TIME_OF_DAY=1
dir=$CFSB_CACHE/host-image
tree=$(kernel_tree patched)
build=$(kernel_build_dir patched x86_64 debian)
localversion=-cfsb-amd64
suite=bookworm
# names_of_version: what follows from the version of the source taken (the
# patched tree's, which scripts/kernel-build.sh may change): the release,
# and Debian's kernel package of the same version, whose configuration is
# the one a user of Debian 12 runs.
names_of_version() {
	release=$KERNEL_BASE_VERSION$localversion
	debian_pkg=linux-image-$KERNEL_BASE_VERSION+deb12-amd64
	debian_config=$dir/debian/config-$KERNEL_SOURCE_PKG_VERSION
}
names_of_version

# What the image needs besides debootstrap's minbase: systemd as init, the
# initramfs the kernel package's hooks make, the container stack of
# scripts/container-stack.sh (containerd brings runc and ctr), and the
# commands the selftests' runner and the demo use.
IMAGE_PACKAGES=(
	systemd systemd-sysv udev dbus initramfs-tools zstd kmod procps iproute2 util-linux
	e2fsprogs containerd runc
)

# The modules localmodconfig keeps (lsmod's names), beyond what
# Kconfig.fragment builds in: QEMU's pc machine with virtio disks, a
# console and an entropy source; ext4 for the root; what systemd loads at
# boot; and what containers use (overlay, veth, bridge, iptables and
# nftables with NAT and conntrack, as CNI's bridge plugin sets them up).
IMAGE_MODULES=(
	virtio_blk virtio_net net_failover failover virtio_console virtio_rng virtio_balloon
	ext4 jbd2 mbcache crc16 crc32c_generic crc32c_intel libcrc32c
	autofs4 loop fuse configfs efi_pstore dm_mod sch_fq_codel
	overlay veth bridge stp llc br_netfilter tun
	x_tables ip_tables ip6_tables iptable_filter iptable_nat ip6table_filter ip6table_nat
	nf_tables nft_compat nft_chain_nat nft_masq nft_ct nfnetlink
	nf_conntrack nf_nat nf_defrag_ipv4 nf_defrag_ipv6 nf_reject_ipv4 nf_reject_ipv6
	xt_conntrack xt_MASQUERADE xt_addrtype xt_comment xt_multiport xt_mark xt_nat
	xt_tcpudp ipt_REJECT ip6t_REJECT
)

mkdir -p "$dir"
# shellcheck source=scripts/image-lib.sh
source "$CFSB_ROOT/scripts/image-lib.sh"

# --- debian-config --------------------------------------------------------
fetch_debian_config() {
	[[ -s $debian_config ]] && return 0
	local tmp=$dir/debian/download deb
	rm -rf "$tmp" && mkdir -p "$tmp"
	log "fetching $debian_pkg $KERNEL_SOURCE_PKG_VERSION for its configuration"
	# apt-get download only reads the machine's package lists (those
	# that gave linux-source-6.12); an old list is refreshed once.
	if ! (cd "$tmp" && apt-get -o APT::Sandbox::User=root download -qq \
		"$debian_pkg=$KERNEL_SOURCE_PKG_VERSION" 2>/dev/null); then
		apt-get update -qq
		(cd "$tmp" && apt-get -o APT::Sandbox::User=root download -qq \
			"$debian_pkg=$KERNEL_SOURCE_PKG_VERSION") ||
			die "cannot download $debian_pkg $KERNEL_SOURCE_PKG_VERSION (bookworm-security in the apt sources?)"
	fi
	deb=$(echo "$tmp"/*.deb)
	dpkg-deb --fsys-tarfile "$deb" | tar -xO "./boot/config-${debian_pkg#linux-image-}" >"$debian_config.tmp" ||
		die "$deb has no /boot/config-${debian_pkg#linux-image-}"
	mv "$debian_config.tmp" "$debian_config"
	rm -rf "$tmp"
}

# --- rootfs ---------------------------------------------------------------
base=$dir/rootfs-$suite-base
ensure_base_rootfs() {
	local want tmp
	want="$suite minbase ${IMAGE_PACKAGES[*]}"
	[[ -f $base/.cfsb-rootfs && $(cat "$base/.cfsb-rootfs") == "$want" ]] && return 0
	ensure_packages debootstrap
	log "making the $suite base root filesystem in $base (debootstrap, a few minutes)"
	tmp=$base.tmp
	rm -rf "$tmp" "$base"
	debootstrap --variant=minbase --include="$(IFS=,; echo "${IMAGE_PACKAGES[*]}")" \
		"$suite" "$tmp" "$(debian_mirror)" >"$dir/debootstrap.log" 2>&1 ||
		die "debootstrap failed: see $dir/debootstrap.log"
	rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*_Packages
	echo "$want" >"$tmp/.cfsb-rootfs"
	mv "$tmp" "$base"
	log "made the base root filesystem ($(du -sm "$base" | cut -f1) MB)"
}

# --- config ---------------------------------------------------------------
# check_fragment FILE: every option FILE sets is in .config (but those the
# tree does not know: options of other releases).
check_fragment() {
	local line sym bad=()
	while IFS= read -r line; do
		[[ $line == CONFIG_*=* ]] || continue
		sym=${line%%=*}
		grep -qxF "$line" "$build/.config" && continue
		grep -rqsx --include='Kconfig*' "config ${sym#CONFIG_}" "$tree" || continue
		bad+=("$line (have: $(grep -E "^(# )?${sym}[= ]" "$build/.config" || echo unset))")
	done <"$1"
	[[ ${#bad[@]} -eq 0 ]] || die "options of ${1##*/} did not take effect:$(printf '\n  %s' "${bad[@]}")"
}

configure_kernel() {
	local want m make_b=(make -s -C "$tree" O="$build")
	# The patched tree at the series (and the kernel's build packages);
	# Debian's configuration of the version it is made from.
	"$CFSB_ROOT/scripts/kernel-build.sh" --configure-only
	select_kernel_base "$KERNEL_BASE"
	names_of_version
	fetch_debian_config
	# Debian signs its modules with its own keys, which only its packaging
	# has: this build signs them with a key of its own, made by the build
	# and built into the kernel, as an out-of-tree build does.
	local opts=(--set-str SYSTEM_TRUSTED_KEYS "" --set-str SYSTEM_REVOCATION_KEYS ""
		--enable MODULE_SIG_ALL --set-str MODULE_SIG_KEY certs/signing_key.pem
		--set-str LOCALVERSION "$localversion" --disable LOCALVERSION_AUTO)
	if [[ $debug_info -eq 0 ]]; then
		opts+=(--disable DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT --disable DEBUG_INFO_DWARF4
			--disable DEBUG_INFO_DWARF5 --enable DEBUG_INFO_NONE)
	fi
	want=$( {
		echo "$KERNEL_SOURCE_PKG_VERSION $localversion $debug_info $(git -C "$tree" rev-parse HEAD)"
		printf '%s\n' "${IMAGE_MODULES[@]}"
		cat "$debian_config" "$CFSB_ROOT/Kconfig.fragment"
	} | sha256sum | cut -d' ' -f1)
	[[ -f $build/.config && $(cat "$build/.cfsb-config" 2>/dev/null) == "$want" ]] && return 0
	log "configuring $build"
	mkdir -p "$build"
	rm -f "$build/.cfsb-config"
	cp "$debian_config" "$build/.config"
	(cd "$tree" && ./scripts/kconfig/merge_config.sh -m -Q -O "$build" "$build/.config" \
		"$CFSB_ROOT/Kconfig.fragment" >"$build/merge_config.log" 2>&1) ||
		die "merge_config.sh failed: see $build/merge_config.log"
	"$tree/scripts/config" --file "$build/.config" "${opts[@]}"
	"${make_b[@]}" olddefconfig
	cp "$build/.config" "$build/config.before-localmodconfig"
	{
		echo "Module Size Used by"
		for m in "${IMAGE_MODULES[@]}"; do echo "$m 0 0"; done
	} >"$build/image-modules.lsmod"
	# localmodconfig asks about nothing once olddefconfig has run; yes
	# answers with the defaults if it does.
	"${make_b[@]}" LSMOD="$build/image-modules.lsmod" localmodconfig < <(yes '') \
		>"$build/localmodconfig.log" 2>&1 || die "localmodconfig failed: see $build/localmodconfig.log"
	"${make_b[@]}" olddefconfig
	check_fragment "$CFSB_ROOT/Kconfig.fragment"
	# A production kernel: no KUnit, so no test runs at boot.
	if grep -qE '^CONFIG_(KUNIT|CFS_BANDWIDTH_BORROWING_KUNIT_TEST)=' "$build/.config"; then
		die "the configuration has KUnit: $(grep -E '^CONFIG_(KUNIT|CFS_BANDWIDTH_BORROWING_KUNIT_TEST)=' "$build/.config" | paste -sd' ')"
	fi
	# Debian's built-in options that are gone: those under a module that
	# localmodconfig removed, and debug information unless --debug-info.
	grep '=y$' "$debian_config" | grep -vxFf "$build/.config" >"$build/builtins-dropped.txt" || true
	echo "$want" >"$build/.cfsb-config"
	log "configured: $(grep -c '=y$' "$build/.config") built-in options (Debian's: $(grep -c '=y$' "$debian_config")," \
		"$(wc -l <"$build/builtins-dropped.txt") of them gone: $build/builtins-dropped.txt)," \
		"$(grep -c '=m$' "$build/.config") modules (Debian's: $(grep -c '=m$' "$debian_config"))"
}

# --- build ----------------------------------------------------------------
debs=$dir/debs
pkgversion() { echo "$KERNEL_BASE_VERSION-1+cfsb.g$(git -C "$tree" rev-parse --short=12 HEAD)"; }
image_deb() { echo "$debs/linux-image-${release}_$(pkgversion)_amd64.deb"; }

build_kernel() {
	local want version f
	want="$(cat "$build/.cfsb-config") $(git -C "$tree" rev-parse HEAD)"
	if [[ -f $(image_deb) && $(cat "$debs/.cfsb-built" 2>/dev/null) == "$want" ]] &&
		[[ -z $(git -C "$tree" status --porcelain --untracked-files=no) ]]; then
		log "the packages are up to date: $(image_deb)"
		return 0
	fi
	# debian/rules lists the packages with debhelper's dh_listpackages.
	ensure_packages dpkg-dev debhelper rsync
	[[ $debug_info -eq 0 ]] || ensure_packages dwarves
	version=$(pkgversion)
	kernel_build_lock
	use_ccache
	log "building $release ($version) in $build (make -j$jobs bindeb-pkg; log: $build/bindeb-pkg.log)"
	# dpkg-buildpackage writes the packages next to the build directory,
	# in the tree: they are moved out of it.
	rm -f "$tree"/*_"$version"_*
	# LOCALVERSION set and empty: no "+" for a tree that is not at a tag.
	# DPKG_FLAGS=-d: the build needs what HOST_PACKAGES installs and
	# debhelper, not every build dependency the generated control file
	# names.
	nice -n 10 make -C "$tree" O="$build" -j"$jobs" CC="ccache gcc" LOCALVERSION= DPKG_FLAGS=-d \
		KDEB_PKGVERSION="$version" KBUILD_BUILD_USER=cfsb KBUILD_BUILD_HOST=host-image \
		bindeb-pkg >"$build/bindeb-pkg.log" 2>&1 ||
		{ tail -30 "$build/bindeb-pkg.log" >&2; die "make bindeb-pkg failed: see $build/bindeb-pkg.log"; }
	flock -u 9
	rm -rf "$debs" && mkdir -p "$debs"
	for f in "$tree"/*_"$version"_*; do mv "$f" "$debs/"; done
	[[ -f $(image_deb) ]] || die "no $(image_deb) after the build"
	echo "$want" >"$debs/.cfsb-built"
	log "packages: $(du -m "$debs"/*.deb | awk '{ sub(".*/", "", $2); printf "%s (%s MB) ", $2, $1 }')"
}

# --- image ----------------------------------------------------------------
rootfs=$dir/rootfs
disk=$dir/disk.img
chroot_mounts=()
# shellcheck disable=SC2317 # called by the trap
umount_chroot() {
	local i
	for ((i = ${#chroot_mounts[@]} - 1; i >= 0; i--)); do
		umount "${chroot_mounts[i]}" 2>/dev/null || umount -l "${chroot_mounts[i]}" || true
	done
	chroot_mounts=()
}
trap umount_chroot EXIT

mount_chroot() {
	mount -t proc proc "$rootfs/proc" && chroot_mounts+=("$rootfs/proc")
	mount -t sysfs sysfs "$rootfs/sys" && chroot_mounts+=("$rootfs/sys")
	mount --bind /dev "$rootfs/dev" && chroot_mounts+=("$rootfs/dev")
}

# install_checkout: what the tests run, at the checkout's layout under
# /opt/cfs-borrowing (the scripts find the builds relative to themselves).
install_checkout() {
	local dst=$rootfs/opt/cfs-borrowing f
	for f in scripts/guest-check.sh scripts/container-stack.sh scripts/demo-containers-in-guest.sh \
		selftests/run-in-guest.sh; do
		install -D -m 0755 "$CFSB_ROOT/$f" "$dst/$f"
	done
	for f in "$CFSB_ROOT"/.build/selftests/*; do
		install -D -m 0755 "$f" "$dst/.build/selftests/${f##*/}"
	done
	install -D -m 0755 "$CFSB_ROOT/.build/nerdctl/nerdctl" "$dst/.build/nerdctl/nerdctl"
	for f in "$CFSB_ROOT"/.build/images/*.tar; do
		install -D -m 0644 "$f" "$dst/.build/images/${f##*/}"
	done
}

# install_test_unit: the oneshot unit that runs the tests once the system
# is up, writes a tar of the results to the second disk, and powers off.
install_test_unit() {
	cat >"$rootfs/usr/local/sbin/cfsb-image-tests" <<-EOF
		#!/bin/bash
		# Runs once at boot (cfsb-image-tests.service): the selftests and the
		# container demo; a tar of the results goes to /dev/vdb.
		set -u
		r=/var/lib/cfsb-results
		c=/opt/cfs-borrowing
		rm -rf "\$r" && mkdir -p "\$r"
		read -r up _ </proc/uptime
		# Whether a new group of the cpu controller has the kernel's file
		# (no group has it before the controller is enabled for its
		# children, and the root never has it).
		borrowing_file() {
			local root=/sys/fs/cgroup d
			[ -e "\$root/cgroup.controllers" ] || root=/sys/fs/cgroup/cpu
			d=\$root/cfsb-probe
			mkdir -p "\$d" || { echo 0; return; }
			[ -e "\$root/cgroup.subtree_control" ] && echo +cpu >"\$root/cgroup.subtree_control"
			if [ -e "\$d/cpu.cfs.borrowing_us" ]; then echo 1; else echo 0; fi
			rmdir "\$d"
		}
		{
			echo "kernel \$(uname -r)"
			echo "cmdline \$(cat /proc/cmdline)"
			echo "init \$(cat /proc/1/comm)"
			echo "uptime-at-start \$up"
			echo "hierarchy \$(stat -fc %T /sys/fs/cgroup)"
			echo "borrowing-file \$(borrowing_file)"
			echo "kunit \$(if [ -d /sys/kernel/debug/kunit ]; then echo yes; else echo no; fi)"
			echo "failed-units \$(systemctl list-units --failed --plain --no-legend | awk '{print \$1}' | paste -sd, -)"
		} >"\$r/info"
		t0=\$(date +%s)
		CFSB_GUEST_ANYWHERE=1 "\$c/selftests/run-in-guest.sh" "\$r/selftests" $suites >"\$r/selftests.log" 2>&1
		echo \$? >"\$r/selftests.status"
		t1=\$(date +%s)
		CFSB_GUEST_ANYWHERE=1 DEMO_SECONDS=$demo_seconds "\$c/scripts/demo-containers-in-guest.sh" >"\$r/demo.txt" 2>&1
		echo \$? >"\$r/demo.status"
		t2=\$(date +%s)
		echo "selftests-seconds \$((t1 - t0))" >>"\$r/info"
		echo "demo-seconds \$((t2 - t1))" >>"\$r/info"
		lsmod >"\$r/lsmod.txt"
		journalctl -b --no-pager >"\$r/journal.txt" 2>&1
		tar -C "\$r" -cf /dev/vdb . && sync
		echo "cfsb-image-tests: selftests exit \$(cat "\$r/selftests.status"), demo exit \$(cat "\$r/demo.status")"
	EOF
	chmod 0755 "$rootfs/usr/local/sbin/cfsb-image-tests"
	image_test_unit "$rootfs" cfsb-image-tests "cfs-borrowing selftests and container demo" \
		/usr/local/sbin/cfsb-image-tests
}

make_image() {
	local deb size f
	deb=$(image_deb)
	[[ -f $deb ]] || die "no $deb: run the build step"
	for f in .build/nerdctl/nerdctl .build/images/busybox.tar; do
		[[ -f $CFSB_ROOT/$f ]] || die "no $f in the checkout: scripts/nerdctl-build.sh, scripts/build_images.py"
	done
	rm -rf "$rootfs"
	cp -a "$base" "$rootfs"
	rm -f "$rootfs/.cfsb-rootfs"
	echo cfsb-image >"$rootfs/etc/hostname"
	printf '127.0.0.1 localhost\n127.0.1.1 cfsb-image\n' >"$rootfs/etc/hosts"
	printf '/dev/vda / ext4 errors=remount-ro 0 1\n' >"$rootfs/etc/fstab"
	ln -sf /lib/systemd/system/multi-user.target "$rootfs/etc/systemd/system/default.target"
	# containerd starts when the demo starts it, with the configuration
	# of scripts/container-stack.sh.
	rm -f "$rootfs/etc/systemd/system/multi-user.target.wants/containerd.service"
	cp "$deb" "$rootfs/tmp/"
	mount_chroot
	chroot "$rootfs" dpkg -i "/tmp/${deb##*/}" >"$dir/dpkg.log" 2>&1 ||
		{ umount_chroot; die "dpkg -i ${deb##*/} failed in the image: see $dir/dpkg.log"; }
	umount_chroot
	rm -f "$rootfs/tmp/${deb##*/}"
	[[ -f $rootfs/boot/vmlinuz-$release && -f $rootfs/boot/initrd.img-$release ]] ||
		die "the package left no /boot/vmlinuz-$release and initrd.img-$release: see $dir/dpkg.log"
	install_checkout
	install_test_unit
	size=$(($(du -sm "$rootfs" | cut -f1) + 2048))
	rm -f "$disk"
	mkfs.ext4 -q -F -L cfsb-root -d "$rootfs" "$disk" "${size}M" >/dev/null ||
		die "mkfs.ext4 -d $rootfs failed"
	log "image: $disk (${size} MB; initramfs $(du -k "$rootfs/boot/initrd.img-$release" | cut -f1) KB)"
}

selftests_and_image() {
	make -s -C "$CFSB_ROOT/selftests" KSRC="$(kernel_tree stock)"
	make_image
}

# --- boot -----------------------------------------------------------------
boot_image() {
	local run=$dir/run console qemu
	rm -rf "$run" && mkdir -p "$run"
	console=$run/console.log
	truncate -s 256M "$run/results.img"
	# The image's kernel and initramfs, booted directly (no bootloader in
	# the image); mitigations off for speed under emulation.
	qemu=(qemu-system-x86_64 -machine pc -cpu max -accel "tcg,thread=${CFSB_TCG_THREAD:-single}"
		-smp "$cpus" -m "$mem" -nodefaults -no-reboot -display none -monitor none
		-kernel "$rootfs/boot/vmlinuz-$release" -initrd "$rootfs/boot/initrd.img-$release"
		-append "root=/dev/vda ro console=ttyS0 panic=-1 mitigations=off"
		-drive "file=$disk,if=virtio,format=raw"
		-drive "file=$run/results.img,if=virtio,format=raw"
		-device virtio-rng-pci
		-serial "file:$console")
	log "booting the image (QEMU TCG, $cpus CPUs, $mem; console: $console)"
	image_boot "$run/qemu.out" "$console" "${qemu[@]}"
	tar -C "$results" -xf "$run/results.img" 2>/dev/null ||
		{ tail -30 "$console" >&2; die "no results on the results disk (QEMU exit $qemu_rc): see $results/console.log"; }
}

# summarise: the results, a line each; fails on a failure.
summarise() {
	local status=0
	image_summary host-image '(Kernel panic|BUG:|WARNING:|Oops|general protection fault|Call Trace:)' || status=1
	cat "$results/demo.txt" 2>/dev/null || true
	if [[ $(status_of demo) != 0 ]]; then
		log "the demo exited $(status_of demo)"
		status=1
	elif ! awk '$1 == "process" { b = $3 + 0 } END { exit !(b > 0) }' "$results/demo.txt"; then
		log "the demo's logger charged nothing in process mode"
		status=1
	fi
	grep -q '^kunit no' "$results/info" || { log "KUnit ran in the booted image"; status=1; }
	echo "times: ${stage_times[*]}"
	return "$status"
}

stage debian-config fetch_debian_config
stage rootfs ensure_base_rootfs
stage config configure_kernel
stage build build_kernel
stage image selftests_and_image
stage boot boot_image
summarise
