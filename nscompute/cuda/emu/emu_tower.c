/* emu_tower.c - nscuda.h's vision-tower kernels (tower.cu, attn.cu's bidirectional attention)
 * emulated on the host: the same refusals as their launchers, then nscompute/vision/
 * vision_ops.c's arithmetic restated (that file lives in the vision library, which the
 * kernels' emulation does not link): LayerNorm's moments in double, the GELUs in double, the
 * rotation in float, and the attention of ns_vision_attention (scores and the weighted sum
 * through ns_gemm on a head's gathered K and transposed V, in blocks of 128 queries, the
 * softmax in float with a double sum). So the CUDA tower over the emulation computes the host
 * tower's bits (tests/cuda/test_ctower.c checks it). Streams are ignored. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "ggml_type.h"
#include "gemv.h"
#include "nscuda.h"
#include "nscuda_emu.h"

#define S_Q_BLOCK 128u /* vision_ops.c's query block */

int ns_cuda_layernorm(float *dev_y, const float *dev_x, const float *dev_w, const float *dev_b,
		      uint32_t n, uint32_t n_rows, float eps, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0 || n_rows == 0)
		return 0;
	if (!dev_y || !dev_x || !dev_w || !dev_b || n_rows > INT32_MAX)
		return -EINVAL;
	for (uint64_t r = 0; r < n_rows; r++) {
		const float *xr = dev_x + r * n;
		float *yr = dev_y + r * n;
		double mean = 0.0, var = 0.0, inv;

		for (uint32_t i = 0; i < n; i++)
			mean += xr[i];
		mean /= n;
		for (uint32_t i = 0; i < n; i++)
			var += ((double)xr[i] - mean) * ((double)xr[i] - mean);
		inv = 1.0 / sqrt(var / n + (double)eps);
		for (uint32_t i = 0; i < n; i++)
			yr[i] = (float)(((double)xr[i] - mean) * inv) * dev_w[i] + dev_b[i];
	}
	return 0;
}

int ns_cuda_gelu(float *dev_x, uint64_t n, bool erf_, ns_cuda_stream_t s)
{
	const double k = sqrt(2.0 / M_PI);

	ns_emu_launch_order(s);
	if (n == 0)
		return 0;
	if (!dev_x)
		return -EINVAL;
	for (uint64_t i = 0; i < n; i++) {
		const double v = dev_x[i];

		dev_x[i] = erf_ ? (float)(0.5 * v * (1.0 + erf(v / M_SQRT2)))
				: (float)(0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v))));
	}
	return 0;
}

int ns_cuda_rope_table(float *dev_x, uint64_t n, uint64_t stride, uint32_t n_heads,
		       uint32_t head_dim, const float *dev_cs, ns_cuda_stream_t s)
{
	const uint32_t half = head_dim / 2;

	ns_emu_launch_order(s);
	if (n == 0 || n_heads == 0)
		return 0;
	if (!dev_x || !dev_cs || head_dim == 0 || head_dim % 2 ||
	    stride < (uint64_t)n_heads * head_dim || n_heads > 65535)
		return -EINVAL;
	for (uint64_t p = 0; p < n; p++) {
		const float *c = dev_cs + p * head_dim, *sn = c + half;

		for (uint32_t h = 0; h < n_heads; h++) {
			float *v = dev_x + p * stride + (uint64_t)h * head_dim;

			for (uint32_t i = 0; i < half; i++) {
				const float a = v[i], b = v[half + i];

				v[i] = a * c[i] - b * sn[i];
				v[half + i] = b * c[i] + a * sn[i];
			}
		}
	}
	return 0;
}

/* The CPU's float32 GEMM (what the host tower computes for F32 weights). */
int ns_cuda_sgemm(const float *dev_w, uint64_t n_cols, uint64_t n_rows, const float *dev_x,
		  uint64_t ldx, uint64_t n_tok, float *dev_y, uint64_t ldy, ns_cuda_stream_t s)
{
	int rc = 0;

	ns_emu_launch_order(s);
	if (n_rows == 0 || n_tok == 0)
		return 0;
	if (!dev_w || !dev_x || !dev_y || n_cols == 0 || ldx < n_cols || ldy < n_rows)
		return -EINVAL;
	if ((n_rows + 63) / 64 > INT32_MAX || (n_tok + 63) / 64 > 65535)
		return -EOVERFLOW;
	if (ldx == n_cols)
		return ns_gemm(NULL, NS_TYPE_F32, dev_w, n_cols, n_rows, dev_x, n_tok, dev_y, ldy);
	for (uint64_t t = 0; t < n_tok && rc == 0; t++) /* results do not depend on n_tok */
		rc = ns_gemm(NULL, NS_TYPE_F32, dev_w, n_cols, n_rows, dev_x + t * ldx, 1,
			     dev_y + t * ldy, n_rows);
	return rc;
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

/* One head of vision_ops.c's s_head, queries [0, n_q) against n_kv keys. */
static int s_head(const float *q, uint64_t ldq, const float *k, uint64_t ldk, const float *v,
		  uint64_t ldv, uint32_t n_q, uint64_t n_kv, uint32_t h, uint32_t n_head,
		  uint32_t dk, uint32_t dv, float scale, float *out, float *kh, float *vt,
		  float *qh, float *sc, float *oh)
{
	int rc = 0;

	for (uint64_t j = 0; j < n_kv; j++) {
		for (uint32_t c = 0; c < dk; c++)
			kh[j * dk + c] = k[j * ldk + (uint64_t)h * dk + c];
		for (uint32_t c = 0; c < dv; c++)
			vt[(uint64_t)c * n_kv + j] = v[j * ldv + (uint64_t)h * dv + c];
	}
	for (uint64_t q0 = 0; q0 < n_q && rc == 0; q0 += S_Q_BLOCK) {
		const uint64_t nq = n_q - q0 < S_Q_BLOCK ? n_q - q0 : S_Q_BLOCK;

		for (uint64_t i = 0; i < nq; i++)
			for (uint32_t c = 0; c < dk; c++)
				qh[i * dk + c] = q[(q0 + i) * ldq + (uint64_t)h * dk + c];
		rc = ns_gemm(NULL, NS_TYPE_F32, kh, dk, n_kv, qh, nq, sc, n_kv);
		for (uint64_t i = 0; rc == 0 && i < nq; i++)
			s_softmax_scaled(sc + i * n_kv, n_kv, scale);
		if (rc == 0)
			rc = ns_gemm(NULL, NS_TYPE_F32, vt, n_kv, dv, sc, nq, oh, dv);
		for (uint64_t i = 0; rc == 0 && i < nq; i++)
			for (uint32_t c = 0; c < dv; c++)
				out[((q0 + i) * n_head + h) * dv + c] = oh[i * dv + c];
	}
	return rc;
}

int ns_cuda_attention_full(const float *dev_q, uint64_t ldq, const float *dev_k, uint64_t ldk,
			   const float *dev_v, uint64_t ldv, uint32_t n_q, uint64_t n_kv,
			   uint32_t n_head, uint32_t dk, uint32_t dv, float scale,
			   float *dev_out, void *dev_ws, ns_cuda_stream_t s)
{
	const uint64_t qb = n_q < S_Q_BLOCK ? n_q : S_Q_BLOCK;
	float *kh, *vt, *qh, *sc, *oh;
	int rc = 0;

	ns_emu_launch_order(s);
	if (n_q == 0 || n_head == 0)
		return 0;
	/* attn.cu's checks (n_head_kv = n_head), then its grid limits */
	if (!dev_q || !dev_out || !dev_ws || n_kv == 0 || ldq < (uint64_t)n_head * dk ||
	    dk == 0 || dv == 0 || dk > 512 || dv > 512 || !dev_k || !dev_v ||
	    ldk < (uint64_t)n_head * dk || ldv < (uint64_t)n_head * dv)
		return -EINVAL;
	if ((n_kv + 255) / 256 > INT32_MAX || n_head > 65535 || n_q > 65535)
		return -EOVERFLOW;
	kh = malloc(n_kv * dk * sizeof(float));
	vt = malloc(n_kv * dv * sizeof(float));
	qh = malloc(qb * dk * sizeof(float));
	sc = malloc(qb * n_kv * sizeof(float));
	oh = malloc(qb * dv * sizeof(float));
	if (!kh || !vt || !qh || !sc || !oh)
		rc = -ENOMEM;
	for (uint32_t h = 0; rc == 0 && h < n_head; h++)
		rc = s_head(dev_q, ldq, dev_k, ldk, dev_v, ldv, n_q, n_kv, h, n_head, dk, dv,
			    scale, dev_out, kh, vt, qh, sc, oh);
	free(kh);
	free(vt);
	free(qh);
	free(sc);
	free(oh);
	return rc;
}
