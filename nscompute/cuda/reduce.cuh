/* reduce.cuh - the block reduction the row kernels share (ops.cu, tower.cu, dnet.cu). */
#ifndef NS_CUDA_REDUCE_CUH
#define NS_CUDA_REDUCE_CUH

namespace nsl {

/* Sum of v over a block of T threads (T a multiple of 32; sh holds T / 32 doubles): a fixed
 * xor-shuffle tree in each warp, then the warps' sums in warp order, so the order of the
 * additions never depends on timing. Every thread gets the result. Two barriers, not one per
 * tree level; the second lets the caller reuse sh at once. */
template <int T> __device__ double block_sum(double v, double *sh)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = v;
	__syncthreads();
	double r = sh[0];
	for (int w = 1; w < T / 32; w++)
		r += sh[w];
	__syncthreads();
	return r;
}

} // namespace nsl

#endif
