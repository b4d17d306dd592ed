#!/usr/bin/env bash
# Build nerdctl v1.7.7 with the nerdctl-patch/ series (the logging process
# charges its CPU time to the container), or stock. Incremental; checks the
# source against a pinned checksum.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

NERDCTL_MODULE=github.com/containerd/nerdctl
NERDCTL_VERSION=v1.7.7
# The go.sum hash (h1:, over the module's files) of nerdctl v1.7.7, the
# one sum.golang.org has. The source is checked against it before use.
NERDCTL_SUM="h1:NmtSMmpF4qbS4aVj1/wyj2HTD3synzGFLXc4RC74Hwg="

usage() {
	cat <<EOF
Usage: ${0##*/} [--stock] [--test] [--keep-tree] [--print-binary]
       ${0##*/} export [--tree DIR]
       ${0##*/} check-sources [DIR]

Builds nerdctl $NERDCTL_VERSION for the QEMU guest (static, CGO_ENABLED=0):
  - fetches $NERDCTL_MODULE@$NERDCTL_VERSION through the Go module proxy and
    checks its files against the pinned checksum $NERDCTL_SUM;
  - commits the source once into a git repository under $CFSB_CACHE/nerdctl
    (base commit tagged cfsb-base, with fixed metadata: the same id everywhere);
  - patched (default): a worktree with nerdctl-patch/*.patch applied by git am;
    re-applied only when the series (or the tree) changed;
  - builds .build/nerdctl/nerdctl (or .build/nerdctl-stock/nerdctl with
    --stock) in the checkout: the guest sees the checkout, not /root. Returns
    at once when nothing changed.

Options:
  --stock         build unmodified nerdctl $NERDCTL_VERSION, for comparisons
  --test          also check the series: gofmt -l on the files it changes,
                  go vet (linux, and freebsd/windows for the packages it
                  touches), go test -count=1 of the packages it touches under
                  pkg/ (with -race for pkg/cpucharge when cgo works); prints
                  the throughput per cpu-charge mode and the test counts;
                  fails on any failure
  --tap FILE      --test, and write the results as TAP to FILE (one line per
                  check and per go test, subtests included)
  --keep-tree     use the patched tree as it is (to work on the series there:
                  commit, then "export"); without it a tree
                  with work not in the series stops the build
  --print-binary  print only the binary's path when done (for scripts)

  export          regenerate nerdctl-patch/*.patch from the commits on top of
                  cfsb-base in the patched tree ($CFSB_CACHE/nerdctl/patched,
                  or DIR), each file the series adds taken from its source in
                  nerdctl-patch/src (where it is gofmt-, vet- and testable on
                  its own); a source file changed in the tree and not in
                  nerdctl-patch/src is copied there first, one changed in
                  both stops the export. The patched tree then holds the new
                  series.
  check-sources   fail if a file the series (in DIR, default nerdctl-patch)
                  adds under a directory of DIR/src differs from its source
                  there, or a source file is not in the series (run export).

The patched tree is never reset while it holds commits or changes that are
not in the series: the build stops and says how to export or drop them.
Environment: CFSB_CACHE (default ~/.cache/cfs-borrowing); CFSB_NERDCTL_SERIES,
the series' directory (default nerdctl-patch, for scripts/check-export.sh).
EOF
}

variant=patched run_tests=0 keep_tree=0 print_binary=0 cmd=build tap_file='' export_tree='' sources_dir=''
while [[ $# -gt 0 ]]; do
	case $1 in
	--stock) variant=stock; shift ;;
	--test) run_tests=1; shift ;;
	--tap) run_tests=1 tap_file=${2:?}; shift 2 ;;
	--keep-tree) keep_tree=1; shift ;;
	--print-binary) print_binary=1; shift ;;
	export) cmd="export"; shift ;;
	--tree) export_tree=${2:?--tree needs a directory}; shift 2 ;;
	check-sources)
		cmd=check-sources
		shift
		[[ $# -gt 0 && $1 != -* ]] && { sources_dir=$1; shift; }
		;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument '$1'" ;;
	esac
done
[[ $variant == stock && $run_tests -eq 1 ]] && die "--test checks the series: not with --stock"

repo=$CFSB_CACHE/nerdctl/stock
tree=$CFSB_CACHE/nerdctl/$variant
[[ $variant == stock ]] && tree=$repo
patch_dir=${CFSB_NERDCTL_SERIES:-$CFSB_ROOT/nerdctl-patch}
out=$CFSB_ROOT/.build/nerdctl
[[ $variant == stock ]] && out=$CFSB_ROOT/.build/nerdctl-stock

series_files() { find "${1:-$patch_dir}" -maxdepth 1 -name '[0-9][0-9][0-9][0-9]-*.patch' | sort; }

# check_sources DIR: the series in DIR against its sources in DIR/src.
check_sources() {
	local -a patches
	mapfile -t patches < <(series_files "$1")
	check_series_sources "$1/src" "${0##*/} export" "${patches[@]}" ||
		die "the series in $1 is stale against $1/src"
}

if [[ $cmd == check-sources ]]; then
	check_sources "${sources_dir:-$patch_dir}"
	exit 0
fi

# --- tools ----------------------------------------------------------------
use_go
ensure_packages git coreutils

# h1_sum DIR: the go.sum "h1:" hash of a module's files in DIR (dirhash
# Hash1: sha256 of the sorted "sha256  module@version/file" lines).
h1_sum() {
	(cd "$1" && find . -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 sha256sum) |
		sed "s|^\([0-9a-f]*\)  |\1  $NERDCTL_MODULE@$NERDCTL_VERSION/|" |
		sha256sum | cut -d' ' -f1 | tr a-f A-F | basenc --base16 -d | base64 |
		sed 's/^/h1:/'
}

# --- source ---------------------------------------------------------------
ensure_repo() {
	local stamp="$repo/.git/cfsb-base-version" json sum dir tmp got
	if [[ -d $repo/.git && $(cat "$stamp" 2>/dev/null) == "$NERDCTL_VERSION $NERDCTL_SUM" ]]; then
		return 0
	fi
	log "fetching $NERDCTL_MODULE@$NERDCTL_VERSION"
	mkdir -p "$CFSB_CACHE/nerdctl"
	# Outside any module; go verifies the download against sum.golang.org.
	json=$(cd "$CFSB_CACHE/nerdctl" && go mod download -json "$NERDCTL_MODULE@$NERDCTL_VERSION") ||
		die "go mod download failed: $json"
	sum=$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
	dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
	[[ $sum == "$NERDCTL_SUM" ]] ||
		die "checksum mismatch for $NERDCTL_MODULE@$NERDCTL_VERSION: the module proxy says '$sum', pinned '$NERDCTL_SUM'"
	[[ -d $dir ]] || die "go mod download gave no source directory: $json"
	tmp="$CFSB_CACHE/nerdctl/unpack.$$"
	rm -rf "$tmp" "$repo" "$CFSB_CACHE/nerdctl/patched"
	cp -R "$dir" "$tmp"
	chmod -R u+w "$tmp" # the module cache is read-only
	# Check what is committed, not only what was downloaded: the module
	# cache is not re-verified after extraction.
	got=$(h1_sum "$tmp")
	[[ $got == "$NERDCTL_SUM" ]] || { rm -rf "$tmp"; die "checksum mismatch for the files of $dir: '$got', pinned '$NERDCTL_SUM'"; }
	log "checksum verified: $NERDCTL_SUM"
	(
		cd "$tmp"
		git init -q
		git config user.name "cfs-borrowing build"
		git config user.email "build@localhost"
		git config core.autocrlf false
		git config gc.auto 0
		git add -f -A .
		# Fixed metadata: the base commit has the same id on every machine.
		GIT_AUTHOR_DATE=2025-01-01T00:00:00Z GIT_COMMITTER_DATE=2025-01-01T00:00:00Z \
			git commit -q -m "nerdctl $NERDCTL_VERSION ($NERDCTL_MODULE $NERDCTL_SUM)"
		git tag cfsb-base
	)
	mv "$tmp" "$repo"
	echo "$NERDCTL_VERSION $NERDCTL_SUM" >"$stamp"
}

# --- build ----------------------------------------------------------------
build() {
	local bin=$out/nerdctl want head version t0
	head=$(git -C "$tree" rev-parse HEAD)
	version=$NERDCTL_VERSION
	[[ $variant == patched ]] && version=$NERDCTL_VERSION-cfsb
	# nerdctl v1.7.7 and its dependencies build with go 1.26 as they are
	# (no -checklinkname=0 needed). -trimpath: no local paths in the binary,
	# and the build cache is shared between the stock and patched trees.
	local flags=(-trimpath -ldflags "-X $NERDCTL_MODULE/pkg/version.Version=$version -X $NERDCTL_MODULE/pkg/version.Revision=$head")
	want="$head $(go env GOVERSION) ${flags[*]}"
	if [[ -x $bin && $(cat "$out/.cfsb-built" 2>/dev/null) == "$want" ]] &&
		[[ -z $(git -C "$tree" status --porcelain) ]]; then
		log "$variant nerdctl is up to date"
		return 0
	fi
	rm -f "$out/.cfsb-built"
	mkdir -p "$out"
	log "building $variant nerdctl ($version, $(go env GOVERSION))"
	t0=$(now_s)
	(cd "$tree" && go build "${flags[@]}" -o "$bin" ./cmd/nerdctl)
	# A tree with uncommitted changes (--keep-tree) is rebuilt every time.
	[[ -z $(git -C "$tree" status --porcelain) ]] && echo "$want" >"$out/.cfsb-built"
	log "built in $(($(now_s) - t0)) s"
}

# --- checks ---------------------------------------------------------------
# count_results FILE: "N passed, N failed, N skipped" of a go test -v log,
# subtests included.
count_results() {
	local p f s
	p=$(grep -cE '^ *--- PASS: ' "$1" || true)
	f=$(grep -cE '^ *--- FAIL: ' "$1" || true)
	s=$(grep -cE '^ *--- SKIP: ' "$1" || true)
	echo "$p passed, $f failed, $s skipped"
}

# keep_log FILE NAME WHAT: a failed run's whole log, kept in the cache as
# NAME (the temporary one goes): a package can fail with no test named (a
# crash, a timeout, a runtime fatal error), which the excerpt may not show.
keep_log() {
	cp "$1" "$CFSB_CACHE/nerdctl/$2"
	log "$3 failed: its whole log is in $CFSB_CACHE/nerdctl/$2"
}

run_checks() {
	# status: gofmt, go vet and -race; tests_status: go test itself.
	local files pkgs=() testpkgs=() d bad status=0 tests_status=0 testlog
	mapfile -t files < <(git -C "$tree" diff --name-only --diff-filter=d cfsb-base -- '*.go')
	[[ ${#files[@]} -gt 0 ]] || die "the series changes no Go file"
	mapfile -t pkgs < <(for d in "${files[@]}"; do echo "./$(dirname "$d")"; done | sort -u)
	mapfile -t testpkgs < <(printf '%s\n' "${pkgs[@]}" | grep '^\./pkg/')
	cd "$tree"
	bad=$(gofmt -l "${files[@]}")
	if [[ -n $bad ]]; then
		log "gofmt: not formatted: $bad"
		status=1
	else
		log "gofmt: ${#files[@]} changed files formatted"
	fi
	if go vet "${pkgs[@]}"; then
		log "go vet (linux): clean: ${pkgs[*]}"
	else
		status=1
	fi
	# nerdctl also builds for FreeBSD and Windows: the series must too.
	for d in freebsd windows; do
		if GOOS=$d go vet "${testpkgs[@]}"; then
			log "go vet ($d): clean"
		else
			status=1
		fi
	done
	testlog=$(mktemp)
	log "go test -count=1 ${testpkgs[*]}"
	# pkg/logging's TestThroughput copies 32 MB through the logger in each
	# of the three modes: with VMs beside it on a 2-CPU host that took
	# more than go test's default 10 minutes (a timeout's panic, no test
	# failed). A hang still fails, later.
	if ! go test -count=1 -timeout 30m -v "${testpkgs[@]}" >"$testlog" 2>&1; then
		tests_status=1
		grep -E -B2 -A10 '^ *--- FAIL|^FAIL|panic:|^fatal error:' "$testlog" >&2 || tail -40 "$testlog" >&2
		keep_log "$testlog" go-test-failed.log "go test"
	fi
	grep -E '^(ok|FAIL|\?) ' "$testlog" >&2 || true
	grep -E 'cpu-charge=.*MB/s' "$testlog" | sed 's/^ *[a-z_]*\.go:[0-9]*: /  throughput: /' >&2 || true
	# The charger's goroutines share state: run its tests under the race
	# detector too (needs cgo, so gcc); as slow under load (4 min alone).
	if command -v gcc >/dev/null; then
		if CGO_ENABLED=1 go test -count=1 -timeout 30m -race ./pkg/cpucharge >"$testlog.race" 2>&1; then
			log "go test -race ./pkg/cpucharge: ok"
		else
			status=1
			tail -40 "$testlog.race" >&2
			keep_log "$testlog.race" go-test-race-failed.log "go test -race"
		fi
		rm -f "$testlog.race"
	fi
	cd - >/dev/null
	# The closing line is the counts of go test -v (subtests included).
	echo "nerdctl-patch: $(count_results "$testlog")"
	[[ -z $tap_file ]] || write_tap "$testlog" "$status" "$tests_status" >"$tap_file"
	rm -f "$testlog"
	return $((status | tests_status))
}

# write_tap LOG STATUS TESTS_STATUS: TAP of the go test -v log, and one
# line for the checks around it (gofmt, go vet, -race: STATUS is 0 if they
# passed); go test's own failure (TESTS_STATUS) when no test reported one,
# as when a package does not build.
write_tap() {
	local n=0 verdict name
	echo "TAP version 13"
	while read -r verdict name; do
		n=$((n + 1))
		case $verdict in
		PASS:) echo "ok $n $name" ;;
		SKIP:) echo "ok $n $name # SKIP" ;;
		*) echo "not ok $n $name" ;;
		esac
	done < <(sed -n 's/^ *--- \(PASS:\|FAIL:\|SKIP:\) \([^ ]*\).*/\1 \2/p' "$1")
	if [[ $3 -ne 0 ]] && ! grep -q '^ *--- FAIL: ' "$1"; then
		n=$((n + 1))
		echo "not ok $n go test (failed without a failing test: see the log above)"
	fi
	n=$((n + 1))
	if [[ $2 -eq 0 ]]; then
		echo "ok $n gofmt, go vet, go test -race"
	else
		echo "not ok $n gofmt, go vet or go test -race (see the log above)"
	fi
	echo "1..$n"
}

# --- export ---------------------------------------------------------------
cmd_export() {
	local ptree=$CFSB_CACHE/nerdctl/patched from scratch=$CFSB_CACHE/nerdctl/export src=$patch_dir/src
	local tmp commits patches ident
	from=${export_tree:-$ptree}
	[[ -d $from ]] || die "no patched tree at $from: run ${0##*/} first"
	[[ -z $(git -C "$from" status --porcelain) ]] || die "$from has uncommitted changes: commit them first"
	mapfile -t commits < <(git -C "$from" rev-list --reverse cfsb-base..HEAD)
	[[ ${#commits[@]} -gt 0 ]] || die "no commits on top of cfsb-base in $from"
	mapfile -t patches < <(series_files)
	sources_from_tree "$from" "$src" "${patches[@]}"
	# The commits again, each added file from its source.
	base_worktree "$repo" "$scratch"
	tree_reset_to_base "$scratch" clean
	ident=$(exporter_ident)
	REMAKE_IDENT=$ident remake_commits "$from" "$scratch" "$src" "${commits[@]}"
	tmp=$(mktemp -d)
	# --no-signature: the files do not depend on the git version.
	git -C "$scratch" format-patch -q --zero-commit --no-signature -o "$tmp" cfsb-base..HEAD
	mkdir -p "$patch_dir"
	rm -f "$patch_dir"/[0-9][0-9][0-9][0-9]-*.patch
	mv "$tmp"/*.patch "$patch_dir/"
	rmdir "$tmp"
	log "exported $(series_files | wc -l) patches to ${patch_dir#"$CFSB_ROOT"/}"
	check_sources "$patch_dir"
	# The patched tree's work is in the series now: it takes the series.
	if [[ $from -ef $ptree ]]; then
		mark_series_exported "$ptree"
		mapfile -t patches < <(series_files)
		prepare_series_tree "$repo" "$ptree" patched 0 clean "nerdctl $NERDCTL_VERSION" "${0##*/} export" "${patches[@]}"
	fi
}

if [[ $cmd == export ]]; then
	ensure_repo
	cmd_export
	exit 0
fi

start=$(now_s)
ensure_repo
mapfile -t patches < <(series_files)
# Built from the series: a source changed since the last export would be
# left out.
[[ $variant == stock || $keep_tree -eq 1 ]] || check_sources "$patch_dir"
prepare_series_tree "$repo" "$tree" "$variant" "$keep_tree" clean "nerdctl $NERDCTL_VERSION" \
	"${0##*/} export" "${patches[@]}"
build
status=0
if [[ $run_tests -eq 1 ]]; then
	run_checks || status=1
fi
log "done in $(($(now_s) - start)) s"
if [[ $print_binary -eq 1 ]]; then
	echo "$out/nerdctl"
else
	log "binary: $out/nerdctl"
fi
exit $status
