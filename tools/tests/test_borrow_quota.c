// SPDX-License-Identifier: GPL-2.0
/*
 * The arithmetic of borrowd's quota mode (tools/borrow_quota.c): what a
 * level owes, what a period pays, how much a quota is lowered by and when
 * a lowering is written. Pure functions: runs anywhere, KTAP on stdout.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../borrow_quota.h"

static int nr_tests, nr_failed, case_failed;

/* borrowd's log, as a KTAP diagnostic. */
void msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("# ");
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
}

#define EXPECT(cond) do {						\
	if (!(cond)) {							\
		printf("# %s:%d: expected %s\n", __func__, __LINE__, #cond); \
		case_failed = 1;					\
	}								\
} while (0)

#define EXPECT_EQ(a, b) do {						\
	long long _a = (a), _b = (b);					\
	if (_a != _b) {							\
		printf("# %s:%d: %s == %lld, expected %lld\n", __func__,	\
		       __LINE__, #a, _a, _b);				\
		case_failed = 1;					\
	}								\
} while (0)

static void run(const char *name, void (*fn)(void))
{
	case_failed = 0;
	fn();
	nr_tests++;
	nr_failed += case_failed;
	if (case_failed)
		printf("not ok %d %s\n", nr_tests, name);
	else
		printf("ok %d %s\n", nr_tests, name);
}

/* A group with a 50 ms quota every 100 ms. */
static struct bq_acct acct(long long debt, long long lowered)
{
	return (struct bq_acct){ .quota_us = 50000, .period_us = 100000,
				 .debt_us = debt, .lowered_us = lowered };
}

static void bound_is_a_second_of_quota(void)
{
	struct bq_acct a = acct(0, 0);

	EXPECT_EQ(bq_bound(&a), 500000);
	a.period_us = 300000;
	a.quota_us = 100000;
	EXPECT_EQ(bq_bound(&a), 333333);
	/* Periods over a second: one quota. */
	a.period_us = 2000000;
	EXPECT_EQ(bq_bound(&a), 100000);
	a.quota_us = -1;
	EXPECT_EQ(bq_bound(&a), 0);
}

static void take_drops_beyond_the_bound(void)
{
	struct bq_acct a = acct(450000, 0);

	EXPECT_EQ(bq_take(&a, 30000), 30000);
	EXPECT_EQ(bq_take(&a, 30000), 20000);
	EXPECT_EQ(a.debt_us, 500000);
	EXPECT_EQ(a.borrowed_us, 50000);
	EXPECT_EQ(a.dropped_us, 10000);
	EXPECT_EQ(bq_take(&a, 1), 0);
	EXPECT_EQ(bq_take(&a, -5), 0);
	EXPECT_EQ(a.borrowed_us + a.dropped_us, 60001);
}

/* A pod (parent) owes no more than its limited container took. */
static void parent_owes_what_the_child_took(void)
{
	struct bq_acct child = acct(490000, 0), pod = acct(0, 0);
	long long took;

	pod.quota_us = 200000;
	took = bq_take(&child, 100000);
	EXPECT_EQ(took, 10000);
	EXPECT_EQ(bq_take(&pod, took), 10000);
	EXPECT_EQ(pod.debt_us, 10000);
}

static void unused_allowance_pays_first(void)
{
	struct bq_acct a = acct(30000, 0);

	/* Used 40 of 50 ms: the 10 left pay. */
	EXPECT_EQ(bq_pay(&a, 100000, 40000), 10000);
	EXPECT_EQ(a.debt_us, 20000);
	/* Lowered by 20: the allowance was 30, all used: the 20 pay. */
	a = acct(30000, 20000);
	EXPECT_EQ(bq_pay(&a, 100000, 30000), 20000);
	/* Idle, lowered by 20: 30 unused and 20 lowered, up to the debt. */
	a = acct(30000, 20000);
	EXPECT_EQ(bq_pay(&a, 100000, 0), 30000);
	EXPECT_EQ(a.debt_us, 0);
	EXPECT_EQ(a.paid_us, 30000);
	/* Half a period lowered by 20 pays 10; usage unknown: no unused. */
	a = acct(30000, 20000);
	EXPECT_EQ(bq_pay(&a, 50000, -1), 10000);
	/* Nothing owed: nothing paid. */
	a = acct(0, 20000);
	EXPECT_EQ(bq_pay(&a, 100000, 0), 0);
	EXPECT_EQ(a.paid_us, 0);
}

/* A write's refill that let the group run beyond its quota is owed. */
static void use_beyond_the_quota_is_owed(void)
{
	struct bq_acct a = acct(10000, 20000);

	/* Allowed 30 ms, used 45: 15 more owed, then the lowering pays. */
	EXPECT_EQ(bq_regain(&a, 100000, 45000), 15000);
	EXPECT_EQ(a.debt_us, 25000);
	EXPECT_EQ(a.regained_us, 15000);
	EXPECT_EQ(bq_pay(&a, 100000, 45000), 20000);
	/* Within the allowance: nothing. */
	a = acct(10000, 20000);
	EXPECT_EQ(bq_regain(&a, 100000, 30000), 0);
	EXPECT_EQ(bq_regain(&a, 100000, -1), 0);
	/* Up to the bound. */
	a = acct(495000, 20000);
	EXPECT_EQ(bq_regain(&a, 100000, 45000), 5000);
	EXPECT_EQ(a.debt_us, 500000);
}

static void floor_keeps_a_slice_and_tick_per_cpu(void)
{
	EXPECT_EQ(bq_floor(50000, 1, 5000, 4000), 9000);
	EXPECT_EQ(bq_floor(50000, 2, 5000, 4000), 18000);
	/* Or half the quota, if less. */
	EXPECT_EQ(bq_floor(50000, 4, 5000, 4000), 25000);
	EXPECT_EQ(bq_floor(50000, 0, 5000, 4000), 9000);
}

static void target_pays_over_two_periods(void)
{
	struct bq_acct a = acct(20000, 0);

	EXPECT_EQ(bq_target(&a, 9000, BQ_MIN_QUOTA_US), 10000);
	/* Bounded by the floor... */
	a.debt_us = 400000;
	EXPECT_EQ(bq_target(&a, 9000, BQ_MIN_QUOTA_US), 41000);
	/* ...and by the least quota (v1: a child's quota). */
	EXPECT_EQ(bq_target(&a, 9000, 30000), 20000);
	a.debt_us = 0;
	EXPECT_EQ(bq_target(&a, 9000, BQ_MIN_QUOTA_US), 0);
}

static void writes_only_when_needed(void)
{
	struct bq_acct a = acct(20000, 10000);

	/* A lowering in effect that the debt covers stays. */
	EXPECT(!bq_must_write(&a, 10000, 100000, 2500));
	EXPECT(!bq_must_write(&a, 8000, 100000, 2500));
	EXPECT(!bq_must_write(&a, 12000, 100000, 2500));
	/* Taking more: once it is worth a write. */
	EXPECT(bq_must_write(&a, 12500, 100000, 2500));
	/* The next tick would take more than is owed. */
	a.debt_us = 9000;
	EXPECT(bq_must_write(&a, 4500, 100000, 2500));
	/* Paid: back to the configured quota. */
	a.debt_us = 0;
	EXPECT(bq_must_write(&a, 0, 100000, 2500));
	a.lowered_us = 0;
	EXPECT(!bq_must_write(&a, 0, 100000, 2500));
	/* A debt too small to lower for waits. */
	a.debt_us = 4000;
	EXPECT(!bq_must_write(&a, 2000, 100000, 2500));
}

/*
 * A worker spends R per period for a client that uses its whole allowance:
 * the agent's loop, one tick a period. The client pays what it borrowed,
 * never more, and the quota is written a few times, not every period.
 */
static void steady_borrowing_is_paid_with_few_writes(void)
{
	long long r = 12000, writes = 0, most_lowered = 0;
	struct bq_acct a = acct(0, 0);

	for (int tick = 0; tick < 100; tick++) {
		long long target;

		/* Charges of this period; every tick's charge a little off. */
		bq_take(&a, r + (tick % 3 - 1) * 1000);
		bq_pay(&a, 100000, a.quota_us - a.lowered_us);
		target = bq_target(&a, bq_floor(a.quota_us, 1, 5000, 4000),
				   BQ_MIN_QUOTA_US);
		if (bq_must_write(&a, target, 100000, 2500)) {
			a.lowered_us = target;
			writes++;
		}
		if (a.lowered_us > most_lowered)
			most_lowered = a.lowered_us;
		EXPECT(a.paid_us <= a.borrowed_us);
	}
	printf("# steady: borrowed %llu, paid %llu, owes %lld, %lld writes, "
	       "lowered by at most %lld\n", a.borrowed_us, a.paid_us, a.debt_us,
	       writes, most_lowered);
	EXPECT_EQ(a.borrowed_us, 100 * r - 1000);
	/* What is still owed is a period's worth or two. */
	EXPECT(a.debt_us <= 2 * r + 2000);
	EXPECT(writes <= 10);
	/* After the charges stop, the debt is paid and the quota restored. */
	for (int tick = 0; tick < 10; tick++) {
		long long target;

		bq_pay(&a, 100000, a.quota_us - a.lowered_us);
		target = bq_target(&a, 9000, BQ_MIN_QUOTA_US);
		if (bq_must_write(&a, target, 100000, 2500))
			a.lowered_us = target;
	}
	EXPECT(a.debt_us < 2 * 2500);
	EXPECT(a.paid_us <= a.borrowed_us);
}

/*
 * A look at a group that cannot be lowered pays only what it left unused:
 * the usage source's count (its tasks' runs that ended) tells when there
 * can be a period's quota of that, and only then is a look needed.
 */
static void busy_group_spares_its_looks(void)
{
	struct bq_acct a = { .quota_us = 1000, .period_us = 100000, .debt_us = 50000 };

	/* A second at its whole quota, or short of it by less than a period's. */
	EXPECT(bq_may_spare(&a, 1000000, 10000));
	EXPECT(bq_may_spare(&a, 1000000, 9001));
	/* A period's quota or more unused: a look may pay it. */
	EXPECT(!bq_may_spare(&a, 1000000, 9000));
	EXPECT(!bq_may_spare(&a, 1000000, 0));
	/* Nothing counted (no source), or too long since the last look. */
	EXPECT(!bq_may_spare(&a, 1000000, -1));
	EXPECT(!bq_may_spare(&a, BQ_SPARE_MAX_S * 1000000, 1000000));
	/* No quota: nothing to judge by. */
	a.quota_us = -1;
	EXPECT(!bq_may_spare(&a, 100000, 100000));
}

/*
 * Sparing looks defers what a look pays, and the look that comes settles
 * the whole time since the last: what the group left unused in it pays,
 * the same as one look at the end of it.
 */
static void spared_looks_pay_at_the_next(void)
{
	struct bq_acct every = { .quota_us = 1000, .period_us = 100000, .debt_us = 50000 };
	struct bq_acct spared = every;
	long long used[10] = { 1000, 1000, 900, 1000, 1000, 1000, 950, 1000, 1000, 0 };
	long long since = 0, used_since = 0;

	for (int r = 0; r < 10; r++) {
		bq_pay(&every, 100000, used[r]);
		since += 100000;
		used_since += used[r];
		if (bq_may_spare(&spared, since, used_since))
			continue;
		bq_pay(&spared, since, used_since);
		since = 0;
		used_since = 0;
	}
	/* Spared while it left 150 us unused; its idle round pays at once. */
	EXPECT_EQ(spared.paid_us, 1150);
	EXPECT_EQ(every.paid_us, 1150);
}

/*
 * At 250 Hz a group at the least quota runs about 4 ms on a CPU before the
 * tick throttles it, then waits while three periods' refills cover that:
 * it uses its quota, in lumps. The periods it waits in leave nothing
 * unused, and once it has waited its run off a period it idles pays.
 */
static void lumpy_use_leaves_nothing_unused(void)
{
	struct bq_acct a = { .quota_us = 1000, .period_us = 100000,
			     .debt_us = 50000, .lump_us = 8000 };
	long long used[8] = { 4000, 0, 0, 0, 4000, 0, 0, 0 };

	for (int r = 0; r < 8; r++)
		bq_pay(&a, 100000, used[r]);
	EXPECT_EQ(a.paid_us, 0);
	EXPECT_EQ(a.over_us, 0);
	/* Then idle for a period: that pays. */
	EXPECT_EQ(bq_pay(&a, 100000, 0), 1000);
	/* Half the lump in each of two looks: the same. */
	a = (struct bq_acct){ .quota_us = 1000, .period_us = 100000,
			      .debt_us = 50000, .lump_us = 8000 };
	EXPECT_EQ(bq_pay(&a, 200000, 3000), 0);
	EXPECT_EQ(bq_pay(&a, 200000, 1000), 0);
	EXPECT_EQ(a.over_us, 0);
	/* Nothing owed: nothing carried into the next debt. */
	a = (struct bq_acct){ .quota_us = 1000, .period_us = 100000, .lump_us = 8000 };
	bq_pay(&a, 100000, 4000);
	EXPECT_EQ(a.over_us, 0);
}

/*
 * A busy group runs past its quota a little every period (a tick past its
 * runtime on a CPU, at every refill): a minute of that is no more to wait
 * off than one lump. Then it stops: after the lump, what it leaves unused
 * pays.
 */
static void carry_is_at_most_a_lump(void)
{
	struct bq_acct a = { .quota_us = 1000, .period_us = 100000,
			     .debt_us = 10000, .lump_us = 8000 };

	for (int r = 0; r < 600; r++)
		bq_pay(&a, 100000, 1500);
	EXPECT_EQ(a.over_us, 8000);
	EXPECT_EQ(a.paid_us, 0);
	/* Eight idle periods wait the lump off; the next ten pay the debt. */
	for (int r = 0; r < 8; r++)
		bq_pay(&a, 100000, 0);
	EXPECT_EQ(a.paid_us, 0);
	EXPECT_EQ(a.over_us, 0);
	for (int r = 0; r < 10; r++)
		bq_pay(&a, 100000, 0);
	EXPECT_EQ(a.paid_us, 10000);
	EXPECT_EQ(a.debt_us, 0);
	/*
	 * A vCPU the hypervisor stalled between two ticks: one window ran
	 * 20 ms beyond. That lump is carried whole, and no more after it.
	 */
	a = (struct bq_acct){ .quota_us = 1000, .period_us = 100000,
			      .debt_us = 10000, .lump_us = 8000 };
	bq_pay(&a, 100000, 21000);
	EXPECT_EQ(a.over_us, 20000);
	for (int r = 0; r < 600; r++)
		bq_pay(&a, 100000, 1500);
	EXPECT_EQ(a.over_us, 20000);
	for (int r = 0; r < 20; r++)
		bq_pay(&a, 100000, 0);
	EXPECT_EQ(a.paid_us, 0);
	EXPECT_EQ(bq_pay(&a, 100000, 0), 1000);
	/* Paid off: the next debt starts from a tick per CPU again. */
	a.debt_us = 0;
	bq_pay(&a, 100000, 0);
	EXPECT_EQ(a.lump_seen_us, 0);
}

/*
 * A window that began with a write may run a whole refill beyond its
 * allowance: that is owed again, not carried, and it does not raise the
 * lump a later window may carry.
 */
static void written_window_is_owed_not_carried(void)
{
	struct bq_acct a = { .quota_us = 10000, .period_us = 100000,
			     .debt_us = 5000, .lump_us = 8000 };

	/* Allowed 10 ms, used 40: 30 ms owed again, none carried. */
	EXPECT_EQ(bq_settle(&a, 100000, 40000, true), 0);
	EXPECT_EQ(a.regained_us, 30000);
	EXPECT_EQ(a.debt_us, 35000);
	EXPECT_EQ(a.over_us, 0);
	EXPECT_EQ(a.lump_seen_us, 0);
	/*
	 * Then 1 ms beyond in each of 20 windows without a write: a tick
	 * per CPU carried, not the written window's 30 ms.
	 */
	for (int r = 0; r < 20; r++)
		bq_settle(&a, 100000, 11000, false);
	EXPECT_EQ(a.over_us, 8000);
	EXPECT_EQ(a.regained_us, 30000);
}

int main(void)
{
	printf("TAP version 13\n1..14\n");
	run("bound_is_a_second_of_quota", bound_is_a_second_of_quota);
	run("take_drops_beyond_the_bound", take_drops_beyond_the_bound);
	run("parent_owes_what_the_child_took", parent_owes_what_the_child_took);
	run("unused_allowance_pays_first", unused_allowance_pays_first);
	run("use_beyond_the_quota_is_owed", use_beyond_the_quota_is_owed);
	run("floor_keeps_a_slice_and_tick_per_cpu", floor_keeps_a_slice_and_tick_per_cpu);
	run("target_pays_over_two_periods", target_pays_over_two_periods);
	run("writes_only_when_needed", writes_only_when_needed);
	run("steady_borrowing_is_paid_with_few_writes",
	    steady_borrowing_is_paid_with_few_writes);
	run("busy_group_spares_its_looks", busy_group_spares_its_looks);
	run("spared_looks_pay_at_the_next", spared_looks_pay_at_the_next);
	run("lumpy_use_leaves_nothing_unused", lumpy_use_leaves_nothing_unused);
	run("carry_is_at_most_a_lump", carry_is_at_most_a_lump);
	run("written_window_is_owed_not_carried", written_window_is_owed_not_carried);
	printf("# totals: pass:%d fail:%d\n", nr_tests - nr_failed, nr_failed);
	return nr_failed ? 1 : 0;
}
