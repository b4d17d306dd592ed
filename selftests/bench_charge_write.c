// SPDX-License-Identifier: GPL-2.0
/*
 * The cost of a charge: writes to cpu.cfs.borrowing_us against writes to
 * cpu.weight (cgroup v1: cpu.shares), in the same boot, interleaved in
 * blocks so that drift hits both alike. The charges go to a group four
 * levels deep with a quota on every level (the walk's worst case here) and
 * to a group with a quota at its own level only.
 *
 *   bench_charge_write [-n WRITES_PER_BLOCK] [-b BLOCKS]
 *
 * Prints the mean time per write of each and the ratios; it asserts nothing.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup_util.h"
#include "borrowing_util.h"

/* Mean ns per write of @value to @file of @cg over @n writes, one open. */
static double write_ns(const char *cg, const char *file, const char *value, int n)
{
	char path[PATH_MAX];
	size_t len = strlen(value);
	long start;
	int fd, i;

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	fd = open(path, O_WRONLY);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	start = bcg_now_usec();
	for (i = 0; i < n; i++) {
		if (write(fd, value, len) != (ssize_t)len) {
			perror(path);
			exit(1);
		}
	}
	start = bcg_now_usec() - start;
	close(fd);
	return start * 1000.0 / n;
}

int main(int argc, char **argv)
{
	int n = 20000, blocks = 10, b, opt, level;
	double weight = 0, flat = 0, deep = 0;
	char *cg[5], name[64];
	const char *weight_file, *weight_value;

	while ((opt = getopt(argc, argv, "n:b:")) != -1) {
		switch (opt) {
		case 'n': n = atoi(optarg); break;
		case 'b': blocks = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-n WRITES_PER_BLOCK] [-b BLOCKS]\n", argv[0]);
			return 2;
		}
	}
	if (bcg_init()) {
		fprintf(stderr, "no cgroup hierarchy with the cpu controller\n");
		return 1;
	}
	weight_file = bcg_is_v1() ? "cpu.shares" : "cpu.weight";
	weight_value = bcg_is_v1() ? "1024" : "100";

	/* root - l0 - l1 - l2 - l3, each with a quota; and a sibling of l0. */
	snprintf(name, sizeof(name), "borrowing_bench_%d", getpid());
	cg[0] = bcg_create(bcg_root(), name);
	for (level = 1; level < 4; level++) {
		snprintf(name, sizeof(name), "l%d", level);
		cg[level] = cg[level - 1] ? bcg_create(cg[level - 1], name) : NULL;
	}
	snprintf(name, sizeof(name), "borrowing_bench_flat_%d", getpid());
	cg[4] = bcg_create(bcg_root(), name);
	for (level = 0; level < 5; level++) {
		if (!cg[level] || bcg_set_bandwidth(cg[level], 1000000, 1000000)) {
			fprintf(stderr, "cannot create the groups\n");
			return 1;
		}
	}

	for (b = 0; b < blocks; b++) {
		weight += write_ns(cg[3], weight_file, weight_value, n);
		flat += write_ns(cg[4], BORROWING_FILE, "1", n);
		deep += write_ns(cg[3], BORROWING_FILE, "1", n);
	}
	printf("cgroup %s, %d x %d writes each, ns per write (mean):\n",
	       bcg_is_v1() ? "v1" : "v2", blocks, n);
	printf("  %-46s %10.0f\n", weight_file, weight / blocks);
	printf("  %-46s %10.0f  (%.2fx %s)\n", "cpu.cfs.borrowing_us, one level with quota",
	       flat / blocks, flat / weight, weight_file);
	printf("  %-46s %10.0f  (%.2fx %s)\n", "cpu.cfs.borrowing_us, four levels with quota",
	       deep / blocks, deep / weight, weight_file);

	bcg_destroy(cg[0]);
	bcg_destroy(cg[4]);
	return 0;
}
