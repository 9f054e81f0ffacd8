/* gemv.cu - dequantization and the fused decode GEMV of every type (nscuda.h).
 *
 * GEMV: one warp per pair of rows. Lane l takes units l, l+32, l+64, ... of both rows (32
 * elements each, see quant.cuh): a warp reads 32 consecutive units of a row, coalesced, each
 * weight byte once. x is copied once per block into shared memory, padded to 36 floats per
 * unit so that a lane's 16-byte reads of its own unit do not collide in banks, and each slice
 * is read once for both rows. Each row has its own accumulator, summed unit by unit in the
 * same order whichever path (staged or direct weights, shared or global x) computes it, then
 * reduced by a fixed xor-shuffle tree: the order of every operation depends only on n_cols,
 * so a row gives the same bits in any window, in either slot of a pair and in any block.
 *
 * Float rows whose length is not a multiple of 32 (launch.cuh's tail rows: stories260K's
 * 172-wide FFN-down) take the same kernel with TL set: n_units counts the last, partial unit,
 * the weights are read element by element up to the row's end (quant.cuh dot_unit_part), x is
 * zero-padded to whole units in shared memory (or read up to x[n_cols - 1] from global
 * memory), and the per-unit arithmetic and the reduction are those above; whether a row takes
 * the tail path depends only on n_cols, so the determinism above holds for tail rows too. */
#include "nscuda.h"
#include "nscuda_internal.h"

#include <stdlib.h>

#include "launch.cuh"

namespace {

constexpr int GEMV_WARPS = 8; /* warps per block */
constexpr int GEMV_ROWS = 2;  /* rows per warp: each x load serves both */
constexpr int XPAD = 36;      /* floats per unit of x in shared memory (conflict-free LDS.128) */

/* Weight staging of the types whose blocks are not multiples of 16 bytes: a lane reading its
 * own block straight from global memory would issue 2-byte loads strided across the warp
 * (many L1 wavefronts per load), so the warp first copies its 32 units of each row, contiguous
 * in the row, into shared memory with coalesced loads as wide as the window's alignment allows
 * (16 bytes for the usual shapes; 4 or 2 for e.g. 2880-column Q8_0 / MXFP4 rows). */
template <int T> struct stage {
	using G = nsq::geo<T>;
	static constexpr int WCH = (32 / G::SUBS) * G::BYTES; /* bytes of 32 units */
	static constexpr bool ON = !G::FLT && G::BYTES % 16 != 0;
};

/* Copy n bytes from src (aligned to cp, a power of two <= 16, warp-uniform) to dst (aligned
 * to cp in shared memory) with the whole warp, each load instruction covering contiguous
 * bytes. */
template <typename V>
__device__ __forceinline__ uint32_t copy_as(const uint8_t *__restrict__ src, uint8_t *dst,
					   uint32_t n, uint32_t lane)
{
	const uint32_t nv = n / sizeof(V);

	for (uint32_t i = lane; i < nv; i += 32)
		reinterpret_cast<V *>(dst)[i] = reinterpret_cast<const V *>(src)[i];
	return nv * sizeof(V);
}

__device__ __forceinline__ void warp_copy(const uint8_t *__restrict__ src, uint8_t *dst,
					  uint32_t n, uint32_t lane, uint32_t cp)
{
	uint32_t done;

	switch (cp) {
	case 16: done = copy_as<uint4>(src, dst, n, lane); break;
	case 8: done = copy_as<uint2>(src, dst, n, lane); break;
	case 4: done = copy_as<uint32_t>(src, dst, n, lane); break;
	case 2: done = copy_as<uint16_t>(src, dst, n, lane); break;
	default: done = 0; break;
	}
	for (uint32_t i = done + lane; i < n; i += 32)
		dst[i] = src[i];
}

/* WS: stage weights (stage<T>::ON types, aligned windows); XS: x in shared memory; TL: float
 * rows ending in a partial unit of last (1..31) elements (WS off).
 * Blocks loop over row pairs (grid-stride), so x is copied to shared memory once per block. */
template <int T, bool WS, bool XS, bool TL>
__global__ void __launch_bounds__(32 * GEMV_WARPS, 1)
k_gemv(const uint8_t *__restrict__ w, uint64_t row_bytes, uint32_t n_units,
       const float *__restrict__ x, float *__restrict__ y, uint64_t n_rows, uint32_t cp,
       uint32_t last)
{
	using G = nsq::geo<T>;
	using S = stage<T>;
	extern __shared__ __align__(16) float xs[]; /* (n_units, XPAD) when XS */
	__shared__ __align__(16) uint8_t wst[WS ? GEMV_WARPS * GEMV_ROWS * S::WCH : 16];
	const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x / 32;

	if constexpr (XS && TL) { /* x[0 .. n_cols - 1], zeros to the end of the last unit */
		nsq::stage_x_part(xs, x, n_units, last, XPAD, threadIdx.x, blockDim.x);
		__syncthreads();
	} else if constexpr (XS) {
		for (uint32_t i = threadIdx.x; i < n_units * 8; i += blockDim.x)
			*reinterpret_cast<float4 *>(&xs[(i / 8) * XPAD + 4 * (i % 8)]) =
				reinterpret_cast<const float4 *>(x)[i];
		__syncthreads();
	}
	const float *xsrc = XS ? xs : x;
	uint8_t *st0 = wst + warp * GEMV_ROWS * (WS ? S::WCH : 0);

	for (uint64_t pair = (uint64_t)blockIdx.x * GEMV_WARPS + warp; pair * GEMV_ROWS < n_rows;
	     pair += (uint64_t)gridDim.x * GEMV_WARPS) {
		const uint64_t r0 = pair * GEMV_ROWS;
		const uint8_t *row0 = w + r0 * row_bytes;
		const bool two = r0 + 1 < n_rows; /* warp-uniform */
		float acc0 = 0.0f, acc1 = 0.0f;

		for (uint32_t c0 = 0; c0 < n_units; c0 += 32) {
			const uint32_t u = c0 + lane;
			float xv[32];

			if constexpr (WS) {
				const uint32_t nu = n_units - c0 < 32 ? n_units - c0 : 32;
				const uint32_t nb = nu / G::SUBS * G::BYTES;
				const uint8_t *src = row0 + (uint64_t)(c0 / G::SUBS) * G::BYTES;

				warp_copy(src, st0, nb, lane, cp);
				if (two)
					warp_copy(src + row_bytes, st0 + S::WCH, nb, lane, cp);
				__syncwarp();
				if (u < n_units) {
					nsq::load_x_unit(xsrc, u, XS ? XPAD : 32, xv);
					acc0 += nsq::dot_unit<T>(st0, lane, xv);
					if (two)
						acc1 += nsq::dot_unit<T>(st0 + S::WCH, lane, xv);
				}
				__syncwarp();
			} else if constexpr (TL) {
				if (u < n_units) {
					const uint32_t n = u + 1 < n_units ? 32 : last;

					if constexpr (XS)
						nsq::load_x_unit(xsrc, u, XPAD, xv);
					else
						nsq::load_x_part(x, u, n, xv);
					const uint8_t *row1 = row0 + row_bytes;

					acc0 += nsq::dot_unit_part<T>(row0, u, n, xv);
					if (two)
						acc1 += nsq::dot_unit_part<T>(row1, u, n, xv);
				}
			} else if (u < n_units) {
				nsq::load_x_unit(xsrc, u, XS ? XPAD : 32, xv);
				acc0 += nsq::dot_unit<T>(row0, u, xv);
				if (two)
					acc1 += nsq::dot_unit<T>(row0 + row_bytes, u, xv);
			}
		}
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
			acc0 += __shfl_xor_sync(0xffffffffu, acc0, o);
			acc1 += __shfl_xor_sync(0xffffffffu, acc1, o);
		}
		if (lane == 0) {
			y[r0] = acc0;
			if (two)
				y[r0 + 1] = acc1;
		}
	}
}

/* Launch of one instantiation; the dynamic shared memory above 48 KiB is opted in. */
template <int T, bool WS, bool XS, bool TL = false>
int launch_gemv(const uint8_t *w, uint64_t rb, uint32_t nu, const float *x, float *y,
		uint64_t n_rows, uint64_t blocks, size_t xbytes, uint32_t cp, cudaStream_t st,
		uint32_t last = 0)
{
	/* static staging + dynamic x above the default 48 KiB needs the opt-in */
	constexpr size_t wst = WS ? GEMV_WARPS * GEMV_ROWS * stage<T>::WCH : 16;
	if (XS && xbytes + wst > 48 * 1024 &&
	    cudaFuncSetAttribute(k_gemv<T, WS, XS, TL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)xbytes) != cudaSuccess)
		return nsl::launched();
	k_gemv<T, WS, XS, TL><<<(unsigned)blocks, 32 * GEMV_WARPS, XS ? xbytes : 0, st>>>(
		w, rb, nu, x, y, n_rows, cp, last);
	return nsl::launched();
}

/* last: 0 for whole units, else the elements of the partial last unit (float types) */
template <int T>
int gemv_type(const uint8_t *w, uint64_t rb, uint32_t nu, const float *x, float *y,
	      uint64_t n_rows, uint32_t last, cudaStream_t st)
{
	using S = stage<T>;
	nsl::limits lim;
	const uint64_t per = GEMV_WARPS * GEMV_ROWS;
	uint64_t blocks = (n_rows + per - 1) / per;
	const size_t xbytes = (size_t)nu * XPAD * sizeof(float);
	const size_t wbytes = S::ON ? GEMV_WARPS * GEMV_ROWS * S::WCH : 16;

	if (!nsl::device_limits(&lim))
		return nsl::launched();
	const int n_sm = lim.n_sm, optin = lim.optin;
	const bool xs = xbytes + wbytes + 1024 <= (size_t)optin;
	/* copy width: the lowest set bit of the window address, the row size and the chunk size */
	const uint64_t al = (uint64_t)(uintptr_t)w | rb | (uint64_t)S::WCH | 16u;
	const uint32_t cp = (uint32_t)(al & (0 - al));
	const bool ws = S::ON && xs;

	if (xs && blocks > (uint64_t)n_sm * 4)
		blocks = (uint64_t)n_sm * 4; /* grid-stride: x copied once per block */
	if (blocks > INT32_MAX)
		return -EOVERFLOW;
	if constexpr (nsq::geo<T>::FLT) {
		if (last && xs)
			return launch_gemv<T, false, true, true>(w, rb, nu, x, y, n_rows, blocks,
								 xbytes, cp, st, last);
		if (last)
			return launch_gemv<T, false, false, true>(w, rb, nu, x, y, n_rows, blocks,
								  0, cp, st, last);
	}
	if constexpr (S::ON) {
		if (ws)
			return launch_gemv<T, true, true>(w, rb, nu, x, y, n_rows, blocks, xbytes, cp,
							 st);
	}
	if (xs)
		return launch_gemv<T, false, true>(w, rb, nu, x, y, n_rows, blocks, xbytes, cp, st);
	return launch_gemv<T, false, false>(w, rb, nu, x, y, n_rows, blocks, 0, cp, st);
}

/* One thread per unit: 32 exact floats (TL: float rows of n_units - 1 whole units and a last
 * one of last elements, written as they are: y rows n_cols apart, nothing past them). */
template <int T, bool TL>
__global__ void k_dequant(const uint8_t *__restrict__ w, uint64_t row_bytes, uint32_t n_units,
			  uint64_t n_rows, float *__restrict__ y, uint32_t last)
{
	const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	const uint64_t r = i / n_units;
	const uint32_t u = (uint32_t)(i % n_units);
	float v[32];

	if (r >= n_rows)
		return;
	if constexpr (TL) {
		const uint32_t n = u + 1 < n_units ? 32 : last;
		float *o = y + r * ((uint64_t)(n_units - 1) * 32 + last) + (uint64_t)u * 32;

		nsq::unitf_part<T>(w + r * row_bytes, u, n, v);
#pragma unroll
		for (int k = 0; k < 32; k++)
			if ((uint32_t)k < n)
				o[k] = v[k];
	} else {
		nsq::deq_unit<T>(w + r * row_bytes, u, v);
		float4 *o = reinterpret_cast<float4 *>(y + (r * n_units + u) * 32);
#pragma unroll
		for (int k = 0; k < 8; k++)
			o[k] = make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]);
	}
}

} /* namespace */

extern "C" bool ns_cuda_type_supported(uint32_t type)
{
	uint64_t rb;

	/* any aligned non-null pointer: only the type is in question */
	return nsl::window(type, (const void *)(uintptr_t)256, 1024, &rb) != -ENOTSUP;
}

extern "C" int ns_cuda_dequant(uint32_t type, const void *dev_w, uint64_t n_cols,
			       uint64_t n_rows, float *dev_y, ns_cuda_stream_t s)
{
	uint64_t rb, total;
	bool tail = false;
	int rc = nsl::window(type, dev_w, n_cols, &rb, &tail);

	if (rc)
		return rc;
	if (n_rows == 0)
		return 0;
	if (!dev_y || !nsl::aligned(dev_y, 16))
		return -EINVAL;
	const uint32_t nu = (uint32_t)((n_cols + 31) / 32);
	const uint32_t last = (uint32_t)(n_cols % 32);
	if (__builtin_mul_overflow(n_rows, (uint64_t)nu, &total) || total > (1ull << 40))
		return -EOVERFLOW;
	const uint32_t th = 128;
	const uint64_t blocks = (total + th - 1) / th;
	if (blocks > INT32_MAX)
		return -EOVERFLOW;
	cudaStream_t st = (cudaStream_t)s;
	const uint8_t *w = (const uint8_t *)dev_w;

	return nsl::by_type(type, [&](auto tc) {
		constexpr int T = decltype(tc)::value;

		if constexpr (nsq::geo<T>::FLT) { /* float rows with a partial last unit */
			if (tail) {
				k_dequant<T, true><<<(unsigned)blocks, th, 0, st>>>(w, rb, nu, n_rows,
										    dev_y, last);
				return nsl::launched();
			}
		}
		k_dequant<T, false><<<(unsigned)blocks, th, 0, st>>>(w, rb, nu, n_rows, dev_y, 0);
		return nsl::launched();
	});
}

/* variant 1 of ns_cuda_gemv_variant */
static int gemv_v1(uint32_t type, const void *dev_w, uint64_t n_cols, uint64_t n_rows,
		   const float *dev_x, float *dev_y, ns_cuda_stream_t s)
{
	nsl::gemv_args a;
	const int rc = nsl::gemv_check(type, dev_w, n_cols, n_rows, dev_x, dev_y, &a);

	if (rc)
		return rc < 0 ? rc : 0;
	return nsl::by_type(type, [&](auto tc) {
		return gemv_type<decltype(tc)::value>((const uint8_t *)dev_w, a.rb, a.nu, dev_x,
						      dev_y, n_rows, a.last, (cudaStream_t)s);
	});
}

extern "C" int ns_cuda_gemv_variant(int variant, uint32_t type, const void *dev_w,
				    uint64_t n_cols, uint64_t n_rows, const float *dev_x,
				    float *dev_y, ns_cuda_stream_t s)
{
	/* 4: per type, the family measured faster on the H200 (nscompute/cuda/README.md) */
	if (variant == 4)
		variant = type == nsq::Q4_K || type == nsq::Q5_K ? 1 : 2;
	if (variant == 1)
		return gemv_v1(type, dev_w, n_cols, n_rows, dev_x, dev_y, s);
	return ns_cuda_gemv2(variant, type, dev_w, n_cols, n_rows, dev_x, dev_y, s);
}

extern "C" int ns_cuda_gemv(uint32_t type, const void *dev_w, uint64_t n_cols, uint64_t n_rows,
			    const float *dev_x, float *dev_y, ns_cuda_stream_t s)
{
	/* The one static of this file (accepted by the lead): the kernel family is a process-wide
	 * switch read from NS_CUDA_GEMV once, not per call (getenv per launch would cost more
	 * than a small GEMV and could change between the layers of one token). 0 = not read
	 * yet; racing first calls read the same environment and store the same value. */
	static int s_variant;
	int v = __atomic_load_n(&s_variant, __ATOMIC_RELAXED);

	if (v == 0) {
		const char *e = getenv("NS_CUDA_GEMV");

		/* default 4: per type, the family measured faster on the H200 */
		v = e && e[0] >= '1' && e[0] <= '4' && !e[1] ? e[0] - '0' : 4;
		__atomic_store_n(&s_variant, v, __ATOMIC_RELAXED);
	}
	return ns_cuda_gemv_variant(v, type, dev_w, n_cols, n_rows, dev_x, dev_y, s);
}
