/* gemma.h - the decoder state of the gemma builder (gemma.c sets it up, gemma_eval.c runs
 * it): gemma3 and gemma4 as the architecture table describes them (modelfile/arch.h).
 *
 * What differs from the llama family and why it has its own builder:
 *   - layers differ in head geometry (gemma4: sliding layers 64-wide heads and more KV heads,
 *     global layers 128-wide), so each layer has its own KV cache (kvcache.h, one layer) and
 *     the attention workspace of its geometry;
 *   - KV-shared layers (gemma4 E models) hold no cache: they read the cache of the last
 *     earlier layer of the same kind (sliding or global) that has one;
 *   - each layer kind has its own RoPE (sliding: rope.freq_base_swa, unscaled,
 *     rope.dimension_count_swa; global: rope.freq_base, the file's scaling, rope_freqs on
 *     gemma4 for its proportional partial rotation);
 *   - sandwich norms, GELU(tanh) gated FFN, per-layer inputs (gemma4 E), a scale on each
 *     layer's output, soft-capped logits;
 *   - gemma4's MoE layers (26B-A4B): the dense FFN as a shared expert beside routed experts
 *     (moe.h, through nsrouter as every MoE model), each branch normed on its own.
 *
 * Ownership: f->arch of a forward pass set up by ns_gemma_init; freed with it. */
#ifndef NS_GEMMA_H
#define NS_GEMMA_H

#include <stdbool.h>
#include <stdint.h>

#include "forward_impl.h"
#include "rope.h"

struct ns_attn_ws;
struct ns_moe;

struct ns_gemma_layer {
	uint32_t wq, wk, wv, wo;          /* attention matrices (wk, wv: own K/V only) */
	uint32_t w_gate, w_up, w_down;    /* FFN */
	uint32_t ple_gate, ple_proj;      /* per-layer input (gemma4 E) */
	bool own_kv;                      /* computes and caches K/V (else reads kv_src's) */
	bool has_v;                       /* attn_v present; else V is K (gemma4 global) */
	uint32_t n_head_kv, dk, n_ff, window;
	uint32_t kv_src;                  /* the layer whose cache this one reads */
	struct ns_kvcache *kv;            /* own cache (1 layer), NULL when shared; a ring of
					   * ring_window + n_batch - 1 positions (kvcache.h)
					   * when every layer reading it slides */
	uint32_t ring_window;             /* own cache: the widest window of the layers
					   * reading it (0: one of them is global, or it holds
					   * the whole context anyway) */
	struct ns_attn_ws *ws;            /* borrowed from ns_gemma.ws of this geometry */
	struct ns_rope rope;
	const float *attn_norm, *q_norm, *k_norm, *attn_post_norm; /* (n_embd) / (dk) */
	const float *ffn_norm, *ffn_post_norm, *ple_post_norm;     /* (n_embd) */
	const float *out_scale;                                    /* (1) or NULL */
	bool moe;                         /* routed experts beside the dense FFN (gemma4) */
	const float *ffn_post_norm_1, *ffn_pre_norm_2, *ffn_post_norm_2; /* (n_embd), MoE */
};

struct ns_gemma {
	uint32_t n_embd, n_layer, n_head, n_vocab, ple;
	uint32_t max_q, max_kv, max_ff; /* widest q (n_head * dk), K/V (n_head_kv * dk), FFN */
	float eps;
	float attn_scale;
	float softcap;                  /* final_logit_softcapping, 0: none */
	bool v_norm;                    /* NS_ARCH_V_NORM */
	uint32_t tok_embd, output;      /* token_embd (and the head: token_embd when tied) */
	uint32_t ple_embd, ple_model_proj; /* per_layer_token_embd, per_layer_model_proj */
	const float *output_norm, *ple_proj_norm;
	struct ns_gemma_layer *layers;  /* (n_layer) */
	struct ns_moe *moe;             /* the routed experts (gemma4 MoE), owned; NULL dense */
	struct ns_attn_ws **ws;         /* (n_ws) one per distinct KV geometry, owned */
	uint32_t n_ws;
	uint32_t ffn_rows;              /* neurons per phase-1 window */
	/* scratch, sized for n_batch tokens */
	int64_t *ids;  /* (n_batch) */
	float *x;      /* (n_batch, n_embd) residual stream */
	float *xb;     /* (n_batch, n_embd) normed input of a sublayer */
	float *xb2;    /* (n_batch, n_embd) sublayer output */
	float *q;      /* (n_batch, max_q) */
	float *k;      /* (n_batch, max_kv) */
	float *v;      /* (n_batch, max_kv) */
	float *ao;     /* (n_batch, max_q) attention output */
	float *hb;     /* (n_batch, max_ff) FFN activation */
	float *xm;     /* (n_batch, n_embd) the routed experts' output (MoE layers), or NULL */
	float *hu;     /* (n_batch, ffn_rows) up projection of one window */
	float *pl;     /* (n_batch, n_layer * ple) per-layer inputs */
	float *pg;     /* (n_batch, ple) a layer's gated per-layer input */
	float *cs;     /* (max rope dims) angles of one position */
};

/* The description (layers, tensors, vectors, RoPE, KV sources, scales) as ns_gemma_init
 * builds it; with host_state false no KV cache, attention workspace or scratch, and no cut
 * (f->arch_cut NULL): the CUDA pass (nscompute/cuda/cfwd_gemma.c) keeps its own on the device
 * and replaces f->arch, f->eval_chunk. ns_gemma_init is host_state true. */
int ns_gemma_setup(struct ns_fwd *f, uint32_t ffn_rows, bool host_state, char *err,
		   size_t errlen);

/* The gemma layer pass (gemma_eval.c): f->eval_chunk. */
int ns_gemma_eval_chunk(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
			bool all);

#endif
