#!/usr/bin/env bash
# The checks are bash conditions evaluated later, hence single quotes, and
# the variables they read look unused.
# shellcheck disable=SC2016,SC2034
# Tests of cgborrow (tools/cgborrow.c); TAP on stdout.
#
#   cgborrow.sh host    argument errors and the container lookup, on any
#                       kernel (no cpu.cfs.borrowing_us needed)
#   cgborrow.sh guest   in the guest on the patched kernel (v1 or v2):
#                       charges change the file and cpu.stat, libcgroup's
#                       cgset/cgget work on the file, the kernel's errors
#                       and permissions come out as documented exit codes
#   cgborrow.sh stock   in the guest on the stock kernel: the clear "kernel
#                       lacks the feature" error (exit 3)
#
# Expects the tools built (make -C tools) in .build/tools.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/tests/lib.sh
source "$root/tools/tests/lib.sh"
test_mode "${1:-}"
bin=${CGBORROW:-$root/.build/tools/cgborrow}
[[ -x $bin ]] || { echo "Bail out! $bin is not built (make -C tools)"; exit 1; }

# field JSON KEY: a key of the first object of cgborrow show --json.
field() { python3 -c 'import json,sys; v=json.loads(sys.argv[1])[0][sys.argv[2]]; print("null" if v is None else v)' "$1" "$2"; }

tmp=$(mktemp -d)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# fake_engines PID: engine metadata of a containerd and a Podman container
# whose init is PID, under $tmp (CGBORROW_RUNDIR).
fake_engines() {
	local task=$tmp/containerd/io.containerd.runtime.v2.task/default
	local pod=$tmp/containers/storage/overlay-containers
	local moby=$tmp/docker/containerd/daemon/io.containerd.runtime.v2.task/moby
	mkdir -p "$task/aaaa1111" "$task/aaaa2222" "$pod/bbbb3333/userdata" "$moby/eeee6666"
	echo "$1" >"$moby/eeee6666/init.pid"
	echo "$1" >"$task/aaaa1111/init.pid"
	echo "$1" >"$task/aaaa2222/init.pid"
	echo "$1" >"$pod/bbbb3333/userdata/pidfile"
	echo "$$" >"$pod/bbbb3333/userdata/conmon.pid"
}

host_tests() {
	run --help
	check "--help prints the usage, exit 0" '[[ $rc -eq 0 && $out == Usage:* ]]'
	run
	check "no command: exit 2" '[[ $rc -eq 2 ]]'
	run frob
	check "unknown command: exit 2" '[[ $rc -eq 2 && $out == *"unknown command"* ]]'
	local v
	for v in abc -5 1.5 "" 0x10 " 7" "+7" "7 8"; do
		run charge /x "$v"
		check "charge of '$v' is refused before any write (exit 2)" \
			'[[ $rc -eq 2 && ( $out == *"invalid value"* || $out == *"invalid option"* ) ]]'
	done
	run charge /x 99999999999999999999
	check "charge beyond 64 bits: out of range (exit 2)" '[[ $rc -eq 2 && $out == *"out of range"* ]]'
	run charge /x
	check "charge without a value: exit 2" '[[ $rc -eq 2 ]]'
	run charge /x 5 6
	check "charge with too many arguments: exit 2" '[[ $rc -eq 2 ]]'
	run charge --pid 1 --pid 2 5
	check "charge of two groups: exit 2" '[[ $rc -eq 2 ]]'
	run charge /x 5 --worker-pid abc
	check "charge with a bad --worker-pid: exit 2" '[[ $rc -eq 2 && $out == *"invalid worker pid"* ]]'
	run charge /x 5 --worker-pid 1 --worker-cgroup /
	check "charge naming the worker twice: exit 2" '[[ $rc -eq 2 && $out == *"name the worker once"* ]]'
	run charge /x 5 --json
	check "an option of another command: exit 2" '[[ $rc -eq 2 && $out == *"does not apply"* ]]'
	run show --pid
	check "an option without its argument: exit 2" '[[ $rc -eq 2 && $out == *"needs an argument"* ]]'
	run show --pid 0
	check "show --pid 0: exit 2" '[[ $rc -eq 2 && $out == *"invalid pid"* ]]'
	run show
	check "show without a group: exit 2" '[[ $rc -eq 2 ]]'
	run show /no/such/group
	check "show of a missing group: exit 1" '[[ $rc -eq 1 && $out == *"no such cgroup"* ]]'
	run show ../x
	check "a path that leaves the hierarchy: exit 2" '[[ $rc -eq 2 ]]'
	run charge / 5
	check "the root group: exit 2, says why" '[[ $rc -eq 2 && $out == *"root cgroup"* ]]'
	run show --pid 2147483647
	check "a missing process: exit 1" '[[ $rc -eq 1 && $out == *"no such process"* ]]'
	run top --delay 0
	check "top with a bad delay: exit 2" '[[ $rc -eq 2 ]]'

	sleep 600 &
	pids+=($!)
	fake_engines "$!"
	export CGBORROW_RUNDIR=$tmp
	local cg
	cg=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ || $1 == 0 { p = $3 } END { print p }' "/proc/$!/cgroup")
	run show --container nosuch
	check "an unknown container: exit 1" '[[ $rc -eq 1 && $out == *"no container engine"* ]]'
	run show --container aaaa
	check "an ambiguous id prefix: exit 2" '[[ $rc -eq 2 && $out == *"several"* ]]'
	run show --container aaaa1
	check "a containerd container by prefix: its init's group" '[[ $out == "cgborrow: container aaaa1 ($cg)"* ]]'
	run show --container bbbb3333
	check "a Podman container: its init's group" '[[ $out == "cgborrow: container bbbb3333 ($cg)"* ]]'
	run show --container eeee
	check "a Docker container (dockerd's own containerd): its init's group" '[[ $out == "cgborrow: container eeee ($cg)"* ]]'
	unset CGBORROW_RUNDIR
	if command -v man >/dev/null; then
		out=$(MANWIDTH=80 man --warnings -l "$root/tools/cgborrow.8" 2>&1 >/dev/null) && rc=0 || rc=$?
		check "the man page renders without warnings" '[[ $rc -eq 0 && -z $out ]]'
	fi
}


guest_tests() {
	local g=cgbt dir wdir json before after owed i v1=0
	dir=$(cpu_root)/$g
	wdir=$(cpu_root)/cgbt-worker
	[[ -e /sys/fs/cgroup/cgroup.controllers ]] || v1=1
	make_group $g 50000
	echo "# cgroup v$((2 - v1)), kernel $(uname -r)"

	run show --json $g
	json=$out
	check "show --json of a fresh group" '[[ $rc -eq 0 && $(field "$json" owed_usec) == 0 && $(field "$json" quota_usec) == 50000 && $(field "$json" period_usec) == 100000 ]]'
	before=$(field "$json" borrowed_usec)
	run charge $g 400000
	owed=$(cat "$dir/cpu.cfs.borrowing_us")
	check "charge 400 ms: exit 0, the file shows a debt" '[[ $rc -eq 0 && $owed -gt 0 && $owed -le 400000 ]]'
	run show --json $g
	after=$(field "$out" borrowed_usec)
	check "cpu.stat's borrowed counter grew by 400 ms" '[[ $((after - before)) -eq 400000 ]]'
	# The group's periods pay it off: each at most what it left unused and
	# its 50 ms quota, so in 5 periods at least.
	for ((i = 0; i < 40; i++)); do
		[[ $(cat "$dir/cpu.cfs.borrowing_us") -eq 0 ]] && break
		sleep 0.1
	done
	run show --json $g
	json=$out
	check "paid off by the periods: owed 0, deducted = borrowed" '[[ $(field "$json" owed_usec) -eq 0 && $(field "$json" borrow_deducted_usec) -eq $(field "$json" borrowed_usec) && $(field "$json" nr_borrow_periods) -ge 5 ]]'

	run show $g
	check "show prints the counters" '[[ $rc -eq 0 && $out == *borrowed_usec* && $out == *borrow_dropped_usec* && $out == *nr_borrow_periods* ]]'
	run show "$dir"
	check "a group named by its directory" '[[ $rc -eq 0 && $out == "/$g (cgroup"* ]]'

	before=$(field "$json" borrowed_usec)
	cgset -r cpu.cfs.borrowing_us=300000 $g
	rc=$?
	out=$(cgget -n -v -r cpu.cfs.borrowing_us $g 2>&1)
	check "cgset -r cpu.cfs.borrowing_us=300000 charges, cgget reads the debt" '[[ $rc -eq 0 && $out =~ ^[0-9]+$ && $out -gt 0 && $out -le 300000 ]]'
	run show --json $g
	after=$(field "$out" borrowed_usec)
	check "cgset's charge is in cpu.stat" '[[ $((after - before)) -eq 300000 ]]'
	out=$(cgget -r cpu.stat $g 2>&1)
	check "cgget -r cpu.stat lists the borrowing counters" '[[ $out == *nr_borrow_periods* ]]'

	sleep 600 &
	pids+=($!)
	echo "$!" >"$dir/cgroup.procs"
	run charge --pid "$!" 1000
	check "charge --pid: the process's group" '[[ $rc -eq 0 ]]'
	mkdir -p "$tmp/containerd/io.containerd.runtime.v2.task/default/cccc4444"
	echo "$!" >"$tmp/containerd/io.containerd.runtime.v2.task/default/cccc4444/init.pid"
	out=$(CGBORROW_RUNDIR=$tmp "$bin" show --json --container cccc 2>&1) && rc=0 || rc=$?
	check "show --container: the init process's group" '[[ $rc -eq 0 && $(field "$out" cgroup) == /$g ]]'

	run charge $g 18446744073709552
	check "a value too large for the kernel (ERANGE): exit 2" '[[ $rc -eq 2 && $out == *"out of range"* ]]'
	run charge $g 1000 --worker-pid $$
	check "charge naming a worker: done, or refused as an old kernel's (exit 2)" \
		'[[ $rc -eq 0 || ( $rc -eq 2 && $out == *"does not take a worker pid"* ) ]]'
	# A worker's group outlives it: charged by the group's id.
	mkdir -p "$wdir"
	run show --json $g
	before=$(field "$out" borrowed_usec)
	run charge $g 1000 --worker-cgroup "$wdir"
	check "charge naming the worker's group (no task in it): exit 0" '[[ $rc -eq 0 ]]'
	run show --json $g
	after=$(field "$out" borrowed_usec)
	check "the group's charge is in cpu.stat" '[[ $((after - before)) -eq 1000 ]]'
	rmdir "$wdir"
	run charge $g 1000 --worker-cgroup "$wdir"
	check "a worker's group that is gone: exit 1, says so" '[[ $rc -eq 1 && $out == *"no such cgroup"* ]]'
	run charge $g 0
	check "a charge of 0 is accepted" '[[ $rc -eq 0 ]]'

	out=$(setpriv --reuid 65534 --regid 65534 --clear-groups "$bin" charge $g 1000 2>&1) && rc=0 || rc=$?
	check "an unprivileged user: permission denied, exit 4" '[[ $rc -eq 4 && $out == *"permission denied"* ]]'
	out=$(setpriv --inh-caps -sys_admin --bounding-set -sys_admin "$bin" charge $g 1000 2>&1) && rc=0 || rc=$?
	if [[ $v1 -eq 1 ]]; then
		check "v1, root without CAP_SYS_ADMIN: permission denied, exit 4" '[[ $rc -eq 4 && $out == *"permission denied"* ]]'
	else
		# It owns cgroup.procs everywhere: it could move itself into the group.
		check "v2, root without CAP_SYS_ADMIN: may move the worker, so charged" '[[ $rc -eq 0 ]]'
	fi

	if [[ $v1 -eq 0 ]]; then
		mkdir -p /sys/fs/cgroup/cgbt-nocpu/child
		run charge cgbt-nocpu/child 1000
		check "v2, cpu controller not enabled: exit 1, says so" '[[ $rc -eq 1 && $out == *"not enabled"* ]]'
		rmdir /sys/fs/cgroup/cgbt-nocpu/child /sys/fs/cgroup/cgbt-nocpu
	fi

	"$bin" charge $g 200000
	run top --once --delay 0.5
	check "top --once lists the group with its quota" '[[ $rc -eq 0 && $out == *"/$g"* && $out == *"50.0%"* ]]'
	run top --once --delay 0.5 --all
	check "top --all lists every group" '[[ $rc -eq 0 && $out == *"/$g"* ]]'
}

stock_tests() {
	make_group cgbt 50000
	run charge cgbt 1000
	check "charge on the stock kernel: exit 3, kernel lacks the feature; borrowd's quota mode named" \
		'[[ $rc -eq 3 && $out == *"has no cpu.cfs.borrowing_us"* && $out == *"borrowd charges by lowering quotas"* ]]'
	echo "# $out"
	run show cgbt
	check "show on the stock kernel: exit 3" '[[ $rc -eq 3 ]]'
	run top --once --delay 0.2
	check "top on the stock kernel: exit 3" '[[ $rc -eq 3 ]]'
}

run_mode "$mode"
