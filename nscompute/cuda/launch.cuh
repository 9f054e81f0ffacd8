/* launch.cuh - argument checks and error mapping shared by the kernel launchers. */
#ifndef NS_CUDA_LAUNCH_CUH
#define NS_CUDA_LAUNCH_CUH

#include <errno.h>
#include <stdint.h>

#include <type_traits>

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

/* The current device's SM count and shared memory limits (opt-in per block, per SM); false
 * when they cannot be read (the error is left for launched() to report). */
struct limits {
	int n_sm, optin, per_sm;
};

static inline bool device_limits(limits *l)
{
	int dev = 0;

	*l = limits{ 1, 48 * 1024, 64 * 1024 };
	return cudaGetDevice(&dev) == cudaSuccess &&
	       cudaDeviceGetAttribute(&l->n_sm, cudaDevAttrMultiProcessorCount, dev) ==
		       cudaSuccess &&
	       cudaDeviceGetAttribute(&l->optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) ==
		       cudaSuccess &&
	       cudaDeviceGetAttribute(&l->per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor,
				      dev) == cudaSuccess;
}

static inline bool aligned(const void *p, uintptr_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

/* Geometry of a weight window: -ENOTSUP for another type, -EINVAL for partial blocks or a
 * pointer misaligned for the type (see below), -EOVERFLOW when the units of a row do not fit
 * 32 bits. *tail (optional) says whether a row ends in a partial unit: only F32, F16 and BF16
 * rows can (their "blocks" are single elements, cut in units of 32 by the kernels); such rows
 * are row_bytes = n_cols * element size apart, so a window of them is only aligned to the
 * element (2 bytes for odd-length F16/BF16 rows), and the kernels read them through their tail
 * paths, element by element, never past the row's end. Quantized types keep whole blocks. */
static inline int window(uint32_t type, const void *w, uint64_t n_cols, uint64_t *row_bytes,
			 bool *tail = nullptr)
{
	uint32_t qk = 0, bytes = 0;
	bool flt = false;

	switch (type) {
#define NSL_G(t) case nsq::t: qk = nsq::geo<nsq::t>::QK; bytes = nsq::geo<nsq::t>::BYTES; \
	flt = nsq::geo<nsq::t>::FLT; break;
	NSQ_TYPES(NSL_G)
#undef NSL_G
	default:
		return -ENOTSUP;
	}
	const bool part = flt && n_cols % 32 != 0;

	if (n_cols == 0 || (n_cols % qk && !part))
		return -EINVAL;
	if ((n_cols + 31) / 32 > UINT32_MAX / 2)
		return -EOVERFLOW;
	/* each type's widest load: the lowest set bit of its block size, at most 16, so every
	 * row of a 16-byte aligned tensor is aligned enough; rows with a partial unit: the
	 * element size (bytes / 32) */
	const uint32_t low = part ? bytes / 32 : bytes & (0u - bytes);

	if (!w || !aligned(w, low < 16 ? low : 16))
		return -EINVAL;
	*row_bytes = part ? n_cols * (bytes / 32) : n_cols / qk * bytes;
	if (tail)
		*tail = part;
	return 0;
}

/* f(std::integral_constant<int, T>{}) for the type id's compile-time T (every type of
 * NSQ_TYPES); -ENOTSUP for another id. f instantiates its kernels per T, so it should keep
 * the variants a T does not need behind `if constexpr`. */
template <class F>
static inline int by_type(uint32_t type, F &&f)
{
	switch (type) {
#define NSL_BY(t) case nsq::t: return f(std::integral_constant<int, nsq::t>{});
	NSQ_TYPES(NSL_BY)
#undef NSL_BY
	}
	return -ENOTSUP;
}

/* The checked arguments of a decode GEMV launcher. */
struct gemv_args {
	uint64_t rb;   /* bytes per row */
	uint32_t nu;   /* 32-element units per row (the last one partial on tail rows) */
	uint32_t last; /* elements in the partial last unit; 0 unless a float tail row */
	bool tail;
};

/* The contract every GEMV family shares (nscuda.h ns_cuda_gemv): the window (above), x and
 * y present, x 16-byte aligned (4 on tail rows, read float by float), n_rows < 2^32.
 * Returns 0, 1 when there is nothing to do (n_rows 0), or a negative errno. */
static inline int gemv_check(uint32_t type, const void *w, uint64_t n_cols, uint64_t n_rows,
			     const float *x, const float *y, gemv_args *a)
{
	int rc = window(type, w, n_cols, &a->rb, &a->tail);

	if (rc)
		return rc;
	if (n_rows == 0)
		return 1;
	if (!x || !y || !aligned(x, a->tail ? 4 : 16))
		return -EINVAL;
	if (n_rows >= (1ull << 32))
		return -EOVERFLOW;
	a->nu = (uint32_t)((n_cols + 31) / 32);
	a->last = (uint32_t)(n_cols % 32);
	return 0;
}

} /* namespace nsl */

#endif
