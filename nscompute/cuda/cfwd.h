/* cfwd.h - the forward pass on a CUDA device (the cuda backend of nscompute).
 *
 * Same model code as the CPU pass: ns_cfwd_new lets llama.c describe the model (tensor
 * indices, vectors, RoPE, MoE tables: llama.h) and then runs that description on the GPU with
 * the kernels of nscuda.h. It returns an ordinary struct ns_fwd, so ns_fwd_eval, the sampler,
 * teacher forcing and the nscompute protocol work unchanged. Image calls (ns_fwd_eval_mm, the
 * M-RoPE models) too: the image rows' embeddings (from the host tower, or from the CUDA one,
 * ctower.h, through host memory), positions and DeepStack features go up per chunk
 * (cfwd_eval.c).
 *
 * Where weights live:
 *   - VRAM windows (opts.vram): row windows of weight matrices copied once to the device at
 *     creation (VRAM-Q: raw quantized bytes), multiplied in place by the fused kernels;
 *   - everything else comes through the host provider's visit op (weights.h: its RAM copy,
 *     nsio's RAM tier, or arena blocks streamed from disk), is copied to one of two staging
 *     slots on a copy stream and multiplied there, the copy of block i+1 overlapping the
 *     kernel of block i (events order the two streams).
 * Output rows come from one row's bytes and x by a kernel whose order depends only on the
 * type and width, so results are bit-identical whatever is resident and however blocks are
 * cut.
 *
 * VRAM: one arena of exactly opts.vram_budget bytes (ns_vram), holding the KV cache, scratch,
 * the small vectors, the staging slots and the VRAM windows (each window one allocation, so
 * rounded to the 256-byte granule). opts.reserve_vram is the part kept for all but the windows
 * (nsplan's meaning; nsplan's default, nsplan/gpu_need.h, adds a granule per placeable piece
 * so any plan's windows fit as allocated): when KV + scratch + vectors + staging do not fit
 * in it, or the windows do not fit next to them, creation fails with -ENOMEM and a line with
 * the figures. ns_cfwd_vram_need gives the exact figures beforehand.
 *
 * CUDA graphs: a dense model whose every weight matrix is whole in VRAM decodes each token by
 * replaying one captured graph of the whole step (layers and output head); the position is
 * read from device memory by the kernels (nscuda.h, "graphs"), so the graph serves every
 * position and the results are the plain path's bits. MoE models (the router's decision goes
 * to the host every layer) and streamed weights (host callbacks per block) take the plain path.
 *
 * Ownership: the model and the provider are borrowed and must outlive the forward pass;
 * ns_fwd_destroy frees the device memory. One thread. */
#ifndef NS_CFWD_H
#define NS_CFWD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forward.h"

/* One row window of a weight matrix to keep in VRAM. */
struct ns_cfwd_window {
	uint32_t tensor;
	uint64_t row_begin, row_end;
};

struct ns_cfwd_opts {
	uint32_t n_ctx;            /* positions of the KV cache; required */
	uint32_t n_batch;          /* tokens per prefill chunk; 0 = 512 */
	int device;                /* CUDA device index */
	uint64_t vram_budget;      /* bytes of the device arena; 0 = exactly what is needed */
	uint64_t reserve_vram;     /* part of the budget for KV, scratch, vectors, staging;
				    * 0 = exactly what they need */
	bool all_resident;         /* every weight matrix whole in VRAM (vram ignored) */
	const struct ns_cfwd_window *vram; /* windows to keep in VRAM (sorted or not) */
	uint64_t n_vram;
	uint64_t stage_bytes;      /* bytes of each of the two staging slots; 0 = 64 MiB, or
				    * the largest weight row if that is more */
	bool no_graphs;            /* never replay decode steps as a CUDA graph (see below) */
	bool act_q8;               /* decode matmuls of quantized weights with int8
				    * activations (ns_cuda_gemv_q8, `--act q8`); prefill and
				    * float weights keep f32 activations */
	int kv_k, kv_v;            /* KV cache element types, enum ns_kv_type (the CPU's -ctk /
				    * -ctv, forward.h): 0 = f32 (exact); f16 and q8_0 store what
				    * the CPU's cache stores (nscuda.h "typed KV cache": half to
				    * nearest even, ggml's Q8_0), attention reads them widened */
	ns_fwd_route_fn on_route;  /* MoE routing reports, as ns_fwd_opts */
	void *route_user;
	uint32_t n_rollback;       /* recurrent models (qwen35): tokens after a mark that can be
				    * cut back (ns_fwd_mark, as ns_fwd_opts.n_rollback): a VRAM
				    * copy of the states and a VRAM log of those tokens'
				    * recurrence inputs, counted in ns_cfwd_need.recurrent;
				    * 0: none. Other models: ignored */
};

struct ns_cfwd_need {
	uint64_t kv;        /* K and V of every attention layer for n_ctx positions (in the
			     * cache's types) */
	uint64_t recurrent; /* qwen35: recurrent layers' conv history and states, their scratch,
			     * the rollback copy and log (opts.n_rollback) */
	uint64_t scratch;   /* activations of n_batch tokens, attention workspace, logits, the
			     * M-RoPE positions of an image prompt's chunk (models with M-RoPE) */
	uint64_t vectors;   /* norms, biases, sinks, rope factors, expert bias tables */
	uint64_t staging;   /* the two staging slots */
	uint64_t weights;   /* the VRAM windows (all_resident: every matrix) */
	uint64_t total;     /* all of it, with the arena's 256-byte granules */
};

/* The VRAM a forward pass with these options takes, exactly (allocation granules included).
 * Reads no weight. Returns 0 or -EINVAL with a line in err. */
int ns_cfwd_vram_need(const struct ns_model *m, const struct ns_cfwd_opts *opts,
		      struct ns_cfwd_need *need, char *err, size_t errlen);

/* 0 when a CUDA device is usable, else -ENODEV with the reason in err (ns_cfwd_new checks
 * it first; a caller may check before setting up what the pass would use). */
int ns_cfwd_probe(char *err, size_t errlen);

/* Returns 0, or a negative errno with one line in err: -ENODEV without a usable device,
 * -EINVAL for a model we cannot run (the CPU pass's checks) or a bad window, -ENOMEM when the
 * budget is too small (with figures), the provider's error while filling VRAM. */
int ns_cfwd_new(const struct ns_model *m, struct ns_weights *host,
		const struct ns_cfwd_opts *opts, struct ns_fwd **out, char *err, size_t errlen);

/* Counters of a forward pass made by ns_cfwd_new (zeros for another one). */
struct ns_cfwd_stats {
	uint64_t vram_bytes;    /* weight bytes resident in VRAM */
	uint64_t vram_budget;   /* the arena */
	uint64_t vram_used;     /* allocated in the arena */
	uint64_t recurrent_bytes; /* VRAM of the recurrent layers' state and scratch (qwen35;
				  * ns_cfwd_need.recurrent counts the same) */
	uint64_t staged_blocks; /* blocks copied through the staging slots */
	uint64_t staged_bytes;
	uint64_t staged_pageable_bytes; /* of those, copied from pageable host memory (the
					 * driver bounces them: several times slower than DMA) */
	uint64_t q8_gemvs;      /* GEMV launches with int8 activations (opts.act_q8) */
	uint64_t logits_bytes;  /* logits copied to the caller's buffers */
	uint64_t logits_pageable_bytes; /* of those, into pageable memory (a decode step's
					 * copy then takes longer: nscompute page-locks its buffer) */
	bool graphs;            /* decode steps replay a CUDA graph */
};
void ns_cfwd_stats(const struct ns_fwd *f, struct ns_cfwd_stats *out);

#endif
