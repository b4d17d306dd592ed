// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of cpu.cfs.borrowing_us, on whichever of cgroup v1 or v2 holds the
 * cpu controller: the interface, its errors and permissions, and what
 * charges do to a CPU hog under CFS bandwidth control.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "cgroup_util.h"
#include "borrowing_util.h"

#define PERIOD_US	(100 * USEC_PER_MSEC)
#define QUOTA_US	(50 * USEC_PER_MSEC)
/* 10 periods: all but one quota may be outstanding. */
#define BOUND_US	(9 * QUOTA_US)
#define NOBODY		65534
/* The longest period: the first refill comes a second after the quota is set. */
#define SLOW_PERIOD_US	USEC_PER_SEC
/* Periods after which an idle group's period timer has stopped. */
#define TIMER_IDLE_US	(4 * PERIOD_US)

FIXTURE(borrowing) {
	char *parent;
	char *child;
	pid_t hog;
};

FIXTURE_SETUP(borrowing)
{
	char name[64];

	ASSERT_EQ(0, bcg_init()) TH_LOG("no cgroup hierarchy with the cpu controller");
	snprintf(name, sizeof(name), "borrowing_test_%d", getpid());
	self->parent = bcg_create(bcg_root(), name);
	ASSERT_NE(NULL, self->parent);
	self->child = bcg_create(self->parent, "child");
	ASSERT_NE(NULL, self->child);
	self->hog = 0;
}

FIXTURE_TEARDOWN(borrowing)
{
	if (self->hog > 0) {
		kill(self->hog, SIGKILL);
		waitpid(self->hog, NULL, 0);
	}
	bcg_destroy(self->parent);
}

/*
 * Gives @cg a quota per second, the longest period: as setting a quota
 * restarts the period timer, nothing is paid off for a second, and reads
 * of the charges made meanwhile are exact.
 */
static void set_slow_bandwidth(struct __test_metadata *_metadata, const char *cg,
			       long quota_us)
{
	ASSERT_EQ(0, bcg_set_bandwidth(cg, quota_us, SLOW_PERIOD_US));
}

/* Runs @fn in a child process and returns its exit status. */
static int in_child(int (*fn)(const char *cg), const char *cg)
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(fn(cg));
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static int become_nobody(void)
{
	if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
	    setresuid(NOBODY, NOBODY, NOBODY))
		return -1;
	return 0;
}

/* Exit codes of the permission children: which errno the write got. */
static int errno_code(int ret)
{
	return ret == -EPERM ? 1 : ret == -EACCES ? 2 : ret == 0 ? 3 : 4;
}

TEST(absent_on_root)
{
	char path[PATH_MAX];

	ASSERT_EQ(0, bcg_init());
	snprintf(path, sizeof(path), "%s/%s", bcg_root(), BORROWING_FILE);
	ASSERT_EQ(-1, access(path, F_OK));
	ASSERT_EQ(ENOENT, errno);
}

TEST_F(borrowing, present_and_zero)
{
	static const char * const keys[] = {
		"nr_borrow_periods", "borrowed_usec",
		"borrow_deducted_usec", "borrow_dropped_usec",
	};
	int i;

	EXPECT_EQ(0, bcg_borrowing(self->parent));
	EXPECT_EQ(0, bcg_borrowing(self->child));
	for (i = 0; i < ARRAY_SIZE(keys); i++)
		EXPECT_EQ(0, bcg_stat(self->child, keys[i])) TH_LOG("cpu.stat key #%d", i);
}

TEST_F(borrowing, round_trip)
{
	set_slow_bandwidth(_metadata, self->child, QUOTA_US);

	ASSERT_EQ(0, bcg_charge(self->child, 1234));
	EXPECT_EQ(1234, bcg_borrowing(self->child));
	ASSERT_EQ(0, bcg_charge(self->child, 66));
	EXPECT_EQ(1300, bcg_borrowing(self->child));
	ASSERT_EQ(0, bcg_write_borrowing(self->child, "0\n"));
	EXPECT_EQ(1300, bcg_borrowing(self->child));
	EXPECT_EQ(1300, bcg_stat(self->child, "borrowed_usec"));
	EXPECT_EQ(0, bcg_stat(self->child, "borrow_dropped_usec"));
	/* Charging one group does not charge its parent. */
	EXPECT_EQ(0, bcg_borrowing(self->parent));
}

TEST_F(borrowing, bad_input)
{
	static const struct {
		const char *value;
		int err;
	} cases[] = {
		{ "-1", -EINVAL },
		{ "-0", -EINVAL },
		{ "abc", -EINVAL },
		{ "\n", -EINVAL },
		{ " ", -EINVAL },
		{ "1.5", -EINVAL },
		{ "12abc", -EINVAL },
		{ "1 2", -EINVAL },
		{ "0x10", -EINVAL },
		{ "18446744073709551616", -ERANGE },	/* 2^64 */
		{ "99999999999999999999999", -ERANGE },
		{ "18446744073709552", -ERANGE },	/* > U64_MAX ns */
	};
	char path[PATH_MAX];
	int i, fd;

	set_slow_bandwidth(_metadata, self->child, QUOTA_US);
	ASSERT_EQ(0, bcg_charge(self->child, 777));

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		EXPECT_EQ(cases[i].err, bcg_write_borrowing(self->child, cases[i].value))
			TH_LOG("writing '%s'", cases[i].value);
		EXPECT_EQ(777, bcg_borrowing(self->child)) TH_LOG("after '%s'", cases[i].value);
	}

	/* An empty write changes nothing either. */
	snprintf(path, sizeof(path), "%s/%s", self->child, BORROWING_FILE);
	fd = open(path, O_WRONLY);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, write(fd, "", 0));
	close(fd);
	EXPECT_EQ(777, bcg_borrowing(self->child));
	EXPECT_EQ(777, bcg_stat(self->child, "borrowed_usec"));
	EXPECT_EQ(0, bcg_stat(self->child, "borrow_dropped_usec"));
}

TEST_F(borrowing, bounded_and_clamped)
{
	set_slow_bandwidth(_metadata, self->child, QUOTA_US);

	/* The largest value accepted: far above the bound, which it fills. */
	ASSERT_EQ(0, bcg_write_borrowing(self->child, "18446744073709551"));
	EXPECT_EQ(BOUND_US, bcg_borrowing(self->child));
	ASSERT_EQ(0, bcg_charge(self->child, 10 * USEC_PER_SEC));
	EXPECT_EQ(BOUND_US, bcg_borrowing(self->child));
	EXPECT_EQ(BOUND_US, bcg_stat(self->child, "borrowed_usec"));

	/* A smaller quota shrinks the bound: 9 x 20ms. */
	ASSERT_EQ(0, bcg_set_bandwidth(self->child, 20 * USEC_PER_MSEC, SLOW_PERIOD_US));
	EXPECT_LE(bcg_borrowing(self->child), 180 * USEC_PER_MSEC);
	EXPECT_EQ(0, bcg_stat(self->child, "borrowed_usec") -
		     bcg_stat(self->child, "borrow_deducted_usec") -
		     bcg_borrowing(self->child) -
		     (BOUND_US - 180 * USEC_PER_MSEC))
		TH_LOG("borrowed = deducted + outstanding + clamped");
}

TEST_F(borrowing, no_quota_charges_ancestor)
{
	set_slow_bandwidth(_metadata, self->parent, QUOTA_US);

	ASSERT_EQ(0, bcg_charge(self->child, 5000));
	EXPECT_EQ(0, bcg_borrowing(self->child));
	EXPECT_EQ(5000, bcg_borrowing(self->parent));
	EXPECT_EQ(5000, bcg_stat(self->parent, "borrowed_usec"));
	EXPECT_EQ(0, bcg_stat(self->child, "borrowed_usec"));
	EXPECT_EQ(0, bcg_stat(self->child, "borrow_dropped_usec"));
}

TEST_F(borrowing, no_quota_anywhere_drops)
{
	ASSERT_EQ(0, bcg_charge(self->child, 5000));
	EXPECT_EQ(0, bcg_borrowing(self->child));
	EXPECT_EQ(0, bcg_borrowing(self->parent));
	EXPECT_EQ(5000, bcg_stat(self->child, "borrow_dropped_usec"));
	EXPECT_EQ(0, bcg_stat(self->child, "borrowed_usec"));
}

TEST_F(borrowing, quota_removed_moves_to_ancestor)
{
	set_slow_bandwidth(_metadata, self->parent, QUOTA_US);
	set_slow_bandwidth(_metadata, self->child, 20 * USEC_PER_MSEC);

	ASSERT_EQ(0, bcg_charge(self->child, 100 * USEC_PER_MSEC));
	EXPECT_EQ(100 * USEC_PER_MSEC, bcg_borrowing(self->child));
	ASSERT_EQ(0, bcg_set_bandwidth(self->child, -1, SLOW_PERIOD_US));
	EXPECT_EQ(0, bcg_borrowing(self->child));
	EXPECT_EQ(100 * USEC_PER_MSEC, bcg_borrowing(self->parent));
	EXPECT_EQ(100 * USEC_PER_MSEC, bcg_stat(self->parent, "borrowed_usec"));
}

TEST_F(borrowing, removed_with_borrowing_pending)
{
	char path[PATH_MAX];
	int fd;

	set_slow_bandwidth(_metadata, self->child, QUOTA_US);
	ASSERT_EQ(0, bcg_charge(self->child, 400 * USEC_PER_MSEC));
	snprintf(path, sizeof(path), "%s/%s", self->child, BORROWING_FILE);
	fd = open(path, O_WRONLY);
	ASSERT_LE(0, fd);

	ASSERT_EQ(0, rmdir(self->child));
	/* A writer that still holds the file gets an error, nothing else. */
	EXPECT_EQ(-1, write(fd, "1000", 4));
	EXPECT_EQ(ENODEV, errno);
	close(fd);
	EXPECT_EQ(0, bcg_borrowing(self->parent));
}

static int write_charge(const char *cg)
{
	return errno_code(bcg_charge(cg, 1000));
}

static int write_as_nobody(const char *cg)
{
	if (become_nobody())
		return 5;
	return errno_code(bcg_charge(cg, 1000));
}

TEST_F(borrowing, nonroot_cannot_write)
{
	char path[PATH_MAX];

	set_slow_bandwidth(_metadata, self->child, QUOTA_US);
	/* The file's mode keeps others out ... */
	EXPECT_EQ(2, in_child(write_as_nobody, self->child));
	/* ... and owning it, as in a delegated subtree, does not help. */
	snprintf(path, sizeof(path), "%s/%s", self->child, BORROWING_FILE);
	ASSERT_EQ(0, chown(path, NOBODY, NOBODY));
	ASSERT_EQ(0, chown(self->child, NOBODY, NOBODY));
	EXPECT_EQ(1, in_child(write_as_nobody, self->child));
	EXPECT_EQ(0, bcg_borrowing(self->child));
}

static int write_in_user_ns(const char *cg)
{
	if (unshare(CLONE_NEWUSER))
		return 6;
	/* Root of the new namespace, mapped to root: owner of the file. */
	if (write_text("/proc/self/setgroups", "deny", 4) < 0 ||
	    write_text("/proc/self/uid_map", "0 0 1", 5) < 0 ||
	    write_text("/proc/self/gid_map", "0 0 1", 5) < 0)
		return 7;
	return errno_code(bcg_charge(cg, 1000));
}

TEST_F(borrowing, user_namespace_root_cannot_write)
{
	set_slow_bandwidth(_metadata, self->child, QUOTA_US);
	EXPECT_EQ(1, in_child(write_in_user_ns, self->child));
	EXPECT_EQ(0, bcg_borrowing(self->child));
}

static int write_in_cgroup_ns(const char *cg)
{
	if (unshare(CLONE_NEWCGROUP))
		return 6;
	/* The hierarchy stays mounted at the same path: only the namespace differs. */
	return errno_code(bcg_charge(cg, 1000));
}

/* A container given CAP_SYS_ADMIN without a user namespace has the host's. */
TEST_F(borrowing, cgroup_namespace_cannot_write)
{
	set_slow_bandwidth(_metadata, self->child, QUOTA_US);
	EXPECT_EQ(1, in_child(write_in_cgroup_ns, self->child));
	EXPECT_EQ(0, bcg_borrowing(self->child));
}

static int write_in_pid_ns(const char *cg)
{
	/* unshare() puts the children, not the caller, in the new namespace. */
	if (unshare(CLONE_NEWPID))
		return 6;
	return in_child(write_charge, cg);
}

TEST_F(borrowing, pid_namespace_cannot_write)
{
	set_slow_bandwidth(_metadata, self->child, QUOTA_US);
	EXPECT_EQ(1, in_child(write_in_pid_ns, self->child));
	EXPECT_EQ(0, bcg_borrowing(self->child));
}

/* The same charge from the host's namespaces: the control for the above. */
TEST_F(borrowing, initial_namespaces_can_write)
{
	set_slow_bandwidth(_metadata, self->child, QUOTA_US);
	EXPECT_EQ(3, in_child(write_charge, self->child));
	EXPECT_EQ(1000, bcg_borrowing(self->child));
}

static int write_opened_by_root(const char *cg)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", cg, BORROWING_FILE);
	fd = open(path, O_WRONLY);
	if (fd < 0 || become_nobody())
		return 5;
	return errno_code(write(fd, "1000", 4) < 0 ? -errno : 0);
}

static int write_opened_by_nobody(const char *cg)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", cg, BORROWING_FILE);
	/* Open with nobody's credentials, then become root again. */
	if (setresuid(-1, NOBODY, -1))
		return 5;
	fd = open(path, O_WRONLY);
	if (fd < 0 || setresuid(-1, 0, -1))
		return 5;
	return errno_code(write(fd, "1000", 4) < 0 ? -errno : 0);
}

TEST_F(borrowing, opener_and_writer_both_need_privilege)
{
	char path[PATH_MAX];

	set_slow_bandwidth(_metadata, self->child, QUOTA_US);
	EXPECT_EQ(1, in_child(write_opened_by_root, self->child));
	snprintf(path, sizeof(path), "%s/%s", self->child, BORROWING_FILE);
	ASSERT_EQ(0, chown(path, NOBODY, NOBODY));
	EXPECT_EQ(1, in_child(write_opened_by_nobody, self->child));
	EXPECT_EQ(0, bcg_borrowing(self->child));
}

/*
 * A group that does not run pays too: it may be waiting for the very worker
 * that charges it (a container blocked on its logger's full pipe).
 */
TEST_F(borrowing, idle_group_pays)
{
	long paid = 3 * QUOTA_US;

	ASSERT_EQ(0, bcg_set_bandwidth(self->child, QUOTA_US, PERIOD_US));
	/* No task: its period timer stops, as for any idle group. */
	bcg_sleep_usec(TIMER_IDLE_US);
	ASSERT_EQ(0, bcg_charge(self->child, paid));
	bcg_sleep_usec(5 * PERIOD_US);
	EXPECT_EQ(0, bcg_borrowing(self->child));
	EXPECT_EQ(paid, bcg_stat(self->child, "borrow_deducted_usec"));
	EXPECT_LE(3, bcg_stat(self->child, "nr_borrow_periods"));
	EXPECT_EQ(0, bcg_usage_usec(self->child));
}

/*
 * Runs a hog in @hog_cg for @duration_us while charging @charge_us to
 * @charge_cg every period, and returns the CPU time the hog's group used.
 */
static long hog_usage_under_charges(struct __test_metadata *_metadata,
				    FIXTURE_DATA(borrowing) *self, const char *hog_cg,
				    const char *charge_cg, long charge_us,
				    long interval_us, long duration_us)
{
	long start, usage, next, end;

	if (!self->hog) {
		self->hog = bcg_start_hog(hog_cg, 0);
		ASSERT_LT(0, self->hog);
		/* Let it settle into its bandwidth. */
		bcg_sleep_usec(3 * PERIOD_US);
	}

	usage = bcg_usage_usec(hog_cg);
	start = bcg_now_usec();
	end = start + duration_us;
	for (next = start; next < end; next += interval_us) {
		if (charge_us)
			EXPECT_EQ(0, bcg_charge(charge_cg, charge_us));
		bcg_sleep_usec(next + interval_us - bcg_now_usec());
	}
	usage = bcg_usage_usec(hog_cg) - usage;
	/* Scale to exactly @duration_us of wall time. */
	return usage * duration_us / (bcg_now_usec() - start);
}

TEST_F(borrowing, charges_reduce_share)
{
	long base, charged;

	ASSERT_EQ(0, bcg_set_bandwidth(self->child, QUOTA_US, PERIOD_US));
	base = hog_usage_under_charges(_metadata, self, self->child, self->child,
				       0, PERIOD_US, 2 * USEC_PER_SEC);
	/* 20ms of every 100ms period charged: (50 - 20) / 100 of a CPU. */
	charged = hog_usage_under_charges(_metadata, self, self->child, self->child,
					  20 * USEC_PER_MSEC, PERIOD_US, 3 * USEC_PER_SEC);
	TH_LOG("hog: %ld us/s uncharged, %ld us/s while charged 20ms per period",
	       base / 2, charged / 3);
	EXPECT_TRUE(values_close(base, USEC_PER_SEC, 10));
	EXPECT_TRUE(values_close(charged, 900 * USEC_PER_MSEC, 10));
	EXPECT_LT(0, bcg_stat(self->child, "nr_borrow_periods"));
	/* What was charged was paid, but for the last period or two. */
	EXPECT_GE(bcg_stat(self->child, "borrowed_usec"),
		  bcg_stat(self->child, "borrow_deducted_usec"));
	EXPECT_LE(bcg_stat(self->child, "borrowed_usec") -
		  bcg_stat(self->child, "borrow_deducted_usec"), 40 * USEC_PER_MSEC);
}

TEST_F(borrowing, charges_reduce_share_with_burst)
{
	long charged;

	ASSERT_EQ(0, bcg_set_bandwidth(self->child, QUOTA_US, PERIOD_US));
	ASSERT_EQ(0, bcg_set_burst(self->child, QUOTA_US));
	charged = hog_usage_under_charges(_metadata, self, self->child, self->child,
					  20 * USEC_PER_MSEC, PERIOD_US, 3 * USEC_PER_SEC);
	TH_LOG("hog: %ld us/s while charged 20ms per period", charged / 3);
	EXPECT_TRUE(values_close(charged, 900 * USEC_PER_MSEC, 10));
}

TEST_F(borrowing, debt_above_quota_throttles_then_is_paid)
{
	long during, after, start;

	ASSERT_EQ(0, bcg_set_bandwidth(self->child, QUOTA_US, PERIOD_US));
	self->hog = bcg_start_hog(self->child, 0);
	ASSERT_LT(0, self->hog);
	bcg_sleep_usec(3 * PERIOD_US);

	/* Six periods' quota: the next six periods have no runtime. */
	start = bcg_usage_usec(self->child);
	ASSERT_EQ(0, bcg_charge(self->child, 6 * QUOTA_US));
	bcg_sleep_usec(5 * PERIOD_US);
	during = bcg_usage_usec(self->child) - start;
	EXPECT_LT(0, bcg_borrowing(self->child));

	bcg_sleep_usec(3 * PERIOD_US);
	EXPECT_EQ(0, bcg_borrowing(self->child));
	EXPECT_EQ(6 * QUOTA_US, bcg_stat(self->child, "borrow_deducted_usec"));
	EXPECT_LE(6, bcg_stat(self->child, "nr_borrow_periods"));

	after = hog_usage_under_charges(_metadata, self, self->child, self->child,
					0, PERIOD_US, USEC_PER_SEC);
	TH_LOG("hog: %ld us in the 500ms after a 300ms charge, then %ld us/s",
	       during, after);
	/* At most what was left of the period in which the charge came. */
	EXPECT_LT(during, QUOTA_US + 10 * USEC_PER_MSEC);
	EXPECT_TRUE(values_close(after, 500 * USEC_PER_MSEC, 10));
}

TEST_F(borrowing, child_without_quota_pays_through_parent)
{
	long charged;

	ASSERT_EQ(0, bcg_set_bandwidth(self->parent, QUOTA_US, PERIOD_US));
	charged = hog_usage_under_charges(_metadata, self, self->child, self->child,
					  20 * USEC_PER_MSEC, PERIOD_US, 3 * USEC_PER_SEC);
	TH_LOG("hog: %ld us/s while its group is charged 20ms per period", charged / 3);
	EXPECT_TRUE(values_close(charged, 900 * USEC_PER_MSEC, 10));
	EXPECT_LT(0, bcg_stat(self->parent, "borrow_deducted_usec"));
	EXPECT_EQ(0, bcg_stat(self->child, "borrowed_usec"));
}

TEST_F(borrowing, never_starved_for_long)
{
	long usage, start, slice;
	int status;

	ASSERT_EQ(0, bcg_set_bandwidth(self->child, QUOTA_US, PERIOD_US));
	slice = bcg_bandwidth_slice_usec();
	ASSERT_LT(0, slice);
	/*
	 * Charged far faster than it can pay: every 10th period still keeps
	 * a bandwidth slice for it. In 3 s that is 3 or 4 slices, each of
	 * which the hog may overrun by a tick; a whole period each time
	 * would be 3 quotas. Reach the bound before measuring: a charge is
	 * paid from the next period on, and what the hog has left of the
	 * current one (up to a quota) is not owed.
	 */
	hog_usage_under_charges(_metadata, self, self->child, self->child,
				USEC_PER_SEC, PERIOD_US / 2, 2 * PERIOD_US);
	usage = hog_usage_under_charges(_metadata, self, self->child, self->child,
					USEC_PER_SEC, PERIOD_US / 2, 3 * USEC_PER_SEC);
	TH_LOG("hog: %ld us in 3 s at the bound (a %ld us slice a second expected)",
	       usage, slice);
	EXPECT_LE(slice, usage);
	EXPECT_GE(10 * slice, usage);
	EXPECT_LT(0, bcg_stat(self->child, "borrow_dropped_usec"));

	/* A throttled, indebted group can still be killed promptly. */
	ASSERT_EQ(0, bcg_charge(self->child, BOUND_US));
	start = bcg_now_usec();
	kill(self->hog, SIGKILL);
	ASSERT_EQ(self->hog, waitpid(self->hog, &status, 0));
	self->hog = 0;
	TH_LOG("killed in %ld ms", (bcg_now_usec() - start) / USEC_PER_MSEC);
	EXPECT_GE(USEC_PER_SEC + 2 * PERIOD_US, bcg_now_usec() - start);
}

TEST_HARNESS_MAIN
