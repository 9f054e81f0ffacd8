/* glue.cu - the element-wise kernels between the big ones of the forward pass (nscuda.h,
 * "forward-pass glue"): residual adds, bias rows, rows scaled by a vector (gemma4's router
 * input), the MoE gather / weighted scatter / slot sum, gated attention's [q | gate] split.
 * Each output element is computed by one thread from the same operands in the same order as
 * nscompute/forward (llama.c, moe.c), so these agree with the CPU bit for bit. */
#include "nscuda.h"

#include "launch.cuh"

namespace {

constexpr int GT = 256; /* threads per block */

/* Blocks for n elements, capped (grid-stride loops cover the rest). */
static unsigned blocks_for(uint64_t n)
{
	uint64_t b = (n + GT - 1) / GT;

	return b > 65535 * 16 ? 65535 * 16 : b ? (unsigned)b : 1;
}

__global__ void k_add(float *y, const float *x, uint64_t n)
{
	for (uint64_t i = (uint64_t)blockIdx.x * GT + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * GT)
		y[i] = __fadd_rn(y[i], x[i]);
}

/* y[t * ld + i] += b[i], i < n, t < n_tok: grid (blocks over n, n_tok) */
__global__ void k_add_rows(float *y, uint64_t ld, const float *b, uint64_t n)
{
	float *yr = y + (uint64_t)blockIdx.y * ld;

	for (uint64_t i = (uint64_t)blockIdx.x * GT + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * GT)
		yr[i] = __fadd_rn(yr[i], b[i]);
}

/* y[t * ld + i] = (y[t * ld + i] * s) * w[i], i < n, t < n_tok: grid (blocks over n, n_tok) */
__global__ void k_scale_rows(float *y, uint64_t ld, float s, const float *w, uint64_t n)
{
	float *yr = y + (uint64_t)blockIdx.y * ld;

	for (uint64_t i = (uint64_t)blockIdx.x * GT + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * GT)
		yr[i] = __fmul_rn(__fmul_rn(yr[i], s), w[i]);
}

/* dst[i * n + j] = src[idx[i] * n + j]: grid (blocks over n, m) */
__global__ void k_gather(float *dst, const float *src, const int32_t *idx, uint64_t n)
{
	const float *sr = src + (uint64_t)idx[blockIdx.y] * n;
	float *dr = dst + (uint64_t)blockIdx.y * n;

	for (uint64_t j = (uint64_t)blockIdx.x * GT + threadIdx.x; j < n;
	     j += (uint64_t)gridDim.x * GT)
		dr[j] = sr[j];
}

/* ys[slot[i] * n + j] = src[i * n + j] * w[slot[i]]: grid (blocks over n, m) */
__global__ void k_scatter_scaled(float *ys, const float *src, const int32_t *slot,
				 const float *w, uint64_t n)
{
	const int32_t s = slot[blockIdx.y];
	const float ws = w[s];
	const float *sr = src + (uint64_t)blockIdx.y * n;
	float *yr = ys + (uint64_t)s * n;

	for (uint64_t j = (uint64_t)blockIdx.x * GT + threadIdx.x; j < n;
	     j += (uint64_t)gridDim.x * GT)
		yr[j] = __fmul_rn(sr[j], ws);
}

/* y[t * n + j] = ys[t, 0, j] + ys[t, 1, j] + ... in slot order: grid (blocks over n, n_tok) */
__global__ void k_sum_slots(float *y, const float *ys, uint32_t k, uint64_t n)
{
	const float *yt = ys + (uint64_t)blockIdx.y * k * n;
	float *out = y + (uint64_t)blockIdx.y * n;

	for (uint64_t j = (uint64_t)blockIdx.x * GT + threadIdx.x; j < n;
	     j += (uint64_t)gridDim.x * GT) {
		float acc = yt[j];

		for (uint32_t s = 1; s < k; s++)
			acc = __fadd_rn(acc, yt[(uint64_t)s * n + j]);
		out[j] = acc;
	}
}

/* dst[*pos * ld + i] = src[i] */
__global__ void k_store_row(float *dst, uint64_t ld, const float *src, uint64_t n,
			    const int64_t *pos)
{
	float *row = dst + (uint64_t)*pos * ld;

	for (uint64_t i = (uint64_t)blockIdx.x * GT + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * GT)
		row[i] = src[i];
}

/* q[t][i] = qg[t][h][0][e], g[t][i] = qg[t][h][1][e], i = h * dim + e: grid (blocks over
 * n_head * dim, n_tok) */
__global__ void k_split_gate(float *q, float *g, const float *qg, uint32_t dim, uint64_t nq)
{
	const float *src = qg + (uint64_t)blockIdx.y * 2 * nq;

	for (uint64_t i = (uint64_t)blockIdx.x * GT + threadIdx.x; i < nq;
	     i += (uint64_t)gridDim.x * GT) {
		const uint64_t h = i / dim, e = i % dim;

		q[(uint64_t)blockIdx.y * nq + i] = src[h * 2 * dim + e];
		g[(uint64_t)blockIdx.y * nq + i] = src[h * 2 * dim + dim + e];
	}
}

/* Grid of (blocks over n, rows) with the row count in y (at most 65535). */
static bool grid2(uint64_t n, uint32_t rows, dim3 *g)
{
	uint64_t bx = (n + GT - 1) / GT;

	if (rows == 0 || rows > 65535)
		return false;
	*g = dim3(bx > 4096 ? 4096 : bx ? (unsigned)bx : 1, rows);
	return true;
}

} /* namespace */

extern "C" int ns_cuda_add(float *dev_y, const float *dev_x, uint64_t n, ns_cuda_stream_t s)
{
	if (n == 0)
		return 0;
	if (!dev_y || !dev_x)
		return -EINVAL;
	k_add<<<blocks_for(n), GT, 0, (cudaStream_t)s>>>(dev_y, dev_x, n);
	return nsl::launched();
}

extern "C" int ns_cuda_add_rows(float *dev_y, uint64_t ld, const float *dev_b, uint64_t n,
				uint32_t n_tok, ns_cuda_stream_t s)
{
	dim3 g;

	if (n == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_b || ld < n || !grid2(n, n_tok, &g))
		return -EINVAL;
	k_add_rows<<<g, GT, 0, (cudaStream_t)s>>>(dev_y, ld, dev_b, n);
	return nsl::launched();
}

extern "C" int ns_cuda_scale_rows(float *dev_y, uint64_t ld, float scale, const float *dev_w,
				  uint64_t n, uint32_t n_tok, ns_cuda_stream_t s)
{
	dim3 g;

	if (n == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_w || ld < n || !grid2(n, n_tok, &g))
		return -EINVAL;
	k_scale_rows<<<g, GT, 0, (cudaStream_t)s>>>(dev_y, ld, scale, dev_w, n);
	return nsl::launched();
}

extern "C" int ns_cuda_gather_rows(float *dev_dst, const float *dev_src, const int32_t *dev_idx,
				   uint32_t m, uint64_t n, ns_cuda_stream_t s)
{
	dim3 g;

	if (n == 0 || m == 0)
		return 0;
	if (!dev_dst || !dev_src || !dev_idx || !grid2(n, m, &g))
		return -EINVAL;
	k_gather<<<g, GT, 0, (cudaStream_t)s>>>(dev_dst, dev_src, dev_idx, n);
	return nsl::launched();
}

extern "C" int ns_cuda_scatter_scaled(float *dev_ys, const float *dev_src,
				      const int32_t *dev_slot, const float *dev_w, uint32_t m,
				      uint64_t n, ns_cuda_stream_t s)
{
	dim3 g;

	if (n == 0 || m == 0)
		return 0;
	if (!dev_ys || !dev_src || !dev_slot || !dev_w || !grid2(n, m, &g))
		return -EINVAL;
	k_scatter_scaled<<<g, GT, 0, (cudaStream_t)s>>>(dev_ys, dev_src, dev_slot, dev_w, n);
	return nsl::launched();
}

extern "C" int ns_cuda_sum_slots(float *dev_y, const float *dev_ys, uint32_t n_tok, uint32_t k,
				 uint64_t n, ns_cuda_stream_t s)
{
	dim3 g;

	if (n == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_ys || k == 0 || !grid2(n, n_tok, &g))
		return -EINVAL;
	k_sum_slots<<<g, GT, 0, (cudaStream_t)s>>>(dev_y, dev_ys, k, n);
	return nsl::launched();
}

extern "C" int ns_cuda_store_row(float *dev_dst, uint64_t ld, const float *dev_src, uint64_t n,
				 const int64_t *dev_pos, ns_cuda_stream_t s)
{
	if (n == 0)
		return 0;
	if (!dev_dst || !dev_src || !dev_pos || ld < n)
		return -EINVAL;
	k_store_row<<<blocks_for(n), GT, 0, (cudaStream_t)s>>>(dev_dst, ld, dev_src, n, dev_pos);
	return nsl::launched();
}

extern "C" int ns_cuda_split_gate(float *dev_q, float *dev_g, const float *dev_qg,
				  uint32_t n_head, uint32_t dim, uint32_t n_tok, ns_cuda_stream_t s)
{
	const uint64_t nq = (uint64_t)n_head * dim;
	dim3 g;

	if (nq == 0 || n_tok == 0)
		return 0;
	if (!dev_q || !dev_g || !dev_qg || !grid2(nq, n_tok, &g))
		return -EINVAL;
	k_split_gate<<<g, GT, 0, (cudaStream_t)s>>>(dev_q, dev_g, dev_qg, dim, nq);
	return nsl::launched();
}
