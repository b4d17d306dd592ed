#!/usr/bin/env bash
# The checks are bash conditions evaluated later, hence single quotes.
# shellcheck disable=SC2016,SC2317
# Integration tests of the patched nerdctl's logging process, run inside the
# guest (scripts/vm-run.sh) with real containerd, runc or crun and the
# images of scripts/build_images.py. TAP on stdout; measurements as
# "# info:" lines.
#
#   run-in-guest.sh [--runtime runc|crun] [--cgroup-manager cgroupfs|systemd]
#                   [--stock-kernel]
#
# On the patched kernel: the logger charges the container (modes process,
# thread, off), container CPU + charged CPU stays at the quota, log content
# is byte-identical whatever the mode, and no container can write any
# cpu.cfs.borrowing_us, even with CAP_SYS_ADMIN. With --stock-kernel (no
# cpu.cfs.borrowing_us): the logger says so and logs everything.
set -uo pipefail

runtime=runc manager=cgroupfs stock=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--runtime) runtime=$2; shift 2 ;;
	--cgroup-manager) manager=$2; shift 2 ;;
	--stock-kernel) stock=1; shift ;;
	-h | --help) sed -n '4,16p' "$0" | cut -c3-; exit 0 ;;
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
	id=$(cs_run -d cfsb/busybox sh -c "$flood_cmd")
	check "stock kernel: logs complete and in order" 'logs_match "$id"'
	warnings=$(grep -c "cpu.cfs.borrowing_us" "$CS_STATE/containerd.log")
	check "stock kernel: the logger says once that it cannot charge" '[[ $warnings -eq 1 ]]' \
		"$warnings warnings in containerd's log"
	cs_stop
	echo "1..$n"
	exit $((failed > 0))
fi

# --- the charge follows the load ---------------------------------------------
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

# --- logs are untouched by accounting ------------------------------------------
for mode in off process thread; do
	id=$(quota_run --log-opt "cpu-charge=$mode" cfsb/busybox sh -c "$flood_cmd")
	check "cpu-charge=$mode: logs complete and in order" 'logs_match "$id"'
	cs_nerdctl rm -f "$id" >/dev/null
done
check "an invalid cpu-charge is refused" \
	'! cs_run --log-opt cpu-charge=sometimes cfsb/busybox true >/dev/null 2>&1'

# --- logging throughput with charging on and off, one run (reported only) ---
for mode in off process off process; do
	id=$(cs_run -d --cpuset-cpus 0 --log-opt "cpu-charge=$mode" cfsb/busybox yes)
	log=$(cs_nerdctl inspect -f '{{.LogPath}}' "$id")
	cs_nap 1
	size0=$(stat -c %s "$log") t0=${EPOCHREALTIME/./}
	cs_nap 5
	size1=$(stat -c %s "$log") t1=${EPOCHREALTIME/./}
	info "throughput cpu-charge=$mode: $(((size1 - size0) * 1000 / (t1 - t0))) kB/s of json log"
	cs_nerdctl rm -f "$id" >/dev/null
done

# --- containers cannot charge -------------------------------------------------
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

cs_stop
echo "1..$n"
exit $((failed > 0))
