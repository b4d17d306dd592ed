// SPDX-License-Identifier: GPL-2.0
/*
 * borrowd's quota mode (borrow_quota.h): the accounts, and the quota files
 * they are paid through.
 *
 * A write of a quota refills the group's runtime at once
 * (tg_set_cfs_bandwidth() calls __refill_cfs_bandwidth_runtime()): a write
 * in the middle of a period gives a group that used its runtime up a new
 * one. So a write waits for the group's next period to start (cpu.stat's
 * nr_periods moves), when the runtime was just refilled anyway, and writes
 * are made only when the debt calls for them, not every period. The period
 * timer keeps its phase while the group is busy: once seen, the next start
 * is known, and a look just after it finds it; the first one is found by
 * looking every few milliseconds.
 *
 * What it reads is its cost: a v2 cpu.stat read flushes the group's
 * statistics. A round looks once at each group that owes or has a lowered
 * quota (its usage, and nr_periods from the same read), and at no other;
 * a write looks once more, for its period and its settling together.
 * A group whose quota is already the least it may have (nothing can be
 * lowered) and that left none of it unused at a look (nothing was paid)
 * is looked at once a second from then on, while each such look finds no
 * more than a period's quota left unused in that second: only what it
 * leaves unused can pay, and a busy group leaves next to nothing (a
 * kubelet's 10m CPU limit is such a quota, 1 ms a period). On cgroup v2
 * the BPF programs count such a group's runs (bq_usage_source), and a
 * round looks at it only when the count shows a period's quota unused
 * since its last look, or that look is 5 s old. A round's
 * look and the group's periods do not line up, so a look a round finds a
 * period's start more or fewer by turns: a little unused time in one
 * round, nothing in the next.
 * Writes of the quota by others are seen by inotify (a write(2) of a
 * cgroup file raises IN_MODIFY), so a quota is read only after a write.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "borrow_quota.h"

/* --- the arithmetic --------------------------------------------------------- */

long long bq_bound(const struct bq_acct *a)
{
	if (a->period_us <= 0 || a->quota_us <= 0)
		return 0;
	if (a->period_us >= 1000000)
		return a->quota_us;
	return a->quota_us * (1000000 / a->period_us) +
	       a->quota_us * (1000000 % a->period_us) / a->period_us;
}

long long bq_take(struct bq_acct *a, long long amount)
{
	long long room = bq_bound(a) - a->debt_us, took;

	if (amount <= 0)
		return 0;
	took = amount < room ? amount : room > 0 ? room : 0;
	a->debt_us += took;
	a->borrowed_us += took;
	a->dropped_us += amount - took;
	return took;
}

/* X * NUM / DEN without overflow for the values here (us, under 2^44). */
static long long scale(long long x, long long num, long long den)
{
	return den > 0 ? (long long)((__int128)x * num / den) : 0;
}

long long bq_pay(struct bq_acct *a, long long elapsed_us, long long used_us)
{
	long long unused = 0, lowered, paid, waited, most;

	if (a->debt_us <= 0) {
		a->over_us = 0;
		a->lump_seen_us = 0;
	}
	if (elapsed_us <= 0 || a->period_us <= 0 || a->debt_us <= 0)
		return 0;
	if (used_us >= 0) {
		unused = scale(a->quota_us - a->lowered_us, elapsed_us,
			       a->period_us) - used_us;
		if (unused < 0) {
			if (-unused > a->lump_seen_us)
				a->lump_seen_us = -unused;
			most = a->lump_seen_us > a->lump_us ? a->lump_seen_us : a->lump_us;
			a->over_us += -unused;
			if (a->over_us > most)
				a->over_us = most;
			unused = 0;
		}
		waited = unused < a->over_us ? unused : a->over_us;
		unused -= waited;
		a->over_us -= waited;
	}
	lowered = scale(a->lowered_us, elapsed_us, a->period_us);
	paid = unused + lowered;
	if (paid > a->debt_us)
		paid = a->debt_us;
	a->debt_us -= paid;
	a->paid_us += paid;
	return paid;
}

long long bq_regain(struct bq_acct *a, long long elapsed_us, long long used_us)
{
	long long over, room, took;

	if (elapsed_us <= 0 || a->period_us <= 0 || used_us < 0)
		return 0;
	over = used_us - scale(a->quota_us - a->lowered_us, elapsed_us, a->period_us);
	room = bq_bound(a) - a->debt_us;
	if (over <= 0 || room <= 0)
		return 0;
	took = over < room ? over : room;
	a->debt_us += took;
	a->regained_us += took;
	return took;
}

long long bq_settle(struct bq_acct *a, long long elapsed_us, long long used_us,
		    bool regain)
{
	long long seen = a->lump_seen_us, paid;

	if (!regain)
		return bq_pay(a, elapsed_us, used_us);
	bq_regain(a, elapsed_us, used_us);
	paid = bq_pay(a, elapsed_us, used_us);
	/*
	 * What it ran beyond is owed (bq_regain()): not carried, and not a
	 * lump (a write refills a whole quota at once).
	 */
	a->over_us = 0;
	if (a->lump_seen_us > seen)
		a->lump_seen_us = seen;
	return paid;
}

bool bq_may_spare(const struct bq_acct *a, long long elapsed_us,
		  long long used_lower_us)
{
	if (a->period_us <= 0 || a->quota_us <= 0 || used_lower_us < 0 ||
	    elapsed_us < 0 || elapsed_us >= BQ_SPARE_MAX_S * 1e6)
		return false;
	return scale(a->quota_us - a->lowered_us, elapsed_us, a->period_us) -
	       used_lower_us < a->quota_us;
}

long long bq_floor(long long quota_us, int k, long long slice_us,
		   long long tick_us)
{
	long long floor = (slice_us + tick_us) * (k > 0 ? k : 1);

	return floor < quota_us / 2 ? floor : quota_us / 2;
}

long long bq_target(const struct bq_acct *a, long long floor_us,
		    long long min_quota_us)
{
	long long most = a->quota_us - floor_us, t = a->debt_us / 2;

	if (a->quota_us - min_quota_us < most)
		most = a->quota_us - min_quota_us;
	if (t > most)
		t = most;
	return t > 0 ? t : 0;
}

bool bq_must_write(const struct bq_acct *a, long long target,
		   long long tick_us, long long hyst_us)
{
	if (target == a->lowered_us)
		return false;
	/* The next tick would take more than is owed. */
	if (scale(a->lowered_us, tick_us, a->period_us) > a->debt_us)
		return true;
	/* Paid: the configured quota again. */
	if (!target)
		return a->lowered_us > 0 && !a->debt_us;
	return target >= a->lowered_us + hyst_us;
}

/* --- the groups ------------------------------------------------------------- */

struct bq_group {
	struct bcg g;
	bool v2;		/* cpu.max, not v1's two files */
	unsigned long long ino;	/* its directory's: the group, not the path */
	struct bq_acct a;
	bool limited;		/* has a quota (configured) */
	long long written_us;	/* the quota borrowd wrote, -1: none in effect */
	long long usage_us;	/* at the last tick, -1: unknown */
	double t;		/* the last tick */
	double last_use;	/* the last charge or write */
	/* A decided write waits for the next period. */
	bool pending;
	long long pending_lowered;
	long long pending_periods;	/* nr_periods when decided */
	double pending_since;
	double due;			/* when to look at nr_periods next */
	bool wrote;			/* the time since t began with a write */
	/* A time nr_periods was seen to move (0: none): the timer's phase. */
	double phase;
	unsigned long writes;
	int last_err;
	int wd[2];		/* inotify watches of its quota files; -1: none */
	bool touched;		/* a quota file was written since the last read */
	double woken;		/* when a charge last looked at it, owing nothing */
	/* Its quota is the least it may have: the debt cannot lower it. */
	bool unlowerable;
	/* Paid so little that a look a second will do. */
	bool slow;
	long long paid_last;	/* what the last settling paid */
	/* The last look: usage and nr_periods (-1: unread), and its time. */
	long long seen_usage, seen_periods;
	double seen_t;
	/*
	 * The usage source's slot (-1: none), its sum at the last look and at
	 * the last settling (us, -1: unknown).
	 */
	int usage_slot;
	long long seen_lower_us, lower_us;
};

static struct bq_group *groups;
static int nr_groups, cap_groups;
static char state_file[PATH_MAX];
static long long tick_us = 100000, jiffy_us = 4000, slice_us = 5000;
static int nr_cpus = 1;
static unsigned long long total_writes, total_adoptions, total_failed;
/* What the mode reads besides each group's usage and quota: for its cost. */
static unsigned long long total_period_looks, total_runnable_counts;
static unsigned long long total_looks;	/* every look at a group's usage */
static unsigned long long total_rounds, total_spared;
static const struct bq_usage_source *usage_src;
/* The longest time from the last look at a quota to borrowd's write of it. */
static double race_max_s;
/* Groups forgotten (and what no group could owe): for the totals. */
static struct bq_acct gone;
/* inotify for writes of the groups' quota files; -1: they are read. */
static int notify_fd = -1;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void bq_set_usage_source(const struct bq_usage_source *src)
{
	usage_src = src;
}

int bq_init(const char *file, long tick_ms)
{
	struct timespec res;

	snprintf(state_file, sizeof(state_file), "%s", file);
	tick_us = tick_ms * 1000;
	slice_us = bcg_read_number("/proc/sys/kernel/sched_cfs_bandwidth_slice_us",
				   5000);
	/* The coarse clocks advance by a tick: their resolution is one. */
	if (!clock_getres(CLOCK_MONOTONIC_COARSE, &res) && !res.tv_sec &&
	    res.tv_nsec >= 1000)
		jiffy_us = res.tv_nsec / 1000;
	nr_cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (nr_cpus < 1)
		nr_cpus = 1;
	notify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (notify_fd < 0)
		msg("cannot watch the quota files (%s): each owing group's quota is "
		    "read every round", strerror(errno));
	return 0;
}

static int write_str(const char *dir, const char *file, const char *val)
{
	char path[PATH_MAX + 512];
	int fd, len = strlen(val), ret = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, len) != len)
		ret = -errno;
	close(fd);
	return ret;
}

static int write_quota(const char *dir, long long quota, long long period)
{
	char buf[64];

	if (bcg_dir_is_v2(dir)) {
		snprintf(buf, sizeof(buf), "%lld %lld", quota, period);
		return write_str(dir, "cpu.max", buf);
	}
	snprintf(buf, sizeof(buf), "%lld", quota);
	return write_str(dir, "cpu.cfs_quota_us", buf);
}

/*
 * A look at Q's usage (and nr_periods if PERIODS; v2 reads both at once).
 * settle() takes it.
 */
static void look(struct bq_group *q, bool periods)
{
	long long nr = -1;

	total_looks++;
	q->seen_usage = bcg_read_usage_periods(q->g.dir,
					       periods || q->v2 ? &nr : NULL);
	q->seen_periods = nr;
	q->seen_t = now_s();
	q->seen_lower_us = q->usage_slot >= 0 ?
			   (long long)(usage_src->read_ns(q->usage_slot) / 1000) : -1;
}

/*
 * Q cannot be lowered, and nothing of it changes at a look but what it
 * pays: no lowering in effect or decided, no write of its quota since its
 * last look. A look at it may then wait (slow_looks(), spare_look()).
 */
static bool look_may_wait(const struct bq_group *q)
{
	return q->unlowerable && !q->a.lowered_us && !q->pending && !q->wrote &&
	       !q->touched;
}

/*
 * Whether the round may spare its look at Q: a look may wait, and the
 * usage source's count shows that it left less than a period's quota
 * unused since its last.
 */
static bool spare_look(struct bq_group *q, double now)
{
	long long lower;

	if (q->usage_slot < 0 || !look_may_wait(q))
		return false;
	lower = usage_src->read_ns(q->usage_slot) / 1000;
	return bq_may_spare(&q->a, (now - q->t) * 1e6, lower - q->lower_us);
}

/* Depth of a hierarchy path: "/" 0, "/a" 1, "/a/b" 2. */
static int path_level(const char *path)
{
	int level = 0;

	for (; *path; path++)
		level += *path == '/' && path[1];
	return level;
}

/* Runnable threads of the group and its descendants, up to MAX. */
static int count_runnable(const char *dir, int max, int depth)
{
	char path[PATH_MAX + 512];
	struct bcg_proc p;
	int n = 0, tid;
	FILE *f;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", dir,
		 bcg_is_v2() ? "cgroup.threads" : "tasks");
	f = fopen(path, "re");
	if (f) {
		while (n < max && fscanf(f, "%d", &tid) == 1)
			n += !bcg_proc_stat(tid, &p) && p.state == 'R';
		fclose(f);
	}
	if (depth >= 8 || n >= max)
		return n;
	d = opendir(dir);
	if (!d)
		return n;
	while (n < max && bcg_next_child(d, dir, path, sizeof(path)))
		n += count_runnable(path, max - n, depth + 1);
	closedir(d);
	return n;
}

static struct bq_group *find_group(const char *dir);

/*
 * The least quota a group may be given: the kernel's minimum, and on v1
 * the largest of its children's configured quotas at its period: v1
 * refuses a parent quota below a child's, and a child must always get its
 * configured quota back. (So on v1 an ancestor is often not lowered at
 * all: its debt is paid from what it leaves unused, or dropped.)
 */
static long long min_quota(const struct bq_group *q)
{
	char path[PATH_MAX + 512];
	long long most = BQ_MIN_QUOTA_US, cq, cp, v;
	const struct bq_group *child;
	DIR *d;

	if (bcg_is_v2())
		return most;
	d = opendir(q->g.dir);
	if (!d)
		return most;
	while (bcg_next_child(d, q->g.dir, path, sizeof(path))) {
		if (bcg_read_quota(path, &cq, &cp) || cq < 0)
			continue;
		child = find_group(path);
		if (child && child->limited)
			cq = child->a.quota_us;
		v = (cq * q->a.period_us + cp - 1) / cp;
		if (v > most)
			most = v;
	}
	closedir(d);
	return most;
}

static struct bq_group *find_group(const char *dir)
{
	for (int i = 0; i < nr_groups; i++)
		if (!strcmp(groups[i].g.dir, dir))
			return &groups[i];
	return NULL;
}

/* The group at hierarchy path PATH, if tracked. */
static struct bq_group *find_path(const char *path)
{
	for (int i = 0; i < nr_groups; i++)
		if (!strcmp(groups[i].g.path, path))
			return &groups[i];
	return NULL;
}

/* Watches Q's quota files for writes; a file not watched is read instead. */
static void watch_quota(struct bq_group *q)
{
	static const char *const files[2][2] = {
		{ "cpu.cfs_quota_us", "cpu.cfs_period_us" }, { "cpu.max", NULL },
	};
	const char *const *f = files[q->v2];
	char path[PATH_MAX + 512];
	static bool said;

	q->wd[0] = -1;
	q->wd[1] = -1;
	for (int i = 0; notify_fd >= 0 && i < 2 && f[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", q->g.dir, f[i]);
		q->wd[i] = inotify_add_watch(notify_fd, path, IN_MODIFY);
		if (q->wd[i] < 0 && !said) {
			msg("no inotify watch of %s (%s): such quotas are read every round",
			    path, strerror(errno));
			said = true;
		}
	}
}

static bool watched(const struct bq_group *q)
{
	return q->wd[0] >= 0 && (q->wd[1] >= 0 || q->v2);
}

static void unwatch_quota(struct bq_group *q)
{
	for (int i = 0; i < 2; i++)
		if (q->wd[i] >= 0)
			inotify_rm_watch(notify_fd, q->wd[i]);
}

/* Marks the groups whose quota files were written since the last call. */
static void drain_notify(void)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event *ev;
	ssize_t n;

	if (notify_fd < 0)
		return;
	while ((n = read(notify_fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n; p += sizeof(*ev) + ev->len) {
			ev = (const struct inotify_event *)p;
			for (int i = 0; i < nr_groups; i++)
				if (ev->mask & IN_Q_OVERFLOW || ev->wd == groups[i].wd[0] ||
				    ev->wd == groups[i].wd[1])
					groups[i].touched = true;
		}
	}
}

/* The inode of a group's directory, 0 if it has none. */
static unsigned long long dir_ino(const char *dir)
{
	struct stat st;

	return stat(dir, &st) ? 0 : st.st_ino;
}

static int save_state(void);

/*
 * Stops tracking group I: its totals go to the report, what it owes is
 * dropped. (The last group moves into its slot.)
 */
static void forget(int i)
{
	struct bq_group *q = &groups[i];
	bool saved = q->written_us >= 0;

	gone.borrowed_us += q->a.borrowed_us;
	gone.paid_us += q->a.paid_us;
	gone.dropped_us += q->a.dropped_us + q->a.debt_us;
	gone.regained_us += q->a.regained_us;
	unwatch_quota(q);
	if (q->usage_slot >= 0)
		usage_src->untrack(q->usage_slot, q->ino);
	groups[i] = groups[--nr_groups];
	if (saved)
		save_state();
}

/*
 * A group removed, or removed and made again at its path, is another
 * group: what the old one owed is not the new one's. True if Q was
 * forgotten for it.
 */
static bool forget_if_gone(struct bq_group *q)
{
	if (dir_ino(q->g.dir) == q->ino)
		return false;
	if (q->a.debt_us)
		msg("%s: removed while it owed %lld us: dropped", q->g.path,
		    q->a.debt_us);
	forget(q - groups);
	return true;
}

/* Owes nothing, and its quota is its own: the rounds do not look at it. */
static bool dormant(const struct bq_group *q)
{
	return !q->a.debt_us && !q->a.lowered_us && q->written_us < 0 && !q->pending;
}

static bool adopt(struct bq_group *q);
static void settle(struct bq_group *q);

/* adopt() where the quota may have been written since it was read. */
static bool adopt_if_written(struct bq_group *q)
{
	return (q->touched || !watched(q)) && adopt(q);
}

/* Its usage counted from now on: a look, taken as settled. */
static void count_from_now(struct bq_group *q)
{
	look(q, false);
	q->usage_us = q->seen_usage;
	q->t = q->seen_t;
	q->lower_us = q->seen_lower_us;
}

/*
 * A group a charge names. A dormant one is looked at here, at most once a
 * round: whether it is still the same group, its quota if written since,
 * and, if limited, its usage from now on (what it left unused before the
 * charge does not pay it). False if it is gone.
 */
static bool wake(struct bq_group *q)
{
	double now, round = tick_us / 1e6;

	if (!dormant(q))
		return true;
	now = now_s();
	if (now - q->woken < round)
		return true;
	q->woken = now;
	if (forget_if_gone(q))
		return false;
	adopt_if_written(q);
	if (q->limited && now - q->t >= round)
		count_from_now(q);
	return true;
}

/* The group at PATH in the hierarchy, tracked from now on: NULL on error. */
static struct bq_group *get_group(const char *path, int *err)
{
	struct bq_group *q;
	struct bcg g;
	long long quota, period;

	/* Charged every round: found by its path, as the charge names it. */
	q = find_path(path);
	if (q && wake(q))
		return q;
	*err = bcg_from_path(&g, path);
	if (*err)
		return NULL;
	q = find_group(g.dir);
	if (q && wake(q))
		return q;
	/* The state file has a line per group, the path last. */
	if (strchr(g.dir, '\n')) {
		*err = -EINVAL;
		return NULL;
	}
	*err = bcg_read_quota(g.dir, &quota, &period);
	if (*err)
		return NULL;
	if (bcg_grow((void **)&groups, &cap_groups, nr_groups + 1, sizeof(*groups))) {
		*err = -ENOMEM;
		return NULL;
	}
	q = &groups[nr_groups++];
	memset(q, 0, sizeof(*q));
	q->g = g;
	q->v2 = bcg_dir_is_v2(g.dir);
	q->ino = dir_ino(g.dir);
	q->a.quota_us = quota;
	q->a.period_us = period;
	q->a.lump_us = jiffy_us * nr_cpus;
	q->limited = quota > 0;
	q->written_us = -1;
	q->usage_slot = -1;
	/*
	 * Limited v2 groups of a v2 hierarchy (the programs' ids are its
	 * groups'): those a look may pay.
	 */
	if (usage_src && q->limited && q->v2 && bcg_is_v2()) {
		int slot = usage_src->track(q->ino, path_level(g.path));

		q->usage_slot = slot >= 0 ? slot : -1;
	}
	watch_quota(q);
	count_from_now(q);
	q->last_use = q->t;
	q->woken = q->t;
	return q;
}

/* Saves every lowered quota, "CONFIGURED PERIOD WRITTEN DIR" a line. */
static int save_state(void)
{
	char tmp[PATH_MAX + 8];
	int ret = 0, n = 0;
	FILE *f;

	if (snprintf(tmp, sizeof(tmp), "%s.new", state_file) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (int i = 0; i < nr_groups; i++)
		n += groups[i].written_us >= 0 ||
		     (groups[i].pending && groups[i].pending_lowered);
	if (!n) {
		if (unlink(state_file) && errno != ENOENT)
			return -errno;
		return 0;
	}
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	for (int i = 0; i < nr_groups; i++) {
		const struct bq_group *q = &groups[i];

		if (q->written_us >= 0)
			fprintf(f, "%lld %lld %lld %s\n", q->a.quota_us,
				q->a.period_us, q->written_us, q->g.dir);
		/* A write about to be made: saved before it is. */
		if (q->pending && q->pending_lowered)
			fprintf(f, "%lld %lld %lld %s\n", q->a.quota_us,
				q->a.period_us, q->a.quota_us - q->pending_lowered,
				q->g.dir);
	}
	if (fclose(f) || rename(tmp, state_file))
		ret = -errno;
	return ret;
}

/* Puts Q's configured quota back if the quota is still ours: 1 if so. */
static int restore_group(struct bq_group *q)
{
	long long quota, period;
	int ret;

	if (q->written_us < 0)
		return 0;
	if (bcg_read_quota(q->g.dir, &quota, &period) || quota != q->written_us ||
	    period != q->a.period_us) {
		q->written_us = -1;
		return 0;
	}
	ret = write_quota(q->g.dir, q->a.quota_us, q->a.period_us);
	if (ret) {
		msg("%s: cannot restore the quota %lld: %s", q->g.path,
		    q->a.quota_us, strerror(-ret));
		return 0;
	}
	q->written_us = -1;
	q->a.lowered_us = 0;
	total_writes++;
	return 1;
}

/* Ancestors before their descendants: v1 takes no child quota above its parent's. */
static int by_depth(const void *a, const void *b)
{
	const struct bq_group *x = a, *y = b;
	size_t lx = strlen(x->g.path), ly = strlen(y->g.path);

	return lx < ly ? -1 : lx > ly;
}

int bq_restore_all(void)
{
	int n = 0;

	qsort(groups, nr_groups, sizeof(*groups), by_depth);
	for (int i = 0; i < nr_groups; i++) {
		groups[i].pending = false;
		n += restore_group(&groups[i]);
	}
	save_state();
	return n;
}

/* A state file line's path: after its three numbers. */
static const char *line_dir(const char *line)
{
	for (int i = 0; i < 3 && *line; i++) {
		line += strcspn(line, " ");
		line += strspn(line, " ");
	}
	return line;
}

/* State file lines, ancestors (shorter paths) first. */
static int by_path_len(const void *a, const void *b)
{
	size_t lx = strlen(line_dir(*(char *const *)a));
	size_t ly = strlen(line_dir(*(char *const *)b));

	return lx < ly ? -1 : lx > ly;
}

int bq_restore_state(const char *file)
{
	long long conf, period, written, quota, cur_period;
	char **lines = NULL, *line = NULL, *dir;
	int n = 0, nr = 0, cap = 0, used;
	size_t len = 0;
	FILE *f;

	f = fopen(file, "re");
	if (!f)
		return 0;
	while (getline(&line, &len, f) > 0) {
		if (bcg_grow((void **)&lines, &cap, nr + 1, sizeof(*lines)))
			break;
		line[strcspn(line, "\n")] = '\0';
		lines[nr++] = line;
		line = NULL;
		len = 0;
	}
	free(line);
	fclose(f);
	if (nr)
		qsort(lines, nr, sizeof(*lines), by_path_len);
	for (int i = 0; i < nr; i++) {
		if (sscanf(lines[i], "%lld %lld %lld %n", &conf, &period, &written,
			   &used) != 3 || conf <= 0 || period <= 0)
			continue;
		dir = lines[i] + used;
		/* Only a quota that still has the value borrowd wrote. */
		if (*dir != '/' || bcg_read_quota(dir, &quota, &cur_period) ||
		    quota != written || cur_period != period)
			continue;
		if (!write_quota(dir, conf, period)) {
			msg("restored the quota of %s to %lld/%lld us, which an "
			    "earlier borrowd had lowered to %lld", dir, conf, period,
			    written);
			n++;
		}
	}
	for (int i = 0; i < nr; i++)
		free(lines[i]);
	free(lines);
	unlink(file);
	return n;
}

int bq_check(const struct bcg *g)
{
	long long quota, period;

	if (!strcmp(g->path, "/"))
		return -BCG_EROOT;
	return bcg_read_quota(g->dir, &quota, &period);
}

int bq_charge(const struct bcg *client, unsigned long long usec,
	      const struct bcg *worker)
{
	char path[PATH_MAX], *slash;
	long long amount = usec;
	struct bq_group *q;
	size_t cut = 0;
	bool took = false;
	int err;

	if (!usec)
		return 0;
	if (worker)
		cut = bcg_common_len(client->path, worker->path);
	snprintf(path, sizeof(path), "%s", client->path);
	q = get_group(path, &err);
	if (!q)
		return err;
	if (strlen(path) <= cut) {
		/* The worker is in the client: its time was the client's. */
		q->a.dropped_us += usec;
		return 0;
	}
	while (strlen(path) > cut && amount > 0) {
		q = get_group(path, &err);
		if (!q)
			break;
		q->last_use = now_s();
		if (q->limited) {
			amount = bq_take(&q->a, amount);
			took = true;
		}
		slash = strrchr(path, '/');
		if (!slash || slash == path)
			break;
		*slash = '\0';
	}
	if (!took) {
		q = get_group(client->path, &err);
		if (q)
			q->a.dropped_us += usec;
		else
			gone.dropped_us += usec;
	}
	return 0;
}

int bq_owed(const struct bcg *g, long long *owed_us, long long *quota_us)
{
	struct bq_group *q = find_group(g->dir);

	/* Pacing asks every round: the rounds may look at it less often. */
	if (q && q->slow && now_s() - q->t >= tick_us / 1e6) {
		look(q, false);
		settle(q);
	}
	*owed_us = q ? q->a.debt_us : 0;
	*quota_us = q && q->limited ? q->a.quota_us : -1;
	return 0;
}

/*
 * Someone else wrote the quota: theirs is the configured one now, and the
 * debt of a group without a quota is dropped. True if so.
 */
static bool adopt(struct bq_group *q)
{
	long long quota, period, expect;
	int ret;

	q->touched = false;	/* a write from now on is seen again */
	ret = bcg_read_quota(q->g.dir, &quota, &period);
	if (ret) {
		if (ret != q->last_err && ret != -ENOENT)
			msg("%s: cannot read the quota: %s", q->g.path, bcg_strerror(ret));
		q->last_err = ret;
		return false;
	}
	expect = q->written_us >= 0 ? q->written_us : q->limited ? q->a.quota_us : -1;
	if (quota == expect && period == q->a.period_us)
		return false;
	msg("%s: the quota is %lld/%lld us now, written by another party: "
	    "adopted as the configured one", q->g.path, quota, period);
	total_adoptions++;
	q->a.quota_us = quota;
	q->a.period_us = period;
	q->a.lowered_us = 0;
	q->written_us = -1;
	q->pending = false;
	q->wrote = false;
	q->limited = quota > 0;
	if (!q->limited) {
		q->a.dropped_us += q->a.debt_us;
		q->a.debt_us = 0;
	}
	save_state();
	return true;
}

/*
 * The account up to the last look: what the group used since the last
 * settling, beyond its quota if a write may have given it more (then it
 * owes that too), or short of it (then that pays). The lowering was the
 * same all along: a write settles first.
 */
static void settle(struct bq_group *q)
{
	long long usage = q->seen_usage, used = -1;
	long long elapsed = (q->seen_t - q->t) * 1e6;

	if (usage >= 0 && q->usage_us >= 0 && usage >= q->usage_us)
		used = usage - q->usage_us;
	q->usage_us = usage;
	q->t = q->seen_t;
	q->lower_us = q->seen_lower_us;
	if (!q->limited)
		return;
	q->paid_last = bq_settle(&q->a, elapsed, used, q->wrote || q->a.lowered_us);
	q->wrote = false;
}

/* How often the rounds look at a group that cannot be lowered nor paid. */
#define BQ_SLOW_LOOK_S	1.0

/*
 * Q owes, its quota cannot be lowered, and it paid nothing at a look, and
 * at most a period's quota a second since (it used nearly all of it): the
 * rounds look at it once a second. Until then a charge may find its debt
 * higher than it is by that much at most. A write of its quota by another
 * party, or a lowering, wakes it.
 */
static bool slow_looks(const struct bq_group *q, double now)
{
	return q->slow && look_may_wait(q) && now - q->t < BQ_SLOW_LOOK_S;
}

/* Whether Q paid little enough at this look to be looked at once a second. */
static void judge_slow(struct bq_group *q)
{
	if (!q->unlowerable)
		q->slow = false;
	else if (q->slow)
		q->slow = q->paid_last <= q->a.quota_us;
	else
		q->slow = !q->paid_last;
}

static void write_lowered(struct bq_group *q)
{
	long long lowered = q->pending_lowered, quota = q->a.quota_us - lowered;
	double t;
	int ret;

	settle(q);	/* from write_due()'s look */
	q->pending = false;
	if (lowered == q->a.lowered_us)
		return;
	q->pending = true;	/* saved with the state, before the write */
	ret = save_state();
	q->pending = false;
	if (ret && lowered) {
		msg("%s: cannot save %s (%s): the quota stays", q->g.path,
		    state_file, strerror(-ret));
		return;
	}
	/*
	 * Another party's write between this look and the write below is
	 * lost (a cgroup file has no compare-and-swap): the look is the last
	 * step before it, and the time between them is counted. (Our own
	 * write's event makes the next round read the quota once: a write of
	 * another party that lands after ours is adopted there.)
	 */
	t = now_s();
	drain_notify();
	if (adopt_if_written(q))
		return;
	ret = write_quota(q->g.dir, quota, q->a.period_us);
	t = now_s() - t;
	if (t > race_max_s)
		race_max_s = t;
	if (ret) {
		total_failed++;
		if (ret != q->last_err)
			msg("%s: cannot write the quota %lld: %s", q->g.path, quota,
			    strerror(-ret));
		q->last_err = ret;
		save_state();
		return;
	}
	q->last_err = 0;
	q->a.lowered_us = lowered;
	q->wrote = true;
	q->written_us = lowered ? quota : -1;
	q->writes++;
	total_writes++;
	q->last_use = now_s();
	if (!lowered)
		save_state();
}

/*
 * How much more a lowering must take before it is written: a twentieth of
 * the quota, at least the kernel's smallest quota. A debt below twice that
 * waits for a period the group leaves unused, or for more debt.
 */
static long long hysteresis(const struct bq_acct *a)
{
	return a->quota_us / 20 > BQ_MIN_QUOTA_US ? a->quota_us / 20 : BQ_MIN_QUOTA_US;
}

static void plan_look(struct bq_group *q, double now);

void bq_tick(void)
{
	double now = now_s();

	total_rounds++;
	drain_notify();
	for (int i = 0; i < nr_groups; i++) {
		struct bq_group *q = &groups[i];
		long long target, floor, least;
		int k;

		if (dormant(q)) {
			/* Unused for a minute: forgotten. */
			if (now - q->last_use > 60)
				forget(i--);
			continue;
		}
		if (slow_looks(q, now))
			continue;
		if (forget_if_gone(q)) {
			i--;
			continue;
		}
		if (spare_look(q, now)) {
			total_spared++;
			continue;
		}
		look(q, false);
		settle(q);
		adopt_if_written(q);
		q->unlowerable = false;
		if (!q->limited) {
			judge_slow(q);
			continue;
		}
		/*
		 * The floor as if every CPU ran the group's threads; the
		 * runnable CPUs are counted only where a smaller floor would
		 * give another target (a reading of every thread's state).
		 */
		least = q->a.debt_us ? min_quota(q) : 0;
		q->unlowerable = q->a.debt_us && q->a.quota_us <= least;
		judge_slow(q);
		floor = bq_floor(q->a.quota_us, nr_cpus, slice_us, jiffy_us);
		target = bq_target(&q->a, floor, least);
		floor = bq_floor(q->a.quota_us, 1, slice_us, jiffy_us);
		if (bq_target(&q->a, floor, least) != target) {
			total_runnable_counts++;
			k = count_runnable(q->g.dir, nr_cpus, 0);
			floor = bq_floor(q->a.quota_us, k, slice_us, jiffy_us);
			target = bq_target(&q->a, floor, least);
		}
		if (!bq_must_write(&q->a, target, tick_us, hysteresis(&q->a))) {
			q->pending = false;
			continue;
		}
		if (!q->pending) {
			/* v1 reads cpu.stat apart from the usage. */
			q->pending_periods = q->seen_periods >= 0 ? q->seen_periods :
					     bcg_stat_key(q->g.dir, "nr_periods");
			q->pending_since = now;
			/* The look above is this one's: the next at a start. */
			plan_look(q, now);
		}
		q->pending = true;
		q->pending_lowered = target;
	}
}

/* How often to look for a period's start whose time is not known. */
#define BQ_LOOK_S	0.002

/*
 * When to look next for the start of a period of Q's after its write was
 * decided. The phase is taken from a look every BQ_LOOK_S, and kept: set
 * at each write, it would move later by the look's delay every time.
 */
static void plan_look(struct bq_group *q, double now)
{
	double period = q->a.period_us / 1e6, last;

	q->due = now + BQ_LOOK_S;
	if (!q->phase)
		return;
	/* The start the phase puts last, at or before now. */
	last = q->phase + period * (long long)((now - q->phase) / period);
	if (now - last < 0.003)
		q->due = now + 0.0005;		/* due about now */
	else if (last < q->pending_since)
		q->due = last + period + 0.0005;	/* due next */
	else
		q->phase = 0;			/* missed: the timer restarted */
}

/* Whether Q's pending write is due now; if not, when to look again. */
static bool write_due(struct bq_group *q, double now)
{
	if (now < q->due)
		return false;
	total_period_looks++;
	look(q, true);
	if (q->seen_periods != q->pending_periods) {
		if (!q->phase)
			q->phase = now;
		return true;
	}
	/* An idle group's timer stops: its runtime is full, any time will do. */
	if (now - q->pending_since > 1.2 * q->a.period_us / 1e6)
		return true;
	plan_look(q, now);
	return false;
}

void bq_sleep(double seconds, volatile sig_atomic_t *woken)
{
	double end = now_s() + seconds, now, wake;

	for (;;) {
		if (*woken)
			return;
		now = now_s();
		wake = end;
		for (int i = 0; i < nr_groups; i++) {
			struct bq_group *q = &groups[i];

			if (!q->pending)
				continue;
			if (write_due(q, now))
				write_lowered(q);
			if (q->pending && q->due < wake)
				wake = q->due;
		}
		if (wake >= end || now >= end)
			break;
		if (wake > now)
			usleep((wake - now) * 1e6);
	}
	now = now_s();
	if (now < end && !*woken)
		usleep((end - now) * 1e6);
}

void bq_totals(struct bq_totals *t)
{
	memset(t, 0, sizeof(*t));
	t->borrowed_us = gone.borrowed_us;
	t->paid_us = gone.paid_us;
	t->dropped_us = gone.dropped_us;
	t->regained_us = gone.regained_us;
	for (int i = 0; i < nr_groups; i++) {
		const struct bq_acct *a = &groups[i].a;

		t->groups++;
		t->lowered += groups[i].written_us >= 0;
		t->borrowed_us += a->borrowed_us;
		t->paid_us += a->paid_us;
		t->dropped_us += a->dropped_us;
		t->debt_us += a->debt_us;
		t->regained_us += a->regained_us;
	}
	t->writes = total_writes;
	t->race_max_us = race_max_s * 1e6;
	t->adoptions = total_adoptions;
	t->failed_writes = total_failed;
	t->period_looks = total_period_looks;
	t->looks = total_looks;
	t->looks_spared = total_spared;
	t->runnable_counts = total_runnable_counts;
	t->rounds = total_rounds;
}

void bq_print(FILE *f)
{
	for (int i = 0; i < nr_groups; i++) {
		const struct bq_group *q = &groups[i];

		fprintf(f, "borrowd: quota %s: %lld/%lld us (lowered by %lld), "
			"borrowed %llu us, paid %llu, owes %lld, dropped %llu, "
			"regained %llu, %lu writes\n", q->g.path, q->a.quota_us,
			q->a.period_us, q->a.lowered_us, q->a.borrowed_us,
			q->a.paid_us, q->a.debt_us, q->a.dropped_us,
			q->a.regained_us, q->writes);
	}
}

/* S as a JSON string. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

void bq_json(FILE *f)
{
	struct bq_totals t;

	bq_totals(&t);
	fprintf(f, "\"borrowed_us\": %llu, \"paid_us\": %llu, \"dropped_us\": %llu, "
		"\"debt_us\": %llu, \"regained_us\": %llu, \"writes\": %llu, "
		"\"adoptions\": %llu, \"failed_writes\": %llu, \"lowered_groups\": %d, "
		"\"race_max_us\": %.1f, \"period_looks\": %llu, \"runnable_counts\": %llu, "
		"\"rounds\": %llu, \"looks\": %llu, \"looks_spared\": %llu, \"groups\": [",
		t.borrowed_us, t.paid_us, t.dropped_us, t.debt_us, t.regained_us,
		t.writes, t.adoptions, t.failed_writes, t.lowered, t.race_max_us,
		t.period_looks, t.runnable_counts, t.rounds, t.looks, t.looks_spared);
	for (int i = 0; i < nr_groups; i++) {
		const struct bq_group *q = &groups[i];

		fprintf(f, "%s\n  {\"path\": ", i ? "," : "");
		json_str(f, q->g.path);
		fprintf(f, ", \"quota_us\": %lld, \"period_us\": %lld, "
			"\"lowered_us\": %lld, \"borrowed_us\": %llu, \"paid_us\": %llu, "
			"\"debt_us\": %lld, \"dropped_us\": %llu, \"regained_us\": %llu, "
			"\"writes\": %lu}", q->a.quota_us, q->a.period_us,
			q->a.lowered_us, q->a.borrowed_us, q->a.paid_us, q->a.debt_us,
			q->a.dropped_us, q->a.regained_us, q->writes);
	}
	fprintf(f, "]");
}
