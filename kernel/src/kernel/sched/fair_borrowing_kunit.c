// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for CFS bandwidth borrowing: parsing a charge, the effective
 * quota and the bound, charging and clamping a level, paying at period
 * refills and the floor a refill leaves, what configuration writes do to a
 * debt, and the walk that charges every limited level up to the lowest
 * common ancestor with the worker. The helpers under test are static unless
 * KUnit is enabled (VISIBLE_IF_KUNIT). Nothing here reads a sysctl: the
 * refill's floor is a parameter, and the floor is counted in its own unit.
 */
#include <kunit/test.h>
#include <linux/mmu_context.h>

#include "sched.h"

#define MS(x)	((u64)(x) * NSEC_PER_MSEC)

/* Every amount charged to a level is accounted for exactly once. */
static void expect_adds_up(struct kunit *test, const struct cfs_borrowing *b)
{
	KUNIT_EXPECT_EQ(test, b->borrowed, b->deducted + b->outstanding + b->dropped);
}

static void cfs_borrowing_test_parse(struct kunit *test)
{
	static const struct {
		const char *in;
		int ret;
		u64 usec;
		pid_t pid;
		u64 cgrp_id;
	} cases[] = {
		{ "20000", 0, 20000, 0, 0 },
		{ "20000\n", 0, 20000, 0, 0 },
		{ "  7  ", 0, 7, 0, 0 },
		{ "+5", 0, 5, 0, 0 },		/* kstrtoull, as cpu.weight */
		{ "0", 0, 0, 0, 0 },
		{ "20000 42", 0, 20000, 42, 0 },
		{ "20000\t42\n", 0, 20000, 42, 0 },
		{ "20000 cgroup=42", 0, 20000, 0, 42 },
		{ "20000 cgroup=18446744073709551615", 0, 20000, 0, U64_MAX },
		{ "17592186044415", 0, MAX_BW, 0, 0 },
		{ "17592186044416", -ERANGE, 0, 0, 0 },
		{ "18446744073709551616", -ERANGE, 0, 0, 0 },
		{ "", -EINVAL, 0, 0, 0 },
		{ "abc", -EINVAL, 0, 0, 0 },
		{ "-1", -EINVAL, 0, 0, 0 },
		{ "1.5", -EINVAL, 0, 0, 0 },
		{ "0x10", -EINVAL, 0, 0, 0 },
		{ "5 0", -EINVAL, 0, 0, 0 },
		{ "5 -3", -EINVAL, 0, 0, 0 },
		{ "5 x", -EINVAL, 0, 0, 0 },
		{ "5 1 2", -EINVAL, 0, 0, 0 },
		{ "5 99999999999", -EINVAL, 0, 0, 0 },
		{ "5 cgroup=", -EINVAL, 0, 0, 0 },
		{ "5 cgroup=0", -EINVAL, 0, 0, 0 },
		{ "5 cgroup=-1", -EINVAL, 0, 0, 0 },
		{ "5 cgroup=x", -EINVAL, 0, 0, 0 },
		{ "5 cgroup=1 2", -EINVAL, 0, 0, 0 },
		{ "5 cgroup=18446744073709551616", -EINVAL, 0, 0, 0 },
		{ "5 cgroup = 1", -EINVAL, 0, 0, 0 },
		{ "5 cgroups=1", -EINVAL, 0, 0, 0 },
		{ "5 pid=1", -EINVAL, 0, 0, 0 },
		{ "cgroup=1", -EINVAL, 0, 0, 0 },
	};
	char buf[48];
	u64 usec, cgrp_id;
	pid_t pid;
	int i, ret;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		strscpy(buf, cases[i].in, sizeof(buf));
		usec = 0;
		pid = 0;
		cgrp_id = 0;
		ret = cfs_borrowing_parse(buf, &usec, &pid, &cgrp_id);
		KUNIT_EXPECT_EQ_MSG(test, ret, cases[i].ret, "input '%s'", cases[i].in);
		if (ret || cases[i].ret)
			continue;
		KUNIT_EXPECT_EQ_MSG(test, usec, cases[i].usec, "input '%s'", cases[i].in);
		KUNIT_EXPECT_EQ_MSG(test, pid, cases[i].pid, "input '%s'", cases[i].in);
		KUNIT_EXPECT_EQ_MSG(test, cgrp_id, cases[i].cgrp_id, "input '%s'", cases[i].in);
	}
}

static void cfs_borrowing_test_effective_quota(struct kunit *test)
{
	s64 half = to_ratio(100000, 50000);	/* 50 ms per 100 ms, as normalize_cfs_quota() */

	KUNIT_EXPECT_EQ(test, cfs_borrowing_effective_quota(MS(30), MS(100), RUNTIME_INF), MS(30));
	KUNIT_EXPECT_EQ(test, cfs_borrowing_effective_quota(RUNTIME_INF, MS(100), half),
			RUNTIME_INF);
	/* A child's quota above its parent's (cgroup v2) is not what it gets. */
	KUNIT_EXPECT_EQ(test, cfs_borrowing_effective_quota(MS(200), MS(100), half), MS(50));
	KUNIT_EXPECT_EQ(test, cfs_borrowing_effective_quota(MS(30), MS(100), half), MS(30));
	/* The same ratio at another period. */
	KUNIT_EXPECT_EQ(test, cfs_borrowing_effective_quota(MS(900), MS(1000), half), MS(500));
}

static void cfs_borrowing_test_limit(struct kunit *test)
{
	/* One second's worth of the effective quota... */
	KUNIT_EXPECT_EQ(test, cfs_borrowing_limit(MS(50), MS(100)), MS(500));
	KUNIT_EXPECT_EQ(test, cfs_borrowing_limit(MS(1), MS(1)), MS(1000));
	KUNIT_EXPECT_EQ(test, cfs_borrowing_limit(MS(200), MS(100)), MS(2000));
	/* ...and at least one period's, for periods that do not divide it. */
	KUNIT_EXPECT_EQ(test, cfs_borrowing_limit(MS(100), MS(1000)), MS(100));
	KUNIT_EXPECT_EQ(test, cfs_borrowing_limit(MS(300), MS(700)), MS(300));
	/* No quota, nothing to pay from. */
	KUNIT_EXPECT_EQ(test, cfs_borrowing_limit(RUNTIME_INF, MS(100)), 0);
	/* Saturates instead of wrapping. */
	KUNIT_EXPECT_EQ(test, cfs_borrowing_limit(U64_MAX / 2, MS(1)), U64_MAX);
}

static void cfs_borrowing_test_charge(struct kunit *test)
{
	struct cfs_borrowing b = { };

	KUNIT_EXPECT_EQ(test, cfs_borrowing_charge(&b, MS(100), MS(500)), MS(100));
	KUNIT_EXPECT_EQ(test, b.outstanding, MS(100));
	/* Up to the bound exactly, then the excess is dropped. */
	KUNIT_EXPECT_EQ(test, cfs_borrowing_charge(&b, MS(400), MS(500)), MS(400));
	KUNIT_EXPECT_EQ(test, cfs_borrowing_charge(&b, MS(70), MS(500)), 0);
	KUNIT_EXPECT_EQ(test, b.outstanding, MS(500));
	KUNIT_EXPECT_EQ(test, b.borrowed, MS(570));
	KUNIT_EXPECT_EQ(test, b.dropped, MS(70));
	expect_adds_up(test, &b);

	/* No quota: a zero bound takes nothing, all is counted as dropped. */
	b = (struct cfs_borrowing){ };
	KUNIT_EXPECT_EQ(test, cfs_borrowing_charge(&b, MS(5), 0), 0);
	KUNIT_EXPECT_EQ(test, b.dropped, MS(5));
	expect_adds_up(test, &b);

	/* Huge charges saturate the totals instead of wrapping them. */
	KUNIT_EXPECT_EQ(test, cfs_borrowing_charge(&b, U64_MAX, MS(500)), MS(500));
	KUNIT_EXPECT_EQ(test, cfs_borrowing_charge(&b, U64_MAX, MS(500)), 0);
	KUNIT_EXPECT_EQ(test, b.borrowed, U64_MAX);
	KUNIT_EXPECT_EQ(test, b.dropped, U64_MAX);
	KUNIT_EXPECT_EQ(test, b.outstanding, MS(500));

	/* Totals beyond 2^32 ns, which a size_t-wide add would truncate. */
	b = (struct cfs_borrowing){ };
	KUNIT_EXPECT_EQ(test, cfs_borrowing_charge(&b, MS(3000), MS(500)), MS(500));
	KUNIT_EXPECT_EQ(test, cfs_borrowing_charge(&b, MS(3000), MS(500)), 0);
	KUNIT_EXPECT_EQ(test, b.borrowed, MS(6000));
	KUNIT_EXPECT_EQ(test, b.dropped, MS(5500));
	expect_adds_up(test, &b);
}

static void cfs_borrowing_test_clamp(struct kunit *test)
{
	struct cfs_borrowing b = { };

	cfs_borrowing_charge(&b, MS(300), MS(500));
	KUNIT_EXPECT_EQ(test, cfs_borrowing_clamp(&b, MS(500)), 0);
	KUNIT_EXPECT_EQ(test, cfs_borrowing_clamp(&b, MS(300)), 0);
	KUNIT_EXPECT_EQ(test, cfs_borrowing_clamp(&b, MS(90)), MS(210));
	KUNIT_EXPECT_EQ(test, b.outstanding, MS(90));
	/* Removing the quota drops what the level owes. */
	KUNIT_EXPECT_EQ(test, cfs_borrowing_clamp(&b, 0), MS(90));
	KUNIT_EXPECT_EQ(test, b.outstanding, 0);
	KUNIT_EXPECT_EQ(test, b.dropped, MS(300));
	expect_adds_up(test, &b);
}

/*
 * A bandwidth pool as tg_set_cfs_bandwidth() leaves it, with @left of the
 * runtime unused at the end of the first period.
 */
static void init_pool(struct cfs_bandwidth *cfs_b, u64 quota, u64 period,
		      u64 burst, u64 left)
{
	memset(cfs_b, 0, sizeof(*cfs_b));
	raw_spin_lock_init(&cfs_b->lock);
	seqcount_raw_spinlock_init(&cfs_b->borrowing_seq, &cfs_b->lock);
	cfs_b->quota = quota;
	cfs_b->period = ns_to_ktime(period);
	cfs_b->burst = burst;
	cfs_b->hierarchical_quota = RUNTIME_INF;
	__refill_cfs_bandwidth_runtime(cfs_b);
	cfs_b->runtime = left;
}

static void owe(struct cfs_bandwidth *cfs_b, u64 amount)
{
	cfs_borrowing_charge(&cfs_b->borrowing, amount,
			     cfs_borrowing_limit(cfs_borrowing_effective(cfs_b),
						 ktime_to_ns(cfs_b->period)));
}

/* A period's refill, as the period timer makes it: under the lock. */
static void refill(struct cfs_bandwidth *cfs_b, u64 floor)
{
	raw_spin_lock_irq(&cfs_b->lock);
	__refill_cfs_bandwidth_period(cfs_b, floor);
	raw_spin_unlock_irq(&cfs_b->lock);
}

static void cfs_borrowing_test_refill_no_borrowing(struct kunit *test)
{
	struct cfs_bandwidth cfs_b;

	init_pool(&cfs_b, MS(50), MS(100), 0, MS(10));
	refill(&cfs_b, MS(5));
	KUNIT_EXPECT_EQ(test, cfs_b.runtime, MS(50));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.nr_periods, 0);
}

static void cfs_borrowing_test_refill_carry_over(struct kunit *test)
{
	struct cfs_bandwidth cfs_b;

	/* A hog uses all of every period; a slice stays, 45 ms pay. */
	init_pool(&cfs_b, MS(50), MS(100), 0, 0);
	owe(&cfs_b, MS(120));
	refill(&cfs_b, MS(5));
	KUNIT_EXPECT_EQ(test, cfs_b.runtime, MS(5));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.outstanding, MS(75));
	cfs_b.runtime = 0;
	refill(&cfs_b, MS(5));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.outstanding, MS(30));
	cfs_b.runtime = 0;
	refill(&cfs_b, MS(5));
	KUNIT_EXPECT_EQ(test, cfs_b.runtime, MS(20));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.outstanding, 0);
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.deducted, MS(120));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.nr_periods, 3);
	expect_adds_up(test, &cfs_b.borrowing);
}

static void cfs_borrowing_test_refill_unused_pays_first(struct kunit *test)
{
	struct cfs_bandwidth cfs_b;

	/*
	 * An idle group's own use of 30 ms would have come out of the
	 * runtime it left: the new period is whole.
	 */
	init_pool(&cfs_b, MS(50), MS(100), 0, MS(50));
	owe(&cfs_b, MS(30));
	refill(&cfs_b, MS(5));
	KUNIT_EXPECT_EQ(test, cfs_b.runtime, MS(50));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.deducted, MS(30));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.nr_periods, 1);
	KUNIT_EXPECT_EQ(test, cfs_b.nr_burst, 0);
}

static void cfs_borrowing_test_refill_burst(struct kunit *test)
{
	struct cfs_bandwidth cfs_b;

	/* 70 ms banked with a 20 ms burst: they pay first, then the period. */
	init_pool(&cfs_b, MS(50), MS(100), MS(20), MS(70));
	cfs_b.runtime_snap = MS(70);
	owe(&cfs_b, MS(100));
	refill(&cfs_b, MS(5));
	KUNIT_EXPECT_EQ(test, cfs_b.runtime, MS(20));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.outstanding, 0);
	/* Paying is not the group's burst. */
	KUNIT_EXPECT_EQ(test, cfs_b.nr_burst, 0);
	KUNIT_EXPECT_EQ(test, cfs_b.burst_time, 0);
	KUNIT_EXPECT_EQ(test, cfs_b.runtime_snap, MS(20));
}

static void cfs_borrowing_test_refill_effective_quota(struct kunit *test)
{
	struct cfs_bandwidth cfs_b;

	/* 200 ms of quota under a parent's 50 ms: pay from those 50. */
	init_pool(&cfs_b, MS(200), MS(100), 0, 0);
	cfs_b.hierarchical_quota = to_ratio(100000, 50000);
	owe(&cfs_b, MS(100));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.outstanding, MS(100));
	refill(&cfs_b, MS(5));
	KUNIT_EXPECT_EQ(test, cfs_b.runtime, MS(5));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.outstanding, MS(55));

	/* The bound is the effective quota's too. */
	owe(&cfs_b, MS(1000));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.outstanding, MS(500));
}

static void cfs_borrowing_test_refill_floor(struct kunit *test)
{
	struct cfs_bandwidth cfs_b;

	/* Four busy CPUs keep a 5 ms slice each. */
	init_pool(&cfs_b, MS(50), MS(100), 0, 0);
	owe(&cfs_b, MS(500));
	refill(&cfs_b, MS(20));
	KUNIT_EXPECT_EQ(test, cfs_b.runtime, MS(20));
	/* Twenty: half the runtime still pays. */
	cfs_b.runtime = 0;
	refill(&cfs_b, MS(100));
	KUNIT_EXPECT_EQ(test, cfs_b.runtime, MS(25));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.deducted, MS(55));
}

/*
 * A group as cpu_cgroup_css_alloc() makes one, never onlined: no task can
 * join it, and its period timer is the real one.
 */
static struct task_group *new_tg(struct kunit *test)
{
	struct task_group *tg = sched_create_group(&root_task_group);

	KUNIT_ASSERT_FALSE(test, IS_ERR(tg));
	return tg;
}

/* A write to a cpu controller file of cgroup v1, through its handler. */
static int write_v1(struct task_group *tg, const char *name, s64 val)
{
	struct cftype *cft;

	for (cft = cpu_cgrp_subsys.legacy_cftypes; cft->name[0]; cft++) {
		if (strcmp(cft->name, name))
			continue;
		if (cft->write_s64)
			return cft->write_s64(&tg->css, cft, val);
		return cft->write_u64(&tg->css, cft, val);
	}
	return -ENOENT;
}

static u64 timer_periods(struct cfs_bandwidth *cfs_b)
{
	u64 periods;

	raw_spin_lock_irq(&cfs_b->lock);
	periods = cfs_b->nr_periods;
	raw_spin_unlock_irq(&cfs_b->lock);
	return periods;
}

/*
 * Writes of the quota refill the runtime (tg_set_cfs_bandwidth()) without
 * paying; a lower quota clamps the debt to its bound, removing it drops
 * the debt. The period timer pays too: a try in which a period ended (a
 * 1 s period, for a handful of writes) is made again.
 */
static void cfs_borrowing_test_config_writes(struct kunit *test)
{
	struct task_group *tg = new_tg(test);
	struct cfs_bandwidth *cfs_b = &tg->cfs_bandwidth;
	struct cfs_borrowing b;
	int try, i;
	u64 periods;

	KUNIT_ASSERT_EQ(test, write_v1(tg, "cfs_period_us", 1000000), 0);
	for (try = 0; try < 3; try++) {
		KUNIT_ASSERT_EQ(test, write_v1(tg, "cfs_quota_us", -1), 0);
		KUNIT_ASSERT_EQ(test, write_v1(tg, "cfs_quota_us", 50000), 0);
		periods = timer_periods(cfs_b);
		scoped_guard (raw_spinlock_irq, &cfs_b->lock) {
			cfs_b->borrowing = (struct cfs_borrowing){ };
			owe(cfs_b, MS(40));
		}
		for (i = 0; i < 10; i++)
			KUNIT_ASSERT_EQ(test, write_v1(tg, "cfs_quota_us", 50000), 0);
		cfs_borrowing_read(cfs_b, &b);
		KUNIT_ASSERT_EQ(test, write_v1(tg, "cfs_quota_us", 10000), 0);
		if (timer_periods(cfs_b) == periods)
			break;
	}
	KUNIT_ASSERT_LT_MSG(test, try, 3, "a period ended in every try");
	KUNIT_EXPECT_EQ(test, b.outstanding, MS(40));
	KUNIT_EXPECT_EQ(test, b.deducted, 0);
	KUNIT_EXPECT_EQ(test, b.nr_periods, 0);

	/* 10 ms a second: the bound is 10 ms, the rest is dropped. */
	cfs_borrowing_read(cfs_b, &b);
	KUNIT_EXPECT_EQ(test, b.outstanding, MS(10));
	KUNIT_EXPECT_EQ(test, b.dropped, MS(30));

	/* Without a quota there is nothing to pay from. */
	KUNIT_ASSERT_EQ(test, write_v1(tg, "cfs_quota_us", -1), 0);
	cfs_borrowing_read(cfs_b, &b);
	KUNIT_EXPECT_EQ(test, b.outstanding, 0);
	KUNIT_EXPECT_EQ(test, b.dropped, MS(40));
	expect_adds_up(test, &b);

	sched_destroy_group(tg);
}

/* The floor of a group owing @debt (none: 0), read as its refill reads it. */
static u64 floor_owing(struct cfs_bandwidth *cfs_b, u64 debt)
{
	u64 floor;

	raw_spin_lock_irq(&cfs_b->lock);
	cfs_b->borrowing = (struct cfs_borrowing){ };
	owe(cfs_b, debt);
	floor = cfs_borrowing_floor(cfs_b);
	raw_spin_unlock_irq(&cfs_b->lock);
	return floor;
}

/*
 * A group that owes keeps a slice and a tick (one unit) for each CPU on which
 * it has runnable tasks or is throttled (its tasks in a child), one unit if
 * it has none, and nothing without a debt. The group is never onlined, so no
 * task joins its runqueues: the test sets their counts and resets them.
 */
static void cfs_borrowing_test_floor(struct kunit *test)
{
	struct task_group *tg = new_tg(test);
	struct cfs_bandwidth *cfs_b = &tg->cfs_bandwidth;
	unsigned int nr = 0;
	int cpu, first;
	u64 unit;

	KUNIT_ASSERT_EQ(test, write_v1(tg, "cfs_period_us", 1000000), 0);
	KUNIT_ASSERT_EQ(test, write_v1(tg, "cfs_quota_us", 500000), 0);
	KUNIT_EXPECT_EQ(test, floor_owing(cfs_b, 0), 0);
	unit = floor_owing(cfs_b, MS(100));
	KUNIT_EXPECT_GT(test, unit, TICK_NSEC);

	cpus_read_lock();
	first = cpumask_first(cpu_online_mask);
	for_each_online_cpu(cpu) {
		tg_cfs_rq(tg, cpu)->h_nr_runnable = 1;
		nr++;
	}
	KUNIT_EXPECT_EQ(test, floor_owing(cfs_b, MS(100)), nr * unit);
	KUNIT_EXPECT_EQ(test, floor_owing(cfs_b, 0), 0);

	tg_cfs_rq(tg, first)->h_nr_runnable = 0;
	tg_cfs_rq(tg, first)->throttled = 1;
	KUNIT_EXPECT_EQ(test, floor_owing(cfs_b, MS(100)), nr * unit);
	tg_cfs_rq(tg, first)->throttled = 0;
	KUNIT_EXPECT_EQ(test, floor_owing(cfs_b, MS(100)), max(nr - 1, 1U) * unit);

	for_each_online_cpu(cpu)
		tg_cfs_rq(tg, cpu)->h_nr_runnable = 0;
	cpus_read_unlock();
	sched_destroy_group(tg);
}

static void cfs_borrowing_test_bound_paid_off(struct kunit *test)
{
	struct cfs_bandwidth cfs_b;
	int periods = 0;

	/* The largest debt is paid within 2 s, never taking a whole period. */
	init_pool(&cfs_b, MS(50), MS(100), 0, 0);
	owe(&cfs_b, U64_MAX);
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.outstanding, MS(500));
	while (cfs_b.borrowing.outstanding && periods < 100) {
		cfs_b.runtime = 0;
		refill(&cfs_b, MS(5));
		KUNIT_EXPECT_GE(test, cfs_b.runtime, MS(5));
		periods++;
	}
	KUNIT_EXPECT_EQ(test, periods, 12);
	/* Twice the bound of a second's worth of quota. */
	KUNIT_EXPECT_LE(test, periods * MS(100), 2 * NSEC_PER_SEC);
	expect_adds_up(test, &cfs_b.borrowing);
}

static void cfs_borrowing_test_bound_follows_ancestors(struct kunit *test)
{
	struct cfs_bandwidth cfs_b;

	/* A parent's quota lowered to 25 %: the excess goes at the refill. */
	init_pool(&cfs_b, MS(50), MS(100), 0, 0);
	owe(&cfs_b, MS(500));
	cfs_b.hierarchical_quota = to_ratio(100000, 25000);
	refill(&cfs_b, MS(5));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.dropped, MS(250));
	KUNIT_EXPECT_EQ(test, cfs_b.borrowing.deducted, MS(20));
	expect_adds_up(test, &cfs_b.borrowing);
}

/*
 * cpu.stat and cpu.cfs.borrowing_us are world-readable: their readers get a
 * snapshot that adds up without the lock that every CPU of a busy group
 * takes for each slice (read here with the lock held, which a reader taking
 * it would never return from).
 */
static void cfs_borrowing_test_read_without_lock(struct kunit *test)
{
	struct cfs_bandwidth cfs_b;
	struct cfs_borrowing b;

	init_pool(&cfs_b, MS(50), MS(100), 0, 0);
	owe(&cfs_b, MS(120));
	refill(&cfs_b, MS(5));
	scoped_guard (raw_spinlock_irq, &cfs_b.lock)
		cfs_borrowing_read(&cfs_b, &b);
	KUNIT_EXPECT_EQ(test, b.outstanding, MS(75));
	KUNIT_EXPECT_EQ(test, b.deducted, MS(45));
	KUNIT_EXPECT_EQ(test, b.nr_periods, 1);
	expect_adds_up(test, &b);
}

static enum hrtimer_restart fake_period_timer(struct hrtimer *timer)
{
	return HRTIMER_NORESTART;
}

/* A task group with only what the walk uses; @quota in ms, 0 for none. */
static struct task_group *fake_tg(struct kunit *test, struct task_group *parent,
				  u64 quota)
{
	struct task_group *tg = kunit_kzalloc(test, sizeof(*tg), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, tg);
	tg->parent = parent;
	init_cfs_bandwidth(&tg->cfs_bandwidth, NULL);
	tg->cfs_bandwidth.period_timer.function = fake_period_timer;
	tg->cfs_bandwidth.period = ns_to_ktime(MS(1000));
	if (quota)
		tg->cfs_bandwidth.quota = MS(quota);
	return tg;
}

static void cfs_borrowing_test_walk(struct kunit *test)
{
	/* root - a(100) - b(none) - c(50), a - w, root - d(none) */
	struct task_group *root = &root_task_group;
	struct task_group *a = fake_tg(test, root, 100);
	struct task_group *b = fake_tg(test, a, 0);
	struct task_group *c = fake_tg(test, b, 50);
	struct task_group *w = fake_tg(test, a, 0);
	struct task_group *d = fake_tg(test, root, 0);
	struct task_group *all[] = { a, b, c, w, d };
	int i;

	KUNIT_EXPECT_PTR_EQ(test, tg_common_ancestor(c, w), a);
	KUNIT_EXPECT_PTR_EQ(test, tg_common_ancestor(w, c), a);
	KUNIT_EXPECT_PTR_EQ(test, tg_common_ancestor(c, root), root);
	KUNIT_EXPECT_PTR_EQ(test, tg_common_ancestor(c, c), c);
	KUNIT_EXPECT_PTR_EQ(test, tg_common_ancestor(c, d), root);

	/* A worker under a: a's runtime already paid, only c owes. */
	tg_charge_cfs_borrowing(c, w, MS(10));
	KUNIT_EXPECT_EQ(test, c->cfs_bandwidth.borrowing.outstanding, MS(10));
	KUNIT_EXPECT_EQ(test, a->cfs_bandwidth.borrowing.borrowed, 0);
	KUNIT_EXPECT_TRUE(test, c->cfs_bandwidth.period_active);

	/* A worker in the root group: c and a owe, b has no quota. */
	tg_charge_cfs_borrowing(c, root, MS(20));
	KUNIT_EXPECT_EQ(test, c->cfs_bandwidth.borrowing.outstanding, MS(30));
	KUNIT_EXPECT_EQ(test, a->cfs_bandwidth.borrowing.outstanding, MS(20));
	KUNIT_EXPECT_EQ(test, b->cfs_bandwidth.borrowing.borrowed, 0);

	/* A group without a quota charges its limited ancestors. */
	tg_charge_cfs_borrowing(b, root, MS(7));
	KUNIT_EXPECT_EQ(test, a->cfs_bandwidth.borrowing.outstanding, MS(27));
	KUNIT_EXPECT_EQ(test, b->cfs_bandwidth.borrowing.borrowed, 0);

	/* No quota on the path, or the worker inside: dropped at the client. */
	tg_charge_cfs_borrowing(d, root, MS(3));
	KUNIT_EXPECT_EQ(test, d->cfs_bandwidth.borrowing.dropped, MS(3));
	tg_charge_cfs_borrowing(b, w, MS(4));
	KUNIT_EXPECT_EQ(test, b->cfs_bandwidth.borrowing.dropped, MS(4));
	tg_charge_cfs_borrowing(c, c, MS(5));
	KUNIT_EXPECT_EQ(test, c->cfs_bandwidth.borrowing.dropped, MS(5));
	KUNIT_EXPECT_EQ(test, c->cfs_bandwidth.borrowing.outstanding, MS(30));

	for (i = 0; i < ARRAY_SIZE(all); i++) {
		expect_adds_up(test, &all[i]->cfs_bandwidth.borrowing);
		hrtimer_cancel(&all[i]->cfs_bandwidth.period_timer);
	}
}

/*
 * A limited child's bound drops most of a charge: its ancestors owe only
 * what it took, which is all its own use could have taken from them.
 */
static void cfs_borrowing_test_walk_carries_what_was_taken(struct kunit *test)
{
	/* root - p(2000) - q(none) - a(10), root - r(100) - s(200) */
	struct task_group *root = &root_task_group;
	struct task_group *p = fake_tg(test, root, 2000);
	struct task_group *q = fake_tg(test, p, 0);
	struct task_group *a = fake_tg(test, q, 10);
	struct task_group *r = fake_tg(test, root, 100);
	struct task_group *s = fake_tg(test, r, 200);
	struct task_group *all[] = { p, q, a, r, s };
	int i;

	/* a's bound is 10 ms (a second's worth at a 1 s period). */
	tg_charge_cfs_borrowing(a, root, MS(100));
	KUNIT_EXPECT_EQ(test, a->cfs_bandwidth.borrowing.outstanding, MS(10));
	KUNIT_EXPECT_EQ(test, a->cfs_bandwidth.borrowing.dropped, MS(90));
	KUNIT_EXPECT_EQ(test, p->cfs_bandwidth.borrowing.borrowed, MS(10));
	KUNIT_EXPECT_EQ(test, p->cfs_bandwidth.borrowing.outstanding, MS(10));

	/* a at its bound takes nothing, so p owes nothing more. */
	tg_charge_cfs_borrowing(a, root, MS(50));
	KUNIT_EXPECT_EQ(test, a->cfs_bandwidth.borrowing.dropped, MS(140));
	KUNIT_EXPECT_EQ(test, p->cfs_bandwidth.borrowing.borrowed, MS(10));
	KUNIT_EXPECT_EQ(test, q->cfs_bandwidth.borrowing.borrowed, 0);

	/* The lowest bound on the path counts, wherever it is. */
	tg_charge_cfs_borrowing(s, root, MS(5000));
	KUNIT_EXPECT_EQ(test, s->cfs_bandwidth.borrowing.outstanding, MS(200));
	KUNIT_EXPECT_EQ(test, r->cfs_bandwidth.borrowing.outstanding, MS(100));
	KUNIT_EXPECT_EQ(test, r->cfs_bandwidth.borrowing.dropped, MS(100));

	for (i = 0; i < ARRAY_SIZE(all); i++) {
		expect_adds_up(test, &all[i]->cfs_bandwidth.borrowing);
		hrtimer_cancel(&all[i]->cfs_bandwidth.period_timer);
	}
}

static struct kunit_case cfs_borrowing_test_cases[] = {
	KUNIT_CASE(cfs_borrowing_test_parse),
	KUNIT_CASE(cfs_borrowing_test_effective_quota),
	KUNIT_CASE(cfs_borrowing_test_limit),
	KUNIT_CASE(cfs_borrowing_test_charge),
	KUNIT_CASE(cfs_borrowing_test_clamp),
	KUNIT_CASE(cfs_borrowing_test_refill_no_borrowing),
	KUNIT_CASE(cfs_borrowing_test_refill_carry_over),
	KUNIT_CASE(cfs_borrowing_test_refill_unused_pays_first),
	KUNIT_CASE(cfs_borrowing_test_refill_burst),
	KUNIT_CASE(cfs_borrowing_test_refill_effective_quota),
	KUNIT_CASE(cfs_borrowing_test_refill_floor),
	KUNIT_CASE(cfs_borrowing_test_config_writes),
	KUNIT_CASE(cfs_borrowing_test_floor),
	KUNIT_CASE(cfs_borrowing_test_bound_paid_off),
	KUNIT_CASE(cfs_borrowing_test_bound_follows_ancestors),
	KUNIT_CASE(cfs_borrowing_test_read_without_lock),
	KUNIT_CASE(cfs_borrowing_test_walk),
	KUNIT_CASE(cfs_borrowing_test_walk_carries_what_was_taken),
	{}
};

static struct kunit_suite cfs_borrowing_test_suite = {
	.name = "sched_cfs_borrowing",
	.test_cases = cfs_borrowing_test_cases,
};

kunit_test_suite(cfs_borrowing_test_suite);
