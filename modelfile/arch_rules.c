/* arch_rules.c - hyperparameter rules of the architecture table (arch.h): the metadata into
 * the named dimensions and each layer's kinds, and what is missing or inconsistent refused
 * with one line. Keys follow llama.cpp's "<arch>.<name>" convention (hparams.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "arch_internal.h"
#include "ns_util.h"

void ns_arch_layers_from_model(struct ns_arch_model *am, uint32_t kinds)
{
	for (uint32_t l = 0; l < am->n_layer; l++) {
		struct ns_arch_layer *y = &am->layer[l];

		y->kinds = kinds;
		y->window = 0;
		memcpy(y->dim, am->dim, sizeof(y->dim));
	}
}

/* A per-layer value: item l of an array key, else the scalar key, else dflt. */
static uint32_t s_layer_u32(const struct ns_arch_model *am, const char *suffix, uint32_t l,
			    uint32_t dflt)
{
	const struct ns_gguf_value *arr;
	char key[160];
	uint64_t v;

	snprintf(key, sizeof(key), "%s.%s", am->hp.arch, suffix);
	arr = ns_gguf_get_arr(ns_model_meta(am->m), key);
	if (arr && ns_gguf_vtype_size(arr->v.arr.item_type) && l < arr->v.arr.n) {
		int64_t x = ns_gguf_arr_i64(arr, l);

		return x >= 0 && x <= UINT32_MAX ? (uint32_t)x : 0;
	}
	if (!arr && ns_hparams_get_u64(am->m, am->hp.arch, suffix, &v))
		return v <= UINT32_MAX ? (uint32_t)v : 0;
	return dflt;
}

/* Heads and widths of softmax attention into d; false when they overflow a u32 product. */
static bool s_attn_dims(uint64_t *d, uint32_t n_head, uint32_t n_head_kv, uint32_t dk,
			uint32_t dv)
{
	const uint64_t q = (uint64_t)n_head * dk, o = (uint64_t)n_head * dv;

	d[NS_DIM_HEAD] = n_head;
	d[NS_DIM_HEAD_KV] = n_head_kv;
	d[NS_DIM_DK] = dk;
	d[NS_DIM_DV] = dv;
	d[NS_DIM_Q] = q;
	d[NS_DIM_Q_GATE] = 2 * q;
	d[NS_DIM_K] = (uint64_t)n_head_kv * dk;
	d[NS_DIM_V] = (uint64_t)n_head_kv * dv;
	d[NS_DIM_O] = o;
	return q <= UINT32_MAX && o <= UINT32_MAX;
}

/* What every decoder here needs: layers, width, heads that divide, a norm epsilon (and a
 * dense FFN width when need_ff). */
static int s_decoder(struct ns_arch_model *am, bool need_ff, char *err, size_t errlen)
{
	const struct ns_hparams *hp = &am->hp;

	if (!hp->n_layer || !hp->n_embd || !hp->n_head || !hp->n_head_kv ||
	    (need_ff && !hp->n_ff) || !hp->head_dim_k || !hp->head_dim_v ||
	    hp->n_head % hp->n_head_kv || !(hp->rms_eps > 0) ||
	    !s_attn_dims(am->dim, hp->n_head, hp->n_head_kv, hp->head_dim_k, hp->head_dim_v)) {
		ns_errf(err, errlen, "forward: %s hyperparameters incomplete or inconsistent "
			"(n_layer %u n_embd %u n_head %u n_head_kv %u n_ff %u head_dim %u/%u "
			"rms_eps %g)", hp->arch, hp->n_layer, hp->n_embd, hp->n_head,
			hp->n_head_kv, hp->n_ff, hp->head_dim_k, hp->head_dim_v, hp->rms_eps);
		return -EINVAL;
	}
	if (am->dim[NS_DIM_VOCAB] > UINT32_MAX) {
		ns_errf(err, errlen, "forward: token_embd.weight has too many rows");
		return -EINVAL;
	}
	am->dim[NS_DIM_ONE] = 1;
	am->dim[NS_DIM_EMBD] = hp->n_embd;
	am->dim[NS_DIM_FF] = need_ff ? hp->n_ff : 0;
	return 0;
}

/* RoPE: rotated dimensions that fit a head of dk, a scaling type the passes know. */
static int s_rope(struct ns_arch_model *am, uint32_t dk, char *err, size_t errlen)
{
	const struct ns_hparams *hp = &am->hp;
	const char *type = hp->rope_scaling_type;
	const uint32_t n_dims = hp->rope_dims ? hp->rope_dims : dk;

	if (n_dims % 2 || n_dims > dk) {
		ns_errf(err, errlen, "forward: rope dimension count %u does not fit head size %u",
			n_dims, dk);
		return -EINVAL;
	}
	if (type[0] && strcmp(type, "none") && strcmp(type, "linear") && strcmp(type, "yarn")) {
		ns_errf(err, errlen, "forward: rope scaling type '%s' is not supported (none, "
			"linear, yarn, llama3 rope_freqs)", type);
		return -EINVAL;
	}
	am->dim[NS_DIM_ROPE_PAIRS] = n_dims / 2;
	return 0;
}

/* Routed experts: counts and width (the width from blk.0's gate stack when the key is absent,
 * as llama.cpp), the gating function the architecture's router is, shared experts only where
 * the architecture has them, and the weights' normalisation and scale. */
static int s_moe(struct ns_arch_model *am, char *err, size_t errlen)
{
	const struct ns_hparams *hp = &am->hp;
	const struct ns_model_tensor *g0 = ns_model_find(am->m, "blk.0.ffn_gate_exps.weight");
	const uint64_t want_func = am->arch->router == NS_ROUTER_SOFTMAX ? 1 : 3;
	uint64_t n_ff_exp = hp->n_ff_exp, func, shexp = 0;
	double scale;
	char key[160];
	bool b;

	if (!n_ff_exp && g0) /* expert_feed_forward_length absent: the tensor says */
		n_ff_exp = g0->ne[1];
	if (!hp->n_expert || !hp->n_expert_used || hp->n_expert_used > hp->n_expert ||
	    !n_ff_exp || n_ff_exp > UINT32_MAX || hp->n_expert > INT32_MAX) {
		ns_errf(err, errlen, "forward: %s expert hyperparameters incomplete or "
			"inconsistent (expert_count %u, expert_used_count %u, "
			"expert_feed_forward_length %llu)", hp->arch, hp->n_expert,
			hp->n_expert_used, (unsigned long long)n_ff_exp);
		return -EINVAL;
	}
	if (ns_hparams_get_u64(am->m, hp->arch, "expert_gating_func", &func) &&
	    func != want_func) {
		ns_errf(err, errlen, "forward: %s.expert_gating_func %llu is not supported for %s "
			"(expected %llu)", hp->arch, (unsigned long long)func, hp->arch,
			(unsigned long long)want_func);
		return -EINVAL;
	}
	if (am->arch->flags & NS_ARCH_SHARED_EXPERT) {
		if (!ns_hparams_get_u64(am->m, hp->arch, "expert_shared_feed_forward_length",
					&shexp) || !shexp || shexp > UINT32_MAX) {
			ns_errf(err, errlen, "forward: %s.expert_shared_feed_forward_length is "
				"missing or zero", hp->arch);
			return -EINVAL;
		}
	} else if (hp->n_expert_shared) {
		ns_errf(err, errlen, "forward: %s with %u shared experts is not supported",
			hp->arch, hp->n_expert_shared);
		return -EINVAL;
	}
	am->dim[NS_DIM_EXPERT] = hp->n_expert;
	am->dim[NS_DIM_FF_EXP] = n_ff_exp;
	am->dim[NS_DIM_FF_SHEXP] = shexp;
	am->moe_norm_w = am->arch->router == NS_ROUTER_SOFTMAX;
	snprintf(key, sizeof(key), "%s.expert_weights_norm", hp->arch);
	if (ns_gguf_get_bool(ns_model_meta(am->m), key, &b))
		am->moe_norm_w = b;
	am->moe_w_scale = 1.0f;
	if (ns_hparams_get_f64(am->m, hp->arch, "expert_weights_scale", &scale) && scale != 0.0)
		am->moe_w_scale = (float)scale;
	return 0;
}

/* Sliding windows without a per-layer pattern: layer l slides when l % period < period - 1
 * (llama.cpp's pattern; period from attention.sliding_window_pattern, else the
 * architecture's; 0: every layer). */
static int s_swa_period(struct ns_arch_model *am, char *err, size_t errlen)
{
	uint64_t period = am->arch->swa_period;

	if (!am->hp.sliding_window) {
		ns_errf(err, errlen, "forward: %s.attention.sliding_window is missing",
			am->hp.arch);
		return -EINVAL;
	}
	ns_hparams_get_u64(am->m, am->hp.arch, "attention.sliding_window_pattern", &period);
	for (uint32_t l = 0; l < am->n_layer; l++) {
		if (period == 0 || l % period < period - 1) {
			am->layer[l].window = am->hp.sliding_window;
			am->layer[l].kinds |= NS_LAYER_SWA;
		}
	}
	return 0;
}

/* llama, qwen3, qwen3moe, gpt-oss, qwen3vl(moe): uniform layers of attention and a dense or
 * MoE FFN, sliding windows by a period where the architecture has them. */
int ns_arch_rules_llama(struct ns_arch_model *am, char *err, size_t errlen)
{
	const bool moe = am->arch->flags & NS_ARCH_MOE;
	int rc;

	if (am->hp.n_expert > 0 && !moe) {
		ns_errf(err, errlen, "forward: %s with %u experts (MoE) is not supported here",
			am->hp.arch, am->hp.n_expert);
		return -EINVAL;
	}
	if ((rc = s_decoder(am, !moe, err, errlen)) ||
	    (rc = s_rope(am, am->hp.head_dim_k, err, errlen)) ||
	    (moe && (rc = s_moe(am, err, errlen))))
		return rc;
	ns_arch_layers_from_model(am, NS_LAYER_ATTN | (moe ? NS_LAYER_MOE : NS_LAYER_DENSE));
	if (am->arch->flags & NS_ARCH_SWA)
		return s_swa_period(am, err, errlen);
	return 0;
}

/* qwen35, qwen35moe: every full_attention_interval-th layer (default 4) full attention, the
 * others Gated DeltaNet: q and k heads (group_count of state_size), value heads
 * (time_step_rank of inner_size / time_step_rank), all through one causal conv. */
int ns_arch_rules_qwen35(struct ns_arch_model *am, char *err, size_t errlen)
{
	const struct ns_hparams *hp = &am->hp;
	const bool moe = am->arch->flags & NS_ARCH_MOE;
	const uint32_t conv = s_layer_u32(am, "ssm.conv_kernel", 0, 0);
	const uint32_t state = s_layer_u32(am, "ssm.state_size", 0, 0);
	const uint32_t groups = s_layer_u32(am, "ssm.group_count", 0, 0);
	const uint32_t heads = s_layer_u32(am, "ssm.time_step_rank", 0, 0);
	const uint32_t inner = s_layer_u32(am, "ssm.inner_size", 0, 0);
	const uint32_t every = s_layer_u32(am, "full_attention_interval", 0, 4);
	int rc;

	if ((rc = s_decoder(am, !moe, err, errlen)) ||
	    (rc = s_rope(am, hp->head_dim_k, err, errlen)) ||
	    (moe && (rc = s_moe(am, err, errlen))))
		return rc;
	if (!conv || !state || !groups || !heads || !inner || inner % heads || !every) {
		ns_errf(err, errlen, "forward: %s linear-attention hyperparameters incomplete or "
			"inconsistent (ssm.conv_kernel %u state_size %u group_count %u "
			"time_step_rank %u inner_size %u, full_attention_interval %u)", hp->arch,
			conv, state, groups, heads, inner, every);
		return -EINVAL;
	}
	am->dim[NS_DIM_SSM_CONV] = conv;
	am->dim[NS_DIM_SSM_INNER] = inner;
	am->dim[NS_DIM_SSM_HEADS] = heads;
	am->dim[NS_DIM_SSM_DV] = inner / heads;
	am->dim[NS_DIM_SSM_CH] = (uint64_t)inner + 2ull * groups * state;
	ns_arch_layers_from_model(am, moe ? NS_LAYER_MOE | NS_LAYER_SHEXP : NS_LAYER_DENSE);
	for (uint32_t l = 0; l < am->n_layer; l++)
		am->layer[l].kinds |= (l + 1) % every == 0 ? NS_LAYER_ATTN : NS_LAYER_RECURRENT;
	return 0;
}

/* Is layer l a sliding one? attention.sliding_window_pattern as one bool per layer (gemma4),
 * else a period (the key's, else the architecture's). */
static bool s_gemma_slides(const struct ns_arch_model *am, uint32_t l)
{
	const struct ns_gguf_value *arr;
	char key[160];
	uint64_t period = am->arch->swa_period;

	snprintf(key, sizeof(key), "%s.attention.sliding_window_pattern", am->hp.arch);
	arr = ns_gguf_get_arr(ns_model_meta(am->m), key);
	if (arr && arr->v.arr.item_type == NS_GGUF_BOOL)
		return l < arr->v.arr.n && ns_gguf_arr_i64(arr, l) != 0;
	ns_hparams_get_u64(am->m, am->hp.arch, "attention.sliding_window_pattern", &period);
	return period == 0 || l % period < period - 1;
}

/* Does layer l have tensor blk.l.<name>? */
static bool s_layer_has(const struct ns_arch_model *am, uint32_t l, const char *name)
{
	char full[160];

	snprintf(full, sizeof(full), "blk.%u.%s", l, name);
	return ns_model_find(am->m, full) != NULL;
}

/* gemma4 26B-A4B: the experts' counts and width as every MoE architecture (s_moe; the width
 * also from blk.0's stacked gate_up when the key is absent), weights renormalised and never
 * scaled: llama.cpp's gemma4 graph passes norm_w true and w_scale 1 whatever the keys say. */
static int s_gemma_moe(struct ns_arch_model *am, char *err, size_t errlen)
{
	const struct ns_model_tensor *gu = ns_model_find(am->m, "blk.0.ffn_gate_up_exps.weight");
	int rc;

	if (!am->hp.n_ff_exp && gu && gu->ne[1] % 2 == 0)
		am->hp.n_ff_exp = (uint32_t)(gu->ne[1] / 2);
	if ((rc = s_moe(am, err, errlen)))
		return rc;
	am->dim[NS_DIM_FF_EXP2] = 2 * am->dim[NS_DIM_FF_EXP];
	am->moe_norm_w = true;
	am->moe_w_scale = 1.0f;
	return 0;
}

/* gemma3, gemma4: sliding and global layers with their own head geometry (gemma4: *_swa keys,
 * per-layer head_count_kv and feed_forward_length arrays), the last shared_kv_layers layers
 * on earlier layers' K/V, per-layer inputs of embedding_length_per_layer_input. */
int ns_arch_rules_gemma(struct ns_arch_model *am, char *err, size_t errlen)
{
	const struct ns_hparams *hp = &am->hp;
	const uint32_t ple = s_layer_u32(am, "embedding_length_per_layer_input", 0, 0);
	const uint32_t shared = s_layer_u32(am, "attention.shared_kv_layers", 0, 0);
	int rc;

	if (hp->n_expert > 0 && strcmp(hp->arch, "gemma4")) {
		ns_errf(err, errlen, "forward: %s with %u experts (mixture of experts) is not "
			"supported", hp->arch, hp->n_expert);
		return -EINVAL;
	}
	if ((rc = s_decoder(am, true, err, errlen)) ||
	    (rc = s_rope(am, hp->head_dim_k, err, errlen)) ||
	    (hp->n_expert > 0 && (rc = s_gemma_moe(am, err, errlen))))
		return rc;
	if (!hp->sliding_window || shared > hp->n_layer ||
	    (uint64_t)ple * hp->n_layer > UINT32_MAX) {
		ns_errf(err, errlen, "forward: %s sliding_window %u, shared_kv_layers %u or "
			"embedding_length_per_layer_input %u missing or inconsistent", hp->arch,
			hp->sliding_window, shared, ple);
		return -EINVAL;
	}
	am->dim[NS_DIM_PLE] = ple;
	am->dim[NS_DIM_PLE_ALL] = (uint64_t)ple * hp->n_layer;
	ns_arch_layers_from_model(am, NS_LAYER_ATTN | NS_LAYER_DENSE | (ple ? NS_LAYER_PLE : 0));
	for (uint32_t l = 0; l < am->n_layer; l++) {
		struct ns_arch_layer *y = &am->layer[l];
		const bool swa = s_gemma_slides(am, l);
		const uint32_t kv = s_layer_u32(am, "attention.head_count_kv", l, hp->n_head_kv);
		const uint32_t dk = swa ? s_layer_u32(am, "attention.key_length_swa", 0,
						       hp->head_dim_k) : hp->head_dim_k;
		const uint32_t dv = swa ? s_layer_u32(am, "attention.value_length_swa", 0,
						       hp->head_dim_v) : hp->head_dim_v;

		y->dim[NS_DIM_FF] = s_layer_u32(am, "feed_forward_length", l, hp->n_ff);
		if (!kv || !dk || !dv || hp->n_head % kv || !y->dim[NS_DIM_FF] ||
		    !s_attn_dims(y->dim, hp->n_head, kv, dk, dv)) {
			ns_errf(err, errlen, "forward: %s layer %u: head_count_kv %u, head size "
				"%u/%u or feed_forward_length %llu inconsistent", hp->arch, l, kv,
				dk, dv, (unsigned long long)y->dim[NS_DIM_FF]);
			return -EINVAL;
		}
		if (swa) {
			y->kinds |= NS_LAYER_SWA;
			y->window = hp->sliding_window;
		}
		if (l >= hp->n_layer - shared)
			y->kinds |= NS_LAYER_KV_SHARED;
		if (hp->n_expert > 0 && s_layer_has(am, l, "ffn_gate_inp.weight")) {
			y->kinds |= NS_LAYER_MOE;
			if (!s_layer_has(am, l, "ffn_gate_up_exps.weight") &&
			    !(s_layer_has(am, l, "ffn_gate_exps.weight") &&
			      s_layer_has(am, l, "ffn_up_exps.weight"))) {
				ns_errf(err, errlen, "forward: %s layer %u has a router but neither "
					"ffn_gate_up_exps nor ffn_gate_exps and ffn_up_exps", hp->arch,
					l);
				return -EINVAL;
			}
		}
	}
	return 0;
}
