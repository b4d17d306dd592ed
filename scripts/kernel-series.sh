#!/usr/bin/env bash
# Maintain the kernel patch series in kernel/patches.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
	cat <<EOF
Usage: ${0##*/} [--base 6.12|7.2] export [--tree DIR] | checkpatch | check-selftests | check-sources | check-messages
       ${0##*/} [--base 6.12|7.2] build-each [--jobs N] [--if-changed]
       ${0##*/} [--base 6.12|7.2] kunit-i386 [--jobs N]
       ${0##*/} [--base 6.12|7.2] robot [--jobs N] [--only NAME] [--if-changed]

  --base B    the series to work on: 6.12 (default; kernel/patches, on Linux
              6.12 LTS) or 7.2 (kernel/patches-7.2, on mainline Linux 7.2)

  export      regenerate kernel/patches from the commits on top of cfsb-base
              in DIR (default: the patched tree, $(kernel_tree patched)):
              the kernel patches, then the selftests patch, generated from
              selftests/ (its source) into tools/testing/selftests/cgroup,
              and the cover letter from kernel/cover-letter.txt (first line:
              subject; a line "[7.2]" starts that base's own text, "[both]"
              the text of every base again). Each patch's
              message is its file's in kernel/messages (NAME.txt, one for
              every base's series, or 7.2/NAME.txt for one base's own; found
              by its first line, the subject; without Signed-off-by, which
              the export adds for its author): a message amended in the
              tree is copied to its file first (a new subject gets a new
              file; changed in both, the export stops). Work on the series
              in a tree of your own (git commit --amend, rebase), then
              export from it.
  checkpatch  run scripts/checkpatch.pl --strict on every patch; fails on any
              error, warning or check.
  check-selftests
              fail if the selftests patch differs from selftests/ (run export).
  check-sources
              fail if a file the series adds differs from its source in
              kernel/src (one for both bases: export writes it into the
              patch that adds it; one changed in the tree only is copied
              there first), or the series adds another file beside them.
  check-messages
              fail if a patch's message differs from its file in
              kernel/messages, a file there is the message of no patch
              of either series, or the cover letter is not
              kernel/cover-letter.txt's text for the base.
  build-each  check out the series one patch at a time in the patched tree
              and build the kernel at each step, without a new compiler
              warning; from the patch that adds the KUnit suite on, boot each
              step in QEMU and require the suite to pass. --if-changed skips
              a series that already passed on the same source version (stamp
              in $CFSB_CACHE; a change to the selftests patch alone does not
              count).
  kunit-i386  the KUnit suite on a 32-bit kernel: tools/testing/kunit/kunit.py
              builds the patched tree for i386 (a small configuration: the
              options the suite needs, no SMP) in its build-i386-kunit
              directory and runs it in qemu-system-i386; KTAP on stdout,
              non-zero unless every case passes. Catches what only 32-bit
              arithmetic gets wrong (u64 counters, size_t-wide adds).
  robot       what a kernel build robot tries first on a scheduler series,
              TAP on stdout:
$(robot_names --lines)
              each a whole kernel in a build directory of its own in the
              patched tree (build-robot-NAME; the guest's configuration
              with the option on top): the option took effect, it builds,
              no compiler warning in a file the series touches, and where
              bandwidth control stays on the feature is built; then
              w1-sparse: kernel/sched/ and kernel/cgroup/ with W=1 and
              sparse (C=2) in the stock and the patched tree, no
              diagnostic in the series' files that the stock tree lacks.
              --only NAME runs one of them; --if-changed skips (TAP SKIP)
              what already passed them all: the same patches but the
              selftests', configuration files, this script and source
              version (stamp in $CFSB_CACHE). Cold, 8 to 29 minutes a
              configuration with make -j2 (measured on 2 CPUs, some with a
              VM beside them); w1-sparse seconds once its trees are built.
EOF
}

if [[ ${1:-} == --base ]]; then
	select_kernel_base "${2:?--base needs 6.12 or 7.2}"
	shift 2
fi

# The files the kernel patches add, as sources (the same for every base),
# and the patches' messages (lib.sh's message_file: one file where the
# bases' series share a message). scripts/check-export.sh works on copies:
# CFSB_KERNEL_SRC, CFSB_KERNEL_MESSAGES, and CFSB_KERNEL_SERIES for the
# series' directory.
KERNEL_SRC_DIR=${CFSB_KERNEL_SRC:-$CFSB_ROOT/kernel/src}
KERNEL_MESSAGES_DIR=${CFSB_KERNEL_MESSAGES:-$CFSB_ROOT/kernel/messages}
# The cover letters' text, one file for every base: its first line the
# subject; a line "[7.2]" starts text for that base's alone, "[both]" text
# for every base again (cover_letter).
KERNEL_COVER_LETTER=${CFSB_KERNEL_COVER_LETTER:-$CFSB_ROOT/kernel/cover-letter.txt}
KERNEL_SERIES_DIR=${CFSB_KERNEL_SERIES:-$KERNEL_SERIES_DIR}
SELFTESTS_SUBJECT="selftests/cgroup: Add tests for cpu.cfs.borrowing_us"
SELFTESTS_DIR=tools/testing/selftests/cgroup
SELFTESTS_FILES=(borrowing_util.c borrowing_util.h test_borrowing.c)

stock_tree=$(kernel_tree stock)
need_tree() {
	[[ -x $stock_tree/scripts/checkpatch.pl ]] ||
		die "no kernel tree at $stock_tree: run scripts/kernel-build.sh --base $KERNEL_BASE --variant stock first"
}

# add_selftests TREE DATE: commit selftests/ into TREE's cgroup selftests.
add_selftests() {
	local tree=$1 date=$2 f
	for f in "${SELFTESTS_FILES[@]}"; do
		cp "$CFSB_ROOT/selftests/$f" "$tree/$SELFTESTS_DIR/$f"
	done
	python3 - "$tree/$SELFTESTS_DIR" <<'EOF'
import sys
d = sys.argv[1]
mk = open(f"{d}/Makefile").read()
mk = mk.replace("TEST_GEN_PROGS  = test_core\n",
                "TEST_GEN_PROGS  = test_borrowing\nTEST_GEN_PROGS += test_core\n", 1)
# cgroup_util is a source file beside the tests up to 6.x, a library
# object ($(LIBCGROUP_O), lib/) in mainline.
for dep in ("cgroup_util.c", "$(LIBCGROUP_O)"):
    mk = mk.replace(f"$(OUTPUT)/test_core: {dep}\n",
                    f"$(OUTPUT)/test_borrowing: {dep} borrowing_util.c\n"
                    f"$(OUTPUT)/test_core: {dep}\n", 1)
if "$(OUTPUT)/test_borrowing:" not in mk:
    sys.exit("the cgroup selftests' Makefile has no rule for test_core")
open(f"{d}/Makefile", "w").write(mk)
gi = open(f"{d}/.gitignore").read()
open(f"{d}/.gitignore", "w").write(gi.replace("test_core\n", "test_borrowing\ntest_core\n", 1))
EOF
	# Debian's tarball ships a .gitignore that ignores everything.
	git -C "$tree" add -f "$SELFTESTS_DIR"
	# By the series' author, whatever the tree's git identity.
	local name email msg
	name=$(git -C "$tree" log -1 --format=%an)
	email=$(git -C "$tree" log -1 --format=%ae)
	msg=$(message_file "$KERNEL_MESSAGES_DIR" "$SELFTESTS_SUBJECT")
	[[ -n $msg ]] || die "no message for '$SELFTESTS_SUBJECT' in $KERNEL_MESSAGES_DIR"
	{ cat "$msg"; printf '\nSigned-off-by: %s <%s>\n' "$name" "$email"; } |
		GIT_AUTHOR_DATE=$date GIT_COMMITTER_DATE=$date git -C "$tree" \
			-c user.name="$name" -c user.email="$email" commit -q -F -
}

# cover_letter: the selected base's cover letter text (KERNEL_COVER_LETTER
# without the other bases' parts).
cover_letter() {
	awk -v base="$KERNEL_BASE" '/^\[(both|[0-9]+\.[0-9]+)\]$/ { part = substr($0, 2, length($0) - 2); next }
		part == "" || part == "both" || part == base' "$KERNEL_COVER_LETTER"
}

cmd_export() {
	local src tree tmp subject commits date old_patches ident
	src=$(kernel_tree patched)
	[[ ${1:-} == --tree ]] && src=${2:?}
	[[ -d $src ]] || die "no tree at $src"
	[[ -z $(git -C "$src" status --porcelain --untracked-files=no) ]] ||
		die "$src has uncommitted changes"
	# The kernel patches: all but a selftests patch from an earlier export.
	mapfile -t commits < <(git -C "$src" log --reverse --format='%H %s' cfsb-base..HEAD |
		grep -vF " $SELFTESTS_SUBJECT" | cut -d' ' -f1)
	[[ ${#commits[@]} -gt 0 ]] || die "no commits on top of cfsb-base in $src"
	mapfile -t old_patches < <(series_patches)
	tree=$(kernel_tree export)
	base_worktree "$(kernel_repo)" "$tree"
	tree_reset_to_base "$tree" clean
	# Each file the series adds from its source in kernel/src, each
	# message from its file in kernel/messages.
	sources_from_tree "$src" "$KERNEL_SRC_DIR" "${old_patches[@]}"
	messages_from_tree "$src" "$KERNEL_MESSAGES_DIR" "${commits[*]}" "${old_patches[@]}"
	ident=$(exporter_ident)
	REMAKE_IDENT=$ident REMAKE_MESSAGES=$KERNEL_MESSAGES_DIR \
		remake_commits "$src" "$tree" "$KERNEL_SRC_DIR" "${commits[@]}"
	date=$(git -C "$tree" log -1 --format=%aI)
	add_selftests "$tree" "$date"

	tmp=$(mktemp -d)
	# The cover letter is signed by the series' author, not the tree's user.
	git -C "$tree" -c user.name="$(git -C "$tree" log -1 --format=%an)" \
		-c user.email="$(git -C "$tree" log -1 --format=%ae)" \
		format-patch -q --zero-commit --cover-letter --base=cfsb-base -o "$tmp" cfsb-base..HEAD
	cover_letter >"$tmp/cover-letter.txt"
	subject=$(head -n1 "$tmp/cover-letter.txt")
	# Dated as the last patch, so that an export of the same series is the
	# same file.
	python3 - "$tmp"/0000-cover-letter.patch "$subject" "$tmp/cover-letter.txt" \
		"$(git -C "$tree" log -1 --format=%aD)" <<'EOF'
import re
import sys
path, subject, body_path, date = sys.argv[1:]
body = open(body_path).read().split("\n", 1)[1].strip("\n")
text = open(path).read()
text = text.replace("*** SUBJECT HERE ***", subject).replace("*** BLURB HERE ***", body)
text = re.sub(r"(?m)^Date: .*$", lambda _: "Date: " + date, text, count=1)
open(path, "w").write(text)
EOF
	mkdir -p "$KERNEL_SERIES_DIR"
	rm -f "$KERNEL_SERIES_DIR"/*.patch
	mv "$tmp"/*.patch "$KERNEL_SERIES_DIR/"
	rm -rf "$tmp"
	log "exported $(series_patches | wc -l) patches and the cover letter to ${KERNEL_SERIES_DIR#"$CFSB_ROOT"/}"
	# The patched tree's work is in the series now: the next build may
	# give it the series (prepare_series_tree).
	[[ $src -ef $(kernel_tree patched) ]] && mark_series_exported "$src"
	return 0
}

cmd_checkpatch() {
	local p kind f status=0
	need_tree
	# checkpatch asks "does MAINTAINERS need updating?" of any patch that
	# adds a file, without reading MAINTAINERS: that one warning is left to
	# get_maintainer.pl, which must find an entry with a maintainer for
	# every file the series adds (kernel/sched/ is the scheduler's).
	while read -r p; do
		if ! "$stock_tree/scripts/checkpatch.pl" --strict --no-tree -q \
			--ignore FILE_PATH_CHANGES "$p"; then
			status=1
		fi
	done < <(series_patches)
	while read -r p kind f; do
		[[ $kind == new ]] || continue
		if ! printf -- '--- /dev/null\n+++ b/%s\n@@ -0,0 +1 @@\n+\n' "$f" |
			(cd "$stock_tree" && ./scripts/get_maintainer.pl --no-git --no-git-fallback --roles) |
			grep -q '(maintainer:'; then
			echo "${p##*/}: no MAINTAINERS entry with a maintainer covers $f"
			status=1
		fi
	done < <(mapfile -t ps < <(series_patches); patch_changes "${ps[@]}")
	[[ $status -eq 0 ]] && log "checkpatch --strict: clean; MAINTAINERS covers every file the series adds"
	return $status
}

cmd_check_selftests() {
	local last f tmp status=0
	last=$(series_patches | tail -n1)
	if ! grep -qF "${SELFTESTS_SUBJECT#selftests/cgroup: }" "$last"; then
		die "the last patch is not the selftests patch: run $0 export"
	fi
	tmp=$(mktemp -d)
	for f in "${SELFTESTS_FILES[@]}"; do
		patch_added_file "$last" "$SELFTESTS_DIR/$f" >"$tmp/$f"
		if ! cmp -s "$tmp/$f" "$CFSB_ROOT/selftests/$f"; then
			log "selftests/$f differs from the series' copy"
			status=1
		fi
	done
	rm -rf "$tmp"
	[[ $status -eq 0 ]] || die "the selftests patch is stale: run $0 export"
	log "the selftests patch matches selftests/"
}

cmd_check_messages() {
	local patches cover=$KERNEL_SERIES_DIR/0000-cover-letter.patch
	mapfile -t patches < <(series_patches)
	check_series_messages "$KERNEL_MESSAGES_DIR" "$0 --base $KERNEL_BASE export" "${patches[@]}" ||
		die "the $KERNEL_BASE series is stale against kernel/messages"
	# The cover letter: its subject and its text as the export writes them.
	python3 - "$cover" <(cover_letter) <<'EOF' ||
import sys
patch, text = open(sys.argv[1]).read(), open(sys.argv[2]).read()
subject, body = text.split("\n", 1)
sys.exit(not ("] " + subject + "\n" in patch and "\n\n" + body.strip("\n") + "\n\n" in patch))
EOF
		die "${cover##*/} is not kernel/cover-letter.txt's $KERNEL_BASE text: run $0 --base $KERNEL_BASE export"
	log "${cover##*/}: kernel/cover-letter.txt's $KERNEL_BASE text"
}

cmd_check_sources() {
	local patches
	mapfile -t patches < <(series_patches)
	check_series_sources "$KERNEL_SRC_DIR" "$0 --base $KERNEL_BASE export" "${patches[@]}" ||
		die "the $KERNEL_BASE series is stale against kernel/src"
}

# kernel_patches: the series' patches but one that touches the selftests
# only (tools/testing/selftests), which changes neither the kernel nor KUnit.
kernel_patches() {
	local p
	series_patches | while read -r p; do
		grep '^diff --git a/' "$p" | grep -qv '^diff --git a/tools/testing/selftests/' && echo "$p"
	done
}

cmd_build_each() {
	local jobs n=0 if_changed=0 tree build stamp want head c t0 kunit=0 patches
	jobs=$(nproc)
	while [[ $# -gt 0 ]]; do
		case $1 in
		--jobs) jobs=${2:?}; shift 2 ;;
		--if-changed) if_changed=1; shift ;;
		*) die "unknown argument '$1'" ;;
		esac
	done
	stamp=$CFSB_CACHE/build-each-$KERNEL_BASE.passed
	# The patched tree and its build directory: each step recompiles only
	# what the patch touched, so any warning is its. (Made first: the
	# source version it is made from is part of what passed.)
	"$CFSB_ROOT/scripts/kernel-build.sh" --base "$KERNEL_BASE" --variant patched >/dev/null
	# What a step builds and runs: the source version and the kernel's
	# patches, so that a change to the selftests alone does not build the
	# series again.
	mapfile -t patches < <(kernel_patches)
	want="$(files_hash "${patches[@]}") $(kernel_repo_version)"
	if [[ $if_changed -eq 1 && $(cat "$stamp" 2>/dev/null) == "$want" ]]; then
		log "this series already built and passed KUnit at every patch on $KERNEL_SOURCE_PKG $(kernel_repo_version)"
		return 0
	fi
	rm -f "$stamp"
	tree=$(kernel_tree patched)
	build=$(kernel_build_dir patched x86_64 default)
	head=$(git -C "$tree" rev-parse HEAD)
	use_ccache
	# The build directory holds a step of the series until the end: make
	# scripts/kernel-build.sh rebuild it if this stops half-way.
	rm -f "$build/.cfsb-built"
	cp "$build/.config" "$build/.config.series"
	# shellcheck disable=SC2064 # the tree's HEAD now, not at exit
	trap "git -C '$tree' checkout -q --detach '$head'; cp '$build/.config.series' '$build/.config'" EXIT
	for c in $(git -C "$tree" rev-list --reverse cfsb-base..HEAD); do
		n=$((n + 1))
		git -C "$tree" checkout -q --detach "$c"
		# The full configuration at every step: options a patch adds are
		# dropped while it is not applied, then come back.
		cp "$build/.config.series" "$build/.config"
		make -s -C "$tree" O="$build" CC="ccache gcc" olddefconfig >/dev/null
		t0=$(now_s)
		if ! make -s -C "$tree" O="$build" CC="ccache gcc" -j"$jobs" \
			KBUILD_BUILD_USER=cfsb KBUILD_BUILD_HOST=qemu-guest >"$build/build-$n.log" 2>&1; then
			tail -30 "$build/build-$n.log" >&2
			die "the kernel does not build at patch $n: $(git -C "$tree" log -1 --format=%s)"
		fi
		if grep -q 'warning:' "$build/build-$n.log"; then
			grep -A5 'warning:' "$build/build-$n.log" >&2
			die "patch $n adds compiler warnings: $(git -C "$tree" log -1 --format=%s)"
		fi
		log "patch $n builds without warnings ($(($(now_s) - t0)) s): $(git -C "$tree" log -1 --format=%s)"
		[[ -e $tree/kernel/sched/fair_borrowing_kunit.c ]] && kunit=1
		[[ $kunit -eq 1 ]] || continue
		# shellcheck disable=SC2016 # expanded in the guest
		if ! "$CFSB_ROOT/scripts/vm-run.sh" --kernel "$build/$(arch_image x86_64)" -- \
			bash -c 'f=/sys/kernel/debug/kunit/sched_cfs_borrowing/results;
				cat "$f" && grep -q "^ok [0-9]* sched_cfs_borrowing" "$f"' \
			>"$build/kunit-$n.log" 2>&1; then
			cat "$build/kunit-$n.log" >&2
			die "KUnit fails at patch $n"
		fi
		log "patch $n passes KUnit: $(grep -c '^    ok ' "$build/kunit-$n.log") cases"
	done
	git -C "$tree" checkout -q --detach "$head"
	cp "$build/.config.series" "$build/.config"
	trap - EXIT
	"$CFSB_ROOT/scripts/kernel-build.sh" --base "$KERNEL_BASE" --variant patched >/dev/null
	echo "$want" >"$stamp"
}

# The options the suite needs on top of kunit.py's i386 configuration, and
# what the suite's guest does without (it boots from -kernel, prints on a
# serial port and ends by a reboot): ACPI, io_uring and the block layer
# are 30 % of that kernel's objects (767 left of 1077; in a trial without
# ccache, beside a VM on the other CPU, its build and boot took 5.9 min).
KUNIT_I386_CONFIG='CONFIG_KUNIT=y
CONFIG_CGROUPS=y
CONFIG_CGROUP_SCHED=y
CONFIG_FAIR_GROUP_SCHED=y
CONFIG_CFS_BANDWIDTH=y
CONFIG_CFS_BANDWIDTH_BORROWING_KUNIT_TEST=y
CONFIG_EXPERT=y
# CONFIG_ACPI is not set
# CONFIG_IO_URING is not set
# CONFIG_BLOCK is not set'

cmd_kunit_i386() {
	local jobs tree build
	jobs=$(nproc)
	while [[ $# -gt 0 ]]; do
		case $1 in
		--jobs) jobs=${2:?}; shift 2 ;;
		*) die "unknown argument '$1'" ;;
		esac
	done
	ensure_packages qemu-system-x86
	"$CFSB_ROOT/scripts/kernel-build.sh" --base "$KERNEL_BASE" --variant patched --configure-only >/dev/null
	tree=$(kernel_tree patched)
	# A direct child of the tree, as every build directory here: ccache
	# hits across trees.
	build="build-i386-kunit"
	mkdir -p "$tree/$build"
	printf '%s\n' "$KUNIT_I386_CONFIG" >"$tree/$build/borrowing.kunitconfig"
	use_ccache
	kernel_build_lock
	(cd "$tree" && python3 tools/testing/kunit/kunit.py run --arch=i386 \
		--build_dir="$build" --kunitconfig="$build/borrowing.kunitconfig" \
		--make_options CC="ccache gcc" --jobs "$jobs" --timeout 600 \
		--raw_output=kunit) | tee "$tree/$build/results.ktap" ||
		die "kunit.py failed (the i386 kernel did not build or boot)"
	# With --raw_output kunit.py exits 0 whatever the results say.
	if ! grep -q '^ok [0-9]* sched_cfs_borrowing' "$tree/$build/results.ktap" ||
		grep -q 'not ok' "$tree/$build/results.ktap"; then
		die "the KUnit suite did not pass on i386"
	fi
}

# The configurations of `robot`: NAME, the architecture (make's ARCH for
# i386), the defconfig, and the option on top of guest.config,
# Kconfig.fragment and kunit.config ("-": none). The series' code sits
# behind CONFIG_CFS_BANDWIDTH, which needs CONFIG_FAIR_GROUP_SCHED; without
# SMP the floor and the charge still build.
ROBOT_CONFIGS=(
	"no-bandwidth x86_64 x86_64_defconfig CONFIG_CFS_BANDWIDTH=n"
	"no-fair-group x86_64 x86_64_defconfig CONFIG_FAIR_GROUP_SCHED=n"
	"no-smp x86_64 x86_64_defconfig CONFIG_SMP=n"
	"i386 i386 i386_defconfig -"
	"arm64 arm64 defconfig -"
)
# robot_names [--lines]: the configurations' names, comma-separated (or one
# a line, with its option, for the usage).
robot_names() {
	local c name opt sep=""
	for c in "${ROBOT_CONFIGS[@]}" w1-sparse; do
		read -r name _ _ opt <<<"$c"
		if [[ ${1:-} == --lines ]]; then
			[[ $opt == - ]] && opt="the guest's options"
			printf '                %s%s\n' "$name" "${opt:+ ($opt)}"
		else
			printf '%s%s' "$sep" "$name"
			sep=", "
		fi
	done
	[[ ${1:-} == --lines ]] || echo
}

# series_files: the files the series changes or adds in the kernel itself
# (not its documentation or selftests), as paths in the tree.
series_files() {
	series_patches | xargs grep -h '^diff --git a/' | awk '{print substr($3, 3)}' |
		grep -v -e '^Documentation/' -e '^tools/' | sort -u
}

# diagnostics LOG FILES...: the compiler's and sparse's warnings and errors
# in LOG about FILES, as "FILE: warning: TEXT" (no line or column: the
# same diagnostic sits on other lines in the stock and the patched tree).
diagnostics() {
	local log=$1
	shift
	sed -E -n 's%^(\.\./)*([^ :]+):[0-9]+(:[0-9]+)?: (warning|error): %\2: \4: %p' "$log" |
		grep -F -f <(printf '%s: \n' "$@") || true
}

# robot_ok STATUS TEXT...: one TAP line.
robot_n=0 robot_failed=0
robot_ok() {
	local status=$1
	shift
	robot_n=$((robot_n + 1))
	if [[ $status -eq 0 ]]; then
		echo "ok $robot_n $*"
	else
		echo "not ok $robot_n $*"
		robot_failed=1
	fi
}

# robot_config NAME ARCH DEFCONFIG OPTION: one configuration, built whole in
# the patched tree's build-robot-NAME.
robot_config() {
	local name=$1 arch=$2 defconfig=$3 opt=$4 tree build log karch cross t0 sym bad
	local frags=() files=()
	tree=$(kernel_tree patched)
	build=$tree/build-robot-$name
	log=$build/build.log
	if [[ $arch == i386 ]]; then
		karch=i386 cross=""
	else
		karch=$(arch_kernel_arch "$arch") cross=$(arch_cross_compile "$arch")
	fi
	mapfile -t frags < <(guest_config_fragments "$arch")
	frags+=("${SERIES_CONFIG_FRAGMENTS[@]}")
	mkdir -p "$build"
	rm -f "$build/robot.config"
	if [[ $opt != - ]]; then
		echo "$opt" >"$build/robot.config"
		frags+=("$build/robot.config")
	fi
	make -s -C "$tree" O="$build" ARCH="$karch" CROSS_COMPILE="$cross" "$defconfig" >/dev/null
	(cd "$tree" && ARCH=$karch CROSS_COMPILE=$cross ./scripts/kconfig/merge_config.sh -m -Q \
		-O "$build" "$build/.config" "${frags[@]}" >"$build/merge_config.log" 2>&1) ||
		die "merge_config.sh failed: see $build/merge_config.log"
	make -s -C "$tree" O="$build" ARCH="$karch" CROSS_COMPILE="$cross" olddefconfig >/dev/null
	if [[ $opt != - ]]; then
		sym=${opt%=*}
		if grep -q "^$sym=" "$build/.config"; then
			robot_ok 1 "$name: $opt took effect (have: $(grep "^$sym=" "$build/.config"))"
			return 0
		fi
		robot_ok 0 "$name: $opt took effect"
	fi
	t0=$(now_s)
	if ! make -C "$tree" O="$build" ARCH="$karch" CROSS_COMPILE="$cross" CC="ccache ${cross}gcc" \
		-j"$jobs" KBUILD_BUILD_USER=cfsb KBUILD_BUILD_HOST=robot >"$log" 2>&1; then
		robot_ok 1 "$name: the kernel builds"
		grep -m20 -e 'error' -e 'undefined' "$log" | sed 's/^/# /'
		return 0
	fi
	robot_ok 0 "$name: the kernel builds ($(($(now_s) - t0)) s)"
	mapfile -t files < <(series_files)
	bad=$(diagnostics "$log" "${files[@]}")
	robot_ok "$([[ -z $bad ]]; echo $?)" "$name: no compiler warning in the series' files" \
		"($(grep -c 'warning:' "$log" || true) in the whole build)"
	[[ -z $bad ]] || printf '%s\n' "$bad" | sed 's/^/# /'
	# Where bandwidth control stays on, the feature was compiled: its KUnit
	# suite is an object of its own.
	if grep -q '^CONFIG_CFS_BANDWIDTH=y' "$build/.config"; then
		robot_ok "$([[ -f $build/kernel/sched/fair_borrowing_kunit.o ]]; echo $?)" \
			"$name: the feature and its KUnit suite are built"
	fi
}

# robot_w1_sparse: kernel/sched/ and kernel/cgroup/ with W=1 and sparse in
# the stock and the patched tree, each with the guest's configuration.
robot_w1_sparse() {
	local variant tree build t0 new sparse=ok
	local files=()
	ensure_packages sparse
	mapfile -t files < <(series_files)
	for variant in stock patched; do
		tree=$(kernel_tree "$variant")
		build=$tree/build-robot-w1-sparse
		mkdir -p "$build"
		cp "$(kernel_build_dir "$variant" x86_64 default)/.config" "$build/.config"
		make -s -C "$tree" O="$build" olddefconfig >/dev/null
		# Compiled again each time, so that W=1's warnings are printed
		# (ccache gives them back on a hit).
		rm -rf "$build/kernel/sched" "$build/kernel/cgroup"
		t0=$(now_s)
		# C=2: sparse on every file of the directories.
		if ! make -C "$tree" O="$build" CC="ccache gcc" W=1 C=2 -j"$jobs" \
			kernel/sched/ kernel/cgroup/ >"$build/build.log" 2>&1; then
			robot_ok 1 "w1-sparse: kernel/sched/ and kernel/cgroup/ build with W=1 and sparse ($variant)"
			grep -m20 -e 'error' "$build/build.log" | sed 's/^/# /'
			return 0
		fi
		robot_ok 0 "w1-sparse: kernel/sched/ and kernel/cgroup/ build with W=1 and sparse" \
			"($variant, $(($(now_s) - t0)) s)"
		diagnostics "$build/build.log" "${files[@]}" | sort >"$build/diagnostics"
		# The kernel checks that sparse can read its headers first.
		grep -q 'sparse is not available or not up to date' "$build/build.log" && sparse=old
	done
	# What the patched tree has more of than the stock one.
	new=$(awk 'NR == FNR { have[$0]++; next } have[$0]-- <= 0' \
		"$(kernel_tree stock)/build-robot-w1-sparse/diagnostics" "$build/diagnostics")
	robot_ok "$([[ -z $new ]]; echo $?)" "w1-sparse: no W=1 or sparse diagnostic in the" \
		"series' files that the stock tree lacks ($(wc -l <"$build/diagnostics") in the patched tree)"
	[[ -z $new ]] || printf '%s\n' "$new" | sed 's/^/# /'
	if [[ $sparse == ok ]]; then
		robot_ok 0 "w1-sparse: sparse ran ($(sparse --version 2>/dev/null))"
	else
		robot_ok 0 "w1-sparse: sparse # SKIP $(sparse --version 2>/dev/null) is too old for" \
			"Linux $(kernel_repo_version) (the kernel's own check): W=1 only"
	fi
}

cmd_robot() {
	local only="" if_changed=0 c name arch defconfig opt stamp want patches variant frags
	jobs=$(nproc)
	while [[ $# -gt 0 ]]; do
		case $1 in
		--jobs) jobs=${2:?}; shift 2 ;;
		--only) only=${2:?}; shift 2 ;;
		--if-changed) if_changed=1; shift ;;
		*) die "unknown argument '$1'" ;;
		esac
	done
	[[ -z $only || ", $(robot_names), " == *", $only, "* ]] ||
		die "--only takes one of: $(robot_names)"
	stamp=$CFSB_CACHE/robot-$KERNEL_BASE.passed
	mapfile -t patches < <(kernel_patches)
	mapfile -t frags < <(guest_config_fragments arm64)
	want="$(files_hash "${patches[@]}" "${frags[@]}" "${SERIES_CONFIG_FRAGMENTS[@]}" "$0") $(kernel_repo_version)"
	if [[ $if_changed -eq 1 && -z $only && $(cat "$stamp" 2>/dev/null) == "$want" ]]; then
		printf 'TAP version 13\n1..0 # SKIP the %s series passed every configuration on %s\n' \
			"$KERNEL_BASE" "$(kernel_repo_version)"
		return 0
	fi
	ensure_packages bc bison flex libelf-dev libssl-dev
	# The trees and their guest configurations (w1-sparse takes them), before
	# the lock that scripts/kernel-build.sh takes too.
	for variant in stock patched; do
		"$CFSB_ROOT/scripts/kernel-build.sh" --base "$KERNEL_BASE" --variant "$variant" \
			--configure-only >/dev/null || die "could not configure the $variant tree"
	done
	use_ccache
	kernel_build_lock
	echo "TAP version 13"
	for c in "${ROBOT_CONFIGS[@]}"; do
		read -r name arch defconfig opt <<<"$c"
		[[ -z $only || $only == "$name" ]] || continue
		# shellcheck disable=SC2046 # a list of packages
		[[ $arch == i386 ]] || ensure_packages $(arch_packages "$arch")
		robot_config "$name" "$arch" "$defconfig" "$opt"
	done
	[[ -n $only && $only != w1-sparse ]] || robot_w1_sparse
	echo "1..$robot_n"
	[[ $robot_failed -eq 0 && -z $only ]] && echo "$want" >"$stamp"
	return "$robot_failed"
}

case ${1:-} in
export) shift; cmd_export "$@" ;;
checkpatch) cmd_checkpatch ;;
check-selftests) cmd_check_selftests ;;
check-sources) cmd_check_sources ;;
check-messages) cmd_check_messages ;;
build-each) shift; cmd_build_each "$@" ;;
kunit-i386) shift; cmd_kunit_i386 "$@" ;;
robot) shift; cmd_robot "$@" ;;
-h | --help | "") usage ;;
*) usage >&2; die "unknown command '$1'" ;;
esac
