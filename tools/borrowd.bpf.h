/* SPDX-License-Identifier: GPL-2.0 */
/* What borrowd.bpf.c and borrowd.c share: the maps' keys and values. */
#ifndef BORROWD_BPF_H
#define BORROWD_BPF_H

#define MAX_WORKERS	4096
#define MAX_CPUS	256

/* A worker process (by tgid): the CPU time its threads ran, in ns. */
struct worker {
	__u64 ns;
};

/* Per CPU: what runs there since when (for a run still in progress). */
struct cpu_run {
	__u64 start;	/* bpf_ktime_get_ns() at the switch, 0: unknown */
	__u32 tid;	/* the task switched to */
	__u32 pad;
};

#endif /* BORROWD_BPF_H */
