// SPDX-License-Identifier: GPL-2.0
/*
 * borrowd: charges the CPU time of worker processes to their clients'
 * cpu.cfs.borrowing_us, without changing the workers.
 *
 * A BPF program on sched_switch (borrowd.bpf.c) adds up, per worker
 * process, the time its threads ran. Every period the agent charges what
 * each worker ran since the last charge to the worker's client group,
 * naming the worker ("USEC PID") where the kernel takes it, or, once it
 * has exited, the group it ran in ("USEC cgroup=ID"). Workers are
 * named on the command line or in the config file, or found from the
 * container engines' metadata: Podman's conmon and a containerd binary
 * logger (an unpatched nerdctl's) work for one container each.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "borrow_cg.h"
#include "borrow_quota.h"
#include "borrowd.bpf.h"
#include "borrowd.skel.h"

#define DEFAULT_CONFIG	"/etc/borrowd.conf"
#define DEFAULT_PACE_STATE	"/run/borrowd/paced"
#define DEFAULT_QUOTA_STATE	"/run/borrowd/quota"
/* A number in a string literal (the usage text's defaults). */
#define STR_(x)	#x
#define STR(x)	STR_(x)

/* How charges are paid: the kernel's file, or lowered quotas. */
enum { MODE_AUTO, MODE_KERNEL, MODE_QUOTA };
static const char *const mode_names[] = { "auto", "kernel", "quota" };

enum { SRC_CONFIG, SRC_ENGINE };

struct rule {
	pid_t worker;		/* tgid */
	int pidfd;		/* holds the worker: its pid may be reused */
	unsigned long long start;	/* the worker's start time (ticks) */
	char comm[16];
	struct bcg client;
	/*
	 * The group the worker ran in when last seen running (read before
	 * its time is counted): it names the worker once the worker has
	 * exited (its pid names nothing, or another process), so that its
	 * last charges stop at the same level.
	 */
	struct bcg worker_g;
	int source;
	char container[128];	/* SRC_ENGINE: the container's id */
	__u64 counted_ns;	/* worker CPU time covered by charges */
	__u64 sum_ns;		/* the BPF sum, this round */
	unsigned long long charged_us;
	unsigned long long failed_us;	/* charges that failed, not retried */
	int last_err;		/* reported once until it changes */
	bool seen;		/* in the last engine scan */
	bool stopped;		/* paced: SIGSTOPped by us */
	bool gone;		/* its pid is another process's now */
	unsigned long rounds, paused;
};

static struct {
	const char *config;
	long interval_ms, scan_ms;
	bool engine_podman, engine_containerd;
	bool pid_form;
	bool cgroup_form;	/* the kernel takes "USEC cgroup=ID" */
	bool verbose;
	bool pace;
	long pace_periods;
	long evidence_us;
	bool resume;
	int mode;
	double duration;
	char pod_logs[PATH_MAX];
	char pace_state[PATH_MAX];
	char quota_state[PATH_MAX];
	char stats[PATH_MAX];
} opt = {
	.interval_ms = 100, .scan_ms = 1000,
	.pod_logs = "/var/log/containers",
	.engine_podman = true, .engine_containerd = true,
	.pid_form = true,
	.cgroup_form = true,
	.pace_periods = 2,
	.evidence_us = DAEMON_EVIDENCE_US,
	.pace_state = DEFAULT_PACE_STATE,
	.quota_state = DEFAULT_QUOTA_STATE,
};

static struct rule *rules;
static int nr_rules, cap_rules;
/* The kernel has cpu.cfs.borrowing_us: 1, 0, -1 unknown (kernel_has_file()). */
static int kernel_file = -1;
static struct borrowd_bpf *skel;
static int nr_cpus;
static volatile sig_atomic_t stop, dump, wake;

void msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "borrowd: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static const char usage_text[] =
"Usage: borrowd [--config FILE] [--worker PID:CGROUP]... [--engines LIST]\n"
"               [--daemon PID|NAME|PATH]... [--pod-logs DIR] [--evidence-us US]\n"
"               [--interval-ms MS] [--scan-ms MS] [--mode auto|kernel|quota]\n"
"               [--quota-state FILE] [--pace] [--pace-periods N]\n"
"               [--pace-state FILE] [--no-worker-pid] [--stats FILE]\n"
"               [--duration SEC] [--verbose]\n"
"       borrowd [--config FILE] [--pace-state FILE] [--quota-state FILE] --resume\n"
"\n"
"Charges the CPU time of worker processes to their clients' cgroups. A BPF\n"
"program on sched_switch accounts each worker's CPU time; every interval\n"
"the agent charges it: to cpu.cfs.borrowing_us on a kernel with the\n"
"borrowing series (kernel mode), or, on any kernel with CFS bandwidth\n"
"control, by lowering the client's quota for the next periods and\n"
"restoring it once paid (quota mode). It logs the mode it uses at start.\n"
"\n"
"  --config FILE        read FILE (default " DEFAULT_CONFIG " if it exists)\n"
"                       before the flags, wherever --config stands; the\n"
"                       flags override it (--worker and --daemon add to\n"
"                       its workers and daemons)\n"
"  --worker PID:CGROUP  process PID works for CGROUP (a path in the cpu\n"
"                       hierarchy); repeatable\n"
"  --engines LIST       find workers in these engines' metadata, comma\n"
"                       separated: podman (conmon), containerd (a binary\n"
"                       logger such as an unpatched nerdctl's), or none\n"
"                       (default: podman,containerd)\n"
"  --daemon PID|NAME    a shared daemon (dockerd, containerd with CRI): each\n"
"                       of its threads' CPU time between two reads goes to\n"
"                       the container whose pipe or FIFO it read last;\n"
"                       by pid, or by name or path of its executable (a\n"
"                       process of the host's mount namespace); repeatable\n"
"  --pod-logs DIR       kubelet's links to pods' log files (NAME-ID.log):\n"
"                       a daemon's write to one is work for container ID\n"
"                       (default /var/log/containers)\n"
"  --evidence-us US     a daemon thread's work for a container ends once it\n"
"                       has run US microseconds (default " STR(DAEMON_EVIDENCE_US) ") since it\n"
"                       last read the container's output or wrote its\n"
"                       log; what it does past that is nobody's\n"
"  --mode MODE          auto (default): kernel where the kernel has\n"
"                       cpu.cfs.borrowing_us, quota otherwise; or force one\n"
"  --quota-state FILE   quota mode: the quotas it lowered, for the\n"
"                       watchdog or the next borrowd to restore should\n"
"                       borrowd be killed (default " DEFAULT_QUOTA_STATE ")\n"
"  --pace               stop a worker (SIGSTOP) while its client owes more\n"
"                       than N periods' quota (--pace-periods, default 2),\n"
"                       so that it works no faster than the client pays\n"
"                       (the process rule only); a watchdog process\n"
"                       continues the stopped workers if borrowd ends\n"
"  --pace-state FILE    the stopped workers, for the next borrowd to\n"
"                       continue should borrowd and its watchdog both be\n"
"                       killed (default " DEFAULT_PACE_STATE ")\n"
"  --resume             continue the workers and restore the quotas the\n"
"                       state files name, and exit\n"
"  --interval-ms MS     charge every MS milliseconds (default 100, one CFS\n"
"                       period)\n"
"  --scan-ms MS         look for containers every MS ms (default 1000)\n"
"  --no-worker-pid      charge \"USEC\" only, not \"USEC PID\" (the default\n"
"                       falls back to it on kernels without the form)\n"
"  --stats FILE         on SIGUSR1 and at exit, write the totals to FILE\n"
"                       (JSON)\n"
"  --duration SEC       exit after SEC seconds (for tests)\n"
"  --verbose            log every charge\n"
"\n"
"SIGTERM or SIGINT: charge what is left, restore the quotas and exit;\n"
"SIGUSR1: print totals.\n"
"Exit status: 0 stopped, 1 error, 2 bad arguments or config, 3 the kernel\n"
"lacks what borrowd needs, 4 not allowed to load the BPF program.\n";

static void usage(FILE *f)
{
	fputs(usage_text, f);
}

static struct rule *find_rule(pid_t worker)
{
	for (int i = 0; i < nr_rules; i++)
		if (rules[i].worker == worker)
			return &rules[i];
	return NULL;
}

static void read_comm(pid_t pid, char *comm, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	bcg_read_file(path, comm, len);
	comm[strcspn(comm, "\n")] = '\0';
}

/*
 * The group that WORKER (held by PIDFD) runs in now, into G: 0, or -ESRCH
 * if it no longer runs. Running after the read: the pid was the worker's
 * when read.
 */
static int worker_group(pid_t worker, int pidfd, struct bcg *g)
{
	if (bcg_from_pid(g, worker) || !bcg_pidfd_alive(pidfd))
		return -ESRCH;
	return 0;
}

/* The group R's worker runs in now, if it still runs. */
static void note_worker_group(struct rule *r)
{
	struct bcg g;

	if (!worker_group(r->worker, r->pidfd, &g))
		r->worker_g = g;
}

static int add_rule(pid_t worker, unsigned long long start,
		    const struct bcg *client, int source, const char *container)
{
	struct worker zero = { 0 };
	struct bcg_proc p;
	struct bcg wg;
	struct rule *r;
	int ret, pidfd;

	if (find_rule(worker)) {
		msg("worker %d already has a client: ignoring %s", (int)worker,
		    client->path);
		return 0;
	}
	if (bcg_grow((void **)&rules, &cap_rules, nr_rules + 1, sizeof(*rules)))
		return -ENOMEM;
	/* The process that runs now, if no start time is known. */
	if (!start && !bcg_proc_stat(worker, &p))
		start = p.start;
	pidfd = bcg_pidfd(worker, start);
	if (pidfd < 0)
		return pidfd;
	/*
	 * The group the worker runs in, before anything counts its time: a
	 * worker that exits is charged by it (charge()), and one whose group
	 * was never read would not be charged at all.
	 */
	if (worker_group(worker, pidfd, &wg)) {
		close(pidfd);
		return -ESRCH;
	}
	ret = bpf_map_update_elem(bpf_map__fd(skel->maps.workers), &worker,
				  &zero, BPF_NOEXIST);
	if (ret) {
		ret = -errno;
		close(pidfd);
		return ret;
	}
	/* Exited meanwhile: the entry may count another process already. */
	if (!bcg_pidfd_alive(pidfd)) {
		bpf_map_delete_elem(bpf_map__fd(skel->maps.workers), &worker);
		close(pidfd);
		return -ESRCH;
	}
	r = &rules[nr_rules++];
	memset(r, 0, sizeof(*r));
	r->worker = worker;
	r->pidfd = pidfd;
	r->start = start;
	r->client = *client;
	r->source = source;
	r->seen = true;
	r->worker_g = wg;
	snprintf(r->container, sizeof(r->container), "%s", container ?: "");
	read_comm(worker, r->comm, sizeof(r->comm));
	msg("worker %d (%s) works for %s%s%s", (int)worker, r->comm,
	    client->path, container ? ", container " : "", container ?: "");
	return 0;
}

/*
 * Pacing stops workers, and a stopped worker must not outlive the agent
 * that would continue it: its container blocks on a full pipe for good.
 * Two records of the stopped workers make sure none does:
 *
 * - the watchdog, a child forked at start that holds a pidfd of each
 *   stopped worker, sent over a socket before the worker is stopped. When
 *   the agent ends in any way (a crash, SIGKILL), the socket reads end of
 *   file and the watchdog continues them at once; so it does on SIGTERM
 *   (systemd stops the unit's processes together).
 * - the state file (--pace-state), "PID START" per stopped worker, written
 *   before it is stopped: were both killed at once, the next borrowd, or
 *   "borrowd --resume" (the unit's ExecStopPost), continues them first.
 *
 * Without a watchdog there is no pacing. Workers are signalled through
 * their pidfds, never by a pid that another process may hold by now.
 */
enum { WATCH_STOP = 1, WATCH_CONT };

struct watch_msg {
	int op;
	pid_t pid;
};

static int watch_sock = -1;
static pid_t watch_pid;

static void watch_on_signal(int sig)
{
	stop = 1;
}

/* The watchdog: never returns. */
static void watchdog(int sock)
{
	struct sigaction sa = { .sa_handler = watch_on_signal };
	struct held { pid_t pid; int fd; } *held = NULL;
	int nr_held = 0, cap_held = 0;

	prctl(PR_SET_NAME, "borrowd-watch");
	/* No SA_RESTART: a signal ends the wait below. */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGUSR1, SIG_IGN);
	while (!stop) {
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct watch_msg m;
		struct iovec iov = { .iov_base = &m, .iov_len = sizeof(m) };
		struct msghdr mh = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
		};
		struct cmsghdr *cm;
		ssize_t n;
		int fd = -1;

		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != sizeof(m))
			break;	/* the agent is gone */
		cm = CMSG_FIRSTHDR(&mh);
		if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
		if (m.op == WATCH_STOP && fd >= 0) {
			if (!bcg_grow((void **)&held, &cap_held, nr_held + 1, sizeof(*held))) {
				held[nr_held].pid = m.pid;
				held[nr_held++].fd = fd;
				continue;
			}
			/* No room: continue it now rather than lose it. */
			bcg_pidfd_signal(fd, SIGCONT);
		}
		if (fd >= 0)
			close(fd);
		for (int i = 0; m.op == WATCH_CONT && i < nr_held; i++) {
			if (held[i].pid != m.pid)
				continue;
			close(held[i].fd);
			held[i--] = held[--nr_held];
		}
	}
	for (int i = 0; i < nr_held; i++)
		if (!bcg_pidfd_signal(held[i].fd, SIGCONT))
			fprintf(stderr, "borrowd-watch: continued worker %d\n",
				(int)held[i].pid);
	/* Quotas still lowered: the state file has them (quota mode). */
	if (opt.mode == MODE_QUOTA)
		bq_restore_state(opt.quota_state);
	_exit(0);
}

/* A state file's directory; a missing one is made (0700). */
static void make_state_dir(const char *file)
{
	char dir[PATH_MAX];

	if (!file)
		return;
	snprintf(dir, sizeof(dir), "%s", file);
	*strrchr(dir, '/') = '\0';
	if (*dir && mkdir(dir, 0700) && errno != EEXIST)
		msg("cannot make %s: %s", dir, strerror(errno));
}

/* Starts the watchdog: 0 or -errno. Before the BPF objects are made. */
static int start_watchdog(void)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -errno;
	fflush(NULL);
	watch_pid = fork();
	if (watch_pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -errno;
	}
	if (!watch_pid) {
		close(sv[0]);
		watchdog(sv[1]);
	}
	close(sv[1]);
	watch_sock = sv[0];
	msg("watchdog %d %s if borrowd ends", (int)watch_pid,
	    opt.mode != MODE_QUOTA ? "continues the stopped workers" :
	    opt.pace ? "continues the stopped workers and restores the quotas" :
	    "restores the quotas");
	return 0;
}

static int watch_send(int op, const struct rule *r)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct watch_msg m = { .op = op, .pid = r->worker };
	struct iovec iov = { .iov_base = &m, .iov_len = sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (watch_sock < 0)
		return -ENOTCONN;
	if (op == WATCH_STOP) {
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &r->pidfd, sizeof(int));
	}
	return sendmsg(watch_sock, &mh, MSG_NOSIGNAL) == sizeof(m) ? 0 : -errno;
}

/* The state file: every worker stopped now. Written before a stop. */
static int save_pace_state(void)
{
	char tmp[PATH_MAX + 8];
	FILE *f;
	int ret = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.new", opt.pace_state) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	for (int i = 0; i < nr_rules; i++)
		if (rules[i].stopped)
			fprintf(f, "%d %llu\n", (int)rules[i].worker, rules[i].start);
	if (fclose(f) || rename(tmp, opt.pace_state))
		ret = -errno;
	return ret;
}

/* Continues the workers an earlier borrowd left stopped: how many. */
static int resume_pace_state(void)
{
	unsigned long long start;
	int pid, fd, n = 0;
	FILE *f;

	f = fopen(opt.pace_state, "re");
	if (!f)
		return 0;
	while (fscanf(f, "%d %llu", &pid, &start) == 2) {
		/* Only the process that was stopped, not one with its pid now. */
		fd = pid > 0 && start ? bcg_pidfd(pid, start) : -ESRCH;
		if (fd < 0)
			continue;
		if (!bcg_pidfd_signal(fd, SIGCONT)) {
			msg("continued worker %d, which an earlier borrowd left stopped",
			    pid);
			n++;
		}
		close(fd);
	}
	fclose(f);
	unlink(opt.pace_state);
	return n;
}

static void unpace(struct rule *r);

/* The watchdog is gone: no pacing without it. */
static void watchdog_lost(int err)
{
	msg("pacing: the watchdog is gone (%s): pacing off", strerror(-err));
	opt.pace = false;
	for (int i = 0; i < nr_rules; i++)
		unpace(&rules[i]);
	if (watch_sock >= 0) {
		close(watch_sock);
		waitpid(watch_pid, NULL, WNOHANG);
	}
	watch_sock = -1;
}

static void stop_worker(struct rule *r)
{
	int ret;

	ret = watch_send(WATCH_STOP, r);
	if (ret) {
		watchdog_lost(ret);
		return;
	}
	r->stopped = true;
	ret = save_pace_state();
	if (ret)
		msg("pacing: cannot write %s: %s", opt.pace_state, strerror(-ret));
	if (bcg_pidfd_signal(r->pidfd, SIGSTOP)) {
		r->stopped = false;
		watch_send(WATCH_CONT, r);
		save_pace_state();
	}
}

/*
 * Pacing: an unchanged worker cannot be made to wait for its client, so a
 * flooding client can make it work more than the client's quota pays for.
 * While the client owes more than one period's quota, the worker is
 * stopped (SIGSTOP); the client's periods pay the debt down meanwhile, and
 * its output waits in the pipe, as with any slow worker.
 */
/* Whether G owes more than --pace-periods of its quota (it has one). */
static bool owes_too_much(const struct bcg *g)
{
	long long owed, quota;
	int ret;

	ret = opt.mode == MODE_QUOTA ? bq_owed(g, &owed, &quota) :
				       bcg_owed(g, &owed, &quota);
	/*
	 * The periods pay a quota each, stopped or not: a debt that runs out
	 * while the worker is stopped leaves periods unpaid. More than one
	 * round of a busy worker's charges (two periods' quota) keeps it from
	 * running out, so the worker gets about what the client pays.
	 */
	return !ret && quota > 0 && owed > opt.pace_periods * quota;
}

/*
 * Stops R's worker while a level its time is charged to owes too much: the
 * client, or a limited ancestor below the one it shares with the worker (a
 * pod's quota over a container without one); the quotas as they are now.
 */
static void pace(struct rule *r)
{
	struct bcg level = r->client, wg;
	bool stop_it = false;
	size_t cut = 0;
	char *slash;

	if (!opt.pace)
		return;
	if (opt.pid_form && !bcg_from_pid(&wg, r->worker))
		cut = bcg_common_len(r->client.path, wg.path);
	while (strlen(level.path) > cut && !stop_it) {
		stop_it = owes_too_much(&level);
		slash = strrchr(level.path, '/');
		if (!slash || slash == level.path)
			break;
		*slash = '\0';
		*strrchr(level.dir, '/') = '\0';
	}
	r->rounds++;
	r->paused += stop_it;
	if (stop_it == r->stopped)
		return;
	if (stop_it)
		stop_worker(r);
	else
		unpace(r);
}

static void unpace(struct rule *r)
{
	int ret;

	if (!r->stopped)
		return;
	ret = bcg_pidfd_signal(r->pidfd, SIGCONT);
	/* A worker that exited needs no continuing. */
	if (ret && ret != -ESRCH)
		return;
	r->stopped = false;
	watch_send(WATCH_CONT, r);
	save_pace_state();
}

/* Charges of rules and clients that are gone: for the totals. */
static unsigned long long gone_charged_us, gone_failed_us;

/* ", N us failed" when any did. */
static const char *failed_note(unsigned long long failed_us)
{
	static char buf[48];

	buf[0] = '\0';
	if (failed_us)
		snprintf(buf, sizeof(buf), ", %llu us failed", failed_us);
	return buf;
}

static void remove_rule(struct rule *r)
{
	unpace(r);
	close(r->pidfd);
	bpf_map_delete_elem(bpf_map__fd(skel->maps.workers), &r->worker);
	msg("worker %d (%s) for %s: gone, charged %llu us in all%s", (int)r->worker,
	    r->comm, r->client.path, r->charged_us, failed_note(r->failed_us));
	gone_charged_us += r->charged_us;
	gone_failed_us += r->failed_us;
	*r = rules[--nr_rules];
}

/* The tgid of a thread, or 0. */
static pid_t tgid_of(__u32 tid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%u/status", tid);
	if (bcg_read_file(path, buf, sizeof(buf)) <= 0)
		return 0;
	p = strstr(buf, "\nTgid:");
	return p ? (pid_t)strtol(p + 6, NULL, 10) : 0;
}

/*
 * Per CPU, the process running there and for how long: a worker that runs
 * alone on a CPU is switched out rarely, and its time would otherwise be
 * charged only then. Read after the sums, so that a switch in between can
 * only leave a run out for one round, never count it twice.
 */
struct in_progress {
	pid_t tgid;
	__u64 ns;
};

/* Per possible CPU (as many as the kernel has: no fixed bound). */
static struct cpu_run *cpu_runs;
static struct in_progress *in_progress;

static void read_in_progress(struct in_progress *ip)
{
	struct cpu_run *runs = cpu_runs;
	struct timespec ts;
	__u32 zero = 0;
	__u64 now;

	memset(ip, 0, nr_cpus * sizeof(*ip));
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.runs), &zero, runs))
		return;
	for (int c = 0; c < nr_cpus; c++) {
		if (!runs[c].start || !runs[c].tid || runs[c].start > now)
			continue;
		ip[c].tgid = tgid_of(runs[c].tid);
		ip[c].ns = now - runs[c].start;
	}
}

static void report_error(struct rule *r, int err)
{
	if (err == r->last_err)
		return;
	r->last_err = err;
	if (err)
		msg("worker %d (%s): cannot charge %s: %s", (int)r->worker, r->comm,
		    r->client.path, bcg_strerror(err));
}

/*
 * Charges USEC that a worker spent for G, as the mode says: 0 or -error.
 * WORKER is its pid (0: its pid is another process's now), WG the group it
 * ran in (NULL: not known), which names it once its pid names nothing.
 */
static int charge(const struct bcg *g, unsigned long long usec, pid_t worker,
		  const struct bcg *wg)
{
	struct bcg now;
	int ret = -ESRCH;

	if (!opt.pid_form) {
		worker = 0;
		wg = NULL;
	} else if (worker <= 0 && !wg) {
		/*
		 * Neither the worker nor its group: "USEC" alone would cut at
		 * the agent's own group, and the client's limited ancestors
		 * that it shares with the worker would pay too.
		 */
		return -ESRCH;
	}
	if (opt.mode == MODE_QUOTA) {
		if (worker > 0 && !bcg_from_pid(&now, worker))
			wg = &now;
		return bq_charge(g, usec, wg);
	}
	if (worker > 0 || !wg) {
		ret = bcg_charge(g, usec, worker);
		if (ret == -BCG_EPIDFORM) {
			msg("the kernel takes no \"USEC PID\": charging \"USEC\"");
			opt.pid_form = false;
			return bcg_charge(g, usec, 0);
		}
	}
	/* Reaped, or its pid another's: the group it ran in names it. */
	if (ret == -ESRCH && wg && opt.cgroup_form) {
		ret = bcg_charge_for_group(g, usec, wg);
		if (ret == -BCG_ECGROUPFORM) {
			msg("the kernel takes no \"USEC cgroup=ID\": the last "
			    "charges of workers that exit are lost");
			opt.cgroup_form = false;
			ret = -ESRCH;
		}
	}
	return ret;
}

/* Charge what R's worker ran since its last charge. */
static int charge_rule(struct rule *r, __u64 total_ns)
{
	unsigned long long usec;
	int ret;

	if (total_ns <= r->counted_ns)
		return 0;
	usec = (total_ns - r->counted_ns) / 1000;
	if (!usec)
		return 0;
	ret = charge(&r->client, usec, r->gone ? 0 : r->worker,
		     &r->worker_g);
	report_error(r, ret);
	/*
	 * Sub-microsecond remainders stay for the next charge. A failed one
	 * is counted and not retried: a retry would carry the time up as one
	 * charge that grows for as long as charges fail (a group removed and
	 * made again at its path would pay for the time it did not exist).
	 */
	r->counted_ns += usec * 1000;
	if (ret) {
		r->failed_us += usec;
		return ret;
	}
	r->charged_us += usec;
	if (opt.verbose)
		msg("charged %llu us to %s for worker %d", usec, r->client.path,
		    (int)r->worker);
	return 0;
}

/* Charge every worker; with REAP, also drop the workers that exited. */
static void charge_all(bool reap)
{
	int fd = bpf_map__fd(skel->maps.workers);
	struct in_progress *ip = in_progress;
	static struct pollfd *pfds;
	static int cap_pfds;
	struct worker w;

	/* The sums first, then what runs now: see read_in_progress(). */
	for (int i = 0; i < nr_rules; i++) {
		if (bpf_map_lookup_elem(fd, &rules[i].worker, &w))
			w = (struct worker){ 0 };
		rules[i].sum_ns = w.ns;
		rules[i].gone = w.gone;
	}
	read_in_progress(ip);
	for (int i = 0; i < nr_rules; i++) {
		struct rule *r = &rules[i];
		__u64 total = r->sum_ns;

		/* Not a run of another process that has the pid now. */
		for (int c = 0; c < nr_cpus && !r->gone; c++)
			if (ip[c].tgid == r->worker)
				total += ip[c].ns;
		charge_rule(r, total);
		pace(r);
	}
	/*
	 * Workers that exited (their pidfds poll readable, one call for all):
	 * their last run is in the sums by now.
	 */
	if (!reap || !nr_rules ||
	    bcg_grow((void **)&pfds, &cap_pfds, nr_rules, sizeof(*pfds)))
		return;
	for (int i = 0; i < nr_rules; i++)
		pfds[i] = (struct pollfd){ .fd = rules[i].pidfd, .events = POLLIN };
	if (poll(pfds, nr_rules, 0) < 0)
		return;
	/* Backwards: removing moves the last rule into the slot. */
	for (int i = nr_rules - 1; i >= 0; i--) {
		if (!pfds[i].revents && !rules[i].gone) {
			note_worker_group(&rules[i]);
			continue;
		}
		if (!bpf_map_lookup_elem(fd, &rules[i].worker, &w))
			charge_rule(&rules[i], w.ns);
		remove_rule(&rules[i]);
	}
}

/* The group of C's init, if its pid is still that process's: 0 or -error. */
static int client_of(struct bcg *g, const struct bcg_container *c)
{
	struct bcg_proc p;
	int ret;

	ret = bcg_from_pid(g, c->init_pid);
	if (!ret && (bcg_proc_stat(c->init_pid, &p) || p.start != c->init_start))
		ret = -ESRCH;
	return ret;
}

/*
 * Our own nerdctl series makes its logger charge for itself: a worker whose
 * executable names the file is left alone where the kernel has the file,
 * or it would be charged twice.
 */
static bool charges_itself(pid_t pid)
{
	static struct { dev_t dev; ino_t ino; bool yes; } cache[16];
	static int nr_cache;
	char path[64];
	struct stat st;
	bool yes = false;
	void *map;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) || !st.st_size) {
		close(fd);
		return false;
	}
	for (int i = 0; i < nr_cache; i++) {
		if (cache[i].dev == st.st_dev && cache[i].ino == st.st_ino) {
			close(fd);
			return cache[i].yes;
		}
	}
	map = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map != MAP_FAILED) {
		yes = memmem(map, st.st_size, BORROWING_FILE,
			     strlen(BORROWING_FILE)) != NULL;
		munmap(map, st.st_size);
	}
	cache[nr_cache % 16].dev = st.st_dev;
	cache[nr_cache % 16].ino = st.st_ino;
	cache[nr_cache % 16].yes = yes;
	nr_cache++;
	return yes;
}

static int scan_container(const struct bcg_container *c, void *arg)
{
	static pid_t told[64];
	static int nr_told;
	struct rule *r;
	struct bcg g;

	if (c->worker_pid <= 0)
		return 0;
	if (!strcmp(c->engine, "podman") ? !opt.engine_podman : !opt.engine_containerd)
		return 0;
	r = find_rule(c->worker_pid);
	if (r) {
		r->seen = true;
		return 0;
	}
	/* Where the kernel lacks the file, it cannot: then borrowd charges. */
	if (kernel_file > 0 && charges_itself(c->worker_pid)) {
		bool known = false;

		for (int i = 0; i < nr_told && i < 64; i++)
			known |= told[i] == c->worker_pid;
		if (!known) {
			msg("worker %d of container %.12s charges for itself: left alone",
			    (int)c->worker_pid, c->id);
			told[nr_told++ % 64] = c->worker_pid;
		}
		return 0;
	}
	if (client_of(&g, c))
		return 0;	/* the container is going away */
	add_rule(c->worker_pid, c->worker_start, &g, SRC_ENGINE, c->id);
	return 0;
}

static void scan_engines(void)
{
	if (!opt.engine_podman && !opt.engine_containerd)
		return;
	for (int i = 0; i < nr_rules; i++)
		if (rules[i].source == SRC_ENGINE)
			rules[i].seen = false;
	bcg_scan_containers(scan_container, NULL);
	/* A container that is gone leaves its worker's last charges. */
	for (int i = 0; i < nr_rules; i++) {
		if (rules[i].source != SRC_ENGINE || rules[i].seen)
			continue;
		remove_rule(&rules[i]);
		i--;
	}
}

/*
 * The thread rule, for shared daemons: every scan maps each daemon's file
 * descriptors that are a container's (its FIFOs, in the directory the
 * engine keeps for the container: dockerd's
 * /run/docker/containerd/ID/init-stdout, containerd CRI's
 * .../containers/ID/io/N/ID-stdout; see engine_dirs) to the container's
 * group; the BPF programs charge a daemon thread's time to a client while
 * they have evidence (borrowd.bpf.c). dockerd's log file is in such a
 * directory (/var/lib/docker/containers/ID/ID-json.log); a Kubernetes
 * pod's log file (/var/log/pods/NS_POD_UID/NAME/N.log) is not, and its
 * name is partly the tenant's: kubelet names it by a symlink in
 * /var/log/containers (POD_NS_NAME-ID.log), which the scan resolves.
 */
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

struct client {
	__u32 id;		/* its slot in client_ns */
	pid_t daemon;
	char container[128];
	struct bcg g;
	__u64 counted_ns;
	unsigned long long charged_us;
	unsigned long long failed_us;
	int last_err;
	bool seen;
};

#define MAX_DAEMON_NAMES	8

static struct daemon_name daemon_names[MAX_DAEMON_NAMES];
static int nr_daemon_names;
static pid_t daemon_pids[MAX_DAEMON_NAMES];
static int nr_daemon_pids;
static bool daemon_pids_held;
static struct daemon daemons[MAX_DAEMON_NAMES * 4];
static int nr_daemons;
static struct client *clients;
static int nr_clients, cap_clients;
static struct fd_key *fds;	/* what fd_clients holds */
static int nr_fds, cap_fds;
static struct bcg_container *containers;
static int nr_containers, cap_containers;

struct pod_log {
	char path[PATH_MAX];	/* the log file, resolved */
	char id[65];		/* its container */
};

static struct pod_log *pod_logs;
static int nr_pod_logs, cap_pod_logs;

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

/* A daemon from now on, held by PIDFD (which it takes). */
static void daemon_add(pid_t pid, int pidfd)
{
	__u32 one = 1;

	if (nr_daemons == (int)ARRAY_SIZE(daemons) || find_rule(pid) ||
	    bpf_map_update_elem(bpf_map__fd(skel->maps.daemons), &pid, &one, BPF_ANY)) {
		close(pidfd);
		return;
	}
	daemons[nr_daemons].pid = pid;
	daemons[nr_daemons].pidfd = pidfd;
	daemons[nr_daemons].seen = true;
	read_comm(pid, daemons[nr_daemons].comm, sizeof(daemons[0].comm));
	msg("shared daemon %d (%s): charging its threads by what they read",
	    (int)pid, daemons[nr_daemons].comm);
	nr_daemons++;
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
static void find_daemons(void)
{
	char comm[16];
	struct dirent *de;
	DIR *proc;
	int n = 0, fd;

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
		bpf_map_delete_elem(bpf_map__fd(skel->maps.daemons), &daemons[i].pid);
		close(daemons[i].pidfd);
		msg("shared daemon %d (%s): gone", (int)daemons[i].pid, daemons[i].comm);
	}
	nr_daemons = n;
}

static int collect_container(const struct bcg_container *c, void *arg)
{
	if (bcg_grow((void **)&containers, &cap_containers, nr_containers + 1,
		     sizeof(*containers)))
		return -ENOMEM;
	containers[nr_containers++] = *c;
	return 0;
}

/* The client of DAEMON for a container, made if new: NULL if none left. */
static struct client *daemon_client(pid_t daemon, const struct bcg_container *c)
{
	static __u32 next_id = 1;
	__u64 zero = 0;
	struct client *cl;
	struct bcg g;
	__u32 id;

	for (int i = 0; i < nr_clients; i++)
		if (clients[i].daemon == daemon && !strcmp(clients[i].container, c->id))
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
	snprintf(cl->container, sizeof(cl->container), "%s", c->id);
	msg("shared daemon %d: reads for container %.12s go to %s", (int)daemon,
	    c->id, g.path);
	return cl;
}

static void charge_client(struct client *cl, __u64 total_ns)
{
	unsigned long long usec;
	int ret;

	if (total_ns <= cl->counted_ns)
		return;
	usec = (total_ns - cl->counted_ns) / 1000;
	if (!usec)
		return;
	ret = charge(&cl->g, usec, cl->daemon, NULL);
	if (ret != cl->last_err && ret)
		msg("daemon %d: cannot charge %s: %s", (int)cl->daemon, cl->g.path,
		    bcg_strerror(ret));
	cl->last_err = ret;
	/* A failed charge is counted and not retried, as charge_rule()'s. */
	cl->counted_ns += usec * 1000;
	if (ret) {
		cl->failed_us += usec;
		return;
	}
	cl->charged_us += usec;
	if (opt.verbose)
		msg("charged %llu us to %s for daemon %d", usec, cl->g.path,
		    (int)cl->daemon);
}

static void charge_clients(void)
{
	int fd = bpf_map__fd(skel->maps.client_ns);
	__u64 ns;

	for (int i = 0; i < nr_clients; i++)
		if (!bpf_map_lookup_elem(fd, &clients[i].id, &ns))
			charge_client(&clients[i], ns);
}

static void forget_client(const struct client *cl)
{
	msg("shared daemon %d: container %.12s gone, charged %llu us in all%s",
	    (int)cl->daemon, cl->container, cl->charged_us, failed_note(cl->failed_us));
	gone_charged_us += cl->charged_us;
	gone_failed_us += cl->failed_us;
}

/* kubelet's links: NAME-ID.log, ID 64 hex digits, to the container's log. */
static void scan_pod_logs(void)
{
	char link[PATH_MAX];
	struct dirent *de;
	const char *id;
	size_t len;
	DIR *dir;

	dir = opendir(opt.pod_logs);
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		len = strlen(de->d_name);
		if (len <= 69 || strcmp(de->d_name + len - 4, ".log") ||
		    de->d_name[len - 69] != '-')
			continue;
		id = de->d_name + len - 68;
		if (strspn(id, "0123456789abcdef") != 64)
			continue;
		if (bcg_grow((void **)&pod_logs, &cap_pod_logs, nr_pod_logs + 1,
			     sizeof(*pod_logs)))
			break;
		if (snprintf(link, sizeof(link), "%s/%s", opt.pod_logs,
			     de->d_name) >= (int)sizeof(link) ||
		    !realpath(link, pod_logs[nr_pod_logs].path))
			continue;
		memcpy(pod_logs[nr_pod_logs].id, id, 64);
		pod_logs[nr_pod_logs].id[64] = '\0';
		nr_pod_logs++;
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
static bool fd_carries_output(pid_t daemon, DIR *dir, const char *fd)
{
	char path[PATH_MAX], info[256];
	const char *flags;
	struct stat st;

	if (fstatat(dirfd(dir), fd, &st, 0))
		return false;
	if (S_ISFIFO(st.st_mode))
		return true;
	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", (int)daemon, fd);
	if (!S_ISREG(st.st_mode) || bcg_read_file(path, info, sizeof(info)) <= 0)
		return false;
	flags = strstr(info, "flags:");
	return flags && (strtoul(flags + 6, NULL, 8) & O_ACCMODE) != O_RDONLY;
}

/* The client of DAEMON whose file TARGET is (a descriptor's link), or NULL. */
static struct client *fd_client(pid_t daemon, const char *target, DIR *dir,
				const char *fd)
{
	char buf[128];
	const char *id = NULL;

	for (int p = 0; p < nr_pod_logs && !id; p++)
		if (!strcmp(target, pod_logs[p].path))
			id = pod_logs[p].id;
	if (!id && engine_file_id(target, buf, sizeof(buf)))
		id = buf;
	if (!id || !fd_carries_output(daemon, dir, fd))
		return NULL;
	for (int c = 0; c < nr_containers; c++)
		if (!strcmp(containers[c].id, id))
			return daemon_client(daemon, &containers[c]);
	return NULL;
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

static void scan_daemon_fds(void)
{
	int map = bpf_map__fd(skel->maps.fd_clients), nr_new = 0, n = 0;
	const __u32 no_client = 0;
	static struct fd_key *new;
	static int cap_new;
	char path[64], target[PATH_MAX];
	struct dirent *de;
	ssize_t len;
	DIR *dir;

	/* What the descriptors are compared with: only if a daemon has any. */
	nr_containers = 0;
	nr_pod_logs = 0;
	if (nr_daemons) {
		bcg_scan_containers(collect_container, NULL);
		scan_pod_logs();
	}
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
			cl = fd_client(daemons[d].pid, target, dir, de->d_name);
			if (cl)
				cl->seen = true;
			else if (!fd_runtime(target))
				continue;
			if (bcg_grow((void **)&new, &cap_new, nr_new + 1, sizeof(*new)))
				break;
			new[nr_new].tgid = daemons[d].pid;
			new[nr_new].fd = (__u32)strtoul(de->d_name, NULL, 10);
			bpf_map_update_elem(map, &new[nr_new], cl ? &cl->id : &no_client,
					    BPF_ANY);
			nr_new++;
		}
		closedir(dir);
	}
	/* Descriptors closed since the last scan. */
	for (int i = 0; i < nr_fds; i++) {
		bool still = false;

		for (int j = 0; j < nr_new && !still; j++)
			still = fds[i].tgid == new[j].tgid && fds[i].fd == new[j].fd;
		if (!still)
			bpf_map_delete_elem(map, &fds[i]);
	}
	if (!bcg_grow((void **)&fds, &cap_fds, nr_new, sizeof(*fds))) {
		memcpy(fds, new, nr_new * sizeof(*fds));
		nr_fds = nr_new;
	}
	/* A client whose daemon reads nothing for it any more: last charge. */
	charge_clients();
	for (int i = 0; i < nr_clients; i++) {
		if (clients[i].seen)
			clients[n++] = clients[i];
		else
			forget_client(&clients[i]);
	}
	nr_clients = n;
}

static int add_daemon(const char *val)
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

static const char *pace_note(const struct rule *r)
{
	static char buf[64];

	snprintf(buf, sizeof(buf), ", paused %lu of %lu rounds", r->paused, r->rounds);
	return buf;
}

static void print_totals(void)
{
	for (int i = 0; i < nr_rules; i++)
		msg("worker %d (%s) -> %s: charged %llu us%s%s", (int)rules[i].worker,
		    rules[i].comm, rules[i].client.path, rules[i].charged_us,
		    failed_note(rules[i].failed_us),
		    opt.pace ? pace_note(&rules[i]) : "");
	for (int i = 0; i < nr_clients; i++)
		msg("daemon %d, container %.12s -> %s: charged %llu us%s",
		    (int)clients[i].daemon, clients[i].container, clients[i].g.path,
		    clients[i].charged_us, failed_note(clients[i].failed_us));
	if (opt.mode == MODE_QUOTA)
		bq_print(stderr);
}

/* --stats: the totals as JSON, replaced whole (written aside, renamed). */
static void write_stats(void)
{
	unsigned long long charged = gone_charged_us, failed = gone_failed_us;
	char tmp[PATH_MAX + 8];
	struct rusage ru;
	FILE *f;

	if (!*opt.stats)
		return;
	for (int i = 0; i < nr_rules; i++) {
		charged += rules[i].charged_us;
		failed += rules[i].failed_us;
	}
	for (int i = 0; i < nr_clients; i++) {
		charged += clients[i].charged_us;
		failed += clients[i].failed_us;
	}
	getrusage(RUSAGE_SELF, &ru);
	snprintf(tmp, sizeof(tmp), "%s.new", opt.stats);
	f = fopen(tmp, "we");
	if (!f) {
		msg("%s: %s", tmp, strerror(errno));
		return;
	}
	fprintf(f, "{\"mode\": \"%s\", \"charged_us\": %llu, \"failed_us\": %llu, \"cpu_us\": %lld",
		mode_names[opt.mode], charged, failed,
		(long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
		ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
	if (opt.mode == MODE_QUOTA) {
		fprintf(f, ", ");
		bq_json(f);
	}
	fprintf(f, "}\n");
	if (fclose(f) || rename(tmp, opt.stats))
		msg("%s: %s", opt.stats, strerror(errno));
}

/* Settings, from the config file or the command line. */
struct pending_worker {
	pid_t pid;
	char cgroup[PATH_MAX];
};

static struct pending_worker *pending;
static int nr_pending;

static int set_worker(const char *val)
{
	const char *colon = strchr(val, ':');
	char pidstr[32];
	struct pending_worker *p;

	if (!colon || colon == val || (size_t)(colon - val) >= sizeof(pidstr) ||
	    !colon[1])
		return -EINVAL;
	p = realloc(pending, (nr_pending + 1) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	pending = p;
	snprintf(pidstr, sizeof(pidstr), "%.*s", (int)(colon - val), val);
	if (bcg_parse_pid(pidstr, &pending[nr_pending].pid))
		return -EINVAL;
	snprintf(pending[nr_pending].cgroup, PATH_MAX, "%s", colon + 1);
	nr_pending++;
	return 0;
}

static int set_engines(const char *val)
{
	char buf[128], *tok, *save = NULL;

	if (snprintf(buf, sizeof(buf), "%s", val) >= (int)sizeof(buf))
		return -EINVAL;
	opt.engine_podman = false;
	opt.engine_containerd = false;
	for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		if (!strcmp(tok, "podman"))
			opt.engine_podman = true;
		else if (!strcmp(tok, "containerd"))
			opt.engine_containerd = true;
		else if (strcmp(tok, "none"))
			return -EINVAL;
	}
	return 0;
}

static int set_long(const char *val, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(val, &end, 10);
	if (errno || *end || end == val || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int set_ms(const char *val, long *ms)
{
	return set_long(val, 1, 60000, ms);
}

static int set_bool(const char *val, bool *b)
{
	if (!strcmp(val, "yes") || !strcmp(val, "true") || !strcmp(val, "1"))
		*b = true;
	else if (!strcmp(val, "no") || !strcmp(val, "false") || !strcmp(val, "0"))
		*b = false;
	else
		return -EINVAL;
	return 0;
}

/* An absolute path, with room for a ".new" beside it. */
static int set_path(const char *val, char *buf, size_t size)
{
	if (val[0] != '/' || strlen(val) >= size - 8)
		return -EINVAL;
	snprintf(buf, size, "%s", val);
	return 0;
}

/* One setting, KEY as the config file names it: 0 or -EINVAL. */
static int set(const char *key, const char *val)
{
	if (!strcmp(key, "worker"))
		return set_worker(val);
	if (!strcmp(key, "engines"))
		return set_engines(val);
	if (!strcmp(key, "interval_ms"))
		return set_ms(val, &opt.interval_ms);
	if (!strcmp(key, "scan_ms"))
		return set_ms(val, &opt.scan_ms);
	if (!strcmp(key, "worker_pid"))
		return set_bool(val, &opt.pid_form);
	if (!strcmp(key, "verbose"))
		return set_bool(val, &opt.verbose);
	if (!strcmp(key, "pace"))
		return set_bool(val, &opt.pace);
	if (!strcmp(key, "pace_periods"))
		return set_ms(val, &opt.pace_periods);
	if (!strcmp(key, "evidence_us"))
		return set_long(val, 10, DAEMON_EVIDENCE_US_MAX, &opt.evidence_us);
	if (!strcmp(key, "pace_state"))
		return set_path(val, opt.pace_state, sizeof(opt.pace_state));
	if (!strcmp(key, "daemon"))
		return add_daemon(val);
	if (!strcmp(key, "mode")) {
		for (int m = 0; m < (int)ARRAY_SIZE(mode_names); m++) {
			if (!strcmp(val, mode_names[m])) {
				opt.mode = m;
				return 0;
			}
		}
		return -EINVAL;
	}
	if (!strcmp(key, "quota_state"))
		return set_path(val, opt.quota_state, sizeof(opt.quota_state));
	if (!strcmp(key, "stats"))
		return set_path(val, opt.stats, sizeof(opt.stats));
	if (!strcmp(key, "pod_logs")) {
		if (val[0] != '/' || strlen(val) >= sizeof(opt.pod_logs))
			return -EINVAL;
		snprintf(opt.pod_logs, sizeof(opt.pod_logs), "%s", val);
		return 0;
	}
	return -ENOENT;
}

/*
 * The config file: "key = value" lines, '#' comments; the keys are the long
 * options' names with '_' for '-' (worker = PID:CGROUP, engines = LIST,
 * interval_ms, scan_ms, worker_pid = yes|no, verbose = yes|no).
 */
static int read_config(const char *path, bool must_exist)
{
	char line[PATH_MAX + 64], *key, *val, *end;
	int lineno = 0, ret;
	FILE *f;

	f = fopen(path, "re");
	if (!f) {
		if (!must_exist && errno == ENOENT)
			return 0;
		msg("%s: %s", path, strerror(errno));
		return EXIT_USAGE;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		line[strcspn(line, "#\n")] = '\0';
		key = line + strspn(line, " \t");
		if (!*key)
			continue;
		val = strchr(key, '=');
		if (!val) {
			msg("%s:%d: not \"key = value\"", path, lineno);
			fclose(f);
			return EXIT_USAGE;
		}
		for (end = val; end > key && strchr(" \t=", end[-1]); end--)
			;
		*end = '\0';
		val++;
		val += strspn(val, " \t");
		for (end = val + strlen(val); end > val && strchr(" \t", end[-1]); end--)
			;
		*end = '\0';
		ret = set(key, val);
		if (ret) {
			msg("%s:%d: %s '%s'", path, lineno,
			    ret == -ENOENT ? "unknown key" : "invalid value for", key);
			fclose(f);
			return EXIT_USAGE;
		}
	}
	fclose(f);
	return 0;
}

static const struct option long_opts[] = {
	{ "config", required_argument, NULL, 'c' },
	{ "worker", required_argument, NULL, 'w' },
	{ "engines", required_argument, NULL, 'e' },
	{ "interval-ms", required_argument, NULL, 'i' },
	{ "scan-ms", required_argument, NULL, 's' },
	{ "no-worker-pid", no_argument, NULL, 'P' },
	{ "duration", required_argument, NULL, 'd' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "daemon", required_argument, NULL, 'D' },
	{ "pace", no_argument, NULL, 'p' },
	{ "pace-periods", required_argument, NULL, 'N' },
	{ "pod-logs", required_argument, NULL, 'L' },
	{ "evidence-us", required_argument, NULL, 'E' },
	{ "pace-state", required_argument, NULL, 'S' },
	{ "resume", no_argument, NULL, 'R' },
	{ "mode", required_argument, NULL, 'M' },
	{ "quota-state", required_argument, NULL, 'Q' },
	{ "stats", required_argument, NULL, 'T' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int parse_args(int argc, char **argv)
{
	const char *key = NULL;
	bool config_given = false;
	char *end;
	int c, ret;

	/* The config file first, whatever the order: flags override it. */
	for (int i = 1; i < argc - 1; i++)
		if (!strcmp(argv[i], "--config"))
			opt.config = argv[i + 1];
	for (int i = 1; i < argc; i++)
		if (!strncmp(argv[i], "--config=", 9))
			opt.config = argv[i] + 9;
	config_given = !!opt.config;
	ret = read_config(opt.config ?: DEFAULT_CONFIG, config_given);
	if (ret)
		return ret;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:w:e:i:s:Pd:vhD:pN:L:E:S:RM:Q:T:",
				long_opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			continue;
		case 'w':
			key = "worker";
			break;
		case 'e':
			key = "engines";
			break;
		case 'i':
			key = "interval_ms";
			break;
		case 's':
			key = "scan_ms";
			break;
		case 'D':
			key = "daemon";
			break;
		case 'N':
			key = "pace_periods";
			break;
		case 'L':
			key = "pod_logs";
			break;
		case 'E':
			key = "evidence_us";
			break;
		case 'S':
			key = "pace_state";
			break;
		case 'M':
			key = "mode";
			break;
		case 'Q':
			key = "quota_state";
			break;
		case 'T':
			key = "stats";
			break;
		case 'R':
			opt.resume = true;
			continue;
		case 'P':
			opt.pid_form = false;
			continue;
		case 'v':
			opt.verbose = true;
			continue;
		case 'p':
			opt.pace = true;
			continue;
		case 'd':
			opt.duration = strtod(optarg, &end);
			if (*end || end == optarg || !(opt.duration > 0))
				goto bad;
			continue;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			msg("option '%s' needs an argument", argv[optind - 1]);
			return EXIT_USAGE;
		default:
			msg("invalid option '%s'", argv[optind - 1]);
			return EXIT_USAGE;
		}
		if (set(key, optarg))
			goto bad;
	}
	if (optind < argc) {
		msg("unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	return 0;
bad:
	for (const struct option *o = long_opts; o->name; o++)
		if (o->val == c)
			msg("invalid value '%s' for --%s", optarg, o->name);
	return EXIT_USAGE;
}

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		dump = 1;
	else
		stop = 1;
	wake = 1;
}

/*
 * A task that runs on a CPU since before the program was attached has no
 * start time there until it is switched out. Visiting every CPU switches
 * each one once, so that the runs in progress are counted from now on.
 */
static void visit_cpus(void)
{
	size_t size = CPU_ALLOC_SIZE(nr_cpus);
	cpu_set_t *all = CPU_ALLOC(nr_cpus), *one = CPU_ALLOC(nr_cpus);

	if (all && one && !sched_getaffinity(0, size, all)) {
		for (int c = 0; c < nr_cpus; c++) {
			CPU_ZERO_S(size, one);
			CPU_SET_S(c, size, one);
			if (!sched_setaffinity(0, size, one))
				usleep(1000);
		}
		sched_setaffinity(0, size, all);
	}
	CPU_FREE(all);
	CPU_FREE(one);
}

/*
 * The kernel takes charges only from the initial cgroup namespace, and
 * /proc/PID/cgroup is read relative to one's own: a pod (Kubernetes gives
 * privileged pods a cgroup namespace of their own on cgroup v2) joins the
 * node's, that of PID 1 when it shares the node's PID namespace.
 */
static void join_host_cgroupns(void)
{
	char mine[64] = "", init[64] = "";
	int fd;

	if (readlink("/proc/self/ns/cgroup", mine, sizeof(mine) - 1) < 0 ||
	    readlink("/proc/1/ns/cgroup", init, sizeof(init) - 1) < 0 ||
	    !strcmp(mine, init))
		return;
	fd = open("/proc/1/ns/cgroup", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWCGROUP))
		msg("cannot join PID 1's cgroup namespace: %s (charges will be refused)",
		    strerror(errno));
	else
		msg("joined PID 1's cgroup namespace");
	if (fd >= 0)
		close(fd);
}

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && !opt.verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/*
 * Whether the kernel has cpu.cfs.borrowing_us: 1, 0, or -1 if nothing
 * tells. A group of the hierarchy's first level with the cpu controller
 * has it or not; with none, the kernel's symbols say.
 */
static int kernel_has_file(void)
{
	char path[PATH_MAX + 300], line[256];
	struct dirent *de;
	int has = -1;
	FILE *f;
	DIR *d;

	d = opendir(bcg_mount());
	while (d && has < 0 && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/%s", bcg_mount(), de->d_name,
			 bcg_is_v2() ? "cpu.max" : "cpu.cfs_quota_us");
		if (access(path, F_OK))
			continue;
		snprintf(path, sizeof(path), "%s/%s/%s", bcg_mount(), de->d_name,
			 BORROWING_FILE);
		has = !access(path, F_OK);
	}
	if (d)
		closedir(d);
	if (has >= 0)
		return has;
	f = fopen("/proc/kallsyms", "re");
	while (f && has < 0 && fgets(line, sizeof(line), f))
		if (strstr(line, " cpu_cfs_borrowing_write"))
			has = 1;
	if (f) {
		has = has > 0;
		fclose(f);
	}
	return has;
}

/* The mode, if auto: the kernel's file where there is one. */
static void choose_mode(void)
{
	int has = kernel_has_file();

	kernel_file = has;
	if (opt.mode == MODE_AUTO) {
		opt.mode = has > 0 ? MODE_KERNEL : MODE_QUOTA;
		msg("mode: %s (%s)", mode_names[opt.mode],
		    has > 0 ? "the kernel has " BORROWING_FILE :
		    has == 0 ? "the kernel has no " BORROWING_FILE ": lowering quotas" :
		    "no group tells whether the kernel has " BORROWING_FILE);
	} else {
		msg("mode: %s (forced)%s", mode_names[opt.mode],
		    opt.mode == MODE_KERNEL && !has ?
		    ": the kernel has no " BORROWING_FILE : "");
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	double start, next_scan = 0;
	int ret;

	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	ret = parse_args(argc, argv);
	if (ret)
		return ret;
	/* Workers an earlier borrowd left stopped, and its quotas, go first. */
	resume_pace_state();
	bq_restore_state(opt.quota_state);
	if (opt.resume)
		return 0;
	join_host_cgroupns();
	ret = bcg_init();
	if (ret) {
		msg("%s", bcg_strerror(ret));
		return 1;
	}
	choose_mode();
	bq_init(opt.quota_state, opt.interval_ms);
	/* The workers' clients must exist now; their files are checked too. */
	for (int i = 0; i < nr_pending; i++) {
		struct bcg g;

		ret = bcg_from_path(&g, pending[i].cgroup);
		if (!ret)
			ret = opt.mode == MODE_QUOTA ? bq_check(&g) : bcg_check(&g);
		if (ret) {
			msg("%s: %s", pending[i].cgroup, bcg_strerror(ret));
			return bcg_exit_status(ret) == 1 ? 1 : bcg_exit_status(ret);
		}
	}

	if (opt.pace || opt.mode == MODE_QUOTA) {
		make_state_dir(opt.pace ? opt.pace_state : NULL);
		make_state_dir(opt.mode == MODE_QUOTA ? opt.quota_state : NULL);
		ret = start_watchdog();
		if (ret) {
			msg("cannot start the watchdog: %s", strerror(-ret));
			return 1;
		}
	}
	libbpf_set_print(libbpf_log);
	nr_cpus = libbpf_num_possible_cpus();
	if (nr_cpus <= 0) {
		msg("cannot read the number of possible CPUs: %s", strerror(-nr_cpus));
		return 1;
	}
	cpu_runs = calloc(nr_cpus, sizeof(*cpu_runs));
	in_progress = calloc(nr_cpus, sizeof(*in_progress));
	if (!cpu_runs || !in_progress) {
		msg("out of memory");
		return 1;
	}
	skel = borrowd_bpf__open();
	if (skel) {
		skel->rodata->evidence_ns = opt.evidence_us * 1000ULL;
		ret = borrowd_bpf__load(skel);
		if (ret) {
			borrowd_bpf__destroy(skel);
			skel = NULL;
			errno = -ret;
		}
	}
	if (!skel) {
		msg("cannot load the BPF program: %s (needs root and a kernel with "
		    "BPF_SYSCALL and tracepoints)", strerror(errno));
		return errno == EPERM ? EXIT_NOPERM : EXIT_NOFEATURE;
	}
	/* A link that failed to attach holds nothing to destroy. */
	skel->links.borrowd_switch = bpf_program__attach(skel->progs.borrowd_switch);
	ret = libbpf_get_error(skel->links.borrowd_switch);
	if (ret) {
		skel->links.borrowd_switch = NULL;
	} else {
		skel->links.borrowd_fork = bpf_program__attach(skel->progs.borrowd_fork);
		ret = libbpf_get_error(skel->links.borrowd_fork);
		if (ret)
			skel->links.borrowd_fork = NULL;
	}
	if (ret) {
		msg("cannot attach to sched_switch and sched_wakeup_new: %s (is tracefs mounted?)",
		    strerror(-ret));
		borrowd_bpf__destroy(skel);
		return EXIT_NOFEATURE;
	}
	/* Reads matter for shared daemons only (and need syscall tracepoints). */
	if (nr_daemon_pids || nr_daemon_names) {
		struct bpf_program *io[] = { skel->progs.borrowd_read,
					     skel->progs.borrowd_read_done,
					     skel->progs.borrowd_write };
		struct bpf_link **links[] = { &skel->links.borrowd_read,
					      &skel->links.borrowd_read_done,
					      &skel->links.borrowd_write };

		for (size_t i = 0; i < ARRAY_SIZE(io) && !ret; i++) {
			*links[i] = bpf_program__attach(io[i]);
			ret = libbpf_get_error(*links[i]);
			if (ret)
				*links[i] = NULL;
		}
		if (ret) {
			msg("cannot attach to syscalls:sys_enter_read/write and "
			    "sys_exit_read: %s (needs CONFIG_FTRACE_SYSCALLS)",
			    strerror(-ret));
			borrowd_bpf__destroy(skel);
			return EXIT_NOFEATURE;
		}
	}
	for (int i = 0; i < nr_pending; i++) {
		struct bcg g;

		bcg_from_path(&g, pending[i].cgroup);
		ret = add_rule(pending[i].pid, 0, &g, SRC_CONFIG, NULL);
		if (ret)
			msg("worker %d: %s", (int)pending[i].pid, strerror(-ret));
	}
	visit_cpus();

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	start = now_s();
	msg("ready: charging every %ld ms in %s mode (engines:%s%s)", opt.interval_ms,
	    mode_names[opt.mode], opt.engine_podman ? " podman" : "",
	    opt.engine_containerd ? " containerd" : "");

	while (!stop) {
		double now = now_s();
		bool scan = now >= next_scan;

		if (scan) {
			scan_engines();
			find_daemons();
			scan_daemon_fds();
			next_scan = now + opt.scan_ms / 1000.0;
		}
		charge_all(scan);
		charge_clients();
		if (opt.mode == MODE_QUOTA)
			bq_tick();
		wake = 0;
		if (dump) {
			dump = 0;
			print_totals();
			write_stats();
		}
		if (opt.duration && now - start >= opt.duration)
			break;
		if (opt.mode == MODE_QUOTA)
			bq_sleep(opt.interval_ms / 1000.0, &wake);
		else
			usleep(opt.interval_ms * 1000);
	}
	charge_all(false);
	charge_clients();
	for (int i = 0; i < nr_rules; i++)
		unpace(&rules[i]);
	write_stats();
	if (opt.mode == MODE_QUOTA)
		bq_restore_all();
	if (watch_sock >= 0) {
		close(watch_sock);
		waitpid(watch_pid, NULL, 0);
	}
	print_totals();
	borrowd_bpf__destroy(skel);
	return 0;
}
