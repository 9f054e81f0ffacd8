/* ring_rec.c - validation of ring records from another process. */
#include "ring_rec.h"

#include <errno.h>

#include "ns_util.h"

static int s_window(const struct ns_rec_tensor *t, uint64_t row0, uint64_t nrows,
		    uint64_t *bytes)
{
	uint64_t end;

	if (nrows == 0 || ns_add_u64_overflow(row0, nrows, &end) || end > t->n_rows)
		return -EINVAL;
	if (ns_mul_u64_overflow(nrows, t->row_bytes, bytes))
		return -E2BIG;
	return 0;
}

int ns_req_validate(const struct ns_req_rec *r, const struct ns_rec_tensor *tensors,
		    uint64_t n_tensors, uint32_t lease_slots, uint64_t max_bytes)
{
	uint64_t bytes;
	int rc;

	if (r->version != NS_RING_REC_VERSION)
		return -EPROTO;
	switch (r->op) {
	case NS_REQ_READ:
	case NS_REQ_PREFETCH:
	case NS_REQ_PREDICT:
		if (r->tensor >= n_tensors)
			return -EINVAL;
		rc = s_window(&tensors[r->tensor], r->row0, r->nrows, &bytes);
		if (rc)
			return rc;
		if (max_bytes && bytes > max_bytes)
			return -E2BIG;
		return 0;
	case NS_REQ_RETIRE:
		return r->lease_idx < lease_slots ? 0 : -EINVAL;
	case NS_REQ_CLOSE:
		return 0;
	default:
		return -EPROTO;
	}
}

int ns_cpl_validate(const struct ns_cpl_rec *c, const struct ns_rec_tensor *t,
		    uint32_t lease_slots, uint64_t arena_bytes)
{
	uint64_t bytes, start, end;
	int rc;

	if (c->version != NS_RING_REC_VERSION)
		return -EPROTO;
	if (c->op == NS_CPL_ERROR)
		return c->status < 0 ? 0 : -EPROTO;
	if (c->op != NS_CPL_BLOCK)
		return -EPROTO;
	if (c->status < 0)
		return 0;
	if (c->status > 0 || c->lease_idx >= lease_slots)
		return -EINVAL;
	if (!t)
		return 0;
	rc = s_window(t, c->row0, c->nrows, &bytes);
	if (rc)
		return rc;
	if (ns_add_u64_overflow(c->lease_off, c->first, &start) ||
	    ns_add_u64_overflow(start, bytes, &end) || end > arena_bytes)
		return -EINVAL;
	return 0;
}
