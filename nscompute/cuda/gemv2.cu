/* gemv2.cu - the second fused decode GEMV kernel family (ns_cuda_gemv_variant 2 and 3,
 * selected for ns_cuda_gemv by NS_CUDA_GEMV=2 or 3, or per type by 4; nscuda_internal.h).
 *
 * Same unit of work as gemv.cu (quant.cuh: lane l of a warp takes unit c*32 + l of a 32-unit
 * chunk c, through the same dot_unit), organised for more bytes in flight and fewer
 * instructions per weight byte:
 *  - a row group of V2_R = 4 rows is handled by V2_KS = 2 warps: warp k takes the chunks
 *    c = k, k + 2, k + 4, ... of all 4 rows, so each x slice read from shared memory (and its
 *    sums, for the types with minimums) serves 4 rows, and a 4096-row matrix still gives
 *    ~2000 busy warps;
 *  - quantized weights are staged per warp with cp.async (16-byte, L1-bypassing, coalesced
 *    over the chunk's contiguous bytes of each row) into a ring of NST buffers: the copies of
 *    the warp's next NST - 1 steps (a step: one chunk of the 4 rows; the steps run on into the
 *    warp's next row group) are in flight while it computes the current one, without
 *    registers and without a block-wide barrier. Each row's chunk is copied as
 *    the 16-byte aligned superset of its bytes (the first piece may start up to 15 bytes
 *    before it, inside the same aligned 16 bytes, so inside the same allocation; the last
 *    piece is cut at the chunk's end with cp.async's source size, the rest zero-filled), so
 *    any window alignment, odd MXFP4 rows included, takes 16-byte copies. The staged copy keeps
 *    each byte's address modulo 16, so dot_unit's loads keep the alignment quant.cuh assumes;
 *  - x is copied once per block into shared memory (padded to 36 floats per unit: conflict-free
 *    16-byte reads), overlapping the first weight copies, and the grid is sized to the blocks
 *    resident at once (bps2: 3 or 2 per SM, 24 or 16 warps), each looping over row groups: x
 *    is read from L2 two or three times per SM per call, not once per 16 rows; n_cols too
 *    large for shared memory (35k-45k columns on sm_90, by type) reads x from global memory
 *    (same bits);
 *  - variant 3 reads Q4_K and Q5_K (16-byte multiple blocks) straight from global memory with
 *    quant.cuh's 16-byte loads instead of staging them (F32/F16/BF16 are direct in both).
 *
 * Numerics and determinism: each lane accumulates its units of a row in chunk order
 * (acc += dot_unit, as gemv.cu), each warp reduces its lanes with a fixed xor-shuffle tree,
 * and the row's result is warp 0's partial + warp 1's partial. Which units a lane and a warp
 * take depends only on n_cols (V2_KS is a constant), never on n_rows, the row's place in its
 * group, its group or its block, so every row gives the same bits in any window. A warp with no
 * chunk (n_cols <= 1024: one chunk) contributes +0.0f.
 *
 * Float rows whose length is not a multiple of 32 (launch.cuh's tail rows) take the direct
 * kernel with TL set: n_units counts the partial last unit of last elements, whose weights are
 * read element by element up to the row's end (quant.cuh dot_unit_part) against x
 * zero-padded to whole units (in shared memory, or read up to x[n_cols - 1] from global
 * memory); the order of every operation still depends only on n_cols. */
#include "nscuda.h"
#include "nscuda_internal.h"

#include "launch.cuh"

namespace {

constexpr int V2_WARPS = 8;                /* warps per block */
constexpr int V2_KS = 2;                   /* warps per row group, each every V2_KS-th chunk */
constexpr int V2_G = V2_WARPS / V2_KS;     /* row groups per block */
constexpr int V2_R = 4;                    /* rows per row group */
constexpr int V2_XPAD = 36;                /* floats per unit of x in shared memory */

/* Blocks per SM aimed at (launch bounds, grid): 3 (<= 80 registers, 24 warps per SM); 2 for
 * the types whose decoding needs more registers (ptxas spilled them at 80: Q5_1, Q5_K, Q6_K
 * on sm_90, F32 on sm_80/86/89/120). */
template <int T> struct bps2 {
	static constexpr int V = T == nsq::Q5_1 || T == nsq::Q5_K || T == nsq::Q6_K ||
				 T == nsq::F32 ? 2 : 3;
};

/* The same for the tail instantiations (TL): 2 (F16/BF16 spilled 8 bytes at 80 on sm_90). */
template <int T, bool TL> struct bpst {
	static constexpr int V = TL ? 2 : bps2<T>::V;
};

/* Staging geometry of a quantized type: a row's 32-unit chunk is WCH bytes; its aligned
 * superset spans at most WCH + 30 bytes (15 before, 15 after), SPAN rounded to 16; a warp
 * holds a ring of NST buffers of V2_R rows: NST - 1 steps in flight while it computes one.
 * NST is the deepest of 4, 3, 2 that leaves bps2 blocks per SM room with x of 4096
 * columns (sm_90: 227 KiB per SM; 18 KiB of x per block): at 3 blocks per SM Q2_K 4,
 * Q3_K/MXFP4 3, Q4_0/Q4_1/Q5_0/Q8_0/Q4_K 2 (Q8_0 fits 2 blocks only); at 2 blocks Q5_K 4,
 * Q5_1/Q6_K 3. (On the H200 24 warps per SM with NST 2 beat 16 warps with NST 4.) */
template <int T> struct st2 {
	using G = nsq::geo<T>;
	static constexpr int WCH = (32 / G::SUBS) * G::BYTES;
	static constexpr int SPAN = (WCH + 30 + 15) / 16 * 16;
	static constexpr int BUF = V2_R * SPAN;
	static constexpr int ROOM = 227 * 1024 / bps2<T>::V - 4096 / 32 * V2_XPAD * 4 - 2048;
	static constexpr int NST = 4 * V2_WARPS * BUF <= ROOM ? 4 :
				   3 * V2_WARPS * BUF <= ROOM ? 3 : 2;
	static constexpr int WARP_BYTES = NST * BUF;
};

/* cp.async of the n (0..16) bytes at src (16-byte aligned global) to dst (16-byte aligned
 * shared); bytes n..15 of dst are zero-filled, src + n.. is not read. (NS_SIMT_HOST: the
 * tests' CPU runs of this file, tests/cuda/simt, where the copy completes at once.) */
__device__ __forceinline__ void cp16(void *dst, const void *src, uint32_t n)
{
#ifdef NS_SIMT_HOST
	simt::cp_async16(dst, src, n);
#else
	const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
		     :: "r"(d), "l"(src), "r"(n) : "memory");
#endif
}

__device__ __forceinline__ void cp_commit(void)
{
#ifndef NS_SIMT_HOST
	asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void cp_wait(void)
{
#ifndef NS_SIMT_HOST
	asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
#endif
}

/* Barrier of the V2_KS warps of one row group (named barrier id 1 + group; 0 is
 * __syncthreads). */
__device__ __forceinline__ void bar_group(uint32_t g)
{
#ifdef NS_SIMT_HOST
	simt::named_barrier(1 + g, 32 * V2_KS);
#else
	asm volatile("bar.sync %0, %1;\n" :: "r"(1 + g), "n"(32 * V2_KS) : "memory");
#endif
}

/* Start the copies of chunk c of the rows of group t (those below n_rows) into buf
 * (V2_R, SPAN): row r's chunk starts at buf + r * SPAN + (its address & 15). */
template <int T>
__device__ __forceinline__ void stage_chunk(const uint8_t *w, uint64_t rb, uint32_t nu,
					    uint64_t n_rows, uint64_t t, uint32_t c, uint8_t *buf,
					    uint32_t lane)
{
	using G = nsq::geo<T>;
	using S = st2<T>;
	const uint32_t u0 = c * 32;
	const uint32_t nun = nu - u0 < 32 ? nu - u0 : 32; /* units, a multiple of SUBS */
	const uint32_t nb = nun / G::SUBS * G::BYTES;     /* <= WCH */
	const uint64_t cb = (uint64_t)(u0 / G::SUBS) * G::BYTES;

	constexpr int KP = (S::SPAN / 16 + 31) / 32; /* pieces per lane and row, at most */

#pragma unroll
	for (int r = 0; r < V2_R; r++) {
		const uint64_t row = t * V2_R + r;

		if (row >= n_rows)
			break;
		const uint8_t *src = w + row * rb + cb;
		const uint32_t o = (uint32_t)(uintptr_t)src & 15u; /* bytes before src in piece 0 */
		const uint8_t *a0 = src - o;
		const uint32_t end = o + (uint32_t)nb;              /* <= SPAN - 15 */
		uint8_t *d = buf + r * S::SPAN;

#pragma unroll
		for (int q = 0; q < KP; q++) {
			const uint32_t at = 16 * (lane + 32 * q); /* piece start, from a0 */

			if (at < end)
				cp16(d + at, a0 + at, end - at < 16 ? end - at : 16u);
		}
	}
}

/* ST: quantized weights staged with cp.async (else read directly); XS: x in shared memory;
 * TL: float rows ending in a partial unit of last (1..31) elements (ST off).
 * Dynamic shared memory: staging (V2_WARPS, 2, V2_R, SPAN) bytes when ST, then x
 * (n_units, V2_XPAD) floats when XS. */
template <int T, bool ST, bool XS, bool TL>
__global__ void __launch_bounds__(32 * V2_WARPS, (bpst<T, TL>::V))
k_gemv2(const uint8_t *__restrict__ w, uint64_t row_bytes, uint32_t n_units,
	const float *__restrict__ x, float *__restrict__ y, uint64_t n_rows, uint32_t last)
{
	using S = st2<T>;
	extern __shared__ __align__(16) uint8_t sm2[];
	__shared__ float part[V2_G][2][V2_KS][V2_R]; /* per group, parity, warp, row */
	const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x / 32;
	const uint32_t g = warp / V2_KS, k = warp % V2_KS;
	constexpr uint32_t stb = ST ? V2_WARPS * S::WARP_BYTES : 0;
	float *xs = reinterpret_cast<float *>(sm2 + stb);

	const float *xsrc = XS ? xs : x;
	uint8_t *stw = sm2 + warp * (ST ? S::WARP_BYTES : 0);
	const uint32_t nch = (n_units + 31) / 32;
	const uint32_t nck = nch > k ? (nch - k + V2_KS - 1) / V2_KS : 0; /* this warp's chunks */
	const uint64_t tstride = (uint64_t)gridDim.x * V2_G;
	uint64_t t = (uint64_t)blockIdx.x * V2_G + g; /* row group: rows t * V2_R .. + V2_R - 1 */
	uint32_t buf = 0, par = 0;
	/* the next step to stage: chunk k + jq * V2_KS of group tq, into buffer bq */
	uint64_t tq = t;
	uint32_t jq = 0, bq = 0;

	if constexpr (ST) { /* the first NST - 1 steps, in flight during the x copy */
#pragma unroll
		for (int i = 0; i < S::NST - 1; i++) {
			if (nck && tq * V2_R < n_rows) {
				stage_chunk<T>(w, row_bytes, n_units, n_rows, tq, k + jq * V2_KS,
					       stw + bq * S::BUF, lane);
				if (++jq == nck) {
					jq = 0;
					tq += tstride;
				}
				bq = bq + 1 == S::NST ? 0 : bq + 1;
			}
			cp_commit();
		}
	}
	if constexpr (XS && TL) { /* x[0 .. n_cols - 1], zeros to the end of the last unit */
		nsq::stage_x_part(xs, x, n_units, last, V2_XPAD, threadIdx.x, blockDim.x);
		__syncthreads();
	} else if constexpr (XS) {
		const float4 *x4 = reinterpret_cast<const float4 *>(x);

		for (uint32_t i = threadIdx.x; i < n_units * 8; i += blockDim.x)
			*reinterpret_cast<float4 *>(&xs[(i / 8) * V2_XPAD + 4 * (i % 8)]) = x4[i];
		__syncthreads();
	}
	/* both warps of a group walk the same t, so they meet at the same bar_group calls */
	for (; t * V2_R < n_rows; t += tstride, par ^= 1) {
		float acc[V2_R];

#pragma unroll
		for (int r = 0; r < V2_R; r++)
			acc[r] = 0.0f;
		for (uint32_t j = 0; j < nck; j++) {
			const uint32_t c = k + j * V2_KS;
			const uint32_t u = c * 32 + lane;

			if constexpr (ST) {
				/* stage the step NST - 1 ahead (steps run through the chunks of
				 * a group, then on to the next group) into the buffer computed
				 * last; one commit per step, empty past the end */
				if (tq * V2_R < n_rows) {
					stage_chunk<T>(w, row_bytes, n_units, n_rows, tq,
						       k + jq * V2_KS, stw + bq * S::BUF, lane);
					if (++jq == nck) {
						jq = 0;
						tq += tstride;
					}
					bq = bq + 1 == S::NST ? 0 : bq + 1;
				}
				cp_commit();
				cp_wait<S::NST - 1>(); /* this lane's copies of step j are done */
				__syncwarp(); /* ... and every lane's are visible */
			}
			if (u < n_units) {
				float xv[32];
				/* elements of unit u (TL: the last one is partial) */
				const uint32_t n = !TL || u + 1 < n_units ? 32 : last;

				if constexpr (XS || !TL)
					nsq::load_x_unit(xsrc, u, XS ? V2_XPAD : 32, xv);
				else
					nsq::load_x_part(x, u, n, xv);
#pragma unroll
				for (int r = 0; r < V2_R; r++) {
					const uint64_t row = t * V2_R + r;

					if (row >= n_rows) /* warp-uniform */
						break;
					const uint8_t *wr = w + row * row_bytes;
					if constexpr (ST) {
						using G = nsq::geo<T>;
						const uintptr_t s = (uintptr_t)(wr + (uint64_t)(c * 32 /
							G::SUBS) * G::BYTES);
						const uint8_t *sb = stw + buf * S::BUF + r * S::SPAN +
								    (s & 15);
						acc[r] += nsq::dot_unit<T>(sb, lane, xv);
					} else if constexpr (TL) {
						acc[r] += nsq::dot_unit_part<T>(wr, u, n, xv);
					} else {
						acc[r] += nsq::dot_unit<T>(wr, u, xv);
					}
				}
			}
			if constexpr (ST) {
				__syncwarp(); /* every lane is done with buf before it is refilled */
				buf = buf + 1 == S::NST ? 0 : buf + 1;
			}
		}
#pragma unroll
		for (int r = 0; r < V2_R; r++) {
#pragma unroll
			for (int o = 16; o > 0; o >>= 1)
				acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
		}
		if (lane == 0) {
#pragma unroll
			for (int r = 0; r < V2_R; r++)
				part[g][par][k][r] = acc[r];
		}
		/* parity: a slot is rewritten two groups later, after the next bar_group, which
		 * warp 0 reaches only once it has read this one */
		bar_group(g);
		if (k == 0 && lane < V2_R && t * V2_R + lane < n_rows) {
			float s = part[g][par][0][lane];

#pragma unroll
			for (int kk = 1; kk < V2_KS; kk++)
				s += part[g][par][kk][lane];
			y[t * V2_R + lane] = s;
		}
	}
	if constexpr (ST)
		cp_wait<0>();
}

template <int T, bool ST, bool XS, bool TL>
int launch_gemv2(const uint8_t *w, uint64_t rb, uint32_t nu, const float *x, float *y,
		 uint64_t n_rows, size_t smem, uint64_t blocks, uint32_t last, cudaStream_t st)
{
	/* the dynamic limit is 48 KiB less the static part until raised; the carveout asks for
	 * all of L1 as shared memory, else the driver may keep bps2 blocks from fitting */
	if (smem + 1024 > 48 * 1024 &&
	    (cudaFuncSetAttribute(k_gemv2<T, ST, XS, TL>,
				  cudaFuncAttributeMaxDynamicSharedMemorySize,
				  (int)smem) != cudaSuccess ||
	     cudaFuncSetAttribute(k_gemv2<T, ST, XS, TL>,
				  cudaFuncAttributePreferredSharedMemoryCarveout,
				  cudaSharedmemCarveoutMaxShared) != cudaSuccess))
		return nsl::launched();
	k_gemv2<T, ST, XS, TL><<<(unsigned)blocks, 32 * V2_WARPS, smem, st>>>(w, rb, nu, x, y,
									       n_rows, last);
	return nsl::launched();
}

/* TL: float rows with a partial last unit of last elements */
template <int T, bool ST, bool TL = false>
int gemv2_type(const uint8_t *w, uint64_t rb, uint32_t nu, const float *x, float *y,
	       uint64_t n_rows, uint32_t last, cudaStream_t st)
{
	nsl::limits lim;
	const size_t sbytes = ST ? (size_t)V2_WARPS * st2<T>::WARP_BYTES : 0;
	const size_t xbytes = (size_t)nu * V2_XPAD * sizeof(float);
	const size_t fixed = sizeof(float) * V2_G * 2 * V2_KS * V2_R + 1024; /* part + reserve */

	if (!nsl::device_limits(&lim))
		return nsl::launched();
	const int n_sm = lim.n_sm, optin = lim.optin, per_sm = lim.per_sm;
	const bool xs = sbytes + xbytes + fixed <= (size_t)optin;
	const size_t smem = sbytes + (xs ? xbytes : 0);
	if (smem + fixed > (size_t)optin)
		return -EINVAL; /* staging alone never exceeds ~72 KiB: not on sm_80+ */
	/* blocks resident at once (registers allow bps2 by the launch bounds), each looping
	 * over row groups; more would only copy x more often, fewer would idle SMs */
	uint64_t bps = (uint64_t)per_sm / (smem + fixed);
	if (bps > (uint64_t)bpst<T, TL>::V)
		bps = bpst<T, TL>::V;
	if (bps < 1)
		bps = 1;
	const uint64_t per = (uint64_t)V2_G * V2_R;
	uint64_t blocks = (n_rows + per - 1) / per;
	if (blocks > bps * (uint64_t)n_sm)
		blocks = bps * (uint64_t)n_sm;
	if (xs)
		return launch_gemv2<T, ST, true, TL>(w, rb, nu, x, y, n_rows, smem, blocks, last,
						     st);
	return launch_gemv2<T, ST, false, TL>(w, rb, nu, x, y, n_rows, smem, blocks, last, st);
}

/* variant 2: every quantized type staged; 3: Q4_K/Q5_K direct; float types direct (rows
 * with a partial last unit of last elements: the tail kernel) */
template <int T>
int gemv2_pick(int variant, const uint8_t *w, uint64_t rb, uint32_t nu, const float *x,
	       float *y, uint64_t n_rows, uint32_t last, cudaStream_t st)
{
	using G = nsq::geo<T>;

	if constexpr (G::FLT) {
		if (last)
			return gemv2_type<T, false, true>(w, rb, nu, x, y, n_rows, last, st);
		return gemv2_type<T, false>(w, rb, nu, x, y, n_rows, 0, st);
	} else if constexpr (G::BYTES % 16 == 0) {
		if (variant == 3)
			return gemv2_type<T, false>(w, rb, nu, x, y, n_rows, 0, st);
		return gemv2_type<T, true>(w, rb, nu, x, y, n_rows, 0, st);
	} else {
		return gemv2_type<T, true>(w, rb, nu, x, y, n_rows, 0, st);
	}
}

} /* namespace */

extern "C" int ns_cuda_gemv2(int variant, uint32_t type, const void *dev_w, uint64_t n_cols,
			     uint64_t n_rows, const float *dev_x, float *dev_y,
			     ns_cuda_stream_t s)
{
	nsl::gemv_args a;

	if (variant != 2 && variant != 3)
		return -EINVAL;
	const int rc = nsl::gemv_check(type, dev_w, n_cols, n_rows, dev_x, dev_y, &a);

	if (rc)
		return rc < 0 ? rc : 0;
	return nsl::by_type(type, [&](auto tc) {
		return gemv2_pick<decltype(tc)::value>(variant, (const uint8_t *)dev_w, a.rb, a.nu,
						       dev_x, dev_y, n_rows, a.last,
						       (cudaStream_t)s);
	});
}
