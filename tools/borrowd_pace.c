// SPDX-License-Identifier: GPL-2.0
/*
 * borrowd --pace: a worker is stopped while its client owes too much.
 *
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
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "borrow_cg.h"
#include "borrow_quota.h"
#include "borrowd.h"

enum { WATCH_STOP = 1, WATCH_CONT };

struct watch_msg {
	int op;
	pid_t pid;
};

static int watch_sock = -1;
static pid_t watch_pid;
/* The watchdog's own: set by its signal handler. */
static volatile sig_atomic_t watch_stop;

static void watch_on_signal(int sig)
{
	watch_stop = 1;
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
	while (!watch_stop) {
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
void make_state_dir(const char *file)
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
int start_watchdog(void)
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
int resume_pace_state(void)
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
void pace(struct rule *r)
{
	bool stop_it = false;
	struct bcg level, wg;
	size_t cut = 0;
	char *slash;

	/* Called for every worker every round: no copy of a group (8 KiB) before this. */
	if (!opt.pace)
		return;
	level = r->client;
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

void unpace(struct rule *r)
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

/* Ends the watchdog and waits for it; the workers are continued by then. */
void stop_watchdog(void)
{
	if (watch_sock >= 0) {
		close(watch_sock);
		waitpid(watch_pid, NULL, 0);
	}
}
