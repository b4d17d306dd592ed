// SPDX-License-Identifier: GPL-2.0
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mntent.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cgroup_util.h"
#include "borrowing_util.h"

static char root[PATH_MAX];
static bool is_v1;

int bcg_init(void)
{
	struct mntent *mnt;
	FILE *f;

	f = setmntent("/proc/self/mounts", "r");
	if (!f)
		return -1;
	while ((mnt = getmntent(f))) {
		if (!strcmp(mnt->mnt_type, "cgroup2")) {
			snprintf(root, sizeof(root), "%s", mnt->mnt_dir);
			is_v1 = false;
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

bool bcg_is_v1(void)
{
	return is_v1;
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

pid_t bcg_start_hog(const char *cg, int cpu)
{
	char buf[32];
	cpu_set_t set;
	pid_t pid;

	pid = fork();
	if (pid)
		return pid;

	/* Die with the test, however it ends. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	snprintf(buf, sizeof(buf), "%d", getpid());
	if (sched_setaffinity(0, sizeof(set), &set) || cg_write(cg, "cgroup.procs", buf))
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
