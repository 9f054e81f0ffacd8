/* cfwd_matmul.c - a weight matrix times activations on the device. Rows in a VRAM window are
 * multiplied in place; the others come through the host provider's visit op (its RAM copy,
 * nsio's RAM tier, or arena blocks), are copied to one of two staging slots on the copy
 * stream and multiplied there, the copy of block i+1 overlapping the kernel of block i.
 * Every output row comes from one row's bytes and x by a kernel whose order depends only on
 * the type and width, so results are bit-identical whatever is resident. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfwd_internal.h"
#include "ggml_type.h"

static bool s_float_type(uint32_t type)
{
	return type == NS_TYPE_F32 || type == NS_TYPE_F16 || type == NS_TYPE_BF16;
}

/* y[t * ldy + r] for r < nrows = W rows at dev_w times x (n_tok rows of n_cols, ldx apart). */
static int s_kernel(struct cfwd *c, const struct ns_model_tensor *t, const void *dev_w,
		    uint64_t nrows, const float *x, uint64_t ldx, uint64_t n_tok, float *y,
		    uint64_t ldy, ns_cuda_stream_t cs)
{
	if (n_tok == 1 && c->act_q8 && !s_float_type(t->type)) {
		/* -E2BIG: x too wide for the kernel's shared memory (decided by n_cols alone, so
		 * every window of the tensor takes the same kernel) */
		const int rc = ns_cuda_gemv_q8(t->type, dev_w, t->ne[0], nrows, x, y, cs);

		if (rc != -E2BIG) {
			c->st.q8_gemvs += rc == 0; /* a graph's launches count once, at capture */
			return rc;
		}
	}
	if (n_tok == 1)
		return ns_cuda_gemv(t->type, dev_w, t->ne[0], nrows, x, y, cs);
	return ns_cuda_gemm_prefill(t->type, dev_w, t->ne[0], nrows, x, ldx, n_tok, y, ldy, cs);
}

struct s_mm {
	struct cfwd *c;
	const struct ns_model_tensor *t;
	uint64_t row0;     /* row of y's column 0 */
	const float *x;
	uint64_t ldx;
	uint64_t n_tok;
	float *y;
	uint64_t ldy;
};

/* visit callback of a streamed window: through the staging slots, in pieces that fit. */
static int s_stage_cb(void *ctx, uint64_t row0, uint64_t nrows, const void *data)
{
	struct s_mm *k = ctx;
	struct cfwd *c = k->c;
	const uint64_t rb = k->t->row_bytes;
	const uint64_t per = c->stage_bytes / rb; /* >= 1: staging holds the widest row */
	const uint8_t *src = data;
	ns_cuda_event_t last = NULL;
	int rc = 0;

	if (ns_cuda_host_pinned(data) == 0) /* an error counts as pinned: only a figure */
		c->st.staged_pageable_bytes += nrows * rb;
	for (uint64_t r = 0; r < nrows && rc == 0; r += per) {
		const uint64_t n = nrows - r < per ? nrows - r : per;
		const unsigned s = c->next_slot;

		c->next_slot ^= 1;
		/* the slot's previous kernel must be done before the copy overwrites it */
		if ((rc = ns_cuda_stream_wait(c->xs, c->freed[s])) ||
		    (rc = ns_cuda_copy_h2d_async(c->stage[s], src + r * rb, n * rb, c->xs,
						 c->copied[s])) ||
		    (rc = ns_cuda_stream_wait(c->cs, c->copied[s])) ||
		    (rc = s_kernel(c, k->t, c->stage[s], n, k->x, k->ldx, k->n_tok,
				   k->y + (row0 + r - k->row0), k->ldy, c->cs)) ||
		    (rc = ns_cuda_event_record(c->freed[s], c->cs)))
			break;
		last = c->copied[s];
		c->st.staged_blocks++;
		c->st.staged_bytes += n * rb;
	}
	/* data dies when we return: its copies must have left it */
	if (rc == 0 && last)
		rc = ns_cuda_event_sync(last);
	return rc;
}

/* The error line of a failed matmul kernel on tensor t; returns rc. */
static int s_kernel_fail(struct ns_fwd *f, const struct ns_model_tensor *t, int rc)
{
	char tb[32];

	ns_errf(f->err, sizeof(f->err), "forward: %s (%s): CUDA kernel failed: %s", t->name,
		ns_type_name(t->type, tb, sizeof(tb)),
		rc == -EIO ? ns_cuda_last_error() : strerror(-rc));
	return rc;
}

/* y (n_tok, ldy) = x W[row0:row_end]^T, x rows ldx apart; resident windows in place, the
 * rest staged. */
int cfwd_matmul_ld(struct ns_fwd *f, uint32_t tensor, uint64_t row0, uint64_t row_end,
		   const float *x, uint64_t ldx, uint64_t n_tok, float *y, uint64_t ldy)
{
	struct cfwd *c = f->arch;
	const struct ns_model_tensor *t = &c->m->tensors[tensor];
	const struct cfwd_tensor *st = &c->t[tensor];
	struct s_mm k = { c, t, row0, x, ldx, n_tok, y, ldy };
	uint64_t r = row0;
	int rc = 0;

	for (uint32_t i = 0; i <= st->n && r < row_end && rc == 0; i++) {
		/* rows [r, gap_end) before window i are not resident */
		const uint64_t gap_end = i < st->n && st->w[i].rb < row_end ? st->w[i].rb : row_end;

		if (i < st->n && st->w[i].re <= r)
			continue;
		if (r < gap_end) {
			rc = ns_weights_visit(c->host, tensor, r, gap_end, s_stage_cb, &k);
			if (rc < 0) {
				ns_errf(f->err, sizeof(f->err), "forward: %s rows %llu..%llu: %s",
					t->name, (unsigned long long)r,
					(unsigned long long)gap_end,
					rc == -ENOTSUP ? "no raw bytes from the weight provider" :
					rc == -EIO || rc == -ENODEV ? ns_cuda_last_error() :
					ns_weights_error(c->host));
				return rc;
			}
			r = gap_end;
		}
		if (i < st->n && r < row_end) { /* resident part of window i */
			const struct cfwd_win *w = &st->w[i];
			const uint64_t e = w->re < row_end ? w->re : row_end;

			rc = s_kernel(c, t, (const uint8_t *)w->dev + (r - w->rb) * t->row_bytes,
				      e - r, x, ldx, n_tok, y + (r - row0), ldy, c->cs);
			r = e;
		}
	}
	return rc < 0 ? s_kernel_fail(f, t, rc) : rc;
}

int cfwd_matmul(struct ns_fwd *f, uint32_t tensor, uint64_t row0, uint64_t row_end,
		const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	const struct cfwd *c = f->arch;

	return cfwd_matmul_ld(f, tensor, row0, row_end, x, c->m->tensors[tensor].ne[0], n_tok, y,
			      ldy);
}

/* One token times n_mat (<= 3) whole matrices that share x: y[i] (rows of tensor[i]) = x
 * W_i^T. When every one is whole in VRAM, the first runs on the compute stream and the
 * others at the same time on the side streams (small GEMVs one after another leave most of
 * the GPU idle), and the compute stream waits for them before going on; otherwise one after
 * another through cfwd_matmul. The same kernels either way: the same bits. */
int cfwd_matmul_par(struct ns_fwd *f, uint32_t n_mat, const uint32_t *tensor,
			const float *x, float *const *y)
{
	struct cfwd *c = f->arch;
	bool par = n_mat >= 2 && n_mat <= 3;
	int rc = 0;

	for (uint32_t i = 0; i < n_mat && par; i++)
		par = cfwd_whole(c, tensor[i]);
	for (uint32_t i = 0; i < n_mat && !par && rc == 0; i++) {
		const uint64_t rows = c->m->tensors[tensor[i]].n_rows;

		rc = cfwd_matmul(f, tensor[i], 0, rows, x, 1, y[i], rows);
	}
	if (!par)
		return rc;
	CFWD_TRY("fork", ns_cuda_event_record(c->fork, c->cs));
	for (uint32_t i = n_mat; i-- > 0;) { /* the side streams' first, then the compute's */
		const struct ns_model_tensor *t = &c->m->tensors[tensor[i]];
		ns_cuda_stream_t st = i ? c->side[i - 1] : c->cs;

		if (i)
			CFWD_TRY("fork", ns_cuda_stream_wait(st, c->fork));
		rc = s_kernel(c, t, c->t[tensor[i]].w[0].dev, t->n_rows, x, t->ne[0], 1, y[i],
			      t->n_rows, st);
		if (rc < 0)
			return s_kernel_fail(f, t, rc);
		if (i)
			CFWD_TRY("join", ns_cuda_event_record(c->joined[i - 1], st));
	}
	for (uint32_t i = 1; i < n_mat; i++)
		CFWD_TRY("join", ns_cuda_stream_wait(c->cs, c->joined[i - 1]));
	return 0;
}

int cfwd_host_matmul(struct ns_fwd *f, uint32_t tensor, uint64_t row0, uint64_t row_end,
		     const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	struct cfwd *c = f->arch;
	const struct ns_model_tensor *t = &c->m->tensors[tensor];
	const uint64_t rows = row_end - row0, cols = t->ne[0];
	const uint64_t cap = c->n_batch < CFWD_LOGIT_TOK ? c->n_batch : CFWD_LOGIT_TOK;
	int rc;

	/* x's rows fit xb's (n_embd wide), the product's c->logits' (n_vocab wide) */
	if (!c->L || row0 >= row_end || row_end > t->n_rows || cols > c->L->n_embd ||
	    rows > c->L->n_vocab || ldy < rows) {
		ns_errf(f->err, sizeof(f->err), "forward: %s rows %llu..%llu do not fit the CUDA "
			"pass's buffers", t->name, (unsigned long long)row0,
			(unsigned long long)row_end);
		return -EINVAL;
	}
	for (uint64_t g = 0; g < n_tok; g += cap) {
		const uint64_t m = n_tok - g < cap ? n_tok - g : cap;

		/* pageable x: staged before the call returns, ordered on cs before the product */
		CFWD_TRY("upload", ns_cuda_copy_h2d_async(c->xb, x + g * cols, m * cols * 4, c->cs,
						       NULL));
		if ((rc = cfwd_matmul(f, tensor, row0, row_end, c->xb, m, c->logits, rows)))
			return rc;
		CFWD_TRY("sync", ns_cuda_stream_sync(c->cs));
		for (uint64_t i = 0; i < m; i++)
			CFWD_TRY("download", ns_cuda_d2h(y + (g + i) * ldy, c->logits + i * rows,
						       rows * 4));
	}
	return 0;
}
