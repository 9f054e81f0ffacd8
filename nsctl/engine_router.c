/* engine_router.c - nsrouter as a child of the engine: started for MoE models after nsio,
 * restarted when it dies (it is only a hint: compute reads on demand meanwhile), stopped at
 * teardown. $NS_NSROUTER names the executable; NS_NSROUTER=off runs without it. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine_internal.h"
#include "model.h"
#include "session.h"
#include "summary.h"

#define S_ROUTER_MAX_RESTARTS 64
#define S_ROUTER_NO_EXPERTS 3 /* nsrouter's exit code for a dense model */

static bool s_has_experts(const struct ns_model *m)
{
	if (!m)
		return true; /* unknown: let nsrouter decide (exit 3 on a dense model) */
	for (uint64_t i = 0; i < m->n_tensors; i++)
		if (ns_tensor_is_expert(m->tensors[i].name))
			return true;
	return false;
}

/* Start nsrouter (nse_fork_exec: own process group, dies with nsctl, stdout to stderr). */
static int s_router_spawn(struct ns_engine *e)
{
	char br[32], la[16];
	const char *argv[16];
	size_t n = 0;
	pid_t p;
	int ret;

	snprintf(br, sizeof(br), "%llu", (unsigned long long)e->o.block_rows);
	snprintf(la, sizeof(la), "%d", e->o.lookahead);
	argv[n++] = e->router_exe;
	argv[n++] = "--session";
	argv[n++] = e->s->id;
	argv[n++] = "--model";
	argv[n++] = e->model_path;
	argv[n++] = "--block-rows";
	argv[n++] = br;
	argv[n++] = "--lookahead";
	argv[n++] = la;
	if (e->o.expert_stats) { /* hits for nsplan (ns_engine_replan) */
		argv[n++] = "--stats";
		argv[n++] = e->o.expert_stats;
	}
	if (!e->o.verbose)
		argv[n++] = "--quiet";
	argv[n] = NULL;
	ret = nse_fork_exec(argv, &p);
	if (ret)
		return ret;
	e->router_pid = p;
	return 0;
}

void nse_router_start(struct ns_engine *e)
{
	const char *v = getenv("NS_NSROUTER");

	e->router_pid = 0;
	e->router_off = (v && !strcmp(v, "off")) || !s_has_experts(e->m);
	if (e->router_off)
		return;
	nse_find_exe("nsrouter", "nsrouter", "NS_NSROUTER", e->router_exe, sizeof(e->router_exe));
	if (s_router_spawn(e) < 0) {
		fprintf(stderr, "nsctl: cannot start nsrouter; experts are read on demand\n");
		e->router_off = true;
	}
}

void nse_router_supervise(struct ns_engine *e)
{
	int st;

	if (e->router_off || e->router_pid <= 0 ||
	    waitpid(e->router_pid, &st, WNOHANG) != e->router_pid)
		return;
	kill(-e->router_pid, SIGKILL);
	e->router_pid = 0;
	if (WIFEXITED(st) && (WEXITSTATUS(st) == S_ROUTER_NO_EXPERTS ||
			      WEXITSTATUS(st) == 2 || WEXITSTATUS(st) == 0)) {
		e->router_off = true; /* nothing to route, or it refused: not restarted */
		return;
	}
	if (++e->router_restarts > S_ROUTER_MAX_RESTARTS) {
		fprintf(stderr, "nsctl: nsrouter died %u times; experts are read on demand\n",
			e->router_restarts - 1);
		e->router_off = true;
		return;
	}
	if (e->o.verbose)
		fprintf(stderr, "nsctl: nsrouter died; restarting it\n");
	if (s_router_spawn(e) < 0)
		e->router_off = true;
}

void nse_router_stop(struct ns_engine *e)
{
	pid_t p = e->router_pid;
	int st;

	if (p <= 0)
		return;
	e->router_pid = 0;
	kill(-p, SIGTERM);
	kill(p, SIGTERM);
	for (int i = 0; i < 300; i++) {
		if (waitpid(p, &st, WNOHANG) == p) {
			kill(-p, SIGKILL);
			return;
		}
		usleep(10000);
	}
	kill(-p, SIGKILL);
	kill(p, SIGKILL);
	while (waitpid(p, &st, 0) < 0 && errno == EINTR)
		;
}
