/* engine_proc.c - the engine's child processes as one table. Each entry says what its
 * process's death means (the policy), how many restarts it gets and which heartbeat it
 * publishes (shm/layout.h); the processes start in the order others need them and stop in
 * reverse. Supervision (every 50 ms while nsctl waits for nscompute) reaps the dead, restarts
 * by policy, and restarts a process whose heartbeat has not moved for the stall time (or ends
 * the run, for nscompute): a stopped or stuck process is found, not only a dead one. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine_internal.h"
#include "arch.h"
#include "hparams.h"
#include "kv_type.h"
#include "model.h"
#include "ns_util.h"
#include "ram_seg.h"
#include "session.h"
#include "summary.h"
#include "tokenizer.h"

#define S_STALL_DEFAULT_MS 10000u
#define S_ROUTER_NO_EXPERTS 3 /* nsrouter's exit code for a dense model */

enum s_policy {
	S_FATAL,     /* its death ends the run (nscompute holds the sequence) */
	S_ALWAYS,    /* restarted whatever ended it (nsio: compute waits for it) */
	S_IF_KILLED, /* restarted when killed; an exit of its own is final (nsplan) */
	S_HINT,      /* restarted when killed; exit 0, 2 or 3 switch it off (nsrouter) */
};

struct s_desc {
	enum s_policy policy;
	uint32_t max_restarts;
	uint32_t role;       /* its heartbeat (enum ns_beat_role) */
};

static const struct s_desc s_table[NS_PROC_COUNT] = {
	[NS_PROC_NSIO] = { S_ALWAYS, 16, NS_BEAT_NSIO },
	[NS_PROC_NSCOMPUTE] = { S_FATAL, 0, NS_BEAT_NSCOMPUTE },
	[NS_PROC_NSPLAN] = { S_IF_KILLED, 16, NS_BEAT_NSPLAN },
	[NS_PROC_NSROUTER] = { S_HINT, 64, NS_BEAT_NSROUTER },
};

/* nsio first (the others attach to the session it serves), nscompute last (its HELLO says
 * the pipeline is up); teardown goes the other way */
static const enum ns_engine_proc s_order[NS_PROC_COUNT] = {
	NS_PROC_NSIO, NS_PROC_NSROUTER, NS_PROC_NSPLAN, NS_PROC_NSCOMPUTE,
};

bool nse_cancelled(const struct ns_engine *e)
{
	return e->cancelled || (e->o.cancel && *e->o.cancel);
}

static int s_spawn(struct ns_engine *e, enum ns_engine_proc p)
{
	struct nse_child *c = &e->child[p];
	struct nse_cmdline cl;
	int rc = nse_args(e, p, &cl);

	if (rc >= 0 && p == NS_PROC_NSPLAN && e->o.expert_stats) {
		/* the file nsplan plans from exists, empty until ns_engine_warmup writes it */
		int fd = open(cl.path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);

		if (fd >= 0)
			close(fd);
	}
	if (rc >= 0)
		rc = nse_spawn(e->o.wrap[p], c->exe, cl.argv, &c->pid);
	if (rc < 0)
		return ns_errf(e->err, sizeof(e->err), "cannot start %s: %s", nse_name(p),
			       strerror(-rc)), rc;
	c->start = ns_proc_start_time(c->pid);
	c->beats_seen = atomic_load(&e->s->ctl->beat[s_table[p].role].beats);
	c->t_beat = 0;
	nse_keeper_child(e, c->pid, true);
	return 0;
}

/* nsio serves once the session's generation moved and its state is RUNNING. -ECHILD when it
 * died first (*st: how). */
static int s_nsio_ready(struct ns_engine *e, uint32_t gen, int *st)
{
	uint64_t t0 = ns_now_ns();
	pid_t was = e->child[NS_PROC_NSIO].pid;

	for (;;) {
		if (nse_reap(&e->child[NS_PROC_NSIO].pid, st, NULL, 0)) {
			nse_keeper_child(e, was, false);
			return -ECHILD;
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

static int s_hello(struct ns_engine *e)
{
	struct ns_cmsg_hello h;
	zmq_msg_t msg;
	int rc;

	/* nscompute greets once nsio serves, after the RAM cache's fill: its progress */
	e->ram_watch = e->o.progress && !e->ram_done;
	e->t_ram = 0;
	e->t_ram0 = ns_now_ns();
	rc = nse_recv(e, &msg, 120000);
	e->ram_watch = false;
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

/* Start child p and wait until it serves (nsio: its generation; nscompute: HELLO). An nsio
 * killed while it starts is started again, as it would be later; one that exits refused. */
static int s_start_child(struct ns_engine *e, enum ns_engine_proc p)
{
	struct nse_child *c = &e->child[p];
	char why[128];
	int rc, st;

	for (;;) {
		uint32_t gen = atomic_load(&e->s->ctl->nsio_gen);

		rc = s_spawn(e, p);
		if (rc == 0 && p == NS_PROC_NSIO)
			rc = s_nsio_ready(e, gen, &st);
		if (rc != -ECHILD)
			break;
		nse_status_text(st, why, sizeof(why));
		if (WIFEXITED(st) && WEXITSTATUS(st) == NS_EXIT_FOREIGN) {
			ns_errf(e->err, sizeof(e->err), "%s stopped: a segment of session %s is not "
				"ours (its line above names it)", nse_name(p), e->id);
			rc = -EPERM;
			break;
		}
		if (!WIFSIGNALED(st) || ++c->restarts > s_table[p].max_restarts) {
			bool bad_input = WIFEXITED(st) && WEXITSTATUS(st) == 2;

			ns_errf(e->err, sizeof(e->err), "%s did not start (%s)%s", nse_name(p), why,
				bad_input ? "; see its message above" : "");
			rc = bad_input ? -ENOSPC : -EIO;
			break;
		}
		nse_log(NS_LOG_WARN, "%s died (%s) while starting; restarting it on session %s",
			nse_name(p), why, e->id);
	}
	if (rc == 0 && p == NS_PROC_NSCOMPUTE)
		rc = s_hello(e);
	nse_write_procs(e);
	return rc;
}

static bool s_has_experts(const struct ns_model *m)
{
	for (uint64_t i = 0; i < m->n_tensors; i++)
		if (ns_tensor_is_expert(m->tensors[i].name))
			return true;
	return false;
}

/* Which children run, and from which executables. */
static int s_table_setup(struct ns_engine *e)
{
	const char *r = getenv("NS_NSROUTER");

	for (int p = 0; p < NS_PROC_COUNT; p++)
		nse_exe_of(e, p, e->child[p].exe, sizeof(e->child[p].exe));
	if (strcmp(e->o.backend, "cpu") && !strchr(e->child[NS_PROC_NSCOMPUTE].exe, '/')) {
		ns_errf(e->err, sizeof(e->err), "backend '%s' needs the %s executable, which is "
			"not built here (set $NS_NSCOMPUTE_%s to use one elsewhere)", e->o.backend,
			e->child[NS_PROC_NSCOMPUTE].exe, !strcmp(e->o.backend, "cuda") ? "CUDA" :
			e->o.backend);
		return -EINVAL;
	}
	e->child[NS_PROC_NSPLAN].off = e->o.no_plan;
	/* nsrouter for MoE models only; NS_NSROUTER=off runs without it */
	e->child[NS_PROC_NSROUTER].off = (r && !strcmp(r, "off")) || !s_has_experts(e->m);
	e->stall_ns = (uint64_t)(e->o.stall_ms ? e->o.stall_ms : S_STALL_DEFAULT_MS) * 1000000ull;
	return 0;
}

/* A new random session id; test hook NS_TEST_SESSION_ID names it instead (with the key
 * hook of shm/seg.h, a test plants another user's segments under the names the session
 * will use). */
static int s_session_id(struct ns_engine *e)
{
	const char *t = getenv("NS_TEST_SESSION_ID");
	int rc;

	if (t && *t) {
		if (!ns_session_id_valid(t))
			return ns_errf(e->err, sizeof(e->err), "NS_TEST_SESSION_ID '%s' is not "
				       "1-16 of [A-Za-z0-9_]", t), -EINVAL;
		snprintf(e->id, sizeof(e->id), "%s", t);
		return 0;
	}
	rc = ns_session_random_id(e->id);
	if (rc < 0)
		ns_errf(e->err, sizeof(e->err), "getrandom: %s", strerror(-rc));
	return rc;
}

/* The enum of a KV cache type name ns_engine_load validated (NULL: f32). */
static int s_kv_type(const char *name)
{
	enum ns_kv_type t = NS_KV_F32;

	if (name)
		ns_kv_type_parse(name, &t);
	return (int)t;
}

/* KV cache types the pass cannot keep for this model refused before anything starts: a
 * q8_0 row needs head sizes in whole blocks of 32 (both backends keep f32, f16 and q8_0). */
static int s_kv_check(struct ns_engine *e)
{
	const char *names[2] = { e->o.cache_type_k, e->o.cache_type_v };
	struct ns_hparams hp;
	int rc = ns_hparams_load(e->m, &hp, e->err, sizeof(e->err));

	for (int i = 0; i < 2 && rc == 0; i++) {
		enum ns_kv_type t = (enum ns_kv_type)s_kv_type(names[i]);
		uint32_t dim = i ? hp.head_dim_v : hp.head_dim_k;

		if (!ns_kv_type_fits(t, dim)) {
			ns_errf(e->err, sizeof(e->err), "a %s KV cache needs head sizes in blocks of "
				"32; this model's %s heads have %u", ns_kv_type_name(t),
				i ? "value" : "key", dim);
			rc = -EINVAL;
		}
	}
	return rc;
}

int nse_start(struct ns_engine *e)
{
	struct ns_session_params sp = NS_SESSION_PARAMS_DEFAULT;
	int rc;

	/* before any process: a vocabulary that does not match the embedding / LM head rows
	 * would have the model sample ids no token spells, or feed it ids past its rows */
	rc = ns_model_check_vocab(e->m, ns_tok_n_vocab(e->tok), e->err, sizeof(e->err));
	if (rc < 0)
		return rc;
	/* and the forward pass's checks (shapes, types, hyperparameters) for the chosen backend,
	 * so that a model it cannot run is refused here once, not by nscompute after nsio has
	 * started (a cpu-only architecture with --backend cuda) */
	rc = ns_arch_check(e->m, e->o.backend && strcmp(e->o.backend, "cpu") ?
			   NS_BACKEND_CUDA : NS_BACKEND_CPU, e->err, sizeof(e->err));
	if (rc == 0)
		rc = s_kv_check(e);
	if (rc == 0)
		rc = s_table_setup(e);
	if (rc < 0)
		return rc;
	/* the keeper first, told the id before anything of the session exists: from here on
	 * whatever nsctl leaves behind by dying is removed */
	rc = s_session_id(e);
	if (rc < 0)
		return rc;
	rc = nse_keeper_start(e);
	if (rc < 0)
		return rc;
	sp.arena_bytes = e->o.mem_budget;
	sp.id = e->id;
	rc = ns_session_create(&sp, &e->s, e->err, sizeof(e->err));
	if (rc < 0)
		return rc;
	if (snprintf(e->procs_path, sizeof(e->procs_path), "%s/procs", e->s->rundir) >=
	    (int)sizeof(e->procs_path))
		return ns_errf(e->err, sizeof(e->err), "runtime dir path too long"), -ENAMETOOLONG;
	rc = nse_ctl_open(e);
	for (int i = 0; i < NS_PROC_COUNT && rc == 0; i++)
		if (!e->child[s_order[i]].off)
			rc = s_start_child(e, s_order[i]);
	return rc;
}

/* nsplan ended and is not restarted: tell nsio (SIGUSR2) that no plan will come, so that a
 * RAM tier waiting for one streams everything now instead of after --plan-wait-ms (30 s).
 * Harmless once nsio has its plan. The pid is the one nsio published in the control segment:
 * the nsio itself, not a --wrap program around it. */
static void s_no_plan(struct ns_engine *e)
{
	pid_t pid = (pid_t)atomic_load(&e->s->ctl->nsio_pid);

	if (e->child[NS_PROC_NSPLAN].off && !e->o.no_plan && pid > 0 &&
	    atomic_load(&e->s->ctl->nsio_state) == NS_NSIO_RUNNING)
		kill(pid, SIGUSR2);
}

/* Child p ended with wait status st (why: its text). Restart it or not, by its policy. */
static int s_died(struct ns_engine *e, enum ns_engine_proc p, int st, const char *why)
{
	struct nse_child *c = &e->child[p];
	const struct s_desc *d = &s_table[p];
	bool killed = WIFSIGNALED(st), said = c->stalled;
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	int rc;

	c->stalled = false;
	if (code == NS_EXIT_FOREIGN) /* restarting it would meet the same segment */
		return ns_errf(e->err, sizeof(e->err), "%s stopped: a segment of session %s is "
			       "not ours (its line above names it); the run stops", nse_name(p),
			       e->id), -EPERM;
	if (d->policy == S_FATAL) {
		if (!said)
			ns_errf(e->err, sizeof(e->err), "%s died (%s); generation abandoned",
				nse_name(p), why);
		return -EPIPE;
	}
	if ((d->policy == S_IF_KILLED && !killed) ||
	    (d->policy == S_HINT && (code == 0 || code == 2 || code == S_ROUTER_NO_EXPERTS))) {
		/* it refused or finished: nothing needs it to go on */
		c->off = true;
		if (p == NS_PROC_NSPLAN) {
			s_no_plan(e);
			if (code != 0)
				nse_log(NS_LOG_WARN, "nsplan ended (%s); continuing without it",
					why);
		}
		return 0;
	}
	if (++c->restarts > d->max_restarts) {
		if (d->policy == S_ALWAYS)
			return ns_errf(e->err, sizeof(e->err), "%s died (%s) %u times; giving up",
				       nse_name(p), why, c->restarts - 1), -EPIPE;
		c->off = true;
		nse_log(NS_LOG_WARN, "%s died %u times; going on without it", nse_name(p),
			c->restarts - 1);
		return 0;
	}
	if (!said && (p != NS_PROC_NSROUTER || e->o.verbose))
		nse_log(NS_LOG_WARN, "%s died (%s); restarting it on session %s", nse_name(p),
			why, e->id);
	rc = s_start_child(e, p);
	if (rc == 0 && p == NS_PROC_NSIO)
		s_no_plan(e);
	if (rc < 0 && d->policy != S_ALWAYS) { /* a hint or the planner: go on without */
		c->off = true;
		return 0;
	}
	return rc;
}

/* Has child p's heartbeat stood still for the stall time? Kills it if so (its death is
 * then handled as any other) and says why; for nscompute that ends the run. */
static int s_stall(struct ns_engine *e, enum ns_engine_proc p)
{
	struct nse_child *c = &e->child[p];
	uint64_t beats = atomic_load(&e->s->ctl->beat[s_table[p].role].beats);
	uint64_t now = ns_now_ns();

	if (beats != c->beats_seen) {
		c->beats_seen = beats;
		c->t_beat = now;
		return 0;
	}
	if (!c->t_beat || c->stalled || now - c->t_beat <= e->stall_ns)
		return 0; /* not yet beating (starting), already handled, or in time */
	c->stalled = true;
	kill(-c->pid, SIGKILL); /* stopped processes die of it too */
	kill(c->pid, SIGKILL);
	if (s_table[p].policy == S_FATAL)
		return ns_errf(e->err, sizeof(e->err), "%s made no progress for %.1f s (stopped "
			       "or stuck); the run ends", nse_name(p), e->stall_ns / 1e9),
		       -ETIMEDOUT;
	nse_log(NS_LOG_WARN, "%s made no progress for %.1f s (stopped or stuck); restarting "
		"it on session %s", nse_name(p), e->stall_ns / 1e9, e->id);
	return 0;
}

int nse_supervise(struct ns_engine *e)
{
	nse_keeper_supervise(e);
	for (int i = NS_PROC_COUNT - 1; i >= 0; i--) { /* nscompute first: it ends the run */
		enum ns_engine_proc p = s_order[i];
		struct nse_child *c = &e->child[p];
		pid_t was = c->pid;
		char why[128];
		int st, rc;

		if (c->off || was <= 0)
			continue;
		if (nse_reap(&c->pid, &st, why, sizeof(why))) {
			nse_keeper_child(e, was, false);
			rc = s_died(e, p, st, why);
			nse_write_procs(e);
		} else {
			rc = s_stall(e, p);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

void nse_ram_watch(struct ns_engine *e)
{
	uint64_t now = ns_now_ns(), resident = 0, planned = 0;
	char err[NS_ERR_LEN];

	if (!e->ram_watch || !e->o.progress || now - e->t_ram < 100000000ull)
		return;
	e->t_ram = now;
	/* no segment (yet, or no RAM tier at all): nothing to say */
	if (ns_ram_seg_fill(e->id, &resident, &planned, err, sizeof(err)) < 0 || !planned)
		return;
	if (resident >= planned)
		e->ram_watch = false, e->ram_done = true;
	e->o.progress(NS_PROGRESS_RAM_FILL, resident < planned ? resident : planned, planned,
		      (double)(now - e->t_ram0) / 1e9, e->o.progress_user);
}

int nse_recv(struct ns_engine *e, zmq_msg_t *msg, uint64_t timeout_ms)
{
	uint64_t t0 = ns_now_ns();
	int rc;

	for (;;) {
		/* checked before every message, so a steady stream of tokens cannot hide a
		 * Ctrl-C, a dead child or a stalled one */
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
		nse_ram_watch(e);
		rc = nse_ctl_poll(e, msg, 50);
		if (rc)
			return rc < 0 ? rc : 0;
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
	if (e->ctl_broken)
		return ns_errf(e->err, sizeof(e->err), "the control channel to nscompute broke "
			       "earlier (a lost or malformed message): load the model again"), -EPIPE;
	for (;;) {
		int rc = nse_ctl_try_send(e, buf, (size_t)n);

		if (rc != -EAGAIN)
			return rc;
		if (nse_cancelled(e))
			return ns_errf(e->err, sizeof(e->err), "cancelled"), -ECANCELED;
		rc = nse_supervise(e);
		if (rc < 0)
			return rc;
		usleep(1000);
	}
}

/* A child that did not exit 0 when asked to stop says something is wrong (a sanitizer
 * report, a crash in teardown): one line (nse_log). Dying of the SIGTERM nse_stop sent is
 * what was asked: a child still starting (a short run's nsrouter on a loaded machine) has
 * not installed its handler yet, and the default action ends it. */
static void s_report_exit(enum ns_engine_proc p, int st)
{
	char why[128];

	if (st == -1 || (WIFEXITED(st) && WEXITSTATUS(st) == 0))
		return; /* -1: nse_stop said it already */
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM)
		return;
	nse_status_text(st, why, sizeof(why));
	nse_log(NS_LOG_WARN, "%s ended with %s at shutdown", nse_name(p), why);
}

void nse_teardown(struct ns_engine *e)
{
	struct nse_child *cc = &e->child[NS_PROC_NSCOMPUTE];

	if (e->sock && cc->pid > 0) { /* nscompute first, asked politely */
		uint8_t q[NS_CMSG_HDR];
		char why[128];
		int st;

		nse_ctl_try_send(e, q, (size_t)ns_cmsg_enc_quit(q, sizeof(q)));
		for (int i = 0; i < 200 && cc->pid > 0; i++) {
			if (nse_reap(&cc->pid, &st, why, sizeof(why)))
				s_report_exit(NS_PROC_NSCOMPUTE, st);
			else
				usleep(5000);
		}
	}
	for (int i = NS_PROC_COUNT - 1; i >= 0; i--) {
		struct nse_child *c = &e->child[s_order[i]];

		if (c->pid > 0)
			s_report_exit(s_order[i], nse_stop(c->pid, nse_name(s_order[i])));
		c->pid = 0;
	}
	nse_ctl_close(e);
	if (e->procs_path[0])
		unlink(e->procs_path);
	ns_session_destroy(&e->s); /* every segment of the session and its runtime dir */
	nse_keeper_stop(e);        /* nothing left for it to remove */
}
