#!/usr/bin/env bash
# borrowd with unchanged container engines, in the guest (scripts/vm-run.sh
# on the patched or the stock kernel, cgroup v2 or v1), measured as the
# study measures the patched nerdctl: a container runs `yes` under a quota
# of 50 ms per 100 ms, its output copied by the engine's worker on the same
# CPU; over a window of SECONDS, the worker's CPU (A), what is charged to
# the container (B) and the container's own CPU (C), as shares of one CPU;
# and a neighbour on that CPU, sysbench in a container of its own, its
# events/s against sysbench alone.
#
#   engines-in-guest.sh [--seconds N] [--quota-ms MS] [--modes off,borrowd,pace]
#                       [--evidence-us US] [--tap] [--csv FILE] [--meta FILE]
#                       [--progress FILE] ENGINE...
#
# The container's group is its init process's (/proc/PID/cgroup: v2's
# line, v1's cpu controller's), the process from the engine's metadata;
# C, its periods and throttled periods are read from its files (cpu.stat;
# v1: cpuacct.usage), on any kernel. B is what borrowd's charging mode
# counts: in kernel mode (a kernel with cpu.cfs.borrowing_us) the kernel's
# cpu.stat (borrowed_usec); in quota mode (the stock kernel: borrowd lowers
# the container's quota) borrowd's own account of the group, its --stats
# file (borrowed_us and dropped_us: every charge, as the kernel counts it),
# written on SIGUSR1 at the window's start and end. The "charging" column
# says which mode borrowd used, "writes/s" its quota writes per second
# (every group's) in quota mode; "throttled" is the share of the
# container's periods throttled (cpu.stat: what cAdvisor, and so kubelet,
# exports as container_cpu_cfs_throttled_periods_total over
# ..._periods_total).
#
# --quota-ms MS: the flooding container's quota per 100 ms (default 50). At
# 50 the worker's fair share of the CPU next to the neighbour is about the
# quota anyway; below it, a paced worker leaves the neighbour more.
#
# --evidence-us US: borrowd's budget per piece of evidence for the thread
# rule (docker and cri; borrowd --evidence-us), instead of its default.
#
# --csv FILE: the rows as CSV too (CPU times in µs, for
# experiments/noisy_logging.sh's engines part; charging and quota_writes,
# the writes in the window, last); --meta FILE: what ran, as JSON (the
# kernel, the hierarchy, the engines' and borrowd's versions, the quota,
# the window, the modes); --progress FILE: planned seconds done and in all,
# as that script's progress files.
# --tap: the checks for scripts/run-tests.sh instead of the table: borrowd
# on only, no neighbour; borrowd in kernel mode where the container's group
# has cpu.cfs.borrowing_us, in quota mode where not (a wrong mode fails, as
# does B = 0); B/A within 85 to 110 % for a worker per container (patched
# kernel: measured 94 to 96 % in 3 s), at least 50 % for dockerd (84 to
# 95 %), 25 % for containerd's CRI plugin (47 to 97 % on a loaded host
# before borrowd followed kubelet's links to the pods' log files; 92 and
# 97 % since, idle host); for docker and cri also the thread rule's split
# (split, below). The same bounds on the stock kernel, quota mode,
# measured on the instruction clock (vm-run.sh --icount 0, 2 vCPUs) in 3 s
# windows, v2 and v1 twice each: conmon 99.9 to 100.1 %, the nerdctl
# logger 100.1 to 100.3 %, dockerd 96.9 to 97.6 %, CRI 96.5 to 97.2 %
# (patched kernel, same clock: conmon 96.8 and 100.2 %, dockerd 96.9 and
# 97.3 %, CRI 97.6 and 98.0 %). There dockerd, containerd and the nerdctl
# logger run a whole CPU against a quota of half one: the debt stays at
# its bound (a second's worth of quota) and about half of B is dropped, as
# the kernel drops it; conmon's is paid in full.
#
# Engines: podman (conmon, one per container: borrowd's process rule,
# found from Podman's metadata), nerdctl (unpatched 1.7.7, its logging
# process per container: the process rule, found by its CONTAINER_ID),
# docker (dockerd copies every container's output itself: the thread rule,
# --daemon dockerd), cri (containerd's CRI plugin, as on a Kubernetes node,
# pods made by crictl as kubelet makes them: containerd copies every
# container's output to its pod's log file itself, the thread rule,
# --daemon containerd, and --pod-logs with kubelet's links). Modes: off
# (no borrowd), borrowd, borrowd --pace (not for docker and cri: a shared
# daemon cannot be paused for one client).
set -uo pipefail

secs=10 tap=0 modes_arg="" csv="" meta="" progress_file="" quota_ms=50 daemon_args=()
while [[ $# -gt 0 ]]; do
	case $1 in
	--modes) modes_arg=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--quota-ms)
		[[ $2 =~ ^[1-9][0-9]?$ ]] || { echo "--quota-ms takes 1 to 99" >&2; exit 2; }
		quota_ms=$2; shift 2 ;;
	--evidence-us) daemon_args=(--evidence-us "$2"); shift 2 ;;
	--tap) tap=1; shift ;;
	--csv) csv=$2; shift 2 ;;
	--meta) meta=$2; shift 2 ;;
	--progress) progress_file=$2; shift 2 ;;
	-h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | cut -c3-; exit 0 ;;
	-*) echo "unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[[ $# -gt 0 ]] || set -- podman nerdctl docker
# shellcheck source=scripts/guest-check.sh
source "$(dirname "$0")/../../scripts/guest-check.sh"
cfsb_guest_only

# shellcheck source=scripts/container-stack.sh
source "$(dirname "$0")/../../scripts/container-stack.sh"
# shellcheck source=tools/tests/lib.sh
source "$(dirname "$0")/lib.sh"
tools=$CS_ROOT/.build/tools
hier=$(cs_hierarchy) cpu_root=$(cs_cpu_root)
# (Its networks' directory defaults to /etc/containers/networks, which a
# machine that never ran Podman lacks and the guest's / cannot make.)
podman=(podman --cgroup-manager cgroupfs --events-backend file
	--network-config-dir /var/lib/containers/networks)
docker=/usr/bin/docker
quota=(--cpu-quota $((quota_ms * 1000)) --cpu-period 100000)
# The engines whose worker is one shared daemon (borrowd's thread rule, no
# --pace: it cannot be paused for one client), by the daemon's name.
declare -A SHARED_DAEMON=([docker]=dockerd [cri]=containerd)

# Engine operations: ENGINE_run ARGS... prints the container's id;
# ENGINE_init ID the pid of its init process, from the engine's metadata.
# nerdctl: unpatched 1.7.7 (scripts/nerdctl-build.sh --stock), containerd
# pinned to CPU 0 (its shims and logging processes inherit it).
nerdctl_start() {
	CS_NERDCTL=$CS_ROOT/.build/nerdctl-stock/nerdctl
	cs_start --cpus 0
	cs_load_images busybox sysbench
}
nerdctl_run() { cs_run "$@"; }
nerdctl_rm() { cs_nerdctl rm -f "$@" >/dev/null 2>&1; }
nerdctl_worker() {
	local i
	for ((i = 0; i < 50; i++)); do
		cs_logger_pid "$1" && return 0
		cs_nap 0.1
	done
	return 1
}
nerdctl_image() { echo "cfsb/$1:latest"; }
nerdctl_init() { cat "/run/containerd/io.containerd.runtime.v2.task/default/$1/init.pid"; }
nerdctl_stop() { cs_stop; }

podman_start() {
	( cs_enter_cgroup system.slice/podman.service
	  taskset -c 0 "${podman[@]}" load -q -i "$CS_IMAGES/busybox.tar" >/dev/null &&
	  taskset -c 0 "${podman[@]}" load -q -i "$CS_IMAGES/sysbench.tar" >/dev/null ) ||
		cs_die "podman cannot load the images"
}
# No network: the containers only log, and netavark's default one needs
# iptables modules the guest's kernel does not have.
podman_run() { ( cs_enter_cgroup system.slice/podman.service; taskset -c 0 "${podman[@]}" run --network none "$@" ); }
podman_rm() { "${podman[@]}" rm -f "$@" >/dev/null 2>&1; }
podman_worker() {
	cat "/run/containers/storage/overlay-containers/$1/userdata/conmon.pid"
}
podman_image() { echo "localhost/cfsb/$1:latest"; }
podman_init() { cat "/run/containers/storage/overlay-containers/$1/userdata/pidfile"; }
podman_stop() { :; }

docker_start() {
	# dockerd writes its key to /etc/docker, read-only in the guest.
	mountpoint -q /etc/docker || mount -t tmpfs tmpfs /etc/docker
	( cs_enter_cgroup system.slice/docker.service
	  exec taskset -c 0 dockerd --iptables=false --ip6tables=false --ip-masq=false --bridge=none \
		--storage-driver=overlay2 --exec-opt native.cgroupdriver=cgroupfs \
		--data-root /var/lib/docker --pidfile /run/docker.pid >/run/dockerd.log 2>&1 ) &
	local i
	for ((i = 0; i < 300; i++)); do
		"$docker" info >/dev/null 2>&1 && break
		[[ -z $(jobs -r) ]] && break
		cs_nap 0.2
	done
	if ! "$docker" load -q -i "$CS_IMAGES/busybox.tar" >/dev/null ||
		! "$docker" load -q -i "$CS_IMAGES/sysbench.tar" >/dev/null; then
		tail -20 /run/dockerd.log
		cs_die "dockerd does not start or load the images"
	fi
}
docker_run() { "$docker" run --network none --log-driver json-file "$@"; }
docker_rm() { "$docker" rm -f "$@" >/dev/null 2>&1; }
docker_worker() { cat /run/docker.pid; }
docker_image() { echo "cfsb/$1:latest"; }
docker_init() { "$docker" inspect -f '{{.State.Pid}}' "$1"; }
# dockerd stops its own containerd on the way out: wait for both, so that
# the next engine's containerd does not start beside them.
docker_stop() {
	local pid
	pid=$(cat /run/docker.pid) || return 0
	kill "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do cs_nap 0.1; done
	while pgrep -f /var/run/docker/containerd >/dev/null; do cs_nap 0.1; done
}

# cri: containerd with its CRI plugin, pinned to CPU 0 as for nerdctl.
# (nerdctl, the stack's default build, only loads the images into CRI's
# namespace.)
cri_start() {
	cs_start --cpus 0 --cri
	cs_cri_load_images busybox sysbench
}
# cri_run [-d] [--rm] [--name N] [--cpuset-cpus C] [--cpu-quota Q]
#         [--cpu-period P] IMAGE CMD...: a pod as docker run would make a
# container; without -d, waits for it and prints its output.
cri_run() {
	local detach=0 rm=0 name="" cpus="" quota_us=0 period=100000 id
	while [[ $1 == -* ]]; do
		case $1 in
		-d) detach=1; shift ;;
		--rm) rm=1; shift ;;
		--name) name=$2; shift 2 ;;
		--cpuset-cpus) cpus=$2; shift 2 ;;
		--cpu-quota) quota_us=$2; shift 2 ;;
		--cpu-period) period=$2; shift 2 ;;
		*) cs_die "cri_run: unknown option $1" ;;
		esac
	done
	id=$(cs_cri_run "$name" "$cpus" "$quota_us" "$period" "$@") || return 1
	if ((detach)); then
		echo "$id"
		return 0
	fi
	cs_cri_wait "$id" || return 1
	cs_cri_output "$name"
	((rm)) && cs_cri_rm "$name"
	return 0
}
cri_rm() { cs_cri_rm "$1"; }
cri_worker() { cat "$CS_STATE/containerd.pid"; }
cri_image() { echo "cfsb/$1:latest"; }
# (The CRI plugin's containers are in containerd's k8s.io namespace.)
cri_init() { cat "/run/containerd/io.containerd.runtime.v2.task/k8s.io/$1/init.pid"; }
cri_stop() { cs_stop; }

# container_group PID: the group of the container's init process, its
# path in the cpu hierarchy (GROUP, as borrowd names it) and directory
# (GROUP_DIR): /proc/PID/cgroup's v2 line, or v1's cpu controller's.
container_group() {
	local line ctrls
	GROUP=""
	while IFS= read -r line; do
		if [[ $hier == v2 ]]; then
			[[ $line == 0::* ]] && GROUP=${line#0::}
		else
			ctrls=${line#*:} ctrls=${ctrls%%:*}
			[[ ,$ctrls, == *,cpu,* ]] && GROUP=${line#*:*:}
		fi
	done <"/proc/$1/cgroup"
	[[ -n $GROUP ]] || return 1
	GROUP_DIR=$cpu_root$GROUP
	[[ -f $GROUP_DIR/cpu.stat ]]
}
# agent_stats FILE GROUP: "MODE CHARGED DROPPED WRITES" from borrowd's
# --stats: its mode and, in quota mode, what it charged GROUP (borrowed_us
# and dropped_us, as the kernel counts every charge), what of that it
# dropped (beyond a second's worth of quota), and its quota writes (every
# group's).
agent_stats() {
	# shellcheck disable=SC2016 # jq's variables
	jq -r --arg g "$2" '. as $s | ([$s.groups[]? | select(.path == $g)][0] // {}) as $q |
		[$s.mode, ($q.borrowed_us // 0) + ($q.dropped_us // 0), $q.dropped_us // 0, $s.writes // 0] |
		map(tostring) | join(" ")' "$1"
}
# await_stats: until borrowd ($bpid) has written its --stats ($stats) on
# SIGUSR1.
await_stats() {
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -s $stats ]] && return 0
		cs_nap 0.1
	done
	cs_die "borrowd wrote no --stats on SIGUSR1 in 10 s"
}
# await_init ENGINE ID: the pid of container ID's init into ipid, once the
# engine's metadata has it (5 s at most).
await_init() {
	local i
	for ((i = 0; i < 50; i++)); do
		ipid=$("${1}_init" "$2" 2>/dev/null) && [[ -n $ipid ]] && return 0
		cs_nap 0.1
	done
}
# sample: at once, the worker's CPU (ns) into SA, the clock (us) into ST,
# the container's counters into SC SP SN and what was charged to it into
# SB (SD of it dropped); with borrowd, its mode into SM and its quota
# writes into SW, from the --stats it writes on SIGUSR1 (read after the
# counters: the file comes within a round).
sample() {
	local b d
	rm -f "$stats"
	SA=$(process_runtime "$wpid") ST=${EPOCHREALTIME/./}
	[[ -z $bpid ]] || kill -USR1 "$bpid"
	counters "$GROUP_DIR"
	SB=$K SC=$U SP=$P SN=$T SD=0 SW=0 SM=-
	[[ -n $bpid ]] || return 0
	await_stats
	read -r SM b d SW <<<"$(agent_stats "$stats" "$GROUP")"
	[[ $SM == quota ]] && SB=$b SD=$d
	return 0
}
# sysbench_run ENGINE NAME: a neighbour on CPU 0 for $secs s; its events/s.
sysbench_run() {
	"${1}_run" --rm --name "$2" --cpuset-cpus 0 "$("${1}_image" sysbench)" \
		sysbench cpu --cpu-max-prime=10000 --threads=1 --time="$secs" run 2>&1 |
		awk '/events per second/ { print $4 }'
}

# measure ENGINE MODE: one row of the table.
measure() {
	local engine=$1 mode=$2 id ipid="" bpid="" i a0 a1 b0 b1 c0 c1 p0 p1 n0 n1 t0 t1 w0 w1 d0 d1 ev wall
	local stats=/run/borrowd-$engine-$mode.stats log=/run/borrowd-$engine-$mode.log
	id=$("${engine}_run" -d --name flood --cpuset-cpus 0 "${quota[@]}" "$("${engine}_image" busybox)" yes) ||
		cs_die "$engine cannot run the container"
	wpid=$("${engine}_worker" "$id")
	await_init "$engine" "$id"
	container_group "$ipid" || cs_die "$engine: no group for container $id (init pid '$ipid')"
	# borrowd's mode (--tap): the kernel's where the group has its file.
	local want=quota
	[[ -e $GROUP_DIR/cpu.cfs.borrowing_us ]] && want=kernel
	case $mode in
	off) ;;
	borrowd | pace)
		local args=(--engines none)
		[[ $engine == podman ]] && args=(--engines podman --scan-ms 200)
		[[ $engine == nerdctl ]] && args=(--engines containerd --scan-ms 200)
		[[ -n ${SHARED_DAEMON[$engine]:-} ]] &&
			args+=(--daemon "${SHARED_DAEMON[$engine]}" --scan-ms 200 "${daemon_args[@]}")
		[[ $engine == cri ]] && args+=(--pod-logs "$CS_POD_LOG_LINKS")
		[[ $mode == pace ]] && args+=(--pace)
		taskset -c 1 "$tools/borrowd" "${args[@]}" --stats "$stats" >"$log" 2>&1 &
		bpid=$!
		for ((i = 0; i < 100; i++)); do
			grep -q "container ${id:0:12}\|container $id" "$log" && break
			cs_nap 0.1
		done
		# (SIGUSR1 ends a borrowd that has not set its handler yet.)
		grep -q "ready:" "$log" || { cat "$log"; cs_die "borrowd did not start"; }
		;;
	esac
	cs_nap 1
	sample
	a0=$SA t0=$ST b0=$SB c0=$SC p0=$SP n0=$SN w0=$SW d0=$SD
	if [[ $tap -eq 1 ]]; then
		cs_nap "$secs"
		ev=-
	else
		ev=$(sysbench_run "$engine" neighbour)
	fi
	sample
	a1=$SA t1=$ST b1=$SB c1=$SC p1=$SP n1=$SN w1=$SW d1=$SD
	wall=$((t1 - t0))
	if [[ -n $bpid ]]; then
		kill -TERM "$bpid"
		wait "$bpid"
		sed 's/^/# /' "$log" | grep -v "^# libbpf" | tail -4
	fi
	"${engine}_rm" flood
	# Shares of one CPU in units of 0.01 %.
	local A=$(((a1 - a0) * 10 / wall)) B=$(((b1 - b0) * 10000 / wall)) C=$(((c1 - c0) * 10000 / wall))
	# The quota writes per second, in hundredths; the throttled periods'
	# share, in units of 0.01 %.
	local W=$(((w1 - w0) * 100000000 / wall)) thr=$((p1 > p0 ? (n1 - n0) * 10000 / (p1 - p0) : 0))
	[[ -z $csv ]] ||
		echo "$engine,$mode,$wall,$((a1 - a0)),$((b1 - b0)),$((c1 - c0)),$ev,$alone,$((p1 - p0)),$((n1 - n0)),$SM,$((w1 - w0))" >>"$csv"
	local row
	row=$(printf '%-7s %-8s %9s %9s %9s %9s %8s %9s %10s  %-8s %8s' "$engine" "$mode" "$(cs_pct "$A")" "$(cs_pct "$B")" \
		"$(cs_pct "$C")" "$(cs_pct $((B + C)))" "$([[ $A -gt 0 ]] && cs_pct $((B * 10000 / A)))" "$(cs_pct "$thr")" \
		"$ev" "$SM" "$([[ $SM == quota ]] && cs_pct "$W" || echo -)")
	if [[ $tap -eq 0 ]]; then
		echo "$row"
		return
	fi
	echo "# $row"
	[[ $SM == quota ]] && echo "# $engine: quota mode: $((w1 - w0)) quota writes in $((wall / 1000)) ms; of B, $((d1 - d0)) us dropped"
	n=$((n + 1))
	# The charges lag the worker by up to a round (100 ms, longer under
	# load) at each end of the window: 3 % or more of 3 s.
	local ratio=$((A > 0 ? B * 100 / A : 0)) low=85 high=110
	[[ $engine == docker ]] && low=50
	# containerd's CRI plugin hands each line from the goroutine that reads
	# the FIFO to one that writes the pod's log file, through an in-process
	# pipe: the writer's thread is the container's by the log file, through
	# kubelet's link to it (--pod-logs; without it B/A was 47 to 97 % in 3 s
	# windows on a loaded host). What is left (B/A 88 to 92 % on the
	# instruction clock) runs on threads that touch no container's file,
	# such as the Go runtime's collector. Without the thread rule B is 0.
	[[ $engine == cri ]] && low=25
	if [[ $SM == "$want" && $A -gt 1000 && $ratio -ge $low && $ratio -le $high ]]; then
		echo "ok $n $engine: the worker's CPU is charged to the container ($SM mode, B/A $ratio %, $low to $high)"
	else
		echo "not ok $n $engine: the worker's CPU is charged to the container ($SM mode, want $want; B/A $ratio %, A $A, $low to $high)"
	fi
}

# The thread rule's split, for a shared daemon (--tap): two containers
# flood through it side by side (on CPU 0, with the daemon), each charged
# by what the daemon spent for it, per byte of its log the same within
# 15 %; then a third party drives the daemon's other work from CPU 1 (an
# image exported over its API again and again, or an endless stream taken
# in: the daemon's threads tar or hash it between the containers' lines),
# and the daemon's CPU per byte grows by a tenth or more (the check's
# positive control: the third party loaded the daemon), of which the
# containers' charge per byte takes less than all (the target: a third;
# all of it: the old rule, where the last container a thread read for
# paid for what it did next), and neither container's alone takes all.
# How the part that is charged falls between the two is reported, not
# checked: it goes to the container whose line a thread read last, a
# few large pieces in a window of seconds (CRI, 3 s: x/y 1.17, x 48 %
# and y 18 % of what the third party added per byte, in one run).
docker_logfile() { echo "/var/lib/docker/containers/$1/$1-json.log"; }
cri_logfile() { echo "$CS_STATE/pods/$2/$2/0.log"; }
# ENGINE_third_party: the third party's requests, until killed.
docker_third_party() {
	while :; do "$docker" save "$(docker_image sysbench)" >/dev/null; done
}
# (containerd's image export assembles the tar in ctr, the client; an
# ingest has containerd itself take in and hash what it is sent: here an
# endless stream of zeros, which ctr sends as fast as containerd takes it.
# A ctr per image spent most of CPU 1 starting up and reading the image,
# and containerd's CPU per byte logged rose by 6 to 31 % only.)
# Two such streams raised containerd's CPU per byte logged by 9 to 51 %
# (x1.09 to 1.51, 8 boots; x1.09 failed the control), four by 68 and 79 %
# (2 boots); two `docker save` loops raise dockerd's by 83 % and more.
declare -A THIRD_PARTIES=([docker]=2 [cri]=4)
cri_third_party() {
	ctr --address /run/containerd/containerd.sock -n k8s.io content ingest \
		"split-$BASHPID" </dev/zero >/dev/null 2>&1
}
# split_sample: into SPLIT, "DAEMON_NS CHARGED_X BYTES_X CHARGED_Y BYTES_Y".
split_sample() {
	local g b d out
	out=$(process_runtime "$wpid")
	rm -f "$stats"
	kill -USR1 "$bpid"
	await_stats
	for g in x y; do
		counters "${split_dir[$g]}"
		read -r SM b d SW <<<"$(agent_stats "$stats" "${split_group[$g]}")"
		[[ $SM == quota ]] || b=$K
		out+=" $b $(stat -c %s "${split_log[$g]}")"
	done
	SPLIT=$out
}
split() {
	local engine=$1 g id ipid i s0 s1 s2 stats log third=()
	stats=/run/borrowd-$engine-split.stats log=/run/borrowd-$engine-split.log
	local -A split_dir=() split_group=() split_log=()
	for g in x y; do
		id=$("${engine}_run" -d --name "split-$g" --cpuset-cpus 0 "${quota[@]}" "$("${engine}_image" busybox)" yes) ||
			cs_die "$engine cannot run the container"
		await_init "$engine" "$id"
		container_group "$ipid" || cs_die "$engine: no group for container $id"
		split_dir[$g]=$GROUP_DIR split_group[$g]=$GROUP split_log[$g]=$("${engine}_logfile" "$id" "split-$g")
	done
	wpid=$("${engine}_worker" "$id")
	local args=(--engines none --daemon "${SHARED_DAEMON[$engine]}" --scan-ms 200 "${daemon_args[@]}")
	[[ $engine == cri ]] && args+=(--pod-logs "$CS_POD_LOG_LINKS")
	taskset -c 1 "${BORROWD:-$tools/borrowd}" "${args[@]}" --stats "$stats" >"$log" 2>&1 &
	bpid=$!
	for ((i = 0; i < 100; i++)); do
		[[ $(grep -c "reads for container" "$log") -ge 2 ]] && break
		cs_nap 0.1
	done
	cs_nap 1
	split_sample
	s0=$SPLIT
	cs_nap "$secs"
	split_sample
	s1=$SPLIT
	# (Two at a time or more: one leaves the daemon idle while its client
	# waits.)
	for ((i = 0; i < ${THIRD_PARTIES[$engine]}; i++)); do
		( taskset -cp 1 "$BASHPID" >/dev/null; "${engine}_third_party" ) &
		third+=("$!")
	done
	cs_nap "$secs"
	split_sample
	s2=$SPLIT
	# The third parties and what they run (stopped first: no new request
	# between the two lists).
	kill -STOP "${third[@]}"
	for i in "${third[@]}"; do
		mapfile -t -O "${#third[@]}" third < <(pgrep -P "$i")
	done
	kill "${third[@]}" 2>/dev/null
	kill -CONT "${third[@]}" 2>/dev/null
	wait "${third[@]}" 2>/dev/null
	kill -TERM "$bpid"
	wait "$bpid"
	bpid=""
	"${engine}_rm" split-x
	"${engine}_rm" split-y
	# Per window: the daemon's ns per log byte, and each container's
	# charged us per MB of its log.
	local verdict
	verdict=$(python3 - "$s0" "$s1" "$s2" <<'PY'
import sys
s = [list(map(int, a.split())) for a in sys.argv[1:]]
w = [[b - a for a, b in zip(s[i], s[i + 1])] for i in (0, 1)]
rows = []
for n, (a, bx, nx, by, ny) in zip(("quiet", "third party"), w):
    rows.append((a / max(nx + ny, 1), 1e6 * bx / max(nx, 1), 1e6 * by / max(ny, 1),
                 1e6 * (bx + by) / max(nx + ny, 1)))
    print(f"# {n}: daemon {a / 1e3:.0f} us; x charged {bx} us for {nx} bytes, y {by} us for {ny} bytes")
(d0, x0, y0, c0), (d1, x1, y1, c1) = rows
print(f"# charged per MB: x {x0:.0f} and y {y0:.0f} us (quiet), x {x1:.0f} and y {y1:.0f} us,"
      f" both {c0:.0f} -> {c1:.0f} us (third party); the daemon's ns per byte {d0:.0f} -> {d1:.0f}")
ok1 = min(min(r[2], r[4]) for r in w) > 0 and abs(x0 / max(y0, 1e-9) - 1) < 0.15
# What the third party added to the daemon's CPU per byte, and what of it
# the containers were charged (us per MB / 1000: ns per byte), together
# and each.
extra = d1 - d0
took = (c1 - c0) / 1000 / max(extra, 1e-9)
took_x = (x1 - x0) / 1000 / max(extra, 1e-9)
took_y = (y1 - y0) / 1000 / max(extra, 1e-9)
# Less than all of it: the rule before the evidence bound charged it all
# (111 % with Docker). The target, under a third, is reported, not
# checked: CPU-bound work that a thread does for the third party within
# the evidence budget (5 ms) of a container's line goes to that container.
# On the instruction clock: Docker 12 to 29 % (7 boots), CRI 18 to 57 %
# (7 boots, two streams; four: 30 and 43 %, 2 boots); on the wall clock,
# where a thread's run counts the other vCPU's turns, 10 to 82 %. A
# budget of 1 ms left Docker's at 16 % (one boot).
ok2 = d1 > 1.1 * d0 and max(took, took_x, took_y) < 1
print(int(ok1), int(ok2), f"{x0 / max(y0, 1e-9):.2f}", f"{100 * took:.0f}", f"{d1 / max(d0, 1e-9):.2f}",
      f"{x1 / max(y1, 1e-9):.2f}", f"{100 * took_x:.0f}", f"{100 * took_y:.0f}")
PY
)
	echo "$verdict" | grep '^#'
	local ok1 ok2 rx rc rd rx1 rcx rcy
	read -r ok1 ok2 rx rc rd rx1 rcx rcy <<<"$(echo "$verdict" | grep -v '^#')"
	split_result "$ok1" "$engine: two containers are charged alike per byte of their logs (x/y $rx, 0.85 to 1.15)"
	echo "# info: $engine: a third party's work on the daemon: $rc % of what it added per byte charged to the two containers (the target: under 33 %); x $rcx %, y $rcy %, x/y $rx1"
	split_result "$ok2" "$engine: a third party's work on the daemon is not all charged to the containers ($rc % of what it added per byte, x $rcx %, y $rcy %, each under 100 %; the daemon's CPU per byte x$rd, over 1.1)"
}
# split_result OK TEXT: the TAP line of one of split's verdicts (OK: 1 or 0).
split_result() {
	n=$((n + 1))
	if [[ $1 == 1 ]]; then echo "ok $n $2"; else echo "not ok $n $2"; fi
}

n=0
if [[ $tap -eq 1 ]]; then
	echo "TAP version 13"
	# A step that gives up (cs_die) ends the script: say which engine, and
	# close the plan, so that the failure reads as one.
	trap 'rc=$?; ((rc == 0)) || { echo "not ok $((n + 1)) $engine: the test ended early (exit $rc, see above)"; echo "1..$((n + 1))"; }' EXIT
	for engine in "$@"; do
		t0=$SECONDS
		"${engine}_start"
		echo "# $engine: started in $((SECONDS - t0)) s"
		measure "$engine" borrowd
		[[ -n ${SHARED_DAEMON[$engine]:-} ]] && split "$engine"
		t0=$SECONDS
		"${engine}_stop"
		echo "# $engine: stopped in $((SECONDS - t0)) s"
	done
	echo "1..$n"
	trap - EXIT
	exit 0
fi
echo "# kernel $(uname -r), cgroup $(cs_hierarchy); quota $quota_ms/100 ms; shares of one CPU over ${secs} s"
# (A's column is ns: a process's schedstat.)
[[ -z $csv ]] ||
	echo "engine,mode,wall_us,worker_ns,charged_us,container_us,sysbench_events_per_s,alone_events_per_s,periods,throttled_periods,charging,quota_writes" >"$csv"
IFS=, read -ra modes <<<"${modes_arg:-off,borrowd,pace}"
# progress LABEL: planned seconds done (sysbench alone, then a window, a
# neighbour and about 12 s of starting and stopping per mode) and in all.
did=0
progress() {
	[[ -n $progress_file ]] || return 0
	echo "$did $((${#engines[@]} * (secs + ${#modes[@]} * (secs + 12)))) 0 $1" >"$progress_file"
}
engines=("$@")
alone=""
if [[ -n $meta ]]; then
	# shellcheck disable=SC2016 # jq's variables
	jq -n --arg kernel "$(uname -r)" --arg hierarchy "$(cs_hierarchy)" --argjson quota_ms "$quota_ms" \
		--argjson seconds "$secs" --arg modes "${modes[*]}" --arg engines "${engines[*]}" \
		--arg podman "$(podman --version 2>/dev/null)" --arg docker "$("$docker" --version 2>/dev/null)" \
		--arg containerd "$(containerd --version 2>/dev/null)" --arg conmon "$(conmon --version 2>/dev/null | head -1)" \
		--arg nerdctl "$("$CS_ROOT"/.build/nerdctl-stock/nerdctl --version 2>/dev/null)" \
		--arg borrowd_sha256 "$(sha256sum <"$tools/borrowd" | cut -c1-64)" '$ARGS.named' >"$meta"
fi
progress started
for engine in "$@"; do
	"${engine}_start"
	alone=$(sysbench_run "$engine" alone)
	did=$((did + secs))
	progress "$engine alone"
	echo "# $engine: sysbench alone on CPU 0: $alone events/s"
	printf '%-7s %-8s %9s %9s %9s %9s %8s %9s %10s  %-8s %8s\n' engine mode "worker A" "charged B" "ctr C" "B + C" \
		"B / A" "throttled" "sysbench" charging "writes/s"
	engine_modes=("${modes[@]}")
	[[ -n ${SHARED_DAEMON[$engine]:-} ]] &&
		mapfile -t engine_modes < <(printf '%s\n' "${modes[@]}" | grep -vx pace)
	for mode in "${engine_modes[@]}"; do
		measure "$engine" "$mode"
		did=$((did + secs + 12))
		progress "$engine $mode"
	done
	"${engine}_stop"
done
