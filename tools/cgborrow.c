// SPDX-License-Identifier: GPL-2.0
/*
 * cgborrow: charge CPU time to a cgroup's cpu.cfs.borrowing_us and show
 * what groups borrow, owe and pay, on cgroup v1 and v2.
 *
 *   cgborrow charge CGROUP USEC [--worker-pid PID | --worker-cgroup CGROUP]
 *   cgborrow show [--json] CGROUP...
 *   cgborrow top [--once] [CGROUP...]
 *
 * A group is a path in the cpu hierarchy, --pid PID or --container ID.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <libcgroup.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "borrow_cg.h"

#define CGBORROW_VERSION	"1.0"
#define MAX_TARGETS		4096

static const char *prog = "cgborrow";

static const char usage_text[] =
"Usage: cgborrow charge {CGROUP | --pid PID | --container ID} USEC\n"
"                       [--worker-pid PID | --worker-cgroup CGROUP]\n"
"       cgborrow show [--json] {CGROUP | --pid PID | --container ID}...\n"
"       cgborrow top [--once] [--delay SEC] [--iterations N] [--all]\n"
"                    [CGROUP | --pid PID | --container ID]...\n"
"       cgborrow --help | --version\n"
"\n"
"Charges CPU time that a worker spent for a cgroup to the group's\n"
"cpu.cfs.borrowing_us, and shows what groups borrowed, paid and owe.\n"
"\n"
"  charge   add USEC microseconds to what the group owes; with --worker-pid,\n"
"           name the process that spent them (the kernel then also charges\n"
"           the group's ancestors up to the one it shares with the worker),\n"
"           or with --worker-cgroup its group (by id: the worker may have\n"
"           exited)\n"
"  show     what the group owes, its quota and period and its cpu.stat\n"
"           counters (v1's nanoseconds converted to microseconds);\n"
"           --json prints a JSON array\n"
"  top      a table of groups, refreshed every --delay seconds (default 1):\n"
"           CPU use, quota, charged and paid (shares of one CPU over the\n"
"           interval), owed and dropped (ms), throttled periods; without\n"
"           groups, every group that has a quota or has borrowed (--all:\n"
"           every group); --once prints one table and exits\n"
"\n"
"A CGROUP is a path in the cpu hierarchy (/default/ctr) or under its mount\n"
"point; --pid names a process's group; --container a containerd (nerdctl,\n"
"Docker) or Podman container by id or unique id prefix, through the\n"
"group of its init process.\n"
"\n"
"Exit status: 0 success, 1 error, 2 bad arguments or value, 3 the kernel\n"
"lacks cpu.cfs.borrowing_us, 4 permission denied.\n";

static void usage(FILE *f)
{
	fputs(usage_text, f);
}

static int fail(int err, const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, bcg_strerror(err));
	return bcg_exit_status(err);
}

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "%s: ", prog);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry '%s --help'.\n", prog);
	return EXIT_USAGE;
}

/* A group named on the command line, and how, for messages. */
struct target {
	enum { T_PATH, T_PID, T_CONTAINER } kind;
	const char *arg;
	struct bcg g;
};

static int resolve(struct target *t)
{
	pid_t pid;
	int ret;

	switch (t->kind) {
	case T_PID:
		if (bcg_parse_pid(t->arg, &pid))
			return -EINVAL;
		return bcg_from_pid(&t->g, pid);
	case T_CONTAINER:
		return bcg_from_container(&t->g, t->arg, NULL);
	default:
		ret = bcg_from_path(&t->g, t->arg);
		return ret == -ENOTDIR ? -ENOENT : ret;
	}
}

static const char *target_name(const struct target *t, char *buf, size_t len)
{
	static const char *const kinds[] = { "", "pid ", "container " };

	if (t->kind == T_PATH || !t->g.path[0])
		snprintf(buf, len, "%s%s", kinds[t->kind], t->arg);
	else
		snprintf(buf, len, "%s%s (%s)", kinds[t->kind], t->arg, t->g.path);
	return buf;
}

/* A resolution error: a bad pid is a usage error, not "invalid value". */
static int fail_target(struct target *t, int err)
{
	char name[PATH_MAX + 128];

	if (err == -EINVAL && t->kind == T_PID)
		return bad_usage("invalid pid '%s'", t->arg);
	if (err == -EINVAL)
		return bad_usage("invalid cgroup path '%s'", t->arg);
	return fail(err, target_name(t, name, sizeof(name)));
}

enum {
	OPT_PID = 1000, OPT_CONTAINER, OPT_WORKER, OPT_JSON, OPT_ONCE, OPT_ALL,
	OPT_WORKER_CGROUP,
};

static const struct option long_opts[] = {
	{ "pid", required_argument, NULL, OPT_PID },
	{ "container", required_argument, NULL, OPT_CONTAINER },
	{ "worker-pid", required_argument, NULL, OPT_WORKER },
	{ "worker-cgroup", required_argument, NULL, OPT_WORKER_CGROUP },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "once", no_argument, NULL, OPT_ONCE },
	{ "all", no_argument, NULL, OPT_ALL },
	{ "delay", required_argument, NULL, 'd' },
	{ "iterations", required_argument, NULL, 'n' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct opts {
	struct target *targets;
	int nr_targets;
	const char *worker;
	const char *worker_cgroup;
	bool json, once, all;
	double delay;
	long iterations;
	char **args;		/* the positional arguments */
	int nr_args;
};

static int add_target(struct opts *o, int kind, const char *arg)
{
	if (o->nr_targets == MAX_TARGETS)
		return bad_usage("more than %s groups", "4096");
	o->targets[o->nr_targets].kind = kind;
	o->targets[o->nr_targets].arg = arg;
	o->nr_targets++;
	return 0;
}

/*
 * Whether a subcommand allows option C: ALLOWED lists its short options
 * and, as 'A', 'B', ..., its long ones from OPT_PID on.
 */
static bool allows(const char *allowed, int c)
{
	return !!strchr(allowed, c < OPT_PID ? c : 'A' + c - OPT_PID);
}

/* Options of every subcommand; which ones it allows is checked after. */
static int parse(int argc, char **argv, struct opts *o, const char *allowed)
{
	char *end;
	int c, ret;

	opterr = 0;	/* reported below, with the program's name */
	while ((c = getopt_long(argc, argv, ":d:n:h", long_opts, NULL)) != -1) {
		if (c == ':')
			return bad_usage("option '%s' needs an argument", argv[optind - 1]);
		if (c != '?' && c != 'h' && !allows(allowed, c))
			return bad_usage("option '%s' does not apply here", argv[optind - 1]);
		switch (c) {
		case OPT_PID:
			ret = add_target(o, T_PID, optarg);
			if (ret)
				return ret;
			break;
		case OPT_CONTAINER:
			ret = add_target(o, T_CONTAINER, optarg);
			if (ret)
				return ret;
			break;
		case OPT_WORKER:
			o->worker = optarg;
			break;
		case OPT_WORKER_CGROUP:
			o->worker_cgroup = optarg;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_ONCE:
			o->once = true;
			break;
		case OPT_ALL:
			o->all = true;
			break;
		case 'd':
			o->delay = strtod(optarg, &end);
			if (*end || end == optarg || !(o->delay >= 0.1 && o->delay <= 3600))
				return bad_usage("invalid delay '%s' (0.1 to 3600 s)", optarg);
			break;
		case 'n':
			o->iterations = strtol(optarg, &end, 10);
			if (*end || end == optarg || o->iterations < 1)
				return bad_usage("invalid number of iterations '%s'", optarg);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return bad_usage("invalid option '%s'", argv[optind - 1]);
		}
	}
	o->args = argv + optind;
	o->nr_args = argc - optind;
	return 0;
}

static int cmd_charge(struct opts *o)
{
	unsigned long long usec;
	struct target wt = { .kind = T_PATH };
	struct target *t;
	pid_t worker = 0;
	int ret;

	if (o->nr_targets > 1)
		return bad_usage("charge takes one group, not %s", "several");
	if (o->nr_args != (o->nr_targets ? 1 : 2))
		return bad_usage("charge takes a group and a number of %s",
				 "microseconds");
	if (!o->nr_targets)
		add_target(o, T_PATH, o->args[0]);
	t = &o->targets[0];
	ret = bcg_parse_usec(o->args[o->nr_args - 1], &usec);
	if (ret == -ERANGE)
		return bad_usage("value out of range: '%s'", o->args[o->nr_args - 1]);
	if (ret)
		return bad_usage("invalid value '%s': a decimal number of microseconds",
				 o->args[o->nr_args - 1]);
	if (o->worker && bcg_parse_pid(o->worker, &worker))
		return bad_usage("invalid worker pid '%s'", o->worker);
	if (o->worker && o->worker_cgroup)
		return bad_usage("name the worker once: %s",
				 "--worker-pid or --worker-cgroup");
	if (o->worker_cgroup) {
		wt.arg = o->worker_cgroup;
		ret = resolve(&wt);
		if (ret)
			return fail_target(&wt, ret);
	}
	ret = resolve(t);
	if (ret)
		return fail_target(t, ret);
	if (o->worker_cgroup)
		ret = bcg_charge_for_group(&t->g, NULL, usec, &wt.g);
	else
		ret = bcg_charge(&t->g, NULL, usec, worker);
	if (ret) {
		char name[PATH_MAX + 128];

		ret = fail(ret, target_name(t, name, sizeof(name)));
		/*
		 * A one-shot charge cannot lower a quota for later periods: it
		 * would not be there to restore it, were it killed meanwhile.
		 */
		if (ret == EXIT_NOFEATURE)
			fprintf(stderr, "%s: on this kernel borrowd charges by lowering "
				"quotas (borrowd(8), --mode quota)\n", prog);
		return ret;
	}
	return 0;
}

/* Print N, or "null"/"-" for a number the kernel does not have. */
static void json_num(const char *key, long long v, bool *first)
{
	printf("%s\"%s\": ", *first ? "" : ", ", key);
	*first = false;
	if (v < 0)
		printf("null");
	else
		printf("%lld", v);
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static const struct {
	const char *name;
	size_t off;
} show_fields[] = {
#define F(name, field) { name, offsetof(struct bcg_stat, field) }
	F("owed_usec", owed_us),
	F("quota_usec", quota_us),
	F("period_usec", period_us),
	F("usage_usec", usage_us),
	F("nr_periods", nr_periods),
	F("nr_throttled", nr_throttled),
	F("throttled_usec", throttled_us),
	F("nr_borrow_periods", nr_borrow_periods),
	F("borrowed_usec", borrowed_us),
	F("borrow_deducted_usec", deducted_us),
	F("borrow_outstanding_usec", outstanding_us),
	F("borrow_dropped_usec", dropped_us),
#undef F
};

#define FIELD(st, i) (*(const long long *)((const char *)(st) + show_fields[i].off))

static int cmd_show(struct opts *o)
{
	int status = 0, shown = 0;
	struct bcg_stat st;
	char name[PATH_MAX + 128];

	for (int i = 0; i < o->nr_args; i++)
		add_target(o, T_PATH, o->args[i]);
	if (!o->nr_targets)
		return bad_usage("show needs at least one %s", "group");
	if (o->json)
		printf("[");
	for (int i = 0; i < o->nr_targets; i++) {
		struct target *t = &o->targets[i];
		bool first = true;
		int ret;

		ret = resolve(t);
		if (!ret)
			ret = bcg_read(&t->g, &st);
		if (ret) {
			int s = ret == -EINVAL ? fail_target(t, ret) :
				fail(ret, target_name(t, name, sizeof(name)));

			status = status ?: s;
			continue;
		}
		if (o->json) {
			printf("%s\n  {\"cgroup\": ", shown ? "," : "");
			json_str(t->g.path);
			printf(", \"hierarchy\": \"%s\", ", bcg_is_v2() ? "v2" : "v1");
			for (size_t f = 0; f < ARRAY_SIZE(show_fields); f++)
				json_num(show_fields[f].name, FIELD(&st, f), &first);
			printf("}");
		} else {
			printf("%s%s (cgroup %s)\n", shown ? "\n" : "",
			       t->g.path, bcg_is_v2() ? "v2" : "v1");
			for (size_t f = 0; f < ARRAY_SIZE(show_fields); f++) {
				long long v = FIELD(&st, f);

				if (v >= 0)
					printf("  %-24s %lld\n", show_fields[f].name, v);
				else if (f == 1)	/* quota_usec */
					printf("  %-24s max\n", show_fields[f].name);
			}
		}
		shown++;
	}
	if (o->json)
		printf("%s]\n", shown ? "\n" : "");
	return status;
}

/* One row of cgborrow top: the last two samples of a group. */
struct row {
	struct bcg g;
	struct bcg_stat prev, cur;
	int samples;
	bool seen;		/* in this round */
	double cpu, charged, paid;
};

struct table {
	struct row *rows;
	int nr, cap;
	int nr_lacking;		/* groups without the file, last walk */
};

static struct row *table_row(struct table *tb, const struct bcg *g)
{
	struct row *r;

	for (int i = 0; i < tb->nr; i++)
		if (!strcmp(tb->rows[i].g.path, g->path))
			return &tb->rows[i];
	if (tb->nr == tb->cap) {
		tb->cap = tb->cap ? 2 * tb->cap : 64;
		r = realloc(tb->rows, tb->cap * sizeof(*r));
		if (!r) {
			perror(prog);
			exit(1);
		}
		tb->rows = r;
	}
	r = &tb->rows[tb->nr++];
	memset(r, 0, sizeof(*r));
	r->g = *g;
	return r;
}

static void sample_group(struct table *tb, const struct bcg *g)
{
	struct bcg_stat st;
	struct row *r;

	if (bcg_read(g, &st))
		return;
	r = table_row(tb, g);
	if (r->seen)		/* named twice */
		return;
	r->prev = r->cur;
	r->cur = st;
	r->samples++;
	r->seen = true;
}

/* Every group of the cpu hierarchy that has the file. */
static void sample_tree(struct table *tb)
{
	struct cgroup_file_info info;
	void *handle = NULL;
	struct bcg g;
	int lvl, ret;

	ret = cgroup_walk_tree_begin("cpu", "/", 0, &handle, &info, &lvl);
	while (!ret) {
		if (info.type == CGROUP_FILE_TYPE_DIR &&
		    !bcg_from_path(&g, info.full_path)) {
			ret = bcg_check(&g);
			if (!ret)
				sample_group(tb, &g);
			else if (ret == -BCG_ENOFEATURE)
				tb->nr_lacking++;
		}
		ret = cgroup_walk_tree_next(0, &handle, &info, lvl);
	}
	cgroup_walk_tree_end(&handle);
}

static void sample(struct table *tb, struct opts *o)
{
	int n = 0;

	for (int i = 0; i < tb->nr; i++)
		tb->rows[i].seen = false;
	tb->nr_lacking = 0;
	if (o->nr_targets) {
		for (int i = 0; i < o->nr_targets; i++)
			if (!resolve(&o->targets[i]))
				sample_group(tb, &o->targets[i].g);
	} else {
		sample_tree(tb);
	}
	/* Forget the groups that are gone. */
	for (int i = 0; i < tb->nr; i++)
		if (tb->rows[i].seen)
			tb->rows[n++] = tb->rows[i];
	tb->nr = n;
}

static double share(long long a, long long b, double usec)
{
	return a >= 0 && b >= 0 && usec > 0 ? 100.0 * (double)(a - b) / usec : -1;
}

static int by_use(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	double dx = x->cpu + x->charged, dy = y->cpu + y->charged;

	if (dx != dy)
		return dx < dy ? 1 : -1;
	return strcmp(x->g.path, y->g.path);
}

static void print_pct(double v)
{
	if (v < 0)
		printf(" %8s", "-");
	else
		printf(" %7.1f%%", v);
}

static void print_table(struct table *tb, struct opts *o, double usec, bool clear)
{
	char now[16];
	time_t t = time(NULL);
	int shown = 0;

	for (int i = 0; i < tb->nr; i++) {
		struct row *r = &tb->rows[i];

		r->cpu = share(r->cur.usage_us, r->prev.usage_us, usec);
		r->charged = share(r->cur.borrowed_us, r->prev.borrowed_us, usec);
		r->paid = share(r->cur.deducted_us, r->prev.deducted_us, usec);
	}
	qsort(tb->rows, tb->nr, sizeof(tb->rows[0]), by_use);
	strftime(now, sizeof(now), "%H:%M:%S", localtime(&t));
	if (clear)
		printf("\033[H\033[J");
	printf("cgborrow top - %s, cgroup %s, shares of one CPU over %.1f s\n",
	       now, bcg_is_v2() ? "v2" : "v1", usec / 1e6);
	printf("%8s %8s %8s %8s %10s %11s %11s  %s\n", "CPU", "QUOTA", "CHARGED",
	       "PAID", "OWED(ms)", "DROPPED(ms)", "THROTTLED", "CGROUP");
	for (int i = 0; i < tb->nr; i++) {
		struct row *r = &tb->rows[i];
		char thr[48] = "-";

		if (r->samples < 2)
			continue;
		if (!o->all && !o->nr_targets && r->cur.quota_us < 0 &&
		    r->cur.borrowed_us <= 0)
			continue;
		print_pct(r->cpu);
		print_pct(r->cur.quota_us >= 0 && r->cur.period_us > 0 ?
			  100.0 * r->cur.quota_us / r->cur.period_us : -1);
		print_pct(r->charged);
		print_pct(r->paid);
		printf(" %10.1f", r->cur.owed_us / 1000.0);
		if (r->cur.dropped_us >= 0)
			printf(" %11.1f", r->cur.dropped_us / 1000.0);
		else
			printf(" %11s", "-");
		if (r->cur.nr_throttled >= 0 && r->cur.nr_periods >= 0)
			snprintf(thr, sizeof(thr), "%lld/%lld",
				 r->cur.nr_throttled - r->prev.nr_throttled,
				 r->cur.nr_periods - r->prev.nr_periods);
		printf(" %11s  %s\n", thr, r->g.path);
		shown++;
	}
	if (!shown)
		printf("(no group with a quota or borrowing; --all shows every group)\n");
	fflush(stdout);
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmd_top(struct opts *o)
{
	bool clear = !o->once && isatty(STDOUT_FILENO);
	struct table tb = { 0 };
	double t0, t1;
	long rounds = o->once ? 1 : o->iterations;
	int ret;

	for (int i = 0; i < o->nr_args; i++)
		add_target(o, T_PATH, o->args[i]);
	/* Named groups must exist now; later they may come and go. */
	for (int i = 0; i < o->nr_targets; i++) {
		ret = resolve(&o->targets[i]);
		if (!ret)
			ret = bcg_check(&o->targets[i].g);
		if (ret)
			return fail_target(&o->targets[i], ret);
	}
	t0 = now_us();
	sample(&tb, o);
	/* Groups, none with the file: say so rather than show nothing. */
	if (!tb.nr && tb.nr_lacking)
		return fail(-BCG_ENOFEATURE, bcg_mount());
	for (long n = 0; !rounds || n < rounds; n++) {
		usleep((useconds_t)(o->delay * 1e6));
		t1 = now_us();
		sample(&tb, o);
		print_table(&tb, o, t1 - t0, clear);
		t0 = t1;
	}
	free(tb.rows);
	return 0;
}

int main(int argc, char **argv)
{
	static struct target targets[MAX_TARGETS];
	struct opts o = { .targets = targets, .delay = 1.0 };
	const char *cmd;
	int ret;

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version")) {
		printf("cgborrow %s\n", CGBORROW_VERSION);
		return 0;
	}
	/* Option letters each subcommand allows (A.. for the long ones). */
	if (!strcmp(cmd, "charge"))
		ret = parse(argc - 1, argv + 1, &o, "ABCG");
	else if (!strcmp(cmd, "show"))
		ret = parse(argc - 1, argv + 1, &o, "ABD");
	else if (!strcmp(cmd, "top"))
		ret = parse(argc - 1, argv + 1, &o, "ABEFdn");
	else
		return bad_usage("unknown command '%s'", cmd);
	if (ret)
		return ret;

	ret = bcg_init();
	if (ret)
		return fail(ret, "cannot set up");
	if (!strcmp(cmd, "charge"))
		return cmd_charge(&o);
	if (!strcmp(cmd, "show"))
		return cmd_show(&o);
	return cmd_top(&o);
}
