/* synth_gemma4.c - Gemma 4's dense models for the generator (synth.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "ggml_type.h"
#include "synth_internal.h"

/* Gemma 4 31B and E4B (see s_presets in synth.c for the sources): five sliding layers then a
 * global one; sliding heads of 256 rotated whole (rope 1e4), global heads of 512 with
 * "proportional" RoPE over a quarter of them (rope 1e6); logits soft-capped at 30. 31B: the
 * global layers have 4 KV heads and use K as V (no attn_v); E4B: per-layer inputs of 256 and
 * the last 18 layers on earlier layers' K/V. */
const struct gemma4 ns_synth_gemma4_31b = { 6, 256, 4, true, 0, 0, 64, 10000.0, 30.0f };
const struct gemma4 ns_synth_gemma4_e4b = { 6, 256, 0, false, 256, 18, 64, 10000.0, 30.0f };
/* 26B-A4B: the 31B's layer pattern and heads with 2 KV heads on global layers, every layer
 * MoE (the preset's experts). The tiny MoE (the oracle test's model, F32): sliding heads of
 * 32, global heads of 64 with a quarter rotated, one global KV head, K as V. */
const struct gemma4 ns_synth_gemma4_26b = { 6, 256, 2, true, 0, 0, 64, 10000.0, 30.0f };
const struct gemma4 ns_synth_gemma4_tiny_moe = { 6, 32, 1, true, 0, 0, 8, 10000.0, 30.0f };

bool ns_synth_gemma4_slides(const struct gemma4 *g, uint32_t l)
{
	return l % g->swa_period != g->swa_period - 1;
}

/* Layers of a model cut to n_layer that use an earlier layer's K/V, at its end: the whole
 * model's share of them (rounded down), so a cut has the I/O profile of the whole, but no
 * more than leave one full period unshared (a shared layer reads the last unshared layer of
 * its kind, which must exist). */
uint32_t ns_synth_gemma4_shared(const struct preset *p, uint32_t n_layer)
{
	const struct gemma4 *g = p->gm;
	uint64_t n = (uint64_t)n_layer * g->n_kv_shared / p->n_layer;
	uint32_t most = n_layer > g->swa_period ? n_layer - g->swa_period : 0;

	return n < most ? (uint32_t)n : most;
}

/* The MoE block of layer l: the dense FFN's output norm, the routed branch's input norm,
 * the router and its input scale, the experts (gate and up stacked) and their scales, the
 * routed branch's output norm. */
static int s_plan_moe(struct plan *pl, uint32_t l)
{
	const struct preset *p = pl->p;
	const uint64_t E = p->n_embd, F = p->n_ff_exp, X = p->n_expert;
	const int down = ns_synth_more_bits(l, pl->n_layer) ? 1 : 3;
	char nm[96];
	int ret;

	ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.post_ffw_norm_1.weight", l);
	ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.pre_ffw_norm_2.weight", l);
	snprintf(nm, sizeof(nm), "blk.%u.ffn_gate_inp.weight", l);
	if ((ret = ns_synth_add(pl, nm, ROLE_MATRIX, NS_TYPE_F32, 2, E, X, 1)))
		return ret;
	ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.ffn_gate_inp.scale", l);
	ADD(ROLE_MATRIX, 3, 3, E, 2 * F, X, "blk.%u.ffn_gate_up_exps.weight", l);
	ADD(ROLE_MATRIX, down, 3, F, E, X, "blk.%u.ffn_down_exps.weight", l);
	ADD(ROLE_NORM, 0, 1, X, 1, 1, "blk.%u.ffn_down_exps.scale", l);
	ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.post_ffw_norm_2.weight", l);
	return 0;
}

/* gemma4 as llama.cpp's converter writes it (conversion/gemma.py Gemma4Model; the names of
 * ../shared/oracle/tiny/tiny-gemma4-*.gguf and hf/gemma4_e/gguf): no attn_v on a global layer
 * when K is V, no attn_k/attn_v/attn_k_norm on a KV-shared layer, rope_freqs for the global
 * layers' proportional RoPE (1 on the rotated pairs, 1e30 on the rest). Types: llama-quantize
 * Q4_K_M (llama-quant.cpp): tied token_embd and per_layer_token_embd (both "token
 * embeddings") take the output's Q6_K; attn_v Q6_K by use_more_bits over the attn_v tensors
 * that exist, ffn_down by layer; per_layer_model_proj is never quantized (it keeps the
 * checkpoint's BF16; F32/F16 in those mixes); 1-D tensors F32.
 * MoE presets (26B-A4B; llama.cpp src/models/gemma4.cpp's tensors, conversion/gemma.py's
 * names: router.proj -> ffn_gate_inp, router.scale -> ffn_gate_inp.scale, per_expert_scale ->
 * ffn_down_exps.scale, experts.gate_up_proj -> ffn_gate_up_exps stacked as the checkpoint
 * has it): the router F32 (never quantized), gate_up Q4_K, ffn_down_exps by layer as ffn_down
 * (llama-quant.cpp reads the layer from the name when n_expert > 1), rows of 704 and 2112
 * falling back as llama-quantize does (Q4_K -> Q5_0, Q6_K -> Q8_0). */
int ns_synth_plan_gemma4(struct plan *pl)
{
	const struct preset *p = pl->p;
	const struct gemma4 *g = p->gm;
	const uint64_t E = p->n_embd, V = p->n_vocab, ple = g->n_embd_ple;
	const uint64_t ple_all = ple * pl->n_layer;
	const uint32_t first_shared = pl->n_layer - ns_synth_gemma4_shared(p, pl->n_layer);
	uint32_t n_v = 0, i_v = 0;
	int ret;

	for (uint32_t l = 0; l < first_shared; l++)
		n_v += !(g->k_eq_v && !ns_synth_gemma4_slides(g, l));
	ADD(ROLE_MATRIX, 2, 2, E, V, 1, "%s", "token_embd.weight");
	if (ple)
		ADD(ROLE_MATRIX, 2, 2, ple_all, V, 1, "%s", "per_layer_token_embd.weight");
	ADD(ROLE_NORM, 0, 1, E, 1, 1, "%s", "output_norm.weight");
	if ((ret = ns_synth_add(pl, "rope_freqs.weight", ROLE_ROPE_FREQS, NS_TYPE_F32, 1,
				p->head_dim / 2, 1, 1)))
		return ret;
	pl->t[pl->n - 1].rotated = g->rot_pairs;
	if (ple) {
		if ((ret = ns_synth_add(pl, "per_layer_model_proj.weight", ROLE_MATRIX,
					pl->q == NS_SYNTH_F32   ? NS_TYPE_F32
					: pl->q == NS_SYNTH_F16 ? NS_TYPE_F16
								: NS_TYPE_BF16,
					2, E, ple_all, 1)))
			return ret;
		ADD(ROLE_NORM, 0, 1, ple, 1, 1, "%s", "per_layer_proj_norm.weight");
	}
	for (uint32_t l = 0; l < pl->n_layer; l++) {
		const bool swa = ns_synth_gemma4_slides(g, l), shared = l >= first_shared;
		const uint64_t hd = swa ? g->head_dim_swa : p->head_dim;
		const uint64_t kv = !swa && g->n_head_kv_full ? g->n_head_kv_full : p->n_head_kv;
		const uint64_t q_out = p->n_head * hd, kv_out = kv * hd;

		ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.attn_norm.weight", l);
		ADD(ROLE_MATRIX, 0, 2, E, q_out, 1, "blk.%u.attn_q.weight", l);
		ADD(ROLE_NORM, 0, 1, hd, 1, 1, "blk.%u.attn_q_norm.weight", l);
		if (!shared) {
			ADD(ROLE_MATRIX, 0, 2, E, kv_out, 1, "blk.%u.attn_k.weight", l);
			ADD(ROLE_NORM, 0, 1, hd, 1, 1, "blk.%u.attn_k_norm.weight", l);
			if (!(g->k_eq_v && !swa)) {
				int more = ns_synth_more_bits(i_v++, n_v) ? 1 : 0;
				ADD(ROLE_MATRIX, more, 2, E, kv_out, 1, "blk.%u.attn_v.weight", l);
			}
		}
		ADD(ROLE_MATRIX, 0, 2, q_out, E, 1, "blk.%u.attn_output.weight", l);
		ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.post_attention_norm.weight", l);
		ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.ffn_norm.weight", l);
		ADD(ROLE_MATRIX, 0, 2, E, p->n_ff, 1, "blk.%u.ffn_gate.weight", l);
		ADD(ROLE_MATRIX, 0, 2, E, p->n_ff, 1, "blk.%u.ffn_up.weight", l);
		ADD(ROLE_MATRIX, ns_synth_more_bits(l, pl->n_layer) ? 1 : 0, 2, p->n_ff, E, 1,
		    "blk.%u.ffn_down.weight", l);
		if (p->n_expert && (ret = s_plan_moe(pl, l)))
			return ret;
		ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.post_ffw_norm.weight", l);
		if (ple) {
			ADD(ROLE_MATRIX, 0, 2, E, ple, 1, "blk.%u.inp_gate.weight", l);
			ADD(ROLE_MATRIX, 0, 2, ple, E, 1, "blk.%u.proj.weight", l);
			ADD(ROLE_NORM, 0, 1, E, 1, 1, "blk.%u.post_norm.weight", l);
		}
		ADD(ROLE_NORM, 0, 1, 1, 1, 1, "blk.%u.layer_output_scale.weight", l);
	}
	return 0;
}

/* The keys Gemma4Model.set_gguf_parameters adds beyond the common ones (which hold the global
 * layers' head size). */
int ns_synth_gemma4_meta(struct ns_gguf_writer *w, const struct preset *p, uint32_t n_layer)
{
	const struct gemma4 *g = p->gm;
	uint8_t *swa = malloc(n_layer ? n_layer : 1);
	int32_t *kv = malloc((n_layer ? n_layer : 1) * sizeof(*kv));
	char key[128];
	int ret;

#define KEY(suffix) (snprintf(key, sizeof(key), "%s.%s", p->arch, suffix), key)
	if (!swa || !kv) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t l = 0; l < n_layer; l++) {
		swa[l] = ns_synth_gemma4_slides(g, l);
		kv[l] = (int32_t)(!swa[l] && g->n_head_kv_full ? g->n_head_kv_full : p->n_head_kv);
	}
	if ((ret = ns_gguf_writer_set_f32(w, KEY("rope.freq_base_swa"), (float)g->rope_base_swa)) ||
	    (ret = ns_gguf_writer_set_f32(w, KEY("final_logit_softcapping"), g->softcap)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("attention.shared_kv_layers"),
					  ns_synth_gemma4_shared(p, n_layer))) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("embedding_length_per_layer_input"),
					  g->n_embd_ple)) ||
	    (ret = ns_gguf_writer_set_arr(w, KEY("attention.sliding_window_pattern"),
					  7 /* BOOL */, swa, n_layer)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("attention.key_length_swa"), g->head_dim_swa)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("attention.value_length_swa"), g->head_dim_swa)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("rope.dimension_count"), p->head_dim)) ||
	    (ret = ns_gguf_writer_set_u32(w, KEY("rope.dimension_count_swa"), g->head_dim_swa)))
		goto out;
	/* the converter writes the per-layer array only where the global layers differ */
	if (g->n_head_kv_full)
		ret = ns_gguf_writer_set_arr(w, KEY("attention.head_count_kv"), 5 /* I32 */, kv,
					     n_layer);
	else
		ret = ns_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), p->n_head_kv);
#undef KEY
out:
	free(swa);
	free(kv);
	return ret;
}
