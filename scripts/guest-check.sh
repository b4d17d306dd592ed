# shellcheck shell=bash
# Sourced (not run) by every script that runs only inside the guest that
# scripts/vm-run.sh boots, after its --help and before anything else: such a
# script makes cgroups at the root of the hierarchy, mounts, starts daemons,
# and must not do so on the machine that runs QEMU.
#
# The guest is told apart by two marks only it has: the kernel command line
# that vm-run.sh passes, whose init= is scripts/guest-init.sh, and the file
# /run/cfsb-guest, which guest-init.sh writes at boot with the boot's id
# (/proc/sys/kernel/random/boot_id), on a /run of its own.
#
# CFSB_GUEST_ANYWHERE=1 lets such a script run anyway, on a machine that is
# there to be tested (a board running the patched kernel:
# docs/raspberry-pi.md); it then does to that machine what it does to the
# guest.

CFSB_GUEST_MARKER=/run/cfsb-guest

# cfsb_in_guest: is this the guest of scripts/vm-run.sh?
cfsb_in_guest() {
	local cmdline="" marker="" boot=""
	{
		read -r cmdline </proc/cmdline &&
			read -r marker <"$CFSB_GUEST_MARKER" &&
			read -r boot </proc/sys/kernel/random/boot_id
	} 2>/dev/null || return 1
	[[ " $cmdline " == *" init="*"/guest-init.sh "* && -n $boot && $marker == "$boot" ]]
}

# cfsb_guest_only: return where the guest (or CFSB_GUEST_ANYWHERE=1) is;
# anywhere else say why on stderr and exit 3, having done nothing.
cfsb_guest_only() {
	cfsb_in_guest && return 0
	[[ ${CFSB_GUEST_ANYWHERE:-0} == 1 ]] && return 0
	cat >&2 <<-EOF
		${0##*/}: refusing to run: this script runs only inside the guest that
		scripts/vm-run.sh boots (scripts/vm-run.sh -- ${0#"${CFSB_GUEST_CHECK_ROOT}"/} ...),
		and this is not that guest (no init=.../guest-init.sh on the kernel command
		line, or no $CFSB_GUEST_MARKER of this boot). On a machine that is there to
		be tested, CFSB_GUEST_ANYWHERE=1 runs it anyway.
	EOF
	exit 3
}

# cfsb_usage_from_header: the calling script's leading comment block (its
# usage), for --help.
cfsb_usage_from_header() {
	awk 'NR == 1 { next } !/^#/ { exit } !/^# shellcheck / { print }' "$0" | cut -c3-
}

# cfsb_guest_script ARG: the start of a guest-only script that takes no
# option of its own first: --help (or -h) prints its usage and exits 0;
# anything else runs in the guest only (cfsb_guest_only).
cfsb_guest_script() {
	case $1 in
	-h | --help) cfsb_usage_from_header; exit 0 ;;
	esac
	cfsb_guest_only
}

# The checkout, to name the script relative to it.
CFSB_GUEST_CHECK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
