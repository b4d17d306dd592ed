#!/usr/bin/env bash
# Build a Linux 6.12 kernel for the QEMU guest: stock, or with the
# kernel/patches series applied. Incremental and stale-safe.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
	cat <<EOF
Usage: ${0##*/} [--variant patched|stock] [--base 6.12|7.2] [--arch x86_64|arm64] [--config default|debug|kcsan|hz100|rpi4]
                [--jobs N] [--keep-tree] [--configure-only] [--print-image]

Builds the kernel that scripts/vm-run.sh boots, under $CFSB_CACHE:
  - installs the Debian packages it needs (the base's kernel source, compilers,
    ccache, qemu; 7.2's source comes from Debian unstable, see scripts/lib.sh);
  - takes the base's source at the Debian version the series was made on
    (6.12: $(select_kernel_base 6.12; echo "$KERNEL_SOURCE_PIN"), 7.2: $(select_kernel_base 7.2; echo "$KERNEL_SOURCE_PIN")) or, where the machine
    does not have it and the archive no longer does, at the archive's
    newest of the same major.minor (6.12.y, 7.2.y), said on stderr; never
    at another major.minor;
  - unpacks the source once into a git repository (commit tagged cfsb-base,
    "Linux VERSION (PACKAGE DEBIAN-VERSION)", the version in the stamp
    .git/cfsb-base-version), and again, with its worktrees, when another
    version is taken (a patched tree holding work not in the series
    stops that);
  - "patched": a worktree with the base's series applied by git am
    (kernel/patches for 6.12, kernel/patches-7.2 for 7.2); the
    applied series is recorded by hash, and a changed series is re-applied
    from the base, so only the files the patches touch are rebuilt; a tree
    holding commits or changes not in the series is never reset: the build
    stops and says how to export (scripts/kernel-series.sh) or drop them;
  - configures: the architecture's defconfig, merged with
    kernel/config/guest.config (trimmed for the guest), Kconfig.fragment (the
    production options), kernel/config/kunit.config (the series' KUnit
    tests, which run at boot) and, for --config debug, kcsan or hz100,
    kernel/config/C.config; checks that every option of Kconfig.fragment
    and kunit.config took effect;
  - builds with ccache; when nothing changed it returns at once;
  - installs the modules into the build directory's modules-root/, which
    scripts/vm-run.sh shares with the guest.

Options:
  --variant V    patched (default), stock (the unmodified base, for
                 comparisons), or debian: Debian's own build of the base's
                 source version (linux-image-VERSION-amd64; 6.12 and x86_64
                 only), downloaded and unpacked, not built, with an initramfs
                 that mounts the guest's root (Debian builds 9p as modules);
                 the other options but --print-image do not apply to it
  --base B       6.12 (default: the LTS, Debian 12's linux-source-6.12) or 7.2
                 (mainline, Debian unstable's linux-source-7.2)
  --arch A       x86_64 (default) or arm64 (cross-compiled with Debian's
                 gcc-aarch64-linux-gnu: QEMU's virt machine, Cortex-A72 like a
                 Raspberry Pi 4; kernel/config/arm64-virt.config)
  --config C     default, debug (KASAN, UBSAN, kmemleak, lockdep, atomic-sleep
                 and list debugging: kernel/config/debug.config), kcsan (the
                 data-race detector, which KASAN excludes:
                 kernel/config/kcsan.config), hz100 (a
                 10 ms tick: kernel/config/hz100.config), or rpi4 with
                 --arch arm64 (a kernel for the board: kernel/config/rpi4.config)
  --jobs N       parallel make jobs (default: nproc)
  --keep-tree    use the patched tree as it is (for working on the series in
                 place)
  --configure-only  stop after writing and checking .config
  --print-image  print only the image path when done (for scripts)
Environment: CFSB_CACHE (default ~/.cache/cfs-borrowing).
  CFSB_KERNEL_SOURCE_VERSION="VERSION..." takes these Debian versions of the
  source instead of the pinned ones, each for the base of its major.minor
  (e.g. 6.12.115-2~deb12u1 for 6.12; the other base keeps its pin); one the
  archive does not have is replaced by its newest of that major.minor, as
  the pin is; a version of no base stops the build.
A series that does not apply to the version taken stops the build with the
version and the first patch that fails.
EOF
}

variant=patched arch=x86_64 config=default jobs=$(nproc) keep_tree=0 print_image=0 configure_only=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--variant) variant=${2:?}; shift 2 ;;
	--base) select_kernel_base "${2:?}"; shift 2 ;;
	--arch) arch=${2:?}; shift 2 ;;
	--config) config=${2:?}; shift 2 ;;
	--jobs) jobs=${2:?}; shift 2 ;;
	--keep-tree) keep_tree=1; shift ;;
	--print-image) print_image=1; shift ;;
	--configure-only) configure_only=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument '$1'" ;;
	esac
done
[[ $variant == patched || $variant == stock || $variant == debian ]] ||
	die "--variant must be patched, stock or debian"
case $config in
default | debug | kcsan | hz100) ;;
rpi4) [[ $arch == arm64 ]] || die "--config rpi4 is for --arch arm64" ;;
*) die "--config must be default, debug, kcsan, hz100 or rpi4" ;;
esac
karch=$(arch_kernel_arch "$arch")
cross=$(arch_cross_compile "$arch")

if [[ $variant == debian ]]; then
	[[ $arch == x86_64 && $KERNEL_BASE == 6.12 && $config == default ]] ||
		die "--variant debian is Debian 12's kernel: --base 6.12, --arch x86_64, --config default"
	kernel_source_resolve
	ensure_debian_kernel
	if [[ $print_image -eq 1 ]]; then debian_kernel_image; else log "image: $(debian_kernel_image)"; fi
	exit 0
fi

kernel_build_lock

start=$(now_s)
read -ra arch_pkgs <<<"$(arch_packages "$arch")"
ensure_packages "${HOST_PACKAGES[@]}" "${arch_pkgs[@]}"
kernel_source_resolve

repo=$(kernel_repo)
tree=$(kernel_tree "$variant")
build=$(kernel_build_dir "$variant" "$arch" "$config")

# --- configuration --------------------------------------------------------
# The guest's trimmed configuration, or a board's; the series' options come
# last, so that nothing overrides them.
case $config in
rpi4) fragments=("$CFSB_ROOT/kernel/config/rpi4.config") ;;
*) mapfile -t fragments < <(guest_config_fragments "$arch") ;;
esac
checked=("${SERIES_CONFIG_FRAGMENTS[@]}")
fragments+=("${checked[@]}")
[[ $config == debug || $config == kcsan || $config == hz100 ]] && fragments+=("$CFSB_ROOT/kernel/config/$config.config")

# check_config: every option Kconfig.fragment and kunit.config set must be
# in .config.
# Options the tree does not know (the series' own, in the stock tree) are
# skipped.
check_config() {
	local line sym bad=()
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*)
			sym=${line%%=*}
			grep -qxF "$line" "$build/.config" && continue
			grep -rqsx --include='Kconfig*' "config ${sym#CONFIG_}" "$tree" || continue
			bad+=("$line (have: $(grep -E "^(# )?${sym}[= ]" "$build/.config" || echo unset))")
			;;
		"# CONFIG_"*" is not set")
			sym=${line#\# }
			sym=${sym%% *}
			grep -q "^$sym=" "$build/.config" && bad+=("$line (have: $(grep "^$sym=" "$build/.config"))")
			;;
		esac
	done < <(cat "${checked[@]}")
	[[ ${#bad[@]} -eq 0 ]] || die "options of Kconfig.fragment or kunit.config did not take effect (missing dependency?):$(printf '\n  %s' "${bad[@]}")"
}

configure() {
	local want have
	want=$(printf '%s %s %s %s\n' "$arch" "$(arch_defconfig "$arch")" "$KERNEL_SOURCE_PKG_VERSION" \
		"$(files_hash "${fragments[@]}")" | sha256sum | cut -d' ' -f1)
	have=$(cat "$build/.cfsb-config" 2>/dev/null || true)
	[[ -f $build/.config && $have == "$want" ]] && return 0
	log "configuring $build"
	mkdir -p "$build"
	rm -f "$build/.cfsb-config" "$build/.cfsb-built"
	make -s -C "$tree" O="$build" ARCH="$karch" CROSS_COMPILE="$cross" "$(arch_defconfig "$arch")" >/dev/null
	(cd "$tree" && ARCH=$karch CROSS_COMPILE=$cross ./scripts/kconfig/merge_config.sh -m -Q \
		-O "$build" "$build/.config" "${fragments[@]}" >"$build/merge_config.log" 2>&1) ||
		die "merge_config.sh failed: see $build/merge_config.log"
	make -s -C "$tree" O="$build" ARCH="$karch" CROSS_COMPILE="$cross" olddefconfig >/dev/null
	check_config
	echo "$want" >"$build/.cfsb-config"
}

# --- build ----------------------------------------------------------------
# tree_edited: does the tree hold changes no commit names?
tree_edited() { [[ -n $(git -C "$tree" status --porcelain --untracked-files=no) ]]; }

build_kernel() {
	local image want
	image="$build/$(arch_image "$arch")"
	want="$(cat "$build/.cfsb-config") $(git -C "$tree" rev-parse HEAD)"
	if [[ -f $image && $(cat "$build/.cfsb-built" 2>/dev/null) == "$want" ]] && ! tree_edited; then
		log "$variant $arch/$config kernel is up to date"
		[[ -d $build/modules-root ]] || install_modules
		return 0
	fi
	rm -f "$build/.cfsb-built"
	# A tree with edits builds a kernel that no commit names: it gets no
	# stamp, or the tree's HEAD would name it once the edits are gone.
	local edited=0
	tree_edited && edited=1
	use_ccache
	log "building $variant $arch/$config kernel in $build (make -j$jobs)"
	local t0
	t0=$(now_s)
	make -s -C "$tree" O="$build" ARCH="$karch" CROSS_COMPILE="$cross" \
		CC="ccache ${cross}gcc" -j"$jobs" \
		KBUILD_BUILD_USER=cfsb KBUILD_BUILD_HOST=qemu-guest
	install_modules
	[[ $edited -eq 1 ]] || tree_edited || echo "$want" >"$build/.cfsb-built"
	log "built in $(($(now_s) - t0)) s"
}

# install_modules: the modules, stripped, with modules.dep, into
# $build/modules-root/lib/modules/RELEASE: scripts/vm-run.sh shares that with
# the guest (the host's /lib/modules, the guest's root, is not this kernel's).
install_modules() {
	grep -q '^CONFIG_MODULES=y' "$build/.config" || return 0
	rm -rf "$build/modules-root"
	make -s -C "$tree" O="$build" ARCH="$karch" CROSS_COMPILE="$cross" \
		INSTALL_MOD_PATH="$build/modules-root" INSTALL_MOD_STRIP=1 modules_install >/dev/null
}

ensure_kernel_repo
mapfile -t patches < <(series_patches)
prepare_series_tree "$repo" "$tree" "$variant" "$keep_tree" ignore "$(kernel_source_what)" \
	"scripts/kernel-series.sh --base $KERNEL_BASE export" "${patches[@]}"
configure
if [[ $configure_only -eq 1 ]]; then
	log "configured: $build/.config"
	exit 0
fi
build_kernel
log "done in $(($(now_s) - start)) s"
if [[ $print_image -eq 1 ]]; then
	echo "$build/$(arch_image "$arch")"
else
	log "image: $build/$(arch_image "$arch")"
fi
