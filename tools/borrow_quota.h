/* SPDX-License-Identifier: GPL-2.0 */
/*
 * borrowd's quota mode: charging borrowed CPU time on a kernel without
 * cpu.cfs.borrowing_us, by lowering the client's CFS quota (cpu.max, or
 * cpu.cfs_quota_us on cgroup v1) for the next periods and restoring it.
 *
 * The rule is the kernel series' (docs/interface.md, "Who pays"): a charge
 * is owed by every level with a quota from the client up to, not
 * including, the lowest common ancestor of client and worker; a level owes
 * no more than the limited level below it took; a level owes at most one
 * second's worth of its quota; what a level leaves unused pays first, and
 * a lowered quota keeps a bandwidth slice and a tick per runnable CPU (or
 * half the quota, if less).
 *
 * The quota a group had when first charged, or the one another party wrote
 * since (kubelet, systemd, "podman update"), is the configured one: it is
 * restored when the debt is paid, on exit, by the watchdog if borrowd dies,
 * and from the state file by the next borrowd or "borrowd --resume".
 */
#ifndef BORROW_QUOTA_H
#define BORROW_QUOTA_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "borrow_cg.h"

/* borrowd's log: a line on stderr, "borrowd: " first (borrowd.c). */
void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The kernel's smallest quota (min_cfs_quota_period), us. */
#define BQ_MIN_QUOTA_US	1000

/*
 * One level's account, in microseconds. Pure arithmetic: bq_take(),
 * bq_pay(), bq_settle(), bq_target() and bq_must_write() read and change
 * nothing else.
 */
struct bq_acct {
	long long quota_us, period_us;	/* configured */
	long long lowered_us;		/* taken off the quota now */
	long long debt_us;
	unsigned long long borrowed_us;	/* taken: debt and paid */
	unsigned long long paid_us;
	unsigned long long dropped_us;	/* beyond the bound, or no level took it */
	unsigned long long regained_us;	/* used beyond the quota after a write */
	long long over_us;		/* run beyond the allowance, not yet waited for */
	long long lump_us;		/* the least lump carried: a tick per CPU */
	long long lump_seen_us;		/* the most one window ran beyond, owing */
};

/* The most a level may owe: a second's worth of quota, or one quota. */
long long bq_bound(const struct bq_acct *a);
/* Owes AMOUNT, up to the bound: what it took (the rest counts as dropped). */
long long bq_take(struct bq_acct *a, long long amount);
/*
 * ELAPSED_US passed, in which the group ran USED_US (-1: unknown): its
 * unused allowance pays first, then what its quota was lowered by. Returns
 * what was paid. A group's use comes in lumps: on a CPU it runs up to a
 * tick past its runtime (4 ms at 250 Hz, four times the least quota), then
 * waits while the next periods' refills cover that; what it ran beyond
 * its allowance is carried (over_us) and is not unused allowance of the
 * time it then waits. At most one lump is carried: a tick per CPU
 * (lump_us), or the most one window since the debt began ran beyond its
 * allowance where that is more (time a hypervisor took from a vCPU is
 * charged to the task it interrupted where the kernel does not account
 * steal time, as Debian's does not), so that a group that runs past its
 * quota every period has no more to wait off than that. A group that owes
 * nothing carries nothing.
 */
long long bq_pay(struct bq_acct *a, long long elapsed_us, long long used_us);
/*
 * What the group used beyond its quota (less the lowering) in ELAPSED_US,
 * owed up to the bound: a quota write refills the runtime, so a write can
 * give the group more than its quota; called for a time in which a
 * lowering was in effect or that began with a write. Returns what it took.
 */
long long bq_regain(struct bq_acct *a, long long elapsed_us, long long used_us);
/*
 * A look's window: bq_pay(), after bq_regain() where REGAIN (the window
 * began with a write, or a lowering was in effect); what such a window
 * ran beyond is then owed, neither carried nor taken for a lump. Returns
 * what was paid.
 */
long long bq_settle(struct bq_acct *a, long long elapsed_us, long long used_us,
		    bool regain);
/*
 * How much to take off the quota from now on: the debt over two periods,
 * leaving FLOOR_US per period and a quota of at least MIN_QUOTA_US.
 */
long long bq_target(const struct bq_acct *a, long long floor_us,
		    long long min_quota_us);
/*
 * Whether TARGET must be written now, TICK_US before the next bq_pay():
 * when the quota in effect would take more than is owed, when the debt is
 * paid and the quota is still lowered, or when TARGET is HYST_US or more
 * above what is taken now. Fewer writes: each one refills the group's
 * runtime (and may give it a quota's worth).
 */
bool bq_must_write(const struct bq_acct *a, long long target,
		   long long tick_us, long long hyst_us);

/* The progress floor for K runnable CPUs: the kernel's rule. */
long long bq_floor(long long quota_us, int k, long long slice_us,
		   long long tick_us);

/* Totals for a report. */
struct bq_totals {
	int groups, lowered;
	unsigned long long borrowed_us, paid_us, dropped_us, debt_us, regained_us;
	unsigned long long writes, adoptions, failed_writes;
	double race_max_us;	/* the longest look-to-write time */
	/* Reads of nr_periods for a period's start; counts of runnable threads. */
	unsigned long long period_looks, runnable_counts;
	unsigned long long rounds;	/* bq_tick()s */
	unsigned long long looks;	/* reads of a group's usage */
	/* Looks the usage source's bound showed no need for. */
	unsigned long long looks_spared;
};

/*
 * A cheap count of a cgroup v2 group's usage (borrowd's BPF programs add
 * up its tasks' runs as each ends, at a switch): TRACK starts adding up the
 * group with id ID at LEVEL (its depth below the root) and returns its
 * slot or -errno, READ_NS reads a slot's sum (ns since it was tracked),
 * UNTRACK stops. Optional: without it every look reads cpu.stat.
 */
struct bq_usage_source {
	int (*track)(unsigned long long id, int level);
	unsigned long long (*read_ns)(int slot);
	void (*untrack)(int slot, unsigned long long id);
};

void bq_set_usage_source(const struct bq_usage_source *src);

/*
 * Whether a look at a group that cannot be lowered can wait: its usage in
 * the ELAPSED_US since its last look, as the source counts it
 * (USED_LOWER_US: the runs that ended since), left less than a period's
 * quota unused, which is all a look could pay, and that look is under
 * BQ_SPARE_MAX_S old. Waiting loses nothing: the next look settles the
 * whole time since the last, paying what the group left unused in it.
 */
#define BQ_SPARE_MAX_S	5.0
bool bq_may_spare(const struct bq_acct *a, long long elapsed_us,
		  long long used_lower_us);

/* Sets up: the state file, the tick. 0 or -errno. */
int bq_init(const char *state_file, long tick_ms);
/* The group has the cpu controller with quota files: 0 or -error. */
int bq_check(const struct bcg *g);
/*
 * Charges USEC that a worker of the group WORKER (NULL: unknown, the cut is
 * at the root) spent for CLIENT: 0 or -error. What no level can owe is
 * counted as dropped.
 */
int bq_charge(const struct bcg *client, unsigned long long usec,
	      const struct bcg *worker);
/* The client's debt and configured quota (-1: none), as bcg_owed(). */
int bq_owed(const struct bcg *g, long long *owed_us, long long *quota_us);
/* One tick: pays, adopts others' writes, decides the writes. */
void bq_tick(void);
/*
 * Sleeps SECONDS, making the decided writes at period starts; returns
 * early once *WAKE is set (a signal's flag).
 */
void bq_sleep(double seconds, volatile sig_atomic_t *wake);
/* Restores every quota borrowd lowered, and the state file: how many. */
int bq_restore_all(void);
/*
 * Restores the quotas the state file FILE names that still have the value
 * borrowd wrote (a value someone else wrote since is theirs), and removes
 * the file: how many. Safe in any process (the watchdog, --resume).
 */
int bq_restore_state(const char *file);
void bq_totals(struct bq_totals *t);
/* One line per group in use, "borrowd: " first, on F. */
void bq_print(FILE *f);
/* The totals and the groups as JSON members (no braces), on F. */
void bq_json(FILE *f);

#endif /* BORROW_QUOTA_H */
