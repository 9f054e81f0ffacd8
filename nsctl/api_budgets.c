/* api_budgets.c - budgets the caller left to the library (NS_BUDGET_AUTO, what
 * ns_engine_opts_default sets): chosen as `nsctl run` chooses the ones not named, by the same
 * function (nsctl_pick_budgets, budgets.c: what `nsctl plan` prints, from MemAvailable and the
 * cgroup limit), so an embedder gets nsctl's RAM cache and arena without asking. */
#include <errno.h>
#include <string.h>

#include "budgets.h"
#include "commands.h"
#include "engine_internal.h"

int nse_budgets_resolve(struct ns_engine *e, uint32_t n_ctx_asked)
{
	bool mem_auto = e->o.mem_budget == NS_BUDGET_AUTO;
	bool ram_auto = e->o.ram_budget == NS_BUDGET_AUTO;
	uint64_t mem = mem_auto ? 0 : e->o.mem_budget, ram = ram_auto ? 0 : e->o.ram_budget;
	const struct nsctl_tower tw = { .mmproj = e->o.mmproj,
					.lim = { .max_tokens = e->o.max_image_tokens,
						 .min_pixels = e->o.min_image_pixels,
						 .max_pixels = e->o.max_image_pixels } };
	static const char who[] = "neurostream";
	const char *draft;
	char line[320];
	int rc;

	if (!mem_auto && !ram_auto)
		return 0;
	if (e->o.no_plan) {
		/* no planner, no RAM tier (nsio loads only what nsplan places); the arena as
		 * nsctl run --no-plan takes it: the engine's own (ns_engine_load) */
		e->o.mem_budget = mem;
		e->o.ram_budget = ram;
		return 0;
	}
	/* --draft mtp: the model's own block counts as the draft; a draft model on cuda is
	 * counted in VRAM (api.c), not here (budgets.h) */
	draft = nsctl_ram_draft(e->o.draft_mtp, e->o.draft_model, e->o.backend);
	rc = nsctl_pick_budgets(who, e->model_path, draft, &tw, n_ctx_asked,
				e->o.n_seq ? e->o.n_seq : 1,
				e->o.cache_type_k,
				e->o.cache_type_v, !mem_auto, &mem, !ram_auto, &ram, line,
				sizeof(line), e->err, sizeof(e->err));
	if (rc)
		return rc == 1 ? -ENOMEM : -ENOSPC;
	e->o.mem_budget = mem;
	e->o.ram_budget = ram;
	if (line[0]) /* "neurostream: budgets from ...": the log line carries no prefix */
		nse_log(NS_LOG_INFO, "%s", line + (strncmp(line, who, strlen(who)) ? 0 :
						   strlen(who) + 2));
	return 0;
}
