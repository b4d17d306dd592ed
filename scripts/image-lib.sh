# shellcheck shell=bash
# shellcheck disable=SC2154 # stop_after, results, suites and timeout are the script's
# Sourced (not run) by the scripts that test a kernel in a disk image as a
# user installs it (scripts/host-image.sh, scripts/pi-image.sh): their
# steps, and the summary of what the image's test unit handed back. The
# script sets stop_after (its --stop-after), timeout (its --timeout),
# suites (the selftests/run-in-guest.sh suites the image runs) and results
# (the directory the unit's results are unpacked into, with the console's
# log).

stage_times=()
# stage NAME COMMAND...: step NAME is COMMAND; its time is logged and kept
# in stage_times, and the script stops after it if --stop-after NAME.
stage() {
	local start
	start=$(now_s)
	log "$1"
	"${@:2}"
	stage_times+=("$1 $(($(now_s) - start)) s")
	log "$1: $(($(now_s) - start)) s"
	if [[ $stop_after == "$1" ]]; then
		log "stopped after $1 (${stage_times[*]})"
		exit 0
	fi
}

# status_of STEP: the exit status the image's unit recorded for STEP.
status_of() { cat "$results/$1.status" 2>/dev/null || echo "(none recorded)"; }

# image_summary NAME SPLAT: a line naming the booted kernel, init and
# cgroup hierarchy, the unit's info file, and the results of the script's
# $suites (upstream's test_cpu listed, not counted); fails if the console's
# log matches SPLAT (the kernel reported a problem), a suite has no
# results or failed (one cut short fails its plan), or a new group has no
# cpu.cfs.borrowing_us. selftests/run-in-guest.sh's exit status is not
# the verdict: it fails when test_cpu does.
image_summary() {
	local name=$1 splat=$2 status=0 taps=() info=() suite f
	if grep -Eq "$splat" "$results/console.log"; then
		log "the kernel reported a problem:"
		grep -E -m5 -A20 "$splat" "$results/console.log" | head -60 >&2
		status=1
	fi
	echo "$name: $(grep '^kernel ' "$results/info"), init $(awk '$1 == "init" { print $2 }' "$results/info"), cgroup $(awk '$1 == "hierarchy" { print $2 }' "$results/info")"
	sed 's/^/  /' "$results/info" | grep -v '^  cmdline'
	for suite in $suites; do
		f=$results/selftests/$suite.tap
		if [[ ! -s $f ]]; then
			log "no results of the $suite suite (selftests/run-in-guest.sh exited $(status_of selftests))"
			status=1
		elif [[ $suite == test_cpu ]]; then
			info+=(--info "$f")
		else
			taps+=("$f")
		fi
	done
	if [[ ${#taps[@]} -gt 0 ]] && ! python3 "$CFSB_ROOT/scripts/tap_summary.py" "${info[@]}" "${taps[@]}"; then
		status=1
	fi
	grep -q '^borrowing-file 1' "$results/info" || { log "no cpu.cfs.borrowing_us in the booted image"; status=1; }
	grep -q '^failed-units $' "$results/info" || log "failed units: $(awk '$1 == "failed-units" { print $2 }' "$results/info")"
	return "$status"
}

# image_test_unit ROOTFS NAME DESCRIPTION COMMAND [ENVIRONMENT]: the
# oneshot unit NAME.service that runs COMMAND once the system is up and
# powers the machine off when it ends, however it ends.
image_test_unit() {
	local rootfs=$1 name=$2 description=$3 command=$4 env=${5:-}
	{
		printf '[Unit]\nDescription=%s\nAfter=multi-user.target\n' "$description"
		printf 'SuccessAction=poweroff\nFailureAction=poweroff\n'
		printf '[Service]\nType=oneshot\n'
		[[ -z $env ]] || printf 'Environment=%s\n' "$env"
		printf 'ExecStart=%s\n' "$command"
		printf 'StandardOutput=journal+console\nStandardError=journal+console\n'
		printf 'TimeoutStartSec=infinity\n[Install]\nWantedBy=multi-user.target\n'
	} >"$rootfs/etc/systemd/system/$name.service"
	mkdir -p "$rootfs/etc/systemd/system/multi-user.target.wants"
	ln -sf "../$name.service" "$rootfs/etc/systemd/system/multi-user.target.wants/"
}

# image_boot OUT CONSOLE QEMU...: QEMU with the script's $timeout, its own
# output in OUT, its exit status in qemu_rc; dies if the machine did not
# power off in time. Then a fresh $results directory with the console's
# log in it.
qemu_rc=0
image_boot() {
	local out=$1 console=$2
	shift 2
	set +e
	timeout -k 10 "$timeout" "$@" </dev/null >"$out" 2>&1
	qemu_rc=$?
	set -e
	[[ $qemu_rc -eq 124 || $qemu_rc -eq 137 ]] && { tail -20 "$console" >&2; die "the image did not power off within $timeout s"; }
	rm -rf "$results" && mkdir -p "$results"
	cp "$console" "$results/console.log"
	return 0
}
