// SPDX-License-Identifier: GPL-2.0
/*
 * borrowd: charges the CPU time of worker processes to their clients'
 * cpu.cfs.borrowing_us, without changing the workers.
 *
 * A BPF program on sched_stat_runtime (borrowd.bpf.c) adds up, per worker
 * process, the time its threads ran, as the kernel accounts it. Every
 * period the agent charges what each worker ran since the last charge to
 * the worker's client group,
 * naming the worker ("USEC PID") where the kernel takes it, or, once it
 * has exited, the group it ran in ("USEC cgroup=ID"). Workers are
 * named on the command line or in the config file, or found from the
 * container engines' metadata: Podman's conmon and a containerd binary
 * logger (an unpatched nerdctl's) work for one container each.
 *
 * This file is the program: its settings, the mode, the BPF programs and
 * the main loop; borrowd.h says where the rest is.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "borrow_cg.h"
#include "borrow_quota.h"
#include "borrowd.bpf.h"
#include "borrowd.h"
#include "borrowd.skel.h"

#define DEFAULT_CONFIG	"/etc/borrowd.conf"
#define DEFAULT_PACE_STATE	"/run/borrowd/paced"
#define DEFAULT_QUOTA_STATE	"/run/borrowd/quota"
/*
 * After the engines' metadata changed, it is read every --scan-ms for this
 * long: a containerd logger starts after the pid file that names its
 * container, and no event tells when.
 */
#define SETTLE_S	10
/* A number in a string literal (the usage text's defaults). */
#define STR_(x)	#x
#define STR(x)	STR_(x)

const char *const mode_names[] = { "auto", "kernel", "quota" };

struct borrowd_opts opt = {
	.interval_ms = 100, .scan_ms = 1000, .rescan_s = 300,
	.min_charge_us = -1,
	.pod_logs = "/var/log/containers",
	.engine_podman = true, .engine_containerd = true,
	.pid_form = true,
	.cgroup_form = true,
	.pace_periods = 2,
	.evidence_us = DAEMON_EVIDENCE_US,
	.pace_state = DEFAULT_PACE_STATE,
	.quota_state = DEFAULT_QUOTA_STATE,
};

int kernel_file = -1;
struct borrowd_bpf *skel;
int nr_cpus;
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
"               [--interval-ms MS] [--min-charge-us US] [--scan-ms MS]\n"
"               [--rescan-s SEC]\n"
"               [--mode auto|kernel|quota]\n"
"               [--quota-state FILE] [--pace] [--pace-periods N]\n"
"               [--pace-state FILE] [--no-worker-pid] [--stats FILE]\n"
"               [--duration SEC] [--verbose]\n"
"       borrowd [--config FILE] [--pace-state FILE] [--quota-state FILE] --resume\n"
"\n"
"Charges the CPU time of worker processes to their clients' cgroups. A BPF\n"
"program on sched_stat_runtime adds up each worker's CPU time; every interval\n"
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
"  --min-charge-us US   a charge of less than US microseconds waits for the\n"
"                       next interval, for a second at most (default: the\n"
"                       kernel's CFS bandwidth slice, 5000; 0: none waits)\n"
"  --scan-ms MS         look for containers, shared daemons and their files\n"
"                       at most every MS ms, for " STR(SETTLE_S) " s after the engines'\n"
"                       metadata changed (while a containerd logger may still\n"
"                       come, or with a shared daemon) or a daemon exited\n"
"                       (default 1000)\n"
"  --rescan-s SEC       look for containers every SEC s even when nothing\n"
"                       changed, should a change have been missed (default 300)\n"
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
	if (!strcmp(key, "min_charge_us"))
		return set_long(val, 0, 1000000, &opt.min_charge_us);
	if (!strcmp(key, "rescan_s"))
		return set_long(val, 1, 3600, &opt.rescan_s);
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
	{ "min-charge-us", required_argument, NULL, 'm' },
	{ "scan-ms", required_argument, NULL, 's' },
	{ "rescan-s", required_argument, NULL, 'r' },
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
	while ((c = getopt_long(argc, argv, ":c:w:e:i:m:s:r:Pd:vhD:pN:L:E:S:RM:Q:T:",
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
		case 'm':
			key = "min_charge_us";
			break;
		case 's':
			key = "scan_ms";
			break;
		case 'r':
			key = "rescan_s";
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
 * each one once, so that the runs in progress are counted from now on
 * (the shared daemons' threads, the quota mode's groups).
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
	char dir[PATH_MAX + 300], line[256];
	int has = -1;
	FILE *f;
	DIR *d;

	d = opendir(bcg_mount());
	while (d && has < 0 && bcg_next_child(d, bcg_mount(), dir, sizeof(dir))) {
		if (bcg_dir_has(dir, bcg_is_v2() ? "cpu.max" : "cpu.cfs_quota_us"))
			has = bcg_dir_has(dir, BORROWING_FILE);
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

/*
 * The kernel hands a group's quota to its CPUs in slices of this size (5 ms
 * by default): a charge as small waits for the next round, a worker that
 * runs a little every round then costs one write(2) a second, not ten.
 */
static long bandwidth_slice_us(void)
{
	long long v = bcg_read_number("/proc/sys/kernel/sched_cfs_bandwidth_slice_us", 5000);

	return v > 0 && v <= 1000000 ? v : 5000;
}

/* The agent's CPU time (it has one thread), for the cost of its scans. */
static unsigned long long thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return bcg_ts_ns(&ts);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Watching the engines' metadata (this inotify descriptor): scans on changes. */
static int watch_fd = -1;

/*
 * Watches the engines' metadata, if any engine is read: otherwise, or if
 * it cannot, the loop scans every --scan-ms.
 */
static void watch_engines(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0 };
	int fd;

	if (!opt.engine_podman && !opt.engine_containerd && !daemons_named())
		return;
	fd = bcg_watch_containers();
	if (fd >= 0 && !epoll_ctl(events_fd, EPOLL_CTL_ADD, fd, &ev)) {
		watch_fd = fd;
		return;
	}
	msg("cannot watch the engines' metadata: %s (looking for containers every %ld ms)",
	    strerror(fd < 0 ? -fd : errno), opt.scan_ms);
}

/* The epoll tag of the daemons' log directories' watch (a worker's: its pid). */
#define LOG_DIRS_EVENT	UINT64_MAX

/*
 * Watches the directories of the daemons' log files (a rotated log is a
 * new descriptor to map): without, the rescans find it.
 */
static void watch_daemon_logs(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = LOG_DIRS_EVENT };
	int fd;

	if (!daemons_named())
		return;
	fd = watch_log_dirs();
	if (fd < 0 || epoll_ctl(events_fd, EPOLL_CTL_ADD, fd, &ev))
		msg("cannot watch the daemons' log directories: %s (a rotated log "
		    "is known from the next rescan)", strerror(fd < 0 ? -fd : errno));
}

/*
 * What happened since the last round, without waiting: workers that exited
 * (true), whether the engines' metadata changed (*CHANGED), and whether a
 * daemon's log directory did (*LOGS). An exited worker's pidfd stays ready
 * until its rule goes: more than fit here wait for the next round, behind
 * the others (epoll queues a reported one last).
 */
static bool read_events(bool *changed, bool *logs)
{
	struct epoll_event evs[256];
	bool exited = false;
	int n, ret;

	n = epoll_wait(events_fd, evs, ARRAY_SIZE(evs), 0);
	for (int i = 0; i < n; i++) {
		if (evs[i].data.u64 == LOG_DIRS_EVENT) {
			*logs |= log_dirs_changed();
			continue;
		}
		if (evs[i].data.u64) {
			worker_exited((pid_t)evs[i].data.u64);
			exited = true;
			continue;
		}
		ret = bcg_watch_read();
		if (ret < 0) {
			msg("cannot watch the engines' metadata: %s (looking for "
			    "containers every %ld ms)", strerror(-ret), opt.scan_ms);
			epoll_ctl(events_fd, EPOLL_CTL_DEL, watch_fd, NULL);
			watch_fd = -1;
		}
		*changed |= ret != 0;
	}
	return exited;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	double start, next_scan = 0, last_scan = -1e9, settle_until = 0;
	unsigned long long scan_began = 0;
	double last_logs_scan = -1e9, daemon_settle_until = 0;
	bool logs_due = false, awaited = false, meta_changed = true;
	double next_note = 0;
	int ret, layout;

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
	if (opt.min_charge_us < 0)
		opt.min_charge_us = bandwidth_slice_us();
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
	layout = runtime_record_layout();
	if (layout < 0) {
		msg("cannot read sched_stat_runtime's record layout from tracefs: %s%s",
		    strerror(-layout), layout == -EPROTO ? " (not a layout borrowd knows)" :
		    " (is tracefs mounted?)");
		return EXIT_NOFEATURE;
	}
	skel = borrowd_bpf__open();
	if (skel) {
		skel->rodata->evidence_ns = opt.evidence_us * 1000ULL;
		skel->rodata->have_daemons = daemons_named();
		/* The program for the kernel's record layout only. */
		bpf_program__set_autoload(skel->progs.borrowd_runtime, !layout);
		bpf_program__set_autoload(skel->progs.borrowd_runtime_dynamic, layout);
		ret = borrowd_bpf__load(skel);
		if (!ret)
			ret = map_sums() ?: map_client_sums() ?:
			      (opt.mode == MODE_QUOTA ? map_usage() : 0);
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
	/*
	 * A link that failed to attach holds nothing to destroy. The switch
	 * keeps the runs of shared daemons' threads and of the quota mode's
	 * groups, and is not attached for anything else: it runs at every
	 * context switch of the node. sched_stat_runtime is attached while a
	 * worker has a rule (worker_accounting()): here, to know that it can.
	 */
	skel->links.borrowd_fork = bpf_program__attach(skel->progs.borrowd_fork);
	ret = libbpf_get_error(skel->links.borrowd_fork);
	if (ret)
		skel->links.borrowd_fork = NULL;
	else
		ret = worker_accounting(true);
	if (!ret && (daemons_named() || opt.mode == MODE_QUOTA)) {
		skel->links.borrowd_switch = bpf_program__attach(skel->progs.borrowd_switch);
		ret = libbpf_get_error(skel->links.borrowd_switch);
		if (ret)
			skel->links.borrowd_switch = NULL;
	}
	if (ret) {
		msg("cannot attach to sched_switch, sched_wakeup_new and sched_stat_runtime: "
		    "%s (is tracefs mounted?)", strerror(-ret));
		borrowd_bpf__destroy(skel);
		return EXIT_NOFEATURE;
	}
	/* Reads matter for shared daemons only (and need syscall tracepoints). */
	if (daemons_named()) {
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
	events_fd = epoll_create1(EPOLL_CLOEXEC);
	if (events_fd < 0) {
		msg("epoll: %s", strerror(errno));
		borrowd_bpf__destroy(skel);
		return 1;
	}
	watch_engines();
	watch_daemon_logs();
	for (int i = 0; i < nr_pending; i++) {
		struct bcg g;

		bcg_from_path(&g, pending[i].cgroup);
		ret = add_rule(pending[i].pid, 0, &g, SRC_CONFIG, NULL);
		if (ret)
			msg("worker %d: %s", (int)pending[i].pid, strerror(-ret));
	}
	worker_accounting(nr_rules > 0);
	if (skel->links.borrowd_switch)
		visit_cpus();

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	start = now_s();
	/* Loggers of containers made just before borrowd: as after a change. */
	settle_until = start + SETTLE_S;
	msg("ready: charging every %ld ms (under %ld us: within 1 s) in %s mode (engines:%s%s)",
	    opt.interval_ms, opt.min_charge_us, mode_names[opt.mode],
	    opt.engine_podman ? " podman" : "",
	    opt.engine_containerd ? " containerd" : "");

	while (!stop) {
		double now = now_s(), scan_s = opt.scan_ms / 1000.0;
		bool changed = false, logs = false, reap, scan, full = false, note;

		/*
		 * The engines' metadata is read when it changed (at most every
		 * --scan-ms), for a while after, and every --rescan-s.
		 */
		reap = read_events(&changed, &logs);
		logs_due |= logs;
		/* A shared daemon exited: another may take its containers over. */
		if (daemons_named() && daemon_exited()) {
			changed = true;
			daemon_settle_until = now + SETTLE_S;
		}
		if (changed) {
			meta_changed = true;
			settle_until = now + SETTLE_S;
			if (next_scan > last_scan + scan_s)
				next_scan = last_scan + scan_s;
		}
		scan = now >= next_scan;
		if (scan) {
			/*
			 * The metadata is read again when it changed, while a
			 * logger is awaited, at a rescan and where no change
			 * can be seen; a round after a change that only waits
			 * for a shared daemon to open a container's files
			 * reads the daemons' descriptors alone.
			 */
			full = meta_changed || awaited || now >= settle_until || watch_fd < 0;
			if (full) {
				scan_began = thread_cpu_ns();
				awaited = scan_engines();
				metadata_scans++;
				meta_changed = false;
			}
			last_scan = now;
		}
		/*
		 * The daemons and their files are read with the metadata: a
		 * daemon opens a container's FIFOs and log file as it starts
		 * it, and a scan of every daemon file a second would cost a
		 * node with many containers in proportion to them. A daemon's
		 * log directory that changed has them read too, at most every
		 * --scan-ms.
		 */
		if (daemons_named() && (scan || (logs_due && now >= last_logs_scan + scan_s))) {
			/*
			 * A daemon starts with its run directory, and one that
			 * serves a container does so as the container's
			 * metadata is written: looked for in scans after a
			 * change (and at the start, and at every scan where no
			 * change can be seen) and while another may take an
			 * exited one's containers over, not in every rescan
			 * (a read of every process's name).
			 */
			if (scan && (full || now < daemon_settle_until) &&
			    (now < settle_until || watch_fd < 0))
				find_daemons();
			scan_daemon_fds();
			logs_due = false;
			last_logs_scan = now;
		}
		if (scan) {
			/* A read of the metadata's, with the daemons' files. */
			if (full)
				metadata_scan_ns += thread_cpu_ns() - scan_began;
			/*
			 * The scans after a change are for a containerd logger
			 * that starts after its container's pid file, and a
			 * shared daemon that opens a container's files after it
			 * (or takes over another's containers): where neither
			 * can be, a change costs one scan.
			 */
			if (!awaited && !daemons_held() && watch_fd >= 0 &&
			    settle_until > now)
				settle_until = now > daemon_settle_until ? now :
					       daemon_settle_until;
			next_scan = now + (watch_fd >= 0 && now >= settle_until ?
					   opt.rescan_s : scan_s);
		}
		note = now >= next_note;
		if (note)
			next_note = now + scan_s;
		charge_all(reap || scan, note, false);
		charge_clients(false);
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
	charge_all(false, false, true);
	charge_clients(true);
	for (int i = 0; i < nr_rules; i++)
		unpace(&rules[i]);
	write_stats();
	if (opt.mode == MODE_QUOTA)
		bq_restore_all();
	stop_watchdog();
	print_totals();
	borrowd_bpf__destroy(skel);
	return 0;
}
