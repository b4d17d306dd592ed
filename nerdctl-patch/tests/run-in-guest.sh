#!/usr/bin/env bash
# The checks are bash conditions evaluated later, hence single quotes.
# shellcheck disable=SC2016,SC2317
# Integration tests of the patched nerdctl's logging process, run inside the
# guest (scripts/vm-run.sh) with real containerd, runc or crun and the
# images of scripts/build_images.py. TAP on stdout; measurements as
# "# info:" lines.
#
#   run-in-guest.sh [--runtime runc|crun] [--cgroup-manager cgroupfs|systemd]
#                   [--stock-kernel] [--only LIST]
#
# On the patched kernel: the logger charges the container (modes process,
# thread, off), container CPU + charged CPU stays at the quota, log content
# is byte-identical whatever the mode, the last lines of a paced flood are
# logged when the task is deleted (--rm, rm -f, start), nothing runs where
# there is no quota, and no container can write any cpu.cfs.borrowing_us,
# even with CAP_SYS_ADMIN. With --stock-kernel (no cpu.cfs.borrowing_us):
# the logger logs everything and warns about nothing. --only runs the
# sections of a comma-separated list (charge, logs, tail, idle, parent,
# config, throughput, escape).
set -uo pipefail

runtime=runc manager=cgroupfs stock=0 only=
while [[ $# -gt 0 ]]; do
	case $1 in
	--runtime) runtime=$2; shift 2 ;;
	--cgroup-manager) manager=$2; shift 2 ;;
	--stock-kernel) stock=1; shift ;;
	--only) only=$2; shift 2 ;;
	-h | --help) sed -n '4,20p' "$0" | cut -c3-; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done

# shellcheck source=scripts/container-stack.sh
source "$(dirname "$0")/../../scripts/container-stack.sh"

n=0 failed=0
# check NAME CONDITION [DETAIL]: one TAP line.
check() {
	n=$((n + 1))
	if eval "$2"; then
		echo "ok $n $1"
	else
		echo "not ok $n $1${3:+ # $3}"
		failed=$((failed + 1))
	fi
}
info() { echo "# info: $*"; }
# section NAME: whether to run the section NAME (--only LIST).
section() { [[ -z $only || ,$only, == *,"$1",* ]]; }

quota_run() {
	cs_run -d --cpuset-cpus 0 --cpu-quota 50000 --cpu-period 100000 "$@"
}

# Expected content of the flood container's logs.
flood_cmd='seq 1 60000; seq 1 3000 >&2'
seq 1 60000 >/tmp/want.out
seq 1 3000 >/tmp/want.err

# logs_match ID: the container's logs, per stream, are what it printed,
# once its logging process has copied everything and exited.
logs_match() {
	local logger i
	logger=$(cs_logger_pid "$1") || true
	cs_nerdctl wait "$1" >/dev/null
	for ((i = 0; i < 600; i++)); do
		[[ -n $logger && -d /proc/$logger ]] || break
		cs_nap 0.1
	done
	cs_nerdctl logs "$1" >/tmp/got.out 2>/tmp/got.err
	cmp -s /tmp/got.out /tmp/want.out && cmp -s /tmp/got.err /tmp/want.err
}

# Tries to write every cpu.cfs.borrowing_us the container can find, after
# trying to get a writable cgroup filesystem; prints what it managed.
escape_script='
mount -o remount,rw /sys/fs/cgroup 2>/dev/null && echo remounted
mkdir -p /tmp/cg
{ mount -t cgroup2 none /tmp/cg || mount -t cgroup -o cpu,cpuacct none /tmp/cg; } 2>/dev/null && echo mounted
tried=0
for f in $(find /sys/fs/cgroup /tmp/cg -name cpu.cfs.borrowing_us 2>/dev/null); do
	tried=$((tried + 1))
	echo 1000 2>/dev/null >"$f" && echo "wrote $f"
done
echo "tried $tried"
'

echo "TAP version 13"
cs_start --runtime "$runtime" --cgroup-manager "$manager" --cpus 0
cs_load_images busybox
hier=$(cs_hierarchy)
info "cgroup $hier, runtime $runtime, $manager driver, kernel $(uname -r)$( ((stock)) && echo ' (stock)')"

if ((stock)); then
	id=$(quota_run cfsb/busybox sh -c "$flood_cmd")
	check "stock kernel: logs complete and in order" 'logs_match "$id"'
	# A kernel without the file is an expected condition: a debug message.
	warnings=$(grep -c "cpu-charge" "$CS_STATE/containerd.log")
	check "stock kernel: no warning from the logger in containerd's log" '[[ $warnings -eq 0 ]]' \
		"$warnings: $(grep "cpu-charge" "$CS_STATE/containerd.log" | head -3)"
	cs_stop
	echo "1..$n"
	exit $((failed > 0))
fi

# --- the charge follows the load ---------------------------------------------
if section charge; then
	declare -A share
	for mode in process thread off default; do
		opt=(--log-opt "cpu-charge=$mode")
		[[ $mode == default ]] && opt=()
		id=$(quota_run "${opt[@]}" cfsb/busybox yes)
		cs_nap 2
		cs_measure "$id" 5
		read -r a b c <<<"$REPLY"
		share[$mode]="$a $b $c"
		info "yes, quota 50/100 ms, cpu-charge=$mode: logger A=$(cs_pct "$a")%" \
			"charged B=$(cs_pct "$b")% container C=$(cs_pct "$c")%" \
			"B+C=$(cs_pct $((b + c)))% B/A=$((a ? b * 100 / a : 0))%"
		cs_nerdctl rm -f "$id" >/dev/null
	done
	read -r a b c <<<"${share[process]}"
	check "process mode: the logger's CPU is charged (B/A >= 90%)" '((b > 0 && b * 10 >= a * 9))' \
		"A=$a B=$b"
	check "process mode: container + charged CPU within the quota (35% <= B+C <= 55%)" \
		'((b + c >= 3500 && b + c <= 5500))' "B+C=$((b + c))"
	read -r a b c <<<"${share[thread]}"
	check "thread mode: part of the logger's CPU is charged (0 < B <= A)" '((b > 0 && b <= a + 100))' \
		"A=$a B=$b"
	read -r a b c <<<"${share[off]}"
	check "off: nothing is charged, container + logger CPU exceed the quota" '((b == 0 && a + c > 5500))' \
		"A=$a B=$b C=$c"
	read -r a b c <<<"${share[default]}"
	check "default mode charges like process mode" '((b > 0 && b * 10 >= a * 9))' "A=$a B=$b"
fi

# --- logs are untouched by accounting ------------------------------------------
if section logs; then
	for mode in off process thread; do
		id=$(quota_run --log-opt "cpu-charge=$mode" cfsb/busybox sh -c "$flood_cmd")
		check "cpu-charge=$mode: logs complete and in order" 'logs_match "$id"'
		cs_nerdctl rm -f "$id" >/dev/null
	done
	check "an invalid cpu-charge is refused" \
		'! cs_run --log-opt cpu-charge=sometimes cfsb/busybox true >/dev/null 2>&1'
fi

# --- the last lines of a paced flood are logged when the task is deleted -----
# The shim closes the pipes and sends SIGTERM to the logger as soon as the
# task is deleted; the logger, paced behind the container, still has up to a
# pipe of lines to copy. The container's 11000 lines (55 kB) fit in the
# pipe: it has written them all at once. A quota of 100 ms per 1 s period
# keeps the logger, paced by the debt, far behind, and would keep it waiting
# for three periods once the container's tasks are gone: long enough for the
# delete (under emulation, seconds after the exit) to come first.
if section tail; then
	tail_n=11000
	seq 1 "$tail_n" >/tmp/want.tail
	tail_run() { cs_run --cpuset-cpus 0 --cpu-quota 100000 --cpu-period 1000000 "$@"; }
	# json_numbers FILE: the lines of a json-file log of numbers, in order.
	json_numbers() { sed -n 's/^{"log":"\([0-9]*\)\\n","stream":"stdout".*/\1/p' "$1"; }
	# tail_check WHAT FILE: every line, in order, the last one included.
	tail_check() {
		local got last
		json_numbers "$2" >/tmp/got.tail
		got=$(wc -l </tmp/got.tail) last=$(tail -n 1 /tmp/got.tail)
		info "$1: $tail_n lines written, $got logged, the last one $last"
		check "$1 of a paced flood: all $tail_n lines logged, in order, the last one included" \
			'cmp -s /tmp/got.tail /tmp/want.tail' "$got lines logged, the last one '$last'"
	}

	# nerdctl run --rm: the container exits and is deleted at once (nerdctl
	# runs the logger itself, and signals it before closing the pipes).
	log=/run/cfsb-tail-rm.json
	rm -f "$log"
	t0=${EPOCHREALTIME/./}
	tail_run --rm --log-opt "log-path=$log" cfsb/busybox seq 1 "$tail_n" >/tmp/rm.out 2>&1
	info "--rm: $((${EPOCHREALTIME/./} - t0)) us"
	tail_check "--rm" "$log"

	# nerdctl rm -f of a running container whose output is all in the pipe.
	log=/run/cfsb-tail-rmf.json
	rm -f "$log"
	id=$(tail_run -d --log-opt "log-path=$log" cfsb/busybox sh -c "seq 1 $tail_n; touch /tmp/written; exec sleep 600")
	marker=/run/containerd/io.containerd.runtime.v2.task/default/$id/rootfs/tmp/written
	for ((i = 0; i < 3000; i++)); do
		[[ -e $marker ]] && break
		cs_nap 0.05
	done
	cg=$(cs_container_cgroup "$id") && read -r owed <"$cg/cpu.cfs.borrowing_us"
	t0=${EPOCHREALTIME/./}
	cs_nerdctl rm -f "$id" >/dev/null
	info "rm -f: the container owed ${owed:-?} us (its quota 100000), rm -f took $((${EPOCHREALTIME/./} - t0)) us"
	tail_check "rm -f" "$log"

	# nerdctl start of the stopped container: the old task is deleted (its
	# logger signalled) as soon as it is started again, and its lines are
	# all logged before the new run's. (max-size: without it nerdctl's
	# json-file driver starts a new file at every start, dropping the old.)
	log=/run/cfsb-tail-start.json
	rm -f "$log"
	id=$(tail_run -d --log-opt "log-path=$log" --log-opt max-size=100m cfsb/busybox seq 1 "$tail_n")
	cs_nerdctl wait "$id" >/dev/null
	cs_nerdctl start "$id" >/dev/null
	cs_nerdctl wait "$id" >/dev/null
	cs_nerdctl rm -f "$id" >/dev/null
	cat /tmp/want.tail /tmp/want.tail >/tmp/want.tail2
	json_numbers "$log" >/tmp/got.tail
	got=$(wc -l </tmp/got.tail)
	info "start: 2 runs of $tail_n lines written, $got logged"
	check "start of a stopped paced flood: both runs' lines logged, in order" \
		'cmp -s /tmp/got.tail /tmp/want.tail2' "$got lines logged, the last one '$(tail -n 1 /tmp/got.tail)'"
fi

# --- an idle logger costs nothing ------------------------------------------
# No quota on the container's path: no charge, no pacing, no wakeups of the
# logger while the container is quiet. With a quota, charging is on, and the
# logger of a quiet container sleeps until its next line all the same.
if section idle; then
	# cs_wakeups PID: the context switches of all the process's threads.
	cs_wakeups() {
		local f line total=0
		for f in /proc/"$1"/task/*/status; do
			while read -r line; do
				case $line in *ctxt_switches:*) total=$((total + ${line##*:})) ;; esac
			done <"$f"
		done
		REPLY=$total
	}
	for quota in none 50000; do
		opt=()
		[[ $quota != none ]] && opt=(--cpu-quota "$quota" --cpu-period 100000)
		id=$(cs_run -d --cpuset-cpus 0 "${opt[@]}" cfsb/busybox sh -c 'echo hello; exec sleep 600')
		cs_nap 2
		logger=$(cs_logger_pid "$id")
		cg=$(cs_container_cgroup "$id")
		cs_borrowed_us "$cg"; b0=$REPLY
		cs_wakeups "$logger"; w0=$REPLY
		cs_nap 3
		cs_wakeups "$logger"; w1=$REPLY
		cs_borrowed_us "$cg"; b1=$REPLY
		info "quota $quota: the idle logger switched $((w1 - w0)) times in 3 s; $b1 us charged in all"
		if [[ $quota == none ]]; then
			check "no quota: nothing charged, the idle logger does not poll (< 10 switches in 3 s)" \
				'((b1 == 0 && w1 - w0 < 10))' "switches $((w1 - w0)), charged $b1 us"
		else
			check "quota, quiet container: the logger does not poll (< 10 switches in 3 s)" \
				'((w1 - w0 < 10 && b1 - b0 < 10000))' "switches $((w1 - w0)), charged $((b1 - b0)) us"
		fi
		cs_nerdctl rm -f "$id" >/dev/null
	done
fi

# --- the quota on a parent (--cgroup-parent) ---------------------------------
# The kernel takes the charges from the limited parent: the logger is paced by
# what the parent owes, so that the debt stays within the kernel's bound
# instead of being dropped. (cgroupfs paths: the systemd driver takes a
# slice, whose limits are systemd's.)
if section parent && [[ $manager == cgroupfs ]]; then
	parent=$(cs_cpu_root)/limited
	mkdir -p "$parent"
	if [[ $hier == v2 ]]; then echo "50000 100000" >"$parent/cpu.max"; else
		echo 50000 >"$parent/cpu.cfs_quota_us"; fi
	id=$(cs_run -d --cpuset-cpus 0 --cgroup-parent /limited cfsb/busybox yes)
	cs_nap 2
	# The parent pays, and counts what it is charged: sample it, with the
	# logger, over 5 s.
	logger=$(cs_logger_pid "$id")
	cs_sample "$logger" "$parent"; read -ra s0 <<<"$REPLY"; d0=${CS_STAT[dropped]}
	cs_nap 5
	cs_sample "$logger" "$parent"; read -ra s1 <<<"$REPLY"; dropped=$((CS_STAT[dropped] - d0))
	wall=$((s1[0] - s0[0]))
	a=$(((s1[1] - s0[1]) * 10000 / wall)) b=$(((s1[2] - s0[2]) * 10000 / wall)) c=$(((s1[3] - s0[3]) * 10000 / wall))
	dropped=$((dropped * 10000 / wall))
	info "yes, quota 50/100 ms on its parent: logger A=$(cs_pct "$a")% charged B=$(cs_pct "$b")%" \
		"container C=$(cs_pct "$c")% B+C=$(cs_pct $((b + c)))% dropped $(cs_pct "$dropped")%"
	check "quota on the parent: the logger's CPU is charged to it (B/A >= 90%)" '((b > 0 && b * 10 >= a * 9))' \
		"A=$a B=$b"
	check "quota on the parent: the kernel drops < 10% of the charges (the logger is paced)" \
		'((dropped * 10 < b))' "dropped $dropped, charged B=$b (0.01% of a CPU)"
	check "quota on the parent: container + charged CPU within the quota (B+C <= 55%)" \
		'((b + c <= 5500))' "B+C=$((b + c))"
	cs_nerdctl rm -f "$id" >/dev/null
	rmdir "$parent" 2>/dev/null || true
fi

# --- the global default -----------------------------------------------------
if section config; then
	id=$(NERDCTL_LOG_CPU_CHARGE=off quota_run cfsb/busybox yes)
	cfg=
	for f in /var/lib/nerdctl/*/containers/default/"$id"/log-config.json; do cfg=$(<"$f"); done
	cs_nap 2
	cg=$(cs_container_cgroup "$id")
	cs_borrowed_us "$cg"; borrowed=$REPLY
	check "NERDCTL_LOG_CPU_CHARGE=off: the container records off and is not charged" \
		'[[ $cfg == *\"cpu-charge\":\"off\"* ]] && ((borrowed == 0))' "log-config.json: $cfg; charged $borrowed us"
	cs_nerdctl rm -f "$id" >/dev/null
fi

# --- logging throughput with charging on and off, one run (reported only) ---
# A quota of a whole period on one CPU: charging runs, the limit never binds.
# The logger's CPU per MB of json log is the charger's cost; on the
# instruction clock (vm-run.sh --icount) it is resolvable.
if section throughput; then
	declare -A per_mb=([off]=0 [process]=0)
	for mode in off process off process; do
		id=$(cs_run -d --cpuset-cpus 0 --cpu-quota 100000 --cpu-period 100000 --log-opt "cpu-charge=$mode" cfsb/busybox yes)
		log=$(cs_nerdctl inspect -f '{{.LogPath}}' "$id")
		logger=$(cs_logger_pid "$id")
		cs_nap 1
		size0=$(stat -c %s "$log") t0=${EPOCHREALTIME/./}
		cs_pid_cpu_us "$logger"; a0=$REPLY
		cs_nap 5
		size1=$(stat -c %s "$log") t1=${EPOCHREALTIME/./}
		cs_pid_cpu_us "$logger"; a1=$REPLY
		mb=$(((size1 - size0) / 1000)) # kB
		us_per_mb=$(((a1 - a0) * 1000 / (mb ? mb : 1)))
		per_mb[$mode]=$((per_mb[$mode] + us_per_mb))
		info "throughput cpu-charge=$mode: $(((size1 - size0) * 1000 / (t1 - t0))) kB/s of json log," \
			"logger CPU $((us_per_mb / 1000)).$(printf '%03d' $((us_per_mb % 1000))) ms per MB"
		cs_nerdctl rm -f "$id" >/dev/null
	done
	info "logger CPU per MB, charging on vs off: $((per_mb[process] * 10000 / (per_mb[off] ? per_mb[off] : 1))) (0.01 %; 10000 = the same)"
fi

# --- containers cannot charge -------------------------------------------------
if section escape; then
	victim=$(cs_cpu_root)/victim
	mkdir -p "$victim"
	if [[ $hier == v2 ]]; then echo "50000 100000" >"$victim/cpu.max"; else
		echo 50000 >"$victim/cpu.cfs_quota_us"; fi
	for caps in default SYS_ADMIN; do
		opt=(--privileged=false)
		[[ $caps == SYS_ADMIN ]] && opt+=(--cap-add SYS_ADMIN)
		id=$(cs_run -d "${opt[@]}" --log-opt cpu-charge=off cfsb/busybox sh -c "$escape_script sleep 60")
		cs_nap 3
		out=$(cs_nerdctl logs "$id" 2>&1)
		cg=$(cs_container_cgroup "$id")
		cs_borrowed_us "$cg"; own=$REPLY
		cs_borrowed_us "$victim"; other=$REPLY
		info "container ($caps capabilities): $(echo "$out" | tr '\n' ' ')"
		check "container ($caps capabilities) cannot write any cpu.cfs.borrowing_us" \
			'[[ $out == *"tried "[1-9]* && $out != *wrote* && $own == 0 && $other == 0 ]]' \
			"$(echo "$out" | tr '\n' ' ') own=$own victim=$other"
		if [[ $caps == SYS_ADMIN ]]; then
			check "with CAP_SYS_ADMIN it did get a writable cgroup filesystem (the kernel refused)" \
				'[[ $out == *remounted* || $out == *mounted* ]]'
		fi
		cs_nerdctl rm -f "$id" >/dev/null
	done
	rmdir "$victim"
fi

cs_stop
echo "1..$n"
exit $((failed > 0))
