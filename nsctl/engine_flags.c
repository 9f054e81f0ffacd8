/* engine_flags.c - see engine_flags.h. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_repl.h"
#include "commands.h"
#include "engine_flags.h"
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
	"  --block-rows N        rows per streamed block (0: whole tensors, shrunk to fit)\n"
	"  --lookahead N         blocks in flight after the one being multiplied (4)\n"
	"  --backend cpu|cuda    compute process: nscompute, or nscompute-cuda when built\n"
	"  -c, --ctx N           context positions (4096)\n"
	"  --threads N           compute threads (0: all CPUs)\n"
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
	"  --no-plan             do not start nsplan\n"
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

/* Flags without a value: 1, or 0 when f is none of them. */
static int s_switch(struct nsctl_engine_args *a, const char *f)
{
	if (!strcmp(f, "--run-ahead"))
		a->eo.run_ahead = 1;
	else if (!strcmp(f, "--no-run-ahead"))
		a->eo.run_ahead = 0;
	else if (!strcmp(f, "--no-plan"))
		a->eo.no_plan = true;
	else if (!strcmp(f, "--verbose"))
		a->eo.verbose = true;
	else
		return 0;
	return 1;
}

int nsctl_engine_flag(struct nsctl_engine_args *a, const char *who, const char *f,
		      const char *v)
{
	struct ns_engine_opts *eo = &a->eo;
	uint64_t u = 0;
	int rc = 0;

	if (s_switch(a, f))
		return 1;
	if (strcmp(f, "--mem-budget") && strcmp(f, "--ram-budget") && strcmp(f, "--vram-budget") &&
	    strcmp(f, "--reserve-vram") && strcmp(f, "--block-rows") && strcmp(f, "--lookahead") &&
	    strcmp(f, "--backend") && strcmp(f, "-c") && strcmp(f, "--ctx") && strcmp(f, "--act") &&
	    strcmp(f, "--threads") && strcmp(f, "--wrap") && strcmp(f, "--expert-stats") &&
	    strcmp(f, "--reasoning") && strcmp(f, "--stall-timeout") &&
	    strcmp(f, "--chat-template") && !nsctl_kv_is_flag(f))
		return 0;
	if (!v) {
		fprintf(stderr, "%s: unknown option or missing value: %s\n", who, f);
		return -EINVAL;
	}
	if (!strcmp(f, "--mem-budget")) {
		rc = nsctl_arg_size(who, f, v, &eo->mem_budget);
		a->mem_given = true;
	} else if (!strcmp(f, "--ram-budget")) {
		rc = nsctl_arg_size(who, f, v, &eo->ram_budget);
		a->ram_given = true;
	} else if (!strcmp(f, "--vram-budget")) {
		rc = nsctl_arg_size(who, f, v, &eo->vram_budget);
	} else if (!strcmp(f, "--reserve-vram")) {
		rc = nsctl_arg_size(who, f, v, &eo->reserve_vram);
	} else if (!strcmp(f, "--block-rows")) {
		rc = nsctl_arg_count(who, f, v, 0, UINT32_MAX, &eo->block_rows);
	} else if (!strcmp(f, "--lookahead")) {
		rc = nsctl_arg_count(who, f, v, 0, 1024, &u);
		eo->lookahead = (int32_t)u;
	} else if (!strcmp(f, "--backend")) {
		if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
			fprintf(stderr, "%s: --backend cpu|cuda (got '%s')\n", who, v);
			rc = -EINVAL;
		}
		eo->backend = v;
	} else if (!strcmp(f, "-c") || !strcmp(f, "--ctx")) {
		rc = nsctl_arg_count(who, f, v, 1, 1 << 24, &u);
		eo->n_ctx = (uint32_t)u;
	} else if (!strcmp(f, "--act")) {
		if (strcmp(v, "f32") && strcmp(v, "q8")) {
			fprintf(stderr, "%s: --act f32|q8 (got '%s')\n", who, v);
			rc = -EINVAL;
		}
		eo->act_q8 = !strcmp(v, "q8");
	} else if (nsctl_kv_is_flag(f)) {
		rc = nsctl_kv_set(who, f, v, &eo->cache_type_k, &eo->cache_type_v);
	} else if (!strcmp(f, "--threads")) {
		rc = nsctl_arg_count(who, f, v, 0, 1024, &u);
		eo->threads = (int)u;
	} else if (!strcmp(f, "--stall-timeout")) {
		rc = nsctl_arg_count(who, f, v, 1, 3600, &u);
		eo->stall_ms = (uint32_t)u * 1000u;
	} else if (!strcmp(f, "--wrap")) {
		rc = s_wrap(a, who, v);
	} else if (!strcmp(f, "--expert-stats")) {
		eo->expert_stats = v;
	} else if (!strcmp(f, "--chat-template")) { /* NAME|FILE -> a family name */
		rc = chat_template_arg(who, v, &eo->chat_template);
	} else { /* --reasoning */
		if (strcmp(v, "low") && strcmp(v, "medium") && strcmp(v, "high")) {
			fprintf(stderr, "%s: --reasoning low|medium|high (got '%s')\n", who, v);
			rc = -EINVAL;
		}
		eo->reasoning_effort = v;
	}
	return rc < 0 ? rc : 2;
}

int nsctl_engine_args_check(struct nsctl_engine_args *a, const char *who)
{
	if (a->eo.reserve_vram && !a->eo.vram_budget) {
		fprintf(stderr, "%s: --reserve-vram needs a --vram-budget\n", who);
		return -EINVAL;
	}
	return 0;
}

int nsctl_engine_budgets(struct nsctl_engine_args *a, const char *who, const char *model)
{
	struct ns_engine_opts *eo = &a->eo;
	int rc;

	if (eo->vram_budget) {
		rc = nsctl_check_vram(who, model, eo->n_ctx, eo->vram_budget, eo->reserve_vram);
		if (rc)
			return rc;
	}
	/* both named: a session the memory can hold, the fixed set counted
	 * (nsctl_check_budgets) */
	if (!eo->no_plan && a->mem_given && a->ram_given) {
		rc = nsctl_check_budgets(who, model, eo->n_ctx, a->n_seq, eo->cache_type_k,
					 eo->cache_type_v, &eo->mem_budget, &eo->ram_budget, 1);
		if (rc)
			return rc;
	}
	/* budgets not named: the ones nsctl plan chooses (MemAvailable, cgroup limit), printed */
	if (!eo->no_plan && (!a->mem_given || !a->ram_given)) {
		char line[320];

		rc = nsctl_pick_budgets(who, model, eo->n_ctx, a->n_seq, eo->cache_type_k,
					eo->cache_type_v, a->mem_given, &eo->mem_budget,
					a->ram_given, &eo->ram_budget, line, sizeof(line), NULL, 0);
		if (rc)
			return rc;
		if (line[0])
			fprintf(stderr, "%s\n", line);
	}
	return 0;
}
