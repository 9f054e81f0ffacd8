/* llama.c - the decoder of the llama family, qwen3, qwen3moe and gpt-oss, straight-line.
 *
 * Per layer (x is the residual stream, one row per token of the chunk):
 *     xb = rmsnorm(x) * attn_norm
 *     q, k, v = xb Wq^T, xb Wk^T, xb Wv^T            (+ biases when the file has them)
 *     qwen3: q, k = rmsnorm(q_head) * q_norm, rmsnorm(k_head) * k_norm   per head
 *     q, k = rope(q, pos), rope(k, pos)              (llama: normal pairs, qwen3: NeoX)
 *     cache k, v at pos
 *     ao = softmax(q k^T * scale, causal) v           (GQA: q head h reads kv head h / gqa)
 *         gpt-oss: sliding-window layers (even) see only the last `sliding_window` positions,
 *         and each head's sink logit joins the softmax denominator
 *     x += ao Wo^T
 *     xb = rmsnorm(x) * ffn_norm                     (gpt-oss: post_attention_norm)
 *     dense: x += (silu(xb Wgate^T) * (xb Wup^T)) Wdown^T   (SwiGLU, two row-contiguous phases)
 *     MoE (qwen3moe, gpt-oss): x += moe(xb)          (moe.h)
 * then logits = (rmsnorm(x) * output_norm) Wout^T, Wout = token_embd when tied.
 * RoPE: normal, NeoX, linear scaling, llama3 factors, YaRN (gpt-oss).
 *
 * Weight matrices are reached only through the provider (weights.h); vectors (norms, biases,
 * rope factors) are small and copied in once at init. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward_impl.h"
#include "llama.h"
#include "ggml_type.h"
#include "moe.h"
#include "ops.h"
#include "rope.h"



/* What an architecture changes in the layer. */
struct s_arch {
	bool qk_norm;         /* qwen3, qwen3moe: per-head q/k RMS norm before rope */
	bool neox;            /* NeoX rope pairs */
	bool moe;             /* MoE FFN (moe.h) instead of the dense SwiGLU */
	bool sinks;           /* gpt-oss: attn_sinks.weight required */
	const char *ffn_norm; /* name of the norm before the FFN, "blk.%u." + this */
};



/* ---------------------------------------------------------------- setup ---------------- */

static void s_destroy(void *arch)
{
	struct ns_llama *L = arch;

	if (!L)
		return;
	if (L->layers) {
		for (uint32_t l = 0; l < L->n_layer; l++) {
			struct ns_llama_layer *y = &L->layers[l];

			free(y->attn_norm);
			free(y->ffn_norm);
			free(y->q_norm);
			free(y->k_norm);
			free(y->bq);
			free(y->bk);
			free(y->bv);
			free(y->bo);
			free(y->sinks);
		}
		free(L->layers);
	}
	ns_moe_destroy(&L->moe);
	free(L->output_norm);
	free(L->rope_freqs);
	free(L->ids);
	free(L->x);
	free(L->xb);
	free(L->xb2);
	free(L->q);
	free(L->k);
	free(L->v);
	free(L->ao);
	free(L->hb);
	free(L->hu);
	free(L->att);
	free(L->cs);
	free(L);
}

/* *p = calloc(a * b floats), overflow-checked. */
static int s_alloc(float **p, uint64_t a, uint64_t b)
{
	uint64_t n;

	if (ns_mul_u64_overflow(a, b, &n) || ns_mul_u64_overflow(n, sizeof(float), &n) ||
	    n > SIZE_MAX)
		return -EOVERFLOW;
	*p = calloc(1, n ? (size_t)n : 1);
	return *p ? 0 : -ENOMEM;
}

static const struct ns_model_tensor *s_find(const struct ns_model *m, const char *name,
					    uint32_t *id)
{
	int64_t i = ns_model_find_index(m, name);

	if (i < 0)
		return NULL;
	*id = (uint32_t)i;
	return &m->tensors[i];
}

/* A weight matrix of n_rows rows of n_cols: must exist, have exactly that shape
 * (ne = [n_cols, n_rows]) and a type we can compute. */
static int s_matrix(const struct ns_model *m, const char *name, uint64_t n_cols, uint64_t n_rows,
		    uint32_t *id, char *err, size_t errlen)
{
	const struct ns_model_tensor *t = s_find(m, name, id);
	const uint64_t want[2] = { n_cols, n_rows };
	char tb[32];

	if (!t) {
		ns_errf(err, errlen, "forward: tensor %s is missing", name);
		return -EINVAL;
	}
	if (ns_fwd_shape_check(t, name, want, 2, err, errlen))
		return -EINVAL;
	if (!ns_type_computable(t->type)) {
		ns_errf(err, errlen, "forward: %s has type %s, which we cannot compute", name,
			ns_type_name(t->type, tb, sizeof(tb)));
		return -EINVAL;
	}
	return 0;
}

/* A vector of n floats, copied out of the provider. Absent and optional: *out = NULL, 0. */
static int s_vector(struct ns_fwd *f, const struct ns_model *m, const char *name, uint64_t n,
		    bool required, float **out, char *err, size_t errlen)
{
	const int64_t row0 = 0;
	const struct ns_model_tensor *t;
	uint32_t id;
	int rc;

	*out = NULL;
	t = s_find(m, name, &id);
	if (!t) {
		if (!required)
			return 0;
		ns_errf(err, errlen, "forward: tensor %s is missing", name);
		return -EINVAL;
	}
	if (ns_fwd_shape_check(t, name, &n, 1, err, errlen)) /* ne = [n] */
		return -EINVAL;
	rc = s_alloc(out, n, 1);
	if (rc == 0)
		rc = ns_weights_get_rows(f->w, id, &row0, 1, *out);
	if (rc < 0)
		ns_errf(err, errlen, "forward: loading %s: %s", name,
			rc == -ENOMEM ? "out of memory" : ns_weights_error(f->w));
	return rc;
}

/* The dense FFN matrices of layer l. */
static int s_dense_init(const struct ns_model *m, struct ns_llama *L, uint32_t l, char *err,
			size_t errlen)
{
	struct ns_llama_layer *y = &L->layers[l];
	char name[96];
	int rc;

#define S_NAME(suffix) (snprintf(name, sizeof(name), "blk.%u." suffix, l), name)
	if ((rc = s_matrix(m, S_NAME("ffn_gate.weight"), L->n_embd, L->n_ff, &y->w_gate, err,
			   errlen)) ||
	    (rc = s_matrix(m, S_NAME("ffn_up.weight"), L->n_embd, L->n_ff, &y->w_up, err,
			   errlen)) ||
	    (rc = s_matrix(m, S_NAME("ffn_down.weight"), L->n_ff, L->n_embd, &y->w_down, err,
			   errlen)))
		return rc;
#undef S_NAME
	return 0;
}

static int s_layer_init(struct ns_fwd *f, const struct ns_model *m, struct ns_llama *L,
			uint32_t l, const struct s_arch *a, char *err, size_t errlen)
{
	const bool qk_norm = a->qk_norm;
	struct ns_llama_layer *y = &L->layers[l];
	const uint64_t nq = (uint64_t)L->n_head * L->dk;
	const uint64_t nk = (uint64_t)L->n_head_kv * L->dk;
	const uint64_t nv = (uint64_t)L->n_head_kv * L->dv;
	const uint64_t no = (uint64_t)L->n_head * L->dv;
	char name[96], fnorm[96];
	int rc = 0;

	snprintf(fnorm, sizeof(fnorm), "blk.%u.%s", l, a->ffn_norm);
#define S_NAME(suffix) (snprintf(name, sizeof(name), "blk.%u." suffix, l), name)
	if ((rc = s_matrix(m, S_NAME("attn_q.weight"), L->n_embd, nq, &y->wq, err, errlen)) ||
	    (rc = s_matrix(m, S_NAME("attn_k.weight"), L->n_embd, nk, &y->wk, err, errlen)) ||
	    (rc = s_matrix(m, S_NAME("attn_v.weight"), L->n_embd, nv, &y->wv, err, errlen)) ||
	    (rc = s_matrix(m, S_NAME("attn_output.weight"), no, L->n_embd, &y->wo, err,
			   errlen)) ||
	    (!a->moe && (rc = s_dense_init(m, L, l, err, errlen))) ||
	    (rc = s_vector(f, m, S_NAME("attn_norm.weight"), L->n_embd, true, &y->attn_norm,
			   err, errlen)) ||
	    (rc = s_vector(f, m, fnorm, L->n_embd, true, &y->ffn_norm, err, errlen)) ||
	    (rc = s_vector(f, m, S_NAME("attn_sinks.weight"), L->n_head, a->sinks, &y->sinks,
			   err, errlen)) ||
	    (rc = s_vector(f, m, S_NAME("attn_q_norm.weight"), L->dk, qk_norm, &y->q_norm, err,
			   errlen)) ||
	    (rc = s_vector(f, m, S_NAME("attn_k_norm.weight"), L->dk, qk_norm, &y->k_norm, err,
			   errlen)) ||
	    (rc = s_vector(f, m, S_NAME("attn_q.bias"), nq, false, &y->bq, err, errlen)) ||
	    (rc = s_vector(f, m, S_NAME("attn_k.bias"), nk, false, &y->bk, err, errlen)) ||
	    (rc = s_vector(f, m, S_NAME("attn_v.bias"), nv, false, &y->bv, err, errlen)) ||
	    (rc = s_vector(f, m, S_NAME("attn_output.bias"), L->n_embd, false, &y->bo, err,
			   errlen)))
		return rc;
#undef S_NAME
	return 0;
}

/* YaRN as llama.cpp sets it up: ext_factor 1, beta_fast/slow (default 32/1) and the
 * original context from the metadata, and attn_factor = mscale(factor) / (1 + 0.1 ln factor)
 * (llama_context cancels the magnitude term ggml's rope multiplies in again), times
 * rope.scaling.attn_factor. Everything in float as llama.cpp computes it. */
static void s_yarn_init(const struct ns_model *m, const struct ns_hparams *hp,
			struct ns_llama *L)
{
	const float factor = 1.0f / L->rope.freq_scale;
	double beta_fast = 32.0, beta_slow = 1.0, log_mul = 0.0, attn = 1.0;
	float af;

	ns_hparams_get_f64(m, hp->arch, "rope.scaling.yarn_beta_fast", &beta_fast);
	ns_hparams_get_f64(m, hp->arch, "rope.scaling.yarn_beta_slow", &beta_slow);
	ns_hparams_get_f64(m, hp->arch, "rope.scaling.yarn_log_multiplier", &log_mul);
	ns_hparams_get_f64(m, hp->arch, "rope.scaling.attn_factor", &attn);
	af = factor <= 1.0f ? 1.0f : 0.1f * logf(factor) + 1.0f;
	if (log_mul != 0.0) { /* mscale 1 over mscale_all_dims = log_mul */
		const float den = factor <= 1.0f ? 1.0f :
				  0.1f * (float)log_mul * logf(factor) + 1.0f;

		af = af / den;
	}
	af *= 1.0f / (1.0f + 0.1f * logf(factor));
	af *= (float)attn;
	ns_rope_yarn_init(&L->rope, hp->rope_orig_ctx ? hp->rope_orig_ctx : hp->n_ctx_train,
			  (float)beta_fast, (float)beta_slow, af);
}

/* Rope settings from the metadata: base (default 10000), linear scaling, llama3 factors,
 * YaRN. */
static int s_rope_init(struct ns_fwd *f, const struct ns_model *m, const struct ns_hparams *hp,
		       struct ns_llama *L, bool neox, char *err, size_t errlen)
{
	const char *type = hp->rope_scaling_type;
	int rc;

	L->rope.n_dims = hp->rope_dims ? hp->rope_dims : L->dk;
	if (L->rope.n_dims % 2 || L->rope.n_dims > L->dk) {
		ns_errf(err, errlen, "forward: rope dimension count %u does not fit head size %u",
			L->rope.n_dims, L->dk);
		return -EINVAL;
	}
	if (type[0] && strcmp(type, "none") && strcmp(type, "linear") && strcmp(type, "yarn")) {
		ns_errf(err, errlen, "forward: rope scaling type '%s' is not supported (none, "
			"linear, yarn, llama3 rope_freqs)", type);
		return -EINVAL;
	}
	L->rope.neox = neox;
	L->rope.freq_base = hp->rope_freq_base > 0 ? (float)hp->rope_freq_base : 10000.0f;
	L->rope.freq_scale = hp->rope_scale > 0 ? (float)(1.0 / hp->rope_scale) : 1.0f;
	if (!strcmp(type, "none"))
		L->rope.freq_scale = 1.0f; /* llama.cpp never scales with type none */
	if (!strcmp(type, "yarn"))
		s_yarn_init(m, hp, L);
	rc = s_vector(f, m, "rope_freqs.weight", L->rope.n_dims / 2, false, &L->rope_freqs, err,
		      errlen);
	L->rope.freq_factors = L->rope_freqs;
	return rc;
}

static int s_scratch_init(struct ns_llama *L, uint32_t n_batch)
{
	const uint64_t nb = n_batch;
	int rc;

	L->ids = calloc(n_batch, sizeof(*L->ids));
	if (!L->ids)
		return -ENOMEM;
	if ((rc = s_alloc(&L->x, nb, L->n_embd)) || (rc = s_alloc(&L->xb, nb, L->n_embd)) ||
	    (rc = s_alloc(&L->xb2, nb, L->n_embd)) ||
	    (rc = s_alloc(&L->q, nb, (uint64_t)L->n_head * L->dk)) ||
	    (rc = s_alloc(&L->k, nb, (uint64_t)L->n_head_kv * L->dk)) ||
	    (rc = s_alloc(&L->v, nb, (uint64_t)L->n_head_kv * L->dv)) ||
	    (rc = s_alloc(&L->ao, nb, (uint64_t)L->n_head * L->dv)) ||
	    (rc = s_alloc(&L->hb, nb, L->n_ff)) || (rc = s_alloc(&L->hu, nb, L->ffn_rows)) ||
	    (rc = s_alloc(&L->att, L->n_ctx, 1)) || (rc = s_alloc(&L->cs, L->rope.n_dims, 1)))
		return rc;
	return 0;
}

/* ---------------------------------------------------------------- forward -------------- */

/* Provider call with the error copied into the forward pass's message. */
static int s_matmul(struct ns_fwd *f, uint32_t tensor, uint64_t row0, uint64_t row_end,
		    const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	int rc = ns_weights_matmul(f->w, tensor, row0, row_end, x, n_tok, y, ldy);

	if (rc < 0)
		ns_errf(f->err, sizeof(f->err), "forward: %s", ns_weights_error(f->w));
	return rc;
}

static void s_add_bias(float *y, const float *b, uint32_t n_tok, uint64_t dim)
{
	if (!b)
		return;
	for (uint32_t t = 0; t < n_tok; t++)
		for (uint64_t i = 0; i < dim; i++)
			y[t * dim + i] += b[i];
}

/* ao[t] = attention of the chunk's token t (position p = pos[t] in its sequence, whose cache
 * is kvs[t]) over positions j0..p of that cache: j0 = 0, or p + 1 - window on a
 * sliding-window layer. A row sees only its own sequence. */
static void s_attention(struct ns_llama *L, struct ns_kvcache *const *kvs, const uint32_t *pos,
			uint32_t l, uint32_t n)
{
	const struct ns_llama_layer *y = &L->layers[l];
	const uint32_t gqa = L->n_head / L->n_head_kv;

	for (uint32_t t = 0; t < n; t++) {
		struct ns_kvcache *kv = kvs[t];
		const uint32_t p1 = pos[t] + 1; /* causal: itself and everything before */
		const uint32_t j0 = y->window && p1 > y->window ? p1 - y->window : 0;
		const uint32_t n_pos = p1 - j0;

		for (uint32_t h = 0; h < L->n_head; h++) {
			const uint32_t hk = h / gqa;
			const float *qh = L->q + ((uint64_t)t * L->n_head + h) * L->dk; /* (dk) */
			float *out = L->ao + ((uint64_t)t * L->n_head + h) * L->dv;     /* (dv) */

			/* scores: att[j - j0] = (q . k_j) * scale */
			for (uint32_t j = 0; j < n_pos; j++) {
				const float *kj = ns_kvcache_k(kv, l, j0 + j) + (uint64_t)hk * L->dk;
				double acc = 0.0;

				for (uint32_t d = 0; d < L->dk; d++)
					acc += (double)qh[d] * (double)kj[d];
				L->att[j] = (float)acc * L->attn_scale;
			}
			if (y->sinks)
				ns_softmax_sink(L->att, n_pos, y->sinks[h]);
			else
				ns_softmax(L->att, n_pos);
			/* out = sum_j att[j - j0] * v_j */
			for (uint32_t d = 0; d < L->dv; d++) {
				double acc = 0.0;

				for (uint32_t j = 0; j < n_pos; j++)
					acc += (double)L->att[j] *
					       (double)ns_kvcache_v(kv, l, j0 + j)[(uint64_t)hk * L->dv +
										  d];
				out[d] = (float)acc;
			}
		}
	}
}

static int s_attention_block(struct ns_fwd *f, struct ns_llama *L, uint32_t l, uint32_t n)
{
	struct ns_llama_layer *y = &L->layers[l];
	const uint64_t nq = (uint64_t)L->n_head * L->dk;
	const uint64_t nk = (uint64_t)L->n_head_kv * L->dk;
	const uint64_t nv = (uint64_t)L->n_head_kv * L->dv;
	int rc;

	/* xb = rmsnorm(x) * attn_norm   (n, n_embd) */
	for (uint32_t t = 0; t < n; t++)
		ns_rmsnorm(L->xb + (uint64_t)t * L->n_embd, L->x + (uint64_t)t * L->n_embd,
			   y->attn_norm, L->n_embd, L->eps);
	/* q (n, nq), k (n, nk), v (n, nv) */
	if ((rc = s_matmul(f, y->wq, 0, nq, L->xb, n, L->q, nq)) ||
	    (rc = s_matmul(f, y->wk, 0, nk, L->xb, n, L->k, nk)) ||
	    (rc = s_matmul(f, y->wv, 0, nv, L->xb, n, L->v, nv)))
		return rc;
	s_add_bias(L->q, y->bq, n, nq);
	s_add_bias(L->k, y->bk, n, nk);
	s_add_bias(L->v, y->bv, n, nv);
	for (uint32_t t = 0; t < n; t++) {
		float *qt = L->q + t * nq; /* (n_head, dk) */
		float *kt = L->k + t * nk; /* (n_head_kv, dk) */

		if (y->q_norm) { /* qwen3: per-head RMS norm before rope */
			for (uint32_t h = 0; h < L->n_head; h++)
				ns_rmsnorm(qt + (uint64_t)h * L->dk, qt + (uint64_t)h * L->dk,
					   y->q_norm, L->dk, L->eps);
			for (uint32_t h = 0; h < L->n_head_kv; h++)
				ns_rmsnorm(kt + (uint64_t)h * L->dk, kt + (uint64_t)h * L->dk,
					   y->k_norm, L->dk, L->eps);
		}
		ns_rope_angles(&L->rope, (int64_t)f->row_pos[t], L->cs);
		ns_rope_rotate(&L->rope, L->cs, qt, L->n_head, L->dk);
		ns_rope_rotate(&L->rope, L->cs, kt, L->n_head_kv, L->dk);
		/* into the cache of the row's own sequence */
		memcpy(ns_kvcache_k(f->row_kv[t], l, f->row_pos[t]), kt, nk * sizeof(float));
		memcpy(ns_kvcache_v(f->row_kv[t], l, f->row_pos[t]), L->v + t * nv,
		       nv * sizeof(float));
	}
	s_attention(L, f->row_kv, f->row_pos, l, n);
	/* x += ao Wo^T   (n, n_embd) */
	rc = s_matmul(f, y->wo, 0, L->n_embd, L->ao, n, L->xb2, L->n_embd);
	if (rc)
		return rc;
	s_add_bias(L->xb2, y->bo, n, L->n_embd);
	for (uint64_t i = 0; i < (uint64_t)n * L->n_embd; i++)
		L->x[i] += L->xb2[i];
	return 0;
}

static int s_ffn_block(struct ns_fwd *f, struct ns_llama *L, uint32_t l, uint32_t n)
{
	struct ns_llama_layer *y = &L->layers[l];
	int rc;

	/* xb = rmsnorm(x) * ffn_norm   (n, n_embd) */
	for (uint32_t t = 0; t < n; t++)
		ns_rmsnorm(L->xb + (uint64_t)t * L->n_embd, L->x + (uint64_t)t * L->n_embd,
			   y->ffn_norm, L->n_embd, L->eps);
	if (L->moe) { /* x += moe(xb)   (n, n_embd) */
		rc = ns_moe_eval(f, L->moe, l, f->row_pos[0], L->xb, n, L->xb2);
		if (rc)
			return rc;
		for (uint64_t i = 0; i < (uint64_t)n * L->n_embd; i++)
			L->x[i] += L->xb2[i];
		return 0;
	}
	/* phase 1, by neuron: hb[:, r0:r1] = silu(xb Wgate[r0:r1]^T) * (xb Wup[r0:r1]^T) */
	for (uint32_t r0 = 0; r0 < L->n_ff; r0 += L->ffn_rows) {
		const uint32_t w = L->n_ff - r0 < L->ffn_rows ? L->n_ff - r0 : L->ffn_rows;

		if ((rc = s_matmul(f, y->w_gate, r0, r0 + w, L->xb, n, L->hb + r0, L->n_ff)) ||
		    (rc = s_matmul(f, y->w_up, r0, r0 + w, L->xb, n, L->hu, w)))
			return rc;
		for (uint32_t t = 0; t < n; t++) {
			float *h = L->hb + (uint64_t)t * L->n_ff + r0; /* (w) */
			const float *u = L->hu + (uint64_t)t * w;      /* (w) */

			for (uint32_t i = 0; i < w; i++)
				h[i] = ns_silu(h[i]) * u[i];
		}
	}
	/* phase 2, by output dimension: x += hb Wdown^T   (n, n_embd) */
	rc = s_matmul(f, y->w_down, 0, L->n_embd, L->hb, n, L->xb2, L->n_embd);
	if (rc)
		return rc;
	for (uint64_t i = 0; i < (uint64_t)n * L->n_embd; i++)
		L->x[i] += L->xb2[i];
	return 0;
}

static int s_eval_chunk(struct ns_fwd *f, const int32_t *tokens, uint32_t n, float *logits,
			bool all)
{
	struct ns_llama *L = f->arch;
	uint32_t t0;
	int rc;

	/* x = token_embd[tokens]   (n, n_embd) */
	for (uint32_t t = 0; t < n; t++)
		L->ids[t] = tokens[t];
	rc = ns_weights_get_rows(f->w, L->tok_embd, L->ids, n, L->x);
	if (rc < 0) {
		ns_errf(f->err, sizeof(f->err), "forward: %s", ns_weights_error(f->w));
		return rc;
	}
	for (uint32_t l = 0; l < L->n_layer; l++) {
		if ((rc = s_attention_block(f, L, l, n)) || (rc = s_ffn_block(f, L, l, n)))
			return rc;
	}
	if (!logits)
		return 0;
	if (f->n_out_rows) { /* a batch: the rows asked for, gathered   (n_out_rows, n_vocab) */
		for (uint32_t k = 0; k < f->n_out_rows; k++)
			ns_rmsnorm(L->xb + (uint64_t)k * L->n_embd,
				   L->x + (uint64_t)f->out_rows[k] * L->n_embd, L->output_norm,
				   L->n_embd, L->eps);
		return s_matmul(f, L->output, 0, L->n_vocab, L->xb, f->n_out_rows, logits,
				L->n_vocab);
	}
	/* logits = (rmsnorm(x) * output_norm) Wout^T   (all ? n : 1, n_vocab) */
	t0 = all ? 0 : n - 1;
	for (uint32_t t = t0; t < n; t++)
		ns_rmsnorm(L->xb + (uint64_t)t * L->n_embd, L->x + (uint64_t)t * L->n_embd,
			   L->output_norm, L->n_embd, L->eps);
	return s_matmul(f, L->output, 0, L->n_vocab, L->xb + (uint64_t)t0 * L->n_embd, n - t0,
			logits, L->n_vocab);
}

/* gpt-oss: layer l slides when l % period < period - 1 (llama.cpp's swa pattern; period
 * from attention.sliding_window_pattern, default 2: even layers slide). */
static int s_swa_init(const struct ns_model *m, const struct ns_hparams *hp, struct ns_llama *L,
		      char *err, size_t errlen)
{
	uint64_t period = 2;

	if (!hp->sliding_window) {
		ns_errf(err, errlen, "forward: %s.attention.sliding_window is missing", hp->arch);
		return -EINVAL;
	}
	ns_hparams_get_u64(m, hp->arch, "attention.sliding_window_pattern", &period);
	for (uint32_t l = 0; l < L->n_layer; l++)
		if (period == 0 || l % period < period - 1)
			L->layers[l].window = hp->sliding_window;
	return 0;
}

int ns_llama_setup(struct ns_fwd *f, const struct ns_model *m, const struct ns_hparams *hp,
		   uint32_t ffn_rows, bool host_state, char *err, size_t errlen)
{
	const bool gptoss = !strcmp(hp->arch, "gpt-oss");
	const struct s_arch a = {
		.qk_norm = !strcmp(hp->arch, "qwen3") || !strcmp(hp->arch, "qwen3moe"),
		.neox = strcmp(hp->arch, "llama") != 0,
		.moe = !strcmp(hp->arch, "qwen3moe") || gptoss,
		.sinks = gptoss,
		.ffn_norm = gptoss ? "post_attention_norm.weight" : "ffn_norm.weight",
	};
	const struct ns_model_tensor *te;
	struct ns_llama *L;
	double scale = 0.0;
	uint32_t tmp;
	int rc;

	if (hp->n_expert > 0 && !a.moe) {
		ns_errf(err, errlen, "forward: %s with %u experts (MoE) is not supported here",
			hp->arch, hp->n_expert);
		return -EINVAL;
	}
	if (!hp->n_layer || !hp->n_embd || !hp->n_head || !hp->n_head_kv ||
	    (!hp->n_ff && !a.moe) ||
	    !hp->head_dim_k || !hp->head_dim_v || hp->n_head % hp->n_head_kv ||
	    !(hp->rms_eps > 0) || (uint64_t)hp->n_head * hp->head_dim_k > UINT32_MAX ||
	    (uint64_t)hp->n_head * hp->head_dim_v > UINT32_MAX) {
		ns_errf(err, errlen, "forward: %s hyperparameters incomplete or inconsistent "
			"(n_layer %u n_embd %u n_head %u n_head_kv %u n_ff %u head_dim %u/%u "
			"rms_eps %g)", hp->arch, hp->n_layer, hp->n_embd, hp->n_head,
			hp->n_head_kv, hp->n_ff, hp->head_dim_k, hp->head_dim_v, hp->rms_eps);
		return -EINVAL;
	}
	L = calloc(1, sizeof(*L));
	if (!L || !(L->layers = calloc(hp->n_layer, sizeof(*L->layers)))) {
		free(L);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->arch = L;
	f->arch_destroy = s_destroy;
	f->eval_chunk = s_eval_chunk;
	f->rows_ok = host_state; /* s_eval_chunk reads row_kv / row_pos / out_rows */
	L->n_embd = hp->n_embd;
	L->n_layer = hp->n_layer;
	L->n_head = hp->n_head;
	L->n_head_kv = hp->n_head_kv;
	L->dk = hp->head_dim_k;
	L->dv = hp->head_dim_v;
	L->n_ff = a.moe ? 0 : hp->n_ff; /* MoE: the dense width is unused */
	L->n_ctx = f->n_ctx;
	L->eps = (float)hp->rms_eps;
	L->ffn_rows = ffn_rows && ffn_rows < L->n_ff ? ffn_rows : L->n_ff;
	/* llama.attention.scale overrides 1/sqrt(head_dim) (granite-style files) */
	if (ns_hparams_get_f64(m, hp->arch, "attention.scale", &scale) && scale > 0)
		L->attn_scale = (float)scale;
	else
		L->attn_scale = 1.0f / sqrtf((float)L->dk);

	te = s_find(m, "token_embd.weight", &L->tok_embd);
	if (!te || te->ne[0] != L->n_embd || te->ne[2] != 1 || te->ne[3] != 1 ||
	    !te->n_rows) {
		ns_errf(err, errlen, "forward: token_embd.weight is missing or not [%u, n_vocab]",
			L->n_embd);
		return -EINVAL;
	}
	f->n_tok_rows = te->n_rows;
	if (ns_model_find_index(m, "output.weight") >= 0) {
		const struct ns_model_tensor *to = s_find(m, "output.weight", &tmp);

		rc = s_matrix(m, "output.weight", L->n_embd, to->n_rows, &L->output, err, errlen);
		if (rc)
			return rc;
		if (to->n_rows > UINT32_MAX) {
			ns_errf(err, errlen, "forward: output.weight has too many rows");
			return -EINVAL;
		}
		L->n_vocab = (uint32_t)to->n_rows;
	} else { /* tied: the LM head is the embedding matrix */
		rc = s_matrix(m, "token_embd.weight", L->n_embd, te->n_rows, &L->output, err,
			      errlen);
		if (rc)
			return rc;
		if (te->n_rows > UINT32_MAX) {
			ns_errf(err, errlen, "forward: token_embd.weight has too many rows");
			return -EINVAL;
		}
		L->n_vocab = (uint32_t)te->n_rows;
	}
	f->n_vocab = L->n_vocab;
	if ((rc = s_vector(f, m, "output_norm.weight", L->n_embd, true, &L->output_norm, err,
			   errlen)) ||
	    (rc = s_rope_init(f, m, hp, L, a.neox, err, errlen)))
		return rc;
	for (uint32_t l = 0; l < L->n_layer; l++)
		if ((rc = s_layer_init(f, m, L, l, &a, err, errlen)))
			return rc;
	if (gptoss && (rc = s_swa_init(m, hp, L, err, errlen)))
		return rc;
	if (a.moe && (rc = ns_moe_new(f, m, hp, f->n_batch, ffn_rows, &L->moe, err, errlen)))
		return rc;
	if (!host_state) { /* n_past only: the backend keeps its own cache */
		f->kv = calloc(1, sizeof(*f->kv));
		if (!f->kv) {
			ns_errf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		f->kv->n_ctx = f->n_ctx;
		return 0;
	}
	rc = ns_kvcache_new(L->n_layer, f->n_ctx, L->n_head_kv * L->dk, L->n_head_kv * L->dv,
			    &f->kv);
	if (rc == 0)
		rc = s_scratch_init(L, f->n_batch);
	if (rc < 0)
		ns_errf(err, errlen, "forward: cannot allocate the KV cache and scratch for "
			"n_ctx %u, n_batch %u: %s", f->n_ctx, f->n_batch, strerror(-rc));
	return rc;
}

int ns_llama_init(struct ns_fwd *f, const struct ns_model *m, const struct ns_hparams *hp,
		  uint32_t ffn_rows, char *err, size_t errlen)
{
	return ns_llama_setup(f, m, hp, ffn_rows, true, err, errlen);
}
