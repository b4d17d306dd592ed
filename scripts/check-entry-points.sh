#!/usr/bin/env bash
# Every entry point answers --help and -h with its usage, exit status 0 and
# no side effect, and every guest-only script refuses to run here, with a
# message, a non-zero exit status and no side effect. TAP on stdout.
#
#   scripts/check-entry-points.sh [--list]
#
# Entry points: the executable files in scripts/, selftests/, tools/tests/,
# nerdctl-patch/tests/ and experiments/ (the sourced libraries are not
# executable). Guest-only: those with "guest" in their name, which run in
# the guest scripts/vm-run.sh boots (scripts/guest-check.sh); each is run
# with no argument and with the arguments of a real run. guest-init.sh, the
# guest's PID 1, is run as a child and as PID 1 of a PID namespace of its
# own with the environment the kernel would give it.
#
# Each run has a sandbox of its own, which keeps side effects in and shows
# them: new mount, PID, network, UTS and IPC namespaces; the command runs
# chrooted into an overlay of / (and of the checkout's file system, if
# another one) whose writes land on a tmpfs; an empty tmpfs on /run,
# /sys/fs/cgroup, /dev and /dev/shm (with the usual character devices
# bound in), /sys and /proc/sys read-only, regular files bound over
# /proc/sysrq-trigger, /dev/kmsg and /dev/console; and without the
# capabilities to mount, set the host name, reboot or load modules (a /proc
# it mounted would uncover the real sysrq-trigger). A side effect is: a
# file made, changed or removed anywhere; anything in the empty tmpfs
# mounts; anything written to sysrq-trigger, kmsg or the console; the mount
# table or host name changed; a process left running; an operation the
# sandbox refused (EPERM, EACCES, EROFS on stderr). The first checks make
# each kind of side effect on purpose and expect the sandbox to see it.
#
# Needs root, unshare, setpriv and overlayfs (scripts/run-tests.sh runs it
# in its static checks); without them every check is skipped.
# --list: the entry points, "guest" after the guest-only ones.
set -uo pipefail

self=$(realpath "$0")
root=$(cd "$(dirname "$self")/.." && pwd)

# The entry points that do not answer --help yet, and whose files this
# change does not own: their --help failing is a skip with the reason, not
# a failure (their side effects still fail). Remove a line once it passes.
declare -A HELP_PENDING=()

# The arguments of a real run of each guest-only script (they must be
# refused as they are without any).
declare -A GUEST_ARGS=(
	[scripts/guest-init.sh]=""
	[selftests/run-in-guest.sh]="/tmp/cfsb-check-results kunit borrowing"
	[tools/tests/run-in-guest.sh]="/tmp/cfsb-check-results cgborrow borrowd"
	[tools/tests/engines-in-guest.sh]="--tap --seconds 1 podman"
	[tools/tests/overhead-in-guest.sh]="--seconds 1 10"
	[nerdctl-patch/tests/run-in-guest.sh]="--only charge"
	[experiments/noisy_logging_guest.sh]="--out /tmp/cfsb-check-results --tier quick"
	[experiments/worker_placement_guest.sh]="1"
	[selftests/bench_period_timer_guest.sh]="500 1"
	[scripts/pi-image-in-guest.sh]="/dev/mmcblk0p3 kunit borrowing"
)

# What the command under test may not do (setpriv --bounding-set).
DROP_CAPS=-sys_admin,-sys_boot,-sys_module,-sys_time,-sys_rawio,-net_admin,-mknod,-sys_resource

entry_points() {
	local dir f
	for dir in scripts selftests tools/tests nerdctl-patch/tests experiments; do
		for f in "$root/$dir"/*; do
			[[ -f $f && -x $f ]] || continue
			f=${f#"$root"/}
			if [[ ${f##*/} == *guest* ]]; then echo "$f guest"; else echo "$f"; fi
		done
	done
}

# mount_table: the mount points, their file systems and options.
mount_table() {
	awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { print $5, $6, $(i + 1), $(i + 2); break } }' \
		/proc/self/mountinfo | sort
}

# in_sandbox OUT PID1 CMD...: runs as PID 1 of the sandbox's namespaces
# (see the top); CMD's stdout, stderr and exit status go to OUT/stdout,
# OUT/stderr and OUT/status, the side effects seen to OUT/effects.
in_sandbox() {
	local out=$1 pid1=$2
	shift 2
	local s=$out/scratch r targets=(/) t i mp p state cmdline host0 host1
	# Only as PID 1 of the namespaces sandbox() makes: it mounts, and
	# kills every process it sees at the end.
	[[ $$ -eq 1 ]] || { echo "${0##*/}: __in_sandbox is for sandbox() only" >&2; return 2; }
	mkdir -p "$s"
	mount -t tmpfs -o mode=0700 cfsb-sandbox "$s" || return 1
	r=$s/root
	mkdir -p "$r"
	t=$(findmnt -no TARGET -T "$root") && [[ $t != / ]] && targets+=("$t")
	for i in "${!targets[@]}"; do
		mkdir -p "$s/up/$i" "$s/work/$i"
		mount -t overlay "cfsb-sandbox-$i" \
			-o "lowerdir=${targets[i]},upperdir=$s/up/$i,workdir=$s/work/$i" "$r${targets[i]%/}" ||
			return 1
	done
	mount -t proc proc "$r/proc" || return 1
	mount --bind "$r/proc/sys" "$r/proc/sys" && mount -o remount,bind,ro "$r/proc/sys" || return 1
	if [[ -e $r/proc/sysrq-trigger ]]; then
		: >"$s/sysrq-trigger"
		mount --bind "$s/sysrq-trigger" "$r/proc/sysrq-trigger" || return 1
	fi
	mount --bind /sys "$r/sys" && mount -o remount,bind,ro "$r/sys" || return 1
	mount -t tmpfs -o mode=0755 cfsb-sandbox-cgroup "$r/sys/fs/cgroup" || return 1
	mount -t tmpfs -o mode=0755 cfsb-sandbox-run "$r/run" || return 1
	mount -t tmpfs -o mode=0755 cfsb-sandbox-dev "$r/dev" || return 1
	mkdir "$r/dev/shm" "$r/dev/pts"
	mount -t tmpfs -o mode=1777 cfsb-sandbox-shm "$r/dev/shm" || return 1
	for p in null zero full random urandom tty; do
		: >"$r/dev/$p"
		mount --bind "/dev/$p" "$r/dev/$p" || return 1
	done
	: >"$r/dev/kmsg"
	: >"$r/dev/console"
	ln -s /proc/self/fd "$r/dev/fd"
	ln -s /proc/self/fd/0 "$r/dev/stdin"
	ln -s /proc/self/fd/1 "$r/dev/stdout"
	ln -s /proc/self/fd/2 "$r/dev/stderr"
	(cd "$r/dev" && find . | sort) >"$s/dev.before"
	mount_table >"$s/mounts.before"
	read -r host0 </proc/sys/kernel/hostname

	# shellcheck disable=SC2016 # the inner shell expands it
	local run=(setpriv --bounding-set "$DROP_CAPS" -- chroot "$r"
		/bin/bash -c 'cd "$1" && shift && exec "$@"' sandbox "$root" "$@")
	[[ $pid1 == 1 ]] && run=(unshare --pid --fork --kill-child -- "${run[@]}")
	timeout -k 5 30 env -u CFSB_GUEST_ANYWHERE "${run[@]}" </dev/null >"$out/stdout" 2>"$out/stderr"
	echo $? >"$out/status"

	{
		for p in /proc/[0-9]*; do
			p=${p#/proc/}
			[[ $p == 1 || ! -r /proc/$p/stat ]] && continue
			read -r _ _ state _ <"/proc/$p/stat" 2>/dev/null || continue
			[[ $state == Z ]] && continue
			mapfile -d '' cmdline <"/proc/$p/cmdline" 2>/dev/null
			echo "a process left running: ${cmdline[*]}"
		done
		kill -KILL -1 2>/dev/null
		for i in "${!targets[@]}"; do
			(cd "$s/up/$i" && find . -mindepth 1) | while read -r p; do
				mp=${targets[i]%/}/${p#./}
				[[ -d $s/up/$i/$p && ! -L $s/up/$i/$p && -d $mp && ! -L $mp ]] && continue
				if [[ -c $s/up/$i/$p ]]; then echo "removed: $mp"; else echo "written: $mp"; fi
			done | head -20
		done
		for p in run sys/fs/cgroup dev/shm; do
			(cd "$r/$p" && find . -mindepth 1) | head -5 | sed "s|^\.|written: /$p|"
		done
		(cd "$r/dev" && find . | sort) | comm -13 "$s/dev.before" - | sed 's|^\.|written: /dev|'
		for p in "$r/dev/kmsg" "$r/dev/console" "$s/sysrq-trigger"; do
			[[ -s $p ]] && echo "written to ${p##*/}: $(head -c 80 "$p" | tr '\n' ' ')"
		done
		mount_table | diff "$s/mounts.before" - | grep '^[<>]' | sed 's/^/mount table: /'
		read -r host1 </proc/sys/kernel/hostname
		[[ $host0 == "$host1" ]] || echo "host name changed to $host1"
		grep -m3 -iE 'operation not permitted|permission denied|read-only file system|must be root' \
			"$out/stderr" | sed 's/^/refused by the sandbox: /'
	} >"$out/effects" 2>&1
	return 0
}

# sandbox OUT [--pid1] CMD...: CMD (a path in the checkout, or a command)
# run in a sandbox of its own; see in_sandbox.
sandbox() {
	local out=$1 pid1=0
	shift
	[[ $1 == --pid1 ]] && { pid1=1; shift; }
	rm -rf "$out"
	mkdir -p "$out"
	unshare --mount --pid --fork --kill-child --mount-proc --net --uts --ipc --propagation private \
		-- "$self" __in_sandbox "$out" "$pid1" "$@" >"$out/sandbox.log" 2>&1 ||
		echo "the sandbox failed: $(tail -3 "$out/sandbox.log" | tr '\n' ' ')" >>"$out/effects"
	[[ -f $out/status ]] || echo 255 >"$out/status"
}

n=0 failed=0
tap() {
	n=$((n + 1))
	if [[ $1 == ok ]]; then echo "ok $n $2"; else echo "not ok $n $2"; failed=$((failed + 1)); fi
}
# report NAME OUT CONDITION WHY: a TAP line for a run; on failure WHY, the
# side effects seen and the output's end as comments.
report() {
	local name=$1 out=$2 cond=$3 why=$4
	if [[ $cond == ok && ! -s $out/effects ]]; then
		tap ok "$name"
		return
	fi
	tap "not ok" "$name"
	[[ $cond == ok ]] || echo "# $why"
	sed 's/^/# side effect: /' "$out/effects" | head -12
	{ tail -3 "$out/stdout"; tail -5 "$out/stderr"; } | sed 's/^/#   /'
}

main() {
	case ${1:-} in
	-h | --help) awk 'NR == 1 { next } !/^#/ { exit } { print }' "$self" | cut -c3-; exit 0 ;;
	--list) entry_points; exit 0 ;;
	__in_sandbox) shift; in_sandbox "$@"; exit $? ;;
	"") ;;
	*) echo "${0##*/}: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac

	echo "TAP version 13"
	local why=""
	[[ $(id -u) -eq 0 ]] || why="needs root"
	for p in unshare setpriv chroot findmnt timeout; do
		command -v "$p" >/dev/null || why="needs $p"
	done
	local work
	work=$(mktemp -d /tmp/check-entry-points.XXXXXX) || exit 1
	# shellcheck disable=SC2064 # $work is fixed now
	trap "rm -rf '$work'" EXIT
	if [[ -z $why ]]; then
		sandbox "$work/probe" true
		[[ ! -s $work/probe/effects && $(cat "$work/probe/status") == 0 ]] ||
			why="no sandbox here: $(head -c 300 "$work/probe/effects")"
	fi
	if [[ -n $why ]]; then
		# One line, so that the summary counts it as skipped.
		echo "ok 1 the entry points' --help and the guest-only scripts' refusal # SKIP $why"
		echo "1..1"
		exit 0
	fi

	# The sandbox sees each kind of side effect.
	local name cmd out
	while IFS='|' read -r name cmd; do
		out=$work/self
		sandbox "$out" bash -c "$cmd"
		if [[ -s $out/effects ]]; then
			tap ok "the sandbox sees $name"
		else
			tap "not ok" "the sandbox sees $name"
		fi
	done <<-'EOF'
		a file written in the checkout|echo x >scripts/cfsb-sandbox-probe
		a file written in /tmp|echo x >/tmp/cfsb-sandbox-probe
		a file removed|rm -f /etc/hostname
		a cgroup made|mkdir /sys/fs/cgroup/cfsb-sandbox-probe
		a write to the kernel log|echo probe >/dev/kmsg
		a write to the console|echo probe >/dev/console
		a write to /run|mkdir -p /run/cfsb-sandbox-probe
		a process left running|setsid sleep 60 >/dev/null 2>&1 &
		a mount (refused)|mount -t tmpfs tmpfs /var/lib
		the host name (refused)|hostname cfsb-sandbox-probe
	EOF
	if [[ -e /proc/sysrq-trigger ]]; then
		sandbox "$work/self" bash -c 'echo h >/proc/sysrq-trigger'
		if [[ -s $work/self/effects ]]; then tap ok "the sandbox sees a write to sysrq-trigger"; else tap "not ok" "the sandbox sees a write to sysrq-trigger"; fi
	fi

	local entry kind flag base args
	while read -r entry kind; do
		base=${entry##*/}
		for flag in --help -h; do
			out=$work/help
			sandbox "$out" "./$entry" "$flag"
			local status cond=ok msg=""
			status=$(cat "$out/status")
			if [[ $status != 0 ]]; then
				cond=bad msg="exit status $status"
			elif ! grep -qiE "usage|${base//./\\.}" "$out/stdout"; then
				cond=bad msg="no usage on stdout"
			elif grep -qE 'pipefail|^[a-z]+=\$' "$out/stdout"; then
				cond=bad msg="code in the usage: $(grep -m1 -E 'pipefail|^[a-z]+=\$' "$out/stdout")"
			fi
			if [[ $cond != ok && -n ${HELP_PENDING[$entry]:-} && ! -s $out/effects ]]; then
				echo "ok $((n + 1)) $entry $flag: no side effect # SKIP usage: ${HELP_PENDING[$entry]} ($msg)"
				n=$((n + 1))
				continue
			fi
			report "$entry $flag: usage, exit 0, no side effect" "$out" "$cond" "$msg"
		done
		[[ $kind == guest ]] || continue
		args=${GUEST_ARGS[$entry]-}
		local runs=("")
		[[ -n $args ]] && runs+=("$args")
		for args in "${runs[@]}"; do
			out=$work/refuse
			# shellcheck disable=SC2086 # the arguments are words
			sandbox "$out" "./$entry" $args
			check_refusal "$entry${args:+ $args}: refuses to run here, no side effect" "$out"
		done
		if [[ $base == guest-init.sh ]]; then
			out=$work/refuse
			sandbox "$out" --pid1 env CFSB_RUNDIR=/tmp/cfsb-check-run CFSB_REPO="$root" CFSB_CGROUP=v2 \
				CFSB_INIT=bash "./$entry"
			check_refusal "$entry as PID 1 with the kernel's environment: refuses (not this kernel's init), no side effect" "$out"
		fi
	done < <(entry_points)
	echo "1..$n"
	[[ $failed -eq 0 ]]
}

# check_refusal NAME OUT: a TAP line: non-zero exit, not a timeout, the
# refusal on stderr, no side effect.
check_refusal() {
	local status
	status=$(cat "$2/status")
	if [[ $status == 0 ]]; then
		report "$1" "$2" bad "exit status 0"
	elif [[ $status == 124 || $status == 137 ]]; then
		report "$1" "$2" bad "timed out"
	elif ! grep -q 'refusing to run' "$2/stderr"; then
		report "$1" "$2" bad "no refusal on stderr (exit $status)"
	else
		report "$1" "$2" ok ""
	fi
}

main "$@"
