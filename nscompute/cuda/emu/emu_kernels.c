/* emu_kernels.c - the kernels of nscuda.h emulated on the host with the CPU forward pass's
 * code (nscompute/kernels, nscompute/forward).
 *
 * Each function takes the same arguments, rejects the same bad ones with the same errno as its
 * launcher in the .cu files (launch.cuh's window check, the checks in gemv.cu, gemm.cu, ops.cu,
 * attn.cu, glue.cu), then computes on the calling thread and returns when done. The arithmetic
 * is the CPU's, not the GPU's:
 *   dequant          ns_dequant_rows (bit-identical, as on the GPU)
 *   gemv, prefill    ns_gemm_ex(AUTO path, NS_ACT_F32), one thread: f32 activations, so the
 *                    prefill GEMM does not round x to f16 as the tensor cores do
 *   gemv_q8          ns_gemm_ex(SCALAR path, NS_ACT_Q8): int8 activations as the GPU's
 *   rmsnorm/softmax  ns_rmsnorm / ns_softmax per row; rope: ns_rope_angles (M-RoPE:
 *                    ns_rope_angles_mrope) + ns_rope_rotate
 *   swiglu, router   moe.c's s_act and s_route, written out here (they are static there)
 *   attention        llama.c's s_attention (dot products and the weighted V sum in double),
 *                    not the GPU's chunked f32 reduction; typed KV caches (f16, q8_0)
 *                    through the same code, each element widened where it is read, and
 *                    stored with attn.cu's rounding (half to nearest even, ggml's Q8_0)
 *   glue             the same float operations in the same order as glue.cu (bit-identical)
 * Being one sequential loop each, every result is deterministic and independent of n_rows,
 * window placement and n_tok, as nscuda.h promises. Streams are ignored. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dequant.h"
#include "fp16.h"
#include "gemv.h"
#include "ggml_type.h"
#include "moe.h"
#include "nscuda.h"
#include "nscuda_emu.h"
#include "nscuda_internal.h"
#include "ops.h"
#include "rope.h"

/* ---------------------------------------------------------------- weight windows ------- */

/* The GGUF types the CUDA kernels compute (quant.cuh's NSQ_GEO): id, block elements, bytes. */
static const struct {
	uint32_t type, qk, bytes;
} s_types[] = {
	{ 0, 32, 128 },   /* F32: units of 32 */
	{ 1, 32, 64 },    /* F16 */
	{ 30, 32, 64 },   /* BF16 */
	{ 2, 32, 18 },    /* Q4_0 */
	{ 3, 32, 20 },    /* Q4_1 */
	{ 6, 32, 22 },    /* Q5_0 */
	{ 7, 32, 24 },    /* Q5_1 */
	{ 8, 32, 34 },    /* Q8_0 */
	{ 10, 256, 84 },  /* Q2_K */
	{ 11, 256, 110 }, /* Q3_K */
	{ 12, 256, 144 }, /* Q4_K */
	{ 13, 256, 176 }, /* Q5_K */
	{ 14, 256, 210 }, /* Q6_K */
	{ 39, 32, 17 },   /* MXFP4 */
};

static bool s_aligned(const void *p, uintptr_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

/* launch.cuh's nsl::window: -ENOTSUP for another type, -EINVAL for partial blocks or a
 * misaligned / NULL window, -EOVERFLOW when the units of a row do not fit 32 bits. Float rows
 * (F32, F16, BF16) may end in a partial unit of 32 (*tail set when non-NULL); their window is
 * then aligned to the element only. */
static int s_window(uint32_t type, const void *w, uint64_t n_cols, bool *tail)
{
	uint32_t qk = 0, bytes = 0, low;
	bool part;

	for (size_t i = 0; i < sizeof(s_types) / sizeof(s_types[0]); i++)
		if (s_types[i].type == type) {
			qk = s_types[i].qk;
			bytes = s_types[i].bytes;
		}
	if (!qk)
		return -ENOTSUP;
	part = (type == 0 || type == 1 || type == 30) && n_cols % 32; /* F32, F16, BF16 */
	if (n_cols == 0 || (n_cols % qk && !part))
		return -EINVAL;
	if ((n_cols + 31) / 32 > UINT32_MAX / 2)
		return -EOVERFLOW;
	low = part ? bytes / 32 : bytes & (0u - bytes);
	if (!w || !s_aligned(w, low < 16 ? low : 16))
		return -EINVAL;
	if (tail)
		*tail = part;
	return 0;
}

bool ns_cuda_type_supported(uint32_t type)
{
	return s_window(type, (const void *)(uintptr_t)256, 1024, NULL) != -ENOTSUP;
}

int ns_cuda_dequant(uint32_t type, const void *dev_w, uint64_t n_cols, uint64_t n_rows,
		    float *dev_y, ns_cuda_stream_t s)
{
	uint64_t total;
	int rc = s_window(type, dev_w, n_cols, NULL);

	ns_emu_launch_order(s);
	if (rc)
		return rc;
	if (n_rows == 0)
		return 0;
	if (!dev_y || !s_aligned(dev_y, 16))
		return -EINVAL;
	if (__builtin_mul_overflow(n_rows, (n_cols + 31) / 32, &total) || total > (1ull << 40))
		return -EOVERFLOW;
	return ns_dequant_rows(type, dev_w, n_cols, n_rows, dev_y);
}

int ns_cuda_gemv(uint32_t type, const void *dev_w, uint64_t n_cols, uint64_t n_rows,
		 const float *dev_x, float *dev_y, ns_cuda_stream_t s)
{
	const struct ns_kopts ko = { NS_KPATH_AUTO, NS_ACT_F32, false };
	bool tail = false;
	int rc = s_window(type, dev_w, n_cols, &tail);

	ns_emu_launch_order(s);
	if (rc)
		return rc;
	if (n_rows == 0)
		return 0;
	/* gemv.cu / gemv2.cu: x 16-byte aligned, 4 on their tail paths */
	if (!dev_x || !dev_y || !s_aligned(dev_x, tail ? 4 : 16))
		return -EINVAL;
	if (n_rows >= (1ull << 32))
		return -EOVERFLOW;
	return ns_gemm_ex(NULL, &ko, type, dev_w, n_cols, n_rows, dev_x, 1, dev_y, n_rows);
}

/* gemvq8.cu's int8-activation GEMV: the CPU's scalar NS_ACT_Q8 path (x quantized by
 * ns_kquant_x_scalar, the same xq and dx as the GPU's; the float scaling order differs, both
 * within nscuda.h's bound). Same refusals as the GPU function; never -E2BIG (no shared memory
 * limit here). */
int ns_cuda_gemv_q8(uint32_t type, const void *dev_w, uint64_t n_cols, uint64_t n_rows,
		    const float *dev_x, float *dev_y, ns_cuda_stream_t s)
{
	const struct ns_kopts ko = { NS_KPATH_SCALAR, NS_ACT_Q8, false };
	int rc;

	ns_emu_launch_order(s);
	if (type == NS_TYPE_F32 || type == NS_TYPE_F16 || type == NS_TYPE_BF16) /* ns_cuda_gemv */
		return -ENOTSUP;
	if ((rc = s_window(type, dev_w, n_cols, NULL)))
		return rc;
	if (n_rows == 0)
		return 0;
	if (!dev_x || !dev_y || !s_aligned(dev_x, 16))
		return -EINVAL;
	if (n_rows >= (1ull << 32))
		return -EOVERFLOW;
	return ns_gemm_ex(NULL, &ko, type, dev_w, n_cols, n_rows, dev_x, 1, dev_y, n_rows);
}

/* nscuda_internal.h's kernel families of the GPU GEMV (tests and benchmarks compare them):
 * every variant is the same CPU GEMV here; unknown variants are -EINVAL as on the GPU. */
int ns_cuda_gemv2(int variant, uint32_t type, const void *dev_w, uint64_t n_cols,
		  uint64_t n_rows, const float *dev_x, float *dev_y, ns_cuda_stream_t s)
{
	if (variant != 2 && variant != 3)
		return -EINVAL;
	return ns_cuda_gemv(type, dev_w, n_cols, n_rows, dev_x, dev_y, s);
}

int ns_cuda_gemv_variant(int variant, uint32_t type, const void *dev_w, uint64_t n_cols,
			 uint64_t n_rows, const float *dev_x, float *dev_y, ns_cuda_stream_t s)
{
	if (variant == 4)
		variant = 1;
	if (variant == 1)
		return ns_cuda_gemv(type, dev_w, n_cols, n_rows, dev_x, dev_y, s);
	return ns_cuda_gemv2(variant, type, dev_w, n_cols, n_rows, dev_x, dev_y, s);
}

int ns_cuda_gemm_prefill(uint32_t type, const void *dev_w, uint64_t n_cols, uint64_t n_rows,
			 const float *dev_x, uint64_t ldx, uint64_t n_tok, float *dev_y,
			 uint64_t ldy, ns_cuda_stream_t s)
{
	const struct ns_kopts ko = { NS_KPATH_AUTO, NS_ACT_F32, false };
	bool tail = false;
	int rc = s_window(type, dev_w, n_cols, &tail);

	ns_emu_launch_order(s);
	if (rc)
		return rc;
	if (n_rows == 0 || n_tok == 0)
		return 0;
	/* gemm.cu reads x rows as float4 except on its tail path (rows with a partial unit) */
	if (!dev_x || !dev_y || ldx < n_cols || ldy < n_rows || (ldx % 4 && !tail) ||
	    !s_aligned(dev_x, tail ? 4 : 16))
		return -EINVAL;
	if ((n_rows + 63) / 64 > INT32_MAX || (n_tok + 63) / 64 > 65535)
		return -EOVERFLOW; /* gemm.cu's grid limits: tiles of 64 rows x 64 tokens */
	/* ns_gemm reads x with stride n_cols: one call when packed, else token by token (the
	 * results do not depend on n_tok, gemv.h) */
	if (ldx == n_cols)
		return ns_gemm_ex(NULL, &ko, type, dev_w, n_cols, n_rows, dev_x, n_tok, dev_y, ldy);
	for (uint64_t t = 0; t < n_tok; t++)
		if ((rc = ns_gemm_ex(NULL, &ko, type, dev_w, n_cols, n_rows, dev_x + t * ldx, 1,
				     dev_y + t * ldy, n_rows)))
			return rc;
	return 0;
}

/* ---------------------------------------------------------------- row ops -------------- */

int ns_cuda_rmsnorm(float *dev_y, const float *dev_x, const float *dev_w, uint32_t n,
		    uint32_t n_tok, float eps, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_x || n_tok > INT32_MAX)
		return -EINVAL;
	for (uint32_t t = 0; t < n_tok; t++)
		ns_rmsnorm(dev_y + (uint64_t)t * n, dev_x + (uint64_t)t * n, dev_w, n, eps);
	return 0;
}

int ns_cuda_add_rmsnorm(float *dev_y, float *dev_x, const float *dev_res, const float *dev_w,
			uint32_t n, uint32_t n_tok, float eps, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_x || !dev_res || n_tok > INT32_MAX || dev_y == dev_x ||
	    dev_y == dev_res || dev_x == dev_res)
		return -EINVAL;
	for (uint64_t i = 0; i < (uint64_t)n * n_tok; i++)
		dev_x[i] += dev_res[i];
	return ns_cuda_rmsnorm(dev_y, dev_x, dev_w, n, n_tok, eps, s);
}

/* ns_cuda_rope (dev_pos NULL: token t at pos0 + t) and ns_cuda_rope_mrope (token t at
 * dev_pos[3 t ..] with the sections): the CPU's angles and rotation. */
static int s_rope(const struct ns_cuda_rope *r, float *dev_x, uint32_t n_tok, uint32_t n_heads,
		  uint32_t head_dim, int64_t pos0, const int32_t *dev_pos,
		  const uint32_t sections[4])
{
	struct ns_rope cr;
	float *cs; /* (n_dims) cos, sin of each pair */

	if (n_tok == 0 || n_heads == 0)
		return 0;
	if (!r || !dev_x || r->n_dims == 0 || r->n_dims % 2 || r->n_dims > head_dim ||
	    n_tok > INT32_MAX)
		return -EINVAL;
	cr.n_dims = r->n_dims;
	cr.neox = r->neox;
	cr.freq_base = r->freq_base;
	cr.freq_scale = r->freq_scale;
	cr.freq_factors = r->dev_freq_factors;
	cr.ext_factor = r->ext_factor;
	cr.attn_factor = r->attn_factor;
	cr.corr_dims[0] = r->corr_dims[0];
	cr.corr_dims[1] = r->corr_dims[1];
	cs = malloc((size_t)r->n_dims * sizeof(*cs));
	if (!cs)
		return -ENOMEM;
	for (uint32_t t = 0; t < n_tok; t++) {
		if (dev_pos)
			ns_rope_angles_mrope(&cr, dev_pos + 3ull * t, sections, cs);
		else
			ns_rope_angles(&cr, pos0 + t, cs);
		ns_rope_rotate(&cr, cs, dev_x + (uint64_t)t * n_heads * head_dim, n_heads, head_dim);
	}
	free(cs);
	return 0;
}

int ns_cuda_rope(const struct ns_cuda_rope *r, float *dev_x, uint32_t n_tok, uint32_t n_heads,
		 uint32_t head_dim, int64_t pos0, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	return s_rope(r, dev_x, n_tok, n_heads, head_dim, pos0, NULL, NULL);
}

int ns_cuda_rope_mrope(const struct ns_cuda_rope *r, float *dev_x, uint32_t n_tok,
		       uint32_t n_heads, uint32_t head_dim, const int32_t *dev_pos,
		       const uint32_t sections[4], ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n_tok && n_heads && (!dev_pos || !sections))
		return -EINVAL;
	return s_rope(r, dev_x, n_tok, n_heads, head_dim, 0, dev_pos, sections);
}

#define S_OAI_ALPHA 1.702f
#define S_OAI_LIMIT 7.0f

int ns_cuda_swiglu(float *dev_g, const float *dev_u, uint64_t n, bool oai, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0)
		return 0;
	if (!dev_g || !dev_u || (n + 255) / 256 > INT32_MAX)
		return -EINVAL;
	if (!oai) {
		for (uint64_t i = 0; i < n; i++)
			dev_g[i] = ns_silu(dev_g[i]) * dev_u[i];
		return 0;
	}
	for (uint64_t i = 0; i < n; i++) {
		const float x = S_OAI_LIMIT < dev_g[i] ? S_OAI_LIMIT : dev_g[i];
		const float y = dev_u[i] < -S_OAI_LIMIT ? -S_OAI_LIMIT :
				S_OAI_LIMIT < dev_u[i] ? S_OAI_LIMIT : dev_u[i];

		dev_g[i] = x / (1.0f + expf(S_OAI_ALPHA * (-x))) * (y + 1.0f);
	}
	return 0;
}

int ns_cuda_softmax(float *dev_x, uint32_t n, uint32_t n_rows, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0 || n_rows == 0)
		return 0;
	if (!dev_x || n_rows > INT32_MAX)
		return -EINVAL;
	for (uint32_t r = 0; r < n_rows; r++)
		ns_softmax(dev_x + (uint64_t)r * n, n);
	return 0;
}

int ns_cuda_router_topk(float *dev_logits, uint32_t n_tok, uint32_t n_expert, uint32_t k,
			bool softmax_first, bool norm_w, float w_scale, int32_t *dev_sel,
			float *dev_w, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n_tok == 0)
		return 0;
	if (!dev_logits || !dev_sel || !dev_w || n_expert == 0 || n_expert > 1024 || k == 0 ||
	    k > 32 || k > n_expert)
		return -EINVAL;
	uint8_t taken[1024];

	for (uint32_t t = 0; t < n_tok; t++) /* moe.c's router, token by token */
		ns_moe_route_token(dev_logits + (uint64_t)t * n_expert, n_expert, k, softmax_first,
				   norm_w, w_scale, taken, dev_sel + (uint64_t)t * k,
				   dev_w + (uint64_t)t * k);
	return 0;
}

int ns_cuda_argmax(const float *dev_x, uint32_t n, uint32_t n_tok, int32_t *dev_out,
		   ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n_tok == 0)
		return 0;
	if (!dev_x || !dev_out || n == 0 || n > INT32_MAX || n_tok > INT32_MAX)
		return -EINVAL;
	for (uint32_t t = 0; t < n_tok; t++) {
		const float *xr = dev_x + (uint64_t)t * n; /* (n) */
		int32_t bi = -1;                           /* -1 when every value is NaN */

		for (uint32_t i = 0; i < n; i++)
			if (!isnan(xr[i]) && (bi < 0 || xr[i] > xr[bi]))
				bi = (int32_t)i; /* strictly larger: ties keep the lowest */
		dev_out[t] = bi;
	}
	return 0;
}

/* ---------------------------------------------------------------- attention ------------ */

#define S_ATTN_CH 256   /* attn.cu's chunk of positions (workspace size only) */
#define S_ATTN_MAXD 512 /* largest dk / dv */

uint64_t ns_cuda_attn_ws_bytes(uint32_t n_tok, uint32_t n_head, uint64_t n_ctx, uint32_t dv)
{
	uint64_t b = (uint64_t)n_tok * n_head, r;
	const uint64_t nc = n_ctx / S_ATTN_CH + (n_ctx % S_ATTN_CH != 0);

	if (__builtin_mul_overflow(b, nc, &r) || __builtin_mul_overflow(r, (uint64_t)dv + 2, &r) ||
	    __builtin_mul_overflow(r, 4ull, &r))
		return UINT64_MAX;
	return r;
}

/* Element i of row j of a cache: float32 (kv NULL: ld floats a row) or typed (kv). */
struct s_kvview {
	const struct ns_cuda_kv *kv;
	const float *f;
	uint64_t ld;
	bool is_v;
};

static float s_kv_at(const struct s_kvview *w, uint64_t j, uint64_t i)
{
	const uint32_t t = w->kv ? (w->is_v ? w->kv->tv : w->kv->tk) : NS_CUDA_KV_F32;
	const uint8_t *row;

	if (!w->kv)
		return w->f[j * w->ld + i];
	row = (const uint8_t *)(w->is_v ? w->kv->dev_v : w->kv->dev_k) +
	      j * (w->is_v ? w->kv->v_row : w->kv->k_row);
	if (t == NS_CUDA_KV_F16)
		return ns_fp16_to_fp32((uint16_t)(row[2 * i] | row[2 * i + 1] << 8));
	if (t == NS_CUDA_KV_Q8_0) {
		const uint8_t *blk = row + i / 32 * 34;

		return ns_fp16_to_fp32((uint16_t)(blk[0] | blk[1] << 8)) * (float)(int8_t)blk[2 + i % 32];
	}
	return ((const float *)(const void *)row)[i];
}

/* llama.c's first attention (double sums in order, ns_softmax) over either cache. */
static int s_attention(const float *dev_q, const struct s_kvview *K, const struct s_kvview *V,
		       uint32_t n_tok, uint64_t pos0, uint32_t n_head, uint32_t n_head_kv,
		       uint32_t dk, uint32_t dv, float scale, uint32_t window,
		       const float *dev_sinks, float *dev_out)
{
	uint64_t n_ctx, nc, max_pos;
	uint32_t gqa;
	float *att; /* (max_pos) scores, then probabilities, of one (token, head) */

	if (pos0 > UINT64_MAX - n_tok)
		return -EOVERFLOW;
	n_ctx = pos0 + n_tok;
	nc = n_ctx / S_ATTN_CH + (n_ctx % S_ATTN_CH != 0);
	if (nc > INT32_MAX || n_head > 65535 || n_tok > 65535)
		return -EOVERFLOW;
	max_pos = window && window < n_ctx ? window : n_ctx;
	if (max_pos > SIZE_MAX / sizeof(*att))
		return -ENOMEM;
	att = malloc((size_t)max_pos * sizeof(*att));
	if (!att)
		return -ENOMEM;
	gqa = n_head / n_head_kv;
	for (uint32_t t = 0; t < n_tok; t++) {
		const uint64_t p1 = pos0 + t + 1; /* causal: itself and everything before */
		const uint64_t j0 = window && p1 > window ? p1 - window : 0;
		const uint64_t n_pos = p1 - j0;

		for (uint32_t h = 0; h < n_head; h++) {
			const uint32_t hk = h / gqa;
			const float *qh = dev_q + ((uint64_t)t * n_head + h) * dk; /* (dk) */
			float *out = dev_out + ((uint64_t)t * n_head + h) * dv;   /* (dv) */

			/* scores: att[j] = (q . k_{j0+j}) * scale */
			for (uint64_t j = 0; j < n_pos; j++) {
				double acc = 0.0;

				for (uint32_t d = 0; d < dk; d++)
					acc += (double)qh[d] *
					       (double)s_kv_at(K, j0 + j, (uint64_t)hk * dk + d);
				att[j] = (float)acc * scale;
			}
			if (dev_sinks)
				ns_softmax_sink(att, (uint32_t)n_pos, dev_sinks[h]);
			else
				ns_softmax(att, (uint32_t)n_pos);
			/* out = sum_j att[j] * v_{j0+j} */
			for (uint32_t d = 0; d < dv; d++) {
				double acc = 0.0;

				for (uint64_t j = 0; j < n_pos; j++)
					acc += (double)att[j] *
					       (double)s_kv_at(V, j0 + j, (uint64_t)hk * dv + d);
				out[d] = (float)acc;
			}
		}
	}
	free(att);
	return 0;
}

int ns_cuda_attention(const float *dev_q, const float *dev_k, uint64_t ldk, const float *dev_v,
		      uint64_t ldv, uint32_t n_tok, uint64_t pos0, uint32_t n_head,
		      uint32_t n_head_kv, uint32_t dk, uint32_t dv, float scale, uint32_t window,
		      const float *dev_sinks, float *dev_out, void *dev_ws, ns_cuda_stream_t s)
{
	const struct s_kvview K = { .f = dev_k, .ld = ldk }, V = { .f = dev_v, .ld = ldv };

	ns_emu_launch_order(s);
	if (n_tok == 0 || n_head == 0)
		return 0;
	if (!dev_q || !dev_k || !dev_v || !dev_out || !dev_ws || n_head_kv == 0 ||
	    n_head % n_head_kv || dk == 0 || dv == 0 || dk > S_ATTN_MAXD || dv > S_ATTN_MAXD ||
	    ldk < (uint64_t)n_head_kv * dk || ldv < (uint64_t)n_head_kv * dv)
		return -EINVAL;
	return s_attention(dev_q, &K, &V, n_tok, pos0, n_head, n_head_kv, dk, dv, scale, window,
			   dev_sinks, dev_out);
}

/* attn.cu's checks of a typed cache. */
static bool s_kv_ok(const struct ns_cuda_kv *kv, uint32_t n_head_kv, uint32_t dk, uint32_t dv)
{
	const uint64_t kb = ns_cuda_kv_row_bytes(kv->tk, (uint64_t)n_head_kv * dk);
	const uint64_t vb = ns_cuda_kv_row_bytes(kv->tv, (uint64_t)n_head_kv * dv);

	return kv->dev_k && kv->dev_v && kv->tk <= 2 && kv->tv <= 2 && kb && vb &&
	       kv->k_row >= kb && kv->v_row >= vb && !(kv->tk == NS_CUDA_KV_Q8_0 && dk % 32) &&
	       !(kv->tv == NS_CUDA_KV_Q8_0 && dv % 32) &&
	       !(kv->tk == NS_CUDA_KV_F32 && kv->k_row % 4) &&
	       !(kv->tv == NS_CUDA_KV_F32 && kv->v_row % 4);
}

int ns_cuda_attention_kv(const float *dev_q, const struct ns_cuda_kv *kv, uint32_t n_tok,
			 uint64_t pos0, const int64_t *dev_pos, uint64_t max_ctx,
			 uint32_t n_head, uint32_t n_head_kv, uint32_t dk, uint32_t dv,
			 float scale, uint32_t window, const float *dev_sinks, float *dev_out,
			 void *dev_ws, ns_cuda_stream_t s)
{
	struct s_kvview K = { .kv = kv }, V = { .kv = kv, .is_v = true };

	ns_emu_launch_order(s);
	if (!kv || (dev_pos && (n_tok != 1 || max_ctx == 0)))
		return -EINVAL;
	if (n_tok == 0 || n_head == 0)
		return 0;
	if (!dev_q || !dev_out || !dev_ws || n_head_kv == 0 || n_head % n_head_kv || dk == 0 ||
	    dv == 0 || dk > S_ATTN_MAXD || dv > S_ATTN_MAXD || !s_kv_ok(kv, n_head_kv, dk, dv))
		return -EINVAL;
	if (dev_pos && (*dev_pos < 0 || (uint64_t)*dev_pos >= max_ctx))
		return -EINVAL;
	return s_attention(dev_q, &K, &V, n_tok, dev_pos ? (uint64_t)*dev_pos : pos0, n_head,
			   n_head_kv, dk, dv, scale, window, dev_sinks, dev_out);
}

/* attn.cu's k_kv_store: one row of width floats into a cache row of type t. */
static void s_kv_row(uint8_t *row, uint32_t t, const float *x, uint64_t width)
{
	for (uint64_t b = 0; b < (width + 31) / 32; b++) {
		const uint64_t n = width - 32 * b < 32 ? width - 32 * b : 32;

		if (t == NS_CUDA_KV_Q8_0) {
			uint8_t *blk = row + 34 * b;
			float amax = 0.0f, d, id;
			uint16_t h;

			for (uint32_t i = 0; i < 32; i++)
				amax = fmaxf(amax, fabsf(x[32 * b + i]));
			d = amax / 127.0f;
			id = d != 0.0f ? 1.0f / d : 0.0f;
			h = ns_fp32_to_fp16(d);
			blk[0] = (uint8_t)h;
			blk[1] = (uint8_t)(h >> 8);
			for (uint32_t i = 0; i < 32; i++) {
				float v = roundf(x[32 * b + i] * id);

				blk[2 + i] = (uint8_t)(int8_t)(v >= -127.0f && v <= 127.0f ? v : 0.0f);
			}
		} else if (t == NS_CUDA_KV_F16) {
			for (uint64_t i = 0; i < n; i++) {
				uint16_t h = ns_fp32_to_fp16(x[32 * b + i]);

				row[2 * (32 * b + i)] = (uint8_t)h;
				row[2 * (32 * b + i) + 1] = (uint8_t)(h >> 8);
			}
		} else {
			memcpy(row + 4 * 32 * b, x + 32 * b, n * sizeof(float));
		}
	}
}

int ns_cuda_kv_store(const struct ns_cuda_kv *kv, const float *dev_k, uint64_t nk,
		     const float *dev_v, uint64_t nv, uint32_t n_tok, uint64_t pos0,
		     const int64_t *dev_pos, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (!kv || n_tok == 0 || (dev_pos && (n_tok != 1 || *dev_pos < 0)) || !kv->dev_k ||
	    !kv->dev_v || !dev_k || !dev_v || !nk || !nv || n_tok > 65535 ||
	    !ns_cuda_kv_row_bytes(kv->tk, nk) || ns_cuda_kv_row_bytes(kv->tk, nk) > kv->k_row ||
	    !ns_cuda_kv_row_bytes(kv->tv, nv) || ns_cuda_kv_row_bytes(kv->tv, nv) > kv->v_row ||
	    (kv->tk == NS_CUDA_KV_F32 && kv->k_row % 4) || (kv->tv == NS_CUDA_KV_F32 && kv->v_row % 4))
		return -EINVAL;
	if (dev_pos)
		pos0 = (uint64_t)*dev_pos;
	for (uint32_t t = 0; t < n_tok; t++) {
		s_kv_row((uint8_t *)kv->dev_k + (pos0 + t) * kv->k_row, kv->tk, dev_k + t * nk, nk);
		s_kv_row((uint8_t *)kv->dev_v + (pos0 + t) * kv->v_row, kv->tv, dev_v + t * nv, nv);
	}
	return 0;
}

/* ---------------------------------------------------------------- forward-pass glue ---- */
/* glue.cu's launch checks, including its 65535 limit on the row count (grid y). Indices and
 * slots are also checked to be >= 0 here (the GPU would fault on them), not against a bound
 * the API does not pass. */

int ns_cuda_add(float *dev_y, const float *dev_x, uint64_t n, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0)
		return 0;
	if (!dev_y || !dev_x)
		return -EINVAL;
	for (uint64_t i = 0; i < n; i++)
		dev_y[i] += dev_x[i];
	return 0;
}

int ns_cuda_add_rows(float *dev_y, uint64_t ld, const float *dev_b, uint64_t n, uint32_t n_tok,
		     ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_b || ld < n || n_tok > 65535)
		return -EINVAL;
	for (uint32_t t = 0; t < n_tok; t++)
		for (uint64_t i = 0; i < n; i++)
			dev_y[t * ld + i] += dev_b[i];
	return 0;
}

int ns_cuda_scale_rows(float *dev_y, uint64_t ld, float scale, const float *dev_w, uint64_t n,
		       uint32_t n_tok, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_w || ld < n || n_tok > 65535)
		return -EINVAL;
	for (uint32_t t = 0; t < n_tok; t++)
		for (uint64_t i = 0; i < n; i++)
			dev_y[t * ld + i] = dev_y[t * ld + i] * scale * dev_w[i];
	return 0;
}

int ns_cuda_gather_rows(float *dev_dst, const float *dev_src, const int32_t *dev_idx, uint32_t m,
			uint64_t n, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0 || m == 0)
		return 0;
	if (!dev_dst || !dev_src || !dev_idx || m > 65535)
		return -EINVAL;
	for (uint32_t i = 0; i < m; i++)
		if (dev_idx[i] < 0)
			return -EINVAL;
	for (uint32_t i = 0; i < m; i++)
		memmove(dev_dst + (uint64_t)i * n, dev_src + (uint64_t)dev_idx[i] * n,
			n * sizeof(float));
	return 0;
}

int ns_cuda_scatter_scaled(float *dev_ys, const float *dev_src, const int32_t *dev_slot,
			   const float *dev_w, uint32_t m, uint64_t n, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0 || m == 0)
		return 0;
	if (!dev_ys || !dev_src || !dev_slot || !dev_w || m > 65535)
		return -EINVAL;
	for (uint32_t i = 0; i < m; i++)
		if (dev_slot[i] < 0)
			return -EINVAL;
	for (uint32_t i = 0; i < m; i++) {
		const float ws = dev_w[dev_slot[i]];
		const float *sr = dev_src + (uint64_t)i * n;     /* (n) */
		float *yr = dev_ys + (uint64_t)dev_slot[i] * n; /* (n) */

		for (uint64_t j = 0; j < n; j++)
			yr[j] = sr[j] * ws;
	}
	return 0;
}

int ns_cuda_sum_slots(float *dev_y, const float *dev_ys, uint32_t n_tok, uint32_t k, uint64_t n,
		      ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_ys || k == 0 || n_tok > 65535)
		return -EINVAL;
	for (uint32_t t = 0; t < n_tok; t++) {
		const float *yt = dev_ys + (uint64_t)t * k * n; /* (k, n) */
		float *out = dev_y + (uint64_t)t * n;          /* (n) */

		for (uint64_t j = 0; j < n; j++) {
			float acc = yt[j];

			for (uint32_t sl = 1; sl < k; sl++)
				acc += yt[(uint64_t)sl * n + j];
			out[j] = acc;
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- position on the device */

int ns_cuda_rope_at(const struct ns_cuda_rope *r, float *dev_x, uint32_t n_heads,
		    uint32_t head_dim, const int64_t *dev_pos, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (!dev_pos)
		return -EINVAL;
	return ns_cuda_rope(r, dev_x, 1, n_heads, head_dim, *dev_pos, s);
}

int ns_cuda_rope_kv_store(const struct ns_cuda_rope *r, float *dev_q, uint32_t n_head,
			  float *dev_k, uint32_t n_head_kv, uint32_t head_dim, const float *dev_v,
			  uint64_t nv, float *dev_k_cache, uint64_t ld_k, float *dev_v_cache,
			  uint64_t ld_v, int64_t pos, const int64_t *dev_pos, ns_cuda_stream_t s)
{
	const uint64_t nk = (uint64_t)n_head_kv * head_dim;
	int rc;

	ns_emu_launch_order(s);
	if (!dev_q || !dev_k || !dev_v || !dev_k_cache || !dev_v_cache || n_head == 0 ||
	    n_head_kv == 0 || nv == 0 || ld_k < nk || ld_v < nv || (!dev_pos && pos < 0))
		return -EINVAL;
	if (dev_pos)
		pos = *dev_pos;
	if (pos < 0)
		return -EINVAL;
	if ((rc = ns_cuda_rope(r, dev_q, 1, n_head, head_dim, pos, s)) ||
	    (rc = ns_cuda_rope(r, dev_k, 1, n_head_kv, head_dim, pos, s)))
		return rc;
	memmove(dev_k_cache + (uint64_t)pos * ld_k, dev_k, nk * sizeof(float));
	memmove(dev_v_cache + (uint64_t)pos * ld_v, dev_v, nv * sizeof(float));
	return 0;
}

int ns_cuda_attention_at(const float *dev_q, const float *dev_k, uint64_t ldk,
			 const float *dev_v, uint64_t ldv, const int64_t *dev_pos,
			 uint64_t max_ctx, uint32_t n_head, uint32_t n_head_kv, uint32_t dk,
			 uint32_t dv, float scale, uint32_t window, const float *dev_sinks,
			 float *dev_out, void *dev_ws, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (!dev_pos || max_ctx == 0 || *dev_pos < 0 || (uint64_t)*dev_pos >= max_ctx)
		return -EINVAL;
	return ns_cuda_attention(dev_q, dev_k, ldk, dev_v, ldv, 1, (uint64_t)*dev_pos, n_head,
				 n_head_kv, dk, dv, scale, window, dev_sinks, dev_out, dev_ws, s);
}

int ns_cuda_store_row(float *dev_dst, uint64_t ld, const float *dev_src, uint64_t n,
		      const int64_t *dev_pos, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0)
		return 0;
	if (!dev_dst || !dev_src || !dev_pos || ld < n || *dev_pos < 0)
		return -EINVAL;
	memmove(dev_dst + (uint64_t)*dev_pos * ld, dev_src, n * sizeof(float));
	return 0;
}
