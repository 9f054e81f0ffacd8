/* classify.c - tensor kinds and printable names for the planner (see plan.h). */
#include <string.h>

#include "plan.h"
#include "summary.h"

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

/* A tensor with one meaningful dimension: norms, biases, scales. */
static bool s_is_vector(const struct ns_model_tensor *t)
{
	for (uint32_t d = 1; d < t->n_dims; d++)
		if (t->ne[d] != 1)
			return false;
	return true;
}

enum nsplan_kind nsplan_tensor_kind(const struct ns_model_tensor *t, const struct ns_hparams *hp)
{
	const char *n = t->name;

	/* Tied: the LM head multiplies every row each token, so it is the output projection. */
	if (!strcmp(n, "token_embd.weight"))
		return hp->tied_embeddings ? NSPLAN_KIND_OUTPUT : NSPLAN_KIND_EMBD;
	if (!strncmp(n, "output.", 7))
		return NSPLAN_KIND_OUTPUT;
	/* held by compute from the start (norms, biases, expert bias tables, sinks) */
	if (nsplan_tensor_held(t))
		return strstr(n, "norm") ? NSPLAN_KIND_NORM : NSPLAN_KIND_VECTOR;
	if (ns_tensor_is_expert(n))
		return NSPLAN_KIND_EXPERT;
	if (strstr(n, "ffn_gate_inp"))
		return NSPLAN_KIND_ROUTER;
	if (strstr(n, "norm"))
		return NSPLAN_KIND_NORM;
	if (s_is_vector(t))
		return NSPLAN_KIND_VECTOR;
	if (strstr(n, "attn_"))
		return NSPLAN_KIND_ATTN;
	if (strstr(n, "ssm_"))
		return NSPLAN_KIND_SSM;
	if (strstr(n, "ffn_"))
		return NSPLAN_KIND_FFN;
	return NSPLAN_KIND_OTHER;
}
