/* engine_keeper.c - the session keeper: whoever dies, the session's segments and runtime dir
 * go.
 *
 * Before the session exists, nsctl forks a small process that holds the other end of a
 * socket pair (its lifeline) and is told each child's process group as it starts and ends.
 * When nsctl tears the session down it says 'q' and the keeper exits with nothing to do. When
 * nsctl dies instead (SIGKILL, the OOM killer), the lifeline reads end of file at once; the
 * children have had SIGTERM from the kernel (PR_SET_PDEATHSIG, engine_spawn.c), and the keeper
 * waits until none of them holds the session's lock (shm/session.h), sending SIGKILL to their
 * process groups after S_TERM_GRACE_NS, then removes every /dev/shm entry of the session and
 * its runtime dir, and exits: the last one out cleans up, within about a second.
 *
 * The keeper is a fork of a possibly multi-threaded process that never execs, so after the
 * fork it calls only async-signal-safe functions (raw getdents64 instead of readdir); every
 * name it needs was made before the fork. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine_internal.h"
#include "ns_util.h"
#include "session.h"

#define S_TERM_GRACE_NS 300000000ull /* SIGTERM's time before SIGKILL */
#define S_LOCK_WAIT_NS 1500000000ull /* then the lock is waited for this long at most */
#define S_MAX_GROUPS 64

struct s_rec {
	char op;          /* '+' a child's process group, '-' it is gone, 'q' torn down */
	char pad[3];
	int32_t pid;
};

struct s_dirent64 {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

static uint64_t s_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void s_sleep_ms(long ms)
{
	struct timespec t = { 0, ms * 1000000L };

	nanosleep(&t, NULL);
}

/* No process of the session holds its lock any more (or there is no lock). */
static bool s_lock_free(const char *lock)
{
	int fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	bool free_;

	if (fd < 0)
		return true;
	free_ = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return free_;
}

/* Unlink the entries of dir whose name starts with prefix ("" : all), skipping other
 * users' (async-signal-safe). */
static void s_unlink_in(const char *dir, const char *prefix)
{
	char buf[4096];
	size_t pl = strlen(prefix);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long n;

	if (fd < 0)
		return;
	while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct s_dirent64 *d = (struct s_dirent64 *)(buf + off);
			struct stat st;

			off += d->reclen;
			if (!strcmp(d->name, ".") || !strcmp(d->name, "..") ||
			    strncmp(d->name, prefix, pl))
				continue;
			if (fstatat(fd, d->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    st.st_uid == geteuid())
				unlinkat(fd, d->name, 0);
		}
	}
	close(fd);
}

/* nsctl is gone: stop what is left of the session, then remove it. */
static void s_clean(const struct nse_keeper *k, const pid_t *groups, int n, const char *lock)
{
	uint64_t t0 = s_now();
	bool killed = false;

	while (!s_lock_free(lock)) {
		uint64_t dt = s_now() - t0;

		if (!killed && dt > S_TERM_GRACE_NS) {
			for (int i = 0; i < n; i++)
				kill(-groups[i], SIGKILL);
			killed = true;
		}
		if (dt > S_TERM_GRACE_NS + S_LOCK_WAIT_NS)
			break; /* something unknown holds it: remove the session anyway */
		s_sleep_ms(10);
	}
	for (int i = 0; i < n; i++) /* a wrapper's leftovers, whatever happened */
		kill(-groups[i], SIGKILL);
	s_unlink_in("/dev/shm", k->shm_prefix);
	s_unlink_in(k->rundir, "");
	rmdir(k->rundir);
}

static void s_keeper_main(const struct nse_keeper *k, int fd, const char *lock)
{
	pid_t groups[S_MAX_GROUPS];
	int n = 0, null = open("/dev/null", O_RDWR | O_CLOEXEC);
	struct s_rec r;

	/* out of the terminal's process group and its hang-up: it must outlive nsctl */
	setpgid(0, 0);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if (null >= 0) { /* hold no one's pipe: a reader of nsctl's output sees its end */
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
	}
	for (;;) {
		ssize_t got = recv(fd, &r, sizeof(r), 0);

		if (got < 0 && errno == EINTR)
			continue;
		if (got != (ssize_t)sizeof(r))
			break; /* end of file: nsctl died */
		if (r.op == 'q')
			_exit(0);
		if (r.op == '+' && n < S_MAX_GROUPS && r.pid > 0) {
			groups[n++] = r.pid;
		} else if (r.op == '-') {
			int kept = 0;

			for (int i = 0; i < n; i++) /* keep the others, in order */
				if (groups[i] != r.pid)
					groups[kept++] = groups[i];
			n = kept;
		}
	}
	s_clean(k, groups, n, lock);
	_exit(0);
}

int nse_keeper_start(struct ns_engine *e)
{
	struct nse_keeper *k = &e->keeper;
	char user[32], lock[PATH_MAX + 16];
	int sv[2];
	pid_t p;

	ns_seg_user(user, sizeof(user));
	if (snprintf(k->shm_prefix, sizeof(k->shm_prefix), "ns-%s-%s-", user, e->id) >=
		    (int)sizeof(k->shm_prefix) ||
	    ns_session_rundir(e->id, k->rundir, sizeof(k->rundir)) < 0 ||
	    snprintf(lock, sizeof(lock), "%s/%s", k->rundir, NS_SESSION_LOCK) >= (int)sizeof(lock))
		return ns_errf(e->err, sizeof(e->err), "session paths too long"), -ENAMETOOLONG;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return ns_errf(e->err, sizeof(e->err), "socketpair: %s", strerror(errno)), -errno;
	fflush(stdout);
	fflush(stderr);
	p = fork();
	if (p < 0) {
		int rc = -errno;

		close(sv[0]);
		close(sv[1]);
		return ns_errf(e->err, sizeof(e->err), "cannot start the session keeper: %s",
			       strerror(-rc)), rc;
	}
	if (p == 0) {
		close(sv[0]);
		s_keeper_main(k, sv[1], lock);
	}
	close(sv[1]);
	k->pid = p;
	k->fd = sv[0];
	return 0;
}

static void s_send(struct nse_keeper *k, char op, pid_t pid)
{
	struct s_rec r = { .op = op, .pid = (int32_t)pid };

	if (k->fd >= 0)
		send(k->fd, &r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void nse_keeper_child(struct ns_engine *e, pid_t pid, bool on)
{
	if (pid > 0)
		s_send(&e->keeper, on ? '+' : '-', pid);
}

void nse_keeper_supervise(struct ns_engine *e)
{
	struct nse_keeper *k = &e->keeper;
	int st;

	if (k->pid <= 0 || waitpid(k->pid, &st, WNOHANG) != k->pid)
		return;
	/* killed from outside: a new one, told every child that runs */
	close(k->fd);
	k->fd = -1;
	k->pid = 0;
	if (nse_keeper_start(e) < 0) {
		nse_log(NS_LOG_ERROR, "the session keeper died and cannot be restarted: %s",
			e->err);
		return;
	}
	for (int i = 0; i < NS_PROC_COUNT; i++)
		nse_keeper_child(e, e->child[i].pid, true);
}

void nse_keeper_stop(struct ns_engine *e)
{
	struct nse_keeper *k = &e->keeper;
	int st;

	s_send(k, 'q', 0);
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
	if (k->pid > 0)
		while (waitpid(k->pid, &st, 0) < 0 && errno == EINTR)
			;
	k->pid = 0;
}
