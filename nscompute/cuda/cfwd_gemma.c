/* cfwd_gemma.c - gemma3 and gemma4 on the device, as nscompute/forward/gemma_eval.c computes
 * them (gemma.h's description, built by ns_gemma_setup without its host state):
 *
 *     x = token_embd[tokens] * sqrt(n_embd)
 *     gemma4 E: pl = (rmsnorm_ple(x Wple_model^T / sqrt(n_embd)) * ple_proj_norm
 *                     + per_layer_token_embd[tokens] * sqrt(ple)) / sqrt(2)
 *     per layer l:
 *         xb = rmsnorm(x) * attn_norm
 *         q = rmsnorm_head(xb Wq^T) * q_norm, rope (the layer's, or the one it shares)
 *         own K/V: k = rmsnorm_head(xb Wk^T) * k_norm, rope; v = xb Wv^T (no attn_v: the k
 *                  projection before its norm); gemma4: v = rmsnorm_head(v)  -> its cache
 *         ao = attention(q, the layer's cache or its source's; the window on sliding layers)
 *         x += rmsnorm(ao Wo^T) * post_attention_norm
 *         x += rmsnorm((gelu(xb Wg^T) * (xb Wu^T)) Wd^T) * post_ffw_norm, xb = rmsnorm(x) *
 *              ffn_norm
 *         gemma4 MoE layers instead (the dense FFN as a shared expert, cfwd_moe_routed):
 *              d = rmsnorm((gelu(xb Wg^T) * (xb Wu^T)) Wd^T) * post_ffw_norm_1
 *              m = rmsnorm(moe(router: rmsnorm(x) / sqrt(n_embd) * router_scale,
 *                              experts: rmsnorm(x) * pre_ffw_norm_2)) * post_ffw_norm_2
 *              x += rmsnorm(d + m) * post_ffw_norm
 *         gemma4 E: x += rmsnorm((gelu(x Winp_gate^T) * pl[:, l]) Wproj^T) * post_norm
 *         x *= layer_output_scale (when the file has it)
 *     logits = softcap((rmsnorm(x) * output_norm) Wout^T)
 *
 * Caches: every layer with its own K/V keeps a whole cache of n_ctx positions on the device,
 * sliding layers included (the CPU pass keeps rings of the window there; the gpt-oss CUDA pass
 * keeps whole caches too: the attention kernel's window does the rest, and any cut back is
 * possible). KV-shared layers (gemma4 E) hold none: they read their source layer's. The
 * per-layer table is read at the chunk's tokens' rows only: from the host provider and
 * uploaded (as the CPU pass reads them), or dequantized in VRAM when the plan put the whole
 * table there (as the token embedding). No decode graph (plain launches every step). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cfwd_internal.h"
#include "gemma.h"

int cfwd_gemma_state(struct cfwd *c, uint32_t n_ctx, char *err, size_t errlen)
{
	const struct ns_gemma *G = c->G;
	const uint64_t nb = c->n_batch, all = (uint64_t)G->n_layer * G->ple;
	/* hb: the FFN, all per-layer inputs, or a stacked expert's [gate | up] (2 F) rows; hu:
	 * the FFN's up or a split expert's (F) */
	const uint64_t F = G->moe ? G->moe->n_ff_exp : 0;
	const uint64_t hbw = all > G->max_ff ? (all > 2 * F ? all : 2 * F) :
					       (G->max_ff > 2 * F ? G->max_ff : 2 * F);
	const uint64_t huw = G->max_ff > F ? G->max_ff : F;
	int rc;

	if (!(c->g_k = calloc(G->n_layer, sizeof(*c->g_k))) ||
	    !(c->g_v = calloc(G->n_layer, sizeof(*c->g_v))))
		goto oom;
	/* nsplan/gpu_need.c s_gemma counts the same buffers */
	for (uint32_t l = 0; l < G->n_layer; l++) {
		const struct ns_gemma_layer *y = &G->layers[l];
		const uint64_t nkv = (uint64_t)y->n_head_kv * y->dk;

		if (!y->own_kv)
			continue;
		if ((rc = CFWD_DA(c, &c->g_k[l], n_ctx, ns_cuda_kv_row_bytes(c->kv_tk, nkv), 1)) ||
		    (rc = CFWD_DA(c, &c->g_v[l], n_ctx, ns_cuda_kv_row_bytes(c->kv_tv, nkv), 1)))
			return rc;
	}
	if ((rc = CFWD_DA(c, &c->x, nb, G->n_embd, 4)) ||
	    (rc = CFWD_DA(c, &c->xb, nb, G->n_embd, 4)) ||
	    (rc = CFWD_DA(c, &c->xb2, nb, G->n_embd, 4)) ||
	    (rc = CFWD_DA(c, &c->q, nb, G->max_q, 4)) || (rc = CFWD_DA(c, &c->k, nb, G->max_kv, 4)) ||
	    (rc = CFWD_DA(c, &c->v, nb, G->max_kv, 4)) || (rc = CFWD_DA(c, &c->ao, nb, G->max_q, 4)) ||
	    (rc = CFWD_DA(c, &c->hb, nb, hbw, 4)) || (rc = CFWD_DA(c, &c->hu, nb, huw, 4)) ||
	    (rc = CFWD_DA(c, &c->logits, nb < CFWD_LOGIT_TOK ? nb : CFWD_LOGIT_TOK, G->n_vocab,
			  4)) ||
	    (rc = CFWD_DA(c, &c->attn_ws, 1, 1,
			  ns_cuda_attn_ws_bytes((uint32_t)nb, G->n_head, n_ctx,
						G->max_q / G->n_head))) ||
	    (rc = CFWD_DA(c, &c->dev_pos, 1, 1, 8)))
		return rc;
	if (G->ple && ((rc = CFWD_DA(c, &c->pl, nb, all, 4)) ||
		       (rc = CFWD_DA(c, &c->pg, nb, G->ple, 4))))
		return rc;
	/* gemma4 MoE: the routed experts' scratch (hb, hu above), their branch's output */
	if (G->moe && ((rc = cfwd_moe_state(c, G->moe, err, errlen)) ||
		       (rc = CFWD_DA(c, &c->m_xm, nb, G->n_embd, 4))))
		return rc;
	if (!(c->h_x = calloc(nb * G->n_embd, sizeof(float))) ||
	    !(c->h_ids = calloc(nb, sizeof(int64_t))) ||
	    (G->ple && !(c->h_pl = calloc(nb * all, sizeof(float)))))
		goto oom;
	return 0;
oom:
	ns_errf(err, errlen, "out of memory");
	return -ENOMEM;
}

/* y = rmsnorm(x) * w   (n rows of d), y may be x */
static int s_norm(struct ns_fwd *f, struct cfwd *c, float *y, const float *x, const float *w,
		  uint32_t d, uint32_t n)
{
	CFWD_TRY("rmsnorm", ns_cuda_rmsnorm(y, x, w, d, n, c->G->eps, c->cs));
	return 0;
}

/* x += rmsnorm(xb2) * w   (n, n_embd): a sandwich norm's output into the residual */
static int s_add_normed(struct ns_fwd *f, struct cfwd *c, const float *w, uint32_t n)
{
	const struct ns_gemma *G = c->G;
	int rc;

	if ((rc = s_norm(f, c, c->xb2, c->xb2, w, G->n_embd, n)))
		return rc;
	CFWD_TRY("residual", ns_cuda_add(c->x, c->xb2, (uint64_t)n * G->n_embd, c->cs));
	cfwd_mark(c, CFWD_P_ELEM);
	return 0;
}

/* The per-layer inputs of the chunk (gemma4 E) into c->pl (n, n_layer * ple). */
static int s_per_layer_inputs(struct ns_fwd *f, struct cfwd *c, const int32_t *tokens,
			      uint32_t n)
{
	const struct ns_gemma *G = c->G;
	const uint64_t all = (uint64_t)G->n_layer * G->ple;
	int rc;

	/* pl = per_layer_token_embd[tokens]: the rows of these tokens only (dequantized in VRAM
	 * when the plan put the table there, else from the host provider as the CPU pass) */
	if ((rc = cfwd_rows(f, c, G->ple_embd, c->ple_dev, all, tokens, n, c->pl, c->h_pl)))
		return rc;
	/* hb = rmsnorm_ple(x Wple_model^T / sqrt(n_embd)) * ple_proj_norm   (n, all) */
	if ((rc = cfwd_matmul(f, G->ple_model_proj, 0, all, c->x, n, c->hb, all)))
		return rc;
	CFWD_TRY("scale", ns_cuda_scale(c->hb, (uint64_t)n * all, 1.0f / sqrtf((float)G->n_embd),
				      NULL, c->cs));
	if ((rc = s_norm(f, c, c->hb, c->hb, cfwd_dheld(c, -1, NS_T_PER_LAYER_PROJ_NORM), G->ple,
			 n * G->n_layer)))
		return rc;
	CFWD_TRY("per-layer mix", ns_cuda_ple_mix(c->pl, c->hb, (uint64_t)n * all,
						 sqrtf((float)G->ple), 1.0f / sqrtf(2.0f), c->cs));
	cfwd_mark(c, CFWD_P_EMBD);
	return 0;
}

static void s_rope_of(const struct cfwd *c, const struct ns_rope *h, struct ns_cuda_rope *r)
{
	*r = (struct ns_cuda_rope){ .n_dims = h->n_dims, .neox = h->neox,
				    .freq_base = h->freq_base, .freq_scale = h->freq_scale,
				    .dev_freq_factors = h->freq_factors ? c->rope_freqs : NULL,
				    .ext_factor = h->ext_factor, .attn_factor = h->attn_factor,
				    .corr_dims = { h->corr_dims[0], h->corr_dims[1] } };
}

static int s_attention(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n)
{
	const struct ns_gemma *G = c->G;
	const struct ns_gemma_layer *y = &G->layers[l];
	const uint32_t pos0 = f->kv->n_past;
	const uint64_t nq = (uint64_t)G->n_head * y->dk, nkv = (uint64_t)y->n_head_kv * y->dk;
	void *Kb = c->g_k[y->kv_src], *Vb = c->g_v[y->kv_src]; /* (n_ctx, nkv) of their types */
	float *K = Kb, *V = Vb; /* the f32 cache's view */
	const struct ns_cuda_kv kv = cfwd_kv(c, Kb, Vb, nkv, nkv);
	const bool typed = c->kv_tk != NS_CUDA_KV_F32 || c->kv_tv != NS_CUDA_KV_F32;
	struct ns_cuda_rope r;
	int rc;

	/* xb = rmsnorm(x) * attn_norm; q (n, nq); own K/V: k, v (n, nkv) */
	if ((rc = s_norm(f, c, c->xb, c->x, c->dl[l].attn_norm, G->n_embd, n)) ||
	    (rc = cfwd_matmul(f, y->wq, 0, nq, c->xb, n, c->q, nq)))
		return rc;
	if (y->own_kv && ((rc = cfwd_matmul(f, y->wk, 0, nkv, c->xb, n, c->k, nkv)) ||
			  (y->has_v && (rc = cfwd_matmul(f, y->wv, 0, nkv, c->xb, n, c->v, nkv)))))
		return rc;
	cfwd_mark(c, CFWD_P_ATTN_MM);
	s_rope_of(c, &y->rope, &r);
	/* per-head norms, RoPE, then the chunk's K and V into the cache */
	if ((rc = s_norm(f, c, c->q, c->q, c->dl[l].q_norm, y->dk, n * G->n_head)))
		return rc;
	CFWD_TRY("rope", ns_cuda_rope(&r, c->q, n, G->n_head, y->dk, pos0, c->cs));
	if (y->own_kv) {
		if (!y->has_v) /* V is the k projection, before K's norm and rotation */
			CFWD_TRY("V copy", ns_cuda_d2d_async(c->v, c->k, (uint64_t)n * nkv * 4,
							  c->cs));
		if ((rc = s_norm(f, c, c->k, c->k, c->dl[l].k_norm, y->dk, n * y->n_head_kv)) ||
		    (G->v_norm &&
		     (rc = s_norm(f, c, c->v, c->v, NULL, y->dk, n * y->n_head_kv))))
			return rc;
		CFWD_TRY("rope", ns_cuda_rope(&r, c->k, n, y->n_head_kv, y->dk, pos0, c->cs));
		if (typed) { /* f16 / q8_0: converted as the CPU's cache stores them */
			CFWD_TRY("KV store", ns_cuda_kv_store(&kv, c->k, nkv, c->v, nkv, n, pos0,
							      NULL, c->cs));
		} else {
			CFWD_TRY("KV copy", ns_cuda_d2d_async(K + (uint64_t)pos0 * nkv, c->k,
							   (uint64_t)n * nkv * 4, c->cs));
			CFWD_TRY("KV copy", ns_cuda_d2d_async(V + (uint64_t)pos0 * nkv, c->v,
							   (uint64_t)n * nkv * 4, c->cs));
		}
	}
	cfwd_mark(c, CFWD_P_ROPE);
	/* ao (n, nq) over positions 0 .. pos0 + n - 1 of the cache, within the window */
	if (typed)
		CFWD_TRY("attention", ns_cuda_attention_kv(c->q, &kv, n, pos0, NULL, 0, G->n_head,
							y->n_head_kv, y->dk, y->dk,
							G->attn_scale, y->window, NULL, c->ao,
							c->attn_ws, c->cs));
	else
		CFWD_TRY("attention", ns_cuda_attention(c->q, K, nkv, V, nkv, n, pos0, G->n_head,
						     y->n_head_kv, y->dk, y->dk, G->attn_scale,
						     y->window, NULL, c->ao, c->attn_ws, c->cs));
	cfwd_mark(c, CFWD_P_ATTN);
	/* x += rmsnorm(ao Wo^T) * post_attention_norm */
	if ((rc = cfwd_matmul(f, y->wo, 0, G->n_embd, c->ao, n, c->xb2, G->n_embd)))
		return rc;
	cfwd_mark(c, CFWD_P_ATTN_MM);
	return s_add_normed(f, c, cfwd_dheld(c, (int32_t)l, NS_T_ATTN_POST_NORM), n);
}

/* gemma4 MoE layers, beside the dense FFN's xb2 (= hb Wd^T), as gemma_eval.c s_ffn_block:
 *     xb2 = rmsnorm(xb2) * post_ffw_norm_1                                    shared expert
 *     xm = rmsnorm(moe(router: x, experts: rmsnorm(x) * pre_ffw_norm_2)) * post_ffw_norm_2
 *     xb2 += xm   (the caller then adds rmsnorm(xb2) * post_ffw_norm to x) */
static int s_moe(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n)
{
	const struct ns_gemma *G = c->G;
	const int32_t i = (int32_t)l;
	int rc;

	if ((rc = s_norm(f, c, c->xb2, c->xb2, cfwd_dheld(c, i, NS_T_FFN_POST_NORM_1), G->n_embd,
			 n)) ||
	    (rc = s_norm(f, c, c->xb, c->x, cfwd_dheld(c, i, NS_T_FFN_PRE_NORM_2), G->n_embd, n)))
		return rc;
	cfwd_mark(c, CFWD_P_NORM);
	if ((rc = cfwd_moe_routed(f, c, G->moe, l, c->x, c->xb, n, c->m_xm)) ||
	    (rc = s_norm(f, c, c->m_xm, c->m_xm, cfwd_dheld(c, i, NS_T_FFN_POST_NORM_2), G->n_embd,
			 n)))
		return rc;
	CFWD_TRY("residual", ns_cuda_add(c->xb2, c->m_xm, (uint64_t)n * G->n_embd, c->cs));
	cfwd_mark(c, CFWD_P_ELEM);
	return 0;
}

static int s_ffn(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n)
{
	const struct ns_gemma *G = c->G;
	const struct ns_gemma_layer *y = &G->layers[l];
	const uint64_t ff = y->n_ff;
	int rc;

	/* hb = gelu(xb Wg^T) * (xb Wu^T)   (n, ff) */
	if ((rc = s_norm(f, c, c->xb, c->x, c->dl[l].ffn_norm, G->n_embd, n)) ||
	    (rc = cfwd_matmul(f, y->w_gate, 0, ff, c->xb, n, c->hb, ff)) ||
	    (rc = cfwd_matmul(f, y->w_up, 0, ff, c->xb, n, c->hu, ff)))
		return rc;
	cfwd_mark(c, CFWD_P_FFN_MM);
	CFWD_TRY("geglu", ns_cuda_geglu(c->hb, ff, c->hu, ff, ff, n, c->cs));
	cfwd_mark(c, CFWD_P_ELEM);
	/* xb2 = hb Wd^T; MoE layers: the routed experts added beside it */
	if ((rc = cfwd_matmul(f, y->w_down, 0, G->n_embd, c->hb, n, c->xb2, G->n_embd)))
		return rc;
	cfwd_mark(c, CFWD_P_FFN_MM);
	if (y->moe && (rc = s_moe(f, c, l, n)))
		return rc;
	/* x += rmsnorm(xb2) * post_ffw_norm */
	return s_add_normed(f, c, cfwd_dheld(c, (int32_t)l, NS_T_FFN_POST_NORM), n);
}

/* gemma4 E: x += rmsnorm((gelu(x Winp_gate^T) * pl[:, l]) Wproj^T) * post_norm. */
static int s_per_layer(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n)
{
	const struct ns_gemma *G = c->G;
	const struct ns_gemma_layer *y = &G->layers[l];
	const uint64_t all = (uint64_t)G->n_layer * G->ple;
	int rc;

	if ((rc = cfwd_matmul(f, y->ple_gate, 0, G->ple, c->x, n, c->pg, G->ple)))
		return rc;
	CFWD_TRY("geglu", ns_cuda_geglu(c->pg, G->ple, c->pl + (uint64_t)l * G->ple, all, G->ple,
				      n, c->cs));
	if ((rc = cfwd_matmul(f, y->ple_proj, 0, G->n_embd, c->pg, n, c->xb2, G->n_embd)))
		return rc;
	cfwd_mark(c, CFWD_P_FFN_MM);
	return s_add_normed(f, c, cfwd_dheld(c, (int32_t)l, NS_T_PLE_POST_NORM), n);
}

static int s_layer(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n)
{
	const struct ns_gemma *G = c->G;
	const float *scale = cfwd_dheld(c, (int32_t)l, NS_T_LAYER_OUT_SCALE);
	int rc;

	if ((rc = s_attention(f, c, l, n)) || (rc = s_ffn(f, c, l, n)) ||
	    (G->ple && (rc = s_per_layer(f, c, l, n))))
		return rc;
	if (scale)
		CFWD_TRY("layer scale", ns_cuda_scale(c->x, (uint64_t)n * G->n_embd, 1.0f, scale,
						    c->cs));
	return 0;
}

static int s_eval(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
		  bool all)
{
	struct cfwd *c = f->arch;
	const struct ns_gemma *G = c->G;
	const uint64_t V = G->n_vocab;
	uint32_t t0;
	int rc;

	/* x = token_embd[tokens] * sqrt(n_embd)   (n, n_embd) */
	if ((rc = cfwd_rows(f, c, G->tok_embd, c->embd_dev, G->n_embd, tokens, n, c->x,
			    c->h_x)) < 0)
		return rc;
	CFWD_TRY("scale", ns_cuda_scale(c->x, (uint64_t)n * G->n_embd, sqrtf((float)G->n_embd),
				      NULL, c->cs));
	cfwd_mark(c, CFWD_P_EMBD);
	if (G->ple && (rc = s_per_layer_inputs(f, c, tokens, n)))
		return rc;
	for (uint32_t l = 0; l < G->n_layer; l++)
		if ((rc = s_layer(f, c, l, n)))
			return rc;
	c->prof_submit_ns = c->prof.on ? ns_now_ns() : 0;
	if (!logits)
		return ns_cuda_stream_sync(c->cs) < 0 ? cfwd_fail(f, "sync", -EIO) : 0;
	/* logits = softcap((rmsnorm(x) * output_norm) Wout^T)   (all ? n : 1, n_vocab) */
	t0 = all ? 0 : n - 1;
	for (uint32_t g = t0; g < n; g += CFWD_LOGIT_TOK) {
		const uint32_t m = n - g < CFWD_LOGIT_TOK ? n - g : CFWD_LOGIT_TOK;

		if ((rc = s_norm(f, c, c->xb, c->x + (uint64_t)g * G->n_embd, c->output_norm,
				 G->n_embd, m)) ||
		    (rc = cfwd_matmul(f, G->output, 0, V, c->xb, m, c->logits, V)))
			return rc;
		if (G->softcap > 0)
			CFWD_TRY("soft-cap", ns_cuda_softcap(c->logits, (uint64_t)m * V, G->softcap,
							  c->cs));
		cfwd_mark(c, CFWD_P_HEAD);
		if (g == t0)
			c->prof_submit_ns = c->prof.on ? ns_now_ns() : 0;
		CFWD_TRY("sync", ns_cuda_stream_sync(c->cs));
		CFWD_TRY("download", cfwd_download(c, logits + (uint64_t)(g - t0) * V, c->logits,
						(uint64_t)m * V * 4));
	}
	return 0;
}

int cfwd_gemma_eval_chunk(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
			  bool all)
{
	return cfwd_timed_chunk(f, s_eval, tokens, n, logits, all);
}
