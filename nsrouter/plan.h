/* plan.h - turn one layer's router decision into the layer-wide prefetch plan.
 *
 * For each chosen expert, in ascending id (the order nscompute/forward/moe.c multiplies them):
 * the rows of each expert stack of the layer in the architecture table's order (its EXPERT
 * reads, modelfile/arch.h: gate, up, down), each cut into the blocks ns_stream_linear will request
 * (ns_stream_block_rows with the same --block-rows and lookahead as nscompute), so every
 * prefetched window is an exact hit. Expert e owns rows [e * rows, (e + 1) * rows) of each
 * stacked tensor (rows = ne[1]: n_ff for gate/up, n_embd for down).
 * Blocks wholly in the RAM cache (resident.h) are left out: compute's request for them is
 * served by copy. The cuts never move, so every block that is left in is still exact.
 *
 * Ownership: a ns_rplan borrows the model and the client (both outlive it). */
#ifndef NS_ROUTER_PLAN_H
#define NS_ROUTER_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "zmsg.h"

struct ns_model;
struct ns_client;
struct ns_rres;

/* One stacked expert projection of one layer. */
struct ns_rproj {
	uint32_t tensor;      /* nsio's index */
	uint32_t mtensor;     /* the model's index (the plan's) */
	uint64_t expert_rows; /* rows per expert */
	uint64_t block_rows;  /* rows per streamed block (as nscompute's stream uses) */
	uint64_t row_bytes;
};

#define NS_RPLAN_MAX_PROJ 4

struct ns_rlayer {
	int present;              /* 1: an MoE layer (expert stacks in the table's reads) */
	uint32_t n_expert;
	uint32_t n_proj;
	struct ns_rproj proj[NS_RPLAN_MAX_PROJ]; /* the expert stacks in consumption order */
};

struct ns_rplan {
	uint32_t n_layer;
	struct ns_rlayer *layer;  /* (n_layer) */
};

/* Bind the model to the architecture table, take every layer's expert stacks in its order
 * and size the blocks. Returns 0, -ENOENT (no expert stack at all: nothing to route),
 * -ENOSPC/-EINVAL/-ENOMEM with one line in err. */
int ns_rplan_new(const struct ns_model *m, struct ns_client *c, uint64_t block_rows,
		 uint32_t lookahead, struct ns_rplan **out, char *err, size_t errlen);
void ns_rplan_destroy(struct ns_rplan **p);

/* What a build left out of the plan. */
struct ns_rbuild {
	uint64_t blocks;           /* blocks of the decision in consumption order */
	uint64_t resident_windows; /* blocks wholly in the RAM cache: never prefetched */
	uint64_t resident_bytes;
	uint64_t first_left;       /* of the first skip_first blocks, those left to compute */
};

/* Fill plan with the windows of a decision, in consumption order, leaving out the first
 * skip_first blocks (compute requests them itself the moment it has published), blocks that
 * res (may be NULL) says are wholly resident, and stopping before the bytes of the
 * non-resident blocks exceed max_bytes (0: no cap). *out (may be NULL) gets what was left out.
 * Returns the number of items, or -EINVAL for a layer or expert out of range. */
int ns_rplan_build(const struct ns_rplan *p, const struct ns_zrouter *d, uint64_t max_bytes,
		   const struct ns_rres *res, uint32_t skip_first, struct ns_zplan *plan,
		   struct ns_rbuild *out);

#endif
