/* emu_dnet.c - nscuda.h's Qwen3.5 kernels (dnet.cu, and the gates in ops.cu and glue.cu)
 * emulated on the host: the same refusals as their launchers, then the CPU forward pass's own
 * functions (nscompute/forward/deltanet.c's per-token steps, llama.c's output gate, moe.c's
 * shared-expert scale), so the CUDA pass over the emulation computes exactly what the CPU
 * pass does. Streams are ignored (every call is synchronous). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "deltanet.h"
#include "moe.h"
#include "nscuda.h"
#include "nscuda_emu.h"

int ns_cuda_conv1d_silu(float *dev_y, const float *dev_x, float *dev_hist, const float *dev_w,
			uint32_t n_ch, uint32_t K, uint32_t n_tok, ns_cuda_stream_t s)
{
	float *c;

	ns_emu_launch_order(s);
	if (n_ch == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_x || !dev_w || K == 0 || K > 16 || (K > 1 && !dev_hist))
		return -EINVAL;
	c = malloc((size_t)n_ch * sizeof(*c)); /* x of a token is read after y may overwrite it */
	if (!c)
		return -ENOMEM;
	for (uint32_t t = 0; t < n_tok; t++) {
		ns_dnet_conv_token(dev_w, dev_hist, K, n_ch, dev_x + (uint64_t)t * n_ch, c);
		memcpy(dev_y + (uint64_t)t * n_ch, c, (size_t)n_ch * sizeof(*c));
	}
	free(c);
	return 0;
}

int ns_cuda_l2norm(float *dev_x, uint64_t ld, uint32_t n_heads, uint32_t dim, uint32_t n_tok,
		   float eps, float scale, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n_heads == 0 || dim == 0 || n_tok == 0)
		return 0;
	if (!dev_x || ld < (uint64_t)n_heads * dim || n_tok > 65535 || n_heads > INT32_MAX)
		return -EINVAL;
	for (uint32_t t = 0; t < n_tok; t++)
		for (uint32_t h = 0; h < n_heads; h++)
			ns_dnet_l2norm(dev_x + (uint64_t)t * ld + (uint64_t)h * dim, dim, eps, scale);
	return 0;
}

int ns_cuda_delta_rule(float *dev_S, const float *dev_qkv, uint64_t ld, const float *dev_a,
		       const float *dev_b, const float *dev_dt_b, const float *dev_ssm_a,
		       uint32_t n_k, uint32_t n_v, uint32_t dk, uint32_t dv, uint32_t n_tok,
		       float *dev_o, ns_cuda_stream_t s)
{
	const uint64_t vd = (uint64_t)n_v * dv;
	float *kv;

	ns_emu_launch_order(s);
	if (n_v == 0 || n_tok == 0)
		return 0;
	if (!dev_S || !dev_qkv || !dev_a || !dev_b || !dev_dt_b || !dev_ssm_a || !dev_o ||
	    n_k == 0 || n_v % n_k || n_v > 65535 || dk == 0 || dk > 1024 || dv == 0 ||
	    dv > 1024 || ld < 2ull * n_k * dk + vd)
		return -EINVAL;
	kv = malloc((size_t)dv * sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	for (uint32_t t = 0; t < n_tok; t++) {
		const float *row = dev_qkv + (uint64_t)t * ld;

		for (uint32_t h = 0; h < n_v; h++) {
			const uint32_t kh = h % n_k;
			const uint64_t th = (uint64_t)t * n_v + h;

			ns_dnet_rule(dev_S + (uint64_t)h * dk * dv, row + (uint64_t)kh * dk,
				     row + (uint64_t)(n_k + kh) * dk,
				     row + 2ull * n_k * dk + (uint64_t)h * dv,
				     ns_dnet_decay(dev_a[th], dev_dt_b[h], dev_ssm_a[h]),
				     ns_dnet_beta(dev_b[th]), dk, dv, kv,
				     dev_o + (uint64_t)t * vd + (uint64_t)h * dv);
		}
	}
	free(kv);
	return 0;
}

int ns_cuda_rmsnorm_gated(float *dev_y, const float *dev_x, const float *dev_w,
			  const float *dev_z, uint32_t n, uint32_t n_rows, float eps,
			  ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0 || n_rows == 0)
		return 0;
	if (!dev_y || !dev_x || !dev_z || n_rows > INT32_MAX)
		return -EINVAL;
	for (uint32_t r = 0; r < n_rows; r++) {
		float *y = dev_y + (uint64_t)r * n;

		if (y != dev_x + (uint64_t)r * n)
			memmove(y, dev_x + (uint64_t)r * n, (size_t)n * sizeof(*y));
		ns_dnet_gated_norm(y, dev_w, dev_z + (uint64_t)r * n, n, eps);
	}
	return 0;
}

int ns_cuda_split_gate(float *dev_q, float *dev_g, const float *dev_qg, uint32_t n_head,
		       uint32_t dim, uint32_t n_tok, ns_cuda_stream_t s)
{
	const uint64_t nq = (uint64_t)n_head * dim;

	ns_emu_launch_order(s);
	if (nq == 0 || n_tok == 0)
		return 0;
	if (!dev_q || !dev_g || !dev_qg || n_tok > 65535)
		return -EINVAL;
	for (uint32_t t = 0; t < n_tok; t++)
		for (uint32_t h = 0; h < n_head; h++) {
			const float *src = dev_qg + (uint64_t)t * 2 * nq + (uint64_t)h * 2 * dim;

			memcpy(dev_q + t * nq + (uint64_t)h * dim, src, (size_t)dim * 4);
			memcpy(dev_g + t * nq + (uint64_t)h * dim, src + dim, (size_t)dim * 4);
		}
	return 0;
}

int ns_cuda_mul_sigmoid(float *dev_y, const float *dev_g, uint64_t n, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0)
		return 0;
	if (!dev_y || !dev_g)
		return -EINVAL;
	for (uint64_t i = 0; i < n; i++) /* llama.c s_apply_gate */
		dev_y[i] *= 1.0f / (1.0f + expf(-dev_g[i]));
	return 0;
}

int ns_cuda_add_sigmoid_scaled(float *dev_y, const float *dev_src, const float *dev_x,
			       const float *dev_gw, uint64_t n, uint32_t n_tok,
			       ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0 || n_tok == 0)
		return 0;
	if (!dev_y || !dev_src || !dev_x || !dev_gw || n_tok > 65535 || n > UINT32_MAX)
		return -EINVAL;
	for (uint32_t t = 0; t < n_tok; t++)
		ns_moe_shexp_add(dev_y + t * n, dev_src + t * n, dev_x + t * n, dev_gw,
				 (uint32_t)n);
	return 0;
}
