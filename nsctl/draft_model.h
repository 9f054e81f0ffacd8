/* draft_model.h - a draft model for speculative decoding (--draft MODEL), judged before any
 * process starts: can nscompute run it beside the model, and what it holds in memory. */
#ifndef NSCTL_DRAFT_MODEL_H
#define NSCTL_DRAFT_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* 0 when draft can draft for model: it opens, its architecture has a cpu pass with a KV cache
 * that can be cut back (no recurrent state, no vision input), and its vocabulary is model's
 * (the same number of tokens and the same text for every id of tokenizer.ggml.tokens). Else
 * -EINVAL (-ENOMEM, -EIO) with one line in err. A model that does not open is not judged
 * here (0: its own checks report it). */
int nsctl_draft_compatible(const char *model, const char *draft, char *err, size_t errlen);

/* What the draft keeps resident in nscompute with a context of n_ctx positions: its tensors,
 * its f32 KV cache and its pass's scratch (nsplan's fixed-set formulas). 0 with *bytes, or
 * -errno with one line in err. */
int nsctl_draft_bytes(const char *draft, uint32_t n_ctx, uint64_t *bytes, char *err,
		      size_t errlen);

/* What the draft keeps resident in VRAM on the cuda backend with n_ctx positions: its every
 * weight matrix, its KV cache, scratch, vectors and staging, as nscompute's draft arena
 * allocates them (nsplan_gpu_resident_need; nothing of it in RAM). 0 with *bytes, or -errno
 * with one line in err. */
int nsctl_draft_vram(const char *draft, uint32_t n_ctx, uint64_t *bytes, char *err,
		     size_t errlen);

/* nsplan's own default VRAM reserve for model's cuda pass: its set with the KV cache of
 * types ctk / ctv (NULL: f32) at n_ctx (nsplan_gpu_need, gpu_need.h). 0 with *reserve, or
 * -errno with one line in err. */
int nsctl_pass_vram_reserve(const char *model, uint32_t n_ctx, const char *ctk, const char *ctv,
			    uint64_t *reserve, char *err, size_t errlen);

/* The cuda backend with a draft model and a VRAM budget vram (0: none, nothing to check):
 * the reserve nsplan must keep out of the weight windows, *plan_reserve = reserve (0: nsplan's
 * default, the model's pass's set with its KV cache of types ctk / ctv (NULL: f32), gpu_need.h)
 * + the draft's arena (*draft_vram, may be NULL),
 * since nscompute takes the draft's arena out of --vram-budget. -ENOSPC with one line (the
 * smallest workable budget) when vram cannot hold both, other -errno with one line. */
int nsctl_draft_vram_reserve(const char *model, const char *draft, uint32_t n_ctx,
			     const char *ctk, const char *ctv,
			     uint64_t vram, uint64_t reserve, uint64_t *plan_reserve,
			     uint64_t *draft_vram, char *err, size_t errlen);

#endif
