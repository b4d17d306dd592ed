#!/usr/bin/env bash
# The noisy-logging study: the reference paper's experiments 1 and 2 on the
# patched kernel (every charging mode, the logging process moved into its
# container's cgroup, and stock nerdctl's logging process charged by
# borrowd through the kernel's file and through CFS quotas) and on the
# stock kernel with stock nerdctl (nothing charged, and charged by borrowd
# through CFS quotas), cgroup v1 and v2, repeated across boots; the kernel
# overhead; unchanged engines with borrowd; then the report and the plots.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../scripts/lib.sh"

usage() {
	cat <<EOF
Usage: ${0##*/} [--quick | --full] [--cgroup v1|v2|both] [--modes LIST]
                [--exp2-modes LIST] [--stock-modes LIST] [--parts LIST]
                [--exp2-n LIST] [--exp1-cmds LIST] [--exp1-quotas LIST]
                [--boots N] [--overhead-boots N]
                [--engines LIST] [--wall-clock] [--sysbench-burst] [--out DIR]
                [--borrowd PATH] [--resume] [--report-only] [--estimate]
                [--no-build] [--vm-slots N]

Builds what is missing (the stock and the patched kernel with their modules,
the patched and the stock nerdctl, the tools, the images), then boots the
kernels in QEMU (TCG, 4 vCPUs, the containers, their logging processes,
containerd and the benchmark pinned to CPU 0), two VMs at a time on one host
CPU each, and measures there:

  exp1, exp2, throughput  per boot and hierarchy, one VM of the patched
      kernel with the patched nerdctl in every mode (off: nothing charged,
      the series unused; process; thread; incg: nothing charged, the logging
      process moved into its container's cgroup; agent: stock nerdctl's
      logging process charged by borrowd, which uses the kernel's file;
      agent-quota: the same with borrowd's quota mode forced, the container's
      CFS quota lowered instead), and one VM of the stock kernel with stock
      nerdctl 1.7.7 (off, the baseline; agent: borrowd, in its quota mode
      there). The agent modes always run stock nerdctl (borrowd leaves the
      patched logger, which charges itself, alone). Experiment 1: yes,
      an lsmod loop, an echo loop x quota 50/33/25/20 ms: the logging
      process's CPU A, the part charged B, the container's C. Experiment 2:
      N = 1..5 containers, quota 100/N ms, sysbench in one, cmd1..cmd4 in
      the others, each mode's cmd1 baseline measured before its cells. The
      logging throughput (patched kernel). --boots repeats these VMs in
      fresh boots: the error bars are across boots;
  overhead  sysbench alone (N = 1) on the stock and the patched kernel in
      --overhead-boots more boots each (cgroup v2); the report pools them
      with the experiments' N = 1 cells;
  engines   the patched kernel (v2) with unchanged engines and borrowd
      (tools/tests/engines-in-guest.sh): Podman/conmon, stock nerdctl,
      dockerd and containerd's CRI plugin (pods made by crictl) flooding a
      50 ms quota, without and with borrowd, a sysbench neighbour next to
      each.

Every part runs on the instruction clock (vm-run.sh --icount 0: a guest
second is 10^9 instructions while a vCPU runs), unless --wall-clock. Then
experiments/noisy_logging_report.py writes DIR/report.md, DIR/summary.json and
DIR/plots/*.png from every run under DIR/raw. A run replaces only
DIR/raw/<parts>.<clock>/, so parts run separately merge into one report (the
same part run twice counts as more boots).

Tiers:
  --quick  (default) a smoke test of every part and mode, the test command's:
           yes at quota 50 ms; N = 1 and 2 with cmd1 and cmd2, 2 sysbench
           runs of 1 s; one boot per VM; one overhead boot per kernel;
           the engines part with stock nerdctl alone, for 2 s
  --full   the cells the targets judge in 3 boots, the paper's other
           commands in 1, sized to fit 150 min on a 2-CPU host whose
           emulator runs a busy guest second in about 5.6 s (windows shorter
           than the paper's 30 s and 10 x 10 s: 3 s after 2 s, experiment 1's
           from one period's start to another's, its B/A from edges at a
           random point of the period after each; one sysbench
           run of 2 s per cell and boot: runs on the instruction clock agree
           to 0.01 %, boots to 0.2 %). The headline VMs (--boots 3):
           experiment 1 with yes at 50 and 20 ms in every mode; experiment
           2 at N = 1 and 2 with cmd1 and cmd2 and the N = 2 headroom cell
           (cmd2, the quotas adding up to 80 ms) in off, process and incg
           (the stock kernel: off and borrowd, its quota mode). The grid
           VMs (--grid-boots 1): lsmod and echo at 50 and 20 ms (off,
           process), N = 5 with cmd1..cmd4 (off, process, incg; the stock
           kernel off). Left out: the quotas of 33 and 25 ms (between 50
           and 20 ms), N = 3 and 4 (between 2 and 5), lsmod and echo at
           N = 2. 3 overhead boots per kernel; the engines part in 2 boots
           of 4 s, borrowd pacing the workers (--pace) as a third mode;
           --estimate says how long on this machine

Every boot shuffles the order of the modes (a seed of its own, from the
host, in meta.json and vm.json); raw/<run>/run.json records what the run
measured with (commit, series, kernel images and configurations, binaries,
QEMU, host CPU, packages) and whether a --resume made it span commits.

Options:
  --cgroup H     v1, v2 or both (default)
  --modes LIST   the patched kernel's modes, in every VM (default: quick
                 off,process,thread,incg,agent,agent-quota; full: the
                 headline VMs off,process,thread,incg,agent, the grid VMs
                 off,process)
  --exp2-modes LIST  experiment 2's modes (default: quick --modes; full
                 off,process,incg)
  --stock-modes LIST  the stock kernel's modes, experiments 1 and 2 (default
                 off,agent, the full tier's grid VMs off; off, incg, agent,
                 agent-quota: the stock kernel has no file, its agent is the
                 quota mode)
  --parts LIST   a comma-separated subset of exp1,exp2,throughput,overhead,
                 engines (default: all)
  --exp2-n LIST  experiment 2 for these N only (default: the tier's), e.g. 2
  --exp2-cmds LIST  experiment 2 with these commands only (cmd1..cmd4;
                 default: the tier's), e.g. cmd1,cmd2
  --exp1-cmds LIST, --exp1-quotas LIST
                 experiment 1 for these commands (yes, lsmod, echo) and quotas
                 (ms per 100 ms) only (default: the tier's), e.g. 50,20
  --boots N      boots per VM of exp1, exp2, throughput (default: the tier's)
  --overhead-boots N  boots per kernel of the overhead part (default: the tier's)
  --grid-boots N the full tier's boots of the grid beyond the headline cells
                 (default 1)
  --engine-boots N  boots of the engines part (default: quick 1, full 2)
  --engines LIST the engines part's engines (default: quick nerdctl, full
                 podman,nerdctl,docker,cri)
  --wall-clock   QEMU's usual clock (a guest second is a host second)
  --sysbench-burst
                 give sysbench's container a CFS burst (cpu.max.burst) equal
                 to its quota
  --out DIR      results directory inside the checkout (default: quick
                 results/noisy_logging/quick, full experiments/results/full)
  --resume       run again only this plan's VMs that did not finish (no
                 host.json, or a non-zero exit) under DIR/raw/<parts>.<clock>/,
                 keeping the others: a VM lost to the host costs its own time,
                 not the run's. run.json's seconds add up every invocation
                 (an invocation that failed: from its first VM's start to its
                 last VM's end, from the files' times)
  --report-only  only rewrite the report and plots from DIR/raw
  --estimate     print how long this run would take, from its VMs' planned
                 guest seconds and the pace of every VM this machine has
                 run (or, with none, of those under DIR/raw, or else of
                 the full tier's kept run, which may come from a faster or
                 slower machine) (host seconds per planned second, seconds
                 to boot), two VMs at a time; and exit
  --borrowd PATH the borrowd binary of the agent modes (default: make -C tools,
                 .build/tools/borrowd), inside the checkout (the guest sees
                 it there): e.g. one built from a commit with make OUT=DIR
  --no-build     boot the kernels as they are built (no
                 scripts/kernel-build.sh: it fails if one is missing), and
                 build nerdctl only where its binary is missing
  --vm-slots N   VMs at a time (default: 2, one per host CPU; 1 on a
                 host with one): 1 leaves a CPU to other work (on the
                 instruction clock the results do not depend on it)
EOF
}

tier=quick HIERARCHIES=(v2 v1) modes="" modes_given=0 exp2_modes="" out=""
report_only=0 resume=0 stock_modes="" no_build=0 borrowd="" vm_slots=2
parts=exp1,exp2,throughput,overhead,engines exp2_n="" exp2_cmds="" exp1_cmds="" exp1_quotas="" exp_opts=() wall=0
boots="" ov_boots="" grid_boots="" engine_boots=""
engines_arg="" estimate=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--quick) tier=quick; shift ;;
	--full) tier=full; shift ;;
	--cgroup) hierarchies_arg "${2:-}"; shift 2 ;;
	--modes) modes=${2:?} modes_given=1; shift 2 ;;
	--exp2-modes) exp2_modes=${2:?}; shift 2 ;;
	--stock-modes) stock_modes=${2:?}; shift 2 ;;
	--no-build) no_build=1; shift ;;
	--borrowd) borrowd=${2:?}; shift 2 ;;
	--parts) parts=${2:?}; shift 2 ;;
	--exp2-n) exp2_n=${2:?}; shift 2 ;;
	--exp2-cmds) exp2_cmds=${2:?}; shift 2 ;;
	--exp1-cmds) exp1_cmds=${2:?}; shift 2 ;;
	--exp1-quotas) exp1_quotas=${2:?}; shift 2 ;;
	--boots) boots=${2:?}; shift 2 ;;
	--overhead-boots) ov_boots=${2:?}; shift 2 ;;
	--grid-boots) grid_boots=${2:?}; shift 2 ;;
	--engine-boots) engine_boots=${2:?}; shift 2 ;;
	--engines) engines_arg=${2:?}; shift 2 ;;
	--sysbench-burst) exp_opts+=(--sysbench-burst); shift ;;
	--wall-clock) wall=1; shift ;;
	--out) out=${2:?}; shift 2 ;;
	--report-only) report_only=1; shift ;;
	--resume) resume=1; shift ;;
	--vm-slots) vm_slots=${2:?}; shift 2 ;;
	--estimate) estimate=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument '$1'" ;;
	esac
done
# The modes: the quick tier every one; the full tier not borrowd's quota
# mode on the patched kernel (the stock kernel's agent is that mode), in
# experiment 2 those its targets compare (off, process, incg), and in its
# grid VMs the reference study's two (off and process; the stock kernel:
# off), unless --modes, --exp2-modes or --stock-modes name them.
case $tier in
quick) modes=${modes:-off,process,thread,incg,agent,agent-quota} ;;
full) modes=${modes:-off,process,thread,incg,agent} exp2_modes=${exp2_modes:-off,process,incg} ;;
esac
exp2_modes=${exp2_modes:-$modes}
grid_modes=$modes grid_stock_modes=${stock_modes:-off}
[[ $tier == full && $modes_given == 0 ]] && grid_modes=off,process
stock_modes=${stock_modes:-off,agent}
MODE_RE='(off|process|thread|incg|agent|agent-quota)'
for m in "$modes" "$exp2_modes"; do
	[[ $m =~ ^$MODE_RE(,$MODE_RE)*$ ]] ||
		die "--modes and --exp2-modes take a comma-separated list of off, process, thread, incg, agent, agent-quota"
done
STOCK_MODE_RE='(off|incg|agent|agent-quota)'
[[ $stock_modes =~ ^$STOCK_MODE_RE(,$STOCK_MODE_RE)*$ && $grid_stock_modes =~ ^$STOCK_MODE_RE(,$STOCK_MODE_RE)*$ ]] ||
	die "--stock-modes takes a comma-separated list of off, incg, agent, agent-quota (stock nerdctl charges nothing)"
[[ $vm_slots == [12] ]] || die "--vm-slots takes 1 or 2"
[[ $parts =~ ^(exp1|exp2|throughput|overhead|engines)(,(exp1|exp2|throughput|overhead|engines))*$ ]] ||
	die "--parts takes a comma-separated list of exp1, exp2, throughput, overhead, engines"
if [[ -n $exp2_n ]]; then
	[[ $exp2_n =~ ^[1-9][0-9]?(,[1-9][0-9]?)*$ ]] || die "--exp2-n takes a comma-separated list of N (1..99)"
	exp_opts+=(--exp2-n "$exp2_n")
fi
# (exp_opts: the experiments' options, as the guest takes them.)
if [[ -n $exp2_cmds ]]; then
	[[ $exp2_cmds =~ ^cmd[1-4](,cmd[1-4])*$ ]] || die "--exp2-cmds takes a comma-separated list of cmd1, cmd2, cmd3, cmd4"
	exp_opts+=(--exp2-cmds "$exp2_cmds")
fi
if [[ -n $exp1_cmds ]]; then
	[[ $exp1_cmds =~ ^(yes|lsmod|echo)(,(yes|lsmod|echo))*$ ]] ||
		die "--exp1-cmds takes a comma-separated list of yes, lsmod, echo"
	exp_opts+=(--exp1-cmds "$exp1_cmds")
fi
if [[ -n $exp1_quotas ]]; then
	[[ $exp1_quotas =~ ^[1-9][0-9]?(,[1-9][0-9]?)*$ ]] || die "--exp1-quotas takes a comma-separated list of ms (1..99)"
	exp_opts+=(--exp1-quotas "$exp1_quotas")
fi
if [[ -n $borrowd ]]; then
	[[ -x $borrowd && ! -d $borrowd ]] || die "--borrowd: no executable $borrowd"
	borrowd=$(cd "$(dirname "$borrowd")" && pwd)/$(basename "$borrowd")
	[[ $borrowd == "$CFSB_ROOT"/* ]] || die "--borrowd must be inside the checkout ($CFSB_ROOT): the guest runs it"
	exp_opts+=(--borrowd "$borrowd")
fi
# The quick tier's engine is stock nerdctl alone (the test command's tools
# section runs Podman's and Docker's through the same script).
# The full tier: the cells the targets judge (experiment 1 with yes at 50
# and 20 ms, experiment 2 at N = 1 and 2 with cmd1 and cmd2 and the N = 2
# headroom cell) in every boot; the reference study's other commands at
# the same quotas and its largest N in --grid-boots more VMs per kernel and
# hierarchy. (--exp1-cmds, --exp1-quotas, --exp2-n or --exp2-cmds: those
# cells in every boot, no grid VMs.)
headline=() grid=()
case $tier in
quick) boots=${boots:-1} ov_boots=${ov_boots:-1} engine_secs=2 engines=${engines_arg:-nerdctl}
	grid_boots=${grid_boots:-0} engine_boots=${engine_boots:-1} engine_modes=(off borrowd) ;;
full) boots=${boots:-3} ov_boots=${ov_boots:-3} engine_secs=4 engines=${engines_arg:-podman,nerdctl,docker,cri}
	grid_boots=${grid_boots:-1} engine_boots=${engine_boots:-2} engine_modes=(off borrowd pace)
	if [[ -z $exp1_cmds$exp1_quotas$exp2_n$exp2_cmds ]]; then
		headline=(--exp1-cmds yes --exp1-quotas "50,20" --exp2-n "1,2" --exp2-cmds "cmd1,cmd2")
		grid=(--exp1-cmds "lsmod,echo" --exp1-quotas "50,20" --exp2-n 5)
	else
		grid_boots=0
	fi
	;;
esac
[[ $boots =~ ^[1-9][0-9]?$ && $ov_boots =~ ^[0-9][0-9]?$ && $grid_boots =~ ^[0-9]$ && $engine_boots =~ ^[0-9]$ ]] ||
	die "--boots, --overhead-boots, --grid-boots and --engine-boots take a number"
[[ $engines =~ ^(podman|nerdctl|docker|cri)(,(podman|nerdctl|docker|cri))*$ ]] ||
	die "--engines takes a comma-separated list of podman, nerdctl, docker, cri"
IFS=, read -ra engine_list <<<"$engines"
has_part() { [[ ,$parts, == *",$1,"* ]]; }
# only LIST WORD...: the words of comma-separated LIST that are among WORD...
only() {
	local list=$1 w keep=()
	shift
	for w in ${list//,/ }; do [[ " $* " == *" $w "* ]] && keep+=("$w"); done
	(IFS=,; echo "${keep[*]}")
}
# What the experiments' VMs run: the patched kernel's headline VMs the
# logging throughput too (it compares charging modes, which the stock
# kernel's VMs and the grid VMs leave out).
guest_parts=$(only "$parts" exp1 exp2 throughput)
exp_parts=$(only "$parts" exp1 exp2)
clock=icount
((wall)) && clock=wall
# This run's raw data: a directory of its own, so that other parts' stay.
run_id=${parts//,/+}.$clock
# The full tier's results are kept with the project; a quick run's are not.
case $tier in
quick) out=${out:-$CFSB_ROOT/results/noisy_logging/quick} ;;
full) out=${out:-$CFSB_ROOT/experiments/results/full} ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
[[ $out == "$CFSB_ROOT"/* ]] || die "--out must be inside the checkout ($CFSB_ROOT): the guest writes there"
raw=$out/raw/$run_id
# Every finished VM's host.json, a line each: this machine's pace (--estimate).
PACE_FILE=$CFSB_CACHE/study-pace.jsonl

# The report needs matplotlib; Debian's, for Debian's python3.
REPORT_PYTHON=/usr/bin/python3
report() {
	log "writing the report"
	"$REPORT_PYTHON" "$CFSB_ROOT/experiments/noisy_logging_report.py" "$out"
}

# hms SECONDS: 1h02m03s.
hms() {
	local s=$1
	if ((s >= 3600)); then printf '%dh%02dm%02ds' $((s / 3600)) $((s % 3600 / 60)) $((s % 60)); else
		printf '%dm%02ds' $((s / 60)) $((s % 60)); fi
}

# vm_plan: this run's VMs, "NAME KERNEL HIERARCHY ARG..." per line. Boot by
# boot, the experiments' VMs of each hierarchy, patched then stock, so that
# each boot's cells lie between the other boots' in time (in the full tier
# the headline cells: every boot; the grid's other cells: --grid-boots,
# VMs named -gN); then the overhead's boots, then the engines'.
GUEST=$CFSB_ROOT/experiments/noisy_logging_guest.sh
vm_plan() {
	local b hier
	for ((b = 1; b <= boots; b++)); do
		[[ -n $guest_parts ]] || break
		for hier in "${HIERARCHIES[@]}"; do
			echo "patched-$hier-b$b patched $hier --parts $guest_parts --modes $modes" \
				"--exp2-modes $exp2_modes ${exp_opts[*]} ${headline[*]}"
		done
		# (The engines next to the first boot's stock VMs: the longest VMs
		# first, the two host CPUs end at about the same time.)
		((b <= engine_boots)) && has_part engines && echo "engines-v2-b$b patched v2 engines"
		for hier in "${HIERARCHIES[@]}"; do
			[[ -z $exp_parts ]] ||
				echo "stock-$hier-b$b stock $hier --parts $exp_parts --nerdctl stock --modes $stock_modes" \
					"${exp_opts[*]} ${headline[*]}"
		done
	done
	for ((b = 1; b <= grid_boots; b++)); do
		for hier in "${HIERARCHIES[@]}"; do
			[[ -z $exp_parts ]] ||
				echo "patched-$hier-g$b patched $hier --parts $exp_parts --modes $grid_modes" \
					"--exp2-modes $exp2_modes ${exp_opts[*]} ${grid[*]}"
			[[ -z $exp_parts ]] ||
				echo "stock-$hier-g$b stock $hier --parts $exp_parts --nerdctl stock --modes $grid_stock_modes" \
					"${exp_opts[*]} ${grid[*]}"
		done
	done
	if has_part engines; then
		for ((b = 1; b <= engine_boots; b++)); do
			[[ -z $guest_parts ]] || ((b > boots)) && echo "engines-v2-b$b patched v2 engines"
		done
	fi
	if has_part overhead; then
		for ((b = 1; b <= ov_boots; b++)); do
			echo "n1-patched-v2-b$b patched v2 --parts sysbench1 --modes off"
			echo "n1-stock-v2-b$b stock v2 --parts sysbench1 --modes off --nerdctl stock"
		done
	fi
	return 0
}

# planned_s ARG...: the guest seconds a VM plans. The engines: sysbench
# alone and per engine and mode a window, a neighbour's sysbench and about
# 12 s of starting and stopping.
planned_s() {
	if [[ $1 == engines ]]; then
		echo $((${#engine_list[@]} * (engine_secs + ${#engine_modes[@]} * (engine_secs + 12))))
	else
		"$GUEST" --plan --tier "$tier" "$@"
	fi
}

if ((estimate)); then
	# The pace of the VMs run so far (host.json, written per VM): host
	# seconds per planned guest second once booted, and the boot; of those
	# this machine ran, or else this directory's, or else the kept full
	# run's (which another machine may have run, at another speed).
	pace=$("$REPORT_PYTHON" -c '
import json, sys
from pathlib import Path
for raw in sys.argv[2:]:
    busy = planned = 0.0
    boot = []
    src = Path(raw)
    runs = src.read_text().splitlines() if src.is_file() else [h.read_text() for h in src.glob("*/*/host.json")]
    for line in runs:
        j = json.loads(line)
        if j.get("planned_s") and j.get("clock") == sys.argv[1] and j.get("exit") == 0:
            busy += j["seconds"] - j["boot_s"]
            planned += j["planned_s"]
            boot.append(j["boot_s"])
    if boot:
        print(f"{busy / planned:.3f} {sum(boot) / len(boot):.0f} {len(boot)} {raw}")
        sys.exit(0)
where = " or ".join(sys.argv[2:])
sys.exit(f"no finished VM on the {sys.argv[1]} clock under {where} to take the pace from")
' "$clock" "$PACE_FILE" "$out/raw" "$CFSB_ROOT/experiments/results/full/raw")
	read -r k boot_s n_from from <<<"$pace"
	slot0=0 slot1=0 n=0
	while read -r name kernel hier args; do
		# shellcheck disable=SC2086 # the arguments are words
		p=$(planned_s $args)
		t=$(awk -v p="$p" -v k="$k" -v b="$boot_s" 'BEGIN { printf "%d", b + p * k }')
		if ((slot0 <= slot1)); then slot0=$((slot0 + t)); else slot1=$((slot1 + t)); fi
		n=$((n + 1))
		printf '%-22s %-7s %s %5d planned s  ~%s\n' "$name" "$kernel" "$hier" "$p" "$(hms "$t")"
	done < <(vm_plan)
	echo "$n VMs, two at a time: about $(hms $((slot0 > slot1 ? slot0 : slot1))) on the $clock clock" \
		"($k host s per planned s, $boot_s s to boot: from $n_from VMs under ${from#"$CFSB_ROOT"/})"
	exit 0
fi

ensure_packages python3 python3-matplotlib
if ((report_only)); then
	report
	exit 0
fi

ensure_packages "${CONTAINER_PACKAGES[@]}" jq
if ((no_build)); then
	for k in stock patched; do
		[[ -f $(kernel_image_path "$k" x86_64 default) ]] ||
			die "--no-build: no $k kernel at $(kernel_image_path "$k" x86_64 default)"
	done
	[[ -x $CFSB_ROOT/.build/nerdctl/nerdctl ]] || "$CFSB_ROOT/scripts/nerdctl-build.sh"
	[[ -x $CFSB_ROOT/.build/nerdctl-stock/nerdctl ]] || "$CFSB_ROOT/scripts/nerdctl-build.sh" --stock
else
	"$CFSB_ROOT/scripts/kernel-build.sh" --variant stock
	"$CFSB_ROOT/scripts/kernel-build.sh" --variant patched
	"$CFSB_ROOT/scripts/nerdctl-build.sh"
	"$CFSB_ROOT/scripts/nerdctl-build.sh" --stock
fi
# borrowd: for the engines, and for the agent modes of the experiments.
agent_modes=0
[[ -n $guest_parts && ,$modes,$exp2_modes, == *,agent* ]] && agent_modes=1
[[ -n $exp_parts && ,$stock_modes, == *,agent* ]] && agent_modes=1
if has_part engines || { ((agent_modes)) && [[ -z $borrowd ]]; }; then
	ensure_packages "${TOOLS_PACKAGES[@]}"
	make -s -C "$CFSB_ROOT/tools"
fi
if has_part engines; then
	ensure_packages "${ENGINE_PACKAGES[@]}"
	[[ ,$engines, == *,cri,* ]] && "$CFSB_ROOT/scripts/crictl-build.sh"
fi
python3 "$CFSB_ROOT/scripts/build_images.py" "$CFSB_ROOT/.build/images" >/dev/null

# previous_s: the time the invocations before this one took (--resume).
previous_s=0
if ((resume)); then
	[[ -d $raw ]] || die "--resume: nothing to resume under $raw"
	if [[ -f $raw/run.json ]]; then
		previous_s=$(jq .seconds "$raw/run.json")
	else
		first=$(stat -c %Y "$raw"/*/slot | sort -n | head -1)
		last=$(stat -c %Y "$raw"/*/host.json | sort -n | tail -1)
		previous_s=$((last - first))
	fi
else
	rm -rf "$raw"
fi
mkdir -p "$raw"
case $tier in quick) vm_timeout=1800 ;; full) vm_timeout=14400 ;; esac
VM_OPTS=()
((wall)) || VM_OPTS=(--icount 0)

# guest SLOT NAME KERNEL HIERARCHY ARG...: start a VM in the background on
# host CPU SLOT that runs the guest script with ARG... (or, for "engines",
# tools/tests/engines-in-guest.sh) into raw/NAME.
declare -A GUEST_PIDS=() GUEST_T0=() GUEST_BOOT=()
SLOT_FREE=()
guest() {
	local slot=$1 name=$2 kernel=$3 hier=$4 cmd seed image
	shift 4
	mkdir -p "$raw/$name"
	# The order of the modes in this boot: a seed of its own.
	seed=$((SRANDOM % 1000000000))
	if [[ $1 == engines ]]; then
		cmd=("$CFSB_ROOT/tools/tests/engines-in-guest.sh" --seconds "$engine_secs" --modes "$(IFS=,; echo "${engine_modes[*]}")"
			--csv "$raw/$name/engines.csv" --meta "$raw/$name/engines.json" --progress "$raw/$name/progress"
			"${engine_list[@]}")
	else
		cmd=("$GUEST" --out "$raw/$name" --tier "$tier" --seed "$seed" "$@")
	fi
	planned_s "$@" >"$raw/$name/planned_s"
	image=$(kernel_image_path "$kernel" x86_64 default)
	# What the host started, for the record: the kernel image it booted
	# (its hash is run.json's for that kernel), the command, the commit.
	jq -n --arg kernel "$kernel" --arg hier "$hier" --arg image_sha256 "$(sha256sum <"$image" | cut -c1-64)" \
		--arg commit "$COMMIT" --argjson seed "$seed" \
		--argjson args "$(printf '%s\n' "${cmd[@]#"$CFSB_ROOT"/}" | jq -R . | jq -sc .)" \
		'{kernel: $kernel, hier: $hier, image_sha256: $image_sha256, commit: $commit, seed: $seed, args: $args}' \
		>"$raw/$name/vm.json"
	"$CFSB_ROOT/scripts/vm-run.sh" --kernel "$image" \
		--cgroup "$hier" --cpus 4 --mem 4G --timeout "$vm_timeout" --host-cpus "$slot" "${VM_OPTS[@]}" -- \
		"${cmd[@]}" >"$raw/$name/vm.log" 2>&1 &
	GUEST_PIDS[$name]=$! GUEST_T0[$name]=$(now_s) GUEST_BOOT[$name]="" SLOT_FREE[slot]=0
	echo "$slot" >"$raw/$name/slot"
}

# reap NAME: a VM that ended: its host.json (host seconds, of which booting
# up to its first planned second), or its log's tail and a failure.
FAILED=()
reap() {
	local name=$1 status=0 now
	wait "${GUEST_PIDS[$name]}" || status=$?
	now=$(now_s)
	SLOT_FREE[$(cat "$raw/$name/slot")]=1
	printf '{"seconds": %d, "boot_s": %d, "planned_s": %d, "clock": "%s", "exit": %d}\n' \
		$((now - GUEST_T0[$name])) "${GUEST_BOOT[$name]:-0}" "$(cat "$raw/$name/planned_s")" "$clock" \
		"$status" >"$raw/$name/host.json"
	# This machine's pace, for --estimate (the cache stays with the
	# machine: another machine's TCG may run at another speed).
	((status != 0)) || { mkdir -p "$CFSB_CACHE" && cat "$raw/$name/host.json" >>"$PACE_FILE"; }
	unset "GUEST_PIDS[$name]"
	if ((status != 0)); then
		FAILED+=("$name")
		log "$name failed (exit status $status); its output:"
		tail -20 "$raw/$name/vm.log" >&2
	fi
}

# run_vms: every VM of vm_plan, --vm-slots at a time (one per host CPU),
# each started as a slot frees; shows each one's cell and estimated remaining
# time (from the guest's progress file: planned seconds done and in all).
run_vms() {
	local t0 now line name did total label eta slot ncpu
	ncpu=$(($(nproc) < vm_slots ? $(nproc) : vm_slots))
	for ((slot = 0; slot < ncpu; slot++)); do SLOT_FREE[slot]=1; done
	mapfile -t queue < <(vm_plan)
	if ((resume)); then
		local kept=() todo=()
		for line in "${queue[@]}"; do
			name=${line%% *}
			if [[ $(jq .exit "$raw/$name/host.json" 2>/dev/null) == 0 ]]; then
				kept+=("$name")
			else
				todo+=("$line")
				rm -rf "${raw:?}/$name"
			fi
		done
		queue=("${todo[@]}")
		log "resuming: ${#kept[@]} VMs kept, ${#queue[@]} to run again: ${queue[*]%% *}"
		RESUMED=("${queue[@]%% *}")
	fi
	t0=$(now_s)
	while [[ ${#queue[@]} -gt 0 || ${#GUEST_PIDS[@]} -gt 0 ]]; do
		for name in "${!GUEST_PIDS[@]}"; do
			kill -0 "${GUEST_PIDS[$name]}" 2>/dev/null || reap "$name"
		done
		for ((slot = 0; slot < ncpu; slot++)); do
			if ((SLOT_FREE[slot])) && [[ ${#queue[@]} -gt 0 ]]; then
				# shellcheck disable=SC2086 # the plan's words
				guest "$slot" ${queue[0]}
				queue=("${queue[@]:1}")
			fi
		done
		now=$(now_s) line=""
		for name in "${!GUEST_PIDS[@]}"; do
			label="" eta="?"
			if read -r did total _ label 2>/dev/null <"$raw/$name/progress"; then
				[[ -n ${GUEST_BOOT[$name]} ]] || GUEST_BOOT[$name]=$((now - GUEST_T0[$name]))
				((did > 0)) && eta="~$(hms $(((total - did) * (now - GUEST_T0[$name] - GUEST_BOOT[$name]) / did)))"
			fi
			line+="  [$name: ${label:-booting}, $eta left]"
		done
		if [[ -t 2 ]]; then
			printf '\r\033[K%s%s' "$(hms $((now - t0)))" "$line" >&2
		elif (((now - t0) % 60 < 5)); then
			log "$(hms $((now - t0))), ${#queue[@]} VMs to start$line"
		fi
		sleep 5
	done
	[[ -t 2 ]] && echo >&2
	[[ ${#FAILED[@]} -eq 0 ]] || die "failed in ${FAILED[*]} (logs in $raw/)"
}

# provenance: what this run measured with, into raw/provenance.json (joined
# into run.json at the end): the project's commit (and how many tracked
# files outside the results directory, which the run itself rewrites, were
# changed), the series' hashes, each kernel's image, configuration and
# release, the nerdctl and borrowd binaries, QEMU, the host's CPU and the
# packages the guest runs (it boots the host's root file system). A
# --resume by another commit keeps the earlier ones: the run says it spans
# them.
COMMIT=$(git -C "$CFSB_ROOT" rev-parse HEAD)
provenance() {
	local k build commits kernels=() files=()
	for k in stock patched; do
		build=$(kernel_build_dir "$k" x86_64 default)
		kernels+=(--arg "$k" "$(sha256sum <"$(kernel_image_path "$k" x86_64 default)" | cut -c1-64) $(sha256sum <"$build/.config" | cut -c1-64) $(cat "$build/include/config/kernel.release")")
	done
	for k in "$CFSB_ROOT"/.build/nerdctl/nerdctl "$CFSB_ROOT"/.build/nerdctl-stock/nerdctl \
		"${borrowd:-$CFSB_ROOT/.build/tools/borrowd}"; do
		[[ ! -f $k ]] || files+=(--arg "${k#"$CFSB_ROOT"/}" "$(sha256sum <"$k" | cut -c1-64)")
	done
	commits=$COMMIT
	((resume)) && [[ -f $raw/run.json ]] && commits=$(jq -r --arg c "$COMMIT" '[.commits[]?, $c] | unique | join(" ")' "$raw/run.json")
	# shellcheck disable=SC2016 # jq's variables
	jq -n --arg commit "$COMMIT" --arg commits "$commits" \
		--arg dirty "$(git -C "$CFSB_ROOT" status --porcelain --untracked-files=no -- . ":(exclude)${out#"$CFSB_ROOT"/}" | wc -l)" \
		--arg s612 "$(files_hash "$CFSB_ROOT"/kernel/patches/*.patch)" \
		--arg s72 "$(files_hash "$CFSB_ROOT"/kernel/patches-7.2/*.patch)" \
		--arg snerdctl "$(files_hash "$CFSB_ROOT"/nerdctl-patch/*.patch)" \
		--arg qemu "$(qemu-system-x86_64 --version | head -1)" \
		--arg cpu "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" \
		--arg packages "$(dpkg-query -W -f '${Package}=${Version} ' qemu-system-x86 containerd runc crun sysbench \
			podman conmon docker.io 2>/dev/null)" \
		--argjson kernels "$(jq -n '$ARGS.named' "${kernels[@]}")" --argjson binaries "$(jq -n '$ARGS.named' "${files[@]}")" '
		{commit: $commit, commits: ($commits | split(" ")), spans_commits: ($commits | split(" ") | length > 1),
		 tree_changes: ($dirty | tonumber),
		 series: {"kernel 6.12": $s612, "kernel 7.2": $s72, nerdctl: $snerdctl},
		 kernels: ($kernels | map_values(split(" ") | {image_sha256: .[0], config_sha256: .[1], release: .[2]})),
		 binaries_sha256: $binaries, qemu: $qemu, host_cpu: $cpu,
		 packages: ($packages | split(" ") | map(select(. != "")))}' >"$raw/provenance.json"
}
provenance

started=$(now_s)
RESUMED=()
run_vms
log "measured in $(hms $(($(now_s) - started)))"
printf '{"tier": "%s", "parts": "%s", "seconds": %d, "host_cpus": %d, "clock": "%s", "icount": %s, "boots": %d, "overhead_boots": %d, "grid_boots": %d, "engine_boots": %d, "engines": "%s", "hierarchies": "%s", "resumed": "%s", "resumed_after_s": %d}\n' \
	"$tier" "$parts" $((previous_s + $(now_s) - started)) "$(nproc)" "$clock" "$( ((wall)) && echo false || echo true)" \
	"$boots" "$ov_boots" "$grid_boots" "$engine_boots" "$engines" "$(IFS=,; echo "${HIERARCHIES[*]}")" "${RESUMED[*]}" "$previous_s" |
	jq --slurpfile prov "$raw/provenance.json" '. + $prov[0]' >"$raw/run.json"
rm -f "$raw/provenance.json"
report
log "report: ${out#"$CFSB_ROOT"/}/report.md, plots: ${out#"$CFSB_ROOT"/}/plots/"
