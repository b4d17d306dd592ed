#!/usr/bin/env bash
# Maintain the kernel patch series in kernel/patches.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
	cat <<EOF
Usage: ${0##*/} export | checkpatch | build-each [--jobs N]

  export      regenerate kernel/patches from the commits on top of cfsb-base in
              the patched tree ($(kernel_tree patched)), with the cover letter
              from kernel/cover-letter.txt (first line: subject). Work on the
              series there (git commit --amend, rebase), then export.
  checkpatch  run scripts/checkpatch.pl --strict on every patch; fails on any
              error, warning or check.
  build-each  apply the series one patch at a time in a scratch tree and build
              the kernel at each step (the series must build at every patch).
EOF
}

stock_tree=$(kernel_tree stock)
need_tree() {
	[[ -x $stock_tree/scripts/checkpatch.pl ]] ||
		die "no kernel tree at $stock_tree: run scripts/kernel-build.sh --variant stock first"
}

cmd_export() {
	local tree tmp subject
	tree=$(kernel_tree patched)
	[[ -d $tree ]] || die "no patched tree at $tree"
	[[ -z $(git -C "$tree" status --porcelain --untracked-files=no) ]] ||
		die "$tree has uncommitted changes"
	tmp=$(mktemp -d)
	# The cover letter is signed by the series' author, not the tree's user.
	git -C "$tree" -c user.name="$(git -C "$tree" log -1 --format=%an)" \
		-c user.email="$(git -C "$tree" log -1 --format=%ae)" \
		format-patch -q --zero-commit --cover-letter --base=cfsb-base -o "$tmp" cfsb-base..HEAD
	subject=$(head -n1 "$CFSB_ROOT/kernel/cover-letter.txt")
	python3 - "$tmp"/0000-cover-letter.patch "$subject" "$CFSB_ROOT/kernel/cover-letter.txt" <<'EOF'
import sys
path, subject, body_path = sys.argv[1:]
body = open(body_path).read().split("\n", 1)[1].strip("\n")
text = open(path).read()
text = text.replace("*** SUBJECT HERE ***", subject).replace("*** BLURB HERE ***", body)
open(path, "w").write(text)
EOF
	rm -f "$CFSB_ROOT"/kernel/patches/*.patch
	mv "$tmp"/*.patch "$CFSB_ROOT/kernel/patches/"
	rmdir "$tmp"
	log "exported $(series_patches | wc -l) patches and the cover letter to kernel/patches"
}

cmd_checkpatch() {
	local p status=0
	need_tree
	while read -r p; do
		if ! "$stock_tree/scripts/checkpatch.pl" --strict --no-tree -q "$p"; then
			status=1
		fi
	done < <(series_patches)
	[[ $status -eq 0 ]] && log "checkpatch --strict: clean"
	return $status
}

cmd_build_each() {
	local jobs=$(($(nproc))) scratch build n=0 p t0
	[[ ${1:-} == --jobs ]] && jobs=${2:?}
	need_tree
	scratch=$(kernel_tree each)
	build=$(kernel_build_dir each x86_64 default)
	if [[ ! -d $scratch ]]; then
		git -C "$(kernel_repo)" worktree prune
		git -C "$(kernel_repo)" worktree add -q --detach "$scratch" cfsb-base
	fi
	git -C "$scratch" am --abort >/dev/null 2>&1 || true
	git -C "$scratch" reset -q --hard cfsb-base
	# Start from the patched configuration: same options at every step.
	"$CFSB_ROOT/scripts/kernel-build.sh" --variant patched >/dev/null
	mkdir -p "$build"
	use_ccache
	while read -r p; do
		n=$((n + 1))
		git -C "$scratch" am -q "$p" || die "patch $n does not apply: $p"
		t0=$(now_s)
		# The full configuration at every step: options a later patch
		# adds are dropped until it is applied, then come back.
		cp "$(kernel_build_dir patched x86_64 default)/.config" "$build/.config"
		make -s -C "$scratch" O="$build" CC="ccache gcc" olddefconfig >/dev/null
		# Only what the patch touched is recompiled, so any warning is its.
		if ! make -s -C "$scratch" O="$build" CC="ccache gcc" -j"$jobs" bzImage \
			>"$build/build-$n.log" 2>&1; then
			tail -30 "$build/build-$n.log" >&2
			die "the kernel does not build at patch $n: ${p##*/}"
		fi
		if grep -q 'warning:' "$build/build-$n.log"; then
			grep -A5 'warning:' "$build/build-$n.log" >&2
			die "patch $n adds compiler warnings: ${p##*/}"
		fi
		log "patch $n builds without warnings ($(($(now_s) - t0)) s): ${p##*/}"
	done < <(series_patches)
}

case ${1:-} in
export) cmd_export ;;
checkpatch) cmd_checkpatch ;;
build-each) shift; cmd_build_each "$@" ;;
-h | --help | "") usage ;;
*) usage >&2; die "unknown command '$1'" ;;
esac
