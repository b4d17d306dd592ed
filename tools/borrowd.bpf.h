/* SPDX-License-Identifier: GPL-2.0 */
/* What borrowd.bpf.c and the agent's files share: the maps' keys and values. */
#ifndef BORROWD_BPF_H
#define BORROWD_BPF_H

#define MAX_WORKERS	4096
/* Clients of shared daemons (the thread rule): ids 1 .. MAX_CLIENTS - 1. */
#define MAX_CLIENTS	4096
#define MAX_FDS		65536
/* Shared daemons' processes held at once. */
#define MAX_DAEMONS	32
#define MAX_THREADS	65536
/*
 * The thread rule: how long a daemon thread may run for a client on one
 * piece of evidence (a line read from its FIFO, a write to its log file),
 * by default (borrowd --evidence-us). A line takes microseconds; this
 * bounds what a thread that goes on to other work without blocking or
 * touching a file can charge a client.
 */
#define DAEMON_EVIDENCE_US	5000
#define DAEMON_EVIDENCE_US_MAX	100000

/*
 * A worker process (by tgid, in the workers map): its slot in the sums map,
 * which the agent maps into its memory and reads without a system call.
 */
struct worker {
	__u32 slot;
	__u32 pad;
};

/*
 * A worker's slot: the CPU time its threads ran, in ns, and the cgroup
 * (v2 id) it last ran in. Once a new task gets its pid, the worker is gone
 * and nothing more counts.
 */
struct worker_sum {
	__u64 ns;
	__u64 cgroup;
	__u32 gone;
	__u32 pad;
};

/* A worker's thread (worker_threads, by tid): its process and its slot. */
struct worker_thread {
	__u32 tgid;
	__u32 slot;
};

/*
 * The quota mode's groups whose CPU time the programs add up (cgroup v2):
 * slots in the usage_ns map, and the deepest level looked at.
 */
#define MAX_USAGE_GROUPS	4096
#define USAGE_MAX_LEVEL		16

/* A shared daemon's file descriptor that a client's output comes from. */
struct fd_key {
	__u32 tgid;
	__u32 fd;
};

#endif /* BORROWD_BPF_H */
