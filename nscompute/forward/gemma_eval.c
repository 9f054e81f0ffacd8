/* gemma_eval.c - the gemma decoder's pass over one chunk (gemma.h), straight-line.
 *
 *     x = token_embd[tokens] * sqrt(n_embd)
 *     gemma4 E, per-layer inputs (n, n_layer, ple):
 *         pl = (rmsnorm_ple(x Wple_model^T / sqrt(n_embd)) * ple_proj_norm
 *               + per_layer_token_embd[tokens] * sqrt(ple)) / sqrt(2)
 *     per layer l:
 *         xb = rmsnorm(x) * attn_norm
 *         q = rmsnorm_head(xb Wq^T) * q_norm, rope
 *         own K/V: k = rmsnorm_head(xb Wk^T) * k_norm, rope;  v = xb Wv^T (no attn_v: the k
 *                  projection before its norm), gemma4: v = rmsnorm_head(v)   -> the cache
 *         ao = softmax(q k^T * scale) v over the layer's cache or the one it shares, within
 *              the sliding window on sliding layers
 *         x += rmsnorm(ao Wo^T) * post_attention_norm
 *         x += rmsnorm(ffn(rmsnorm(x) * ffn_norm)) * post_ffw_norm,
 *              ffn(h) = (gelu_tanh(h Wgate^T) * (h Wup^T)) Wdown^T
 *         gemma4 MoE layers instead (llama.cpp src/models/gemma4.cpp):
 *              d = rmsnorm(ffn(rmsnorm(x) * ffn_norm)) * post_ffw_norm_1     shared expert
 *              m = rmsnorm(moe(router: x, experts: rmsnorm(x) * pre_ffw_norm_2))
 *                  * post_ffw_norm_2                                        moe.h
 *              x += rmsnorm(d + m) * post_ffw_norm
 *         gemma4 E: x += rmsnorm((gelu_tanh(x Winp_gate^T) * pl[:, l]) Wproj^T) * post_norm
 *         x *= layer_output_scale (when the file has it)
 *     logits = (rmsnorm(x) * output_norm) Wout^T, soft-capped: c tanh(logits / c)
 * The matrices are read in the table's order (arch.h); vectors are HELD (held.h). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "attn.h"
#include "gemma.h"
#include "moe.h"
#include "ops.h"

/* y[t] = rmsnorm(x[t]) * w for n rows of width d (y may be x). */
static void s_norm_rows(float *y, const float *x, const float *w, uint32_t n, uint64_t d,
			float eps)
{
	for (uint64_t t = 0; t < n; t++)
		ns_rmsnorm(y + t * d, x + t * d, w, (uint32_t)d, eps);
}

/* x += y, (n, d) */
static void s_add(float *x, const float *y, uint32_t n, uint64_t d)
{
	for (uint64_t i = 0; i < (uint64_t)n * d; i++)
		x[i] += y[i];
}

/* The per-layer inputs of the chunk (gemma4 E): the table's rows of these tokens and the
 * projection of the scaled embedding, into G->pl (n, n_layer * ple). */
static int s_per_layer_inputs(struct ns_fwd *f, struct ns_gemma *G, uint32_t n)
{
	const uint64_t all = (uint64_t)G->n_layer * G->ple;
	const float row_scale = sqrtf((float)G->ple);
	const float proj_scale = 1.0f / sqrtf((float)G->n_embd);
	const float mix_scale = 1.0f / sqrtf(2.0f);
	int rc;

	/* pl = per_layer_token_embd[tokens]: one row of n_layer * ple per token */
	if ((rc = ns_fwd_rows(f, G->ple_embd, G->ids, n, G->pl)))
		return rc;
	/* hb = x Wple_model^T   (n, all); hb is free until the first FFN and holds all */
	if ((rc = ns_fwd_matmul(f, G->ple_model_proj, 0, all, G->x, n, G->hb, all)))
		return rc;
	for (uint64_t t = 0; t < n; t++) {
		for (uint64_t i = 0; i < all; i++)
			G->hb[t * all + i] *= proj_scale;
		s_norm_rows(G->hb + t * all, G->hb + t * all, G->ple_proj_norm, G->n_layer,
			    G->ple, G->eps);
		for (uint64_t i = 0; i < all; i++)
			G->pl[t * all + i] = (G->hb[t * all + i] + G->pl[t * all + i] * row_scale) *
					     mix_scale;
	}
	return 0;
}

/* q, k, v of one token t: per-head norms, RoPE, K/V into the layer's cache. */
static void s_qkv_token(struct ns_gemma *G, struct ns_gemma_layer *y, uint32_t t, uint32_t pos)
{
	const uint64_t nq = (uint64_t)G->n_head * y->dk, nkv = (uint64_t)y->n_head_kv * y->dk;
	float *qt = G->q + t * nq, *kt = G->k + t * nkv, *vt = G->v + t * nkv;

	s_norm_rows(qt, qt, y->q_norm, G->n_head, y->dk, G->eps);
	ns_rope_angles(&y->rope, pos, G->cs);
	ns_rope_rotate(&y->rope, G->cs, qt, G->n_head, y->dk);
	if (!y->own_kv)
		return;
	if (!y->has_v) /* V is the k projection, before K's norm and rotation */
		memcpy(vt, kt, nkv * sizeof(float));
	s_norm_rows(kt, kt, y->k_norm, y->n_head_kv, y->dk, G->eps);
	if (G->v_norm)
		s_norm_rows(vt, vt, NULL, y->n_head_kv, y->dk, G->eps);
	ns_rope_rotate(&y->rope, G->cs, kt, y->n_head_kv, y->dk);
	ns_kvcache_store(y->kv, 0, pos, kt, vt);
}

static int s_attention_block(struct ns_fwd *f, struct ns_gemma *G, uint32_t l, uint32_t n)
{
	struct ns_gemma_layer *y = &G->layers[l];
	const uint32_t pos0 = f->kv->n_past;
	const uint64_t nq = (uint64_t)G->n_head * y->dk, nkv = (uint64_t)y->n_head_kv * y->dk;
	struct ns_attn a = {
		.kv = G->layers[y->kv_src].kv, .layer = 0, .q = G->q, .out = G->ao, .n_tok = n,
		.pos0 = pos0, .n_head = G->n_head, .window = y->window, .scale = G->attn_scale,
		.exact = f->attn_exact,
	};
	int rc;

	/* xb = rmsnorm(x) * attn_norm   (n, n_embd) */
	s_norm_rows(G->xb, G->x, y->attn_norm, n, G->n_embd, G->eps);
	/* q (n, nq); own K/V: k (n, nkv), v (n, nkv) */
	if ((rc = ns_fwd_matmul(f, y->wq, 0, nq, G->xb, n, G->q, nq)))
		return rc;
	if (y->own_kv && ((rc = ns_fwd_matmul(f, y->wk, 0, nkv, G->xb, n, G->k, nkv)) ||
			  (y->has_v && (rc = ns_fwd_matmul(f, y->wv, 0, nkv, G->xb, n, G->v, nkv)))))
		return rc;
	for (uint32_t t = 0; t < n; t++)
		s_qkv_token(G, y, t, pos0 + t);
	rc = ns_attn_run(ns_weights_pool(f->w), y->ws, NS_KPATH_AUTO, &a);
	if (rc < 0) {
		ns_errf(f->err, sizeof(f->err), "forward: attention of layer %u: %s", l,
			rc == -ERANGE ? "its sliding-window ring no longer holds the positions "
			"the chunk reads" : strerror(-rc));
		return rc;
	}
	/* x += rmsnorm(ao Wo^T) * post_attention_norm   (n, n_embd) */
	if ((rc = ns_fwd_matmul(f, y->wo, 0, G->n_embd, G->ao, n, G->xb2, G->n_embd)))
		return rc;
	s_norm_rows(G->xb2, G->xb2, y->attn_post_norm, n, G->n_embd, G->eps);
	s_add(G->x, G->xb2, n, G->n_embd);
	return 0;
}

static int s_ffn_block(struct ns_fwd *f, struct ns_gemma *G, uint32_t l, uint32_t n)
{
	struct ns_gemma_layer *y = &G->layers[l];
	const uint32_t ff = y->n_ff;
	int rc;

	s_norm_rows(G->xb, G->x, y->ffn_norm, n, G->n_embd, G->eps);
	/* phase 1, by neuron: hb[:, r0:r1] = gelu(xb Wgate[r0:r1]^T) * (xb Wup[r0:r1]^T) */
	for (uint32_t r0 = 0; r0 < ff; r0 += G->ffn_rows) {
		const uint32_t w = ff - r0 < G->ffn_rows ? ff - r0 : G->ffn_rows;

		if ((rc = ns_fwd_matmul(f, y->w_gate, r0, r0 + w, G->xb, n, G->hb + r0, ff)) ||
		    (rc = ns_fwd_matmul(f, y->w_up, r0, r0 + w, G->xb, n, G->hu, w)))
			return rc;
		for (uint64_t t = 0; t < n; t++) {
			float *h = G->hb + t * ff + r0;   /* (w) */
			const float *u = G->hu + t * w;   /* (w) */

			for (uint32_t i = 0; i < w; i++)
				h[i] = ns_gelu_tanh(h[i]) * u[i];
		}
	}
	/* phase 2: xb2 = hb Wdown^T   (n, n_embd) */
	if ((rc = ns_fwd_matmul(f, y->w_down, 0, G->n_embd, G->hb, n, G->xb2, G->n_embd)))
		return rc;
	if (y->moe) {
		/* xb2 = rmsnorm(xb2) * post_ffw_norm_1 + rmsnorm(moe) * post_ffw_norm_2 */
		s_norm_rows(G->xb2, G->xb2, y->ffn_post_norm_1, n, G->n_embd, G->eps);
		s_norm_rows(G->xb, G->x, y->ffn_pre_norm_2, n, G->n_embd, G->eps);
		if ((rc = ns_moe_eval_routed(f, G->moe, l, f->kv->n_past, G->x, G->xb, n, G->xm)))
			return rc;
		s_norm_rows(G->xm, G->xm, y->ffn_post_norm_2, n, G->n_embd, G->eps);
		s_add(G->xb2, G->xm, n, G->n_embd);
	}
	/* x += rmsnorm(xb2) * post_ffw_norm */
	s_norm_rows(G->xb2, G->xb2, y->ffn_post_norm, n, G->n_embd, G->eps);
	s_add(G->x, G->xb2, n, G->n_embd);
	return 0;
}

/* gemma4 E: x += rmsnorm((gelu(x Winp_gate^T) * pl[:, l]) Wproj^T) * post_norm. */
static int s_per_layer_block(struct ns_fwd *f, struct ns_gemma *G, uint32_t l, uint32_t n)
{
	struct ns_gemma_layer *y = &G->layers[l];
	const uint64_t all = (uint64_t)G->n_layer * G->ple;
	int rc;

	if ((rc = ns_fwd_matmul(f, y->ple_gate, 0, G->ple, G->x, n, G->pg, G->ple)))
		return rc;
	for (uint64_t t = 0; t < n; t++) {
		const float *in = G->pl + t * all + (uint64_t)l * G->ple; /* (ple) */

		for (uint32_t i = 0; i < G->ple; i++)
			G->pg[t * G->ple + i] = ns_gelu_tanh(G->pg[t * G->ple + i]) * in[i];
	}
	if ((rc = ns_fwd_matmul(f, y->ple_proj, 0, G->n_embd, G->pg, n, G->xb2, G->n_embd)))
		return rc;
	s_norm_rows(G->xb2, G->xb2, y->ple_post_norm, n, G->n_embd, G->eps);
	s_add(G->x, G->xb2, n, G->n_embd);
	return 0;
}

static int s_layer(struct ns_fwd *f, struct ns_gemma *G, uint32_t l, uint32_t n)
{
	const struct ns_gemma_layer *y = &G->layers[l];
	int rc;

	if ((rc = s_attention_block(f, G, l, n)) || (rc = s_ffn_block(f, G, l, n)) ||
	    (G->ple && (rc = s_per_layer_block(f, G, l, n))))
		return rc;
	if (y->out_scale)
		for (uint64_t i = 0; i < (uint64_t)n * G->n_embd; i++)
			G->x[i] *= y->out_scale[0];
	return 0;
}

int ns_gemma_eval_chunk(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
			bool all)
{
	struct ns_gemma *G = f->arch;
	const float embd_scale = sqrtf((float)G->n_embd);
	uint32_t t0;
	int rc;

	/* x = token_embd[tokens] * sqrt(n_embd)   (n, n_embd) */
	for (uint32_t t = 0; t < n; t++)
		G->ids[t] = tokens[t];
	if ((rc = ns_fwd_rows(f, G->tok_embd, G->ids, n, G->x)))
		return rc;
	for (uint64_t i = 0; i < (uint64_t)n * G->n_embd; i++)
		G->x[i] *= embd_scale;
	if (G->ple && (rc = s_per_layer_inputs(f, G, n)))
		return rc;
	for (uint32_t l = 0; l < G->n_layer; l++) {
		if ((rc = s_layer(f, G, l, n)))
			return rc;
		/* MoE prediction: l + 1's router over l's output, reported before l + 1's
		 * attention so its expert reads can start meanwhile (moe.h) */
		if (G->moe && f->moe_predict && l + 1 < G->n_layer && G->layers[l + 1].moe &&
		    (rc = ns_moe_predict(f, G->moe, l + 1, f->kv->n_past, G->x, n, NULL, G->eps)))
			return rc;
	}
	if (!logits)
		return 0;
	/* logits = (rmsnorm(x) * output_norm) Wout^T   (all ? n : 1, n_vocab) */
	t0 = all ? 0 : n - 1;
	s_norm_rows(G->xb + (uint64_t)t0 * G->n_embd, G->x + (uint64_t)t0 * G->n_embd,
		    G->output_norm, n - t0, G->n_embd, G->eps);
	rc = ns_fwd_matmul(f, G->output, 0, G->n_vocab, G->xb + (uint64_t)t0 * G->n_embd, n - t0,
		      logits, G->n_vocab);
	if (rc || !(G->softcap > 0))
		return rc;
	for (uint64_t i = 0; i < (uint64_t)(n - t0) * G->n_vocab; i++)
		logits[i] = G->softcap * tanhf(logits[i] / G->softcap);
	return 0;
}
