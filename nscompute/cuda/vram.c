/* vram.c - struct ns_vram: the backend's device memory as one cudaMalloc of the budget,
 * sub-allocated by struct ns_range (see nscuda.h). */
#include <errno.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "ns_util.h"
#include "nscuda.h"
#include "nscuda_internal.h"

int ns_vram_new(uint64_t budget, uint64_t reserve, struct ns_vram **out, char *err,
		size_t errlen)
{
	size_t fr = 0, tot = 0;
	struct ns_vram *v;
	char b1[32], b2[32], b3[32];
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
	/* no poison (-1): device memory is never touched from the host */
	if ((rc = ns_vram_resolve_budget(&budget, reserve, fr, tot, err, errlen)) ||
	    (rc = ns_vram_bookkeeping_new(budget, -1, &v, err, errlen)))
		return rc;
	e = cudaMalloc((void **)&v->base, budget ? budget : NS_RANGE_ALIGN);
	if (e != cudaSuccess) {
		ns_errf(err, errlen, "cuda: cannot allocate the VRAM budget of %s (%s free of %s): %s",
			ns_format_bytes(budget, b1, sizeof(b1)), ns_format_bytes(fr, b2, sizeof(b2)),
			ns_format_bytes(tot, b3, sizeof(b3)), cudaGetErrorString(e));
		(void)cudaGetLastError();
		rc = ns_cuda_rc(e);
		ns_vram_bookkeeping_free(v);
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
	ns_vram_bookkeeping_free(v);
	*pv = NULL;
}
