// SPDX-License-Identifier: GPL-2.0
/*
 * borrowd's accounting: at each context switch, the time the outgoing task
 * ran is added to its process's entry in the workers map, if the agent put
 * one there. The agent reads the sums and charges them to the clients.
 *
 * Shared daemons (dockerd, containerd's CRI plugin copy every container's
 * logs) have the thread rule: a thread's CPU time between two reads goes
 * to the client whose pipe or FIFO it read last (or whose log file it
 * wrote last). The agent maps the
 * daemon's file descriptors to clients; at each read of a client's file by
 * a daemon thread, the time the thread ran since it was switched in or
 * last read one goes to its current client, and the file names the next.
 *
 * It needs no BTF of the kernel (the project's guest kernel has none): the
 * sched_switch tracepoint's record layout has not changed since 4.x, and
 * the outgoing task is the current one, whose tgid a helper gives.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "borrowd.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WORKERS);
	__type(key, __u32);		/* tgid */
	__type(value, struct worker);
} workers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_run);
} runs SEC(".maps");

/* Shared daemons: tgid -> 1. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WORKERS);
	__type(key, __u32);
	__type(value, __u32);
} daemons SEC(".maps");

/* A daemon's file descriptor -> the client whose output it carries. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FDS);
	__type(key, struct fd_key);
	__type(value, __u32);
} fd_clients SEC(".maps");

/* A daemon thread -> the client it works for now (0: none). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, __u32);
} thread_clients SEC(".maps");

/* Per client id: the daemon CPU time spent for it, in ns. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CLIENTS);
	__type(key, __u32);
	__type(value, __u64);
} client_ns SEC(".maps");

/* The sched_switch record (include/trace/events/sched.h). */
struct sched_switch_args {
	__u64 common;			/* type, flags, preempt count, pid */
	char prev_comm[16];
	__s32 prev_pid;
	__s32 prev_prio;
	long prev_state;
	char next_comm[16];
	__s32 next_pid;
	__s32 next_prio;
};

/* A daemon thread ran from START to NOW: add it to its current client. */
static void daemon_time(__u32 tid, __u64 start, __u64 now)
{
	__u32 *client;
	__u64 *ns;

	client = bpf_map_lookup_elem(&thread_clients, &tid);
	if (!client || !*client)
		return;
	ns = bpf_map_lookup_elem(&client_ns, client);
	if (ns)
		__sync_fetch_and_add(ns, now - start);
}

SEC("tracepoint/sched/sched_switch")
int borrowd_switch(struct sched_switch_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	__u32 zero = 0, tgid = id >> 32;
	struct cpu_run *run;
	struct worker *w;

	run = bpf_map_lookup_elem(&runs, &zero);
	if (!run)
		return 0;
	/* Runs that began before the agent attached are not counted. */
	if (run->start && tgid) {
		w = bpf_map_lookup_elem(&workers, &tgid);
		if (w) {
			if (!w->gone)
				__sync_fetch_and_add(&w->ns, now - run->start);
		} else if (bpf_map_lookup_elem(&daemons, &tgid)) {
			daemon_time((__u32)id, run->start, now);
		}
	}
	run->start = now;
	run->tid = ctx->next_pid;
	return 0;
}

/*
 * The sched_wakeup_new record (sched_wakeup_template in
 * include/trace/events/sched.h), the same from 6.12 to mainline; not
 * sched_process_fork, whose comm fields became dynamic strings in mainline
 * (its child_pid moved, and a program reading it at 6.12's offset does not
 * attach there).
 */
struct sched_wakeup_new_args {
	__u64 common;
	char comm[16];
	__s32 pid;
	__s32 prio;
	__s32 target_cpu;
};

/*
 * A new task with a worker's or a daemon's pid: that process has exited
 * (a live one keeps its pid, a zombie too), and its pid is another's now.
 * What the new one runs is nobody's work until the agent drops the entry.
 * The new task is woken here for the first time, before it can run.
 */
SEC("tracepoint/sched/sched_wakeup_new")
int borrowd_fork(struct sched_wakeup_new_args *ctx)
{
	__u32 pid = ctx->pid;
	struct worker *w;

	w = bpf_map_lookup_elem(&workers, &pid);
	if (w)
		w->gone = 1;
	bpf_map_delete_elem(&daemons, &pid);
	return 0;
}

/* The syscalls' enter record (kernel/trace/trace_syscalls.c). */
struct sys_enter_args {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__u64 args[6];
};

/* A daemon thread reads or writes FD: if it is a client's, work for it. */
static int daemon_io(__u32 fd)
{
	__u64 id = bpf_get_current_pid_tgid(), now;
	__u32 zero = 0, tid = (__u32)id, client, *c;
	struct fd_key key = { .tgid = id >> 32, .fd = fd };
	struct cpu_run *run;

	if (!bpf_map_lookup_elem(&daemons, &key.tgid))
		return 0;
	/*
	 * Only a client's file moves the thread: a Go daemon's threads read
	 * other files all the time (the netpoller's eventfd on each wakeup),
	 * and these would otherwise leave the work that follows to nobody.
	 */
	c = bpf_map_lookup_elem(&fd_clients, &key);
	if (!c)
		return 0;
	client = *c;
	/* The time up to this call is the previous client's. */
	run = bpf_map_lookup_elem(&runs, &zero);
	if (run && run->start) {
		now = bpf_ktime_get_ns();
		daemon_time(tid, run->start, now);
		run->start = now;
	}
	bpf_map_update_elem(&thread_clients, &tid, &client, BPF_ANY);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_read")
int borrowd_read(struct sys_enter_args *ctx)
{
	return daemon_io((__u32)ctx->args[0]);
}

/*
 * Writes too: a Go daemon's goroutine that read a client's FIFO goes on to
 * write its log file (whose path names the container as well), often on
 * another thread, as the runtime hands goroutines over at slow syscalls.
 */
SEC("tracepoint/syscalls/sys_enter_write")
int borrowd_write(struct sys_enter_args *ctx)
{
	return daemon_io((__u32)ctx->args[0]);
}
