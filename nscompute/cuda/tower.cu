/* tower.cu - the vision tower's own steps (nscuda.h, "vision tower"): LayerNorm with bias,
 * the two GELUs, the table-driven 2-D rotary embedding, and a float32 GEMM (the tower's
 * matrices: the prefill GEMM's f16 operands would cost it ~5e-4 relative). Written to follow
 * nscompute/vision/vision_ops.c operation by operation: moments and the GELUs in double,
 * rounded once; float products and sums with no fused multiply-add where the CPU rounds twice.
 * Double-precision libm (tanh, erf, sqrt) is CUDA's: results agree with the CPU to an ulp or
 * two, not bit for bit. The row reduction is a fixed tree: deterministic. */
#include <math.h>

#include "nscuda.h"

#include "launch.cuh"
#include "reduce.cuh"

namespace {

constexpr int TT = 256; /* threads of the row kernel */

/* One block per row: mean, then the variance around it (two passes, as vision_ops.c). */
__global__ void __launch_bounds__(TT)
k_layernorm(float *y, const float *x, const float *w, const float *b, uint32_t n, float eps)
{
	__shared__ double sh[TT / 32];
	const float *xr = x + (uint64_t)blockIdx.x * n;
	float *yr = y + (uint64_t)blockIdx.x * n;
	double part = 0.0;

	for (uint32_t i = threadIdx.x; i < n; i += TT)
		part += (double)xr[i];
	const double mean = nsl::block_sum<TT>(part, sh) / n;
	part = 0.0;
	for (uint32_t i = threadIdx.x; i < n; i += TT) {
		const double dv = (double)xr[i] - mean;

		part += dv * dv;
	}
	const double inv = 1.0 / sqrt(nsl::block_sum<TT>(part, sh) / n + (double)eps);
	for (uint32_t i = threadIdx.x; i < n; i += TT)
		yr[i] = __fadd_rn(__fmul_rn((float)(((double)xr[i] - mean) * inv), w[i]), b[i]);
}

__global__ void k_gelu(float *x, uint64_t n, bool exact)
{
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		const double v = x[i];

		if (exact)
			x[i] = (float)(0.5 * v * (1.0 + erf(v / M_SQRT2)));
		else
			x[i] = (float)(0.5 * v *
				       (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))));
	}
}

/* grid (row blocks, heads); thread i of a row's head turns the pair (i, i + half). */
__global__ void k_rope_table(float *x, uint64_t n, uint64_t stride, uint32_t head_dim,
			     const float *cs)
{
	const uint32_t half = head_dim / 2;

	for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n * half;
	     e += (uint64_t)gridDim.x * blockDim.x) {
		const uint64_t p = e / half;
		const uint32_t i = (uint32_t)(e % half);
		const float c = cs[p * head_dim + i], s = cs[p * head_dim + half + i];
		float *v = x + p * stride + (uint64_t)blockIdx.y * head_dim;
		const float a = v[i], bb = v[half + i];

		v[i] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(bb, s));
		v[half + i] = __fadd_rn(__fmul_rn(bb, c), __fmul_rn(a, s));
	}
}

constexpr int GB = 64; /* the f32 GEMM's tile: 64 rows x 64 tokens */
constexpr int GK = 16; /* columns per shared-memory step */

/* y[t * ldy + r] = sum_k w[r * n_cols + k] x[t * ldx + k]: one 64 x 64 tile per block, 256
 * threads of 4 x 4 outputs (rows tx + 16 i, tokens ty + 16 j); each output's products are
 * added in column order by one thread (fmaf), so it depends only on its own row, token and
 * n_cols. Out-of-range elements load as zeros, which add nothing. */
__global__ void __launch_bounds__(256)
k_sgemm(const float *w, uint64_t n_cols, uint64_t n_rows, const float *x, uint64_t ldx,
	uint64_t n_tok, float *y, uint64_t ldy)
{
	__shared__ float ws[GK][GB + 1];
	__shared__ float xs[GK][GB + 1];
	const uint64_t r0 = (uint64_t)blockIdx.x * GB, t0 = (uint64_t)blockIdx.y * GB;
	const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	float acc[4][4];

#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++)
			acc[i][j] = 0.0f;
	for (uint64_t k0 = 0; k0 < n_cols; k0 += GK) {
		for (int e = threadIdx.x; e < GB * GK; e += 256) {
			const int rr = e / GK, kk = e % GK;
			const uint64_t k = k0 + kk;

			ws[kk][rr] = r0 + rr < n_rows && k < n_cols ? w[(r0 + rr) * n_cols + k] : 0.0f;
			xs[kk][rr] = t0 + rr < n_tok && k < n_cols ? x[(t0 + rr) * ldx + k] : 0.0f;
		}
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < GK; kk++) {
			float a[4], b[4];

#pragma unroll
			for (int i = 0; i < 4; i++) {
				a[i] = ws[kk][tx + 16 * i];
				b[i] = xs[kk][ty + 16 * i];
			}
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const uint64_t r = r0 + tx + 16 * i, t = t0 + ty + 16 * j;

			if (r < n_rows && t < n_tok)
				y[t * ldy + r] = acc[i][j];
		}
}

unsigned blocks_for(uint64_t n, unsigned per)
{
	const uint64_t b = (n + per - 1) / per;

	return b > 65535 * 16 ? 65535 * 16 : b ? (unsigned)b : 1;
}

} /* namespace */

extern "C" int ns_cuda_layernorm(float *dev_y, const float *dev_x, const float *dev_w,
				 const float *dev_b, uint32_t n, uint32_t n_rows, float eps,
				 ns_cuda_stream_t s)
{
	if (n == 0 || n_rows == 0)
		return 0;
	if (!dev_y || !dev_x || !dev_w || !dev_b || n_rows > INT32_MAX)
		return -EINVAL;
	k_layernorm<<<n_rows, TT, 0, (cudaStream_t)s>>>(dev_y, dev_x, dev_w, dev_b, n, eps);
	return nsl::launched();
}

extern "C" int ns_cuda_gelu(float *dev_x, uint64_t n, bool erf, ns_cuda_stream_t s)
{
	if (n == 0)
		return 0;
	if (!dev_x)
		return -EINVAL;
	k_gelu<<<blocks_for(n, 256), 256, 0, (cudaStream_t)s>>>(dev_x, n, erf);
	return nsl::launched();
}

extern "C" int ns_cuda_rope_table(float *dev_x, uint64_t n, uint64_t stride, uint32_t n_heads,
				  uint32_t head_dim, const float *dev_cs, ns_cuda_stream_t s)
{
	if (n == 0 || n_heads == 0)
		return 0;
	if (!dev_x || !dev_cs || head_dim == 0 || head_dim % 2 ||
	    stride < (uint64_t)n_heads * head_dim || n_heads > 65535)
		return -EINVAL;
	const dim3 grid(blocks_for(n * (head_dim / 2), 256), n_heads);
	k_rope_table<<<grid, 256, 0, (cudaStream_t)s>>>(dev_x, n, stride, head_dim, dev_cs);
	return nsl::launched();
}

extern "C" int ns_cuda_sgemm(const float *dev_w, uint64_t n_cols, uint64_t n_rows,
			     const float *dev_x, uint64_t ldx, uint64_t n_tok, float *dev_y,
			     uint64_t ldy, ns_cuda_stream_t s)
{
	if (n_rows == 0 || n_tok == 0)
		return 0;
	if (!dev_w || !dev_x || !dev_y || n_cols == 0 || ldx < n_cols || ldy < n_rows)
		return -EINVAL;
	if ((n_rows + GB - 1) / GB > INT32_MAX || (n_tok + GB - 1) / GB > 65535)
		return -EOVERFLOW;
	const dim3 grid((unsigned)((n_rows + GB - 1) / GB), (unsigned)((n_tok + GB - 1) / GB));
	k_sgemm<<<grid, 256, 0, (cudaStream_t)s>>>(dev_w, n_cols, n_rows, dev_x, ldx, n_tok,
						   dev_y, ldy);
	return nsl::launched();
}
