/* compute_draft_cuda.c - the draft model on the cuda backend (compute_draft_model.h,
 * nsc_dmodel_open_cuda): every weight matrix uploaded once into the draft pass's own VRAM arena
 * (read from the file in slices by the reference provider's visit, so nscompute never holds a
 * RAM copy), its KV cache and scratch in the same arena, its pass the CUDA one (cfwd.h). The
 * proposals, the cache cut-backs and the bookkeeping are compute_draft_model.c's, unchanged:
 * ns_fwd_eval / ns_fwd_truncate / ns_fwd_reset work on either pass. Built into the cuda
 * processes only (nscompute-cuda, nscompute-cudaemu). */
#include <errno.h>
#include <stdlib.h>

#include "cfwd.h"
#include "compute_draft_model.h"
#include "forward.h"
#include "gpu_need.h"
#include "model.h"
#include "ns_util.h"
#include "weights.h"
#include "weights_provider.h"

/* The reference provider with a heartbeat between visit's slices: the upload can take a while
 * for a larger draft, and the session's stall watch must hear from the process meanwhile. */
struct s_beat {
	struct ns_weights *in; /* owned */
	void (*beat)(void *user);
	void *beat_user;
	ns_weights_block_fn cb; /* the walk in progress */
	void *cbctx;
};

static int s_matmul(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		    const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	return ns_weights_matmul(((struct s_beat *)ctx)->in, tensor, row0, row_end, x, n_tok, y,
				 ldy);
}

static int s_get_rows(void *ctx, uint32_t tensor, const int64_t *rows, uint64_t n, float *dst)
{
	return ns_weights_get_rows(((struct s_beat *)ctx)->in, tensor, rows, n, dst);
}

static int s_block(void *ctx, uint64_t row0, uint64_t nrows, const void *data)
{
	struct s_beat *b = ctx;
	int rc = b->cb(b->cbctx, row0, nrows, data);

	if (rc == 0 && b->beat)
		b->beat(b->beat_user);
	return rc;
}

static int s_visit(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		   ns_weights_block_fn cb, void *cbctx)
{
	struct s_beat *b = ctx;

	b->cb = cb;
	b->cbctx = cbctx;
	return ns_weights_visit(b->in, tensor, row0, row_end, s_block, b);
}

static const char *s_last_error(void *ctx)
{
	return ns_weights_error(((struct s_beat *)ctx)->in);
}

static void s_destroy(void *ctx)
{
	struct s_beat *b = ctx;

	if (!b)
		return;
	ns_weights_destroy(&b->in);
	free(b);
}

static const struct ns_weights_ops s_beat_ops = {
	.name = "ref",
	.matmul = s_matmul,
	.get_rows = s_get_rows,
	.visit = s_visit,
	.last_error = s_last_error,
	.destroy = s_destroy,
};

static int s_provider(const struct ns_model *m, void (*beat)(void *user), void *beat_user,
		      struct ns_weights **out, char *err, size_t errlen)
{
	struct s_beat *b = calloc(1, sizeof(*b));
	int rc;

	*out = NULL;
	if (!b)
		return ns_errf(err, errlen, "out of memory"), -ENOMEM;
	b->beat = beat;
	b->beat_user = beat_user;
	rc = ns_weights_ref_new(m, &b->in, err, errlen);
	if (rc < 0) {
		free(b);
		return rc;
	}
	return ns_weights_install(&s_beat_ops, b, m, out, err, errlen);
}

int nsc_dmodel_vram_need(const char *path, uint32_t n_ctx, uint64_t *bytes, char *err,
			 size_t errlen)
{
	struct ns_model *m = NULL;
	int rc = nsc_dmodel_open_model(path, &m, err, errlen);

	*bytes = 0;
	if (rc == 0)
		rc = nsplan_gpu_resident_need(m, n_ctx, NSPLAN_GPU_RESIDENT_STAGE, bytes, err,
					      errlen);
	ns_model_close(&m);
	return rc;
}

int nsc_dmodel_open_cuda(const char *path, uint32_t n_ctx, bool act_q8, uint32_t n_vocab,
			 uint64_t vram_cap, void (*beat)(void *user), void *beat_user,
			 struct nsc_dmodel **out, char *err, size_t errlen)
{
	struct ns_cfwd_opts o = { .n_ctx = n_ctx, .all_resident = true, .act_q8 = act_q8,
				  .stage_bytes = NSPLAN_GPU_RESIDENT_STAGE,
				  .vram_budget = vram_cap };
	struct ns_model *m = NULL;
	struct ns_weights *w = NULL;
	struct ns_fwd *f = NULL;
	int rc;

	*out = NULL;
	rc = nsc_dmodel_open_model(path, &m, err, errlen);
	if (rc == 0)
		rc = s_provider(m, beat, beat_user, &w, err, errlen);
	if (rc == 0)
		rc = ns_cfwd_new(m, w, &o, &f, err, errlen);
	return nsc_dmodel_adopt(rc, m, w, f, n_vocab, out, err, errlen);
}
