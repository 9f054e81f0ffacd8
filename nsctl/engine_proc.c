/* engine_proc.c - the session and the child processes behind an engine: start, supervise
 * (restart nsio/nsplan, notice a dead nscompute), tear down leaving nothing behind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine_internal.h"
#include "forward.h"
#include "model.h"
#include "ns_util.h"
#include "session.h"
#include "tokenizer.h"

#define S_MAX_RESTARTS 16

static const char *const s_names[NS_PROC_COUNT] = { "nsio", "nscompute", "nsplan" };
static const char *const s_envs[NS_PROC_COUNT] = { "NS_NSIO", "NS_NSCOMPUTE", "NS_NSPLAN" };

bool nse_cancelled(const struct ns_engine *e)
{
	return e->cancelled || (e->o.cancel && *e->o.cancel);
}

/* Executable of a child: $NS_<NAME>, $NS_BUILD_ROOT/<dir>/<name>, next to /proc/self/exe
 * (build tree ../<dir>/<name>, installed ./<name>), else the bare name (PATH). */
void nse_find_exe(const char *dir, const char *name, const char *env, char *buf, size_t n)
{
	const char *v = getenv(env), *root = getenv("NS_BUILD_ROOT");
	char self[PATH_MAX], *slash;
	ssize_t k;

	if (v && *v) {
		snprintf(buf, n, "%s", v);
		return;
	}
	if (root && *root) {
		if (snprintf(buf, n, "%s/%s/%s", root, dir, name) < (int)n &&
		    access(buf, X_OK) == 0)
			return;
	}
	k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (k > 0) {
		self[k] = 0;
		slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			if (snprintf(buf, n, "%s/../%s/%s", self, dir, name) < (int)n &&
			    access(buf, X_OK) == 0)
				return;
			if (snprintf(buf, n, "%s/%s", self, name) < (int)n &&
			    access(buf, X_OK) == 0)
				return;
		}
	}
	snprintf(buf, n, "%s", name);
}

/* fork + exec argv[0]: the child gets its own process group (so a terminal's Ctrl-C reaches
 * nsctl only and a wrapper is stopped with what it wraps), dies with its parent, and writes its
 * stdout to stderr (stdout carries the generated text). */
int nse_fork_exec(const char *const *argv, pid_t *pid)
{
	pid_t p;

	fflush(stdout);
	fflush(stderr);
	p = fork();
	if (p < 0)
		return -errno;
	if (p == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() == 1)
			_exit(127);
		dup2(STDERR_FILENO, STDOUT_FILENO);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], (char *const *)argv);
		fprintf(stderr, "nsctl: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	setpgid(p, p); /* both sides, so a signal right after fork finds the group */
	*pid = p;
	return 0;
}

/* fork + exec [wrap words...] exe args... (see nse_fork_exec). */
static int s_spawn(struct ns_engine *e, int which, const char *const *args, pid_t *pid)
{
	const char *argv[96];
	char wrap[1024];
	size_t n = 0;

	if (e->o.wrap[which]) {
		char *save = NULL;

		snprintf(wrap, sizeof(wrap), "%s", e->o.wrap[which]);
		for (char *w = strtok_r(wrap, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
			if (n + 2 >= NS_ARRAY_LEN(argv))
				return -E2BIG;
			argv[n++] = w;
		}
	}
	argv[n++] = e->exe[which];
	for (size_t i = 0; args[i]; i++) {
		if (n + 2 >= NS_ARRAY_LEN(argv))
			return -E2BIG;
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	return nse_fork_exec(argv, pid);
}

static void s_status_text(int st, char *buf, size_t n)
{
	if (WIFEXITED(st))
		snprintf(buf, n, "exit status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, n, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(buf, n, "status %d", st);
}

/* A child that did not exit 0 when asked to stop says something is wrong (a sanitizer
 * report, a crash in teardown): one line on stderr. */
static void s_report_exit(int which, int st)
{
	char why[128];

	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return;
	s_status_text(st, why, sizeof(why));
	fprintf(stderr, "nsctl: %s ended with %s at shutdown\n", s_names[which], why);
}

/* Stop a child's process group: SIGTERM, up to 3 s, then SIGKILL. Reaps it. */
static void s_stop_child(struct ns_engine *e, int which)
{
	pid_t p = e->pid[which];
	int st;

	if (p <= 0)
		return;
	e->pid[which] = 0;
	if (waitpid(p, &st, WNOHANG) == p) {
		kill(-p, SIGKILL); /* anything the wrapper left in its group */
		s_report_exit(which, st);
		return;
	}
	kill(-p, SIGTERM);
	kill(p, SIGTERM);
	for (int i = 0; i < 300; i++) {
		if (waitpid(p, &st, WNOHANG) == p) {
			kill(-p, SIGKILL);
			s_report_exit(which, st);
			return;
		}
		usleep(10000);
	}
	fprintf(stderr, "nsctl: %s did not stop within 3 s of SIGTERM; killed\n",
		s_names[which]);
	kill(-p, SIGKILL);
	kill(p, SIGKILL);
	while (waitpid(p, &st, 0) < 0 && errno == EINTR)
		;
}

/* Has this child exited? Reaps it and describes how. */
static bool s_exited(struct ns_engine *e, int which, char *why, size_t n)
{
	int st;

	if (e->pid[which] <= 0)
		return true;
	if (waitpid(e->pid[which], &st, WNOHANG) != e->pid[which])
		return false;
	s_status_text(st, why, n);
	kill(-e->pid[which], SIGKILL);
	e->pid[which] = 0;
	return true;
}

static void s_write_procs(struct ns_engine *e)
{
	FILE *f;
	char tmp[PATH_MAX + 8];

	if (!e->procs_path[0])
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", e->procs_path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "nsctl %d\n", (int)getpid());
	for (int i = 0; i < NS_PROC_COUNT; i++)
		if (e->pid[i] > 0)
			fprintf(f, "%s %d%s%s\n", s_names[i], (int)e->pid[i],
				e->o.wrap[i] ? " wrapped:" : "", e->o.wrap[i] ? e->o.wrap[i] : "");
	if (e->router_pid > 0)
		fprintf(f, "nsrouter %d\n", (int)e->router_pid);
	fprintf(f, "model %s\n", e->model_path);
	if (fclose(f) == 0)
		rename(tmp, e->procs_path);
	else
		unlink(tmp);
}

/* The RAM tier: nsio loads the plan's RAM windows when it is given the same --ram-budget as
 * nsplan (it waits for nsplan's first publish). buf: at least 32 bytes, kept by the caller. */
static size_t s_nsio_ram_args(const struct ns_engine *e, const char **args, char *buf,
			      size_t buflen)
{
	if (e->o.no_plan || !e->o.ram_budget)
		return 0;
	snprintf(buf, buflen, "%llu", (unsigned long long)e->o.ram_budget);
	args[0] = "--ram-budget";
	args[1] = buf;
	return 2;
}

static int s_start_nsio(struct ns_engine *e)
{
	char la[16], br[32], ram[32];
	const char *args[20];
	size_t n = 0;
	uint32_t gen = atomic_load(&e->s->ctl->nsio_gen);
	uint64_t t0 = ns_now_ns();
	char why[128];
	int rc;

	snprintf(la, sizeof(la), "%d", e->o.lookahead);
	n += s_nsio_ram_args(e, args + n, ram, sizeof(ram));
	args[n++] = "--session";
	args[n++] = e->s->id;
	args[n++] = "--model";
	args[n++] = e->model_path;
	args[n++] = "--lookahead";
	args[n++] = la;
	if (e->o.run_ahead > 0) {
		snprintf(br, sizeof(br), "%llu", (unsigned long long)e->o.block_rows);
		args[n++] = "--run-ahead";
		if (e->o.block_rows) { /* nsio's own default is 0: as large as fits */
			args[n++] = "--block-rows";
			args[n++] = br;
		}
	}
	if (!e->o.verbose)
		args[n++] = "--quiet";
	args[n] = NULL;
	rc = s_spawn(e, NS_PROC_NSIO, args, &e->pid[NS_PROC_NSIO]);
	if (rc < 0)
		return ns_errf(e->err, sizeof(e->err), "cannot start nsio: %s", strerror(-rc)), rc;
	for (;;) {
		if (s_exited(e, NS_PROC_NSIO, why, sizeof(why))) {
			ns_errf(e->err, sizeof(e->err), "nsio did not start (%s)%s", why,
				strstr(why, "status 2") ? "; see its message above" : "");
			return strstr(why, "status 2") ? -ENOSPC : -EIO;
		}
		if (atomic_load(&e->s->ctl->nsio_gen) != gen &&
		    atomic_load(&e->s->ctl->nsio_state) == NS_NSIO_RUNNING)
			return 0;
		if (nse_cancelled(e))
			return ns_errf(e->err, sizeof(e->err), "cancelled"), -ECANCELED;
		if (ns_now_ns() - t0 > 60ull * 1000000000ull)
			return ns_errf(e->err, sizeof(e->err), "nsio did not start within 60 s"),
			       -ETIMEDOUT;
		usleep(2000);
	}
}

static int s_start_plan(struct ns_engine *e)
{
	char mem[32], ram[32], ctx[16], vram[32], reserve[32], stats[PATH_MAX + 8];
	const char *args[24];
	size_t n = 0;

	snprintf(mem, sizeof(mem), "%llu", (unsigned long long)e->o.mem_budget);
	snprintf(ram, sizeof(ram), "%llu", (unsigned long long)e->o.ram_budget);
	snprintf(vram, sizeof(vram), "%llu", (unsigned long long)e->o.vram_budget);
	snprintf(reserve, sizeof(reserve), "%llu", (unsigned long long)e->o.reserve_vram);
	snprintf(ctx, sizeof(ctx), "%u", e->o.n_ctx);
	args[n++] = "--session";
	args[n++] = e->s->id;
	args[n++] = e->model_path;
	args[n++] = "--mem-budget";
	args[n++] = mem;
	args[n++] = "--ram-budget";
	args[n++] = ram;
	args[n++] = "--vram-budget";
	args[n++] = vram;
	if (e->o.reserve_vram) {
		args[n++] = "--reserve-vram";
		args[n++] = reserve;
	}
	args[n++] = "-c";
	args[n++] = ctx;
	if (e->o.expert_stats) { /* re-read on SIGHUP (ns_engine_warmup); empty until then */
		int fd;

		if (snprintf(stats, sizeof(stats), NSE_PLAN_STATS_FMT, e->o.expert_stats) >=
		    (int)sizeof(stats))
			return -ENAMETOOLONG;
		fd = open(stats, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0)
			close(fd);
		args[n++] = "--stats";
		args[n++] = stats;
	}
	if (!e->o.verbose)
		args[n++] = "--quiet";
	args[n] = NULL;
	return s_spawn(e, NS_PROC_NSPLAN, args, &e->pid[NS_PROC_NSPLAN]);
}

static int s_start_compute(struct ns_engine *e)
{
	char th[16], br[32], la[16], ctx[16], vram[32], par[16];
	const char *args[30];
	size_t n = 0;
	zmq_msg_t msg;
	struct ns_cmsg_hello h;
	int rc;

	snprintf(th, sizeof(th), "%d", e->o.threads);
	snprintf(br, sizeof(br), "%llu", (unsigned long long)e->o.block_rows);
	snprintf(la, sizeof(la), "%d", e->o.lookahead);
	snprintf(ctx, sizeof(ctx), "%u", e->o.n_ctx);
	args[n++] = "--session";
	args[n++] = e->s->id;
	args[n++] = "--model";
	args[n++] = e->model_path;
	args[n++] = "--backend";
	args[n++] = e->o.backend;
	args[n++] = "--threads";
	args[n++] = th;
	args[n++] = "--block-rows";
	args[n++] = br;
	args[n++] = "--lookahead";
	args[n++] = la;
	args[n++] = "-c";
	args[n++] = ctx;
	args[n++] = "--ctl";
	args[n++] = e->endpoint;
	if (e->o.act_q8) {
		args[n++] = "--act";
		args[n++] = "q8";
	}
	if (e->o.n_seq > 1) { /* KV-cache slots for ns_engine_step */
		snprintf(par, sizeof(par), "%u", e->o.n_seq);
		args[n++] = "--parallel";
		args[n++] = par;
	}
	if (strcmp(e->o.backend, "cpu")) { /* the GPU arena: nsplan placed weights in it */
		snprintf(vram, sizeof(vram), "%llu", (unsigned long long)e->o.vram_budget);
		args[n++] = "--vram-budget";
		args[n++] = vram;
	}
	args[n] = NULL;
	rc = s_spawn(e, NS_PROC_NSCOMPUTE, args, &e->pid[NS_PROC_NSCOMPUTE]);
	if (rc < 0)
		return ns_errf(e->err, sizeof(e->err), "cannot start nscompute: %s",
			       strerror(-rc)), rc;
	rc = nse_recv(e, &msg, 120000);
	if (rc < 0)
		return rc;
	rc = ns_cmsg_dec_hello(zmq_msg_data(&msg), zmq_msg_size(&msg), &h);
	zmq_msg_close(&msg);
	if (rc < 0)
		return ns_errf(e->err, sizeof(e->err), "nscompute sent a malformed greeting"),
		       -EPROTO;
	e->n_vocab = h.n_vocab;
	e->n_ctx = h.n_ctx;
	return 0;
}

int nse_start(struct ns_engine *e)
{
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	int linger = 0, rc;

	/* before any process: a vocabulary that does not match the embedding / LM head rows
	 * would have the model sample ids no token spells, or feed it ids past its rows */
	rc = ns_model_check_vocab(e->m, ns_tok_n_vocab(e->tok), e->err, sizeof(e->err));
	if (rc < 0)
		return rc;
	/* and the forward pass's checks (shapes, types, hyperparameters), so that a model no
	 * backend can run is refused here once, not by nscompute after nsio has started */
	rc = ns_fwd_check(e->m, e->err, sizeof(e->err));
	if (rc < 0)
		return rc;
	for (int i = 0; i < NS_PROC_COUNT; i++)
		nse_find_exe(s_names[i], s_names[i], s_envs[i], e->exe[i], sizeof(e->exe[i]));
	if (strcmp(e->o.backend, "cpu")) {
		/* another backend is another compute executable: nscompute-<backend> */
		char name[64], env[64];

		snprintf(name, sizeof(name), "nscompute-%s", e->o.backend);
		snprintf(env, sizeof(env), "NS_NSCOMPUTE_%s", e->o.backend);
		for (char *c = env; *c; c++)
			*c = *c >= 'a' && *c <= 'z' ? (char)(*c - 'a' + 'A') : *c;
		nse_find_exe("nscompute", name, env, e->exe[NS_PROC_NSCOMPUTE],
			   sizeof(e->exe[NS_PROC_NSCOMPUTE]));
		if (!strchr(e->exe[NS_PROC_NSCOMPUTE], '/')) {
			ns_errf(e->err, sizeof(e->err), "backend '%s' needs the %s executable, which "
				"is not built here (set $%s to use one elsewhere)", e->o.backend,
				name, env);
			return -EINVAL;
		}
	}
	p.arena_bytes = e->o.mem_budget;
	rc = ns_session_create(&p, &e->s, e->err, sizeof(e->err));
	if (rc < 0)
		return rc;
	if (snprintf(e->sock_path, sizeof(e->sock_path), "%s/compute.sock", e->s->rundir) >=
		    (int)sizeof(e->sock_path) ||
	    snprintf(e->procs_path, sizeof(e->procs_path), "%s/procs", e->s->rundir) >=
		    (int)sizeof(e->procs_path) ||
	    strlen(e->sock_path) >= 100) {
		ns_errf(e->err, sizeof(e->err), "runtime dir path too long for a socket: %s",
			e->s->rundir);
		return -ENAMETOOLONG;
	}
	snprintf(e->endpoint, sizeof(e->endpoint), "ipc://%s", e->sock_path);
	e->zctx = zmq_ctx_new();
	e->sock = e->zctx ? zmq_socket(e->zctx, ZMQ_PAIR) : NULL;
	if (!e->sock || zmq_setsockopt(e->sock, ZMQ_LINGER, &linger, sizeof(linger)) ||
	    zmq_bind(e->sock, e->endpoint)) {
		ns_errf(e->err, sizeof(e->err), "cannot bind %s: %s", e->endpoint,
			zmq_strerror(zmq_errno()));
		return -EIO;
	}
	rc = s_start_nsio(e);
	if (rc == 0)
		nse_router_start(e); /* engine_router.c */
	if (rc == 0 && !e->o.no_plan)
		rc = s_start_plan(e);
	if (rc == 0) {
		s_write_procs(e);
		rc = s_start_compute(e);
	}
	if (rc == 0)
		s_write_procs(e);
	return rc;
}

/* nsplan ended and is not restarted: tell nsio (SIGUSR2) that no plan will come, so that a
 * RAM tier waiting for one streams everything now instead of after --plan-wait-ms (30 s).
 * Harmless once nsio has its plan. The pid is the one nsio published in the control segment:
 * the nsio itself, not a --wrap program around it. */
static void s_no_plan(struct ns_engine *e)
{
	pid_t pid = (pid_t)atomic_load(&e->s->ctl->nsio_pid);

	if (e->plan_gone && pid > 0 && atomic_load(&e->s->ctl->nsio_state) == NS_NSIO_RUNNING)
		kill(pid, SIGUSR2);
}

int nse_supervise(struct ns_engine *e)
{
	char why[128];
	int rc;

	if (s_exited(e, NS_PROC_NSCOMPUTE, why, sizeof(why))) {
		ns_errf(e->err, sizeof(e->err), "nscompute died (%s); generation abandoned", why);
		return -EPIPE;
	}
	if (s_exited(e, NS_PROC_NSIO, why, sizeof(why))) {
		if (++e->restarts[NS_PROC_NSIO] > S_MAX_RESTARTS) {
			ns_errf(e->err, sizeof(e->err), "nsio died (%s) %u times; giving up", why,
				e->restarts[NS_PROC_NSIO] - 1);
			return -EPIPE;
		}
		fprintf(stderr, "nsctl: nsio died (%s); restarting it on session %s\n", why,
			e->s->id);
		rc = s_start_nsio(e);
		if (rc < 0)
			return rc;
		s_write_procs(e);
		s_no_plan(e);
	}
	if (e->router_pid > 0) { /* engine_router.c restarts a dead nsrouter */
		pid_t was = e->router_pid;

		nse_router_supervise(e);
		if (e->router_pid != was)
			s_write_procs(e);
	}
	if (!e->o.no_plan && !e->plan_gone && s_exited(e, NS_PROC_NSPLAN, why, sizeof(why))) {
		if (strstr(why, "killed") && ++e->restarts[NS_PROC_NSPLAN] <= S_MAX_RESTARTS) {
			fprintf(stderr, "nsctl: nsplan died (%s); restarting it\n", why);
			if (s_start_plan(e) == 0)
				s_write_procs(e);
		} else {
			/* it refused or finished: nothing consumes the plan yet, so go on */
			e->plan_gone = true;
			s_no_plan(e);
			if (!strstr(why, "exit status 0"))
				fprintf(stderr, "nsctl: nsplan ended (%s); continuing without it\n",
					why);
		}
	}
	return 0;
}

int nse_recv(struct ns_engine *e, zmq_msg_t *msg, uint64_t timeout_ms)
{
	uint64_t t0 = ns_now_ns();
	int rc;

	for (;;) {
		zmq_pollitem_t it = { .socket = e->sock, .events = ZMQ_POLLIN };
		int n;

		/* checked before every message, so a steady stream of tokens cannot hide a
		 * Ctrl-C or a dead child */
		if (nse_cancelled(e)) {
			ns_errf(e->err, sizeof(e->err), "cancelled");
			return -ECANCELED;
		}
		if (ns_now_ns() - e->t_supervise > 50000000ull) {
			rc = nse_supervise(e);
			if (rc < 0)
				return rc;
			e->t_supervise = ns_now_ns();
		}
		n = zmq_poll(&it, 1, 50);
		if (n > 0) {
			zmq_msg_init(msg);
			if (zmq_msg_recv(msg, e->sock, ZMQ_DONTWAIT) >= 0)
				return 0;
			zmq_msg_close(msg);
		}
		if (timeout_ms && ns_now_ns() - t0 > timeout_ms * 1000000ull) {
			ns_errf(e->err, sizeof(e->err), "nscompute did not answer within %llu s",
				(unsigned long long)(timeout_ms / 1000));
			return -ETIMEDOUT;
		}
	}
}

int nse_send(struct ns_engine *e, const void *buf, int n)
{
	if (n < 0)
		return ns_errf(e->err, sizeof(e->err), "message too large"), n;
	while (zmq_send(e->sock, buf, (size_t)n, ZMQ_DONTWAIT) < 0) {
		int rc;

		if (zmq_errno() != EAGAIN && zmq_errno() != EINTR)
			return ns_errf(e->err, sizeof(e->err), "control socket: %s",
				       zmq_strerror(zmq_errno())), -EPIPE;
		if (nse_cancelled(e))
			return ns_errf(e->err, sizeof(e->err), "cancelled"), -ECANCELED;
		rc = nse_supervise(e);
		if (rc < 0)
			return rc;
		usleep(1000);
	}
	return 0;
}

/* Remove any /dev/shm entry left with the session's prefix (a killed nsplan's plan). */
static void s_sweep_shm(const char *id)
{
	char user[64], pre[128], path[512];
	struct dirent *de;
	DIR *d = opendir("/dev/shm");

	if (!d)
		return;
	ns_seg_user(user, sizeof(user));
	snprintf(pre, sizeof(pre), "ns-%s-%s-", user, id);
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, pre, strlen(pre)) == 0) {
			snprintf(path, sizeof(path), "/%s", de->d_name);
			shm_unlink(path);
		}
	}
	closedir(d);
}

void nse_teardown(struct ns_engine *e)
{
	char id[NS_SESSION_ID_LEN + 1];

	if (e->sock && e->pid[NS_PROC_NSCOMPUTE] > 0) {
		uint8_t q[NS_CMSG_HDR];
		int n = ns_cmsg_enc_quit(q, sizeof(q));

		zmq_send(e->sock, q, (size_t)n, ZMQ_DONTWAIT);
		for (int i = 0; i < 200; i++) {
			char why[128];

			if (s_exited(e, NS_PROC_NSCOMPUTE, why, sizeof(why))) {
				if (strcmp(why, "exit status 0"))
					fprintf(stderr, "nsctl: nscompute ended with %s at "
						"shutdown\n", why);
				break;
			}
			usleep(5000);
		}
	}
	s_stop_child(e, NS_PROC_NSCOMPUTE);
	s_stop_child(e, NS_PROC_NSPLAN);
	nse_router_stop(e);
	s_stop_child(e, NS_PROC_NSIO);
	if (e->sock)
		zmq_close(e->sock);
	if (e->zctx)
		zmq_ctx_term(e->zctx);
	e->sock = e->zctx = NULL;
	if (e->sock_path[0])
		unlink(e->sock_path);
	if (e->procs_path[0])
		unlink(e->procs_path);
	if (e->s) {
		snprintf(id, sizeof(id), "%s", e->s->id);
		ns_session_destroy(&e->s);
		s_sweep_shm(id);
	}
}
