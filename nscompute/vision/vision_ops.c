/* vision_ops.c - the float steps of the vision tower (see vision_impl.h).
 *
 * Written against Transformers' float32 modules: LayerNorm, GELU (tanh or erf), the vision
 * rotary embedding (rotate_half) and eager attention. Moments, the GELUs and the rotary angles
 * are computed in double and rounded once; matrix products go through the gemm kernels. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "ggml_type.h"
#include "gemv.h"
#include "vision_impl.h"

/* Query rows whose scores (q_block x n floats) are held at once. */
#define S_Q_BLOCK 128u

void ns_vision_layernorm(float *y, const float *x, uint64_t rows, uint32_t n, const float *w,
			 const float *b, float eps)
{
	for (uint64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float *yr = y + r * n;
		double mean = 0.0, var = 0.0, inv;

		for (uint32_t i = 0; i < n; i++)
			mean += xr[i];
		mean /= n;
		for (uint32_t i = 0; i < n; i++)
			var += ((double)xr[i] - mean) * ((double)xr[i] - mean);
		inv = 1.0 / sqrt(var / n + (double)eps);
		for (uint32_t i = 0; i < n; i++)
			yr[i] = (float)(((double)xr[i] - mean) * inv) * w[i] + b[i];
	}
}

void ns_vision_gelu_tanh(float *x, uint64_t n)
{
	const double k = sqrt(2.0 / M_PI);

	for (uint64_t i = 0; i < n; i++) {
		const double v = x[i];

		x[i] = (float)(0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v))));
	}
}

void ns_vision_gelu_erf(float *x, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		const double v = x[i];

		x[i] = (float)(0.5 * v * (1.0 + erf(v / M_SQRT2)));
	}
}

void ns_vision_rope_table(float *cs, uint32_t grid_t, uint32_t grid_h, uint32_t grid_w,
			  uint32_t merge, uint32_t head_dim, double theta)
{
	const uint32_t half = head_dim / 2, quarter = head_dim / 4;
	float *row = cs;

	for (uint32_t t = 0; t < grid_t; t++)
		for (uint32_t bh = 0; bh < grid_h / merge; bh++)
			for (uint32_t bw = 0; bw < grid_w / merge; bw++)
				for (uint32_t mh = 0; mh < merge; mh++)
					for (uint32_t mw = 0; mw < merge; mw++, row += head_dim) {
						const double pos[2] = { (double)bh * merge + mh,
									(double)bw * merge + mw };

						for (uint32_t i = 0; i < half; i++) {
							const uint32_t k = i % quarter;
							const double f = pow(theta, -(double)(2 * k) / half);
							const double a = pos[i / quarter] * f;

							row[i] = (float)cos(a);
							row[half + i] = (float)sin(a);
						}
					}
}

void ns_vision_rope_apply(float *x, uint64_t n, uint64_t stride, uint32_t heads,
			  uint32_t head_dim, const float *cs)
{
	const uint32_t half = head_dim / 2;

	for (uint64_t p = 0; p < n; p++) {
		const float *c = cs + p * head_dim, *s = c + half;

		for (uint32_t h = 0; h < heads; h++) {
			float *v = x + p * stride + (uint64_t)h * head_dim;

			for (uint32_t i = 0; i < half; i++) {
				const float a = v[i], b = v[half + i];

				v[i] = a * c[i] - b * s[i];
				v[half + i] = b * c[i] + a * s[i];
			}
		}
	}
}

static void s_softmax_scaled(float *x, uint64_t n, float scale)
{
	float max = -INFINITY;
	double sum = 0.0;
	float inv;

	for (uint64_t i = 0; i < n; i++) {
		x[i] *= scale;
		max = x[i] > max ? x[i] : max;
	}
	for (uint64_t i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	inv = (float)(1.0 / sum);
	for (uint64_t i = 0; i < n; i++)
		x[i] *= inv;
}

float *ns_vision_falloc(uint64_t a, uint64_t b)
{
	uint64_t n;

	if (ns_mul_u64_overflow(a, b, &n) || ns_mul_u64_overflow(n, sizeof(float), &n) ||
	    n > SIZE_MAX)
		return NULL;
	return malloc(n ? (size_t)n : 1);
}

uint64_t ns_vision_attention_bytes(uint64_t n, uint32_t hd)
{
	const uint64_t qb = n < S_Q_BLOCK ? n : S_Q_BLOCK;
	uint64_t kv, q, sc, t, g1 = ns_gemm_x_bytes(qb, hd), g2 = ns_gemm_x_bytes(qb, n);

	/* kh and vt (n, hd); qh and oh (qb, hd); s (qb, n): as ns_vision_attention below; and
	 * the larger of its two gemms' copies of their input (gemv.h) */
	if (ns_mul_u64_overflow(n, 2ull * hd, &kv) || ns_mul_u64_overflow(qb, n, &sc))
		return UINT64_MAX;
	q = qb * 2ull * hd;
	if (ns_add_u64_overflow(kv, q, &t) || ns_add_u64_overflow(t, sc, &t) ||
	    ns_mul_u64_overflow(t, sizeof(float), &t) || g1 == UINT64_MAX || g2 == UINT64_MAX ||
	    ns_add_u64_overflow(t, g1 > g2 ? g1 : g2, &t))
		return UINT64_MAX;
	return t;
}

struct s_attn {
	float *kh; /* (n, hd) keys of the head */
	float *vt; /* (hd, n) values of the head, transposed: rows for the gemm */
	float *qh; /* (S_Q_BLOCK, hd) */
	float *s;  /* (S_Q_BLOCK, n) scores, then probabilities */
	float *oh; /* (S_Q_BLOCK, hd) */
};

static void s_attn_free(struct s_attn *a)
{
	free(a->kh);
	free(a->vt);
	free(a->qh);
	free(a->s);
	free(a->oh);
}

/* One head: K and V^T gathered once, then query blocks: S = Q K^T, softmax, O = P V. */
static int s_head(struct ns_pool *pool, const float *qkv, uint64_t n, uint32_t heads,
		  uint32_t hd, uint32_t h, struct s_attn *a, float *out, const struct ns_vision *v)
{
	const uint64_t d = (uint64_t)heads * hd, stride = 3 * d;
	const float scale = 1.0f / sqrtf((float)hd);
	int rc;

	for (uint64_t j = 0; j < n; j++)
		for (uint32_t c = 0; c < hd; c++) {
			a->kh[j * hd + c] = qkv[j * stride + d + (uint64_t)h * hd + c];
			a->vt[(uint64_t)c * n + j] = qkv[j * stride + 2 * d + (uint64_t)h * hd + c];
		}
	for (uint64_t q0 = 0; q0 < n; q0 += S_Q_BLOCK) {
		const uint64_t nq = n - q0 < S_Q_BLOCK ? n - q0 : S_Q_BLOCK;

		for (uint64_t i = 0; i < nq; i++)
			for (uint32_t c = 0; c < hd; c++)
				a->qh[i * hd + c] = qkv[(q0 + i) * stride + (uint64_t)h * hd + c];
		rc = ns_gemm(pool, NS_TYPE_F32, a->kh, hd, n, a->qh, nq, a->s, n);
		for (uint64_t i = 0; rc == 0 && i < nq; i++)
			s_softmax_scaled(a->s + i * n, n, scale);
		if (rc == 0)
			rc = ns_gemm(pool, NS_TYPE_F32, a->vt, n, hd, a->s, nq, a->oh, hd);
		if (rc < 0)
			return rc;
		for (uint64_t i = 0; i < nq; i++)
			for (uint32_t c = 0; c < hd; c++)
				out[(q0 + i) * d + (uint64_t)h * hd + c] = a->oh[i * hd + c];
		if (v && v->progress) /* a block of a large image's scores is seconds of work */
			v->progress(v->progress_user);
	}
	return 0;
}

int ns_vision_attention(struct ns_pool *pool, const float *qkv, uint64_t n, uint32_t heads,
			uint32_t hd, float *out, const struct ns_vision *v)
{
	struct s_attn a = { 0 };
	const uint64_t qb = n < S_Q_BLOCK ? n : S_Q_BLOCK;
	int rc = 0;

	a.kh = ns_vision_falloc(n, hd);
	a.vt = ns_vision_falloc(n, hd);
	a.qh = ns_vision_falloc(qb, hd);
	a.s = ns_vision_falloc(qb, n);
	a.oh = ns_vision_falloc(qb, hd);
	if (!a.kh || !a.vt || !a.qh || !a.s || !a.oh)
		rc = -ENOMEM;
	for (uint32_t h = 0; rc == 0 && h < heads; h++)
		rc = s_head(pool, qkv, n, heads, hd, h, &a, out, v);
	s_attn_free(&a);
	return rc;
}
