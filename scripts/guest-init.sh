#!/bin/bash
# PID 1 of the guest that scripts/vm-run.sh boots. The root filesystem is the
# host's /, read-only, over virtio-9p. This sets up a minimal system, runs the
# command vm-run.sh left in $CFSB_RUNDIR, records its exit status there and
# powers off. The kernel passes CFSB_* from its command line as environment.
#
# It runs in that role only: as PID 1 of a kernel whose command line names
# it as init=, with CFSB_RUNDIR and CFSB_REPO from that command line.
# Anywhere else (another machine's root, a child process, even in the guest)
# it refuses before doing anything: it mounts tmpfs over /tmp, /run, /var/lib,
# /var/log and /root and powers the machine off. It writes /run/cfsb-guest
# (the boot's id), by which scripts/guest-check.sh knows the guest.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

usage() {
	cat <<EOF
Usage: ${0##*/} [-h|--help]

The init (PID 1) of the guest that scripts/vm-run.sh boots (it passes
init=CHECKOUT/scripts/guest-init.sh and CFSB_RUNDIR, CFSB_REPO, CFSB_CGROUP,
CFSB_INIT on the kernel command line); not to be run by hand. It mounts
/proc, /sys, /dev, tmpfs on /tmp, /run, /var/tmp, /var/lib, /var/log,
/var/cache and /root, the run directory and the checkout over virtio-9p,
and the cgroup hierarchy (v1 or v2); runs the command in
\$CFSB_RUNDIR/command (itself, or as the only unit of systemd's target with
CFSB_INIT=systemd), records its exit status and powers the machine off.
Anywhere else (not PID 1, or not the init= of the kernel command line) it
refuses, doing nothing, and exits 3.
EOF
}

# refuse WHY: say why this is not the guest's PID 1 and exit, having done
# nothing (or undone the /proc mount that told).
refuse() {
	echo "${0##*/}: refusing to run: $*; it is the init of the guest that scripts/vm-run.sh boots and runs nowhere else (it would mount over /tmp, /run, /var and /root and power the machine off)" >&2
	exit 3
}

case ${1:-} in
-h | --help) usage; exit 0 ;;
esac
[[ $$ -eq 1 ]] || refuse "not PID 1 (PID $$)"
[[ -n ${CFSB_RUNDIR:-} && -n ${CFSB_REPO:-} ]] ||
	refuse "no CFSB_RUNDIR and CFSB_REPO from the kernel command line"
# The kernel starts init without /proc: mount it to read the command line.
# Until then /proc is a directory of the root file system, on the same
# device as / (over virtio-9p from the host's /, it shows the host's /proc,
# and statfs says "proc").
proc_mounted=0
if [[ $(stat -c %d /proc) == "$(stat -c %d /)" ]]; then
	mount -t proc proc /proc || refuse "cannot mount /proc to read the kernel command line"
	proc_mounted=1
fi
read -r kernel_cmdline </proc/cmdline || kernel_cmdline=""
if [[ " $kernel_cmdline " != *" init=$0 "* ]]; then
	((proc_mounted)) && umount /proc
	refuse "the kernel command line does not name $0 as init"
fi
export HOME=/root LANG=C.UTF-8 TERM=dumb

poweroff_now() {
	sync
	echo o >/proc/sysrq-trigger
	sleep 30
	# Still here: a reboot ends QEMU too (it runs with -no-reboot).
	echo b >/proc/sysrq-trigger
	sleep 30
}

fail() {
	echo "guest-init: $*" >/dev/console
	poweroff_now
	exit 1
}

mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
# What udev would make: bash's process substitution needs /dev/fd.
[[ -e /dev/fd ]] || ln -s /proc/self/fd /dev/fd
for dir in /tmp /run /var/tmp /var/lib /var/log /var/cache /root; do
	mount -t tmpfs -o mode=0755 tmpfs "$dir" || fail "cannot mount tmpfs on $dir"
done
chmod 1777 /tmp /var/tmp
# The mark of this guest, for scripts/guest-check.sh: this boot's id on a
# /run of its own.
cat /proc/sys/kernel/random/boot_id >/run/cfsb-guest || fail "cannot write /run/cfsb-guest"
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null || true

# The run directory and the checkout, read-write, at the host's paths.
mkdir -p "$CFSB_RUNDIR"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 cfsbrun "$CFSB_RUNDIR" ||
	fail "cannot mount the run directory"
# (Under a tmpfs above, e.g. /tmp, the mount point has to be made first.)
mkdir -p "$CFSB_REPO" 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 cfsbrepo "$CFSB_REPO" ||
	fail "cannot mount the checkout"

# This kernel's modules, when vm-run.sh shares them (modprobe -d /run/cfsb-modules).
if [[ ${CFSB_MODULES:-0} == 1 ]]; then
	mkdir -p /run/cfsb-modules/lib/modules
	mount -t 9p -o trans=virtio,version=9p2000.L,ro cfsbmods /run/cfsb-modules/lib/modules ||
		fail "cannot mount the modules"
	# The root's /lib/modules is not this kernel's (the host may have
	# none): a modprobe that looks here, for the kernel's requests (an
	# overlay mount, a veth link, a netfilter table: Debian's kernel builds
	# them as modules) and for the commands run (first in PATH).
	mkdir -p /run/cfsb-modules/bin
	printf '#!/bin/sh\nexec /sbin/modprobe -d /run/cfsb-modules "$@"\n' >/run/cfsb-modules/bin/modprobe
	chmod 0755 /run/cfsb-modules/bin/modprobe
	[[ ! -e /proc/sys/kernel/modprobe ]] || echo /run/cfsb-modules/bin/modprobe >/proc/sys/kernel/modprobe
	PATH=/run/cfsb-modules/bin:$PATH
fi

case $CFSB_CGROUP in
v1)
	mount -t tmpfs -o mode=0755 cgroup /sys/fs/cgroup
	for ctrl in cpu,cpuacct cpuset memory pids devices freezer blkio perf_event hugetlb; do
		mkdir -p "/sys/fs/cgroup/$ctrl"
		mount -t cgroup -o "$ctrl" cgroup "/sys/fs/cgroup/$ctrl" 2>/dev/null && continue
		# Since 6.12 cpuset's and memory's v1 interfaces are options of
		# their own (CPUSETS_V1, MEMCG_V1), which Debian's kernel leaves
		# out: without them a v1 system has no such hierarchy. The others
		# are always there.
		[[ $ctrl == cpuset || $ctrl == memory ]] || fail "cannot mount the v1 $ctrl hierarchy"
		rmdir "/sys/fs/cgroup/$ctrl"
		echo "guest-init: this kernel has no v1 $ctrl hierarchy" >/dev/kmsg
	done
	ln -s cpu,cpuacct /sys/fs/cgroup/cpu
	ln -s cpu,cpuacct /sys/fs/cgroup/cpuacct
	mkdir -p /sys/fs/cgroup/systemd
	mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
	;;
*)
	mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup || fail "cannot mount cgroup2"
	echo "+cpu +cpuset +memory +io +pids" >/sys/fs/cgroup/cgroup.subtree_control ||
		fail "cannot enable the v2 controllers"
	;;
esac

hostname cfsb-guest
ip link set lo up 2>/dev/null

# The command's output goes to the virtio console, byte for byte. The hvc
# driver resets the terminal settings at each first open: hold it open.
out=/dev/hvc0
[[ -c $out ]] || fail "no virtio console for the command output"
exec 3<>"$out"
stty -F "$out" raw -echo || fail "cannot set up $out"

cd "$CFSB_REPO" || fail "cannot enter $CFSB_REPO"

if [[ ${CFSB_INIT:-bash} == systemd ]]; then
	# systemd as PID 1 (for the container runtimes' systemd cgroup driver):
	# it runs the command as a unit of a target of its own, so that none of
	# the host's enabled services start, and powers off when it ends.
	mkdir -p /run/systemd/system
	cat >/run/systemd/system/cfsb.target <<-EOF
		[Unit]
		Description=Run the command of scripts/vm-run.sh
		Requires=cfsb-command.service dbus.socket
		After=cfsb-command.service dbus.socket
	EOF
	cat >/run/systemd/system/cfsb-command.service <<-EOF
		[Unit]
		Description=The command of scripts/vm-run.sh
		After=dbus.socket
		SuccessAction=poweroff-force
		FailureAction=poweroff-force
		[Service]
		Type=oneshot
		Environment=PATH=$PATH HOME=/root LANG=C.UTF-8 TERM=dumb
		WorkingDirectory=$CFSB_REPO
		StandardInput=null
		StandardOutput=file:/dev/hvc0
		StandardError=inherit
		ExecStart=/bin/bash -c 'bash -c "\$(cat $CFSB_RUNDIR/command)"; echo \$? >$CFSB_RUNDIR/exit-status'
	EOF
	# Keep the console open (and raw) while systemd closes inherited files.
	sleep infinity 3>&3 &
	exec /lib/systemd/systemd --unit=cfsb.target --log-level=warning 3>&-
fi

bash -c "$(cat "$CFSB_RUNDIR/command")" </dev/null >&3 2>&3 3>&-
status=$?
echo "$status" >"$CFSB_RUNDIR/exit-status"
echo "guest-init: command exited with status $status" >/dev/kmsg
poweroff_now
