// SPDX-License-Identifier: GPL-2.0
/*
 * spinner DIR N: joins the cgroup directory DIR (its cgroup.procs), then
 * spins on N threads of one process, so that they share a group and, pinned
 * by the caller, a CPU.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *spin(void *arg)
{
	for (;;)
		;
	return arg;
}

int main(int argc, char **argv)
{
	char path[4096];
	pthread_t th;
	FILE *f;
	int i, nr;

	if (argc != 3)
		return 2;
	nr = atoi(argv[2]);
	snprintf(path, sizeof(path), "%s/cgroup.procs", argv[1]);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f))
		return 1;
	for (i = 1; i < nr; i++)
		if (pthread_create(&th, NULL, spin, NULL))
			return 1;
	spin(NULL);
	return 0;
}
