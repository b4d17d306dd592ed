// SPDX-License-Identifier: GPL-2.0
/*
 * borrowd's thread rule, for shared daemons (--daemon): every scan maps
 * each daemon's file descriptors that are a container's (its FIFOs, in the
 * directory the engine keeps for the container: dockerd's
 * /run/docker/containerd/ID/init-stdout, containerd CRI's
 * .../containers/ID/io/N/ID-stdout; see engine_dirs) to the container's
 * group; the BPF programs charge a daemon thread's time to a client while
 * they have evidence (borrowd.bpf.c). dockerd's log file is in such a
 * directory (/var/lib/docker/containers/ID/ID-json.log); a Kubernetes
 * pod's log file (/var/log/pods/NS_POD_UID/NAME/N.log) is not, and its
 * name is partly the tenant's: kubelet names it by a symlink in
 * /var/log/containers (POD_NS_NAME-ID.log), which the scan resolves.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "borrow_cg.h"
#include "borrow_quota.h"
#include "borrowd.bpf.h"
#include "borrowd.h"
#include "borrowd.skel.h"

struct daemon {
	pid_t pid;
	int pidfd;		/* holds it: its pid may be reused */
	char comm[16];
	bool seen;
};

/* A daemon named by its executable: NAME (in the system's bin dirs) or a path. */
struct daemon_name {
	char comm[16];
	char path[PATH_MAX];	/* empty: NAME in the bin dirs */
};

#define MAX_DAEMON_NAMES	8

static struct daemon_name daemon_names[MAX_DAEMON_NAMES];
static int nr_daemon_names;
static pid_t daemon_pids[MAX_DAEMON_NAMES];
static int nr_daemon_pids;
static bool daemon_pids_held;
static struct daemon daemons[MAX_DAEMONS];
static int nr_daemons;
struct client *clients;
int nr_clients;
static int cap_clients;
static struct fd_key *fds;	/* what fd_clients holds */
static int nr_fds, cap_fds;

struct pod_log {
	char path[PATH_MAX];	/* the log file, resolved */
	char id[65];		/* its container */
	char link[NAME_MAX + 1];	/* kubelet's link to it, in --pod-logs */
	ino_t link_ino;		/* the link resolved (a new link, a new inode) */
	struct timespec link_mtime;
};

struct pod_logs {
	struct pod_log *log;
	int nr, cap;
};

/* This scan's, sorted by path; the last scan's, sorted by link. */
static struct pod_logs pod_logs, last_pod_logs;

/* DAEMON is known already: mark it seen if it still runs. */
static bool daemon_known(pid_t pid)
{
	for (int i = 0; i < nr_daemons; i++) {
		if (daemons[i].pid != pid)
			continue;
		daemons[i].seen = bcg_pidfd_alive(daemons[i].pidfd);
		return true;
	}
	return false;
}

/*
 * The daemons' tgids as the BPF programs compare them, after the list was
 * compacted from NR daemons: the slots below the count are rewritten with
 * the daemons kept, each held by its pidfd and alive at the last look (one
 * may be there twice meanwhile), the slots past it cleared.
 */
static void publish_daemons(int nr)
{
	for (int i = 0; i < nr_daemons; i++)
		skel->bss->daemon_tgids[i] = daemons[i].pid;
	__atomic_store_n(&skel->bss->nr_daemon_slots, nr_daemons, __ATOMIC_RELEASE);
	for (int i = nr_daemons; i < nr; i++)
		skel->bss->daemon_tgids[i] = 0;
}

/* A daemon from now on, held by PIDFD (which it takes). */
static void daemon_add(pid_t pid, int pidfd)
{
	if (nr_daemons == (int)ARRAY_SIZE(daemons) || find_rule(pid)) {
		close(pidfd);
		return;
	}
	daemons[nr_daemons].pid = pid;
	daemons[nr_daemons].pidfd = pidfd;
	daemons[nr_daemons].seen = true;
	read_comm(pid, daemons[nr_daemons].comm, sizeof(daemons[0].comm));
	msg("shared daemon %d (%s): charging its threads by what they read",
	    (int)pid, daemons[nr_daemons].comm);
	/* Its slot alone: another daemon's may have gone since its last look. */
	skel->bss->daemon_tgids[nr_daemons] = pid;
	nr_daemons++;
	__atomic_store_n(&skel->bss->nr_daemon_slots, nr_daemons, __ATOMIC_RELEASE);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/*
 * Anyone can name a process after a daemon. A daemon by name is a process
 * of the host, not of a container: in the mount namespace of PID 1, its
 * executable the daemon's binary there (the path given, or NAME in the
 * system's bin directories, seen through PID 1's root).
 */
static bool is_daemon(pid_t pid, const struct daemon_name *dn)
{
	static const char *const dirs[] = {
		"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin",
		"/sbin", "/bin",
	};
	char path[PATH_MAX + 64];
	struct stat host_mnt, mnt, exe, bin;

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	if (stat("/proc/1/ns/mnt", &host_mnt) || stat(path, &mnt) ||
	    !same_file(&host_mnt, &mnt))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, &exe))
		return false;
	if (dn->path[0]) {
		if (snprintf(path, sizeof(path), "/proc/1/root%s",
			     dn->path) >= (int)sizeof(path))
			return false;
		return !stat(path, &bin) && same_file(&exe, &bin);
	}
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		if (snprintf(path, sizeof(path), "/proc/1/root%s/%s", dirs[i],
			     dn->comm) < (int)sizeof(path) &&
		    !stat(path, &bin) && same_file(&exe, &bin))
			return true;
	}
	return false;
}

/* The daemons named by pid, and the processes a daemon's name finds. */
void find_daemons(void)
{
	int n = 0, fd, was;
	char comm[16];
	struct dirent *de;
	DIR *proc;

	for (int i = 0; i < nr_daemons; i++)
		daemons[i].seen = false;
	/*
	 * By pid: the process that has it at the first scan, held by a pidfd;
	 * once it exits, another process with its pid is not the daemon.
	 */
	for (int i = 0; i < nr_daemon_pids && !daemon_pids_held; i++) {
		fd = bcg_pidfd(daemon_pids[i], 0);
		if (fd >= 0)
			daemon_add(daemon_pids[i], fd);
		else
			msg("--daemon %d: no such process", (int)daemon_pids[i]);
	}
	daemon_pids_held = true;
	for (int i = 0; i < nr_daemons; i++)
		daemons[i].seen = bcg_pidfd_alive(daemons[i].pidfd);
	proc = nr_daemon_names ? opendir("/proc") : NULL;
	if (proc) {
		while ((de = readdir(proc))) {
			pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);

			if (pid <= 0)
				continue;
			read_comm(pid, comm, sizeof(comm));
			for (int i = 0; i < nr_daemon_names; i++) {
				if (strcmp(comm, daemon_names[i].comm) || daemon_known(pid))
					continue;
				/* Checked with the pid held: it cannot change hands. */
				fd = bcg_pidfd(pid, 0);
				if (fd < 0)
					continue;
				if (is_daemon(pid, &daemon_names[i]) && bcg_pidfd_alive(fd))
					daemon_add(pid, fd);
				else
					close(fd);
			}
		}
		closedir(proc);
	}
	for (int i = 0; i < nr_daemons; i++) {
		if (daemons[i].seen) {
			daemons[n++] = daemons[i];
			continue;
		}
		close(daemons[i].pidfd);
		msg("shared daemon %d (%s): gone", (int)daemons[i].pid, daemons[i].comm);
	}
	was = nr_daemons;
	nr_daemons = n;
	publish_daemons(was);
}

/*
 * A scan compares each of a daemon's descriptors with the containers, the
 * pod logs and the clients: sorted once a scan, each is a binary search,
 * not a walk of all of them (a daemon holds two or three descriptors a
 * container).
 */
static int cmp_pod_log(const void *a, const void *b)
{
	return strcmp(((const struct pod_log *)a)->path, ((const struct pod_log *)b)->path);
}

/* A path (the key) against a pod log's. */
static int cmp_path_pod_log(const void *path, const void *log)
{
	return strcmp(path, ((const struct pod_log *)log)->path);
}

static int cmp_client(const void *a, const void *b)
{
	const struct client *x = a, *y = b;

	if (x->daemon != y->daemon)
		return x->daemon < y->daemon ? -1 : 1;
	return strcmp(x->container, y->container);
}

static int cmp_fd_key(const void *a, const void *b)
{
	const struct fd_key *x = a, *y = b;

	if (x->tgid != y->tgid)
		return x->tgid < y->tgid ? -1 : 1;
	return x->fd < y->fd ? -1 : x->fd > y->fd;
}

/* The clients up to this index are sorted (cmp_client); those after, new. */
static int nr_sorted_clients;

/* The client of DAEMON for a container, made if new: NULL if none left. */
static struct client *daemon_client(pid_t daemon, const struct bcg_container *c)
{
	/*
	 * The key holds what cmp_client() reads and nothing else: a client
	 * is some 8 KB (its group's paths), and a scan looks one up for
	 * each of a daemon's files, 1,500 on a node of 500 containers.
	 */
	static struct client key;
	static __u32 next_id = 1;
	__u64 zero = 0;
	struct client *cl;
	struct bcg g;
	__u32 id;

	key.daemon = daemon;
	snprintf(key.container, sizeof(key.container), "%s", c->id);
	cl = bsearch(&key, clients, nr_sorted_clients, sizeof(*clients), cmp_client);
	if (cl)
		return cl;
	for (int i = nr_sorted_clients; i < nr_clients; i++)
		if (!cmp_client(&key, &clients[i]))
			return &clients[i];
	if (client_of(&g, c) || nr_clients >= MAX_CLIENTS - 1)
		return NULL;
	/* The lowest id that no client holds. */
	for (id = next_id;; id = id % (MAX_CLIENTS - 1) + 1) {
		bool used = false;

		for (int i = 0; i < nr_clients && !used; i++)
			used = clients[i].id == id;
		if (!used)
			break;
	}
	next_id = id % (MAX_CLIENTS - 1) + 1;
	if (bcg_grow((void **)&clients, &cap_clients, nr_clients + 1, sizeof(*clients)))
		return NULL;
	bpf_map_update_elem(bpf_map__fd(skel->maps.client_ns), &id, &zero, BPF_ANY);
	cl = &clients[nr_clients++];
	memset(cl, 0, sizeof(*cl));
	cl->id = id;
	cl->daemon = daemon;
	cl->g = g;
	account_init(&cl->acct);
	snprintf(cl->container, sizeof(cl->container), "%s", c->id);
	msg("shared daemon %d: reads for container %.12s go to %s", (int)daemon,
	    c->id, g.path);
	return cl;
}

/* The clients' sums: the BPF map mapped into our memory (as the workers'). */
static __u64 *client_sums;

static void charge_client(struct client *cl, bool final)
{
	__u64 total_ns = __atomic_load_n(&client_sums[cl->id], __ATOMIC_RELAXED);
	long long ret;

	ret = settle(&cl->acct, &cl->g, total_ns, cl->daemon, NULL, final);
	if (ret < 0)
		msg("daemon %d: cannot charge %s: %s", (int)cl->daemon,
		    cl->g.path, bcg_strerror(ret));
	else if (ret && opt.verbose)
		msg("charged %lld us to %s for daemon %d", ret, cl->g.path,
		    (int)cl->daemon);
}

int map_client_sums(void)
{
	void *p;

	p = mmap(NULL, sizeof(*client_sums) * MAX_CLIENTS, PROT_READ | PROT_WRITE,
		 MAP_SHARED, bpf_map__fd(skel->maps.client_ns), 0);
	if (p == MAP_FAILED)
		return -errno;
	client_sums = p;
	return 0;
}

void charge_clients(bool final)
{
	for (int i = 0; i < nr_clients; i++)
		charge_client(&clients[i], final);
}

static void forget_client(struct client *cl)
{
	msg("shared daemon %d: container %.12s gone, charged %llu us in all%s",
	    (int)cl->daemon, cl->container, cl->acct.charged_us,
	    failed_note(cl->acct.failed_us));
	gone_charged_us += cl->acct.charged_us;
	gone_failed_us += cl->acct.failed_us;
	account_close(&cl->acct);
}

static int cmp_pod_log_link(const void *a, const void *b)
{
	return strcmp(((const struct pod_log *)a)->link, ((const struct pod_log *)b)->link);
}

/*
 * kubelet's links: NAME-ID.log, ID 64 hex digits, to the container's log.
 * A link that the last scan resolved, the same inode with the same mtime,
 * keeps its path: an lstat(2) a link and scan, not a realpath(3)'s walk of
 * every component of its target.
 */
static void scan_pod_logs(void)
{
	struct pod_logs swap = last_pod_logs;
	struct pod_log *log, *last;
	char link[PATH_MAX];
	struct dirent *de;
	const char *id;
	struct stat st;
	size_t len;
	DIR *dir;

	qsort(pod_logs.log, pod_logs.nr, sizeof(*pod_logs.log), cmp_pod_log_link);
	last_pod_logs = pod_logs;
	pod_logs = swap;
	pod_logs.nr = 0;
	dir = opendir(opt.pod_logs);
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		len = strlen(de->d_name);
		if (len <= 69 || len > NAME_MAX || strcmp(de->d_name + len - 4, ".log") ||
		    de->d_name[len - 69] != '-')
			continue;
		id = de->d_name + len - 68;
		if (strspn(id, "0123456789abcdef") != 64)
			continue;
		if (bcg_grow((void **)&pod_logs.log, &pod_logs.cap, pod_logs.nr + 1,
			     sizeof(*pod_logs.log)))
			break;
		log = &pod_logs.log[pod_logs.nr];
		memcpy(log->link, de->d_name, len + 1);
		if (snprintf(link, sizeof(link), "%s/%s", opt.pod_logs,
			     de->d_name) >= (int)sizeof(link) || lstat(link, &st))
			continue;
		last = bsearch(log, last_pod_logs.log, last_pod_logs.nr, sizeof(*log),
			       cmp_pod_log_link);
		if (last && last->link_ino == st.st_ino &&
		    last->link_mtime.tv_sec == st.st_mtim.tv_sec &&
		    last->link_mtime.tv_nsec == st.st_mtim.tv_nsec)
			memcpy(log->path, last->path, sizeof(log->path));
		else if (!realpath(link, log->path))
			continue;
		log->link_ino = st.st_ino;
		log->link_mtime = st.st_mtim;
		memcpy(log->id, id, 64);
		log->id[64] = '\0';
		pod_logs.nr++;
	}
	closedir(dir);
}

/*
 * The directories where the engines keep each container's FIFOs and log
 * files, one directory per container named by its id: dockerd's
 * /run/docker/containerd/ID/init-stdout and its log
 * /var/lib/docker/containers/ID/ID-json.log, containerd CRI's
 * /run/containerd/io.containerd.grpc.v1.cri/containers/ID/io/N/ID-stdout.
 * Only the engine writes there; a file elsewhere whose name holds an id
 * (a pod or container name, a file a tenant names) is no container's.
 */
static const struct {
	bool run;		/* under the run directory */
	const char *dir;
} engine_dirs[] = {
	{ true, "docker/containerd" },
	{ true, "containerd/io.containerd.grpc.v1.cri/containers" },
	{ false, "/var/lib/docker/containers" },
};

/* The container id of TARGET if it is in an engine's directory for one. */
static bool engine_file_id(const char *target, char *id, size_t len)
{
	char dir[PATH_MAX];
	const char *rest, *slash;
	size_t n;

	for (size_t i = 0; i < ARRAY_SIZE(engine_dirs); i++) {
		n = snprintf(dir, sizeof(dir), "%s%s%s/",
			     engine_dirs[i].run ? bcg_run_dir() : "",
			     engine_dirs[i].run ? "/" : "", engine_dirs[i].dir);
		if (n >= sizeof(dir) || strncmp(target, dir, n))
			continue;
		rest = target + n;
		slash = strchr(rest, '/');
		if (!slash || slash == rest || (size_t)(slash - rest) >= len)
			continue;
		snprintf(id, len, "%.*s", (int)(slash - rest), rest);
		return true;
	}
	return false;
}

/*
 * Whether a daemon's descriptor FD (a name in DIR, its /proc/PID/fd)
 * carries a container's output: a FIFO, or a file open for writing. A log
 * file open for reading serves a `logs` request, which is not the
 * container's work.
 */
static bool fd_carries_output(pid_t daemon, DIR *dir, const char *fd, bool *file)
{
	char path[PATH_MAX], info[256];
	const char *flags;
	struct stat st;

	*file = false;
	if (fstatat(dirfd(dir), fd, &st, 0))
		return false;
	if (S_ISFIFO(st.st_mode))
		return true;
	*file = true;
	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", (int)daemon, fd);
	if (!S_ISREG(st.st_mode) || bcg_read_file(path, info, sizeof(info)) <= 0)
		return false;
	flags = strstr(info, "flags:");
	return flags && (strtoul(flags + 6, NULL, 8) & O_ACCMODE) != O_RDONLY;
}

/*
 * The directories of the log files the daemons write (inotify): a log
 * file rotated (kubelet's, dockerd's json-file: renamed, and a new one
 * made and opened) is a descriptor to map, with no change of the engines'
 * metadata. Watched as their files are mapped; a directory removed drops
 * its watch.
 */
static int log_dirs_fd = -1;

int watch_log_dirs(void)
{
	log_dirs_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	return log_dirs_fd < 0 ? -errno : log_dirs_fd;
}

bool log_dirs_changed(void)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool changed = false;

	while (read(log_dirs_fd, buf, sizeof(buf)) > 0)
		changed = true;
	return changed;
}

/*
 * The directory of FILE, a log file a daemon writes, watched. A watch
 * refused (fs.inotify.max_user_watches reached) is said once: that
 * directory's rotations are then known from the next rescan. A directory
 * gone meanwhile is no loss.
 */
static void watch_log_dir(const char *file)
{
	static bool said;
	char dir[PATH_MAX];
	const char *slash = strrchr(file, '/');

	if (log_dirs_fd < 0 || !slash || slash == file ||
	    snprintf(dir, sizeof(dir), "%.*s", (int)(slash - file), file) >= (int)sizeof(dir))
		return;
	if (inotify_add_watch(log_dirs_fd, dir, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR) >= 0 ||
	    errno == ENOENT || errno == ENOTDIR || said)
		return;
	said = true;
	msg("cannot watch the log directory %s: %s (a log rotated there, or in another "
	    "such, is known from the next rescan)", dir, strerror(errno));
}

/*
 * The client of DAEMON whose file TARGET is (a descriptor's link), or NULL;
 * a log file's directory is watched the first time (NEW: the descriptor is
 * not in the last scan's map).
 */
static struct client *fd_client(pid_t daemon, const char *target, DIR *dir,
				const char *fd, bool new)
{
	struct bcg_container key;
	struct pod_log *log;
	struct bcg_container *c;
	struct client *cl;
	bool file;

	log = bsearch(target, pod_logs.log, pod_logs.nr, sizeof(*pod_logs.log),
		      cmp_path_pod_log);
	if (log)
		snprintf(key.id, sizeof(key.id), "%s", log->id);
	else if (!engine_file_id(target, key.id, sizeof(key.id)))
		return NULL;
	if (!fd_carries_output(daemon, dir, fd, &file))
		return NULL;
	c = bsearch(&key, containers, nr_containers, sizeof(*containers), cmp_container);
	cl = c ? daemon_client(daemon, c) : NULL;
	if (cl && file && new)
		watch_log_dir(target);
	return cl;
}

/*
 * A descriptor of the daemon's runtime: the Go scheduler's wake-up eventfd
 * (a pipe before Go 1.21, as in Debian's dockerd and containerd) and
 * epoll. Go reads and writes them between and within any goroutine's
 * work, a container's lines too: they neither end nor begin work for one.
 */
static bool fd_runtime(const char *target)
{
	return !strncmp(target, "anon_inode:", 11) || !strncmp(target, "pipe:", 5);
}

bool daemons_held(void)
{
	return nr_daemons > 0;
}

bool daemon_exited(void)
{
	for (int i = 0; i < nr_daemons; i++)
		if (!bcg_pidfd_alive(daemons[i].pidfd))
			return true;
	return false;
}

void scan_daemon_fds(void)
{
	int map = bpf_map__fd(skel->maps.fd_clients), nr_new = 0, n = 0;
	const __u32 no_client = 0;
	static struct fd_key *new;
	static int cap_new;
	struct fd_key key;
	char path[64], target[PATH_MAX];
	struct dirent *de;
	ssize_t len;
	DIR *dir;

	/*
	 * What the descriptors are compared with: only if a daemon has any;
	 * the containers as the scan that came with this one found them
	 * (sorted by id).
	 */
	if (nr_daemons) {
		scan_pod_logs();
		qsort(pod_logs.log, pod_logs.nr, sizeof(*pod_logs.log), cmp_pod_log);
	}
	qsort(clients, nr_clients, sizeof(*clients), cmp_client);
	nr_sorted_clients = nr_clients;
	for (int i = 0; i < nr_clients; i++)
		clients[i].seen = false;
	for (int d = 0; d < nr_daemons; d++) {
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)daemons[d].pid);
		dir = opendir(path);
		if (!dir)
			continue;
		while ((de = readdir(dir))) {
			struct client *cl;

			if (de->d_name[0] < '0' || de->d_name[0] > '9')
				continue;
			len = readlinkat(dirfd(dir), de->d_name, target, sizeof(target) - 1);
			if (len <= 0)
				continue;
			target[len] = '\0';
			key.tgid = daemons[d].pid;
			key.fd = (__u32)strtoul(de->d_name, NULL, 10);
			cl = fd_client(daemons[d].pid, target, dir, de->d_name,
				       !bsearch(&key, fds, nr_fds, sizeof(*fds), cmp_fd_key));
			if (cl)
				cl->seen = true;
			else if (!fd_runtime(target))
				continue;
			if (bcg_grow((void **)&new, &cap_new, nr_new + 1, sizeof(*new)))
				break;
			new[nr_new] = key;
			bpf_map_update_elem(map, &new[nr_new], cl ? &cl->id : &no_client,
					    BPF_ANY);
			nr_new++;
		}
		closedir(dir);
	}
	/* Descriptors closed since the last scan: both lists sorted. */
	qsort(new, nr_new, sizeof(*new), cmp_fd_key);
	for (int i = 0, j = 0; i < nr_fds; i++) {
		while (j < nr_new && cmp_fd_key(&new[j], &fds[i]) < 0)
			j++;
		if (j == nr_new || cmp_fd_key(&new[j], &fds[i]))
			bpf_map_delete_elem(map, &fds[i]);
	}
	if (!bcg_grow((void **)&fds, &cap_fds, nr_new, sizeof(*fds))) {
		memcpy(fds, new, nr_new * sizeof(*fds));
		nr_fds = nr_new;
	}
	/* A client whose daemon reads nothing for it any more: last charge. */
	for (int i = 0; i < nr_clients; i++) {
		charge_client(&clients[i], !clients[i].seen);
		if (clients[i].seen)
			clients[n++] = clients[i];
		else
			forget_client(&clients[i]);
	}
	nr_clients = n;
}

int add_daemon(const char *val)
{
	struct daemon_name *dn;
	const char *base;
	pid_t pid;

	if (!bcg_parse_pid(val, &pid)) {
		if (nr_daemon_pids == MAX_DAEMON_NAMES)
			return -EINVAL;
		daemon_pids[nr_daemon_pids++] = pid;
		return 0;
	}
	if (nr_daemon_names == MAX_DAEMON_NAMES)
		return -EINVAL;
	dn = &daemon_names[nr_daemon_names];
	if (val[0] == '/') {
		/* A path: the process name is its file name's first 15 bytes. */
		base = strrchr(val, '/') + 1;
		if (!*base || strlen(val) >= sizeof(dn->path))
			return -EINVAL;
		snprintf(dn->path, sizeof(dn->path), "%s", val);
		snprintf(dn->comm, sizeof(dn->comm), "%s", base);
	} else {
		if (!*val || strlen(val) >= sizeof(dn->comm) || strchr(val, '/'))
			return -EINVAL;
		snprintf(dn->comm, sizeof(dn->comm), "%s", val);
		dn->path[0] = '\0';
	}
	nr_daemon_names++;
	return 0;
}

/* Whether any daemon is named, by pid or by name. */
bool daemons_named(void)
{
	return nr_daemon_pids || nr_daemon_names;
}
