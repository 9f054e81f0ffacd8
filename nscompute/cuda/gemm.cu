/* gemm.cu - prefill GEMM on tensor cores (nscuda.h ns_cuda_gemm_prefill).
 *
 * One block computes a tile of BM weight rows x BN tokens. For each step of BK columns the
 * block dequantizes its BM x BK weights (exact floats, quant.cuh) into shared memory as f16,
 * rounds the BN x BK activations to f16 beside them, and four warps multiply with WMMA
 * (m16n16k16, f16 inputs, f32 accumulators), each warp a 32 x 32 sub-tile.
 *
 * Determinism: an output element is a sum over the k steps, in order, of tensor-core dot
 * products of its own weight row and token; rows and tokens past the window are zeros. Nothing
 * depends on where in a tile the row or token sits, so a row gives the same bits in a window of
 * 1, 7 or 64 rows and for any n_tok (tested on the GPU by tests/cuda).
 *
 * Float rows whose length is not a multiple of 32 (launch.cuh's tail rows) take k_gemm with TL
 * set: the weights of the partial last unit are read element by element up to the row's end,
 * the activations column by column up to n_cols (x rows may then be only 4-byte aligned: any
 * ldx), both zero-padded to the step, which adds exact zeros to the tensor-core sums. */
#include <mma.h>

#include "nscuda.h"

#include "launch.cuh"

namespace {

using namespace nvcuda;

constexpr int BM = 64, BN = 64, BK = 64;
constexpr int LDS = BK + 8;  /* halves per shared row: 16-byte rows, staggered banks */
constexpr int LDC = BM + 4;  /* floats per token row of the output tile */
constexpr int THREADS = 128;

struct smem {
	__half w[BM * LDS];  /* (BM, LDS) weights of the step */
	__half x[BN * LDS];  /* (BN, LDS) activations of the step */
	float c[BN * LDC];   /* (BN, LDC) output tile, token-major */
};

/* Store 32 floats as f16 at dst (16-byte aligned). */
__device__ __forceinline__ void put32(__half *dst, const float (&v)[32])
{
#pragma unroll
	for (int k = 0; k < 4; k++) {
		uint4 o;
		__half2 h0 = __floats2half2_rn(v[8 * k], v[8 * k + 1]);
		__half2 h1 = __floats2half2_rn(v[8 * k + 2], v[8 * k + 3]);
		__half2 h2 = __floats2half2_rn(v[8 * k + 4], v[8 * k + 5]);
		__half2 h3 = __floats2half2_rn(v[8 * k + 6], v[8 * k + 7]);
		o.x = *reinterpret_cast<uint32_t *>(&h0);
		o.y = *reinterpret_cast<uint32_t *>(&h1);
		o.z = *reinterpret_cast<uint32_t *>(&h2);
		o.w = *reinterpret_cast<uint32_t *>(&h3);
		reinterpret_cast<uint4 *>(dst)[k] = o;
	}
}

/* TL: float rows of n_units - 1 whole units and a last one of last (1..31) elements. */
template <int T, bool TL>
__global__ void __launch_bounds__(THREADS)
k_gemm(const uint8_t *__restrict__ w, uint64_t row_bytes, uint32_t n_units, uint64_t n_rows,
       const float *__restrict__ x, uint64_t ldx, uint64_t n_tok, float *__restrict__ y,
       uint64_t ldy, uint32_t last)
{
	__shared__ __align__(128) smem sm;
	const uint64_t r0 = (uint64_t)blockIdx.x * BM, t0 = (uint64_t)blockIdx.y * BN;
	const int tid = threadIdx.x, warp = tid / 32;
	const int wr = (warp >> 1) * 32, wt = (warp & 1) * 32; /* warp's sub-tile */
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];

#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < 2; j++)
			wmma::fill_fragment(acc[i][j], 0.0f);

	for (uint32_t u0 = 0; u0 < n_units; u0 += BK / 32) {
		/* weights: thread tid -> row tid / 2, unit u0 + tid % 2 */
		{
			const int rr = tid >> 1, uu = tid & 1;
			const uint64_t r = r0 + rr;
			const uint32_t u = u0 + uu;
			float v[32];

			if (r < n_rows && u < n_units) {
				if constexpr (TL)
					nsq::unitf_part<T>(w + r * row_bytes, u,
							   u + 1 < n_units ? 32 : last, v);
				else
					nsq::deq_unit<T>(w + r * row_bytes, u, v);
			} else {
#pragma unroll
				for (int i = 0; i < 32; i++)
					v[i] = 0.0f;
			}
			put32(&sm.w[rr * LDS + uu * 32], v);
		}
		/* activations: 64 tokens x 64 columns as float4, 8 per thread */
#pragma unroll
		for (int k = 0; k < BN * BK / 4 / THREADS; k++) {
			const int idx = tid + k * THREADS; /* float4 index in the tile */
			const int tt = idx / (BK / 4), c4 = idx % (BK / 4);
			const uint64_t t = t0 + tt, col = (uint64_t)u0 * 32 + 4 * c4;
			float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

			if constexpr (TL) { /* columns up to n_cols only; x rows 4-byte aligned */
				const uint64_t nx = (uint64_t)(n_units - 1) * 32 + last;
				const float *xr = x + t * ldx + col;

				if (t < n_tok) {
					v.x = col < nx ? xr[0] : 0.0f;
					v.y = col + 1 < nx ? xr[1] : 0.0f;
					v.z = col + 2 < nx ? xr[2] : 0.0f;
					v.w = col + 3 < nx ? xr[3] : 0.0f;
				}
			} else if (t < n_tok && col < (uint64_t)n_units * 32) {
				v = *reinterpret_cast<const float4 *>(x + t * ldx + col);
			}
			__half2 a = __floats2half2_rn(v.x, v.y), b = __floats2half2_rn(v.z, v.w);
			uint2 o;
			o.x = *reinterpret_cast<uint32_t *>(&a);
			o.y = *reinterpret_cast<uint32_t *>(&b);
			*reinterpret_cast<uint2 *>(&sm.x[tt * LDS + 4 * c4]) = o;
		}
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < BK; kk += 16) {
			wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[2];
			wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b[2];

#pragma unroll
			for (int i = 0; i < 2; i++) {
				wmma::load_matrix_sync(a[i], &sm.w[(wr + 16 * i) * LDS + kk], LDS);
				wmma::load_matrix_sync(b[i], &sm.x[(wt + 16 * i) * LDS + kk], LDS);
			}
#pragma unroll
			for (int i = 0; i < 2; i++)
#pragma unroll
				for (int j = 0; j < 2; j++)
					wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
	/* C(row, tok) -> sm.c[tok * LDC + row], then coalesced rows out */
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < 2; j++)
			wmma::store_matrix_sync(&sm.c[(wt + 16 * j) * LDC + wr + 16 * i], acc[i][j],
						LDC, wmma::mem_col_major);
	__syncthreads();
	for (int idx = tid; idx < BM * BN; idx += THREADS) {
		const int tt = idx / BM, rr = idx % BM;
		const uint64_t t = t0 + tt, r = r0 + rr;

		if (t < n_tok && r < n_rows)
			y[t * ldy + r] = sm.c[tt * LDC + rr];
	}
}

} /* namespace */

extern "C" int ns_cuda_gemm_prefill(uint32_t type, const void *dev_w, uint64_t n_cols,
				    uint64_t n_rows, const float *dev_x, uint64_t ldx,
				    uint64_t n_tok, float *dev_y, uint64_t ldy, ns_cuda_stream_t s)
{
	uint64_t rb;
	bool tail = false;
	int rc = nsl::window(type, dev_w, n_cols, &rb, &tail);

	if (rc)
		return rc;
	if (n_rows == 0 || n_tok == 0)
		return 0;
	/* x rows are read as float4 unless the tail path reads them column by column */
	if (!dev_x || !dev_y || ldx < n_cols || ldy < n_rows || (ldx % 4 && !tail) ||
	    !nsl::aligned(dev_x, tail ? 4 : 16))
		return -EINVAL;
	const uint64_t gx = (n_rows + BM - 1) / BM, gy = (n_tok + BN - 1) / BN;
	if (gx > INT32_MAX || gy > 65535)
		return -EOVERFLOW;
	const uint32_t nu = (uint32_t)((n_cols + 31) / 32);
	const uint32_t last = (uint32_t)(n_cols % 32);
	const dim3 grid((unsigned)gx, (unsigned)gy);
	cudaStream_t st = (cudaStream_t)s;
	const uint8_t *w = (const uint8_t *)dev_w;

	return nsl::by_type(type, [&](auto tc) {
		constexpr int T = decltype(tc)::value;

		if constexpr (nsq::geo<T>::FLT) { /* only float rows can end in a partial unit */
			if (tail) {
				k_gemm<T, true><<<grid, THREADS, 0, st>>>(w, rb, nu, n_rows, dev_x, ldx,
									  n_tok, dev_y, ldy, last);
				return nsl::launched();
			}
		}
		k_gemm<T, false><<<grid, THREADS, 0, st>>>(w, rb, nu, n_rows, dev_x, ldx, n_tok,
							   dev_y, ldy, 0);
		return nsl::launched();
	});
}
