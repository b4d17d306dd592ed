// SPDX-License-Identifier: GPL-2.0
/*
 * borrowd's accounting: at each context switch, the time the outgoing task
 * ran is added to its process's entry in the workers map, if the agent put
 * one there. The agent reads the sums and charges them to the clients.
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

SEC("tracepoint/sched/sched_switch")
int borrowd_switch(struct sched_switch_args *ctx)
{
	__u32 zero = 0, tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 now = bpf_ktime_get_ns();
	struct cpu_run *run;
	struct worker *w;

	run = bpf_map_lookup_elem(&runs, &zero);
	if (!run)
		return 0;
	/* Runs that began before the agent attached are not counted. */
	if (run->start && tgid) {
		w = bpf_map_lookup_elem(&workers, &tgid);
		if (w)
			__sync_fetch_and_add(&w->ns, now - run->start);
	}
	run->start = now;
	run->tid = ctx->next_pid;
	return 0;
}
