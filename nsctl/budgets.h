/* budgets.h - the budgets of a run, picked or checked before anything starts: `nsctl plan`
 * completes and prints them, `nsctl run` and `nsctl bench` take the same choice (budgets.c). */
#ifndef NSCTL_BUDGETS_H
#define NSCTL_BUDGETS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "budget_defaults.h"
#include "fixed_mem.h"
#include "hparams.h"
#include "model.h"
#include "plan.h"
#include "summary.h"
#include "vision_hparams.h"

#define NSCTL_DEFAULT_CTX 4096u /* -c when not given, unless the model was trained shorter */

/* The context a run takes: n_ctx if given, else NSCTL_DEFAULT_CTX or the training context. */
uint32_t nsctl_default_ctx(const struct ns_hparams *hp, uint32_t n_ctx);

/* Bytes the RAM cache could hold usefully: the model's tensors, less an untied input
 * embedding unless embd (it is never cached by default). */
uint64_t nsctl_cacheable_bytes(const struct ns_model *m, const struct ns_hparams *hp, bool embd);

/* What budgets are weighed against, from m's headers: its hyperparameters (*hp), summary
 * (*sum, to free) and the fixed set (*fx) at n_ctx (0: nsctl_default_ctx) with KV cache
 * types ctk / ctv (names as nsctl_kv_set stores them, NULL: f32) and *overhead bytes
 * for the processes themselves (NULL: nsplan_process_overhead's estimate). runnable: a model no backend runs is refused
 * (ns_arch_check: run, bench); else only a model the architecture table contradicts
 * (ns_arch_check_described: plan, which weighs an architecture no pass computes yet by the
 * table or its shapes). Returns 0, or -errno with a line in err. */
int nsctl_budget_inputs(const struct ns_model *m, uint32_t n_ctx, const char *ctk,
			const char *ctv, const uint64_t *overhead, bool runnable,
			struct ns_hparams *hp, struct ns_summary *sum, struct nsplan_fixed *fx,
			char *err, size_t errlen);

#define NSCTL_DRAFT_MTP "mtp"

/* The drafter counted in the RAM fixed set: --draft mtp's block (NSCTL_DRAFT_MTP), or a draft
 * model on the cpu backend; on the cuda backend a draft model lives in VRAM, counted in the
 * VRAM reserve instead (draft_model.h nsctl_draft_vram_reserve): NULL. */
static inline const char *nsctl_ram_draft(bool mtp, const char *draft_model,
					  const char *backend)
{
	if (mtp)
		return NSCTL_DRAFT_MTP;
	return backend && !strcmp(backend, "cuda") ? NULL : draft_model;
}

/* A draft model (--draft PATH; NULL: none) resident beside the model m: its tensors, KV cache
 * at fx->n_ctx and scratch (draft_model.h) added to the fixed set as fx->draft_bytes; draft
 * NSCTL_DRAFT_MTP ("mtp", --draft mtp): m's own MTP block (nsplan_mtp_bytes). 0, or -errno
 * with one line in err. */
int nsctl_fixed_add_draft(struct nsplan_fixed *fx, const struct ns_model *m,
			  const struct ns_hparams *hp, const char *draft, char *err, size_t errlen);

/* A vision tower and the limits of its images (--mmproj, --max-patches, --min-pixels,
 * --max-pixels: image_args.h). */
struct nsctl_tower {
	const char *mmproj;          /* NULL: no tower */
	struct ns_image_limits lim;  /* 0s: the processor's defaults, no token cap */
};

/* A vision tower (tower NULL or its mmproj NULL: none) run by nscompute, added to the fixed
 * set at fx->n_ctx: what it holds (fx->tower_bytes, vision.h ns_vision_held_bytes: biases,
 * norms, the patch kernel as float; its matrices stream through the arena as the model's),
 * and the working memory of a prompt's images (fx->image_bytes, image_embed.h
 * ns_image_work_bytes: the tower's activations for the largest image the limits let through,
 * fx->image_tokens of them, its pixels, and the embeddings held until the decoder consumes
 * them). 0, or -errno with one line in err. */
int nsctl_fixed_add_tower(struct nsplan_fixed *fx, const struct nsctl_tower *tower, char *err,
			  size_t errlen);

/* Host memory a session of model m takes at most with arena mem and RAM budget ram: what the
 * RAM tier can fill (ram, at most the model's bytes), the arena and the fixed set fx
 * (`nsctl plan`'s host_total), rounded up to a 4 KiB page; UINT64_MAX on overflow. */
uint64_t nsctl_host_total(const struct ns_model *m, uint64_t mem, uint64_t ram,
			  const struct nsplan_fixed *fx);

/* What the user asked for, and the choice (b) once completed. */
struct nsctl_budget_req {
	const char *who;  /* prefix of the messages: "nsctl plan", "nsctl run" */
	char *err;        /* non-NULL: a refusal's line goes here (errlen bytes), not stderr */
	size_t errlen;
	struct nsplan_budgets b;
	const char *ctk, *ctv; /* KV cache types (-ctk / -ctv, NULL = f32): the GPU fixed set */
	bool reserve_given, ram_given, mem_given, embd_resident;
	struct nsplan_mem_paths paths;
	uint64_t draft_vram; /* a draft model's arena on the cuda backend (nsctl_draft_vram):
			      * with a VRAM budget, added to the reserve (given or default) and
			      * refused in one line when the budget cannot hold it */
	uint64_t tower_vram; /* the vision tower's arena on the cuda backend (tower_vram.h):
			      * added to the reserve after the draft's, refused likewise */
	const char *tower_mmproj; /* its file, for the refusal's line */
};

/* Check the given budgets and complete the others (budget_defaults.h) for model m at the
 * fixed set fx. *probed: the memory probe worked (*probe filled); *defaulted: some budget was
 * chosen (*dflt says how). Returns 0, or an exit code (2) after one line on stderr (in
 * q->err when set). */
int nsctl_budgets_complete(struct nsctl_budget_req *q, const struct ns_model *m,
			   const struct ns_hparams *hp, const struct ns_summary *sum,
			   const struct nsplan_fixed *fx, struct nsplan_mem_probe *probe,
			   bool *probed, struct nsplan_default_out *dflt, bool *defaulted);

#endif
