/* ram_seg.c - the RAM tier's segment: create and publish (nsio), checked views (readers). */
#include "ram_seg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ns_util.h"

int ns_ram_seg_create(struct ns_ram_seg *r, const char *session, uint64_t n_tensors,
		      const uint64_t *rows, const uint64_t *off, uint64_t data_bytes, char *err,
		      size_t errlen)
{
	uint64_t tabs, data_off, total;
	int rc;

	memset(r, 0, sizeof(*r));
	if (ns_mul_u64_overflow(n_tensors, 2 * sizeof(uint64_t), &tabs) ||
	    ns_add_u64_overflow(NS_RAM_DIR_OFF + sizeof(struct ns_ram_dir) + 63, tabs,
				&data_off) ||
	    ns_add_u64_overflow(data_off / 64 * 64, data_bytes, &total) || total > SIZE_MAX)
		return ns_errf(err, errlen, "RAM cache size overflows"), -EOVERFLOW;
	data_off = data_off / 64 * 64;
	rc = ns_seg_create(&r->seg, session, NS_RAM_SEG_WHAT, NS_SEG_RAM, (size_t)total, err,
			   errlen);
	if (rc)
		return rc;
	r->dir = (struct ns_ram_dir *)((uint8_t *)r->seg.base + NS_RAM_DIR_OFF);
	r->dir->magic = NS_RAM_MAGIC;
	r->dir->n_tensors = n_tensors;
	r->dir->data_off = data_off;
	r->dir->data_bytes = data_bytes;
	r->rows = (uint64_t *)(r->dir + 1);
	r->off = r->rows + n_tensors;
	r->data = (uint8_t *)r->seg.base + data_off;
	memcpy(r->rows, rows, n_tensors * sizeof(uint64_t));
	memcpy(r->off, off, n_tensors * sizeof(uint64_t));
	return 0;
}

void ns_ram_seg_ready(struct ns_ram_seg *r)
{
	atomic_store_explicit(&r->dir->ready, 1, memory_order_release);
}

/* The directory of a mapped segment, checked against the mapping; NULL (err says why). */
static const struct ns_ram_dir *s_dir(const struct ns_seg *seg, char *err, size_t errlen)
{
	const struct ns_ram_dir *d;
	uint64_t tabs, end;

	if (seg->size < NS_RAM_DIR_OFF + sizeof(*d))
		return ns_errf(err, errlen, "%s: too small for a RAM directory", seg->name), NULL;
	d = (const struct ns_ram_dir *)((const uint8_t *)seg->base + NS_RAM_DIR_OFF);
	if (d->magic != NS_RAM_MAGIC)
		return ns_errf(err, errlen, "%s: not a RAM segment (magic)", seg->name), NULL;
	if (ns_mul_u64_overflow(d->n_tensors, 2 * sizeof(uint64_t), &tabs) ||
	    ns_add_u64_overflow(NS_RAM_DIR_OFF + sizeof(*d), tabs, &end) ||
	    d->data_off % 64 || d->data_off < end ||
	    ns_add_u64_overflow(d->data_off, d->data_bytes, &end) || end > seg->size)
		return ns_errf(err, errlen, "%s: directory does not fit the segment", seg->name),
		       NULL;
	return d;
}

int ns_ram_view_open(struct ns_ram_view *v, const char *session, uint64_t n_tensors,
		     ns_ram_tensor_fn tensor_fn, void *ctx, char *err, size_t errlen)
{
	const struct ns_ram_dir *d;
	const uint64_t *rows, *off;
	int rc;

	memset(v, 0, sizeof(*v));
	rc = ns_seg_open(&v->seg, session, NS_RAM_SEG_WHAT, NS_SEG_RAM, false, err, errlen);
	if (rc)
		return rc;
	/* ready first: nsio writes the directory after publishing the segment's header, and
	 * sets ready (release) once the directory and the fixed windows are in */
	d = (const struct ns_ram_dir *)((const uint8_t *)v->seg.base + NS_RAM_DIR_OFF);
	if (v->seg.size >= NS_RAM_DIR_OFF + sizeof(*d) &&
	    !atomic_load_explicit(&((struct ns_ram_dir *)d)->ready, memory_order_acquire)) {
		ns_errf(err, errlen, "%s: still loading", v->seg.name);
		rc = -EAGAIN;
		goto fail;
	}
	d = s_dir(&v->seg, err, errlen);
	rc = -EPROTO;
	if (!d)
		goto fail;
	if (d->n_tensors != n_tensors) {
		ns_errf(err, errlen, "%s: %llu tensors, the model has %llu", v->seg.name,
			(unsigned long long)d->n_tensors, (unsigned long long)n_tensors);
		goto fail;
	}
	/* once: geometry and tables into private memory, each window checked */
	v->n_tensors = d->n_tensors;
	v->data_bytes = d->data_bytes;
	v->rows = malloc((n_tensors ? n_tensors : 1) * sizeof(uint64_t));
	v->off = malloc((n_tensors ? n_tensors : 1) * sizeof(uint64_t));
	if (!v->rows || !v->off) {
		rc = -ENOMEM;
		ns_errf(err, errlen, "out of memory");
		goto fail;
	}
	rows = (const uint64_t *)(d + 1);
	off = rows + n_tensors;
	memcpy(v->rows, rows, n_tensors * sizeof(uint64_t));
	memcpy(v->off, off, n_tensors * sizeof(uint64_t));
	for (uint64_t t = 0; t < n_tensors; t++) {
		uint64_t n_rows, row_bytes, bytes, end;

		if (!v->rows[t])
			continue;
		if (!tensor_fn(ctx, t, &n_rows, &row_bytes) || v->rows[t] > n_rows ||
		    ns_mul_u64_overflow(v->rows[t], row_bytes, &bytes) ||
		    ns_add_u64_overflow(bytes, v->off[t], &end) || end > v->data_bytes) {
			ns_errf(err, errlen, "%s: the window of tensor %llu does not fit the model "
				"or the segment", v->seg.name, (unsigned long long)t);
			goto fail;
		}
	}
	v->dir = d;
	v->data = (const uint8_t *)v->seg.base + d->data_off;
	return 0;
fail:
	ns_ram_view_close(v);
	return rc;
}

void ns_ram_view_close(struct ns_ram_view *v)
{
	free(v->rows);
	free(v->off);
	if (v->seg.base)
		ns_seg_unmap(&v->seg);
	memset(v, 0, sizeof(*v));
}

int ns_ram_seg_loaded(const char *session, uint64_t *gen, char *err, size_t errlen)
{
	const struct ns_ram_dir *d;
	struct ns_seg seg;
	int rc = ns_seg_open(&seg, session, NS_RAM_SEG_WHAT, NS_SEG_RAM, false, err, errlen);

	if (rc)
		return rc;
	d = s_dir(&seg, err, errlen);
	if (d)
		*gen = atomic_load(&((struct ns_ram_dir *)d)->plan_gen);
	ns_seg_unmap(&seg);
	return d ? 0 : -EPROTO;
}

int ns_ram_seg_fill(const char *session, uint64_t *loaded, uint64_t *planned, char *err,
		    size_t errlen)
{
	struct ns_ram_dir *d;
	struct ns_seg seg;
	int rc = ns_seg_open(&seg, session, NS_RAM_SEG_WHAT, NS_SEG_RAM, false, err, errlen);

	if (rc)
		return rc;
	d = (struct ns_ram_dir *)s_dir(&seg, err, errlen);
	if (d) {
		uint64_t filled = atomic_load(&d->fill_bytes);

		*planned = atomic_load(&d->planned_bytes);
		*loaded = atomic_load(&d->resident_bytes);
		if (!atomic_load(&d->plan_gen) && filled > *loaded) /* the first: every read */
			*loaded = filled < *planned ? filled : *planned;
	}
	ns_seg_unmap(&seg);
	return d ? 0 : -EPROTO;
}
