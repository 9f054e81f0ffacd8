/* engine_spawn.c - starting and stopping one child process of the engine: its executable,
 * fork + exec (under a wrapper when asked), its exit status, and the procs file nsctl ps
 * reads. Knows nothing of which child is which (engine_proc.c has the table). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine_internal.h"
#include "ns_util.h"
#include "seg.h"

/* The child gets its own process group (so a terminal's Ctrl-C reaches nsctl only and a
 * wrapper is stopped with what it wraps), SIGTERM the moment nsctl dies (and exits at once if
 * nsctl died before that was set), and writes its stdout to stderr (stdout carries the
 * generated text). */
int nse_spawn(const char *wrap, const char *exe, const char *const *args, pid_t *pid)
{
	const char *argv[96];
	char words[1024];
	pid_t parent = getpid(), p;
	size_t n = 0;

	if (wrap) {
		char *save = NULL;

		snprintf(words, sizeof(words), "%s", wrap);
		for (char *w = strtok_r(words, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
			if (n + 2 >= NS_ARRAY_LEN(argv))
				return -E2BIG;
			argv[n++] = w;
		}
	}
	argv[n++] = exe;
	for (size_t i = 0; args[i]; i++) {
		if (n + 2 >= NS_ARRAY_LEN(argv))
			return -E2BIG;
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	fflush(stdout);
	fflush(stderr);
	p = fork();
	if (p < 0)
		return -errno;
	if (p == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127); /* nsctl died before the death signal was set */
		dup2(STDERR_FILENO, STDOUT_FILENO);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], (char *const *)argv);
		fprintf(stderr, "neurostream: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	setpgid(p, p); /* both sides, so a signal right after fork finds the group */
	*pid = p;
	return 0;
}

void nse_status_text(int st, char *buf, size_t n)
{
	if (WIFEXITED(st))
		snprintf(buf, n, "exit status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, n, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(buf, n, "status %d", st);
}

bool nse_reap(pid_t *pid, int *status, char *why, size_t n)
{
	int st;

	if (*pid <= 0)
		return true;
	if (waitpid(*pid, &st, WNOHANG) != *pid)
		return false;
	if (why)
		nse_status_text(st, why, n);
	if (status)
		*status = st;
	kill(-*pid, SIGKILL); /* anything a wrapper left in its group */
	*pid = 0;
	return true;
}

int nse_stop(pid_t p, const char *name)
{
	int st;

	if (p <= 0)
		return 0;
	if (waitpid(p, &st, WNOHANG) == p) {
		kill(-p, SIGKILL);
		return st;
	}
	kill(-p, SIGTERM);
	kill(p, SIGTERM);
	for (int i = 0; i < 300; i++) {
		if (waitpid(p, &st, WNOHANG) == p) {
			kill(-p, SIGKILL);
			return st;
		}
		usleep(10000);
	}
	nse_log(NS_LOG_WARN, "%s did not stop within 3 s of SIGTERM; killed", name);
	kill(-p, SIGKILL);
	kill(p, SIGKILL);
	while (waitpid(p, &st, 0) < 0 && errno == EINTR)
		;
	return -1;
}

void nse_write_procs(const struct ns_engine *e)
{
	char tmp[PATH_MAX + 8];
	FILE *f;

	if (!e->procs_path[0])
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", e->procs_path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "nsctl %d %llu\n", (int)getpid(),
		(unsigned long long)ns_proc_start_time(getpid()));
	for (int i = 0; i < NS_PROC_COUNT; i++)
		if (e->child[i].pid > 0)
			fprintf(f, "%s %d %llu%s%s\n", nse_name(i), (int)e->child[i].pid,
				(unsigned long long)e->child[i].start,
				e->o.wrap[i] ? " wrapped:" : "", e->o.wrap[i] ? e->o.wrap[i] : "");
	fprintf(f, "model %s\n", e->model_path);
	if (fclose(f) == 0)
		rename(tmp, e->procs_path);
	else
		unlink(tmp);
}
