#!/usr/bin/env bash
# shellcheck disable=SC2016 # the conditions and the code expand later
# The kernel source's version (scripts/lib.sh, kernel_source_resolve and
# ensure_kernel_repo): TAP on stdout. No network and no download: the
# archive is stubbed (but in 2.), the trees are made from small tarballs
# in a cache of the check's own.
#
#   scripts/check-kernel-source.sh
#
# 1. Before one is taken, the version named is the tree's, else the pin.
#    The version taken: the pin when the machine has it (the archive is not
#    asked) or the archive does, silently; else the archive's newest of the
#    pin's major.minor (by Debian's version order), said in one line on
#    stderr with the pin; CFSB_KERNEL_SOURCE_VERSION's version for its base
#    (the other base keeps its pin), or the newest of its major.minor; a
#    version of no base, two for one base, and an archive with no version
#    of the base's major.minor are refused; the Linux release of a Debian
#    version.
# 2. The machine's own apt lists (read, not updated; skipped where they
#    list no linux-source-6.12): a 6.12 version they do not list, asked for
#    through CFSB_KERNEL_SOURCE_VERSION, resolves to the newest they list.
# 3. The tree follows the version taken: unpacked with it in its commit
#    message and stamp; the series applied; another version taken: the
#    tree and its worktrees made again from it, and the series applied to
#    it, the message naming the pin; a patched tree holding work not in
#    the series, or a worktree of someone else's, stops that and is kept;
#    a tarball that is not the version it is said to be is refused; a
#    series that does not apply names the version and its first patch
#    that fails, and leaves the tree at the base.
# 4. Debian's kernel (ensure_debian_kernel), on a new machine whose cache
#    is not made yet: a download that fails says so and leaves nothing
#    half made.
set -uo pipefail

case ${1:-} in
-h | --help)
	awk 'NR > 2 && !/^#/ { exit } NR > 2' "$0" | cut -c3-
	exit 0
	;;
"") ;;
*) echo "usage: ${0##*/} [--help]" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
# check NAME CONDITION: a TAP line for CONDITION (bash); the last run's
# output as comments when it fails.
check() {
	n=$((n + 1))
	if eval "$2"; then
		echo "ok $n $1"
	else
		echo "not ok $n $1"
		{ echo "exit $rc; stdout:"; printf '%s\n' "$out"; echo "stderr:"; printf '%s\n' "$err"; } |
			head -30 | sed 's/^/#   /'
	fi
}
# in_lib [VAR=VALUE...] -- CODE: CODE in a bash that has sourced lib.sh,
# with the cache $tmp/cache and the archive stubbed: it lists $LISTED
# and is never updated; asking it leaves $tmp/asked. Its stdout in $out,
# its stderr in $err, its status in $rc.
in_lib() {
	local vars=()
	while [[ $1 != -- ]]; do vars+=("$1"); shift; done
	shift
	rm -f "$tmp/asked"
	env -u CFSB_KERNEL_SOURCE_VERSION -u CFSB_KERNEL_BASE CFSB_CACHE="$tmp/cache" ASKED="$tmp/asked" \
		LISTED="" "${vars[@]}" bash -c '
		set -euo pipefail
		source "$1/scripts/lib.sh"
		kernel_source_refresh() { touch "$ASKED"; }
		kernel_source_listed() { touch "$ASKED"; [[ -z $LISTED ]] || printf "%s\n" $LISTED; }
		eval "$2"' check-kernel-source.sh "$root" "$1" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	out=$(cat "$tmp/out")
	err=$(cat "$tmp/err")
}
asked() { [[ -e $tmp/asked ]]; }
lines() { if [[ -z $1 ]]; then echo 0; else wc -l <<<"$1"; fi; }

pin612=$(bash -c 'source "$1/scripts/lib.sh"; select_kernel_base 6.12; echo "$KERNEL_SOURCE_PIN"' _ "$root")
pin72=$(bash -c 'source "$1/scripts/lib.sh"; select_kernel_base 7.2; echo "$KERNEL_SOURCE_PIN"' _ "$root")
rel72=${pin72%-*}
# (The versions made up here are above any real one: never a pin.)
taken='echo "$KERNEL_SOURCE_PKG_VERSION $KERNEL_BASE_VERSION"'

echo "TAP version 13"

# --- 1. the version taken ------------------------------------------------
mkdir -p "$tmp/cache/linux-7.2-stock/.git"
echo "$pin72" >"$tmp/cache/linux-7.2-stock/.git/cfsb-base-version"
in_lib -- "select_kernel_base 7.2; kernel_source_resolve; $taken"
check "the pin, which the tree has: taken, the archive not asked, nothing said" \
	'[[ $rc -eq 0 && $out == "$pin72 $rel72" && -z $err ]] && ! asked'
echo 7.2.1015-1 >"$tmp/cache/linux-7.2-stock/.git/cfsb-base-version"
in_lib -- "select_kernel_base 7.2; $taken; select_kernel_base 6.12; $taken"
check "before one is taken, the version is the tree's (7.2), else the pin (6.12, no tree)" \
	'[[ $rc -eq 0 && $out == "7.2.1015-1 7.2.1015"$'"'"'\n'"'"'"$pin612 ${pin612%-*}" ]] && ! asked'
rm -rf "$tmp/cache/linux-7.2-stock"

in_lib LISTED="7.2.0-1 $pin72 7.2.999-1" -- "select_kernel_base 7.2; kernel_source_resolve; $taken"
check "the pin, which the archive has (beside newer ones): taken, nothing said" \
	'[[ $rc -eq 0 && $out == "$pin72 $rel72" && -z $err ]] && asked'

in_lib LISTED="7.2.998-1 7.2.1001-1~exp1 7.2.1001-1 7.2.1000-2 7.20.1-1 7.3.1-1 8.0.1-1" -- \
	"select_kernel_base 7.2; kernel_source_resolve; $taken"
check "the pin gone from the archive: its newest 7.2.y taken (by Debian's order; not 7.20, 7.3 or 8.0)" \
	'[[ $rc -eq 0 && $out == "7.2.1001-1 7.2.1001" ]]'
check "... said once on stderr, with the pin the series was made on" \
	'[[ $(lines "$err") -eq 1 && $err == *"$pin72 (the version the series was made on) is not in the archive: taking 7.2.1001-1"* ]]'
in_lib LISTED="6.12.1000-1~deb12u1 6.12.999-2~deb12u1 6.13.2-1 6.12.99-1~deb12u1" -- \
	"select_kernel_base 6.12; CFSB_KERNEL_SOURCE_VERSION=6.12.1-0~none kernel_source_resolve; $taken"
check "6.12: a version the archive lacks: its newest 6.12.y taken (not 6.13)" \
	'[[ $rc -eq 0 && $out == "6.12.1000-1~deb12u1 6.12.1000" && $(lines "$err") -eq 1 ]]'

in_lib LISTED="$pin612 6.12.1-1~test" CFSB_KERNEL_SOURCE_VERSION=6.12.1-1~test -- \
	"select_kernel_base 6.12; kernel_source_resolve; $taken; kernel_source_what"
check "CFSB_KERNEL_SOURCE_VERSION, which the archive has: taken, said once with the pin" \
	'[[ $rc -eq 0 && $out == "6.12.1-1~test 6.12.1"$'"'"'\n'"'"'* && $(lines "$err") -eq 1 && $err == *"$pin612"* ]]'
check "... and messages name the version taken and the pin" \
	'[[ $out == *$'"'"'\n'"'"'"Linux 6.12.1 (linux-source-6.12 6.12.1-1~test; the series was made on $pin612)" ]]'

in_lib LISTED="$pin72 7.2.1000-1" CFSB_KERNEL_SOURCE_VERSION=6.12.1-1~test -- \
	"select_kernel_base 7.2; kernel_source_resolve; $taken"
check "CFSB_KERNEL_SOURCE_VERSION for 6.12 leaves 7.2 at its pin" \
	'[[ $rc -eq 0 && $out == "$pin72 $rel72" && -z $err ]]'

in_lib LISTED="7.2.1000-1 6.12.1000-1" CFSB_KERNEL_SOURCE_VERSION="6.12.1-1~test 7.2.999-1" -- \
	"select_kernel_base 7.2; kernel_source_resolve; $taken"
check "CFSB_KERNEL_SOURCE_VERSION with a version for each base; 7.2's not in the archive: its newest 7.2.y" \
	'[[ $rc -eq 0 && $out == "7.2.1000-1 7.2.1000" && $(lines "$err") -eq 1 && $err == *"7.2.999-1"*"taking 7.2.1000-1"*"made on $pin72"* ]]'

for v in 6.13.2-1 6.1.5-1 8.0.1-1 latest "6.12.1 -1"; do
	in_lib LISTED="$pin612 6.13.2-1 6.1.5-1 8.0.1-1" CFSB_KERNEL_SOURCE_VERSION="$v" -- \
		"select_kernel_base 6.12; kernel_source_resolve; $taken"
	check "CFSB_KERNEL_SOURCE_VERSION='$v' (of no base): refused, nothing taken" \
		'[[ $rc -ne 0 && -z $out && $err == *"CFSB_KERNEL_SOURCE_VERSION"*"no kernel base"* ]] && ! asked'
done
in_lib CFSB_KERNEL_SOURCE_VERSION="6.12.1-1~test 6.12.2-1~test" -- \
	"select_kernel_base 6.12; kernel_source_resolve; $taken"
check "CFSB_KERNEL_SOURCE_VERSION with two versions for 6.12: refused" \
	'[[ $rc -ne 0 && -z $out && $err == *"two versions for 6.12"* ]]'

in_lib LISTED="6.13.2-1 6.11.9-1 7.2.13-1" -- \
	"select_kernel_base 6.12; kernel_source_tarball_version() { :; }; kernel_source_resolve; $taken"
check "the machine without the pin, an archive with no 6.12.y: refused, naming the pin and what it lists (never another major.minor)" \
	'[[ $rc -ne 0 && -z $out && $err == *"$pin612"*"6.13.2-1 6.11.9-1 7.2.13-1"* ]]'
in_lib LISTED="" -- "select_kernel_base 7.2; kernel_source_resolve; $taken"
check "an archive with no linux-source-7.2 at all: refused" \
	'[[ $rc -ne 0 && -z $out && $err == *"lists: none"* ]]'

in_lib -- 'for v in 6.12.117-1~deb12u1 7.2-1 7.2.13-1 7.2.13+b1-2 7.2~rc3-1~exp1; do
		kernel_source_use "$v"; echo "$KERNEL_BASE_VERSION"; done | paste -sd" "'
check "the Linux release of a Debian version (M.m.s, as the source's Makefile has it)" \
	'[[ $rc -eq 0 && $out == "6.12.117 7.2.0 7.2.13 7.2.13 7.2.0" ]]'

# --- 2. the machine's apt lists ------------------------------------------
mapfile -t listed < <(apt-cache madison linux-source-6.12 2>/dev/null |
	awk -F'|' '{ gsub(/[ \t]/, "", $2); print $2 }' | sort -u)
if [[ ${#listed[@]} -eq 0 ]]; then
	n=$((n + 1))
	echo "ok $n the machine's apt lists: a 6.12 version they lack resolves to their newest # SKIP they list no linux-source-6.12"
else
	newest=${listed[0]}
	for v in "${listed[@]}"; do dpkg --compare-versions "$v" gt "$newest" && newest=$v; done
	env -u CFSB_KERNEL_SOURCE_VERSION -u CFSB_KERNEL_BASE CFSB_CACHE="$tmp/cache" \
		CFSB_KERNEL_SOURCE_VERSION=6.12.0-0~none bash -c '
		set -euo pipefail
		source "$1/scripts/lib.sh"
		kernel_source_refresh() { :; }
		kernel_source_resolve
		echo "$KERNEL_SOURCE_PKG_VERSION"' check-kernel-source.sh "$root" >"$tmp/out" 2>"$tmp/err"
	rc=$? out=$(cat "$tmp/out") err=$(cat "$tmp/err")
	check "the machine's apt lists (${listed[*]}): 6.12.0-0~none, which they lack, resolves to $newest" \
		'[[ $rc -eq 0 && $out == "$newest" && $(lines "$err") -eq 1 && $err == *"taking $newest"* ]]'
fi

# --- 3. the tree follows the version taken --------------------------------
# tarball SUBLEVEL VERSION [B]: a linux-source-7.2 tarball of Linux
# 7.2.SUBLEVEL with the files a and b (b's text B), at hand as Debian's
# VERSION.
tarball() {
	local src=$tmp/tarball/linux-source-7.2 dir=$tmp/cache/sources/7.2
	rm -rf "$tmp/tarball" "$dir"
	mkdir -p "$src" "$dir/usr/src"
	printf 'VERSION = 7\nPATCHLEVEL = 2\nSUBLEVEL = %s\nEXTRAVERSION =\n' "$1" >"$src/Makefile"
	printf '1\n2\n3\n' >"$src/a"
	printf '%s\n' "${3:-x}" >"$src/b"
	tar -C "$tmp/tarball" -cJf "$dir/usr/src/linux-source-7.2.tar.xz" linux-source-7.2
	echo "$2" >"$dir/.cfsb-source-version"
}
# The series: 0001 changes a, 0002 b (b "x" is its context).
mkdir -p "$tmp/series-src"
git -C "$tmp/series-src" init -q
printf '1\n2\n3\n' >"$tmp/series-src/a"
echo x >"$tmp/series-src/b"
git -C "$tmp/series-src" add a b
g=(git -C "$tmp/series-src" -c user.name=t -c user.email=t@localhost)
"${g[@]}" commit -q -m base
sed -i 's/2/two/' "$tmp/series-src/a"
"${g[@]}" commit -q -am "change a"
echo y >"$tmp/series-src/b"
"${g[@]}" commit -q -am "change b"
"${g[@]}" format-patch -q -o "$tmp/series" HEAD~2
build='select_kernel_base 7.2; kernel_source_resolve; ensure_kernel_repo
	prepare_series_tree "$(kernel_repo)" "$(kernel_tree patched)" patched 0 ignore "$(kernel_source_what)" export-it "$SERIES"/*.patch'
repo=$tmp/cache/linux-7.2-stock patched=$tmp/cache/linux-7.2-patched
subject() { git -C "$repo" log -1 --format=%s cfsb-base 2>/dev/null; }

tarball "${rel72##*.}" "$pin72"
in_lib SERIES="$tmp/series" -- "$build"
check "the pin at hand: unpacked, its version in the base commit and the stamp, the series applied" \
	'[[ $rc -eq 0 && $(subject) == "Linux $rel72 (linux-source-7.2 $pin72)" && $(cat "$repo/.git/cfsb-base-version") == "$pin72" &&
		$(git -C "$patched" rev-list --count cfsb-base..HEAD) -eq 2 ]] && ! asked'
# shellcheck disable=SC2034 # a check's condition reads it
base0=$(git -C "$repo" rev-parse cfsb-base)
touch "$patched/build-x"
git -C "$repo" worktree add -q --detach "$tmp/cache/linux-7.2-export" cfsb-base

tarball 1015 7.2.1015-1
in_lib SERIES="$tmp/series" CFSB_KERNEL_SOURCE_VERSION=7.2.1014-1 LISTED="$pin72 7.2.1015-1" -- "$build"
check "another version taken: the tree made again from it, the series applied to it" \
	'[[ $rc -eq 0 && $(subject) == "Linux 7.2.1015 (linux-source-7.2 7.2.1015-1)" && $(cat "$repo/.git/cfsb-base-version") == 7.2.1015-1 &&
		$(git -C "$patched" rev-list --count cfsb-base..HEAD) -eq 2 && ! -e $patched/build-x && ! -e $tmp/cache/linux-7.2-export ]]'
check "... saying which version, from which, and the pin" \
	'[[ $err == *"taking 7.2.1015-1"* && $err == *"replacing $repo"*"$pin72 by 7.2.1015-1"* &&
		$err == *"applied 2 patches to Linux 7.2.1015 (linux-source-7.2 7.2.1015-1; the series was made on $pin72)"* ]]'

tarball "${rel72##*.}" "$pin72"
in_lib SERIES="$tmp/series" -- "$build"
check "the pin at hand again: the tree made again from it, the same base commit as before" \
	'[[ $rc -eq 0 && $(git -C "$repo" rev-parse cfsb-base) == "$base0" ]]'

echo z >"$patched/a"
git -C "$patched" -c user.name=t -c user.email=t@localhost commit -q -am "work not in the series"
tarball 1015 7.2.1015-1
in_lib SERIES="$tmp/series" CFSB_KERNEL_SOURCE_VERSION=7.2.1015-1 -- "$build"
check "a patched tree holding work not in the series: another version stops, the tree and its work kept" \
	'[[ $rc -ne 0 && $err == *"$patched holds commits"*"export them"* && $(cat "$repo/.git/cfsb-base-version") == "$pin72" &&
		$(git -C "$patched" log -1 --format=%s) == "work not in the series" ]]'
git -C "$patched" checkout -q -f --detach cfsb-base

git -C "$repo" worktree add -q --detach "$tmp/mine" cfsb-base
in_lib SERIES="$tmp/series" CFSB_KERNEL_SOURCE_VERSION=7.2.1015-1 -- "$build"
check "a worktree of someone else's: another version stops, the worktree kept" \
	'[[ $rc -ne 0 && $err == *"$tmp/mine is a worktree of $repo"* && -e $tmp/mine/.git && $(cat "$repo/.git/cfsb-base-version") == "$pin72" ]]'
git -C "$repo" worktree remove --force "$tmp/mine"

tarball "${rel72##*.}" 7.2.1017-1
in_lib SERIES="$tmp/series" CFSB_KERNEL_SOURCE_VERSION=7.2.1017-1 -- "$build"
check "a tarball that is not the version it is said to be: refused, the tree kept" \
	'[[ $rc -ne 0 && $err == *"is not Linux 7.2.1017"* && $(cat "$repo/.git/cfsb-base-version") == "$pin72" && -d $patched ]]'

tarball 1016 7.2.1016-1 changed
in_lib SERIES="$tmp/series" CFSB_KERNEL_SOURCE_VERSION=7.2.1016-1 -- "$build"
check "a series that does not apply: stops, naming the version, the pin and the first patch that fails" \
	'[[ $rc -ne 0 && $err == *"does not apply to Linux 7.2.1016 (linux-source-7.2 7.2.1016-1; the series was made on $pin72): 0002-change-b.patch is the first patch that fails (1 of 2 applied before it)"* ]]'
check "... with git's reason, not its advice to go on with git am, and the tree left at the base" \
	'[[ $err == *"error: b: patch does not apply"* && $err != *"git am --continue"* &&
		$(git -C "$patched" rev-parse HEAD) == $(git -C "$patched" rev-parse cfsb-base) ]]'

# --- 4. Debian's kernel into a new cache ----------------------------------
# (The package and its download stubbed: the download fails.)
in_lib CFSB_CACHE="$tmp/new-cache" -- 'select_kernel_base 6.12
	ensure_packages() { :; }
	debian_kernel_package() { echo linux-image-6.12.1+test-amd64; }
	apt-get() { echo "no network" >&2; return 100; }
	ensure_debian_kernel'
check "Debian's kernel, the cache not made yet: the failed download named, nothing half made kept" \
	'[[ $rc -ne 0 && $err == *"cannot download linux-image-6.12.1+test-amd64"* && $err != *mktemp* &&
		-d $tmp/new-cache && -z $(ls -A "$tmp/new-cache") ]]'

echo "1..$n"
