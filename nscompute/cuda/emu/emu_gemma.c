/* emu_gemma.c - nscuda.h's Gemma kernels (gemma.cu) emulated on the host: the same refusals
 * as their launchers, then the CPU forward pass's expressions (nscompute/forward/gemma_eval.c,
 * ops.c's ns_gelu_tanh), so the CUDA pass over the emulation computes what the CPU pass does.
 * Streams are ignored (every call is synchronous). */
#include <errno.h>
#include <math.h>

#include "nscuda.h"
#include "nscuda_emu.h"
#include "ops.h"

int ns_cuda_geglu(float *dev_g, uint64_t ldg, const float *dev_u, uint64_t ldu, uint64_t n,
		  uint32_t n_rows, ns_cuda_stream_t s)
{
	uint64_t total;

	ns_emu_launch_order(s);
	if (n == 0 || n_rows == 0)
		return 0;
	if (!dev_g || !dev_u || ldg < n || ldu < n)
		return -EINVAL;
	if (__builtin_mul_overflow(n, (uint64_t)n_rows, &total))
		return -EOVERFLOW;
	for (uint64_t r = 0; r < n_rows; r++)
		for (uint64_t i = 0; i < n; i++)
			dev_g[r * ldg + i] = ns_gelu_tanh(dev_g[r * ldg + i]) * dev_u[r * ldu + i];
	return 0;
}

int ns_cuda_scale(float *dev_x, uint64_t n, float scale, const float *dev_scale,
		  ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0)
		return 0;
	if (!dev_x)
		return -EINVAL;
	if (dev_scale)
		scale = dev_scale[0];
	for (uint64_t i = 0; i < n; i++)
		dev_x[i] *= scale;
	return 0;
}

int ns_cuda_softcap(float *dev_x, uint64_t n, float cap, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0)
		return 0;
	if (!dev_x || !(cap > 0))
		return -EINVAL;
	for (uint64_t i = 0; i < n; i++)
		dev_x[i] = cap * tanhf(dev_x[i] / cap);
	return 0;
}

int ns_cuda_ple_mix(float *dev_pl, const float *dev_proj, uint64_t n, float row_scale,
		    float mix_scale, ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	if (n == 0)
		return 0;
	if (!dev_pl || !dev_proj)
		return -EINVAL;
	for (uint64_t i = 0; i < n; i++)
		dev_pl[i] = (dev_proj[i] + dev_pl[i] * row_scale) * mix_scale;
	return 0;
}
