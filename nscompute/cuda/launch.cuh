/* launch.cuh - argument checks and error mapping shared by the kernel launchers. */
#ifndef NS_CUDA_LAUNCH_CUH
#define NS_CUDA_LAUNCH_CUH

#include <errno.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "quant.cuh"

namespace nsl {

/* 0 or -EIO after a launch (the error stays readable through ns_cuda_last_error). */
static inline int launched(void)
{
	cudaError_t e = cudaPeekAtLastError();

	if (e == cudaSuccess)
		return 0;
	(void)cudaGetLastError();
	return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? -ENODEV : -EIO;
}

static inline bool aligned(const void *p, uintptr_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

/* Geometry of a weight window: -ENOTSUP for another type, -EINVAL for partial blocks or a
 * pointer misaligned for the type (see below), -EOVERFLOW when the units of a row do not fit
 * 32 bits. */
static inline int window(uint32_t type, const void *w, uint64_t n_cols, uint64_t *row_bytes)
{
	uint32_t qk = 0, bytes = 0;

	switch (type) {
#define NSL_G(t) case nsq::t: qk = nsq::geo<nsq::t>::QK; bytes = nsq::geo<nsq::t>::BYTES; break;
	NSQ_TYPES(NSL_G)
#undef NSL_G
	default:
		return -ENOTSUP;
	}
	if (n_cols == 0 || n_cols % qk)
		return -EINVAL;
	if (n_cols / 32 > UINT32_MAX / 2)
		return -EOVERFLOW;
	/* each type's widest load: the lowest set bit of its block size, at most 16, so every
	 * row of a 16-byte aligned tensor is aligned enough */
	const uint32_t low = bytes & (0u - bytes); /* lowest set bit of the block size */

	if (!w || !aligned(w, low < 16 ? low : 16))
		return -EINVAL;
	*row_bytes = n_cols / qk * bytes;
	return 0;
}

} /* namespace nsl */

#endif
