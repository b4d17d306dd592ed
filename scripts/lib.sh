# shellcheck shell=bash disable=SC2034
# (SC2034: the variables here are used by the scripts that source this.)
# Shared helpers for the project's scripts. Source it; do not execute it.
#
# Everything that is expensive to recreate (kernel source trees, build
# directories, ccache) lives under $CFSB_CACHE, outside the checkout, so that
# later runs on the same machine rebuild incrementally.

# The repository root, whatever the caller's working directory.
CFSB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CFSB_CACHE=${CFSB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cfs-borrowing}

# The kernels a series is kept for ("bases"), one table: select_kernel_base
# sets the KERNEL_* variables for one of them.
#   6.12: the LTS users run, Debian 12's linux-source-6.12 (installed with
#         apt); its series is kernel/patches, its trees linux-stock and
#         linux-patched (the default everywhere).
#   7.2:  mainline, Debian unstable's linux-source-7.2; the .deb is fetched
#         with a private apt source list and state directory under
#         $CFSB_CACHE/sources (the machine's apt setup is not touched) and
#         unpacked there; its series is kernel/patches-7.2, its trees
#         linux-7.2-stock and linux-7.2-patched.
# KERNEL_SOURCE_PIN is the Debian version of the source package the series
# was made on, the one taken by default. KERNEL_SOURCE_PKG_VERSION (and
# KERNEL_BASE_VERSION, Linux's own) is the version the base's tree was
# made from, which scripts/kernel-build.sh makes the version taken; the
# pin where there is no tree yet. kernel_source_resolve sets the version
# to take: what a script that names the version before the tree is made
# calls first.
KERNEL_BASES=(6.12 7.2)
select_kernel_base() {
	case $1 in
	6.12)
		KERNEL_SOURCE_PKG=linux-source-6.12
		KERNEL_SOURCE_PIN=6.12.117-1~deb12u1
		KERNEL_SOURCE_SUITE="" # the machine's apt sources
		KERNEL_SOURCE_TARBALL=/usr/src/linux-source-6.12.tar.xz
		KERNEL_SERIES_DIR=$CFSB_ROOT/kernel/patches
		KERNEL_TREE_PREFIX=linux
		;;
	7.2)
		KERNEL_SOURCE_PKG=linux-source-7.2
		KERNEL_SOURCE_PIN=7.2.13-1
		KERNEL_SOURCE_SUITE=sid
		KERNEL_SOURCE_TARBALL=$CFSB_CACHE/sources/7.2/usr/src/linux-source-7.2.tar.xz
		KERNEL_SERIES_DIR=$CFSB_ROOT/kernel/patches-7.2
		KERNEL_TREE_PREFIX=linux-7.2
		;;
	*) die "unknown kernel base '$1' (known: ${KERNEL_BASES[*]})" ;;
	esac
	KERNEL_BASE=$1
	local have
	have=$(kernel_repo_version)
	kernel_source_use "${have:-$KERNEL_SOURCE_PIN}"
}

# Debian packages the host side needs (build, boot, selftests); the kernel
# source comes with ensure_kernel_source, for the selected base.
HOST_PACKAGES=(
	build-essential bc bison flex libelf-dev libssl-dev cpio kmod xz-utils
	ccache git python3 qemu-system-x86 shellcheck
)

# What tools/ builds with (cgborrow: libcgroup; borrowd: libbpf, clang and
# bpftool's skeletons) and the tests use (libcgroup's cgset and cgget).
TOOLS_PACKAGES=(libcgroup-dev cgroup-tools libbpf-dev clang bpftool)
# The unchanged engines borrowd is tested with, in the guest.
ENGINE_PACKAGES=(podman conmon docker.io)

# What the guest's container stack runs (the guest's root is the host's /),
# and what the images are made of.
CONTAINER_PACKAGES=(containerd runc crun busybox-static sysbench)

# The packages whose services the host must not run: the guest runs the
# engines from the host's files. When ensure_packages installs one (asked
# for or as a dependency) its services are not started (a policy-rc.d for
# the install, where the machine has none) and are left disabled; a package
# installed before is left as it is.
HOST_SERVICES_OFF_PACKAGES=(docker.io containerd podman)
POLICY_RC_D=/usr/sbin/policy-rc.d
POLICY_RC_D_MARK="written by cfs-borrowing's scripts/lib.sh for one apt-get install"

# (LOG_TIME_OF_DAY=1 in a script: its lines carry the time of day, UTC.)
log() { printf '[%s%s] %s\n' "${0##*/}" "${LOG_TIME_OF_DAY:+ $(date -u +%T)}" "$*" >&2; }
die() { printf '[%s] error: %s\n' "${0##*/}" "$*" >&2; exit 1; }

# hierarchies_arg VALUE: the cgroup hierarchies a --cgroup v1|v2|both option
# names, into the array HIERARCHIES (both: v2 first).
hierarchies_arg() {
	case $1 in
	v1 | v2) HIERARCHIES=("$1") ;;
	both) HIERARCHIES=(v2 v1) ;;
	*) die "--cgroup takes v1, v2 or both" ;;
	esac
}

# now_s: seconds since the epoch, for timing steps.
now_s() { date +%s; }

# installed PKG: is the Debian package PKG installed?
installed() { dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q '^install ok installed'; }

# host_services_off PKG...: stop and disable the services of the installed
# packages PKG..., which the host does not need.
host_services_off() {
	local pkg f units=() scripts=()
	for pkg in "$@"; do
		while read -r f; do
			case $f in
			*/systemd/system/*@.*) ;;
			*/systemd/system/*.service | */systemd/system/*.socket | */systemd/system/*.timer) units+=("${f##*/}") ;;
			/etc/init.d/*) scripts+=("${f##*/}") ;;
			esac
		done < <(dpkg-query -L "$pkg" 2>/dev/null)
	done
	[[ ${#units[@]} -gt 0 || ${#scripts[@]} -gt 0 ]] || return 0
	if [[ ${#units[@]} -gt 0 ]] && command -v systemctl >/dev/null; then
		if [[ -d /run/systemd/system ]]; then
			systemctl disable --now "${units[@]}" >/dev/null 2>&1 || true
		else
			systemctl disable "${units[@]}" >/dev/null 2>&1 || true
		fi
	fi
	for f in "${scripts[@]}"; do
		[[ -d /run/systemd/system ]] || "/etc/init.d/$f" stop >/dev/null 2>&1 || true
		update-rc.d "$f" disable >/dev/null 2>&1 || true
	done
	log "not running on this machine, and disabled: ${units[*]} ${scripts[*]} (the guest runs them; systemctl enable --now UNIT turns one on)"
}

# apt_lists_fresh: the machine's package lists, updated when older than a
# day (an old or missing package index makes apt miss packages and
# versions). Needs root.
APT_LISTS_STAMP=/var/lib/apt/periodic/cfsb-updated
apt_lists_fresh() {
	[[ -n $(find "$APT_LISTS_STAMP" -mmin -1440 2>/dev/null) ]] && return 0
	apt-get update -qq || return 1
	mkdir -p "${APT_LISTS_STAMP%/*}" && touch "$APT_LISTS_STAMP"
}

# ensure_packages PKG...: install the Debian packages that are missing.
# Idempotent: only calls apt when something is missing. The services of
# HOST_SERVICES_OFF_PACKAGES it installs stay off (see there).
ensure_packages() {
	local missing=() pkg name want off_before=() off_now=() policy=0 rc=0
	for pkg in "$@"; do
		name=${pkg%%=*}
		want=""
		[[ $pkg == *=* ]] && want=${pkg#*=}
		if ! dpkg-query -W -f='${Status} ${Version}\n' "$name" 2>/dev/null |
			grep -q "^install ok installed ${want}"; then
			missing+=("$pkg")
		fi
	done
	[[ ${#missing[@]} -eq 0 ]] && return 0
	[[ $(id -u) -eq 0 ]] || die "need root to install: ${missing[*]}"
	# Left by an install that was interrupted.
	grep -qs "$POLICY_RC_D_MARK" "$POLICY_RC_D" && rm -f "$POLICY_RC_D"
	for pkg in "${HOST_SERVICES_OFF_PACKAGES[@]}"; do
		installed "$pkg" || off_before+=("$pkg")
	done
	if [[ ${#off_before[@]} -gt 0 && ! -e $POLICY_RC_D ]]; then
		printf '#!/bin/sh\n# %s\nexit 101\n' "$POLICY_RC_D_MARK" >"$POLICY_RC_D"
		chmod 0755 "$POLICY_RC_D"
		policy=1
	fi
	log "installing: ${missing[*]}"
	apt_lists_fresh || die "apt-get update failed"
	# (--allow-downgrades: a PKG=VERSION asked for is installed even where
	# the machine has a newer one, as the kernel source's version taken.)
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --allow-downgrades \
		"${missing[@]}" >/dev/null || rc=$?
	((policy)) && rm -f "$POLICY_RC_D"
	for pkg in "${off_before[@]}"; do
		installed "$pkg" && off_now+=("$pkg")
	done
	[[ ${#off_now[@]} -eq 0 ]] || host_services_off "${off_now[@]}"
	[[ $rc -eq 0 ]] || die "apt-get install failed (exit $rc): ${missing[*]}"
}

# --- the kernel source's version ---------------------------------------------
# The series is made on the pinned version (KERNEL_SOURCE_PIN), which stays
# the default; the archives keep a version for a while only. The version
# taken: the one wanted (the pin, or CFSB_KERNEL_SOURCE_VERSION's for the
# base) when the machine has it (the tree, or the source package) or the
# archive offers it; else the archive's newest of the base's major.minor,
# said once on stderr. Never another major.minor.

# kernel_source_major_minor VERSION: VERSION's "M.m" (6.12 for
# 6.12.117-1~deb12u1), or nothing when it does not start with one.
kernel_source_major_minor() {
	[[ $1 =~ ^([0-9]+\.[0-9]+)([.~+-]|$) ]] && echo "${BASH_REMATCH[1]}"
	return 0
}

# kernel_source_use VERSION: VERSION is the version taken:
# KERNEL_SOURCE_PKG_VERSION, and KERNEL_BASE_VERSION, its Linux release
# as the source's Makefile has it (M.m.s: 7.2.0 for Debian's 7.2-1).
kernel_source_use() {
	local release=${1%-*}
	release=${release%%[~+]*}
	[[ $release == *.*.* ]] || release+=.0
	KERNEL_SOURCE_PKG_VERSION=$1
	KERNEL_BASE_VERSION=$release
}

# kernel_source_wanted: the version wanted for the selected base, into
# KERNEL_SOURCE_WANTED: CFSB_KERNEL_SOURCE_VERSION's for its major.minor
# (VERSION...: one for each base at most), else the pin. A version that is
# not of a base stops here.
kernel_source_wanted() {
	local v mm from=""
	KERNEL_SOURCE_WANTED=$KERNEL_SOURCE_PIN
	for v in ${CFSB_KERNEL_SOURCE_VERSION:-}; do
		mm=$(kernel_source_major_minor "$v")
		[[ $v =~ ^[0-9][0-9A-Za-z.+~-]*$ && -n $mm && " ${KERNEL_BASES[*]} " == *" $mm "* ]] ||
			die "CFSB_KERNEL_SOURCE_VERSION: '$v' is the version of no kernel base (known: ${KERNEL_BASES[*]}; base M.m takes linux-source-M.m's M.m.y)"
		[[ $mm == "$KERNEL_BASE" ]] || continue
		[[ -z $from ]] || die "CFSB_KERNEL_SOURCE_VERSION: two versions for $mm ($from, $v)"
		from=$v
		KERNEL_SOURCE_WANTED=$v
	done
}

# kernel_source_record: where the unpacked .deb of a base from a Debian
# suite records its version (the dpkg database does for the machine's).
kernel_source_record() { echo "$CFSB_CACHE/sources/$KERNEL_BASE/.cfsb-source-version"; }

# kernel_source_tarball_version: the version of the source package whose
# tarball is at $KERNEL_SOURCE_TARBALL, or nothing.
kernel_source_tarball_version() {
	local source_debs
	[[ -f $KERNEL_SOURCE_TARBALL ]] || return 0
	if [[ -z $KERNEL_SOURCE_SUITE ]]; then
		# shellcheck disable=SC2016 # dpkg's fields, not the shell's
		installed "$KERNEL_SOURCE_PKG" && dpkg-query -W -f='${Version}\n' "$KERNEL_SOURCE_PKG"
	elif [[ -f $(kernel_source_record) ]]; then
		cat "$(kernel_source_record)"
	else
		# Unpacked without the record: the .deb beside it is its package.
		source_debs=("$CFSB_CACHE/sources/${KERNEL_SOURCE_PKG}_"*_all.deb)
		[[ ${#source_debs[@]} -eq 1 && -f ${source_debs[0]} ]] && dpkg-deb -f "${source_debs[0]}" Version
	fi
	return 0
}

# kernel_repo_version: the source version kernel_repo was unpacked from
# (its stamp), or nothing.
kernel_repo_version() {
	local repo
	repo=$(kernel_repo)
	[[ -d $repo/.git ]] && cat "$repo/.git/cfsb-base-version" 2>/dev/null
	return 0
}

# kernel_source_refresh: the package lists kernel_source_listed reads,
# updated when older than a day; a failed update leaves them as they are.
kernel_source_refresh() {
	local dir=$CFSB_CACHE/sources
	if [[ -z $KERNEL_SOURCE_SUITE ]]; then
		[[ $(id -u) -ne 0 ]] || apt_lists_fresh ||
			log "cannot update apt's package lists: using them as they are"
		return 0
	fi
	[[ -n $(find "$dir/apt/updated" -mmin -1440 2>/dev/null) ]] && return 0
	debian_update "$KERNEL_SOURCE_SUITE" "$dir" && return 0
	compgen -G "$dir/apt/lists/*_Packages*" >/dev/null ||
		die "cannot read Debian $KERNEL_SOURCE_SUITE's package lists from $(debian_mirror)"
	log "cannot update Debian $KERNEL_SOURCE_SUITE's package lists: using them as they are"
}

# kernel_source_listed: the versions of $KERNEL_SOURCE_PKG the package lists
# offer (they are only read).
kernel_source_listed() {
	local apt=()
	if [[ -n $KERNEL_SOURCE_SUITE ]]; then
		debian_apt "$CFSB_CACHE/sources"
		apt=("${DEBIAN_APT[@]}")
	fi
	apt-cache "${apt[@]}" madison "$KERNEL_SOURCE_PKG" 2>/dev/null |
		awk -F'|' '{ gsub(/[ \t]/, "", $2); if ($2 != "") print $2 }' | sort -u
}

# kernel_source_pick WANT VERSION...: WANT if it is one of VERSION..., else
# the newest VERSION of the selected base's major.minor; fails when there is
# none.
kernel_source_pick() {
	local want=$1 v best=""
	shift
	for v in "$@"; do
		[[ $v == "$want" ]] && { echo "$v"; return 0; }
	done
	for v in "$@"; do
		[[ $(kernel_source_major_minor "$v") == "$KERNEL_BASE" ]] || continue
		if [[ -z $best ]] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
	done
	[[ -n $best ]] && echo "$best"
}

# kernel_source_resolve: the version of the selected base's source to take
# (see the top of this part) into KERNEL_SOURCE_PKG_VERSION and
# KERNEL_BASE_VERSION. The archive is asked only when the machine does
# not have the version wanted.
kernel_source_resolve() {
	local v why taken="" at_hand listed made_on
	kernel_source_wanted
	why="the version the series was made on"
	made_on="; the series was made on $KERNEL_SOURCE_PIN"
	[[ $KERNEL_SOURCE_WANTED == "$KERNEL_SOURCE_PIN" ]] || why="CFSB_KERNEL_SOURCE_VERSION's"
	mapfile -t at_hand < <(kernel_repo_version; kernel_source_tarball_version)
	for v in "${at_hand[@]}"; do
		[[ $v == "$KERNEL_SOURCE_WANTED" ]] && taken=$v
	done
	if [[ -z $taken ]]; then
		kernel_source_refresh
		mapfile -t listed < <(kernel_source_listed)
		taken=$(kernel_source_pick "$KERNEL_SOURCE_WANTED" "${listed[@]}") ||
			die "$KERNEL_SOURCE_PKG: the archive has neither $KERNEL_SOURCE_WANTED ($why) nor any other $KERNEL_BASE.y (it lists: ${listed[*]:-none})"
	fi
	kernel_source_use "$taken"
	[[ $KERNEL_SOURCE_WANTED == "$KERNEL_SOURCE_PIN" ]] && made_on=""
	[[ $taken == "$KERNEL_SOURCE_PIN" ]] && made_on=", the version the series was made on"
	if [[ $taken != "$KERNEL_SOURCE_WANTED" ]]; then
		log "$KERNEL_SOURCE_PKG $KERNEL_SOURCE_WANTED ($why) is not in the archive: taking $taken, the newest $KERNEL_BASE.y it has$made_on"
	elif [[ $taken != "$KERNEL_SOURCE_PIN" ]]; then
		log "$KERNEL_SOURCE_PKG $taken ($why)$made_on"
	fi
}

# kernel_source_what: the source taken, for messages: "Linux 6.12.117
# (linux-source-6.12 6.12.117-1~deb12u1)", and the pin when it is another.
kernel_source_what() {
	local what="Linux $KERNEL_BASE_VERSION ($KERNEL_SOURCE_PKG $KERNEL_SOURCE_PKG_VERSION"
	[[ $KERNEL_SOURCE_PKG_VERSION == "$KERNEL_SOURCE_PIN" ]] || what+="; the series was made on $KERNEL_SOURCE_PIN"
	echo "$what)"
}

# ensure_kernel_source: the tarball of the version taken is at
# $KERNEL_SOURCE_TARBALL. 6.12 comes from the machine's apt sources; 7.2 from
# Debian unstable through a source list and apt state of its own, so that
# the machine's apt configuration and package set stay as they are.
ensure_kernel_source() {
	local dir=$CFSB_CACHE/sources deb new
	[[ $(kernel_source_tarball_version) == "$KERNEL_SOURCE_PKG_VERSION" ]] && return 0
	if [[ -z $KERNEL_SOURCE_SUITE ]]; then
		ensure_packages "$KERNEL_SOURCE_PKG=$KERNEL_SOURCE_PKG_VERSION"
	else
		log "fetching $KERNEL_SOURCE_PKG $KERNEL_SOURCE_PKG_VERSION from Debian $KERNEL_SOURCE_SUITE"
		debian_download "$KERNEL_SOURCE_SUITE" "$dir" "$KERNEL_SOURCE_PKG=$KERNEL_SOURCE_PKG_VERSION"
		new=$dir/${KERNEL_SOURCE_PKG}_${KERNEL_SOURCE_PKG_VERSION}_all.deb
		for deb in "$dir/${KERNEL_SOURCE_PKG}_"*.deb; do
			[[ $deb == "$new" ]] || rm -f "$deb"
		done
		rm -rf "${dir:?}/${KERNEL_BASE:?}"
		dpkg-deb -x "$new" "$dir/$KERNEL_BASE"
		[[ -f $KERNEL_SOURCE_TARBALL ]] || die "$KERNEL_SOURCE_PKG has no ${KERNEL_SOURCE_TARBALL##*/}"
		echo "$KERNEL_SOURCE_PKG_VERSION" >"$(kernel_source_record)"
	fi
	[[ $(kernel_source_tarball_version) == "$KERNEL_SOURCE_PKG_VERSION" ]] ||
		die "$KERNEL_SOURCE_TARBALL is not from $KERNEL_SOURCE_PKG $KERNEL_SOURCE_PKG_VERSION"
}

# debian_apt DIR: DEBIAN_APT, apt's options for a source list and state of
# DIR's own (DIR/apt).
debian_apt() {
	DEBIAN_APT=(-o "Dir::Etc::sourcelist=$1/apt/sources.list" -o Dir::Etc::sourceparts=/dev/null
		-o "Dir::State::Lists=$1/apt/lists" -o "Dir::Cache=$1/apt/cache")
}

# debian_update SUITE DIR: DIR's package lists (debian_apt), from Debian
# SUITE; fails when they cannot be read.
debian_update() {
	local suite=$1 dir=$2
	mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(debian_mirror) $suite main" >"$dir/apt/sources.list"
	debian_apt "$dir"
	apt-get "${DEBIAN_APT[@]}" update -qq || return 1
	touch "$dir/apt/updated"
}

# debian_download SUITE DIR PKG[=VERSION]...: the packages' .deb files
# from Debian SUITE into DIR, through a source list and apt state of DIR's
# own (DIR/apt): the machine's apt configuration and package set stay as
# they are.
debian_download() {
	local suite=$1 dir=$2
	shift 2
	debian_update "$suite" "$dir" || die "cannot read Debian $suite's package lists from $(debian_mirror)"
	(cd "$dir" && apt-get "${DEBIAN_APT[@]}" download -qq "$@" 2>/dev/null) ||
		die "cannot download $* from Debian $suite ($(debian_mirror))"
}

# debian_mirror: the Debian mirror the machine's apt sources use.
debian_mirror() {
	local m
	m=$(grep -rhoE '(URIs:|^deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
		grep -oE 'https?://[^ ]+' | head -n1)
	echo "${m:-http://deb.debian.org/debian}"
}

# Architecture table: one place to add an architecture.
#   kernel ARCH, cross compiler prefix, image path, defconfig, qemu binary
arch_kernel_arch() {
	case $1 in
	x86_64) echo x86 ;;
	arm64) echo arm64 ;;
	*) die "unknown architecture '$1' (known: x86_64, arm64)" ;;
	esac
}
arch_cross_compile() {
	case $1 in
	x86_64) echo "" ;;
	arm64) [[ $(arch_of_host) == arm64 ]] && echo "" || echo aarch64-linux-gnu- ;;
	esac
}
arch_image() {
	case $1 in
	x86_64) echo arch/x86/boot/bzImage ;;
	arm64) echo arch/arm64/boot/Image ;;
	esac
}
arch_defconfig() {
	case $1 in
	x86_64) echo x86_64_defconfig ;;
	arm64) echo defconfig ;;
	esac
}
arch_debian() {
	case $1 in
	x86_64) echo amd64 ;;
	arm64) echo arm64 ;;
	esac
}
# arch_of_host: the host's architecture in the table's names.
arch_of_host() {
	case $(uname -m) in
	aarch64) echo arm64 ;;
	*) uname -m ;;
	esac
}
arch_qemu_user() {
	case $1 in
	x86_64) echo x86_64 ;;
	arm64) echo aarch64 ;;
	esac
}
# guest_config_fragments ARCH: the guest's trimmed configuration for ARCH
# (and arm64's for QEMU's virt machine), one file a line, in merge order.
guest_config_fragments() {
	echo "$CFSB_ROOT/kernel/config/guest.config"
	[[ $1 != arm64 ]] || echo "$CFSB_ROOT/kernel/config/arm64-virt.config"
}
# The series' options, merged last so that nothing overrides them: the
# production ones, then the KUnit tests that every kernel built here runs
# at boot (scripts/host-image.sh builds a production kernel, without them).
SERIES_CONFIG_FRAGMENTS=("$CFSB_ROOT/Kconfig.fragment" "$CFSB_ROOT/kernel/config/kunit.config")
arch_packages() {
	case $1 in
	x86_64) echo qemu-system-x86 ;;
	arm64) echo qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross ;;
	esac
}

# The guest's root filesystem, shared read-only over virtio-9p. On x86_64 it
# is the host's own /, so the guest runs exactly the host's packages. For
# another architecture it is a Debian root filesystem of that architecture
# under $CFSB_CACHE, made once by debootstrap (its second stage runs under
# qemu-user-static through binfmt_misc) with the packages the guest's init
# and the tests use.
GUEST_ROOTFS_SUITE=bookworm
GUEST_ROOTFS_PACKAGES=(procps iproute2 kmod)
guest_rootfs() {
	case $1 in
	x86_64) echo / ;;
	*) echo "$CFSB_CACHE/rootfs-$1-$GUEST_ROOTFS_SUITE" ;;
	esac
}

# ensure_guest_rootfs ARCH: make the root filesystem guest_rootfs prints.
ensure_guest_rootfs() {
	local arch=$1 dir want
	[[ $arch == x86_64 ]] && return 0
	dir=$(guest_rootfs "$arch")
	want="$GUEST_ROOTFS_SUITE ${GUEST_ROOTFS_PACKAGES[*]}"
	[[ -f $dir/.cfsb-rootfs && $(cat "$dir/.cfsb-rootfs") == "$want" ]] && return 0
	[[ $(id -u) -eq 0 ]] || die "need root to make the $arch root filesystem"
	log "making the $arch root filesystem in $dir (debootstrap $GUEST_ROOTFS_SUITE, a few minutes)"
	mkdir -p "$CFSB_CACHE"
	debootstrap_arch "$arch" "$dir" "$CFSB_CACHE/rootfs-$arch.log" "$want" "${GUEST_ROOTFS_PACKAGES[@]}"
	log "made the $arch root filesystem ($(du -sm "$dir" | cut -f1) MB)"
}

# debootstrap_arch ARCH DIR LOG STAMP PACKAGE...: a Debian
# $GUEST_ROOTFS_SUITE minbase root filesystem of ARCH with PACKAGEs in DIR,
# STAMP in its .cfsb-rootfs. It is made beside DIR and moved there whole,
# so that DIR is never half made. For another architecture than the
# host's, debootstrap's second stage runs ARCH's binaries: binfmt_misc must
# hand them to qemu-user-static (registered by its package; not where
# binfmt_misc was not mounted when it was installed).
debootstrap_arch() {
	local arch=$1 dir=$2 logf=$3 stamp=$4 tmp=$2.tmp
	shift 4
	ensure_packages debootstrap qemu-user-static binfmt-support
	if [[ ! -e /proc/sys/fs/binfmt_misc/register ]]; then
		mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc ||
			die "cannot mount binfmt_misc, which the $arch root filesystem needs"
	fi
	update-binfmts --enable "qemu-$(arch_qemu_user "$arch")" >/dev/null 2>&1 || true
	[[ $arch == "$(arch_of_host)" || -e /proc/sys/fs/binfmt_misc/qemu-$(arch_qemu_user "$arch") ]] ||
		die "binfmt_misc has no qemu-$(arch_qemu_user "$arch") handler"
	rm -rf "$tmp" "$dir"
	debootstrap --arch="$(arch_debian "$arch")" --variant=minbase --foreign \
		--include="$(IFS=,; echo "$*")" \
		"$GUEST_ROOTFS_SUITE" "$tmp" "$(debian_mirror)" >"$logf" 2>&1 ||
		die "debootstrap failed: see $logf"
	chroot "$tmp" /debootstrap/debootstrap --second-stage >>"$logf" 2>&1 ||
		die "debootstrap's second stage failed: see $logf"
	rm -rf "$tmp"/var/cache/apt/archives/*.deb
	echo "$stamp" >"$tmp/.cfsb-rootfs"
	mv "$tmp" "$dir"
}

# Kernel trees: one git repository with the pristine source committed as
# the base, and one worktree per variant ("stock", "patched").
kernel_repo() { echo "$CFSB_CACHE/$KERNEL_TREE_PREFIX-stock"; }
kernel_tree() { echo "$CFSB_CACHE/$KERNEL_TREE_PREFIX-$1"; }
# The build directory is a direct child of the tree, so that Kbuild uses the
# relative srctree "..": the preprocessed output is then identical in both
# trees and ccache hits across them.
kernel_build_dir() { echo "$(kernel_tree "$1")/build-$2-$3"; }
kernel_image_path() { echo "$(kernel_build_dir "$1" "$2" "$3")/$(arch_image "$2")"; }

# Debian's own kernel of the source version taken (6.12, x86_64): the stock
# kernel as users run it, downloaded instead of built. Under
# debian_kernel_dir: vmlinuz; its modules in modules-root/lib/modules
# (depmod run), which scripts/vm-run.sh shares with the guest as it does a
# built kernel's; initrd.img, which loads the virtio-9p modules and mounts
# the guest's root (scripts/guest-initramfs.sh); and .cfsb-made, what they
# were made from.
debian_kernel_dir() { echo "$CFSB_CACHE/debian-kernel/$KERNEL_SOURCE_PKG_VERSION"; }
debian_kernel_image() { echo "$(debian_kernel_dir)/vmlinuz"; }
# debian_kernel_package: the name of the linux-image package built from
# the source version taken (linux-image-6.12.117+deb12-amd64), from the
# package lists; nothing when they have none.
debian_kernel_package() {
	apt-cache pkgnames "linux-image-$KERNEL_BASE_VERSION+" 2>/dev/null |
		grep -E "^linux-image-${KERNEL_BASE_VERSION//./\\.}\+[a-z0-9.]+-amd64$" | sort | head -n1
}
ensure_debian_kernel() {
	local dir pkg release tmp want module
	[[ $KERNEL_BASE == 6.12 ]] || die "Debian's kernel is taken for the 6.12 base only"
	dir=$(debian_kernel_dir)
	# (Made again when this function or the initramfs' init changes.)
	want="$KERNEL_SOURCE_PKG_VERSION $(files_hash "$CFSB_ROOT/scripts/guest-initramfs.sh") $(declare -f ensure_debian_kernel | sha256sum | cut -c1-16)"
	[[ -f $dir/.cfsb-made && $(cat "$dir/.cfsb-made") == "$want" && -f $dir/vmlinuz ]] && return 0
	ensure_packages busybox-static cpio kmod xz-utils
	pkg=$(debian_kernel_package)
	[[ -n $pkg ]] || { apt_lists_fresh || true; pkg=$(debian_kernel_package); }
	[[ -n $pkg ]] || die "the package lists have no linux-image-$KERNEL_BASE_VERSION+*-amd64 (Debian's build of $KERNEL_SOURCE_PKG $KERNEL_SOURCE_PKG_VERSION)"
	release=${pkg#linux-image-}
	log "fetching Debian's kernel: $pkg $KERNEL_SOURCE_PKG_VERSION"
	# (On a new machine this is the first thing the cache holds.)
	mkdir -p "$CFSB_CACHE"
	tmp=$(mktemp -d "$CFSB_CACHE/debian-kernel.XXXXXX")
	# (What is half made is not kept.)
	undo_die() { rm -rf "$tmp"; die "$@"; }
	# (apt's download sandbox user cannot write a root-only directory.)
	(cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$pkg=$KERNEL_SOURCE_PKG_VERSION") ||
		undo_die "cannot download $pkg $KERNEL_SOURCE_PKG_VERSION"
	dpkg-deb -x "$tmp"/*.deb "$tmp/deb" || undo_die "cannot unpack $pkg"
	mkdir -p "$tmp/made/modules-root/lib" "$tmp/initramfs/bin" "$tmp/initramfs/modules" "$tmp/initramfs/dev"
	mv "$tmp/deb/boot/vmlinuz-$release" "$tmp/made/vmlinuz"
	mv "$tmp/deb/lib/modules" "$tmp/made/modules-root/lib/modules"
	depmod -b "$tmp/made/modules-root" "$release" || undo_die "depmod failed for $release"
	# The initramfs: busybox, the 9p modules (uncompressed, for busybox's
	# insmod) in their load order, /init, and the console init writes to.
	cp /bin/busybox "$tmp/initramfs/bin/busybox"
	cp "$CFSB_ROOT/scripts/guest-initramfs.sh" "$tmp/initramfs/init"
	chmod 0755 "$tmp/initramfs/init"
	mknod -m 0600 "$tmp/initramfs/dev/console" c 5 1
	while read -r module; do
		xz -dcf "$module" >"$tmp/initramfs/modules/$(basename "${module%.xz}")"
		basename "${module%.xz}" >>"$tmp/initramfs/modules/order"
	done < <(modprobe -d "$tmp/made/modules-root" -S "$release" --show-depends -a 9pnet_virtio 9p |
		awk '$1 == "insmod" && !seen[$2]++ { print $2 }')
	[[ -s $tmp/initramfs/modules/order ]] || undo_die "$pkg: no 9p modules"
	(cd "$tmp/initramfs" && find . | LC_ALL=C sort | cpio --quiet -o -H newc | gzip -9 >"$tmp/made/initrd.img") ||
		undo_die "cannot make the initramfs"
	echo "$want" >"$tmp/made/.cfsb-made"
	rm -rf "$dir"
	mkdir -p "${dir%/*}"
	mv "$tmp/made" "$dir"
	rm -rf "$tmp"
	log "Debian's kernel $release: $dir/vmlinuz"
}

# ensure_kernel_repo: kernel_repo holds the source of the version taken
# (kernel_source_resolve) as its commit tagged cfsb-base, its version in a
# stamp. A repository of another version is made again, its worktrees (the
# patched tree, the export's) removed with it, once the new source is
# unpacked and checked; a patched tree holding work not in the series, or
# a worktree of someone else's, stops that.
ensure_kernel_repo() {
	local repo have wt tmp
	repo=$(kernel_repo)
	have=$(kernel_repo_version)
	[[ -n $have && $have == "$KERNEL_SOURCE_PKG_VERSION" ]] && return 0
	ensure_kernel_source
	if [[ -e $repo ]]; then
		git -C "$repo" worktree prune 2>/dev/null || true
		while read -r wt; do
			if [[ $wt -ef $repo || $wt -ef $(kernel_tree export) ]]; then
				continue
			elif [[ $wt -ef $(kernel_tree patched) ]]; then
				! series_tree_holds_work "$wt" ignore ||
					die "$wt holds commits or changes that are not in the series, and $KERNEL_SOURCE_PKG $KERNEL_SOURCE_PKG_VERSION is to replace ${have:-its source}:" \
						"export them (scripts/kernel-series.sh --base $KERNEL_BASE export), or drop them (git -C $wt checkout -f --detach cfsb-base)"
			else
				die "$wt is a worktree of $repo, which $KERNEL_SOURCE_PKG $KERNEL_SOURCE_PKG_VERSION is to replace (${have:-no version recorded} now):" \
					"keep its work elsewhere and remove it (git -C $repo worktree remove --force $wt)"
			fi
		done < <(git -C "$repo" worktree list --porcelain 2>/dev/null | sed -n 's/^worktree //p')
	fi
	log "unpacking $KERNEL_SOURCE_TARBALL ($KERNEL_SOURCE_PKG $KERNEL_SOURCE_PKG_VERSION)"
	tmp="$CFSB_CACHE/unpack.$$"
	rm -rf "$tmp" && mkdir -p "$tmp"
	tar -C "$tmp" -xf "$KERNEL_SOURCE_TARBALL"
	tmp+=/$KERNEL_SOURCE_PKG
	if [[ $(awk -F' = ' '$1 == "VERSION" { v = $2 } $1 == "PATCHLEVEL" { p = $2 }
		$1 == "SUBLEVEL" { s = $2 } END { print v "." p "." s }' "$tmp/Makefile" 2>/dev/null) != "$KERNEL_BASE_VERSION" ]]; then
		rm -rf "${tmp%/*}"
		die "$KERNEL_SOURCE_TARBALL is not Linux $KERNEL_BASE_VERSION"
	fi
	(
		cd "$tmp" || exit 1
		git init -q
		git config user.name "cfs-borrowing build"
		git config user.email "build@localhost"
		git config core.autocrlf false
		git config gc.auto 0
		printf '/build-*/\n' >>.git/info/exclude
		# Debian's tarball ships a .gitignore that ignores everything.
		git add -f -A .
		# Fixed metadata: the base commit has the same id on every machine.
		GIT_AUTHOR_DATE=2025-01-01T00:00:00Z GIT_COMMITTER_DATE=2025-01-01T00:00:00Z \
			git commit -q -m "Linux $KERNEL_BASE_VERSION ($KERNEL_SOURCE_PKG $KERNEL_SOURCE_PKG_VERSION)"
		git tag cfsb-base
	) || { rm -rf "${tmp%/*}"; die "cannot make a git repository of $KERNEL_SOURCE_TARBALL"; }
	echo "$KERNEL_SOURCE_PKG_VERSION" >"$tmp/.git/cfsb-base-version"
	if [[ -e $repo ]]; then
		log "replacing $repo and its worktrees ($KERNEL_SOURCE_PKG ${have:-of no recorded version} by $KERNEL_SOURCE_PKG_VERSION)"
		rm -rf "$repo" "$(kernel_tree patched)" "$(kernel_tree export)"
	fi
	mv "$tmp" "$repo"
	rmdir "${tmp%/*}"
}

# --- series generated from source files -------------------------------------
# A file that a series adds is kept as a source file in the checkout, at
# SRC/<its path in the tree>: the series is generated from it (export) and
# checked against it (nerdctl-patch/src, kernel/src).

# series_sources SRC: the source files under SRC, relative to it (those in
# its subdirectories: files at its top, such as a go.mod, are its own).
series_sources() { (cd "$1" && find . -mindepth 2 -type f | sed 's|^\./||' | LC_ALL=C sort); }

# patch_changes PATCH...: "PATCH new|changed PATH" for every file a patch
# adds or changes.
patch_changes() {
	local p
	for p in "$@"; do
		awk -v p="$p" '
			function flush() { if (f != "") print p " " (isnew ? "new" : "changed") " " f }
			/^diff --git / { flush(); f = substr($4, 3); isnew = 0; next }
			/^new file mode / { isnew = 1 }
			END { flush() }' "$p"
	done
}

# patch_added_file PATCH PATH: PATH as PATCH adds it (its "+" lines).
patch_added_file() {
	awk -v f="b/$2" '
		/^diff --git / { on = ($4 == f); hunk = 0; next }
		on && /^@@/ { hunk = 1; next }
		on && hunk && /^\+/ { print substr($0, 2) }' "$1"
}

# check_series_sources SRC EXPORT PATCH...: the series PATCH... adds each
# source file of SRC as it is there, changes none of them afterwards, and
# adds no other file in their directories (it may change the upstream
# files there); else says what differs and fails (EXPORT: the command
# that regenerates the series).
check_series_sources() {
	local src=$1 export=$2 p kind f status=0 files
	shift 2
	local -A added=() dirs=()
	mapfile -t files < <(series_sources "$src")
	[[ ${#files[@]} -gt 0 ]] || die "no source files in $src"
	for f in "${files[@]}"; do dirs[$(dirname "$f")]=1; done
	while read -r p kind f; do
		[[ -n ${dirs[$(dirname "$f")]:-} ]] || continue
		if [[ $kind == changed ]]; then
			[[ -f $src/$f ]] || continue # an upstream file
			log "$f: ${p##*/} changes it after it is added: its source is the file as added"
			status=1
		elif [[ ! -f $src/$f ]]; then
			log "$f: ${p##*/} adds it, and it has no source in $src"
			status=1
		else
			added[$f]=$p
		fi
	done < <(patch_changes "$@")
	for f in "${files[@]}"; do
		if [[ -z ${added[$f]:-} ]]; then
			log "$f: in $src, added by no patch"
			status=1
		elif ! cmp -s <(patch_added_file "${added[$f]}" "$f") "$src/$f"; then
			log "$f: ${added[$f]##*/} adds another version than $src/$f"
			status=1
		fi
	done
	if [[ $status -ne 0 ]]; then
		log "the series is stale against its sources in $src: run $export"
		return 1
	fi
	log "sources under ${!dirs[*]} (${#files[@]}): the series adds them as they are"
}

# sources_from_tree FROM SRC PATCH...: before an export from the tree FROM,
# each source file as FROM has it (HEAD), as SRC has it and as the series
# PATCH... adds it: one changed in FROM only is copied into SRC; one
# changed in both stops the export.
sources_from_tree() {
	local from=$1 src=$2 p kind f tmp files
	shift 2
	local -A in_series=()
	while read -r p kind f; do [[ $kind == new ]] && in_series[$f]=$p; done < <(patch_changes "$@")
	tmp=$(mktemp -d)
	mapfile -t files < <(series_sources "$src")
	for f in "${files[@]}"; do
		mkdir -p "$tmp/$(dirname "$f")"
		git -C "$from" show "HEAD:$f" >"$tmp/$f" 2>/dev/null || { rm -rf "$tmp"; die "$f: not in $from"; }
		cmp -s "$tmp/$f" "$src/$f" && continue
		[[ -n ${in_series[$f]:-} ]] && patch_added_file "${in_series[$f]}" "$f" >"$tmp/$f.series"
		if [[ -f $tmp/$f.series ]] && cmp -s "$src/$f" "$tmp/$f.series"; then
			cp "$tmp/$f" "$src/$f"
			log "$f: changed in $from: copied to ${src#"$CFSB_ROOT"/}"
		elif ! [[ -f $tmp/$f.series ]] || ! cmp -s "$tmp/$f" "$tmp/$f.series"; then
			rm -rf "$tmp"
			die "$f: changed both in $from and in ${src#"$CFSB_ROOT"/}: keep one of them"
		fi
	done
	rm -rf "$tmp"
}

# remake_commits FROM SCRATCH SRC COMMIT...: in SCRATCH (a worktree of
# FROM's repository), on its HEAD, one commit for each COMMIT of FROM: its
# changes but to the source files of SRC, which are taken from SRC wherever
# the commit's tree has them, and its author and message. What a later
# commit changed in a source file so lands in the commit that adds it, and
# a commit left with nothing else (a fixup) is dropped. Committed by the
# build's fixed identity at the author date, as prepare_series_tree
# applies a series. With REMAKE_IDENT ("Name <email>") set, each commit is
# authored and signed off by it instead of the commit's author; with
# REMAKE_MESSAGES (a directory of message files) too, its message is its
# file's there (message_file).
remake_commits() {
	local from=$1 scratch=$2 src=$3 c f date msg files exclude=()
	shift 3
	mapfile -t files < <(series_sources "$src")
	for f in "${files[@]}"; do exclude+=(":(exclude)$f"); done
	for c in "$@"; do
		git -C "$from" diff --binary "$c^" "$c" -- . "${exclude[@]}" |
			git -C "$scratch" apply --index --allow-empty ||
			die "$(git -C "$from" log -1 --format='%h %s' "$c"): does not apply"
		for f in "${files[@]}"; do
			git -C "$scratch" cat-file -e "$c:$f" 2>/dev/null || continue
			mkdir -p "$scratch/$(dirname "$f")"
			cp "$src/$f" "$scratch/$f"
			git -C "$scratch" add -f "$f"
		done
		if git -C "$scratch" diff --cached --quiet HEAD; then
			log "$(git -C "$from" log -1 --format='%h %s' "$c"): dropped, its changes are in the sources"
			continue
		fi
		date=$(git -C "$from" log -1 --format=%aI "$c")
		if [[ -z ${REMAKE_IDENT:-} ]]; then
			GIT_COMMITTER_DATE=$date git -C "$scratch" -c user.name="cfs-borrowing build" \
				-c user.email=build@localhost commit -q --no-verify -C "$c"
			continue
		fi
		if [[ -n ${REMAKE_MESSAGES:-} ]]; then
			# The message as its file has it, signed off by the exporter.
			msg=$(message_file "$REMAKE_MESSAGES" "$(git -C "$from" log -1 --format=%s "$c")")
			[[ -n $msg ]] || die "$(git -C "$from" log -1 --format='%h %s' "$c"): no message file in $REMAKE_MESSAGES"
			{ cat "$msg"; printf '\nSigned-off-by: %s\n' "$REMAKE_IDENT"; }
		else
			git -C "$from" log -1 --format=%B "$c" |
				awk -v ident="$REMAKE_IDENT" '/^Signed-off-by: / { $0 = "Signed-off-by: " ident } { print }'
		fi | GIT_COMMITTER_DATE=$date git -C "$scratch" -c user.name="cfs-borrowing build" \
			-c user.email=build@localhost commit -q --no-verify --author="$REMAKE_IDENT" --date="$date" -F -
	done
}

# --- commit messages kept as files ------------------------------------------
# The kernel series keep their patches' messages in a directory (MSGS,
# kernel/messages): MSGS/NAME.txt for a message the series of every base
# carry as it is, MSGS/BASE/NAME.txt for one base's own, which comes
# first. A file holds the subject line, a blank line and the body, without
# the Signed-off-by lines (an export adds its author's); it is found by its
# first line, the subject. The export takes each patch's message from its
# file, and a message amended in the tree into its file first
# (messages_from_tree), as it does for the source files.

# message_clean: the message on stdin without its Signed-off-by lines and
# the blank lines that end it.
message_clean() { grep -v '^Signed-off-by: ' | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'; }

# patch_message PATCH: PATCH's message as a message file holds it.
patch_message() {
	local tmp subject
	tmp=$(mktemp -d)
	subject=$(git mailinfo "$tmp/msg" "$tmp/patch" <"$1" | sed -n 's/^Subject: //p')
	{ printf '%s\n\n' "$subject"; cat "$tmp/msg"; } | message_clean
	rm -rf "$tmp"
}

# commit_message DIR COMMIT: COMMIT's message as a message file holds it.
commit_message() { git -C "$1" log -1 --format=%B "$2" | message_clean; }

# message_file MSGS SUBJECT: the file of MSGS that holds SUBJECT's message
# for the selected base (its own first), nothing if none.
message_file() {
	local f
	for f in "$1/$KERNEL_BASE"/*.txt "$1"/*.txt; do
		[[ -f $f && $(head -n1 "$f") == "$2" ]] && { echo "$f"; return 0; }
	done
	return 0
}

# message_name SUBJECT: a file name for SUBJECT's message (as git
# format-patch names a patch, without its number).
message_name() {
	local name
	name=$(printf '%s' "$1" | tr -cs 'A-Za-z0-9._' '-')
	name=${name:0:52}
	name=${name#-}
	echo "${name%-}.txt"
}

# check_series_messages MSGS EXPORT PATCH...: every PATCH's message is its
# file's in MSGS, and MSGS holds no file that no patch of any base's series
# (PATCH..., and the other bases' in kernel/) has; else says what differs
# and fails (EXPORT: the command that regenerates the series).
check_series_messages() {
	local msgs=$1 export=$2 p f msg subject status=0
	shift 2
	local -A used=()
	for p in "$@"; do
		msg=$(patch_message "$p")
		subject=${msg%%$'\n'*}
		f=$(message_file "$msgs" "$subject")
		if [[ -z $f ]]; then
			log "${p##*/}: no file in ${msgs#"$CFSB_ROOT"/} holds its message"
			status=1
		elif ! cmp -s <(printf '%s\n' "$msg") "$f"; then
			log "${p##*/}: its message is not ${f#"$CFSB_ROOT"/}'s"
			status=1
		fi
		used[$subject]=1
	done
	for p in "$CFSB_ROOT"/kernel/patches*/[0-9][0-9][0-9][0-9]-*.patch; do
		[[ ${p##*/} == 0000-* ]] || used[$(patch_message "$p" | head -n1)]=1
	done
	for f in "$msgs"/*.txt "$msgs"/*/*.txt; do
		[[ -f $f && -z ${used[$(head -n1 "$f")]:-} ]] || continue
		log "${f#"$CFSB_ROOT"/}: the message of no patch"
		status=1
	done
	if [[ $status -ne 0 ]]; then
		log "the series' messages are stale against ${msgs#"$CFSB_ROOT"/}: run $export"
		return 1
	fi
	log "messages in ${msgs#"$CFSB_ROOT"/} ($#): the series has them as they are"
}

# messages_from_tree FROM MSGS "COMMIT..." PATCH...: before an export from
# the tree FROM of the series PATCH..., each COMMIT's message as FROM has
# it, as its file in MSGS has it and as the series has it: one changed in
# FROM only is copied into its file (a new one for a subject that has
# none); one changed in both stops the export.
messages_from_tree() {
	local from=$1 msgs=$2 c p f subject tmp
	local -a commits
	read -ra commits <<<"$3"
	shift 3
	local -A in_series=()
	tmp=$(mktemp -d)
	for p in "$@"; do
		patch_message "$p" >"$tmp/${p##*/}"
		in_series[$(head -n1 "$tmp/${p##*/}")]=$tmp/${p##*/}
	done
	for c in "${commits[@]}"; do
		commit_message "$from" "$c" >"$tmp/tree"
		subject=$(head -n1 "$tmp/tree")
		f=$(message_file "$msgs" "$subject")
		[[ -n $f ]] && cmp -s "$tmp/tree" "$f" && continue
		p=${in_series[$subject]:-}
		if [[ -z $f ]]; then
			f=$msgs/$(message_name "$subject")
			[[ ! -e $f ]] || f=$msgs/$KERNEL_BASE/${f##*/}
			mkdir -p "$(dirname "$f")"
			cp "$tmp/tree" "$f"
			log "the message of '$subject': new, in ${f#"$CFSB_ROOT"/}"
		elif [[ -n $p ]] && cmp -s "$p" "$f"; then
			cp "$tmp/tree" "$f"
			log "the message of '$subject': changed in $from: copied to ${f#"$CFSB_ROOT"/}"
		elif [[ -z $p ]] || ! cmp -s "$p" "$tmp/tree"; then
			rm -rf "$tmp"
			die "the message of '$subject': changed both in $from and in ${f#"$CFSB_ROOT"/}: keep one of them"
		fi
	done
	rm -rf "$tmp"
}

# exporter_ident: "Name <email>" of whoever exports a series, who authors
# and signs it off: git's identity (user.name and user.email, or
# GIT_AUTHOR_NAME and GIT_AUTHOR_EMAIL).
exporter_ident() {
	local ident
	ident=$(git -C "$CFSB_ROOT" var GIT_AUTHOR_IDENT) ||
		die "no git identity to sign the series off with: git config user.name and user.email"
	echo "${ident% * *}"
}

# sha256 of the given files' names and contents, in order.
files_hash() {
	local f
	for f in "$@"; do
		printf '%s\n' "${f##*/}"
		cat "$f"
	done | sha256sum | cut -d' ' -f1
}

# use_go: the Go toolchain for the guest's Go binaries (nerdctl, crictl) and
# the nerdctl series' checks: Debian's own, the same on every machine
# whatever else it has. Debian 12's Go (1.19, 1.23 in its backports) is
# older than crictl needs; Debian 13's $GO_DEBIAN_PKG is the current
# stable release's, and its go and gofmt are static binaries that run on
# Debian 12. Downloaded once into $CFSB_CACHE/go and unpacked there (not
# installed: the machine's package set stays as it is); the version taken
# is the suite's current one, recorded in $CFSB_CACHE/go/version.
# Reproducible, self-contained builds: no VCS stamping (trees are git
# worktrees), no toolchain download, no cgo (the binaries run in the guest).
GO_DEBIAN_SUITE=trixie
GO_DEBIAN_PKG=golang-1.24
use_go() {
	local dir=$CFSB_CACHE/go goroot=$CFSB_CACHE/go/root/usr/lib/go-${GO_DEBIAN_PKG#golang-}
	if [[ ! -x $goroot/bin/go ]]; then
		log "fetching Go: $GO_DEBIAN_PKG-go and -src from Debian $GO_DEBIAN_SUITE"
		rm -rf "$dir"
		debian_download "$GO_DEBIAN_SUITE" "$dir" "$GO_DEBIAN_PKG-go" "$GO_DEBIAN_PKG-src"
		local deb
		for deb in "$dir"/*.deb; do
			dpkg-deb -x "$deb" "$dir/root" || die "cannot unpack $deb"
			# shellcheck disable=SC2016 # dpkg's fields, not the shell's
			dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb" >>"$dir/version"
		done
		rm -f "$dir"/*.deb
		"$goroot/bin/go" version >/dev/null || die "Debian's Go in $goroot does not run"
		log "Go: $(paste -sd, "$dir/version")"
	fi
	PATH=$goroot/bin:$PATH
	# CFSB_GO_JOBS: how many packages go builds and tests at once (its
	# -p; default: one per CPU). -trimpath everywhere: no local paths in a
	# binary, and the builds, go vet and go test share the build cache (from
	# a cold cache, nerdctl's checks took 235 s instead of 275 on one CPU).
	# Go's build and module caches live with the rest under $CFSB_CACHE
	# (an empty $CFSB_CACHE is a cold start), the modules writable so
	# that a plain rm removes them.
	export GOFLAGS="-buildvcs=false -trimpath -modcacherw${CFSB_GO_JOBS:+ -p=$CFSB_GO_JOBS}" GOTOOLCHAIN=local CGO_ENABLED=0
	export GOCACHE=$CFSB_CACHE/go-build GOMODCACHE=$CFSB_CACHE/go-mod
}

# kernel_build_lock: one kernel build at a time on this machine (two would
# each take every CPU, and two of one tree would corrupt it): takes the lock
# on fd 9 (held until exit or flock -u 9), waiting (and saying so) for another.
kernel_build_lock() {
	mkdir -p "$CFSB_CACHE"
	exec 9>"$CFSB_CACHE/kernel-build.lock"
	if ! flock -n 9; then
		log "waiting for another kernel build to finish"
		flock 9
	fi
}

# The ccache settings every kernel build uses; the same everywhere, or the
# builds do not share the cache. Depend mode: a miss costs the compile and
# no preprocessor run besides (the kernel's -Wp,-MMD names the headers).
# Measured: the i386 KUnit kernel from an empty cache at make -j1, 538 s
# in the default mode and 384 in depend mode against 377 and 368 without
# ccache, two builds side by side each time; again from the cache, 50 s
# (96 % hits).
use_ccache() {
	export CCACHE_DIR="$CFSB_CACHE/ccache" CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-10G}
	export CCACHE_COMPILERCHECK=content CCACHE_DEPEND=1
}

series_patches() {
	[[ -d $KERNEL_SERIES_DIR ]] || return 0
	find "$KERNEL_SERIES_DIR" -maxdepth 1 -name '[0-9][0-9][0-9][0-9]-*.patch' ! -name '0000-*' | sort
}

# tree_reset_to_base TREE UNTRACKED: check out the tag cfsb-base in TREE,
# discarding any change (and, with UNTRACKED=clean, every untracked file).
tree_reset_to_base() {
	git -C "$1" am --abort >/dev/null 2>&1 || true
	git -C "$1" reset -q --hard
	git -C "$1" checkout -q --detach cfsb-base
	[[ $2 == ignore ]] || git -C "$1" clean -q -fdx
}

# base_worktree REPO TREE: TREE, a worktree of REPO at the tag cfsb-base,
# made if it does not exist.
base_worktree() {
	[[ -d $2 ]] && return 0
	git -C "$1" worktree prune
	git -C "$1" worktree add -q --detach "$2" cfsb-base
}

# series_stamp TREE: the file in which prepare_series_tree records what it
# applied to TREE ("HASH HEAD"; "applying" while it applies; "exported
# HEAD" once the tree's work is in the series).
series_stamp() { echo "$(git -C "$1" rev-parse --absolute-git-dir)/cfsb-series"; }

# mark_series_exported TREE: TREE's commits are exported, so the next
# prepare_series_tree may give it the series.
mark_series_exported() { echo "exported $(git -C "$1" rev-parse HEAD)" >"$(series_stamp "$1")"; }

# series_tree_holds_work TREE UNTRACKED: does the patched TREE hold work
# that is not in the series it was given (prepare_series_tree's stamp):
# commits on top of what was applied, or changes (UNTRACKED "ignore":
# untracked files are not one)? Not a tree as the last application left
# it (or at the base), nor one whose application was cut short
# ("applying").
series_tree_holds_work() {
	local tree=$1 changes=(status --porcelain) have head
	[[ $2 == ignore ]] && changes+=(--untracked-files=no)
	have=$(cat "$(series_stamp "$tree")" 2>/dev/null || true)
	[[ $have != applying ]] || return 1
	head=$(git -C "$tree" rev-parse HEAD)
	{ [[ $head != "$(git -C "$tree" rev-parse cfsb-base)" && $have != *" $head" ]]; } ||
		[[ -n $(git -C "$tree" "${changes[@]}") ]]
}

# prepare_series_tree REPO TREE VARIANT KEEP_TREE UNTRACKED WHAT EXPORT [PATCH...]
# Makes TREE, a worktree of REPO (or REPO itself), hold exactly the tag
# cfsb-base (VARIANT stock) or cfsb-base plus the series PATCH... (patched),
# and reuses it when it already does: a stamp in the worktree's git
# directory records the series' hash and the HEAD it gave.
#   KEEP_TREE=1   use a patched tree as it is (to work on the series);
#   UNTRACKED     "ignore": untracked files are not a change (the kernel keeps
#                 its build directories in the tree); "clean": they are, and
#                 go when the tree is reset;
#   WHAT          what the series applies to, for messages;
#   EXPORT        the command that exports a patched tree's commits.
# A patched tree that holds work not in the series (commits on top of what
# was applied, changes) is never reset: it stops with how to export or
# drop that work. The series is applied by a fixed committer at the author
# dates, so the patched commits have the same ids on every machine.
prepare_series_tree() {
	local repo=$1 tree=$2 variant=$3 keep=$4 untracked=$5 what=$6 export=$7
	shift 7
	local changes=(status --porcelain) stampf want have head out applied patches failed
	[[ $untracked == ignore ]] && changes+=(--untracked-files=no)
	if [[ $variant == stock ]]; then
		if [[ $(git -C "$tree" rev-parse HEAD) != "$(git -C "$tree" rev-parse cfsb-base)" ]] ||
			[[ -n $(git -C "$tree" "${changes[@]}") ]]; then
			log "stock tree differs from the base: resetting it"
			tree_reset_to_base "$tree" "$untracked"
		fi
		return 0
	fi
	[[ $# -gt 0 ]] || die "no patches to apply to $what"
	base_worktree "$repo" "$tree"
	if [[ $keep -eq 1 ]]; then
		log "--keep-tree: using $tree as it is"
		return 0
	fi
	stampf=$(series_stamp "$tree")
	want=$(files_hash "$@")
	have=$(cat "$stampf" 2>/dev/null || true)
	head=$(git -C "$tree" rev-parse HEAD)
	if [[ $have == "$want $head" ]] && [[ -z $(git -C "$tree" "${changes[@]}") ]]; then
		return 0
	fi
	if series_tree_holds_work "$tree" "$untracked"; then
		die "$tree holds commits or changes that are not in the series (HEAD $(git -C "$tree" log -1 --format='%h %s')):" \
			"commit and export them ($export), or drop them (git -C $tree checkout -f --detach cfsb-base)"
	fi
	[[ -n $have ]] && log "patch series changed: re-applying $# patches"
	echo applying >"$stampf"
	tree_reset_to_base "$tree" "$untracked"
	if ! out=$(git -C "$tree" -c user.name="cfs-borrowing build" -c user.email=build@localhost \
		am -q --whitespace=nowarn --committer-date-is-author-date "$@" 2>&1); then
		patches=("$@")
		applied=$(git -C "$tree" rev-list --count cfsb-base..HEAD)
		failed=${patches[applied]:-?}
		tree_reset_to_base "$tree" "$untracked"
		# git's reasons (which file, which hunk); not its advice to go on
		# with "git am", whose session is aborted.
		grep -E '^(error|fatal|warning):' <<<"$out" | sed 's/^/  /' >&2
		die "the series does not apply to $what: ${failed##*/} is the first patch that fails" \
			"($applied of $# applied before it)"
	fi
	[[ -z $out ]] || printf '%s\n' "$out" >&2
	log "applied $# patches to $what"
	echo "$want $(git -C "$tree" rev-parse HEAD)" >"$stampf"
}

# The base every script uses unless its --base option selects another.
select_kernel_base "${CFSB_KERNEL_BASE:-6.12}"
