/* nsrouter - turns nscompute's router decisions into layer-wide prefetch plans for nsio.
 *
 *   nsrouter --session ID --model PATH [--block-rows N] [--lookahead N] [--stats FILE]
 *            [--quiet]
 *
 * Subscribes to ipc://RUNDIR/router.ipc (nscompute publishes one NS_ZMSG_ROUTER per MoE layer
 * and chunk as soon as the routing is known), builds the layer's plan (plan.h: every chosen
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
 * Exit: SIGTERM/SIGINT or nsio gone. Codes: 0 ok, 1 runtime failure, 2 bad usage or input,
 * 3 the model has no experts (nothing to do). */
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
	uint64_t resident_windows, resident_bytes; /* blocks in the RAM cache, not prefetched */
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

static int s_parse(struct s_opts *o, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t x;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			s_usage(stdout);
			exit(0);
		}
		if (!strcmp(a, "--quiet")) {
			o->quiet = 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "nsrouter: unknown option or missing value: %s\n", a);
			return -EINVAL;
		}
		i++;
		if (!strcmp(a, "--session")) {
			o->session = v;
		} else if (!strcmp(a, "--model")) {
			o->model = v;
		} else if (!strcmp(a, "--stats")) {
			o->stats = v;
		} else if (!strcmp(a, "--block-rows")) {
			if (s_u64(a, v, UINT32_MAX, &o->block_rows))
				return -EINVAL;
		} else if (!strcmp(a, "--lookahead")) {
			if (s_u64(a, v, 1024, &x))
				return -EINVAL;
			o->lookahead = (uint32_t)x;
			o->lookahead_given = 1;
		} else {
			fprintf(stderr, "nsrouter: unknown option %s\n", a);
			return -EINVAL;
		}
	}
	return ns_session_args_check("nsrouter", o->session, o->model);
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

/* Take a new plan of the session if there is one (at most every 100 ms). */
static void s_refresh(struct ns_rres *res, int quiet)
{
	char err[NS_ERR_LEN];
	int rc = ns_rres_refresh(res, false, err, sizeof(err));
	uint64_t w, b;
	uint32_t gen;

	if (rc < 0) {
		fprintf(stderr, "nsrouter: ignoring the published plan: %s\n", err);
	} else if (rc > 0 && !quiet) {
		ns_rres_figures(res, &gen, &w, &b);
		fprintf(stderr, "nsrouter: plan generation %u: %" PRIu64 " RAM windows, %" PRIu64
			" bytes resident (never prefetched)\n", gen, w, b);
	}
}

/* One received frame: decode, plan, prefetch. Returns 0, or -EPIPE when nsio is gone. */
static int s_handle(struct ns_client *c, const struct ns_rplan *rp, struct ns_rhits *hits,
		    struct ns_rres *res, int quiet, const void *buf, size_t len, uint64_t cap,
		    uint32_t skip, struct ns_zrouter *d, struct ns_zplan *plan, struct s_stats *st)
{
	struct ns_rbuild bs;
	uint32_t n_expert;
	int n;

	if (ns_zmsg_type(buf, len) != NS_ZMSG_ROUTER) {
		st->rejected++;
		return 0;
	}
	/* the layer is only known after decoding: check against the largest expert count */
	n_expert = NS_ZMSG_MAX_EXPERTS;
	if (ns_zrouter_decode(buf, len, n_expert, d) < 0) {
		st->rejected++;
		return 0;
	}
	st->decisions++;
	s_normalise(d);
	if (hits)
		ns_rhits_add(hits, d);
	s_refresh(res, quiet);
	/* compute requests the first lookahead + 1 windows itself the moment it has published:
	 * prefetching them only races those reads (measured: +4% device bytes, ~2% hits) */
	n = ns_rplan_build(rp, d, cap, res, skip, plan, &bs);
	if (n < 0) {
		st->rejected++;
		return 0;
	}
	st->resident_windows += bs.resident_windows;
	st->resident_bytes += bs.resident_bytes;
	plan->plan_id = st->plans++;
	for (uint32_t i = 0; i < plan->n_items; i++) {
		const struct ns_zplan_item *it = &plan->item[i];
		int rc = ns_client_prefetch(c, it->tensor, it->row0, it->nrows);

		if (rc == -EPIPE)
			return rc;
		if (rc) { /* ring full or refused: the rest is read on demand */
			st->refused += plan->n_items - i;
			break;
		}
		st->windows++;
	}
	return 0;
}

static int s_serve(struct ns_client *c, const struct ns_rplan *rp, struct ns_rhits *hits,
		   struct ns_rres *res, int quiet, const char *stats_path, void *sock, uint64_t cap,
		   uint32_t skip, struct s_stats *st)
{
	struct ns_zrouter *d = malloc(sizeof(*d));
	struct ns_zplan *plan = malloc(sizeof(*plan));
	pid_t parent = getppid();
	struct ns_ctl *ctl = ns_client_ctl(c);
	const uint32_t gen = atomic_load(&ctl->nsio_gen);
	uint64_t t_write = ns_now_ns();
	int rc = 0;

	if (!d || !plan) {
		free(d);
		free(plan);
		return -ENOMEM;
	}
	while (!s_stop && rc == 0) {
		zmq_pollitem_t it = { .socket = sock, .events = ZMQ_POLLIN };
		int n = zmq_poll(&it, 1, 200); /* a signal ends the wait early */
		bool flush = s_flush;

		s_flush = 0;
		if (hits && hits->dirty && (flush || ns_now_ns() - t_write > 2000000000ull)) {
			ns_rhits_write(hits, stats_path);
			t_write = ns_now_ns();
		}

		if (getppid() != parent)
			break; /* whoever started us is gone */
		if (atomic_load(&ctl->nsio_gen) != gen) {
			/* a restarted nsio drops records of the old generation, and a prefetch
			 * has no ticket to re-issue: start afresh (nsctl restarts us) */
			fprintf(stderr, "nsrouter: nsio restarted; exiting to reattach\n");
			rc = -ESTALE;
			break;
		}
		if (n <= 0)
			continue;
		for (;;) { /* drain everything queued */
			zmq_msg_t msg;

			zmq_msg_init(&msg);
			if (zmq_msg_recv(&msg, sock, ZMQ_DONTWAIT) < 0) {
				zmq_msg_close(&msg);
				break;
			}
			rc = s_handle(c, rp, hits, res, quiet, zmq_msg_data(&msg),
				      zmq_msg_size(&msg), cap, skip, d, plan, st);
			zmq_msg_close(&msg);
			if (rc)
				break;
		}
	}
	free(d);
	free(plan);
	return rc;
}

int main(int argc, char **argv)
{
	struct s_opts o = { 0 };
	struct ns_client_opts co = { .attach_timeout_ms = 20000, .dead_timeout_ms = 15000 };
	struct sigaction sa = { .sa_handler = s_on_signal };
	struct ns_model *m = NULL;
	struct ns_client *c = NULL;
	struct ns_rplan *rp = NULL;
	struct ns_rhits *hits = NULL;
	struct ns_rres *res = NULL;
	struct ns_hparams hp;
	struct s_stats st = { 0 };
	char err[NS_ERR_LEN], rundir[PATH_MAX], ep[PATH_MAX + 32];
	void *zctx = NULL, *sock = NULL;
	int rc, code = 0, linger = 0, hwm = 1024;

	if (s_parse(&o, argc, argv) < 0)
		return 2;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	rc = ns_model_open_flags(o.model, NS_MODEL_OPEN_NO_VOCAB, &m, err, sizeof(err));
	if (rc == 0)
		rc = ns_client_open(o.session, &co, &c, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "nsrouter: %s\n", err);
		code = rc == -ETIMEDOUT || rc == -EPIPE ? 1 : 2;
		goto out;
	}
	if (!o.lookahead_given)
		o.lookahead = ns_client_default_lookahead(c);
	rc = ns_rplan_new(m, c, o.block_rows, o.lookahead, &rp, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "nsrouter: %s\n", err);
		code = rc == -ENOENT ? 3 : rc == -EINVAL || rc == -ENOSPC ? 2 : 1;
		goto out;
	}
	rc = ns_rres_new(m, o.session, &res);
	if (rc < 0) {
		fprintf(stderr, "nsrouter: %s\n", strerror(-rc));
		code = 1;
		goto out;
	}
	s_refresh(res, o.quiet);
	if (o.stats) {
		rc = ns_hparams_load(m, &hp, err, sizeof(err));
		if (rc == 0)
			rc = ns_rhits_new(hp.n_layer, hp.n_expert, hp.n_expert_used, &hits);
		if (rc < 0) {
			fprintf(stderr, "nsrouter: --stats: %s\n", rc == -EINVAL ? err :
				strerror(-rc));
			code = 2;
			goto out;
		}
	}
	if (ns_session_rundir(o.session, rundir, sizeof(rundir)) < 0 ||
	    snprintf(ep, sizeof(ep), "ipc://%s/router.ipc", rundir) >= (int)sizeof(ep)) {
		fprintf(stderr, "nsrouter: runtime dir path too long\n");
		code = 2;
		goto out;
	}
	zctx = zmq_ctx_new();
	sock = zctx ? zmq_socket(zctx, ZMQ_SUB) : NULL;
	if (!sock || zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger)) ||
	    zmq_setsockopt(sock, ZMQ_RCVHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(sock, ZMQ_SUBSCRIBE, "", 0) || zmq_connect(sock, ep)) {
		fprintf(stderr, "nsrouter: cannot subscribe to %s: %s\n", ep,
			zmq_strerror(zmq_errno()));
		code = 1;
		goto out;
	}
	rc = s_serve(c, rp, hits, res, o.quiet, o.stats, sock, ns_client_arena_bytes(c) / 2,
		     o.lookahead + 1, &st);
	if (hits && hits->dirty) {
		int wr = ns_rhits_write(hits, o.stats);

		if (wr < 0)
			fprintf(stderr, "nsrouter: cannot write %s: %s\n", o.stats, strerror(-wr));
	}
	if (rc == -ESTALE || rc == -EPIPE) {
		code = 1; /* restarted by nsctl */
	} else if (rc < 0) {
		fprintf(stderr, "nsrouter: %s\n", strerror(-rc));
		code = 1;
	}
	if (!o.quiet)
		fprintf(stderr, "nsrouter: %" PRIu64 " decisions, %" PRIu64 " plans, %" PRIu64
			" windows prefetched, %" PRIu64 " refused, %" PRIu64 " malformed, %" PRIu64
			" resident windows skipped (%" PRIu64 " bytes)\n", st.decisions, st.plans,
			st.windows, st.refused, st.rejected, st.resident_windows, st.resident_bytes);
out:
	if (sock)
		zmq_close(sock);
	if (zctx)
		zmq_ctx_term(zctx);
	ns_rhits_destroy(&hits);
	ns_rres_destroy(&res);
	ns_rplan_destroy(&rp);
	ns_client_close(&c);
	ns_model_close(&m);
	return code;
}
