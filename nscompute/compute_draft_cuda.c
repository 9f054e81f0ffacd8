/* compute_draft_cuda.c - the draft model on the cuda backend (compute_draft_model.h,
 * nsc_dmodel_open_cuda): every weight matrix uploaded once into the draft pass's own VRAM arena
 * (read from the file in slices by the reference provider's visit, with a heartbeat after
 * each, so nscompute never holds a RAM copy), its KV cache and scratch in the same arena, its
 * pass the CUDA one (cfwd.h). The proposals, the cache cut-backs and the bookkeeping are
 * compute_draft_model.c's, unchanged: ns_fwd_eval / ns_fwd_truncate / ns_fwd_reset work on
 * either pass. Built into the cuda processes only (nscompute-cuda, nscompute-cudaemu). */
#include <errno.h>
#include <stdlib.h>

#include "cfwd.h"
#include "compute_draft_model.h"
#include "forward.h"
#include "gpu_need.h"
#include "model.h"
#include "ns_util.h"
#include "weights.h"

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
		rc = ns_weights_ref_new_beat(m, beat, beat_user, &w, err, errlen);
	if (rc == 0)
		rc = ns_cfwd_new(m, w, &o, &f, err, errlen);
	return nsc_dmodel_adopt(rc, m, w, f, n_vocab, out, err, errlen);
}
