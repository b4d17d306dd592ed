# shellcheck shell=bash
# The container stack inside the guest: containerd (Debian's 1.6), runc or
# crun, and the project's nerdctl. Source it in a script that runs in the
# guest (scripts/vm-run.sh); do not execute it.
#
# Layout, as in the reference study: containerd, its shims and the
# per-container logging processes run in the cgroup
# /system.slice/containerd.service; containers (cgroupfs driver) get
# /default/<id>. The guest's root is the host's / read-only, so all state
# lives on the tmpfs that guest-init.sh mounts on /run and /var/lib.
#
# With `scripts/vm-run.sh --init systemd` the guest runs systemd as PID 1:
# containerd is then a transient unit in system.slice, and the systemd
# cgroup driver is available (containers in system.slice/nerdctl-<id>.scope).

CS_ROOT=${CS_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
CS_STATE=/run/cfsb-containers
CS_NERDCTL=${CS_NERDCTL:-$CS_ROOT/.build/nerdctl/nerdctl}
CS_IMAGES=${CS_IMAGES:-$CS_ROOT/.build/images}
CS_CRICTL=${CS_CRICTL:-$CS_ROOT/.build/crictl/crictl}
# kubelet's links to the pods' log files (its /var/log/containers), made by
# cs_cri_run as kubelet makes them: borrowd --pod-logs reads them.
CS_POD_LOG_LINKS=$CS_STATE/log/containers
CS_CGROUP_MANAGER=cgroupfs
CS_RUNTIME=runc
CS_CONTAINERD_CGROUP=system.slice/containerd.service

cs_die() { echo "container-stack: $*" >&2; exit 1; }

# What starts the stack or moves the caller into a cgroup runs only in the
# guest (or with CFSB_GUEST_ANYWHERE=1), whoever sourced this.
# shellcheck source=scripts/guest-check.sh
source "$CS_ROOT/scripts/guest-check.sh"

# cs_hierarchy: v1 or v2, the guest's cgroup hierarchy.
cs_hierarchy() {
	if [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; then echo v2; else echo v1; fi
}

# cs_cpu_root: the directory of the cpu controller's hierarchy.
cs_cpu_root() {
	if [[ $(cs_hierarchy) == v2 ]]; then echo /sys/fs/cgroup; else echo /sys/fs/cgroup/cpu; fi
}

# cs_systemd: is systemd PID 1?
cs_systemd() { [[ $(cat /proc/1/comm) == systemd ]]; }

# cs_nerdctl ARGS...: nerdctl with the stack's global options.
cs_nerdctl() {
	NERDCTL_TOML=$CS_STATE/nerdctl.toml "$CS_NERDCTL" --cgroup-manager "$CS_CGROUP_MANAGER" "$@"
}

# cs_enter_cgroup REL: move the calling shell into cgroup REL (made in every
# mounted hierarchy).
cs_enter_cgroup() {
	local rel=$1 dir
	cfsb_guest_only
	if [[ $(cs_hierarchy) == v2 ]]; then
		local parent=/sys/fs/cgroup part
		for part in ${rel//\// }; do
			echo "+cpu +cpuset +memory +pids" >"$parent/cgroup.subtree_control" 2>/dev/null || true
			parent=$parent/$part
			mkdir -p "$parent"
		done
		echo "$BASHPID" >"/sys/fs/cgroup/$rel/cgroup.procs"
	else
		for dir in /sys/fs/cgroup/*/; do
			[[ -L ${dir%/} ]] && continue
			mkdir -p "$dir$rel"
			# cpuset needs its parents' CPUs and memory nodes first.
			if [[ -f ${dir}cpuset.cpus ]]; then
				local d=$dir p
				for p in ${rel//\// }; do
					cat "${d}cpuset.cpus" >"$d$p/cpuset.cpus"
					cat "${d}cpuset.mems" >"$d$p/cpuset.mems"
					d=$d$p/
				done
			fi
			echo "$BASHPID" >"$dir$rel/cgroup.procs"
		done
	fi
}

# cs_start [--runtime runc|crun] [--cgroup-manager cgroupfs|systemd]
#          [--cpus LIST] [--cri]
# Start containerd in /system.slice/containerd.service (pinned to LIST if
# given: its shims and logging processes inherit the pinning) and wait
# until it answers. --cri: with its CRI plugin, as on a Kubernetes node
# (crictl, cs_cri_*), with the cfsb/pause image as the pods' sandbox and no
# CNI: pods share the guest's network namespace.
cs_start() {
	local cpus="" cri=0
	cfsb_guest_only
	while [[ $# -gt 0 ]]; do
		case $1 in
		--runtime) CS_RUNTIME=$2; shift 2 ;;
		--cgroup-manager) CS_CGROUP_MANAGER=$2; shift 2 ;;
		--cpus) cpus=$2; shift 2 ;;
		--cri) cri=1; shift ;;
		*) cs_die "cs_start: unknown option $1" ;;
		esac
	done
	case $CS_RUNTIME in runc | crun) ;; *) cs_die "unknown runtime $CS_RUNTIME (runc, crun)" ;; esac
	case $CS_CGROUP_MANAGER in
	cgroupfs) ;;
	systemd) cs_systemd || cs_die "the systemd cgroup driver needs systemd as PID 1 (vm-run.sh --init systemd)" ;;
	*) cs_die "unknown cgroup manager $CS_CGROUP_MANAGER (cgroupfs, systemd)" ;;
	esac
	[[ -x $CS_NERDCTL ]] || cs_die "no nerdctl at $CS_NERDCTL (scripts/nerdctl-build.sh)"
	command -v containerd >/dev/null || cs_die "containerd is not installed"
	mkdir -p "$CS_STATE" /var/lib/containerd /run/containerd /var/lib/nerdctl
	cat >"$CS_STATE/containerd.toml" <<-EOF
		version = 2
		root = "/var/lib/containerd"
		state = "/run/containerd"
		$(cs_cri_config "$cri")
		[grpc]
		  address = "/run/containerd/containerd.sock"
		# Restart policies act within a second, not ten: the tests of a
		# crash loop need the delete to follow the exit as it can in
		# production, and no 10 s waits. (The monitor may then restart
		# a task that nerdctl run --restart always has created and not
		# started yet: give the policy once the task runs.)
		[plugins."io.containerd.internal.v1.restart"]
		  interval = "1s"
	EOF
	cat >"$CS_STATE/nerdctl.toml" <<-EOF
		address = "unix:///run/containerd/containerd.sock"
		namespace = "default"
		data_root = "/var/lib/nerdctl"
		cgroup_manager = "$CS_CGROUP_MANAGER"
	EOF
	if cs_systemd; then
		# Debian's containerd.service, with the stack's configuration.
		mkdir -p /run/systemd/system/containerd.service.d
		cat >/run/systemd/system/containerd.service.d/cfsb.conf <<-EOF
			[Service]
			ExecStart=
			ExecStart=/usr/bin/containerd --config $CS_STATE/containerd.toml --log-level warn
			StandardOutput=file:$CS_STATE/containerd.log
			StandardError=inherit
			${cpus:+CPUAffinity=${cpus//,/ }}
		EOF
		systemctl daemon-reload
		systemctl start containerd || cs_die "systemctl start containerd failed"
		systemctl show -p MainPID --value containerd >"$CS_STATE/containerd.pid"
	else
		(
			cs_enter_cgroup "$CS_CONTAINERD_CGROUP"
			[[ -n $cpus ]] && taskset -pc "$cpus" "$BASHPID" >/dev/null
			exec containerd --config "$CS_STATE/containerd.toml" --log-level warn
		) >"$CS_STATE/containerd.log" 2>&1 </dev/null &
		echo $! >"$CS_STATE/containerd.pid"
	fi
	local i
	for ((i = 0; i < 300; i++)); do
		ctr --address /run/containerd/containerd.sock version >/dev/null 2>&1 && return 0
		kill -0 "$(cat "$CS_STATE/containerd.pid")" 2>/dev/null ||
			{ cat "$CS_STATE/containerd.log" >&2; cs_die "containerd exited"; }
		sleep 0.1
	done
	cat "$CS_STATE/containerd.log" >&2
	cs_die "containerd did not answer within 30 s"
}

# cs_cri_config 0|1: containerd's configuration of its CRI plugin: off
# (nerdctl needs none; CRI would want CNI plugins and a pause image), or on
# with the local pause image, runc through its v2 shim and the stack's
# cgroup driver.
cs_cri_config() {
	if [[ $1 == 0 ]]; then
		echo 'disabled_plugins = ["io.containerd.grpc.v1.cri"]'
		return
	fi
	local systemd=false
	[[ $CS_CGROUP_MANAGER == systemd ]] && systemd=true
	cat <<-EOF
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "docker.io/cfsb/pause:latest"
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    conf_dir = "$CS_STATE/cni"
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    default_runtime_name = "cfsb"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.cfsb]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.cfsb.options]
		        BinaryName = "$(command -v "$CS_RUNTIME")"
		        SystemdCgroup = $systemd
	EOF
}

# cs_stop: remove all containers, stop containerd.
cs_stop() {
	local pid ids
	mapfile -t ids < <(cs_nerdctl ps -aq 2>/dev/null)
	[[ ${#ids[@]} -eq 0 ]] || cs_nerdctl rm -f "${ids[@]}" >/dev/null 2>&1 || true
	pid=$(cat "$CS_STATE/containerd.pid" 2>/dev/null) || return 0
	kill "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}

# cs_load_images [NAME...]: load the images scripts/build_images.py made.
cs_load_images() {
	local name
	[[ $# -gt 0 ]] || set -- busybox sysbench
	for name in "$@"; do
		[[ -f $CS_IMAGES/$name.tar ]] ||
			cs_die "no image archive $CS_IMAGES/$name.tar (scripts/build_images.py)"
		cs_nerdctl load -i "$CS_IMAGES/$name.tar" >/dev/null || cs_die "cannot load image $name"
	done
}

# cs_run ARGS...: nerdctl run with the stack's runtime; prints the id.
cs_run() {
	cs_nerdctl run --runtime "$CS_RUNTIME" --network none "$@"
}

# cs_container_cgroup ID: the container's directory in the cpu hierarchy,
# from its init process (whatever the driver or --cgroup-parent).
cs_container_cgroup() {
	local pid line rel
	pid=$(cs_nerdctl inspect -f '{{.State.Pid}}' "$1") || return 1
	while IFS= read -r line; do
		case $line in
		0::*) rel=${line#0::} ;;
		*:cpu,cpuacct:* | *:cpuacct,cpu:* | *:cpu:*) rel=${line#*:*:} ;;
		*) continue ;;
		esac
	done <"/proc/$pid/cgroup"
	[[ -n ${rel:-} ]] || return 1
	echo "$(cs_cpu_root)$rel"
}

# cs_logger_pid ID: the pid of the container's logging process (fork-free:
# it scans /proc, and forks are slow in the guest under load).
cs_logger_pid() {
	local id=$1 dir args env var
	for dir in /proc/[0-9]*; do
		mapfile -d '' -t args <"$dir/cmdline" 2>/dev/null || continue
		[[ " ${args[*]} " == *" _NERDCTL_INTERNAL_LOGGING "* ]] || continue
		mapfile -d '' -t env <"$dir/environ" 2>/dev/null || continue
		for var in "${env[@]}"; do
			[[ $var == "CONTAINER_ID=$id" ]] || continue
			echo "${dir#/proc/}"
			return 0
		done
	done
	return 1
}

# Measurements. They read files with bash builtins only: forking is slow in
# the guest while a container floods the CPU, and would blur the timing.

# cs_cpu_stat CGDIR: the cgroup's CPU usage and bandwidth statistics, in µs
# whatever the hierarchy (v1 shows ns), into the associative array CS_STAT:
# usage nr_periods nr_throttled throttled nr_borrow_periods borrowed
# deducted dropped (0 where the kernel has no such key).
declare -gA CS_STAT
cs_cpu_stat() {
	local key value
	CS_STAT=([usage]=0 [nr_periods]=0 [nr_throttled]=0 [throttled]=0
		[nr_borrow_periods]=0 [borrowed]=0 [deducted]=0 [dropped]=0)
	while read -r key value; do
		case $key in
		usage_usec) CS_STAT[usage]=$value ;;
		nr_periods | nr_throttled | nr_borrow_periods) CS_STAT[$key]=$value ;;
		throttled_usec) CS_STAT[throttled]=$value ;;
		throttled_time) CS_STAT[throttled]=$((value / 1000)) ;;
		borrowed_usec) CS_STAT[borrowed]=$value ;;
		borrowed_time) CS_STAT[borrowed]=$((value / 1000)) ;;
		borrow_deducted_usec) CS_STAT[deducted]=$value ;;
		borrow_deducted_time) CS_STAT[deducted]=$((value / 1000)) ;;
		borrow_dropped_usec) CS_STAT[dropped]=$value ;;
		borrow_dropped_time) CS_STAT[dropped]=$((value / 1000)) ;;
		esac
	done <"$1/cpu.stat"
	if [[ -f $1/cpuacct.usage ]]; then
		read -r value <"$1/cpuacct.usage"
		CS_STAT[usage]=$((value / 1000))
	fi
}

# cs_usage_us CGDIR: CPU time the cgroup used, µs, into REPLY.
cs_usage_us() { cs_cpu_stat "$1" && REPLY=${CS_STAT[usage]}; }

# cs_borrowed_us CGDIR: CPU time charged to the cgroup, µs, into REPLY
# (0 on a kernel without cpu.cfs.borrowing_us).
cs_borrowed_us() { cs_cpu_stat "$1" && REPLY=${CS_STAT[borrowed]}; }

# cs_pid_cpu_us PID: user+system CPU time of a process and its threads,
# dead ones included, µs, into REPLY (clock ticks of 10 ms).
cs_pid_cpu_us() {
	local line fields
	read -r line <"/proc/$1/stat" || return 1
	# Fields after the command name, which may contain spaces.
	read -ra fields <<<"${line##*) }"
	REPLY=$(((fields[11] + fields[12]) * 10000))
}

# cs_pid_runtime_us PID: the CPU time of a process's live threads, µs, into
# REPLY, from the scheduler's nanosecond count (the first field of
# /proc/PID/task/TID/schedstat): a microsecond's resolution where
# cs_pid_cpu_us has a tick's. A thread that exited takes its time with it
# (cs_pid_cpu_us keeps it): compare the two over a window to see one.
cs_pid_runtime_us() {
	local f ns sum=0
	[[ -d /proc/$1/task ]] || return 1
	for f in /proc/"$1"/task/*/schedstat; do
		read -r ns _ 2>/dev/null <"$f" && sum=$((sum + ns))
	done
	REPLY=$((sum / 1000))
}

# cs_sample LOGGER_PID CGDIR: "wall logger charged container" in µs, into
# REPLY.
cs_sample() {
	local wall=${EPOCHREALTIME/./} a
	cs_pid_cpu_us "$1"; a=$REPLY
	cs_cpu_stat "$2"
	REPLY="$wall $a ${CS_STAT[borrowed]} ${CS_STAT[usage]}"
}

# --- CRI (cs_start --cri): pods and containers as kubelet makes them ----

# cs_crictl ARGS...: crictl (scripts/crictl-build.sh) on the stack's
# containerd.
cs_crictl() {
	[[ -x $CS_CRICTL ]] || cs_die "no crictl at $CS_CRICTL (scripts/crictl-build.sh)"
	if [[ ! -f $CS_STATE/crictl.yaml ]]; then
		local sock=unix:///run/containerd/containerd.sock
		printf 'runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: 60\n' "$sock" "$sock" \
			>"$CS_STATE/crictl.yaml"
	fi
	"$CS_CRICTL" --config "$CS_STATE/crictl.yaml" "$@"
}

# cs_cri_load_images [NAME...]: the images into CRI's namespace (k8s.io),
# the pods' sandbox image (pause) included.
cs_cri_load_images() {
	local name
	[[ $# -gt 0 ]] || set -- busybox sysbench
	for name in pause "$@"; do
		[[ -f $CS_IMAGES/$name.tar ]] ||
			cs_die "no image archive $CS_IMAGES/$name.tar (scripts/build_images.py)"
		cs_nerdctl --namespace k8s.io load -i "$CS_IMAGES/$name.tar" >/dev/null ||
			cs_die "cannot load image $name into k8s.io"
	done
}

# cs_cri_run NAME CPUS QUOTA_US PERIOD_US IMAGE CMD...: a pod NAME with one
# container NAME running CMD, as kubelet would make it for a pod with a CPU
# limit: the pod's cgroup under kubepods (cgroupfs), the container's quota,
# pinned to CPUS, its output copied by containerd to the pod's log file
# ($CS_STATE/pods/NAME/NAME/0.log), linked from $CS_POD_LOG_LINKS. Prints
# the container's id.
cs_cri_run() {
	local name=$1 cpus=$2 quota=$3 period=$4 image=$5 dir=$CS_STATE/pods/$1 pod ctr cmd
	shift 5
	mkdir -p "$dir"
	jq -n --arg name "$name" --arg logdir "$dir" '{
		metadata: {name: $name, namespace: "default", uid: ("uid-" + $name)},
		log_directory: $logdir,
		linux: {cgroup_parent: ("/kubepods/pod-" + $name),
			security_context: {namespace_options: {network: 2}}}}' >"$dir/pod.json"
	# CMD as a JSON array, a word per line (jq 1.6 takes a --option among
	# --args for its own).
	cmd=$(printf '%s\n' "$@" | jq -R . | jq -cs .) || return 1
	jq -n --arg name "$name" --arg image "docker.io/$image" --arg cpus "$cpus" \
		--argjson quota "$quota" --argjson period "$period" --argjson cmd "$cmd" '{
		metadata: {name: $name}, image: {image: $image},
		command: $cmd, log_path: ($name + "/0.log"),
		linux: {resources: {cpu_quota: $quota, cpu_period: $period,
			cpuset_cpus: $cpus}}}' >"$dir/container.json" || return 1
	pod=$(cs_crictl runp "$dir/pod.json") || return 1
	ctr=$(cs_crictl create "$pod" "$dir/container.json" "$dir/pod.json") || return 1
	cs_crictl start "$ctr" >/dev/null || return 1
	mkdir -p "$CS_POD_LOG_LINKS"
	ln -sfn "$dir/$name/0.log" "$CS_POD_LOG_LINKS/${name}_default_$name-$ctr.log"
	echo "$ctr"
}

# cs_cri_wait ID [SECONDS]: wait until the container has exited and
# containerd has copied all its output to the log file (it has closed the
# container's FIFOs: behind a flood, that can be seconds later); at most
# SECONDS, default 600.
cs_cri_wait() {
	local i state="" fds
	fds=/proc/$(cat "$CS_STATE/containerd.pid")/fd
	for ((i = 0; i < ${2:-600}; i++)); do
		[[ $state == CONTAINER_EXITED ]] ||
			state=$(cs_crictl inspect -o json "$1" | jq -r .status.state)
		if [[ $state == CONTAINER_EXITED && -z $(find "$fds" -lname "*$1*" -print -quit) ]]; then
			return 0
		fi
		cs_nap 1
	done
	echo "container-stack: container $1 still ${state:-unknown} (or its output not copied) after ${2:-600} s" >&2
	return 1
}

# cs_cri_output NAME: what pod NAME's container wrote, from its CRI log
# file (each line "TIME STREAM TAG TEXT": the text).
cs_cri_output() { sed 's/^[^ ]* [^ ]* [^ ]* //' "$CS_STATE/pods/$1/$1/0.log"; }

# cs_cri_rm NAME: stop and remove pod NAME and its containers.
cs_cri_rm() {
	local pod
	for pod in $(cs_crictl pods --name "^$1\$" -q); do
		cs_crictl rmp -f "$pod" >/dev/null
	done
	rm -rf "${CS_STATE:?}/pods/$1" "$CS_POD_LOG_LINKS/$1_default_$1-"*.log
}

# cs_nap SECONDS: sleep without forking.
cs_nap() {
	local fifo
	if [[ -z ${CS_NAP_FD:-} ]]; then
		fifo=$(mktemp -u /tmp/cs-nap.XXXXXX)
		mkfifo "$fifo"
		exec {CS_NAP_FD}<>"$fifo"
		rm "$fifo"
	fi
	read -rt "$1" -u "$CS_NAP_FD" || true
}

# cs_measure ID SECONDS: over SECONDS, the shares of one CPU (in units of
# 0.01 %) used by the container's logging process (A), charged to the
# container (B) and used by the container (C): "A B C", into REPLY.
cs_measure() {
	local id=$1 secs=$2 pid cg s0 s1
	pid=$(cs_logger_pid "$id") || cs_die "no logging process for $id"
	cg=$(cs_container_cgroup "$id") || cs_die "no cgroup for $id"
	cs_sample "$pid" "$cg"; read -ra s0 <<<"$REPLY"
	cs_nap "$secs"
	cs_sample "$pid" "$cg"; read -ra s1 <<<"$REPLY"
	local wall=$((s1[0] - s0[0]))
	REPLY="$(((s1[1] - s0[1]) * 10000 / wall)) $(((s1[2] - s0[2]) * 10000 / wall)) $(((s1[3] - s0[3]) * 10000 / wall))"
}

# cs_pct N: N in units of 0.01 % as a percentage with two decimals.
cs_pct() { printf '%d.%02d' $(($1 / 100)) $(($1 % 100)); }

# cs_ppid PID: the parent's pid, into REPLY.
cs_ppid() {
	local line fields
	read -r line <"/proc/$1/stat" || return 1
	read -ra fields <<<"${line##*) }"
	REPLY=${fields[1]}
}
