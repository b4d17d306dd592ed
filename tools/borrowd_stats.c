// SPDX-License-Identifier: GPL-2.0
/*
 * borrowd's totals: per worker and per daemon's client on SIGUSR1 and at
 * exit, and with --stats as JSON, for the tests and the measurements.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "borrow_quota.h"
#include "borrowd.h"
#include "borrowd.skel.h"

/* Charges of rules and clients that are gone: for the totals. */
unsigned long long gone_charged_us, gone_failed_us;
unsigned long metadata_scans;
unsigned long long metadata_scan_ns;

/* ", N us failed" when any did. */
const char *failed_note(unsigned long long failed_us)
{
	static char buf[48];

	buf[0] = '\0';
	if (failed_us)
		snprintf(buf, sizeof(buf), ", %llu us failed", failed_us);
	return buf;
}

static const char *pace_note(const struct rule *r)
{
	static char buf[64];

	snprintf(buf, sizeof(buf), ", paused %lu of %lu rounds", r->paused, r->rounds);
	return buf;
}

void print_totals(void)
{
	for (int i = 0; i < nr_rules; i++)
		msg("worker %d (%s) -> %s: charged %llu us%s%s", (int)rules[i].worker,
		    rules[i].comm, rules[i].client.path, rules[i].acct.charged_us,
		    failed_note(rules[i].acct.failed_us),
		    opt.pace ? pace_note(&rules[i]) : "");
	for (int i = 0; i < nr_clients; i++)
		msg("daemon %d, container %.12s -> %s: charged %llu us%s",
		    (int)clients[i].daemon, clients[i].container, clients[i].g.path,
		    clients[i].acct.charged_us, failed_note(clients[i].acct.failed_us));
	if (opt.mode == MODE_QUOTA)
		bq_print(stderr);
}

/*
 * The BPF programs' run time and runs as the kernel counts them (with
 * kernel.bpf_stats_enabled; 0 without), as "bpf_run_time_ns",
 * "bpf_run_cnt" and per program: the agent's cost in the kernel, read at
 * the moment its own CPU time is, so that the two divide by one interval.
 */
static void bpf_json(FILE *f)
{
	unsigned long long run_ns = 0, runs = 0;
	struct bpf_program *prog;
	bool first = true;

	fprintf(f, ", \"bpf_programs\": {");
	bpf_object__for_each_program(prog, skel->obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
			continue;
		fprintf(f, "%s\"%s\": {\"run_time_ns\": %llu, \"run_cnt\": %llu}",
			first ? "" : ", ", bpf_program__name(prog),
			(unsigned long long)info.run_time_ns, (unsigned long long)info.run_cnt);
		first = false;
		run_ns += info.run_time_ns;
		runs += info.run_cnt;
	}
	fprintf(f, "}, \"bpf_run_time_ns\": %llu, \"bpf_run_cnt\": %llu", run_ns, runs);
}

/*
 * --stats: the totals as JSON, replaced whole (written aside, renamed).
 * "time_s" is CLOCK_MONOTONIC when they were taken: rates over two files
 * divide by the time between them, not by the time between the signals
 * that asked for them (on a busy node the signal's sender may run late).
 */
void write_stats(void)
{
	unsigned long long charged = gone_charged_us, failed = gone_failed_us;
	char tmp[PATH_MAX + 8];
	struct timespec ts;
	struct rusage ru;
	FILE *f;

	if (!*opt.stats)
		return;
	for (int i = 0; i < nr_rules; i++) {
		charged += rules[i].acct.charged_us;
		failed += rules[i].acct.failed_us;
	}
	for (int i = 0; i < nr_clients; i++) {
		charged += clients[i].acct.charged_us;
		failed += clients[i].acct.failed_us;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	getrusage(RUSAGE_SELF, &ru);
	snprintf(tmp, sizeof(tmp), "%s.new", opt.stats);
	f = fopen(tmp, "we");
	if (!f) {
		msg("%s: %s", tmp, strerror(errno));
		return;
	}
	fprintf(f, "{\"mode\": \"%s\", \"time_s\": %lld.%09ld, \"charged_us\": %llu, "
		"\"failed_us\": %llu, \"scans\": %lu, \"scan_cpu_us\": %llu, \"cpu_us\": %lld",
		mode_names[opt.mode], (long long)ts.tv_sec, ts.tv_nsec, charged, failed,
		metadata_scans, metadata_scan_ns / 1000,
		(long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
		ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
	if (skel)
		bpf_json(f);
	if (opt.mode == MODE_QUOTA) {
		fprintf(f, ", ");
		bq_json(f);
	}
	fprintf(f, "}\n");
	if (fclose(f) || rename(tmp, opt.stats))
		msg("%s: %s", opt.stats, strerror(errno));
}
