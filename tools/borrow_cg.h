/* SPDX-License-Identifier: GPL-2.0 */
/*
 * cpu.cfs.borrowing_us for the tools: finding a client's cgroup (by path,
 * by pid, by container), charging it, and reading what it owes. Shared by
 * cgborrow and borrowd.
 */
#ifndef BORROW_CG_H
#define BORROW_CG_H

#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#define BORROWING_FILE	"cpu.cfs.borrowing_us"
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* Exit statuses, documented in cgborrow(8) and borrowd(8). */
enum {
	EXIT_USAGE = 2,		/* bad arguments or a value the kernel refused */
	EXIT_NOFEATURE = 3,	/* the kernel has no cpu.cfs.borrowing_us */
	EXIT_NOPERM = 4,	/* not allowed to charge */
};

/*
 * Errors beyond errno values, returned negated like them. They are above
 * the errno range so that one int carries both.
 */
enum {
	BCG_ENOFEATURE = 5000,	/* the group is there but the file is not */
	BCG_ENOCPU,		/* v2: cpu controller not enabled for the group */
	BCG_EROOT,		/* the root group cannot be charged */
	BCG_ENOLIB,		/* libcgroup cannot find a cpu hierarchy */
	BCG_ENOCONTAINER,	/* no engine knows the container */
	BCG_EAMBIGUOUS,		/* the container id prefix matches several */
	BCG_EPIDFORM,		/* the kernel takes no "USEC PID" form */
	BCG_ECGROUPFORM,	/* the kernel takes no "USEC cgroup=ID" form */
};

/* A time in ns: a clock's reading, a file's mtime. */
static inline long long bcg_ts_ns(const struct timespec *t)
{
	return t->tv_sec * 1000000000LL + t->tv_nsec;
}

struct bcg {
	char path[PATH_MAX];	/* in the cpu hierarchy, starting with '/' */
	char dir[PATH_MAX];	/* the directory in the filesystem */
};

/* Which of the cgroup's numbers a kernel has: a field is -1 if absent. */
struct bcg_stat {
	long long owed_us;		/* cpu.cfs.borrowing_us */
	long long quota_us;		/* -1 also means "max", no quota */
	long long period_us;
	long long usage_us;		/* the group's CPU time */
	long long nr_periods;
	long long nr_throttled;
	long long throttled_us;
	long long nr_borrow_periods;
	long long borrowed_us;
	long long deducted_us;
	long long outstanding_us;
	long long dropped_us;
};

/* One container an engine runs, and the process it logs through. */
struct bcg_container {
	char engine[16];	/* "containerd", "docker" or "podman" */
	char id[128];
	pid_t init_pid;		/* the container's first process */
	pid_t worker_pid;	/* conmon, or a binary logger; 0 if none */
	/* Their start times (/proc/PID/stat's field 22, clock ticks). */
	unsigned long long init_start, worker_start;
	/* A binary logger may work for it: not looked for (..._since()). */
	bool logger_unsought;
	/*
	 * Looked for and not found (a containerd container, not the CRI
	 * plugin's): one may still come while the container is young.
	 */
	bool logger_missing;
	struct timespec written;	/* its init's pid file (CLOCK_REALTIME) */
};

/* What /proc/PID/stat says of a process. */
struct bcg_proc {
	char state;			/* R, S, T, ... */
	pid_t ppid;
	unsigned long long start;	/* since boot, in clock ticks */
};

/*
 * Reads at most @size - 1 bytes of the file at @path into @buf, terminated
 * with a NUL: the number of bytes, or -errno.
 */
ssize_t bcg_read_file(const char *path, char *buf, size_t size);
/* The number a small file holds (a pid file, a one-value knob), or DFLT. */
long long bcg_read_number(const char *path, long long dflt);

/* Sets up libcgroup and finds the cpu hierarchy: 0 or -error. */
int bcg_init(void);
/* The cpu hierarchy's mount point and whether it is cgroup v2. */
const char *bcg_mount(void);
bool bcg_is_v2(void);

/* Where the engines keep their state: /run ($CGBORROW_RUNDIR in tests). */
const char *bcg_run_dir(void);
/* A process's state, parent and start time: 0 or -errno (-ESRCH). */
int bcg_proc_stat(pid_t pid, struct bcg_proc *p);
/*
 * A pidfd for process PID if it started at START (clock ticks; 0: any
 * start): the descriptor, or -ESRCH if no such process runs. It names that
 * process for good: a process that gets the pid later is another one.
 */
int bcg_pidfd(pid_t pid, unsigned long long start);
/* The process the pidfd names has not exited. */
bool bcg_pidfd_alive(int pidfd);
/* Sends SIG through a pidfd: 0 or -errno. */
int bcg_pidfd_signal(int pidfd, int sig);

/* Fill G from a path in the hierarchy (or under its mount point). */
int bcg_from_path(struct bcg *g, const char *arg);
/* ... from the cpu cgroup of a process. */
int bcg_from_pid(struct bcg *g, pid_t pid);
/* ... from a container id (or a unique prefix), via its init process. */
int bcg_from_container(struct bcg *g, const char *id, struct bcg_container *c);
/*
 * The length of the path of the lowest common ancestor of two groups' paths
 * (0: the root).
 */
size_t bcg_common_len(const char *a, const char *b);

/*
 * Calls FN for each container the engines' metadata lists (containerd's
 * shims, Podman's conmon). Stops at and returns FN's first non-zero result.
 */
int bcg_scan_containers(int (*fn)(const struct bcg_container *c, void *arg),
			void *arg);
/*
 * The same, but looks for a container's binary logger only if its pid file
 * was written at or after SINCE (CLOCK_REALTIME; NULL: always): the shim
 * starts the logger as it starts the container, and the search reads every
 * process's stat, which a scan of a node's old containers need not. (The
 * CRI plugin's containers have none: never looked for.)
 */
int bcg_scan_containers_since(int (*fn)(const struct bcg_container *c, void *arg),
			      void *arg, const struct timespec *since);

/*
 * Watches the engines' metadata, the directories bcg_scan_containers()
 * reads, for containers that come and go (inotify): the descriptor to
 * wait on (readable on a change), or -errno if some directory could not
 * be watched (a scan now and then must do without).
 */
int bcg_watch_containers(void);
/*
 * Reads the watch's events, and watches the directories they made: 1 if
 * the metadata changed (a container came or went), 0 if not, -errno if a
 * directory could not be watched.
 */
int bcg_watch_read(void);

/* The file exists and the cpu controller is on: 0 or -error. */
int bcg_check(const struct bcg *g);
/*
 * Charge USEC (for WORKER if not 0): 0 or -error. FD: NULL, or where the
 * group's charge file stays open for the next charge (-1 at first; closed
 * with bcg_charge_close()).
 */
int bcg_charge(const struct bcg *g, int *fd, unsigned long long usec,
	       pid_t worker);
/*
 * Charge USEC spent by a task of the group WORKER, named by its cgroup id
 * ("USEC cgroup=ID"): it needs no live task. 0 or -error.
 */
int bcg_charge_for_group(const struct bcg *g, int *fd, unsigned long long usec,
			 const struct bcg *worker);
/* Closes a charge file kept open by bcg_charge() (*FD becomes -1). */
void bcg_charge_close(int *fd);
/* The group's cgroup id (from its file handle, 64 bits): 0 or -errno. */
int bcg_id(const struct bcg *g, unsigned long long *id);
/* Reads the group's numbers: 0 or -error (of the borrowing file). */
int bcg_read(const struct bcg *g, struct bcg_stat *st);
/* Just what it owes and its quota per period (-1: none), in us. */
int bcg_owed(const struct bcg *g, long long *owed_us, long long *quota_us);

/*
 * A group's files, read by its directory DIR (a struct bcg's dir, or one
 * that bcg_next_child() gave): the agent's readers, and cgborrow's too.
 */
/* DIR has a file NAME. */
bool bcg_dir_has(const char *dir, const char *name);
/*
 * The next child group of DIR, open as D: its directory into PATH (SIZE
 * bytes), and true; false once there is none.
 */
bool bcg_next_child(DIR *d, const char *dir, char *path, size_t size);
/*
 * The group is on cgroup v2: it has cpu.max. Asked of the group, not of
 * bcg_is_v2(), so that a restore works before bcg_init() (borrowd
 * --resume, the watchdog).
 */
bool bcg_dir_is_v2(const char *dir);
/*
 * The group's quota and period, in us (quota -1: none): cpu.max on v2,
 * cpu.cfs_quota_us and cpu.cfs_period_us on v1 (as bcg_dir_is_v2() says;
 * no bcg_init() needed). 0, or -ENOENT (no such group), -BCG_ENOCPU (no
 * quota file) or -EIO (no period); what it could not read is left as it
 * was.
 */
int bcg_read_quota(const char *dir, long long *quota_us, long long *period_us);
/* The value of KEY in the group's cpu.stat, or -1. */
long long bcg_stat_key(const char *dir, const char *key);
/* The group's CPU time, us: cpu.stat's on v2, cpuacct's on v1; or -1. */
long long bcg_read_usage(const char *dir);
/*
 * The same, and cpu.stat's nr_periods into *NR_PERIODS unless NULL (-1 if
 * unread): on v2 from the same read.
 */
long long bcg_read_usage_periods(const char *dir, long long *nr_periods);

/*
 * Room for NEED elements of SIZE in the array *ARR of *CAP: 0, or -ENOMEM
 * with the array as it was. Grows to twice NEED.
 */
int bcg_grow(void **arr, int *cap, int need, size_t size);

/* A decimal number of microseconds, nothing else: 0 or -EINVAL/-ERANGE. */
int bcg_parse_usec(const char *s, unsigned long long *usec);
/* A pid: 0 or -EINVAL. */
int bcg_parse_pid(const char *s, pid_t *pid);

/* A message for -error, and the exit status it calls for. */
const char *bcg_strerror(int err);
int bcg_exit_status(int err);

#endif /* BORROW_CG_H */
