/* nscuda_internal.h - what the host files of nscompute/cuda share (not installed).
 *
 * struct ns_range is the bookkeeping of struct ns_vram without any CUDA: a first-fit allocator
 * of byte offsets inside [0, size), in granules of NS_RANGE_ALIGN bytes, with adjacent free
 * extents merged on release. Plain C, so CPU-only CI tests it (tests/cuda/test_range.c). */
#ifndef NS_CUDA_INTERNAL_H
#define NS_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "nscuda.h"

#define NS_RANGE_ALIGN 256u

struct ns_extent {
	uint64_t off;
	uint64_t len;
};

struct ns_range {
	uint64_t size;          /* managed bytes, a multiple of NS_RANGE_ALIGN */
	uint64_t used;          /* bytes held by live allocations (rounded up) */
	struct ns_extent *free; /* (n_free) sorted by off, never adjacent, never empty */
	uint32_t n_free, cap_free;
	struct ns_extent *live; /* (n_live) allocations, unsorted */
	uint32_t n_live, cap_live;
};

/* Returns 0 or -ENOMEM (host memory). size is rounded down to the granule. */
int ns_range_init(struct ns_range *r, uint64_t size);
void ns_range_fini(struct ns_range *r);
/* *off of len bytes (len 0 counts as one granule): 0, -ENOMEM when nothing fits,
 * -EOVERFLOW when len cannot be rounded up. */
int ns_range_alloc(struct ns_range *r, uint64_t len, uint64_t *off);
/* -EINVAL when off is not a live allocation. */
int ns_range_release(struct ns_range *r, uint64_t off);
uint64_t ns_range_largest(const struct ns_range *r);

/* struct ns_vram (nscuda.h): one block of device memory (host memory in the emulation) and
 * its ns_range bookkeeping. vram.c / emu/nscuda_emu.c make and free it; vram_arena.c hands
 * out and takes back its pieces for both. */
struct ns_vram {
	uint8_t *base;    /* range.size bytes, owned */
	size_t map_bytes; /* emulation: bytes mapped at base; 0 on a GPU */
	uint64_t budget;
	int poison;       /* emulation: ns_vram_alloc fills what it hands out with this byte so
			   * reads before writes show (NaN floats); -1 on a GPU */
	struct ns_range range;
};

/* vram_arena.c, for ns_vram_new of both vram.c and the emulation:
 * budget 0 becomes free - reserve; a budget (plus reserve) above free is refused; either way
 * rounded down to NS_RANGE_ALIGN. -ENOMEM with the figures in err. */
int ns_vram_resolve_budget(uint64_t *budget, uint64_t reserve, uint64_t free_bytes,
			   uint64_t total_bytes, char *err, size_t errlen);
/* A struct ns_vram with its bookkeeping over budget bytes and no memory yet (base NULL): the
 * caller sets base (and map_bytes). ns_vram_bookkeeping_free undoes it (not base). */
int ns_vram_bookkeeping_new(uint64_t budget, int poison, struct ns_vram **out, char *err,
			    size_t errlen);
void ns_vram_bookkeeping_free(struct ns_vram *v);

/* cudaError_t -> negative errno (0 for success). */
int ns_cuda_rc(int cuda_error);

#ifdef __cplusplus
extern "C" {
#endif

/* The fused decode GEMV by kernel family, same arguments, contract and errors as ns_cuda_gemv
 * (nscuda.h); -EINVAL for an unknown variant. 1: gemv.cu's k_gemv;
 * 2: gemv2.cu's k_gemv2, every quantized type staged through shared memory with cp.async;
 * 3: k_gemv2 with Q4_K and Q5_K read straight from global memory; 4: per type the faster on
 * the H200 (1 for Q4_K and Q5_K, else 2), the default. ns_cuda_gemv takes the variant from the
 * environment variable NS_CUDA_GEMV (1 to 4; anything else 4) at its first call; tests and
 * benchmarks call this directly to compare them in one process. Each variant is deterministic on its
 * own; different variants need not agree in bits. */
int ns_cuda_gemv_variant(int variant, uint32_t type, const void *dev_w, uint64_t n_cols,
			 uint64_t n_rows, const float *dev_x, float *dev_y, ns_cuda_stream_t s);
/* gemv2.cu: variants 2 and 3 (-EINVAL for another). */
int ns_cuda_gemv2(int variant, uint32_t type, const void *dev_w, uint64_t n_cols,
		  uint64_t n_rows, const float *dev_x, float *dev_y, ns_cuda_stream_t s);

#ifdef __cplusplus
}
#endif

#endif
