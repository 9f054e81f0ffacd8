/* attn.cu - causal attention over a float32 KV cache, decode and prefill (nscuda.h).
 *
 * Pass 1, one block per (chunk, head, token): the query's context j0..p is cut in chunks of
 * CH positions counted from j0. The block scores its chunk (one warp per position, lanes over
 * the head dimension, fixed shuffle tree), takes the chunk maximum m, p_j = exp(s_j - m), their
 * sum l (fixed tree) and o[d] = sum_j p_j v_j[d] (positions in order), and stores (m, l, o).
 * Pass 2, one block per (head, token): M = max(m_c, sink), L = sum_c l_c exp(m_c - M)
 * (+ exp(sink - M)), out = sum_c o_c exp(m_c - M) / L, chunks in order. Every sum has a fixed
 * order that depends only on the query's own context: decode and prefill give the same bits. */
#include <math.h>

#include "nscuda.h"

#include "launch.cuh"

namespace {

constexpr int CH = 256;     /* positions per chunk */
constexpr int AT = 128;     /* threads per block */
constexpr int MAXD = 512;   /* largest dk / dv */

struct attn_args {
	const float *q, *k, *v, *sinks;
	uint64_t ldk, ldv, pos0;
	uint32_t n_tok, n_head, gqa, dk, dv, window, n_chunk;
	float scale;
	float *ws, *out;
	const int64_t *pos_ptr; /* non-NULL: the position of token 0 is *pos_ptr, not pos0 */
};

__device__ __forceinline__ void context(const attn_args &a, uint32_t t, uint64_t *j0,
					uint64_t *n_pos)
{
	const uint64_t p1 = (a.pos_ptr ? (uint64_t)*a.pos_ptr : a.pos0) + t + 1;

	*j0 = a.window && p1 > a.window ? p1 - a.window : 0;
	*n_pos = p1 - *j0;
}

__global__ void __launch_bounds__(AT) k_attn_chunk(attn_args a)
{
	__shared__ float qs[MAXD];
	__shared__ float ps[CH];
	__shared__ float red[AT];
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
	const float *q = a.q + ((uint64_t)t * a.n_head + h) * a.dk;

	for (uint32_t d = tid; d < a.dk; d += AT)
		qs[d] = q[d];
	__syncthreads();
	for (uint32_t j = warp; j < cn; j += AT / 32) {
		const float *kr = a.k + (first + j) * a.ldk + (uint64_t)hk * a.dk;
		float acc = 0.0f;

		for (uint32_t d = lane; d < a.dk; d += 32)
			acc = fmaf(qs[d], kr[d], acc);
#pragma unroll
		for (int o = 16; o > 0; o >>= 1)
			acc += __shfl_xor_sync(0xffffffffu, acc, o);
		if (lane == 0)
			ps[j] = __fmul_rn(acc, a.scale);
	}
	__syncthreads();
	/* chunk maximum (exact in any order) */
	float m = -INFINITY;
	for (uint32_t j = tid; j < cn; j += AT)
		m = fmaxf(m, ps[j]);
	red[tid] = m;
	__syncthreads();
	for (int o = AT / 2; o > 0; o >>= 1) {
		if ((int)tid < o)
			red[tid] = fmaxf(red[tid], red[tid + o]);
		__syncthreads();
	}
	m = red[0];
	__syncthreads();
	float l = 0.0f;
	for (uint32_t j = tid; j < cn; j += AT) {
		const float p = expf(ps[j] - m);
		ps[j] = p;
		l += p;
	}
	red[tid] = l;
	__syncthreads();
	for (int o = AT / 2; o > 0; o >>= 1) {
		if ((int)tid < o)
			red[tid] += red[tid + o];
		__syncthreads();
	}
	l = red[0];
	for (uint32_t d = tid; d < a.dv; d += AT) {
		const float *vc = a.v + first * a.ldv + (uint64_t)hk * a.dv + d;
		float acc = 0.0f;

		for (uint32_t j = 0; j < cn; j++)
			acc = fmaf(ps[j], vc[(uint64_t)j * a.ldv], acc);
		ws[2 + d] = acc;
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

/* Both entry points: pos_ptr NULL takes pos0; else the grid covers max_ctx positions and
 * the blocks past the query's context return at once. */
static int attention(const float *dev_q, const float *dev_k, uint64_t ldk, const float *dev_v,
		     uint64_t ldv, uint32_t n_tok, uint64_t pos0, const int64_t *pos_ptr,
		     uint64_t max_ctx, uint32_t n_head, uint32_t n_head_kv, uint32_t dk,
		     uint32_t dv, float scale, uint32_t window, const float *dev_sinks,
		     float *dev_out, void *dev_ws, cudaStream_t s)
{
	attn_args a;

	if (n_tok == 0 || n_head == 0)
		return 0;
	if (!dev_q || !dev_k || !dev_v || !dev_out || !dev_ws || n_head_kv == 0 ||
	    n_head % n_head_kv || dk == 0 || dv == 0 || dk > MAXD || dv > MAXD ||
	    ldk < (uint64_t)n_head_kv * dk || ldv < (uint64_t)n_head_kv * dv)
		return -EINVAL;
	const uint64_t nc = n_chunks(pos_ptr ? max_ctx : pos0 + n_tok);
	if (nc > INT32_MAX || n_head > 65535 || n_tok > 65535)
		return -EOVERFLOW;
	a.q = dev_q;
	a.k = dev_k;
	a.v = dev_v;
	a.sinks = dev_sinks;
	a.ldk = ldk;
	a.ldv = ldv;
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
	k_attn_chunk<<<dim3((unsigned)gx, n_head, n_tok), AT, 0, s>>>(a);
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
	return attention(dev_q, dev_k, ldk, dev_v, ldv, n_tok, pos0, NULL, 0, n_head, n_head_kv,
			 dk, dv, scale, window, dev_sinks, dev_out, dev_ws, (cudaStream_t)s);
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
	return attention(dev_q, dev_k, ldk, dev_v, ldv, 1, 0, dev_pos, max_ctx, n_head,
			 n_head_kv, dk, dv, scale, window, dev_sinks, dev_out, dev_ws,
			 (cudaStream_t)s);
}
