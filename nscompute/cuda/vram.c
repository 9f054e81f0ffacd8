/* vram.c - struct ns_vram: the backend's device memory as one cudaMalloc of the budget,
 * sub-allocated by struct ns_range (see nscuda.h). */
#include <errno.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "ns_util.h"
#include "nscuda.h"
#include "nscuda_internal.h"

struct ns_vram {
	uint8_t *base;  /* device memory of range.size bytes, owned */
	uint64_t budget;
	struct ns_range range;
};

int ns_vram_new(uint64_t budget, uint64_t reserve, struct ns_vram **out, char *err,
		size_t errlen)
{
	size_t fr = 0, tot = 0;
	struct ns_vram *v;
	char b1[32], b2[32], b3[32], b4[32];
	cudaError_t e;
	int rc;

	*out = NULL;
	if (ns_cuda_device_count() == 0) {
		ns_errf(err, errlen, "cuda: no CUDA device: cannot take a VRAM budget");
		return -ENODEV;
	}
	e = cudaMemGetInfo(&fr, &tot);
	if (e != cudaSuccess) {
		ns_errf(err, errlen, "cuda: reading free device memory: %s", cudaGetErrorString(e));
		(void)cudaGetLastError();
		return ns_cuda_rc(e);
	}
	if (budget == 0) {
		if (reserve >= fr) {
			ns_errf(err, errlen, "cuda: --reserve-vram %s leaves nothing of the %s free "
				"(of %s)", ns_format_bytes(reserve, b1, sizeof(b1)),
				ns_format_bytes(fr, b2, sizeof(b2)),
				ns_format_bytes(tot, b3, sizeof(b3)));
			return -ENOMEM;
		}
		budget = fr - reserve;
	} else if (budget > fr || reserve > fr - budget) {
		ns_errf(err, errlen, "cuda: --vram-budget %s plus --reserve-vram %s exceeds the %s "
			"free on the device (of %s)", ns_format_bytes(budget, b1, sizeof(b1)),
			ns_format_bytes(reserve, b2, sizeof(b2)), ns_format_bytes(fr, b3, sizeof(b3)),
			ns_format_bytes(tot, b4, sizeof(b4)));
		return -ENOMEM;
	}
	budget = budget / NS_RANGE_ALIGN * NS_RANGE_ALIGN;
	v = calloc(1, sizeof(*v));
	if (!v || ns_range_init(&v->range, budget)) {
		free(v);
		ns_errf(err, errlen, "cuda: out of host memory for the VRAM bookkeeping");
		return -ENOMEM;
	}
	v->budget = budget;
	e = cudaMalloc((void **)&v->base, budget ? budget : NS_RANGE_ALIGN);
	if (e != cudaSuccess) {
		ns_errf(err, errlen, "cuda: cannot allocate the VRAM budget of %s (%s free of %s): %s",
			ns_format_bytes(budget, b1, sizeof(b1)), ns_format_bytes(fr, b2, sizeof(b2)),
			ns_format_bytes(tot, b3, sizeof(b3)), cudaGetErrorString(e));
		(void)cudaGetLastError();
		rc = ns_cuda_rc(e);
		ns_range_fini(&v->range);
		free(v);
		return rc;
	}
	*out = v;
	return 0;
}

void ns_vram_destroy(struct ns_vram **pv)
{
	struct ns_vram *v;

	if (!pv || !*pv)
		return;
	v = *pv;
	(void)cudaFree(v->base);
	ns_range_fini(&v->range);
	free(v);
	*pv = NULL;
}

int ns_vram_alloc(struct ns_vram *v, uint64_t bytes, void **dev_p, char *err, size_t errlen)
{
	uint64_t off = 0;
	int rc = ns_range_alloc(&v->range, bytes, &off);
	char b1[32], b2[32], b3[32], b4[32];

	*dev_p = NULL;
	if (rc) {
		ns_errf(err, errlen, "cuda: VRAM allocation of %s failed: largest free extent %s, "
			"%s free of the %s budget", ns_format_bytes(bytes, b1, sizeof(b1)),
			ns_format_bytes(ns_range_largest(&v->range), b2, sizeof(b2)),
			ns_format_bytes(v->range.size - v->range.used, b3, sizeof(b3)),
			ns_format_bytes(v->budget, b4, sizeof(b4)));
		return rc;
	}
	*dev_p = v->base + off;
	return 0;
}

int ns_vram_release(struct ns_vram *v, void *dev_p)
{
	uint8_t *p = dev_p;

	if (!p)
		return 0;
	if (p < v->base || p >= v->base + v->range.size)
		return -EINVAL;
	return ns_range_release(&v->range, (uint64_t)(p - v->base));
}

uint64_t ns_vram_budget(const struct ns_vram *v)
{
	return v->budget;
}

uint64_t ns_vram_used(const struct ns_vram *v)
{
	return v->range.used;
}

uint64_t ns_vram_largest_free(const struct ns_vram *v)
{
	return ns_range_largest(&v->range);
}
