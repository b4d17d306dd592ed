// SPDX-License-Identifier: GPL-2.0
/*
 * borrowd's process rule: a worker process's CPU time goes to its client.
 * The rules name the workers (from the command line, the config file or
 * the engines' metadata); the BPF program's sums say what each worker ran,
 * and charge() pays it to the client as the mode says (for the shared
 * daemons' clients too).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "borrow_cg.h"
#include "borrow_quota.h"
#include "borrowd.bpf.h"
#include "borrowd.h"
#include "borrowd.skel.h"

struct rule *rules;
int nr_rules;
static int cap_rules;
int events_fd = -1;

/*
 * The rules by worker pid: open addressing, each entry a rule's index + 1
 * (0: free). Rebuilt when a rule goes (rules move then), rarely.
 */
static int *rule_index;
static unsigned int index_size;

static unsigned int index_slot(pid_t pid)
{
	return ((unsigned int)pid * 2654435761u) & (index_size - 1);
}

static void index_insert(int i)
{
	unsigned int h = index_slot(rules[i].worker);

	while (rule_index[h])
		h = (h + 1) & (index_size - 1);
	rule_index[h] = i + 1;
}

/* Room for NEED rules, and every rule in it: 0 or -ENOMEM. */
static int index_rebuild(int need)
{
	unsigned int size = index_size ?: 64;
	int *ix;

	while (size < 2 * (unsigned int)need)
		size *= 2;
	if (size != index_size) {
		ix = realloc(rule_index, size * sizeof(*ix));
		if (!ix)
			return -ENOMEM;
		rule_index = ix;
		index_size = size;
	}
	memset(rule_index, 0, index_size * sizeof(*rule_index));
	for (int i = 0; i < nr_rules; i++)
		index_insert(i);
	return 0;
}

struct rule *find_rule(pid_t worker)
{
	unsigned int h;

	if (!index_size)
		return NULL;
	for (h = index_slot(worker); rule_index[h]; h = (h + 1) & (index_size - 1))
		if (rules[rule_index[h] - 1].worker == worker)
			return &rules[rule_index[h] - 1];
	return NULL;
}

/*
 * The workers' sums, the BPF map mapped into our memory: reading them costs
 * no system call, so a round costs the same with one worker or thousands.
 * A slot that a worker leaves is used again only two rounds later: a BPF
 * program that found it just before its worker's entry went has finished.
 */
static struct worker_sum *sums;
static bool slot_used[MAX_WORKERS];
static struct { __u32 slot; unsigned long round; } freed[MAX_WORKERS];
static int nr_freed;
static unsigned long round_nr;

int map_sums(void)
{
	size_t size = sizeof(*sums) * MAX_WORKERS;
	void *p;

	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 bpf_map__fd(skel->maps.sums), 0);
	if (p == MAP_FAILED)
		return -errno;
	sums = p;
	return 0;
}

/* A free slot, zeroed: its index, or -ENOSPC. */
static int slot_get(void)
{
	int n = 0;

	for (int i = 0; i < nr_freed; i++) {
		if (round_nr >= freed[i].round + 2)
			slot_used[freed[i].slot] = false;
		else
			freed[n++] = freed[i];
	}
	nr_freed = n;
	for (int i = 0; i < MAX_WORKERS; i++) {
		if (slot_used[i])
			continue;
		slot_used[i] = true;
		memset(&sums[i], 0, sizeof(sums[i]));
		return i;
	}
	return -ENOSPC;
}

static void slot_put(__u32 slot)
{
	freed[nr_freed].slot = slot;
	freed[nr_freed++].round = round_nr;
}

void read_comm(pid_t pid, char *comm, size_t len)
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

int add_rule(pid_t worker, unsigned long long start,
	     const struct bcg *client, int source, const char *container)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = worker };
	struct worker_thread thread;
	struct worker entry = { 0 };
	struct bcg_proc p;
	struct bcg wg;
	struct rule *r;
	int ret, pidfd;

	if (find_rule(worker)) {
		msg("worker %d already has a client: ignoring %s", (int)worker,
		    client->path);
		return 0;
	}
	if (bcg_grow((void **)&rules, &cap_rules, nr_rules + 1, sizeof(*rules)) ||
	    (2 * (unsigned int)(nr_rules + 1) > index_size && index_rebuild(nr_rules + 1)))
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
	ret = slot_get();
	if (ret < 0) {
		close(pidfd);
		return ret;
	}
	entry.slot = ret;
	/* Before the entry: its time counts from the entry on. */
	ret = worker_accounting(true);
	if (!ret && bpf_map_update_elem(bpf_map__fd(skel->maps.workers), &worker,
					&entry, BPF_NOEXIST))
		ret = -errno;
	if (ret) {
		worker_accounting(nr_rules > 0);
		slot_put(entry.slot);
		close(pidfd);
		return ret;
	}
	/* Its first thread, for the time accounted from another CPU. */
	thread.tgid = worker;
	thread.slot = entry.slot;
	bpf_map_update_elem(bpf_map__fd(skel->maps.worker_threads), &worker, &thread,
			    BPF_ANY);
	/* Exited meanwhile: the entry may count another process already. */
	if (!bcg_pidfd_alive(pidfd) ||
	    (events_fd >= 0 && epoll_ctl(events_fd, EPOLL_CTL_ADD, pidfd, &ev))) {
		bpf_map_delete_elem(bpf_map__fd(skel->maps.workers), &worker);
		bpf_map_delete_elem(bpf_map__fd(skel->maps.worker_threads), &worker);
		worker_accounting(nr_rules > 0);
		slot_put(entry.slot);
		close(pidfd);
		return -ESRCH;
	}
	r = &rules[nr_rules++];
	memset(r, 0, sizeof(*r));
	r->worker = worker;
	r->pidfd = pidfd;
	r->slot = entry.slot;
	index_insert(nr_rules - 1);
	r->start = start;
	r->client = *client;
	account_init(&r->acct);
	r->source = source;
	r->seen = true;
	r->worker_g = wg;
	snprintf(r->container, sizeof(r->container), "%s", container ?: "");
	read_comm(worker, r->comm, sizeof(r->comm));
	msg("worker %d (%s) works for %s%s%s", (int)worker, r->comm,
	    client->path, container ? ", container " : "", container ?: "");
	return 0;
}

static void remove_rule(struct rule *r)
{
	unpace(r);
	if (events_fd >= 0)
		epoll_ctl(events_fd, EPOLL_CTL_DEL, r->pidfd, NULL);
	close(r->pidfd);
	bpf_map_delete_elem(bpf_map__fd(skel->maps.workers), &r->worker);
	bpf_map_delete_elem(bpf_map__fd(skel->maps.worker_threads), &r->worker);
	slot_put(r->slot);
	account_close(&r->acct);
	msg("worker %d (%s) for %s: gone, charged %llu us in all%s", (int)r->worker,
	    r->comm, r->client.path, r->acct.charged_us,
	    failed_note(r->acct.failed_us));
	gone_charged_us += r->acct.charged_us;
	gone_failed_us += r->acct.failed_us;
	*r = rules[--nr_rules];
	index_rebuild(nr_rules);
	worker_accounting(nr_rules > 0);
}

void worker_exited(pid_t worker)
{
	struct rule *r = find_rule(worker);

	if (r)
		r->exited = true;
}

/* sched_stat_runtime's record layout (runtime_record_layout()). */
static int runtime_layout;

/* The offset of FIELD in a tracepoint's FORMAT (its tracefs file), or -1. */
static long format_offset(const char *format, const char *field)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), " %s;\toffset:", field);
	p = strstr(format, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

/*
 * sched_stat_runtime's record layout, from its format in tracefs: 1 if
 * comm is a dynamic string (mainline), 0 if an array, -errno if the file
 * cannot be read or has pid and runtime where neither layout has them.
 */
int runtime_record_layout(void)
{
	static const char *const dirs[] = { "/sys/kernel/tracing",
					    "/sys/kernel/debug/tracing" };
	char path[128], buf[4096];
	long pid_off, runtime_off;
	ssize_t n = -ENOENT;

	for (size_t i = 0; i < ARRAY_SIZE(dirs) && n <= 0; i++) {
		snprintf(path, sizeof(path), "%s/events/sched/sched_stat_runtime/format",
			 dirs[i]);
		n = bcg_read_file(path, buf, sizeof(buf));
	}
	if (n <= 0)
		return n < 0 ? (int)n : -ENODATA;
	pid_off = format_offset(buf, "pid");
	runtime_off = format_offset(buf, "runtime");
	if (pid_off == 24 && runtime_off == 32)
		runtime_layout = 0;
	else if (pid_off == 12 && runtime_off == 16)
		runtime_layout = 1;
	else
		return -EPROTO;
	return runtime_layout;
}

/*
 * sched_stat_runtime runs at every accounting of every task's time (a
 * few thousand times a second on a busy node): it is attached while a
 * worker has a rule, and only then (callers pass nr_rules > 0, or true
 * just before a rule's entry is made). A node whose engines log through a
 * shared daemon (containerd's CRI plugin, dockerd) has no worker at all.
 * Returns 0 or -errno.
 */
int worker_accounting(bool on)
{
	struct bpf_link **link = runtime_layout ? &skel->links.borrowd_runtime_dynamic :
					       &skel->links.borrowd_runtime;
	struct bpf_program *prog = runtime_layout ? skel->progs.borrowd_runtime_dynamic :
					       skel->progs.borrowd_runtime;
	int ret;

	if (!on) {
		bpf_link__destroy(*link);
		*link = NULL;
		return 0;
	}
	if (*link)
		return 0;
	*link = bpf_program__attach(prog);
	ret = libbpf_get_error(*link);
	if (ret)
		*link = NULL;
	return ret;
}

/* CLOCK_MONOTONIC in ns, the clock of the BPF programs' runs. */
static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return bcg_ts_ns(&ts);
}

/*
 * Charges USEC that a worker spent for G, as the mode says: 0 or -error.
 * WORKER is its pid (0: its pid is another process's now), WG the group it
 * ran in (NULL: not known), which names it once its pid names nothing.
 */
static int charge(const struct bcg *g, int *fd, unsigned long long usec,
		  pid_t worker, const struct bcg *wg)
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
		/*
		 * On v2 the BPF program sees each run's group, and a change
		 * of it has WG read again (charge_all()): no read a charge.
		 */
		if (worker > 0 && (!wg || !bcg_is_v2()) && !bcg_from_pid(&now, worker))
			wg = &now;
		return bq_charge(g, usec, wg);
	}
	if (worker > 0 || !wg) {
		ret = bcg_charge(g, fd, usec, worker);
		if (ret == -BCG_EPIDFORM) {
			msg("the kernel takes no \"USEC PID\": charging \"USEC\"");
			opt.pid_form = false;
			return bcg_charge(g, fd, usec, 0);
		}
	}
	/* Reaped, or its pid another's: the group it ran in names it. */
	if (ret == -ESRCH && wg && opt.cgroup_form) {
		ret = bcg_charge_for_group(g, fd, usec, wg);
		if (ret == -BCG_ECGROUPFORM) {
			msg("the kernel takes no \"USEC cgroup=ID\": the last "
			    "charges of workers that exit are lost");
			opt.cgroup_form = false;
			ret = -ESRCH;
		}
	}
	return ret;
}

void account_init(struct account *a)
{
	memset(a, 0, sizeof(*a));
	a->fd = -1;
}

void account_close(struct account *a)
{
	bcg_charge_close(&a->fd);
}

/*
 * Charges G what its worker ran up to TOTAL_NS (its CPU time in all) that A
 * does not cover yet; WORKER and WG as charge()'s. A charge under
 * --min-charge-us waits, for a second at most, unless FINAL (the worker or
 * the agent is gone): a write(2) a round for a worker that ran a few
 * microseconds costs the node more than the precision is worth, while a
 * busy worker is charged every round. Returns the µs charged, 0 if none,
 * or -error when a charge fails with another error than the last one did
 * (the caller says so; the same error again is not repeated).
 */
long long settle(struct account *a, const struct bcg *g, __u64 total_ns,
		 pid_t worker, const struct bcg *wg, bool final)
{
	unsigned long long usec;
	int ret;

	if (total_ns <= a->counted_ns)
		return 0;
	usec = (total_ns - a->counted_ns) / 1000;
	if (!usec)
		return 0;
	if (!final && usec < (unsigned long long)opt.min_charge_us) {
		__u64 now = now_ns();

		if (!a->due_since_ns)
			a->due_since_ns = now;
		if (now - a->due_since_ns < 1000000000ULL)
			return 0;
	}
	a->due_since_ns = 0;
	ret = charge(g, &a->fd, usec, worker, wg);
	/*
	 * Sub-microsecond remainders stay for the next charge. A failed one
	 * is counted and not retried: a retry would carry the time up as one
	 * charge that grows for as long as charges fail (a group removed and
	 * made again at its path would pay for the time it did not exist).
	 */
	a->counted_ns += usec * 1000;
	if (ret) {
		a->failed_us += usec;
		if (ret == a->last_err)
			return 0;
		a->last_err = ret;
		return ret;
	}
	a->last_err = 0;
	a->charged_us += usec;
	return usec;
}

/* Charge what R's worker ran since its last charge (settle()'s FINAL). */
static void charge_rule(struct rule *r, __u64 total_ns, bool final)
{
	long long ret;

	ret = settle(&r->acct, &r->client, total_ns, r->gone ? 0 : r->worker,
		     &r->worker_g, final);
	if (ret < 0)
		msg("worker %d (%s): cannot charge %s: %s", (int)r->worker,
		    r->comm, r->client.path, bcg_strerror(ret));
	else if (ret && opt.verbose)
		msg("charged %lld us to %s for worker %d", ret, r->client.path,
		    (int)r->worker);
}

/*
 * Charge every worker that ran; with REAP, also drop the workers that
 * exited (their pidfds polled readable: worker_exited()). With NOTE, read
 * again the group of each worker that ran since the last NOTE, where the
 * BPF program cannot tell which group it runs in (cgroup v1). With FINAL,
 * every charge however small (settle()): the agent is about to exit.
 */
void charge_all(bool reap, bool note, bool final)
{
	bool v2 = bcg_is_v2();

	round_nr++;
	/*
	 * A worker that runs is in its sum up to its CPU's last tick (the
	 * kernel accounts a running task's time at each): no run in progress
	 * to add.
	 */
	for (int i = 0; i < nr_rules; i++) {
		struct worker_sum *w = &sums[rules[i].slot];

		rules[i].sum_ns = __atomic_load_n(&w->ns, __ATOMIC_RELAXED);
		rules[i].gone = __atomic_load_n(&w->gone, __ATOMIC_RELAXED);
		/* It ran in another group than the one known: read it. */
		if (v2 && w->cgroup != rules[i].cgroup) {
			rules[i].cgroup = w->cgroup;
			note_worker_group(&rules[i]);
		}
	}
	for (int i = 0; i < nr_rules; i++) {
		struct rule *r = &rules[i];
		__u64 total = r->sum_ns;

		/* Idle: nothing to charge (only --pace reads the clients' debts). */
		if (total >= r->acct.counted_ns + 1000) {
			r->ran = true;
			charge_rule(r, total, final);
		}
		pace(r);
	}
	for (int i = nr_rules - 1; note && !v2 && i >= 0; i--) {
		if (rules[i].ran && !rules[i].exited && !rules[i].gone)
			note_worker_group(&rules[i]);
		rules[i].ran = false;
	}
	/* Backwards: removing moves the last rule into the slot. */
	for (int i = nr_rules - 1; reap && i >= 0; i--) {
		if (!rules[i].exited && !rules[i].gone && !rules[i].unlisted)
			continue;
		/*
		 * An exited worker's last run is in the sums by now; an
		 * unlisted one's up to its last tick.
		 */
		charge_rule(&rules[i], sums[rules[i].slot].ns, true);
		remove_rule(&rules[i]);
	}
}

/* The group of C's init, if its pid is still that process's: 0 or -error. */
int client_of(struct bcg *g, const struct bcg_container *c)
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

static void scan_container(const struct bcg_container *c)
{
	static pid_t told[64];
	static int nr_told;
	struct rule *r;
	struct bcg g;

	if (c->worker_pid <= 0)
		return;
	if (!strcmp(c->engine, "podman") ? !opt.engine_podman : !opt.engine_containerd)
		return;
	r = find_rule(c->worker_pid);
	if (r) {
		r->seen = true;
		return;
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
		return;
	}
	if (client_of(&g, c))
		return;	/* the container is going away */
	add_rule(c->worker_pid, c->worker_start, &g, SRC_ENGINE, c->id);
}

struct bcg_container *containers;
int nr_containers;
static int cap_containers;

static int collect_container(const struct bcg_container *c, void *arg)
{
	if (bcg_grow((void **)&containers, &cap_containers, nr_containers + 1,
		     sizeof(*containers)))
		return -ENOMEM;
	containers[nr_containers++] = *c;
	return 0;
}

int cmp_container(const void *a, const void *b)
{
	return strcmp(((const struct bcg_container *)a)->id,
		      ((const struct bcg_container *)b)->id);
}

/*
 * A binary logger is looked for in a container's first minute (its pid
 * file's age), and by the agent's first scan in every container: the shim
 * starts it with the container. A later scan keeps the rule of an older
 * container whose logger it holds (by pidfd, which tells its exit).
 */
#define LOGGER_SEARCH_S		60

bool scan_engines(void)
{
	bool engines = opt.engine_podman || opt.engine_containerd, awaited = false;
	static bool first = true;
	struct timespec since;

	clock_gettime(CLOCK_REALTIME, &since);
	since.tv_sec -= LOGGER_SEARCH_S;
	/* Read once for the workers and the daemons' files (scan_daemon_fds). */
	nr_containers = 0;
	if (engines || daemons_named())
		bcg_scan_containers_since(collect_container, NULL, first ? NULL : &since);
	first = false;
	qsort(containers, nr_containers, sizeof(*containers), cmp_container);
	if (!engines)
		return false;
	for (int i = 0; i < nr_rules; i++)
		if (rules[i].source == SRC_ENGINE)
			rules[i].seen = false;
	for (int i = 0; i < nr_containers; i++) {
		const struct bcg_container *c = &containers[i];

		scan_container(c);
		awaited |= opt.engine_containerd && c->logger_missing &&
			   bcg_ts_ns(&c->written) >= bcg_ts_ns(&since);
	}
	for (int i = 0; i < nr_rules; i++) {
		struct bcg_container key, *c;

		if (rules[i].source != SRC_ENGINE || rules[i].seen)
			continue;
		snprintf(key.id, sizeof(key.id), "%s", rules[i].container);
		c = bsearch(&key, containers, nr_containers, sizeof(*containers),
			    cmp_container);
		rules[i].seen = c && c->logger_unsought;
	}
	/*
	 * A container that is gone (or whose worker now charges for itself)
	 * drops its rule at the next reap, which charges what the worker ran
	 * for it until then, however little: nothing else would.
	 */
	for (int i = 0; i < nr_rules; i++)
		if (rules[i].source == SRC_ENGINE && !rules[i].seen)
			rules[i].unlisted = true;
	return awaited;
}
