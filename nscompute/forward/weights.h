/* weights.h - how the forward pass reaches weight tensors, whoever holds them.
 *
 * The model code never touches weight bytes. It asks a provider for two things:
 *   - matmul: multiply a window of whole rows [row0, row_end) of a tensor by a batch of
 *     activation vectors;
 *   - get_rows: dequantized float32 copies of chosen rows (embedding lookups, norm vectors).
 * A provider decides where the bytes come from (pread + dequant for the reference, resident
 * quantized bytes with fused kernels, streamed blocks from nsio) and how it cuts a window into
 * blocks. Because every output element comes from one row, results cannot depend on how a
 * provider blocks a window.
 *
 * Tensors are named by their index in ns_model.tensors (ns_model_find_index). A tensor of
 * ne = [n_cols, ne1, ne2, ne3] has n_rows = ne1 * ne2 * ne3 rows of n_cols elements.
 *
 * Providers share their setup and checks through weights_provider.h.
 *
 * Ownership: a struct ns_weights is created by a provider constructor (ns_weights_ref_new, ...)
 * and freed with ns_weights_destroy(&w). It borrows the model, which must outlive it. Providers
 * are not thread-safe: one forward pass uses one provider. */
#ifndef NS_WEIGHTS_H
#define NS_WEIGHTS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct ns_pool;

/* A block of raw rows handed out by visit: nrows whole rows from row0 in the tensor's GGUF
 * layout (row_bytes each). data is read-only and valid only during the callback. */
typedef int (*ns_weights_block_fn)(void *cbctx, uint64_t row0, uint64_t nrows,
				   const void *data);

struct ns_weights_ops {
	const char *name; /* "ref", "fused", ... for messages */

	/* y[t * ldy + (r - row0)] = sum_c W[r][c] * x[t * n_cols + c]
	 * for r in [row0, row_end) and t in [0, n_tok).
	 * x: (n_tok, n_cols) contiguous; y: (n_tok, ldy) with ldy >= row_end - row0.
	 * Returns 0 or a negative errno (then last_error says why). */
	int (*matmul)(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		      const float *x, uint64_t n_tok, float *y, uint64_t ldy);

	/* dst[i * n_cols + c] = W[rows[i]][c] as float32, for i < n.
	 * Rows are bounds-checked by the provider (-EINVAL). */
	int (*get_rows)(void *ctx, uint32_t tensor, const int64_t *rows, uint64_t n, float *dst);

	/* Optional (NULL for a provider without raw bytes): hand rows [row0, row_end) of the
	 * tensor to cb in row order, in blocks of whole rows, from wherever the provider holds
	 * them (its RAM copy, nsio's RAM tier in place, streamed arena blocks). The GPU
	 * backend copies them to the device. A non-zero return of cb stops the walk and is
	 * returned; other failures are negative errnos with last_error set. */
	int (*visit)(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		     ns_weights_block_fn cb, void *cbctx);

	/* One line about the last failure; valid until the next call. */
	const char *(*last_error)(void *ctx);

	/* Optional: the provider's kernel threads, lent to the forward pass for the work between
	 * matmuls (attention); NULL (or no op) for one thread. */
	struct ns_pool *(*pool)(void *ctx);

	void (*destroy)(void *ctx);
};

struct ns_weights {
	const struct ns_weights_ops *ops;
	void *ctx;
	const struct ns_model *model; /* borrowed */
};

/* Reference provider: each call preads the rows it needs from the tensor's shard, dequantizes
 * them with ns_dequant_rows and forms every dot product in double precision in column order.
 * Slow and obviously right; the spec the other providers are tested against. */
int ns_weights_ref_new(const struct ns_model *m, struct ns_weights **out, char *err,
		       size_t errlen);
/* The same with beat(user) called after each block its visit reads (at most 1 MiB): a
 * process uploading a whole model through visit (the cuda draft model, compute_draft_cuda.c)
 * keeps its heartbeat moving through the read. beat may be NULL. */
int ns_weights_ref_new_beat(const struct ns_model *m, void (*beat)(void *user), void *user,
			    struct ns_weights **out, char *err, size_t errlen);

/* Frees the provider and nulls *w. Safe on NULL. */
void ns_weights_destroy(struct ns_weights **w);

/* Shortcuts over the ops table. */
static inline int ns_weights_matmul(struct ns_weights *w, uint32_t tensor, uint64_t row0,
				    uint64_t row_end, const float *x, uint64_t n_tok, float *y,
				    uint64_t ldy)
{
	return w->ops->matmul(w->ctx, tensor, row0, row_end, x, n_tok, y, ldy);
}

static inline int ns_weights_get_rows(struct ns_weights *w, uint32_t tensor, const int64_t *rows,
				      uint64_t n, float *dst)
{
	return w->ops->get_rows(w->ctx, tensor, rows, n, dst);
}

/* -ENOTSUP (with no message) when the provider has no raw bytes to hand out. */
static inline int ns_weights_visit(struct ns_weights *w, uint32_t tensor, uint64_t row0,
				   uint64_t row_end, ns_weights_block_fn cb, void *cbctx)
{
	if (!w->ops->visit)
		return -ENOTSUP;
	return w->ops->visit(w->ctx, tensor, row0, row_end, cb, cbctx);
}

static inline struct ns_pool *ns_weights_pool(const struct ns_weights *w)
{
	return w->ops->pool ? w->ops->pool(w->ctx) : NULL;
}

static inline const char *ns_weights_error(const struct ns_weights *w)
{
	return w->ops->last_error(w->ctx);
}

#endif
