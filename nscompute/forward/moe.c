/* moe.c - see moe.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward_impl.h"
#include "ggml_type.h"
#include "moe.h"
#include "ops.h"

#define S_OAI_ALPHA 1.702f
#define S_OAI_LIMIT 7.0f
#define S_WSUM_MIN 6.103515625e-5f /* smallest normal f16: llama.cpp's clamp of the k-sum */





/* ---------------------------------------------------------------- setup ---------------- */

void ns_moe_destroy(struct ns_moe **pm)
{
	struct ns_moe *m;

	if (!pm || !*pm)
		return;
	m = *pm;
	free(m->layers);
	free(m->logits);
	free(m->sel);
	free(m->wts);
	free(m->taken);
	free(m->start);
	free(m->fill);
	free(m->order);
	free(m->xg);
	free(m->hb);
	free(m->hu);
	free(m->yd);
	free(m->ys);
	free(m->sh);
	free(m->shu);
	free(m->xr);
	free(m->hg);
	free(m);
	*pm = NULL;
}

/* calloc of a * b * c elements of sz bytes; NULL when the size overflows or memory is out. */
static void *s_calloc(uint64_t a, uint64_t b, uint64_t c, size_t sz)
{
	uint64_t n;

	if (ns_mul_u64_overflow(a, b, &n) || ns_mul_u64_overflow(n, c, &n) ||
	    ns_mul_u64_overflow(n, sz, &n) || n > SIZE_MAX)
		return NULL;
	return calloc(1, n ? (size_t)n : 1);
}

/* The tensors of layer l: the table's reads (all checked when the model was bound). */
static void s_layer_init(const struct ns_fwd *f, struct ns_moe_layer *y, uint32_t l)
{
	const int32_t i = (int32_t)l;

	y->router = (uint32_t)ns_arch_tensor(f->am, i, NS_T_FFN_GATE_INP);
	y->gate = (uint32_t)ns_arch_tensor(f->am, i, NS_T_FFN_GATE_EXPS);
	y->up = (uint32_t)ns_arch_tensor(f->am, i, NS_T_FFN_UP_EXPS);
	y->fused = ns_arch_tensor(f->am, i, NS_T_FFN_GATE_UP_EXPS) >= 0;
	if (y->fused)
		y->gate = y->up = (uint32_t)ns_arch_tensor(f->am, i, NS_T_FFN_GATE_UP_EXPS);
	y->router_scale = ns_held_get(f->held, i, NS_T_FFN_GATE_INP_SCALE);
	y->down_scale = ns_held_get(f->held, i, NS_T_FFN_DOWN_EXPS_SCALE);
	y->down = (uint32_t)ns_arch_tensor(f->am, i, NS_T_FFN_DOWN_EXPS);
	y->router_b = ns_held_get(f->held, i, NS_T_FFN_GATE_INP_B);
	y->gate_b = ns_held_get(f->held, i, NS_T_FFN_GATE_EXPS_B);
	y->up_b = ns_held_get(f->held, i, NS_T_FFN_UP_EXPS_B);
	y->down_b = ns_held_get(f->held, i, NS_T_FFN_DOWN_EXPS_B);
	y->shexp_gate = ns_held_get(f->held, i, NS_T_FFN_GATE_INP_SHEXP);
	if (f->am->layer[l].kinds & NS_LAYER_SHEXP) {
		y->shexp.gate = (uint32_t)ns_arch_tensor(f->am, i, NS_T_FFN_GATE_SHEXP);
		y->shexp.up = (uint32_t)ns_arch_tensor(f->am, i, NS_T_FFN_UP_SHEXP);
		y->shexp.down = (uint32_t)ns_arch_tensor(f->am, i, NS_T_FFN_DOWN_SHEXP);
		y->shexp.n_ff = (uint32_t)f->am->layer[l].dim[NS_DIM_FF_SHEXP];
	}
}

/* Scratch for n_batch tokens: -ENOMEM when a size overflows or memory is out. */
static int s_scratch_init(struct ns_moe *moe, uint32_t n_batch)
{
	const uint64_t nb = n_batch, E = moe->n_expert, K = moe->n_used;
	bool fused = false, scaled = false;

	for (uint32_t l = 0; l < moe->n_layer; l++) {
		fused = fused || moe->layers[l].fused;
		scaled = scaled || moe->layers[l].router_scale;
	}
	if ((fused && !(moe->hg = s_calloc(nb, 2ull * moe->n_ff_exp, 1, sizeof(float)))) ||
	    (scaled && !(moe->xr = s_calloc(nb, moe->n_embd, 1, sizeof(float)))))
		return -ENOMEM;

	if (!(moe->logits = s_calloc(nb, E, 1, sizeof(float))) ||
	    !(moe->sel = s_calloc(nb, K, 1, sizeof(int32_t))) ||
	    !(moe->wts = s_calloc(nb, K, 1, sizeof(float))) ||
	    !(moe->taken = s_calloc(E, 1, 1, 1)) ||
	    !(moe->start = s_calloc(E + 1, 1, 1, sizeof(uint32_t))) ||
	    !(moe->fill = s_calloc(E, 1, 1, sizeof(uint32_t))) ||
	    !(moe->order = s_calloc(nb, K, 1, sizeof(uint32_t))) ||
	    !(moe->xg = s_calloc(nb, moe->n_embd, 1, sizeof(float))) ||
	    !(moe->hb = s_calloc(nb, moe->n_ff_exp, 1, sizeof(float))) ||
	    !(moe->hu = s_calloc(nb, moe->ffn_rows, 1, sizeof(float))) ||
	    !(moe->yd = s_calloc(nb, moe->n_embd, 1, sizeof(float))) ||
	    !(moe->ys = s_calloc(nb, K, moe->n_embd, sizeof(float))) ||
	    !(moe->sh = s_calloc(nb, moe->n_ff_shexp, 1, sizeof(float))) ||
	    !(moe->shu = s_calloc(nb, moe->shexp_rows, 1, sizeof(float))))
		return -ENOMEM;
	return 0;
}

int ns_moe_new(struct ns_fwd *f, uint32_t n_batch, uint32_t ffn_rows, struct ns_moe **out,
	       char *err, size_t errlen)
{
	const struct ns_arch_model *am = f->am;
	struct ns_moe *moe;
	int rc = 0;

	*out = NULL;
	if ((uint64_t)n_batch * am->hp.n_expert_used > UINT32_MAX) {
		ns_errf(err, errlen, "forward: n_batch %u x %u experts per token is too many "
			"routing slots", n_batch, am->hp.n_expert_used);
		return -EINVAL;
	}
	moe = calloc(1, sizeof(*moe));
	if (!moe || !(moe->layers = calloc(am->n_layer, sizeof(*moe->layers)))) {
		free(moe);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	moe->n_layer = am->n_layer;
	moe->n_embd = (uint32_t)am->dim[NS_DIM_EMBD];
	moe->n_ff_exp = (uint32_t)am->dim[NS_DIM_FF_EXP];
	moe->n_expert = (uint32_t)am->dim[NS_DIM_EXPERT];
	moe->n_used = am->hp.n_expert_used;
	moe->ffn_rows = ffn_rows && ffn_rows < moe->n_ff_exp ? ffn_rows : moe->n_ff_exp;
	moe->softmax_first = am->arch->router == NS_ROUTER_SOFTMAX;
	moe->oai = am->arch->ffn_act == NS_FFN_SWIGLU_OAI;
	moe->gelu = am->arch->ffn_act == NS_FFN_GEGLU;
	moe->eps = (float)am->hp.rms_eps;
	moe->norm_w = am->moe_norm_w;
	moe->n_ff_shexp = (uint32_t)am->dim[NS_DIM_FF_SHEXP];
	moe->shexp_rows = ffn_rows && ffn_rows < moe->n_ff_shexp ? ffn_rows : moe->n_ff_shexp;
	moe->w_scale = am->moe_w_scale;
	for (uint32_t l = 0; l < moe->n_layer; l++)
		s_layer_init(f, &moe->layers[l], l);
	rc = s_scratch_init(moe, n_batch);
	if (rc == 0 && !(f->expert_hits = s_calloc(moe->n_layer, moe->n_expert, 1,
						   sizeof(uint64_t))))
		rc = -ENOMEM;
	if (rc < 0) {
		ns_errf(err, errlen, "forward: cannot allocate MoE scratch for n_batch %u: %s",
			n_batch, strerror(-rc));
		ns_moe_destroy(&moe);
		return rc;
	}
	f->n_moe_layer = moe->n_layer;
	f->n_expert = moe->n_expert;
	*out = moe;
	return 0;
}

/* ---------------------------------------------------------------- forward -------------- */

void ns_moe_route_token(float *lg, uint32_t E, uint32_t K, bool softmax_first, bool norm_w,
			float w_scale, uint8_t *taken, int32_t *sel, float *w)
{
	if (softmax_first)
		ns_softmax(lg, E); /* scores are probabilities */
	memset(taken, 0, E);
	for (uint32_t s = 0; s < K; s++) {
		uint32_t best = E;

		for (uint32_t e = 0; e < E; e++)
			if (!taken[e] && (best == E || lg[e] > lg[best]))
				best = e;
		taken[best] = 1;
		sel[s] = (int32_t)best;
		w[s] = lg[best];
	}
	if (!softmax_first)
		ns_softmax(w, K); /* weights: softmax of the chosen logits */
	if (norm_w) {
		double sum = 0.0;
		float fs;

		for (uint32_t s = 0; s < K; s++)
			sum += (double)w[s];
		fs = (float)sum;
		if (!(fs >= S_WSUM_MIN))
			fs = S_WSUM_MIN;
		for (uint32_t s = 0; s < K; s++)
			w[s] /= fs;
	}
	if (w_scale != 1.0f)
		for (uint32_t s = 0; s < K; s++)
			w[s] *= w_scale;
}

static void s_route(struct ns_moe *moe, float *lg, int32_t *sel, float *w)
{
	ns_moe_route_token(lg, moe->n_expert, moe->n_used, moe->softmax_first, moe->norm_w,
			   moe->w_scale, moe->taken, sel, w);
}

/* h = act(g, u) in place of g: (n) */
static void s_act(const struct ns_moe *moe, float *g, const float *u, uint32_t n)
{
	if (moe->gelu) {
		for (uint32_t i = 0; i < n; i++)
			g[i] = ns_gelu_tanh(g[i]) * u[i];
		return;
	}
	if (!moe->oai) {
		for (uint32_t i = 0; i < n; i++)
			g[i] = ns_silu(g[i]) * u[i];
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		const float x = S_OAI_LIMIT < g[i] ? S_OAI_LIMIT : g[i];
		const float y = u[i] < -S_OAI_LIMIT ? -S_OAI_LIMIT :
				S_OAI_LIMIT < u[i] ? S_OAI_LIMIT : u[i];

		g[i] = x / (1.0f + expf(S_OAI_ALPHA * (-x))) * (y + 1.0f);
	}
}

static void s_add_row(float *y, const float *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		y[i] += b[i];
}

/* yd: (m, n_embd) = expert e of layer y applied to xg: (m, n_embd). */
static int s_expert(struct ns_fwd *f, struct ns_moe *moe, const struct ns_moe_layer *y,
		    uint32_t e, uint32_t m)
{
	const uint32_t F = moe->n_ff_exp, D = moe->n_embd;
	const uint64_t g0 = (uint64_t)e * F; /* first row of expert e in gate/up */
	const uint64_t d0 = (uint64_t)e * D; /* first row of expert e in down */
	int rc;

	if (y->fused) {
		/* gate and up of expert e in one request, rows ascending as the stream has them:
		 * hg = xg Wgu_e^T (m, 2F), hb = act(hg[:, :F], hg[:, F:]) */
		if ((rc = ns_fwd_matmul(f, y->gate, 2 * g0, 2 * g0 + 2ull * F, moe->xg, m, moe->hg,
					2ull * F)))
			return rc;
		for (uint32_t t = 0; t < m; t++) {
			float *h = moe->hb + (uint64_t)t * F;
			const float *gu = moe->hg + (uint64_t)t * 2 * F;

			memcpy(h, gu, F * sizeof(float));
			s_act(moe, h, gu + F, F);
		}
		goto down;
	}
	/* phase 1, by neuron window: hb[:, r0:r0+w] = act(xg Wg_e^T + bg, xg Wu_e^T + bu) */
	for (uint32_t r0 = 0; r0 < F; r0 += moe->ffn_rows) {
		const uint32_t w = F - r0 < moe->ffn_rows ? F - r0 : moe->ffn_rows;

		if ((rc = ns_fwd_matmul(f, y->gate, g0 + r0, g0 + r0 + w, moe->xg, m, moe->hb + r0,
				   F)) ||
		    (rc = ns_fwd_matmul(f, y->up, g0 + r0, g0 + r0 + w, moe->xg, m, moe->hu, w)))
			return rc;
		for (uint32_t t = 0; t < m; t++) {
			float *h = moe->hb + (uint64_t)t * F + r0; /* (w) */
			float *u = moe->hu + (uint64_t)t * w;      /* (w) */

			if (y->gate_b)
				s_add_row(h, y->gate_b + g0 + r0, w);
			if (y->up_b)
				s_add_row(u, y->up_b + g0 + r0, w);
			s_act(moe, h, u, w);
		}
	}
down:
	/* phase 2: yd = hb Wd_e^T + bd, or (hb Wd_e^T) * down_scale[e]   (m, n_embd) */
	rc = ns_fwd_matmul(f, y->down, d0, d0 + D, moe->hb, m, moe->yd, D);
	if (rc == 0 && y->down_b)
		for (uint32_t t = 0; t < m; t++)
			s_add_row(moe->yd + (uint64_t)t * D, y->down_b + d0, D);
	if (rc == 0 && y->down_scale)
		for (uint64_t i = 0; i < (uint64_t)m * D; i++)
			moe->yd[i] *= y->down_scale[e];
	return rc;
}

/* order = slot ids grouped by expert (tokens ascending within an expert), start = offsets. */
static void s_group(struct ns_moe *moe, uint32_t n)
{
	const uint32_t E = moe->n_expert, n_slot = n * moe->n_used;

	memset(moe->start, 0, (E + 1) * sizeof(*moe->start));
	for (uint32_t i = 0; i < n_slot; i++)
		moe->start[moe->sel[i] + 1]++;
	for (uint32_t e = 0; e < E; e++) {
		moe->start[e + 1] += moe->start[e];
		moe->fill[e] = moe->start[e];
	}
	for (uint32_t i = 0; i < n_slot; i++)
		moe->order[moe->fill[moe->sel[i]]++] = i;
}

void ns_moe_shexp_add(float *o, const float *sh, const float *x, const float *gw, uint32_t D)
{
	float dot = 0.0f, g;

	for (uint32_t c = 0; c < D; c++)
		dot += x[c] * gw[c];
	g = 1.0f / (1.0f + expf(-dot));
	for (uint32_t c = 0; c < D; c++)
		o[c] += sh[c] * g;
}

/* out (n, n_embd) += sigmoid(xb . gate_inp_shexp) * shexp(xb), the shared expert through
 * ys (free again once the routed slots are summed). */
static int s_shared_expert(struct ns_fwd *f, struct ns_moe *moe, const struct ns_moe_layer *y,
			   const float *xb, uint32_t n, float *out)
{
	const uint32_t D = moe->n_embd;
	int rc = ns_ffn_swiglu(f, &y->shexp, D, moe->shexp_rows, xb, n, moe->sh, moe->shu,
			       moe->ys);

	if (rc)
		return rc;
	for (uint32_t t = 0; t < n; t++)
		ns_moe_shexp_add(out + (uint64_t)t * D, moe->ys + (uint64_t)t * D,
				 xb + (uint64_t)t * D, y->shexp_gate, D);
	return 0;
}

/* The router of layer y over x (n, n_embd): logits (n, n_expert), then each token's k experts
 * and weights in moe->sel / moe->wts. */
static int s_router(struct ns_fwd *f, struct ns_moe *moe, const struct ns_moe_layer *y,
		    const float *x, uint32_t n)
{
	const uint32_t E = moe->n_expert, K = moe->n_used, D = moe->n_embd;
	int rc;

	if (y->router_scale) {
		/* gemma4: xr = rmsnorm(x) * (1 / sqrt(n_embd)) * router_scale, in llama.cpp's order */
		const float inv = 1.0f / sqrtf((float)D);

		for (uint32_t t = 0; t < n; t++) {
			float *r = moe->xr + (uint64_t)t * D;

			ns_rmsnorm(r, x + (uint64_t)t * D, NULL, D, moe->eps);
			for (uint32_t c = 0; c < D; c++)
				r[c] = r[c] * inv * y->router_scale[c];
		}
		x = moe->xr;
	}
	rc = ns_fwd_matmul(f, y->router, 0, E, x, n, moe->logits, E);
	if (rc)
		return rc;
	for (uint32_t t = 0; t < n; t++) {
		float *lg = moe->logits + (uint64_t)t * E; /* (n_expert) */

		if (y->router_b)
			s_add_row(lg, y->router_b, E);
		s_route(moe, lg, moe->sel + (uint64_t)t * K, moe->wts + (uint64_t)t * K);
	}
	return 0;
}

int ns_moe_predict(struct ns_fwd *f, struct ns_moe *moe, uint32_t layer, uint32_t pos0,
		   const float *x, uint32_t n, const float *norm, float eps)
{
	const struct ns_moe_layer *y;
	const uint32_t E = moe->n_expert, K = moe->n_used, D = moe->n_embd;
	int rc;

	if (layer >= moe->n_layer || !f->on_route || n == 0)
		return 0;
	y = &moe->layers[layer];
	if (!y->router_scale) {
		for (uint32_t t = 0; t < n; t++)
			ns_rmsnorm(moe->xg + (uint64_t)t * D, x + (uint64_t)t * D, norm, D, eps);
		x = moe->xg;
	}
	if ((rc = s_router(f, moe, y, x, n)))
		return rc;
	{
		const struct ns_fwd_route r = {
			.layer = layer, .pos0 = pos0, .n_tok = n, .n_used = K, .n_expert = E,
			.experts = moe->sel, .weights = moe->wts, .predicted = true,
		};

		rc = f->on_route(f->route_user, &r);
	}
	if (rc < 0)
		ns_errf(f->err, sizeof(f->err), "forward: routing callback of layer %u (predicted) "
			"failed: %s", layer, strerror(-rc));
	return rc < 0 ? rc : 0;
}

int ns_moe_eval(struct ns_fwd *f, struct ns_moe *moe, uint32_t layer, uint32_t pos0,
		const float *xb, uint32_t n, float *out)
{
	return ns_moe_eval_routed(f, moe, layer, pos0, xb, xb, n, out);
}

int ns_moe_eval_routed(struct ns_fwd *f, struct ns_moe *moe, uint32_t layer, uint32_t pos0,
		       const float *xr, const float *xb, uint32_t n, float *out)
{
	const struct ns_moe_layer *y = &moe->layers[layer];
	const uint32_t E = moe->n_expert, K = moe->n_used, D = moe->n_embd;
	uint64_t *hits = f->expert_hits + (uint64_t)layer * E;
	int rc;

	if ((rc = s_router(f, moe, y, xr, n)))
		return rc;
	if (f->on_route) {
		const struct ns_fwd_route r = {
			.layer = layer, .pos0 = pos0, .n_tok = n, .n_used = K, .n_expert = E,
			.experts = moe->sel, .weights = moe->wts,
		};

		rc = f->on_route(f->route_user, &r);
		if (rc < 0) {
			ns_errf(f->err, sizeof(f->err), "forward: routing callback of layer %u "
				"failed: %s", layer, strerror(-rc));
			return rc;
		}
	}
	for (uint32_t i = 0; i < n * K; i++)
		hits[moe->sel[i]]++;

	/* each used expert once over its tokens; slot outputs ys[t][s] = w[t][s] * d */
	s_group(moe, n);
	for (uint32_t e = 0; e < E; e++) {
		const uint32_t a = moe->start[e], m = moe->start[e + 1] - a;

		if (m == 0)
			continue;
		for (uint32_t j = 0; j < m; j++)
			memcpy(moe->xg + (uint64_t)j * D,
			       xb + (uint64_t)(moe->order[a + j] / K) * D, D * sizeof(float));
		rc = s_expert(f, moe, y, e, m);
		if (rc)
			return rc;
		for (uint32_t j = 0; j < m; j++) {
			const uint32_t slot = moe->order[a + j];
			const float w = moe->wts[slot];
			const float *d = moe->yd + (uint64_t)j * D;  /* (n_embd) */
			float *ys = moe->ys + (uint64_t)slot * D;    /* (n_embd) */

			for (uint32_t c = 0; c < D; c++)
				ys[c] = d[c] * w;
		}
	}
	/* out[t] = ys[t][0] + ys[t][1] + ... in routing order (as llama.cpp adds the views) */
	for (uint32_t t = 0; t < n; t++) {
		float *o = out + (uint64_t)t * D;                 /* (n_embd) */
		const float *ys = moe->ys + (uint64_t)t * K * D;  /* (n_used, n_embd) */

		memcpy(o, ys, D * sizeof(float));
		for (uint32_t s = 1; s < K; s++)
			s_add_row(o, ys + (uint64_t)s * D, D);
	}
	return y->shexp.n_ff ? s_shared_expert(f, moe, y, xb, n, out) : 0;
}
