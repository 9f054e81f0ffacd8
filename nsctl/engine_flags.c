/* engine_flags.c - see engine_flags.h. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budgets.h"
#include "chat_repl.h"
#include "commands.h"
#include "draft_model.h"
#include "tower_vram.h"
#include "engine_flags.h"
#include "ns_opt.h"
#include "ns_util.h"

const char nsctl_engine_usage[] =
	"  --mem-budget SIZE     streaming arena (binary units: 64MB = 64 MiB)\n"
	"  --ram-budget SIZE     RAM cache: nsplan places weights in it, nsio loads them\n"
	"                        (0: none). A budget not named is chosen as nsctl plan\n"
	"                        does, from MemAvailable and the cgroup memory limit, and\n"
	"                        printed; with --no-plan the arena defaults to the model's\n"
	"                        size + 16MB, at most 512MB\n"
	"  --vram-budget SIZE    GPU budget (cuda backend): nsplan puts weights in VRAM\n"
	"  --reserve-vram SIZE   the part of it kept for KV cache, scratch and staging\n"
	"                        (default: exactly what the cuda pass needs)\n"
	"  -ngl, --n-gpu-layers N  llama.cpp's layer count as a VRAM plan: 0 is --backend\n"
	"                        cpu; N > 0 is --backend cuda with a --vram-budget of N\n"
	"                        layers' weights + the other weights + what the cuda pass\n"
	"                        needs (-1, all, or N >= the layer count: the whole model);\n"
	"                        nsplan still chooses which weights go in it; a\n"
	"                        --vram-budget given wins\n"
	"  --block-rows N        rows per streamed block (0: whole tensors, shrunk to fit)\n"
	"  --lookahead N         blocks in flight after the one being multiplied (4)\n"
	"  --backend cpu|cuda    compute process: nscompute, or nscompute-cuda when built\n"
	"  -c, --ctx-size, --ctx N  context positions (4096)\n"
	"  -b, --batch-size N    accepted for llama.cpp's command lines; no effect: the whole\n"
	"                        prompt is one batch, each streamed weight block is used for\n"
	"                        every prompt token before it is dropped\n"
	"  -t, --threads N       compute threads (0: all CPUs)\n"
	"  --act f32|q8          kernels' activations: f32 (default, exact weights) or q8\n"
	"                        (int8 per 32 as llama.cpp: faster 4-bit kernels; cuda:\n"
	"                        decode GEMVs of quantized weights, prefill stays f16/f32)\n"
	"  -ctk, --cache-type-k T, -ctv, --cache-type-v T\n"
	"                        KV cache element types: f32 (default, exact), f16, q8_0\n"
	"  --stall-timeout S     a process whose heartbeat stands still S seconds is taken\n"
	"                        for stopped or stuck: nsio, nsplan, nsrouter are restarted,\n"
	"                        nscompute ends the run (default 10)\n"
	"  --wrap PROC=CMD       run PROC (nsio, nscompute, nsplan, nsrouter) under CMD, e.g.\n"
	"                        --wrap nsio='strace -f -c' or --wrap nscompute='perf record\n"
	"                        -o perf.data --'; CMD is split on spaces (no quoting)\n"
	"  --run-ahead, --no-run-ahead  nsio reads the next matrices of the token ahead\n"
	"                        of the forward pass (default: on for dense models)\n"
	"  --moe-predict on|off  MoE: predict each layer's experts from the previous layer's\n"
	"                        output and prefetch them during its attention (default off)\n"
	"  --no-plan             do not start nsplan\n"
	"  --no-warmup           accepted for llama.cpp's command lines: we never run its\n"
	"                        empty warm-up evaluation (our --warmup is another thing)\n"
	"  --expert-stats FILE   expert hit counts (nsplan's format) nsrouter keeps up to\n"
	"                        date; FILE.plan gets the warm-up's, which nsplan plans\n"
	"                        from (default with --warmup: temporary files)\n"
	"  --verbose             children print their informational lines\n"
	"  --chat-template NAME|FILE  the chat template family (chatml, llama2, llama3,\n"
	"                        mistral-v7, phi3, qwen3, ...) or a Jinja file whose family\n"
	"                        is recognised from its text; default: the model's\n";

void nsctl_engine_args_init(struct nsctl_engine_args *a)
{
	memset(a, 0, sizeof(*a));
	ns_engine_opts_default(&a->eo);
	a->ngl = NSCTL_NGL_UNSET;
	a->n_seq = 1;
}

int nsctl_arg_num(const char *who, const char *flag, const char *v, double lo, double hi,
		  double *out)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(v, &end);
	if (!*v || isspace((unsigned char)*v) || *end || errno || !(x >= lo && x <= hi)) {
		fprintf(stderr, "%s: %s: bad value '%s' (a number in %g..%g)\n", who, flag, v, lo,
			hi);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

int nsctl_arg_count(const char *who, const char *flag, const char *v, uint64_t lo, uint64_t hi,
		    uint64_t *out)
{
	if (ns_parse_count(v, lo, hi, out) < 0) {
		fprintf(stderr, "%s: %s: bad value '%s' (an integer in %" PRIu64 "..%" PRIu64 ")\n",
			who, flag, v, lo, hi);
		return -EINVAL;
	}
	return 0;
}

int nsctl_arg_size(const char *who, const char *flag, const char *v, uint64_t *out)
{
	if (ns_parse_bytes(v, out) < 0) {
		fprintf(stderr, "%s: %s: bad size '%s' (e.g. 512MB, 6GB)\n", who, flag, v);
		return -EINVAL;
	}
	return 0;
}

static int s_wrap(struct nsctl_engine_args *a, const char *who, const char *v)
{
	static const char *const names[NS_PROC_COUNT] = { "nsio", "nscompute", "nsplan",
							   "nsrouter" };
	const char *eq = strchr(v, '=');

	for (int i = 0; eq && i < NS_PROC_COUNT; i++) {
		if (strlen(names[i]) == (size_t)(eq - v) && !strncmp(v, names[i], (size_t)(eq - v))) {
			if (!eq[1])
				break;
			a->eo.wrap[i] = eq + 1;
			return 0;
		}
	}
	fprintf(stderr, "%s: --wrap wants PROC=CMD with PROC one of nsio, nscompute, nsplan, "
		"nsrouter (got '%s')\n", who, v);
	return -EINVAL;
}

const struct ns_opt nsctl_engine_opts[NSCTL_ENGINE_N_OPTS] = {
	{ "mem-budget", NULL, NS_OPT_VALUE, NSE_O_MEM },
	{ "ram-budget", NULL, NS_OPT_VALUE, NSE_O_RAM },
	{ "vram-budget", NULL, NS_OPT_VALUE, NSE_O_VRAM },
	{ "reserve-vram", NULL, NS_OPT_VALUE, NSE_O_RESERVE },
	{ "n-gpu-layers", "-ngl --gpu-layers", NS_OPT_VALUE, NSE_O_NGL },
	{ "block-rows", NULL, NS_OPT_VALUE, NSE_O_BLOCK_ROWS },
	{ "lookahead", NULL, NS_OPT_VALUE, NSE_O_LOOKAHEAD },
	{ "backend", NULL, NS_OPT_VALUE, NSE_O_BACKEND },
	{ "ctx-size", "-c --ctx", NS_OPT_VALUE, NSE_O_CTX },
	{ "batch-size", "-b", NS_OPT_VALUE, NSE_O_BATCH },
	{ "act", NULL, NS_OPT_VALUE, NSE_O_ACT },
	{ "cache-type-k", "-ctk", NS_OPT_VALUE, NSE_O_CTK },
	{ "cache-type-v", "-ctv", NS_OPT_VALUE, NSE_O_CTV },
	{ "threads", "-t", NS_OPT_VALUE, NSE_O_THREADS },
	{ "stall-timeout", NULL, NS_OPT_VALUE, NSE_O_STALL },
	{ "wrap", NULL, NS_OPT_VALUE, NSE_O_WRAP },
	{ "expert-stats", NULL, NS_OPT_VALUE, NSE_O_STATS },
	{ "reasoning", NULL, NS_OPT_VALUE, NSE_O_REASONING },
	{ "run-ahead", NULL, NS_OPT_SWITCH, NSE_O_RUN_AHEAD },
	{ "moe-predict", NULL, NS_OPT_VALUE, NSE_O_MOE_PREDICT },
	{ "no-run-ahead", NULL, NS_OPT_SWITCH, NSE_O_NO_RUN_AHEAD },
	{ "no-plan", NULL, NS_OPT_SWITCH, NSE_O_NO_PLAN },
	{ "no-warmup", NULL, NS_OPT_SWITCH, NSE_O_NO_WARMUP },
	{ "verbose", NULL, NS_OPT_SWITCH, NSE_O_VERBOSE },
	{ "chat-template", NULL, NS_OPT_VALUE, NSE_O_CHAT_TEMPLATE },
};

/* A one-word choice among list ("cpu", "cuda", NULL): 0, or -EINVAL after one line. */
static int s_choice(const char *who, const char *flag, const char *v, const char *const *list)
{
	char all[64] = "";

	for (size_t i = 0; list[i]; i++) {
		if (!strcmp(v, list[i]))
			return 0;
		snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%s", i ? "|" : "",
			 list[i]);
	}
	fprintf(stderr, "%s: %s %s (got '%s')\n", who, flag, all, v);
	return -EINVAL;
}

/* -ngl N: llama.cpp's layer count, kept as a count; nsctl_engine_budgets turns it into the
 * backend and a VRAM budget (-1 or "all": every layer). */
static int s_ngl(struct nsctl_engine_args *a, const char *who, const char *f, const char *v)
{
	uint64_t u = 0;

	if (!strcmp(v, "-1") || !strcmp(v, "all") || !strcmp(v, "auto")) {
		a->ngl = NSCTL_NGL_ALL;
		return 0;
	}
	if (nsctl_arg_count(who, f, v, 0, NSCTL_NGL_ALL - 1, &u) < 0)
		return -EINVAL;
	a->ngl = (int64_t)u;
	return 0;
}

int nsctl_engine_opt(struct nsctl_engine_args *a, const char *who, const struct ns_opt *o,
		     const char *f, const char *v)
{
	static const char *const backends[] = { "cpu", "cuda", NULL };
	static const char *const acts[] = { "f32", "q8", NULL };
	static const char *const efforts[] = { "low", "medium", "high", NULL };
	struct ns_engine_opts *eo = &a->eo;
	uint64_t u = 0;
	int rc = 0;

	switch (o->id) {
	case NSE_O_RUN_AHEAD:
		eo->run_ahead = 1;
		break;
	case NSE_O_NO_RUN_AHEAD:
		eo->run_ahead = 0;
		break;
	case NSE_O_MOE_PREDICT:
		if (strcmp(v, "on") && strcmp(v, "off")) {
			fprintf(stderr, "%s: %s on|off (got '%s')\n", who, f, v);
			return -EINVAL;
		}
		eo->moe_predict = !strcmp(v, "on");
		break;
	case NSE_O_NO_PLAN:
		eo->no_plan = true;
		break;
	case NSE_O_NO_WARMUP: /* llama.cpp's empty warm-up evaluation: we never run one */
		a->no_warmup = true;
		break;
	case NSE_O_VERBOSE:
		eo->verbose = true;
		break;
	case NSE_O_MEM:
		rc = nsctl_arg_size(who, f, v, &eo->mem_budget);
		a->mem_given = true;
		break;
	case NSE_O_RAM:
		rc = nsctl_arg_size(who, f, v, &eo->ram_budget);
		a->ram_given = true;
		break;
	case NSE_O_VRAM:
		rc = nsctl_arg_size(who, f, v, &eo->vram_budget);
		break;
	case NSE_O_RESERVE:
		rc = nsctl_arg_size(who, f, v, &eo->reserve_vram);
		break;
	case NSE_O_NGL:
		rc = s_ngl(a, who, f, v);
		break;
	case NSE_O_BLOCK_ROWS:
		rc = nsctl_arg_count(who, f, v, 0, UINT32_MAX, &eo->block_rows);
		break;
	case NSE_O_LOOKAHEAD:
		rc = nsctl_arg_count(who, f, v, 0, 1024, &u);
		eo->lookahead = (int32_t)u;
		break;
	case NSE_O_BACKEND:
		rc = s_choice(who, f, v, backends);
		eo->backend = v;
		a->backend_given = true;
		break;
	case NSE_O_CTX:
		rc = nsctl_arg_count(who, f, v, 1, 1 << 24, &u);
		eo->n_ctx = (uint32_t)u;
		break;
	case NSE_O_BATCH: /* checked, kept for --print-args; prefill is one batch (usage) */
		rc = nsctl_arg_count(who, f, v, 1, 1 << 24, &u);
		a->batch = (uint32_t)u;
		break;
	case NSE_O_ACT:
		rc = s_choice(who, f, v, acts);
		eo->act_q8 = !strcmp(v, "q8");
		break;
	case NSE_O_CTK:
	case NSE_O_CTV:
		/* f may be an abbreviation getopt_long took ("--cache-type-k" is meant) */
		rc = nsctl_kv_set(who, nsctl_kv_is_flag(f) ? f : o->id == NSE_O_CTK ?
				  "--cache-type-k" : "--cache-type-v", v, &eo->cache_type_k,
				  &eo->cache_type_v);
		break;
	case NSE_O_THREADS:
		rc = nsctl_arg_count(who, f, v, 0, 1024, &u);
		eo->threads = (int)u;
		break;
	case NSE_O_STALL:
		rc = nsctl_arg_count(who, f, v, 1, 3600, &u);
		eo->stall_ms = (uint32_t)u * 1000u;
		break;
	case NSE_O_WRAP:
		rc = s_wrap(a, who, v);
		break;
	case NSE_O_STATS:
		eo->expert_stats = v;
		break;
	case NSE_O_CHAT_TEMPLATE: /* NAME|FILE -> a family name */
		rc = chat_template_arg(who, v, &eo->chat_template);
		break;
	case NSE_O_REASONING:
		rc = s_choice(who, f, v, efforts);
		eo->reasoning_effort = v;
		break;
	default:
		return -EINVAL;
	}
	return rc;
}

int nsctl_engine_args_check(struct nsctl_engine_args *a, const char *who)
{
	if (a->ngl > 0 && a->backend_given && strcmp(a->eo.backend, "cuda")) {
		fprintf(stderr, "%s: -ngl puts layers on the GPU: it needs the cuda backend, not "
			"--backend %s\n", who, a->eo.backend);
		return -EINVAL;
	}
	if (a->ngl == 0 && a->eo.vram_budget) {
		fprintf(stderr, "%s: -ngl 0 is the cpu backend; it does not go with --vram-budget\n",
			who);
		return -EINVAL;
	}
	if (a->ngl == 0 && !a->backend_given)
		a->eo.backend = "cpu";
	if (a->ngl > 0 && !a->backend_given)
		a->eo.backend = "cuda";
	if (a->eo.reserve_vram && !a->eo.vram_budget && a->ngl <= 0) {
		fprintf(stderr, "%s: --reserve-vram needs a --vram-budget\n", who);
		return -EINVAL;
	}
	return 0;
}

int nsctl_engine_budgets(struct nsctl_engine_args *a, const char *who, const char *model)
{
	struct ns_engine_opts *eo = &a->eo;
	const struct nsctl_tower tw = { .mmproj = eo->mmproj,
					.lim = { .max_tokens = eo->max_image_tokens,
						 .min_pixels = eo->min_image_pixels,
						 .max_pixels = eo->max_image_pixels } };
	/* --draft mtp: the model's own block counts as the draft; a draft model on cuda is in
	 * VRAM, not in the RAM fixed set (budgets.h) */
	const char *draft = nsctl_ram_draft(eo->draft_mtp, eo->draft_model, eo->backend);
	const char *vram_draft = eo->draft_model && !draft ? eo->draft_model : NULL;
	const uint32_t n_ctx = eo->n_ctx ? eo->n_ctx : NSCTL_DEFAULT_CTX;
	const bool cuda = eo->backend && !strcmp(eo->backend, "cuda");
	char err[NS_ERR_LEN], s[32];
	uint64_t d = 0, tv = 0, r;
	int rc;

	if (vram_draft && nsctl_draft_vram(vram_draft, n_ctx, &d, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		return 2;
	}
	/* the vision tower on cuda: its arena in VRAM too (tower_vram.h) */
	if (cuda && eo->mmproj && (rc = nsctl_tower_vram(&tw, n_ctx, &tv, err, sizeof(err))) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		return rc == -ENOMEM ? 1 : 2;
	}
	if (a->ngl > 0 && !eo->vram_budget) { /* -ngl N: N layers' worth of VRAM */
		rc = nsctl_ngl_vram(who, model, eo->n_ctx, eo->cache_type_k, eo->cache_type_v,
				    a->ngl, &eo->vram_budget);
		if (rc)
			return rc;
		if (d && ns_add_u64_overflow(eo->vram_budget, d, &eo->vram_budget)) {
			fprintf(stderr, "%s: -ngl: the VRAM budget overflows\n", who);
			return 2;
		}
		if (d)
			fprintf(stderr, "%s: -ngl: and the draft model's %s: --vram-budget %" PRIu64
				"\n", who, ns_format_bytes(d, s, sizeof(s)), eo->vram_budget);
		if (tv && ns_add_u64_overflow(eo->vram_budget, tv, &eo->vram_budget)) {
			fprintf(stderr, "%s: -ngl: the VRAM budget overflows\n", who);
			return 2;
		}
		if (tv)
			fprintf(stderr, "%s: -ngl: and the vision tower's %s: --vram-budget %" PRIu64
				"\n", who, ns_format_bytes(tv, s, sizeof(s)), eo->vram_budget);
	}
	if (eo->vram_budget) {
		rc = nsctl_check_vram(who, model, eo->n_ctx, eo->cache_type_k, eo->cache_type_v,
				      eo->vram_budget, eo->reserve_vram);
		if (rc)
			return rc;
	}
	/* the draft model's arena comes out of the VRAM budget: one line when it does not fit */
	if (vram_draft && eo->vram_budget &&
	    (rc = nsctl_draft_vram_reserve(model, vram_draft, n_ctx, eo->cache_type_k,
					   eo->cache_type_v, eo->vram_budget,
					   eo->reserve_vram, &r, NULL, err, sizeof(err))) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		return rc == -ENOMEM ? 1 : 2;
	}
	/* and the tower's, after the draft's (the engine reserves both: api.c) */
	if (tv && eo->vram_budget &&
	    (rc = nsctl_tower_vram_reserve(model, &tw, n_ctx, eo->cache_type_k, eo->cache_type_v,
					   eo->vram_budget, vram_draft ? r : eo->reserve_vram, &r,
					   NULL, err, sizeof(err))) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		return rc == -ENOMEM ? 1 : 2;
	}
	/* both named: a session the memory can hold, the fixed set counted
	 * (nsctl_check_budgets) */
	if (!eo->no_plan && a->mem_given && a->ram_given) {
		rc = nsctl_check_budgets(who, model, draft, &tw, eo->n_ctx, a->n_seq,
					 eo->cache_type_k,
					 eo->cache_type_v, &eo->mem_budget, &eo->ram_budget, 1);
		if (rc)
			return rc;
	}
	/* budgets not named: the ones nsctl plan chooses (MemAvailable, cgroup limit), printed */
	if (!eo->no_plan && (!a->mem_given || !a->ram_given)) {
		char line[320];

		rc = nsctl_pick_budgets(who, model, draft, &tw, eo->n_ctx, a->n_seq,
					eo->cache_type_k,
					eo->cache_type_v, a->mem_given, &eo->mem_budget,
					a->ram_given, &eo->ram_budget, line, sizeof(line), NULL, 0);
		if (rc)
			return rc;
		if (line[0])
			fprintf(stderr, "%s\n", line);
	}
	return 0;
}
