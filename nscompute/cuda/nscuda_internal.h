/* nscuda_internal.h - what the host files of nscompute/cuda share (not installed).
 *
 * struct ns_range is the bookkeeping of struct ns_vram without any CUDA: a first-fit allocator
 * of byte offsets inside [0, size), in granules of NS_RANGE_ALIGN bytes, with adjacent free
 * extents merged on release. Plain C, so CPU-only CI tests it (tests/cuda/test_range.c). */
#ifndef NS_CUDA_INTERNAL_H
#define NS_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

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

/* cudaError_t -> negative errno (0 for success). */
int ns_cuda_rc(int cuda_error);

#endif
