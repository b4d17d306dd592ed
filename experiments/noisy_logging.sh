#!/usr/bin/env bash
# The noisy-logging study: the reference paper's experiments 1 and 2 on the
# patched kernel (charging off, process and thread mode) and on the stock
# kernel, cgroup v1 and v2, in one run; then the report and the plots.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../scripts/lib.sh"

usage() {
	cat <<EOF
Usage: ${0##*/} [--quick | --full] [--cgroup v1|v2|both] [--modes LIST]
                [--exp2-modes LIST] [--parts LIST] [--exp2-n LIST] [--sysbench-burst]
                [--icount] [--out DIR] [--report-only]

Builds what is missing (the stock and the patched kernel, the patched
nerdctl, the images), then boots the kernels in QEMU (TCG, 4 vCPUs, the
containers, their logging processes, containerd and the benchmark pinned to
CPU 0) and runs experiments/noisy_logging_guest.sh there:

  1. the patched kernel, one VM per hierarchy, side by side (one host CPU
     each): experiment 1 (yes, lsmod loop, echo loop x quota 50/33/25/20 ms:
     the logging process's CPU A, the part charged B, the container's C),
     experiment 2 (N = 1..5 containers, quota 100/N ms: sysbench in one,
     cmd1..cmd4 in the others) and the logging throughput, with charging
     off (the stock behaviour), in process mode and in thread mode;
  2. the overhead: sysbench alone (N = 1) on the stock and the patched
     kernel, in two VMs at the same time; then the same with the guests'
     clocks counting instructions (QEMU -icount), which resolves a
     fraction of a per cent where the wall clock under emulation cannot.

Then experiments/noisy_logging_report.py writes DIR/report.md (the paper's
values and ours side by side), DIR/summary.json and DIR/plots/*.png. Raw
data: DIR/raw/<kernel>-<hierarchy>/ (CSV, meta.json, sysbench output).

Tiers:
  --quick  (default) a smoke test of the whole pipeline, about 10 minutes:
           yes and echo at quota 50 ms only, N = 1 and 2 with cmd1 and cmd2,
           2 sysbench runs of 3 s, 3 s windows after 2 s
  --full   the paper's: 30 s windows (after 10 s, when the logging process
           has paid for its own start), all quotas, N = 1..5 with
           cmd1..cmd4, 10 sysbench runs of 10 s: 2 h 23 min measured on
           a 2-CPU host with --exp2-modes off,process, an estimated
           3 h 05 min with thread mode in experiment 2 too

Options:
  --cgroup H     v1, v2 or both (default)
  --modes LIST   charging modes (default off,process,thread)
  --exp2-modes LIST
                 charging modes of experiment 2 (default: --modes); e.g.
                 off,process to leave out thread mode, whose charge is a few
                 per cent of the logging process's CPU (experiment 1 shows
                 it), from the longest experiment
  --parts LIST   what to measure (default exp1,exp2,throughput,overhead): a
                 comma-separated subset, e.g. exp2 alone
  --exp2-n LIST  experiment 2 for these N only (default: the tier's), e.g. 2
  --sysbench-burst
                 give sysbench's container a CFS burst (cpu.max.burst) equal
                 to its quota, so that quota it could not use in one period
                 (the logging processes held the CPU) is usable later
  --icount       experiments 1 and 2 on the instruction clock
                 (vm-run.sh --icount 0): a guest second is 10^9 instructions
                 while a vCPU runs, so that sysbench's events per CPU second
                 no longer depend on how fast the emulator runs the code the
                 other tasks leave it (a fork/exec loop slows it by 20 %)
  --out DIR      results directory inside the checkout (default: quick
                 results/noisy_logging/quick, full experiments/results/full)
  --report-only  only rewrite the report and plots from DIR/raw
EOF
}

tier=quick HIERARCHIES=(v2 v1) modes=off,process,thread exp2_modes="" out="" report_only=0
parts=exp1,exp2,throughput,overhead exp2_n="" exp2_opts=() icount=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--quick) tier=quick; shift ;;
	--full) tier=full; shift ;;
	--cgroup) hierarchies_arg "${2:-}"; shift 2 ;;
	--modes) modes=${2:?}; shift 2 ;;
	--exp2-modes) exp2_modes=${2:?}; shift 2 ;;
	--parts) parts=${2:?}; shift 2 ;;
	--exp2-n) exp2_n=${2:?}; shift 2 ;;
	--sysbench-burst) exp2_opts+=(--sysbench-burst); shift ;;
	--icount) icount=1; shift ;;
	--out) out=${2:?}; shift 2 ;;
	--report-only) report_only=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument '$1'" ;;
	esac
done
exp2_modes=${exp2_modes:-$modes}
for m in "$modes" "$exp2_modes"; do
	[[ $m =~ ^(off|process|thread)(,(off|process|thread))*$ ]] ||
		die "--modes and --exp2-modes take a comma-separated list of off, process, thread"
done
[[ $parts =~ ^(exp1|exp2|throughput|overhead)(,(exp1|exp2|throughput|overhead))*$ ]] ||
	die "--parts takes a comma-separated list of exp1, exp2, throughput, overhead"
if [[ -n $exp2_n ]]; then
	[[ $exp2_n =~ ^[1-9][0-9]?(,[1-9][0-9]?)*$ ]] || die "--exp2-n takes a comma-separated list of N (1..99)"
	exp2_opts+=(--exp2-n "$exp2_n")
fi
# guest_parts: the parts of the first phase, for the guest script.
guest_parts=$(tr , '\n' <<<"$parts" | grep -v '^overhead$' | paste -sd, || true)
# The full tier's results are kept with the project; a quick run's are not.
case $tier in
quick) out=${out:-$CFSB_ROOT/results/noisy_logging/quick} ;;
full) out=${out:-$CFSB_ROOT/experiments/results/full} ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
[[ $out == "$CFSB_ROOT"/* ]] || die "--out must be inside the checkout ($CFSB_ROOT): the guest writes there"

# The report needs matplotlib; Debian's, for Debian's python3.
REPORT_PYTHON=/usr/bin/python3
report() {
	log "writing the report"
	"$REPORT_PYTHON" "$CFSB_ROOT/experiments/noisy_logging_report.py" "$out"
}
ensure_packages python3 python3-matplotlib
if ((report_only)); then
	report
	exit 0
fi

ensure_packages "${CONTAINER_PACKAGES[@]}" jq
"$CFSB_ROOT/scripts/kernel-build.sh" --variant stock
"$CFSB_ROOT/scripts/kernel-build.sh" --variant patched
"$CFSB_ROOT/scripts/nerdctl-build.sh"
python3 "$CFSB_ROOT/scripts/build_images.py" "$CFSB_ROOT/.build/images" >/dev/null

rm -rf "$out/raw"
mkdir -p "$out/raw"
case $tier in quick) vm_timeout=1800 ;; full) vm_timeout=14400 ;; esac

# guest NAME KERNEL HIERARCHY ARGS...: start a VM in the background that
# runs the guest script into raw/NAME; its pid into GUEST_PIDS[NAME]. The
# VMs of a phase get a host CPU each (while there are enough), so that
# neither migrates onto the other's.
# VM_OPTS: more options for vm-run.sh (--icount).
declare -A GUEST_PIDS=()
VM_OPTS=()
guest() {
	local name=$1 kernel=$2 hier=$3 pin=()
	shift 3
	mkdir -p "$out/raw/$name"
	((${#GUEST_PIDS[@]} < $(nproc))) && pin=(--host-cpus "${#GUEST_PIDS[@]}")
	"$CFSB_ROOT/scripts/vm-run.sh" --kernel "$(kernel_image_path "$kernel" x86_64 default)" \
		--cgroup "$hier" --cpus 4 --mem 4G --timeout "$vm_timeout" "${pin[@]}" "${VM_OPTS[@]}" -- \
		"$CFSB_ROOT/experiments/noisy_logging_guest.sh" --out "$out/raw/$name" --tier "$tier" \
		--modes "$modes" "$@" >"$out/raw/$name/vm.log" 2>&1 &
	GUEST_PIDS[$name]=$!
}

# hms SECONDS: 1h02m03s.
hms() {
	local s=$1
	if ((s >= 3600)); then printf '%dh%02dm%02ds' $((s / 3600)) $((s % 3600 / 60)) $((s % 60)); else
		printf '%dm%02ds' $((s / 60)) $((s % 60)); fi
}

# wait_guests PHASE: wait for the VMs, showing each one's current cell,
# elapsed time and estimated remaining time (from the guest's progress
# file: seconds of planned work done and in all, at the host's pace since
# the phase began: on the instruction clock a guest second is no host
# second); fail if one failed.
wait_guests() {
	local phase=$1 name pid running status failed=() line=""
	local t0 now did total label eta
	t0=$(now_s)
	while :; do
		running=0 line="" now=$(now_s)
		for name in "${!GUEST_PIDS[@]}"; do
			label=""
			kill -0 "${GUEST_PIDS[$name]}" 2>/dev/null && running=$((running + 1))
			if read -r did total _ label 2>/dev/null <"$out/raw/$name/progress" && ((did > 0)); then
				eta="~$(hms $(((total - did) * (now - t0) / did)))"
			else
				eta="?" label=${label:-booting}
			fi
			line+="  [$name: ${label:-booting}, $eta left]"
		done
		if [[ -t 2 ]]; then
			printf '\r\033[K%s %s%s' "$phase" "$(hms $((now - t0)))" "$line" >&2
		elif (((now - t0) % 60 < 10)); then
			log "$phase $(hms $((now - t0)))$line"
		fi
		((running > 0)) || break
		sleep 10
	done
	[[ -t 2 ]] && echo >&2
	for name in "${!GUEST_PIDS[@]}"; do
		pid=${GUEST_PIDS[$name]}
		status=0
		wait "$pid" || status=$?
		if ((status != 0)); then
			failed+=("$name")
			log "$name failed (exit status $status); its output:"
			tail -20 "$out/raw/$name/vm.log" >&2
		fi
	done
	GUEST_PIDS=()
	[[ ${#failed[@]} -eq 0 ]] || die "$phase: failed in ${failed[*]} (logs in $out/raw/)"
}

started=$(now_s)
# The two hierarchies side by side: one host CPU each, no interference
# through the guest's scheduler. The result is ratios inside each VM.
if [[ -n $guest_parts ]]; then
	((icount)) && VM_OPTS=(--icount 0)
	for hier in "${HIERARCHIES[@]}"; do
		guest "patched-$hier" patched "$hier" --parts "$guest_parts" --exp2-modes "$exp2_modes" "${exp2_opts[@]}"
	done
	wait_guests "experiments"
	VM_OPTS=()
fi
# The stock and the patched kernel at the same time, under the same host
# load, for the overhead comparison: once on the wall clock, once on the
# instruction clock (vm-run.sh --icount 0), where sysbench's events/s count
# instructions, free of the emulation's speed and the host's load, which
# make wall-clock runs vary by some 5 %.
# overhead_pair SUFFIX PHASE [VM-RUN OPTION...]: sysbench alone on the stock
# and the patched kernel, raw/stock$SUFFIX-v2 and raw/overhead-patched$SUFFIX-v2.
overhead_pair() {
	local suffix=$1 phase=$2
	shift 2
	VM_OPTS=("$@")
	guest "stock$suffix-v2" stock v2 --parts sysbench1 --modes off
	guest "overhead-patched$suffix-v2" patched v2 --parts sysbench1 --modes off
	wait_guests "$phase"
	VM_OPTS=()
}
if [[ ,$parts, == *,overhead,* ]]; then
	overhead_pair "" "overhead"
	overhead_pair -icount "overhead on the instruction clock" --icount 0
fi
log "measured in $(hms $(($(now_s) - started)))"
echo "{\"tier\": \"$tier\", \"seconds\": $(($(now_s) - started)), \"host_cpus\": $(nproc), \"icount\": $( ((icount)) && echo true || echo false)}" >"$out/raw/run.json"
report
log "report: ${out#"$CFSB_ROOT"/}/report.md, plots: ${out#"$CFSB_ROOT"/}/plots/"
