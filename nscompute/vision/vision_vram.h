/* vision_vram.h - the VRAM the CUDA vision tower (nscompute/cuda/ctower.h) takes for an image,
 * exactly: pure arithmetic over the mmproj's index and hparams, no GPU, no tower built. The one
 * sizing both sides use: ctower.c lays its arena out with these figures (ns_ctower_vram_need
 * returns them; test_ctower checks the encode takes every byte of it), nscompute-cuda takes
 * the largest image's arena out of --vram-budget, and nsctl counts the same figure in the VRAM
 * reserve (budgets.h tower_vram, `nsctl plan --backend cuda --mmproj F`: tower_vram). */
#ifndef NS_VISION_VRAM_H
#define NS_VISION_VRAM_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "vision_hparams.h"

#define NS_VISION_VRAM_GRAN 256ull            /* ns_vram's allocation granule */
#define NS_VISION_VRAM_STAGE (16ull << 20)    /* default staging buffer */
#define NS_VISION_VRAM_WS (64ull << 20)       /* default cap of the attention workspace */
#define NS_VISION_VRAM_ROWS_MAX 65535u        /* glue.cu's bias rows per launch */

/* The figures of one image, every allocation rounded to the granule, and the layout's choices
 * (what the arena is cut into). */
struct ns_vision_vram {
	uint64_t vectors;     /* biases, norms and the patch kernel (F32) */
	uint64_t activations; /* pixels, position rows, rotary table, x, h, qkv, ao, MLP hidden,
			       * outputs */
	uint64_t attn_ws;     /* the attention workspace of one block of queries */
	uint64_t staging;     /* the staging buffer and the float32 copy of a staged piece */
	uint64_t total;
	uint64_t queries;     /* queries per attention launch */
	uint64_t ws_bytes;    /* the workspace, exact */
	uint64_t stage_bytes; /* the staging buffer, exact */
	uint64_t deq_bytes;   /* the dequantized piece, exact (0: every matrix F32) */
};

/* An image of n_patches patches in grid_t frames (whole merge groups) of the tower in mmproj m
 * (hp its hparams, ns_vision_hparams_load), with a staging buffer of stage_bytes (0: 16 MiB,
 * or the largest matrix if smaller; at least the widest row) and an attention workspace under
 * attn_ws_max (0: 64 MiB; at least one query). 0, or -EINVAL (not whole merge groups, a
 * tensor missing) / -EOVERFLOW with one line in err. */
int ns_vision_vram_need(const struct ns_model *m, const struct ns_vision_hparams *hp,
			uint64_t n_patches, uint32_t grid_t, uint64_t stage_bytes,
			uint64_t attn_ws_max, struct ns_vision_vram *out, char *err, size_t errlen);

/* The most any image under lim (NULL: the processor's defaults) takes in a context of n_ctx
 * tokens: the largest need over every token count up to the largest image's
 * (ns_image_work_bytes' max_tokens; one frame), default staging and workspace, as
 * nscompute-cuda runs the tower. *max_tokens (may be NULL): that largest image's tokens. 0,
 * or -errno with one line in err. */
int ns_vision_vram_largest(const struct ns_model *m, const struct ns_vision_hparams *hp,
			   const struct ns_image_limits *lim, uint32_t n_ctx,
			   struct ns_vision_vram *out, uint64_t *max_tokens, char *err,
			   size_t errlen);

#endif
