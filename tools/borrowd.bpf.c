// SPDX-License-Identifier: GPL-2.0
/*
 * borrowd's accounting: each time the kernel accounts a task's CPU time
 * (sched_stat_runtime: at a tick, a switch, a wake-up on its CPU), that
 * time is added to its process's entry in the workers map, if the agent
 * put one there. The agent reads the sums and charges them to the clients.
 * They are the kernel's own figures, the ones its group's usage adds up:
 * a switch's timestamps would also count, to a worker that blocks, the
 * scheduler's work on its CPU after it left (picking the next task,
 * balancing a CPU about to idle), which nobody's usage counts.
 *
 * Shared daemons (dockerd, containerd's CRI plugin copy every container's
 * logs) have the thread rule: a daemon thread works for a container while
 * it has evidence, and for nobody otherwise. The agent maps the daemon's
 * file descriptors that carry a container's output to the container (its
 * FIFOs, its log file open for writing). Evidence is data read from such a
 * FIFO, or a write to such a file, which also claims the work the thread
 * did since its last boundary (the line it formatted). The work ends at a
 * boundary: the thread blocks, reads or writes any other file (a socket, a
 * file of its own) but the runtime's (the Go scheduler's eventfd or pipe),
 * reads nothing from the container's FIFO, or has run evidence_ns
 * without new evidence. So an image pull, a stats request or a `logs`
 * reader that a thread serves after a container's line is nobody's,
 * whichever container it served before.
 *
 * The quota mode's groups (cgroup v2): the time the outgoing task ran is
 * added to each of its cgroup's ancestors that the agent put in the
 * usage_ids map. A sum counts a run when it ends (it lags the group's
 * usage by the runs in progress) and costs the agent a read of memory:
 * it looks at a group's cpu.stat, whose read flushes the group's
 * statistics, only where the sum shows that the group may have left some
 * of its quota unused.
 *
 * It needs no BTF of the kernel (the project's guest kernel has none): the
 * sched_switch tracepoint's record layout has not changed since 4.x, and
 * the outgoing task is the current one, whose tgid a helper gives;
 * sched_stat_runtime's has two layouts (the agent reads which).
 */
#include <stdbool.h>
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "borrowd.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* The thread rule's budget per piece of evidence; the agent sets it. */
const volatile __u64 evidence_ns = DAEMON_EVIDENCE_US * 1000ULL;
/*
 * Whether any shared daemon is named (the agent sets it): without, the
 * programs that run for every task skip the daemons' maps altogether.
 */
const volatile bool have_daemons = true;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WORKERS);
	__type(key, __u32);		/* tgid */
	__type(value, struct worker);
} workers SEC(".maps");

/* The workers' sums, by slot: the agent reads them from its memory. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MAX_WORKERS);
	__type(key, __u32);
	__type(value, struct worker_sum);
} sums SEC(".maps");

/*
 * A worker's thread (by tid): its process and slot. The kernel also
 * accounts a task's time from another CPU (a wake-up there updates the
 * running task's), whose record names the thread, not its process: this
 * finds it. The agent makes the entry of a worker's first thread (its pid);
 * another thread's is made at its first time accounted on its own CPU (a
 * tick at the latest). An entry is dropped when a new task gets its tid.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);		/* tid */
	__type(value, struct worker_thread);
} worker_threads SEC(".maps");

/* Per CPU: since when the task there runs (the daemons' and groups' time). */
struct cpu_run {
	__u64 start;	/* bpf_ktime_get_ns() at the switch, 0: unknown */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_run);
} runs SEC(".maps");

/*
 * Shared daemons' tgids in the slots below nr_daemon_slots, 0 in a free
 * one; the agent sets them. Every context switch and every read and write
 * of every task asks whether its process is a daemon's: a few compares,
 * where a hash lookup costs a hash of the key and a walk of its bucket.
 */
volatile __u32 daemon_tgids[MAX_DAEMONS];
volatile __u32 nr_daemon_slots;

/* TGID's slot in daemon_tgids, or -1 if it is no daemon's. */
static __always_inline int daemon_slot(__u32 tgid)
{
	__u32 n = nr_daemon_slots;

	if (!tgid)
		return -1;
	for (__u32 i = 0; i < MAX_DAEMONS && i < n; i++)
		if (daemon_tgids[i] == tgid)
			return i;
	return -1;
}

static __always_inline bool is_daemon(__u32 tgid)
{
	return daemon_slot(tgid) >= 0;
}

/*
 * A daemon's file descriptor -> the client whose output it carries, or 0
 * for the runtime's own (its eventfd, its wake-up pipe, epoll).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FDS);
	__type(key, struct fd_key);
	__type(value, __u32);
} fd_clients SEC(".maps");

/* A daemon thread's work: for which client, on what evidence. */
struct thread_work {
	__u32 client;		/* the client it works for now, 0: none */
	__u32 reading;		/* the client whose FIFO it is reading, 0: none */
	__u64 left;		/* ns it may run for CLIENT without new evidence */
	__u64 unclaimed;	/* ns run for nobody since its last boundary */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);		/* tid */
	__type(value, struct thread_work);
} thread_clients SEC(".maps");

/* The quota mode's groups: cgroup id -> slot in usage_ns. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_USAGE_GROUPS);
	__type(key, __u64);
	__type(value, __u32);
} usage_ids SEC(".maps");

/* Their CPU time in ns, by slot (mapped, as sums). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MAX_USAGE_GROUPS);
	__type(key, __u32);
	__type(value, __u64);
} usage_ns SEC(".maps");

/*
 * The levels of the shallowest and the deepest group usage_ids holds, 0
 * while it holds none (the switch skips it all); the agent sets them.
 */
volatile __u32 usage_level_min, usage_level_max;

/* Per client id: the daemon CPU time spent for it, in ns (mapped, as sums). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MAX_CLIENTS);
	__type(key, __u32);
	__type(value, __u64);
} client_ns SEC(".maps");

/*
 * The sched_switch record (include/trace/events/sched.h). prev_state is 0
 * for a task that yields, TASK_REPORT_MAX for a preempted one, and one of
 * the bits below it for one that blocks.
 */
#define SWITCH_PREEMPTED	0x100	/* TASK_REPORT_MAX */

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

/*
 * A daemon thread ran NS: its client's, as far as the evidence reaches;
 * the rest is unclaimed, which a write of a client's file may claim.
 */
static void daemon_time(struct thread_work *t, __u64 ns)
{
	__u64 mine = 0, *sum;

	if (t->client) {
		mine = ns < t->left ? ns : t->left;
		t->left -= mine;
		sum = bpf_map_lookup_elem(&client_ns, &t->client);
		if (sum && mine)
			__sync_fetch_and_add(sum, mine);
		if (!t->left)
			t->client = 0;
	}
	t->unclaimed += ns - mine;
	if (t->unclaimed > evidence_ns)
		t->unclaimed = evidence_ns;
}

/* A boundary: what the thread does next is nobody's until new evidence. */
static void daemon_boundary(struct thread_work *t)
{
	t->client = 0;
	t->unclaimed = 0;
}

/* Evidence of work for CLIENT; a write claims the thread's unclaimed time. */
static void daemon_evidence(struct thread_work *t, __u32 client, bool write)
{
	__u64 *sum;

	if (write && !t->client && t->unclaimed) {
		sum = bpf_map_lookup_elem(&client_ns, &client);
		if (sum)
			__sync_fetch_and_add(sum, t->unclaimed);
	}
	t->client = client;
	t->left = evidence_ns;
	t->unclaimed = 0;
}

/* The daemon thread that runs now, and its time since its run began. */
static struct thread_work *daemon_thread(__u32 tid)
{
	struct thread_work *t, fresh = {};
	__u32 zero = 0;
	struct cpu_run *run;
	__u64 now;

	t = bpf_map_lookup_elem(&thread_clients, &tid);
	if (!t) {
		bpf_map_update_elem(&thread_clients, &tid, &fresh, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&thread_clients, &tid);
		if (!t)
			return NULL;
	}
	run = bpf_map_lookup_elem(&runs, &zero);
	if (run && run->start) {
		now = bpf_ktime_get_ns();
		daemon_time(t, now - run->start);
		run->start = now;
	}
	return t;
}

/* The worker process TGID's sums, if it is a worker. */
static struct worker_sum *worker_of(__u32 tgid)
{
	struct worker *w = bpf_map_lookup_elem(&workers, &tgid);

	return w ? bpf_map_lookup_elem(&sums, &w->slot) : NULL;
}

/* The outgoing task ran NS: its groups' sums, for those the agent tracks. */
static void group_usage(__u64 ns)
{
	__u32 lo = usage_level_min, hi = usage_level_max, *slot;
	__u64 id, *sum;

	for (__u32 level = 1; level <= USAGE_MAX_LEVEL; level++) {
		if (level < lo)
			continue;
		if (level > hi)
			break;
		id = bpf_get_current_ancestor_cgroup_id(level);
		if (!id)
			break;
		slot = bpf_map_lookup_elem(&usage_ids, &id);
		if (!slot)
			continue;
		sum = bpf_map_lookup_elem(&usage_ns, slot);
		if (sum)
			__sync_fetch_and_add(sum, ns);
	}
}

/*
 * Every context switch on the machine runs this, where it is attached
 * (with daemons named, or in quota mode): a per-CPU store, a compare per
 * daemon with daemons named, and while the quota mode tracks groups, a
 * hash lookup per level between its groups' shallowest and deepest. (A
 * worker's time is borrowd_runtime's.)
 */
SEC("tracepoint/sched/sched_switch")
int borrowd_switch(struct sched_switch_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	__u32 zero = 0, tgid = id >> 32;
	struct thread_work *t;
	struct cpu_run *run;

	run = bpf_map_lookup_elem(&runs, &zero);
	if (!run)
		return 0;
	/* Runs that began before the agent attached are not counted. */
	if (run->start && tgid) {
		/* A daemon that is also a worker's process is a worker. */
		if (have_daemons && is_daemon(tgid) && !worker_of(tgid)) {
			t = daemon_thread((__u32)id);
			/* It blocks (it was not preempted): a boundary. */
			if (t && ctx->prev_state && !(ctx->prev_state & SWITCH_PREEMPTED))
				daemon_boundary(t);
		}
		if (usage_level_max)
			group_usage(now - run->start);
	}
	run->start = now;
	return 0;
}

/*
 * The sched_stat_runtime record (include/trace/events/sched.h): comm was
 * an array up to 6.x (and vruntime followed runtime before 6.8), it is a
 * dynamic string in mainline, which moves pid and runtime. The agent reads
 * the layout from the event's format and loads the program for it.
 */
struct stat_runtime_args {
	__u64 common;
	char comm[16];
	__s32 pid;
	__u32 pad;
	__u64 runtime;
};

struct stat_runtime_args_dynamic {
	__u64 common;
	__u32 comm;			/* __data_loc: offset and length */
	__s32 pid;
	__u64 runtime;
};

/*
 * The kernel accounts NS to task PID (its usage, its groups'): what a
 * worker's threads run, counted as the kernel counts it. A task that is
 * neither a worker's nor the running one costs one hash lookup.
 */
static __always_inline int worker_runtime(__u32 pid, __u64 ns)
{
	__u64 id = bpf_get_current_pid_tgid(), cgroup;
	struct worker_thread *t, entry;
	struct worker_sum *w;
	struct worker *wk;
	__u32 tgid;

	if (!pid)
		return 0;
	if (pid == (__u32)id) {
		/* The running task's own: its process is the current one. */
		tgid = id >> 32;
		wk = bpf_map_lookup_elem(&workers, &tgid);
		if (!wk)
			return 0;
		w = bpf_map_lookup_elem(&sums, &wk->slot);
		if (!w || w->gone)
			return 0;
		__sync_fetch_and_add(&w->ns, ns);
		/* Where it ran: the agent reads it again on a change. */
		cgroup = bpf_get_current_cgroup_id();
		if (w->cgroup != cgroup)
			w->cgroup = cgroup;
		if (pid == tgid)
			return 0;
		t = bpf_map_lookup_elem(&worker_threads, &pid);
		if (!t || t->tgid != tgid || t->slot != wk->slot) {
			entry.tgid = tgid;
			entry.slot = wk->slot;
			bpf_map_update_elem(&worker_threads, &pid, &entry, BPF_ANY);
		}
		return 0;
	}
	/* Accounted from another CPU: a worker's thread, if it is known. */
	t = bpf_map_lookup_elem(&worker_threads, &pid);
	if (!t)
		return 0;
	tgid = t->tgid;
	wk = bpf_map_lookup_elem(&workers, &tgid);
	/* Its process is no worker now, or another worker has the slot. */
	if (!wk || wk->slot != t->slot) {
		bpf_map_delete_elem(&worker_threads, &pid);
		return 0;
	}
	w = bpf_map_lookup_elem(&sums, &wk->slot);
	if (w && !w->gone)
		__sync_fetch_and_add(&w->ns, ns);
	return 0;
}

/* One program per layout: the agent loads the kernel's. */
SEC("tracepoint/sched/sched_stat_runtime")
int borrowd_runtime(struct stat_runtime_args *ctx)
{
	return worker_runtime(ctx->pid, ctx->runtime);
}

SEC("tracepoint/sched/sched_stat_runtime")
int borrowd_runtime_dynamic(struct stat_runtime_args_dynamic *ctx)
{
	return worker_runtime(ctx->pid, ctx->runtime);
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
	struct worker_sum *w;
	int slot;

	w = worker_of(pid);
	if (w)
		w->gone = 1;
	/* The tid of a worker's thread that exited: another task's now. */
	bpf_map_delete_elem(&worker_threads, &pid);
	if (!have_daemons)
		return 0;
	slot = daemon_slot(pid);
	if (slot >= 0 && slot < MAX_DAEMONS)
		daemon_tgids[slot] = 0;
	/* A new thread starts with no client, whatever its tid's last did. */
	bpf_map_delete_elem(&thread_clients, &pid);
	return 0;
}

/* The syscalls' enter record (kernel/trace/trace_syscalls.c). */
struct sys_enter_args {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__u64 args[6];
};

/*
 * A daemon thread reads or writes FD: a client's file is evidence (a read's
 * once it returns data), any other file but the runtime's a boundary: a
 * Go daemon writes its sockets for API clients and reads its image store,
 * none of it a container's.
 */
static int daemon_io(__u32 fd, bool write)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct fd_key key = { .tgid = id >> 32, .fd = fd };
	struct thread_work *t;
	__u32 *client;

	if (!is_daemon(key.tgid))
		return 0;
	t = daemon_thread((__u32)id);
	if (!t)
		return 0;
	client = bpf_map_lookup_elem(&fd_clients, &key);
	if (!client) {
		daemon_boundary(t);
		return 0;
	}
	/* The runtime's own (client 0): neither. */
	if (!*client)
		return 0;
	daemon_evidence(t, *client, write);
	if (!write)
		t->reading = *client;
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_read")
int borrowd_read(struct sys_enter_args *ctx)
{
	return daemon_io((__u32)ctx->args[0], false);
}

SEC("tracepoint/syscalls/sys_enter_write")
int borrowd_write(struct sys_enter_args *ctx)
{
	return daemon_io((__u32)ctx->args[0], true);
}

/* The syscalls' exit record (kernel/trace/trace.h: syscall_trace_exit). */
struct sys_exit_args {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__s64 ret;
};

/*
 * A read of a client's FIFO returns: with data, the evidence (again, if
 * the thread blocked in it); with none (EAGAIN, the end), a boundary.
 */
SEC("tracepoint/syscalls/sys_exit_read")
int borrowd_read_done(struct sys_exit_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id, client;
	struct thread_work *t;

	if (!is_daemon(tgid))
		return 0;
	t = daemon_thread(tid);
	if (!t || !t->reading)
		return 0;
	client = t->reading;
	t->reading = 0;
	if (ctx->ret > 0)
		daemon_evidence(t, client, false);
	else
		daemon_boundary(t);
	return 0;
}
