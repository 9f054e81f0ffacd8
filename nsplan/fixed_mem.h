/* fixed_mem.h - the memory a run needs beyond its budgets: KV cache, recurrent state,
 * activations/scratch and process overhead.
 *
 * KV cache: for every layer that has attention,
 *     ceil16(n_ctx_layer) * k_width * k_b32 / 32 + n_ctx_layer * v_width * v_b32 / 32 bytes
 * (K in tiles of NSPLAN_KV_TILE positions, as the cpu pass keeps it)
 * with k_b32 / v_b32 the bytes of 32 elements of the cache's K / V type (f32 128, f16 64,
 * q8_0 34: nsplan_fixed_compute_kv; nsplan_fixed_compute counts f32),
 * where k_width = n_head_kv * head_dim_k is the row count of blk.N.attn_k.weight (so per-layer
 * head geometry, e.g. gemma4, is exact), v_width the row count of attn_v (k_width when the layer
 * has none: V = K), and n_ctx_layer = n_ctx on every layer but the sliding-window layers
 * (gemma3, gemma4, gpt-oss), whose caches are rings of
 *     R = min(n_ctx, ceil16(sliding_window + B - 1))   positions (B as below)
 * (modelfile/kv_type.h ns_kv_ring_positions, nscompute/forward/kvcache.h; R rounds to whole
 * K tiles; gpt-oss's in one ring per sequence beside its global layers' cache, llama.c).
 * The CUDA pass keeps whole caches in VRAM (gpu_need.h) and none on the host.
 * With uniform geometry and n_ctx a multiple of 16 this is
 * n_layer * n_ctx * n_head_kv * head_dim * 2 * 4. tests/forward/test_fwd_cache_bytes holds it
 * to what the cpu pass allocates (ns_fwd_cache_bytes).
 * Sliding layers: <arch>.attention.sliding_window_pattern (bool per layer, or a period P: layer
 * l slides iff l % P < P - 1); without the key, llama.cpp's periods (gemma2/gpt-oss 2, gemma3 6,
 * cohere2 4); an unknown architecture is counted as full attention (an over-estimate).
 * Recurrent layers (those with ssm_conv1d): conv state (kernel - 1) * channels * 4 plus
 * ssm.state_size * ssm.inner_size * 4 (recurrent_bytes), and as much again plus
 * NSPLAN_ROLLBACK_TOKENS * (channels + 2 * heads) * 4 (heads: the rows of ssm_beta) for
 * speculative decoding's rollback: a copy of the state and a log of each token's recurrence
 * input (rollback_bytes; nscompute/forward/deltanet.h). tests/forward/test_fwd_cache_bytes
 * holds their sum to what the cpu pass allocates (ns_fwd_state_bytes).
 *
 * Activations/scratch: what the cpu pass allocates (nscompute/forward: llama.c's and moe.c's
 * scratch, the GEMM's packed activations, the sampler), in f32 words, for a batch of
 * B = min(n_ctx, NSPLAN_PREFILL_BATCH) tokens (forward.c's default n_batch):
 *     4 * ( B * (3 * n_embd + q + k + v + ao + 3 * n_ff_max)   hidden, residual, normed input,
 *                                            projections, attention out (n_head * head_dim_v),
 *                                            FFN gate (n_ff_max) and fused gate+up (2 n_ff_max)
 *         + B * wide                         the GEMM's packed input, wide = the widest of
 *                                            n_embd, q, ao, 2 * n_ff_max
 *         + T * R * (n_ctx + 2 * head_dim_k + 64 + head_dim_v + 32)   attention's
 *                                            per-thread tiles (attn.c's workspace; 32 a row
 *                                            covers its rounding to 16 floats, R >= 4):
 *                                            R = NSPLAN_ATTN_TB * n_head / n_head_kv
 *                                            rows, T = NSPLAN_ATTN_THREADS: the slots of
 *                                            attention's workspace, never more than 64
 *                                            whatever --threads says (attn.h
 *                                            NS_ATTN_MAX_SLOTS: more threads share them)
 *         + B * (n_expert + 3 * n_used + (2 + n_used) * n_embd + 3 * n_ff_exp)   MoE only:
 *                                            router logits, choices, expert input and output,
 *                                            one output row per chosen expert, expert FFN
 *         + NSPLAN_VOCAB_FLOATS * n_vocab )  logits, the sampler's candidates
 * (measured with heaptrack on a two-layer qwen3-30b-a3b preset and a 670-token prompt: the
 * MoE rows were 45 MiB of nscompute's 105 MiB heap peak, uncounted before).
 *
 * Overhead, the processes themselves (nsplan_process_overhead): NSPLAN_PROC_BASE for each of
 * the NSPLAN_N_PROCESSES processes (code data, libzmq's threads and buffers, io_uring rings,
 * stacks, malloc's slack) plus NSPLAN_META_FACTOR times the model's bytes outside its
 * tensors (its header: every process parses it, nsctl builds the tokenizer from it), from
 * Pss_Anon readings of each process (tests/ceiling/peak.py): on a two-layer qwen3-30b-a3b
 * preset (2.7 MB of header, a 151k vocabulary) nsctl and its keeper held 24 MB, nsio 8.3,
 * nsplan 8.2, nsrouter 8.7, nscompute about 12 besides its KV cache and scratch: 61 MB,
 * 10 MB of bases and 18.6 per header byte; on tiny models (14 KB headers) 0.3 to 1.6 MB a
 * process.
 *
 * Margin: total / NSPLAN_MARGIN_DIV + NSPLAN_MARGIN_MIN on top (page tables, kernel objects,
 * allocator rounding the measurements cannot see one by one). nsctl weighs named budgets
 * against the same total (budgets.c). */
#ifndef NSPLAN_FIXED_MEM_H
#define NSPLAN_FIXED_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hparams.h"
#include "model.h"

#define NSPLAN_PREFILL_BATCH 512u  /* forward.c's default n_batch */
#define NSPLAN_ATTN_TB 4u          /* query tokens per attention task (attn_internal.h) */
#define NSPLAN_ATTN_THREADS 64u    /* attention's workspace slots at most (NS_ATTN_MAX_SLOTS) */
#define NSPLAN_KV_TILE 16u         /* K is kept in tiles of 16 positions (kvcache.h NS_KV_TILE) */
#define NSPLAN_VOCAB_FLOATS 4u     /* logits row, the sampler's ids, probabilities, order */
#define NSPLAN_PROC_BASE (2ull << 20)
#define NSPLAN_META_FACTOR 20u
#define NSPLAN_MARGIN_DIV 8u
#define NSPLAN_MARGIN_MIN (4ull << 20)
#define NSPLAN_N_PROCESSES 5u
#define NSPLAN_ROLLBACK_TOKENS 65u /* 1 + NS_CMSG_MAX_DRAFT (proto/ctl_msg.h): a speculative
				    * pass's tokens, nscompute's ns_fwd_opts.n_rollback */ /* nsctl, nsio, nsplan, nscompute, nsrouter */

struct nsplan_fixed {
	uint32_t n_ctx;
	uint32_t n_kv_layers;     /* layers with a KV cache */
	uint32_t n_swa_layers;    /* of which sliding-window */
	uint32_t ring_positions;  /* positions of a sliding layer's ring, 0 when they hold the
				   * whole context (R = n_ctx) */
	uint32_t n_rec_layers;    /* recurrent-state layers */
	uint32_t batch;           /* B of the scratch formula */
	uint64_t kv_bytes;
	uint64_t recurrent_bytes;
	uint64_t rollback_bytes;  /* the recurrent state's rollback buffers (see above) */
	uint64_t scratch_bytes;
	uint64_t overhead_bytes;  /* as passed in */
	uint64_t margin_bytes;    /* the sum of the four / NSPLAN_MARGIN_DIV + NSPLAN_MARGIN_MIN */
	uint64_t total;           /* the sum of the four and the margin (and draft_bytes) */
	uint64_t draft_bytes;     /* a draft model resident in nscompute (--draft MODEL): 0
				   * here; nsctl adds it to total (budgets.c) */
	bool draft_mtp;           /* draft_bytes are the model's own MTP block (--draft mtp) */
	uint64_t tower_bytes;     /* what a vision tower holds in nscompute (--mmproj; its
				   * matrices stream): likewise */
	uint64_t image_bytes;     /* its images' working memory (activations, embeddings):
				   * likewise */
	uint64_t image_tokens;    /* the largest image counted in image_bytes, in tokens */
	uint64_t tower_min_arena; /* the smallest arena streaming the tower's widest row
				   * (ns_stream_min_budget at NS_DEFAULT_LOOKAHEAD; nsctl's
				   * budgets take the larger of it and the model's); 0: none */
	uint64_t tower_row_bytes; /* that row */
};

/* The smallest workable arena of a session: the model's (min_model) or, when larger, its
 * vision tower's (fx->tower_min_arena). */
static inline uint64_t nsplan_min_arena(uint64_t min_model, const struct nsplan_fixed *fx)
{
	return fx->tower_min_arena > min_model ? fx->tower_min_arena : min_model;
}

/* Returns 0, or -EOVERFLOW / -EINVAL (n_ctx 0) with a line in err. */
int nsplan_fixed_compute(const struct ns_model *m, const struct ns_hparams *hp, uint32_t n_ctx,
			 uint64_t overhead, struct nsplan_fixed *out, char *err, size_t errlen);
/* The same with the KV cache's element sizes in bytes per 32 elements (see above). */
int nsplan_fixed_compute_kv(const struct ns_model *m, const struct ns_hparams *hp,
			    uint32_t n_ctx, uint32_t k_b32, uint32_t v_b32, uint64_t overhead,
			    struct nsplan_fixed *out, char *err, size_t errlen);

/* --draft mtp: what nscompute's MTP block holds beside the pass (nscompute/forward/mtp.h): the
 * block's matrices as stored, its vectors as f32, its one-layer f32 KV cache of n_ctx
 * positions and its scratch for min(512, n_ctx) rows; tests/forward/test_mtp.c holds it equal
 * to what the block allocates. 0, or -ENOENT (no MTP block), -EINVAL (a tensor missing),
 * -EOVERFLOW, with one line in err. */
int nsplan_mtp_bytes(const struct ns_model *m, const struct ns_hparams *hp, uint32_t n_ctx,
		     uint64_t *bytes, char *err, size_t errlen);

/* Is layer il a sliding-window layer? (see above) */
bool nsplan_layer_is_swa(const struct ns_model *m, const struct ns_hparams *hp, uint32_t il);

/* The processes' own memory for model m (see above); UINT64_MAX if it overflows. */
uint64_t nsplan_process_overhead(const struct ns_model *m);

#endif
