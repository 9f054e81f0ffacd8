/* ops.cu - small kernels of the forward pass: RMSNorm (also gated by silu(z), Qwen3.5's
 * DeltaNet output), RoPE, SwiGLU, softmax, MoE router top-k, greedy argmax, the sigmoid gates
 * of Qwen3.5's attention output and shared expert (nscuda.h). Written to follow nscompute/forward's CPU versions
 * operation by operation (sums of squares and softmax sums in double, no fused multiply-adds
 * where the CPU rounds twice); exp/sin/cos come from CUDA's libm, so results agree with the
 * CPU to a few ulps, not bit for bit. Block reductions use a fixed tree: deterministic. */
#include <math.h>

#include "nscuda.h"

#include "launch.cuh"
#include "reduce.cuh"

namespace {

constexpr int RT = 256; /* threads of the row kernels */

__device__ float block_max(float v, float *sh)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = v;
	__syncthreads();
	float r = sh[0];
	for (int w = 1; w < RT / 32; w++)
		r = fmaxf(r, sh[w]);
	__syncthreads();
	return r;
}

__global__ void __launch_bounds__(RT)
k_rmsnorm(float *y, float *x, const float *res, const float *w, uint32_t n, float eps,
	  const float *z)
{
	__shared__ double sh[RT / 32];
	float *xr = x + (uint64_t)blockIdx.x * n;
	float *yr = y + (uint64_t)blockIdx.x * n;
	double part = 0.0;

	if (res) { /* x += res first (k_add's one rounding); each thread rereads its own x[i] */
		const float *rr = res + (uint64_t)blockIdx.x * n;

		for (uint32_t i = threadIdx.x; i < n; i += RT)
			xr[i] = __fadd_rn(xr[i], rr[i]);
	}
	for (uint32_t i = threadIdx.x; i < n; i += RT)
		part += (double)__fmul_rn(xr[i], xr[i]);
	const double sum = nsl::block_sum<RT>(part, sh);
	const float mean = (float)(sum / n);
	const float scale = 1.0f / sqrtf(mean + eps);
	const float *zr = z ? z + (uint64_t)blockIdx.x * n : nullptr;
	for (uint32_t i = threadIdx.x; i < n; i += RT) {
		float v = w ? __fmul_rn(__fmul_rn(xr[i], scale), w[i]) : __fmul_rn(xr[i], scale);

		if (zr) /* the DeltaNet output: times silu(z), after the norm as the CPU */
			v = __fmul_rn(v, __fdiv_rn(zr[i], __fadd_rn(1.0f, expf(-zr[i]))));
		yr[i] = v;
	}
}

/* y *= sigmoid(g), element-wise (gated attention) */
__global__ void k_mul_sigmoid(float *y, const float *g, uint64_t n)
{
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		y[i] = __fmul_rn(y[i], __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-g[i]))));
}

/* One block per row: y += src * sigmoid(x . gw) (the shared expert's gate; dot in double) */
__global__ void __launch_bounds__(RT)
k_add_sigmoid_scaled(float *y, const float *src, const float *x, const float *gw, uint64_t n)
{
	__shared__ double sh[RT / 32];
	const uint64_t at = (uint64_t)blockIdx.x * n;
	double part = 0.0;

	for (uint64_t i = threadIdx.x; i < n; i += RT)
		part += (double)__fmul_rn(x[at + i], gw[i]);
	const float dot = (float)nsl::block_sum<RT>(part, sh);
	const float g = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-dot)));
	for (uint64_t i = threadIdx.x; i < n; i += RT)
		y[at + i] = __fadd_rn(y[at + i], __fmul_rn(src[at + i], g));
}

struct rope_k {
	uint32_t n_dims;
	bool neox;
	float freq_scale, theta_scale, ext_factor, corr0, corr1, mscale;
	const float *ff;
	const int64_t *pos_ptr; /* non-NULL: token 0's position is *pos_ptr */
	const int32_t *mpos;    /* non-NULL: M-RoPE, token t's (temporal, height, width) at
				 * mpos[3 t ..] (ns_cuda_rope_mrope) */
	uint32_t sec_h, sec_w;  /* M-RoPE: pairs of the height and width sections */
};

/* One decode token's second tensor and KV-cache rows for k_rope (ns_cuda_rope_kv_store):
 * k (n_heads_k heads) rotated like x, then k_cache row pos = k, v_cache row pos = v. */
struct rope_kv {
	float *k;
	uint32_t n_heads_k;
	float *k_cache;
	uint64_t ld_k;
	const float *v;
	uint64_t nv;
	float *v_cache;
	uint64_t ld_v;
};

/* Rotate n_heads heads of head_dim at xt by the angles cs (one token). */
__device__ __forceinline__ void rope_heads(const rope_k &r, const float *cs, float *xt,
					   uint32_t n_heads, uint32_t head_dim)
{
	const uint32_t half = r.n_dims / 2;

	for (uint32_t idx = threadIdx.x; idx < n_heads * half; idx += blockDim.x) {
		const uint32_t h = idx / half, i = idx % half;
		const float c = cs[2 * i], s = cs[2 * i + 1];
		float *v = xt + (uint64_t)h * head_dim;
		const uint32_t a = r.neox ? i : 2 * i, b = r.neox ? i + half : 2 * i + 1;
		const float x0 = v[a], x1 = v[b];
		v[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
		v[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
	}
}

/* One block per token: the angles of the position once (shared, as the CPU's ns_rope_angles
 * fills cs), then every head rotated with them. */
__global__ void k_rope(rope_k r, float *x, uint32_t n_heads, uint32_t head_dim, int64_t pos0,
		       rope_kv kv)
{
	__shared__ float cs[2 * 256]; /* (cos, sin) of each pair; n_dims <= 512 */
	const uint32_t half = r.n_dims / 2;
	const int64_t pos = (r.pos_ptr ? *r.pos_ptr : pos0) + blockIdx.x;
	float *xt = x + (uint64_t)blockIdx.x * n_heads * head_dim;

	for (uint32_t i = threadIdx.x; i < half; i += blockDim.x) {
		/* M-RoPE: pair i turns with one of the token's three positions (interleaved:
		 * ns_rope_angles_mrope's rule), each built up from its own start as the CPU's */
		const unsigned axis = !r.mpos ? 0 : i % 3 == 1 && i < 3 * r.sec_h ? 1 :
				      i % 3 == 2 && i < 3 * r.sec_w ? 2 : 0;
		float theta = r.mpos ? (float)r.mpos[3ull * blockIdx.x + axis] : (float)pos, c, s;

		for (uint32_t k = 0; k < i; k++) /* p * theta_scale^i, built up as the CPU does */
			theta = __fmul_rn(theta, r.theta_scale);
		const float ff = r.ff ? r.ff[i] : 1.0f;
		const float te = __fdiv_rn(theta, ff);
		if (r.ext_factor != 0.0f) {
			const float ti = __fmul_rn(r.freq_scale, te);
			const float den = r.corr1 - r.corr0;
			const float yv = __fdiv_rn((float)i - r.corr0, den > 0.001f ? den : 0.001f);
			const float ramp = 1.0f - (yv < 0.0f ? 0.0f : yv > 1.0f ? 1.0f : yv);
			const float mix = __fmul_rn(ramp, r.ext_factor);
			const float th = __fadd_rn(__fmul_rn(ti, 1.0f - mix), __fmul_rn(te, mix));
			c = __fmul_rn(cosf(th), r.mscale);
			s = __fmul_rn(sinf(th), r.mscale);
		} else {
			const float th = __fmul_rn(r.freq_scale, te);
			c = cosf(th);
			s = sinf(th);
		}
		cs[2 * i] = c;
		cs[2 * i + 1] = s;
	}
	__syncthreads();
	rope_heads(r, cs, xt, n_heads, head_dim);
	if (!kv.k)
		return;
	/* decode (one block): k rotated alike, then both cache rows */
	rope_heads(r, cs, kv.k, kv.n_heads_k, head_dim);
	__syncthreads();
	const uint64_t nk = (uint64_t)kv.n_heads_k * head_dim;
	float *krow = kv.k_cache + (uint64_t)pos * kv.ld_k;
	float *vrow = kv.v_cache + (uint64_t)pos * kv.ld_v;

	for (uint64_t i = threadIdx.x; i < nk; i += blockDim.x)
		krow[i] = kv.k[i];
	for (uint64_t i = threadIdx.x; i < kv.nv; i += blockDim.x)
		vrow[i] = kv.v[i];
}

__global__ void k_swiglu(float *g, const float *u, uint64_t n, bool oai)
{
	const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	if (!oai) {
		const float a = g[i];
		g[i] = __fmul_rn(__fdiv_rn(a, 1.0f + expf(-a)), u[i]);
		return;
	}
	const float xg = 7.0f < g[i] ? 7.0f : g[i];
	const float yu = u[i] < -7.0f ? -7.0f : 7.0f < u[i] ? 7.0f : u[i];
	g[i] = __fmul_rn(__fdiv_rn(xg, 1.0f + expf(__fmul_rn(1.702f, -xg))), yu + 1.0f);
}

__global__ void __launch_bounds__(RT) k_softmax(float *x, uint32_t n)
{
	__shared__ double sh[RT / 32];
	float *xr = x + (uint64_t)blockIdx.x * n;
	float m = -INFINITY;

	for (uint32_t i = threadIdx.x; i < n; i += RT)
		m = fmaxf(m, xr[i]);
	m = block_max(m, reinterpret_cast<float *>(sh));
	double part = 0.0;
	for (uint32_t i = threadIdx.x; i < n; i += RT) {
		const float e = expf(xr[i] - m);
		xr[i] = e;
		part += (double)e;
	}
	const float inv = (float)(1.0 / nsl::block_sum<RT>(part, sh));
	for (uint32_t i = threadIdx.x; i < n; i += RT)
		xr[i] = __fmul_rn(xr[i], inv);
}

/* softmax of (n) floats by one thread, as ns_softmax */
__device__ void softmax_serial(float *x, uint32_t n)
{
	float m = -INFINITY;
	double sum = 0.0;

	for (uint32_t i = 0; i < n; i++)
		m = x[i] > m ? x[i] : m;
	for (uint32_t i = 0; i < n; i++) {
		x[i] = expf(x[i] - m);
		sum += (double)x[i];
	}
	const float inv = (float)(1.0 / sum);
	for (uint32_t i = 0; i < n; i++)
		x[i] = __fmul_rn(x[i], inv);
}

/* One thread per token: moe.c s_route, serially. */
__global__ void k_router(float *lg, uint32_t n_tok, uint32_t E, uint32_t K, bool softmax_first,
			 bool norm_w, float w_scale, int32_t *sel, float *wts)
{
	const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
	uint32_t taken[32]; /* bit per expert, E <= 1024 */

	if (t >= n_tok)
		return;
	float *l = lg + (uint64_t)t * E;
	int32_t *st = sel + (uint64_t)t * K;
	float *w = wts + (uint64_t)t * K;

	if (softmax_first)
		softmax_serial(l, E);
	for (int i = 0; i < 32; i++)
		taken[i] = 0;
	for (uint32_t s = 0; s < K; s++) {
		uint32_t best = E;

		for (uint32_t e = 0; e < E; e++)
			if (!((taken[e >> 5] >> (e & 31)) & 1) && (best == E || l[e] > l[best]))
				best = e;
		taken[best >> 5] |= 1u << (best & 31);
		st[s] = (int32_t)best;
		w[s] = l[best];
	}
	if (!softmax_first)
		softmax_serial(w, K);
	if (norm_w) {
		double sum = 0.0;

		for (uint32_t s = 0; s < K; s++)
			sum += (double)w[s];
		float fs = (float)sum;
		if (!(fs >= 6.103515625e-5f))
			fs = 6.103515625e-5f;
		for (uint32_t s = 0; s < K; s++)
			w[s] = __fdiv_rn(w[s], fs);
	}
	if (w_scale != 1.0f)
		for (uint32_t s = 0; s < K; s++)
			w[s] = __fmul_rn(w[s], w_scale);
}

/* (v, i) beats (bv, bi): larger, or equal with the lower index; NaN never beats. */
__device__ __forceinline__ bool beats(float v, int32_t i, float bv, int32_t bi)
{
	return bi < 0 ? !isnan(v) : (v > bv || (v == bv && i < bi));
}

__global__ void __launch_bounds__(RT) k_argmax(const float *x, uint32_t n, int32_t *out)
{
	__shared__ float sv[RT];
	__shared__ int32_t si[RT];
	const float *xr = x + (uint64_t)blockIdx.x * n;
	float bv = -INFINITY;
	int32_t bi = -1;

	for (uint32_t i = threadIdx.x; i < n; i += RT)
		if (beats(xr[i], (int32_t)i, bv, bi)) {
			bv = xr[i];
			bi = (int32_t)i;
		}
	sv[threadIdx.x] = bv;
	si[threadIdx.x] = bi;
	__syncthreads();
	for (int o = RT / 2; o > 0; o >>= 1) {
		if ((int)threadIdx.x < o && si[threadIdx.x + o] >= 0 &&
		    beats(sv[threadIdx.x + o], si[threadIdx.x + o], sv[threadIdx.x], si[threadIdx.x])) {
			sv[threadIdx.x] = sv[threadIdx.x + o];
			si[threadIdx.x] = si[threadIdx.x + o];
		}
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[blockIdx.x] = si[0];
}

} /* namespace */

extern "C" int ns_cuda_rmsnorm(float *dev_y, const float *dev_x, const float *dev_w, uint32_t n,
			       uint32_t n_tok, float eps, ns_cuda_stream_t s)
{
	if (n == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_x || n_tok > INT32_MAX)
		return -EINVAL;
	/* x is only read when res is NULL */
	k_rmsnorm<<<n_tok, RT, 0, (cudaStream_t)s>>>(dev_y, const_cast<float *>(dev_x), nullptr,
						     dev_w, n, eps, nullptr);
	return nsl::launched();
}

extern "C" int ns_cuda_add_rmsnorm(float *dev_y, float *dev_x, const float *dev_res,
				   const float *dev_w, uint32_t n, uint32_t n_tok, float eps,
				   ns_cuda_stream_t s)
{
	if (n == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_x || !dev_res || n_tok > INT32_MAX || dev_y == dev_x ||
	    dev_y == dev_res || dev_x == dev_res)
		return -EINVAL;
	k_rmsnorm<<<n_tok, RT, 0, (cudaStream_t)s>>>(dev_y, dev_x, dev_res, dev_w, n, eps, nullptr);
	return nsl::launched();
}

extern "C" int ns_cuda_rmsnorm_gated(float *dev_y, const float *dev_x, const float *dev_w,
				     const float *dev_z, uint32_t n, uint32_t n_rows, float eps,
				     ns_cuda_stream_t s)
{
	if (n == 0 || n_rows == 0)
		return 0;
	if (!dev_y || !dev_x || !dev_z || n_rows > INT32_MAX)
		return -EINVAL;
	k_rmsnorm<<<n_rows, RT, 0, (cudaStream_t)s>>>(dev_y, const_cast<float *>(dev_x), nullptr,
						      dev_w, n, eps, dev_z);
	return nsl::launched();
}

extern "C" int ns_cuda_mul_sigmoid(float *dev_y, const float *dev_g, uint64_t n,
				   ns_cuda_stream_t s)
{
	const uint64_t b = (n + 255) / 256;

	if (n == 0)
		return 0;
	if (!dev_y || !dev_g)
		return -EINVAL;
	k_mul_sigmoid<<<(unsigned)(b > 65535 ? 65535 : b), 256, 0, (cudaStream_t)s>>>(dev_y, dev_g,
										     n);
	return nsl::launched();
}

extern "C" int ns_cuda_add_sigmoid_scaled(float *dev_y, const float *dev_src, const float *dev_x,
					  const float *dev_gw, uint64_t n, uint32_t n_tok,
					  ns_cuda_stream_t s)
{
	if (n == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_src || !dev_x || !dev_gw || n_tok > 65535)
		return -EINVAL;
	k_add_sigmoid_scaled<<<n_tok, RT, 0, (cudaStream_t)s>>>(dev_y, dev_src, dev_x, dev_gw, n);
	return nsl::launched();
}

static int rope(const struct ns_cuda_rope *r, float *dev_x, uint32_t n_tok, uint32_t n_heads,
		uint32_t head_dim, int64_t pos0, const int64_t *pos_ptr, const rope_kv &kv,
		cudaStream_t s, const int32_t *mpos = NULL, uint32_t sec_h = 0, uint32_t sec_w = 0)
{
	rope_k k;

	if (n_tok == 0 || n_heads == 0)
		return 0;
	if (!r || !dev_x || r->n_dims == 0 || r->n_dims % 2 || r->n_dims > head_dim ||
	    r->n_dims > 512 || n_tok > INT32_MAX)
		return -EINVAL;
	k.n_dims = r->n_dims;
	k.neox = r->neox;
	k.freq_scale = r->freq_scale;
	/* host libm, so the angles' base equals the CPU path's */
	k.theta_scale = powf(r->freq_base, -2.0f / (float)r->n_dims);
	k.ext_factor = r->ext_factor;
	k.corr0 = r->corr_dims[0];
	k.corr1 = r->corr_dims[1];
	k.mscale = r->attn_factor * (1.0f + 0.1f * logf(1.0f / r->freq_scale));
	k.ff = r->dev_freq_factors;
	k.pos_ptr = pos_ptr;
	k.mpos = mpos;
	k.sec_h = sec_h;
	k.sec_w = sec_w;
	k_rope<<<n_tok, 256, 0, s>>>(k, dev_x, n_heads, head_dim, pos0, kv);
	return nsl::launched();
}

extern "C" int ns_cuda_rope(const struct ns_cuda_rope *r, float *dev_x, uint32_t n_tok,
			    uint32_t n_heads, uint32_t head_dim, int64_t pos0, ns_cuda_stream_t s)
{
	return rope(r, dev_x, n_tok, n_heads, head_dim, pos0, NULL, rope_kv{}, (cudaStream_t)s);
}

extern "C" int ns_cuda_rope_mrope(const struct ns_cuda_rope *r, float *dev_x, uint32_t n_tok,
				  uint32_t n_heads, uint32_t head_dim, const int32_t *dev_pos,
				  const uint32_t sections[4], ns_cuda_stream_t s)
{
	if (n_tok && n_heads && (!dev_pos || !sections))
		return -EINVAL;
	return rope(r, dev_x, n_tok, n_heads, head_dim, 0, NULL, rope_kv{}, (cudaStream_t)s,
		    dev_pos, sections ? sections[1] : 0, sections ? sections[2] : 0);
}

extern "C" int ns_cuda_rope_at(const struct ns_cuda_rope *r, float *dev_x, uint32_t n_heads,
			       uint32_t head_dim, const int64_t *dev_pos, ns_cuda_stream_t s)
{
	if (!dev_pos)
		return -EINVAL;
	return rope(r, dev_x, 1, n_heads, head_dim, 0, dev_pos, rope_kv{}, (cudaStream_t)s);
}

extern "C" int ns_cuda_rope_kv_store(const struct ns_cuda_rope *r, float *dev_q,
				     uint32_t n_head, float *dev_k, uint32_t n_head_kv,
				     uint32_t head_dim, const float *dev_v, uint64_t nv,
				     float *dev_k_cache, uint64_t ld_k, float *dev_v_cache,
				     uint64_t ld_v, int64_t pos, const int64_t *dev_pos,
				     ns_cuda_stream_t s)
{
	const uint64_t nk = (uint64_t)n_head_kv * head_dim;

	if (!dev_q || !dev_k || !dev_v || !dev_k_cache || !dev_v_cache || n_head == 0 ||
	    n_head_kv == 0 || nv == 0 || ld_k < nk || ld_v < nv || (!dev_pos && pos < 0))
		return -EINVAL;
	return rope(r, dev_q, 1, n_head, head_dim, pos, dev_pos,
		    rope_kv{ dev_k, n_head_kv, dev_k_cache, ld_k, dev_v, nv, dev_v_cache, ld_v },
		    (cudaStream_t)s);
}

extern "C" int ns_cuda_swiglu(float *dev_g, const float *dev_u, uint64_t n, bool oai,
			      ns_cuda_stream_t s)
{
	if (n == 0)
		return 0;
	if (!dev_g || !dev_u || (n + 255) / 256 > INT32_MAX)
		return -EINVAL;
	k_swiglu<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)s>>>(dev_g, dev_u, n, oai);
	return nsl::launched();
}

extern "C" int ns_cuda_softmax(float *dev_x, uint32_t n, uint32_t n_rows, ns_cuda_stream_t s)
{
	if (n == 0 || n_rows == 0)
		return 0;
	if (!dev_x || n_rows > INT32_MAX)
		return -EINVAL;
	k_softmax<<<n_rows, RT, 0, (cudaStream_t)s>>>(dev_x, n);
	return nsl::launched();
}

extern "C" int ns_cuda_router_topk(float *dev_logits, uint32_t n_tok, uint32_t n_expert,
				   uint32_t k, bool softmax_first, bool norm_w, float w_scale,
				   int32_t *dev_sel, float *dev_w, ns_cuda_stream_t s)
{
	if (n_tok == 0)
		return 0;
	if (!dev_logits || !dev_sel || !dev_w || n_expert == 0 || n_expert > 1024 || k == 0 ||
	    k > 32 || k > n_expert)
		return -EINVAL;
	k_router<<<(n_tok + 63) / 64, 64, 0, (cudaStream_t)s>>>(dev_logits, n_tok, n_expert, k,
								 softmax_first, norm_w, w_scale,
								 dev_sel, dev_w);
	return nsl::launched();
}

extern "C" int ns_cuda_argmax(const float *dev_x, uint32_t n, uint32_t n_tok, int32_t *dev_out,
			      ns_cuda_stream_t s)
{
	if (n_tok == 0)
		return 0;
	if (!dev_x || !dev_out || n == 0 || n > INT32_MAX || n_tok > INT32_MAX)
		return -EINVAL;
	k_argmax<<<n_tok, RT, 0, (cudaStream_t)s>>>(dev_x, n, dev_out);
	return nsl::launched();
}
