// SPDX-License-Identifier: GPL-2.0
/*
 * Stress test of cpu.cfs.borrowing_us: concurrent writers charge valid and
 * invalid values to a nested hierarchy with multi-threaded hogs, while the
 * quota, period and burst change and groups are created and removed. Every
 * write must get the result its value calls for, and at the end the
 * counters add up in every group that survived. The kernel's own checks
 * (lockdep, KASAN, UBSAN, list debugging on a debug kernel) watch the rest.
 *
 *   stress_borrowing [-n WRITES] [-t SECONDS] [-j WRITERS]
 *
 * Output: KTAP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest.h"
#include "cgroup_util.h"
#include "borrowing_util.h"

#define MAX_WRITERS	32
#define NR_DYNAMIC	4

/* Counters shared by the writers, the changers and the main process. */
struct shared {
	long writes[MAX_WRITERS];
	long unexpected[MAX_WRITERS];
	long created, removed, reconfigured;
	int stop;
	char last_error[256];
};

static struct shared *sh;
static char *base;
/* Groups: the static tree, then the dynamic leaves (may be absent). */
static char *groups[8 + NR_DYNAMIC];
static int nr_static;
static pid_t hog_pids[2];

static bool stopping(void)
{
	return __atomic_load_n(&sh->stop, __ATOMIC_RELAXED);
}

/* What a write of each value must give: 0, or a negative errno. */
struct value {
	char text[48];
	int expect;
};

static void make_value(unsigned int r, struct value *v, pid_t self)
{
	static const char * const invalid[] = {
		"abc", "-1", "1.5", "0x10", "1 0", "1 -3", "1 pid", "1 2 3", " ",
	};

	switch (r % 8) {
	case 0:
	case 1:
	case 2:
		snprintf(v->text, sizeof(v->text), "%u", 1 + r % 100000);
		v->expect = 0;
		break;
	case 3:
		snprintf(v->text, sizeof(v->text), "%u %d", r % 50000,
			 hog_pids[(r >> 3) % 2]);
		v->expect = 0;
		break;
	case 4:
		snprintf(v->text, sizeof(v->text), "+%u %d", r % 50000, self);
		v->expect = 0;
		break;
	case 5:
		snprintf(v->text, sizeof(v->text), "%s",
			 invalid[(r >> 3) % ARRAY_SIZE(invalid)]);
		v->expect = -EINVAL;
		break;
	case 6:
		snprintf(v->text, sizeof(v->text), "%s",
			 (r >> 3) % 2 ? "17592186044416" : "99999999999999999999");
		v->expect = -ERANGE;
		break;
	default:
		snprintf(v->text, sizeof(v->text), "5 %d", INT_MAX - (int)((r >> 3) % 1000));
		v->expect = -ESRCH;
		break;
	}
}

static void writer(int id, long target)
{
	unsigned int seed = 0x9e3779b9u * (id + 1);
	struct value v;
	int g, ret;

	while (!stopping() && sh->writes[id] < target) {
		unsigned int r = rand_r(&seed);

		g = r % (nr_static + NR_DYNAMIC);
		make_value(rand_r(&seed), &v, getpid());
		ret = bcg_write_borrowing(groups[g], v.text);
		sh->writes[id]++;
		if (ret == v.expect)
			continue;
		/* A dynamic group may be gone: then nothing was written. */
		if (g >= nr_static && (ret == -ENOENT || ret == -ENODEV))
			continue;
		sh->unexpected[id]++;
		snprintf(sh->last_error, sizeof(sh->last_error),
			 "'%s' to %s: %d, expected %d", v.text, groups[g], ret, v.expect);
	}
	_exit(0);
}

/* Changes quota, period and burst of the static groups, valid values only. */
static void reconfigurer(void)
{
	static const long quotas[] = { 5000, 20000, 50000, 100000, 200000, -1 };
	static const long periods[] = { 10000, 100000, 250000 };
	unsigned int seed = 42;

	while (!stopping()) {
		unsigned int r = rand_r(&seed);
		const char *cg = groups[r % nr_static];
		long period = periods[(r >> 4) % ARRAY_SIZE(periods)];
		long quota = quotas[(r >> 8) % ARRAY_SIZE(quotas)];

		/* Refusals (v1's hierarchy rule, a burst above quota) are fine. */
		if (quota > 0)
			quota = quota * period / 100000;
		bcg_set_bandwidth(cg, quota, period);
		if (quota > 0)
			bcg_set_burst(cg, (r >> 12) % 2 ? quota / 2 : 0);
		__atomic_add_fetch(&sh->reconfigured, 1, __ATOMIC_RELAXED);
		bcg_sleep_usec(2000);
	}
	_exit(0);
}

/* Creates and removes the dynamic groups, with a quota half the time. */
static void creator(void)
{
	unsigned int seed = 7;

	while (!stopping()) {
		unsigned int r = rand_r(&seed);
		const char *cg = groups[nr_static + r % NR_DYNAMIC];

		if (!cg_create((char *)cg)) {
			__atomic_add_fetch(&sh->created, 1, __ATOMIC_RELAXED);
			if (r & 16)
				bcg_set_bandwidth(cg, 10000, 100000);
		} else if (!rmdir(cg)) {
			__atomic_add_fetch(&sh->removed, 1, __ATOMIC_RELAXED);
		}
		bcg_sleep_usec(1000);
	}
	_exit(0);
}

static pid_t spawn(void (*fn)(void))
{
	pid_t pid = fork();

	if (pid == 0)
		fn();
	return pid;
}

int main(int argc, char **argv)
{
	long target = 1000000, seconds = 300, total = 0, unexpected = 0;
	int nr_writers = 8, i, opt, bad_groups = 0, checked = 0;
	pid_t writers[MAX_WRITERS], changers[2];
	struct bcg_threads hogs[2];
	char name[64];
	long start;

	while ((opt = getopt(argc, argv, "n:t:j:")) != -1) {
		switch (opt) {
		case 'n': target = atol(optarg); break;
		case 't': seconds = atol(optarg); break;
		case 'j': nr_writers = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-n WRITES] [-t SECONDS] [-j WRITERS]\n", argv[0]);
			return KSFT_FAIL;
		}
	}
	if (nr_writers < 1 || nr_writers > MAX_WRITERS)
		ksft_exit_fail_msg("-j must be 1..%d\n", MAX_WRITERS);

	ksft_print_header();
	ksft_set_plan(3);
	if (bcg_init())
		ksft_exit_fail_msg("no cgroup hierarchy with the cpu controller\n");
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	memset(sh, 0, sizeof(*sh));

	/* base(100%) - a(no quota) - c(50%), base - d(30%), base - e(none) */
	snprintf(name, sizeof(name), "borrowing_stress_%d", getpid());
	base = bcg_create(bcg_root(), name);
	groups[nr_static++] = base;
	groups[nr_static++] = bcg_create(base, "a");
	groups[nr_static++] = bcg_create(groups[1], "c");
	groups[nr_static++] = bcg_create(base, "d");
	groups[nr_static++] = bcg_create(base, "e");
	for (i = 0; i < nr_static; i++) {
		if (!groups[i])
			ksft_exit_fail_msg("cannot create the hierarchy\n");
	}
	/* The dynamic groups' parents hand the cpu controller down. */
	if (!bcg_is_v1() && (cg_write(groups[1], "cgroup.subtree_control", "+cpu") ||
			     cg_write(groups[4], "cgroup.subtree_control", "+cpu")))
		ksft_exit_fail_msg("cannot enable the cpu controller\n");
	for (i = 0; i < NR_DYNAMIC; i++) {
		snprintf(name, sizeof(name), "dyn%d", i);
		groups[nr_static + i] = cg_name(i % 2 ? groups[1] : groups[4], name);
	}
	bcg_set_bandwidth(base, 100000, 100000);
	bcg_set_bandwidth(groups[2], 50000, 100000);
	bcg_set_bandwidth(groups[3], 30000, 100000);

	/* Multi-threaded hogs, a thread per CPU (at most 16), in c and d. */
	for (i = 0; i < 2; i++) {
		if (bcg_start_threads(groups[2 + i], bcg_nr_spinners(), &hogs[i]))
			ksft_exit_fail_msg("cannot start the hogs\n");
		hog_pids[i] = hogs[i].pid;
	}

	start = bcg_now_usec();
	for (i = 0; i < nr_writers; i++) {
		writers[i] = fork();
		if (writers[i] == 0)
			writer(i, (target + nr_writers - 1) / nr_writers);
	}
	changers[0] = spawn(reconfigurer);
	changers[1] = spawn(creator);

	/* Wait for the writers, or the time limit. */
	for (;;) {
		int done = 0;

		for (i = 0; i < nr_writers; i++) {
			if (writers[i] > 0 && waitpid(writers[i], NULL, WNOHANG) == writers[i])
				writers[i] = 0;
			done += writers[i] <= 0;
		}
		if (done == nr_writers || bcg_now_usec() - start > seconds * USEC_PER_SEC)
			break;
		bcg_sleep_usec(100000);
	}
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < nr_writers; i++) {
		if (writers[i] > 0)
			waitpid(writers[i], NULL, 0);
	}
	for (i = 0; i < 2; i++) {
		waitpid(changers[i], NULL, 0);
		bcg_stop_threads(&hogs[i]);
	}

	for (i = 0; i < nr_writers; i++) {
		total += sh->writes[i];
		unexpected += sh->unexpected[i];
	}
	ksft_print_msg("%ld writes by %d writers in %ld ms; %ld groups created, %ld removed, %ld bandwidth changes\n",
		       total, nr_writers, (bcg_now_usec() - start) / USEC_PER_MSEC,
		       sh->created, sh->removed, sh->reconfigured);
	ksft_test_result(total >= target, "%ld of %ld writes done within %ld s\n",
			 total, target, seconds);
	if (unexpected)
		ksft_print_msg("last unexpected result: %s\n", sh->last_error);
	ksft_test_result(!unexpected, "every write got the result its value calls for (%ld did not)\n",
			 unexpected);

	for (i = 0; i < nr_static + NR_DYNAMIC; i++) {
		struct bcg_borrow_stat st;
		long long accounted;

		if (access(groups[i], F_OK))
			continue;
		if (bcg_borrow_stat(groups[i], &st)) {
			ksft_print_msg("%s: no borrowing counters in cpu.stat\n", groups[i]);
			bad_groups++;
			continue;
		}
		checked++;
		accounted = st.deducted + st.outstanding + st.dropped;
		if (accounted > st.borrowed || accounted + bcg_borrow_rounding_ns() < st.borrowed) {
			ksft_print_msg("%s: borrowed %lld ns, deducted + outstanding + dropped %lld ns\n",
				       groups[i], st.borrowed, accounted);
			bad_groups++;
		}
	}
	ksft_test_result(!bad_groups && checked >= nr_static,
			 "the counters add up in all %d surviving groups\n", checked);

	bcg_destroy(base);
	ksft_finished();
}
