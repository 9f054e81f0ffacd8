/* spawn.c - start nsio for a session and wait for it to serve (nsctl, tests). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "layout.h"
#include "ns_util.h"
#include "ring.h"
#include "seg.h"

const char *ns_nsio_path(char *buf, size_t n)
{
	const char *p = getenv("NS_NSIO");
	const char *root = getenv("NS_BUILD_ROOT");

	if (p && *p)
		snprintf(buf, n, "%s", p);
	else if (root && *root)
		snprintf(buf, n, "%s/nsio/nsio", root);
	else
		snprintf(buf, n, "nsio");
	return buf;
}

int ns_nsio_spawn(const char *nsio, const char *session, const char *model,
		  const char *const *extra, pid_t *pid)
{
	const char *argv[64];
	size_t n = 0;
	pid_t p;

	argv[n++] = nsio;
	argv[n++] = "--session";
	argv[n++] = session;
	argv[n++] = "--model";
	argv[n++] = model;
	for (size_t i = 0; extra && extra[i]; i++) {
		if (n + 2 > NS_ARRAY_LEN(argv))
			return -E2BIG;
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
	fflush(stdout);
	fflush(stderr);
	p = fork();
	if (p < 0)
		return -errno;
	if (p == 0) {
		execvp(nsio, (char *const *)argv);
		_exit(127);
	}
	*pid = p;
	return 0;
}

int ns_nsio_wait_running(struct ns_ctl *ctl, pid_t pid, uint32_t after_gen, uint64_t timeout_ms,
			 int *status)
{
	uint64_t t0 = ns_now_ns();

	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid) {
			if (status)
				*status = st;
			return -ECHILD;
		}
		if ((uint32_t)(atomic_load(&ctl->nsio_gen) - after_gen) - 1u < 0x80000000u &&
		    atomic_load(&ctl->nsio_state) == NS_NSIO_RUNNING &&
		    atomic_load(&ctl->nsio_pid) == (int32_t)pid)
			return 0;
		if (ns_now_ns() - t0 > timeout_ms * 1000000ull)
			return -ETIMEDOUT;
		usleep(2000);
	}
}
