/* fixed_mem.h - the memory a run needs beyond its budgets: KV cache, recurrent state,
 * activations/scratch and process overhead.
 *
 * KV cache: for every layer that has attention,
 *     n_ctx_layer * (k_width * k_b32 + v_width * v_b32) / 32 bytes
 * with k_b32 / v_b32 the bytes of 32 elements of the cache's K / V type (f32 128, f16 64,
 * q8_0 34: nsplan_fixed_compute_kv; nsplan_fixed_compute counts f32),
 * where k_width = n_head_kv * head_dim_k is the row count of blk.N.attn_k.weight (so per-layer
 * head geometry, e.g. gemma4, is exact), v_width the row count of attn_v (k_width when the layer
 * has none: V = K), and n_ctx_layer = min(n_ctx, sliding_window) on sliding-window layers.
 * With uniform geometry this is n_layer * n_ctx * n_head_kv * head_dim * 2 * 4.
 * Sliding layers: <arch>.attention.sliding_window_pattern (bool per layer, or a period P: layer
 * l slides iff l % P < P - 1); without the key, llama.cpp's periods (gemma2/gpt-oss 2, gemma3 6,
 * cohere2 4); an unknown architecture is counted as full attention (an over-estimate).
 * Recurrent layers (those with ssm_conv1d): conv state (kernel - 1) * channels * 4 plus
 * ssm.state_size * ssm.inner_size * 4.
 *
 * Activations/scratch (f32, one layer at a time, B = min(n_ctx, NSPLAN_PREFILL_BATCH)):
 *     4 * ( 4 * B * n_embd                      hidden, residual, normed input, attention out
 *         + B * (q_width + k_width + v_width)   projections of the batch (widest layer)
 *         + n_head * B * n_ctx                  attention scores against the whole context
 *         + 2 * B * n_ff_max                    FFN gate and up (max of n_ff, n_ff_exp)
 *         + n_vocab )                           logits of one position
 *
 * Overhead: the caller measures it (nsplan_self_rss() of a freshly started process times the
 * number of pipeline processes, NSPLAN_N_PROCESSES) and passes it in. */
#ifndef NSPLAN_FIXED_MEM_H
#define NSPLAN_FIXED_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "hparams.h"
#include "model.h"

#define NSPLAN_PREFILL_BATCH 256u
#define NSPLAN_N_PROCESSES 5u /* nsctl, nsio, nsplan, nscompute, nsrouter */

struct nsplan_fixed {
	uint32_t n_ctx;
	uint32_t n_kv_layers;     /* layers with a KV cache */
	uint32_t n_swa_layers;    /* of which sliding-window (capped at the window) */
	uint32_t n_rec_layers;    /* recurrent-state layers */
	uint32_t batch;           /* B of the scratch formula */
	uint64_t kv_bytes;
	uint64_t recurrent_bytes;
	uint64_t scratch_bytes;
	uint64_t overhead_bytes;  /* as passed in */
	uint64_t total;           /* the sum of the four */
};

/* Returns 0, or -EOVERFLOW / -EINVAL (n_ctx 0) with a line in err. */
int nsplan_fixed_compute(const struct ns_model *m, const struct ns_hparams *hp, uint32_t n_ctx,
			 uint64_t overhead, struct nsplan_fixed *out, char *err, size_t errlen);
/* The same with the KV cache's element sizes in bytes per 32 elements (see above). */
int nsplan_fixed_compute_kv(const struct ns_model *m, const struct ns_hparams *hp,
			    uint32_t n_ctx, uint32_t k_b32, uint32_t v_b32, uint64_t overhead,
			    struct nsplan_fixed *out, char *err, size_t errlen);

/* Is layer il a sliding-window layer? (see above) */
bool nsplan_layer_is_swa(const struct ns_model *m, const struct ns_hparams *hp, uint32_t il);

/* Resident set size of the calling process (VmRSS of /proc/self/status) in bytes, 0 if
 * unreadable. */
uint64_t nsplan_self_rss(void);

#endif
