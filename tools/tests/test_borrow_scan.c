// SPDX-License-Identifier: GPL-2.0
/*
 * bcg_scan_containers() on containerd's layout, with real processes on the
 * build machine: per container a shim, its init and its logger (the
 * shim's child with the container's id and namespace in its environment),
 * the init's pid file where the shim writes it. Each container's logger is
 * found, a process that claims a container's id from elsewhere is not, and
 * a scan reads each process's files once, not once per container; a scan
 * since a time after the pid files looks for no logger, nor a scan of a
 * CRI plugin's container. The watch on the engines' metadata sees
 * containers come and go, and nothing else. KTAP on stdout.
 *
 *   test_borrow_scan [--bench N]
 *
 * --bench N: no checks; N containers, and a scan's CPU time and reads
 * (the mean of 10 scans).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../borrow_cg.h"

static int nr_containers = 20;

static int nr_tests, nr_failed;

static void result(bool ok, const char *name)
{
	nr_tests++;
	nr_failed += !ok;
	printf("%sok %d %s\n", ok ? "" : "not ", nr_tests, name);
}

static void die(const char *what)
{
	printf("Bail out! %s: %s\n", what, strerror(errno));
	exit(1);
}

/* A process that sleeps until killed, with ENV as its environment. */
static pid_t sleeper(char *const env[])
{
	char *const argv[] = { "sleep", "600", NULL };
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (!pid) {
		execve("/bin/sleep", argv, env);
		_exit(127);
	}
	return pid;
}

struct container {
	char id[65];
	pid_t shim, init, logger;
};

/*
 * The shim: its own process group (killed as one), an init and a logger
 * as its children; their pids to the test through a pipe.
 */
static void start_container(struct container *c, int n)
{
	char want_id[96], *const no_env[] = { NULL };
	char *const logger_env[] = { want_id, "CONTAINER_NAMESPACE=default", NULL };
	pid_t pids[2];
	int pipefd[2];

	snprintf(c->id, sizeof(c->id), "%064x", 0xc0de0000 + n);
	snprintf(want_id, sizeof(want_id), "CONTAINER_ID=%.64s", c->id);
	if (pipe(pipefd))
		die("pipe");
	c->shim = fork();
	if (c->shim < 0)
		die("fork");
	if (!c->shim) {
		setpgid(0, 0);
		pids[0] = sleeper(no_env);
		pids[1] = sleeper(logger_env);
		if (write(pipefd[1], pids, sizeof(pids)) != sizeof(pids))
			_exit(1);
		for (;;)
			pause();
	}
	if (read(pipefd[0], pids, sizeof(pids)) != sizeof(pids))
		die("read");
	close(pipefd[0]);
	close(pipefd[1]);
	c->init = pids[0];
	c->logger = pids[1];
}

/* The init's pid file, where containerd's shim writes it. */
static void write_init_pid(const char *run, const struct container *c)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path),
		 "mkdir -p %s/containerd/io.containerd.runtime.v2.task/default/%.64s",
		 run, c->id);
	if (system(path))
		die("mkdir");
	snprintf(path, sizeof(path),
		 "%s/containerd/io.containerd.runtime.v2.task/default/%.64s/init.pid",
		 run, c->id);
	f = fopen(path, "w");
	if (!f)
		die(path);
	fprintf(f, "%d", (int)c->init);
	fclose(f);
}

static struct container *containers;
static pid_t *found;

static int record(const struct bcg_container *c, void *arg)
{
	for (int i = 0; i < nr_containers; i++)
		if (!strcmp(c->id, containers[i].id))
			found[i] = c->worker_pid;
	return 0;
}

/* A container whose logger the scan did not look for. */
static int count_unsought(const struct bcg_container *c, void *arg)
{
	*(int *)arg += c->logger_unsought && !c->worker_pid;
	return 0;
}

/* This process's read(2) calls so far (/proc/self/io). */
static long long reads(void)
{
	char buf[512], *s;

	if (bcg_read_file("/proc/self/io", buf, sizeof(buf)) <= 0)
		return -1;
	s = strstr(buf, "syscr: ");
	return s ? atoll(s + 7) : -1;
}

static int nr_processes(void)
{
	char buf[64];
	FILE *p = popen("ls /proc | grep -c '^[0-9]'", "r");
	int n = -1;

	if (p && fgets(buf, sizeof(buf), p))
		n = atoi(buf);
	if (p)
		pclose(p);
	return n;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char **argv)
{
	bool bench = argc == 3 && !strcmp(argv[1], "--bench");
	char run[] = "/tmp/test_borrow_scan.XXXXXX", cmd[256];
	char claim[96], *const claim_env[] = { claim, "CONTAINER_NAMESPACE=default", NULL };
	long long r0, r1;
	int all = 1, procs, watch = -1, unsought = 0;
	struct timespec since;
	pid_t impostor;

	if (bench)
		nr_containers = atoi(argv[2]);
	if (nr_containers < 1 || nr_containers > 4096) {
		fprintf(stderr, "usage: test_borrow_scan [--bench N], N from 1 to 4096\n");
		return 2;
	}
	containers = calloc(nr_containers, sizeof(*containers));
	found = calloc(nr_containers, sizeof(*found));
	if (!containers || !found)
		die("calloc");
	if (!bench)
		printf("TAP version 13\n1..8\n");
	if (!mkdtemp(run))
		die("mkdtemp");
	setenv("CGBORROW_RUNDIR", run, 1);
	for (int i = 0; i < nr_containers; i++)
		start_container(&containers[i], i);
	/* Not the shim's child: the test's, with the first container's id. */
	snprintf(claim, sizeof(claim), "CONTAINER_ID=%.64s", containers[0].id);
	impostor = sleeper(claim_env);
	/* Before the containers' pid files: the watch sees them come. */
	if (!bench)
		watch = bcg_watch_containers();
	for (int i = 0; i < nr_containers; i++)
		write_init_pid(run, &containers[i]);
	if (!bench) {
		result(watch >= 0 && bcg_watch_read() == 1,
		       "the watch on the engines' metadata sees containers made after it began");
		snprintf(cmd, sizeof(cmd), "touch %s/other %s/containerd/other", run, run);
		if (system(cmd))
			die("touch");
		result(bcg_watch_read() == 0, "... and not files off the engines' paths");
	}

	procs = nr_processes();
	if (bench) {
		double c0 = cpu_s();

		r0 = reads();
		for (int i = 0; i < 10; i++)
			bcg_scan_containers(record, NULL);
		r1 = reads();
		printf("%d containers, %d processes: a scan %.2f ms of CPU, %lld reads\n",
		       nr_containers, procs, (cpu_s() - c0) * 100, (r1 - r0) / 10);
		goto out;
	}
	r0 = reads();
	bcg_scan_containers(record, NULL);
	r1 = reads();

	for (int i = 0; i < nr_containers; i++) {
		if (found[i] != containers[i].logger) {
			printf("# container %d: worker %d, its logger %d\n", i,
			       (int)found[i], (int)containers[i].logger);
			all = 0;
		}
	}
	result(all, "each container's worker is its shim's child with its id in the environment");
	result(found[0] != impostor,
	       "a process with a container's id in its environment that its shim did not start is not its worker");
	/*
	 * Per container: its pid file, its init's stat, its shim's cgroup and
	 * per child of the shim its stat, cgroup and environment.
	 */
	printf("# a scan of %d containers among %d processes: %lld reads\n",
	       nr_containers, procs, r1 - r0);
	if (r0 < 0 || procs < 0) {
		nr_tests++;
		printf("ok %d a scan reads each process's stat once # SKIP no /proc/self/io here\n",
		       nr_tests);
	} else {
		result(r1 - r0 <= procs + 12 * nr_containers,
		       "a scan reads each process's stat once, not once per container (at most processes + 12 per container)");
	}
	/*
	 * The CRI plugin's containers have no binary logger: a container
	 * with its directory there is never searched.
	 */
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/containerd/%s/containers/%.64s",
		 run, "io.containerd.grpc.v1.cri", containers[1].id);
	if (system(cmd))
		die("mkdir");
	memset(found, 0, nr_containers * sizeof(*found));
	bcg_scan_containers(record, NULL);
	result(!found[1] && found[2] == containers[2].logger,
	       "a CRI plugin's container is not searched for a logger, the others are");
	/*
	 * Written before SINCE, every pid file: a scan since then looks for
	 * no logger (its pid file and its init's stat a container; and
	 * reads() its own read of /proc/self/io).
	 */
	clock_gettime(CLOCK_REALTIME, &since);
	since.tv_sec += 3600;
	r0 = reads();
	bcg_scan_containers_since(count_unsought, &unsought, &since);
	r1 = reads();
	printf("# a scan since after the pid files: %d of %d loggers not looked for, %lld reads\n",
	       unsought, nr_containers, r1 - r0);
	result(unsought == nr_containers && (r0 < 0 || r1 - r0 <= 2 * nr_containers + 1),
	       "a scan since a time after the containers' pid files looks for no logger, and reads 2 files a container");
	snprintf(cmd, sizeof(cmd), "rm -r %s/containerd/%s/default/%.12s*", run,
		 "io.containerd.runtime.v2.task", containers[0].id);
	if (system(cmd))
		die("rm");
	result(bcg_watch_read() == 1, "... and a container that goes");

out:
	for (int i = 0; i < nr_containers; i++) {
		kill(-containers[i].shim, SIGKILL);
		waitpid(containers[i].shim, NULL, 0);
	}
	kill(impostor, SIGKILL);
	waitpid(impostor, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", run);
	if (system(cmd))
		printf("# could not remove %s\n", run);
	if (!bench)
		printf("# totals: pass:%d fail:%d\n", nr_tests - nr_failed, nr_failed);
	return nr_failed ? 1 : 0;
}
