#!/usr/bin/env bash
# Boot a kernel in QEMU (TCG) with the host's / as a read-only root, run one
# command as root inside, and exit with its status.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
	cat <<EOF
Usage: ${0##*/} [--kernel BZIMAGE] [--cgroup v1|v2] [--init bash|systemd] [--cpus N]
                [--mem SIZE] [--timeout SEC] [--accel tcg|kvm] [--arch x86_64|arm64]
                [--host-cpus LIST] [--icount SHIFT] [--keep-log] [--all-reports]
                -- CMD [ARG...]

Boots the kernel in QEMU and runs CMD as root in the guest, in the project
checkout ($CFSB_ROOT), which the guest sees read-write at the same path.
The rest of the host's / is the guest's root, read-only; /tmp, /run, /var
and /root are fresh tmpfs; the kernel's modules, where scripts/kernel-build.sh
installed them (or beside Debian's kernel, --variant debian), are at
/run/cfsb-modules/lib/modules: the kernel loads what it asks for from there,
and \`modprobe NAME\` does too. CMD's output (stdout and stderr) is
streamed; the exit status is CMD's. The kernel log goes to a file; the run
fails if the guest does not boot, panics, times out, or the kernel logs a
BUG, WARNING, Oops or similar (panic_on_warn is set).

Options:
  --kernel IMAGE  kernel image (default: the patched kernel scripts/kernel-build.sh built)
  --cgroup V      v2 (default): the unified hierarchy at /sys/fs/cgroup, with
                  the cpu, cpuset, memory, io and pids controllers enabled;
                  v1: one hierarchy per controller under /sys/fs/cgroup (cpuset
                  and memory where the kernel has their v1 interface), cpu
                  and cpuacct together at cpu,cpuacct (as Ubuntu 20.04 mounts them)
  --init I        bash (default): scripts/guest-init.sh runs CMD itself;
                  systemd: it hands over to the host's systemd as PID 1,
                  which runs CMD as the only unit of its own target (for the
                  container runtimes' systemd cgroup driver)
  --cpus N        virtual CPUs (default 2)
  --mem SIZE      guest memory (default 2G)
  --timeout SEC   hard limit for the whole run (default \$CFSB_VM_TIMEOUT or 3600)
  --accel A       tcg (default), or kvm where it works (not on every host)
  --arch A        x86_64 (default) or arm64: QEMU's virt machine with
                  Cortex-A72 CPUs (a Raspberry Pi 4's), its root a Debian
                  arm64 root filesystem made once under \$CFSB_CACHE (see
                  guest_rootfs in scripts/lib.sh) instead of the host's /
  --host-cpus L   run QEMU on these host CPUs only (taskset list), e.g. to keep
                  two VMs that measure side by side on one host CPU each
  --icount SHIFT  TCG only: while a vCPU runs, the guest's clock counts its
                  instructions, each one 2^SHIFT ns (0: a 1 GHz CPU); while
                  all idle, it runs at real speed (QEMU -icount shift=SHIFT).
                  A CPU-bound benchmark's rate is then a count of its
                  instructions, whatever the host's speed and load
  --keep-log      keep the kernel log and print its path
  --all-reports   the kernel goes on after a warning or a sanitizer's report
                  (no panic_on_warn), so that the log holds every report of
                  the run, not only the first (a KCSAN kernel's data races);
                  the run still fails on any, and keeps the log
Environment: CFSB_VM_EXTRA_CMDLINE adds kernel parameters. CFSB_TCG_THREAD=multi
runs one host thread per vCPU; the default, single, is slower with several
vCPUs but safe: with multi-threaded TCG (QEMU 7.2) a vCPU can execute code
that another vCPU has just patched (static keys) and the guest oopses on int3.
Example: ${0##*/} --cgroup v1 -- cat /sys/fs/cgroup/cpu/cpu.cfs_period_us
EOF
}

kernel="" cgroup=v2 init=bash cpus=2 mem=2G timeout=${CFSB_VM_TIMEOUT:-3600} accel=tcg arch=x86_64 keep_log=0 panic_on_warn=1
host_cpus="" icount=""
while [[ $# -gt 0 ]]; do
	case $1 in
	--kernel) kernel=${2:?}; shift 2 ;;
	--cgroup) cgroup=${2:?}; shift 2 ;;
	--cpus) cpus=${2:?}; shift 2 ;;
	--init) init=${2:?}; shift 2 ;;
	--mem) mem=${2:?}; shift 2 ;;
	--timeout) timeout=${2:?}; shift 2 ;;
	--accel) accel=${2:?}; shift 2 ;;
	--arch) arch=${2:?}; shift 2 ;;
	--host-cpus) host_cpus=${2:?}; shift 2 ;;
	--icount) icount=${2:?}; shift 2 ;;
	--keep-log) keep_log=1; shift ;;
	--all-reports) panic_on_warn=0; shift ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	*) usage >&2; die "unknown argument '$1' (the command goes after --)" ;;
	esac
done
[[ $# -gt 0 ]] || { usage >&2; die "no command given"; }
[[ $cgroup == v1 || $cgroup == v2 ]] || die "--cgroup must be v1 or v2"
[[ $init == bash || $init == systemd ]] || die "--init must be bash or systemd"
[[ $cpus =~ ^[1-9][0-9]*$ ]] || die "--cpus must be a positive integer"
[[ $timeout =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive number of seconds"
[[ $accel == tcg || $accel == kvm ]] || die "--accel must be tcg or kvm"
[[ -z $host_cpus || $host_cpus =~ ^[0-9]+([,-][0-9]+)*$ ]] || die "--host-cpus takes a CPU list like 0 or 0-1,3"
if [[ -n $icount ]]; then
	[[ $icount =~ ^([0-9]|10)$ ]] || die "--icount takes a shift from 0 to 10"
	[[ $accel == tcg && ${CFSB_TCG_THREAD:-single} == single ]] ||
		die "--icount needs single-threaded TCG (not --accel kvm or CFSB_TCG_THREAD=multi)"
fi
[[ -n $kernel ]] || kernel=$(kernel_image_path patched "$arch" default)
[[ -f $kernel ]] || die "no kernel image at $kernel: run scripts/kernel-build.sh first"

case $arch in
x86_64)
	qemu=(qemu-system-x86_64 -machine pc -cpu max)
	console=ttyS0
	;;
arm64)
	# A Raspberry Pi 4's cores, on QEMU's generic board.
	qemu=(qemu-system-aarch64 -machine virt -cpu cortex-a72)
	console=ttyAMA0
	;;
*) die "unknown architecture '$arch'" ;;
esac
command -v "${qemu[0]}" >/dev/null || die "${qemu[0]} not found: run scripts/kernel-build.sh --arch $arch (it installs QEMU)"
if [[ $accel == kvm ]]; then
	[[ -w /dev/kvm ]] || die "--accel kvm: /dev/kvm is not usable"
	qemu+=(-accel kvm)
else
	qemu+=(-accel "tcg,thread=${CFSB_TCG_THREAD:-single}")
	[[ -z $icount ]] || qemu+=(-icount "shift=$icount")
fi

# The guest's root: the host's / on x86_64, a Debian root filesystem of the
# guest's architecture otherwise. The kernel starts guest-init.sh from it
# before the checkout is mounted, so a foreign root gets a copy at the
# checkout's path (the checkout then mounts over it).
ensure_guest_rootfs "$arch"
rootfs=$(guest_rootfs "$arch")
if [[ $rootfs != / ]]; then
	install -D -m 0755 "$CFSB_ROOT/scripts/guest-init.sh" "$rootfs$CFSB_ROOT/scripts/guest-init.sh"
fi

rundir=$(mktemp -d /tmp/vm-run.XXXXXX)
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	if [[ $keep_log -eq 1 ]]; then
		log "kernel log: $rundir/console.log"
	else
		rm -rf "$rundir"
	fi
}
trap cleanup EXIT

# The command, quoted for bash, for the guest's init to run.
printf '%q ' "$@" >"$rundir/command"
printf '\n' >>"$rundir/command"

cmdline=(
	"console=$console" root=/dev/root rootfstype=9p ro
	"rootflags=trans=virtio,version=9p2000.L,msize=512000,cache=loose"
	"init=$CFSB_ROOT/scripts/guest-init.sh"
	panic=-1 "panic_on_warn=$panic_on_warn" oops=panic softlockup_panic=1
	loglevel=6 mitigations=off nokaslr
	"CFSB_RUNDIR=$rundir" "CFSB_REPO=$CFSB_ROOT" "CFSB_CGROUP=$cgroup" "CFSB_INIT=$init"
)
# systemd as PID 1 mounts nothing over the v1 hierarchies guest-init made
# only when told that they are meant.
[[ $init == systemd && $cgroup == v1 ]] && cmdline+=(systemd.unified_cgroup_hierarchy=0)
# shellcheck disable=SC2206
[[ -n ${CFSB_VM_EXTRA_CMDLINE:-} ]] && cmdline+=($CFSB_VM_EXTRA_CMDLINE)

# The kernel's modules (scripts/kernel-build.sh installs them next to its
# image): shared read-only, mounted by guest-init at /run/cfsb-modules/lib/modules
# (the guest's root is the host's, whose /lib/modules is not this kernel's);
# guest-init makes the kernel and `modprobe NAME` load from there.
# (Debian's kernel, scripts/kernel-build.sh --variant debian: modules-root
# beside its image.)
modules=""
[[ $kernel == */arch/*/boot/* ]] && modules=${kernel%/arch/*/boot/*}/modules-root/lib/modules
[[ -n $modules ]] || modules=$(dirname "$kernel")/modules-root/lib/modules
if [[ -n $modules && -d $modules ]]; then
	cmdline+=(CFSB_MODULES=1)
	qemu+=(
		-fsdev "local,id=modules,path=$modules,security_model=none,readonly=on"
		-device "virtio-9p-pci,fsdev=modules,mount_tag=cfsbmods"
	)
fi

# An initramfs beside the image (Debian's kernel's: it loads the 9p
# modules and mounts the root) boots with it.
initrd=$(dirname "$kernel")/initrd.img
[[ ! -f $initrd ]] || qemu+=(-initrd "$initrd")

qemu+=(
	-smp "$cpus" -m "$mem" -nodefaults -no-reboot -display none -monitor none
	-kernel "$kernel" -append "${cmdline[*]}"
	-serial "file:$rundir/console.log"
	-fsdev "local,id=rootfs,path=$rootfs,security_model=none,readonly=on,multidevs=remap"
	-device "virtio-9p-pci,fsdev=rootfs,mount_tag=/dev/root"
	-fsdev "local,id=repo,path=$CFSB_ROOT,security_model=none"
	-device "virtio-9p-pci,fsdev=repo,mount_tag=cfsbrepo"
	-fsdev "local,id=rundir,path=$rundir,security_model=none"
	-device "virtio-9p-pci,fsdev=rundir,mount_tag=cfsbrun"
	-device virtio-serial-pci
	-chardev "stdio,id=cmdout,signal=off"
	-device "virtconsole,chardev=cmdout"
)

start=$(now_s)
set +e
# QEMU reads the command output channel's input from stdin: give it none.
[[ -z $host_cpus ]] || qemu=(taskset -c "$host_cpus" "${qemu[@]}")
timeout -k 10 "$timeout" "${qemu[@]}" </dev/null 2>"$rundir/qemu.err"
qemu_rc=$?
set -e

# A line the kernel prints when something went wrong, whatever CMD says.
splat_re='(Kernel panic|BUG:|WARNING:|Oops|general protection fault|UBSAN:|KASAN:|INFO: task .* blocked|rcu: INFO: rcu_.* detected stalls|Call Trace:)'
if grep -Eq "$splat_re" "$rundir/console.log"; then
	keep_log=1
	log "the kernel reported a problem:"
	grep -E -m5 -A20 "$splat_re" "$rundir/console.log" | head -60 >&2
	exit 1
fi
if [[ $qemu_rc -eq 124 || $qemu_rc -eq 137 ]]; then
	keep_log=1
	tail -20 "$rundir/console.log" >&2
	die "the guest timed out after $timeout s"
fi
if [[ ! -f $rundir/exit-status ]]; then
	keep_log=1
	grep -v 'host doesn.t support requested feature' "$rundir/qemu.err" >&2 || true
	tail -30 "$rundir/console.log" >&2
	die "the guest stopped without running the command (QEMU exit $qemu_rc): boot failure?"
fi
status=$(cat "$rundir/exit-status")
[[ -n ${CFSB_VM_VERBOSE:-} ]] && log "guest ran for $(($(now_s) - start)) s, command exit status $status"
exit "$status"
