/* cfwd_layer.c - the layer on the device, straight-line, as llama.c runs it (x: residual
 * stream on the device, one row per token of the chunk):
 *     xb = rmsnorm(x) * attn_norm
 *     qwen35 recurrent layers: the Gated DeltaNet mixer instead (cfwd_dnet.c)
 *     q, k, v = xb Wq^T, xb Wk^T, xb Wv^T (+ biases); qwen35 gated: attn_q gives [q | gate]
 *     per head, split; qwen3/qwen35: per-head q/k norm; rope (qwen35: partial NeoX; an
 *     image call: interleaved M-RoPE at each row's own positions)
 *     K[l][pos0..], V[l][pos0..] = k, v;  ao = attention(q, K, V)   (window, sinks, GQA)
 *     qwen35 gated: ao *= sigmoid(gate)
 *     x += ao Wo^T (+ bo)
 *     xb = rmsnorm(x) * ffn_norm
 *     dense: x += (silu(xb Wg^T) * (xb Wu^T)) Wd^T
 *     MoE: router on the device, decision to the host (reported, counted, grouped), then per
 *          used expert over its tokens: gather, gate/up (+ biases), act, down (+ bias),
 *          weighted scatter into (token, slot) rows, slots summed in routing order
 *          (cfwd_moe_routed, gemma4's MoE layers too); qwen35moe: plus
 *          sigmoid(xb . gate_inp_shexp) * shared_expert(xb); x += that
 *  * Each "x += ..." is left pending in xb2 and done by the next RMSNorm's launch
 * (ns_cuda_add_rmsnorm: the same bits as the add and the norm apart, one launch fewer).
 * The host waits only for the router decision of a MoE layer (and cfwd_eval.c for the
 * logits). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "cfwd_internal.h"

static void s_rope_of(const struct cfwd *c, struct ns_cuda_rope *r)
{
	const struct ns_rope *h = &c->L->rope;

	*r = (struct ns_cuda_rope){ .n_dims = h->n_dims, .neox = h->neox,
				    .freq_base = h->freq_base, .freq_scale = h->freq_scale,
				    .dev_freq_factors = c->rope_freqs,
				    .ext_factor = h->ext_factor, .attn_factor = h->attn_factor,
				    .corr_dims = { h->corr_dims[0], h->corr_dims[1] } };
}

int cfwd_norm(struct ns_fwd *f, struct cfwd *c, const float *w, uint32_t n)
{
	const struct ns_llama *L = c->L;

	if (c->res_pending) {
		c->res_pending = false;
		CFWD_TRY("residual + rmsnorm", ns_cuda_add_rmsnorm(c->xb, c->x, c->xb2, w, L->n_embd,
								n, L->eps, c->cs));
	} else {
		CFWD_TRY("rmsnorm", ns_cuda_rmsnorm(c->xb, c->x, w, L->n_embd, n, L->eps, c->cs));
	}
	cfwd_mark(c, CFWD_P_NORM);
	return 0;
}

/* q and k of n rows rotated in place at their positions: an image call's rows each at its own
 * (t, h, w) (uploaded by cfwd_eval.c); text at (p, p, p), past the images of the sequence
 * (rope_delta). */
static int s_rope_rows(struct ns_fwd *f, struct cfwd *c, const struct ns_cuda_rope *r,
		       uint32_t n)
{
	const struct ns_llama *L = c->L;
	const uint32_t *sec = c->hp->rope_sections;
	const int64_t p0 = (int64_t)f->kv->n_past + f->rope_delta;

	CFWD_TRY("rope", f->mm ? ns_cuda_rope_mrope(r, c->q, n, L->n_head, L->dk, c->mpos, sec,
						    c->cs) :
				 ns_cuda_rope(r, c->q, n, L->n_head, L->dk, p0, c->cs));
	CFWD_TRY("rope", f->mm ? ns_cuda_rope_mrope(r, c->k, n, L->n_head_kv, L->dk, c->mpos, sec,
						    c->cs) :
				 ns_cuda_rope(r, c->k, n, L->n_head_kv, L->dk, p0, c->cs));
	cfwd_mark(c, CFWD_P_ROPE);
	return 0;
}

/* Attention of layer l over an f16 / q8_0 cache (nscuda.h "typed KV cache"; K, V: the layer's
 * rows): q and k rotated at pos0 (a graph's at *dev_pos), the chunk's k and v rows stored
 * converted as the CPU's cache stores them (kvcache.c: half to nearest even, ggml's Q8_0),
 * then ao (n, n_head * dv) over the rows read widened to float. */
static int s_attend_typed(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n,
			  const struct ns_cuda_rope *r, void *K, void *V)
{
	const struct ns_llama *L = c->L;
	const uint32_t pos0 = f->kv->n_past;
	const int64_t *dp = c->capturing ? c->dev_pos : NULL;
	const struct ns_cuda_kv kv = cfwd_kv(c, K, V, c->kv_dim_k, c->kv_dim_v);
	int rc;

	if (dp) { /* a graph: text at its own position only (cfwd_eval.c) */
		CFWD_TRY("rope", ns_cuda_rope_at(r, c->q, L->n_head, L->dk, dp, c->cs));
		CFWD_TRY("rope", ns_cuda_rope_at(r, c->k, L->n_head_kv, L->dk, dp, c->cs));
		cfwd_mark(c, CFWD_P_ROPE);
	} else if ((rc = s_rope_rows(f, c, r, n))) {
		return rc;
	}
	CFWD_TRY("KV store", ns_cuda_kv_store(&kv, c->k, c->kv_dim_k, c->v, c->kv_dim_v, n, pos0,
					      dp, c->cs));
	cfwd_mark(c, CFWD_P_KV);
	CFWD_TRY("attention", ns_cuda_attention_kv(c->q, &kv, n, pos0, dp, dp ? f->n_ctx : 0,
						L->n_head, L->n_head_kv, L->dk, L->dv,
						L->attn_scale, L->layers[l].window,
						c->dl[l].sinks, c->ao, c->attn_ws, c->cs));
	cfwd_mark(c, CFWD_P_ATTN);
	return 0;
}

int cfwd_attention_block(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n)
{
	const struct ns_llama *L = c->L;
	const struct ns_llama_layer *y = &L->layers[l];
	const struct cfwd_dlayer *d = &c->dl[l];
	const uint32_t pos0 = f->kv->n_past;
	const uint64_t nq = (uint64_t)L->n_head * L->dk, nk = c->kv_dim_k, nv = c->kv_dim_v;
	/* this layer's rows of the cache: (n_ctx, nk) and (n_ctx, nv) elements of its types */
	void *Kb = (uint8_t *)c->kv_k + (uint64_t)y->kv_slot * f->n_ctx * c->kv_row_k;
	void *Vb = (uint8_t *)c->kv_v + (uint64_t)y->kv_slot * f->n_ctx * c->kv_row_v;
	float *Kl = Kb, *Vl = Vb; /* the f32 cache's view */
	const bool typed = c->kv_tk != NS_CUDA_KV_F32 || c->kv_tv != NS_CUDA_KV_F32;
	float *qdst = L->gated_attn ? c->qg : c->q; /* gated: [q | gate] per head, split below */
	struct ns_cuda_rope r;
	int rc;

	/* x += xb2 (the previous layer's pending residual); xb = rmsnorm(x) * attn_norm */
	if ((rc = cfwd_norm(f, c, d->attn_norm, n)))
		return rc;
	if (y->recurrent) /* qwen35: the Gated DeltaNet mixer instead (cfwd_dnet.c) */
		return cfwd_dnet_block(f, c, l, n);
	/* q (n, nq), k (n, nk), v (n, nv); one token: side by side when resident */
	if (n == 1) {
		const uint32_t qkv[3] = { y->wq, y->wk, y->wv };
		float *const out[3] = { qdst, c->k, c->v };

		if ((rc = cfwd_matmul_par(f, 3, qkv, c->xb, out)))
			return rc;
	} else if ((rc = cfwd_matmul(f, y->wq, 0, L->gated_attn ? 2 * nq : nq, c->xb, n, qdst,
				     L->gated_attn ? 2 * nq : nq)) ||
		   (rc = cfwd_matmul(f, y->wk, 0, nk, c->xb, n, c->k, nk)) ||
		   (rc = cfwd_matmul(f, y->wv, 0, nv, c->xb, n, c->v, nv))) {
		return rc;
	}
	if (L->gated_attn)
		CFWD_TRY("gate split", ns_cuda_split_gate(c->q, c->gate, c->qg, L->n_head, L->dk, n,
							c->cs));
	if (d->bq)
		CFWD_TRY("bias", ns_cuda_add_rows(c->q, nq, d->bq, nq, n, c->cs));
	if (d->bk)
		CFWD_TRY("bias", ns_cuda_add_rows(c->k, nk, d->bk, nk, n, c->cs));
	if (d->bv)
		CFWD_TRY("bias", ns_cuda_add_rows(c->v, nv, d->bv, nv, n, c->cs));
	cfwd_mark(c, CFWD_P_ATTN_MM);
	if (d->q_norm) { /* qwen3: per-head RMS norm before rope */
		CFWD_TRY("q norm", ns_cuda_rmsnorm(c->q, c->q, d->q_norm, L->dk, n * L->n_head,
						L->eps, c->cs));
		CFWD_TRY("k norm", ns_cuda_rmsnorm(c->k, c->k, d->k_norm, L->dk, n * L->n_head_kv,
						L->eps, c->cs));
		cfwd_mark(c, CFWD_P_NORM);
	}
	s_rope_of(c, &r);
	if (typed) { /* f16 / q8_0 rows: stored converted, read widened */
		if ((rc = s_attend_typed(f, c, l, n, &r, Kb, Vb)))
			return rc;
	} else if (n == 1 && !f->mm && !f->rope_delta) {
		/* a text token at its own position: the fused decode launch (graphs too); an image
		 * call's rows and text after an image (its M-RoPE offset) take the general path */
		/* one launch: q, k rotated at pos0; K[l][pos0] = k, V[l][pos0] = v (a graph reads
		 * the position from dev_pos when replayed) */
		CFWD_TRY("rope + KV store",
		      ns_cuda_rope_kv_store(&r, c->q, L->n_head, c->k, L->n_head_kv, L->dk, c->v,
					    nv, Kl, nk, Vl, nv, pos0,
					    c->capturing ? c->dev_pos : NULL, c->cs));
		cfwd_mark(c, CFWD_P_ROPE);
		/* ao (1, n_head * dv) */
		if (c->capturing)
			CFWD_TRY("attention",
			      ns_cuda_attention_at(c->q, Kl, nk, Vl, nv, c->dev_pos, f->n_ctx,
						   L->n_head, L->n_head_kv, L->dk, L->dv,
						   L->attn_scale, y->window, d->sinks, c->ao,
						   c->attn_ws, c->cs));
		else
			CFWD_TRY("attention",
			      ns_cuda_attention(c->q, Kl, nk, Vl, nv, 1, pos0, L->n_head,
						L->n_head_kv, L->dk, L->dv, L->attn_scale,
						y->window, d->sinks, c->ao, c->attn_ws, c->cs));
		cfwd_mark(c, CFWD_P_ATTN);
	} else {
		if ((rc = s_rope_rows(f, c, &r, n)))
			return rc;
		/* cache rows pos0 .. pos0 + n - 1 */
		CFWD_TRY("KV copy", ns_cuda_d2d_async(Kl + (uint64_t)pos0 * nk, c->k,
						   (uint64_t)n * nk * 4, c->cs));
		CFWD_TRY("KV copy", ns_cuda_d2d_async(Vl + (uint64_t)pos0 * nv, c->v,
						   (uint64_t)n * nv * 4, c->cs));
		cfwd_mark(c, CFWD_P_KV);
		/* ao (n, n_head * dv) */
		CFWD_TRY("attention", ns_cuda_attention(c->q, Kl, nk, Vl, nv, n, pos0, L->n_head,
						     L->n_head_kv, L->dk, L->dv, L->attn_scale,
						     y->window, d->sinks, c->ao, c->attn_ws,
						     c->cs));
		cfwd_mark(c, CFWD_P_ATTN);
	}
	if (L->gated_attn) /* ao *= sigmoid(gate) */
		CFWD_TRY("output gate", ns_cuda_mul_sigmoid(c->ao, c->gate, n * nq, c->cs));
	/* x += ao Wo^T (+ bo)   (n, n_embd) */
	rc = cfwd_matmul(f, y->wo, 0, L->n_embd, c->ao, n, c->xb2, L->n_embd);
	if (rc)
		return rc;
	if (d->bo)
		CFWD_TRY("bias", ns_cuda_add_rows(c->xb2, L->n_embd, d->bo, L->n_embd, n, c->cs));
	cfwd_mark(c, CFWD_P_ATTN_MM);
	c->res_pending = true; /* x += xb2 in the FFN's RMSNorm */
	return 0;
}

/* Host side of a MoE layer's decision: order = slots grouped by expert (tokens ascending). */
static void s_group(struct cfwd *c, const struct ns_moe *mo, uint32_t n)
{
	const uint32_t E = mo->n_expert, K = mo->n_used, n_slot = n * K;

	memset(c->h_start, 0, (E + 1) * sizeof(*c->h_start));
	for (uint32_t i = 0; i < n_slot; i++)
		c->h_start[c->h_sel[i] + 1]++;
	for (uint32_t e = 0; e < E; e++) {
		c->h_start[e + 1] += c->h_start[e];
		c->h_fill[e] = c->h_start[e];
	}
	for (uint32_t i = 0; i < n_slot; i++) {
		const uint32_t j = c->h_fill[c->h_sel[i]]++;

		c->h_slot[j] = (int32_t)i;
		c->h_tok[j] = (int32_t)(i / K);
	}
}

/* g = act(g, u) of an expert over its m rows of F: GEGLU (gemma4) with any row strides,
 * SwiGLU / swiglu_oai on packed rows (the split gate/up of qwen3moe, gpt-oss, qwen35moe). */
static int s_expert_act(struct ns_fwd *f, struct cfwd *c, const struct ns_moe *mo, float *g,
			uint64_t ldg, const float *u, uint64_t ldu, uint32_t m)
{
	const uint64_t F = mo->n_ff_exp;

	if (mo->gelu) {
		CFWD_TRY("activation", ns_cuda_geglu(g, ldg, u, ldu, F, m, c->cs));
		return 0;
	}
	if (ldg != F || ldu != F) /* no file stacks gate and up with a SwiGLU: not written */
		return cfwd_fail(f, "activation of stacked gate/up experts", -ENOTSUP);
	CFWD_TRY("activation", ns_cuda_swiglu(g, u, (uint64_t)m * F, mo->oai, c->cs));
	return 0;
}

int cfwd_moe_routed(struct ns_fwd *f, struct cfwd *c, const struct ns_moe *mo, uint32_t l,
		    const float *xr, const float *xe, uint32_t n, float *out)
{
	const struct ns_moe_layer *y = &mo->layers[l];
	const struct cfwd_dlayer *d = &c->dl[l];
	const uint32_t E = mo->n_expert, K = mo->n_used, D = mo->n_embd, F = mo->n_ff_exp;
	uint64_t *hits = f->expert_hits + (uint64_t)l * E;
	int rc;

	if (y->router_scale) {
		/* gemma4: the router reads rmsnorm(xr) (no weight) / sqrt(n_embd) * router_scale,
		 * in m_xg (free until the first gather) */
		CFWD_TRY("router norm", ns_cuda_rmsnorm(c->m_xg, xr, NULL, D, n, mo->eps, c->cs));
		CFWD_TRY("router scale", ns_cuda_scale_rows(c->m_xg, D, 1.0f / sqrtf((float)D),
							  d->router_scale, D, n, c->cs));
		cfwd_mark(c, CFWD_P_NORM);
		xr = c->m_xg;
	}
	/* router: logits (n, E) (+ bias), then each token's K experts and weights */
	rc = cfwd_matmul(f, y->router, 0, E, xr, n, c->m_logits, E);
	if (rc)
		return rc;
	if (d->router_b)
		CFWD_TRY("bias", ns_cuda_add_rows(c->m_logits, E, d->router_b, E, n, c->cs));
	CFWD_TRY("router", ns_cuda_router_topk(c->m_logits, n, E, K, mo->softmax_first, mo->norm_w,
					    mo->w_scale, c->m_sel, c->m_w, c->cs));
	CFWD_TRY("router", ns_cuda_stream_sync(c->cs));
	CFWD_TRY("router", ns_cuda_d2h(c->h_sel, c->m_sel, (uint64_t)n * K * 4));
	CFWD_TRY("router", ns_cuda_d2h(c->h_w, c->m_w, (uint64_t)n * K * 4));
	for (uint32_t i = 0; i < n * K; i++) {
		if (c->h_sel[i] < 0 || (uint32_t)c->h_sel[i] >= E) {
			ns_errf(f->err, sizeof(f->err), "forward: the GPU router chose expert %d "
				"of %u in layer %u", c->h_sel[i], E, l);
			return -EIO;
		}
	}
	if (f->on_route) {
		const struct ns_fwd_route r = {
			.layer = l, .pos0 = f->kv->n_past, .n_tok = n, .n_used = K, .n_expert = E,
			.experts = c->h_sel, .weights = c->h_w,
		};

		rc = f->on_route(f->route_user, &r);
		if (rc < 0) {
			ns_errf(f->err, sizeof(f->err), "forward: routing callback of layer %u "
				"failed: %s", l, strerror(-rc));
			return rc;
		}
	}
	for (uint32_t i = 0; i < n * K; i++)
		hits[c->h_sel[i]]++;
	s_group(c, mo, n);
	/* in c->cs, before the gathers and scatters that read them (pageable: staged at once) */
	CFWD_TRY("upload", ns_cuda_copy_h2d_async(c->m_tok, c->h_tok, (uint64_t)n * K * 4, c->cs,
					       NULL));
	CFWD_TRY("upload", ns_cuda_copy_h2d_async(c->m_slot, c->h_slot, (uint64_t)n * K * 4, c->cs,
					       NULL));
	cfwd_mark(c, CFWD_P_ROUTER);
	for (uint32_t e = 0; e < E; e++) {
		const uint32_t a = c->h_start[e], mt = c->h_start[e + 1] - a;
		const uint64_t g0 = (uint64_t)e * F, d0 = (uint64_t)e * D;
		uint64_t ldh = F; /* hb's row stride */

		if (mt == 0)
			continue;
		/* xg (mt, D) = the rows of xe routed to e */
		CFWD_TRY("gather", ns_cuda_gather_rows(c->m_xg, xe, c->m_tok + a, mt, D, c->cs));
		if (y->fused) {
			/* gemma4: gate and up of e stacked (ffn_gate_up_exps): one request, rows
			 * ascending as the stream has them; hb (mt, 2F) = xg Wgu_e^T, then
			 * hb[:, :F] = act(hb[:, :F], hb[:, F:]) in place, read F-wide by down */
			ldh = 2ull * F;
			if ((rc = cfwd_matmul(f, y->gate, 2 * g0, 2 * g0 + ldh, c->m_xg, mt, c->m_hb,
					      ldh)) ||
			    (rc = s_expert_act(f, c, mo, c->m_hb, ldh, c->m_hb + F, ldh, mt)))
				return rc;
		} else {
			/* hb (mt, F) = act(xg Wg_e^T + bg, xg Wu_e^T + bu) */
			if ((rc = cfwd_matmul(f, y->gate, g0, g0 + F, c->m_xg, mt, c->m_hb, F)) ||
			    (rc = cfwd_matmul(f, y->up, g0, g0 + F, c->m_xg, mt, c->m_hu, F)))
				return rc;
			if (d->gate_b)
				CFWD_TRY("bias", ns_cuda_add_rows(c->m_hb, F, d->gate_b + g0, F, mt,
								c->cs));
			if (d->up_b)
				CFWD_TRY("bias", ns_cuda_add_rows(c->m_hu, F, d->up_b + g0, F, mt,
								c->cs));
			if ((rc = s_expert_act(f, c, mo, c->m_hb, F, c->m_hu, F, mt)))
				return rc;
		}
		/* yd (mt, D) = hb Wd_e^T + bd, or (hb Wd_e^T) * down_scale[e] (gemma4) */
		rc = cfwd_matmul_ld(f, y->down, d0, d0 + D, c->m_hb, ldh, mt, c->m_yd, D);
		if (rc)
			return rc;
		if (d->down_b)
			CFWD_TRY("bias", ns_cuda_add_rows(c->m_yd, D, d->down_b + d0, D, mt, c->cs));
		if (y->down_scale)
			CFWD_TRY("expert scale", ns_cuda_scale(c->m_yd, (uint64_t)mt * D, 1.0f,
							    d->down_scale + e, c->cs));
		/* ys[t][s] = w[t][s] * yd */
		CFWD_TRY("scatter", ns_cuda_scatter_scaled(c->m_ys, c->m_yd, c->m_slot + a, c->m_w, mt,
							D, c->cs));
		cfwd_mark(c, CFWD_P_EXPERT);
	}
	/* out[t] = ys[t][0] + ys[t][1] + ... in routing order */
	CFWD_TRY("slot sum", ns_cuda_sum_slots(out, c->m_ys, n, K, D, c->cs));
	cfwd_mark(c, CFWD_P_ELEM);
	return 0;
}

/* x += moe(xb), pending in xb2: the routed experts, then qwen35moe's shared expert. */
static int s_moe_block(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n)
{
	const struct ns_moe *mo = c->L->moe;
	const struct ns_moe_layer *y = &mo->layers[l];
	const struct cfwd_dlayer *d = &c->dl[l];
	const uint32_t D = mo->n_embd;
	int rc;

	/* xb2[t] = the routed experts of xb; x += xb2 in the next RMSNorm */
	if ((rc = cfwd_moe_routed(f, c, mo, l, c->xb, c->xb, n, c->xb2)))
		return rc;
	if (y->shexp.n_ff) { /* qwen35moe: xb2 += sigmoid(xb . gate_inp_shexp) * shexp(xb) */
		const uint32_t Fs = y->shexp.n_ff;

		if ((rc = cfwd_matmul(f, y->shexp.gate, 0, Fs, c->xb, n, c->m_hb, Fs)) ||
		    (rc = cfwd_matmul(f, y->shexp.up, 0, Fs, c->xb, n, c->m_hu, Fs)))
			return rc;
		CFWD_TRY("activation", ns_cuda_swiglu(c->m_hb, c->m_hu, (uint64_t)n * Fs, false,
						   c->cs));
		rc = cfwd_matmul(f, y->shexp.down, 0, D, c->m_hb, n, c->m_yd, D);
		if (rc)
			return rc;
		CFWD_TRY("shared expert", ns_cuda_add_sigmoid_scaled(c->xb2, c->m_yd, c->xb,
								   d->shexp_gate, D, n, c->cs));
		cfwd_mark(c, CFWD_P_EXPERT);
	}
	c->res_pending = true;
	return 0;
}

int cfwd_ffn_block(struct ns_fwd *f, struct cfwd *c, uint32_t l, uint32_t n)
{
	const struct ns_llama *L = c->L;
	const struct ns_llama_layer *y = &L->layers[l];
	const uint64_t ff = L->n_ff;
	int rc;

	/* x += xb2 (attention's residual); xb = rmsnorm(x) * ffn_norm   (n, n_embd) */
	if ((rc = cfwd_norm(f, c, c->dl[l].ffn_norm, n)))
		return rc;
	if (L->moe)
		return s_moe_block(f, c, l, n);
	/* hb (n, n_ff) = silu(xb Wg^T) * (xb Wu^T); one token: side by side when resident */
	if (n == 1) {
		const uint32_t gu[2] = { y->w_gate, y->w_up };
		float *const out[2] = { c->hb, c->hu };

		if ((rc = cfwd_matmul_par(f, 2, gu, c->xb, out)))
			return rc;
	} else if ((rc = cfwd_matmul(f, y->w_gate, 0, ff, c->xb, n, c->hb, ff)) ||
		   (rc = cfwd_matmul(f, y->w_up, 0, ff, c->xb, n, c->hu, ff))) {
		return rc;
	}
	cfwd_mark(c, CFWD_P_FFN_MM);
	CFWD_TRY("swiglu", ns_cuda_swiglu(c->hb, c->hu, (uint64_t)n * ff, false, c->cs));
	cfwd_mark(c, CFWD_P_ELEM);
	/* x += hb Wd^T   (n, n_embd) */
	rc = cfwd_matmul(f, y->w_down, 0, L->n_embd, c->hb, n, c->xb2, L->n_embd);
	if (rc)
		return rc;
	cfwd_mark(c, CFWD_P_FFN_MM);
	c->res_pending = true; /* x += xb2 in the next RMSNorm */
	return 0;
}
