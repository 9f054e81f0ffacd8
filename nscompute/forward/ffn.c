/* ffn.c - see ffn.h. */
#include "ffn.h"
#include "ops.h"

int ns_ffn_swiglu(struct ns_fwd *f, const struct ns_ffn_w *w, uint32_t n_embd, uint32_t rows,
		  const float *xb, uint32_t n, float *hb, float *hu, float *out)
{
	const uint32_t F = w->n_ff;
	int rc;

	/* phase 1, by neuron: hb[:, r0:r1] = silu(xb Wgate[r0:r1]^T) * (xb Wup[r0:r1]^T) */
	for (uint32_t r0 = 0; r0 < F; r0 += rows) {
		const uint32_t nw = F - r0 < rows ? F - r0 : rows;

		if ((rc = ns_fwd_matmul(f, w->gate, r0, r0 + nw, xb, n, hb + r0, F)) ||
		    (rc = ns_fwd_matmul(f, w->up, r0, r0 + nw, xb, n, hu, nw)))
			return rc;
		for (uint32_t t = 0; t < n; t++) {
			float *h = hb + (uint64_t)t * F + r0;   /* (nw) */
			const float *u = hu + (uint64_t)t * nw; /* (nw) */

			for (uint32_t i = 0; i < nw; i++)
				h[i] = ns_silu(h[i]) * u[i];
		}
	}
	/* phase 2, by output dimension: out = hb Wdown^T   (n, n_embd) */
	return ns_fwd_matmul(f, w->down, 0, n_embd, hb, n, out, n_embd);
}
