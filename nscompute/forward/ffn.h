/* ffn.h - the gated SwiGLU FFN of a dense layer or a shared expert. Internal to nsforward.
 *
 *     out = (silu(xb Wgate^T) * (xb Wup^T)) Wdown^T        xb, out: (n, n_embd)
 * Phase 1 runs by windows of `rows` neurons (gate window, then the same up window), phase 2
 * multiplies the whole activation by Wdown: the order the architecture table's reads allow
 * (arch.h). The windows change no bit of the result. */
#ifndef NS_FFN_H
#define NS_FFN_H

#include <stdint.h>

#include "forward_impl.h"

struct ns_ffn_w {
	uint32_t gate;  /* (n_ff rows, n_embd cols) */
	uint32_t up;    /* (n_ff, n_embd) */
	uint32_t down;  /* (n_embd, n_ff) */
	uint32_t n_ff;
};

/* hb: (n, n_ff) and hu: (n, rows) scratch. Returns 0 or the provider's error (f->err). */
int ns_ffn_swiglu(struct ns_fwd *f, const struct ns_ffn_w *w, uint32_t n_embd, uint32_t rows,
		  const float *xb, uint32_t n, float *hb, float *hu, float *out);

#endif
