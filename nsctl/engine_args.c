/* engine_args.c - what each child process of the engine is: its name, where its executable
 * is found, and its command line from the engine's options. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine_internal.h"
#include "ns_util.h"

static const char *const s_names[NS_PROC_COUNT] = {
	[NS_PROC_NSIO] = "nsio", [NS_PROC_NSCOMPUTE] = "nscompute",
	[NS_PROC_NSPLAN] = "nsplan", [NS_PROC_NSROUTER] = "nsrouter",
};

const char *nse_name(enum ns_engine_proc p)
{
	return p < NS_PROC_COUNT ? s_names[p] : "?";
}

/* $NS_<NAME> or the build tree's <name>/<name>; a backend other than cpu is another compute
 * executable, nscompute-<backend> ($NS_NSCOMPUTE_<BACKEND>). */
void nse_exe_of(const struct ns_engine *e, enum ns_engine_proc p, char *buf, size_t n)
{
	char name[64], env[72];

	if (p == NS_PROC_NSCOMPUTE && strcmp(e->o.backend, "cpu"))
		snprintf(name, sizeof(name), "nscompute-%s", e->o.backend);
	else
		snprintf(name, sizeof(name), "%s", s_names[p]);
	snprintf(env, sizeof(env), "NS_%s", name);
	for (char *c = env; *c; c++)
		*c = *c >= 'a' && *c <= 'z' ? (char)(*c - 'a' + 'A') : *c == '-' ? '_' : *c;
	nse_find_exe(s_names[p], name, env, buf, n);
}

struct s_argv {
	const char **v;
	size_t n, cap;
	char (*num)[32];
	size_t n_num;
	bool full;
};

static void s_add(struct s_argv *a, const char *s)
{
	if (a->n + 1 >= a->cap) {
		a->full = true;
		return;
	}
	a->v[a->n++] = s;
}

/* flag and a number after it */
static void s_num(struct s_argv *a, const char *flag, unsigned long long v)
{
	if (a->n_num >= NSE_NUMS) {
		a->full = true;
		return;
	}
	snprintf(a->num[a->n_num], 32, "%llu", v);
	s_add(a, flag);
	s_add(a, a->num[a->n_num++]);
}

static void s_nsio(const struct ns_engine *e, struct s_argv *a)
{
	/* the RAM tier: nsio loads the plan's RAM windows when it is given the same
	 * --ram-budget as nsplan (it waits for nsplan's first publish) */
	if (!e->o.no_plan && e->o.ram_budget)
		s_num(a, "--ram-budget", e->o.ram_budget);
	s_add(a, "--session");
	s_add(a, e->id);
	s_add(a, "--model");
	s_add(a, e->model_path);
	if (e->o.mmproj) { /* the vision tower's tensors, streamed as the model's */
		s_add(a, "--mmproj");
		s_add(a, e->o.mmproj);
	}
	s_num(a, "--lookahead", (unsigned)e->o.lookahead);
	if (e->o.run_ahead > 0) {
		s_add(a, "--run-ahead");
		if (e->o.block_rows) /* nsio's own default is 0: as large as fits */
			s_num(a, "--block-rows", e->o.block_rows);
	}
}

static void s_nsplan(const struct ns_engine *e, struct s_argv *a, char *stats, size_t n)
{
	s_add(a, "--session");
	s_add(a, e->id);
	s_add(a, e->model_path);
	s_num(a, "--mem-budget", e->o.mem_budget);
	s_num(a, "--ram-budget", e->o.ram_budget);
	s_num(a, "--vram-budget", e->o.vram_budget);
	if (e->o.reserve_vram)
		s_num(a, "--reserve-vram", e->o.reserve_vram);
	s_num(a, "-c", e->o.n_ctx);
	if (e->o.vram_budget && e->o.cache_type_k) { /* the reserve counts the cache's types */
		s_add(a, "--cache-type-k");
		s_add(a, e->o.cache_type_k);
	}
	if (e->o.vram_budget && e->o.cache_type_v) {
		s_add(a, "--cache-type-v");
		s_add(a, e->o.cache_type_v);
	}
	if (e->o.expert_stats) { /* re-read on SIGHUP (ns_engine_warmup) */
		if (snprintf(stats, n, NSE_PLAN_STATS_FMT, e->o.expert_stats) >= (int)n)
			a->full = true;
		s_add(a, "--stats");
		s_add(a, stats);
	}
}

static void s_nscompute(const struct ns_engine *e, struct s_argv *a)
{
	s_add(a, "--session");
	s_add(a, e->id);
	s_add(a, "--model");
	s_add(a, e->model_path);
	s_add(a, "--backend");
	s_add(a, e->o.backend);
	s_num(a, "--threads", (unsigned)e->o.threads);
	s_num(a, "--block-rows", e->o.block_rows);
	s_num(a, "--lookahead", (unsigned)e->o.lookahead);
	s_num(a, "-c", e->o.n_ctx);
	s_add(a, "--ctl");
	s_add(a, e->endpoint);
	if (e->o.act_q8) {
		s_add(a, "--act");
		s_add(a, "q8");
	}
	if (e->o.cache_type_k) {
		s_add(a, "--cache-type-k");
		s_add(a, e->o.cache_type_k);
	}
	if (e->o.cache_type_v) {
		s_add(a, "--cache-type-v");
		s_add(a, e->o.cache_type_v);
	}
	if (e->o.mmproj) { /* the vision tower, its matrices streamed (compute_image.h) */
		s_add(a, "--mmproj");
		s_add(a, e->o.mmproj);
		/* its images' limits: cuda sizes the tower's arena for the largest (tower_vram.h) */
		if (e->o.max_image_tokens)
			s_num(a, "--max-patches", e->o.max_image_tokens);
		if (e->o.min_image_pixels)
			s_num(a, "--min-pixels", e->o.min_image_pixels);
		if (e->o.max_image_pixels)
			s_num(a, "--max-pixels", e->o.max_image_pixels);
	}
	if (e->o.draft_model) { /* resident in nscompute's RAM (compute_draft_model.h) */
		s_add(a, "--draft-model");
		s_add(a, e->o.draft_model);
	}
	if (e->o.draft_mtp) { /* the model's MTP block, resident beside the pass (mtp.h) */
		s_add(a, "--draft-mtp");
	}
	if (e->o.moe_predict) {
		s_add(a, "--moe-predict");
		s_add(a, "on");
	}
	if (e->o.n_seq > 1) /* KV-cache slots for ns_engine_step */
		s_num(a, "--parallel", e->o.n_seq);
	if (strcmp(e->o.backend, "cpu")) /* the GPU arena: nsplan placed weights in it */
		s_num(a, "--vram-budget", e->o.vram_budget);
}

static void s_nsrouter(const struct ns_engine *e, struct s_argv *a)
{
	s_add(a, "--session");
	s_add(a, e->id);
	s_add(a, "--model");
	s_add(a, e->model_path);
	s_num(a, "--block-rows", e->o.block_rows);
	s_num(a, "--lookahead", (unsigned)e->o.lookahead);
	if (e->o.expert_stats) { /* hits for nsplan (ns_engine_warmup) */
		s_add(a, "--stats");
		s_add(a, e->o.expert_stats);
	}
}

int nse_args(const struct ns_engine *e, enum ns_engine_proc p, struct nse_cmdline *c)
{
	struct s_argv a = { .v = c->argv, .cap = NS_ARRAY_LEN(c->argv), .num = c->num };

	switch (p) {
	case NS_PROC_NSIO:
		s_nsio(e, &a);
		break;
	case NS_PROC_NSPLAN:
		s_nsplan(e, &a, c->path, sizeof(c->path));
		break;
	case NS_PROC_NSCOMPUTE:
		s_nscompute(e, &a);
		break;
	case NS_PROC_NSROUTER:
		s_nsrouter(e, &a);
		break;
	default:
		return -EINVAL;
	}
	if (!e->o.verbose && p != NS_PROC_NSCOMPUTE) /* nscompute says nothing unasked */
		s_add(&a, "--quiet");
	if (a.full)
		return -E2BIG;
	c->argv[a.n] = NULL;
	return (int)a.n;
}
