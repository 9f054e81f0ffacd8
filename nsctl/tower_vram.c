/* tower_vram.c - see tower_vram.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "commands.h"
#include "draft_model.h"
#include "model.h"
#include "ns_util.h"
#include "tower_vram.h"
#include "vision_vram.h"

int nsctl_tower_vram(const struct nsctl_tower *tw, uint32_t n_ctx, uint64_t *bytes, char *err,
		     size_t errlen)
{
	struct ns_model *t = NULL;
	struct ns_vision_hparams hp;
	struct ns_vision_vram vn;
	char why[NS_ERR_LEN];
	int rc;

	*bytes = 0;
	if (!tw || !tw->mmproj)
		return 0;
	rc = ns_model_open(tw->mmproj, &t, why, sizeof(why));
	if (rc == 0)
		rc = ns_vision_hparams_load(t, &hp, why, sizeof(why));
	if (rc == 0) /* as nscompute-cuda sizes its arena (cuda_attach.c s_tower_need) */
		rc = ns_vision_vram_largest(t, &hp, &tw->lim, n_ctx, &vn, NULL, why, sizeof(why));
	ns_model_close(&t);
	if (rc < 0)
		return ns_errf(err, errlen, "--mmproj %s: %s", tw->mmproj, why), rc;
	*bytes = vn.total;
	return 0;
}

void nsctl_tower_vram_refusal(const char *mmproj, uint64_t need, uint32_t n_ctx,
			      uint64_t reserve, uint64_t vram, char *err, size_t errlen)
{
	char s[3][32];

	ns_errf(err, errlen, "--mmproj %s: the vision tower's %s of VRAM (its arena for the "
		"largest image at -c %u) does not fit: with the %s reserved before it it exceeds "
		"--vram-budget %s; smallest workable: --vram-budget %" PRIu64 " (or a lower "
		"--max-patches or -c, or --backend cpu)", mmproj, ns_format_bytes(need, s[0], 32),
		n_ctx, ns_format_bytes(reserve, s[1], 32), ns_format_bytes(vram, s[2], 32),
		reserve + need);
}

int nsctl_tower_vram_reserve(const char *model, const struct nsctl_tower *tw, uint32_t n_ctx,
			     const char *ctk, const char *ctv, uint64_t vram, uint64_t reserve,
			     uint64_t *plan_reserve, uint64_t *tower_vram, char *err,
			     size_t errlen)
{
	uint64_t t = 0, sum;
	int rc;

	*plan_reserve = reserve;
	if (tower_vram)
		*tower_vram = 0;
	if ((rc = nsctl_tower_vram(tw, n_ctx, &t, err, errlen)) < 0 || !t)
		return rc;
	if (tower_vram)
		*tower_vram = t;
	if (!reserve && (rc = nsctl_pass_vram_reserve(model, n_ctx, ctk, ctv, &reserve, err,
						     errlen)) < 0)
		return rc; /* nsplan's own default: the model's pass's set */
	if (ns_add_u64_overflow(reserve, t, &sum))
		return ns_errf(err, errlen, "--mmproj %s: the VRAM sizes overflow", tw->mmproj),
		       -EOVERFLOW;
	if (vram && sum > vram) {
		nsctl_tower_vram_refusal(tw->mmproj, t, n_ctx, reserve, vram, err, errlen);
		return -ENOSPC;
	}
	*plan_reserve = sum;
	return 0;
}
