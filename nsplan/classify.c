/* classify.c - tensor kinds and printable names for the planner (see plan.h). */
#include <string.h>

#include "arch.h"
#include "plan.h"

static const char *const s_tier_names[NSPLAN_TIER_COUNT] = {
	[NSPLAN_DISK] = "disk",
	[NSPLAN_RAM] = "RAM",
	[NSPLAN_VRAM_Q] = "VRAM-Q",
	[NSPLAN_VRAM_F] = "VRAM-F",
};

static const char *const s_kind_names[NSPLAN_KIND_COUNT] = {
	[NSPLAN_KIND_NORM] = "norm",
	[NSPLAN_KIND_VECTOR] = "vector",
	[NSPLAN_KIND_ATTN] = "attn",
	[NSPLAN_KIND_SSM] = "ssm",
	[NSPLAN_KIND_ROUTER] = "router",
	[NSPLAN_KIND_OUTPUT] = "output",
	[NSPLAN_KIND_FFN] = "ffn",
	[NSPLAN_KIND_EXPERT] = "expert",
	[NSPLAN_KIND_EMBD] = "embd",
	[NSPLAN_KIND_OTHER] = "other",
};

const char *nsplan_tier_name(unsigned tier)
{
	return tier < NSPLAN_TIER_COUNT ? s_tier_names[tier] : "?";
}

const char *nsplan_kind_name(unsigned kind)
{
	return kind < NSPLAN_KIND_COUNT ? s_kind_names[kind] : "?";
}

enum nsplan_kind nsplan_tensor_kind(const struct ns_model_tensor *t, const struct ns_hparams *hp)
{
	const char *n = t->name;

	switch (ns_arch_role(hp, t)) {
	case NS_ROLE_ROWS_MATRIX: /* tied: the LM head multiplies every row each token */
		return NSPLAN_KIND_OUTPUT;
	case NS_ROLE_ROWS:        /* a token reads one row */
		return NSPLAN_KIND_EMBD;
	case NS_ROLE_HELD:        /* held by compute from the start */
		return strstr(n, "norm") ? NSPLAN_KIND_NORM : NSPLAN_KIND_VECTOR;
	case NS_ROLE_EXPERT:
		return NSPLAN_KIND_EXPERT;
	case NS_ROLE_UNUSED:
		return NSPLAN_KIND_OTHER;
	default:
		break;
	}
	if (!strncmp(n, "output.", 7))
		return NSPLAN_KIND_OUTPUT;
	if (strstr(n, "ffn_gate_inp"))
		return NSPLAN_KIND_ROUTER;
	if (strstr(n, "attn_"))
		return NSPLAN_KIND_ATTN;
	if (strstr(n, "ssm_"))
		return NSPLAN_KIND_SSM;
	if (strstr(n, "ffn_"))
		return NSPLAN_KIND_FFN;
	return NSPLAN_KIND_OTHER;
}
