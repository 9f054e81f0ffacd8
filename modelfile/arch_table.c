/* arch_table.c - the architecture table: tensor slots, named dimensions, and per
 * architecture its flags, rules and the reads of one token in consumption order (arch.h).
 *
 * The list of architectures is written here once: the check of nsctl, the forward passes,
 * nsio's run-ahead, nsplan's roles and nsrouter's expert order all read it. Entries without a
 * builder are described (info, plan) but not computed; their reads follow llama.cpp's
 * builders and are checked against the oracle's files of each (tests/model/test_arch.c). */
#include <stdio.h>
#include <string.h>

#include "arch_internal.h"
#include "ns_util.h"

static const struct ns_slot_info s_slots[NS_SLOT_COUNT] = {
	[NS_T_TOKEN_EMBD] = { "token_embd.weight", false },
	[NS_T_PER_LAYER_TOKEN_EMBD] = { "per_layer_token_embd.weight", false },
	[NS_T_PER_LAYER_MODEL_PROJ] = { "per_layer_model_proj.weight", false },
	[NS_T_PER_LAYER_PROJ_NORM] = { "per_layer_proj_norm.weight", false },
	[NS_T_ROPE_FREQS] = { "rope_freqs.weight", false },
	[NS_T_OUTPUT_NORM] = { "output_norm.weight", false },
	[NS_T_OUTPUT] = { "output.weight", false },
	[NS_T_ATTN_NORM] = { "attn_norm.weight", true },
	[NS_T_ATTN_Q] = { "attn_q.weight", true },
	[NS_T_ATTN_Q_B] = { "attn_q.bias", true },
	[NS_T_ATTN_K] = { "attn_k.weight", true },
	[NS_T_ATTN_K_B] = { "attn_k.bias", true },
	[NS_T_ATTN_V] = { "attn_v.weight", true },
	[NS_T_ATTN_V_B] = { "attn_v.bias", true },
	[NS_T_ATTN_Q_NORM] = { "attn_q_norm.weight", true },
	[NS_T_ATTN_K_NORM] = { "attn_k_norm.weight", true },
	[NS_T_ATTN_SINKS] = { "attn_sinks.weight", true },
	[NS_T_ATTN_OUT] = { "attn_output.weight", true },
	[NS_T_ATTN_OUT_B] = { "attn_output.bias", true },
	[NS_T_ATTN_POST_NORM] = { "post_attention_norm.weight", true },
	[NS_T_ATTN_QKV] = { "attn_qkv.weight", true },
	[NS_T_ATTN_GATE] = { "attn_gate.weight", true },
	[NS_T_SSM_CONV1D] = { "ssm_conv1d.weight", true },
	[NS_T_SSM_DT_B] = { "ssm_dt.bias", true },
	[NS_T_SSM_A] = { "ssm_a", true },
	[NS_T_SSM_BETA] = { "ssm_beta.weight", true },
	[NS_T_SSM_ALPHA] = { "ssm_alpha.weight", true },
	[NS_T_SSM_NORM] = { "ssm_norm.weight", true },
	[NS_T_SSM_OUT] = { "ssm_out.weight", true },
	[NS_T_FFN_NORM] = { "ffn_norm.weight", true },
	[NS_T_FFN_GATE] = { "ffn_gate.weight", true },
	[NS_T_FFN_UP] = { "ffn_up.weight", true },
	[NS_T_FFN_DOWN] = { "ffn_down.weight", true },
	[NS_T_FFN_POST_NORM] = { "post_ffw_norm.weight", true },
	[NS_T_FFN_GATE_INP] = { "ffn_gate_inp.weight", true },
	[NS_T_FFN_GATE_INP_B] = { "ffn_gate_inp.bias", true },
	[NS_T_FFN_GATE_EXPS] = { "ffn_gate_exps.weight", true },
	[NS_T_FFN_GATE_EXPS_B] = { "ffn_gate_exps.bias", true },
	[NS_T_FFN_UP_EXPS] = { "ffn_up_exps.weight", true },
	[NS_T_FFN_UP_EXPS_B] = { "ffn_up_exps.bias", true },
	[NS_T_FFN_DOWN_EXPS] = { "ffn_down_exps.weight", true },
	[NS_T_FFN_DOWN_EXPS_B] = { "ffn_down_exps.bias", true },
	[NS_T_FFN_GATE_INP_SHEXP] = { "ffn_gate_inp_shexp.weight", true },
	[NS_T_FFN_GATE_SHEXP] = { "ffn_gate_shexp.weight", true },
	[NS_T_FFN_UP_SHEXP] = { "ffn_up_shexp.weight", true },
	[NS_T_FFN_DOWN_SHEXP] = { "ffn_down_shexp.weight", true },
	[NS_T_PLE_INP_GATE] = { "inp_gate.weight", true },
	[NS_T_PLE_PROJ] = { "proj.weight", true },
	[NS_T_PLE_POST_NORM] = { "post_norm.weight", true },
	[NS_T_LAYER_OUT_SCALE] = { "layer_output_scale.weight", true },
	[NS_T_FFN_POST_NORM_1] = { "post_ffw_norm_1.weight", true },
	[NS_T_FFN_PRE_NORM_2] = { "pre_ffw_norm_2.weight", true },
	[NS_T_FFN_GATE_INP_SCALE] = { "ffn_gate_inp.scale", true },
	[NS_T_FFN_GATE_UP_EXPS] = { "ffn_gate_up_exps.weight", true },
	[NS_T_FFN_DOWN_EXPS_SCALE] = { "ffn_down_exps.scale", true },
	[NS_T_FFN_POST_NORM_2] = { "post_ffw_norm_2.weight", true },
};

const struct ns_slot_info *ns_slot_info(unsigned slot)
{
	return slot < NS_SLOT_COUNT ? &s_slots[slot] : NULL;
}

static const char *const s_dim_names[NS_DIM_COUNT] = {
	[NS_DIM_END] = "-", [NS_DIM_ONE] = "1", [NS_DIM_EMBD] = "n_embd",
	[NS_DIM_VOCAB] = "n_vocab", [NS_DIM_HEAD] = "n_head", [NS_DIM_HEAD_KV] = "n_head_kv",
	[NS_DIM_DK] = "head_dim", [NS_DIM_DV] = "head_dim_v",
	[NS_DIM_Q] = "n_head*head_dim", [NS_DIM_Q_GATE] = "2*n_head*head_dim",
	[NS_DIM_K] = "n_head_kv*head_dim", [NS_DIM_V] = "n_head_kv*head_dim_v",
	[NS_DIM_O] = "n_head*head_dim_v", [NS_DIM_FF] = "n_ff", [NS_DIM_EXPERT] = "n_expert",
	[NS_DIM_FF_EXP] = "n_ff_exp", [NS_DIM_FF_SHEXP] = "n_ff_shexp",
	[NS_DIM_ROPE_PAIRS] = "rope_dims/2", [NS_DIM_SSM_CONV] = "ssm_conv_kernel",
	[NS_DIM_SSM_CH] = "ssm_channels", [NS_DIM_SSM_INNER] = "ssm_inner",
	[NS_DIM_SSM_HEADS] = "ssm_heads", [NS_DIM_SSM_DV] = "ssm_head_dim",
	[NS_DIM_PLE] = "n_embd_per_layer", [NS_DIM_PLE_ALL] = "n_layer*n_embd_per_layer",
	[NS_DIM_FF_EXP2] = "2*n_ff_exp",
};

const char *ns_dim_name(unsigned dim)
{
	return dim < NS_DIM_COUNT ? s_dim_names[dim] : "?";
}

static const char *const s_role_names[NS_ROLE_COUNT] = {
	[NS_ROLE_UNUSED] = "unused", [NS_ROLE_HELD] = "held", [NS_ROLE_MATRIX] = "matrix",
	[NS_ROLE_EXPERT] = "expert", [NS_ROLE_ROWS] = "rows", [NS_ROLE_ROWS_MATRIX] = "rows+matrix",
};

const char *ns_role_name(unsigned role)
{
	return role < NS_ROLE_COUNT ? s_role_names[role] : "?";
}

/* ---------------------------------------------------------------- reads ---------------- */

/* One read: slot, role, need, layer kinds on / off, shape. */
#define R(slot, role, need, on, off, ...)                                                     \
	{ NS_T_##slot, NS_ROLE_##role, NS_NEED_##need, on, off, { __VA_ARGS__ } }
#define D(x) NS_DIM_##x
#define ATTN NS_LAYER_ATTN
#define SHARED_KV NS_LAYER_KV_SHARED /* as `off`: only layers with K/V of their own */
#define REC NS_LAYER_RECURRENT
#define DENSE NS_LAYER_DENSE
#define MOE NS_LAYER_MOE
#define SHEXP NS_LAYER_SHEXP
#define PLE NS_LAYER_PLE

/* What every decoder here reads first and last. */
#define S_INPUT R(TOKEN_EMBD, ROWS, REQUIRED, 0, 0, D(EMBD), D(VOCAB)), \
		R(ROPE_FREQS, HELD, OPTIONAL, 0, 0, D(ROPE_PAIRS))
#define S_OUTPUT R(OUTPUT_NORM, HELD, REQUIRED, 0, 0, D(EMBD)), \
		 R(OUTPUT, MATRIX, OR_EMBD, 0, 0, D(EMBD), D(VOCAB))

/* Softmax attention with optional biases, as llama.c consumes it: q, k, v (their biases),
 * then the output projection. */
#define S_ATTN_QKV R(ATTN_NORM, HELD, REQUIRED, 0, 0, D(EMBD)), \
		   R(ATTN_Q, MATRIX, REQUIRED, ATTN, 0, D(EMBD), D(Q)), \
		   R(ATTN_Q_B, HELD, OPTIONAL, ATTN, 0, D(Q)), \
		   R(ATTN_K, MATRIX, REQUIRED, ATTN, SHARED_KV, D(EMBD), D(K)), \
		   R(ATTN_K_B, HELD, OPTIONAL, ATTN, SHARED_KV, D(K)), \
		   R(ATTN_V, MATRIX, REQUIRED, ATTN, SHARED_KV, D(EMBD), D(V)), \
		   R(ATTN_V_B, HELD, OPTIONAL, ATTN, SHARED_KV, D(V))
#define S_QK_NORM R(ATTN_Q_NORM, HELD, REQUIRED, ATTN, 0, D(DK)), \
		  R(ATTN_K_NORM, HELD, REQUIRED, ATTN, SHARED_KV, D(DK))
#define S_ATTN_OUT R(ATTN_OUT, MATRIX, REQUIRED, ATTN, 0, D(O), D(EMBD)), \
		   R(ATTN_OUT_B, HELD, OPTIONAL, ATTN, 0, D(EMBD))

/* Gated FFN: phase 1 gate and up by neuron, phase 2 down. */
#define S_FFN_DENSE R(FFN_GATE, MATRIX, REQUIRED, DENSE, 0, D(EMBD), D(FF)), \
		    R(FFN_UP, MATRIX, REQUIRED, DENSE, 0, D(EMBD), D(FF)), \
		    R(FFN_DOWN, MATRIX, REQUIRED, DENSE, 0, D(FF), D(EMBD))

/* Routed experts: the router, then per chosen expert gate, up, down (moe.c). */
#define S_FFN_MOE R(FFN_GATE_INP, MATRIX, REQUIRED, MOE, 0, D(EMBD), D(EXPERT)), \
		  R(FFN_GATE_INP_B, HELD, OPTIONAL, MOE, 0, D(EXPERT)), \
		  R(FFN_GATE_EXPS, EXPERT, REQUIRED, MOE, 0, D(EMBD), D(FF_EXP), D(EXPERT)), \
		  R(FFN_GATE_EXPS_B, HELD, OPTIONAL, MOE, 0, D(FF_EXP), D(EXPERT)), \
		  R(FFN_UP_EXPS, EXPERT, REQUIRED, MOE, 0, D(EMBD), D(FF_EXP), D(EXPERT)), \
		  R(FFN_UP_EXPS_B, HELD, OPTIONAL, MOE, 0, D(FF_EXP), D(EXPERT)), \
		  R(FFN_DOWN_EXPS, EXPERT, REQUIRED, MOE, 0, D(FF_EXP), D(EMBD), D(EXPERT)), \
		  R(FFN_DOWN_EXPS_B, HELD, OPTIONAL, MOE, 0, D(EMBD), D(EXPERT))

/* The shared expert after the routed ones, gated by sigmoid(gate_inp_shexp . x). */
#define S_FFN_SHEXP R(FFN_GATE_INP_SHEXP, HELD, REQUIRED, SHEXP, 0, D(EMBD)), \
		    R(FFN_GATE_SHEXP, MATRIX, REQUIRED, SHEXP, 0, D(EMBD), D(FF_SHEXP)), \
		    R(FFN_UP_SHEXP, MATRIX, REQUIRED, SHEXP, 0, D(EMBD), D(FF_SHEXP)), \
		    R(FFN_DOWN_SHEXP, MATRIX, REQUIRED, SHEXP, 0, D(FF_SHEXP), D(EMBD))

static const struct ns_arch_read s_llama[] = {
	S_INPUT,
	S_ATTN_QKV, S_ATTN_OUT,
	R(FFN_NORM, HELD, REQUIRED, 0, 0, D(EMBD)),
	S_FFN_DENSE,
	S_OUTPUT,
};

static const struct ns_arch_read s_qwen3[] = {
	S_INPUT,
	S_ATTN_QKV, S_QK_NORM, S_ATTN_OUT,
	R(FFN_NORM, HELD, REQUIRED, 0, 0, D(EMBD)),
	S_FFN_DENSE,
	S_OUTPUT,
};

static const struct ns_arch_read s_qwen3moe[] = {
	S_INPUT,
	S_ATTN_QKV, S_QK_NORM, S_ATTN_OUT,
	R(FFN_NORM, HELD, REQUIRED, 0, 0, D(EMBD)),
	S_FFN_MOE,
	S_OUTPUT,
};

/* gpt-oss: sinks in the softmax; the FFN's norm is named post_attention_norm. */
static const struct ns_arch_read s_gptoss[] = {
	S_INPUT,
	S_ATTN_QKV,
	R(ATTN_SINKS, HELD, REQUIRED, ATTN, 0, D(HEAD)),
	S_ATTN_OUT,
	R(ATTN_POST_NORM, HELD, REQUIRED, 0, 0, D(EMBD)),
	S_FFN_MOE,
	S_OUTPUT,
};

/* Qwen3.5: three of four layers Gated DeltaNet (qkv through a causal conv, beta and alpha
 * per value head, gated output), the fourth gated full attention (q and its gate in one
 * matrix); post_attention_norm before the FFN; dense, or experts plus a shared expert. */
#define S_QWEN35_MIXER \
	R(ATTN_NORM, HELD, REQUIRED, 0, 0, D(EMBD)), \
	R(ATTN_QKV, MATRIX, REQUIRED, REC, 0, D(EMBD), D(SSM_CH)), \
	R(ATTN_GATE, MATRIX, REQUIRED, REC, 0, D(EMBD), D(SSM_INNER)), \
	R(SSM_BETA, MATRIX, REQUIRED, REC, 0, D(EMBD), D(SSM_HEADS)), \
	R(SSM_ALPHA, MATRIX, REQUIRED, REC, 0, D(EMBD), D(SSM_HEADS)), \
	R(SSM_CONV1D, HELD, REQUIRED, REC, 0, D(SSM_CONV), D(SSM_CH)), \
	R(SSM_DT_B, HELD, REQUIRED, REC, 0, D(SSM_HEADS)), \
	R(SSM_A, HELD, REQUIRED, REC, 0, D(SSM_HEADS)), \
	R(SSM_NORM, HELD, REQUIRED, REC, 0, D(SSM_DV)), \
	R(SSM_OUT, MATRIX, REQUIRED, REC, 0, D(SSM_INNER), D(EMBD)), \
	R(ATTN_Q, MATRIX, REQUIRED, ATTN, 0, D(EMBD), D(Q_GATE)), \
	R(ATTN_K, MATRIX, REQUIRED, ATTN, 0, D(EMBD), D(K)), \
	R(ATTN_V, MATRIX, REQUIRED, ATTN, 0, D(EMBD), D(V)), \
	S_QK_NORM, \
	R(ATTN_OUT, MATRIX, REQUIRED, ATTN, 0, D(O), D(EMBD)), \
	R(ATTN_POST_NORM, HELD, REQUIRED, 0, 0, D(EMBD))

static const struct ns_arch_read s_qwen35[] = {
	S_INPUT, S_QWEN35_MIXER, S_FFN_DENSE, S_OUTPUT,
};

static const struct ns_arch_read s_qwen35moe[] = {
	S_INPUT, S_QWEN35_MIXER, S_FFN_MOE, S_FFN_SHEXP, S_OUTPUT,
};

/* Gemma 3/4: sandwich norms around attention and FFN; gemma4 adds per-layer inputs (a table
 * read by token id, projected per layer), layers on an earlier layer's K/V, a V that is K
 * where attn_v is absent, and a scale on each layer's output. gemma4's MoE layers (26B-A4B,
 * llama.cpp src/models/gemma4.cpp) keep the dense FFN as a shared expert, read first, then
 * the router and the routed experts (gate and up stacked in one tensor as the converter
 * writes them, or apart; the rules require one of the two), each branch with its own norms
 * before the sum's post_ffw_norm. */
#define S_GEMMA_LAYER \
	R(TOKEN_EMBD, ROWS, REQUIRED, 0, 0, D(EMBD), D(VOCAB)), \
	R(PER_LAYER_TOKEN_EMBD, ROWS, REQUIRED, PLE, 0, D(PLE_ALL), D(VOCAB)), \
	R(PER_LAYER_MODEL_PROJ, MATRIX, REQUIRED, PLE, 0, D(EMBD), D(PLE_ALL)), \
	R(PER_LAYER_PROJ_NORM, HELD, REQUIRED, PLE, 0, D(PLE)), \
	R(ROPE_FREQS, HELD, OPTIONAL, 0, 0, D(ROPE_PAIRS)), \
	R(ATTN_NORM, HELD, REQUIRED, 0, 0, D(EMBD)), \
	R(ATTN_Q, MATRIX, REQUIRED, ATTN, 0, D(EMBD), D(Q)), \
	R(ATTN_K, MATRIX, REQUIRED, ATTN, SHARED_KV, D(EMBD), D(K)), \
	R(ATTN_V, MATRIX, OPTIONAL, ATTN, SHARED_KV, D(EMBD), D(V)), \
	S_QK_NORM, \
	R(ATTN_OUT, MATRIX, REQUIRED, ATTN, 0, D(O), D(EMBD)), \
	R(ATTN_POST_NORM, HELD, REQUIRED, 0, 0, D(EMBD)), \
	R(FFN_NORM, HELD, REQUIRED, 0, 0, D(EMBD)), \
	S_FFN_DENSE
#define S_GEMMA_MOE \
	R(FFN_POST_NORM_1, HELD, REQUIRED, MOE, 0, D(EMBD)), \
	R(FFN_PRE_NORM_2, HELD, REQUIRED, MOE, 0, D(EMBD)), \
	R(FFN_GATE_INP, MATRIX, REQUIRED, MOE, 0, D(EMBD), D(EXPERT)), \
	R(FFN_GATE_INP_SCALE, HELD, REQUIRED, MOE, 0, D(EMBD)), \
	R(FFN_GATE_UP_EXPS, EXPERT, OPTIONAL, MOE, 0, D(EMBD), D(FF_EXP2), D(EXPERT)), \
	R(FFN_GATE_EXPS, EXPERT, OPTIONAL, MOE, 0, D(EMBD), D(FF_EXP), D(EXPERT)), \
	R(FFN_UP_EXPS, EXPERT, OPTIONAL, MOE, 0, D(EMBD), D(FF_EXP), D(EXPERT)), \
	R(FFN_DOWN_EXPS, EXPERT, REQUIRED, MOE, 0, D(FF_EXP), D(EMBD), D(EXPERT)), \
	R(FFN_DOWN_EXPS_SCALE, HELD, OPTIONAL, MOE, 0, D(EXPERT)), \
	R(FFN_POST_NORM_2, HELD, REQUIRED, MOE, 0, D(EMBD))
#define S_GEMMA_TAIL \
	R(FFN_POST_NORM, HELD, REQUIRED, 0, 0, D(EMBD)), \
	R(PLE_INP_GATE, MATRIX, REQUIRED, PLE, 0, D(EMBD), D(PLE)), \
	R(PLE_PROJ, MATRIX, REQUIRED, PLE, 0, D(PLE), D(EMBD)), \
	R(PLE_POST_NORM, HELD, REQUIRED, PLE, 0, D(EMBD)), \
	R(LAYER_OUT_SCALE, HELD, OPTIONAL, 0, 0, D(ONE)), \
	S_OUTPUT

static const struct ns_arch_read s_gemma3[] = { S_GEMMA_LAYER, S_GEMMA_TAIL };
static const struct ns_arch_read s_gemma4[] = { S_GEMMA_LAYER, S_GEMMA_MOE, S_GEMMA_TAIL };

/* ---------------------------------------------------------------- architectures -------- */

#define S_READS(r) r, NS_ARRAY_LEN(r)
#define S_BOTH (NS_BACKEND_CPU | NS_BACKEND_CUDA)

static const struct ns_arch s_archs[] = {
	{ "llama", 0, NS_BUILD_LLAMA, S_BOTH, NS_ROUTER_NONE, NS_FFN_SWIGLU, 0,
	  ns_arch_rules_llama, S_READS(s_llama) },
	{ "qwen3", NS_ARCH_ROPE_NEOX | NS_ARCH_QK_NORM, NS_BUILD_LLAMA, S_BOTH, NS_ROUTER_NONE,
	  NS_FFN_SWIGLU, 0, ns_arch_rules_llama, S_READS(s_qwen3) },
	{ "qwen3moe", NS_ARCH_ROPE_NEOX | NS_ARCH_QK_NORM | NS_ARCH_MOE, NS_BUILD_LLAMA, S_BOTH,
	  NS_ROUTER_SOFTMAX, NS_FFN_SWIGLU, 0, ns_arch_rules_llama, S_READS(s_qwen3moe) },
	{ "gpt-oss", NS_ARCH_ROPE_NEOX | NS_ARCH_MOE | NS_ARCH_SINKS | NS_ARCH_SWA,
	  NS_BUILD_LLAMA, S_BOTH, NS_ROUTER_TOPK_SOFTMAX, NS_FFN_SWIGLU_OAI, 2,
	  ns_arch_rules_llama, S_READS(s_gptoss) },
	/* Qwen3.5: the llama builder with Gated DeltaNet layers (deltanet.c, cfwd_dnet.c) */
	{ "qwen35", NS_ARCH_ROPE_NEOX | NS_ARCH_QK_NORM | NS_ARCH_RECURRENT |
	  NS_ARCH_GATED_ATTN | NS_ARCH_MROPE, NS_BUILD_LLAMA, S_BOTH, NS_ROUTER_NONE,
	  NS_FFN_SWIGLU, 0, ns_arch_rules_qwen35, S_READS(s_qwen35) },
	{ "qwen35moe", NS_ARCH_ROPE_NEOX | NS_ARCH_QK_NORM | NS_ARCH_RECURRENT |
	  NS_ARCH_GATED_ATTN | NS_ARCH_MROPE | NS_ARCH_MOE | NS_ARCH_SHARED_EXPERT, NS_BUILD_LLAMA,
	  S_BOTH, NS_ROUTER_SOFTMAX, NS_FFN_SWIGLU, 0, ns_arch_rules_qwen35,
	  S_READS(s_qwen35moe) },
	/* Gemma 3 and 4: the gemma builder (gemma.c; nscompute/cuda/cfwd_gemma.c on cuda) */
	{ "gemma3", NS_ARCH_ROPE_NEOX | NS_ARCH_QK_NORM | NS_ARCH_SWA | NS_ARCH_SANDWICH_NORM |
	  NS_ARCH_EMBD_SCALE, NS_BUILD_GEMMA, S_BOTH, NS_ROUTER_NONE, NS_FFN_GEGLU, 6,
	  ns_arch_rules_gemma, S_READS(s_gemma3) },
	{ "gemma4", NS_ARCH_ROPE_NEOX | NS_ARCH_QK_NORM | NS_ARCH_SWA | NS_ARCH_SANDWICH_NORM |
	  NS_ARCH_EMBD_SCALE | NS_ARCH_KV_SHARED | NS_ARCH_PER_LAYER_EMBD | NS_ARCH_LOGIT_SOFTCAP |
	  NS_ARCH_V_NORM | NS_ARCH_MOE, NS_BUILD_GEMMA, S_BOTH, NS_ROUTER_SOFTMAX,
	  NS_FFN_GEGLU, 0, ns_arch_rules_gemma, S_READS(s_gemma4) },
	/* Qwen3-VL's text model: qwen3 / qwen3moe on the llama builder (a text position is
	 * the same on every M-RoPE section, which makes the interleaved M-RoPE NeoX's); images
	 * (ns_fwd_eval_mm) on the cpu pass only */
	{ "qwen3vl", NS_ARCH_ROPE_NEOX | NS_ARCH_QK_NORM | NS_ARCH_MROPE | NS_ARCH_DEEPSTACK,
	  NS_BUILD_LLAMA, S_BOTH, NS_ROUTER_NONE, NS_FFN_SWIGLU, 0, ns_arch_rules_llama,
	  S_READS(s_qwen3) },
	{ "qwen3vlmoe", NS_ARCH_ROPE_NEOX | NS_ARCH_QK_NORM | NS_ARCH_MOE | NS_ARCH_MROPE |
	  NS_ARCH_DEEPSTACK, NS_BUILD_LLAMA, S_BOTH, NS_ROUTER_SOFTMAX, NS_FFN_SWIGLU, 0,
	  ns_arch_rules_llama, S_READS(s_qwen3moe) },
};

const struct ns_arch *ns_arch_find(const char *name)
{
	for (size_t i = 0; name && i < NS_ARRAY_LEN(s_archs); i++)
		if (!strcmp(name, s_archs[i].name))
			return &s_archs[i];
	return NULL;
}

const struct ns_arch *ns_arch_at(size_t i)
{
	return i < NS_ARRAY_LEN(s_archs) ? &s_archs[i] : NULL;
}

void ns_arch_computed_list(unsigned backends, char *buf, size_t len)
{
	size_t at = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < NS_ARRAY_LEN(s_archs) && at < len; i++) {
		int n;

		if (s_archs[i].builder == NS_BUILD_NONE || !(s_archs[i].backends & backends))
			continue;
		n = snprintf(buf + at, len - at, "%s%s", at ? ", " : "", s_archs[i].name);
		if (n < 0)
			break;
		at += (size_t)n;
	}
}
