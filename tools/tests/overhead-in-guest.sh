#!/usr/bin/env bash
# borrowd's own CPU with N containers, in the guest (scripts/vm-run.sh):
# each "container" is Podman's metadata for an init process in a cgroup of
# its own with a quota (--quota US per 100 ms, default 50000), and its
# conmon, so that borrowd finds N workers and charges them every 100 ms,
# as it would on a node; measured from 12 s after borrowd has found them
# (in its first 10 s it reads the metadata every second), over --seconds
# (default 30: borrowd runs with --rescan-s 30, ten times as often as by
# default, so that a window holds a read of the metadata and shows its
# cost). The
# containers sleep, but for the first M (--logging M): their init is a busy
# loop and their conmon works US of every 50 ms (--work US, default 5000:
# a logging process), so that borrowd charges them, and in quota mode
# lowers and restores their quotas. With --daemon NAME borrowd also looks
# for a shared daemon NAME (none runs: the cost of its programs on every
# read and write).
# With --engine cri the containers are containerd CRI's instead: an init
# in the container's group, a child of its shim, which records it in
# init.pid, and one daemon
# (tools/tests/cri_daemon.py, borrowd --daemon PID) that holds every
# container's FIFOs and log file (kubelet's link to it too) and copies its
# lines: a logging container's init writes a line every 50 ms, on which
# the daemon works US (--work); borrowd charges the daemon's threads by
# the thread rule.
#
#   overhead-in-guest.sh [--seconds S] [--logging M] [--quota US] [--work US]
#                        [--mode MODE] [--daemon NAME] [--engine podman|cri]
#                        [--perf] N...  (default: 10 100 500)
# --mode is borrowd's (auto, kernel or quota). Prints per N borrowd's CPU
# (ms per s), its BPF programs' run time (kernel.bpf_stats_enabled, ms per
# s, and per program the runs a second and ns a run), the two together
# (per 100 containers too), their share of all the CPU time the guest's
# tasks used (under TCG a busy guest's clock runs while its other
# vCPUs are emulated, which inflates every task's CPU time alike: the share
# compares across runs, the ms/s only between runs as busy), its quota
# writes per second, the quotas lowered at the end, and the quota mode's
# reads for its writes a second: of nr_periods, looking for a period's
# start (looks/s), counts of a group's runnable threads (counts/s), and
# every read of a group's usage (usage/s, nr_periods' included), the
# looks its rounds spared where the BPF programs' count of a group's runs
# showed nothing a look could pay (spared/s), in its rounds (rounds/s: a
# round is its work and 100 ms of sleep), its reads of the engines'
# metadata in the window (scans) and the CPU time a read took (ms/scan:
# the daemons' files included, with --daemon), and the window (s) the rates
# divide by: the time between the two --stats files the numbers come from
# (borrowd's CPU time, its programs' run time and its counts, each taken at
# once), not the time asked for, which a busy guest stretches. Exits 1
# when a line's rounds exceed what its window allows.
# With --perf, where the agent's CPU goes: perf(1) samples borrowd from
# before the window to after it (cpu-clock, 499 Hz, in the kernel too),
# and its functions that took 0.7 % or more of the samples follow each
# line ("# perf"); the sampling adds to what the line counts, so a table's
# boots run without it.
set -uo pipefail

secs=30 logging=0 mode=auto quota=50000 work=5000 daemon=() settle=12 engine=podman profile=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--seconds) secs=$2; shift 2 ;;
	--logging) logging=$2; shift 2 ;;
	--mode) mode=$2; shift 2 ;;
	--quota) quota=$2; shift 2 ;;
	--work) work=$2; shift 2 ;;
	--daemon) daemon=(--daemon "$2"); shift 2 ;;
	--engine) engine=$2; shift 2 ;;
	--perf) profile=1; shift ;;
	-h | --help) sed -n '2,53p' "$0" | cut -c3-; exit 0 ;;
	-*) echo "unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[[ $# -gt 0 ]] || set -- 10 100 500
[[ $engine == podman || $engine == cri ]] || { echo "--engine: podman or cri" >&2; exit 2; }
if ((profile)) && ! command -v perf >/dev/null; then
	echo "# --perf: no perf(1) here (Debian: linux-perf); the lines without a profile"
	profile=0
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/guest-check.sh
source "$root/scripts/guest-check.sh"
cfsb_guest_only
# shellcheck source=tools/tests/lib.sh
source "$root/tools/tests/lib.sh"
bin=${BORROWD:-$root/.build/tools/borrowd}
run=$(mktemp -d)
cg=$(cpu_root)
pids=()
stats_was=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	local p
	# The containers killed outright: a bash that a SIGTERM finds in
	# its busy loop may say that the loop's arithmetic failed first.
	((${#pids[@]})) && kill -KILL "${pids[@]}" 2>/dev/null
	[[ ${dpid:-} ]] && kill "$dpid" 2>/dev/null
	wait 2>/dev/null
	sysctl -qw kernel.bpf_stats_enabled="$stats_was" 2>/dev/null
	rm -rf "$run"
}
trap cleanup EXIT


# The CPU time's unit in /proc/stat, read once: nothing in a window forks.
clk_tck=$(getconf CLK_TCK)
# snap FILE: borrowd's totals now, into FILE: its --stats (SIGUSR1), which
# carry the time they were taken, its CPU time and its BPF programs' run
# time at that time; in BUSY the CPU time all CPUs spent on anything but
# idling (ns) at the signal. Builtins only from the read of /proc/stat to
# the signal: on a busy guest a forked command runs late (a python3 among
# 200 busy tasks takes seconds), and rates divide by the files' own times,
# not by the time asked for.
snap() {
	local user nice system irq softirq steal i
	rm -f "$run/stats.json"
	read -r _ user nice system _ _ irq softirq steal _ </proc/stat
	kill -USR1 "$bpid"
	BUSY=$(((user + nice + system + irq + softirq + steal) * 1000000000 / clk_tck))
	for ((i = 0; i < 6000; i++)); do
		[[ -s $run/stats.json ]] && break
		read -r -t 0.01 -u 8
	done
	[[ -s $run/stats.json ]] || {
		echo "# borrowd wrote no --stats in 60 s of SIGUSR1: $(tail -3 "$run/borrowd.log")" >&2
		exit 1
	}
	mv "$run/stats.json" "$1"
}
# report BEFORE AFTER BUSY0 BUSY1 N M: the table's line from two snaps, on
# stdout; per program, its runs/s and ns/run, and the window, on stderr.
# Fails when the quota mode ran more rounds than its sleeps allow (a
# round, then --interval-ms 100 of sleep; a signal cuts one sleep short):
# rates over a window that is not the files' own.
report() {
	python3 - "$@" "$fmt" <<'PY'
import json
import sys

a, b = (json.load(open(f)) for f in sys.argv[1:3])
busy0, busy1, n, m = (int(x) for x in sys.argv[3:7])
fmt = sys.argv[7].replace("\\n", "")
secs = b["time_s"] - a["time_s"]
cpu_ms = (b["cpu_us"] - a["cpu_us"]) / 1e3 / secs
bpf_ms = (b.get("bpf_run_time_ns", 0) - a.get("bpf_run_time_ns", 0)) / 1e6 / secs
# /proc/stat counts in ticks (10 ms): a share of less than 1 s of busy
# time (a quiet guest) would say nothing.
busy = busy1 - busy0
share = f"{100 * (cpu_ms + bpf_ms) * secs * 1e6 / busy:.2f}" if busy >= 1e9 else "-"
scans = b.get("scans", 0) - a.get("scans", 0)
def rate(key):
    return (b.get(key, 0) - a.get(key, 0)) / secs
print(fmt % (n, min(m, n), f"{cpu_ms:.3f}", f"{bpf_ms:.3f}", f"{cpu_ms + bpf_ms:.3f}",
             f"{(cpu_ms + bpf_ms) * 100 / n:.3f}", share, f"{rate('writes'):.1f}",
             b.get("lowered_groups", 0), f"{rate('period_looks'):.0f}",
             f"{rate('runnable_counts'):.0f}", f"{rate('looks'):.0f}",
             f"{rate('looks_spared'):.0f}", f"{rate('rounds'):.1f}", scans,
             f"{(b['scan_cpu_us'] - a['scan_cpu_us']) / 1e3 / scans:.1f}" if scans else "-",
             f"{secs:.3f}"))
for name, p in sorted(b.get("bpf_programs", {}).items()):
    q = a.get("bpf_programs", {}).get(name, {"run_time_ns": 0, "run_cnt": 0})
    runs = p["run_cnt"] - q["run_cnt"]
    print(f"# bpf {name}: {runs / secs:.0f} runs/s, "
          f"{(p['run_time_ns'] - q['run_time_ns']) / max(runs, 1):.0f} ns/run", file=sys.stderr)
rounds = b.get("rounds", 0) - a.get("rounds", 0)
if rounds > secs * 10 + 2:
    print(f"# {rounds} rounds in {secs:.3f} s: more than its sleeps allow", file=sys.stderr)
    sys.exit(1)
PY
}

# userdata N: container N's directory in its engine's metadata, into $dir
# (Podman's userdata, or the containerd shim's task directory), and the
# file there that names its init, into $pidfile.
userdata() {
	if [[ $engine == cri ]]; then
		printf -v dir '%s/containerd/io.containerd.runtime.v2.task/k8s.io/c%063d' "$run" "$1"
		pidfile=$dir/init.pid
	else
		printf -v dir '%s/containers/storage/overlay-containers/c%063d/userdata' "$run" "$1"
		pidfile=$dir/pidfile
	fi
}
# fifo N: container N's stdout FIFO, which the CRI daemon holds, into $fifo.
fifo() {
	printf -v fifo '%s/containerd/io.containerd.grpc.v1.cri/containers/c%063d/io/1/c%063d-stdout' \
		"$run" "$1" "$1"
}
# set_quota DIR: the group's quota, --quota per 100 ms.
set_quota() {
	if [[ -e $1/cpu.max ]]; then
		echo "$quota 100000" >"$1/cpu.max"
	else
		echo 100000 >"$1/cpu.cfs_period_us"
		echo "$quota" >"$1/cpu.cfs_quota_us"
	fi
}

made=0 inits=0 status=0
mkfifo "$run/never"
exec 8<>"$run/never"
sysctl -qw kernel.bpf_stats_enabled=1 || echo "# no kernel.bpf_stats_enabled: BPF run time 0"
engines=podman work_is="conmon works $work us per 50 ms"
if [[ $engine == cri ]]; then
	# The daemon in a group of its own, as containerd in its service's.
	mkdir -p "$cg/ovh-daemon"
	coproc CRI { exec python3 "$root/tools/tests/cri_daemon.py" "$run" "$work"; }
	dpid=$CRI_PID
	echo "$dpid" >"$cg/ovh-daemon/cgroup.procs"
	daemon=(--daemon "$dpid") engines=containerd
	work_is="CRI: the daemon works $work us per line, a line per 50 ms at most"
fi
echo "# kernel $(uname -r), cgroup $(stat -fc %T /sys/fs/cgroup), $(nproc) CPUs; borrowd --mode $mode;" \
	"quotas $quota us per 100 ms; $logging logging containers ($work_is);" \
	"${daemon[*]:-no daemon}; over ${secs} s"
fmt='%10s %8s %11s %11s %11s %14s %10s %10s %8s %8s %10s %8s %9s %8s %6s %8s %9s\n'
# shellcheck disable=SC2059 # the format is ours
printf "$fmt" containers logging "CPU (ms/s)" "BPF (ms/s)" "sum (ms/s)" "per 100 (ms/s)" "% of busy" writes/s lowered looks/s counts/s usage/s spared/s rounds/s scans ms/scan "window (s)"
for n in "$@"; do
	# The containers made so far stopped while more are made: busy ones
	# would slow the set-up down (a node is no busier while it starts
	# containers than it is when they run).
	((${#pids[@]})) && kill -STOP "${pids[@]}" 2>/dev/null
	rm -f "$run/go"
	# The directories with one mkdir, not one a container. A container's
	# processes are subshells of this script (a fork, no exec): a
	# container costs the set-up little CPU, whose 500 would take an hour
	# under emulation otherwise. Waits are reads of a FIFO nobody writes,
	# with a timeout (no sleep(1) to fork and exec).
	new=()
	for ((i = made; i < n; i++)); do
		userdata "$i"
		new+=("$dir" "$cg/ovh-$i")
	done
	((${#new[@]})) && mkdir -p "${new[@]}"
	# The CRI daemon's FIFOs and log files first: the inits write there.
	if [[ $engine == cri ]]; then
		echo "make $n" >&"${CRI[1]}"
		reply=
		read -r -t 600 reply <&"${CRI[0]}"
		[[ $reply == "made $n" ]] || { echo "# the CRI daemon said: ${reply:-nothing in 600 s}" >&2; exit 1; }
	fi
	for ((; made < n; made++)); do
		userdata "$made"
		set_quota "$cg/ovh-$made"
		if [[ $engine == cri ]]; then
			# The container's shim, and its child the container's
			# init, which the shim recorded; a logging one, busy,
			# writes a line every 50 ms (if its quota lets it run
			# then). One shim a container, as containerd starts
			# them: borrowd looks among a shim's children for a
			# binary logger.
			fifo "$made"
			(
				exec 9<>"$run/never"
				(
					if ((made < logging)); then
						until [[ -e $run/go ]]; do read -r -t 1 -u 9; done
					fi
					echo "$BASHPID" >"$cg/ovh-$made/cgroup.procs"
					echo "$BASHPID" >"$pidfile"
					((made < logging)) || while :; do read -r -t 3600 -u 9; done
					exec 3>"$fifo"
					while :; do
						t=$((${EPOCHREALTIME/./} + 50000))
						while ((${EPOCHREALTIME/./} < t)); do :; done
						echo "a line of container $made" >&3
					done
				) &
				while :; do read -r -t 3600 -u 9; done
			) &
			pids+=("$!")
			continue
		fi
		# conmon, and its child the container's init (borrowd takes a
		# conmon that is the parent of the container's first process),
		# which joins the container's group and writes the pid file.
		if ((made < logging)); then
			# Busy once every container is made ($run/go): the setup
			# is not slowed by them.
			(
				exec 9<>"$run/never"
				until [[ -e $run/go ]]; do read -r -t 1 -u 9; done
				(
					echo "$BASHPID" >"$cg/ovh-$made/cgroup.procs"
					echo "$BASHPID" >"$pidfile"
					while :; do :; done
				) &
				while :; do
					t=$((${EPOCHREALTIME/./} + work))
					while ((${EPOCHREALTIME/./} < t)); do :; done
					read -r -t 0.05 -u 9
				done
			) &
		else
			(
				exec 9<>"$run/never"
				(
					echo "$BASHPID" >"$cg/ovh-$made/cgroup.procs"
					echo "$BASHPID" >"$pidfile"
					while :; do read -r -t 3600 -u 9; done
				) &
				while :; do read -r -t 3600 -u 9; done
			) &
		fi
		pids+=("$!")
		echo "$!" >"$dir/conmon.pid"
	done
	# The logging containers start; every init, once it has written its
	# pid file.
	touch "$run/go"
	kill -CONT "${pids[@]}" 2>/dev/null
	for (( ; inits < made; inits++)); do
		userdata "$inits"
		until [[ -s $pidfile ]]; do read -r -t 0.01 -u 8; done
		read -r p <"$pidfile"
		pids+=("$p")
	done
	CGBORROW_RUNDIR=$run taskset -c 1 "$bin" --engines "$engines" --mode "$mode" "${daemon[@]}" --rescan-s 30 \
		--stats "$run/stats.json" --quota-state "$run/quota" >"$run/borrowd.log" 2>&1 &
	bpid=$!
	# Started when it has found every worker (with CRI: every container
	# whose FIFOs the daemon holds), and past its first 10 s (from its
	# first scan), when it reads the metadata every second (for loggers
	# that start after their containers): what it costs from then on.
	found_re="works for"
	[[ $engine == cri ]] && found_re="reads for container"
	for ((i = 0; i < 300; i++)); do
		[[ $(grep -c "$found_re" "$run/borrowd.log") -ge $n ]] && break
		read -r -t 0.1 -u 8
	done
	found=${EPOCHREALTIME/./}
	# perf starts before the window (it reads the kernel's symbols first,
	# for seconds under emulation) and stops after it.
	if ((profile)); then
		perf record -q -e cpu-clock -F 499 -g -p "$bpid" -o "$run/perf.data" >/dev/null 2>&1 &
		ppid=$!
	fi
	while ((${EPOCHREALTIME/./} < found + settle * 1000000)); do read -r -t 0.5 -u 8; done
	snap "$run/stats0.json"
	b0=$BUSY
	read -r -t "$secs" -u 8
	snap "$run/stats1.json"
	b1=$BUSY
	if ((profile)); then
		kill -INT "$ppid"
		wait "$ppid"
	fi
	kill -TERM "$bpid"
	wait "$bpid"
	report "$run/stats0.json" "$run/stats1.json" "$b0" "$b1" "$n" "$logging" 2>"$run/bpf.txt" || status=1
	cat "$run/bpf.txt"
	((profile)) && perf report -i "$run/perf.data" --stdio --no-children --sort dso,sym -g none \
		--percent-limit 0.7 2>/dev/null | grep -v '^#' | grep . | sed 's/^/# perf /'
	# What borrowd said of quotas it restored or could not write, if anything.
	grep "restored\|cannot" "$run/borrowd.log" | sed 's/^/# /' | head -5 || true
done
exit "$status"
