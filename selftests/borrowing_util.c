// SPDX-License-Identifier: GPL-2.0
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mntent.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "cgroup_util.h"
#include "borrowing_util.h"

static char root[PATH_MAX];
static bool is_v1;
static bool nsdelegate;

/* Whether a cgroup2 mount has the cpu controller (v1 may hold it: hybrid). */
static bool v2_has_cpu(const char *mnt)
{
	char buf[512], *tok, *save;

	if (cg_read(mnt, "cgroup.controllers", buf, sizeof(buf)))
		return false;
	for (tok = strtok_r(buf, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
		if (!strcmp(tok, "cpu"))
			return true;
	}
	return false;
}

int bcg_init(void)
{
	struct mntent *mnt;
	FILE *f;

	f = setmntent("/proc/self/mounts", "r");
	if (!f)
		return -1;
	while ((mnt = getmntent(f))) {
		if (!strcmp(mnt->mnt_type, "cgroup2") && v2_has_cpu(mnt->mnt_dir)) {
			snprintf(root, sizeof(root), "%s", mnt->mnt_dir);
			is_v1 = false;
			nsdelegate = !!hasmntopt(mnt, "nsdelegate");
			break;
		}
		if (!strcmp(mnt->mnt_type, "cgroup") && hasmntopt(mnt, "cpu")) {
			snprintf(root, sizeof(root), "%s", mnt->mnt_dir);
			is_v1 = true;
			break;
		}
	}
	endmntent(f);
	return root[0] ? 0 : -1;
}

int bcg_nr_spinners(void)
{
	cpu_set_t set;
	int cpus;

	if (sched_getaffinity(0, sizeof(set), &set))
		return -1;
	cpus = CPU_COUNT(&set);
	return cpus < BCG_MAX_THREADS ? cpus : BCG_MAX_THREADS;
}

/* The @idx-th CPU that the caller may run on, or -1. */
static int allowed_cpu(int idx)
{
	cpu_set_t set;
	int cpu;

	if (sched_getaffinity(0, sizeof(set), &set))
		return -1;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (CPU_ISSET(cpu, &set) && idx-- == 0)
			return cpu;
	}
	return -1;
}

bool bcg_is_v1(void)
{
	return is_v1;
}

bool bcg_nsdelegate(void)
{
	return nsdelegate;
}

const char *bcg_root(void)
{
	return root;
}

char *bcg_create(const char *parent, const char *name)
{
	char *cg = cg_name(parent, name);

	if (!cg)
		return NULL;
	if (!is_v1 && cg_write((char *)parent, "cgroup.subtree_control", "+cpu"))
		goto fail;
	if (cg_create(cg))
		goto fail;
	return cg;
fail:
	free(cg);
	return NULL;
}

int bcg_destroy(const char *cg)
{
	char path[PATH_MAX], child[PATH_MAX];
	struct dirent *de;
	DIR *dir;

	snprintf(path, sizeof(path), "%s", cg);
	dir = opendir(path);
	if (dir) {
		while ((de = readdir(dir))) {
			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			snprintf(child, sizeof(child), "%s/%s", cg, de->d_name);
			bcg_destroy(child);
		}
		closedir(dir);
	}
	return cg_destroy(cg);
}

int bcg_set_bandwidth(const char *cg, long quota_us, long period_us)
{
	char buf[64];
	int ret;

	if (!is_v1) {
		if (quota_us < 0)
			snprintf(buf, sizeof(buf), "max %ld", period_us);
		else
			snprintf(buf, sizeof(buf), "%ld %ld", quota_us, period_us);
		return cg_write(cg, "cpu.max", buf);
	}
	/*
	 * One file at a time; never remove the quota on the way, which would
	 * hand pending borrowing to an ancestor.
	 */
	if (cg_read_long(cg, "cpu.cfs_period_us") != period_us) {
		snprintf(buf, sizeof(buf), "%ld", period_us);
		ret = cg_write(cg, "cpu.cfs_period_us", buf);
		if (ret)
			return ret;
	}
	snprintf(buf, sizeof(buf), "%ld", quota_us < 0 ? -1 : quota_us);
	return cg_write(cg, "cpu.cfs_quota_us", buf);
}

int bcg_set_burst(const char *cg, long burst_us)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld", burst_us);
	return cg_write(cg, is_v1 ? "cpu.cfs_burst_us" : "cpu.max.burst", buf);
}

long bcg_usage_usec(const char *cg)
{
	long ns;

	if (!is_v1)
		return cg_read_key_long(cg, "cpu.stat", "usage_usec ");
	ns = cg_read_long(cg, "cpuacct.usage");
	return ns < 0 ? ns : ns / 1000;
}

long bcg_stat(const char *cg, const char *v2_key)
{
	char key[64];
	size_t len = strlen(v2_key);
	long ns;

	if (!is_v1 || strncmp(v2_key, "nr_", 3) == 0) {
		snprintf(key, sizeof(key), "%s ", v2_key);
		return cg_read_key_long(cg, "cpu.stat", key);
	}
	if (len < 5 || strcmp(v2_key + len - 5, "_usec"))
		return -1;
	snprintf(key, sizeof(key), "%.*s_time ", (int)(len - 5), v2_key);
	ns = cg_read_key_long(cg, "cpu.stat", key);
	return ns < 0 ? ns : ns / 1000;
}

int bcg_borrow_stat(const char *cg, struct bcg_borrow_stat *st)
{
	static const char * const v1_keys[] = {
		"borrowed_time", "borrow_deducted_time",
		"borrow_outstanding_time", "borrow_dropped_time",
	};
	static const char * const v2_keys[] = {
		"borrowed_usec", "borrow_deducted_usec",
		"borrow_outstanding_usec", "borrow_dropped_usec",
	};
	long long *fields[] = {
		&st->borrowed, &st->deducted, &st->outstanding, &st->dropped,
	};
	const char * const *keys = is_v1 ? v1_keys : v2_keys;
	char buf[4096], *line;
	int i, found = 0;

	if (cg_read(cg, "cpu.stat", buf, sizeof(buf)))
		return -1;
	for (line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		char key[64];
		long long val;

		if (sscanf(line, "%63s %lld", key, &val) != 2)
			continue;
		if (!strcmp(key, "nr_borrow_periods")) {
			st->periods = val;
			found++;
		}
		for (i = 0; i < 4; i++) {
			if (!strcmp(key, keys[i])) {
				*fields[i] = is_v1 ? val : val * 1000;
				found++;
			}
		}
	}
	return found == 5 ? 0 : -1;
}

long long bcg_borrow_rounding_ns(void)
{
	/* v2: each of four fields rounded down to a microsecond on its own. */
	return is_v1 ? 0 : 2000;
}

long bcg_borrowing(const char *cg)
{
	return cg_read_long(cg, BORROWING_FILE);
}

int bcg_write_borrowing(const char *cg, const char *value)
{
	return cg_write(cg, BORROWING_FILE, (char *)value);
}

int bcg_charge(const char *cg, long usec)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld", usec);
	return bcg_write_borrowing(cg, buf);
}

int bcg_charge_for(const char *cg, long usec, pid_t worker)
{
	char buf[48];

	snprintf(buf, sizeof(buf), "%ld %d", usec, worker);
	return bcg_write_borrowing(cg, buf);
}

unsigned long long bcg_id(const char *cg)
{
	/* A cgroup's file handle is its 64-bit id; an inode number may be 32 bits. */
	union {
		struct file_handle fh;
		char buf[sizeof(struct file_handle) + sizeof(unsigned long long)];
	} h = { .fh.handle_bytes = sizeof(unsigned long long) };
	unsigned long long id;
	int mount_id;

	if (name_to_handle_at(AT_FDCWD, cg, &h.fh, &mount_id, 0) ||
	    h.fh.handle_bytes != sizeof(id))
		return 0;
	memcpy(&id, h.fh.f_handle, sizeof(id));
	return id;
}

int bcg_charge_for_id(const char *cg, long usec, unsigned long long id)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%ld cgroup=%llu", usec, id);
	return bcg_write_borrowing(cg, buf);
}

long bcg_bandwidth_slice_usec(void)
{
	char buf[32];
	int fd = open("/proc/sys/kernel/sched_cfs_bandwidth_slice_us", O_RDONLY);
	ssize_t len;

	if (fd < 0)
		return -1;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = '\0';
	return strtol(buf, NULL, 10);
}

/* The first "now at" and "jiffies:" of /proc/timer_list. */
static int timer_list_now(long long *ns, long long *jiffies)
{
	FILE *f = fopen("/proc/timer_list", "r");
	char line[256];
	int found = 0;

	if (!f)
		return -1;
	while (found != 3 && fgets(line, sizeof(line), f)) {
		if (!(found & 1) && sscanf(line, "now at %lld nsecs", ns) == 1)
			found |= 1;
		else if (!(found & 2) && sscanf(line, "jiffies: %lld", jiffies) == 1)
			found |= 2;
	}
	fclose(f);
	return found == 3 ? 0 : -1;
}

long bcg_tick_usec(void)
{
	static const long hz[] = { 100, 250, 300, 1000 };
	long long ns0, j0, ns1, j1;
	long best = 0, measured;
	size_t i;

	if (timer_list_now(&ns0, &j0))
		return -1;
	bcg_sleep_usec(200 * USEC_PER_MSEC);
	if (timer_list_now(&ns1, &j1) || ns1 <= ns0 || j1 <= j0)
		return -1;
	/* The nearest of the HZ the kernel can be built with. */
	measured = (j1 - j0) * NSEC_PER_SEC / (ns1 - ns0);
	for (i = 0; i < ARRAY_SIZE(hz); i++) {
		if (!best || labs(hz[i] - measured) < labs(best - measured))
			best = hz[i];
	}
	return USEC_PER_SEC / best;
}

/*
 * Pins the caller to the @idx-th CPU it may run on. Called once in the
 * group: joining a cpuset may change what it allows.
 */
static int pin_to_allowed_cpu(int idx)
{
	int cpu = allowed_cpu(idx);
	cpu_set_t set;

	if (cpu < 0)
		return -1;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

pid_t bcg_start_hog(const char *cg, int idx)
{
	char buf[32];
	pid_t pid;

	pid = fork();
	if (pid)
		return pid;

	/* Die with the test, however it ends. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	snprintf(buf, sizeof(buf), "%d", getpid());
	if (cg_write(cg, "cgroup.procs", buf))
		_exit(1);
	if (pin_to_allowed_cpu(idx))
		_exit(1);
	for (;;)
		;
}

void bcg_sleep_usec(long usec)
{
	struct timespec ts = { usec / USEC_PER_SEC, (usec % USEC_PER_SEC) * 1000 };

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

long bcg_now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * USEC_PER_SEC + ts.tv_nsec / 1000;
}

pid_t bcg_start_sleeper(const char *cg)
{
	char buf[32], joined;
	int fds[2];
	pid_t pid;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid) {
		close(fds[1]);
		/* One byte once it joined @cg; none if it could not (exited). */
		if (pid > 0 && read(fds[0], &joined, 1) != 1) {
			waitpid(pid, NULL, 0);
			pid = -1;
		}
		close(fds[0]);
		return pid;
	}

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	close(fds[0]);
	snprintf(buf, sizeof(buf), "%d", getpid());
	if (cg_write(cg, "cgroup.procs", buf) || write(fds[1], "j", 1) != 1)
		_exit(1);
	close(fds[1]);
	for (;;)
		pause();
}

static struct bcg_threads *spinning;

static long thread_cpu_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * USEC_PER_SEC + ts.tv_nsec / 1000;
}

static void *spin(void *arg)
{
	struct bcg_thread_stats *st = arg;
	long last = bcg_now_usec(), cpu0 = thread_cpu_usec(), now;
	int epoch = __atomic_load_n(spinning->epoch, __ATOMIC_RELAXED);

	for (;;) {
		now = bcg_now_usec();
		if (epoch != __atomic_load_n(spinning->epoch, __ATOMIC_RELAXED)) {
			epoch = __atomic_load_n(spinning->epoch, __ATOMIC_RELAXED);
			cpu0 = thread_cpu_usec();
			st->max_stall_usec = 0;
			last = now;
		}
		if (now - last > st->max_stall_usec)
			st->max_stall_usec = now - last;
		last = now;
		__atomic_store_n(&st->last_usec, now, __ATOMIC_RELAXED);
		st->cpu_usec = thread_cpu_usec() - cpu0;
	}
	return NULL;
}

int bcg_start_threads(const char *cg, int nr, struct bcg_threads *t)
{
	return bcg_start_threads_on(cg, nr, -1, t);
}

int bcg_start_threads_on(const char *cg, int nr, int idx, struct bcg_threads *t)
{
	size_t size = sizeof(*t->stats) * BCG_MAX_THREADS + sizeof(int);
	char buf[32];
	pthread_t th;
	void *shared;
	int i;

	if (nr < 1 || nr > BCG_MAX_THREADS)
		return -1;
	shared = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return -1;
	memset(shared, 0, size);
	t->nr = nr;
	t->stats = shared;
	t->epoch = (int *)(t->stats + BCG_MAX_THREADS);

	t->pid = fork();
	if (t->pid < 0)
		return -1;
	if (t->pid)
		return 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	snprintf(buf, sizeof(buf), "%d", getpid());
	if (cg_write(cg, "cgroup.procs", buf))
		_exit(1);
	/* The threads inherit it. */
	if (idx >= 0 && pin_to_allowed_cpu(idx))
		_exit(1);
	spinning = t;
	for (i = 1; i < nr; i++) {
		if (pthread_create(&th, NULL, spin, &t->stats[i]))
			_exit(1);
	}
	spin(&t->stats[0]);
	_exit(0);
}

void bcg_threads_reset(struct bcg_threads *t)
{
	long now = bcg_now_usec();
	int i;

	__atomic_fetch_add(t->epoch, 1, __ATOMIC_RELAXED);
	/* A stall that began before counts from now. */
	for (i = 0; i < t->nr; i++)
		__atomic_store_n(&t->stats[i].last_usec, now, __ATOMIC_RELAXED);
}

long bcg_thread_stall_usec(const struct bcg_threads *t, int i)
{
	long last = __atomic_load_n(&t->stats[i].last_usec, __ATOMIC_RELAXED);
	long open = last ? bcg_now_usec() - last : 0;
	long max = __atomic_load_n(&t->stats[i].max_stall_usec, __ATOMIC_RELAXED);

	return open > max ? open : max;
}

void bcg_stop_threads(struct bcg_threads *t)
{
	if (t->pid > 0) {
		kill(t->pid, SIGKILL);
		waitpid(t->pid, NULL, 0);
		t->pid = 0;
	}
}
