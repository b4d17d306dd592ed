#!/usr/bin/env bash
# The noisy-logging study, inside the guest (experiments/noisy_logging.sh
# boots the kernel and runs this). Writes raw CSV into --out; the host turns
# it into the report.
#
#   noisy_logging_guest.sh --out DIR [--tier quick|full] [--parts LIST]
#                          [--modes LIST] [--exp2-modes LIST] [--exp2-n LIST]
#                          [--exp2-cmds LIST] [--exp1-cmds LIST] [--exp1-quotas LIST]
#                          [--nerdctl patched|stock] [--borrowd PATH]
#                          [--sysbench-burst] [--seed N] [--plan]
#
# Layout as in the reference study: containerd, the shims and the logging
# processes in /system.slice/containerd.service, the containers (nerdctl's
# cgroupfs driver; sysbench's by runc directly) in /default/<id>, the two
# sibling groups at their default, equal weights; everything on CPU 0.
#
# Parts (default: exp1,exp2,throughput):
#   exp1        one container running yes / an lsmod loop / an echo loop,
#               quota 50, 33, 25, 20 ms per 100 ms: CPU of the logging
#               process (A), charged to the container (B), of the container
#               (C), of the logging cgroup, per charging mode
#   exp2        N = 1..5 containers with quota 100/N ms, shares 1024: sysbench
#               in one (runc), cmd1..cmd4 in the N-1 others (nerdctl);
#               sysbench's events/s and 95th-percentile latency per run,
#               and the CPU of every party over sysbench's own running time
#               (the container waits on a FIFO before and after its runs:
#               the harness starts and stops nothing inside the window);
#               then headroom cells, the quotas adding up to 80 ms: there
#               a neighbour's protection shows as sysbench's share against
#               its fair share
#   throughput  a container running yes without quota: log bytes per second
#               with charging off and in process mode, alternating
#   sysbench1   N = 1 only (sysbench alone): the kernel overhead comparison
# Modes (default off,process,thread,incg,agent,agent-quota) apply to exp1
# and, unless --exp2-modes names others, to exp2: off (nothing charged, the
# stock behaviour), process and thread (nerdctl's cpu-charge), incg (nothing
# charged, the logging process moved into its container's cgroup, as
# Podman's conmon_cgroup or a pod would place it), agent (stock nerdctl's
# logging process charged by borrowd, tools/borrowd, in its auto mode: the
# kernel's cpu.cfs.borrowing_us where the kernel has it, else its quota
# mode, which lowers the container's CFS quota for the next periods) and
# agent-quota (the same with borrowd's quota mode forced). In experiment 2
# each mode has its own cmd1 baseline, measured before that mode's cells of
# each N.
# The agent modes' containers are always started by stock nerdctl 1.7.7
# (.build/nerdctl-stock: borrowd leaves the patched logger alone, it charges
# itself), whatever --nerdctl says; borrowd (--borrowd, default
# .build/tools/borrowd; --engines containerd --scan-ms 200, no --pace; its
# sha256 in meta.json) is started for each such
# cell before its containers, on CPU 0 with everything else, waited for
# until it charges their logging processes, and stopped after the cell
# (before the containers are removed); at each snapshot it is sent SIGUSR1 and its --stats (JSON,
# kept in DIR/agent/) read: the cell's agent columns are the differences
# (agent_charged_us: all it charged; agent_cpu_us: its own CPU;
# agent_quota_writes; agent_borrowed_us, _paid_us, _dropped_us: its quota
# mode's accounts of the cell's container groups, borrowed counting what
# its bound dropped as the kernel's borrowed_usec does; agent_regained_us:
# what they used beyond their quota after its writes (a write refills the
# runtime), which it owes back; agent_debt_us: their debt at the window's
# end).
# The processes' CPU (A, the logging processes') is read from the
# scheduler's nanosecond counts (/proc/PID/task/*/schedstat), with the tick
# count beside it (a thread that exits shows as a difference). The modes'
# order is shuffled per boot, from --seed (default 1; meta.json records it).
# --nerdctl stock: unmodified nerdctl (no cpu-charge option: off, incg and
# the agent modes only), the stock kernel's baseline. --exp2-n runs
# experiment 2 for those N only (default: the tier's), --exp2-cmds for
# those commands (cmd1..cmd4; the headroom cells those of them they run),
# --exp1-cmds and --exp1-quotas experiment 1 for those commands (yes,
# lsmod, echo) and quotas (ms per 100 ms) only. --plan prints the planned
# seconds and exits.
# The kernel's modules (vm-run.sh shares them) are loaded first: the lsmod
# loop lists them.
# --sysbench-burst gives sysbench's container a burst (cpu.max.burst,
# cpu.cfs_burst_us) equal to its quota: the quota it leaves unused in one
# period, while the logging processes hold the CPU, it may use later.
# Runs only in that guest (scripts/guest-check.sh; on a board that is there
# to be tested: CFSB_GUEST_ANYWHERE=1), but for --plan.
set -euo pipefail
# shellcheck source=scripts/guest-check.sh
source "$(dirname "$0")/../scripts/guest-check.sh"

out="" tier=quick parts=exp1,exp2,throughput modes=off,process,thread,incg,agent,agent-quota exp2_modes="" exp2_n="" exp2_cmds=""
sb_burst=0 nerdctl=patched plan_only=0 exp1_cmds="" exp1_quotas="" borrowd="" seed=1
while [[ $# -gt 0 ]]; do
	case $1 in
	--out) out=${2:?}; shift 2 ;;
	--tier) tier=${2:?}; shift 2 ;;
	--parts) parts=${2:?}; shift 2 ;;
	--modes) modes=${2:?}; shift 2 ;;
	--exp2-modes) exp2_modes=${2:?}; shift 2 ;;
	--exp2-n) exp2_n=${2:?}; shift 2 ;;
	--exp2-cmds) exp2_cmds=${2:?}; shift 2 ;;
	--exp1-cmds) exp1_cmds=${2:?}; shift 2 ;;
	--exp1-quotas) exp1_quotas=${2:?}; shift 2 ;;
	--sysbench-burst) sb_burst=1; shift ;;
	--nerdctl) nerdctl=${2:?}; shift 2 ;;
	--borrowd) borrowd=${2:?}; shift 2 ;;
	--seed) seed=${2:?}; shift 2 ;;
	--plan) plan_only=1 out=${out:-/dev/null}; shift ;;
	-h | --help) cfsb_usage_from_header; exit 0 ;;
	*) echo "noisy_logging_guest: unknown option $1" >&2; exit 2 ;;
	esac
done
# (--plan only counts: the host asks it.)
[[ $seed =~ ^[0-9]{1,9}$ ]] || { echo "noisy_logging_guest: --seed takes a number (0..999999999)" >&2; exit 2; }
((plan_only)) || cfsb_guest_only
[[ -n $out ]] || { echo "noisy_logging_guest: --out DIR is required" >&2; exit 2; }
# The agent modes' nerdctl, and borrowd.
STOCK_NERDCTL=$(cd "$(dirname "$0")/.." && pwd)/.build/nerdctl-stock/nerdctl
BORROWD=${borrowd:-$(cd "$(dirname "$0")/.." && pwd)/.build/tools/borrowd}
case $nerdctl in
patched) ;;
stock) CS_NERDCTL=$STOCK_NERDCTL ;;
*) echo "noisy_logging_guest: --nerdctl is patched or stock" >&2; exit 2 ;;
esac

# shellcheck source=scripts/container-stack.sh
source "$(dirname "$0")/../scripts/container-stack.sh"
trap 'echo "noisy_logging_guest: line $LINENO: exit status $?" >&2' ERR

# The reference study's commands, verbatim.
declare -A EXP1_CMD=(
	[yes]='yes'
	[lsmod]='while true; do lsmod; done'
	[echo]='while true; do echo 1; done'
)
declare -A EXP2_CMD=(
	[cmd1]='dd if=/dev/zero of=/dev/null'
	[cmd2]='dd if=/dev/zero of=/dev/null & yes'
	[cmd3]='dd if=/dev/zero of=/dev/null & while true; do lsmod; done'
	[cmd4]='dd if=/dev/zero of=/dev/null & while true; do echo 1; done'
)
PERIOD_US=100000

# What each tier measures: the full tier has the reference study's grid
# (its windows are 30 s and 10 x 10 s of sysbench; on the instruction clock,
# where a busy guest second takes about three host seconds, shorter windows
# repeated across boots measure more for the time), each window after 2 s
# of settling: a logging process's own start (about a second of CPU under
# emulation) is charged to its container, which pays it off within the
# kernel's bound in the next second or so (after the quick tier's 1 s,
# process mode is often still paying, CPU 0 partly idle); the quick tier
# checks the
# pipeline with every mode and part.
case $tier in
full)
	EXP1_CMDS=(yes lsmod echo) EXP1_QUOTAS_MS=(50 33 25 20)
	EXP1_SETTLE=2 EXP1_WINDOW=3
	EXP2_NS=(1 2 3 4 5) EXP2_CMDS=(cmd1 cmd2 cmd3 cmd4)
	EXP2_HEADROOM_NS=(2 3) EXP2_HEADROOM_CMDS=(cmd2 cmd4)
	SB_RUNS=1 SB_TIME=2 EXP2_SETTLE=2
	TP_WINDOWS=1 TP_WINDOW=2
	;;
quick)
	EXP1_CMDS=(yes) EXP1_QUOTAS_MS=(50)
	EXP1_SETTLE=1 EXP1_WINDOW=2
	EXP2_NS=(1 2) EXP2_CMDS=(cmd1 cmd2)
	EXP2_HEADROOM_NS=(2) EXP2_HEADROOM_CMDS=(cmd2)
	SB_RUNS=2 SB_TIME=1 EXP2_SETTLE=1
	TP_WINDOWS=1 TP_WINDOW=1
	;;
*) echo "noisy_logging_guest: --tier is quick or full" >&2; exit 2 ;;
esac
# The headroom cells' quotas add up to this much of CPU 0 (the reference
# study's to all of it: sysbench then gets what is left, and a neighbour's
# protection cannot show).
HEADROOM_PCT=80
IFS=, read -ra MODES <<<"$modes"
IFS=, read -ra EXP2_MODES <<<"${exp2_modes:-$modes}"
AGENT=0
for m in "${MODES[@]}" "${EXP2_MODES[@]}"; do
	case $m in off | incg) ;; agent | agent-quota) AGENT=1 ;; process | thread) [[ $nerdctl == patched ]] ||
		{ echo "noisy_logging_guest: stock nerdctl charges nothing: no $m mode" >&2; exit 2; } ;;
	*) echo "noisy_logging_guest: unknown mode $m" >&2; exit 2 ;; esac
done
if [[ -n $exp2_n ]]; then
	[[ $exp2_n =~ ^[1-9][0-9]?(,[1-9][0-9]?)*$ ]] ||
		{ echo "noisy_logging_guest: --exp2-n takes a comma-separated list of N (1..99)" >&2; exit 2; }
	IFS=, read -ra EXP2_NS <<<"$exp2_n"
fi
if [[ -n $exp2_cmds ]]; then
	[[ $exp2_cmds =~ ^cmd[1-4](,cmd[1-4])*$ ]] ||
		{ echo "noisy_logging_guest: --exp2-cmds takes a comma-separated list of cmd1, cmd2, cmd3, cmd4" >&2; exit 2; }
	IFS=, read -ra EXP2_CMDS <<<"$exp2_cmds"
	kept=()
	for c in "${EXP2_HEADROOM_CMDS[@]}"; do [[ ,$exp2_cmds, == *",$c,"* ]] && kept+=("$c"); done
	EXP2_HEADROOM_CMDS=("${kept[@]}")
fi
if [[ -n $exp1_cmds ]]; then
	[[ $exp1_cmds =~ ^(yes|lsmod|echo)(,(yes|lsmod|echo))*$ ]] ||
		{ echo "noisy_logging_guest: --exp1-cmds takes a comma-separated list of yes, lsmod, echo" >&2; exit 2; }
	IFS=, read -ra EXP1_CMDS <<<"$exp1_cmds"
fi
if [[ -n $exp1_quotas ]]; then
	[[ $exp1_quotas =~ ^[1-9][0-9]?(,[1-9][0-9]?)*$ ]] ||
		{ echo "noisy_logging_guest: --exp1-quotas takes a comma-separated list of ms (1..99)" >&2; exit 2; }
	IFS=, read -ra EXP1_QUOTAS_MS <<<"$exp1_quotas"
fi
has_part() { [[ ,$parts, == *",$1,"* ]]; }

# quota_us MS: 100/N ms and the study's 33 ms as microseconds.
quota_us() { echo $(($1 * 1000)); }

# shuffled WORD...: the words in a random order, into the array SHUFFLED
# (Fisher-Yates). The numbers come from a generator of its own seeded with
# --seed (a 31-bit linear congruential one, as POSIX's rand() example):
# the same seed gives the same order in any shell, subshell or boot.
SEED_STATE=$seed
shuffled() {
	local i j t
	SHUFFLED=("$@")
	for ((i = ${#SHUFFLED[@]} - 1; i > 0; i--)); do
		SEED_STATE=$(((SEED_STATE * 1103515245 + 12345) % 2147483648))
		j=$(((SEED_STATE >> 16) % (i + 1)))
		t=${SHUFFLED[i]} SHUFFLED[i]=${SHUFFLED[j]} SHUFFLED[j]=$t
	done
}

((plan_only)) || mkdir -p "$out"
STARTED=${EPOCHREALTIME/./}

# --- progress ------------------------------------------------------------------
# The host reads $out/progress: "done_s total_s elapsed_s label", in planned
# seconds of measurement, to show where the run is and estimate the rest.
PLAN_TOTAL=0 PLAN_DONE=0
plan() { PLAN_TOTAL=$((PLAN_TOTAL + $1)); }
progress() {
	local now=${EPOCHREALTIME/./}
	echo "$PLAN_DONE $PLAN_TOTAL $(((now - STARTED) / 1000000)) $*" >"$out/progress.tmp"
	mv -f "$out/progress.tmp" "$out/progress"
	step "$*"
}
# step WHAT: a timestamped line in $out/steps.log (where the time goes).
step() {
	local now=${EPOCHREALTIME/./}
	printf '%d.%03d %s\n' $(((now - STARTED) / 1000000)) $(((now - STARTED) / 1000 % 1000)) "$*" >>"$out/steps.log"
}
# A container's fixed cost (starting, finding and removing it under
# emulation), in planned seconds of the guest's clock.
# (Measured on the instruction clock: 0.75 s to start a container, 1 s to
# remove it; runc's sysbench container starts in under a second.)
CELL_COST=2
# borrowd's, per cell of an agent mode: loading its BPF programs (before
# the containers start: 0.1 s on the instruction clock), finding the
# containers (0.6 s, up to 4 s next to a flooding container, which leaves
# it a third of CPU 0), stopping (up to 1 s, its quota mode restoring the
# quotas): 1.2 to 4.7 s more than the same cell without it, measured.
AGENT_COST=3
is_agent() { [[ $1 == agent || $1 == agent-quota ]]; }
agent_cost() { if is_agent "$1"; then echo "$AGENT_COST"; else echo 0; fi; }
# exp1_cost MODE, exp2_cost N MODE: a cell's planned seconds.
exp1_cost() { echo $((EXP1_SETTLE + EXP1_WINDOW + CELL_COST + $(agent_cost "$1"))); }
exp2_cost() {
	local agent=0
	(($1 > 1)) && agent=$(agent_cost "$2")
	echo $((EXP2_SETTLE + SB_RUNS * SB_TIME + 1 + CELL_COST * ($1 - 1) + agent))
}
tp_cost() { echo $((2 * TP_WINDOWS * (TP_WINDOW + 1 + CELL_COST))); }

# --- snapshots -----------------------------------------------------------------
# cpu0_times: CPU 0's idle (idle + iowait) and interrupt (irq + softirq)
# time from /proc/stat, µs, into CPU0_IDLE and CPU0_IRQ: the CPU that no
# group under watch used, and why; and the other CPUs' busy time into
# OTHERS_BUSY: under emulation all the guest's CPUs share one host CPU, so
# their work takes host time from CPU 0 that CPU 0's tasks are charged for.
USEC_PER_TICK=$((1000000 / $(getconf CLK_TCK)))
cpu0_times() {
	local name user nice system idle iowait irq softirq steal rest found=1
	OTHERS_BUSY=0
	while read -r name user nice system idle iowait irq softirq steal rest; do
		case $name in
		cpu0)
			CPU0_IDLE=$(((idle + iowait) * USEC_PER_TICK))
			CPU0_IRQ=$(((irq + softirq) * USEC_PER_TICK))
			found=0
			;;
		cpu[0-9]*)
			OTHERS_BUSY=$((OTHERS_BUSY + (user + nice + system + irq + softirq + steal) * USEC_PER_TICK))
			;;
		esac
	done </proc/stat
	return $found
}
# cpu0_switches: how many times CPU 0 switched to a task (the run queue's
# timeslice count in /proc/schedstat, CONFIG_SCHEDSTATS) into CPU0_SWITCHES:
# under emulation each switch costs the next task its TLB, so the rate
# explains part of sysbench's events per CPU second. And the time tasks ran
# on CPU 0 (rq_cpu_time, ns), µs, into CPU0_RUN: what the groups under watch
# did not use of it went to other tasks, at the scheduler's resolution
# (/proc/stat's idle time comes in ticks).
cpu0_switches() {
	local name ns rest
	# Fields: cpuN yld_count 0 sched_count sched_goidle ttwu_count ttwu_local
	# rq_cpu_time run_delay pcount
	while read -r name _ _ _ _ _ _ ns _ CPU0_SWITCHES rest; do
		[[ $name == cpu0 ]] && CPU0_RUN=$((ns / 1000)) && return 0
	done </proc/schedstat
	return 1
}
# snapshot NAME: the counters of the groups and processes under watch,
# summed: WATCH_CG (container cgroups), WATCH_LOGGER (logging process pids),
# WATCH_SHIM (their shims), SB_CG (sysbench's container, experiment 2),
# plus containerd and the logging cgroup; into the associative array NAME,
# fork-free. The processes' CPU at the scheduler's resolution (logger,
# shim: live threads, µs), and the logging processes' in ticks too
# (logger_ticks: 10 ms, exited threads included).
WATCH_CG=() WATCH_LOGGER=() WATCH_SHIM=() WATCH_LOG=()
LOGGING_CG=""
CONTAINERD_PID=""
SB_CG=""
snapshot() {
	local -n snap=$1
	local k p
	snap=([wall]=${EPOCHREALTIME/./} [logger]=0 [logger_ticks]=0 [shim]=0 [containerd]=0
		[logging_cgroup]=0 [container]=0 [sysbench]=0 [nr_periods]=0 [nr_throttled]=0 [throttled]=0
		[nr_borrow_periods]=0 [charged]=0 [deducted]=0 [dropped]=0 [cpu0_idle]=0 [cpu0_irq]=0
		[cpu0_run]=0 [nr_cpu0_switches]=0 [others_busy]=0 [log_bytes]=0)
	cpu0_times && snap[cpu0_idle]=$CPU0_IDLE snap[cpu0_irq]=$CPU0_IRQ snap[others_busy]=$OTHERS_BUSY
	cpu0_switches && snap[nr_cpu0_switches]=$CPU0_SWITCHES snap[cpu0_run]=$CPU0_RUN
	for p in "${WATCH_LOGGER[@]}"; do
		cs_pid_runtime_us "$p" && snap[logger]=$((snap[logger] + REPLY))
		cs_pid_cpu_us "$p" && snap[logger_ticks]=$((snap[logger_ticks] + REPLY))
	done
	for p in "${WATCH_SHIM[@]}"; do
		cs_pid_runtime_us "$p" && snap[shim]=$((snap[shim] + REPLY))
	done
	[[ -z $SB_CG ]] || { cs_usage_us "$SB_CG" && snap[sysbench]=$REPLY; }
	for p in "${WATCH_LOG[@]}"; do
		[[ -e $p ]] && snap[log_bytes]=$((snap[log_bytes] + $(stat -c %s "$p")))
	done
	cs_pid_cpu_us "$CONTAINERD_PID" && snap[containerd]=$REPLY
	cs_usage_us "$LOGGING_CG" && snap[logging_cgroup]=$REPLY
	for p in "${WATCH_CG[@]}"; do
		cs_cpu_stat "$p"
		snap[container]=$((snap[container] + CS_STAT[usage]))
		snap[charged]=$((snap[charged] + CS_STAT[borrowed]))
		for k in nr_periods nr_throttled throttled nr_borrow_periods deducted dropped; do
			# shellcheck disable=SC2004 # associative arrays: the key is expanded, not evaluated
			snap[$k]=$((snap[$k] + CS_STAT[$k]))
		done
	done
}
# watched_periods: the watched containers' groups' nr_periods, summed,
# into REPLY.
watched_periods() {
	local p
	REPLY=0
	for p in "${WATCH_CG[@]}"; do
		cs_cpu_stat "$p"
		REPLY=$((REPLY + CS_STAT[nr_periods]))
	done
}
# period_edge: wait until the watched containers' groups start a new
# period (their nr_periods moves; polled every millisecond, for three periods
# at most), so that experiment 1's window holds whole periods. A window that
# opens at any point of a period also holds what the group had left of the
# period before (up to one period's quota: 1.7 points of a 3 s window at a
# 50 ms quota), which it can use or pay inside the window; a window from
# one refill to another counts each period's quota once. Returns 1 when no
# period started (a group that is not running: its period timer is off).
period_edge() {
	local before i
	watched_periods
	before=$REPLY
	for ((i = 0; i < 3 * PERIOD_US / 1000; i++)); do
		cs_nap 0.001
		watched_periods
		((REPLY == before)) || return 0
	done
	return 1
}
# ratio_edge NAME: B/A's window edge, a random point of a period after
# period_edge (uniform: the paced logger resumes at a period's start and
# writes the charge it held back, so an edge there falls before or after
# that write and B/A moves by a batch, +-1 to 2.5 % of a 3 s window; an
# edge anywhere in the period lags by a fraction of one). Into the
# associative array NAME, fork-free: the time, the logging processes' CPU
# and what the watched containers were charged, in µs.
ratio_edge() {
	local -n edge=$1
	local p frac us=$(((RANDOM * 32768 + RANDOM) % PERIOD_US))
	printf -v frac %06d $((us % 1000000))
	cs_nap "$((us / 1000000)).$frac"
	edge=([wall]=${EPOCHREALTIME/./} [logger]=0 [charged]=0)
	for p in "${WATCH_LOGGER[@]}"; do
		cs_pid_runtime_us "$p" && edge[logger]=$((edge[logger] + REPLY))
	done
	for p in "${WATCH_CG[@]}"; do
		cs_cpu_stat "$p"
		edge[charged]=$((edge[charged] + CS_STAT[borrowed]))
	done
}
RATIO_HEADER=ratio_wall_us,ratio_logger_us,ratio_charged_us
# ratio_delta BEFORE AFTER: the CSV of RATIO_HEADER for edges BEFORE..AFTER.
ratio_delta() {
	local -n before=$1 after=$2
	REPLY=$((after[wall] - before[wall])),$((after[logger] - before[logger])),$((after[charged] - before[charged]))
}
SNAP_KEYS=(wall logger charged container logging_cgroup shim containerd nr_periods nr_throttled
	throttled nr_borrow_periods deducted dropped cpu0_idle cpu0_irq nr_cpu0_switches others_busy log_bytes
	logger_ticks sysbench cpu0_run)
# snapshot_header: the CSV columns of snapshot_delta (counts, or µs).
snapshot_header() {
	local k line=""
	for k in "${SNAP_KEYS[@]}"; do
		[[ $k == nr_* || $k == *_bytes ]] || k+=_us
		line+=${line:+,}$k
	done
	echo "$line"
}
# snapshot_delta BEFORE AFTER: CSV of snapshot AFTER minus snapshot BEFORE.
snapshot_delta() {
	local -n before=$1 after=$2
	local k a b line=""
	for k in "${SNAP_KEYS[@]}"; do
		a=${after[$k]} b=${before[$k]}
		line+=${line:+,}$((a - b))
	done
	REPLY=$line
}

# --- the agent (borrowd) -----------------------------------------------------------
AGENT_HEADER=agent_mode,agent_charged_us,agent_cpu_us,agent_quota_writes,agent_borrowed_us,agent_paid_us
AGENT_HEADER+=,agent_dropped_us,agent_regained_us,agent_debt_us
# A cell without the agent.
AGENT_NONE=none,0,0,0,0,0,0,0,0
AGENT_RUN=/run/cfsb-exp/agent
AGENT_PID="" AGENT_LOG=""
# agent_start MODE CELL: borrowd, in its auto mode (agent) or its quota mode
# (agent-quota), its log in $out/agent/CELL.log; returns once it is ready
# (its BPF programs loaded: before the cell's containers flood CPU 0). (On
# CPU 0, as this shell: what it costs is spent where the containers run.)
agent_start() {
	local mode=$1 cell=$2 how=auto
	[[ $mode == agent-quota ]] && how=quota
	mkdir -p "$AGENT_RUN" "$out/agent"
	rm -f "$AGENT_RUN/stats"
	AGENT_LOG=$out/agent/$cell.log
	"$BORROWD" --engines containerd --scan-ms 200 --mode "$how" --stats "$AGENT_RUN/stats" \
		--quota-state "$AGENT_RUN/quota-state" --pace-state "$AGENT_RUN/pace-state" >"$AGENT_LOG" 2>&1 &
	AGENT_PID=$!
	agent_wait "borrowd did not start" "ready: "
}
# agent_wait WHAT TEXT...: wait until borrowd's log has every TEXT; else
# (30 s, or borrowd ended) WHAT is the failure.
agent_wait() {
	local what=$1 i text missing t
	shift
	for ((i = 0; i < 300; i++)); do
		kill -0 "$AGENT_PID" 2>/dev/null || cs_die "$what: borrowd exited: $(tail -5 "$AGENT_LOG")"
		text=""
		# (The log exists once the background shell opened it.)
		[[ ! -f $AGENT_LOG ]] || IFS= read -r -d '' text <"$AGENT_LOG" || true
		missing=0
		for t in "$@"; do [[ $text == *"$t"* ]] || missing=1; done
		((missing)) || return 0
		cs_nap 0.1
	done
	cs_die "$what in 30 s: $(tail -5 "$AGENT_LOG")"
}
# agent_found ID...: wait until borrowd charges the containers' logging
# processes (it names a container by its full id).
agent_found() {
	local id texts=()
	for id in "$@"; do texts+=("container $id"); done
	agent_wait "borrowd did not find the containers' logging processes" "${texts[@]}"
}
# agent_stats VAR: borrowd's totals now (SIGUSR1, its --stats file), the
# JSON text into VAR; "" without the agent. (Before a snapshot: the rm's
# fork comes before the signal, and the snapshot right after the file.)
agent_stats() {
	local -n js=$1
	local i
	js=""
	[[ -n $AGENT_PID ]] || return 0
	rm -f "$AGENT_RUN/stats"
	kill -USR1 "$AGENT_PID"
	for ((i = 0; i < 500; i++)); do
		[[ -s $AGENT_RUN/stats ]] && break
		cs_nap 0.01
	done
	IFS= read -r -d '' js <"$AGENT_RUN/stats" || true
	[[ -n $js ]] || cs_die "borrowd wrote no --stats on SIGUSR1: $(tail -5 "$AGENT_LOG")"
}
# agent_delta CELL S0 S1: the agent's columns for a window from its totals
# S0 to S1 (JSON texts, kept as $out/agent/CELL.s0.json and .s1.json), the
# cell's container groups (WATCH_CG) making its quota-mode accounts; into
# REPLY as CSV ($AGENT_NONE without the agent).
agent_delta() {
	local cell=$1 t0=$2 t1=$3 cg paths=()
	REPLY=$AGENT_NONE
	[[ -n $t1 ]] || return 0
	printf '%s' "$t0" >"$out/agent/$cell.s0.json"
	printf '%s' "$t1" >"$out/agent/$cell.s1.json"
	for cg in "${WATCH_CG[@]}"; do paths+=("${cg#"$CPU_ROOT"}"); done
	# shellcheck disable=SC2016 # jq's variables
	REPLY=$(jq -rn --argjson a "$t0" --argjson b "$t1" '
		$ARGS.positional as $p |
		def mine(x): [x.groups[]? | select(.path as $q | any($p[]; . == $q))];
		def total(x; k): [mine(x)[] | .[k]] | add // 0;
		def taken(x): total(x; "borrowed_us") + total(x; "dropped_us");
		[$b.mode, $b.charged_us - $a.charged_us, $b.cpu_us - $a.cpu_us,
		 ($b.writes // 0) - ($a.writes // 0), taken($b) - taken($a),
		 total($b; "paid_us") - total($a; "paid_us"),
		 total($b; "dropped_us") - total($a; "dropped_us"),
		 total($b; "regained_us") - total($a; "regained_us"), total($b; "debt_us")] |
		map(tostring) | join(",")' --args "${paths[@]}") || cs_die "cannot read borrowd's --stats: $t1"
}
# agent_stop: borrowd ends (SIGTERM: it restores the quotas it lowered).
agent_stop() {
	[[ -n $AGENT_PID ]] || return 0
	kill -TERM "$AGENT_PID" 2>/dev/null || true
	wait "$AGENT_PID" || cs_die "borrowd failed: $(tail -5 "$AGENT_LOG")"
	AGENT_PID=""
}

# watch_containers MODE ID...: put the containers' cgroups, logging
# processes, shims and json logs under watch; in incg mode, move each logging
# process into its container's cgroup (in every hierarchy where the
# container has one: v1's cpu and cpuset alike).
watch_containers() {
	local mode=$1 id pid cg log ctrl
	shift
	WATCH_CG=() WATCH_LOGGER=() WATCH_SHIM=() WATCH_LOG=()
	for id in "$@"; do
		# nerdctl's cgroupfs layout, without another nerdctl call.
		cg=$CPU_ROOT/default/$id
		[[ -d $cg ]] || cg=$(cs_container_cgroup "$id") || cs_die "no cgroup for $id"
		WATCH_CG+=("$cg")
		pid=$(cs_logger_pid "$id") || cs_die "no logging process for container $id"
		WATCH_LOGGER+=("$pid")
		cs_ppid "$pid" && WATCH_SHIM+=("$REPLY")
		for log in /var/lib/nerdctl/*/containers/*/"$id"/"$id"-json.log; do WATCH_LOG+=("$log"); done
		[[ $mode == incg ]] || continue
		if [[ $HIER == v2 ]]; then
			echo "$pid" >"$cg/cgroup.procs"
		else
			for ctrl in /sys/fs/cgroup/*/default/"$id"; do echo "$pid" >"$ctrl/cgroup.procs"; done
		fi
	done
}

# noisy MODE QUOTA_US CMD: start a container like the study's noisy ones;
# prints its id. (incg charges nothing: its logging process is moved.)
# The agent modes' containers: stock nerdctl's.
noisy() {
	local charge=() CS_NERDCTL=$CS_NERDCTL
	case $nerdctl:$1 in
	*:agent | *:agent-quota) CS_NERDCTL=$STOCK_NERDCTL ;;
	patched:incg) charge=(--log-opt cpu-charge=off) ;;
	patched:*) charge=(--log-opt "cpu-charge=$1") ;;
	esac
	cs_run -d --cpuset-cpus 0 --cpu-period "$PERIOD_US" --cpu-quota "$2" --cpu-shares 1024 \
		"${charge[@]}" cfsb/busybox sh -c "$3"
}

# --- experiment 1 ----------------------------------------------------------------
exp1() {
	local csv=$out/exp1.csv cmd q mode id cell j0 j1 delta ratio
	# shellcheck disable=SC2034 # r0 and r1: ratio_edge's and ratio_delta's namerefs
	local -A s0 s1 r0 r1
	echo "hierarchy,cmd,quota_us,period_us,mode,$(snapshot_header),$AGENT_HEADER,$RATIO_HEADER" >"$csv"
	for cmd in "${EXP1_CMDS[@]}"; do
		for q in "${EXP1_QUOTAS_MS[@]}"; do
			shuffled "${MODES[@]}"
			for mode in "${SHUFFLED[@]}"; do
				progress "exp1 $cmd quota ${q}ms $mode"
				cell=exp1-$cmd-$q-$mode
				if is_agent "$mode"; then
					agent_start "$mode" "$cell"
					step "borrowd ready"
				fi
				id=$(noisy "$mode" "$(quota_us "$q")" "${EXP1_CMD[$cmd]}")
				step "started $id"
				watch_containers "$mode" "$id"
				step "watching"
				if is_agent "$mode"; then
					agent_found "$id"
					step "borrowd charges"
				fi
				cs_nap "$EXP1_SETTLE"
				# (borrowd's --stats after the snapshot: they take
				# tens of milliseconds.)
				period_edge || step "no period started: the window opens unaligned"
				snapshot s0
				agent_stats j0
				ratio_edge r0
				cs_nap "$EXP1_WINDOW"
				period_edge || step "no period started: the window closes unaligned"
				snapshot s1
				agent_stats j1
				ratio_edge r1
				snapshot_delta s0 s1
				delta=$REPLY
				ratio_delta r0 r1
				ratio=$REPLY
				agent_delta "$cell" "$j0" "$j1"
				agent_stop
				echo "$HIER,$cmd,$(quota_us "$q"),$PERIOD_US,$mode,$delta,$REPLY,$ratio" >>"$csv"
				step "measured"
				cs_nerdctl rm -f "$id" >/dev/null
				step "removed"
				PLAN_DONE=$((PLAN_DONE + $(exp1_cost "$mode")))
			done
		done
	done
}

# --- experiment 2 ----------------------------------------------------------------
SB_BUNDLE=/run/cfsb-exp/sysbench
# The FIFOs through which the harness and sysbench's container meet (bound
# into the container as /sync): the window of experiment 2 is sysbench's
# own running time, the harness blocked (no CPU) inside it.
SB_SYNC=/run/cfsb-exp/sysbench-sync
# sysbench_bundle: an OCI bundle of the sysbench image, for runc.
sysbench_bundle() {
	local image=$CS_IMAGES/sysbench.tar layer f
	mkdir -p "$SB_BUNDLE/rootfs" "$SB_SYNC"
	for f in start end release; do [[ -p $SB_SYNC/$f ]] || mkfifo "$SB_SYNC/$f"; done
	layer=$(tar -tf "$image" | grep '/layer.tar$')
	tar -xOf "$image" "$layer" | tar -x -C "$SB_BUNDLE/rootfs"
	mkdir -p "$SB_BUNDLE/rootfs/sync"
	(cd "$SB_BUNDLE" && rm -f config.json && runc spec)
	cp "$SB_BUNDLE/config.json" "$SB_BUNDLE/config.template.json"
}
# sysbench_runs NAME QUOTA_US OUTFILE: run sysbench SB_RUNS times in a
# container that runc starts in /default/NAME; its output into OUTFILE.
# The snapshot S0 is taken once the container waits at its start, S1 when
# its last run has ended (the container waits again until they are taken):
# the window holds sysbench's runs and nothing of the harness's. Then the
# container's bandwidth periods and the throttled ones into SB_PERIODS, as
# CSV.
sysbench_runs() {
	local name=$1 loop pid fd
	loop="read go </sync/start; i=0; while [ \$i -lt $SB_RUNS ]; do i=\$((i + 1));"
	loop+=" sysbench cpu --cpu-max-prime=10000 --threads=1 --time=$SB_TIME --percentile=95 run; done;"
	loop+=" echo end >/sync/end; read go </sync/release"
	jq --arg loop "$loop" --arg cg "/default/$name" --argjson quota "$2" --argjson period "$PERIOD_US" \
		--arg sync "$SB_SYNC" '
		.process.terminal = false | .process.args = ["sh", "-c", $loop] |
		.root.readonly = true | .linux.cgroupsPath = $cg |
		.mounts += [{destination: "/sync", type: "bind", source: $sync, options: ["rbind", "rw"]}] |
		.linux.resources.cpu = {quota: $quota, period: $period, shares: 1024, cpus: "0"}' \
		"$SB_BUNDLE/config.template.json" >"$SB_BUNDLE/config.json"
	# Detached, so that its cgroup stays until it is read, after the runs.
	runc run --detach --pid-file "$SB_BUNDLE/pid" --bundle "$SB_BUNDLE" "$name" \
		</dev/null >"$3" 2>&1 || return 1
	read -r pid <"$SB_BUNDLE/pid"
	SB_CG=$CPU_ROOT/default/$name
	# Written before sysbench runs: a burst is unused quota saved for later,
	# so none is missed in the first milliseconds.
	if ((sb_burst)); then
		if [[ $HIER == v2 ]]; then echo "$2" >"$SB_CG/cpu.max.burst"; else echo "$2" >"$SB_CG/cpu.cfs_burst_us"; fi
	fi
	# (Opening a FIFO waits for the other end: the container is at its read.)
	exec {fd}>"$SB_SYNC/start"
	agent_stats j0
	snapshot s0
	echo go >&"$fd"
	exec {fd}>&-
	# (Read-write: the open does not wait, the read ends in time even if
	# the container died.)
	exec {fd}<>"$SB_SYNC/end"
	read -r -t $((SB_RUNS * SB_TIME * 10 + 60)) -u "$fd" _ || cs_die "sysbench did not end: $(tail -5 "$3")"
	exec {fd}<&-
	snapshot s1
	agent_stats j1
	echo go >"$SB_SYNC/release"
	while [[ -e /proc/$pid ]]; do cs_nap 0.5; done
	cs_cpu_stat "$SB_CG"
	SB_PERIODS=${CS_STAT[nr_periods]},${CS_STAT[nr_throttled]}
	SB_CG=""
	runc delete -f "$name" >/dev/null 2>&1
}

# sysbench_rates FILE: the events/s of each run in sysbench's output, into
# the array RATES, and each run's 95th percentile of the event latency (ms)
# into P95S.
sysbench_rates() {
	local line
	RATES=() P95S=()
	while read -r line; do
		case $line in
		*"events per second:"*) RATES+=("${line##* }") ;;
		*"95th percentile:"*) P95S+=("${line##* }") ;;
		esac
	done <"$1"
}

# exp2_cell SET N CMD MODE: one cell of experiment 2; SET is the quotas'
# sum, % of a CPU (100: the reference study's; 80: headroom).
exp2_cell() {
	local set=$1 n=$2 cmd=$3 mode=$4 i ids=() j0 j1
	local q=$((PERIOD_US * set / 100 / n))
	local -A s0 s1
	local cell=$n-$cmd-$mode
	((set == 100)) || cell=h$set-$cell
	local name=sysbench-$cell log=$out/sysbench-$cell.log agent=0
	if ((n > 1)) && is_agent "$mode"; then
		agent=1
		agent_start "$mode" "exp2-$cell"
		step "borrowd ready"
	fi
	for ((i = 1; i < n; i++)); do ids+=("$(noisy "$mode" "$q" "${EXP2_CMD[$cmd]}")"); done
	step "started ${ids[*]}"
	if ((n > 1)); then watch_containers "$mode" "${ids[@]}"; else WATCH_CG=() WATCH_LOGGER=() WATCH_SHIM=() WATCH_LOG=(); fi
	step "watching"
	if ((agent)); then
		agent_found "${ids[@]}"
		step "borrowd charges"
	fi
	cs_nap "$EXP2_SETTLE"
	sysbench_runs "$name" "$q" "$log" || cs_die "sysbench failed: $(tail -5 "$log")"
	local sb_periods=$SB_PERIODS
	snapshot_delta s0 s1
	local delta=$REPLY
	agent_delta "exp2-$cell" "$j0" "$j1"
	agent=$REPLY
	agent_stop
	step "sysbench done"
	[[ ${#ids[@]} -eq 0 ]] || cs_nerdctl rm -f "${ids[@]}" >/dev/null
	step "removed"
	sysbench_rates "$log"
	[[ ${#RATES[@]} -eq $SB_RUNS && ${#P95S[@]} -eq $SB_RUNS ]] ||
		cs_die "sysbench printed ${#RATES[@]} results and ${#P95S[@]} percentiles, expected $SB_RUNS: $log"
	for i in "${!RATES[@]}"; do
		echo "$HIER,$set,$n,$cmd,$mode,$((i + 1)),${RATES[i]},${P95S[i]}" >>"$out/exp2_runs.csv"
	done
	echo "$HIER,$set,$n,$cmd,$mode,$q,$PERIOD_US,$SB_RUNS,$SB_TIME,$delta,$sb_periods,$agent" >>"$out/exp2.csv"
}

# exp2_grid NS...: the cells of experiment 2 for those N, "set n cmd mode"
# per line, into the array EXP2_PLAN. N = 1 has no noisy container:
# measured once, as cmd1 `off`. For N > 1 the modes in this boot's order
# (shuffled), each mode's cmd1 baseline first, then that mode's cells: the
# baseline is measured as often as the modes, and between the cells, so that
# drift in a boot shows in the ratios' spread. Then the headroom cells
# (quotas adding up to HEADROOM_PCT % of CPU 0) of EXP2_HEADROOM_NS that are
# among NS, in a new order per N (no baseline: their measure is sysbench's
# share against its fair share).
exp2_grid() {
	local n cmd mode
	EXP2_PLAN=()
	for n in "$@"; do
		if ((n == 1)); then
			EXP2_PLAN+=("100 1 cmd1 off")
			continue
		fi
		shuffled "${EXP2_MODES[@]}"
		for mode in "${SHUFFLED[@]}"; do
			for cmd in "${EXP2_CMDS[@]}"; do EXP2_PLAN+=("100 $n $cmd $mode"); done
		done
	done
	for n in "${EXP2_HEADROOM_NS[@]}"; do
		[[ " $* " == *" $n "* ]] || continue
		shuffled "${EXP2_MODES[@]}"
		for mode in "${SHUFFLED[@]}"; do
			for cmd in "${EXP2_HEADROOM_CMDS[@]}"; do EXP2_PLAN+=("$HEADROOM_PCT $n $cmd $mode"); done
		done
	done
}

# exp2: experiment 2, the cells of EXP2_PLAN.
exp2() {
	local set n cmd mode cell
	echo "hierarchy,quota_sum_pct,n,cmd,mode,quota_us,period_us,sysbench_runs,sysbench_time_s,$(snapshot_header),sysbench_nr_periods,sysbench_nr_throttled,$AGENT_HEADER" >"$out/exp2.csv"
	echo "hierarchy,quota_sum_pct,n,cmd,mode,run,events_per_s,p95_ms" >"$out/exp2_runs.csv"
	sysbench_bundle
	for cell in "${EXP2_PLAN[@]}"; do
		read -r set n cmd mode <<<"$cell"
		progress "exp2 quotas ${set}% N=$n $cmd $mode"
		exp2_cell "$set" "$n" "$cmd" "$mode"
		PLAN_DONE=$((PLAN_DONE + $(exp2_cost "$n" "$mode")))
	done
}

# --- logging throughput ------------------------------------------------------------
throughput() {
	local csv=$out/throughput.csv w mode id log size0 size1 t0 t1
	echo "hierarchy,window,mode,window_us,log_bytes" >"$csv"
	for ((w = 1; w <= TP_WINDOWS; w++)); do
		for mode in off process; do
			progress "throughput $mode $w/$TP_WINDOWS"
			id=$(cs_run -d --cpuset-cpus 0 --log-opt "cpu-charge=$mode" cfsb/busybox yes)
			[[ -n $id ]] || cs_die "cannot start the throughput container"
			log=$(cs_nerdctl inspect -f '{{.LogPath}}' "$id")
			cs_nap 1
			size0=$(stat -c %s "$log") t0=${EPOCHREALTIME/./}
			cs_nap "$TP_WINDOW"
			size1=$(stat -c %s "$log") t1=${EPOCHREALTIME/./}
			echo "$HIER,$w,$mode,$((t1 - t0)),$((size1 - size0))" >>"$csv"
			cs_nerdctl rm -f "$id" >/dev/null
		done
	done
	PLAN_DONE=$((PLAN_DONE + $(tp_cost)))
}

# --- main --------------------------------------------------------------------------
# The plan: how many cells, and their planned seconds.
EXP1_CELLS=0 EXP2_CELLS=0 TP_CELLS=0
if has_part exp1; then
	for m in "${MODES[@]}"; do
		EXP1_CELLS=$((EXP1_CELLS + ${#EXP1_CMDS[@]} * ${#EXP1_QUOTAS_MS[@]}))
		plan $((${#EXP1_CMDS[@]} * ${#EXP1_QUOTAS_MS[@]} * $(exp1_cost "$m")))
	done
fi
EXP2_NS_RUN=()
if has_part exp2; then
	EXP2_NS_RUN=("${EXP2_NS[@]}")
elif has_part sysbench1; then
	EXP2_NS_RUN=(1)
fi
if [[ ${#EXP2_NS_RUN[@]} -gt 0 ]]; then
	exp2_grid "${EXP2_NS_RUN[@]}"
	for cell in "${EXP2_PLAN[@]}"; do
		read -r _ n _ mode <<<"$cell"
		plan "$(exp2_cost "$n" "$mode")"
		EXP2_CELLS=$((EXP2_CELLS + 1))
	done
fi
if has_part throughput; then
	plan "$(tp_cost)"
	TP_CELLS=$((2 * TP_WINDOWS))
fi
if ((plan_only)); then
	echo "$PLAN_TOTAL"
	exit 0
fi

((AGENT == 0)) || [[ -x $BORROWD ]] || cs_die "no borrowd at $BORROWD (make -C tools)"
HIER=$(cs_hierarchy)
# This kernel's optional modules, where vm-run.sh shares them: the lsmod
# loop lists what is loaded, as on the reference study's desktop. (Some need
# hardware the guest lacks and do not load; lsmod counts those that did.)
MODULES_ROOT=/run/cfsb-modules
if [[ -d $MODULES_ROOT/lib/modules/$(uname -r) ]]; then
	mapfile -t mods < <(find "$MODULES_ROOT/lib/modules/$(uname -r)" -name '*.ko*' -printf '%f\n' | sed 's/\.ko.*//')
	# One modprobe for all (a fork costs much under emulation); it goes on
	# past a module that does not load.
	[[ ${#mods[@]} -eq 0 ]] || modprobe -q -a -d "$MODULES_ROOT" "${mods[@]}" 2>/dev/null || true
fi
# Everything on CPU 0: this shell and what it starts (containerd, whose
# shims and logging processes inherit it; runc); the containers get cpuset 0.
# (The host script boots four CPUs, as the reference study's machine had:
# the scheduler's time slice grows with the number of CPUs.)
taskset -pc 0 $$ >/dev/null
cs_start --cpus 0
trap cs_stop EXIT
cs_load_images busybox
CPU_ROOT=$(cs_cpu_root)
LOGGING_CG=$CPU_ROOT/$CS_CONTAINERD_CGROUP
read -r CONTAINERD_PID <"$CS_STATE/containerd.pid"

# What the run was: for the report.
{
	echo "{"
	echo "  \"hierarchy\": \"$HIER\","
	echo "  \"kernel\": \"$(uname -r)\","
	# (The logging cgroup: on v1 the hierarchy's root and its first level
	# may not be cpu controller groups with the file.)
	echo "  \"borrowing\": $([[ -e $LOGGING_CG/cpu.cfs.borrowing_us ]] && echo true || echo false),"
	echo "  \"nerdctl\": \"$nerdctl $("$CS_NERDCTL" --version | awk '{print $3}')\","
	# The agent modes': stock nerdctl, and borrowd.
	if ((AGENT)); then
		echo "  \"agent_nerdctl\": \"stock $("$STOCK_NERDCTL" --version | awk '{print $3}')\","
		echo "  \"agent\": \"borrowd --engines containerd --scan-ms 200\","
		echo "  \"agent_borrowd\": \"$BORROWD\", \"agent_borrowd_sha256\": \"$(sha256sum <"$BORROWD" | cut -c1-64)\","
	fi
	echo "  \"cpus\": $(nproc --all),"
	echo "  \"cpu_used\": 0,"
	# What the lsmod loop lists: the modules loaded above, and a header.
	echo "  \"lsmod_lines\": $(lsmod | wc -l),"
	echo "  \"tier\": \"$tier\","
	echo "  \"parts\": \"$parts\","
	echo "  \"modes\": \"$modes\", \"exp2_modes\": \"${exp2_modes:-$modes}\","
	echo "  \"runtime\": \"$CS_RUNTIME $(runc --version | head -1 | awk '{print $3}')\","
	echo "  \"containerd\": \"$(containerd --version | awk '{print $3}')\","
	echo "  \"sysbench\": \"$(sysbench --version | awk '{print $2}')\","
	echo "  \"exp1_settle_s\": $EXP1_SETTLE, \"exp1_window_s\": $EXP1_WINDOW, \"exp1_window_edges\": \"period\","
	echo "  \"exp1_agent_window_edges\": \"period\", \"exp1_ratio_edges\": \"random\","
	echo "  \"sysbench_runs\": $SB_RUNS, \"sysbench_time_s\": $SB_TIME,"
	echo "  \"sysbench_burst\": $( ((sb_burst)) && echo true || echo false),"
	echo "  \"throughput_windows\": $TP_WINDOWS, \"throughput_window_s\": $TP_WINDOW,"
	echo "  \"seed\": $seed, \"headroom_pct\": $HEADROOM_PCT,"
	echo "  \"exp1_cmds\": \"${EXP1_CMDS[*]}\", \"exp1_quotas_ms\": \"${EXP1_QUOTAS_MS[*]}\","
	echo "  \"exp2_n\": \"${EXP2_NS[*]}\", \"exp2_cmds\": \"${EXP2_CMDS[*]}\","
	echo "  \"exp2_headroom_n\": \"${EXP2_HEADROOM_NS[*]}\", \"exp2_headroom_cmds\": \"${EXP2_HEADROOM_CMDS[*]}\","
	echo "  \"planned_s\": $PLAN_TOTAL,"
	echo "  \"cells\": {\"exp1\": $EXP1_CELLS, \"exp2\": $EXP2_CELLS, \"throughput\": $TP_CELLS}"
	echo "}"
} >"$out/meta.json"
progress "started"

has_part exp1 && exp1
[[ ${#EXP2_NS_RUN[@]} -eq 0 ]] || exp2
has_part throughput && throughput
progress "done"
