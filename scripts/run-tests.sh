#!/usr/bin/env bash
# The project's test command: builds what it needs, then runs every test.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

# (The time of day in each step's line: the steps' times in a CI log.)
LOG_TIME_OF_DAY=1
usage() {
	cat <<EOF
Usage: ${0##*/} [--results DIR] [--skip-build] [--targets none|auto|all] [--thorough]
                    [--host-image] [--pi-image]

Runs every test of the project and ends with "N passed, N failed, N skipped":
  1. static checks: shellcheck, ruff (installed with pip, skipped where
     it cannot be); every entry point's
     --help and -h without side effects, and the guest-only scripts
     refusing to run on the host (scripts/check-entry-points.sh, in a
     sandbox; as root); for both series
     (kernel/patches on 6.12, kernel/patches-7.2 on mainline 7.2): that it
     applies, checkpatch --strict, its selftests patch against selftests/,
     the files it adds against kernel/src, its messages against
     kernel/messages;
     the kernel source's version (scripts/check-kernel-source.sh: the
     pin, the archive's newest of its major.minor once the pin is gone,
     CFSB_KERNEL_SOURCE_VERSION, the tree made again for another version;
     seconds, no network); the agent's cost table against its raw logs
     (experiments/agent_cost_report.py);
  2. builds the patched kernel (scripts/kernel-build.sh) and the selftests
     (selftests/Makefile); the stock kernel is Debian's own build of the
     same source version (linux-image-6.12.*-amd64, downloaded: the
     kernel users run; kernel-build.sh --variant debian), and with
     --thorough also the unpatched source built with the patched
     kernel's configuration (the study's baseline, and a second baseline
     for step 6);
  3. scripts/vm-run.sh itself: output and exit status pass through; in the
     guest, guest-init.sh run again refuses, and the guest-only scripts'
     check (scripts/guest-check.sh) knows the guest, with bash and with
     systemd as PID 1;
  4. with --thorough: the series patch by patch (scripts/kernel-series.sh
     build-each --if-changed: each patch builds without warnings and, from
     the KUnit patch on, passes KUnit; skipped for a series that passed
     before; 9 minutes of both CPUs from a cold cache here); in the
     patched kernel on cgroup v2: the KUnit suite, test_borrowing and
     the permission tests again without nsdelegate; on cgroup v1: the
     KUnit suite,
     test_borrowing, and some of its tests again with a cgroup2 mount
     listed before the cpu hierarchy (hybrid) and in a cpuset without
     CPU 0; on both, the stress test in its short version
     (100000 writes); on cgroup v2 with 4 vCPUs: test_borrowing; the
     KUnit suite on a 32-bit kernel (scripts/kernel-series.sh kunit-i386);
  5. the patched nerdctl (scripts/nerdctl-build.sh --tap): gofmt, go vet,
     its Go unit tests; the series' edit/export workflow
     (scripts/check-export.sh: a build keeps un-exported work, the series
     is generated from nerdctl-patch/src); then, in the guest with containerd: its integration
     tests (nerdctl-patch/tests/run-in-guest.sh) on cgroup v2 with runc
     (every section, a flood of 100000 lines), on v1 with crun, and with
     systemd as PID 1 and the systemd cgroup driver (v2, runc), the last
     two with the sections that depend on them only (the container's
     cgroup found and charged, removed mid-flood, a parent's quota, the
     escape attempts; with --thorough, every section everywhere and a
     flood of a million lines); on the stock kernel, that logging still
     works;
  6. the upstream test_cpu on the stock (Debian's; with --thorough the
     built one too) and the patched kernel (cgroup v2,
     on the instruction clock, where its 1% timing tolerances hold under
     emulation), and the check that every test passing on stock passes on
     patched (a test that fails on patched only is run up to five more
     times first).
     The upstream results are listed; the comparison is what counts.
  7. the tools (tools/): built with -Werror; cgborrow's and borrowd's
     argument and config errors on the host; on the host too, the scan for
     containerd's loggers with real processes (make -C tools check-scan:
     each found, an impostor not, each process's files read once per scan
     whatever the number of containers); in the guest, on the patched
     kernel (v2 and v1): cgborrow's charges, cpu.stat, cgset/cgget on the
     file, the kernel's errors and permissions; borrowd charging a busy
     worker's CPU time to its client (within 1 %), by hand and through
     Podman's metadata, the thread rule, --pace (on v1 the tests whose
     code reads the hierarchy or decides who pays; with --thorough all);
     with unchanged engines (v2), in 3 s windows, on the patched kernel
     and on the stock kernel (borrowd's quota mode: Podman; Docker and
     CRI there with --thorough), both on the
     instruction clock: conmon's CPU charged
     to its container (Podman), dockerd's and containerd's CRI plugin's by
     the thread rule (Docker; pods made by crictl,
     scripts/crictl-build.sh), two containers through one daemon charged
     alike per byte logged, a third party's work on the daemon not all
     charged to them (what is, reported); on the stock kernel (v2, and
     with --thorough v1 on the built one: Debian's has no full v1): the
     "kernel lacks the feature" errors, and borrowd's quota mode (its
     arithmetic on the host: make -C tools check): the client gets its
     quota less the worker's CPU, the quota restored on exit, after
     kill -9 (the watchdog) and by --resume, another party's write kept;
  8. with --thorough: the noisy-logging study in its quick tier
     (experiments/noisy_logging.sh --quick: the stock and the patched
     kernel, every charging mode, the overhead and the engines part, on
     the instruction clock, cgroup v2 and v1), checked end to end: every planned VM exited 0 and measured every cell, the report
     and the summary are what the raw data give, and the numbers' sanity
     (experiments/check_noisy_logging.py: B = A within the stated
     resolution in process mode and, with borrowd's round, in the agent
     modes (borrowd, kernel file or quota mode), off, incg and the stock
     kernel without borrowd charge
     nothing, ratios in (0, 1.2], charging better than off, no overhead
     regression at N = 1; the targets are reported only); always: that
     check on the kept full run (experiments/results/full: it must pass)
     and on damaged copies of it (experiments/test_check_noisy_logging.py:
     each must fail; seconds, no VM);
  9. the other targets, mainline 7.2 on x86_64 and 6.12 on arm64 (QEMU's
     virt machine, Cortex-A72): their stock and patched kernels, the 7.2
     series patch by patch, and in the guest the KUnit suite and
     test_borrowing on cgroup v2 and v1, on 7.2 the tools' guest tests
     (cgborrow, borrowd; v2), the upstream test_cpu on stock
     and patched (v2) on the instruction clock (on the wall clock, under
     emulation, 7.2's stock kernel fails test_cpucg_max in most runs).
     With --targets none (the default) they are not run. With
     --targets auto only the targets whose patched kernel is already built
     (rebuilt if its series changed). --targets all builds them first
     (from scratch, as measured on a loaded host: 7.2 30 minutes,
     arm64 37 and its root filesystem 7; each target's test_cpu about 10
     minutes per kernel); it implies --thorough. --targets all also
     builds both series as a kernel build robot would (scripts/kernel-series.sh
     robot: no bandwidth control, no fair group scheduling, no SMP, i386,
     arm64, W=1 and sparse; once per series and source version).
 10. with --host-image only: the patched kernel as a user installs it
     (scripts/host-image.sh): a Debian package built from Debian 12's
     configuration and Kconfig.fragment, installed into a Debian 12
     image that QEMU boots with its own initramfs and systemd, where the
     selftests and the container demo run (see docs/install.md for its
     times: the first run builds the kernel package).
 11. with --pi-image only: docs/raspberry-pi.md's kernel as the guide
     installs it on an SD card with a Debian 12 arm64 system, booted by
     QEMU's Raspberry Pi 3 B machine (scripts/pi-image.sh; the first run
     builds the guide's kernel, about an hour), where the KUnit suite and
     the selftests run.
--thorough: the series patch by patch (4.), every container section on
every hierarchy and a million-line flood (5.), borrowd's whole suite on
cgroup v1 and the engines Docker and CRI on the stock kernel (7.), the
study's quick tier on cgroup v2 and v1 (8.): about an hour more
(estimated from the parts' times: the study 17 minutes of VMs a
hierarchy, borrowd's tests that only v1 skips 2.5, Docker on the stock
kernel 3.5).
The VMs on the wall clock (3. to 7.) run one at a time: their timings are
the host's. Beside them, on the other host CPU, one job at a time (a
pool: icount-1.log, and icount-2.log after step 7, when a second worker
joins): what counts its time on the instruction clock (7.'s engines and
stock-kernel tools suites, 6., the i386 KUnit suite, each on one CPU,
and 8.'s study), the longest first (with --thorough, those that need
neither the patched kernel nor its tree while the series is built patch
by patch, then the static checks). What keeps no clock (1.'s static
checks and nerdctl's unit tests; with --thorough the latter only) runs
beside them at the lowest priority. Both start once the kernels, the
tools, nerdctl, crictl and the images are built (the last four beside
the kernel's build), as the wall clock's VMs do.
TAP output of every suite is kept in the results directory (default
results/tests).
EOF
}

results=$CFSB_ROOT/results/tests skip_build=0 targets=none thorough=0 host_image=0 pi_image=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--results) results=${2:?}; shift 2 ;;
	--skip-build) skip_build=1; shift ;;
	--targets) targets=${2:?}; shift 2 ;;
	--thorough) thorough=1; shift ;;
	--host-image) host_image=1; shift ;;
	--pi-image) pi_image=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument '$1'" ;;
	esac
done

# The guests write their results there, through the checkout's mount.
results=$(realpath -m "$results")
[[ $targets == none || $targets == auto || $targets == all ]] || die "--targets takes none, auto or all"
[[ $targets != all ]] || thorough=1
[[ $results == "$CFSB_ROOT"/* ]] || die "--results must be inside the checkout ($CFSB_ROOT): the guests write there"
t0=$(now_s)
rm -rf "$results"
mkdir -p "$results"

# --- 1. static checks -------------------------------------------------------
static_checks() {
	local out=$results/static.tap n=0 status=0
	check() {
		local name=$1
		shift
		n=$((n + 1))
		if "$@" >"$results/static-$n.log" 2>&1; then
			echo "ok $n $name"
		else
			echo "not ok $n $name"
			sed 's/^/# /' "$results/static-$n.log" | head -40
			status=1
		fi
	}
	{
		echo "TAP version 13"
		check "shellcheck scripts, selftests and experiments" \
			shellcheck -x "$CFSB_ROOT"/scripts/*.sh "$CFSB_ROOT"/selftests/*.sh \
			"$CFSB_ROOT"/nerdctl-patch/tests/*.sh "$CFSB_ROOT"/experiments/*.sh "$CFSB_ROOT/.ci/run" \
			"$CFSB_ROOT"/tools/tests/*.sh
		if command -v ruff >/dev/null; then
			check "ruff check and format" bash -c "ruff check '$CFSB_ROOT' && ruff format --check '$CFSB_ROOT'"
		else
			n=$((n + 1))
			echo "ok $n ruff check and format # SKIP ruff is not installed and pip could not install it"
		fi
		# table.md from raw/, and each earlier run's table-REV.md from raw-REV/.
		check "experiments/results/agent-cost's tables are what agent_cost_report.py makes of their raw logs" \
			bash -c "cd '$CFSB_ROOT/experiments/results/agent-cost' &&
			diff -u table.md <('$CFSB_ROOT/experiments/agent_cost_report.py' raw/*.log) &&
			for t in table-*.md; do
				r=\${t#table-}
				diff -u \"\$t\" <('$CFSB_ROOT/experiments/agent_cost_report.py' raw-\${r%.md}/*.log) || exit 1
			done"
		# The tools are userspace: volatile sig_atomic_t is right there,
		# the kernel's __printf() does not exist, and usage texts split.
		check "checkpatch --strict on the tools' C (but the kernel-only rules)" \
			"$(kernel_tree stock)/scripts/checkpatch.pl" --no-tree --strict -q \
			--ignore VOLATILE,PREFER_DEFINED_ATTRIBUTE_MACRO,SPLIT_STRING \
			-f "$CFSB_ROOT"/tools/*.[ch] "$CFSB_ROOT"/tools/tests/*.c
		local base
		for base in "${KERNEL_BASES[@]}"; do
			# (The 6.12 series applied when the stock tree was made.)
			[[ $base == 6.12 ]] ||
				check "the $base series applies to Linux $base" "$CFSB_ROOT/scripts/kernel-build.sh" \
					--base "$base" --variant patched --configure-only
			check "checkpatch --strict on the $base series" \
				"$CFSB_ROOT/scripts/kernel-series.sh" --base "$base" checkpatch
			check "the $base series' selftests patch matches selftests/" \
				"$CFSB_ROOT/scripts/kernel-series.sh" --base "$base" check-selftests
			check "the $base series adds the files of kernel/src as they are" \
				"$CFSB_ROOT/scripts/kernel-series.sh" --base "$base" check-sources
			check "the $base series' messages are kernel/messages' (one text where the series share one)" \
				"$CFSB_ROOT/scripts/kernel-series.sh" --base "$base" check-messages
		done
		check "checkpatch --strict on kernel/src" \
			"$(kernel_tree stock)/scripts/checkpatch.pl" --no-tree --strict -q \
			-f "$CFSB_ROOT"/kernel/src/kernel/sched/*.c
		check "the nerdctl series' new package matches nerdctl-patch/src" \
			"$CFSB_ROOT/scripts/nerdctl-build.sh" check-sources
		check "nerdctl-patch/src: gofmt and go vet where it stands" bash -c \
			"source '$CFSB_ROOT/scripts/lib.sh' && use_go && cd '$CFSB_ROOT/nerdctl-patch/src' &&
			[[ -z \$(gofmt -l .) ]] && go vet ./... && GOOS=freebsd go vet ./... && GOOS=windows go vet ./..."
		check "a Raspberry Pi 4 kernel configures with every option of Kconfig.fragment" \
			"$CFSB_ROOT/scripts/kernel-build.sh" --arch arm64 --config rpi4 --configure-only
		echo "1..$n"
	} | tee "$out"
	return $status
}

# The static checks run beside the pool (below): what they need is installed
# first, and the unpatched tree (checkpatch) is made with the patched one.
# The stock kernel the tests boot is Debian's own build of the same source
# version, the kernel users run (downloaded: seconds, where building it took
# 15 to 23 minutes of both CPUs on a fresh machine). --thorough builds it
# from the source too, with the patched kernel's configuration: the
# study's baseline (the overhead at N = 1 compares kernels that differ by
# the series only), and upstream's test_cpu on it, beside Debian's.
# Every package of the run in one apt-get call, before the builds that run
# beside the kernels' (below), where an install of theirs would find apt
# locked by the kernel source's.
log "packages; the stock kernel (Debian's)"
read -ra rpi4_packages <<<"$(arch_packages arm64)"
ensure_packages "${HOST_PACKAGES[@]}" "${rpi4_packages[@]}" "${CONTAINER_PACKAGES[@]}" \
	"${TOOLS_PACKAGES[@]}" "${ENGINE_PACKAGES[@]}" python3-matplotlib jq git coreutils
command -v ruff >/dev/null || python3 -m pip install -q ruff >/dev/null 2>&1 || log "cannot install ruff"
# (Downloaded, not built: with --skip-build too, where missing.)
stock_image=$("$CFSB_ROOT/scripts/kernel-build.sh" --variant debian --print-image)

# tools_build: a TAP line for the tools' build (-Werror: a warning fails
# it).
tools_build() {
	echo "TAP version 13"
	if make -s -C "$CFSB_ROOT/tools" >"$results/tools-build.log" 2>&1; then
		echo "ok 1 make -C tools (-Wall -Werror)"
	else
		echo "not ok 1 make -C tools (-Wall -Werror)"
		sed 's/^/# /' "$results/tools-build.log" | tail -40
	fi
	echo "1..1"
}
# What every VM needs but the kernels (no step builds anything a VM runs
# from here on, but the series patch by patch, which the patched kernel's
# VMs wait for): the tools, the images, crictl and nerdctl, stock and
# patched. Built beside the kernels: their downloads and one-CPU steps take
# what the kernel's build leaves (after it, on a fresh machine of
# 2026-12-06, they took 3.7 minutes).
vm_needs() {
	tools_build >"$results/tools-build.tap"
	python3 "$CFSB_ROOT/scripts/build_images.py" "$CFSB_ROOT/.build/images" >/dev/null
	"$CFSB_ROOT/scripts/crictl-build.sh"
	"$CFSB_ROOT/scripts/nerdctl-build.sh" --stock
	# (A series that does not build fails step 5's TAP, which builds it again.)
	"$CFSB_ROOT/scripts/nerdctl-build.sh" || true
}
log "tools, images, crictl, nerdctl: built beside the kernel (vm-needs.log)"
vm_needs >"$results/vm-needs.log" 2>&1 &
vm_needs_pid=$!
# (Not past the test command itself: a build that stops it stops them.)
trap 'kill "$vm_needs_pid" 2>/dev/null || true' EXIT

[[ $skip_build -eq 1 || $thorough -eq 0 ]] || "$CFSB_ROOT/scripts/kernel-build.sh" --variant stock
log "the kernel source's version"
"$CFSB_ROOT/scripts/check-kernel-source.sh" | tee "$results/kernel-source.tap" || true

# --- 2. builds --------------------------------------------------------------
if [[ $skip_build -eq 0 ]]; then
	"$CFSB_ROOT/scripts/kernel-build.sh" --variant patched
fi
built_stock_image=$(kernel_image_path stock x86_64 default)
patched_image=$(kernel_image_path patched x86_64 default)
make -s -C "$CFSB_ROOT/selftests" KSRC="$(kernel_tree stock)"
vm_needs_rc=0
wait "$vm_needs_pid" || vm_needs_rc=$?
trap - EXIT
cat "$results/vm-needs.log" "$results/tools-build.tap"
[[ $vm_needs_rc -eq 0 ]] || die "the tools, images, crictl or nerdctl did not build (exit $vm_needs_rc): above"
# The series' edit/export workflow (after the build: it needs the patched
# tree; it gives the tree the series back at its end). The binary is built
# again if that changed it, before a VM runs it.
"$CFSB_ROOT/scripts/check-export.sh" | tee "$results/export.tap" || true
"$CFSB_ROOT/scripts/nerdctl-build.sh" || true

# --- the instruction clock's VMs, beside the wall clock's ----------------
# Each VM runs single-threaded TCG: one host CPU. The wall clock's VMs run
# one at a time (their timings are the host's), so from here to the end of
# step 7 (step 1's entry points' checks, the vm-run.sh checks and every
# wall-clock VM) a worker runs the instruction clock's VMs and KUnit on
# i386 on the other CPU (a guest on that clock counts its time in
# instructions, whatever the host's load); when the wall clock's VMs are
# done a second worker joins. Each job runs once: the first worker to
# claim it runs it. (What keeps no clock: idle_worker, below.)
# The engines (patched kernel: borrowd's kernel mode; stock: its quota
# mode, from its --stats) and the stock kernel's tools suites (quota mode,
# v2 and v1) are on this clock because the quota mode's shares, its
# watchdog's second and the thread rule's evidence budget are timings.
# On the wall clock a single-threaded TCG guest runs its vCPUs in turns,
# and a daemon thread's run on one vCPU counts the other's turns too:
# dockerd's CPU per byte logged varied 25-fold between boots there (136
# to 3,327 ns), and the two containers' charges per byte by 0.61 to 1.27
# (x/y, 3 s windows); on this clock 0.95 to 1.04, as the engines' bounds
# were measured.
# engines_tap NAME ENGINES VM-RUN-ARG...: the engines test of ENGINES (a
# comma-separated list) into tools-NAME.tap.
engines_tap() {
	local out=$results/tools-$1.tap engines
	IFS=, read -ra engines <<<"$2"
	shift 2
	"$CFSB_ROOT/scripts/vm-run.sh" "$@" -- \
		tools/tests/engines-in-guest.sh --tap --seconds 3 "${engines[@]}" 2>&1 |
		grep -v 'level=' >"$out" || true
	grep -qE '^1\.\.[0-9]+$' "$out" ||
		echo "not ok 999 engines: the run ended early (the last lines it wrote: above)" >>"$out"
	! grep -q '^not ok' "$out" || tail -30 "$out"
}
# tools_stock HIERARCHY IMAGE: the stock kernel's tools suites.
# On cgroup v2 on Debian's kernel; on v1 with --thorough only, on the
# built one: Debian's 6.12 has no cpuset or memory v1 interface, so no
# v1 system runs on it (10 minutes of the instruction clock spared).
tools_stock() {
	"$CFSB_ROOT/scripts/vm-run.sh" --icount 0 --kernel "$2" --cgroup "$1" -- \
		tools/tests/run-in-guest.sh "$results/tools-stock-$1" cgborrow-stock borrowd-stock \
		>"$results/tools-stock-$1.log" 2>&1 || true
}
# (8. the noisy-logging study's quick tier, on this clock too; checked in
# step 8. On cgroup v2: the v1 VMs, 21 of its 50 min, with --thorough.)
study_hierarchies=v2
((thorough == 0)) || study_hierarchies=both
study_quick() {
	"$CFSB_ROOT/experiments/noisy_logging.sh" --quick --cgroup "$study_hierarchies" --no-build --vm-slots 1 \
		--out "$results/noisy_logging" >"$results/noisy_logging.log" 2>&1 ||
		tail -30 "$results/noisy_logging.log"
}
# The quota mode's engines: its charging is the same whatever the engine,
# and the patched kernel's run covers every engine's discovery and rule:
# Podman's (the process rule); with --thorough Docker's and CRI's too (the
# thread rule; Docker's took 3.5 of the run's 6 minutes on a fresh
# machine of 2026-12-06).
stock_engines=podman
((thorough == 0)) || stock_engines=podman,docker,cri
# An upstream test that passed on stock and failed on patched is run again
# (five times at most) before it counts as a regression: some have 1%
# timing tolerances that emulation misses, whatever the kernel, in about
# one run out of three (test_cpucg_stats: its hog sleeps for the CPU time
# it still needs and stops when it wakes, so a late wakeup under emulation
# overshoots the 2 s); a real regression fails every time.
# rerun_upstream STOCK_TAP[,STOCK_TAP] PATCHED_DIR VM-RUN-ARG... -- RUN-IN-GUEST-ARG...:
# run the patched kernel's test_cpu again while a test passes on a stock
# kernel only; prints the patched runs' TAP files, comma-separated, for
# --same-or-better.
rerun_upstream() {
	local stock_taps dir=$2 vm_args=() guest_args=() runs attempt regressed stock_tap
	IFS=, read -ra stock_taps <<<"$1"
	shift 2
	while [[ $1 != -- ]]; do vm_args+=("$1"); shift; done
	shift
	guest_args=("$@")
	runs=("$dir/test_cpu.tap")
	for attempt in 2 3 4 5 6; do
		regressed=$(for stock_tap in "${stock_taps[@]}"; do
			python3 "$CFSB_ROOT/scripts/tap_summary.py" --regressions "$stock_tap" "${runs[@]}" || true
		done | sort -u)
		[[ -z $regressed ]] && break
		log "upstream test(s) failing on patched only: $(echo "$regressed" | tr '\n' ' '); run $attempt"
		"$CFSB_ROOT/scripts/vm-run.sh" "${vm_args[@]}" --cgroup v2 -- \
			selftests/run-in-guest.sh "${guest_args[@]}" "$dir/run$attempt" test_cpu >&2 || true
		runs+=("$dir/run$attempt/test_cpu.tap")
	done
	(IFS=,; echo "${runs[*]}")
}
# The upstream test_cpu, stock and patched kernel (step 6): on the
# instruction clock, so in the pool.
# On the instruction clock, both kernels: on the wall clock the 1 % and
# 1 ms tolerances of test_cpucg_max, _nested and _stats miss under
# emulation in about one run of three on either kernel, more often when
# the host is busy; on this clock they passed on both. About 3.5 minutes
# a run. The stock kernel is Debian's; with --thorough the unpatched
# source with the patched kernel's configuration too, the comparison that
# differs by the series only (Debian's also differs by its configuration:
# a 250 Hz tick, modules).
upstream_stock_taps=("$results/stock-v2/test_cpu.tap")
((thorough == 0)) || upstream_stock_taps+=("$results/built-stock-v2/test_cpu.tap")
upstream_test_cpu() {
	"$CFSB_ROOT/scripts/vm-run.sh" --kernel "$stock_image" --cgroup v2 --icount 0 -- \
		selftests/run-in-guest.sh "$results/stock-v2" test_cpu || true
	if ((thorough)); then
		"$CFSB_ROOT/scripts/vm-run.sh" --kernel "$built_stock_image" --cgroup v2 --icount 0 -- \
			selftests/run-in-guest.sh "$results/built-stock-v2" test_cpu || true
	fi
	"$CFSB_ROOT/scripts/vm-run.sh" --kernel "$patched_image" --cgroup v2 --icount 0 -- \
		selftests/run-in-guest.sh "$results/patched-v2-icount" test_cpu || true
	rerun_upstream "$(IFS=,; echo "${upstream_stock_taps[*]}")" "$results/patched-v2-icount" \
		--kernel "$patched_image" --icount 0 -- >"$results/upstream-patched-runs"
}
# The KUnit suite on a 32-bit kernel (i386, no SMP; step 4): u64
# arithmetic that a size_t-wide helper would truncate there passes on
# x86_64. A pass or a failure, no timing: in the pool, its build on one
# CPU (beside a wall-clock VM).
kunit_i386() {
	if ! "$CFSB_ROOT/scripts/kernel-series.sh" kunit-i386 --jobs 1 >"$results/kunit-i386.tap" 2>"$results/kunit-i386.log"; then
		# At the cases' depth, which is what is counted: a build that failed
		# or a suite cut short fails even where every case printed passed.
		echo "    not ok 999 the i386 KUnit run failed: $(tail -1 "$results/kunit-i386.log")" >>"$results/kunit-i386.tap"
	fi
}
# nerdctl's unit tests (step 5; the build is done: the checks and the unit
# tests), on one CPU.
nerdctl_unit() {
	CFSB_GO_JOBS=1 "$CFSB_ROOT/scripts/nerdctl-build.sh" --tap "$results/nerdctl-unit.tap" >"$results/nerdctl-unit.log" 2>&1 || true
}
# icount_job NAME: one job; icount_jobs: their names. With --thorough,
# first those that need neither the patched kernel nor its tree, which run
# while the series is built patch by patch (the patched kernel's image is
# each patch's in turn); then, once it is done ($results/.patched-ready),
# the others. Without, all at once. The longest first, from a cold cache
# (in minutes on one CPU beside a VM, a fresh Intel Xeon machine of
# 2026-12-06: the engines on the patched kernel 9.1, the tools on the
# stock one 7.9, the i386 kernel's build and boot 7.7, test_cpu 5.4, the
# engines on the stock kernel 1.4), so that the two workers end together.
# With --thorough the static checks run in the pool, after the series patch by patch (one of them
# configures a kernel in the patched tree); without, beside the VMs at
# the lowest priority (idle_worker, below). The i386 build takes the
# kernel build lock, as the static checks' configurations do: the wall
# clock's side never waits for it.
if ((thorough)); then
	icount_jobs=(tools-stock-v1 tools-stock-v2 engines-stock)
	icount_patched_jobs=(static-checks study-quick kunit-i386 engines-patched test-cpu)
else
	icount_jobs=(engines-patched tools-stock-v2 kunit-i386 test-cpu engines-stock)
	icount_patched_jobs=()
fi
icount_job() {
	case $1 in
	study-quick) study_quick ;;
	engines-stock) engines_tap engines-stock "$stock_engines" --kernel "$stock_image" --cgroup v2 --icount 0 ;;
	engines-patched) engines_tap engines podman,docker,cri --kernel "$patched_image" --cgroup v2 --icount 0 ;;
	tools-stock-v2) tools_stock v2 "$stock_image" ;;
	tools-stock-v1) tools_stock v1 "$built_stock_image" ;;
	test-cpu) upstream_test_cpu ;;
	kunit-i386) kunit_i386 ;;
	nerdctl-unit) nerdctl_unit ;;
	static-checks) static_checks || true ;;
	esac
}
# timed_job NAME: icount_job NAME between the times it starts and ends.
timed_job() {
	echo "[$(date -u +%T)] $1"
	icount_job "$1"
	echo "[$(date -u +%T)] $1: done"
}
# icount_worker NAME: claims and runs jobs until none is left; its output
# in icount-NAME.log.
icount_worker() {
	local job
	for job in "${icount_jobs[@]}" "${icount_patched_jobs[@]}"; do
		if [[ " ${icount_patched_jobs[*]} " == *" $job "* ]]; then
			# (Not past the test command itself: it may have stopped.)
			until [[ -e $results/.patched-ready ]]; do
				kill -0 $$ 2>/dev/null || return 0
				sleep 2
			done
		fi
		mkdir "$results/.icount-job-$job" 2>/dev/null || continue
		timed_job "$job"
	done >"$results/icount-$1.log" 2>&1
}
# (A host with one CPU runs them after the wall clock's VMs.)
icount_worker_1=""
if [[ $(nproc) -ge 2 ]]; then
	log "the instruction clock's VMs: a worker from now on (icount-1.log)"
	icount_worker 1 &
	icount_worker_1=$!
fi
# Work that keeps no clock, nerdctl's unit tests and (without --thorough)
# the static checks, runs beside the VMs at the lowest priority: each VM
# keeps a CPU busy for 84 % of its time (borrowd's guest suite alone),
# and these take what the VMs leave, at their end the whole CPU. On a
# fresh machine of 2026-12-06 they took 5.5 and 3.2 minutes of one CPU,
# in the pool and on the wall clock's side.
idle_jobs=(nerdctl-unit)
((thorough)) || idle_jobs=(static-checks nerdctl-unit)
idle_worker() {
	local job
	renice -n 19 -p "$BASHPID" >/dev/null
	for job in "${idle_jobs[@]}"; do
		timed_job "$job"
	done >"$results/idle.log" 2>&1
}
log "${idle_jobs[*]}: beside the VMs at the lowest priority (idle.log)"
idle_worker &
idle_worker_pid=$!

# --- 4. the patched kernel, patch by patch ---------------------------------
# Every patch of the series builds without a warning and passes KUnit (once
# per series: a stamp records a series that passed). Before any other VM
# starts: the patched kernel's image is each patch's kernel in turn. With
# --thorough: from a cold cache, 9 minutes of both CPUs here (a thousand
# files include the header patch 2 changes, twice over), which a fresh
# machine's run cannot spare.
if ((thorough)); then
	log "the series patch by patch"
	{
		echo "TAP version 13"
		if "$CFSB_ROOT/scripts/kernel-series.sh" build-each --if-changed >"$results/build-each.log" 2>&1; then
			echo "ok 1 every patch builds without warnings and passes KUnit"
		else
			echo "not ok 1 every patch builds without warnings and passes KUnit"
			tail -20 "$results/build-each.log" | sed 's/^/# /'
		fi
		echo "1..1"
	} | tee "$results/build-each.tap"
	build_each_files=("$results/build-each.tap")
else
	rm -f "$results/build-each.tap"
	build_each_files=()
fi
# The patched kernel's image is the series' from here on.
touch "$results/.patched-ready"


# Every entry point's --help, and the guest-only scripts' refusal, in a
# sandbox (a TAP file of its own: each entry point counts).
log "entry points: --help and the guest-only scripts' refusal"
"$CFSB_ROOT/scripts/check-entry-points.sh" | tee "$results/entry-points.tap" || true

# --- 3. vm-run.sh itself ----------------------------------------------------
# vm ARG...: vm-run.sh with the patched kernel; its output (stdout and
# stderr) in $out, its exit status in $rc.
vm() { out=$("$CFSB_ROOT/scripts/vm-run.sh" --kernel "$patched_image" "$@" 2>&1) && rc=0 || rc=$?; }
# expect N NAME CONDITION: a TAP line for CONDITION (bash, on $out and $rc).
expect() {
	if eval "$3"; then echo "ok $1 $2"; else echo "not ok $1 $2 (exit $rc: ${out:0:300})"; fi
}
# shellcheck disable=SC2016 # the conditions and guest commands expand later
vm_run_checks() {
	local out rc want=$'out\nerr'
	echo "TAP version 13"
	vm -- bash -c 'printf "out\n"; printf "err\n" >&2; exit 7'
	expect 1 "exit status passes through" '[[ $rc -eq 7 ]]'
	expect 2 "output streams byte for byte" '[[ $out == "$want" ]]'
	vm --cgroup v1 --cpus 1 -- \
		bash -c 'test "$(nproc)" = 1 && test -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us && touch /tmp/x && pwd'
	expect 3 "--cgroup v1 --cpus 1, checkout at its path" '[[ $rc -eq 0 && $out == "$CFSB_ROOT" ]]'
	vm -- bash -c 'echo c > /proc/sysrq-trigger'
	expect 4 "a guest crash fails the run" '[[ $rc -ne 0 && $out == *"Kernel panic"* ]]'
	vm --timeout 20 -- sleep 600
	expect 5 "a hung guest times out" '[[ $rc -ne 0 && $out == *"timed out after 20 s"* ]]'
	# In the guest, with the kernel's CFSB_* in its environment, as root:
	# not PID 1, it must do nothing (it powered the guest off).
	vm -- bash -c 'scripts/guest-init.sh; echo "exit $?"; mountpoint -q /var/lib && echo alive'
	expect 6 "guest-init.sh run again in the guest refuses (not PID 1); the guest runs on" \
		'[[ $rc -eq 0 && $out == *"refusing to run: not PID 1"* && $out == *"exit 3"* && $out == *alive ]]'
	local init num=7
	for init in bash systemd; do
		vm --init "$init" -- bash -c 'source scripts/guest-check.sh && cfsb_in_guest && echo guest'
		expect "$num" "the guest-only scripts' check knows the guest (--init $init)" '[[ $rc -eq 0 && $out == guest ]]'
		num=$((num + 1))
	done
	echo "1..8"
}
log "scripts/vm-run.sh checks"
vm_run_checks | tee "$results/vm-run.tap"

# --- 4. the patched kernel, in the guest ----------------------------------
for cg in v2 v1; do
	suites=(kunit borrowing stress)
	# v2: the permission tests without nsdelegate (upstream's cpu tests:
	# step 6, on the instruction clock); v1: the tests with a cgroup2 mount
	# beside the cpu hierarchy (hybrid) and in a cpuset without CPU 0.
	if [[ $cg == v2 ]]; then suites+=(no-nsdelegate); else suites+=(hybrid cpuset); fi
	log "patched kernel, cgroup $cg: ${suites[*]}"
	"$CFSB_ROOT/scripts/vm-run.sh" --kernel "$patched_image" --cgroup "$cg" -- \
		selftests/run-in-guest.sh "$results/patched-$cg" "${suites[@]}" || true
done
# The floor is per busy CPU: the same tests on 4 vCPUs, one thread per CPU.
log "patched kernel, cgroup v2, 4 vCPUs: borrowing"
"$CFSB_ROOT/scripts/vm-run.sh" --kernel "$patched_image" --cgroup v2 --cpus 4 -- \
	selftests/run-in-guest.sh "$results/patched-v2-4cpus" borrowing || true

# --- 5. the patched nerdctl ------------------------------------------------
containers() {
	local name=$1
	local out=$results/containers-$name.tap
	shift
	log "containers: $name"
	# About 11 minutes a run with every section on an idle host under TCG
	# (30 with the systemd driver on a loaded one); the sections' times are
	# "# info:" lines.
	"$CFSB_ROOT/scripts/vm-run.sh" --timeout 2400 "$@" 2>&1 | tee "$out" || true
	# A run that did not get to its plan line (a crash, a hang) fails.
	grep -qE '^1\.\.[0-9]+$' "$out" ||
		echo "not ok 999 containers $name: the run ended early (see above)" | tee -a "$out"
}
# Every section on v2 with runc. On v1 with crun and with the systemd
# driver, the sections that depend on the hierarchy, the runtime or the
# driver: finding the container's cgroup and charging it, its removal
# mid-flood, a parent's quota and the escape attempts (the others exercise
# the logger's own data path, the same everywhere, and took 6 to 11 min
# a run there). The flood byte for byte: 100000 lines (a million took
# 5 min a mode under emulation). --thorough: every section everywhere,
# a million lines.
same_everywhere=(--only "charge,vanish,parent,escape")
flood_lines=(--flood-lines 100000) v2_skip=(--skip throughput)
((thorough == 0)) || same_everywhere=() flood_lines=() v2_skip=()
# (The throughput section is a measurement, no check: with --thorough.)
containers v2-runc --kernel "$patched_image" --cgroup v2 -- nerdctl-patch/tests/run-in-guest.sh \
	"${flood_lines[@]}" "${v2_skip[@]}"
containers v1-crun --kernel "$patched_image" --cgroup v1 -- nerdctl-patch/tests/run-in-guest.sh \
	--runtime crun "${same_everywhere[@]}"
containers v2-systemd --kernel "$patched_image" --cgroup v2 --init systemd -- \
	nerdctl-patch/tests/run-in-guest.sh --cgroup-manager systemd "${same_everywhere[@]}"
containers stock-v2 --kernel "$stock_image" --cgroup v2 -- nerdctl-patch/tests/run-in-guest.sh --stock-kernel

# --- 7. the tools --------------------------------------------------------
# (Built before step 5, with -Werror.)
log "tools: host tests"
"$CFSB_ROOT/tools/tests/cgborrow.sh" host >"$results/tools-host.tap" 2>&1 || true
"$CFSB_ROOT/tools/tests/borrowd.sh" host >"$results/tools-host-borrowd.tap" 2>&1 || true
make -s -C "$CFSB_ROOT/tools" check >"$results/tools-quota-unit.tap" 2>&1 || true
make -s -C "$CFSB_ROOT/tools" check-scan >"$results/tools-scan-unit.tap" 2>&1 || true
# On v1 borrowd's tests whose code reads the hierarchy (its groups, charge
# files, quotas, pods) or decides who pays; with --thorough all of them
# (the others run the same code on v2: 2.5 of its 5 minutes on v1).
log "tools: patched kernel, cgroup v2 and v1"
v1_borrowd=borrowd-hierarchy
((thorough == 0)) || v1_borrowd=borrowd
for cg in v2 v1; do
	suites=(cgborrow borrowd)
	[[ $cg == v2 ]] || suites=(cgborrow "$v1_borrowd")
	"$CFSB_ROOT/scripts/vm-run.sh" --kernel "$patched_image" --cgroup "$cg" -- \
		tools/tests/run-in-guest.sh "$results/tools-patched-$cg" "${suites[@]}" || true
done
log "the instruction clock's VMs: a second worker (icount-2.log), then both to their end"
icount_worker 2
[[ -z $icount_worker_1 ]] || wait "$icount_worker_1"
cat "$results"/icount-*.log
wait "$idle_worker_pid"
cat "$results/idle.log"

# --- 8. the noisy-logging study, quick tier: the pipeline end to end ------
# (--thorough: 17 minutes of VMs a hierarchy, which a fresh machine's run
# cannot spare; scripts/demo.sh runs it too.)
study_files=()
if ((thorough)); then
	log "experiments/noisy_logging.sh --quick (run by the workers above): its check"
	python3 "$CFSB_ROOT/experiments/check_noisy_logging.py" "$results/noisy_logging" |
		tee "$results/noisy_logging.tap" || true
	study_files=("$results/noisy_logging.tap")
fi
# The check itself: it passes on the kept full run and fails on each kind
# of damage to a copy of it (a few seconds, no VM).
log "experiments/test_check_noisy_logging.py: the study's check on the kept run and damaged copies"
python3 "$CFSB_ROOT/experiments/test_check_noisy_logging.py" | tee "$results/study-check.tap" || true

# --- 9. the other targets ----------------------------------------------
# target_tests BASE ARCH: the kernel tests of one more target, into
# $results/target-BASE-ARCH; adds its TAP files to target_summary_files
# and the upstream test's comparison to target_summary_opts.
target_summary_opts=() target_summary_files=()
target_tests() {
	local base=$1 arch=$2 dir=$results/target-$1-$2 stock patched bin cg cross
	mkdir -p "$dir"
	(
		select_kernel_base "$base"
		build() { "$CFSB_ROOT/scripts/kernel-build.sh" --base "$base" --arch "$arch" "$@"; }
		if [[ $targets == auto && ! -f $(kernel_image_path patched "$arch" default) ]]; then
			log "target $base $arch: not built here, skipped (scripts/run-tests.sh --targets all builds it)"
			exit 0
		fi
		{
			echo "TAP version 13"
			if build --variant stock >"$dir/build.log" 2>&1 &&
				build --variant patched >>"$dir/build.log" 2>&1; then
				echo "ok 1 target $base $arch: the stock and the patched kernel build"
			else
				echo "not ok 1 target $base $arch: the stock and the patched kernel build"
				tail -20 "$dir/build.log" | sed 's/^/# /'
			fi
			echo "1..1"
		} >"$dir/build.tap"
		grep -q '^ok' "$dir/build.tap" || exit 0
		if [[ $arch == x86_64 && $base != 6.12 ]]; then
			{
				echo "TAP version 13"
				if "$CFSB_ROOT/scripts/kernel-series.sh" --base "$base" build-each --if-changed \
					>"$dir/build-each.log" 2>&1; then
					echo "ok 1 the $base series: every patch builds without warnings and passes KUnit"
				else
					echo "not ok 1 the $base series: every patch builds without warnings and passes KUnit"
					tail -20 "$dir/build-each.log" | sed 's/^/# /'
				fi
				echo "1..1"
			} >"$dir/build-each.tap"
		fi
		stock=$(kernel_image_path stock "$arch" default)
		patched=$(kernel_image_path patched "$arch" default)
		bin=$CFSB_ROOT/.build/selftests-$base-$arch
		cross=$(arch_cross_compile "$arch")
		make -s -C "$CFSB_ROOT/selftests" KSRC="$(kernel_tree stock)" OUT="$bin" CC="${cross}gcc"
		for cg in v2 v1; do
			log "target $base $arch, patched kernel, cgroup $cg: kunit borrowing"
			"$CFSB_ROOT/scripts/vm-run.sh" --arch "$arch" --kernel "$patched" --cgroup "$cg" -- \
				selftests/run-in-guest.sh --bin "$bin" "$dir/patched-$cg" kunit borrowing || true
		done
		# The tools (built for the host, step 7) on this kernel: borrowd's
		# BPF programs read tracepoint records whose layout moves between
		# releases.
		if [[ $arch == x86_64 ]]; then
			log "target $base $arch, patched kernel, cgroup v2: cgborrow borrowd"
			"$CFSB_ROOT/scripts/vm-run.sh" --kernel "$patched" --cgroup v2 -- \
				tools/tests/run-in-guest.sh "$dir/tools-patched-v2" cgborrow borrowd || true
		fi
		# The upstream test_cpu on the instruction clock: on the wall clock
		# its 1 ms quota tests (test_cpucg_max, _nested) fail on 7.2's stock
		# kernel in most runs under emulation; on this clock both kernels
		# passed them. About 10 minutes a run.
		log "target $base $arch, stock and patched kernel, cgroup v2, instruction clock: test_cpu"
		"$CFSB_ROOT/scripts/vm-run.sh" --arch "$arch" --kernel "$stock" --cgroup v2 --icount 0 -- \
			selftests/run-in-guest.sh --bin "$bin" "$dir/stock-v2" test_cpu || true
		"$CFSB_ROOT/scripts/vm-run.sh" --arch "$arch" --kernel "$patched" --cgroup v2 --icount 0 -- \
			selftests/run-in-guest.sh --bin "$bin" "$dir/patched-v2-icount" test_cpu || true
		rerun_upstream "$dir/stock-v2/test_cpu.tap" "$dir/patched-v2-icount" --arch "$arch" \
			--kernel "$patched" --icount 0 -- --bin "$bin" >"$dir/patched-runs"
	) || printf 'TAP version 13\nnot ok 1 target %s %s: the tests stopped early\n1..1\n' \
		"$base" "$arch" >"$dir/stopped.tap"
	[[ -f $dir/stopped.tap ]] && target_summary_files+=("$dir/stopped.tap")
	[[ -f $dir/build.tap ]] || return 0
	target_summary_files+=("$dir/build.tap")
	[[ -f $dir/build-each.tap ]] && target_summary_files+=("$dir/build-each.tap")
	[[ $arch == x86_64 ]] &&
		target_summary_files+=("$dir/tools-patched-v2/cgborrow.tap" "$dir/tools-patched-v2/borrowd.tap")
	[[ -f $dir/patched-runs ]] || return 0
	target_summary_opts+=(--info "$dir/stock-v2/test_cpu.tap" --info "$dir/patched-v2-icount/test_cpu.tap"
		--same-or-better "$dir/stock-v2/test_cpu.tap" "$(cat "$dir/patched-runs")")
	for cg in v2 v1; do
		target_summary_files+=("$dir/patched-$cg/kunit.tap" "$dir/patched-$cg/borrowing.tap")
	done
}
if [[ $targets != none ]]; then
	target_tests 7.2 x86_64
	target_tests 6.12 arm64
fi
# Both series as a kernel build robot builds them (a stamp skips a series
# that passed on the same source).
if [[ $targets == all ]]; then
	for base in 6.12 7.2; do
		log "the $base series in a kernel build robot's configurations"
		"$CFSB_ROOT/scripts/kernel-series.sh" --base "$base" robot --if-changed \
			>"$results/robot-$base.tap" 2>"$results/robot-$base.log" || true
		target_summary_files+=("$results/robot-$base.tap")
	done
fi

# --- 10. and 11. the kernel in a disk image, as a user installs it -------------
# image_test NAME WHAT: scripts/NAME.sh's whole run, one result.
image_files=()
image_test() {
	local name=$1 what=$2
	log "$what (scripts/$name.sh)"
	{
		echo "TAP version 13"
		if "$CFSB_ROOT/scripts/$name.sh" --results "$results/$name" >"$results/$name.log" 2>&1; then
			echo "ok 1 $what"
		else
			echo "not ok 1 $what"
			tail -20 "$results/$name.log" | sed 's/^/# /'
		fi
		echo "1..1"
	} >"$results/$name.tap"
	image_files+=("$results/$name.tap")
}
((host_image == 0)) ||
	image_test host-image "the kernel package from Debian's configuration boots a Debian 12 image; its selftests and the container demo pass there"
((pi_image == 0)) ||
	image_test pi-image "the Raspberry Pi guide's kernel, installed on an SD card as the guide says, boots QEMU's raspi3b; KUnit and the selftests pass there"

log "all tests ran in $(($(now_s) - t0)) s"
echo
tools_stock_v1_files=()
((thorough == 0)) || tools_stock_v1_files=("$results"/tools-stock-v1/{cgborrow,borrowd}-stock.tap)
upstream_summary_opts=()
for tap in "${upstream_stock_taps[@]}"; do
	upstream_summary_opts+=(--info "$tap"
		--same-or-better "$tap" "$(cat "$results/upstream-patched-runs" 2>/dev/null)")
done
python3 "$CFSB_ROOT/scripts/tap_summary.py" \
	"${upstream_summary_opts[@]}" --info "$results/patched-v2-icount/test_cpu.tap" \
	"${target_summary_opts[@]}" \
	"$results/static.tap" "$results/kernel-source.tap" "$results/entry-points.tap" "$results/vm-run.tap" \
	"$results/patched-v2/kunit.tap" "$results/patched-v2/borrowing.tap" \
	"$results/patched-v1/kunit.tap" "$results/patched-v1/borrowing.tap" \
	"$results/patched-v2/stress.tap" "$results/patched-v1/stress.tap" \
	"${build_each_files[@]}" "$results/kunit-i386.tap" "$results/patched-v2-4cpus/borrowing.tap" \
	"$results/nerdctl-unit.tap" "$results/export.tap" "$results"/containers-*.tap \
	"$results/tools-build.tap" "$results/tools-host.tap" "$results/tools-host-borrowd.tap" \
	"$results/tools-quota-unit.tap" "$results/tools-scan-unit.tap" \
	"$results"/tools-patched-v{2,1}/{cgborrow,borrowd}.tap \
	"$results"/tools-stock-v2/{cgborrow,borrowd}-stock.tap "${tools_stock_v1_files[@]}" \
	"$results/tools-engines.tap" \
	"$results/tools-engines-stock.tap" \
	"${study_files[@]}" "$results/study-check.tap" "${target_summary_files[@]}" \
	"${image_files[@]}"
