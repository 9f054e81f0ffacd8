/* gemma.cu - the element-wise steps of Gemma 3 and 4 (nscuda.h, "Gemma"): the GELU(tanh) gated
 * product of the FFN and of the per-layer inputs, a scale by a constant or a device scalar,
 * the final logit soft-capping and the mix of the per-layer inputs. Written to follow
 * nscompute/forward/gemma_eval.c and ops.c operation by operation (no fused multiply-adds where
 * the CPU rounds twice); tanhf is CUDA's: a few ulps from the CPU's. */
#include <math.h>

#include "nscuda.h"

#include "launch.cuh"

namespace {

constexpr int GT = 256; /* threads of every kernel here */

/* grid-stride over n elements: blocks capped at 65535 */
static inline unsigned s_blocks(uint64_t n)
{
	const uint64_t b = (n + GT - 1) / GT;

	return (unsigned)(b > 65535 ? 65535 : b);
}

/* ns_gelu_tanh: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))), the CPU's order */
__device__ __forceinline__ float d_gelu_tanh(float x)
{
	const float k = 0.79788456080286535588f;
	const float in = __fmul_rn(__fmul_rn(k, x),
				   __fadd_rn(1.0f, __fmul_rn(__fmul_rn(0.044715f, x), x)));

	return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tanhf(in)));
}

/* g[r][i] = gelu_tanh(g[r][i]) * u[r][i], i < n, r < n_rows (one grid-stride over all) */
__global__ void k_geglu(float *g, uint64_t ldg, const float *u, uint64_t ldu, uint64_t n,
			uint64_t total)
{
	for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < total;
	     j += (uint64_t)gridDim.x * blockDim.x) {
		const uint64_t r = j / n, i = j % n;
		float *gp = g + r * ldg + i;

		*gp = __fmul_rn(d_gelu_tanh(*gp), u[r * ldu + i]);
	}
}

/* x *= (ds ? *ds : s) */
__global__ void k_scale(float *x, uint64_t n, float s, const float *ds)
{
	const float f = ds ? *ds : s;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		x[i] = __fmul_rn(x[i], f);
}

/* x = cap * tanh(x / cap) */
__global__ void k_softcap(float *x, uint64_t n, float cap)
{
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		x[i] = __fmul_rn(cap, tanhf(__fdiv_rn(x[i], cap)));
}

/* pl = (proj + pl * row_scale) * mix_scale */
__global__ void k_ple_mix(float *pl, const float *proj, uint64_t n, float row_scale,
			  float mix_scale)
{
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		pl[i] = __fmul_rn(__fadd_rn(proj[i], __fmul_rn(pl[i], row_scale)), mix_scale);
}

} /* namespace */

extern "C" int ns_cuda_geglu(float *dev_g, uint64_t ldg, const float *dev_u, uint64_t ldu,
			     uint64_t n, uint32_t n_rows, ns_cuda_stream_t s)
{
	uint64_t total;

	if (n == 0 || n_rows == 0)
		return 0;
	if (!dev_g || !dev_u || ldg < n || ldu < n)
		return -EINVAL;
	if (__builtin_mul_overflow(n, (uint64_t)n_rows, &total))
		return -EOVERFLOW;
	k_geglu<<<s_blocks(total), GT, 0, (cudaStream_t)s>>>(dev_g, ldg, dev_u, ldu, n, total);
	return nsl::launched();
}

extern "C" int ns_cuda_scale(float *dev_x, uint64_t n, float scale, const float *dev_scale,
			     ns_cuda_stream_t s)
{
	if (n == 0)
		return 0;
	if (!dev_x)
		return -EINVAL;
	k_scale<<<s_blocks(n), GT, 0, (cudaStream_t)s>>>(dev_x, n, scale, dev_scale);
	return nsl::launched();
}

extern "C" int ns_cuda_softcap(float *dev_x, uint64_t n, float cap, ns_cuda_stream_t s)
{
	if (n == 0)
		return 0;
	if (!dev_x || !(cap > 0))
		return -EINVAL;
	k_softcap<<<s_blocks(n), GT, 0, (cudaStream_t)s>>>(dev_x, n, cap);
	return nsl::launched();
}

extern "C" int ns_cuda_ple_mix(float *dev_pl, const float *dev_proj, uint64_t n, float row_scale,
			       float mix_scale, ns_cuda_stream_t s)
{
	if (n == 0)
		return 0;
	if (!dev_pl || !dev_proj)
		return -EINVAL;
	k_ple_mix<<<s_blocks(n), GT, 0, (cudaStream_t)s>>>(dev_pl, dev_proj, n, row_scale,
							   mix_scale);
	return nsl::launched();
}
