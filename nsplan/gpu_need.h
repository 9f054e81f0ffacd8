/* gpu_need.h - the VRAM the CUDA forward pass (nscompute/cuda/cfwd.h) takes besides its weight
 * windows, exactly: the KV cache, the recurrent state (qwen35), the activations of one prefill chunk, the small vectors it
 * holds, and its two staging slots. nsplan uses it as the default --reserve-vram, so a plan's
 * VRAM weight windows always fit next to them; cfwd sizes its arena with the same function.
 * Pure arithmetic over the model index: no GPU needed. */
#ifndef NSPLAN_GPU_NEED_H
#define NSPLAN_GPU_NEED_H

#include <stddef.h>
#include <stdint.h>

#include "kv_type.h"
#include "model.h"

#define NSPLAN_GPU_GRAN 256ull              /* the device arena's allocation granule */
#define NSPLAN_GPU_STAGE (16ull << 20)      /* default bytes of one staging slot */
#define NSPLAN_GPU_LOGIT_TOK 16u            /* tokens per output-head pass */
#define NSPLAN_GPU_ATTN_CHUNK 256u          /* positions per attention chunk (attn.cu) */
#define NSPLAN_GPU_NBATCH 512u              /* nscompute's prefill chunk */

struct nsplan_gpu_need {
	uint64_t kv;        /* K and V of every attention layer for n_ctx positions in the cache's
			     * types (gemma: each in its layer's head geometry, none for a
			     * KV-shared layer) */
	uint64_t recurrent; /* qwen35's recurrent layers: conv history and DeltaNet states of
			     * all (one sequence), and their chunk's scratch; the rollback
			     * buffers of speculative decoding (a copy of the states, each
			     * layer's log of n_rollback tokens' recurrence inputs) */
	uint64_t scratch;   /* activations of n_batch tokens, attention workspace, logits, the
			     * M-RoPE positions of an image prompt's chunk (models with M-RoPE) */
	uint64_t vectors;   /* held tensors: norms, biases, sinks, rope factors, bias tables */
	uint64_t staging;   /* the two staging slots (each at least the widest weight row) */
	uint64_t slack;     /* one granule per placeable piece (a matrix, or an expert slab of
			     * a stacked one): what rounding a plan's VRAM windows to the
			     * granule can add to their exact bytes */
	uint64_t total;     /* the six, each allocation rounded to the granule: a reserve
			     * that leaves room for any plan's windows as allocated */
};

/* n_batch 0 = NSPLAN_GPU_NBATCH (capped at n_ctx); stage_bytes 0 = NSPLAN_GPU_STAGE; tk, tv:
 * the KV cache's element types (-ctk / -ctv; a row of a position's heads is
 * ns_kv_row_bytes(t, n_head_kv * head_dim) bytes, as cfwd allocates it). Returns 0, or
 * -EINVAL (a type that does not fit the head sizes, as the pass refuses it) / -EOVERFLOW
 * with a line in err. */
int nsplan_gpu_need(const struct ns_model *m, uint32_t n_ctx, uint32_t n_batch,
		    uint64_t stage_bytes, enum ns_kv_type tk, enum ns_kv_type tv,
		    struct nsplan_gpu_need *out, char *err, size_t errlen);
/* The same for a pass with n_rollback tokens of rollback buffers (ns_cfwd_opts.n_rollback;
 * they count only for a recurrent model). nsplan_gpu_need is this with
 * NSPLAN_ROLLBACK_TOKENS, what nscompute's pass allocates: any request may draft. */
int nsplan_gpu_need_rb(const struct ns_model *m, uint32_t n_ctx, uint32_t n_batch,
		       uint64_t stage_bytes, enum ns_kv_type tk, enum ns_kv_type tv,
		       uint32_t n_rollback, struct nsplan_gpu_need *out, char *err,
		       size_t errlen);

/* The VRAM of a CUDA pass with every weight matrix whole in VRAM (cfwd.h all_resident: a draft
 * model on the cuda backend, --draft MODEL): the pass's set above without the windows' slack,
 * plus each tensor it multiplies or looks rows up in, rounded to the granule (stage_bytes as
 * above; 1: slots of the widest row, a pass with nothing to stage). Equals ns_cfwd_vram_need's
 * total for the same n_ctx and stage_bytes (its KV cache f32, as the draft pass keeps it). 0,
 * or -EINVAL / -EOVERFLOW with a line in err. */
#define NSPLAN_GPU_RESIDENT_STAGE 1ull
int nsplan_gpu_resident_need(const struct ns_model *m, uint32_t n_ctx, uint64_t stage_bytes,
			     uint64_t *bytes, char *err, size_t errlen);

/* a rounded up to the granule. */
static inline uint64_t nsplan_gpu_round(uint64_t a)
{
	return (a + NSPLAN_GPU_GRAN - 1) / NSPLAN_GPU_GRAN * NSPLAN_GPU_GRAN;
}

/* Bytes of the attention workspace of attn.cu for n_tok queries over n_ctx positions. */
uint64_t nsplan_gpu_attn_ws(uint64_t n_tok, uint64_t n_head, uint64_t n_ctx, uint64_t dv);

#endif
