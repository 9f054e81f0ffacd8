/* plan.h - turn one layer's router decision into the layer-wide prefetch plan.
 *
 * For each chosen expert, in ascending id (the order nscompute/forward/moe.c multiplies them):
 * its gate rows, then up, then down, each cut into the blocks ns_stream_linear will request
 * (ns_stream_block_rows with the same --block-rows and lookahead as nscompute), so every
 * prefetched window is an exact hit. Expert e owns rows [e * rows, (e + 1) * rows) of each
 * stacked tensor (rows = ne[1]: n_ff for gate/up, n_embd for down).
 *
 * Ownership: a ns_rplan borrows the model and the client (both outlive it). */
#ifndef NS_ROUTER_PLAN_H
#define NS_ROUTER_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "zmsg.h"

struct ns_model;
struct ns_client;

/* One stacked expert projection of one layer. */
struct ns_rproj {
	uint32_t tensor;      /* nsio's index */
	uint64_t expert_rows; /* rows per expert */
	uint64_t block_rows;  /* rows per streamed block (as nscompute's stream uses) */
	uint64_t row_bytes;
};

struct ns_rlayer {
	int present;              /* 1: an MoE layer with gate, up and down stacks */
	uint32_t n_expert;
	struct ns_rproj proj[3];  /* gate, up, down: consumption order */
};

struct ns_rplan {
	uint32_t n_layer;
	struct ns_rlayer *layer;  /* (n_layer) */
};

/* Find blk.L.ffn_{gate,up,down}_exps.weight for every layer and size the blocks. Returns 0,
 * -ENOENT (no MoE tensor at all: nothing to route), -ENOSPC/-EINVAL with one line in err. */
int ns_rplan_new(const struct ns_model *m, struct ns_client *c, uint64_t block_rows,
		 uint32_t lookahead, struct ns_rplan **out, char *err, size_t errlen);
void ns_rplan_destroy(struct ns_rplan **p);

/* Fill plan with the windows of a decision, in consumption order, stopping before the total
 * bytes exceed max_bytes (0: no cap). Returns the number of items, or -EINVAL for a layer or
 * expert out of range. */
int ns_rplan_build(const struct ns_rplan *p, const struct ns_zrouter *d, uint64_t max_bytes,
		   struct ns_zplan *plan);

#endif
