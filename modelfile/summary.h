/* summary.h - what a model costs to run: bytes by type and layer, expert share, the bytes one
 * decoded token touches, and the smallest streaming arena. Shared by nsctl info, the planner
 * and the benchmarks so every tool quotes the same figures. */
#ifndef NS_SUMMARY_H
#define NS_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>

#include "ggml_type.h"
#include "hparams.h"
#include "model.h"

struct ns_layer_summary {
	uint32_t n_tensors;
	uint64_t bytes;
	uint64_t expert_bytes;
	uint64_t params;
};

struct ns_summary {
	uint64_t n_params;
	uint64_t bytes_by_type[NS_TYPE_COUNT];
	uint32_t n_tensors_by_type[NS_TYPE_COUNT];
	uint64_t expert_bytes;      /* routed experts (*_exps*), all of them */
	uint64_t nonlayer_bytes;    /* tensors outside blk.N (embeddings, output, final norm) */
	uint64_t bytes_per_token;   /* weight bytes one decoded token touches (by the roles of
				     * the architecture table, arch.h: a table read by row, one
				     * row; experts, the active share; unread tensors, none) */
	uint64_t max_row_bytes;     /* largest single row: sets the minimum arena */
	int64_t max_row_tensor;     /* its index in the model, -1 if no tensors */
	uint64_t min_mem_budget;    /* ns_stream_min_budget(max_row_bytes, NS_DEFAULT_LOOKAHEAD) */
	uint32_t n_layers;          /* entries in layers[] (max blk index + 1) */
	struct ns_layer_summary *layers; /* owned; ns_summary_free() */
	uint32_t n_uncomputable;    /* tensors of types our kernels cannot compute */
	int64_t first_uncomputable; /* index of the first such tensor, or -1 */
};

/* Layer index of a "blk.N.*" tensor name, or -1. */
int64_t ns_tensor_layer(const char *name);
/* Routed-expert tensor (stacked experts, e.g. blk.3.ffn_up_exps.weight)? */
bool ns_tensor_is_expert(const char *name);

int ns_summary_compute(const struct ns_model *m, const struct ns_hparams *hp,
		       struct ns_summary *s);
void ns_summary_free(struct ns_summary *s);

#endif
