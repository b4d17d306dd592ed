#!/bin/bash
# PID 1 of the guest that scripts/vm-run.sh boots. The root filesystem is the
# host's /, read-only, over virtio-9p. This sets up a minimal system, runs the
# command vm-run.sh left in $CFSB_RUNDIR, records its exit status there and
# powers off. The kernel passes CFSB_* from its command line as environment.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
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

mount -t proc proc /proc || fail "cannot mount /proc"
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
fi

case $CFSB_CGROUP in
v1)
	mount -t tmpfs -o mode=0755 cgroup /sys/fs/cgroup
	for ctrl in cpu,cpuacct cpuset memory pids devices freezer blkio perf_event hugetlb; do
		mkdir -p "/sys/fs/cgroup/$ctrl"
		mount -t cgroup -o "$ctrl" cgroup "/sys/fs/cgroup/$ctrl" ||
			fail "cannot mount the v1 $ctrl hierarchy"
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
