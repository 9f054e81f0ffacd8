/* nsrouter - turns nscompute's router decisions into layer-wide prefetch plans for nsio.
 *
 *   nsrouter --session ID --model PATH [--block-rows N] [--lookahead N] [--stats FILE]
 *            [--quiet]
 *
 * Subscribes to ipc://RUNDIR/router.ipc (nscompute publishes one NS_ZMSG_ROUTER per MoE layer
 * and chunk as soon as the routing is known, and with --moe-predict an NS_ZMSG_ROUTER_PREDICT
 * for the next layer one layer early: its windows go to nsio as NS_REQ_PREDICT hints, never
 * into the --stats counts), builds the layer's plan (plan.h: every chosen
 * expert's gate, up and down blocks in consumption order) and hands each window to nsio as an
 * unowned prefetch (ns_client_prefetch) through its own client slot. A plan is capped at half
 * the arena so prefetches never crowd out the blocks compute holds; nsio drops a prefetch
 * that does not fit and evicts unclaimed ones under pressure, so nsrouter only ever changes
 * where bytes come from, never which bytes compute sees. Dying changes nothing but speed:
 * compute then reads on demand. --block-rows and --lookahead must match nscompute's.
 * Blocks already in the RAM cache (the RAM windows of the plan nsplan publishes, resident.h)
 * are never prefetched: compute's request for them is served by copy.
 * --stats FILE: expert hits per (layer, expert) in nsplan's stats format (hits.h), rewritten
 * atomically every 2 s while they change, at once on SIGUSR1 (nsctl --warmup asks so), and
 * at exit.
 *
 * Exit: SIGTERM/SIGINT, nsctl gone, or nsio gone or restarted. Codes: 0 ok, 1 runtime failure
 * (nsio gone or restarted: nsctl starts us again), 2 bad usage or input, 3 the model has no
 * experts (nothing to do), 4 a segment of the session is not ours (NS_EXIT_FOREIGN). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "client.h"
#include "hits.h"
#include "hparams.h"
#include "layout.h"
#include "model.h"
#include "ns_opt.h"
#include "ns_util.h"
#include "plan.h"
#include "resident.h"
#include "session.h"
#include "zmsg.h"

static volatile sig_atomic_t s_stop;  /* set by SIGTERM/SIGINT */
static volatile sig_atomic_t s_flush; /* set by SIGUSR1: write the --stats file now */

static void s_on_signal(int sig)
{
	if (sig == SIGUSR1)
		s_flush = 1;
	else
		s_stop = 1;
}

struct s_opts {
	const char *session, *model, *stats;
	uint64_t block_rows;
	uint32_t lookahead;
	int lookahead_given, quiet;
};

struct s_stats {
	uint64_t decisions, rejected, plans, windows, bytes, refused;
	uint64_t predictions, predict_windows; /* predicted decisions and their windows */
	uint64_t resident_windows, resident_bytes; /* blocks in the RAM cache, not prefetched */
};

/* The process: one struct owns everything (s_teardown frees it). */
struct nsr_proc {
	struct s_opts o;
	struct ns_model *m;
	struct ns_client *c;       /* nsio, for the prefetches */
	struct ns_rplan *rp;       /* the experts' stacked tensors, cut as nscompute cuts them */
	struct ns_rhits *hits;     /* --stats: hits per (layer, expert), or NULL */
	struct ns_rres *res;       /* rows the RAM tier holds: never prefetched */
	void *zctx, *sock;         /* SUB of nscompute's router decisions */
	uint64_t cap;              /* bytes one plan may prefetch: half the arena */
	uint32_t skip;             /* blocks left to compute's own requests: lookahead + 1 */
	uint32_t nsio_gen;         /* the nsio generation the prefetches were made for */
	struct ns_zrouter *d;      /* scratch: the decision being handled */
	struct ns_zplan *plan;     /* scratch: its plan */
	struct s_stats st;
};

static void s_usage(FILE *f)
{
	fprintf(f, "usage: nsrouter --session ID --model PATH [--block-rows N] [--lookahead N] "
		   "[--stats FILE] [--quiet]\n");
}

static int s_u64(const char *flag, const char *v, uint64_t max, uint64_t *out)
{
	if (ns_parse_count(v, 0, max, out) < 0) {
		fprintf(stderr, "nsrouter: %s: bad value '%s' (0..%" PRIu64 ")\n", flag, v, max);
		return -EINVAL;
	}
	return 0;
}

enum { O_HELP = 1, O_QUIET, O_SESSION, O_MODEL, O_STATS, O_ROWS, O_LOOKAHEAD };

static const struct ns_opt s_opts[] = {
	{ "help", "-h", NS_OPT_SWITCH, O_HELP },
	{ "quiet", NULL, NS_OPT_SWITCH, O_QUIET },
	{ "session", NULL, NS_OPT_VALUE, O_SESSION },
	{ "model", "-m", NS_OPT_VALUE, O_MODEL },
	{ "stats", NULL, NS_OPT_VALUE, O_STATS },
	{ "block-rows", NULL, NS_OPT_VALUE, O_ROWS },
	{ "lookahead", NULL, NS_OPT_VALUE, O_LOOKAHEAD },
};

/* One option (opt NULL: an argument, refused) spelled a: 0, or -EINVAL after one line. */
static int s_on_opt(void *user, const struct ns_opt *opt, const char *a, const char *v)
{
	struct s_opts *o = user;
	uint64_t x;

	if (!opt) {
		fprintf(stderr, "nsrouter: unexpected argument '%s' (try --help)\n", v);
		return -EINVAL;
	}
	switch (opt->id) {
	case O_HELP:
		s_usage(stdout);
		exit(0);
	case O_QUIET:
		o->quiet = 1;
		break;
	case O_SESSION:
		o->session = v;
		break;
	case O_MODEL:
		o->model = v;
		break;
	case O_STATS:
		o->stats = v;
		break;
	case O_ROWS:
		return s_u64(a, v, UINT32_MAX, &o->block_rows);
	case O_LOOKAHEAD:
		if (s_u64(a, v, 1024, &x))
			return -EINVAL;
		o->lookahead = (uint32_t)x;
		o->lookahead_given = 1;
		break;
	}
	return 0;
}

static int s_parse(struct s_opts *o, int argc, char **argv)
{
	int rc = ns_opt_parse("nsrouter", s_opts, NS_ARRAY_LEN(s_opts), argc, argv, s_on_opt, o);

	if (rc < 0)
		return rc;
	return ns_session_args_check("nsrouter", o->session, o->model);
}

static void s_signals(void)
{
	struct sigaction sa = { .sa_handler = s_on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static int s_cmp_u32(const void *a, const void *b)
{
	const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Experts ascending and distinct: the order compute multiplies them in. */
static void s_normalise(struct ns_zrouter *d)
{
	uint32_t n = 0;

	qsort(d->expert, d->n_used, sizeof(d->expert[0]), s_cmp_u32);
	for (uint32_t i = 0; i < d->n_used; i++)
		if (n == 0 || d->expert[i] != d->expert[n - 1])
			d->expert[n++] = d->expert[i];
	d->n_used = n;
}

/* Take a new plan of the session if there is one (at most every 100 ms). A plan segment that
 * is not ours stops us (-EPERM); a plan that fails validation is ignored. */
static int s_refresh(struct nsr_proc *p)
{
	char err[NS_ERR_LEN];
	int rc = ns_rres_refresh(p->res, false, err, sizeof(err));
	uint64_t w, b;
	uint32_t gen;

	if (rc == -EPERM) {
		fprintf(stderr, "nsrouter: %s; stopping\n", err);
		return rc;
	}
	if (rc < 0) {
		fprintf(stderr, "nsrouter: ignoring the published plan: %s\n", err);
	} else if (rc > 0 && !p->o.quiet) {
		ns_rres_figures(p->res, &gen, &w, &b);
		fprintf(stderr, "nsrouter: plan generation %u: %" PRIu64 " RAM windows, %" PRIu64
			" bytes resident (never prefetched)\n", gen, w, b);
	}
	return 0;
}

/* 2. Model, nsio client, the experts' tensors, the RAM residency, the statistics. Returns an
 * exit code. */
static int s_attach(struct nsr_proc *p)
{
	struct ns_client_opts co = { .attach_timeout_ms = 20000, .dead_timeout_ms = 15000,
				     .beat_role = NS_BEAT_NSROUTER };
	struct ns_hparams hp;
	char err[NS_ERR_LEN];
	int rc = ns_model_open_flags(p->o.model, NS_MODEL_OPEN_NO_VOCAB, &p->m, err, sizeof(err));

	if (rc == 0)
		rc = ns_client_open(p->o.session, &co, &p->c, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "nsrouter: %s\n", err);
		return rc == -EPERM ? NS_EXIT_FOREIGN : rc == -ETIMEDOUT || rc == -EPIPE ? 1 : 2;
	}
	if (!p->o.lookahead_given)
		p->o.lookahead = ns_client_default_lookahead(p->c);
	rc = ns_rplan_new(p->m, p->c, p->o.block_rows, p->o.lookahead, &p->rp, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "nsrouter: %s\n", err);
		return rc == -ENOENT ? 3 : rc == -EINVAL || rc == -ENOSPC ? 2 : 1;
	}
	rc = ns_rres_new(p->m, p->o.session, &p->res);
	p->d = malloc(sizeof(*p->d));
	p->plan = malloc(sizeof(*p->plan));
	if (rc < 0 || !p->d || !p->plan) {
		fprintf(stderr, "nsrouter: %s\n", strerror(rc < 0 ? -rc : ENOMEM));
		return 1;
	}
	if (s_refresh(p) < 0)
		return NS_EXIT_FOREIGN;
	if (p->o.stats) {
		rc = ns_hparams_load(p->m, &hp, err, sizeof(err));
		if (rc == 0)
			rc = ns_rhits_new(hp.n_layer, hp.n_expert, hp.n_expert_used, &p->hits);
		if (rc < 0) {
			fprintf(stderr, "nsrouter: --stats: %s\n", rc == -EINVAL ? err :
				strerror(-rc));
			return 2;
		}
	}
	/* a plan is capped at half the arena so prefetches never crowd out the blocks compute
	 * holds; compute requests the first lookahead + 1 windows itself the moment it has
	 * published: prefetching them only races those reads (measured: +4% device bytes) */
	p->cap = ns_client_arena_bytes(p->c) / 2;
	p->skip = p->o.lookahead + 1;
	p->nsio_gen = atomic_load(&ns_client_ctl(p->c)->nsio_gen);
	return 0;
}

/* 3. Subscribe to the decisions nscompute publishes at ipc://RUNDIR/router.ipc. */
static int s_subscribe(struct nsr_proc *p)
{
	char rundir[PATH_MAX], ep[PATH_MAX + 32];
	int linger = 0, hwm = 1024;

	if (ns_session_rundir(p->o.session, rundir, sizeof(rundir)) < 0 ||
	    snprintf(ep, sizeof(ep), "ipc://%s/router.ipc", rundir) >= (int)sizeof(ep)) {
		fprintf(stderr, "nsrouter: runtime dir path too long\n");
		return 2;
	}
	p->zctx = zmq_ctx_new();
	p->sock = p->zctx ? zmq_socket(p->zctx, ZMQ_SUB) : NULL;
	if (!p->sock || zmq_setsockopt(p->sock, ZMQ_LINGER, &linger, sizeof(linger)) ||
	    zmq_setsockopt(p->sock, ZMQ_RCVHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(p->sock, ZMQ_SUBSCRIBE, "", 0) || zmq_connect(p->sock, ep)) {
		fprintf(stderr, "nsrouter: cannot subscribe to %s: %s\n", ep,
			zmq_strerror(zmq_errno()));
		return 1;
	}
	return 0;
}

/* One received frame: decode, plan, prefetch. Returns 0, -EPIPE when nsio is gone, -EPERM
 * when the session's plan segment is not ours. */
static int s_handle(struct nsr_proc *p, const void *buf, size_t len)
{
	struct ns_zrouter *d = p->d;
	struct ns_zplan *plan = p->plan;
	struct ns_rbuild bs;
	int n;

	/* the layer is only known after decoding: check against the largest expert count */
	if (ns_zrouter_decode(buf, len, NS_ZMSG_MAX_EXPERTS, d) < 0) {
		p->st.rejected++;
		return 0;
	}
	s_normalise(d);
	if (d->predicted) {
		p->st.predictions++;
	} else {
		p->st.decisions++;
		/* the statistics are the real router's choices only: a prediction is a guess */
		if (p->hits)
			ns_rhits_add(p->hits, d);
	}
	if (s_refresh(p) < 0)
		return -EPERM;
	/* a prediction is published before the layer's attention runs, so nothing of it is
	 * requested yet: no block is left to compute. Its plan is capped at a quarter of the
	 * arena (nsio also reads it only into spare arena). The real decision's plan then
	 * goes out as always; nsio promotes the predicted blocks it names and the others are
	 * the first to go when space is needed. */
	n = ns_rplan_build(p->rp, d, d->predicted ? p->cap / 2 : p->cap, p->res,
			   d->predicted ? 0 : p->skip, plan, &bs);
	if (n < 0) {
		p->st.rejected++;
		return 0;
	}
	if (!d->predicted) {
		p->st.resident_windows += bs.resident_windows;
		p->st.resident_bytes += bs.resident_bytes;
		plan->plan_id = p->st.plans++;
	}
	for (uint32_t i = 0; i < plan->n_items; i++) {
		const struct ns_zplan_item *it = &plan->item[i];
		int rc = d->predicted ? ns_client_predict(p->c, it->tensor, it->row0, it->nrows)
				      : ns_client_prefetch(p->c, it->tensor, it->row0, it->nrows);

		if (rc == -EPIPE)
			return rc;
		if (rc) { /* ring full or refused: the rest is read on demand */
			p->st.refused += plan->n_items - i;
			break;
		}
		if (d->predicted)
			p->st.predict_windows++;
		else
			p->st.windows++;
	}
	return 0;
}

/* 4. Until SIGTERM, nsctl's death or a new nsio: every queued decision, the statistics file
 * every 2 s while it changes (at once on SIGUSR1), a heartbeat every 100 ms. */
static int s_serve(struct nsr_proc *p)
{
	pid_t parent = getppid();
	uint64_t t_write = ns_now_ns();
	int rc = 0;

	while (!s_stop && rc == 0) {
		zmq_pollitem_t it = { .socket = p->sock, .events = ZMQ_POLLIN };
		int n = zmq_poll(&it, 1, 100); /* a signal ends the wait early */
		bool flush = s_flush;

		ns_client_beat(p->c);
		s_flush = 0;
		if (p->hits && p->hits->dirty && (flush || ns_now_ns() - t_write > 2000000000ull)) {
			ns_rhits_write(p->hits, p->o.stats);
			t_write = ns_now_ns();
		}
		if (getppid() != parent)
			break; /* whoever started us is gone */
		if (atomic_load(&ns_client_ctl(p->c)->nsio_gen) != p->nsio_gen) {
			/* a restarted nsio drops records of the old generation, and a prefetch
			 * has no ticket to re-issue: start afresh (nsctl restarts us) */
			fprintf(stderr, "nsrouter: nsio restarted; exiting to reattach\n");
			rc = -ESTALE;
			break;
		}
		while (n > 0 && rc == 0) { /* drain everything queued */
			zmq_msg_t msg;

			zmq_msg_init(&msg);
			if (zmq_msg_recv(&msg, p->sock, ZMQ_DONTWAIT) < 0) {
				zmq_msg_close(&msg);
				break;
			}
			rc = s_handle(p, zmq_msg_data(&msg), zmq_msg_size(&msg));
			zmq_msg_close(&msg);
		}
	}
	if (rc == -EPERM)
		return NS_EXIT_FOREIGN;
	if (rc == -ESTALE || rc == -EPIPE)
		return 1; /* restarted by nsctl */
	return 0;
}

/* 5. The statistics written a last time, the figures said, everything freed. */
static void s_teardown(struct nsr_proc *p)
{
	if (p->hits && p->hits->dirty) {
		int wr = ns_rhits_write(p->hits, p->o.stats);

		if (wr < 0)
			fprintf(stderr, "nsrouter: cannot write %s: %s\n", p->o.stats,
				strerror(-wr));
	}
	if (!p->o.quiet && p->sock)
		fprintf(stderr, "nsrouter: %" PRIu64 " decisions, %" PRIu64 " plans, %" PRIu64
			" windows prefetched, %" PRIu64 " refused, %" PRIu64 " malformed, %" PRIu64
			" resident windows skipped (%" PRIu64 " bytes), %" PRIu64 " predictions, %"
			PRIu64 " predicted windows\n", p->st.decisions,
			p->st.plans, p->st.windows, p->st.refused, p->st.rejected,
			p->st.resident_windows, p->st.resident_bytes, p->st.predictions,
			p->st.predict_windows);
	if (p->sock)
		zmq_close(p->sock);
	if (p->zctx)
		zmq_ctx_term(p->zctx);
	free(p->d);
	free(p->plan);
	ns_rhits_destroy(&p->hits);
	ns_rres_destroy(&p->res);
	ns_rplan_destroy(&p->rp);
	ns_client_close(&p->c);
	ns_model_close(&p->m);
}

int main(int argc, char **argv)
{
	struct nsr_proc p = { 0 };
	int code;

	/* 1. options */
	if (s_parse(&p.o, argc, argv) < 0)
		return 2;
	s_signals();
	/* 2. model, nsio client, expert tensors, RAM residency, statistics */
	code = s_attach(&p);
	/* 3. the router decisions */
	if (code == 0)
		code = s_subscribe(&p);
	/* 4. prefetch until told to stop */
	if (code == 0)
		code = s_serve(&p);
	/* 5. tear down */
	s_teardown(&p);
	return code;
}
