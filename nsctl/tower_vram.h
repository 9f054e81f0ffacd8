/* tower_vram.h - the vision tower's VRAM on the cuda backend (--mmproj with --backend cuda),
 * judged before any process starts: nscompute-cuda runs each image through the tower in an
 * arena of the largest image's size (nscompute/vision/vision_vram.h, the same arithmetic) and
 * takes it out of --vram-budget, so nsctl keeps it out of the plan's weight windows, in the
 * VRAM reserve nsplan is given, as a draft model's (draft_model.h). */
#ifndef NSCTL_TOWER_VRAM_H
#define NSCTL_TOWER_VRAM_H

#include <stddef.h>
#include <stdint.h>

#include "budgets.h"

/* The arena of the largest image the tower's limits (tw->lim) and n_ctx let through: what
 * nscompute-cuda takes of VRAM for tw->mmproj (ns_vision_vram_largest). *bytes 0 without a
 * tower. 0, or -errno with one line in err. */
int nsctl_tower_vram(const struct nsctl_tower *tw, uint32_t n_ctx, uint64_t *bytes, char *err,
		     size_t errlen);

/* The cuda backend with a tower tw and a VRAM budget vram (0: none, nothing to check): the
 * reserve nsplan must keep, *plan_reserve = reserve (0: nsplan's default, the model's pass's
 * set with its KV cache of types ctk / ctv, gpu_need.h; or a reserve already holding a draft
 * model's arena) + the tower's arena (*tower_vram, may be NULL). -ENOSPC with one line naming
 * the smallest workable --vram-budget when vram cannot hold both, other -errno with one
 * line. */
int nsctl_tower_vram_reserve(const char *model, const struct nsctl_tower *tw, uint32_t n_ctx,
			     const char *ctk, const char *ctv, uint64_t vram, uint64_t reserve,
			     uint64_t *plan_reserve, uint64_t *tower_vram, char *err,
			     size_t errlen);

/* The refusal's line, shared with nsctl plan (budgets.c): the tower's need, what was reserved
 * before it, the budget, and the smallest workable budget (reserve + need). */
void nsctl_tower_vram_refusal(const char *mmproj, uint64_t need, uint32_t n_ctx,
			      uint64_t reserve, uint64_t vram, char *err, size_t errlen);

#endif
