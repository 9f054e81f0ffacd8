/* nsplan - the residency planner process of a session.
 *
 *   nsplan --session ID MODEL [--vram-budget B] [--reserve-vram B] [--ram-budget B]
 *          [--mem-budget B] [-c CTX] [-ctk T] [-ctv T] [--stats FILE] [--embd-resident]
 *          [--quiet]
 *
 * Computes the plan (plan.h) and publishes it in the session's "plan" segment (plan_shm.h).
 * SIGHUP re-reads --stats (plan_stats.h) and publishes the next generation without stopping
 * anyone: readers switch when they next look, the diff says what moves. SIGTERM/SIGINT:
 * unlink the segment and exit 0. Killed instead: the segment stays, a restarted nsplan
 * re-opens it and continues the generation count. Exits when the session owner dies.
 * --mem-budget defaults to the session arena's budget; --ram-budget to 0 (nsctl passes the
 * figures it chose). -ctk/-ctv (f32 default): the KV cache types the default --reserve-vram
 * counts, as the cuda pass allocates them. Exit codes: 0 ok, 1 runtime failure, 2 bad usage
 * or input. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixed_mem.h"
#include "gpu_need.h"
#include "hparams.h"
#include "kv_type.h"
#include "model.h"
#include "ns_opt.h"
#include "ns_util.h"
#include "plan.h"
#include "plan_shm.h"
#include "session.h"
#include "plan_stats.h"

struct nsplan_proc {
	const char *session_id;
	const char *model_path;
	const char *stats_path;
	struct nsplan_opts opts;
	bool mem_given, reserve_given, quiet;
	uint32_t n_ctx;
	enum ns_kv_type kv_k, kv_v; /* -ctk / -ctv: what the reserve counts */
	struct ns_model *m;
	struct ns_hparams hp;
	struct ns_session *session;
	struct ns_seg seg;
	bool seg_mapped;
	struct nsplan *plan;
};

static void s_usage(FILE *f)
{
	fprintf(f, "usage: nsplan --session ID MODEL [--vram-budget B] [--reserve-vram B] "
		   "[--ram-budget B] [--mem-budget B] [-c CTX] [-ctk T] [-ctv T] [--stats FILE] "
		   "[--embd-resident] [--quiet]\n");
}

enum { O_HELP = 1, O_EMBD, O_QUIET, O_SESSION, O_STATS, O_CTX, O_VRAM, O_RESERVE, O_RAM, O_MEM,
       O_CTK, O_CTV };

/* The spellings nsctl passes (engine_args.c) and nsctl plan's for the same flags. */
static const struct ns_opt s_opts[] = {
	{ "help", "-h", NS_OPT_SWITCH, O_HELP },
	{ "embd-resident", NULL, NS_OPT_SWITCH, O_EMBD },
	{ "quiet", NULL, NS_OPT_SWITCH, O_QUIET },
	{ "session", NULL, NS_OPT_VALUE, O_SESSION },
	{ "stats", NULL, NS_OPT_VALUE, O_STATS },
	{ "ctx-size", "-c --ctx", NS_OPT_VALUE, O_CTX },
	{ "vram-budget", NULL, NS_OPT_VALUE, O_VRAM },
	{ "reserve-vram", NULL, NS_OPT_VALUE, O_RESERVE },
	{ "ram-budget", NULL, NS_OPT_VALUE, O_RAM },
	{ "mem-budget", NULL, NS_OPT_VALUE, O_MEM },
	{ "cache-type-k", "-ctk", NS_OPT_VALUE, O_CTK },
	{ "cache-type-v", "-ctv", NS_OPT_VALUE, O_CTV },
};

/* One option (opt NULL: the model) spelled o: 0, or -EINVAL after one line. */
static int s_on_opt(void *user, const struct ns_opt *opt, const char *o, const char *v)
{
	struct nsplan_proc *p = user;
	uint64_t *size = NULL, n;

	switch (opt ? opt->id : 0) {
	case O_HELP:
		s_usage(stdout);
		exit(0);
	case O_EMBD:
		p->opts.embd_resident = true;
		return 0;
	case O_QUIET:
		p->quiet = true;
		return 0;
	case O_SESSION:
		p->session_id = v;
		return 0;
	case O_STATS:
		p->stats_path = v;
		return 0;
	case O_CTX:
		if (ns_parse_count(v, 1, 1u << 30, &n) < 0) {
			fprintf(stderr, "nsplan: %s expects a context length, got '%s'\n", o, v);
			return -EINVAL;
		}
		p->n_ctx = (uint32_t)n;
		return 0;
	case O_CTK:
	case O_CTV:
		if (ns_kv_type_parse(v, opt->id == O_CTK ? &p->kv_k : &p->kv_v)) {
			fprintf(stderr, "nsplan: %s f32|f16|q8_0 (got '%s')\n", o, v);
			return -EINVAL;
		}
		return 0;
	case O_VRAM:
		size = &p->opts.budgets.vram;
		break;
	case O_RESERVE:
		size = &p->opts.budgets.reserve_vram;
		p->reserve_given = true;
		break;
	case O_RAM:
		size = &p->opts.budgets.ram;
		break;
	case O_MEM:
		size = &p->opts.budgets.mem;
		p->mem_given = true;
		break;
	default:
		if (p->model_path) {
			fprintf(stderr, "nsplan: more than one model given ('%s')\n", v);
			return -EINVAL;
		}
		p->model_path = v;
		return 0;
	}
	if (ns_parse_bytes(v, size)) {
		fprintf(stderr, "nsplan: %s expects a size like 512MB, got '%s'\n", o, v);
		return -EINVAL;
	}
	return 0;
}

static int s_parse(struct nsplan_proc *p, int argc, char **argv)
{
	if (ns_opt_parse("nsplan", s_opts, NS_ARRAY_LEN(s_opts), argc, argv, s_on_opt, p))
		return 2;
	if (!p->session_id || !p->model_path) {
		fprintf(stderr, "nsplan: %s (usage: nsplan --session ID MODEL [options]; --help "
			"lists them)\n", !p->session_id ? "--session ID is required" :
			"no MODEL given");
		return 2;
	}
	if (ns_session_arg_check("nsplan", p->session_id) < 0)
		return 2;
	if (!p->n_ctx)
		p->n_ctx = 4096;
	return 0;
}

/* Open the model and the session, size and map the plan segment. */
static int s_attach(struct nsplan_proc *p)
{
	char err[NS_ERR_LEN];
	int ret;

	ret = ns_model_open_flags(p->model_path, NS_MODEL_OPEN_NO_VOCAB, &p->m, err, sizeof(err));
	if (!ret)
		ret = ns_hparams_load(p->m, &p->hp, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "nsplan: %s\n", err);
		return 2;
	}
	ret = ns_session_attach(p->session_id, false, &p->session, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "nsplan: session %s: %s\n", p->session_id, err);
		return ret == -EPERM ? NS_EXIT_FOREIGN : 1;
	}
	if (!p->mem_given)
		p->opts.budgets.mem = p->session->ctl->budget_bytes;
	if (p->opts.budgets.vram && !p->reserve_given) {
		/* what the CUDA pass holds besides weight windows (gpu_need.h) */
		struct nsplan_gpu_need gn;
		if (nsplan_gpu_need(p->m, p->n_ctx, 0, 0, p->kv_k, p->kv_v, &gn, err,
				    sizeof(err))) {
			fprintf(stderr, "nsplan: %s\n", err);
			return 2;
		}
		p->opts.budgets.reserve_vram = gn.total;
	}
	ret = nsplan_shm_create(&p->seg, p->session_id, nsplan_entry_bound(p->m, &p->hp), err,
				sizeof(err));
	if (ret) {
		fprintf(stderr, "nsplan: %s\n", err);
		return ret == -EPERM ? NS_EXIT_FOREIGN : 1;
	}
	p->seg_mapped = true;
	return 0;
}

/* The generation a re-opened segment last published, 0 if none. */
static uint32_t s_last_generation(const struct nsplan_proc *p)
{
	struct nsplan_header h;
	struct nsplan_seg_ctl *c = (struct nsplan_seg_ctl *)((uint8_t *)p->seg.base +
							      sizeof(struct ns_seg_header));
	uint32_t a = atomic_load(&c->active);

	if (a > 1 || atomic_load(&c->len[a]) < sizeof(h))
		return 0;
	memcpy(&h, (uint8_t *)p->seg.base + c->off_slot[a], sizeof(h));
	return h.magic == NSPLAN_MAGIC ? h.generation : 0;
}

static void s_say(const struct nsplan_proc *p, const char *what)
{
	const struct nsplan *pl = p->plan;

	if (p->quiet)
		return;
	fprintf(stderr, "nsplan: %s generation %u: %.0f bytes/token from disk of %.0f touched; "
		"VRAM %" PRIu64 ", RAM %" PRIu64 " bytes placed\n", what, pl->hdr.generation,
		pl->predict.bytes_per_token, pl->predict.touched, pl->hdr.vram_used,
		pl->hdr.ram_used);
}

static int s_publish_first(struct nsplan_proc *p)
{
	char err[NS_ERR_LEN];
	struct nsplan_stats st = { 0 };
	int ret;

	if (p->stats_path &&
	    nsplan_stats_load(p->stats_path, p->hp.n_layer, p->hp.n_expert, &st, err, sizeof(err))) {
		fprintf(stderr, "nsplan: %s (planning without statistics)\n", err);
	}
	p->opts.hot = st.hits ? &st.hot : NULL;
	ret = nsplan_compute(p->m, &p->hp, &p->opts, s_last_generation(p) + 1, &p->plan, err,
			     sizeof(err));
	p->opts.hot = NULL;
	nsplan_stats_free(&st);
	if (!ret)
		ret = nsplan_shm_publish(&p->seg, p->plan, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "nsplan: %s\n", err);
		return ret == -ENOMEM ? 1 : 2;
	}
	s_say(p, "published");
	return 0;
}

/* SIGHUP: new statistics -> next generation, published after the old one stays readable. */
static void s_replan(struct nsplan_proc *p)
{
	char err[NS_ERR_LEN];
	struct nsplan_stats st = { 0 };
	struct nsplan *next = NULL;
	struct nsplan_diff *d = NULL;

	if (!p->stats_path || nsplan_stats_load(p->stats_path, p->hp.n_layer, p->hp.n_expert,
						&st, err, sizeof(err))) {
		fprintf(stderr, "nsplan: %s; keeping generation %u\n",
			p->stats_path ? err : "SIGHUP without --stats", p->plan->hdr.generation);
		return;
	}
	if (nsplan_update(p->plan, p->m, &p->hp, &st.hot, &next, &d, err, sizeof(err)) ||
	    nsplan_shm_publish(&p->seg, next, err, sizeof(err))) {
		fprintf(stderr, "nsplan: %s; keeping generation %u\n", err, p->plan->hdr.generation);
	} else {
		if (!p->quiet)
			fprintf(stderr, "nsplan: diff %u -> %u: %" PRIu64 " ranges, %" PRIu64
				" bytes promoted, %" PRIu64 " demoted\n", d->from_generation,
				d->to_generation, d->n_moves, d->bytes_promoted, d->bytes_demoted);
		nsplan_destroy(&p->plan);
		p->plan = next;
		next = NULL;
		s_say(p, "published");
	}
	nsplan_destroy(&next);
	nsplan_diff_destroy(&d);
	nsplan_stats_free(&st);
}

/* Wait for signals; returns when told to stop (true: clean stop, unlink). */
static bool s_loop(struct nsplan_proc *p)
{
	sigset_t set;
	struct timespec tick = { 0, 100000000 }; /* a heartbeat every 100 ms */

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	ns_beat_hello(p->session->ctl, NS_BEAT_NSPLAN, (int32_t)getpid());
	for (;;) {
		int sig = sigtimedwait(&set, NULL, &tick);

		ns_beat(p->session->ctl, NS_BEAT_NSPLAN);
		if (sig == SIGHUP)
			s_replan(p);
		else if (sig == SIGTERM || sig == SIGINT)
			return true;
		else if (!ns_session_owner_alive(p->session->ctl))
			return true; /* session owner gone: nobody will read plans again */
	}
}

int main(int argc, char **argv)
{
	struct nsplan_proc p = { 0 };
	sigset_t set;
	int ret;

	/* block the control signals before anything: they are taken by sigtimedwait */
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);

	ret = s_parse(&p, argc, argv);
	if (!ret)
		ret = s_attach(&p);
	if (!ret)
		ret = s_publish_first(&p);
	if (!ret && s_loop(&p))
		ns_seg_unlink(p.session_id, NSPLAN_SEG_WHAT);

	nsplan_destroy(&p.plan);
	if (p.seg_mapped)
		ns_seg_unmap(&p.seg);
	if (p.session)
		ns_session_destroy(&p.session);
	ns_model_close(&p.m);
	return ret;
}
