/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What borrowd's files share: the settings, the workers' rules (the
 * process rule), the daemons' clients (the thread rule) and the BPF
 * skeleton; each file keeps the rest to itself.
 *
 *   borrowd.c          the settings, the mode, the BPF programs, the main loop
 *   borrowd_workers.c  the process rule: the workers (also those the
 *                      engines' metadata names) and the charges
 *   borrowd_pace.c     --pace, and the watchdog that makes it crash-safe
 *   borrowd_daemons.c  the thread rule: shared daemons and their clients
 *   borrowd_stats.c    the totals: on SIGUSR1, at exit, --stats
 *   borrowd_usage.c    the quota mode's groups' CPU time, from the BPF programs
 */
#ifndef BORROWD_H
#define BORROWD_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>
#include <linux/types.h>

#include "borrow_cg.h"

/* How charges are paid: the kernel's file, or lowered quotas. */
enum { MODE_AUTO, MODE_KERNEL, MODE_QUOTA };

enum { SRC_CONFIG, SRC_ENGINE };

/*
 * What a client was charged for a worker's (or a daemon's) CPU time, and
 * its charge file, open for as long as the worker works for it.
 */
struct account {
	__u64 counted_ns;	/* worker CPU time covered by charges */
	__u64 due_since_ns;	/* CLOCK_MONOTONIC: when a charge began to wait */
	unsigned long long charged_us;
	unsigned long long failed_us;	/* charges that failed, not retried */
	int last_err;		/* reported once until it changes */
	int fd;			/* the client's charge file; -1: not open */
};

struct rule {
	pid_t worker;		/* tgid */
	int pidfd;		/* holds the worker: its pid may be reused */
	unsigned long long start;	/* the worker's start time (ticks) */
	char comm[16];
	struct bcg client;
	/*
	 * The group the worker ran in when last seen running (read before
	 * its time is counted): it names the worker once the worker has
	 * exited (its pid names nothing, or another process), so that its
	 * last charges stop at the same level.
	 */
	struct bcg worker_g;
	__u64 cgroup;		/* cgroup v2: the id of worker_g, as BPF saw it */
	__u32 slot;		/* its sums in the BPF map */
	int source;
	char container[128];	/* SRC_ENGINE: the container's id */
	struct account acct;
	__u64 sum_ns;		/* the BPF sum, this round */
	bool seen;		/* in the last engine scan */
	bool stopped;		/* paced: SIGSTOPped by us */
	bool gone;		/* its pid is another process's now */
	bool exited;		/* its pidfd polled readable */
	bool unlisted;		/* its container left the engine's list */
	bool ran;		/* charged since its group was last read */
	unsigned long rounds, paused;
};

/* A shared daemon's work for one container. */
struct client {
	__u32 id;		/* its slot in client_ns */
	pid_t daemon;
	char container[128];
	struct bcg g;
	struct account acct;
	bool seen;
};

struct borrowd_opts {
	const char *config;
	long interval_ms, scan_ms, rescan_s;
	long min_charge_us;	/* a smaller charge waits (a second at most) */
	bool engine_podman, engine_containerd;
	bool pid_form;
	bool cgroup_form;	/* the kernel takes "USEC cgroup=ID" */
	bool verbose;
	bool pace;
	long pace_periods;
	long evidence_us;
	bool resume;
	int mode;
	double duration;
	char pod_logs[PATH_MAX];
	char pace_state[PATH_MAX];
	char quota_state[PATH_MAX];
	char stats[PATH_MAX];
};

/* borrowd.c */
extern struct borrowd_opts opt;
extern const char *const mode_names[];
/* The kernel has cpu.cfs.borrowing_us: 1, 0, -1 unknown (kernel_has_file()). */
extern int kernel_file;
extern struct borrowd_bpf *skel;
extern int nr_cpus;

/* borrowd_workers.c */
extern struct rule *rules;
extern int nr_rules;
/* The epoll set the main loop waits on: the workers' pidfds join it. */
extern int events_fd;
int runtime_record_layout(void);
/* sched_stat_runtime's program attached (ON) or not: 0 or -errno. */
int worker_accounting(bool on);
/* Maps the BPF sums into memory, once loaded: 0 or -errno. */
int map_sums(void);
/* The worker's pidfd polled readable: the next charge_all() reaps it. */
void worker_exited(pid_t worker);
struct rule *find_rule(pid_t worker);
void read_comm(pid_t pid, char *comm, size_t len);
int add_rule(pid_t worker, unsigned long long start,
	     const struct bcg *client, int source, const char *container);
void account_init(struct account *a);
void account_close(struct account *a);
long long settle(struct account *a, const struct bcg *g, __u64 total_ns,
		 pid_t worker, const struct bcg *wg, bool final);
void charge_all(bool reap, bool note, bool final);
int client_of(struct bcg *g, const struct bcg_container *c);
/*
 * Reads the engines' metadata into containers[], sorted by id (with
 * --daemon too, for scan_daemon_fds()), and takes every worker it names:
 * whether a young containerd container's logger is still to come.
 */
extern struct bcg_container *containers;
extern int nr_containers;
int cmp_container(const void *a, const void *b);
bool scan_engines(void);

/* borrowd_pace.c */
void make_state_dir(const char *file);
int start_watchdog(void);
void stop_watchdog(void);
int resume_pace_state(void);
void pace(struct rule *r);
void unpace(struct rule *r);

/* borrowd_daemons.c */
extern struct client *clients;
extern int nr_clients;
int add_daemon(const char *val);
/* Maps the BPF clients' sums into memory, once loaded: 0 or -errno. */
int map_client_sums(void);
bool daemons_named(void);
void find_daemons(void);
/* FINAL: every client's last charge, however small. */
void charge_clients(bool final);
/* The daemons' descriptors mapped to containers[] (scan_engines() read it). */
void scan_daemon_fds(void);
/* A daemon held has exited (its pidfd polls readable). */
bool daemon_exited(void);
/* A daemon is held: it may open a container's files after the change. */
bool daemons_held(void);
/*
 * Watches the directories of the log files the daemons write: the inotify
 * descriptor to wait on, or -errno; log_dirs_changed() reads its events.
 */
int watch_log_dirs(void);
bool log_dirs_changed(void);

/* borrowd_usage.c */
/* Maps the groups' sums into memory and gives them to the quota mode. */
int map_usage(void);

/* borrowd_stats.c */
extern unsigned long long gone_charged_us, gone_failed_us;
/* The engines' metadata read so far (scan_engines()), and the CPU it took. */
extern unsigned long metadata_scans;
extern unsigned long long metadata_scan_ns;
const char *failed_note(unsigned long long failed_us);
void print_totals(void);
void write_stats(void);

#endif /* BORROWD_H */
