/* attn.cu - causal attention over a float32 KV cache, decode and prefill (nscuda.h).
 *
 * Pass 1, one block of NW warps per (chunk, head, token): the query's context j0..p is cut in
 * chunks of CH positions counted from j0. Scores: each warp takes 4 positions at a time
 * (positions 4w.., stepping 4 NW), lanes over the head dimension (a float4 each when every
 * dimension and stride is a multiple of 4 and the caches are 16-byte aligned), one fixed
 * shuffle tree per position. The chunk maximum m (exact in any order), p_j = exp(s_j - m) and
 * their sum l (a shuffle tree per warp, then the warps in order). Values: warp w sums
 * p_j v_j for the SUB positions w*SUB.. in order, lanes over the dimension; the warps' partial
 * sums are added in warp order. The block stores (m, l, o).
 * Pass 2, one block per (head, token): M = max(m_c, sink), L = sum_c l_c exp(m_c - M)
 * (+ exp(sink - M)), out = sum_c o_c exp(m_c - M) / L, chunks in order. Every sum has a fixed
 * order that depends only on the query's own context: decode and prefill give the same bits.
 * Decode of one token at a context of a few hundred positions is latency-bound: the work of a
 * chunk is spread over 8 warps, with 4 score loads and 8 value loads in flight per warp.
 * Typed caches (f16, q8_0: ns_cuda_attention_kv) run the same kernels with each element
 * widened to float where it is read (TK, TV: NS_CUDA_KV_*), and k_kv_store writes them. */
#include <math.h>

#include "nscuda.h"

#include "launch.cuh"

namespace {

constexpr int CH = 256;       /* positions per chunk */
constexpr int NW = 8;         /* warps per block */
constexpr int AT = NW * 32;   /* threads per block */
constexpr int SUB = CH / NW;  /* positions of one warp's value sum */
constexpr int MAXD = 512;     /* largest dk / dv */
static_assert(AT == CH, "the exponentials take one position per thread");

struct attn_args {
	const float *q, *k, *v, *sinks;
	const uint8_t *kb, *vb; /* typed caches: rows of k_row / v_row bytes */
	uint64_t k_row, v_row;
	uint64_t ldq, ldk, ldv, pos0;
	uint64_t n_kv;          /* full (bidirectional): every query's context is 0..n_kv-1 */
	bool full;
	uint32_t n_tok, n_head, gqa, dk, dv, window, n_chunk;
	float scale;
	float *ws, *out;
	const int64_t *pos_ptr; /* non-NULL: the position of token 0 is *pos_ptr, not pos0 */
};

__device__ __forceinline__ void context(const attn_args &a, uint32_t t, uint64_t *j0,
					uint64_t *n_pos)
{
	if (a.full) {
		*j0 = 0;
		*n_pos = a.n_kv;
		return;
	}
	const uint64_t p1 = (a.pos_ptr ? (uint64_t)*a.pos_ptr : a.pos0) + t + 1;

	*j0 = a.window && p1 > a.window ? p1 - a.window : 0;
	*n_pos = p1 - *j0;
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* this lane's share of q . k over the head dimension */
template <bool VEC>
__device__ __forceinline__ float dot_part(const float *qs, const float *kr, uint32_t dk,
					  uint32_t lane)
{
	float acc = 0.0f;

	if (VEC) {
		const float4 *k4 = reinterpret_cast<const float4 *>(kr);
		const float4 *q4 = reinterpret_cast<const float4 *>(qs);

		for (uint32_t i = lane; i < dk / 4; i += 32) {
			const float4 kv = k4[i], qv = q4[i];

			acc = fmaf(qv.x, kv.x, acc);
			acc = fmaf(qv.y, kv.y, acc);
			acc = fmaf(qv.z, kv.z, acc);
			acc = fmaf(qv.w, kv.w, acc);
		}
	} else {
		for (uint32_t d = lane; d < dk; d += 32)
			acc = fmaf(qs[d], kr[d], acc);
	}
	return acc;
}

/* Element i of a typed cache row as float (T: NS_CUDA_KV_*). */
template <uint32_t T>
__device__ __forceinline__ float kv_elem(const uint8_t *row, uint64_t i)
{
	if (T == NS_CUDA_KV_F16)
		return __half2float(reinterpret_cast<const __half *>(row)[i]);
	if (T == NS_CUDA_KV_Q8_0) {
		const uint8_t *b = row + (i / 32) * 34;

		return __half2float(*reinterpret_cast<const __half *>(b)) *
		       (float)(int8_t)b[2 + i % 32];
	}
	return reinterpret_cast<const float *>(row)[i];
}

/* This lane's share of q . k over the head dimension, k read from a typed row. */
template <uint32_t TK>
__device__ __forceinline__ float dot_part_t(const float *qs, const uint8_t *kr, uint64_t k0,
					    uint32_t dk, uint32_t lane)
{
	float acc = 0.0f;

	for (uint32_t d = lane; d < dk; d += 32)
		acc = fmaf(qs[d], kv_elem<TK>(kr, k0 + d), acc);
	return acc;
}

/* TK, TV: cache element types; (0, 0) is the float32 cache of ns_cuda_attention, VEC its
 * float4 loads. */
template <bool VEC, uint32_t TK, uint32_t TV>
__global__ void __launch_bounds__(AT) k_attn_chunk(attn_args a)
{
	__shared__ __align__(16) float qs[MAXD];
	__shared__ float ps[CH];
	__shared__ float red[NW];
	__shared__ __align__(16) float part[NW][MAXD];
	const uint32_t c = blockIdx.x, h = blockIdx.y, t = blockIdx.z;
	const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const uint32_t hk = h / a.gqa;
	uint64_t j0, n_pos;

	context(a, t, &j0, &n_pos);
	float *ws = a.ws + (((uint64_t)t * a.n_head + h) * a.n_chunk + c) * (a.dv + 2);
	if ((uint64_t)c * CH >= n_pos)
		return; /* pass 2 reads only the chunks this query has */
	const uint64_t first = j0 + (uint64_t)c * CH;
	const uint32_t cn = (uint32_t)(n_pos - (uint64_t)c * CH < CH ? n_pos - (uint64_t)c * CH : CH);
	const float *q = a.q + (uint64_t)t * a.ldq + (uint64_t)h * a.dk;
	const float *kc = TK == 0 ? a.k + first * a.ldk + (uint64_t)hk * a.dk : nullptr;

	for (uint32_t d = tid; d < a.dk; d += AT)
		qs[d] = q[d];
	__syncthreads();
	/* scores: 4 positions per warp step, their loads issued before their reductions */
	for (uint32_t jb = warp * 4; jb < cn; jb += NW * 4) {
		float acc[4];

#pragma unroll
		for (int u = 0; u < 4; u++) {
			if (jb + u >= cn)
				acc[u] = 0.0f;
			else if (TK == 0)
				acc[u] = dot_part<VEC>(qs, kc + (uint64_t)(jb + u) * a.ldk, a.dk, lane);
			else
				acc[u] = dot_part_t<TK>(qs, a.kb + (first + jb + u) * a.k_row,
							(uint64_t)hk * a.dk, a.dk, lane);
		}
#pragma unroll
		for (int u = 0; u < 4; u++)
			acc[u] = warp_sum(acc[u]);
		if (lane == 0) {
#pragma unroll
			for (int u = 0; u < 4; u++)
				if (jb + u < cn)
					ps[jb + u] = __fmul_rn(acc[u], a.scale);
		}
	}
	__syncthreads();
	/* chunk maximum: one position per thread */
	float m = warp_max(tid < cn ? ps[tid] : -INFINITY);
	if (lane == 0)
		red[warp] = m;
	__syncthreads();
	m = red[0];
	for (int w = 1; w < NW; w++)
		m = fmaxf(m, red[w]);
	__syncthreads(); /* red is reused below */
	float p = 0.0f;
	if (tid < cn) {
		p = expf(ps[tid] - m);
		ps[tid] = p;
	}
	p = warp_sum(p);
	if (lane == 0)
		red[warp] = p;
	__syncthreads();
	float l = red[0];
	for (int w = 1; w < NW; w++)
		l += red[w];
	/* values: warp w sums its SUB positions in order */
	const uint32_t js = warp * SUB, je = js + SUB < cn ? js + SUB : cn;
	if (js < cn && TV != 0) {
		const uint8_t *vr = a.vb + first * a.v_row;

		for (uint32_t d = lane; d < a.dv; d += 32) {
			float o = 0.0f;

#pragma unroll 8
			for (uint32_t j = js; j < je; j++)
				o = fmaf(ps[j], kv_elem<TV>(vr + (uint64_t)j * a.v_row,
							    (uint64_t)hk * a.dv + d), o);
			part[warp][d] = o;
		}
	} else if (js < cn) {
		const float *vc = a.v + first * a.ldv + (uint64_t)hk * a.dv;

		if (VEC) {
			for (uint32_t i = lane; i < a.dv / 4; i += 32) {
				float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

#pragma unroll 8
				for (uint32_t j = js; j < je; j++) {
					const float4 vv = reinterpret_cast<const float4 *>(
						vc + (uint64_t)j * a.ldv)[i];
					const float pj = ps[j];

					o.x = fmaf(pj, vv.x, o.x);
					o.y = fmaf(pj, vv.y, o.y);
					o.z = fmaf(pj, vv.z, o.z);
					o.w = fmaf(pj, vv.w, o.w);
				}
				reinterpret_cast<float4 *>(part[warp])[i] = o;
			}
		} else {
			for (uint32_t d = lane; d < a.dv; d += 32) {
				float o = 0.0f;

#pragma unroll 8
				for (uint32_t j = js; j < je; j++)
					o = fmaf(ps[j], vc[(uint64_t)j * a.ldv + d], o);
				part[warp][d] = o;
			}
		}
	}
	__syncthreads();
	const uint32_t n_warps = (cn + SUB - 1) / SUB;
	for (uint32_t d = tid; d < a.dv; d += AT) {
		float o = part[0][d];

		for (uint32_t w = 1; w < n_warps; w++)
			o += part[w][d];
		ws[2 + d] = o;
	}
	if (tid == 0) {
		ws[0] = m;
		ws[1] = l;
	}
}

__global__ void __launch_bounds__(AT) k_attn_merge(attn_args a)
{
	const uint32_t h = blockIdx.x, t = blockIdx.y;
	uint64_t j0, n_pos;

	context(a, t, &j0, &n_pos);
	const uint32_t nc = (uint32_t)((n_pos + CH - 1) / CH);
	const float *ws = a.ws + ((uint64_t)t * a.n_head + h) * a.n_chunk * (a.dv + 2);
	const uint64_t st = a.dv + 2;
	float M = a.sinks ? a.sinks[h] : -INFINITY, L = 0.0f;

	for (uint32_t c = 0; c < nc; c++)
		M = fmaxf(M, ws[c * st]);
	for (uint32_t c = 0; c < nc; c++)
		L = fmaf(ws[c * st + 1], expf(ws[c * st] - M), L);
	if (a.sinks)
		L += expf(a.sinks[h] - M);
	const float inv = 1.0f / L;
	float *out = a.out + ((uint64_t)t * a.n_head + h) * a.dv;
	for (uint32_t d = threadIdx.x; d < a.dv; d += AT) {
		float acc = 0.0f;

		for (uint32_t c = 0; c < nc; c++)
			acc = fmaf(ws[c * st + 2 + d], expf(ws[c * st] - M), acc);
		out[d] = __fmul_rn(acc, inv);
	}
}

uint64_t n_chunks(uint64_t n_ctx)
{
	return (n_ctx + CH - 1) / CH;
}

/* One thread per 32 elements of one token's row: float -> the cache's type at position
 * (pos_ptr ? *pos_ptr : pos0) + blockIdx.y. Q8_0 as ggml's quantizer: d = max|x| / 127,
 * round(x / d) half away from zero, d stored as half. */
template <uint32_t T>
__global__ void k_kv_store(uint8_t *cache, uint64_t row_bytes, const float *x, uint64_t width,
			   uint64_t pos0, const int64_t *pos_ptr)
{
	const uint64_t b = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
	const uint64_t p = (pos_ptr ? (uint64_t)*pos_ptr : pos0) + t;
	const float *src = x + t * width + 32 * b;
	uint8_t *row = cache + p * row_bytes;

	if (32 * b >= width)
		return;
	const uint32_t n = width - 32 * b < 32 ? (uint32_t)(width - 32 * b) : 32;
	if (T == NS_CUDA_KV_Q8_0) {
		uint8_t *blk = row + 34 * b;
		float amax = 0.0f, d, id;

		for (uint32_t i = 0; i < 32; i++)
			amax = fmaxf(amax, fabsf(src[i]));
		d = amax / 127.0f;
		id = d != 0.0f ? 1.0f / d : 0.0f;
		*reinterpret_cast<__half *>(blk) = __float2half_rn(d);
		for (uint32_t i = 0; i < 32; i++) {
			float v = roundf(src[i] * id);

			blk[2 + i] = (uint8_t)(int8_t)(v >= -127.0f && v <= 127.0f ? v : 0.0f);
		}
	} else if (T == NS_CUDA_KV_F16) {
		for (uint32_t i = 0; i < n; i++)
			reinterpret_cast<__half *>(row)[32 * b + i] = __float2half_rn(src[i]);
	} else {
		for (uint32_t i = 0; i < n; i++)
			reinterpret_cast<float *>(row)[32 * b + i] = src[i];
	}
}

int kv_store(void *cache, uint32_t type, uint64_t row_bytes, const float *x, uint64_t width,
	     uint32_t n_tok, uint64_t pos0, const int64_t *pos_ptr, cudaStream_t s)
{
	const uint64_t nb = (width + 31) / 32;
	const dim3 grid((unsigned)((nb + 63) / 64), n_tok);

	if (!cache || !x || !width || ns_cuda_kv_row_bytes(type, width) == 0 ||
	    ns_cuda_kv_row_bytes(type, width) > row_bytes || (type == NS_CUDA_KV_F32 && row_bytes % 4) ||
	    n_tok > 65535 || nb > (1ull << 30))
		return -EINVAL;
	if (type == NS_CUDA_KV_Q8_0)
		k_kv_store<NS_CUDA_KV_Q8_0><<<grid, 64, 0, s>>>((uint8_t *)cache, row_bytes, x,
								      width, pos0, pos_ptr);
	else if (type == NS_CUDA_KV_F16)
		k_kv_store<NS_CUDA_KV_F16><<<grid, 64, 0, s>>>((uint8_t *)cache, row_bytes, x,
								     width, pos0, pos_ptr);
	else
		k_kv_store<NS_CUDA_KV_F32><<<grid, 64, 0, s>>>((uint8_t *)cache, row_bytes, x,
								     width, pos0, pos_ptr);
	return nsl::launched();
}

typedef void (*chunk_fn)(attn_args);

/* The chunk kernel of a pair of cache types. */
chunk_fn chunk_kernel(uint32_t tk, uint32_t tv)
{
	static const chunk_fn fns[3][3] = {
		{ k_attn_chunk<false, 0, 0>, k_attn_chunk<false, 0, 1>, k_attn_chunk<false, 0, 2> },
		{ k_attn_chunk<false, 1, 0>, k_attn_chunk<false, 1, 1>, k_attn_chunk<false, 1, 2> },
		{ k_attn_chunk<false, 2, 0>, k_attn_chunk<false, 2, 1>, k_attn_chunk<false, 2, 2> },
	};

	return tk < 3 && tv < 3 ? fns[tk][tv] : nullptr;
}

} /* namespace */

extern "C" uint64_t ns_cuda_attn_ws_bytes(uint32_t n_tok, uint32_t n_head, uint64_t n_ctx,
					  uint32_t dv)
{
	uint64_t b = (uint64_t)n_tok * n_head, r;

	if (__builtin_mul_overflow(b, n_chunks(n_ctx), &r) ||
	    __builtin_mul_overflow(r, (uint64_t)dv + 2, &r) || __builtin_mul_overflow(r, 4ull, &r))
		return UINT64_MAX;
	return r;
}

/* Every entry point: pos_ptr NULL takes pos0; else the grid covers max_ctx positions and
 * the blocks past the query's context return at once. kv NULL: the float32 cache dev_k /
 * dev_v (ldk, ldv floats a row); else the typed cache kv. full: no mask, every query's
 * context is the max_ctx keys (ns_cuda_attention_full), q rows ldq floats apart (else
 * packed). */
static int attention(const float *dev_q, uint64_t ldq, bool full, const float *dev_k, uint64_t ldk, const float *dev_v,
		     uint64_t ldv, const ns_cuda_kv *kv, uint32_t n_tok, uint64_t pos0,
		     const int64_t *pos_ptr, uint64_t max_ctx, uint32_t n_head,
		     uint32_t n_head_kv, uint32_t dk, uint32_t dv, float scale, uint32_t window,
		     const float *dev_sinks, float *dev_out, void *dev_ws, cudaStream_t s)
{
	attn_args a = {};

	if (n_tok == 0 || n_head == 0)
		return 0;
	if (!dev_q || !dev_out || !dev_ws || n_head_kv == 0 || n_head % n_head_kv || dk == 0 ||
	    dv == 0 || dk > MAXD || dv > MAXD)
		return -EINVAL;
	if (kv ? !kv->dev_k || !kv->dev_v || kv->tk > 2 || kv->tv > 2 ||
		 ns_cuda_kv_row_bytes(kv->tk, (uint64_t)n_head_kv * dk) == 0 ||
		 ns_cuda_kv_row_bytes(kv->tv, (uint64_t)n_head_kv * dv) == 0 ||
		 kv->k_row < ns_cuda_kv_row_bytes(kv->tk, (uint64_t)n_head_kv * dk) ||
		 kv->v_row < ns_cuda_kv_row_bytes(kv->tv, (uint64_t)n_head_kv * dv) ||
		 (kv->tk == NS_CUDA_KV_Q8_0 && dk % 32) || (kv->tv == NS_CUDA_KV_Q8_0 && dv % 32) ||
		 (kv->tk == NS_CUDA_KV_F32 && kv->k_row % 4) ||
		 (kv->tv == NS_CUDA_KV_F32 && kv->v_row % 4)
	       : !dev_k || !dev_v || ldk < (uint64_t)n_head_kv * dk || ldv < (uint64_t)n_head_kv * dv)
		return -EINVAL;
	const uint64_t nc = n_chunks(pos_ptr || full ? max_ctx : pos0 + n_tok);
	if (nc > INT32_MAX || n_head > 65535 || n_tok > 65535)
		return -EOVERFLOW;
	a.q = dev_q;
	a.ldq = full ? ldq : (uint64_t)n_head * dk;
	a.full = full;
	a.n_kv = full ? max_ctx : 0;
	a.k = dev_k;
	a.v = dev_v;
	a.ldk = ldk;
	a.ldv = ldv;
	if (kv) {
		a.kb = (const uint8_t *)kv->dev_k;
		a.vb = (const uint8_t *)kv->dev_v;
		a.k_row = kv->k_row;
		a.v_row = kv->v_row;
		/* an f32 side of a typed cache takes the float32 kernel's path (TK or TV 0) */
		a.k = kv->tk == NS_CUDA_KV_F32 ? (const float *)kv->dev_k : nullptr;
		a.v = kv->tv == NS_CUDA_KV_F32 ? (const float *)kv->dev_v : nullptr;
		a.ldk = kv->k_row / 4;
		a.ldv = kv->v_row / 4;
	}
	a.sinks = dev_sinks;
	a.pos0 = pos0;
	a.pos_ptr = pos_ptr;
	a.n_tok = n_tok;
	a.n_head = n_head;
	a.gqa = n_head / n_head_kv;
	a.dk = dk;
	a.dv = dv;
	a.window = window;
	a.n_chunk = (uint32_t)nc;
	a.scale = scale;
	a.ws = (float *)dev_ws;
	a.out = dev_out;
	/* a windowed query never needs more chunks than its window holds */
	uint64_t gx = nc;
	if (window && n_chunks(window) < gx)
		gx = n_chunks(window);
	/* float4 loads: every row of q, k and v starts 16-byte aligned */
	const bool vec = !kv && dk % 4 == 0 && dv % 4 == 0 && ldk % 4 == 0 && ldv % 4 == 0 &&
			 a.ldq % 4 == 0 &&
			 nsl::aligned(dev_q, 16) && nsl::aligned(dev_k, 16) && nsl::aligned(dev_v, 16);
	chunk_fn chunk = chunk_kernel(kv ? kv->tk : 0, kv ? kv->tv : 0);

	if (vec)
		k_attn_chunk<true, 0, 0><<<dim3((unsigned)gx, n_head, n_tok), AT, 0, s>>>(a);
	else
		chunk<<<dim3((unsigned)gx, n_head, n_tok), AT, 0, s>>>(a);
	int rc = nsl::launched();
	if (rc)
		return rc;
	k_attn_merge<<<dim3(n_head, n_tok), AT, 0, s>>>(a);
	return nsl::launched();
}

extern "C" int ns_cuda_attention(const float *dev_q, const float *dev_k, uint64_t ldk,
				 const float *dev_v, uint64_t ldv, uint32_t n_tok, uint64_t pos0,
				 uint32_t n_head, uint32_t n_head_kv, uint32_t dk, uint32_t dv,
				 float scale, uint32_t window, const float *dev_sinks,
				 float *dev_out, void *dev_ws, ns_cuda_stream_t s)
{
	return attention(dev_q, 0, false, dev_k, ldk, dev_v, ldv, NULL, n_tok, pos0, NULL, 0, n_head,
			 n_head_kv, dk, dv, scale, window, dev_sinks, dev_out, dev_ws,
			 (cudaStream_t)s);
}

extern "C" int ns_cuda_attention_at(const float *dev_q, const float *dev_k, uint64_t ldk,
				    const float *dev_v, uint64_t ldv, const int64_t *dev_pos,
				    uint64_t max_ctx, uint32_t n_head, uint32_t n_head_kv,
				    uint32_t dk, uint32_t dv, float scale, uint32_t window,
				    const float *dev_sinks, float *dev_out, void *dev_ws,
				    ns_cuda_stream_t s)
{
	if (!dev_pos || max_ctx == 0)
		return -EINVAL;
	return attention(dev_q, 0, false, dev_k, ldk, dev_v, ldv, NULL, 1, 0, dev_pos, max_ctx, n_head,
			 n_head_kv, dk, dv, scale, window, dev_sinks, dev_out, dev_ws,
			 (cudaStream_t)s);
}

extern "C" int ns_cuda_attention_kv(const float *dev_q, const struct ns_cuda_kv *kv,
				    uint32_t n_tok, uint64_t pos0, const int64_t *dev_pos,
				    uint64_t max_ctx, uint32_t n_head, uint32_t n_head_kv,
				    uint32_t dk, uint32_t dv, float scale, uint32_t window,
				    const float *dev_sinks, float *dev_out, void *dev_ws,
				    ns_cuda_stream_t s)
{
	if (!kv || (dev_pos && (n_tok != 1 || max_ctx == 0)))
		return -EINVAL;
	return attention(dev_q, 0, false, NULL, 0, NULL, 0, kv, n_tok, pos0, dev_pos, max_ctx, n_head,
			 n_head_kv, dk, dv, scale, window, dev_sinks, dev_out, dev_ws,
			 (cudaStream_t)s);
}

extern "C" int ns_cuda_attention_full(const float *dev_q, uint64_t ldq, const float *dev_k,
				      uint64_t ldk, const float *dev_v, uint64_t ldv,
				      uint32_t n_q, uint64_t n_kv, uint32_t n_head, uint32_t dk,
				      uint32_t dv, float scale, float *dev_out, void *dev_ws,
				      ns_cuda_stream_t s)
{
	if (n_q && n_head && (n_kv == 0 || ldq < (uint64_t)n_head * dk))
		return -EINVAL;
	return attention(dev_q, ldq, true, dev_k, ldk, dev_v, ldv, NULL, n_q, 0, NULL, n_kv,
			 n_head, n_head, dk, dv, scale, 0, NULL, dev_out, dev_ws, (cudaStream_t)s);
}

extern "C" int ns_cuda_kv_store(const struct ns_cuda_kv *kv, const float *dev_k, uint64_t nk,
				const float *dev_v, uint64_t nv, uint32_t n_tok, uint64_t pos0,
				const int64_t *dev_pos, ns_cuda_stream_t s)
{
	int rc;

	if (!kv || n_tok == 0 || (dev_pos && n_tok != 1))
		return -EINVAL;
	rc = kv_store(kv->dev_k, kv->tk, kv->k_row, dev_k, nk, n_tok, pos0, dev_pos,
		      (cudaStream_t)s);
	return rc ? rc : kv_store(kv->dev_v, kv->tv, kv->v_row, dev_v, nv, n_tok, pos0, dev_pos,
				  (cudaStream_t)s);
}
