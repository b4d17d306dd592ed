// SPDX-License-Identifier: GPL-2.0
/*
 * The quota mode's usage source (borrow_quota.h): the BPF programs add
 * each tracked group's tasks' runs up at their switches (borrowd.bpf.c),
 * into a map mapped into our memory, so that the mode reads a group's
 * cpu.stat (whose read flushes its statistics) only where a look may pay.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "borrowd.h"
#include "borrowd.bpf.h"
#include "borrowd.skel.h"
#include "borrow_quota.h"

static __u64 *usage;
static bool slot_used[MAX_USAGE_GROUPS];
static int slot_level[MAX_USAGE_GROUPS];
static int next_slot, per_level[USAGE_MAX_LEVEL + 1];

/*
 * The levels the programs look at: from the shallowest group's to the
 * deepest's; none (0) while no group is tracked.
 */
static void set_levels(void)
{
	int lo = 0, hi = 0;

	for (int l = 1; l <= USAGE_MAX_LEVEL; l++) {
		if (!per_level[l])
			continue;
		lo = lo ? lo : l;
		hi = l;
	}
	skel->bss->usage_level_min = lo;
	skel->bss->usage_level_max = hi;
}

static int track(unsigned long long id, int level)
{
	__u64 key = id;
	__u32 slot;
	int err;

	if (level < 1 || level > USAGE_MAX_LEVEL)
		return -ERANGE;
	/*
	 * The slot after the last one taken: one given up is taken again as
	 * late as can be (a program may still be adding to it).
	 */
	for (int i = 0; i < MAX_USAGE_GROUPS; i++) {
		slot = (next_slot + i) % MAX_USAGE_GROUPS;
		if (slot_used[slot])
			continue;
		usage[slot] = 0;
		err = bpf_map_update_elem(bpf_map__fd(skel->maps.usage_ids), &key,
					  &slot, BPF_NOEXIST);
		if (err)
			return -errno;
		slot_used[slot] = true;
		slot_level[slot] = level;
		next_slot = slot + 1;
		per_level[level]++;
		set_levels();
		return slot;
	}
	return -ENOSPC;
}

static unsigned long long read_ns(int slot)
{
	return __atomic_load_n(&usage[slot], __ATOMIC_RELAXED);
}

static void untrack(int slot, unsigned long long id)
{
	__u64 key = id;

	bpf_map_delete_elem(bpf_map__fd(skel->maps.usage_ids), &key);
	slot_used[slot] = false;
	per_level[slot_level[slot]]--;
	set_levels();
}

static const struct bq_usage_source source = {
	.track = track,
	.read_ns = read_ns,
	.untrack = untrack,
};

int map_usage(void)
{
	void *p;

	p = mmap(NULL, sizeof(*usage) * MAX_USAGE_GROUPS, PROT_READ | PROT_WRITE,
		 MAP_SHARED, bpf_map__fd(skel->maps.usage_ns), 0);
	if (p == MAP_FAILED)
		return -errno;
	usage = p;
	bq_set_usage_source(&source);
	return 0;
}
