// SPDX-License-Identifier: GPL-2.0
/*
 * cpu.cfs.borrowing_us for the tools. libcgroup finds the cpu hierarchy
 * and a process's group. A group's files are read by plain read(2)s of its
 * directory: the agent reads them often, and restores quotas before
 * libcgroup is set up (borrowd --resume, its watchdog). The charge is one
 * write(2) of our own, because libcgroup reports a refused open as "value
 * does not exist" and loses the errno that tells EPERM from EINVAL.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <libcgroup.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "borrow_cg.h"

/* Room for cpu.stat: a dozen lines, the borrowing ones last. */
#define CPU_STAT_SIZE	4096

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC	0x63677270
#endif

static char cpu_mount[PATH_MAX];
static bool cpu_v2;

int bcg_init(void)
{
	struct statfs sfs;
	char *mnt = NULL;
	int ret;

	ret = cgroup_init();
	if (ret)
		return -BCG_ENOLIB;
	ret = cgroup_get_subsys_mount_point("cpu", &mnt);
	if (ret || !mnt)
		return -BCG_ENOLIB;
	snprintf(cpu_mount, sizeof(cpu_mount), "%s", mnt);
	free(mnt);
	if (statfs(cpu_mount, &sfs))
		return -errno;
	cpu_v2 = sfs.f_type == CGROUP2_SUPER_MAGIC;
	return 0;
}

const char *bcg_mount(void)
{
	return cpu_mount;
}

bool bcg_is_v2(void)
{
	return cpu_v2;
}

/* libcgroup's error as a negative errno where it has one. */
static int lib_err(int ret)
{
	switch (ret) {
	case 0:
		return 0;
	case ECGOTHER:
		return cgroup_get_last_errno() ? -cgroup_get_last_errno() : -EIO;
	case ECGROUPNOTEXIST:
		return -ENOENT;
	default:
		return -EIO;
	}
}

int bcg_from_path(struct bcg *g, const char *arg)
{
	size_t mlen = strlen(cpu_mount);
	char real[PATH_MAX];
	const char *p = arg;
	struct stat st;
	size_t len;

	/*
	 * A path under the mount point names the same group, also through a
	 * symbolic link (v1's /sys/fs/cgroup/cpu -> cpu,cpuacct).
	 */
	if (arg[0] == '/' && realpath(arg, real) &&
	    !strncmp(real, cpu_mount, mlen) && (real[mlen] == '/' || !real[mlen]))
		arg = real;
	if (!strncmp(arg, cpu_mount, mlen) && (arg[mlen] == '/' || !arg[mlen]))
		p = arg + mlen;
	if (strstr(p, "/../") || !strncmp(p, "../", 3) ||
	    (strlen(p) >= 3 && !strcmp(p + strlen(p) - 3, "/..")) ||
	    !strcmp(p, ".."))
		return -EINVAL;
	if (snprintf(g->path, sizeof(g->path), "%s%s",
		     p[0] == '/' ? "" : "/", p) >= (int)sizeof(g->path))
		return -ENAMETOOLONG;
	len = strlen(g->path);
	while (len > 1 && g->path[len - 1] == '/')
		g->path[--len] = '\0';
	if (snprintf(g->dir, sizeof(g->dir), "%s%s", cpu_mount,
		     len > 1 ? g->path : "") >= (int)sizeof(g->dir))
		return -ENAMETOOLONG;
	if (stat(g->dir, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return 0;
}

/* The lowest common ancestor of two paths in the hierarchy, its length. */
size_t bcg_common_len(const char *a, const char *b)
{
	size_t i = 0, last = 0;

	while (a[i] && a[i] == b[i]) {
		i++;
		if (a[i] == '/' || !a[i])
			last = i;
	}
	/* One ends where the other has a '/': an ancestor. */
	if (!a[i] && b[i] == '/')
		last = i;
	if (!b[i] && a[i] == '/')
		last = i;
	return last;
}

/* The rest of the first line of BUF that starts with PREFIX, or NULL. */
static char *line_after(char *buf, const char *prefix)
{
	size_t len = strlen(prefix);

	for (char *p = buf; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, prefix, len))
			return p + len;
	return NULL;
}

/* /proc/PID/cgroup, whole: its length, or -errno (-ESRCH: no process). */
static ssize_t read_proc_cgroup(pid_t pid, char *buf, size_t size)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	n = bcg_read_file(path, buf, size);
	return n == -ENOENT ? -ESRCH : n;
}

/* v2: the "0::PATH" line of /proc/PID/cgroup. */
static int v2_path_of(pid_t pid, char *path, size_t len)
{
	char buf[PATH_MAX + 4096], *p;
	ssize_t n;

	n = read_proc_cgroup(pid, buf, sizeof(buf));
	if (n < 0)
		return n;
	p = line_after(buf, "0::");
	if (!p)
		return -ENOENT;
	p[strcspn(p, "\n")] = '\0';
	/* A process that exited in between reads " (deleted)" here. */
	return snprintf(path, len, "%s", p) < (int)len ? 0 : -ENAMETOOLONG;
}

int bcg_from_pid(struct bcg *g, pid_t pid)
{
	char v2path[PATH_MAX];
	char *path = NULL;
	int ret;

	/*
	 * libcgroup 2.0 looks for the controller's name in /proc/PID/cgroup,
	 * which v2's single line does not have.
	 */
	if (cpu_v2) {
		ret = v2_path_of(pid, v2path, sizeof(v2path));
		return ret ?: bcg_from_path(g, v2path);
	}
	ret = cgroup_get_current_controller_path(pid, "cpu", &path);
	if (ret) {
		free(path);
		/* libcgroup says "no such cgroup" for a missing process. */
		return ret == ECGROUPNOTEXIST ? -ESRCH : lib_err(ret);
	}
	ret = bcg_from_path(g, path);
	free(path);
	return ret;
}

/* The run directory the engines keep their state in (tests move it). */
const char *bcg_run_dir(void)
{
	const char *dir = getenv("CGBORROW_RUNDIR");

	return dir && *dir ? dir : "/run";
}

ssize_t bcg_read_file(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

int bcg_proc_stat(pid_t pid, struct bcg_proc *p)
{
	char path[64], buf[1024], *s;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	n = bcg_read_file(path, buf, sizeof(buf));
	if (n < 0)
		return n == -ENOENT ? -ESRCH : (int)n;
	/* The name may hold anything, ')' too: the fields follow the last. */
	s = strrchr(buf, ')');
	if (!s || s[1] != ' ')
		return -EIO;
	s += 2;
	p->state = *s;
	/* From field 3 (the state) to field 22 (the start time). */
	for (int field = 3; s && field < 22; field++) {
		if (field == 4)
			p->ppid = (pid_t)strtol(s, NULL, 10);
		s = strchr(s, ' ');
		if (s)
			s++;
	}
	if (!s || *s < '0' || *s > '9')
		return -EIO;
	p->start = strtoull(s, NULL, 10);
	return 0;
}

bool bcg_pidfd_alive(int pidfd)
{
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

	/* A pidfd polls readable once its process has exited. */
	return poll(&pfd, 1, 0) == 0;
}

int bcg_pidfd(pid_t pid, unsigned long long start)
{
	struct bcg_proc p;
	int fd;

	fd = syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return errno == EINVAL ? -ESRCH : -errno;
	/*
	 * While the pidfd's process lives, PID is its: /proc/PID, read after
	 * the open, describes it if it is still alive after the read.
	 */
	if (bcg_proc_stat(pid, &p) || (start && p.start != start) ||
	    !bcg_pidfd_alive(fd)) {
		close(fd);
		return -ESRCH;
	}
	return fd;
}

int bcg_pidfd_signal(int pidfd, int sig)
{
	return syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) ? -errno : 0;
}

/* The N-th component of PATH from its end (1: the last). */
static void path_component(const char *path, int n, char *out, size_t len)
{
	char tmp[PATH_MAX], *slash;

	snprintf(tmp, sizeof(tmp), "%s", path);
	while (--n > 0 && (slash = strrchr(tmp, '/')))
		*slash = '\0';
	slash = strrchr(tmp, '/');
	/* Longer than any engine's ids: no match rather than a prefix. */
	if (snprintf(out, len, "%s", slash ? slash + 1 : tmp) >= (int)len)
		out[0] = '\0';
}

/*
 * A process named in a pid file must have started by the time the file was
 * written (its mtime): a later one holds a reused pid. Start times count
 * clock ticks since boot, mtimes are wall clock times, from the kernel's
 * coarse clock: 100 ms of slack for both.
 */
#define STARTED_SLACK_NS	100000000LL

static bool started_by(unsigned long long start, const struct timespec *when)
{
	struct timespec rt, bt;
	long long hz = sysconf(_SC_CLK_TCK), boot_ns;

	if (hz <= 0 || clock_gettime(CLOCK_REALTIME, &rt) ||
	    clock_gettime(CLOCK_BOOTTIME, &bt))
		return false;
	boot_ns = bcg_ts_ns(&rt) - bcg_ts_ns(&bt);
	return boot_ns + (long long)(start * (1000000000LL / hz)) <=
	       bcg_ts_ns(when) + STARTED_SLACK_NS;
}

/*
 * The process in PATH's pid file, if it started before the file was written
 * (when, into WRITTEN if not NULL).
 */
static pid_t pid_file_process(const char *path, struct bcg_proc *p,
			      struct timespec *written)
{
	struct stat st;
	pid_t pid;

	pid = (pid_t)bcg_read_number(path, 0);
	if (pid <= 0 || stat(path, &st) || bcg_proc_stat(pid, p) ||
	    !started_by(p->start, &st.st_mtim))
		return 0;
	if (written)
		*written = st.st_mtim;
	return pid;
}

/*
 * Every process's parent, read once per scan: a scan looks for each
 * containerd container's logger among its shim's children, and reading
 * every process's stat per container made a scan's cost the product of
 * the two counts.
 */
struct proc_index {
	struct { pid_t pid, ppid; } *proc;
	int n, cap;
	bool built;
};

static void proc_index_build(struct proc_index *ix)
{
	struct bcg_proc p;
	struct dirent *de;
	pid_t pid;
	DIR *proc;

	ix->built = true;
	proc = opendir("/proc");
	if (!proc)
		return;
	while ((de = readdir(proc))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid = (pid_t)strtol(de->d_name, NULL, 10);
		if (bcg_proc_stat(pid, &p) || p.ppid <= 1)
			continue;
		if (bcg_grow((void **)&ix->proc, &ix->cap, ix->n + 1,
			     sizeof(*ix->proc)))
			break;
		ix->proc[ix->n].pid = pid;
		ix->proc[ix->n++].ppid = p.ppid;
	}
	closedir(proc);
}

static void proc_index_free(struct proc_index *ix)
{
	free(ix->proc);
}

/*
 * A binary logger of containerd (as nerdctl's) is started by the
 * container's shim, with CONTAINER_ID and CONTAINER_NAMESPACE in its
 * environment. Anyone can set those: what the kernel vouches for decides.
 * The logger is a child of the shim, as the container's init is (the shim
 * reaps it), and it runs in the shim's cgroup, outside the container's:
 * processes a tenant starts (runc exec's also are the shim's children) are
 * in a container's cgroup.
 */
/* The logger's pid (its stat into LOGGER), or 0. */
static pid_t find_logger(struct proc_index *ix, const char *ns,
			 const char *id, pid_t init, pid_t shim,
			 struct bcg_proc *logger)
{
	/* Environments can be long; the shim's variables come last. */
	static char buf[65536];
	char want_id[160], want_ns[160], path[64];
	char shim_cg[4096], cg[4096];
	bool has_id, has_ns;
	struct bcg_proc p;
	pid_t pid;
	ssize_t n;

	if (shim <= 1)
		return 0;
	if (read_proc_cgroup(shim, shim_cg, sizeof(shim_cg)) <= 0)
		return 0;
	snprintf(want_id, sizeof(want_id), "CONTAINER_ID=%s", id);
	snprintf(want_ns, sizeof(want_ns), "CONTAINER_NAMESPACE=%s", ns);
	if (!ix->built)
		proc_index_build(ix);
	for (int i = 0; i < ix->n; i++) {
		pid = ix->proc[i].pid;
		/* (Its parent again: the pid may be another's since the index.) */
		if (ix->proc[i].ppid != shim || pid == init ||
		    bcg_proc_stat(pid, &p) || p.ppid != shim)
			continue;
		if (read_proc_cgroup(pid, cg, sizeof(cg)) <= 0 || strcmp(cg, shim_cg))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
		n = bcg_read_file(path, buf, sizeof(buf));
		has_id = false;
		has_ns = false;
		for (char *e = buf; n > 0 && e < buf + n; e += strlen(e) + 1) {
			has_id |= !strcmp(e, want_id);
			has_ns |= !strcmp(e, want_ns);
		}
		if (has_id && has_ns) {
			*logger = p;
			return pid;
		}
	}
	return 0;
}

/* Where an engine records a container's init process (and its worker). */
struct engine_layout {
	const char *engine;
	const char *pattern;	/* under the run directory */
	const char *worker;	/* the worker's pid file, if any */
	int id_depth;		/* the id's component from the end */
	bool logger;		/* a binary logger may work for it */
};

static const struct engine_layout engines[] = {
	/* containerd's shims (nerdctl; Docker with the system's containerd) */
	{ "containerd", "containerd/io.containerd.runtime.v2.task/*/*/init.pid",
	  NULL, 2, true },
	/* Docker with the containerd it starts itself */
	{ "docker", "docker/containerd/daemon/io.containerd.runtime.v2.task/*/*/init.pid",
	  NULL, 2, false },
	/* Podman as root, and CRI-O: conmon writes both */
	{ "podman", "containers/storage/*-containers/*/userdata/pidfile",
	  "conmon.pid", 3, false },
};

/*
 * A container of containerd's CRI plugin (a pod's container, or its
 * sandbox): its output goes through containerd itself, never a binary
 * logger. Its directories in the run directory are containerd's.
 */
static bool cri_container(const char *id)
{
	static const char *const kinds[] = { "containers", "sandboxes" };
	char path[PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
		if (snprintf(path, sizeof(path), "%s/containerd/io.containerd.grpc.v1.cri/%s/%s",
			     bcg_run_dir(), kinds[i], id) < (int)sizeof(path) &&
		    !stat(path, &st) && S_ISDIR(st.st_mode))
			return true;
	}
	return false;
}

int bcg_scan_containers(int (*fn)(const struct bcg_container *c, void *arg),
			void *arg)
{
	return bcg_scan_containers_since(fn, arg, NULL);
}

int bcg_scan_containers_since(int (*fn)(const struct bcg_container *c, void *arg),
			      void *arg, const struct timespec *since)
{
	char pattern[PATH_MAX], ns[128], wpath[PATH_MAX];
	struct proc_index ix = { 0 };
	struct bcg_proc init, w;
	struct bcg_container c;
	int ret = 0;

	for (size_t e = 0; !ret && e < ARRAY_SIZE(engines); e++) {
		glob_t gl;

		snprintf(pattern, sizeof(pattern), "%s/%s", bcg_run_dir(),
			 engines[e].pattern);
		if (glob(pattern, 0, NULL, &gl))
			continue;
		for (size_t i = 0; !ret && i < gl.gl_pathc; i++) {
			const char *file = gl.gl_pathv[i];

			memset(&c, 0, sizeof(c));
			snprintf(c.engine, sizeof(c.engine), "%s", engines[e].engine);
			path_component(file, engines[e].id_depth, c.id, sizeof(c.id));
			/* A pid file can outlive its process: is it still that one? */
			c.init_pid = pid_file_process(file, &init, &c.written);
			if (c.init_pid <= 0)
				continue;
			c.init_start = init.start;
			if (engines[e].worker) {
				snprintf(wpath, sizeof(wpath), "%.*s/%s",
					 (int)(strrchr(file, '/') - file), file,
					 engines[e].worker);
				/* CRI-O: the same layout, another name. */
				if (access(wpath, F_OK))
					snprintf(wpath, sizeof(wpath), "%.*s/conmon-pidfile",
						 (int)(strrchr(file, '/') - file), file);
				/* conmon is the parent of the container's init. */
				c.worker_pid = pid_file_process(wpath, &w, NULL);
				if (c.worker_pid != init.ppid)
					c.worker_pid = 0;
			} else if (engines[e].logger && since &&
				   bcg_ts_ns(&c.written) < bcg_ts_ns(since)) {
				c.logger_unsought = true;
			} else if (engines[e].logger && !cri_container(c.id)) {
				path_component(file, 3, ns, sizeof(ns));
				c.worker_pid = find_logger(&ix, ns, c.id, c.init_pid,
							   init.ppid, &w);
				c.logger_missing = !c.worker_pid;
			}
			if (c.worker_pid)
				c.worker_start = w.start;
			ret = fn(&c, arg);
		}
		globfree(&gl);
	}
	proc_index_free(&ix);
	return ret;
}

/*
 * Watching the engines' metadata (inotify): every directory on the way
 * from the run directory to a pid file that an engine's pattern matches.
 * A directory made there is watched as it comes, so that its pid files are
 * seen too. Watched by inode, a directory that several patterns cross is
 * one watch, at a level of each pattern (-1: not on its way).
 */
struct watch {
	char *path;
	signed char level[ARRAY_SIZE(engines)];
};

#define WATCH_EVENTS	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | \
			 IN_CLOSE_WRITE | IN_ONLYDIR)

static struct watch *watches;	/* by watch descriptor */
static int cap_watches;
static int watch_fd = -1;
static int watch_err;		/* a directory could not be watched */

/* Component LEVEL of engine E's pattern into BUF; the number of components. */
static int pattern_part(size_t e, int level, char *buf, size_t len)
{
	const char *p = engines[e].pattern;
	int n = 0;

	for (;;) {
		size_t part = strcspn(p, "/");

		if (n == level)
			snprintf(buf, len, "%.*s", (int)part, p);
		n++;
		if (!p[part])
			return n;
		p += part + 1;
	}
}

/* NAME in a directory at LEVEL of engine E's pattern may be on its way. */
static bool on_pattern(size_t e, int level, const char *name)
{
	char part[256];
	int n = pattern_part(e, level, part, sizeof(part));

	if (!fnmatch(part, name, FNM_PERIOD))
		return true;
	/* The leaf: the worker's pid file too (CRI-O names it otherwise). */
	return level == n - 1 && engines[e].worker &&
	       (!strcmp(name, engines[e].worker) || !strcmp(name, "conmon-pidfile"));
}

/* Watches DIR, at LEVEL of engine E's pattern, and what is on its way below. */
static void watch_dir(const char *dir, size_t e, int level)
{
	char part[256], child[PATH_MAX];
	struct dirent *de;
	struct stat st;
	int wd, n;
	DIR *d;

	wd = inotify_add_watch(watch_fd, dir, WATCH_EVENTS);
	if (wd < 0) {
		/*
		 * A directory that went meanwhile is no loss; the run
		 * directory is: nothing under it could be seen to come.
		 */
		if (level == 0 || (errno != ENOENT && errno != ENOTDIR))
			watch_err = -errno;
		return;
	}
	n = cap_watches;
	if (bcg_grow((void **)&watches, &cap_watches, wd + 1, sizeof(*watches))) {
		watch_err = -ENOMEM;
		return;
	}
	memset(watches + n, 0, (cap_watches - n) * sizeof(*watches));
	if (!watches[wd].path || strcmp(watches[wd].path, dir)) {
		free(watches[wd].path);
		watches[wd].path = strdup(dir);
		memset(watches[wd].level, -1, sizeof(watches[wd].level));
	}
	watches[wd].level[e] = level;
	n = pattern_part(e, level, part, sizeof(part));
	if (level >= n - 1)
		return;
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		if (fnmatch(part, de->d_name, FNM_PERIOD) ||
		    snprintf(child, sizeof(child), "%s/%s", dir, de->d_name) >= (int)sizeof(child))
			continue;
		if (de->d_type == DT_DIR ||
		    (de->d_type == DT_UNKNOWN && !stat(child, &st) && S_ISDIR(st.st_mode)))
			watch_dir(child, e, level + 1);
	}
	if (d)
		closedir(d);
}

/* Every engine's pattern, from the run directory down. */
static void watch_all(void)
{
	watch_err = 0;
	for (size_t e = 0; e < ARRAY_SIZE(engines); e++)
		watch_dir(bcg_run_dir(), e, 0);
}

int bcg_watch_containers(void)
{
	watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (watch_fd < 0)
		return -errno;
	watch_all();
	if (watch_err) {
		close(watch_fd);
		watch_fd = -1;
		return watch_err;
	}
	return watch_fd;
}

/* One event: whether it changed the metadata. */
static bool watch_event(const struct inotify_event *ev)
{
	bool made = (ev->mask & (IN_CREATE | IN_MOVED_TO)) && (ev->mask & IN_ISDIR);
	bool changed = false;
	char child[PATH_MAX];
	struct watch *w;

	/* Events were lost: watch everything again. */
	if (ev->mask & IN_Q_OVERFLOW) {
		watch_all();
		return true;
	}
	if (ev->wd < 0 || ev->wd >= cap_watches || !watches[ev->wd].path)
		return false;
	w = &watches[ev->wd];
	if (ev->mask & IN_IGNORED) {
		free(w->path);
		w->path = NULL;
		return false;
	}
	for (size_t e = 0; ev->len && e < ARRAY_SIZE(engines); e++) {
		if (w->level[e] < 0 || !on_pattern(e, w->level[e], ev->name))
			continue;
		changed = true;
		if (made && snprintf(child, sizeof(child), "%s/%s", w->path,
				     ev->name) < (int)sizeof(child))
			watch_dir(child, e, w->level[e] + 1);
	}
	return changed;
}

int bcg_watch_read(void)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event *ev;
	bool changed = false;
	ssize_t len;

	while ((len = read(watch_fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + len; p += sizeof(*ev) + ev->len) {
			ev = (const struct inotify_event *)p;
			changed |= watch_event(ev);
		}
	}
	return watch_err ?: changed;
}

struct match {
	const char *want;
	struct bcg_container found;
	int count;
	bool exact;
};

static int match_container(const struct bcg_container *c, void *arg)
{
	struct match *m = arg;

	if (strncmp(c->id, m->want, strlen(m->want)))
		return 0;
	if (!strcmp(c->id, m->want)) {
		m->found = *c;
		m->count = 1;
		m->exact = true;
		return 1;
	}
	if (!m->exact) {
		m->found = *c;
		m->count++;
	}
	return 0;
}

int bcg_from_container(struct bcg *g, const char *id, struct bcg_container *c)
{
	struct match m = { .want = id };

	if (!*id)
		return -EINVAL;
	bcg_scan_containers(match_container, &m);
	if (!m.count)
		return -BCG_ENOCONTAINER;
	if (m.count > 1)
		return -BCG_EAMBIGUOUS;
	if (c)
		*c = m.found;
	return bcg_from_pid(g, m.found.init_pid);
}

int bcg_check(const struct bcg *g)
{
	if (!strcmp(g->path, "/"))
		return -BCG_EROOT;
	if (bcg_dir_has(g->dir, BORROWING_FILE))
		return 0;
	/* A group removed since it was named is no missing feature. */
	if (access(g->dir, F_OK))
		return -ENOENT;
	if (cpu_v2 && !bcg_dir_has(g->dir, "cpu.max"))
		return -BCG_ENOCPU;
	return -BCG_ENOFEATURE;
}

/*
 * Writes the charge BUF to the group's file: 0 or -error. With FD, the file
 * stays open there for the next charge, which then costs one write(2), not
 * a check, an open and a close; the caller closes it (bcg_charge_close())
 * when it charges the group no more. A removed group's file refuses writes
 * (ENODEV): the path is then opened again, and names whatever group is
 * there now.
 */
static int write_charge(const struct bcg *g, int *fd, const char *buf)
{
	char path[PATH_MAX + 64];
	ssize_t len = strlen(buf);
	int f, ret = 0;

	if (fd && *fd >= 0) {
		if (write(*fd, buf, len) == len)
			return 0;
		ret = -errno;
		if (ret != -ENODEV && ret != -ENOENT)
			return ret;
		bcg_charge_close(fd);
	}
	ret = bcg_check(g);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "%s/%s", g->dir, BORROWING_FILE);
	f = open(path, O_WRONLY | O_CLOEXEC);
	if (f < 0)
		return errno == ENOENT ? bcg_check(g) ?: -ENOENT : -errno;
	if (write(f, buf, len) != len)
		ret = -errno;
	if (fd && !ret)
		*fd = f;
	else
		close(f);
	return ret;
}

void bcg_charge_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int bcg_charge(const struct bcg *g, int *fd, unsigned long long usec,
	       pid_t worker)
{
	char buf[64];
	int ret;

	if (worker > 0)
		snprintf(buf, sizeof(buf), "%llu %d", usec, (int)worker);
	else
		snprintf(buf, sizeof(buf), "%llu", usec);
	ret = write_charge(g, fd, buf);
	/* The number was checked: a refused pair is a kernel without it. */
	if (ret == -EINVAL && worker > 0)
		ret = -BCG_EPIDFORM;
	return ret;
}

int bcg_id(const struct bcg *g, unsigned long long *id)
{
	/* The handle is the 64-bit id: an inode number may hold 32 bits of it. */
	union {
		struct file_handle fh;
		char buf[sizeof(struct file_handle) + sizeof(*id)];
	} h = { .fh.handle_bytes = sizeof(*id) };
	int mount_id;

	if (name_to_handle_at(AT_FDCWD, g->dir, &h.fh, &mount_id, 0))
		return -errno;
	if (h.fh.handle_bytes != sizeof(*id))
		return -EOPNOTSUPP;
	memcpy(id, h.fh.f_handle, sizeof(*id));
	return 0;
}

int bcg_charge_for_group(const struct bcg *g, int *fd, unsigned long long usec,
			 const struct bcg *worker)
{
	unsigned long long id;
	char buf[64];
	int ret;

	ret = bcg_id(worker, &id);
	if (ret)
		return ret;
	snprintf(buf, sizeof(buf), "%llu cgroup=%llu", usec, id);
	ret = write_charge(g, fd, buf);
	if (ret == -EINVAL)
		ret = -BCG_ECGROUPFORM;
	return ret;
}

/* A control file's value, whitespace trimmed: 0 or -errno. */
static int read_value(const char *ctrl, const struct bcg *g, const char *name,
		      char *buf, int len)
{
	void *handle = NULL;
	int ret;

	ret = cgroup_read_value_begin(ctrl, g->path, (char *)name, &handle,
				      buf, len);
	if (ret && ret != ECGEOF)
		return lib_err(ret);
	cgroup_read_value_end(&handle);
	if (ret == ECGEOF)
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static long long number(const char *s)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s)
		return -1;
	return v;
}

/* The cpu.stat keys, as v2 names them and v1 (in nanoseconds). */
static const struct {
	const char *v2, *v1;
	size_t off;
	bool ns;	/* v1 reports it in nanoseconds */
} stat_keys[] = {
#define K(v2, v1, field, ns) { v2, v1, offsetof(struct bcg_stat, field), ns }
	K("usage_usec", NULL, usage_us, false),
	K("nr_periods", "nr_periods", nr_periods, false),
	K("nr_throttled", "nr_throttled", nr_throttled, false),
	K("throttled_usec", "throttled_time", throttled_us, true),
	K("nr_borrow_periods", "nr_borrow_periods", nr_borrow_periods, false),
	K("borrowed_usec", "borrowed_time", borrowed_us, true),
	K("borrow_deducted_usec", "borrow_deducted_time", deducted_us, true),
	K("borrow_outstanding_usec", "borrow_outstanding_time", outstanding_us, true),
	K("borrow_dropped_usec", "borrow_dropped_time", dropped_us, true),
#undef K
};

/* A small file's first line, by plain reads: the agent reads it often. */
static int read_small(const struct bcg *g, const char *name, char *buf, size_t len)
{
	char path[PATH_MAX + 64];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", g->dir, name);
	n = bcg_read_file(path, buf, len);
	return n < 0 ? (int)n : 0;
}

bool bcg_dir_has(const char *dir, const char *name)
{
	char path[PATH_MAX + 512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return !access(path, F_OK);
}

bool bcg_next_child(DIR *d, const char *dir, char *path, size_t size)
{
	struct dirent *de;

	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(path, size, "%s/%s", dir, de->d_name);
		return true;
	}
	return false;
}

long long bcg_read_number(const char *path, long long dflt)
{
	char buf[64];

	if (bcg_read_file(path, buf, sizeof(buf)) <= 0)
		return dflt;
	return strtoll(buf, NULL, 10);
}

bool bcg_dir_is_v2(const char *dir)
{
	return bcg_dir_has(dir, "cpu.max");
}

int bcg_read_quota(const char *dir, long long *quota_us, long long *period_us)
{
	char path[PATH_MAX + 512], buf[64];

	if (bcg_dir_is_v2(dir)) {
		snprintf(path, sizeof(path), "%s/cpu.max", dir);
		if (bcg_read_file(path, buf, sizeof(buf)) <= 0)
			return access(dir, F_OK) ? -ENOENT : -BCG_ENOCPU;
		*quota_us = strncmp(buf, "max", 3) ? strtoll(buf, NULL, 10) : -1;
		*period_us = strtoll(buf + strcspn(buf, " "), NULL, 10);
	} else {
		snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", dir);
		if (bcg_read_file(path, buf, sizeof(buf)) <= 0)
			return access(dir, F_OK) ? -ENOENT : -BCG_ENOCPU;
		*quota_us = strtoll(buf, NULL, 10);
		snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir);
		*period_us = bcg_read_number(path, -1);
	}
	if (*quota_us < 0)
		*quota_us = -1;
	return *period_us > 0 ? 0 : -EIO;
}

/* cpu.stat, whole ("KEY VALUE" lines): its length, or -errno. */
static ssize_t read_cpu_stat(const char *dir, char *buf, size_t size)
{
	char path[PATH_MAX + 512];

	snprintf(path, sizeof(path), "%s/cpu.stat", dir);
	return bcg_read_file(path, buf, size);
}

/* KEY's value in cpu.stat's text BUF, or -1. */
static long long stat_value(char *buf, const char *key)
{
	char prefix[64];
	const char *p;

	snprintf(prefix, sizeof(prefix), "%s ", key);
	p = line_after(buf, prefix);
	return p ? number(p) : -1;
}

long long bcg_stat_key(const char *dir, const char *key)
{
	char buf[CPU_STAT_SIZE];

	if (read_cpu_stat(dir, buf, sizeof(buf)) <= 0)
		return -1;
	return stat_value(buf, key);
}

long long bcg_read_usage(const char *dir)
{
	return bcg_read_usage_periods(dir, NULL);
}

long long bcg_read_usage_periods(const char *dir, long long *nr_periods)
{
	char path[PATH_MAX + 512], buf[CPU_STAT_SIZE];
	long long ns;

	if (cpu_v2) {
		/* One read: v2's cpu.stat flushes the group's statistics. */
		if (read_cpu_stat(dir, buf, sizeof(buf)) <= 0) {
			if (nr_periods)
				*nr_periods = -1;
			return -1;
		}
		if (nr_periods)
			*nr_periods = stat_value(buf, "nr_periods");
		return stat_value(buf, "usage_usec");
	}
	if (nr_periods)
		*nr_periods = bcg_stat_key(dir, "nr_periods");
	/* cpuacct mounted with cpu ("cpu,cpuacct"), as distributions do. */
	snprintf(path, sizeof(path), "%s/cpuacct.usage", dir);
	ns = bcg_read_number(path, -1);
	return ns < 0 ? -1 : ns / 1000;
}

int bcg_read(const struct bcg *g, struct bcg_stat *st)
{
	char buf[CPU_STAT_SIZE];
	int ret;

	memset(st, 0xff, sizeof(*st));	/* every field -1 */
	ret = bcg_check(g);
	if (ret)
		return ret;
	ret = read_small(g, BORROWING_FILE, buf, sizeof(buf));
	if (ret)
		return ret == -ENOENT ? bcg_check(g) ?: ret : ret;
	st->owed_us = number(buf);
	/* What it cannot read stays -1. */
	bcg_read_quota(g->dir, &st->quota_us, &st->period_us);
	/*
	 * v1's cpuacct by libcgroup, which finds it also where it is a
	 * hierarchy of its own, not mounted with cpu (bcg_read_usage()
	 * reads the cpu group's directory).
	 */
	if (!cpu_v2 && !read_value("cpuacct", g, "cpuacct.usage", buf, sizeof(buf)) &&
	    number(buf) >= 0)
		st->usage_us = number(buf) / 1000;
	if (read_cpu_stat(g->dir, buf, sizeof(buf)) <= 0)
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(stat_keys); i++) {
		const char *key = cpu_v2 ? stat_keys[i].v2 : stat_keys[i].v1;
		long long v;

		if (!key)
			continue;
		v = stat_value(buf, key);
		if (v >= 0 && !cpu_v2 && stat_keys[i].ns)
			v /= 1000;
		*(long long *)((char *)st + stat_keys[i].off) = v;
	}
	return 0;
}

int bcg_owed(const struct bcg *g, long long *owed_us, long long *quota_us)
{
	long long period_us;
	char buf[64];
	int ret;

	ret = read_small(g, BORROWING_FILE, buf, sizeof(buf));
	if (ret)
		return ret;
	*owed_us = number(buf);
	return bcg_read_quota(g->dir, quota_us, &period_us);
}

int bcg_parse_usec(const char *s, unsigned long long *usec)
{
	char *end;

	/* Only digits: strtoull would take a sign, spaces and "0x". */
	if (!*s || strspn(s, "0123456789") != strlen(s))
		return -EINVAL;
	errno = 0;
	*usec = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	return 0;
}

int bcg_parse_pid(const char *s, pid_t *pid)
{
	unsigned long long v;

	if (bcg_parse_usec(s, &v) || v == 0 || v > INT_MAX)
		return -EINVAL;
	*pid = (pid_t)v;
	return 0;
}

int bcg_grow(void **arr, int *cap, int need, size_t size)
{
	void *p;

	if (need <= *cap)
		return 0;
	p = realloc(*arr, (size_t)(need * 2) * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = need * 2;
	return 0;
}

const char *bcg_strerror(int err)
{
	switch (-err) {
	case BCG_ENOFEATURE:
		return "this kernel has no " BORROWING_FILE
		       " (it lacks the CFS bandwidth borrowing feature)";
	case BCG_ENOCPU:
		return "the cpu controller is not enabled for this group "
		       "(see its parent's cgroup.subtree_control)";
	case BCG_EROOT:
		return "the root cgroup has no " BORROWING_FILE
		       ": name a group below it";
	case BCG_ENOLIB:
		return "libcgroup finds no cpu controller hierarchy";
	case BCG_ENOCONTAINER:
		return "no container engine (containerd, Docker, Podman) runs such a container";
	case BCG_EAMBIGUOUS:
		return "the container id prefix matches several containers";
	case BCG_EPIDFORM:
		return "this kernel does not take a worker pid (\"USEC PID\"); "
		       "charge without --worker-pid";
	case BCG_ECGROUPFORM:
		return "this kernel does not take a worker's cgroup "
		       "(\"USEC cgroup=ID\"); charge with --worker-pid";
	case EACCES:
	case EPERM:
		return "permission denied: a charge needs what moving the worker "
		       "into the group would (cgroup v2: write access to "
		       "cgroup.procs of their common ancestor; v1: CAP_SYS_ADMIN "
		       "in the initial user and cgroup namespaces)";
	case EINVAL:
		return "invalid value: the kernel takes a decimal number of microseconds";
	case ERANGE:
		return "value out of range";
	case ESRCH:
		return "no such process";
	case ENOENT:
		return "no such cgroup (or, with nsdelegate, the group or the "
		       "worker is outside this cgroup namespace)";
	default:
		return strerror(-err);
	}
}

int bcg_exit_status(int err)
{
	switch (-err) {
	case 0:
		return 0;
	case BCG_ENOFEATURE:
		return EXIT_NOFEATURE;
	case EACCES:
	case EPERM:
		return EXIT_NOPERM;
	case EINVAL:
	case ERANGE:
	case BCG_EROOT:
	case BCG_EAMBIGUOUS:
	case BCG_EPIDFORM:
	case BCG_ECGROUPFORM:
		return EXIT_USAGE;
	default:
		return 1;
	}
}
