/* vram_arena.c - what of struct ns_vram (nscuda.h) needs no CUDA call, so the real backend
 * and the emulation share it: the budget's resolution against free memory, the bookkeeping,
 * and sub-allocation through its ns_range. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ns_util.h"
#include "nscuda.h"
#include "nscuda_internal.h"

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
	if (v->poison >= 0)
		memset(*dev_p, v->poison, bytes);
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

int ns_vram_resolve_budget(uint64_t *budget, uint64_t reserve, uint64_t free_bytes,
			   uint64_t total_bytes, char *err, size_t errlen)
{
	char b1[32], b2[32], b3[32], b4[32];

	if (*budget == 0) {
		if (reserve >= free_bytes) {
			ns_errf(err, errlen, "cuda: --reserve-vram %s leaves nothing of the %s free "
				"(of %s)", ns_format_bytes(reserve, b1, sizeof(b1)),
				ns_format_bytes(free_bytes, b2, sizeof(b2)),
				ns_format_bytes(total_bytes, b3, sizeof(b3)));
			return -ENOMEM;
		}
		*budget = free_bytes - reserve;
	} else if (*budget > free_bytes || reserve > free_bytes - *budget) {
		ns_errf(err, errlen, "cuda: --vram-budget %s plus --reserve-vram %s exceeds the %s "
			"free on the device (of %s)", ns_format_bytes(*budget, b1, sizeof(b1)),
			ns_format_bytes(reserve, b2, sizeof(b2)),
			ns_format_bytes(free_bytes, b3, sizeof(b3)),
			ns_format_bytes(total_bytes, b4, sizeof(b4)));
		return -ENOMEM;
	}
	*budget = *budget / NS_RANGE_ALIGN * NS_RANGE_ALIGN;
	return 0;
}

int ns_vram_bookkeeping_new(uint64_t budget, int poison, struct ns_vram **out, char *err,
			    size_t errlen)
{
	struct ns_vram *v = calloc(1, sizeof(*v));

	*out = NULL;
	if (!v || ns_range_init(&v->range, budget)) {
		free(v);
		ns_errf(err, errlen, "cuda: out of host memory for the VRAM bookkeeping");
		return -ENOMEM;
	}
	v->budget = budget;
	v->poison = poison;
	*out = v;
	return 0;
}

void ns_vram_bookkeeping_free(struct ns_vram *v)
{
	if (!v)
		return;
	ns_range_fini(&v->range);
	free(v);
}
