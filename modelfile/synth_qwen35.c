/* synth_qwen35.c - Qwen3.5's hybrid Gated DeltaNet models for the generator (synth.c). */
#include <stdio.h>

#include "ggml_type.h"
#include "synth_internal.h"

/* Qwen3.5-4B, -35B-A3B, -397B-A17B: all three have linear_conv_kernel_dim 4, 16 key heads of
 * 128, value heads of 128, full_attention_interval 4, head_dim 256 with partial_rotary_factor
 * 0.25 (64 rotary dims) and mrope_section [11, 11, 10] (see s_presets for the sources). */
const struct hybrid ns_synth_q35_4b = { 4, 16, 32, 128, 128, 4, 64, { 11, 11, 10, 0 }, 0 };
const struct hybrid ns_synth_q35_35b = { 4, 16, 32, 128, 128, 4, 64, { 11, 11, 10, 0 }, 512 };
const struct hybrid ns_synth_q35_397b = { 4, 16, 64, 128, 128, 4, 64, { 11, 11, 10, 0 }, 1024 };
/* ../shared/oracle/tiny/tiny-qwen35*.gguf's: 2 key / 4 value heads of 64, 16 rotary dims in
 * sections [3, 3, 2], shared expert 256 */
const struct hybrid ns_synth_q35_tiny = { 4, 2, 4, 64, 64, 4, 16, { 3, 3, 2, 0 }, 256 };

/* A matrix llama.cpp never quantizes (the router, ssm_conv1d, ffn_gate_inp_shexp): F32. */
#define ADD_F32(nd, a, b, c, fmt, ...)                                                      \
	do {                                                                                \
		char nm_[96];                                                               \
		snprintf(nm_, sizeof(nm_), fmt, __VA_ARGS__);                               \
		if ((ret = ns_synth_add(pl, nm_, ROLE_MATRIX, NS_TYPE_F32, nd, a, b, c))) \
			return ret;                                                         \
	} while (0)

/* The gated full-attention mixer of layer l (attn_q projects [q, gate] per head). */
static int s_full_attn(struct plan *pl, uint32_t l, int more)
{
	const struct preset *p = pl->p;
	uint64_t E = p->n_embd, hd = p->head_dim;
	uint64_t q_out = (uint64_t)p->n_head * hd, kv_out = (uint64_t)p->n_head_kv * hd;
	int ret;

	ADD(ROLE_MATRIX, 0, 2, E, 2 * q_out, 1, "blk.%u.attn_q.weight", l); /* q, gate */
	ADD(ROLE_MATRIX, 0, 2, E, kv_out, 1, "blk.%u.attn_k.weight", l);
	ADD(ROLE_MATRIX, more, 2, E, kv_out, 1, "blk.%u.attn_v.weight", l);
	ADD(ROLE_MATRIX, 0, 2, q_out, E, 1, "blk.%u.attn_output.weight", l);
	ADD(ROLE_NORM, 0, 1, hd, 1, 1, "blk.%u.attn_q_norm.weight", l);
	ADD(ROLE_NORM, 0, 1, hd, 1, 1, "blk.%u.attn_k_norm.weight", l);
	return 0;
}

/* Layer l's FFN: dense SwiGLU, or the routed experts and the gated shared expert. */
static int s_ffn(struct plan *pl, uint32_t l, int more)
{
	const struct preset *p = pl->p;
	uint64_t E = p->n_embd;
	int ret;

	if (p->n_expert) {
		uint64_t F = p->n_ff_exp, X = p->n_expert, S = p->hy->n_ff_shexp;

		ADD_F32(2, E, X, 1, "blk.%u.ffn_gate_inp.weight", l);
		ADD(ROLE_MATRIX, 3, 3, E, F, X, "blk.%u.ffn_gate_exps.weight", l);
		ADD(ROLE_MATRIX, 3, 3, E, F, X, "blk.%u.ffn_up_exps.weight", l);
		ADD(ROLE_MATRIX, more, 3, F, E, X, "blk.%u.ffn_down_exps.weight", l);
		ADD_F32(1, E, 1, 1, "blk.%u.ffn_gate_inp_shexp.weight", l);
		ADD(ROLE_MATRIX, 0, 2, E, S, 1, "blk.%u.ffn_gate_shexp.weight", l);
		ADD(ROLE_MATRIX, 0, 2, E, S, 1, "blk.%u.ffn_up_shexp.weight", l);
		ADD(ROLE_MATRIX, more, 2, S, E, 1, "blk.%u.ffn_down_shexp.weight", l);
	} else {
		ADD(ROLE_MATRIX, 0, 2, E, p->n_ff, 1, "blk.%u.ffn_gate.weight", l);
		ADD(ROLE_MATRIX, 0, 2, E, p->n_ff, 1, "blk.%u.ffn_up.weight", l);
		ADD(ROLE_MATRIX, more, 2, p->n_ff, E, 1, "blk.%u.ffn_down.weight", l);
	}
	return 0;
}

/* qwen35, qwen35moe as llama.cpp's converter writes them (conversion/qwen.py; the names and
 * shapes of ../shared/oracle/tiny/tiny-qwen35*.gguf). Without --mtp: block_count = the main
 * layers and no nextn_predict_layers (the converter's --no-mtp). With it: the checkpoint's one
 * MTP block (mtp_num_hidden_layers 1 in the published Qwen3.5 configs) as block n_layer, the
 * names _QwenMtpMixin gives it: a full-attention layer and its FFN (MoE in qwen35moe) plus
 * nextn.eh_proj [2 E, E], nextn.enorm / hnorm / shared_head_norm (no embed_tokens or
 * shared_head_head: Qwen3.5 shares the trunk's; llama.cpp falls back to token_embd and
 * output). Types: llama-quantize Q4_K_M (llama-quant.cpp) counts attn_qkv with attn_v
 * ("attn_v-like", Q6_K where use_more_bits, by layer as there is one per layer) and
 * ffn_down_exps/_shexp with ffn_down (by the layer in the name); attn_gate, ssm_alpha/beta/out,
 * experts and the shared expert's gate/up take the base type; ssm_conv1d, the router and 1-D
 * tensors stay F32; a tied token_embd takes output's Q6_K. The MTP block's matrices take the
 * base type (not checked against llama-quantize). */
int ns_synth_plan_qwen35(struct plan *pl)
{
	const struct preset *p = pl->p;
	const struct hybrid *h = p->hy;
	uint64_t E = p->n_embd, V = p->n_vocab;
	uint64_t inner = (uint64_t)h->v_heads * h->v_dim;
	uint64_t qkv = 2ull * h->k_heads * h->k_dim + inner;
	int ret;

	ADD(ROLE_MATRIX, p->tied ? 2 : 4, 2, E, V, 1, "%s", "token_embd.weight");
	ADD(ROLE_NORM, 0, 1, E, 1, 1, "%s", "output_norm.weight");
	if (!p->tied)
		ADD(ROLE_MATRIX, 2, 2, E, V, 1, "%s", "output.weight");
	for (uint32_t l = 0; l < pl->n_layer; l++) {
		int more = ns_synth_more_bits(l, pl->n_layer) ? 1 : 0;

		ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.attn_norm.weight", l);
		ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.post_attention_norm.weight", l);
		if ((l + 1) % h->full_attn_interval) {
			ADD(ROLE_MATRIX, more, 2, E, qkv, 1, "blk.%u.attn_qkv.weight", l);
			ADD(ROLE_MATRIX, 0, 2, E, inner, 1, "blk.%u.attn_gate.weight", l);
			ADD_F32(2, h->conv_kernel, qkv, 1, "blk.%u.ssm_conv1d.weight", l);
			ADD(ROLE_BIAS, 0, 1, h->v_heads, 1, 1, "blk.%u.ssm_dt.bias", l);
			ADD(ROLE_DECAY, 0, 1, h->v_heads, 1, 1, "blk.%u.ssm_a", l);
			ADD(ROLE_MATRIX, 0, 2, E, h->v_heads, 1, "blk.%u.ssm_beta.weight", l);
			ADD(ROLE_MATRIX, 0, 2, E, h->v_heads, 1, "blk.%u.ssm_alpha.weight", l);
			ADD(ROLE_NORM, 0, 1, h->v_dim, 1, 1, "blk.%u.ssm_norm.weight", l);
			ADD(ROLE_MATRIX, 0, 2, inner, E, 1, "blk.%u.ssm_out.weight", l);
		} else if ((ret = s_full_attn(pl, l, more))) {
			return ret;
		}
		if ((ret = s_ffn(pl, l, more)))
			return ret;
	}
	if (pl->mtp) {
		uint32_t l = pl->n_layer;

		ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.attn_norm.weight", l);
		ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.post_attention_norm.weight", l);
		if ((ret = s_full_attn(pl, l, 0)) || (ret = s_ffn(pl, l, 0)))
			return ret;
		ADD(ROLE_MATRIX, 0, 2, 2 * E, E, 1, "blk.%u.nextn.eh_proj.weight", l);
		ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.nextn.enorm.weight", l);
		ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.nextn.hnorm.weight", l);
		ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.nextn.shared_head_norm.weight", l);
	}
	return 0;
}

/* The keys convert_hf_to_gguf.py adds for Qwen3.5 (Qwen3NextModel, _Qwen35MRopeMixin). */
int ns_synth_qwen35_meta(struct ns_gguf_writer *w, const struct preset *p)
{
	const struct hybrid *h = p->hy;
	char key[128];
	int ret;

#define KEY(suffix) (snprintf(key, sizeof(key), "%s.%s", p->arch, suffix), key)
	if ((ret = ns_gguf_writer_set_arr(w, KEY("rope.dimension_sections"), 5 /* I32 */, h->mrope,
					  4)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("rope.dimension_count"), h->rope_dims)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), h->conv_kernel)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("ssm.state_size"), h->k_dim)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("ssm.group_count"), h->k_heads)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), h->v_heads)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("ssm.inner_size"), h->v_heads * h->v_dim)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("full_attention_interval"),
					  h->full_attn_interval)))
		return ret;
	if (p->n_expert &&
	    (ret = ns_gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"),
					  h->n_ff_shexp)))
		return ret;
#undef KEY
	return 0;
}
