/* range.c - first-fit offset allocator behind struct ns_vram (see nscuda_internal.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nscuda_internal.h"

int ns_range_init(struct ns_range *r, uint64_t size)
{
	memset(r, 0, sizeof(*r));
	r->size = size / NS_RANGE_ALIGN * NS_RANGE_ALIGN;
	r->cap_free = 16;
	r->cap_live = 16;
	r->free = calloc(r->cap_free, sizeof(*r->free));
	r->live = calloc(r->cap_live, sizeof(*r->live));
	if (!r->free || !r->live) {
		ns_range_fini(r);
		return -ENOMEM;
	}
	if (r->size) {
		r->free[0].off = 0;
		r->free[0].len = r->size;
		r->n_free = 1;
	}
	return 0;
}

void ns_range_fini(struct ns_range *r)
{
	free(r->free);
	free(r->live);
	memset(r, 0, sizeof(*r));
}

/* Room for one more element in an extent array. */
static int s_grow(struct ns_extent **a, uint32_t n, uint32_t *cap)
{
	struct ns_extent *p;

	if (n < *cap)
		return 0;
	if (*cap > UINT32_MAX / 2)
		return -ENOMEM;
	p = realloc(*a, (size_t)*cap * 2 * sizeof(**a));
	if (!p)
		return -ENOMEM;
	*a = p;
	*cap *= 2;
	return 0;
}

int ns_range_alloc(struct ns_range *r, uint64_t len, uint64_t *off)
{
	uint64_t need;

	if (len > UINT64_MAX - NS_RANGE_ALIGN)
		return -EOVERFLOW;
	need = len ? (len + NS_RANGE_ALIGN - 1) / NS_RANGE_ALIGN * NS_RANGE_ALIGN : NS_RANGE_ALIGN;
	if (s_grow(&r->live, r->n_live, &r->cap_live))
		return -ENOMEM;
	for (uint32_t i = 0; i < r->n_free; i++) {
		struct ns_extent *f = &r->free[i];

		if (f->len < need)
			continue;
		*off = f->off;
		f->off += need;
		f->len -= need;
		if (f->len == 0) {
			memmove(f, f + 1, (size_t)(r->n_free - i - 1) * sizeof(*f));
			r->n_free--;
		}
		r->live[r->n_live].off = *off;
		r->live[r->n_live].len = need;
		r->n_live++;
		r->used += need;
		return 0;
	}
	return -ENOMEM;
}

int ns_range_release(struct ns_range *r, uint64_t off)
{
	struct ns_extent e;
	uint32_t i, at;

	for (i = 0; i < r->n_live && r->live[i].off != off; i++)
		;
	if (i == r->n_live)
		return -EINVAL;
	if (s_grow(&r->free, r->n_free, &r->cap_free))
		return -ENOMEM; /* the allocation stays live: nothing lost */
	e = r->live[i];
	r->live[i] = r->live[--r->n_live];
	r->used -= e.len;
	/* insert sorted, then merge with the neighbours */
	for (at = 0; at < r->n_free && r->free[at].off < e.off; at++)
		;
	memmove(&r->free[at + 1], &r->free[at], (size_t)(r->n_free - at) * sizeof(e));
	r->free[at] = e;
	r->n_free++;
	if (at + 1 < r->n_free && r->free[at].off + r->free[at].len == r->free[at + 1].off) {
		r->free[at].len += r->free[at + 1].len;
		memmove(&r->free[at + 1], &r->free[at + 2],
			(size_t)(r->n_free - at - 2) * sizeof(e));
		r->n_free--;
	}
	if (at > 0 && r->free[at - 1].off + r->free[at - 1].len == r->free[at].off) {
		r->free[at - 1].len += r->free[at].len;
		memmove(&r->free[at], &r->free[at + 1], (size_t)(r->n_free - at - 1) * sizeof(e));
		r->n_free--;
	}
	return 0;
}

uint64_t ns_range_largest(const struct ns_range *r)
{
	uint64_t m = 0;

	for (uint32_t i = 0; i < r->n_free; i++)
		if (r->free[i].len > m)
			m = r->free[i].len;
	return m;
}
