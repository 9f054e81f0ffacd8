/* dnet.cu - the Gated DeltaNet mixer of Qwen3.5 (nscuda.h, "Qwen3.5"): the causal conv1d with
 * its carried history, the per-head L2 norm and the gated delta rule, written to follow
 * nscompute/forward/deltanet.c operation by operation (no fused multiply-adds where the CPU
 * rounds twice; sums over the key dimension in the CPU's order). The recurrence runs token by
 * token, also over a prefill chunk, so whole, chunked and one-token evaluation give the same
 * bits. exp/log are CUDA's: a few ulps from the CPU. */
#include <math.h>

#include "nscuda.h"

#include "launch.cuh"
#include "reduce.cuh"

namespace {

constexpr int KMAX = 16;  /* widest conv kernel (Qwen3.5: 4) */
constexpr int CT = 128;   /* threads of the conv and L2-norm kernels */

/* One thread per channel, the tokens in order; the K - 1 newest inputs stay in registers
 * (every index below is a constant after unrolling). */
__global__ void __launch_bounds__(CT)
k_conv(float *y, const float *x, float *hist, const float *w, uint32_t n_ch, uint32_t K,
       uint32_t n_tok)
{
	const uint32_t ch = blockIdx.x * CT + threadIdx.x;
	float h[KMAX - 1];

	if (ch >= n_ch)
		return;
	const float *wc = w + (uint64_t)ch * K;
#pragma unroll
	for (int j = 0; j < KMAX - 1; j++)
		h[j] = j + 1 < (int)K ? hist[(uint64_t)j * n_ch + ch] : 0.0f;
	for (uint32_t t = 0; t < n_tok; t++) {
		const float xv = x[(uint64_t)t * n_ch + ch];
		float s = 0.0f;

#pragma unroll
		for (int j = 0; j < KMAX - 1; j++)
			if (j + 1 < (int)K)
				s = __fadd_rn(s, __fmul_rn(h[j], wc[j]));
		s = __fadd_rn(s, __fmul_rn(xv, wc[K - 1]));
		y[(uint64_t)t * n_ch + ch] = __fdiv_rn(s, __fadd_rn(1.0f, expf(-s)));
		/* the window moves: oldest out, x in */
#pragma unroll
		for (int j = 0; j < KMAX - 2; j++) {
			if (j + 2 < (int)K)
				h[j] = h[j + 1];
			else if (j + 2 == (int)K)
				h[j] = xv;
		}
		if (K == KMAX)
			h[KMAX - 2] = xv;
	}
#pragma unroll
	for (int j = 0; j < KMAX - 1; j++)
		if (j + 1 < (int)K)
			hist[(uint64_t)j * n_ch + ch] = h[j];
}

/* One block per (head, token): x / max(|x|, eps) * scale, the squares summed in double by a
 * fixed tree (reduce.cuh). */
__global__ void __launch_bounds__(CT)
k_l2norm(float *x, uint64_t ld, uint32_t dim, float eps, float scale)
{
	__shared__ double sh[CT / 32];
	float *r = x + (uint64_t)blockIdx.y * ld + (uint64_t)blockIdx.x * dim;
	double v = 0.0;

	for (uint32_t i = threadIdx.x; i < dim; i += CT)
		v += (double)__fmul_rn(r[i], r[i]);
	const double sum = nsl::block_sum<CT>(v, sh);
	const float inv = __fdiv_rn(1.0f, fmaxf(sqrtf((float)sum), eps));
	for (uint32_t i = threadIdx.x; i < dim; i += CT)
		r[i] = __fmul_rn(__fmul_rn(r[i], inv), scale);
}

/* One block per value head, thread j owns column j of the head's state S (dk, dv) in global
 * memory; the tokens in order, each token's q and k staged in shared memory. */
__global__ void k_delta(float *S, const float *qkv, uint64_t ld, const float *a, const float *b,
			const float *dt_b, const float *ssm_a, uint32_t n_k, uint32_t n_v,
			uint32_t dk, uint32_t dv, uint32_t n_tok, float *o)
{
	extern __shared__ float qk[]; /* (2 dk): q, k of the token */
	const uint32_t h = blockIdx.x, kh = h % n_k, j = threadIdx.x;
	float *Sh = S + (uint64_t)h * dk * dv;
	const uint64_t vd = (uint64_t)n_v * dv;

	for (uint32_t t = 0; t < n_tok; t++) {
		const float *row = qkv + (uint64_t)t * ld;

		__syncthreads(); /* the previous token's q, k read by every thread */
		for (uint32_t i = threadIdx.x; i < dk; i += blockDim.x) {
			qk[i] = row[(uint64_t)kh * dk + i];
			qk[dk + i] = row[(uint64_t)(n_k + kh) * dk + i];
		}
		__syncthreads();
		if (j >= dv)
			continue;
		/* decay = exp(softplus(a + dt_b) * ssm_a) (softplus linear above 20, as ggml),
		 * beta = sigmoid(b) */
		const float av = __fadd_rn(a[(uint64_t)t * n_v + h], dt_b[h]);
		const float sp = av > 20.0f ? av : logf(__fadd_rn(1.0f, expf(av)));
		const float decay = expf(__fmul_rn(sp, ssm_a[h]));
		const float beta = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-b[(uint64_t)t * n_v + h])));
		float kv = 0.0f, acc = 0.0f;

		for (uint32_t i = 0; i < dk; i++) { /* S *= decay; kv = S^T k */
			const float s = __fmul_rn(Sh[(uint64_t)i * dv + j], decay);

			Sh[(uint64_t)i * dv + j] = s;
			kv = __fadd_rn(kv, __fmul_rn(s, qk[dk + i]));
		}
		const float d = __fmul_rn(__fsub_rn(row[2ull * n_k * dk + (uint64_t)h * dv + j], kv),
					  beta);
		for (uint32_t i = 0; i < dk; i++) { /* S += k d^T; o = S^T q */
			const float s = __fadd_rn(Sh[(uint64_t)i * dv + j], __fmul_rn(qk[dk + i], d));

			Sh[(uint64_t)i * dv + j] = s;
			acc = __fadd_rn(acc, __fmul_rn(s, qk[i]));
		}
		o[(uint64_t)t * vd + (uint64_t)h * dv + j] = acc;
	}
}

} /* namespace */

extern "C" int ns_cuda_conv1d_silu(float *dev_y, const float *dev_x, float *dev_hist,
				   const float *dev_w, uint32_t n_ch, uint32_t K, uint32_t n_tok,
				   ns_cuda_stream_t s)
{
	if (n_ch == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_x || !dev_w || K == 0 || K > KMAX || (K > 1 && !dev_hist))
		return -EINVAL;
	k_conv<<<(n_ch + CT - 1) / CT, CT, 0, (cudaStream_t)s>>>(dev_y, dev_x, dev_hist, dev_w,
								  n_ch, K, n_tok);
	return nsl::launched();
}

extern "C" int ns_cuda_l2norm(float *dev_x, uint64_t ld, uint32_t n_heads, uint32_t dim,
			      uint32_t n_tok, float eps, float scale, ns_cuda_stream_t s)
{
	if (n_heads == 0 || dim == 0 || n_tok == 0)
		return 0;
	if (!dev_x || ld < (uint64_t)n_heads * dim || n_tok > 65535 || n_heads > INT32_MAX)
		return -EINVAL;
	k_l2norm<<<dim3(n_heads, n_tok), CT, 0, (cudaStream_t)s>>>(dev_x, ld, dim, eps, scale);
	return nsl::launched();
}

extern "C" int ns_cuda_delta_rule(float *dev_S, const float *dev_qkv, uint64_t ld,
				  const float *dev_a, const float *dev_b, const float *dev_dt_b,
				  const float *dev_ssm_a, uint32_t n_k, uint32_t n_v, uint32_t dk,
				  uint32_t dv, uint32_t n_tok, float *dev_o, ns_cuda_stream_t s)
{
	if (n_v == 0 || n_tok == 0)
		return 0;
	if (!dev_S || !dev_qkv || !dev_a || !dev_b || !dev_dt_b || !dev_ssm_a || !dev_o ||
	    n_k == 0 || n_v % n_k || n_v > 65535 || dk == 0 || dk > 1024 || dv == 0 ||
	    dv > 1024 || ld < 2ull * n_k * dk + (uint64_t)n_v * dv)
		return -EINVAL;
	k_delta<<<n_v, (dv + 31) / 32 * 32, 2 * dk * sizeof(float), (cudaStream_t)s>>>(
		dev_S, dev_qkv, ld, dev_a, dev_b, dev_dt_b, dev_ssm_a, n_k, n_v, dk, dv, n_tok,
		dev_o);
	return nsl::launched();
}
