/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the cpu.cfs.borrowing_us selftests that hide the differences
 * between cgroup v1 (cpu,cpuacct hierarchy) and v2. File access itself is
 * done with the upstream cgroup selftests' cgroup_util.
 */
#ifndef BORROWING_UTIL_H
#define BORROWING_UTIL_H

#include <stdbool.h>
#include <sys/types.h>

#define BORROWING_FILE "cpu.cfs.borrowing_us"
#define USEC_PER_MSEC 1000L
#define USEC_PER_SEC 1000000L

/*
 * Finds the hierarchy with the cpu controller (a cgroup2 mount without it,
 * as in a hybrid set-up, is passed over); 0 on success.
 */
int bcg_init(void);
bool bcg_is_v1(void);
/* Whether cgroup namespaces are delegation boundaries (v2's nsdelegate). */
bool bcg_nsdelegate(void);
const char *bcg_root(void);

/* Creates a cgroup under @parent with the cpu controller; malloc'd path. */
char *bcg_create(const char *parent, const char *name);
/* Kills what runs in @cg and removes it with its descendants. */
int bcg_destroy(const char *cg);

/* Bandwidth: quota < 0 removes the limit. */
int bcg_set_bandwidth(const char *cg, long quota_us, long period_us);
int bcg_set_burst(const char *cg, long burst_us);

/* CPU time the group used, in microseconds. */
long bcg_usage_usec(const char *cg);
/*
 * A cpu.stat counter by its v2 name; for v1 the *_usec keys are read from
 * their *_time (ns) twins and converted.
 */
long bcg_stat(const char *cg, const char *v2_key);

/*
 * The borrowing counters of cpu.stat, from one read: in ns (cgroup v1 shows
 * ns; v2 us, multiplied here, each rounded down on its own by the kernel).
 */
struct bcg_borrow_stat {
	long long periods;
	long long borrowed, deducted, outstanding, dropped;
};

int bcg_borrow_stat(const char *cg, struct bcg_borrow_stat *st);
/* How far deducted + outstanding + dropped may be below borrowed, in ns. */
long long bcg_borrow_rounding_ns(void);

/* The outstanding borrowing, or -1. */
long bcg_borrowing(const char *cg);
/* Writes a string to cpu.cfs.borrowing_us: 0 or -errno. */
int bcg_write_borrowing(const char *cg, const char *value);
/* Charges @usec: 0 or -errno. */
int bcg_charge(const char *cg, long usec);
/* Charges @usec spent by @worker ("USEC PID"): 0 or -errno. */
int bcg_charge_for(const char *cg, long usec, pid_t worker);
/* The id of the cgroup at @cg (from its file handle), or 0. */
unsigned long long bcg_id(const char *cg);
/* Charges @usec spent by a task of the cgroup @id ("USEC cgroup=ID"): 0 or -errno. */
int bcg_charge_for_id(const char *cg, long usec, unsigned long long id);

/* sched_cfs_bandwidth_slice_us, or -1. */
long bcg_bandwidth_slice_usec(void);
/* The kernel's tick (1/CONFIG_HZ), from jiffies in /proc/timer_list, or -1. */
long bcg_tick_usec(void);

/*
 * Starts a process that spins inside @cg, on the @idx-th CPU that @cg lets
 * it run on; returns its pid.
 */
pid_t bcg_start_hog(const char *cg, int idx);
/*
 * Starts a process that sleeps inside @cg; returns its pid once it is there,
 * or -1.
 */
pid_t bcg_start_sleeper(const char *cg);

/*
 * A process in @cg with @nr threads that spin on any CPU, each recording
 * its longest stall (wall time between two consecutive clock reads) and its
 * CPU time, since the last bcg_threads_reset().
 */
#define BCG_MAX_THREADS 16
struct bcg_thread_stats {
	long max_stall_usec;
	long cpu_usec;
	long last_usec;		/* its last clock read */
};

struct bcg_threads {
	pid_t pid;
	int nr;
	struct bcg_thread_stats *stats;	/* shared with the process */
	int *epoch;			/* read and written atomically */
};

/*
 * One spinner per CPU the caller may run on (its cpuset may be smaller than
 * the machine), as many as a bcg_threads process holds; -1 on error.
 */
int bcg_nr_spinners(void);
int bcg_start_threads(const char *cg, int nr, struct bcg_threads *t);
/* The same, every thread on the @idx-th CPU the caller may run on. */
int bcg_start_threads_on(const char *cg, int nr, int idx, struct bcg_threads *t);
void bcg_threads_reset(struct bcg_threads *t);
/*
 * Thread @i's longest stall since the reset, the one it is in now included
 * (a thread that has not run again since it stopped has not recorded it).
 */
long bcg_thread_stall_usec(const struct bcg_threads *t, int i);
void bcg_stop_threads(struct bcg_threads *t);

/* Sleeps @usec microseconds, whatever signals arrive. */
void bcg_sleep_usec(long usec);
/* Monotonic time in microseconds. */
long bcg_now_usec(void);

#endif
