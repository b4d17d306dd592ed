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

# The kernel the series is based on: Debian's linux-source-6.12 package.
KERNEL_SOURCE_PKG=linux-source-6.12
KERNEL_SOURCE_PKG_VERSION=6.12.117-1~deb12u1
KERNEL_SOURCE_TARBALL=/usr/src/linux-source-6.12.tar.xz
KERNEL_BASE_VERSION=6.12.117

# Debian packages the host side needs (build, boot, selftests).
HOST_PACKAGES=(
	"$KERNEL_SOURCE_PKG=$KERNEL_SOURCE_PKG_VERSION"
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

log() { printf '[%s] %s\n' "${0##*/}" "$*" >&2; }
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

# ensure_packages PKG...: install the Debian packages that are missing.
# Idempotent: only calls apt when something is missing.
ensure_packages() {
	local missing=() pkg name want
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
	log "installing: ${missing[*]}"
	# An old or missing package index makes apt fail to find packages.
	if [[ ! -f /var/lib/apt/periodic/cfsb-updated ]] ||
		[[ -n $(find /var/lib/apt/periodic/cfsb-updated -mmin +1440 2>/dev/null) ]]; then
		apt-get update -qq
		mkdir -p /var/lib/apt/periodic && touch /var/lib/apt/periodic/cfsb-updated
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
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
	arm64) [[ $(uname -m) == aarch64 ]] && echo "" || echo aarch64-linux-gnu- ;;
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
arch_packages() {
	case $1 in
	x86_64) echo qemu-system-x86 ;;
	arm64) echo qemu-system-arm gcc-aarch64-linux-gnu ;;
	esac
}

# Kernel trees: one git repository with the pristine source committed as
# the base, and one worktree per variant ("stock", "patched").
kernel_repo() { echo "$CFSB_CACHE/linux-stock"; }
kernel_tree() { echo "$CFSB_CACHE/linux-$1"; }
# The build directory is a direct child of the tree, so that Kbuild uses the
# relative srctree "..": the preprocessed output is then identical in both
# trees and ccache hits across them.
kernel_build_dir() { echo "$(kernel_tree "$1")/build-$2-$3"; }
kernel_image_path() { echo "$(kernel_build_dir "$1" "$2" "$3")/$(arch_image "$2")"; }

# sha256 of the given files' names and contents, in order.
files_hash() {
	local f
	for f in "$@"; do
		printf '%s\n' "${f##*/}"
		cat "$f"
	done | sha256sum | cut -d' ' -f1
}

# The ccache settings every kernel build uses; the same everywhere, or the
# builds do not share the cache.
use_ccache() {
	export CCACHE_DIR="$CFSB_CACHE/ccache" CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-10G}
	export CCACHE_COMPILERCHECK=content
}

series_patches() { find "$CFSB_ROOT/kernel/patches" -maxdepth 1 -name '[0-9][0-9][0-9][0-9]-*.patch' ! -name '0000-*' | sort; }

# tree_reset_to_base TREE UNTRACKED: check out the tag cfsb-base in TREE,
# discarding any change (and, with UNTRACKED=clean, every untracked file).
tree_reset_to_base() {
	git -C "$1" am --abort >/dev/null 2>&1 || true
	git -C "$1" reset -q --hard
	git -C "$1" checkout -q --detach cfsb-base
	[[ $2 == ignore ]] || git -C "$1" clean -q -fdx
}

# prepare_series_tree REPO TREE VARIANT KEEP_TREE UNTRACKED WHAT [PATCH...]
# Makes TREE, a worktree of REPO (or REPO itself), hold exactly the tag
# cfsb-base (VARIANT stock) or cfsb-base plus the series PATCH... (patched),
# and reuses it when it already does: a stamp in the worktree's git
# directory records the series' hash and the HEAD it gave.
#   KEEP_TREE=1   use a patched tree as it is (to work on the series);
#   UNTRACKED     "ignore": untracked files are not a change (the kernel keeps
#                 its build directories in the tree); "clean": they are, and
#                 go when the tree is reset;
#   WHAT          what the series applies to, for messages.
# The series is applied by a fixed committer at the author dates, so the
# patched commits have the same ids on every machine.
prepare_series_tree() {
	local repo=$1 tree=$2 variant=$3 keep=$4 untracked=$5 what=$6
	shift 6
	local changes=(status --porcelain) stampf want have
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
	if [[ ! -d $tree ]]; then
		git -C "$repo" worktree prune
		git -C "$repo" worktree add -q --detach "$tree" cfsb-base
	fi
	if [[ $keep -eq 1 ]]; then
		log "--keep-tree: using $tree as it is"
		return 0
	fi
	stampf=$(git -C "$tree" rev-parse --absolute-git-dir)/cfsb-series
	want=$(files_hash "$@")
	have=$(cat "$stampf" 2>/dev/null || true)
	if [[ $have == "$want $(git -C "$tree" rev-parse HEAD)" ]] &&
		[[ -z $(git -C "$tree" "${changes[@]}") ]]; then
		return 0
	fi
	[[ -n $have ]] && log "patch series or tree changed: re-applying $# patches"
	rm -f "$stampf"
	tree_reset_to_base "$tree" "$untracked"
	if ! git -C "$tree" -c user.name="cfs-borrowing build" -c user.email=build@localhost \
		am -q --whitespace=nowarn --committer-date-is-author-date "$@"; then
		tree_reset_to_base "$tree" "$untracked"
		die "the series does not apply to $what"
	fi
	log "applied $# patches to $what"
	echo "$want $(git -C "$tree" rev-parse HEAD)" >"$stampf"
}
