#!/usr/bin/env bash
# shellcheck disable=SC2016 # the conditions expand in check()
# The edit/export workflow of the patch series (nerdctl-patch/README.md).
# TAP on stdout.
#
#   scripts/check-export.sh
#
# 1. A build never discards work (prepare_series_tree, on a small repository
#    of its own): a patched tree with commits or changes not in the series
#    is not reset; the build stops and says how to export or drop them.
#    A tree as the series left it, one whose application was cut short and
#    one dropped as the message says are re-applied; --keep-tree uses it as
#    it is.
# 2. The nerdctl series is checked against nerdctl-patch/src (copies of
#    both): a source changed, missing or extra, or changed by a later
#    patch, is found.
# 3. The round trip through scripts/nerdctl-build.sh export, on a copy of
#    the series and the patched tree in the cache (skipped before the first
#    nerdctl build): an unchanged series comes out byte for byte; a source
#    edited in the copy's src goes into the series and into the tree; a
#    commit in the tree stops the build, and export takes it into src. The
#    tree is given the real series back at the end.
# 4. The same for the kernel series (6.12), kernel/src and kernel/messages,
#    on copies and a sparse worktree at the patched kernel tree's HEAD
#    (skipped before the first kernel build); the patched tree is not
#    touched: a message edited in its file goes into the patch, a message
#    reworded in the tree goes into its file, one changed in both stops the
#    export; check-messages fails on a stale series and on a file of no
#    patch; the same for the cover letter's text.
set -uo pipefail

case ${1:-} in
-h | --help)
	awk 'NR > 2 && !/^#/ { exit } NR > 2' "$0" | cut -c3-
	exit 0
	;;
"") ;;
*) echo "usage: ${0##*/} [--help]" >&2; exit 2 ;;
esac

# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
# check NAME CONDITION [DETAIL]: a TAP line for CONDITION (bash).
check() {
	n=$((n + 1))
	if eval "$2"; then echo "ok $n $1"; else echo "not ok $n $1${3:+ # $3}"; fi
}
# quietly CMD...: run CMD, its output (both streams) in $out, status in $rc.
quietly() { out=$("$@" 2>&1) && rc=0 || rc=$?; }
# as_author_of PATCH CMD...: CMD as the author of PATCH's series exported it
# (export signs off with git's identity; the From: header may be folded,
# the sign-off is not).
as_author_of() {
	local author email
	author=$(sed -n 's/^Signed-off-by: //p' "$1" | head -n1)
	email=${author##*<}
	shift
	env GIT_AUTHOR_NAME="${author% <*}" GIT_AUTHOR_EMAIL="${email%>}" "$@"
}

echo "TAP version 13"

# --- 1. prepare_series_tree keeps work -----------------------------------
repo=$tmp/repo tree=$tmp/tree
git init -q "$repo"
git -C "$repo" config user.name test
git -C "$repo" config user.email test@localhost
echo 1 >"$repo/a"
git -C "$repo" add a
git -C "$repo" commit -q -m base
git -C "$repo" tag cfsb-base
# series_of CONTENT: a one-patch series that makes a CONTENT.
series_of() {
	git -C "$repo" checkout -q --detach cfsb-base
	echo "$1" >"$repo/a"
	git -C "$repo" commit -q -am "a: $1"
	mkdir -p "$tmp/series-$1"
	git -C "$repo" format-patch -q --zero-commit -o "$tmp/series-$1" -1
	git -C "$repo" checkout -q --detach cfsb-base
	echo "$tmp/series-$1"/0001-*.patch
}
series2=$(series_of 2)
series3=$(series_of 3)
# prepare [KEEP] PATCH: the patched tree for PATCH, in a subshell (die exits).
prepare() {
	local keep=0
	[[ $1 == --keep ]] && { keep=1; shift; }
	quietly bash -c "source '$CFSB_ROOT/scripts/lib.sh' &&
		prepare_series_tree '$repo' '$tree' patched $keep clean demo 'demo-export' '$1'"
}

prepare "$series2"
check "a new tree gets the series" '[[ $rc -eq 0 && $(<"$tree/a") == 2 ]]' "$out"
prepare "$series2"
check "a tree as the series left it is used again" '[[ $rc -eq 0 && $out != *applied* ]]' "$out"

echo work >"$tree/b"
git -C "$tree" add b
git -C "$tree" commit -q -m "work not exported"
prepare "$series3"
check "a tree with a commit not in the series is not reset: the build stops" \
	'[[ $rc -ne 0 && $out == *"not in the series"* && $out == *demo-export* && $(git -C "$tree" log -1 --format=%s) == "work not exported" ]]' \
	"exit $rc: $out"
prepare --keep "$series3"
check "--keep-tree uses such a tree as it is" \
	'[[ $rc -eq 0 && $(git -C "$tree" log -1 --format=%s) == "work not exported" ]]' "$out"
git -C "$tree" checkout -q -f --detach cfsb-base
prepare "$series3"
check "dropped as the message says, it gets the series" '[[ $rc -eq 0 && $(<"$tree/a") == 3 ]]' "$out"

echo edit >>"$tree/a"
prepare "$series2"
check "a tree with a change is not reset" '[[ $rc -ne 0 && $(tail -n1 "$tree/a") == edit ]]' "exit $rc: $out"
git -C "$tree" checkout -q -- a
echo new >"$tree/new-file"
prepare "$series2"
check "nor one with a new file" '[[ $rc -ne 0 && -f $tree/new-file ]]' "exit $rc: $out"
rm "$tree/new-file"
prepare "$series2"
check "a clean tree of an older series gets the new one" '[[ $rc -eq 0 && $(<"$tree/a") == 2 ]]' "$out"

# An application cut short: the stamp says so, HEAD is anywhere.
git -C "$tree" checkout -q --detach "$(git -C "$repo" rev-parse HEAD)"
echo applying >"$(series_stamp "$tree")"
prepare "$series3"
check "a tree whose application was cut short is re-applied" '[[ $rc -eq 0 && $(<"$tree/a") == 3 ]]' "$out"

# --- 2. the nerdctl series against its sources --------------------------
nb=$CFSB_ROOT/scripts/nerdctl-build.sh
# series_copy DIR: a copy of the nerdctl series and its sources in DIR.
series_copy() {
	rm -rf "$1"
	mkdir -p "$1"
	cp "$CFSB_ROOT"/nerdctl-patch/[0-9]*.patch "$1/"
	cp -R "$CFSB_ROOT/nerdctl-patch/src" "$1/src"
}
np=$tmp/np
src_file=pkg/cpucharge/mode.go
series_copy "$np"
quietly "$nb" check-sources "$np"
check "the nerdctl series matches nerdctl-patch/src" '[[ $rc -eq 0 ]]' "$out"
echo "// changed" >>"$np/src/$src_file"
quietly "$nb" check-sources "$np"
check "a source changed since the export is found" '[[ $rc -ne 0 && $out == *"$src_file"* ]]' "exit $rc: $out"
series_copy "$np"
rm "$np/src/$src_file"
quietly "$nb" check-sources "$np"
check "a file the series adds without a source is found" \
	'[[ $rc -ne 0 && $out == *"$src_file"*"no source"* ]]' "exit $rc: $out"
series_copy "$np"
cp "$np/src/$src_file" "$np/src/pkg/cpucharge/extra.go"
quietly "$nb" check-sources "$np"
check "a source the series does not add is found" \
	'[[ $rc -ne 0 && $out == *extra.go*"added by no patch"* ]]' "exit $rc: $out"
series_copy "$np"
last=$(find "$np" -maxdepth 1 -name '0*.patch' | sort | tail -n1)
printf '%s\n' "diff --git a/$src_file b/$src_file" "--- a/$src_file" "+++ b/$src_file" \
	"@@ -1 +1 @@" "-/*" "+/**" >>"$last"
quietly "$nb" check-sources "$np"
check "a source changed by a later patch is found" \
	'[[ $rc -ne 0 && $out == *"$src_file"*"changes it after"* ]]' "exit $rc: $out"

# --- 3. export round trip ---------------------------------------------------
ptree=$CFSB_CACHE/nerdctl/patched
if [[ ! -d $ptree/.git && ! -f $ptree/.git ]]; then
	for what in "an unchanged series" "an edited source" "a commit in the tree" "export takes it"; do
		n=$((n + 1))
		echo "ok $n export round trip: $what # SKIP no patched nerdctl tree yet (scripts/nerdctl-build.sh)"
	done
else
	series_copy "$np"
	export CFSB_NERDCTL_SERIES=$np
	nexport() { quietly as_author_of "$(ls "$CFSB_ROOT"/nerdctl-patch/0001-*.patch)" "$nb" export; }
	nexport
	same_series() {
		local p
		[[ $(find "$np" -maxdepth 1 -name '0*.patch' | wc -l) -eq $(find "$CFSB_ROOT/nerdctl-patch" -maxdepth 1 -name '0*.patch' | wc -l) ]] || return 1
		for p in "$np"/0*.patch; do cmp -s "$p" "$CFSB_ROOT/nerdctl-patch/${p##*/}" || return 1; done
	}
	check "export round trip: an unchanged series comes out byte for byte" '[[ $rc -eq 0 ]] && same_series' "exit $rc: $out"
	echo "// edited where it stands" >>"$np/src/$src_file"
	nexport
	check "export round trip: a source edited in src goes into the series and the tree" \
		'[[ $rc -eq 0 ]] && grep -q "^+// edited where it stands" "$np"/0001-*.patch &&
			[[ $(tail -n1 "$ptree/$src_file") == "// edited where it stands" ]]' "exit $rc: $out"
	echo "// edited in the tree" >>"$ptree/$src_file"
	git -C "$ptree" -c user.name=test -c user.email=test@localhost commit -q -am "fixup: edited in the tree"
	quietly "$nb" --print-binary
	check "export round trip: a commit in the patched tree stops the build" \
		'[[ $rc -ne 0 && $out == *"not in the series"* && $(git -C "$ptree" log -1 --format=%s) == "fixup: edited in the tree" ]]' \
		"exit $rc: $out"
	nexport
	check "export round trip: export takes it into src and into the patch that adds the file" \
		'[[ $rc -eq 0 && $(tail -n1 "$np/src/$src_file") == "// edited in the tree" ]] &&
			grep -q "^+// edited in the tree" "$np"/0001-*.patch && [[ ! -e $(echo "$np"/0006-*) ]]' "exit $rc: $out"
	unset CFSB_NERDCTL_SERIES
	# The real series back in the tree (no build).
	quietly bash -c "source '$CFSB_ROOT/scripts/lib.sh' && mapfile -t p < <(find '$CFSB_ROOT/nerdctl-patch' -maxdepth 1 -name '0*.patch' | sort) &&
		prepare_series_tree '$CFSB_CACHE/nerdctl/stock' '$ptree' patched 0 clean nerdctl export \"\${p[@]}\""
	[[ $rc -eq 0 ]] || echo "# could not give the patched tree the series back: $out"
fi
# --- 4. the kernel series' export round trip --------------------------------
# On copies of kernel/patches and kernel/src, from a sparse worktree (only
# kernel/sched checked out) at the patched tree's HEAD.
ks=$CFSB_ROOT/scripts/kernel-series.sh
ktree=$(kernel_tree patched)
kunit_src=kernel/sched/fair_borrowing_kunit.c
if ! git -C "$ktree" rev-parse -q --verify HEAD >/dev/null 2>&1; then
	for what in "an unchanged series" "an edited source" "a fixup in the tree" \
		"an edited message" "a stale message" "a message of no patch" "a reworded commit" \
		"a message changed twice" "a stale cover letter" "an edited cover letter"; do
		n=$((n + 1))
		echo "ok $n kernel export round trip: $what # SKIP no patched kernel tree yet (scripts/kernel-build.sh)"
	done
else
	kcopy() {
		rm -rf "$tmp/kpatches" "$tmp/ksrc" "$tmp/kmsgs"
		mkdir -p "$tmp/kpatches"
		cp "$CFSB_ROOT"/kernel/patches/*.patch "$tmp/kpatches/"
		cp -R "$CFSB_ROOT/kernel/src" "$tmp/ksrc"
		cp -R "$CFSB_ROOT/kernel/messages" "$tmp/kmsgs"
		cp "$CFSB_ROOT/kernel/cover-letter.txt" "$tmp/kcover"
	}
	# kseries CMD...: kernel-series.sh CMD on the copies.
	kseries() {
		quietly as_author_of "$(ls "$CFSB_ROOT"/kernel/patches/0001-*.patch)" \
			env CFSB_KERNEL_SERIES="$tmp/kpatches" CFSB_KERNEL_SRC="$tmp/ksrc" \
			CFSB_KERNEL_MESSAGES="$tmp/kmsgs" CFSB_KERNEL_COVER_LETTER="$tmp/kcover" "$ks" "$@"
	}
	kexport() { kseries export --tree "$tmp/kwt"; }
	same_kernel_series() {
		local p
		for p in "$CFSB_ROOT"/kernel/patches/*.patch; do cmp -s "$p" "$tmp/kpatches/${p##*/}" || return 1; done
		[[ $(find "$tmp/kpatches" -name '*.patch' | wc -l) -eq $(find "$CFSB_ROOT/kernel/patches" -name '*.patch' | wc -l) ]]
	}
	# (sparse-checkout turns on the repository's per-worktree config: put
	# that back as it was afterwards.)
	wtconfig=$(git -C "$ktree" config --get extensions.worktreeConfig || true)
	git -C "$ktree" worktree add -q --no-checkout --detach "$tmp/kwt" HEAD
	git -C "$tmp/kwt" sparse-checkout set kernel/sched
	git -C "$tmp/kwt" checkout -q --detach HEAD
	kcopy
	kexport
	check "kernel export round trip: an unchanged series comes out byte for byte" \
		'[[ $rc -eq 0 ]] && same_kernel_series' "exit $rc: $out"
	echo "/* edited where it stands */" >>"$tmp/ksrc/$kunit_src"
	kexport
	check "kernel export round trip: a source edited in kernel/src goes into the patch that adds it" \
		'[[ $rc -eq 0 ]] && grep -q "^+/\* edited where it stands \*/" "$tmp"/kpatches/0*-sched-fair-Add-KUnit-*.patch' "exit $rc: $out"
	kcopy
	echo "/* edited in the tree */" >>"$tmp/kwt/$kunit_src"
	git -C "$tmp/kwt" -c user.name=test -c user.email=test@localhost commit -q -am "fixup: edited in the tree"
	kexport
	check "kernel export round trip: a fixup in the tree goes into kernel/src and the patch that adds the file" \
		'[[ $rc -eq 0 && $(tail -n1 "$tmp/ksrc/$kunit_src") == "/* edited in the tree */" && $out == *dropped* ]] &&
			grep -q "^+/\* edited in the tree \*/" "$tmp"/kpatches/0*-sched-fair-Add-KUnit-*.patch' "exit $rc: $out"
	# The messages: kernel/messages is their source, as kernel/src is the
	# files'. (The worktree back at the series first: no fixup.)
	git -C "$tmp/kwt" reset -q --hard HEAD~1
	kcopy
	stats_msg=$tmp/kmsgs/sched-core-Add-borrowing-statistics-to-cpu.stat.txt
	echo "A line edited where it stands." >>"$stats_msg"
	kseries check-messages
	check "kernel messages: check-messages fails on a series older than its message file" \
		'[[ $rc -ne 0 && $out == *"is not"*"sched-core-Add-borrowing-statistics"* ]]' "exit $rc: $out"
	kexport
	check "kernel messages: a message edited in kernel/messages goes into its patch" \
		'[[ $rc -eq 0 ]] && grep -q "^A line edited where it stands\.$" "$tmp"/kpatches/0004-*.patch &&
			! grep -q "^A line edited where it stands\.$" "$tmp"/kpatches/000[1235-7]-*.patch' "exit $rc: $out"
	printf 'sched: A patch no series has\n\nBody.\n' >"$tmp/kmsgs/sched-A-patch-no-series-has.txt"
	kseries check-messages
	check "kernel messages: check-messages fails on a file that is the message of no patch" \
		'[[ $rc -ne 0 && $out == *"sched-A-patch-no-series-has.txt: the message of no patch"* ]]' "exit $rc: $out"
	kcopy
	# Reword the statistics patch in the tree (not the last commit).
	quietly env GIT_SEQUENCE_EDITOR="sed -i '/Add borrowing statistics/s/^pick/reword/'" \
		GIT_EDITOR="sed -i '2a A line reworded in the tree.'" \
		git -C "$tmp/kwt" -c user.name=test -c user.email=test@localhost rebase -q -i cfsb-base
	[[ $rc -eq 0 ]] || echo "# rebase: $out"
	kexport
	check "kernel messages: a commit reworded in the tree goes into its message file and its patch" \
		'[[ $rc -eq 0 ]] && sed -n 3p "$stats_msg" | grep -qx "A line reworded in the tree\." &&
			grep -q "^A line reworded in the tree\.$" "$tmp"/kpatches/0004-*.patch' "exit $rc: $out"
	kcopy
	echo "A line edited where it stands." >>"$stats_msg"
	cp "$stats_msg" "$tmp/stats_msg.edited"
	kexport
	check "kernel messages: a message changed in the tree and in its file stops the export, both kept" \
		'[[ $rc -ne 0 && $out == *"changed both"* ]] && cmp -s "$stats_msg" "$tmp/stats_msg.edited" &&
			git -C "$tmp/kwt" log -1 --format=%B HEAD~3 | grep -qx "A line reworded in the tree\."' "exit $rc: $out"
	# The cover letter's text, one file for both series.
	git -C "$tmp/kwt" reset -q --hard "$(git -C "$ktree" rev-parse HEAD)"
	kcopy
	sed -i '3i A paragraph for both series.\n' "$tmp/kcover"
	kseries check-messages
	check "kernel messages: check-messages fails on a cover letter older than its text" \
		'[[ $rc -ne 0 && $out == *"0000-cover-letter.patch is not"* ]]' "exit $rc: $out"
	kexport
	check "kernel messages: the cover letter's text for both series goes into the cover letter" \
		'[[ $rc -eq 0 ]] && grep -q "^A paragraph for both series\.$" "$tmp/kpatches/0000-cover-letter.patch"' "exit $rc: $out"
	git -C "$ktree" worktree remove --force "$tmp/kwt"
	[[ -n $wtconfig ]] || git -C "$ktree" config --unset extensions.worktreeConfig
fi
echo "1..$n"
